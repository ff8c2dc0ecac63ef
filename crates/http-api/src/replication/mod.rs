//! Replication routes: `POST /_replicate` and the scheduler's views
//! (`/_scheduler/jobs`, `/_scheduler/docs`, `_active_tasks`).

pub(crate) mod scheduler;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::response::json_response;

/// # POST /_replicate
/// A one-shot replication answers with its final log once it ends; a
/// continuous one answers 202 at once and keeps running in the scheduler;
/// `cancel: true` removes a job.
pub(crate) async fn replicate(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let user = crate::base::auth::user_of(&request);
    let body = read_json_object(request.into_body(), &state.config).await?;
    let body = Value::Object(body);
    if body.get("cancel").and_then(Value::as_bool) == Some(true) {
        let id = match body.get("replication_id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => {
                let spec = state
                    .scheduler
                    .parse_spec(&body)
                    .map_err(|e| ApiError::bad_request(e.0))?;
                replicator::job_id(state.databases.server_uuid(), &spec)
            }
        };
        // A job unknown to this caller is missing, whoever asks.
        let Some(rights) = state.scheduler.job_rights(&id) else {
            return Err(ApiError::not_found("missing"));
        };
        access::replication::check_cancel(&user, rights.as_ref())?;
        if state.scheduler.remove(&id).await {
            return Ok(json_response(
                StatusCode::OK,
                &json!({"ok": true, "_local_id": id}),
            ));
        }
        // CouchDB's reason for a replication it does not know.
        return Err(ApiError::not_found("missing"));
    }
    let mut spec = state
        .scheduler
        .parse_spec(&body)
        .map_err(|e| ApiError::bad_request(e.0))?;
    state
        .databases
        .replications()
        .check_start(&user, &body)
        .await?;
    // The job keeps the caller's rights on this server's databases.
    spec.user = access::replication::job_rights(user);
    let continuous = spec.continuous;
    let mut added = state.scheduler.add(spec, replicator::Owner::Transient);
    if continuous {
        return Ok(json_response(
            StatusCode::ACCEPTED,
            &json!({"ok": true, "_local_id": added.id}),
        ));
    }
    // The same one-shot replication asked twice: both wait for the one job.
    let outcome = match added.done.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone(),
        Err(_) => None,
    };
    match outcome {
        Some(replicator::Outcome::Completed(log)) => Ok(json_response(StatusCode::OK, &log)),
        Some(replicator::Outcome::Failed { error, reason }) => {
            Err(ApiError::Failed { error, reason })
        }
        None => Err(ApiError::Failed {
            error: "replication_failed",
            reason: "the replication ended without a result".into(),
        }),
    }
}
