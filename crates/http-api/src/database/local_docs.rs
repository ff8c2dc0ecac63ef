//! `GET|POST /{db}/_local_docs`: the local documents (replication
//! checkpoints among them) listed with `_all_docs`'s parameters. As in
//! CouchDB, `total_rows` and `offset` are `null`, and `keys` that are not
//! local document ids are left out.

use axum::extract::Request;
use axum::response::Response;
use serde_json::json;
use store::LocalRow;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;

/// # GET|POST /{db}/_local_docs
/// The local documents, as `_all_docs` lists documents.
pub(crate) async fn local_docs(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let (database, options) = crate::base::listing::listing(&state, &db, &query, request).await?;
    let rows: Vec<String> = match options.keys {
        Some(keys) => {
            let ids = crate::base::listing::keyed_ids(&keys, "_local/", options.query.descending);
            database
                .local_docs_keys(ids, options.query.include_docs)
                .await?
                .into_iter()
                .skip(options.query.skip)
                .take(options.query.limit)
                .map(|(key, row)| match row {
                    Some(row) => row_json(row),
                    None => crate::base::listing::not_found_row(&key),
                })
                .collect()
        }
        None if options.empty => Vec::new(),
        None => database
            .local_docs(options.query)
            .await?
            .into_iter()
            .map(row_json)
            .collect(),
    };
    let mut head = String::from("\"total_rows\":null,\"offset\":null,");
    if options.update_seq {
        head.push_str("\"update_seq\":null,");
    }
    Ok(crate::base::listing::listing_response(&head, &rows))
}

/// One row: id, rev and, when asked, the document.
pub(crate) fn row_json(row: LocalRow) -> String {
    let mut value = json!({"id": row.id, "key": row.id, "value": {"rev": row.rev}});
    if let Some(doc) = row.doc {
        value["doc"] = doc;
    }
    ejson::to_string(&value)
}
