//! A database's settings and upkeep: `_ensure_full_commit`, `_compact`,
//! `_revs_limit`, `_security`.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::response::json_response;

/// # POST /{db}/_ensure_full_commit
pub(crate) async fn ensure_full_commit(
    state: AppState,
    db: String,
    user: &auth::UserCtx,
) -> Result<Response, ApiError> {
    let database = state.open(&db, user).await?;
    database.ensure_full_commit().await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "instance_start_time": database.instance_start_time()}),
    ))
}

/// # POST /{db}/_compact
/// Starts compaction in the background, as CouchDB does.
pub(crate) async fn compact(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    require_json_content_type(request.headers())?;
    let database = state.open(&db, &user).await?;
    tokio::spawn(async move {
        if let Err(e) = database.compact().await {
            tracing::error!(db = %database.name(), error = %e, "compaction failed");
        }
    });
    Ok(json_response(StatusCode::ACCEPTED, &json!({"ok": true})))
}

/// # GET|PUT /{db}/_revs_limit
pub(crate) async fn revs_limit(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    if request.method() == Method::GET {
        return Ok(json_response(StatusCode::OK, &database.revs_limit().await?));
    }
    let limit = crate::base::json_body::read_json_body(request.into_body(), &state.config)
        .await?
        .and_then(|v| v.as_u64())
        .filter(|n| (1..=u32::MAX as u64).contains(n))
        .ok_or_else(|| ApiError::bad_request("The revs_limit must be a positive integer"))?;
    database.set_revs_limit(limit as u32).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// # GET|PUT /{db}/_security
pub(crate) async fn security(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    if request.method() == Method::GET {
        return Ok(json_response(StatusCode::OK, &*database.security().await?));
    }
    // Only the database's admins change who its admins and members are.
    let user = crate::base::auth::user_of(&request);
    let current = auth::SecurityObject::from_json(&*database.security().await?);
    if !current.is_admin(&user) {
        return Err(crate::base::access::not_db_admin(&user));
    }
    if *db == *access::authentication_db() && !state.auth.config.users_db_security_editable {
        return Err(ApiError::Forbidden(
            "You can't edit the security object of the user database.".into(),
        ));
    }
    let body = Value::Object(read_json_object(request.into_body(), &state.config).await?);
    auth::SecurityObject::validate(&body).map_err(ApiError::bad_request)?;
    database.set_security(body).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}
