//! `GET|POST /{db}/_changes`: normal, longpoll, continuous and eventsource
//! feeds, streamed page by page. Waiting feeds sleep on the database's
//! update-sequence channel (no lock, no polling) and wake within
//! milliseconds of a commit; when the client goes away the response stream
//! is dropped and the feed ends with it.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream;
use serde_json::{Map, Value};
use store::{ChangeRow, ChangesQuery, Database};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;

/// Rows fetched from the store per page.
const PAGE_ROWS: usize = 500;
/// CouchDB's default wait for longpoll and continuous feeds without a heartbeat.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// CouchDB's heartbeat when `heartbeat=true` is given without a number.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    Normal,
    Longpoll,
    Continuous,
    EventSource,
}

/// Which documents the feed shows.
#[derive(Debug, Clone)]
enum Filter {
    All,
    /// `filter=_design`: design documents only.
    Design,
    /// `filter=_selector`: documents matching a Mango selector.
    Selector(mango::selector::Selector),
    /// `filter=ddoc/name` or `filter=_view`: a design document's function
    /// decides, a page of documents at a time.
    Script(design_functions::DocFilter),
}

impl Filter {
    /// Whether a row passes; rows must carry their document for selectors.
    /// Script filters decide for a whole page beforehand (see `read_page`).
    fn passes(&self, row: &ChangeRow) -> bool {
        match self {
            Filter::All | Filter::Script(_) => true,
            Filter::Design => row.id.starts_with("_design/"),
            Filter::Selector(selector) => design_functions::selector_passes(selector, row),
        }
    }
}

/// What the feed's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A database's changes.
    Changes,
    /// `_db_updates`: the changes of `_global_changes`, each document
    /// (`type:db`) shown as the event it records.
    DbUpdates,
}

/// Everything a feed needs to run.
struct FeedRun {
    db: Database,
    shape: Shape,
    feed: Feed,
    base: ChangesQuery,
    filter: Filter,
    include_docs: bool,
    limit: usize,
    heartbeat: Option<Duration>,
    timeout: Duration,
    /// Turns true when the server stops: waiting feeds end then.
    shutdown: watch::Receiver<bool>,
}

/// A sequence, or (CouchDB's next release) a time `YYYY-MM-DDTHH:MM:SSZ`:
/// the feed then starts before the time bin holding it, so no change made
/// since that time is missed (some older ones may come too).
async fn parse_since(text: &str, db: &Database) -> Result<u64, ApiError> {
    match store::time_seq::parse_time(text) {
        Some(Ok(time)) => Ok(db.seq_since_time(time).await?),
        Some(Err(_)) => Err(ApiError::bad_request("invalid_time_format")),
        None => {
            let malformed = |e: store::MalformedSeq| ApiError::bad_request(e.to_string());
            let seq = db.parse_seq(text).map_err(malformed)?;
            // A sequence past the end is no sequence of this database, as
            // CouchDB answers: a client that kept the `last_seq` of such a
            // feed would skip the changes that come next. (The store is
            // asked before refusing: another node may have written since
            // this one last looked.)
            if seq > db.update_seq() && seq > db.stored_update_seq().await? {
                return Err(malformed(store::MalformedSeq));
            }
            Ok(seq)
        }
    }
}

/// The quoted ETag of a normal feed: the database instance, its latest
/// sequence and the query (CouchDB's leaves the query out, so two different
/// queries could share a tag; this one cannot).
fn changes_etag(db: &Database, query: &str) -> String {
    let mut text = format!("{}\n{}\n{query}", db.uuid(), db.update_seq());
    // A user's feed of a database with per-document access is theirs.
    for principal in db.reader().unwrap_or_default() {
        text.push('\n');
        text.push_str(principal);
    }
    format!(
        "\"{}\"",
        crate::base::response::content_etag(text.as_bytes())
    )
}

fn duration_ms(query: &Query, key: &str) -> Result<Option<Duration>, ApiError> {
    Ok(query.u64(key)?.map(Duration::from_millis))
}

