//! One search index on disk: a tantivy index in its own folder, whose
//! commits carry the database sequence and purge sequence they reach and
//! the registry of field kinds. A commit is atomic, so after a crash the
//! index opens at its last commit and is fed again from that sequence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use design_functions::search::{FieldKind, IndexedField};
use serde_json::{Value, json};
use tantivy::schema::OwnedValue;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::definition::IndexDefinition;
use crate::schema::{self, Fields, Kind, Registry, tokenizer_name};
use crate::{SearchError, analyzer};

/// The memory the writer may buffer before it writes a segment.
const WRITER_BUDGET: usize = 48 << 20;
/// The share of a segment's documents deleted or replaced that gets it
/// rewritten without them.
const DELETED_BEFORE_MERGE: f32 = 0.3;

/// An open search index, as one reader may search it. Cheap to clone;
/// writes are serialized by the caller (one update per index at a time).
#[derive(Clone)]
pub struct SearchIndex {
    inner: Arc<Inner>,
    /// The principals of the database handle it was reached through: in a
    /// per-document access database, only documents naming one of them are
    /// searched (totals and counts included). `None`: everything. Bound
    /// where the handle is given (`Searches::index`), so that no way to
    /// search can forget the database's read gate.
    readers: Option<Arc<[String]>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("signature", &self.inner.def.signature)
            .finish()
    }
}

struct Inner {
    def: IndexDefinition,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    db_uuid: String,
    committed: Mutex<Committed>,
    dir: Option<PathBuf>,
}

/// What the last commit reached.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    pub update_seq: u64,
    pub purge_seq: u64,
    pub registry: Registry,
}

/// A document's entry, as an update brings it.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Not in the index (deleted, a design document, or its function
    /// named no field or threw).
    Remove(String),
    Put {
        id: String,
        /// Its `_access` principals, in a per-document access database.
        access: Vec<String>,
        fields: Vec<IndexedField>,
    },
}

impl SearchIndex {
    /// Opens the index in `dir` (in memory when `None`), creating it when
    /// new. An index built for an earlier database of the same name, or one
    /// that cannot be read, starts over.
    pub fn open(
        dir: Option<&Path>,
        def: &IndexDefinition,
        db_uuid: &str,
    ) -> Result<SearchIndex, SearchError> {
        let analyzers = def.analyzers();
        let index = match dir {
            None => Index::create_in_ram(Fields::schema(&analyzers).0),
            Some(dir) => open_dir(dir, &analyzers, db_uuid)?,
        };
        for name in &analyzers {
            let analyzer = analyzer(name).map_err(|e| SearchError::BadRequest(e.to_string()))?;
            index.tokenizers().register(&tokenizer_name(name), analyzer);
        }
        let fields = Fields::of(&index.schema(), &analyzers)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(engine)?;
        let committed = committed_of(&payload(&index));
        Ok(SearchIndex {
            inner: Arc::new(Inner {
                def: def.clone(),
                index,
                reader,
                fields,
                db_uuid: db_uuid.to_string(),
                committed: Mutex::new(committed),
                dir: dir.map(Path::to_path_buf),
            }),
            readers: None,
        })
    }

    /// The same index, searched as `readers` may read it.
    pub(crate) fn scoped(&self, readers: Option<&[String]>) -> SearchIndex {
        SearchIndex {
            inner: self.inner.clone(),
            readers: readers.map(Arc::from),
        }
    }

    pub fn definition(&self) -> &IndexDefinition {
        &self.inner.def
    }

    pub(crate) fn fields(&self) -> &Fields {
        &self.inner.fields
    }

    pub(crate) fn reader(&self) -> &IndexReader {
        &self.inner.reader
    }

