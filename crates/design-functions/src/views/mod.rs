//! Map/reduce views: one index per design document signature (so design
//! documents with the same views share it), built incrementally from the
//! database's changes, kept in the store, and queried by key ranges in
//! CouchDB's collation. Built-in reducers (`_count`, `_sum`, `_stats`,
//! `_approx_count_distinct`) run here, in Rust.

mod reader;
pub(crate) mod reduce;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use collation::raw::Collation;
use md5::{Digest, Md5};
use serde_json::{Value, json};
use store::{ChangesQuery, Database, Index, IndexRow, IndexedDoc};

use crate::{DesignDoc, Engine, JsError};

pub use reader::{ViewHead, ViewPage, ViewReader};
pub use reduce::Reduced;

/// Why a view gave no answer.
#[derive(Debug)]
pub enum ViewError {
    /// CouchDB's 404 (`missing_named_view`...) or 400 with its reason.
    NotFound(String),
    BadRequest(String),
    Store(store::StoreError),
    Script(JsError),
}

impl From<store::StoreError> for ViewError {
    fn from(e: store::StoreError) -> ViewError {
        ViewError::Store(e)
    }
}

impl From<JsError> for ViewError {
    fn from(e: JsError) -> ViewError {
        ViewError::Script(e)
    }
}

/// The views of one design document, ready to build and query.
#[derive(Debug, Clone)]
pub struct ViewGroup {
    pub(crate) ddoc: DesignDoc,
    /// View names in order (their position is their number in the index).
    names: Vec<String>,
    pub(crate) reduces: Vec<Option<String>>,
    /// Each view's key order (`options.collation`), by view number.
    collations: Vec<Collation>,
    signature: String,
    /// `options.include_design`: design documents are mapped too.
    include_design: bool,
    /// `options.local_seq`: documents carry `_local_seq` into the map.
    local_seq: bool,
    /// Mango's JSON indexes (`language: "query"`), mapped in Rust, one
    /// per view; `None` for JavaScript views.
    mango: Option<Vec<MangoMap>>,
    /// Rows are kept by partition: each sort key starts with the
    /// document's partition's (see [`partition_sort_key`]).
    pub(crate) partitioned: bool,
}

/// The bytes a partition's rows start with in a partitioned index.
pub fn partition_sort_key(partition: &str) -> Vec<u8> {
    let mut out = Vec::new();
    collation::sort_key(&Value::String(partition.to_string()), &mut out);
    out
}

/// A Mango JSON index's map: the key is the array of the fields' values,
/// for documents that have them all and pass the partial filter.
#[derive(Debug, Clone)]
struct MangoMap {
    fields: Vec<Vec<String>>,
    partial: Option<mango::selector::Selector>,
}

/// The key a Mango JSON index on `fields` (Mango's dotted names), with
/// `partial` as its `partial_filter_selector`, keeps `doc` under; `None`
/// when the index leaves it out. The same rule that builds the index, for
/// answering from documents instead of its rows.
pub fn mango_index_key(fields: &[String], partial: Option<&Value>, doc: &Value) -> Option<Value> {
    let map = MangoMap {
        fields: fields.iter().map(|f| mango::fields::split(f)).collect(),
        partial: partial
            .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
            .and_then(|p| mango::selector::Selector::parse(p).ok()),
    };
    map.key(doc)
}

impl MangoMap {
    fn of(map: &Value) -> MangoMap {
        let fields = map
            .get("fields")
            .and_then(Value::as_object)
            .map(|f| f.keys().map(|k| mango::fields::split(k)).collect())
            .unwrap_or_default();
        let partial = map
            .get("partial_filter_selector")
            .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
            .and_then(|p| mango::selector::Selector::parse(p).ok());
        MangoMap { fields, partial }
    }

    /// The key a document is indexed under, if it is.
    fn key(&self, doc: &Value) -> Option<Value> {
        if let Some(partial) = &self.partial
            && !partial.matches(doc)
        {
            return None;
        }
        let mut key = Vec::with_capacity(self.fields.len());
        for path in &self.fields {
            let mut at = doc;
            for segment in path {
                at = match at {
                    Value::Object(map) => map.get(segment)?,
                    Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                    _ => return None,
                };
            }
            key.push(at.clone());
        }
        Some(Value::Array(key))
    }
}