/// # GET|POST /{db}/_changes
pub(crate) async fn changes(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    let method = request.method().clone();
    let request_headers = request.headers().clone();
    // A normal feed read with GET is tagged by the database's state and the
    // query, as CouchDB tags it, so a client that has it gets a 304.
    let etag = (request.method() == Method::GET && query.get("feed").is_none_or(|f| f == "normal"))
        .then(|| changes_etag(&database, request.uri().query().unwrap_or("")));
    if let Some(etag) = &etag
        && crate::base::response::etag_matches(request.headers(), etag)
    {
        return Ok(crate::base::response::not_modified(etag));
    }
    let last_event_header = request
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = if request.method() == Method::POST {
        crate::base::json_body::require_json_content_type(request.headers())?;
        match crate::base::json_body::read_json_body(request.into_body(), &state.config).await? {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(ApiError::bad_request("Request body must be a JSON object")),
        }
    } else {
        Map::new()
    };
    let feed = match query.get("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        // `live` is CouchDB's other name for `continuous`.
        "continuous" | "live" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        _ => {
            return Err(ApiError::bad_request(
                "Supported `feed` types: normal, continuous, live, longpoll, eventsource",
            ));
        }
    };
    // A browser reconnecting an event stream names the last event it saw
    // in a header, which wins over the query, as in CouchDB.
    let last_event_id = last_event_header.filter(|_| feed == Feed::EventSource);
    let since = match (
        last_event_id,
        query.get("since"),
        query.get("last-event-id"),
    ) {
        (Some(id), _, _) => parse_since(&id, &database).await?,
        (None, Some(s), _) | (None, None, Some(s)) => parse_since(s, &database).await?,
        (None, None, None) => 0,
    };
    let style_all = match query.get("style") {
        None | Some("main_only") => false,
        Some("all_docs") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid style {other:?}: use main_only or all_docs"
            )));
        }
    };
    let heartbeat = match query.get("heartbeat") {
        None | Some("false") => None,
        Some("true") => Some(DEFAULT_HEARTBEAT),
        // CouchDB's reasons, word for word: one for what is no integer,
        // one for an integer that is not positive.
        Some(text) => match text.parse::<i128>() {
            Ok(n) if n <= 0 => {
                return Err(ApiError::bad_request(
                    "The heartbeat value should be a positive integer (in milliseconds).",
                ));
            }
            Ok(n) => Some(Duration::from_millis(
                u64::try_from(n).unwrap_or(u64::MAX).max(10),
            )),
            Err(_) => {
                return Err(ApiError::bad_request(
                    "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).",
                ));
            }
        },
    };
    let include_docs = query.flag("include_docs")?;
    let mut filter = Filter::All;
    let mut doc_ids = None;
    let design_filter = query
        .get("filter")
        .is_some_and(|f| f == "_view" || !f.starts_with('_'));
    if design_filter && database.reader().is_some() {
        // Design functions are for admins where each document has its
        // readers (`access::route_need`); a user filters with `_selector`.
        return Err(ApiError::Forbidden(access::ACCESS_DENIED.into()));
    }
    match query.get("filter") {
        None => {}
        Some("_doc_ids") => {
            let ids = match body.get("doc_ids") {
                Some(v) => Some(v.clone()),
                None => query.json("doc_ids")?,
            };
            let Some(Value::Array(ids)) = ids else {
                return Err(ApiError::bad_request(
                    "filter=_doc_ids needs a JSON array `doc_ids`",
                ));
            };
            state.config.limits.check_items(ids.len(), "doc_ids")?;
            doc_ids = Some(
                ids.iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| ApiError::bad_request("`doc_ids` must be strings"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Some("_design") => filter = Filter::Design,
        Some("_selector") => {
            // CouchDB's reasons, word for word.
            let Some(selector) = body.get("selector").filter(|s| s.is_object()) else {
                return Err(ApiError::bad_request(
                    "Selector error: expected a JSON object",
                ));
            };
            let selector = mango::selector::Selector::parse(selector)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            filter = Filter::Selector(selector);
        }
        Some("_view") => {
            // CouchDB's reason, word for word.
            let Some(view) = query.get("view").filter(|v| !v.is_empty()) else {
                return Err(ApiError::bad_request(
                    "`view` filter parameter is not provided.",
                ));
            };
            let (ddoc, name) = crate::design::split_name(view, "view")?;
            let ddoc =
                crate::design::runnable(&database, ddoc, crate::design::Section::Views, name)
                    .await?;
            filter = Filter::Script(design_functions::DocFilter {
                engine: state.validators.engine().clone(),
                ddoc,
                name: name.to_string(),
                req: None,
            });
        }
        Some(other) if other.starts_with('_') => {
            return Err(ApiError::bad_request("unknown builtin filter name"));
        }
        Some(other) => {
            let (ddoc, name) = crate::design::split_name(other, "filter")?;
            let ddoc =
                crate::design::runnable(&database, ddoc, crate::design::Section::Filters, name)
                    .await?;
            let req = crate::design::request_object(crate::design::RequestParts {
                database: &database,
                user: &user,
                method: &method,
                path: &format!("/{db}/_changes"),
                query: &query,
                headers: &request_headers,
                body: (method == Method::POST)
                    .then(|| ejson::to_string(&Value::Object(body.clone()))),
                id: None,
            })
            .await?;
            filter = Filter::Script(design_functions::DocFilter {
                engine: state.validators.engine().clone(),
                ddoc,
                name: name.to_string(),
                req: Some(req),
            });
        }
    }
    if let Filter::Script(script) = &filter {
        // Compiled before answering: a missing or broken function is the
        // answer's status, not a cut-off feed.
        script
            .passes(&[])
            .await
            .map_err(crate::base::error::script_error)?;
    }
    let base = ChangesQuery {
        since,
        limit: PAGE_ROWS,
        descending: query.flag("descending")?,
        all_leaves: style_all,
        include_docs,
        conflicts: query.flag("conflicts")?,
        deleted_conflicts: false,
        local_seq: false,
        attachments: query.flag("attachments")?,
        att_encoding_info: query.flag("att_encoding_info")?,
        doc_ids,
        count_pending: false,
    };
    // A negative limit is no limit, as CouchDB reads it.
    let limit = match query.get("limit") {
        Some(text) if text.starts_with('-') && text[1..].bytes().all(|b| b.is_ascii_digit()) => {
            usize::MAX
        }
        _ => query.u64("limit")?.map_or(usize::MAX, |n| n as usize),
    };
    let run = FeedRun {
        db: database,
        shape: Shape::Changes,
        feed,
        base,
        filter,
        include_docs,
        limit,
        heartbeat,
        timeout: duration_ms(&query, "timeout")?.unwrap_or(DEFAULT_TIMEOUT),
        shutdown: state.shutdown.subscribe(),
    };
    let content_type = if feed == Feed::EventSource {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut state = FeedState::new(run);
    // A filter function decides the first page before the status is
    // sent: one that fails (or runs out of time) there is the answer's
    // status, as on CouchDB, not a feed cut off after a 200.
    let first = if matches!(state.run.filter, Filter::Script(_)) {
        match read_page(&mut state).await {
            Ok(first) => first,
            Err(PageError::Script(e)) => return Err(crate::base::error::script_error(e)),
            Err(PageError::Store(e)) => return Err(ApiError::Internal(e)),
        }
    } else {
        None
    };
    let mut response = Response::new(Body::from_stream(feed_stream(state, first)));
    if let Some(etag) = &etag
        && let Ok(value) = HeaderValue::from_str(etag)
    {
        response.headers_mut().insert(header::ETAG, value);
    }
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if feed == Feed::EventSource {
        // An event stream is never cached (CouchDB's header).
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    Ok(response)
}

/// Where a running feed is.
enum Phase {
    /// Read what is there now.
    Read,
    /// Nothing new: wait for a commit, a heartbeat or the timeout.
    Wait,
    /// Write the closing line and stop.
    Close,
    Done,
}

struct FeedState {
    run: FeedRun,
    since: u64,
    sent: usize,
    rows_written: usize,
    header_sent: bool,
    phase: Phase,
    rx: watch::Receiver<u64>,
    deadline: Instant,
    pending: u64,
}

impl FeedState {
    fn new(run: FeedRun) -> FeedState {
        FeedState {
            rx: run.db.subscribe(),
            deadline: Instant::now() + run.timeout,
            since: run.base.since,
            run,
            sent: 0,
            rows_written: 0,
            header_sent: false,
            phase: Phase::Read,
            pending: 0,
        }
    }
}

/// Why a page could not be read.
enum PageError {
    Store(String),
    /// The filter function failed: the feed ends with CouchDB's error row.
    Script(design_functions::JsError),
}

/// The feed from `state` on, after `first` (a page already read).
fn feed_stream(
    state: FeedState,
    first: Option<String>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let first = stream::iter(first.map(|chunk| Ok(Bytes::from(chunk))));
    futures_util::StreamExt::chain(first, rest_of_feed(state))
}

fn rest_of_feed(
    state: FeedState,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    stream::unfold(state, |mut s| async move {
        loop {
            match s.phase {
                Phase::Done => return None,
                Phase::Close => {
                    s.phase = Phase::Done;
                    return Some((Ok(Bytes::from(closing(&s))), s));
                }
                Phase::Read => match read_page(&mut s).await {
                    Ok(Some(chunk)) => return Some((Ok(Bytes::from(chunk)), s)),
                    Ok(None) => continue,
                    Err(PageError::Script(e)) => {
                        // Rows were sent: the feed ends with the error as
                        // its last line, as CouchDB ends it.
                        let (_, error, reason) = crate::base::error::script_error(e).error_info();
                        let mut row = String::from("\n{\"error\":");
                        ejson::push_string(&mut row, error);
                        row.push_str(",\"reason\":");
                        ejson::push_string(&mut row, &reason);
                        row.push_str("}\n");
                        s.phase = Phase::Done;
                        return Some((Ok(Bytes::from(row)), s));
                    }
                    Err(PageError::Store(e)) => {
                        tracing::error!(error = %e, "changes feed failed");
                        s.phase = Phase::Done;
                        return Some((Err(std::io::Error::other(e)), s));
                    }
                },
                Phase::Wait => {
                    let heartbeat = s.run.heartbeat;
                    let sleep_until = match heartbeat {
                        Some(h) => Instant::now() + h,
                        None => s.deadline,
                    };
                    tokio::select! {
                        changed = s.rx.changed() => {
                            if changed.is_err() {
                                // The database was deleted or closed.
                                s.phase = Phase::Close;
                            } else {
                                s.phase = Phase::Read;
                            }
                        }
                        _ = shutting_down(&mut s.run.shutdown) => s.phase = Phase::Close,
                        _ = tokio::time::sleep_until(sleep_until) => {
                            if heartbeat.is_some() {
                                let beat = if s.run.feed == Feed::EventSource {
                                    "event: heartbeat\ndata: \n\n"
                                } else {
                                    "\n"
                                };
                                return Some((Ok(Bytes::from_static(beat.as_bytes())), s));
                            }
                            s.phase = Phase::Close;
                        }
                    }
                }
            }
        }
    })
}

/// Resolves once the server is stopping (never if it never does).
async fn shutting_down(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|stopping| *stopping).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads the next page; returns output to send, or `None` after changing phase.
async fn read_page(s: &mut FeedState) -> Result<Option<String>, PageError> {
    s.rx.borrow_and_update();
    let remaining = s.run.limit.saturating_sub(s.sent);
    let mut q = s.run.base.clone();
    q.since = s.since;
    q.limit = remaining.min(PAGE_ROWS);
    // The pending count is only needed when this page may end the response.
    q.count_pending = remaining <= PAGE_ROWS;
    if !matches!(s.run.filter, Filter::All) {
        // Counting would include rows the filter drops.
        q.count_pending = false;
    }
    if matches!(s.run.filter, Filter::Selector(_) | Filter::Script(_)) {
        // A filter looks at the document, whether or not the client wants it.
        q.include_docs = true;
    }
    let page = if q.limit == 0 {
        None
    } else {
        Some(
            s.run
                .db
                .changes(q.clone())
                .await
                .map_err(|e| PageError::Store(e.to_string()))?,
        )
    };
    let verdicts = match (&s.run.filter, &page) {
        (Filter::Script(script), Some(page)) if !page.rows.is_empty() => Some(
            script
                .passes_rows(&page.rows)
                .await
                .map_err(PageError::Script)?,
        ),
        _ => None,
    };
    let mut out = String::new();
    if !s.header_sent && matches!(s.run.feed, Feed::Normal | Feed::Longpoll) {
        let has_rows = page.as_ref().is_some_and(|p| !p.rows.is_empty());
        // A longpoll with nothing yet waits before writing anything.
        if s.run.feed == Feed::Normal || has_rows || q.limit == 0 {
            out.push_str("{\"results\":[");
            s.header_sent = true;
        }
    }
    let Some(page) = page else {
        s.phase = Phase::Close;
        return Ok(Some(out).filter(|o| !o.is_empty()));
    };
    let fetched = page.rows.len();
    // Rows are written straight into the page, the sequence through one
    // reused buffer: no allocation per row.
    let mut seq = String::new();
    for (i, row) in page.rows.iter().enumerate() {
        let passes = match &verdicts {
            Some(verdicts) => verdicts.get(i).copied().unwrap_or(false),
            None => s.run.filter.passes(row),
        };
        if !passes {
            continue;
        }
        seq.clear();
        s.run.db.write_seq(&mut seq, row.seq);
        let doc = s
            .run
            .include_docs
            .then(|| row.doc.as_ref().map(|d| d.as_str()));
        let event = match s.run.shape {
            Shape::Changes => None,
            // A document that names no event (an admin wrote it) is skipped.
            Shape::DbUpdates => match row.id.split_once(':') {
                Some(event) => Some(event),
                None => continue,
            },
        };
        let write_row = |out: &mut String| match event {
            None => wire::rows::write_changes_row(
                out,
                &seq,
                &row.id,
                &row.changes,
                row.deleted,
                row.removed,
                doc,
            ),
            Some((kind, db_name)) => out.push_str(&ejson::to_string(
                &serde_json::json!({"db_name": db_name, "type": kind, "seq": seq}),
            )),
        };
        match s.run.feed {
            Feed::Normal | Feed::Longpoll => {
                out.push_str(if s.rows_written == 0 { "\n" } else { ",\n" });
                write_row(&mut out);
            }
            Feed::Continuous => {
                write_row(&mut out);
                out.push('\n');
            }
            // The id is the sequence as JSON, quotes and all, as CouchDB writes it.
            Feed::EventSource => {
                out.push_str("data: ");
                write_row(&mut out);
                out.push_str("\nid: ");
                out.push_str(&wire::json::string(&seq));
                out.push_str("\n\n");
            }
        }
        s.rows_written += 1;
        s.sent += 1;
    }
    if !s.run.base.descending || fetched > 0 {
        s.since = page.last_seq;
    }
    s.pending = page.pending;
    let exhausted = fetched < q.limit;
    let limit_reached = s.sent >= s.run.limit;
    s.phase = if limit_reached || s.run.base.descending {
        if !exhausted && !limit_reached {
            Phase::Read
        } else {
            Phase::Close
        }
    } else if !exhausted {
        Phase::Read
    } else {
        match s.run.feed {
            Feed::Normal => Phase::Close,
            Feed::Longpoll if s.rows_written > 0 => Phase::Close,
            Feed::Longpoll | Feed::Continuous | Feed::EventSource => {
                if s.run.heartbeat.is_none() && Instant::now() >= s.deadline {
                    Phase::Close
                } else {
                    Phase::Wait
                }
            }
        }
    };
    Ok(Some(out).filter(|o| !o.is_empty()))
}

fn closing(s: &FeedState) -> String {
    let last_seq = wire::json::string(&s.run.db.seq_string(s.since));
    if s.run.shape == Shape::DbUpdates {
        // CouchDB's global feed has no `pending`.
        return match s.run.feed {
            Feed::Normal | Feed::Longpoll => format!(
                "{}{}],\n\"last_seq\":{last_seq}}}\n",
                if s.header_sent { "" } else { "{\"results\":[" },
                if s.rows_written > 0 { "\n" } else { "" },
            ),
            Feed::Continuous => format!("{{\"last_seq\":{last_seq}}}\n"),
            Feed::EventSource => "\n".into(),
        };
    }
    match s.run.feed {
        Feed::Normal | Feed::Longpoll => {
            let mut out = String::new();
            if !s.header_sent {
                out.push_str("{\"results\":[");
            }
            if s.rows_written > 0 {
                out.push('\n');
            }
            out.push_str(&format!(
                "],\n\"last_seq\":{},\"pending\":{}}}\n",
                wire::json::string(&s.run.db.seq_string(s.since)),
                s.pending
            ));
            out
        }
        Feed::Continuous => format!(
            "{{\"last_seq\":{},\"pending\":{}}}\n",
            wire::json::string(&s.run.db.seq_string(s.since)),
            s.pending
        ),
        // CouchDB ends an event stream with a blank line.
        Feed::EventSource => "\n".into(),
    }
}

/// # GET /_db_updates
/// The global changes feed: database events as CouchDB's global changes
/// server records them, in the same feeds as `_changes`.
pub(crate) async fn db_updates(
    state: AppState,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed("GET"));
    }
    let database = match state.databases.events().await {
        Ok(db) => db,
        // CouchDB's answer when `_global_changes` is missing.
        Err(store::StoreError::DbNotFound(_)) => {
            return Err(ApiError::NotFound("Database does not exist.".into()));
        }
        Err(e) => return Err(e.into()),
    };
    let feed = match query.get("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        "continuous" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        _ => {
            return Err(ApiError::bad_request(
                "Supported `feed` types: normal, continuous, longpoll, eventsource",
            ));
        }
    };
    // CouchDB's one reason for every bad number here.
    let number = |key: &str| -> Result<Option<u64>, ApiError> {
        match query.get(key) {
            None => Ok(None),
            Some(text) => text
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request("invalid_integer")),
        }
    };
    let heartbeat = match query.get("heartbeat") {
        None | Some("false") => None,
        Some("true") => Some(DEFAULT_HEARTBEAT),
        Some(_) => number("heartbeat")?.map(|ms| Duration::from_millis(ms.max(10))),
    };
    let since = match query.get("since") {
        None => 0,
        Some(text) => parse_since(text, &database).await?,
    };
    let descending = query.get("descending") == Some("true");
    let run = FeedRun {
        db: database,
        shape: Shape::DbUpdates,
        feed,
        base: ChangesQuery {
            since,
            limit: PAGE_ROWS,
            descending,
            count_pending: false,
            ..ChangesQuery::default()
        },
        filter: Filter::All,
        include_docs: false,
        limit: number("limit")?.map_or(usize::MAX, |n| n as usize),
        heartbeat,
        timeout: number("timeout")?
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_TIMEOUT),
        shutdown: state.shutdown.subscribe(),
    };
    let mut response = Response::new(Body::from_stream(feed_stream(FeedState::new(run), None)));
    let headers = response.headers_mut();
    if feed == Feed::EventSource {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    } else {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    Ok(response)
}