    /// What the last commit reached.
    pub fn committed(&self) -> Committed {
        self.inner
            .committed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The access terms of this handle's readers (`None`: everyone's
    /// documents are searched): every search and count of a scoped handle
    /// is limited to the documents holding one.
    pub(crate) fn access_terms(&self) -> Option<Vec<Term>> {
        let field = self.inner.fields.access;
        self.readers.as_deref().map(|readers| {
            readers
                .iter()
                .map(|r| Term::from_field_text(field, r))
                .collect()
        })
    }

    /// The documents in the index now (those the readers may read, for a
    /// scoped handle).
    pub fn num_docs(&self) -> u64 {
        let searcher = self.inner.reader.searcher();
        match self.access_terms() {
            None => searcher.num_docs(),
            Some(terms) => searcher
                .search(
                    &tantivy::query::TermSetQuery::new(terms),
                    &tantivy::collector::Count,
                )
                .map_or(0, |n| n as u64),
        }
    }

    /// Documents deleted or replaced whose space a merge has not taken back
    /// yet (none for a scoped handle: they are anyone's writes).
    pub fn num_deleted_docs(&self) -> u64 {
        if self.readers.is_some() {
            return 0;
        }
        self.inner
            .reader
            .searcher()
            .segment_readers()
            .iter()
            .map(|segment| u64::from(segment.num_deleted_docs()))
            .sum()
    }

    /// The bytes of its files.
    pub fn disk_size(&self) -> u64 {
        let Some(dir) = &self.inner.dir else {
            return 0;
        };
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    /// A writer for one update (blocking: run it off the async workers).
    pub fn writer(&self) -> Result<Writer, SearchError> {
        let writer = self
            .inner
            .index
            .writer_with_num_threads(1, WRITER_BUDGET)
            .map_err(engine)?;
        // Segments are merged as they pile up, and one whose documents are
        // mostly replaced or deleted is rewritten: the index compacts
        // itself in the background of its updates.
        let mut policy = tantivy::indexer::LogMergePolicy::default();
        policy.set_del_docs_ratio_before_merge(DELETED_BEFORE_MERGE);
        writer.set_merge_policy(Box::new(policy));
        Ok(Writer {
            index: self.clone(),
            writer: Some(writer),
            registry: self.committed().registry,
        })
    }
}

/// An update in progress: entries, then commits with the sequences they
/// reach. Dropped without a commit, nothing of it is kept.
pub struct Writer {
    index: SearchIndex,
    writer: Option<IndexWriter>,
    registry: Registry,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("index", &self.index)
            .finish()
    }
}

impl Writer {
    fn writer(&mut self) -> Result<&mut IndexWriter, SearchError> {
        self.writer
            .as_mut()
            .ok_or_else(|| SearchError::Engine("the index writer is gone".into()))
    }

    /// Replaces a document's entry.
    pub fn put(&mut self, entry: Entry) -> Result<(), SearchError> {
        self.write(entry, true)
    }

    /// A document's entry, for a document the index cannot hold yet (a
    /// build from an empty index meets each document once before the
    /// sequence it started at): nothing to replace, and no delete for the
    /// engine to apply to every segment at each commit.
    pub fn add(&mut self, entry: Entry) -> Result<(), SearchError> {
        self.write(entry, false)
    }

    fn write(&mut self, entry: Entry, replaces: bool) -> Result<(), SearchError> {
        let fields = self.index.inner.fields.clone();
        let (id, doc) = match entry {
            Entry::Remove(id) => (id, None),
            Entry::Put {
                id,
                access,
                fields: indexed,
            } => {
                let doc = self.document(&fields, &id, &access, &indexed)?;
                (id, doc)
            }
        };
        let writer = self.writer()?;
        if replaces {
            writer.delete_term(Term::from_field_text(fields.id, &id));
        }
        if let Some(doc) = doc {
            writer.add_document(doc).map_err(engine)?;
        }
        Ok(())
    }

    /// Forgets every document (an index further behind than the purges
    /// remembered starts over).
    pub fn clear(&mut self) -> Result<(), SearchError> {
        self.registry = Registry::default();
        self.writer()?.delete_all_documents().map_err(engine)?;
        Ok(())
    }

    /// Makes what was put durable, as reaching `update_seq` and
    /// `purge_seq`, and visible to searches.
    pub fn commit(&mut self, update_seq: u64, purge_seq: u64) -> Result<(), SearchError> {
        let payload = json!({
            "db_uuid": self.index.inner.db_uuid,
            "update_seq": update_seq,
            "purge_seq": purge_seq,
            "fields": self.registry.to_json(),
        })
        .to_string();
        let writer = self.writer()?;
        let mut prepared = writer.prepare_commit().map_err(engine)?;
        prepared.set_payload(&payload);
        prepared.commit().map_err(engine)?;
        self.index.inner.reader.reload().map_err(engine)?;
        *self
            .index
            .inner
            .committed
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Committed {
            update_seq,
            purge_seq,
            registry: self.registry.clone(),
        };
        Ok(())
    }

    /// Lets the merges the commits started finish, then closes.
    pub fn finish(mut self) -> Result<(), SearchError> {
        if let Some(writer) = self.writer.take() {
            writer.wait_merging_threads().map_err(engine)?;
        }
        Ok(())
    }

