//! Full-text search over HTTP: Nouveau's `_nouveau`, `_nouveau_info` and
//! `_nouveau_cleanup`, with CouchDB's parameters, answers and errors. The
//! engine (`search`) builds and searches the indexes; this floor reads
//! requests, applies the reader's scope and fetches `include_docs`.

use axum::http::{Method, StatusCode};
use design_functions::search::SearchApi;
use search::nouveau::{self, NouveauParams};
use search::{IndexDefinition, SearchError};
use serde_json::{Value, json};
use store::{Database, GetOptions};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;

type Request = axum::http::Request<axum::body::Body>;
type Response = axum::response::Response;

/// A search failure as CouchDB answers it.
pub(crate) fn search_error(e: SearchError) -> ApiError {
    match e {
        SearchError::NotFound(reason) => ApiError::not_found(reason),
        SearchError::QueryParse(reason) => ApiError::Invalid {
            error: "query_parse_error",
            reason,
        },
        SearchError::BadRequest(reason) => ApiError::bad_request(reason),
        SearchError::InvalidDesignDoc(reason) => ApiError::Invalid {
            error: "invalid_design_doc",
            reason,
        },
        SearchError::Store(e) => e.into(),
        SearchError::Script(e) => crate::base::error::script_error(e),
        SearchError::Engine(detail) => ApiError::Internal(detail),
    }
}

/// # GET|POST /{db}/_design/{ddoc}/_nouveau/{index}
/// (and `/{db}/_partition/{p}/_design/{ddoc}/_nouveau/{index}`)
pub(crate) async fn nouveau(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    query: Query,
    request: Request,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    let _timer = state.stats.search_started();
    let method = request.method().clone();
    let mut params = if method == Method::GET {
        NouveauParams::from_query(query.pairs()).map_err(search_error)?
    } else if method == Method::POST {
        crate::base::json_body::require_json_content_type(request.headers())?;
        let body =
            crate::base::json_body::read_json_object(request.into_body(), &state.config).await?;
        NouveauParams::from_body(&body).map_err(search_error)?
    } else {
        return Err(ApiError::MethodNotAllowed("GET,POST"));
    };
    let def = definition(&database, &ddoc, &name).await?;
    if let Some(partition) = &partition {
        if !def.partitioned {
            return Err(ApiError::bad_request(
                "`partition` not supported on this index",
            ));
        }
        params.request.partition = Some(partition.clone());
    } else if def.partitioned {
        return Err(ApiError::bad_request(
            "`partition` parameter is mandatory for queries to this index.",
        ));
    }
    let engine = state.validators.engine().clone();
    let ready = state
        .searches
        .index(&engine, &database, &def, params.update)
        .await
        .map_err(search_error)?;
    state.stats.record_search_update(ready.update_latency);
    let index = ready.index.clone();
    let mut request = params.request.clone();
    // The search stops when its client leaves.
    let cancel = crate::base::cancel::CancelOnDrop::new();
    request.cancel = Some(cancel.flag());
    let results = tokio::task::spawn_blocking(move || index.search(&request))
        .await
        .map_err(|e| ApiError::Internal(format!("a search failed: {e}")))?
        .map_err(search_error)?;
    let docs = if params.include_docs {
        let mut docs = Vec::with_capacity(results.hits.len());
        for hit in &results.hits {
            docs.push(match database.get(&hit.id, GetOptions::default()).await {
                Ok(doc) => doc.to_value()?,
                Err(store::StoreError::DocNotFound(_)) => Value::Null,
                Err(e) => return Err(e.into()),
            });
        }
        Some(docs)
    } else {
        None
    };
    // Milliseconds, rounded up: an update that ran is never reported as none.
    let latency =
        u64::try_from(ready.update_latency.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
    Ok(json_response(
        StatusCode::OK,
        &nouveau::response(&params, &results, docs, latency),
    ))
}

/// # GET /{db}/_design/{ddoc}/_nouveau_info/{index}
pub(crate) async fn nouveau_info(
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
    let engine = state.validators.engine().clone();
    let ready = state.searches.index(&engine, &database, &def, false).await;
    let ready = match ready {
        Ok(ready) => ready,
        // Never built: an empty index, as CouchDB reports one.
        Err(SearchError::NotFound(_)) => state
            .searches
            .index(&engine, &database, &def, true)
            .await
            .map_err(search_error)?,
        Err(e) => return Err(search_error(e)),
    };
    Ok(json_response(
        StatusCode::OK,
        &nouveau::info(&format!("_design/{ddoc}"), &name, &ready.index),
    ))
}

/// # POST /{db}/_nouveau_cleanup (and `_search_cleanup`)
/// Deletes the database's search indexes no design document defines.
pub(crate) async fn cleanup(
    state: AppState,
    database: Database,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed("POST"));
    }
    crate::base::json_body::require_json_content_type(request.headers())?;
    let ddocs = design_docs(&database).await?;
    let keep = search::definition::signatures_in_use(&database, &ddocs);
    state
        .searches
        .cleanup(&database, &keep)
        .await
        .map_err(search_error)?;
    Ok(json_response(StatusCode::ACCEPTED, &json!({"ok": true})))
}

/// Index `name` of `_design/{ddoc}`'s `nouveau` section.
async fn definition(
    database: &Database,
    ddoc: &str,
    name: &str,
) -> Result<IndexDefinition, ApiError> {
    let doc = crate::design::load(database, ddoc).await?;
    IndexDefinition::of(database, &doc, SearchApi::Nouveau, name).map_err(search_error)
}

/// Every design document of the database, as JSON.
async fn design_docs(database: &Database) -> Result<Vec<Value>, ApiError> {
    let page = database
        .unscoped()
        .all_docs(store::AllDocsQuery {
            start: std::ops::Bound::Included("_design/".into()),
            end: std::ops::Bound::Excluded("_design0".into()),
            include_docs: true,
            ..Default::default()
        })
        .await?;
    let mut out = Vec::new();
    for row in page.rows {
        if let Some(doc) = row.doc {
            out.push(doc.to_value()?);
        }
    }
    Ok(out)
}
