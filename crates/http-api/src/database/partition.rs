//! `/{db}/_partition/{partition}/...`: a partitioned database's partition
//! on its own — its counts, its `_all_docs`, its views and Mango queries.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;

/// # /{db}/_partition/{partition}[/...]
pub(crate) async fn partition(
    state: AppState,
    db: String,
    path: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    if !database.is_partitioned() {
        return Err(ApiError::bad_request("database is not partitioned"));
    }
    let (name, rest) = match path.split_once('/') {
        Some((name, rest)) => (name.to_string(), rest.to_string()),
        None => (path.clone(), String::new()),
    };
    store::validate_partition(&name)?;
    // A `partition` in the query string must name the path's, as CouchDB
    // checks it on every route below the partition.
    if !rest.is_empty() && query.get("partition").is_some_and(|given| given != name) {
        return Err(ApiError::bad_request(
            "Conflicting value for `partition` in query string",
        ));
    }
    match rest.as_str() {
        "" => {
            if request.method() != Method::GET && request.method() != Method::HEAD {
                return Err(ApiError::MethodNotAllowed("GET"));
            }
            let info = database.partition_info(&name).await?;
            Ok(json_response(
                StatusCode::OK,
                &json!({
                    "db_name": database.name(),
                    "sizes": {"active": info.external_size, "external": info.external_size},
                    "partition": name,
                    "doc_count": info.doc_count,
                    "doc_del_count": info.doc_del_count,
                }),
            ))
        }
        "_all_docs" => {
            if request.method() != Method::GET
                && request.method() != Method::HEAD
                && request.method() != Method::POST
            {
                return Err(ApiError::MethodNotAllowed("GET,HEAD,POST"));
            }
            crate::database::all_docs::all_docs_in(state, db, query, request, Some(name)).await
        }
        "_find" | "_explain" => {
            crate::find::find_in(state, database, request, rest == "_explain", Some(name)).await
        }
        _ => match rest.split('/').collect::<Vec<_>>().as_slice() {
            ["_design", ddoc, "_view", view] => {
                crate::design::views::view_in(
                    state,
                    database,
                    ddoc.to_string(),
                    view.to_string(),
                    query,
                    request,
                    Some(name),
                )
                .await
            }
            ["_design", ddoc, "_nouveau", index] => {
                crate::design::search::nouveau(
                    state,
                    database,
                    ddoc.to_string(),
                    index.to_string(),
                    query,
                    request,
                    Some(name),
                )
                .await
            }
            ["_design", ddoc, "_search", index] => {
                crate::design::clouseau::search(
                    state,
                    database,
                    ddoc.to_string(),
                    index.to_string(),
                    query,
                    request,
                    Some(name),
                )
                .await
            }
            _ => Err(ApiError::not_found("missing")),
        },
    }
}
