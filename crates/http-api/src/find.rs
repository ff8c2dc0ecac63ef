//! Mango over HTTP: `POST /{db}/_find` and `_explain`, and the indexes
//! (`GET|POST /{db}/_index`, `DELETE /{db}/_index/{ddoc}/json/{name}`,
//! `POST /{db}/_index/_bulk_delete`). The plan comes from `mango`;
//! JSON indexes are design-document views built by `design_functions::views`;
//! full-text (`nouveau`) ones are searched by `nouveau`.

mod nouveau;
mod own_docs;

use std::ops::Bound as Edge;
use std::time::Instant;

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use design_functions::views::ViewGroup;
use mango::MangoError;
use mango::bookmark::Bookmark;
use mango::find::FindRequest;
use mango::index_def::{IndexDef, all_docs_description, parse_new_index};
use mango::nouveau::NouveauIndex;
use mango::plan::{Bound, Chosen, Plan, plan};
use serde_json::{Map, Value, json};
use store::{AllDocsQuery, Database, DocInput, GetOptions, IndexRange, StoreError};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_body, require_json_content_type};
use crate::base::response::json_response;
use crate::base::streamed::{BodyWriter, Stop};

/// Index rows or documents read at once.
const PAGE: usize = 200;

/// CouchDB's `mango.index_scan_warning_threshold`.
const SCAN_WARNING_RATIO: u64 = 10;

const NO_INDEX_WARNING: &str = "No matching index found, create an index to optimize query time.";
const SCAN_WARNING: &str = "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.";

/// Mango's error names, as the static words answers carry.
fn mango_error(e: MangoError) -> ApiError {
    const KNOWN: &[&str] = &[
        "bad_request",
        "invalid_key",
        "missing_required_key",
        "invalid_selector_json",
        "invalid_selector",
        "invalid_operator",
        "not_supported",
        "bad_arg",
        "invalid_non_neg_integer",
        "invalid_pos_integer",
        "invalid_boolean",
        "unknown_error",
        "invalid_fields",
        "invalid_field",
        "invalid_field_name",
        "invalid_index_name",
        "invalid_sort_json",
        "invalid_sort_field",
        "unsupported_mixed_sort",
        "invalid_bookmark",
        "no_usable_index",
        "invalid_index",
        "invalid_string",
        "invalid_empty_string",
        "invalid_partition",
        "required index service unavailable",
        "invalid_bulk_docs",
        "invalid_ddoc_lang",
        "multiple_text_selector",
        "multiple_nouveau_indexes",
        "text_sort_error",
        "invalid_index_fields_definition",
    ];
    let error = KNOWN
        .iter()
        .find(|k| **k == e.error)
        .copied()
        .unwrap_or("bad_request");
    ApiError::Status {
        status: StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
        error,
        reason: e.reason,
    }
}

/// A Mango request body: JSON (415 otherwise), an object (400 otherwise).
async fn body_of(state: &AppState, request: Request) -> Result<Value, ApiError> {
    require_json_content_type(request.headers())?;
    match read_json_body(request.into_body(), &state.config).await? {
        Some(value @ Value::Object(_)) => Ok(value),
        None => Err(ApiError::bad_request("Missing request body")),
        Some(_) => Err(ApiError::bad_request("Request body must be a JSON object")),
    }
}

/// CouchDB's words for a sort no index in scope can serve.
fn scope_error(e: MangoError, partitioned: bool, scoped: bool) -> ApiError {
    if e.error != "no_usable_index" || !partitioned {
        return mango_error(e);
    }
    let kind = if scoped { "partitioned" } else { "global" };
    mango_error(MangoError::bad(
        "no_usable_index",
        format!("No {kind} index exists for this sort, try indexing by the sort fields."),
    ))
}

