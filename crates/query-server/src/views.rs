//! Map/reduce views: one index per design document signature (so design
//! documents with the same views share it), built incrementally from the
//! database's changes, kept in the store, and queried by key ranges in
//! CouchDB's collation. Built-in reducers (`_count`, `_sum`, `_stats`,
//! `_approx_count_distinct`) run here, in Rust.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};
use store::{ChangesQuery, Database, Index, IndexEntry, IndexRange, IndexRow, IndexedDoc};

use crate::{DesignDoc, Engine, JsError};

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
    ddoc: DesignDoc,
    /// View names in order (their position is their number in the index).
    names: Vec<String>,
    reduces: Vec<Option<String>>,
    signature: String,
}

impl ViewGroup {
    /// The views of a design document (its JSON).
    pub fn of(db: &str, ddoc: &Value) -> Result<ViewGroup, ViewError> {
        let text = |k: &str| {
            ddoc.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let Some(views) = ddoc.get("views").and_then(Value::as_object) else {
            return Err(ViewError::NotFound("missing_named_view".into()));
        };
        let mut names: Vec<String> = views
            .iter()
            .filter(|(_, v)| v.get("map").is_some_and(Value::is_string))
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
        // What the rows depend on: the map functions, the library they may
        // require, the language and the options.
        let mut hasher = Md5::new();
        let basis = json!({
            "language": ddoc.get("language").cloned().unwrap_or(json!("javascript")),
            "maps": names.iter().map(|n| views[n]["map"].clone()).collect::<Vec<_>>(),
            "lib": views.get("lib").cloned().unwrap_or(Value::Null),
            "options": ddoc.get("options").cloned().unwrap_or(Value::Null),
        });
        hasher.update(basis.to_string().as_bytes());
        let signature = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(ViewGroup {
            ddoc: DesignDoc {
                db: db.to_string(),
                id: text("_id"),
                rev: text("_rev"),
                json: ddoc.to_string().into(),
            },
            names,
            reduces,
            signature,
        })
    }

    /// The signature naming the index (as `_info` shows it).
    pub fn signature(&self) -> &str {
        &self.signature
    }

    fn view_number(&self, name: &str) -> Result<u32, ViewError> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u32)
            .ok_or_else(|| ViewError::NotFound("missing_named_view".into()))
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
        if update {
            catch_up(engine, database, group, &index).await?;
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

/// Maps the changes the index has not seen yet.
async fn catch_up(
    engine: &Engine,
    database: &Database,
    group: &ViewGroup,
    index: &Index,
) -> Result<(), ViewError> {
    loop {
        let since = index.update_seq().await?;
        if since >= database.update_seq() {
            return Ok(());
        }
        let page = database
            .changes(ChangesQuery {
                since,
                limit: BATCH,
                include_docs: true,
                ..Default::default()
            })
            .await?;
        if page.rows.is_empty() {
            index.apply(Vec::new(), page.last_seq.max(since)).await?;
            return Ok(());
        }
        let mut docs: Vec<IndexedDoc> = Vec::with_capacity(page.rows.len());
        let mut texts = Vec::new();
        let mut mapped_at = Vec::new();
        for row in &page.rows {
            docs.push(IndexedDoc {
                id: row.id.clone(),
                rows: Vec::new(),
            });
            // Design documents are not in views; deleted ones leave them.
            if row.deleted || row.id.starts_with("_design/") {
                continue;
            }
            if let Some(doc) = &row.doc {
                texts.push(doc.as_str().to_string());
                mapped_at.push(docs.len() - 1);
            }
        }
        if !texts.is_empty() {
            let emitted = engine.map(group.ddoc.clone(), &group.names, &texts).await?;
            for (at, per_view) in mapped_at.into_iter().zip(emitted) {
                let rows = &mut docs[at].rows;
                for (view, pairs) in per_view.into_iter().enumerate() {
                    for (key, value) in pairs {
                        let mut sort_key = Vec::new();
                        query::collation::sort_key(&key, &mut sort_key);
                        rows.push(IndexRow {
                            view: view as u32,
                            sort_key,
                            key: key.to_string(),
                            value: value.to_string(),
                        });
                    }
                }
            }
        }
        index.apply(docs, page.last_seq).await?;
    }
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
}

/// A view's answer, before it is written out.
#[derive(Debug)]
pub enum ViewRows {
    /// Map rows: `total_rows`, `offset` and the rows.
    Map {
        total_rows: u64,
        offset: u64,
        rows: Vec<IndexEntry>,
    },
    /// Reduced rows: `(key, value)`; the key is `null` without grouping.
    Reduced(Vec<(Value, Value)>),
}

impl ViewGroup {
    /// Answers a query from an up-to-date index.
    pub async fn query(
        &self,
        engine: &Engine,
        index: &Index,
        name: &str,
        q: &ViewQuery,
    ) -> Result<ViewRows, ViewError> {
        let view = self.view_number(name)?;
        let reducer = self.reduce_of(name);
        let reduce = match (q.reduce, reducer) {
            (Some(true), None) => {
                return Err(ViewError::BadRequest(
                    "Reduce is invalid for map-only views.".into(),
                ));
            }
            (Some(false), _) | (None, None) => false,
            (_, Some(_)) => true,
        };
        if !reduce && (q.group || q.group_level.is_some()) && reducer.is_none() {
            return Err(ViewError::BadRequest(
                "Invalid use of grouping on a map view.".into(),
            ));
        }
        // A map query reads only what it answers; a reduction reads its range.
        let wanted = if reduce {
            usize::MAX
        } else {
            q.skip.saturating_add(q.limit.unwrap_or(usize::MAX))
        };
        let ranges: Vec<IndexRange> = match (&q.keys, &q.key) {
            (Some(keys), _) => keys.iter().map(|k| exact(view, k, q, wanted)).collect(),
            (None, Some(key)) => vec![exact(view, key, q, wanted)],
            (None, None) => vec![IndexRange {
                view,
                start: q
                    .start_key
                    .as_ref()
                    .map(|k| (key_bytes(k), q.start_docid.clone())),
                end: q
                    .end_key
                    .as_ref()
                    .map(|k| (key_bytes(k), q.end_docid.clone())),
                inclusive_end: q.inclusive_end,
                descending: q.descending,
                skip: 0,
                limit: wanted,
            }],
        };
        // CouchDB's offset: the rows before the first range (the first key's).
        let before = match ranges.first() {
            Some(first) if !reduce => index.rows_before(first).await?,
            _ => 0,
        };
        let mut rows = Vec::new();
        for range in ranges {
            rows.extend(index.range(range).await?);
        }
        if reduce {
            let reducer = reducer.unwrap_or_default();
            let groups = group_rows(&rows, q);
            let mut out = Vec::with_capacity(groups.len());
            for (key, members) in groups {
                let values: Vec<Value> = members
                    .iter()
                    .map(|r| serde_json::from_str(&r.value).unwrap_or(Value::Null))
                    .collect();
                let reduced = if reducer.trim_start().starts_with('_') {
                    builtin_reduce(reducer, &values, &members)?
                } else {
                    self.js_reduce(engine, reducer, &members, values).await?
                };
                out.push((key, reduced));
            }
            let out: Vec<(Value, Value)> = out
                .into_iter()
                .skip(q.skip)
                .take(q.limit.unwrap_or(usize::MAX))
                .collect();
            return Ok(ViewRows::Reduced(out));
        }
        let total_rows = index.count(view).await?;
        let offset = (before + q.skip as u64).min(total_rows);
        let rows = rows
            .into_iter()
            .skip(q.skip)
            .take(q.limit.unwrap_or(usize::MAX))
            .collect();
        Ok(ViewRows::Map {
            total_rows,
            offset,
            rows,
        })
    }
}

/// Rows reduced at once by a JavaScript reduce function; more are reduced
/// in such chunks, then re-reduced.
const REDUCE_CHUNK: usize = 1000;

/// Reduce output larger than this must shrink (CouchDB's
/// `reduce_limit_threshold`).
const REDUCE_LIMIT_THRESHOLD: usize = 5000;

impl ViewGroup {
    /// A JavaScript reduce function over one group's rows: chunks reduced,
    /// then their results re-reduced until one is left.
    async fn js_reduce(
        &self,
        engine: &Engine,
        source: &str,
        rows: &[&IndexEntry],
        values: Vec<Value>,
    ) -> Result<Value, ViewError> {
        let mut partials = Vec::new();
        for (chunk, chunk_values) in rows.chunks(REDUCE_CHUNK).zip(values.chunks(REDUCE_CHUNK)) {
            let keys: Vec<Value> = chunk
                .iter()
                .map(|r| {
                    let key: Value = serde_json::from_str(&r.key).unwrap_or(Value::Null);
                    json!([key, r.id])
                })
                .collect();
            let input = Value::Array(chunk_values.to_vec()).to_string();
            let input_len = input.len();
            let out = engine
                .reduce(
                    self.ddoc.clone(),
                    source,
                    Some(Value::Array(keys).to_string()),
                    input,
                )
                .await?;
            check_shrinks(&out, input_len)?;
            partials.push(out);
        }
        while partials.len() > 1 {
            let mut next = Vec::new();
            for chunk in partials.chunks(REDUCE_CHUNK) {
                let input = Value::Array(chunk.to_vec()).to_string();
                let input_len = input.len();
                let out = engine
                    .reduce(self.ddoc.clone(), source, None, input)
                    .await?;
                check_shrinks(&out, input_len)?;
                next.push(out);
            }
            partials = next;
        }
        match partials.pop() {
            Some(value) => Ok(value),
            // No rows: the function re-reduces nothing, as CouchDB asks it.
            None => Ok(engine
                .reduce(self.ddoc.clone(), source, None, "[]".into())
                .await?),
        }
    }
}

/// CouchDB's `reduce_limit`: a reduce function whose output does not
/// shrink is an error, not an index the size of its input.
fn check_shrinks(out: &Value, input_len: usize) -> Result<(), ViewError> {
    let out_len = out.to_string().len();
    if out_len > REDUCE_LIMIT_THRESHOLD && out_len * 2 > input_len {
        return Err(ViewError::Script(JsError::Runtime {
            error: "reduce_overflow_error".into(),
            reason: format!(
                "Reduce output must shrink more rapidly: input size: {input_len} output size: {out_len}"
            ),
        }));
    }
    Ok(())
}

fn key_bytes(key: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    query::collation::sort_key(key, &mut out);
    out
}

fn exact(view: u32, key: &Value, q: &ViewQuery, limit: usize) -> IndexRange {
    let bytes = key_bytes(key);
    IndexRange {
        view,
        start: Some((bytes.clone(), None)),
        end: Some((bytes, None)),
        inclusive_end: true,
        descending: q.descending,
        skip: 0,
        limit,
    }
}

/// Rows grouped as asked: all together (`null` key), by whole key
/// (`group`), or by the first `group_level` elements of array keys.
fn group_rows<'a>(rows: &'a [IndexEntry], q: &ViewQuery) -> Vec<(Value, Vec<&'a IndexEntry>)> {
    let level = match (q.group, q.group_level) {
        (_, Some(level)) => Some(level),
        (true, None) => Some(usize::MAX),
        (false, None) => None,
    };
    let Some(level) = level else {
        return vec![(Value::Null, rows.iter().collect())];
    };
    let mut groups: Vec<(Value, Vec<u8>, Vec<&IndexEntry>)> = Vec::new();
    for row in rows {
        let key: Value = serde_json::from_str(&row.key).unwrap_or(Value::Null);
        let grouped = match key {
            Value::Array(items) if level != usize::MAX => {
                Value::Array(items.into_iter().take(level).collect())
            }
            other => other,
        };
        let bytes = key_bytes(&grouped);
        match groups.last_mut() {
            Some((_, last, members)) if *last == bytes => members.push(row),
            _ => groups.push((grouped, bytes, vec![row])),
        }
    }
    groups.into_iter().map(|(k, _, m)| (k, m)).collect()
}

/// CouchDB's built-in reducers; another reduce function is not run yet.
fn builtin_reduce(
    reducer: &str,
    values: &[Value],
    rows: &[&IndexEntry],
) -> Result<Value, ViewError> {
    match reducer.trim() {
        "_count" => Ok(json!(values.len())),
        "_sum" => sum(values).ok_or_else(|| {
            ViewError::Script(JsError::Runtime {
                error: "builtin_reduce_error".into(),
                reason: "The _sum function requires that map values be numbers, arrays of numbers, or objects.".into(),
            })
        }),
        "_stats" => stats(values),
        "_approx_count_distinct" => {
            let mut keys: Vec<&[u8]> = rows.iter().map(|r| r.sort_key.as_slice()).collect();
            keys.sort();
            keys.dedup();
            Ok(json!(keys.len()))
        }
        other => Err(ViewError::Script(JsError::Runtime {
            error: "unknown_builtin_reduce".into(),
            reason: format!("Builtin reduce function invalid: {other}"),
        })),
    }
}

fn sum(values: &[Value]) -> Option<Value> {
    let mut total = Value::from(0);
    for v in values {
        total = add(&total, v)?;
    }
    Some(total)
}

/// `_sum` of two values: numbers add, arrays add element by element
/// (the longer one's tail kept), objects member by member.
fn add(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Some(number(
            x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0),
            x.is_i64() && y.is_i64(),
        )),
        (Value::Array(x), Value::Array(y)) => {
            let n = x.len().max(y.len());
            (0..n)
                .map(|i| match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => add(p, q),
                    (Some(p), None) | (None, Some(p)) => Some(p.clone()),
                    (None, None) => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Value::Array)
        }
        (Value::Number(_), Value::Array(y)) if is_zero(a) => Some(Value::Array(y.clone())),
        (Value::Array(x), Value::Number(_)) => {
            let mut x = x.clone();
            if let Some(first) = x.first_mut() {
                *first = add(first, b)?;
            }
            Some(Value::Array(x))
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut out: Map<String, Value> = x.clone();
            for (k, v) in y {
                let merged = match out.get(k) {
                    Some(existing) => add(existing, v)?,
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Some(Value::Object(out))
        }
        (Value::Number(_), Value::Object(y)) if is_zero(a) => Some(Value::Object(y.clone())),
        _ => None,
    }
}

fn is_zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}

fn number(f: f64, integral: bool) -> Value {
    if integral && f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

fn stats(values: &[Value]) -> Result<Value, ViewError> {
    let mut numbers = Vec::with_capacity(values.len());
    for v in values {
        match v {
            Value::Number(n) => numbers.push(n.as_f64().unwrap_or(0.0)),
            other => {
                return Err(ViewError::Script(JsError::Runtime {
                    error: "builtin_reduce_error".into(),
                    reason: format!(
                        "The _stats function requires that map values be numbers or arrays of numbers, not '{other}'"
                    ),
                }));
            }
        }
    }
    let sum: f64 = numbers.iter().sum();
    let integral = values.iter().all(|v| v.is_i64());
    let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
    let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sumsqr: f64 = numbers.iter().map(|n| n * n).sum();
    Ok(json!({
        "sum": number(sum, integral),
        "count": numbers.len(),
        "min": if numbers.is_empty() { json!(0) } else { number(min, integral) },
        "max": if numbers.is_empty() { json!(0) } else { number(max, integral) },
        "sumsqr": number(sumsqr, integral),
    }))
}
