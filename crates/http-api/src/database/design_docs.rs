//! `GET|POST /{db}/_design_docs`: `_all_docs` over the design documents
//! only, answered as CouchDB 3.5 does: `total_rows` counts the design
//! documents, `offset` is the number of documents before the `_design/`
//! range whatever the parameters, and `keys` that are not design document
//! ids are left out.

use std::ops::Bound;

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};
use store::{AllDocsQuery, Database};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;

/// The first id of the range, and the first id after it.
const LOW: &str = "_design/";
const HIGH: &str = "_design0";

/// # GET|POST /{db}/_design_docs
/// The design documents, as `_all_docs` lists documents.
pub(crate) async fn design_docs(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let (database, options) = crate::base::listing::listing(&state, &db, &query, request).await?;
    let (total, before) = counts(&database).await?;
    let include_docs = options.query.include_docs;
    let by_keys = options.keys.is_some();
    let update_seq = options.update_seq;
    let rows: Vec<String> = match options.keys {
        Some(keys) => {
            let ids = crate::base::listing::keyed_ids(&keys, LOW, options.query.descending);
            database
                .all_docs_keys(ids, options.query.doc_options())
                .await?
                .into_iter()
                .skip(options.query.skip)
                .take(options.query.limit)
                .map(|(key, row)| match row {
                    Some(row) => row_json(&row, include_docs),
                    None => crate::base::listing::not_found_row(&key),
                })
                .collect()
        }
        None if options.empty => Vec::new(),
        None => {
            let mut q = options.query;
            clamp(&mut q);
            q.count_offset = false;
            database
                .all_docs(q)
                .await?
                .rows
                .iter()
                .map(|row| row_json(row, include_docs))
                .collect()
        }
    };
    let offset = if by_keys {
        "null".to_string()
    } else {
        before.to_string()
    };
    let mut head = format!("\"total_rows\":{total},\"offset\":{offset},");
    if update_seq {
        let info = database.info().await?;
        head.push_str(&format!(
            "\"update_seq\":{},",
            wire::json::string(&database.seq_string(info.update_seq))
        ));
    }
    Ok(crate::base::listing::listing_response(&head, &rows))
}

/// How many design documents there are, and how many documents sort
/// before them.
async fn counts(database: &Database) -> Result<(u64, u64), ApiError> {
    let page = database
        .all_docs(AllDocsQuery {
            start: Bound::Included(LOW.into()),
            end: Bound::Excluded(HIGH.into()),
            ..Default::default()
        })
        .await?;
    Ok((page.rows.len() as u64, page.offset.unwrap_or(0)))
}

/// Narrows a query's range to the design documents.
fn clamp(q: &mut AllDocsQuery) {
    let (low, high) = if q.descending {
        (&mut q.end, &mut q.start)
    } else {
        (&mut q.start, &mut q.end)
    };
    let below = match &*low {
        Bound::Unbounded => true,
        Bound::Included(k) | Bound::Excluded(k) => k.as_str() < LOW,
    };
    if below {
        *low = Bound::Included(LOW.into());
    }
    let above = match &*high {
        Bound::Unbounded => true,
        Bound::Included(k) | Bound::Excluded(k) => k.as_str() >= HIGH,
    };
    if above {
        *high = Bound::Excluded(HIGH.into());
    }
}

fn row_json(row: &store::AllDocsRow, include_docs: bool) -> String {
    let mut value = json!({"id": row.id, "key": row.id, "value": {"rev": row.rev.to_string()}});
    if row.deleted {
        value["value"]["deleted"] = json!(true);
    }
    if include_docs {
        value["doc"] = match &row.doc {
            Some(doc) => ejson::from_stored(doc.as_str()).unwrap_or(Value::Null),
            None => Value::Null,
        };
    }
    ejson::to_string(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_narrowed_to_design_documents_in_both_directions() {
        let mut q = AllDocsQuery::default();
        clamp(&mut q);
        assert_eq!(
            (q.start, q.end),
            (Bound::Included(LOW.into()), Bound::Excluded(HIGH.into()))
        );
        let mut q = AllDocsQuery {
            start: Bound::Included("_design/m".into()),
            end: Bound::Included("zzz".into()),
            ..Default::default()
        };
        clamp(&mut q);
        assert_eq!(
            (q.start, q.end),
            (
                Bound::Included("_design/m".into()),
                Bound::Excluded(HIGH.into())
            )
        );
        let mut q = AllDocsQuery {
            descending: true,
            end: Bound::Included("_design/c".into()),
            ..Default::default()
        };
        clamp(&mut q);
        assert_eq!(
            (q.start, q.end),
            (
                Bound::Excluded(HIGH.into()),
                Bound::Included("_design/c".into())
            )
        );
    }
}
