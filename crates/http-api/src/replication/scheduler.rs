//! `GET /_active_tasks`, `/_scheduler/jobs[/{id}]` and
//! `/_scheduler/docs[/{db}[/{docid}]]`: the server's replications with
//! their state and progress, in CouchDB 3's shapes. Sources and targets are
//! shown without credentials (the scheduler never holds them in its display
//! forms).
//!
//! Nodes sharing a store publish their jobs and documents there
//! ([`publish_scheduler_state`]), and `_scheduler/*` on any node shows every
//! node's, each under its node's name.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use replicator::{DOC_STATES, DocInfo, EventKind, JobInfo, JobState, Owner, progress_json};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;

/// The node name CouchDB clients see in task listings.
const NODE: &str = "recliner@127.0.0.1";

/// How long what another node published counts as current: it publishes
/// every few seconds while it runs.
const PUBLISHED_FRESH: std::time::Duration = std::time::Duration::from_secs(20);

/// This node's name in listings: CouchDB's single-node name, or, among
/// nodes sharing a store, one naming this node.
fn node_name(state: &AppState) -> String {
    if state.databases.is_shared() {
        format!("recliner@{}", state.node)
    } else {
        NODE.to_string()
    }
}

/// Publishes this node's jobs and documents for the other nodes'
/// `_scheduler` listings (nothing when no other node shares the store).
pub async fn publish_scheduler_state(state: &AppState) {
    if !state.databases.is_shared() {
        return;
    }
    let node = node_name(state);
    let mut entries: Vec<(String, String)> = state
        .scheduler
        .jobs()
        .iter()
        .map(|job| {
            (
                format!("job/{}", job.id),
                ejson::to_string(&job_json(job, &node)),
            )
        })
        .collect();
    entries.extend(state.scheduler.docs(None).iter().map(|doc| {
        (
            format!("doc/{}", json!([doc.db, doc.doc_id])),
            ejson::to_string(&doc_json(doc, &node)),
        )
    }));
    if let Err(e) = state
        .databases
        .publish_node_state(&state.node, entries)
        .await
    {
        tracing::warn!(error = %e, "cannot publish this node's replications");
    }
}

/// What the other nodes published under `prefix` (`job/`, `doc/`).
async fn other_nodes(state: &AppState, prefix: &str) -> Vec<Value> {
    if !state.databases.is_shared() {
        return Vec::new();
    }
    match state
        .databases
        .other_nodes_state(&state.node, PUBLISHED_FRESH)
        .await
    {
        Ok(rows) => rows
            .into_iter()
            .filter(|(_, key, _)| key.starts_with(prefix))
            .filter_map(|(_, _, value)| ejson::from_stored(&value).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the other nodes' replications");
            Vec::new()
        }
    }
}

/// `own` followed by the entries of `others` whose `fields` differ from
/// every one before them (a job or document shows once, this node's first).
fn merged(mut own: Vec<Value>, others: Vec<Value>, fields: &[&str]) -> Vec<Value> {
    let key = |v: &Value| -> Vec<Value> { fields.iter().map(|f| v[*f].clone()).collect() };
    let mut seen: std::collections::HashSet<String> =
        own.iter().map(|v| json!(key(v)).to_string()).collect();
    if others.is_empty() {
        return own;
    }
    for other in others {
        if seen.insert(json!(key(&other)).to_string()) {
            own.push(other);
        }
    }
    own.sort_by_cached_key(|v| json!(key(v)).to_string());
    own
}

/// The replicator database every path defaults to.
const REPLICATOR_DB: &str = "_replicator";

/// CouchDB's default page of `_scheduler/jobs`.
const DEFAULT_JOBS_LIMIT: u64 = 100;

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn iso(t: SystemTime) -> Value {
    Value::String(replicator::rfc3339(t))
}

fn owner_fields(owner: &Owner) -> (Value, Value) {
    match owner {
        Owner::Transient => (Value::Null, Value::Null),
        Owner::Doc { db, doc_id } => (json!(db), json!(doc_id)),
    }
}

