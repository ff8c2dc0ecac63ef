//! `GET /_active_tasks` and `GET /_scheduler/jobs`: the running
//! replications with their progress, in CouchDB 3's shapes. Sources and
//! targets are shown without credentials.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use replicator::JobInfo;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::json::json_response;
use crate::query::Query;

/// The node name CouchDB clients see in task listings.
const NODE: &str = "recliner@127.0.0.1";

fn unix(t: Option<SystemTime>) -> u64 {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

fn counters(job: &JobInfo) -> serde_json::Map<String, Value> {
    let p = &job.progress;
    let mut m = serde_json::Map::new();
    m.insert("revisions_checked".into(), json!(p.stats.missing_checked));
    m.insert(
        "missing_revisions_found".into(),
        json!(p.stats.missing_found),
    );
    m.insert("docs_read".into(), json!(p.stats.docs_read));
    m.insert("docs_written".into(), json!(p.stats.docs_written));
    m.insert(
        "doc_write_failures".into(),
        json!(p.stats.doc_write_failures),
    );
    m.insert("changes_pending".into(), Value::Null);
    m.insert(
        "checkpointed_source_seq".into(),
        p.checkpointed_source_seq.clone(),
    );
    m.insert("source_seq".into(), p.source_seq.clone());
    m.insert("through_seq".into(), p.through_seq.clone());
    m
}

/// # GET /_active_tasks
pub(crate) async fn active_tasks(State(state): State<AppState>) -> Response {
    let tasks: Vec<Value> = state
        .replications
        .list()
        .iter()
        .map(|job| {
            let mut task = counters(job);
            task.insert("type".into(), json!("replication"));
            task.insert("node".into(), json!(NODE));
            task.insert("replication_id".into(), json!(job.id));
            task.insert("doc_id".into(), json!(job.doc_id));
            task.insert(
                "database".into(),
                json!(job.doc_id.as_ref().map(|_| "_replicator")),
            );
            task.insert("user".into(), Value::Null);
            task.insert("continuous".into(), json!(job.continuous));
            task.insert("source".into(), json!(job.source));
            task.insert("target".into(), json!(job.target));
            task.insert("started_on".into(), json!(unix(Some(job.started))));
            task.insert(
                "updated_on".into(),
                json!(unix(job.progress.updated.or(Some(job.started)))),
            );
            Value::Object(task)
        })
        .collect();
    json_response(StatusCode::OK, &tasks)
}

/// # GET /_scheduler/jobs
pub(crate) async fn scheduler_jobs(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let skip = query.u64("skip")?.unwrap_or(0) as usize;
    let limit = query.u64("limit")?.map_or(usize::MAX, |n| n as usize);
    let all = state.replications.list();
    let jobs: Vec<Value> = all
        .iter()
        .skip(skip)
        .take(limit)
        .map(|job| {
            let started = unix(Some(job.started));
            json!({
                "id": job.id,
                "database": job.doc_id.as_ref().map(|_| "_replicator"),
                "doc_id": job.doc_id,
                "user": null,
                "node": NODE,
                "source": job.source,
                "target": job.target,
                "info": Value::Object(counters(job)),
                "history": [{"timestamp": started, "type": "started"}, {"timestamp": started, "type": "added"}],
                "start_time": started,
            })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"total_rows": all.len(), "offset": skip, "jobs": jobs}),
    ))
}