    /// The tantivy document of an entry; `None` when it has no field.
    fn document(
        &mut self,
        fields: &Fields,
        id: &str,
        access: &[String],
        indexed: &[IndexedField],
    ) -> Result<Option<TantivyDocument>, SearchError> {
        if indexed.is_empty() {
            return Ok(None);
        }
        let def = &self.index.inner.def;
        let mut texts: BTreeMap<&str, BTreeMap<String, Vec<OwnedValue>>> = BTreeMap::new();
        let mut strings: BTreeMap<String, Vec<OwnedValue>> = BTreeMap::new();
        let mut doubles: BTreeMap<String, Vec<OwnedValue>> = BTreeMap::new();
        let mut stored: Vec<Value> = Vec::new();
        for field in indexed {
            let name = field.name.as_str();
            let key = schema::path(name);
            let text = field.value.as_str();
            let number = field.value.as_f64().filter(|n| n.is_finite());
            let kind = match field.kind {
                FieldKind::Text => Kind::Text,
                FieldKind::String => Kind::String,
                FieldKind::Double => Kind::Double,
                FieldKind::Stored => Kind::Stored,
                FieldKind::Auto if number.is_some() => Kind::Double,
                FieldKind::Auto => Kind::Text,
            };
            if field.kind == FieldKind::Auto {
                // Clouseau types by value and never refuses a second type.
                if self.registry.get(name).is_none() {
                    self.registry.claim(name, kind)?;
                }
            } else {
                self.registry.claim(name, kind)?;
            }
            if field.store || kind == Kind::Stored {
                stored.push(json!([name, field.value]));
            }
            if !field.searchable && field.kind == FieldKind::Auto {
                if let (Some(text), true) = (text, field.facet) {
                    strings.entry(key.clone()).or_default().push(text.into());
                }
                continue;
            }
            match (kind, text, number) {
                (Kind::Text, Some(text), _) => {
                    texts
                        .entry(def.analyzer_of(name))
                        .or_default()
                        .entry(key.clone())
                        .or_default()
                        .push(text.into());
                    if field.kind == FieldKind::Auto {
                        strings.entry(key.clone()).or_default().push(text.into());
                    }
                }
                (Kind::String, Some(text), _) => {
                    strings.entry(key.clone()).or_default().push(text.into());
                }
                (Kind::Double, _, Some(number)) => {
                    doubles
                        .entry(key.clone())
                        .or_default()
                        .push(OwnedValue::F64(number));
                }
                _ => {}
            }
        }
        let mut doc = TantivyDocument::new();
        doc.add_text(fields.id, id);
        if def.partitioned
            && let Some((partition, _)) = id.split_once(':')
        {
            doc.add_text(fields.partition, partition);
        }
        for principal in access {
            doc.add_text(fields.access, principal);
        }
        for (analyzer, values) in texts {
            if let Some(field) = fields.text(analyzer) {
                doc.add_object(field, object(values));
            }
        }
        if !strings.is_empty() {
            doc.add_object(fields.strings, object(strings));
        }
        if !doubles.is_empty() {
            doc.add_object(fields.doubles, object(doubles));
        }
        if !stored.is_empty() {
            doc.add_bytes(fields.stored, Value::Array(stored).to_string().as_bytes());
        }
        Ok(Some(doc))
    }
}

/// JSON object values: one value as itself, several as an array.
fn object(values: BTreeMap<String, Vec<OwnedValue>>) -> BTreeMap<String, OwnedValue> {
    values
        .into_iter()
        .map(|(name, mut list)| {
            let value = if list.len() == 1 {
                list.remove(0)
            } else {
                OwnedValue::Array(list)
            };
            (name, value)
        })
        .collect()
}

fn open_dir(dir: &Path, analyzers: &[String], db_uuid: &str) -> Result<Index, SearchError> {
    if dir.join("meta.json").exists() {
        match Index::open_in_dir(dir) {
            Ok(index)
                if payload(&index)["db_uuid"]
                    .as_str()
                    .is_none_or(|u| u == db_uuid) =>
            {
                return Ok(index);
            }
            Ok(_) => {
                tracing::info!(dir = %dir.display(), "a search index of an earlier database starts over")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "an unreadable search index starts over")
            }
        }
        std::fs::remove_dir_all(dir).map_err(io)?;
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    Index::create_in_dir(dir, Fields::schema(analyzers).0).map_err(engine)
}

/// The last commit's payload (`null` before the first).
fn payload(index: &Index) -> Value {
    index
        .load_metas()
        .ok()
        .and_then(|metas| metas.payload)
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

fn committed_of(payload: &Value) -> Committed {
    Committed {
        update_seq: payload["update_seq"].as_u64().unwrap_or(0),
        purge_seq: payload["purge_seq"].as_u64().unwrap_or(0),
        registry: Registry::from_json(payload.get("fields")),
    }
}

pub(crate) fn engine(e: tantivy::TantivyError) -> SearchError {
    SearchError::Engine(e.to_string())
}

fn io(e: std::io::Error) -> SearchError {
    SearchError::Engine(format!("search index folder: {e}"))
}