/// # GET /_active_tasks
/// Running replications, as CouchDB lists its running job processes, and
/// search index updates in progress.
pub(crate) async fn active_tasks(State(state): State<AppState>) -> Response {
    let tasks: Vec<Value> = state
        .scheduler
        .jobs()
        .iter()
        .filter(|job| job.state == JobState::Running)
        .map(|job| {
            let Value::Object(mut task) = progress_json(&job.progress) else {
                return Value::Null;
            };
            let (database, doc_id) = owner_fields(&job.owner);
            let started = job.started.unwrap_or(job.start_time);
            let extra = json!({
                "type": "replication",
                "node": NODE,
                "pid": job.pid,
                "replication_id": job.id,
                "doc_id": doc_id,
                "database": database,
                "user": null,
                "continuous": job.continuous,
                "source": job.source,
                "target": job.target,
                "process_status": job.progress.process_status.as_str(),
                "started_on": unix(started),
                "updated_on": unix(job.progress.updated.unwrap_or(started)),
            });
            if let Value::Object(extra) = extra {
                task.extend(extra);
            }
            Value::Object(task)
        })
        .chain(state.searches.tasks().into_iter().map(|task| {
            json!({
                "type": "search_indexer",
                "node": NODE,
                "database": task.database,
                "design_document": task.design_document,
                "index": task.index,
                "progress": task.progress(),
                "changes_done": task.changes_done,
                "total_changes": task.total_changes,
                "started_on": task.started_on,
                "updated_on": task.updated_on,
            })
        }))
        .collect();
    json_response(StatusCode::OK, &tasks)
}

fn history_json(job: &JobInfo) -> Value {
    job.history
        .iter()
        .map(|event| match &event.kind {
            EventKind::Crashed(reason) => {
                json!({"timestamp": iso(event.at), "type": "crashed", "reason": reason})
            }
            kind => {
                let name = match kind {
                    EventKind::Added => "added",
                    EventKind::Started => "started",
                    _ => "stopped",
                };
                json!({"timestamp": iso(event.at), "type": name})
            }
        })
        .collect()
}

fn job_json(job: &JobInfo, node: &str) -> Value {
    let (database, doc_id) = owner_fields(&job.owner);
    let mut out = json!({
        "id": job.id,
        "pid": job.pid,
        "source": job.source,
        "target": job.target,
        "database": database,
        "user": null,
        "doc_id": doc_id,
        "info": progress_json(&job.progress),
        "history": history_json(job),
        "node": node,
        "start_time": iso(job.start_time),
    });
    if job.idle {
        // Parked until its source changes: running to CouchDB's tools.
        out["idle"] = json!(true);
    }
    out
}

/// A non-negative integer parameter of `_scheduler/jobs`, refused as
/// CouchDB refuses it.
fn int_param(query: &Query, key: &str, default: u64) -> Result<u64, ApiError> {
    match query.get(key) {
        None => Ok(default),
        Some(text) => text.trim().parse().map_err(|_| ApiError::Invalid {
            error: "query_parse_error",
            reason: format!("{key} must be an integer"),
        }),
    }
}

/// # GET /_scheduler/jobs
pub(crate) async fn scheduler_jobs(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let skip = int_param(&query, "skip", 0)? as usize;
    let limit = int_param(&query, "limit", DEFAULT_JOBS_LIMIT)? as usize;
    let node = node_name(&state);
    let own: Vec<Value> = state
        .scheduler
        .jobs()
        .iter()
        .map(|job| job_json(job, &node))
        .collect();
    let all = merged(own, other_nodes(&state, "job/").await, &["id"]);
    let total = all.len();
    let offset = skip.min(total);
    let jobs: Vec<Value> = all.into_iter().skip(offset).take(limit).collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"total_rows": total, "offset": offset, "jobs": jobs}),
    ))
}

