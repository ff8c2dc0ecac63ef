//! Node statistics as CouchDB 3.5 serves them: `GET /_node/{node}/_stats`
//! (JSON nested by group, each figure `{"value", "type", "desc"}`) and
//! `GET /_node/{node}/_prometheus` (the same figures as Prometheus text).
//!
//! Only what Recliner really counts is shown, under CouchDB's metric names
//! and descriptions (the interface monitoring tools already know): requests
//! by method and status code, request and database-info latencies, bulk
//! requests, documents read and written through the HTTP API, open
//! databases, searches (Nouveau's figures) and the replication
//! scheduler's jobs. CouchDB's other figures
//! (query servers, shards, caches, the Erlang VM...) have no counterpart
//! here and are left out rather than shown as zeros.
//!
//! Counting runs on every request ([`CountLayer`]), so it is a fixed table of
//! relaxed atomics: no lock and no allocation. Latencies go into windowed
//! histograms as CouchDB 3.5 keeps them: log-scale bins (the exponent and
//! three mantissa bits of the value as a float) per second, summed over the
//! last ten seconds when read.

use axum::http::{Method, StatusCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod histogram;
mod layer;
mod metrics;
mod prometheus;
#[cfg(test)]
mod tests;

pub(crate) use histogram::*;
pub(crate) use layer::*;
pub(crate) use metrics::*;
pub(crate) use prometheus::*;

pub(super) const METHODS: [(&str, &str); 7] = [
    ("COPY", "number of HTTP COPY requests"),
    ("DELETE", "number of HTTP DELETE requests"),
    ("GET", "number of HTTP GET requests"),
    ("HEAD", "number of HTTP HEAD requests"),
    ("OPTIONS", "number of HTTP OPTIONS requests"),
    ("POST", "number of HTTP POST requests"),
    ("PUT", "number of HTTP PUT requests"),
];

/// The status codes CouchDB counts (`httpd_status_codes`), with its
/// descriptions; other codes count only in `httpd.requests`, as there.
pub(super) const STATUS_CODES: [(u16, &str, &str); 25] = [
    (200, "200", "number of HTTP 200 OK responses"),
    (201, "201", "number of HTTP 201 Created responses"),
    (202, "202", "number of HTTP 202 Accepted responses"),
    (204, "204", "number of HTTP 204 No Content responses"),
    (206, "206", "number of HTTP 206 Partial Content"),
    (301, "301", "number of HTTP 301 Moved Permanently responses"),
    (302, "302", "number of HTTP 302 Found responses"),
    (304, "304", "number of HTTP 304 Not Modified responses"),
    (400, "400", "number of HTTP 400 Bad Request responses"),
    (401, "401", "number of HTTP 401 Unauthorized responses"),
    (403, "403", "number of HTTP 403 Forbidden responses"),
    (404, "404", "number of HTTP 404 Not Found responses"),
    (
        405,
        "405",
        "number of HTTP 405 Method Not Allowed responses",
    ),
    (406, "406", "number of HTTP 406 Not Acceptable responses"),
    (409, "409", "number of HTTP 409 Conflict responses"),
    (
        412,
        "412",
        "number of HTTP 412 Precondition Failed responses",
    ),
    (
        413,
        "413",
        "number of HTTP 413 Request Entity Too Long responses",
    ),
    (
        414,
        "414",
        "number of HTTP 414 Request URI Too Long responses",
    ),
    (
        415,
        "415",
        "number of HTTP 415 Unsupported Media Type responses",
    ),
    (
        416,
        "416",
        "number of HTTP 416 Requested Range Not Satisfiable responses",
    ),
    (
        417,
        "417",
        "number of HTTP 417 Expectation Failed responses",
    ),
    (
        500,
        "500",
        "number of HTTP 500 Internal Server Error responses",
    ),
    (501, "501", "number of HTTP 501 Not Implemented responses"),
    (
        503,
        "503",
        "number of HTTP 503 Service unavailable responses",
    ),
    (
        507,
        "507",
        "number of HTTP 507 Insufficient Storage responses",
    ),
];

/// A status code's place in [`STATUS_CODES`] (`NOT_COUNTED` for the
/// others): one array lookup per response instead of a search.
pub(super) const STATUS_SLOTS: [u8; 512] = {
    let mut slots = [NOT_COUNTED; 512];
    let mut i = 0;
    while i < STATUS_CODES.len() {
        slots[STATUS_CODES[i].0 as usize] = i as u8;
        i += 1;
    }
    slots
};
pub(super) const NOT_COUNTED: u8 = u8::MAX;

pub(super) fn status_slot(code: u16) -> Option<usize> {
    match STATUS_SLOTS.get(usize::from(code)) {
        Some(&slot) if slot != NOT_COUNTED => Some(usize::from(slot)),
        _ => None,
    }
}

pub(super) fn method_slot(method: &Method) -> Option<usize> {
    match method.as_str() {
        "COPY" => Some(0),
        "DELETE" => Some(1),
        "GET" => Some(2),
        "HEAD" => Some(3),
        "OPTIONS" => Some(4),
        "POST" => Some(5),
        "PUT" => Some(6),
        _ => None,
    }
}

/// What one database request did to documents, for `database_reads` and
/// `database_writes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DocAccess {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// Whether a database's documents count in `database_reads` and
/// `database_writes`: CouchDB leaves its system databases out.
pub(crate) fn counts_documents(db: &str) -> bool {
    !(db.starts_with('_') || db.ends_with("/_replicator") || db.ends_with("/_users"))
}

/// The server's counters, shared by every request.
pub struct Stats {
    /// The zero of the histograms' seconds.
    base: Instant,
    requests: AtomicU64,
    methods: [AtomicU64; METHODS.len()],
    status_codes: [AtomicU64; STATUS_CODES.len()],
    bulk_requests: AtomicU64,
    database_reads: AtomicU64,
    database_writes: AtomicU64,
    /// Milliseconds from a request's arrival to its answer's head.
    request_time: Histogram,
    /// Milliseconds to answer `GET /db`.
    dbinfo: Histogram,
    /// Searches being answered now.
    active_searches: AtomicU64,
    /// Milliseconds to answer a search, and of that, to bring its index
    /// up to date.
    search_latency: Histogram,
    search_update_latency: Histogram,
}

/// A search being answered: counted while it lives, its latency recorded
/// when it ends.
#[derive(Debug)]
pub(crate) struct SearchTimer<'a> {
    stats: &'a Stats,
    started: Instant,
}