/// A partition query over `_all_docs` reads the partition's ids only.
fn narrow_to_partition(plan: &mut Plan, partition: &str) {
    if plan.index != Chosen::AllDocs {
        return;
    }
    let (low, high) = store::partition_range(partition);
    let id = |b: &Option<Bound>| match b {
        Some(Bound::Id(id)) => Some(id.clone()),
        _ => None,
    };
    let start = id(&plan.low).filter(|l| *l > low).unwrap_or(low);
    let end = id(&plan.high).filter(|h| *h < high).unwrap_or(high);
    plan.low = Some(Bound::Id(start));
    plan.high = Some(Bound::Id(end));
}

/// The database's JSON and nouveau indexes, each in CouchDB's order.
async fn design_indexes(
    database: &Database,
    partitioned: bool,
) -> Result<(Vec<IndexDef>, Vec<NouveauIndex>), ApiError> {
    let page = database
        .all_docs(AllDocsQuery {
            start: Edge::Included("_design/".into()),
            end: Edge::Excluded("_design0".into()),
            include_docs: true,
            ..Default::default()
        })
        .await?;
    let mut out = Vec::new();
    let mut texts = Vec::new();
    for row in page.rows {
        if let Some(doc) = row.doc {
            let doc = doc.to_value()?;
            out.extend(IndexDef::of_design_doc(&doc, partitioned));
            texts.extend(NouveauIndex::of_design_doc(&doc, partitioned));
        }
    }
    out.sort_by(|a, b| (&a.ddoc, &a.name).cmp(&(&b.ddoc, &b.name)));
    texts.sort_by(|a, b| (&a.ddoc, &a.name).cmp(&(&b.ddoc, &b.name)));
    Ok((out, texts))
}

/// `_explain`'s `selector_hints`: for each index type, the selector's
/// fields it could index and the others.
fn selector_hints(req: &FindRequest) -> Value {
    let all = req.selector.fields();
    let split = |indexable: Vec<String>| {
        let unindexable: Vec<&String> = all.iter().filter(|f| !indexable.contains(f)).collect();
        (indexable.clone(), json!(unindexable))
    };
    let (json_fields, json_rest) = split(req.selector.field_ranges().into_keys().collect());
    let mut text: Vec<String> = req
        .selector
        .text_fields()
        .iter()
        .map(|f| f.split(':').next().unwrap_or(f).to_string())
        .collect();
    text.sort();
    text.dedup();
    let (text_fields, text_rest) = split(text);
    json!([
        {"type": "json", "indexable_fields": json_fields, "unindexable_fields": json_rest},
        {"type": "nouveau", "indexable_fields": text_fields, "unindexable_fields": text_rest},
    ])
}

/// # POST /{db}/_find and /{db}/_explain
pub(crate) async fn find(
    state: AppState,
    database: Database,
    request: Request,
    explain: bool,
) -> Result<Response, ApiError> {
    find_in(state, database, request, explain, None).await
}

