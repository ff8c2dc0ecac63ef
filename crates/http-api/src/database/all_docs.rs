//! `GET|POST /{db}/_all_docs` (and a partition's): rows streamed page by
//! page, by range or by `keys`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream;
use serde_json::Value;
use std::ops::Bound;
use store::{AllDocsQuery, AllDocsRow, Database};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::listing::{listing, listing_response, not_found_row};
use crate::base::params::Query;

/// Rows fetched from the store per page while streaming a long answer.
const PAGE_ROWS: usize = 1000;

/// One `_all_docs` row; a deleted document's (asked for by key) has
/// `"doc": null` with `include_docs`, as in CouchDB.
fn all_docs_row_json(row: &AllDocsRow, include_docs: bool) -> String {
    let mut out = String::with_capacity(96 + row.doc.as_ref().map_or(0, |d| d.as_str().len()));
    let doc = match &row.doc {
        Some(doc) => Some(Some(doc.as_str())),
        None if row.deleted && include_docs => Some(None),
        None => None,
    };
    wire::rows::write_all_docs_row(&mut out, &row.id, &row.rev, row.deleted, doc);
    out
}

/// Narrows a listing to a partition's ids: its live documents, and how
/// many live documents come before the partition in the listing's
/// direction (taken off `offset`).
async fn clamp_to_partition(
    database: &Database,
    query: &mut AllDocsQuery,
    partition: &str,
) -> Result<(u64, u64), ApiError> {
    let (low, high) = store::partition_range(partition);
    let (low, high) = (Bound::Included(low), Bound::Excluded(high));
    let later = |a: &Bound<String>, b: &Bound<String>| bound_key(a) >= bound_key(b);
    let open = |b: &Bound<String>| *b == Bound::Unbounded;
    if query.descending {
        if open(&query.start) || later(&query.start, &high) {
            query.start = high.clone();
        }
        if open(&query.end) || !later(&query.end, &low) {
            query.end = low.clone();
        }
    } else {
        if open(&query.start) || !later(&query.start, &low) {
            query.start = low.clone();
        }
        if open(&query.end) || later(&query.end, &high) {
            query.end = high.clone();
        }
    }
    let edge = if query.descending { high } else { low };
    let outside = database
        .all_docs(AllDocsQuery {
            start: edge,
            descending: query.descending,
            limit: 0,
            count_offset: true,
            ..Default::default()
        })
        .await?
        .offset
        .unwrap_or(0);
    Ok((database.partition_info(partition).await?.doc_count, outside))
}

/// A bound's id for comparing bounds (unbounded sorts first).
fn bound_key(bound: &Bound<String>) -> Option<&str> {
    match bound {
        Bound::Included(s) | Bound::Excluded(s) => Some(s),
        Bound::Unbounded => None,
    }
}

/// # GET|POST /{db}/_all_docs
/// Streams the rows page by page: memory stays flat however large the database.
pub(crate) async fn all_docs(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    all_docs_in(state, db, query, request, None).await
}

