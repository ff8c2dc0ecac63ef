//! Node statistics as CouchDB 3.5 serves them: `GET /_node/{node}/_stats`
//! (JSON nested by group, each figure `{"value", "type", "desc"}`) and
//! `GET /_node/{node}/_prometheus` (the same figures as Prometheus text).
//!
//! Only what Recliner really counts is shown, under CouchDB's metric names
//! and descriptions (the interface monitoring tools already know): requests
//! by method and status code, request and database-info latencies, bulk
//! requests, documents read and written through the HTTP API, open
//! databases and the replication scheduler's jobs. CouchDB's other figures
//! (query servers, shards, caches, the Erlang VM...) have no counterpart
//! here and are left out rather than shown as zeros.
//!
//! Counting runs on every request ([`CountLayer`]), so it is a fixed table of
//! relaxed atomics: no lock and no allocation. Latencies go into windowed
//! histograms as CouchDB 3.5 keeps them: log-scale bins (the exponent and
//! three mantissa bits of the value as a float) per second, summed over the
//! last ten seconds when read.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::{Method, Request, Response, StatusCode};
use replicator::scheduler::JobCounts;
use serde_json::{Map, Value, json};

/// The methods CouchDB counts (`httpd_request_methods`), with its descriptions.
const METHODS: [(&str, &str); 7] = [
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
const STATUS_CODES: [(u16, &str, &str); 25] = [
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
const STATUS_SLOTS: [u8; 512] = {
    let mut slots = [NOT_COUNTED; 512];
    let mut i = 0;
    while i < STATUS_CODES.len() {
        slots[STATUS_CODES[i].0 as usize] = i as u8;
        i += 1;
    }
    slots
};
const NOT_COUNTED: u8 = u8::MAX;

fn status_slot(code: u16) -> Option<usize> {
    match STATUS_SLOTS.get(usize::from(code)) {
        Some(&slot) if slot != NOT_COUNTED => Some(usize::from(slot)),
        _ => None,
    }
}

fn method_slot(method: &Method) -> Option<usize> {
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

/// Seconds of samples a histogram summarizes: CouchDB's `[stats] interval`
/// default, so figures read the same on both servers.
const WINDOW_SECS: u64 = 10;

/// One histogram slot per second, in a ring longer than the window: the
/// slot a new second takes over is always one no reader still sums.
const SLOTS: usize = 16;

/// Smallest and largest values told apart, in milliseconds (CouchDB's):
/// 10 µs to over an hour; values outside count in the first or last bin.
const MIN_VALUE: f64 = 0.01;
const MAX_VALUE: f64 = 4_000_000.0;

/// A value's bin is its float's exponent and top three mantissa bits: bins
/// grow with the value, about 9% wide each, 230 bins over the whole range.
const BIN_SHIFT: u32 = 52 - 3;
const FIRST_BIN: u64 = MIN_VALUE.to_bits() >> BIN_SHIFT;
const BINS: usize = ((MAX_VALUE.to_bits() >> BIN_SHIFT) - FIRST_BIN + 1) as usize;

fn bin_of(value: f64) -> usize {
    // NaN fails the comparison and lands in the first bin.
    let value = if value >= MIN_VALUE {
        value.min(MAX_VALUE)
    } else {
        MIN_VALUE
    };
    ((value.to_bits() >> BIN_SHIFT) - FIRST_BIN) as usize
}

fn bin_bits(bin: usize) -> u64 {
    (bin as u64 + FIRST_BIN) << BIN_SHIFT
}

fn bin_min(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin))
}

fn bin_max(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin) | ((1 << BIN_SHIFT) - 1))
}

fn bin_middle(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin) | (1 << (BIN_SHIFT - 1)))
}

/// A slot's second tag: none yet, or being reset for a new second.
const UNUSED: u64 = 0;
const RESETTING: u64 = u64::MAX;

/// One second of samples.
struct Slot {
    /// The second the bins hold (plus one, so that 0 is [`UNUSED`]).
    second: AtomicU64,
    bins: [AtomicU64; BINS],
}