/// # GET /_scheduler/jobs/{id}
pub(crate) async fn scheduler_job(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    if let Some(job) = state.scheduler.job(&id) {
        return Ok(json_response(
            StatusCode::OK,
            &job_json(&job, &node_name(&state)),
        ));
    }
    match other_nodes(&state, "job/")
        .await
        .into_iter()
        .find(|job| job["id"] == id.as_str())
    {
        Some(job) => Ok(json_response(StatusCode::OK, &job)),
        None => Err(ApiError::not_found("missing")),
    }
}

fn doc_json(doc: &DocInfo, node: &str) -> Value {
    let mut out = Map::new();
    out.insert("database".into(), json!(doc.db));
    out.insert("doc_id".into(), json!(doc.doc_id));
    out.insert("id".into(), json!(doc.id));
    out.insert("node".into(), json!(node));
    if doc.id.is_some() && matches!(doc.state, "pending" | "running" | "crashing") {
        out.insert("source".into(), json!(doc.source));
        out.insert("target".into(), json!(doc.target));
        out.insert("source_proxy".into(), Value::Null);
        out.insert("target_proxy".into(), Value::Null);
    } else if let (Some(source), Some(target)) = (&doc.source, &doc.target) {
        // A finished document still names its peers (CouchDB 3.5).
        out.insert("source".into(), json!(source));
        out.insert("target".into(), json!(target));
    }
    out.insert("state".into(), json!(doc.state));
    if doc.idle {
        // Parked until its source changes: running to CouchDB's tools.
        out.insert("idle".into(), json!(true));
    }
    out.insert("info".into(), doc.info.clone());
    out.insert("error_count".into(), json!(doc.error_count));
    out.insert("last_updated".into(), iso(doc.last_updated));
    out.insert("start_time".into(), iso(doc.start_time));
    Value::Object(out)
}

/// Which documents a `_scheduler/docs` path names.
#[derive(Debug, PartialEq, Eq)]
enum DocsPath {
    Db(String),
    Doc(String, String),
}

/// Parses the segments after `/_scheduler/docs` (each already
/// percent-decoded). A database may be given encoded (`a%2F_replicator`)
/// or not (`a/_replicator`): `_replicator` is never a document id, so it
/// marks where the database name ends.
fn parse_docs_path(segments: &[String]) -> Option<DocsPath> {
    match segments {
        [] => Some(DocsPath::Db(REPLICATOR_DB.into())),
        [db] if store::name::is_replicator_db(db) => Some(DocsPath::Db(db.clone())),
        [db, doc] if store::name::is_replicator_db(db) => {
            Some(DocsPath::Doc(db.clone(), doc.clone()))
        }
        _ => {
            let at = segments.iter().position(|s| s == REPLICATOR_DB)?;
            let db = segments[..=at].join("/");
            match &segments[at + 1..] {
                [] => Some(DocsPath::Db(db)),
                [doc] => Some(DocsPath::Doc(db, doc.clone())),
                _ => None,
            }
        }
    }
}

/// `?states=running,crashing`: CouchDB's states, case-insensitive.
fn parse_states(query: &Query) -> Result<Vec<String>, ApiError> {
    let Some(text) = query.get("states") else {
        return Ok(Vec::new());
    };
    let states: Vec<String> = text
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(unknown) = states.iter().find(|s| !DOC_STATES.contains(&s.as_str())) {
        return Err(ApiError::Invalid {
            error: "query_parse_error",
            reason: format!(
                "Unknown states [{unknown}]. Choose from: [{}]",
                DOC_STATES.join(",")
            ),
        });
    }
    Ok(states)
}

