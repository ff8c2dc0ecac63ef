//! `POST /{db}/{docid}` with `multipart/form-data`: CouchDB's upload of
//! attachments from an HTML form. The form names the revision (`_rev`) or
//! the whole document (`_doc`, JSON) and carries files in `_attachments`
//! fields; each file becomes an attachment named after it, streamed into
//! the store, placed before the attachments the document keeps.

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use store::{AttachmentInput, Database, StagedBlob};

use crate::AppState;
use crate::base::access::Writer;
use crate::base::error::ApiError;
use crate::base::response::json_response;
use crate::base::response::set_etag;
use crate::document::attachments::{base_doc, keep_attachments_but, write};

/// # POST /{db}/{docid}
pub(crate) async fn form_upload(
    state: &AppState,
    database: &Database,
    writer: &Writer,
    id: String,
    request: Request,
) -> Result<Response, ApiError> {
    // CouchDB's order of checks: the form must come from a page of this
    // server (against cross-site posts), then the id, then the type.
    check_referer(state, request.headers())?;
    state.config.limits.check_doc_id(&id)?;
    store::validate_doc_id(&id)?;
    let boundary = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("multipart/form-data"))
        })
        .and_then(|t| multer::parse_boundary(t).ok())
        .ok_or_else(|| {
            ApiError::BadContentType("Content-Type must be multipart/form-data".into())
        })?;
    let bad = |e: multer::Error| ApiError::bad_request(format!("invalid form: {e}"));
    let mut form = multer::Multipart::new(request.into_body().into_data_stream(), boundary);
    let mut rev = None;
    let mut doc_json = None;
    let mut files: Vec<(String, String, StagedBlob)> = Vec::new();
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        match (field.name(), field.file_name()) {
            (Some("_rev"), _) => rev = Some(small_text(&mut field, 1024).await?),
            (Some("_doc"), _) => {
                let limit = state.config.max_document_size;
                doc_json = Some(small_text(&mut field, limit).await?);
            }
            (Some("_attachments"), Some(file)) if !file.is_empty() => {
                let name = file.to_string();
                state.config.limits.check_attachment_name(&name)?;
                if name.starts_with('_') {
                    return Err(ApiError::bad_request(format!(
                        "Attachment name '{name}' starts with prohibited character '_'"
                    )));
                }
                let content_type = field
                    .content_type()
                    .map_or("application/octet-stream".to_string(), |m| m.to_string());
                let mut upload = database.begin_attachment_of(&name, &content_type);
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    upload.write(&chunk).await?;
                }
                let staged = upload.finish().await?;
                files.retain(|(n, _, _)| *n != name);
                files.push((name, content_type, staged));
            }
            // Other fields (a submit button...) mean nothing here.
            _ => {}
        }
    }
    let body = match (doc_json, rev) {
        (Some(text), _) => match ejson::from_str(&text) {
            Ok(Value::Object(mut map)) => {
                map.insert("_id".into(), json!(id));
                map
            }
            Ok(_) => return Err(ApiError::bad_request("Document must be a JSON object")),
            Err(_) => return Err(ApiError::bad_request("invalid UTF-8 JSON")),
        },
        (None, Some(rev)) => base_doc(database, &id, Some(&rev)).await?,
        (None, None) => {
            return Err(ApiError::bad_request(
                "The form names no revision (_rev) and no document (_doc)",
            ));
        }
    };
    let names: Vec<&str> = files.iter().map(|(n, _, _)| n.as_str()).collect();
    let (mut doc, _) = keep_attachments_but(strip_new(body, &names), &names)?;
    // The uploaded files first, as CouchDB puts them.
    for (i, (name, content_type, staged)) in files.into_iter().enumerate() {
        let input = AttachmentInput::uploaded(content_type, staged);
        doc.attachments.insert(i, (name, input));
    }
    let new_rev = write(database, writer, doc).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "id": id, "rev": new_rev}),
    );
    set_etag(&mut response, &new_rev);
    Ok(response)
}

/// `_doc` may describe attachments itself; those the form uploads replace them.
fn strip_new(mut body: Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    if let Some(Value::Object(atts)) = body.get_mut("_attachments") {
        atts.retain(|name, _| !names.contains(&name.as_str()));
    }
    body
}

/// A form field's text, refused past `limit` bytes.
async fn small_text(field: &mut multer::Field<'_>, limit: u64) -> Result<String, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| ApiError::bad_request(format!("invalid form: {e}")))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > limit {
            return Err(ApiError::RequestTooLarge);
        }
    }
    String::from_utf8(bytes).map_err(|_| ApiError::bad_request("invalid UTF-8 in a form field"))
}

/// CouchDB's check of a form post: a `Referer` whose host (as written,
/// with any user info) is the host the request was sent to.
fn check_referer(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(referer) = headers.get(header::REFERER).and_then(|v| v.to_str().ok()) else {
        return Err(ApiError::bad_request("Referer header required."));
    };
    let host = crate::base::http_rules::request_host(&state.config.http, headers)
        .and_then(|v| v.to_str().ok());
    let referer_host = referer
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""));
    if host.is_some() && referer_host == host {
        Ok(())
    } else {
        Err(ApiError::bad_request("Referer header must match host."))
    }
}