/// Samples of the last [`WINDOW_SECS`] seconds, in log-scale bins.
struct Histogram {
    slots: Box<[Slot]>,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    second: AtomicU64::new(UNUSED),
                    bins: std::array::from_fn(|_| AtomicU64::new(0)),
                })
                .collect(),
        }
    }

    /// Adds a sample taken during `second`. The first sample of a second
    /// empties its slot (16 seconds old by then); a sample racing with
    /// that reset may be lost, which a ten-second summary can bear better
    /// than a lock on every request.
    fn record(&self, second: u64, value: f64) {
        let slot = &self.slots[(second % SLOTS as u64) as usize];
        let tag = second + 1;
        let seen = slot.second.load(Ordering::Acquire);
        if seen < tag
            && slot
                .second
                .compare_exchange(seen, RESETTING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            for bin in &slot.bins {
                bin.store(0, Ordering::Relaxed);
            }
            slot.second.store(tag, Ordering::Release);
        }
        slot.bins[bin_of(value)].fetch_add(1, Ordering::Relaxed);
    }

    /// The samples of the window ending at second `now`, by bin.
    fn window(&self, now: u64) -> [u64; BINS] {
        let mut counts = [0; BINS];
        for slot in self.slots.iter() {
            let tag = slot.second.load(Ordering::Acquire);
            if tag == UNUSED || tag == RESETTING {
                continue;
            }
            let second = tag - 1;
            if second <= now && now - second < WINDOW_SECS {
                for (count, bin) in counts.iter_mut().zip(&slot.bins) {
                    *count += bin.load(Ordering::Relaxed);
                }
            }
        }
        counts
    }
}

/// The percentiles CouchDB reports: its key in JSON, the fraction, and
/// Prometheus's quantile label.
const PERCENTILES: [(u32, f64, &str); 6] = [
    (50, 0.5, "0.5"),
    (75, 0.75, "0.75"),
    (90, 0.9, "0.9"),
    (95, 0.95, "0.95"),
    (99, 0.99, "0.99"),
    (999, 0.999, "0.999"),
];

/// A histogram's summary, in CouchDB's terms. Each sample stands for the
/// middle of its bin; percentiles are placed within their bin by rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Summary {
    pub(crate) n: u64,
    min: f64,
    max: f64,
    mean: f64,
    geometric_mean: f64,
    harmonic_mean: f64,
    variance: f64,
    /// `None` when the spread is too small to divide by (CouchDB shows 0).
    skewness: Option<f64>,
    kurtosis: Option<f64>,
    percentiles: [f64; PERCENTILES.len()],
}

impl Summary {
    fn of(counts: &[u64; BINS]) -> Summary {
        let filled = || {
            counts
                .iter()
                .enumerate()
                .filter(|(_, count)| **count > 0)
                .map(|(bin, count)| (bin, *count, *count as f64))
        };
        let (mut n, mut sum, mut sum_log, mut sum_inverse) = (0u64, 0.0, 0.0, 0.0);
        for (bin, count, weight) in filled() {
            let value = bin_middle(bin);
            n += count;
            sum += weight * value;
            sum_log += weight * value.ln();
            sum_inverse += weight / value;
        }
        let (Some((first, ..)), Some((last, ..))) = (filled().next(), filled().next_back()) else {
            return Summary::default();
        };
        let total = n as f64;
        let mean = sum / total;
        let mut ranks = PERCENTILES.map(|(_, fraction, _)| Some(total * fraction));
        let mut percentiles = [0.0; PERCENTILES.len()];
        let (mut moment2, mut moment3, mut moment4) = (0.0, 0.0, 0.0);
        for (bin, _, weight) in filled() {
            for (rank, percentile) in ranks.iter_mut().zip(&mut percentiles) {
                if let Some(left) = rank {
                    if *left < weight {
                        let (low, high) = (bin_min(bin), bin_max(bin));
                        *percentile = low + (high - low) * (*left / weight);
                        *rank = None;
                    } else {
                        *left -= weight;
                    }
                }
            }
            let diff = bin_middle(bin) - mean;
            moment2 += weight * diff * diff;
            moment3 += weight * diff.powi(3);
            moment4 += weight * diff.powi(4);
        }
        let variance = moment2 / total;
        let deviation = variance.sqrt();
        let ratio = |moment: f64, power: i32| {
            let scale = deviation.powi(power);
            (scale >= 1e-12).then(|| moment / total / scale)
        };
        Summary {
            n,
            min: bin_min(first),
            max: bin_max(last),
            mean,
            geometric_mean: (sum_log / total).exp(),
            harmonic_mean: total / sum_inverse,
            variance,
            skewness: ratio(moment3, 3),
            kurtosis: ratio(moment4, 4).map(|k| k - 3.0),
            percentiles,
        }
    }

