//! `GET|POST /{db}/_local_docs`: the local documents (replication
//! checkpoints among them) listed with `_all_docs`'s parameters. As in
//! CouchDB, `total_rows` and `offset` are `null`, and `keys` that are not
//! local document ids are left out.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use store::LocalRow;

use crate::AppState;
use crate::error::ApiError;
use crate::json::{raw_json_response, read_json_object, require_json_content_type};
use crate::query::Query;

pub(crate) async fn local_docs(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    let body = if request.method() == Method::POST {
        require_json_content_type(request.headers())?;
        read_json_object(request.into_body(), &state.config).await?
    } else {
        Map::new()
    };
    let options = crate::db::all_docs_options(&query, &body)?;
    let rows: Vec<String> = match options.keys {
        Some(keys) => {
            state.config.limits.check_items(keys.len(), "keys")?;
            let mut ids: Vec<String> = keys
                .iter()
                .filter_map(Value::as_str)
                .filter(|id| id.starts_with("_local/"))
                .map(str::to_string)
                .collect();
            if options.query.descending {
                ids.reverse();
            }
            database
                .local_docs_keys(ids, options.query.include_docs)
                .await?
                .into_iter()
                .skip(options.query.skip)
                .take(options.query.limit)
                .map(|(key, row)| match row {
                    Some(row) => row_json(row),
                    None => json!({"key": key, "error": "not_found"}).to_string(),
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
    let mut out = String::from("{\"total_rows\":null,\"offset\":null,");
    if options.update_seq {
        out.push_str("\"update_seq\":null,");
    }
    out.push_str("\"rows\":[");
    for (i, row) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(row);
    }
    out.push_str("\n]}\n");
    Ok(raw_json_response(StatusCode::OK, out))
}

/// One row: id, rev and, when asked, the document.
pub(crate) fn row_json(row: LocalRow) -> String {
    let mut value = json!({"id": row.id, "key": row.id, "value": {"rev": row.rev}});
    if let Some(doc) = row.doc {
        value["doc"] = doc;
    }
    value.to_string()
}