/// `_all_docs` of the whole database, or of one partition
/// (`/{db}/_partition/{p}/_all_docs`): its ids only, counted on their own.
pub(crate) async fn all_docs_in(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    let (database, mut options) = listing(&state, &db, &query, request).await?;
    let asked = (options.query.limit != usize::MAX).then_some(options.query.limit as u64);
    if let Some(limit) = state.config.limits.query_rows(asked, partition.is_some())? {
        options.query.limit = usize::try_from(limit).unwrap_or(usize::MAX);
    }
    if let Some(keys) = options.keys {
        return all_docs_by_keys(database, keys, &options.query, options.update_seq).await;
    }
    let scope = match &partition {
        Some(p) => Some(clamp_to_partition(&database, &mut options.query, p).await?),
        None => None,
    };
    let mut first = options.query.clone();
    first.limit = first.limit.min(PAGE_ROWS);
    let mut remaining = options.query.limit;
    let page = if options.empty {
        let mut none = first.clone();
        none.limit = 0;
        database.all_docs(none).await?
    } else {
        database.all_docs(first.clone()).await?
    };
    let (total_rows, offset) = match scope {
        Some((count, outside)) => (count, page.offset.unwrap_or(0).saturating_sub(outside)),
        None => (page.total_rows, page.offset.unwrap_or(0)),
    };
    let mut head = format!("{{\"total_rows\":{total_rows},\"offset\":{offset},");
    if options.update_seq {
        head.push_str(&format!(
            "\"update_seq\":{},",
            wire::json::string(&database.seq_string(page.update_seq))
        ));
    }
    head.push_str("\"rows\":[");
    remaining = remaining.saturating_sub(page.rows.len());
    let done = options.empty || page.rows.len() < first.limit || remaining == 0;
    let next = AllDocsQuery {
        start: page
            .rows
            .last()
            .map_or(first.start.clone(), |r| Bound::Excluded(r.id.clone())),
        skip: 0,
        count_offset: false,
        ..options.query
    };
    let mut chunk = head;
    for (i, row) in page.rows.iter().enumerate() {
        chunk.push_str(if i == 0 { "\n" } else { ",\n" });
        chunk.push_str(&all_docs_row_json(row, false));
    }
    let had_rows = !page.rows.is_empty();
    struct Pager {
        db: Database,
        next: AllDocsQuery,
        remaining: usize,
        done: bool,
        had_rows: bool,
        first: Option<String>,
        finished: bool,
    }
    let pager = Pager {
        db: database,
        next,
        remaining,
        done,
        had_rows,
        first: Some(chunk),
        finished: false,
    };
    let body_stream = stream::unfold(pager, |mut p| async move {
        if let Some(first) = p.first.take() {
            return Some((Ok::<Bytes, std::io::Error>(Bytes::from(first)), p));
        }
        if p.finished {
            return None;
        }
        if p.done {
            p.finished = true;
            return Some((Ok(Bytes::from_static(b"\n]}\n")), p));
        }
        let mut q = p.next.clone();
        q.limit = p.remaining.min(PAGE_ROWS);
        match p.db.all_docs(q.clone()).await {
            Ok(page) => {
                let mut chunk = String::new();
                for row in &page.rows {
                    chunk.push_str(if p.had_rows { ",\n" } else { "\n" });
                    p.had_rows = true;
                    chunk.push_str(&all_docs_row_json(row, false));
                }
                p.remaining = p.remaining.saturating_sub(page.rows.len());
                p.done = page.rows.len() < q.limit || p.remaining == 0;
                if let Some(last) = page.rows.last() {
                    p.next.start = Bound::Excluded(last.id.clone());
                }
                Some((Ok(Bytes::from(chunk)), p))
            }
            Err(e) => {
                // The status line is gone; end the body so the client sees truncated JSON.
                tracing::error!(error = %e, "_all_docs stream failed");
                p.finished = true;
                Some((Err(std::io::Error::other(e.to_string())), p))
            }
        }
    });
    let mut response = Response::new(Body::from_stream(body_stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

async fn all_docs_by_keys(
    database: Database,
    keys: Vec<Value>,
    query: &AllDocsQuery,
    update_seq: bool,
) -> Result<Response, ApiError> {
    let info = database.info().await?;
    let mut keys = keys;
    if query.descending {
        keys.reverse();
    }
    let ids: Vec<Option<String>> = keys
        .iter()
        .map(|k| k.as_str().map(str::to_string))
        .collect();
    // Local documents are not in `_all_docs`'s range, but CouchDB answers
    // them by key.
    let is_local = |id: &String| id.starts_with("_local/");
    let lookup: Vec<String> = ids
        .iter()
        .flatten()
        .filter(|id| !is_local(id))
        .cloned()
        .collect();
    let locals: Vec<String> = ids
        .iter()
        .flatten()
        .filter(|id| is_local(id))
        .cloned()
        .collect();
    let mut found = database
        .all_docs_keys(lookup, query.doc_options())
        .await?
        .into_iter();
    let mut found_locals = database
        .local_docs_keys(locals, query.include_docs)
        .await?
        .into_iter();
    let mut rows = Vec::new();
    for (key, id) in keys.iter().zip(ids.iter()) {
        let row = match id {
            Some(id) if is_local(id) => found_locals
                .next()
                .and_then(|(_, row)| row)
                .map(crate::database::local_docs::row_json),
            Some(_) => found
                .next()
                .and_then(|(_, row)| row)
                .map(|row| all_docs_row_json(&row, query.include_docs)),
            None => None,
        };
        rows.push(row.unwrap_or_else(|| not_found_row(key)));
    }
    let rows: Vec<String> = rows
        .into_iter()
        .skip(query.skip)
        .take(query.limit)
        .collect();
    // CouchDB has no offset to give for keys.
    let mut head = format!("\"total_rows\":{},\"offset\":null,", info.doc_count);
    if update_seq {
        head.push_str(&format!(
            "\"update_seq\":{},",
            wire::json::string(&database.seq_string(info.update_seq))
        ));
    }
    Ok(listing_response(&head, &rows))
}