    /// CouchDB's shape; all zeros (integers, as there) without samples.
    fn to_json(&self) -> Value {
        let percentile: Vec<Value> = PERCENTILES
            .iter()
            .zip(&self.percentiles)
            .map(|((key, ..), value)| {
                if self.n == 0 {
                    json!([key, 0])
                } else {
                    json!([key, value])
                }
            })
            .collect();
        if self.n == 0 {
            return json!({
                "n": 0, "min": 0, "max": 0, "arithmetic_mean": 0, "geometric_mean": 0,
                "harmonic_mean": 0, "median": 0, "variance": 0, "standard_deviation": 0,
                "skewness": 0, "kurtosis": 0, "percentile": percentile, "histogram": [[0, 0]],
            });
        }
        let or_zero = |v: Option<f64>| v.map_or(json!(0), |v| json!(v));
        json!({
            "n": self.n,
            "min": self.min,
            "max": self.max,
            "arithmetic_mean": self.mean,
            "geometric_mean": self.geometric_mean,
            "harmonic_mean": self.harmonic_mean,
            "median": self.percentiles[0],
            "variance": self.variance,
            "standard_deviation": self.variance.sqrt(),
            "skewness": or_zero(self.skewness),
            "kurtosis": or_zero(self.kurtosis),
            "percentile": percentile,
            // CouchDB keeps this key, always so, for older clients.
            "histogram": [[0, 0]],
        })
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
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
        }
    }

    fn second(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_secs()
    }

    /// A request arrived: its method counts at once, as in CouchDB (so a
    /// `GET .../_stats` sees itself among the GETs, not among the answers).
    fn request_started(&self, method: &Method) {
        if let Some(slot) = method_slot(method) {
            self.methods[slot].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request was answered with `status`.
    fn request_finished(&self, status: StatusCode, started: Instant) {
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

/// Figures the stats read from the rest of the server when asked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gauges {
    pub(crate) open_databases: usize,
    pub(crate) jobs: JobCounts,
}

/// A metric's `type` in CouchDB's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Figure {
    Count(u64),
    Summary(Summary),
}

/// One figure under its CouchDB name (`["couchdb", "httpd", "requests"]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub(crate) path: Vec<&'static str>,
    pub(crate) kind: Kind,
    pub(crate) desc: &'static str,
    pub(crate) figure: Figure,
}