impl Drop for SearchTimer<'_> {
    fn drop(&mut self) {
        let now = Instant::now();
        self.stats.active_searches.fetch_sub(1, Ordering::Relaxed);
        self.stats.search_latency.record(
            self.stats.second(now),
            millis(now.saturating_duration_since(self.started)),
        );
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field("requests", &self.requests.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for Stats {
    fn default() -> Stats {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            base: Instant::now(),
            requests: AtomicU64::new(0),
            methods: std::array::from_fn(|_| AtomicU64::new(0)),
            status_codes: std::array::from_fn(|_| AtomicU64::new(0)),
            bulk_requests: AtomicU64::new(0),
            database_reads: AtomicU64::new(0),
            database_writes: AtomicU64::new(0),
            request_time: Histogram::new(),
            dbinfo: Histogram::new(),
            active_searches: AtomicU64::new(0),
            search_latency: Histogram::new(),
            search_update_latency: Histogram::new(),
        }
    }

    /// A search began; it ends when the timer is dropped.
    pub(crate) fn search_started(&self) -> SearchTimer<'_> {
        self.active_searches.fetch_add(1, Ordering::Relaxed);
        SearchTimer {
            stats: self,
            started: Instant::now(),
        }
    }

    /// A search waited `took` for its index to be brought up to date.
    pub(crate) fn record_search_update(&self, took: Duration) {
        self.search_update_latency
            .record(self.second(Instant::now()), millis(took));
    }

    pub(super) fn second(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_secs()
    }

    /// A request arrived: its method counts at once, as in CouchDB (so a
    /// `GET .../_stats` sees itself among the GETs, not among the answers).
    pub(super) fn request_started(&self, method: &Method) {
        if let Some(slot) = method_slot(method) {
            self.methods[slot].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request was answered with `status`.
    pub(super) fn request_finished(&self, status: StatusCode, started: Instant) {
        let now = Instant::now();
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = status_slot(status.as_u16()) {
            self.status_codes[slot].fetch_add(1, Ordering::Relaxed);
        }
        self.request_time.record(
            self.second(now),
            millis(now.saturating_duration_since(started)),
        );
    }

    /// A database request ended: a document was read when it was served
    /// (2xx, or 304 after comparing its tag), written when the write succeeded.
    pub(crate) fn count_documents(&self, access: DocAccess, status: StatusCode) {
        if access.read && (status.is_success() || status == StatusCode::NOT_MODIFIED) {
            self.database_reads.fetch_add(1, Ordering::Relaxed);
        }
        if access.write && status.is_success() {
            self.database_writes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A `_bulk_docs` or `_bulk_get` request arrived.
    pub(crate) fn count_bulk_request(&self) {
        self.bulk_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// `GET /db` answered after `took`.
    pub(crate) fn record_db_info(&self, took: Duration) {
        self.dbinfo
            .record(self.second(Instant::now()), millis(took));
    }

    /// Every figure, in CouchDB's order of groups; `gauges` are read from
    /// the rest of the server when asked.
    pub(crate) fn metrics(&self, gauges: &Gauges) -> Vec<Metric> {
        let count = |counter: &AtomicU64| Figure::Count(counter.load(Ordering::Relaxed));
        let now = self.second(Instant::now());
        let mut metrics = vec![
            Metric::counter(
                &["couchdb", "httpd", "requests"],
                "number of HTTP requests",
                count(&self.requests),
            ),
            Metric::counter(
                &["couchdb", "httpd", "bulk_requests"],
                "number of bulk requests",
                count(&self.bulk_requests),
            ),
        ];
        for ((method, desc), counter) in METHODS.iter().zip(&self.methods) {
            metrics.push(Metric::counter(
                &["couchdb", "httpd_request_methods", method],
                desc,
                count(counter),
            ));
        }
        for ((_, code, desc), counter) in STATUS_CODES.iter().zip(&self.status_codes) {
            metrics.push(Metric::counter(
                &["couchdb", "httpd_status_codes", code],
                desc,
                count(counter),
            ));
        }
        metrics.extend([
            Metric::counter(
                &["couchdb", "database_reads"],
                "number of times a document was read from a database",
                count(&self.database_reads),
            ),
            Metric::counter(
                &["couchdb", "database_writes"],
                "number of times a database was changed",
                count(&self.database_writes),
            ),
            // A counter in CouchDB's JSON (it goes up and down there too),
            // a gauge in its Prometheus text.
            Metric::counter(
                &["couchdb", "open_databases"],
                "number of open databases",
                Figure::Count(gauges.open_databases as u64),
            ),
            Metric::histogram(
                &["couchdb", "request_time"],
                "length of a request inside CouchDB without MochiWeb",
                Summary::of(&self.request_time.window(now)),
            ),
            Metric::histogram(
                &["couchdb", "dbinfo"],
                "distribution of latencies for calls to retrieve DB info",
                Summary::of(&self.dbinfo.window(now)),
            ),
            // Nouveau's figures (CouchDB's with its search service on).
            Metric::counter(
                &["nouveau", "active_searches"],
                "number of active search requests",
                count(&self.active_searches),
            ),
            Metric::histogram(
                &["nouveau", "search_latency"],
                "Distribution of overall search request latency as experienced by the end user",
                Summary::of(&self.search_latency.window(now)),
            ),
            Metric::histogram(
                &["nouveau", "update_latency"],
                "Distribution of time during search waiting for the index to be updated",
                Summary::of(&self.search_update_latency.window(now)),
            ),
        ]);
        let jobs = gauges.jobs;
        for (name, desc, value) in [
            ("running", "replicator scheduler running jobs", jobs.running),
            ("pending", "replicator scheduler pending jobs", jobs.pending),
            (
                "crashed",
                "replicator scheduler crashed jobs",
                jobs.crashing,
            ),
            (
                "total",
                "total number of replicator scheduler jobs",
                jobs.total(),
            ),
        ] {
            metrics.push(Metric {
                path: vec!["couch_replicator", "jobs", name],
                kind: Kind::Gauge,
                desc,
                figure: Figure::Count(value as u64),
            });
        }
        metrics
    }
}
