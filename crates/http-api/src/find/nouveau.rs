//! `_find` and `_explain` on a Mango full-text (`nouveau`) index, as
//! CouchDB's `mango_cursor_nouveau` runs them: the selector becomes a
//! Lucene query, each page of hits is fetched through the reader's own
//! view of the database, matched against the whole selector again (the
//! query only narrows), skipped, limited and projected; the bookmark is
//! the engine's, after the last hit looked at.

use std::collections::HashSet;
use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use design_functions::search::SearchApi;
use mango::MangoError;
use mango::find::FindRequest;
use mango::nouveau::{MAX_LIMIT, NouveauIndex};
use search::request::SortSpec;
use search::{IndexDefinition, SearchError, SearchRequest};
use serde_json::{Value, json};
use store::{Database, GetOptions};

use super::{SCAN_WARNING, SCAN_WARNING_RATIO, mango_error};
use crate::AppState;
use crate::base::error::ApiError;
use crate::base::response::raw_json_response;
use crate::design::search::search_error;

/// The nouveau index that answers `req`, if one does: one `use_index`
/// names, else (when no JSON index can, `json_chosen` false) the one
/// usable non-partial index; two such are CouchDB's error.
pub(super) fn choose(
    req: &FindRequest,
    indexes: &[NouveauIndex],
    json_chosen: bool,
) -> Result<Option<NouveauIndex>, MangoError> {
    let named: Vec<&NouveauIndex> = indexes
        .iter()
        .filter(|i| i.is_named(&req.use_index) && i.is_usable(req))
        .collect();
    let found: Vec<&NouveauIndex> = if !named.is_empty() {
        named
    } else if json_chosen || (req.use_index.is_some() && !req.allow_fallback) {
        return Ok(None);
    } else {
        indexes
            .iter()
            .filter(|i| !i.is_partial() && i.is_usable(req))
            .collect()
    };
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        _ => Err(MangoError::bad(
            "multiple_nouveau_indexes",
            "You must specify an index with the `use_index` parameter.".into(),
        )),
    }
}

/// The `_explain` of a query a nouveau index answers.
pub(super) fn explain(database: &Database, req: &FindRequest, index: &NouveauIndex) -> Value {
    json!({
        "dbname": database.name(),
        "index": index.describe(),
        "partitioned": database.is_partitioned(),
        "selector": mango::normal::normalize(&req.selector_json),
        "opts": req.explain_opts(),
        "limit": req.limit.min(MAX_LIMIT),
        "skip": req.skip,
        "fields": req.fields,
        "index_candidates": [{
            "index": mango::index_def::all_docs_description(),
            "analysis": {"usable": true, "reasons": [{"name": "unfavored_type"}], "ranking": 1, "covering": null},
        }],
        "selector_hints": super::selector_hints(req),
        "query": req.selector.text_query(),
        "partition": req.partition,
        "sort": mango::nouveau::explain_sort(req),
    })
}

/// The index's definition, built by the search engine like any other.
async fn definition(
    database: &Database,
    index: &NouveauIndex,
) -> Result<IndexDefinition, ApiError> {
    let ddoc = index.ddoc.strip_prefix("_design/").unwrap_or(&index.ddoc);
    let doc = crate::design::load(database, ddoc).await?;
    IndexDefinition::of(database, &doc, SearchApi::Nouveau, &index.name).map_err(search_error)
}