impl Metric {
    fn counter(path: &[&'static str], desc: &'static str, figure: Figure) -> Metric {
        Metric {
            path: path.to_vec(),
            kind: Kind::Counter,
            desc,
            figure,
        }
    }

    fn histogram(path: &[&'static str], desc: &'static str, summary: Summary) -> Metric {
        Metric {
            path: path.to_vec(),
            kind: Kind::Histogram,
            desc,
            figure: Figure::Summary(summary),
        }
    }

    fn to_json(&self) -> Value {
        let value = match &self.figure {
            Figure::Count(n) => json!(n),
            Figure::Summary(summary) => summary.to_json(),
        };
        json!({"value": value, "type": self.kind.as_str(), "desc": self.desc})
    }
}

/// `_stats`' body: every metric nested by its path.
pub(crate) fn to_json(metrics: &[Metric]) -> Value {
    let mut root = Map::new();
    for metric in metrics {
        insert(&mut root, &metric.path, metric.to_json());
    }
    Value::Object(root)
}

fn insert(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    match path {
        [] => {}
        [leaf] => {
            map.insert((*leaf).to_string(), value);
        }
        [group, rest @ ..] => {
            let entry = map
                .entry(*group)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

/// The part of `_stats` a sub-path names (`couchdb/request_time`, even
/// `couchdb/request_time/value/n`); `null` when there is none, as CouchDB.
pub(crate) fn extract<'a>(mut value: Value, path: impl IntoIterator<Item = &'a str>) -> Value {
    for key in path {
        value = match value {
            Value::Object(mut map) => map.remove(key).unwrap_or(Value::Null),
            _ => return Value::Null,
        };
    }
    value
}

/// The Prometheus media type: text exposition format 0.0.4.
pub(crate) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// How one metric shows in Prometheus: CouchDB's family name, type and help,
/// and its label when the family has several series.
struct Series {
    family: String,
    kind: &'static str,
    help: &'static str,
    label: Option<(&'static str, &'static str)>,
}

fn series(metric: &Metric) -> Series {
    match metric.path.as_slice() {
        ["couchdb", "httpd_request_methods", method] => Series {
            family: "couchdb_httpd_request_methods".into(),
            kind: "counter",
            help: "number of HTTP requests by method",
            label: Some(("method", *method)),
        },
        ["couchdb", "httpd_status_codes", code] => Series {
            family: "couchdb_httpd_status_codes".into(),
            kind: "counter",
            help: "number of HTTP responses by status code",
            label: Some(("code", *code)),
        },
        // Prometheus assumes counters never go down: CouchDB shows this one as a gauge.
        ["couchdb", "open_databases"] => Series {
            family: "couchdb_open_databases".into(),
            kind: "gauge",
            help: metric.desc,
            label: None,
        },
        path => {
            let rest = match path {
                ["couchdb", rest @ ..] => rest,
                rest => rest,
            };
            let base = format!("couchdb_{}", rest.join("_"));
            let (family, kind) = match metric.kind {
                Kind::Counter if base.ends_with("_total") => (base, "counter"),
                Kind::Counter => (format!("{base}_total"), "counter"),
                Kind::Gauge => (base, "gauge"),
                Kind::Histogram => (format!("{base}_seconds"), "summary"),
            };
            Series {
                family,
                kind,
                help: metric.desc,
                label: None,
            }
        }
    }
}

/// Figures only the Prometheus text has (CouchDB's system figures that mean
/// something for Recliner).
#[derive(Debug, Clone, Copy)]
pub(crate) struct System {
    pub(crate) uptime_seconds: u64,
    /// Nodes in the cluster: this one.
    pub(crate) nodes: usize,
}

/// `_prometheus`' body: each family's `# HELP` and `# TYPE` once, then its
/// samples; histograms as summaries in seconds, as CouchDB shows them.
pub(crate) fn to_prometheus(metrics: &[Metric], system: &System) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let mut current = String::new();
    for metric in metrics {
        let series = series(metric);
        if series.family != current {
            header(&mut out, &series.family, series.help, series.kind);
            current.clone_from(&series.family);
        }
        match &metric.figure {
            Figure::Count(n) => sample(&mut out, &series.family, series.label, n),
            Figure::Summary(summary) => {
                for ((.., quantile), value) in PERCENTILES.iter().zip(&summary.percentiles) {
                    let seconds = if summary.n == 0 { 0.0 } else { value / 1000.0 };
                    sample(
                        &mut out,
                        &series.family,
                        Some(("quantile", quantile)),
                        seconds,
                    );
                }
                let sum = summary.n as f64 * summary.mean / 1000.0;
                sample(&mut out, &format!("{}_sum", series.family), None, sum);
                sample(
                    &mut out,
                    &format!("{}_count", series.family),
                    None,
                    summary.n,
                );
            }
        }
    }
    header(
        &mut out,
        "couchdb_uptime_seconds",
        "couchdb uptime",
        "counter",
    );
    sample(
        &mut out,
        "couchdb_uptime_seconds",
        None,
        system.uptime_seconds,
    );
    header(
        &mut out,
        "couchdb_membership",
        "count of nodes in the cluster",
        "gauge",
    );
    for nodes in ["cluster_nodes", "all_nodes"] {
        sample(
            &mut out,
            "couchdb_membership",
            Some(("nodes", nodes)),
            system.nodes,
        );
    }
    out
}

fn header(out: &mut String, family: &str, help: &str, kind: &str) {
    // Help text escapes backslashes and line breaks (none of CouchDB's have any).
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
}

fn sample(
    out: &mut String,
    name: &str,
    label: Option<(&str, &str)>,
    value: impl std::fmt::Display,
) {
    // Label values here are method names, status codes and fixed words:
    // nothing to escape.
    let _ = match label {
        Some((key, value_of_label)) => {
            writeln!(out, "{name}{{{key}=\"{value_of_label}\"}} {value}")
        }
        None => writeln!(out, "{name} {value}"),
    };
}

/// The layer that counts every request: outermost, so that every answer
/// (CORS preflights, refusals, errors) counts once.
#[derive(Debug, Clone)]
pub(crate) struct CountLayer(pub(crate) Arc<Stats>);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            stats: self.0.clone(),
        }
    }
}

