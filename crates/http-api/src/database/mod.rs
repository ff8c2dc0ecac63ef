//! Database routes: `/{db}` itself (create, info, delete, `POST`) here, and
//! each endpoint below it (`_all_docs`, `_bulk_docs`, `_bulk_get`,
//! `_revs_diff`, `_purge`, `_partition`, ...) in a module of its own.

pub(crate) mod all_docs;
pub(crate) mod auto_purge;
pub(crate) mod bulk_docs;
pub(crate) mod bulk_get;
pub(crate) mod design_docs;
pub(crate) mod listing_queries;
pub(crate) mod local_docs;
pub(crate) mod maintenance;
pub(crate) mod partition;
pub(crate) mod purge;
pub(crate) mod revs_diff;
pub(crate) mod time_seq;

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::AppState;
use crate::base::db_info::db_info;
use crate::base::doc_input::parse_doc;
use crate::base::error::ApiError;
use crate::base::json_body::require_json_content_type;
use crate::base::params::Query;
use crate::base::response::json_response;
use crate::base::response::{encode_segment, set_location};

/// # GET|HEAD|PUT|DELETE|POST /{db}
pub(crate) async fn database(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    match *request.method() {
        Method::GET | Method::HEAD => {
            let user = crate::base::auth::user_of(&request);
            info(&state, &db, &user).await
        }
        Method::PUT => {
            let partitioned = match query.get("partitioned") {
                None | Some("false") => false,
                Some("true") => true,
                Some(_) => return Err(ApiError::bad_request("Invalid `partitioned` parameter")),
            };
            let positive = |name: &str| match query.get(name) {
                None => Ok(None),
                Some(v) => match v.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(ApiError::bad_request(format!(
                        "The `{name}` value should be a positive integer."
                    ))),
                },
            };
            let q = positive("q")?.unwrap_or(1);
            // One node holds one copy, whatever `n` asks (CouchDB reports
            // n as the nodes it has too).
            positive("n")?;
            if query.get("placement").is_some_and(|p| !valid_placement(p)) {
                return Err(ApiError::bad_request(
                    "The `placement` value should be in a format `zone:n`.",
                ));
            }
            // Per-document access (CouchDB's `access` branch): fixed at creation.
            let access = match query.get("access") {
                None | Some("false") => false,
                Some("true") => true,
                Some(_) => {
                    return Err(ApiError::bad_request(
                        "The `access` value should be a boolean.",
                    ));
                }
            };
            let how = store::CreateDb {
                partitioned,
                q,
                access,
            };
            let created = state.databases.create_db_with(&db, how).await?;
            if *db == *access::authentication_db() {
                // A new authentication database holds `_design/_auth` from
                // the start, as CouchDB's does (clients wait for it).
                if let Err(e) = access::ensure_auth_design_doc(&created).await {
                    tracing::warn!(db = %db, error = %e, "cannot write _design/_auth");
                }
            }
            let mut response = json_response(StatusCode::CREATED, &json!({"ok": true}));
            set_location(&mut response, &format!("/{}", encode_segment(&db)));
            Ok(response)
        }
        Method::DELETE => {
            if query.has("rev") {
                return Err(ApiError::bad_request(
                    "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?",
                ));
            }
            state.databases.delete_db(&db).await?;
            Ok(json_response(StatusCode::OK, &json!({"ok": true})))
        }
        Method::POST => post_document(state, db, query, request).await,
        // CouchDB's list, which leaves out PUT.
        _ => Err(ApiError::MethodNotAllowed("DELETE,GET,HEAD,POST")),
    }
}

/// CouchDB's `placement`: `zone:n` pairs separated by commas.
fn valid_placement(placement: &str) -> bool {
    placement.split(',').all(|rule| {
        rule.split_once(':')
            .is_some_and(|(zone, n)| !zone.is_empty() && n.parse::<u32>().is_ok_and(|n| n > 0))
    })
}

/// The counts are the caller's: in a database with per-document access,
/// of the documents they may read.
async fn info(state: &AppState, name: &str, user: &auth::UserCtx) -> Result<Response, ApiError> {
    let db = state.open(name, user).await?;
    Ok(json_response(StatusCode::OK, &db_info(&db).await?))
}

/// # POST /{db}
/// Creates a document, with a generated id when it has none.
async fn post_document(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    require_json_content_type(request.headers())?;
    let (database, writer) = state.open_to_write(&db, &user).await?;
    let body =
        crate::base::body::read_doc_body(&state, &database, request.into_body(), false).await?;
    let mut doc = parse_doc(&state, Value::Object(body.map))?;
    crate::base::body::DocBody::resolve(body.staged, &mut doc)?;
    let id = doc.id.get_or_insert_with(|| state.uuids.next()).clone();
    writer.check_one(&database, &mut doc, true).await?;
    if query.get("batch") == Some("ok") {
        return Ok(crate::document::batch_write(&database, doc, true, &id).await);
    }
    let rev = database.put_doc(doc, true).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "id": id, "rev": rev}),
    );
    // As CouchDB: a POSTed document gets a Location, no ETag.
    set_location(
        &mut response,
        &format!("/{}/{}", encode_segment(&db), encode_segment(&id)),
    );
    Ok(response)
}
