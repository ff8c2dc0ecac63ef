//! `POST /{db}/_bulk_get`: many revisions in one answer, streamed a page
//! of documents at a time.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use store::{Database, DocJson, RevisionsRequest};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::read_json_object;
use crate::base::params::{Query, parse_rev, rev_list};

/// # POST /{db}/_bulk_get
pub(crate) async fn bulk_get(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let Some(Value::Array(docs)) = body.get("docs") else {
        return Err(ApiError::bad_request("Missing JSON list of 'docs'."));
    };
    state.config.limits.check_items(docs.len(), "documents")?;
    let partitioned = database.is_partitioned();
    let requests: Vec<BulkGetEntry> = docs
        .iter()
        .map(|entry| bulk_get_entry(entry, partitioned))
        .collect();
    let options = BulkGetOptions {
        revs: query.flag("revs")?,
        latest: query.flag("latest")?,
        attachments: query.flag("attachments")?,
    };
    // The answer streams a page of documents at a time: however many are
    // asked for, only one page of them is held at once. The first page is
    // read before answering, so a failure there is still a proper error.
    let mut pages: std::collections::VecDeque<Vec<BulkGetEntry>> =
        std::collections::VecDeque::new();
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        pages.push_back(requests.by_ref().take(BULK_GET_PAGE).collect());
    }
    let first = match pages.pop_front() {
        Some(page) => bulk_get_page(&database, page, options, true).await?,
        None => String::new(),
    };
    let head = Bytes::from(format!("{{\"results\":[{first}"));
    let rest = stream::unfold(
        (database, pages, false),
        move |(database, mut pages, done)| async move {
            if done {
                return None;
            }
            match pages.pop_front() {
                Some(page) => match bulk_get_page(&database, page, options, false).await {
                    Ok(text) => Some((Ok(Bytes::from(text)), (database, pages, false))),
                    Err(e) => {
                        // The status is sent: cutting the body is the only
                        // way left to tell the client the answer is incomplete.
                        tracing::error!(error = ?e, "_bulk_get failed midway");
                        Some((
                            Err(std::io::Error::other("_bulk_get failed midway")),
                            (database, pages, true),
                        ))
                    }
                },
                None => Some((Ok(Bytes::from_static(b"]}\n")), (database, pages, true))),
            }
        },
    );
    let body = stream::once(async move { Ok::<Bytes, std::io::Error>(head) }).chain(rest);
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Documents per page of a streamed `_bulk_get` answer.
const BULK_GET_PAGE: usize = 100;

#[derive(Debug, Clone, Copy)]
struct BulkGetOptions {
    revs: bool,
    latest: bool,
    attachments: bool,
}

/// One entry of a `_bulk_get` request: a read to make, or CouchDB's
/// answer for an entry it cannot read (the other entries are still read).
enum BulkGetEntry {
    Read(RevisionsRequest),
    Refused(Value),
}

fn bulk_get_entry(entry: &Value, partitioned: bool) -> BulkGetEntry {
    let refused_as = |id: &Value, rev: &Value, error: &str, reason: &str| {
        BulkGetEntry::Refused(json!({"id": id, "docs": [{"error": {
            "id": id, "rev": rev, "error": error, "reason": reason}}]}))
    };
    let refused =
        |id: &Value, rev: &Value, reason: &str| refused_as(id, rev, "bad_request", reason);
    let Some(id) = entry.get("id").and_then(Value::as_str) else {
        return refused(&Value::Null, &Value::Null, "document id missed");
    };
    // An id no document can have is refused as a write of it would be.
    let valid = store::validate_doc_id(id).and_then(|()| {
        if partitioned {
            store::validate_partitioned_id(id)
        } else {
            Ok(())
        }
    });
    if let Err(e) = valid {
        let (_, error, reason) = ApiError::from(e).error_info();
        return refused_as(&json!(id), &Value::Null, error, &reason);
    }
    let rev = match entry.get("rev").and_then(Value::as_str).map(parse_rev) {
        None => None,
        Some(Ok(rev)) => Some(rev),
        Some(Err(_)) => return refused(&json!(id), &entry["rev"], "Invalid rev format"),
    };
    let atts_since = match entry.get("atts_since").map(|v| rev_list(v, "atts_since")) {
        None => Vec::new(),
        Some(Ok(revs)) => revs,
        Some(Err(_)) => return refused(&json!(id), &entry["rev"], "Invalid rev format"),
    };
    BulkGetEntry::Read(RevisionsRequest {
        id: id.to_string(),
        rev,
        atts_since,
    })
}

/// One page of `_bulk_get` results as JSON text, comma-led unless `first`.
async fn bulk_get_page(
    database: &Database,
    entries: Vec<BulkGetEntry>,
    options: BulkGetOptions,
    first: bool,
) -> Result<String, ApiError> {
    let mut reads = Vec::with_capacity(entries.len());
    let mut order = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            BulkGetEntry::Read(request) => {
                reads.push(request);
                order.push(None);
            }
            BulkGetEntry::Refused(answer) => order.push(Some(answer)),
        }
    }
    let mut results = database
        .bulk_get(reads, options.revs, options.latest, options.attachments)
        .await?
        .into_iter();
    let mut out = String::new();
    for (i, refused) in order.into_iter().enumerate() {
        if i > 0 || !first {
            out.push(',');
        }
        if let Some(answer) = refused {
            out.push_str(&ejson::to_string(&answer));
            continue;
        }
        let Some(result) = results.next() else {
            return Err(ApiError::Internal("_bulk_get lost an answer".into()));
        };
        let docs = result
            .docs
            .iter()
            .map(|doc| doc.as_ref().map(DocJson::as_str));
        wire::rows::write_bulk_get_result(&mut out, &result.id, docs);
    }
    Ok(out)
}