impl ViewGroup {
    /// The views of a design document (its JSON).
    pub fn of(database: &Database, ddoc: &Value) -> Result<ViewGroup, ViewError> {
        let db = database.name();
        // A partitioned database's design documents are partitioned unless
        // they say otherwise: their rows are kept by partition.
        let partitioned = ddoc
            .pointer("/options/partitioned")
            .and_then(Value::as_bool)
            .unwrap_or(database.is_partitioned());
        let text = |k: &str| {
            ddoc.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let option = |k: &str| {
            ddoc.pointer(&format!("/options/{k}"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let Some(views) = ddoc.get("views").and_then(Value::as_object) else {
            return Err(ViewError::NotFound("missing_named_view".into()));
        };
        crate::check_language(ddoc)?;
        let query = ddoc.get("language").and_then(Value::as_str) == Some("query");
        let mut names: Vec<String> = views
            .iter()
            .filter(|(_, v)| {
                v.get("map")
                    .is_some_and(|m| if query { m.is_object() } else { m.is_string() })
            })
            .map(|(k, _)| k.clone())
            .collect();
        names.sort();
        let reduces = names
            .iter()
            .map(|n| {
                views[n]
                    .get("reduce")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        let collations: Vec<Collation> = names
            .iter()
            .map(|n| Collation::of_view(&views[n]))
            .collect();
        // What the rows depend on: the map functions, the library they may
        // require, the language and the options.
        let mut hasher = Md5::new();
        let mut basis = json!({
            "language": ddoc.get("language").cloned().unwrap_or(json!("javascript")),
            "maps": names.iter().map(|n| views[n]["map"].clone()).collect::<Vec<_>>(),
            "lib": views.get("lib").cloned().unwrap_or(Value::Null),
            "options": ddoc.get("options").cloned().unwrap_or(Value::Null),
        });
        if partitioned {
            basis["partitioned"] = Value::Bool(true);
        }
        if collations.contains(&Collation::Raw) {
            basis["raw"] = json!(
                collations
                    .iter()
                    .map(|c| *c == Collation::Raw)
                    .collect::<Vec<_>>()
            );
        }
        hasher.update(basis.to_string().as_bytes());
        let signature = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mango = query.then(|| {
            names
                .iter()
                .map(|n| MangoMap::of(&views[n]["map"]))
                .collect()
        });
        Ok(ViewGroup {
            ddoc: DesignDoc {
                db: db.to_string(),
                id: text("_id"),
                rev: text("_rev"),
                json: ejson::to_string(ddoc).into(),
            },
            names,
            reduces,
            collations,
            signature,
            include_design: option("include_design"),
            local_seq: option("local_seq"),
            mango,
            partitioned,
        })
    }

    /// The signature naming the index (as `_info` shows it).
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// A view's number in the index (its place among the names).
    pub fn view_number(&self, name: &str) -> Result<u32, ViewError> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u32)
            .ok_or_else(|| ViewError::NotFound("missing_named_view".into()))
    }

    /// A key's sort key in view `view`'s collation.
    pub(crate) fn key_bytes(&self, view: u32, key: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        self.collation(view).sort_key(key, &mut out);
        out
    }

    /// View `view`'s collation.
    pub(crate) fn collation(&self, view: u32) -> Collation {
        self.collations
            .get(view as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Whether its views are Mango's JSON indexes.
    pub(crate) fn is_mango(&self) -> bool {
        self.mango.is_some()
    }

    /// Whether its rows are kept by partition.
    pub fn is_partitioned(&self) -> bool {
        self.partitioned
    }

    /// Whether the group has a view of that name (with a map function).
    pub fn has_view(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The view's reduce function, if it has one.
    pub fn reduce_of(&self, name: &str) -> Option<&str> {
        let i = self.names.iter().position(|n| n == name)?;
        self.reduces[i].as_deref()
    }
}

/// Open indexes, and the lock that lets one update run per index at a time.
#[derive(Debug, Clone, Default)]
pub struct Views {
    open: Arc<Mutex<HashMap<(String, String), IndexSlot>>>,
}

/// An index once opened, behind the lock its updates take turns on; keyed
/// by (database uuid, signature).
type IndexSlot = Arc<tokio::sync::Mutex<Option<Index>>>;

/// Documents mapped per batch while an index catches up.
const BATCH: usize = 500;

impl Views {
    /// The group's index, brought up to the database's current sequence
    /// unless `update` is false.
    pub async fn index(
        &self,
        engine: &Engine,
        database: &Database,
        group: &ViewGroup,
        update: bool,
    ) -> Result<Index, ViewError> {
        let slot = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            open.entry((database.uuid().to_string(), group.signature.clone()))
                .or_default()
                .clone()
        };
        let mut guard = slot.lock().await;
        let index = match &*guard {
            Some(index) => index.clone(),
            None => {
                let index = database.open_index(&group.signature).await?;
                *guard = Some(index.clone());
                index
            }
        };
        if update && catch_up(engine, database, group, &index).await? {
            group.warm_reductions(engine, &index).await;
        }
        Ok(index)
    }
}

impl Views {
    /// `_view_cleanup`: deletes the database's index files no design
    /// document names any more (`keep` holds the signatures in use).
    pub async fn cleanup(&self, database: &Database, keep: &[String]) -> Result<(), ViewError> {
        for signature in database.index_signatures().await? {
            if keep.contains(&signature) {
                continue;
            }
            self.open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&(database.uuid().to_string(), signature.clone()));
            database.drop_index(&signature).await?;
        }
        Ok(())
    }
}

/// Maps the changes the index has not seen yet, after dropping the rows
/// of documents purged since; true if there were any.
///
/// A pipeline of three stages run together: while JavaScript maps one
/// page of changes, the next page is read and the rows of the previous
/// one are written (each stage waits on a different thread: the engine's,
/// the database's readers, the index's writer), so no stage waits on
/// another's I/O. Pages are written in order, each with the sequence it
/// reaches.
async fn catch_up(
    engine: &Engine,
    database: &Database,
    group: &ViewGroup,
    index: &Index,
) -> Result<bool, ViewError> {
    let mut changed = forget_purged(database, index).await?;
    let since = index.update_seq().await?;
    if since >= database.update_seq() {
        return Ok(changed);
    }
    let mut page = Some(read_page(database, group, since).await?);
    // The previous page's rows and the sequence they reach, to write.
    let mut mapped: Option<(Vec<IndexedDoc>, u64)> = None;
    while page.is_some() || mapped.is_some() {
        let current = page.take();
        let next_since = current
            .as_ref()
            .filter(|p| !p.rows.is_empty() && p.last_seq < database.update_seq())
            .map(|p| p.last_seq);
        let map = async {
            match &current {
                Some(p) => map_page(engine, group, p).await.map(Some),
                None => Ok(None),
            }
        };
        let read = async {
            match next_since {
                Some(since) => read_page(database, group, since).await.map(Some),
                None => Ok(None),
            }
        };
        let write = async {
            match mapped.take() {
                Some((docs, seq)) => index.apply(docs, seq).await,
                None => Ok(()),
            }
        };
        let (docs, next, written) = tokio::join!(map, read, write);
        written?;
        if let (Some(docs), Some(p)) = (docs?, &current) {
            changed = true;
            mapped = Some((docs, p.last_seq.max(since)));
        }
        page = next?;
    }
    Ok(changed)
}

/// One page of changes with the documents as CouchDB's indexer hands
/// them to the map.
async fn read_page(
    database: &Database,
    group: &ViewGroup,
    since: u64,
) -> Result<store::FeedPage, ViewError> {
    Ok(database
        .changes(ChangesQuery {
            since,
            limit: BATCH,
            include_docs: true,
            conflicts: true,
            deleted_conflicts: true,
            local_seq: group.local_seq,
            ..Default::default()
        })
        .await?)
}

/// The index rows of a page of changes: each document's, emitted by the
/// map functions (or Mango's), sorted as CouchDB sorts them.
async fn map_page(
    engine: &Engine,
    group: &ViewGroup,
    page: &store::FeedPage,
) -> Result<Vec<IndexedDoc>, ViewError> {
    let mut docs: Vec<IndexedDoc> = Vec::with_capacity(page.rows.len());
    let mut texts = Vec::new();
    let mut mapped_at = Vec::new();
    for row in &page.rows {
        docs.push(IndexedDoc {
            id: row.id.clone(),
            rows: Vec::new(),
        });
        // Design documents are not in views unless the options say so;
        // deleted documents leave them.
        if row.deleted || (row.id.starts_with("_design/") && !group.include_design) {
            continue;
        }
        if let Some(doc) = &row.doc {
            texts.push(doc.as_str().to_string());
            mapped_at.push(docs.len() - 1);
        }
    }
    if let Some(mango) = &group.mango {
        for (at, text) in mapped_at.iter().zip(&texts) {
            let Ok(doc) = ejson::from_stored(text) else {
                continue;
            };
            for (view, map) in mango.iter().enumerate() {
                if let Some(key) = map.key(&doc) {
                    let mut sort_key = Vec::new();
                    collation::sort_key(&key, &mut sort_key);
                    docs[*at].rows.push(IndexRow {
                        view: view as u32,
                        sort_key,
                        key: ejson::to_string(&key),
                        value: "null".into(),
                    });
                }
            }
        }
    } else if !texts.is_empty() {
        let emitted = engine.map(group.ddoc.clone(), &group.names, &texts).await?;
        for (at, per_view) in mapped_at.into_iter().zip(emitted) {
            let rows = &mut docs[at].rows;
            for (view, mut pairs) in per_view.into_iter().enumerate() {
                // CouchDB sorts a document's rows in Erlang's term order
                // before it adds them to the index, so rows whose keys
                // collate equal (`""` and `"\u0000"`, `1` and `1.0`)
                // come in that order, not in the order of `emit`.
                pairs.sort_by(|(ka, va), (kb, vb)| {
                    collation::raw::compare(ka, kb).then_with(|| collation::raw::compare(va, vb))
                });
                for (key, value) in pairs {
                    let sort_key = group.key_bytes(view as u32, &key);
                    rows.push(IndexRow {
                        view: view as u32,
                        sort_key,
                        key: ejson::to_string(&key),
                        value: ejson::to_string(&value),
                    });
                }
            }
        }
    }
    if group.partitioned {
        for doc in &mut docs {
            let partition = doc.id.split_once(':').map_or("", |(p, _)| p);
            let prefix = partition_sort_key(partition);
            for row in &mut doc.rows {
                let mut key = prefix.clone();
                key.append(&mut row.sort_key);
                row.sort_key = key;
            }
        }
    }
    Ok(docs)
}

/// Drops the rows of documents purged since the index last looked (a
/// purged document leaves the changes feed; one that keeps revisions moves
/// to its end and is mapped again). An index further behind than the purge
/// infos kept starts over, as CouchDB resets it. True if anything changed.
async fn forget_purged(database: &Database, index: &Index) -> Result<bool, ViewError> {
    let seen = index.purge_seq().await?;
    let purged = database.purged_since(seen).await?;
    if purged.purge_seq <= seen {
        return Ok(false);
    }
    if purged.complete {
        index.forget(purged.gone, purged.purge_seq).await?;
    } else {
        index.reset(purged.purge_seq).await?;
    }
    Ok(true)
}

/// A view query's parameters, as CouchDB reads them.
#[derive(Debug, Clone, Default)]
pub struct ViewQuery {
    pub key: Option<Value>,
    pub keys: Option<Vec<Value>>,
    pub start_key: Option<Value>,
    pub start_docid: Option<String>,
    pub end_key: Option<Value>,
    pub end_docid: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub limit: Option<usize>,
    pub skip: usize,
    /// `reduce` (default: true when the view has a reduce function).
    pub reduce: Option<bool>,
    pub group: bool,
    pub group_level: Option<usize>,
    /// Each row's document asked for (only a map's rows have one).
    pub include_docs: bool,
    /// The partition queried (`/{db}/_partition/{p}/_design/...`).
    pub partition: Option<String>,
}