/// A service whose requests are counted.
#[derive(Debug, Clone)]
pub(crate) struct Counted<S> {
    inner: S,
    stats: Arc<Stats>,
}

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for Counted<S>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        self.stats.request_started(request.method());
        CountedFuture {
            started: Instant::now(),
            stats: self.stats.clone(),
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, counted when its head is ready.
    #[derive(Debug)]
    pub(crate) struct CountedFuture<F> {
        #[pin]
        inner: F,
        stats: Arc<Stats>,
        started: Instant,
    }
}

impl<F, ResBody, E> Future for CountedFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &result {
            this.stats
                .request_finished(response.status(), *this.started);
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauges() -> Gauges {
        Gauges {
            open_databases: 3,
            jobs: JobCounts {
                running: 2,
                pending: 1,
                crashing: 1,
            },
        }
    }

    #[test]
    fn the_bins_are_couchdbs_230_and_each_holds_its_values() {
        assert_eq!(BINS, 230);
        assert_eq!(bin_of(0.0), 0);
        assert_eq!(bin_of(f64::NAN), 0);
        assert_eq!(bin_of(1e12), BINS - 1);
        for value in [0.01, 0.42, 1.0, 4.2, 10.42, 999.9, 123_456.0] {
            let bin = bin_of(value);
            assert!(bin_min(bin) <= value && value <= bin_max(bin), "{value}");
            assert!(bin_min(bin) < bin_middle(bin) && bin_middle(bin) < bin_max(bin));
        }
        // Neighbouring bins meet without gaps.
        assert!(bin_max(40) < bin_min(41));
        assert_eq!(bin_max(40).next_up(), bin_min(41));
    }

    #[test]
    fn a_summary_without_samples_is_couchdbs_all_zero_shape() {
        let summary = Summary::of(&[0; BINS]);
        assert_eq!(summary.n, 0);
        assert_eq!(
            summary.to_json(),
            json!({"n": 0, "min": 0, "max": 0, "arithmetic_mean": 0, "geometric_mean": 0,
                   "harmonic_mean": 0, "median": 0, "variance": 0, "standard_deviation": 0,
                   "skewness": 0, "kurtosis": 0,
                   "percentile": [[50, 0], [75, 0], [90, 0], [95, 0], [99, 0], [999, 0]],
                   "histogram": [[0, 0]]})
        );
    }

    #[test]
    fn a_summary_is_close_to_the_samples_it_binned() {
        let histogram = Histogram::new();
        let values = [0.05, 0.9, 0.7, 0.7, 10.1, 11.0, 100.5, 0.10, 13.5];
        for value in values {
            histogram.record(5, value);
        }
        let summary = Summary::of(&histogram.window(5));
        assert_eq!(summary.n, values.len() as u64);
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.1;
        assert!(
            summary.min <= 0.05 && near(summary.min, 0.05),
            "{summary:?}"
        );
        assert!(
            summary.max >= 100.5 && near(summary.max, 104.0),
            "{summary:?}"
        );
        assert!(near(summary.mean, 15.3), "{summary:?}");
        assert!(near(summary.percentiles[0], 0.9), "median {summary:?}");
        let shown = summary.to_json();
        assert_eq!(shown["n"], 9);
        assert_eq!(shown["median"], shown["percentile"][0][1]);
        assert_eq!(shown["percentile"][5][0], 999);
        assert!(shown["standard_deviation"].as_f64().unwrap() > 25.0);
        // One value: no spread to divide by, so CouchDB's zeros.
        let single = Histogram::new();
        single.record(0, 7.0);
        let shown = Summary::of(&single.window(0)).to_json();
        assert_eq!(
            (shown["skewness"].clone(), shown["kurtosis"].clone()),
            (json!(0), json!(0))
        );
    }