/// # GET /_scheduler/docs[/{db}[/{docid}]]
pub(crate) async fn scheduler_docs(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = request.uri().path();
    let rest = raw
        .strip_prefix("/_scheduler/docs")
        .unwrap_or("")
        .trim_start_matches('/');
    let segments: Vec<String> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split('/')
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect()
    };
    let path = parse_docs_path(&segments).ok_or_else(|| ApiError::bad_request("Invalid path"))?;
    let query = Query::parse(request.uri());
    match path {
        DocsPath::Doc(db, doc_id) => {
            let own = state
                .scheduler
                .doc(&db, &doc_id)
                .map(|doc| doc_json(&doc, &node_name(&state)));
            let found = match own {
                Some(doc) => Some(doc),
                None => other_nodes(&state, "doc/")
                    .await
                    .into_iter()
                    .find(|doc| doc["database"] == db.as_str() && doc["doc_id"] == doc_id.as_str()),
            };
            match found {
                Some(doc) => Ok(json_response(StatusCode::OK, &doc)),
                None => Err(ApiError::not_found("missing")),
            }
        }
        DocsPath::Db(db) => {
            let states = parse_states(&query)?;
            // `_scheduler/docs` parses its integers as the view endpoints do.
            let skip = query.view_uint("skip")?.unwrap_or(0) as usize;
            let limit = query.view_uint("limit")?.unwrap_or(u64::MAX);
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let node = node_name(&state);
            let own: Vec<Value> = state
                .scheduler
                .docs(Some(&db))
                .iter()
                .map(|doc| doc_json(doc, &node))
                .collect();
            let others: Vec<Value> = other_nodes(&state, "doc/")
                .await
                .into_iter()
                .filter(|doc| doc["database"] == db.as_str())
                .collect();
            let docs: Vec<Value> = merged(own, others, &["database", "doc_id"])
                .into_iter()
                .filter(|d| states.is_empty() || states.iter().any(|s| d["state"] == s.as_str()))
                .collect();
            let total = docs.len();
            let offset = skip.min(total);
            let page: Vec<Value> = docs.into_iter().skip(offset).take(limit).collect();
            Ok(json_response(
                StatusCode::OK,
                &json!({"total_rows": total, "offset": offset, "docs": page}),
            ))
        }
    }
}

/// # GET /_scheduler/... (anything else)
pub(crate) async fn scheduler_unknown() -> Response {
    ApiError::not_found("missing").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn other_nodes_entries_join_once_each_in_key_order() {
        let own = vec![json!({"id": "b", "node": "here"})];
        assert_eq!(merged(own.clone(), Vec::new(), &["id"]), own);
        let others = vec![
            json!({"id": "c", "node": "there"}),
            json!({"id": "b", "node": "there"}),
            json!({"id": "a", "node": "there"}),
        ];
        let all = merged(own, others, &["id"]);
        let shown: Vec<(&str, &str)> = all
            .iter()
            .map(|v| (v["id"].as_str().unwrap(), v["node"].as_str().unwrap()))
            .collect();
        assert_eq!(shown, [("a", "there"), ("b", "here"), ("c", "there")]);
    }

    #[test]
    fn docs_paths_accept_encoded_and_unencoded_database_names() {
        let db = |s: &str| Some(DocsPath::Db(s.into()));
        let doc = |d: &str, id: &str| Some(DocsPath::Doc(d.into(), id.into()));
        assert_eq!(parse_docs_path(&[]), db("_replicator"));
        assert_eq!(parse_docs_path(&segs(&["_replicator"])), db("_replicator"));
        assert_eq!(
            parse_docs_path(&segs(&["a/_replicator"])),
            db("a/_replicator")
        );
        assert_eq!(
            parse_docs_path(&segs(&["a", "_replicator"])),
            db("a/_replicator")
        );
        assert_eq!(
            parse_docs_path(&segs(&["_replicator", "x"])),
            doc("_replicator", "x")
        );
        assert_eq!(
            parse_docs_path(&segs(&["a", "_replicator", "x"])),
            doc("a/_replicator", "x")
        );
        assert_eq!(parse_docs_path(&segs(&["foo"])), None);
        assert_eq!(parse_docs_path(&segs(&["a", "b"])), None);
        assert_eq!(parse_docs_path(&segs(&["_replicator", "z", "w"])), None);
    }
}
