//! `GET|PUT /{db}/_auto_purge`: how long the database keeps deleted
//! documents before they are purged automatically (CouchDB's next
//! release). The settings and the purging are the store's
//! (`store::auto_purge`).

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_body, require_json_content_type};
use crate::base::response::json_response;

/// # GET|HEAD|PUT /{db}/_auto_purge
///
/// GET: the settings, `{}` or `{"deleted_document_ttl": "3_mon"}`. PUT
/// (database admins) replaces them: 201 `{"ok": true}`; a body that is not
/// an object, another key, or a period CouchDB cannot read is 400 with
/// CouchDB's reason.
pub(crate) async fn auto_purge(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    if request.method() != Method::PUT {
        let props = database.auto_purge_props().await?;
        return Ok(json_response(StatusCode::OK, &Value::Object(props)));
    }
    require_json_content_type(request.headers())?;
    let body = match read_json_body(request.into_body(), &state.config).await? {
        Some(body @ Value::Object(_)) => body,
        None => return Err(ApiError::bad_request("Missing request body")),
        Some(_) => return Err(ApiError::bad_request("Request body must be a JSON object")),
    };
    let props = store::auto_purge::check_props(&body)
        .map_err(ApiError::bad_request)?
        .clone();
    database.set_auto_purge_props(props).await?;
    Ok(json_response(StatusCode::CREATED, &json!({"ok": true})))
}