/// `_find` and `_explain` of a database, or of one of its partitions
/// (`/{db}/_partition/{p}/_find`): a partition query uses the partitioned
/// indexes, a global one the others.
pub(crate) async fn find_in(
    state: AppState,
    database: Database,
    request: Request,
    explain: bool,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    if request.method() != Method::POST {
        return Err(ApiError::Status {
            status: StatusCode::METHOD_NOT_ALLOWED,
            error: "method_not_allowed",
            reason: "Only POST allowed".into(),
        });
    }
    let body = body_of(&state, request).await?;
    let mut req = FindRequest::parse(&body).map_err(mango_error)?;
    let partitioned = database.is_partitioned();
    if req.partition.is_some() && !partitioned {
        return Err(ApiError::Status {
            status: StatusCode::BAD_REQUEST,
            error: "query_parse_error",
            reason: "`partition` parameter is not supported on this db".into(),
        });
    }
    if let Some(p) = &partition {
        if req.partition.as_ref().is_some_and(|given| given != p) {
            return Err(ApiError::Failed {
                error: "unknown_error",
                reason: format!(
                    "Unknown Error: mango_httpd :: {{bad_partition,{}}}",
                    mango::erlang_text(&Value::String(req.partition.clone().unwrap_or_default()))
                ),
            });
        }
        req.partition = Some(p.clone());
    }
    let scoped = req.partition.is_some();
    // Indexes are design documents: found in the whole database, whoever asks.
    let (indexes, texts) = design_indexes(&database.unscoped(), partitioned).await?;
    let indexes: Vec<IndexDef> = indexes
        .into_iter()
        .filter(|i| i.partitioned == scoped)
        .collect();
    let texts: Vec<NouveauIndex> = texts
        .into_iter()
        .filter(|i| i.partitioned == scoped)
        .collect();
    let planned = plan(&req, &indexes);
    // CouchDB's order of index types: JSON, then nouveau, then `_all_docs`.
    let json_chosen = matches!(&planned, Ok(p) if matches!(p.index, Chosen::Json(_)));
    if let Some(index) = nouveau::choose(&req, &texts, json_chosen).map_err(mango_error)? {
        if explain {
            return Ok(json_response(
                StatusCode::OK,
                &nouveau::explain(&database, &req, &index),
            ));
        }
        return nouveau::find(state, database, req, index).await;
    }
    if explain {
        return explain_answer(&database, &req, &indexes);
    }
    if let Some(e) = req.bookmark_error.clone() {
        return Err(mango_error(e));
    }
    let mut plan = planned.map_err(|e| scope_error(e, partitioned, scoped))?;
    if let Some(p) = &req.partition {
        narrow_to_partition(&mut plan, p);
    }
    let (mut writer, body) = BodyWriter::channel();
    let mut run = Run {
        state,
        database,
        req,
        plan,
        started: Instant::now(),
        keys_examined: 0,
        docs_examined: 0,
        returned: 0,
        skipped: 0,
        last: None,
        first: true,
        partition_prefix: None,
    };
    run.partition_prefix = run.req.partition.as_ref().map(|p| format!("{p}:"));
    // Reading starts before the answer does, so a store error is a clean one.
    let noop = is_noop(&run.req.selector_json) || run.plan.empty;
    let index = match (&run.plan.index, noop) {
        (Chosen::Json(def), false) => Some(run.open_index(def).await?),
        _ => None,
    };
    // A reader limited by `_access` pays for their own documents, never
    // for the rows others hold in the index (see `own_docs`).
    let own_docs = match (&run.plan.index, &index) {
        (Chosen::Json(def), Some((index, view))) => {
            own_docs::cheaper_than_index(&run, def, index, *view)
                .await?
                .then(|| def.clone())
        }
        _ => None,
    };
    tokio::spawn(async move {
        let outcome = async {
            writer.write(b"{\"docs\":[\r\n").await?;
            if noop {
                writer.write(b"\r\n]}\r\n").await?;
                return Ok(());
            }
            match (index, own_docs) {
                (Some(_), Some(def)) => run.read_own_docs(&mut writer, &def).await?,
                (Some((index, view)), None) => run.read_index(&mut writer, index, view).await?,
                (None, _) => run.read_all_docs(&mut writer).await?,
            }
            writer.write(run.tail().as_bytes()).await?;
            Ok::<(), Stop>(())
        }
        .await;
        writer.close(outcome).await;
    });
    let mut response = Response::new(body);
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Selectors CouchDB answers without running: a top-level empty `$or`,
/// `$and`, `$in` or `$all`.
fn is_noop(selector: &Value) -> bool {
    selector.as_object().is_some_and(|m| {
        m.len() == 1
            && m.iter().any(|(k, v)| {
                ["$or", "$and", "$in", "$all"].contains(&k.as_str())
                    && v.as_array().is_some_and(Vec::is_empty)
            })
    })
}

/// One `_find` being answered.
struct Run {
    state: AppState,
    database: Database,
    req: FindRequest,
    plan: Plan,
    started: Instant,
    keys_examined: u64,
    docs_examined: u64,
    returned: u64,
    skipped: u64,
    /// The last matching row: where the next page starts.
    last: Option<Bookmark>,
    first: bool,
    /// `partition:` when the query is one partition's.
    partition_prefix: Option<String>,
}

impl Run {
    async fn open_index(&self, def: &IndexDef) -> Result<(store::Index, u32), ApiError> {
        let ddoc = def.ddoc.strip_prefix("_design/").unwrap_or(&def.ddoc);
        // An index is built from, and shared by, the whole database; what
        // a user may read is decided when rows are fetched.
        let whole = self.database.unscoped();
        let doc = crate::design::load(&whole, ddoc).await?;
        let group = ViewGroup::of(&whole, &doc).map_err(|_| ApiError::not_found("missing"))?;
        let view = group
            .view_number(&def.name)
            .map_err(|_| ApiError::not_found("missing"))?;
        let update = self.req.update && !self.req.stale;
        let index = self
            .state
            .views
            .index(self.state.validators.engine(), &whole, &group, update)
            .await
            .map_err(|e| ApiError::Internal(format!("building a Mango index: {e:?}")))?;
        Ok((index, view))
    }

    fn done(&self) -> bool {
        self.returned >= self.req.limit
    }

    /// Judges one candidate document: matched, past the skip, written.
    async fn offer(
        &mut self,
        writer: &mut BodyWriter,
        doc: &Value,
        key: Value,
        id: &str,
    ) -> Result<(), Stop> {
        if !self.req.selector.matches(doc) {
            return Ok(());
        }
        self.last = Some(Bookmark {
            key,
            doc_id: id.to_string(),
        });
        // Past a bookmark, its own row comes first again: skipped too.
        let skip = self.req.skip + u64::from(self.req.bookmark.is_some());
        if self.skipped < skip {
            self.skipped += 1;
            return Ok(());
        }
        let shown = mango::fields::project(doc, &self.req.fields);
        if !self.first {
            writer.write(b",\r\n").await?;
        }
        self.first = false;
        writer.write(&ejson::to_vec(&shown)).await?;
        self.returned += 1;
        Ok(())
    }

    /// The documents of index rows, read together (`None` for one gone).
    async fn fetch_all(&mut self, rows: &[store::IndexEntry]) -> Result<Vec<Option<Value>>, Stop> {
        self.fetch_ids(rows.iter().map(|r| r.id.clone()).collect())
            .await
    }

    /// The documents of `ids`, read together (`None` for one gone or
    /// hidden), counted as examined.
    async fn fetch_ids(&mut self, ids: Vec<String>) -> Result<Vec<Option<Value>>, Stop> {
        let scoped = self.database.reader().is_some();
        if !scoped {
            self.docs_examined += ids.len() as u64;
        }
        let found = self
            .database
            .all_docs_keys(
                ids,
                Some(GetOptions {
                    conflicts: self.req.conflicts,
                    ..Default::default()
                }),
            )
            .await?;
        let mut out = Vec::with_capacity(found.len());
        for (_, row) in found {
            // A reader who sees only some documents examined only those.
            if scoped && row.is_some() {
                self.docs_examined += 1;
            }
            out.push(match row.filter(|r| !r.deleted).and_then(|r| r.doc) {
                Some(doc) => Some(doc.to_value()?),
                None => None,
            });
        }
        Ok(out)
    }

    async fn read_index(
        &mut self,
        writer: &mut BodyWriter,
        index: store::Index,
        view: u32,
    ) -> Result<(), Stop> {
        let Chosen::Json(def) = self.plan.index.clone() else {
            return Ok(());
        };
        let key_bytes = |b: &Option<Bound>| match b {
            Some(Bound::Key(bytes)) => Some(bytes.clone()),
            _ => None,
        };
        // A partitioned index keeps each partition's rows together, under
        // the partition's own sort key: a partition query reads only those.
        let prefix = match (&self.req.partition, def.partitioned) {
            (Some(p), true) => {
                self.partition_prefix = None;
                design_functions::views::partition_sort_key(p)
            }
            _ => Vec::new(),
        };
        let prefixed = |bytes: Vec<u8>| [prefix.as_slice(), &bytes].concat();
        let (low, high) = (
            key_bytes(&self.plan.low).map(prefixed),
            key_bytes(&self.plan.high).map(prefixed),
        );
        let resume = self.req.bookmark.as_ref().map(|b| {
            let mut bytes = Vec::new();
            collation::sort_key(&b.key, &mut bytes);
            (prefixed(bytes), Some(b.doc_id.clone()))
        });
        let (start, end) = if self.plan.descending {
            (resume.or(high.map(|h| (h, None))), low.map(|l| (l, None)))
        } else {
            (resume.or(low.map(|l| (l, None))), high.map(|h| (h, None)))
        };
        let mut after = None;
        while !self.done() {
            writer.still_wanted()?;
            let rows = index
                .range(IndexRange {
                    view,
                    start: start.clone(),
                    end: end.clone(),
                    inclusive_end: true,
                    descending: self.plan.descending,
                    skip: 0,
                    limit: PAGE,
                    after: after.take(),
                })
                .await?;
            let exhausted = rows.len() < PAGE;
            if let Some(last) = rows.last() {
                after = Some(last.position());
            }
            // A partitioned index holds every partition: only this one's rows count.
            let mut rows: std::collections::VecDeque<store::IndexEntry> = rows
                .into_iter()
                .filter(|row| {
                    self.partition_prefix
                        .as_ref()
                        .is_none_or(|prefix| row.id.starts_with(prefix.as_str()))
                })
                .collect();
            while !rows.is_empty() && !self.done() {
                // Documents are read a batch at a time, no more than the
                // answer may still need (all when it skips some first).
                let wanted = (self.req.limit - self.returned)
                    .saturating_add(self.req.skip.saturating_sub(self.skipped))
                    .clamp(1, PAGE as u64) as usize;
                let batch: Vec<store::IndexEntry> = rows.drain(..wanted.min(rows.len())).collect();
                // A covering index answers from its keys, unless the reader
                // sees only some documents: then each is fetched (and judged).
                let docs = if self.plan.covering && self.database.reader().is_none() {
                    None
                } else {
                    Some(self.fetch_all(&batch).await?)
                };
                for (i, row) in batch.into_iter().enumerate() {
                    if self.done() {
                        break;
                    }
                    let readable = docs
                        .as_ref()
                        .is_none_or(|d| matches!(d.get(i), Some(Some(_))));
                    // A reader who sees only some documents is told of
                    // their rows only (`execution_stats` counts them).
                    if readable || self.database.reader().is_none() {
                        self.keys_examined += 1;
                    }
                    let key: Value = ejson::from_stored(&row.key).unwrap_or(Value::Null);
                    let doc = match &docs {
                        None => covered_doc(&def, &key, &row.id),
                        Some(docs) => match docs.get(i) {
                            Some(Some(doc)) => doc.clone(),
                            _ => continue,
                        },
                    };
                    self.offer(writer, &doc, key, &row.id).await?;
                }
            }
            if exhausted {
                break;
            }
        }
        Ok(())
    }

    async fn read_all_docs(&mut self, writer: &mut BodyWriter) -> Result<(), Stop> {
        let id_of = |b: &Option<Bound>| match b {
            Some(Bound::Id(id)) => Some(id.clone()),
            _ => None,
        };
        let (low, high) = (id_of(&self.plan.low), id_of(&self.plan.high));
        let resume = self.req.bookmark.as_ref().map(|b| b.doc_id.clone());
        let (mut start, end) = if self.plan.descending {
            (resume.or(high), low)
        } else {
            (resume.or(low), high)
        };
        let mut first_page = true;
        while !self.done() {
            writer.still_wanted()?;
            let page = self
                .database
                .all_docs(AllDocsQuery {
                    start: match start.take() {
                        Some(id) if first_page => Edge::Included(id),
                        Some(id) => Edge::Excluded(id),
                        None => Edge::Unbounded,
                    },
                    end: end.clone().map_or(Edge::Unbounded, Edge::Included),
                    descending: self.plan.descending,
                    limit: PAGE,
                    include_docs: true,
                    conflicts: self.req.conflicts,
                    // No `offset` here: counting it would scan to each page.
                    count_offset: false,
                    ..Default::default()
                })
                .await?;
            first_page = false;
            let exhausted = page.rows.len() < PAGE;
            start = page.rows.last().map(|r| r.id.clone());
            for row in page.rows {
                if self.done() {
                    break;
                }
                self.keys_examined += 1;
                let Some(doc) = row.doc else { continue };
                self.docs_examined += 1;
                // Design documents are examined, never returned.
                if row.id.starts_with("_design/") {
                    continue;
                }
                let doc = doc.to_value()?;
                self.offer(writer, &doc, Value::String(row.id.clone()), &row.id)
                    .await?;
            }
            if exhausted {
                break;
            }
        }
        Ok(())
    }

    /// What follows the documents: the bookmark, the statistics, the warnings.
    fn tail(&self) -> String {
        let bookmark = match (&self.last, &self.req.bookmark_text) {
            (Some(mark), _) => mark.encode(),
            (None, Some(text)) => text.clone(),
            (None, None) => "nil".into(),
        };
        let mut out = format!("\r\n],\r\n\"bookmark\": {}", Value::String(bookmark));
        if self.req.execution_stats {
            let stats = json!({
                "total_keys_examined": self.keys_examined,
                "total_docs_examined": self.docs_examined,
                "total_quorum_docs_examined": 0,
                "results_returned": self.returned,
                "execution_time_ms": self.started.elapsed().as_secs_f64() * 1000.0,
            });
            out.push_str(&format!(",\r\n\"execution_stats\": {stats}"));
        }
        let mut warnings = self.plan.warnings.clone();
        if self.plan.index == Chosen::AllDocs {
            warnings.push(NO_INDEX_WARNING.into());
        }
        let ratio = self.docs_examined / self.returned.max(1);
        if ratio > SCAN_WARNING_RATIO {
            warnings.push(SCAN_WARNING.into());
        }
        if !warnings.is_empty() {
            out.push_str(&format!(
                ",\r\n\"warning\": {}",
                Value::String(warnings.join("\n"))
            ));
        }
        out.push_str("}\r\n");
        out
    }
}

/// A document rebuilt from a covering index's row: its id and the indexed fields.
fn covered_doc(def: &IndexDef, key: &Value, id: &str) -> Value {
    let mut doc = Map::new();
    doc.insert("_id".into(), Value::String(id.to_string()));
    let mut doc = Value::Object(doc);
    let values = key.as_array().cloned().unwrap_or_default();
    for (field, value) in def.fields.iter().zip(values) {
        let path = mango::fields::split(field);
        let mut at = &mut doc;
        for (i, segment) in path.iter().enumerate() {
            let Value::Object(map) = at else { break };
            if i + 1 == path.len() {
                map.insert(segment.clone(), value.clone());
                break;
            }
            at = map
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    doc
}

fn explain_answer(
    database: &Database,
    req: &FindRequest,
    indexes: &[IndexDef],
) -> Result<Response, ApiError> {
    let chosen = match plan(req, indexes) {
        Ok(plan) => Some(plan),
        // _explain shows a query no index can sort rather than refusing it.
        Err(e) if e.error == "no_usable_index" => None,
        Err(e) => return Err(mango_error(e)),
    };
    let mut out = json!({
        "dbname": database.name(),
        "index": Value::Null,
        "partitioned": database.is_partitioned(),
        "selector": mango::normal::normalize(&req.selector_json),
        "opts": req.explain_opts(),
        "limit": req.limit,
        "skip": req.skip,
        "fields": req.fields,
    });
    let Some(plan) = chosen else {
        out["index_candidates"] = json!([]);
        out["selector_hints"] = selector_hints(req);
        return Ok(json_response(StatusCode::OK, &out));
    };
    out["index"] = match &plan.index {
        Chosen::AllDocs => all_docs_description(),
        Chosen::Json(def) => def.describe(),
    };
    out["index_candidates"] = Value::Array(plan.candidates.clone());
    out["selector_hints"] = selector_hints(req);
    out["mrargs"] = json!({
        "include_docs": !plan.covering,
        "view_type": "map",
        "reduce": false,
        "partition": req.partition,
        "start_key": plan.start_key,
        "end_key": plan.end_key,
        "direction": if plan.descending { "rev" } else { "fwd" },
        "stable": req.stable || req.stale,
        "update": req.update && !req.stale,
        "conflicts": if req.conflicts { json!(true) } else { json!("undefined") },
    });
    out["covering"] = Value::Bool(plan.covering);
    Ok(json_response(StatusCode::OK, &out))
}

/// # GET|POST /{db}/_index
pub(crate) async fn indexes(
    state: AppState,
    database: Database,
    query: crate::base::params::Query,
    request: Request,
) -> Result<Response, ApiError> {
    let method = request.method().clone();
    if method == Method::GET || method == Method::HEAD {
        let (all, texts) = design_indexes(&database, database.is_partitioned()).await?;
        // CouchDB sorts its index records: by design document, name, type.
        let mut described: Vec<((String, String, &str), Value)> = all
            .iter()
            .map(|i| ((i.ddoc.clone(), i.name.clone(), "json"), i.describe()))
            .chain(
                texts
                    .iter()
                    .map(|i| ((i.ddoc.clone(), i.name.clone(), "nouveau"), i.describe())),
            )
            .collect();
        described.sort_by(|a, b| a.0.cmp(&b.0));
        let mut listed = vec![all_docs_description()];
        listed.extend(described.into_iter().map(|(_, d)| d));
        let total = listed.len();
        let bad = || ApiError::Status {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error: "invalid_list_index_params",
            reason: "Index parameter ranges: limit > 1, skip > 0".into(),
        };
        let number = |key: &str| -> Result<Option<i64>, ApiError> {
            query
                .get(key)
                .map(|v| v.parse::<i64>().map_err(|_| bad()))
                .transpose()
        };
        let skip = number("skip")?.unwrap_or(0);
        let limit = number("limit")?.unwrap_or(i64::MAX);
        if skip < 0 || limit < 1 {
            return Err(bad());
        }
        let listed: Vec<Value> = listed
            .into_iter()
            .skip(skip as usize)
            .take(limit as usize)
            .collect();
        return Ok(json_response(
            StatusCode::OK,
            &json!({"total_rows": total, "indexes": listed}),
        ));
    }
    if method != Method::POST {
        return Err(ApiError::Status {
            status: StatusCode::METHOD_NOT_ALLOWED,
            error: "method_not_allowed",
            reason: "Only GET,POST allowed".into(),
        });
    }
    let body = body_of(&state, request).await?;
    let new = parse_new_index(&body).map_err(mango_error)?;
    let existing = match database.get(&new.ddoc, GetOptions::default()).await {
        Ok(doc) => Some(doc.to_value()?),
        Err(StoreError::DocNotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let mut doc = match existing {
        Some(doc) => {
            let language = doc.get("language").cloned().unwrap_or(Value::Bool(false));
            if language != "query" {
                return Err(ApiError::Status {
                    status: StatusCode::BAD_REQUEST,
                    error: "invalid_ddoc_lang",
                    reason: format!(
                        "Existing design doc has an invalid language: {}",
                        match &language {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        }
                    ),
                });
            }
            doc
        }
        None if new.section == "views" => {
            json!({"_id": new.ddoc, "language": "query", "views": {}})
        }
        None => json!({"_id": new.ddoc, "language": "query"}),
    };
    let at = format!("/{}/{}", new.section, pointer_escape(&new.name));
    if doc.pointer(&at) == Some(&new.view) {
        return Ok(json_response(
            StatusCode::OK,
            &json!({"result": "exists", "id": new.ddoc, "name": new.name}),
        ));
    }
    if !doc.get(new.section).is_some_and(Value::is_object) {
        doc[new.section] = json!({});
    }
    doc[new.section][&new.name] = new.view.clone();
    if let Some(partitioned) = new.partitioned
        && doc.get("_rev").is_none()
    {
        doc["options"] = json!({ "partitioned": partitioned });
    }
    let input = DocInput::from_json(doc)?;
    database.put_doc(input, true).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"result": "created", "id": new.ddoc, "name": new.name}),
    ))
}

fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// # DELETE /{db}/_index/{ddoc}/json/{name} and POST /{db}/_index/_bulk_delete
pub(crate) async fn index_path(
    state: AppState,
    database: Database,
    path: String,
    request: Request,
) -> Result<Response, ApiError> {
    if path == "_bulk_delete" {
        if request.method() != Method::POST {
            return Err(ApiError::Status {
                status: StatusCode::METHOD_NOT_ALLOWED,
                error: "method_not_allowed",
                reason: "Only POST allowed".into(),
            });
        }
        let body = body_of(&state, request).await?;
        let Some(ids) = body.get("docids") else {
            return Err(mango_error(MangoError::bad(
                "missing_required_key",
                "Missing required key: docids".into(),
            )));
        };
        let Value::Array(ids) = ids else {
            return Err(mango_error(MangoError::bad(
                "invalid_bulk_docs",
                format!(
                    "Bulk Delete requires an array of non-null docids. Docids: {}",
                    mango::erlang_text(ids)
                ),
            )));
        };
        let mut success = Vec::new();
        let mut fail = Vec::new();
        for id in ids {
            let Value::String(id) = id else {
                return Err(mango_error(MangoError::bad(
                    "invalid_index_name",
                    format!("Invalid index name: {id}"),
                )));
            };
            let full = if id.starts_with("_design/") {
                id.clone()
            } else {
                format!("_design/{id}")
            };
            match delete_json_views(&database, &full, "views", None).await {
                Ok(()) => success.push(json!({"id": full, "ok": true})),
                Err(_) => fail.push(json!({"id": full, "error": "not_found"})),
            }
        }
        success.reverse();
        fail.reverse();
        return Ok(json_response(
            StatusCode::OK,
            &json!({"success": success, "fail": fail}),
        ));
    }
    if request.method() != Method::DELETE {
        return Err(ApiError::Status {
            status: StatusCode::METHOD_NOT_ALLOWED,
            error: "method_not_allowed",
            reason: "Only DELETE allowed".into(),
        });
    }
    let parts: Vec<&str> = path.split('/').collect();
    let (ddoc, kind, name) = match parts.as_slice() {
        ["_design", d, k, n] => (*d, *k, *n),
        [d, k, n] => (*d, *k, *n),
        _ => return Err(ApiError::not_found("missing")),
    };
    let section = match kind {
        "json" => "views",
        "nouveau" => "nouveau",
        _ => return Err(ApiError::not_found("missing")),
    };
    delete_json_views(&database, &format!("_design/{ddoc}"), section, Some(name)).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// Removes one index (or every view) of a Mango design document's
/// `section`; the document goes when nothing else is left in it.
async fn delete_json_views(
    database: &Database,
    id: &str,
    section: &str,
    name: Option<&str>,
) -> Result<(), ApiError> {
    let doc = match database.get(id, GetOptions::default()).await {
        Ok(doc) => doc.to_value()?,
        Err(StoreError::DocNotFound(_)) => return Err(ApiError::not_found("missing")),
        Err(e) => return Err(e.into()),
    };
    if doc.get("language").and_then(Value::as_str) != Some("query") {
        return Err(ApiError::not_found("missing"));
    }
    let mut doc = doc;
    let Some(Value::Object(views)) = doc.get_mut(section) else {
        return Err(ApiError::not_found("missing"));
    };
    match name {
        Some(name) => {
            if views.remove(name).is_none() {
                return Err(ApiError::not_found("missing"));
            }
        }
        None => views.clear(),
    }
    let empty = views.is_empty();
    let bare = empty
        && doc.as_object().is_some_and(|m| {
            m.keys()
                .all(|k| ["_id", "_rev", "language", section].contains(&k.as_str()))
        });
    if bare {
        doc = json!({"_id": doc["_id"], "_rev": doc["_rev"], "_deleted": true});
    } else if empty && let Some(map) = doc.as_object_mut() {
        map.remove(section);
    }
    database.put_doc(DocInput::from_json(doc)?, true).await?;
    Ok(())
}