/// Runs `req` on `index` and answers as `_find` does.
pub(super) async fn find(
    state: AppState,
    database: Database,
    req: FindRequest,
    index: NouveauIndex,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let sort: Vec<SortSpec> = mango::nouveau::sort_fields(&req)
        .map_err(mango_error)?
        .into_iter()
        .map(|(name, descending)| SortSpec::Field { name, descending })
        .collect();
    let mut after = match &req.bookmark_text {
        Some(text) => Some(search::nouveau::decode_bookmark(text).map_err(|_| {
            mango_error(MangoError::bad(
                "invalid_bookmark",
                format!("Invalid bookmark value: {}", Value::String(text.clone())),
            ))
        })?),
        None => None,
    };
    let query = req.selector.text_query();
    let limit = req.limit.min(MAX_LIMIT);
    let mut docs: Vec<Value> = Vec::new();
    let mut docs_examined = 0u64;
    let mut bookmark = req.bookmark_text.clone();
    // An empty query asks nothing: CouchDB answers nothing.
    if !query.is_empty() && limit > 0 {
        let def = definition(&database, &index).await?;
        let engine = state.validators.engine().clone();
        let update = req.update && !req.stale;
        let ready = match state.searches.index(&engine, &database, &def, update).await {
            // Never built: built now, even for `update: false`.
            Err(SearchError::NotFound(_)) if !update => {
                state.searches.index(&engine, &database, &def, true).await
            }
            other => other,
        }
        .map_err(search_error)?;
        let mut seen = HashSet::new();
        let mut skip = req.skip;
        // Each page's search stops when the client leaves.
        let cancel = crate::base::cancel::CancelOnDrop::new();
        'pages: loop {
            let page = usize::try_from((limit - docs.len() as u64 + skip).min(MAX_LIMIT))
                .unwrap_or(usize::MAX);
            let request = SearchRequest {
                query: query.clone(),
                limit: page,
                sort: sort.clone(),
                after: after.clone(),
                partition: req.partition.clone(),
                cancel: Some(cancel.flag()),
                ..Default::default()
            };
            let searcher = ready.index.clone();
            let results = tokio::task::spawn_blocking(move || searcher.search(&request))
                .await
                .map_err(|e| ApiError::Internal(format!("a search failed: {e}")))?
                .map_err(|e| match e {
                    SearchError::QueryParse(reason) | SearchError::BadRequest(reason) => {
                        ApiError::Status {
                            status: StatusCode::INTERNAL_SERVER_ERROR,
                            error: "nouveau_search_error",
                            reason: format!("bad_request: {reason}"),
                        }
                    }
                    other => search_error(other),
                })?;
            let exhausted = results.hits.len() < page;
            let ids: Vec<String> = results.hits.iter().map(|h| h.id.clone()).collect();
            let found = database
                .all_docs_keys(
                    ids,
                    Some(GetOptions {
                        conflicts: req.conflicts,
                        ..Default::default()
                    }),
                )
                .await?;
            for (hit, (_, row)) in results.hits.iter().zip(found) {
                after = Some(hit.order.clone());
                // Read through the caller's handle: a hit they may not
                // read is skipped, and only what they may read moves the
                // bookmark (it carries the hit's sort values).
                let Some(doc) = row.filter(|r| !r.deleted).and_then(|r| r.doc) else {
                    continue;
                };
                bookmark = Some(search::nouveau::encode_bookmark(&hit.order));
                docs_examined += 1;
                let doc = doc.to_value()?;
                if !req.selector.matches(&doc) || !seen.insert(hit.id.clone()) {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                docs.push(mango::fields::project(&doc, &req.fields));
                if docs.len() as u64 >= limit {
                    break 'pages;
                }
            }
            if exhausted {
                break;
            }
        }
    }
    let bookmark = bookmark.unwrap_or_else(|| search::nouveau::encode_bookmark(&[]));
    let mut out = String::from("{\"docs\":[\r\n");
    let shown: Vec<String> = docs.iter().map(ejson::to_string).collect();
    out.push_str(&shown.join(",\r\n"));
    out.push_str(&format!(
        "\r\n],\r\n\"bookmark\": {}",
        Value::String(bookmark)
    ));
    let returned = docs.len() as u64;
    if req.execution_stats {
        let stats = json!({
            "total_keys_examined": 0,
            "total_docs_examined": docs_examined,
            "total_quorum_docs_examined": 0,
            "results_returned": returned,
            "execution_time_ms": started.elapsed().as_secs_f64() * 1000.0,
        });
        out.push_str(&format!(",\r\n\"execution_stats\": {stats}"));
    }
    if docs_examined / returned.max(1) > SCAN_WARNING_RATIO {
        out.push_str(&format!(
            ",\r\n\"warning\": {}",
            Value::String(SCAN_WARNING.into())
        ));
    }
    out.push_str("}\r\n");
    Ok(raw_json_response(StatusCode::OK, out.into_bytes()))
}
