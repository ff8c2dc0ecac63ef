//! Clouseau's search API over HTTP (`_search`, `_search_info`,
//! `_search_disk_size`; `_search_cleanup` is `search::cleanup`), as CouchDB
//! with dreyfus answers it. The engine (`search::clouseau`) checks and runs
//! the query; this floor reads requests, applies the reader's scope and
//! fetches `include_docs`.

use axum::http::{Method, StatusCode};
use design_functions::search::SearchApi;
use search::clouseau::{self, ClouseauParams};
use search::{IndexDefinition, Ready, SearchError, SearchRequest};
use serde_json::{Map, Value, json};
use store::{Database, GetOptions};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;
use crate::design::search::search_error;

type Request = axum::http::Request<axum::body::Body>;
type Response = axum::response::Response;

/// # GET|POST /{db}/_design/{ddoc}/_search/{index}
/// (and `/{db}/_partition/{p}/_design/{ddoc}/_search/{index}`)
pub(crate) async fn search(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    query: Query,
    request: Request,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    let method = request.method().clone();
    let mut params = if method == Method::GET {
        ClouseauParams::from_query(query.pairs()).map_err(search_error)?
    } else if method == Method::POST {
        crate::base::json_body::require_json_content_type(request.headers())?;
        let body =
            crate::base::json_body::read_json_object(request.into_body(), &state.config).await?;
        let qs_partition = query
            .pairs()
            .iter()
            .find(|(k, _)| k == "partition")
            .map(|(_, v)| v.as_str());
        ClouseauParams::from_body(&body, qs_partition).map_err(search_error)?
    } else {
        return Err(ApiError::MethodNotAllowed("GET,POST"));
    };
    // The partition route names the partition; it wins over a parameter.
    if let Some(partition) = partition {
        params.partition = Some(partition);
    }
    let doc = crate::design::load(&database, &ddoc).await?;
    let db_partitioned = database.is_partitioned();
    let index_partitioned = doc
        .pointer("/options/partitioned")
        .and_then(Value::as_bool)
        .unwrap_or(db_partitioned);
    let limit = params
        .check(db_partitioned, index_partitioned)
        .map_err(search_error)?;
    let def =
        IndexDefinition::of(&database, &doc, SearchApi::Clouseau, &name).map_err(search_error)?;
    let ready = ready(&state, &database, &def, !params.stale).await?;
    // The search stops when its client leaves.
    let cancel = crate::base::cancel::CancelOnDrop::new();
    let base = SearchRequest {
        partition: params.partition.clone(),
        cancel: Some(cancel.flag()),
        ..SearchRequest::default()
    };
    let index = ready.index.clone();
    let run_params = params.clone();
    let outcome =
        tokio::task::spawn_blocking(move || clouseau::run(&index, &run_params, limit, base))
            .await
            .map_err(|e| ApiError::Internal(format!("a search failed: {e}")))?
            .map_err(search_error)?;
    let docs = if params.include_docs {
        let mut docs = Map::new();
        let grouped = outcome.groups.iter().flatten().flat_map(|g| &g.rows);
        for row in outcome.rows.iter().chain(grouped) {
            let id = row.id.clone();
            if docs.contains_key(&id) {
                continue;
            }
            let doc = match database.get(&id, GetOptions::default()).await {
                Ok(doc) => doc.to_value()?,
                Err(store::StoreError::DocNotFound(_)) => Value::Null,
                Err(e) => return Err(e.into()),
            };
            docs.insert(id, doc);
        }
        Some(docs)
    } else {
        None
    };
    Ok(json_response(
        StatusCode::OK,
        &clouseau::response(&outcome, docs.as_ref()),
    ))
}

/// # GET /{db}/_design/{ddoc}/_search_info/{index}
pub(crate) async fn search_info(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed("GET"));
    }
    let def = definition(&database, &ddoc, &name).await?;
    let ready = ready(&state, &database, &def, false).await?;
    Ok(json_response(
        StatusCode::OK,
        &info(&format!("_design/{ddoc}/{name}"), &ready.index),
    ))
}

/// # GET /{db}/_design/{ddoc}/_search_disk_size/{index}
pub(crate) async fn search_disk_size(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed("GET"));
    }
    let def = definition(&database, &ddoc, &name).await?;
    let ready = ready(&state, &database, &def, false).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "name": format!("_design/{ddoc}/{name}"),
            "search_index": {"disk_size": ready.index.disk_size()},
        }),
    ))
}

/// The index, updated when `update`; one never built is built (Clouseau
/// opens an empty index rather than refusing).
async fn ready(
    state: &AppState,
    database: &Database,
    def: &IndexDefinition,
    update: bool,
) -> Result<Ready, ApiError> {
    let engine = state.validators.engine().clone();
    match state.searches.index(&engine, database, def, update).await {
        Ok(ready) => Ok(ready),
        Err(SearchError::NotFound(_)) if !update => state
            .searches
            .index(&engine, database, def, true)
            .await
            .map_err(search_error),
        Err(e) => Err(search_error(e)),
    }
}

/// Index `name` of `_design/{ddoc}`'s `indexes` section.
async fn definition(
    database: &Database,
    ddoc: &str,
    name: &str,
) -> Result<IndexDefinition, ApiError> {
    let doc = crate::design::load(database, ddoc).await?;
    IndexDefinition::of(database, &doc, SearchApi::Clouseau, name).map_err(search_error)
}

/// `_search_info`'s answer: Clouseau's `info` plus dreyfus's signature;
/// `doc_del_count` counts the deleted or replaced documents a merge has
/// not dropped yet, as Lucene's `numDeletedDocs`.
fn info(name: &str, index: &search::SearchIndex) -> Value {
    let committed = index.committed();
    json!({
        "name": name,
        "search_index": {
            "pending_seq": committed.update_seq,
            "doc_del_count": index.num_deleted_docs(),
            "doc_count": index.num_docs(),
            "disk_size": index.disk_size(),
            "committed_seq": committed.update_seq,
            "signature": index.definition().signature,
        }
    })
}