    #[test]
    fn samples_leave_the_window_after_ten_seconds() {
        let histogram = Histogram::new();
        histogram.record(100, 1.0);
        histogram.record(105, 1.0);
        histogram.record(105, 2.0);
        let total = |now| histogram.window(now).iter().sum::<u64>();
        assert_eq!(total(105), 3);
        assert_eq!(total(109), 3);
        assert_eq!(total(110), 2);
        assert_eq!(total(115), 0);
        // A slot reused 16 seconds later starts empty.
        histogram.record(121, 5.0);
        assert_eq!(total(121), 1);
    }

    #[test]
    fn requests_count_by_method_and_by_couchdbs_status_codes() {
        let stats = Stats::new();
        let started = Instant::now();
        for _ in 0..3 {
            stats.request_started(&Method::GET);
            stats.request_finished(StatusCode::OK, started);
        }
        stats.request_started(&Method::from_bytes(b"PROPFIND").unwrap());
        stats.request_finished(StatusCode::IM_A_TEAPOT, started);
        stats.request_started(&Method::PUT);
        stats.request_finished(StatusCode::NOT_FOUND, started);
        let shown = to_json(&stats.metrics(&gauges()));
        let couchdb = &shown["couchdb"];
        assert_eq!(couchdb["httpd"]["requests"]["value"], 5);
        assert_eq!(couchdb["httpd_request_methods"]["GET"]["value"], 3);
        assert_eq!(couchdb["httpd_request_methods"]["PUT"]["value"], 1);
        assert_eq!(couchdb["httpd_status_codes"]["200"]["value"], 3);
        assert_eq!(couchdb["httpd_status_codes"]["404"]["value"], 1);
        assert!(couchdb["httpd_status_codes"]["418"].is_null());
        assert_eq!(couchdb["request_time"]["value"]["n"], 5);
        assert_eq!(couchdb["request_time"]["type"], "histogram");
        assert_eq!(
            couchdb["httpd_request_methods"]["GET"],
            json!({"value": 3, "type": "counter", "desc": "number of HTTP GET requests"})
        );
        assert_eq!(
            couchdb["open_databases"],
            json!({"value": 3, "type": "counter", "desc": "number of open databases"})
        );
        assert_eq!(
            shown["couch_replicator"]["jobs"],
            json!({
                "running": {"value": 2, "type": "gauge", "desc": "replicator scheduler running jobs"},
                "pending": {"value": 1, "type": "gauge", "desc": "replicator scheduler pending jobs"},
                "crashed": {"value": 1, "type": "gauge", "desc": "replicator scheduler crashed jobs"},
                "total": {"value": 4, "type": "gauge", "desc": "total number of replicator scheduler jobs"},
            })
        );
    }

    #[test]
    fn documents_count_when_served_or_written() {
        let stats = Stats::new();
        let read = DocAccess {
            read: true,
            write: false,
        };
        let write = DocAccess {
            read: false,
            write: true,
        };
        stats.count_documents(read, StatusCode::OK);
        stats.count_documents(read, StatusCode::NOT_MODIFIED);
        stats.count_documents(read, StatusCode::NOT_FOUND);
        stats.count_documents(write, StatusCode::CREATED);
        stats.count_documents(write, StatusCode::CONFLICT);
        stats.count_bulk_request();
        let shown = to_json(&stats.metrics(&gauges()));
        assert_eq!(shown["couchdb"]["database_reads"]["value"], 2);
        assert_eq!(shown["couchdb"]["database_writes"]["value"], 1);
        assert_eq!(shown["couchdb"]["httpd"]["bulk_requests"]["value"], 1);
        assert!(counts_documents("db"));
        assert!(!counts_documents("_users"));
        assert!(!counts_documents("a/_replicator"));
    }

    #[test]
    fn sub_paths_pick_a_group_a_metric_or_null() {
        let shown = to_json(&Stats::new().metrics(&gauges()));
        let one = extract(shown.clone(), ["couchdb", "httpd_status_codes", "201"]);
        assert_eq!(one["desc"], "number of HTTP 201 Created responses");
        assert_eq!(
            extract(shown.clone(), ["couchdb", "request_time", "value", "n"]),
            json!(0)
        );
        assert!(extract(shown.clone(), ["couchdb", "nope"]).is_null());
        assert!(extract(shown.clone(), ["couchdb", "database_reads", "value", "x"]).is_null());
        assert_eq!(extract(shown.clone(), []), shown);
    }

    /// Every line a comment or `name{labels} value`; every family declared
    /// once before its samples.
    fn parse(text: &str) -> Vec<(String, String, f64)> {
        let mut declared = std::collections::HashMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (family, kind) = rest.split_once(' ').unwrap();
                assert!(
                    declared
                        .insert(family.to_string(), kind.to_string())
                        .is_none(),
                    "{family} declared twice"
                );
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap();
            let name = series.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            let family = ["_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains_key(*f)))
                .unwrap_or(name);
            assert!(declared.contains_key(family), "{line} before its TYPE");
            samples.push((series.to_string(), declared[family].clone(), value));
        }
        samples
    }

    #[test]
    fn the_prometheus_text_uses_couchdbs_names() {
        let stats = Stats::new();
        stats.request_started(&Method::GET);
        stats.request_finished(StatusCode::OK, Instant::now());
        let text = to_prometheus(
            &stats.metrics(&gauges()),
            &System {
                uptime_seconds: 42,
                nodes: 1,
            },
        );
        let samples = parse(&text);
        let find = |series: &str| {
            samples
                .iter()
                .find(|(s, ..)| s == series)
                .unwrap_or_else(|| panic!("no {series} in\n{text}"))
                .clone()
        };
        assert_eq!(find("couchdb_httpd_requests_total").2, 1.0);
        assert_eq!(find("couchdb_httpd_requests_total").1, "counter");
        assert_eq!(find("couchdb_httpd_request_methods{method=\"GET\"}").2, 1.0);
        assert_eq!(
            find("couchdb_httpd_request_methods{method=\"GET\"}").1,
            "counter"
        );
        assert_eq!(find("couchdb_httpd_status_codes{code=\"200\"}").2, 1.0);
        assert_eq!(
            find("couchdb_open_databases"),
            ("couchdb_open_databases".into(), "gauge".into(), 3.0)
        );
        assert_eq!(find("couchdb_database_reads_total").1, "counter");
        assert_eq!(find("couchdb_database_writes_total").1, "counter");
        assert_eq!(find("couchdb_httpd_bulk_requests_total").1, "counter");
        assert_eq!(
            find("couchdb_request_time_seconds{quantile=\"0.999\"}").1,
            "summary"
        );
        assert_eq!(find("couchdb_request_time_seconds_count").2, 1.0);
        assert!(find("couchdb_request_time_seconds{quantile=\"0.5\"}").2 < 1.0);
        assert_eq!(find("couchdb_dbinfo_seconds_sum").2, 0.0);
        assert_eq!(
            find("couchdb_couch_replicator_jobs_running"),
            (
                "couchdb_couch_replicator_jobs_running".into(),
                "gauge".into(),
                2.0
            )
        );
        assert_eq!(find("couchdb_couch_replicator_jobs_total").2, 4.0);
        assert_eq!(find("couchdb_uptime_seconds").2, 42.0);
        assert_eq!(find("couchdb_membership{nodes=\"all_nodes\"}").2, 1.0);
        assert!(text.contains(
            "# HELP couchdb_httpd_request_methods number of HTTP requests by method\n\
             # TYPE couchdb_httpd_request_methods counter\n"
        ));
    }
}
