//! HTTP throughput and memory of Recliner against Apache CouchDB and
//! PouchDB Server, the same workload on each in one run, printed as Markdown
//! tables for BENCHMARKS.md.
//!
//! `cargo xtask bench http` builds it (release), installs PouchDB Server from
//! `bench/node` and runs it:
//!
//! ```text
//! http_bench [--pouchdb-server PATH/bin/pouchdb-server] [--node node]
//!            [--couchdb-script PATH/couchdb.sh]
//!            [--docs 100000] [--clients 64] [--rounds 200]
//! ```
//!
//! With `--couchdb-script`, Recliner and CouchDB run alternately, A B B A,
//! each on a fresh server, and each one's two runs are averaged (memory:
//! the higher). Both fsync every acknowledged write at their defaults.
//!
//! The `recliner` binary is `RECLINER_BIN`, else the one beside this
//! example's target folder (`target/release/recliner`); without
//! `--pouchdb-server` only Recliner is measured.
//!
//! Each server is started on its own (never both at once, so they do not
//! share the two cores), on a loopback ephemeral port with a temporary data
//! folder, and stopped afterwards. Per server: `_bulk_docs` load; full reads
//! of `_all_docs?include_docs=true` and `_changes` (with and without docs),
//! each three times (medians, and the server's highest memory peak); then
//! concurrent single-document writers and readers on a fresh database.
//!
//! Read timings stop at the last byte received. Parsing the same bodies with
//! serde_json is timed apart, as the client's own limit: a client that parses
//! what it reads cannot go faster than that, whatever the server does.
//!
//! The client runs on a single-threaded runtime: it takes at most one core
//! and leaves the other to the server.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use recliner_tests::bench::{
    BenchServer, bench_doc, cpu_seconds, parse_options, proc_status_mib, reset_peak,
};
use recliner_tests::recliner_bin;
use serde_json::{Value, json};

/// Documents per `_bulk_docs` request.
const BATCH: usize = 1000;
/// No single request may take longer: keeps the whole run bounded even
/// when a server stalls.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);
/// Each full read is repeated this many times and the median kept: on a
/// small shared machine single runs vary by a factor of two.
const READ_REPEATS: usize = 3;

#[derive(Debug)]
struct Options {
    pouchdb_server: Option<PathBuf>,
    couchdb_script: Option<PathBuf>,
    node: String,
    docs: usize,
    clients: usize,
    rounds: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: http_bench [--pouchdb-server PATH] [--node PATH] [--couchdb-script PATH] \
         [--docs N] [--clients N] [--rounds N]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let (mut clients, mut rounds) = (64, 200);
    let common = parse_options(usage, |flag, n| match flag {
        "--clients" => {
            clients = n;
            true
        }
        "--rounds" => {
            rounds = n;
            true
        }
        _ => false,
    });
    let options = Options {
        pouchdb_server: common.pouchdb_server,
        couchdb_script: common.couchdb_script,
        node: common.node,
        docs: common.docs,
        clients,
        rounds,
    };
    if options.docs == 0 || !options.docs.is_multiple_of(BATCH) {
        usage();
    }
    options
}

/// The figures of one server.
#[derive(Debug, Default, Clone)]
struct Figures {
    bulk_docs: f64,
    all_docs: f64,
    changes: f64,
    changes_docs: f64,
    single_docs: f64,
    /// MiB: resident set after the load, before the reads.
    rss_before_reads: Option<f64>,
    /// MiB: VmHWM during each read (reset before it).
    peak_all_docs: Option<f64>,
    peak_changes: Option<f64>,
    peak_changes_docs: Option<f64>,
}

impl Figures {
    /// Two runs of the same server as one: rates averaged, memory the
    /// higher of the two.
    fn combine(&self, other: &Figures) -> Figures {
        let mean = |a: f64, b: f64| (a + b) / 2.0;
        let high = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Figures {
            bulk_docs: mean(self.bulk_docs, other.bulk_docs),
            all_docs: mean(self.all_docs, other.all_docs),
            changes: mean(self.changes, other.changes),
            changes_docs: mean(self.changes_docs, other.changes_docs),
            single_docs: mean(self.single_docs, other.single_docs),
            rss_before_reads: high(self.rss_before_reads, other.rss_before_reads),
            peak_all_docs: high(self.peak_all_docs, other.peak_all_docs),
            peak_changes: high(self.peak_changes, other.peak_changes),
            peak_changes_docs: high(self.peak_changes_docs, other.peak_changes_docs),
        }
    }

    fn peak_reads(&self) -> Option<f64> {
        [
            self.peak_all_docs,
            self.peak_changes,
            self.peak_changes_docs,
        ]
        .into_iter()
        .collect::<Option<Vec<f64>>>()
        .map(|peaks| peaks.into_iter().fold(0.0, f64::max))
    }
}

/// The client's own ceilings, measured on the bodies it received.
#[derive(Debug, Default, Clone)]
struct ClientLimits {
    /// Documents/s serializing the `_bulk_docs` bodies (done before timing).
    serialize_bulk: f64,
    /// Rows/s parsing each read's body into `serde_json::Value`.
    parse_all_docs: f64,
    parse_changes: f64,
    parse_changes_docs: f64,
}

/// The CPU time used since `before`, for the progress lines.
fn cpu_since(pid: u32, before: Option<f64>) -> String {
    match (cpu_seconds(pid), before) {
        (Some(after), Some(before)) => format!("{:.2}s", after - before),
        _ => "n/a".into(),
    }
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

/// The request bodies of the load: built once, sent to both servers.
fn bulk_bodies(docs: usize) -> (Vec<String>, f64) {
    let started = Instant::now();
    let bodies = (0..docs / BATCH)
        .map(|b| {
            let batch: Vec<Value> = (b * BATCH..(b + 1) * BATCH)
                .map(|n| bench_doc(&format!("doc{n:08}"), n))
                .collect();
            json!({"docs": batch, "new_edits": true}).to_string()
        })
        .collect();
    (bodies, rate(docs, started.elapsed()))
}

async fn expect_status(response: reqwest::Response, wanted: u16, what: &str) -> String {
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{what}: no body: {e}"));
    assert_eq!(status, wanted, "{what}: {text}");
    text
}

async fn create_db(http: &reqwest::Client, server: &BenchServer, name: &str) {
    let response = http
        .put(server.url(&format!("/{name}")))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT /{name}: {e}"));
    expect_status(response, 201, &format!("PUT /{name}")).await;
}

/// Sends the batches one after the other, as one importing client does.
async fn load(http: &reqwest::Client, server: &BenchServer, bodies: &[String]) -> f64 {
    let url = server.url("/bench/_bulk_docs");
    let started = Instant::now();
    for body in bodies {
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST _bulk_docs: {e}"));
        let text = expect_status(response, 201, "POST _bulk_docs").await;
        let results: Vec<Value> = serde_json::from_str(&text).expect("_bulk_docs answers an array");
        assert!(
            results.len() == BATCH && results.iter().all(|r| r["ok"] == json!(true)),
            "_bulk_docs did not save every document: {text:.400}"
        );
    }
    rate(bodies.len() * BATCH, started.elapsed())
}

/// One full read: rows/s to the last byte, the server's peak RSS during it,
/// and the client's parse rate on the same body; checks the row count.
async fn read_once(
    http: &reqwest::Client,
    server: &BenchServer,
    path: &str,
    rows_field: &str,
    expected_rows: usize,
) -> (f64, Option<f64>, f64) {
    reset_peak(server.pid());
    let cpu_before = cpu_seconds(server.pid());
    let started = Instant::now();
    let response = http
        .get(server.url(path))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    assert_eq!(response.status().as_u16(), 200, "GET {path}");
    let body = response
        .bytes()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: body: {e}"));
    let elapsed = started.elapsed();
    let peak = proc_status_mib(server.pid(), "VmHWM:");
    let cpu = cpu_since(server.pid(), cpu_before);

    let parse_started = Instant::now();
    let parsed: Value = serde_json::from_slice(&body).expect("a JSON body");
    let parse_elapsed = parse_started.elapsed();
    let rows = parsed[rows_field].as_array().map_or(0, Vec::len);
    assert_eq!(
        rows, expected_rows,
        "GET {path}: {rows_field} holds {rows} rows"
    );
    eprintln!(
        "http_bench:   GET {path}: {} MiB in {elapsed:.2?} (server CPU {}), parsed in \
         {parse_elapsed:.2?}",
        body.len() / (1 << 20),
        cpu,
    );
    (rate(rows, elapsed), peak, rate(rows, parse_elapsed))
}

/// [`read_once`] `READ_REPEATS` times: the median rates and the highest peak,
/// so one run disturbed by the machine does not make the figure.
async fn read(
    http: &reqwest::Client,
    server: &BenchServer,
    path: &str,
    rows_field: &str,
    expected_rows: usize,
) -> (f64, Option<f64>, f64) {
    let mut rates = Vec::new();
    let mut peaks = Vec::new();
    let mut parses = Vec::new();
    for _ in 0..READ_REPEATS {
        let (rate, peak, parse) = read_once(http, server, path, rows_field, expected_rows).await;
        rates.push(rate);
        peaks.push(peak);
        parses.push(parse);
    }
    let peak = peaks
        .into_iter()
        .collect::<Option<Vec<f64>>>()
        .map(|p| p.into_iter().fold(0.0, f64::max));
    (median(rates), peak, median(parses))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// `clients` tasks, each doing `rounds` times: PUT a new document, GET it.
async fn single_docs(
    http: &reqwest::Client,
    server: &BenchServer,
    clients: usize,
    rounds: usize,
) -> f64 {
    create_db(http, server, "bench_single").await;
    let started = Instant::now();
    let tasks = (0..clients).map(|c| async move {
        for r in 0..rounds {
            let id = format!("c{c:02}-{r:04}");
            let url = server.url(&format!("/bench_single/{id}"));
            let response = http
                .put(&url)
                .header("content-type", "application/json")
                .body(bench_doc(&id, r).to_string())
                .send()
                .await
                .unwrap_or_else(|e| panic!("PUT {id}: {e}"));
            expect_status(response, 201, "PUT a document").await;
            let response = http
                .get(&url)
                .send()
                .await
                .unwrap_or_else(|e| panic!("GET {id}: {e}"));
            let text = expect_status(response, 200, "GET a document").await;
            let got: Value = serde_json::from_str(&text).expect("a document");
            assert_eq!(got["_id"], json!(id), "GET {id}");
        }
    });
    futures_util::future::join_all(tasks).await;
    rate(clients * rounds * 2, started.elapsed())
}

/// The whole workload on one running server.
async fn run(
    http: &reqwest::Client,
    server: &BenchServer,
    options: &Options,
    bodies: &[String],
) -> (Figures, ClientLimits) {
    let n = options.docs;
    let mut figures = Figures::default();
    let mut limits = ClientLimits::default();
    create_db(http, server, "bench").await;
    let cpu_before = cpu_seconds(server.pid());
    figures.bulk_docs = load(http, server, bodies).await;
    eprintln!(
        "http_bench:   _bulk_docs: {:.0} docs/s (server CPU {})",
        figures.bulk_docs,
        cpu_since(server.pid(), cpu_before)
    );
    figures.rss_before_reads = proc_status_mib(server.pid(), "VmRSS:");

    let all_docs = "/bench/_all_docs?include_docs=true";
    (
        figures.all_docs,
        figures.peak_all_docs,
        limits.parse_all_docs,
    ) = read(http, server, all_docs, "rows", n).await;
    (figures.changes, figures.peak_changes, limits.parse_changes) =
        read(http, server, "/bench/_changes", "results", n).await;
    let changes_docs = "/bench/_changes?include_docs=true";
    (
        figures.changes_docs,
        figures.peak_changes_docs,
        limits.parse_changes_docs,
    ) = read(http, server, changes_docs, "results", n).await;

    let cpu_before = cpu_seconds(server.pid());
    figures.single_docs = single_docs(http, server, options.clients, options.rounds).await;
    eprintln!(
        "http_bench:   single documents: {:.0} requests/s (server CPU {})",
        figures.single_docs,
        cpu_since(server.pid(), cpu_before)
    );
    (figures, limits)
}

fn mib(value: Option<f64>) -> String {
    value.map_or("n/a".into(), |v| format!("{v:.0} MiB"))
}

fn ratio(recliner: f64, pouchdb: Option<f64>) -> String {
    match pouchdb {
        Some(p) if p > 0.0 => format!("{:.2}", recliner / p),
        _ => "n/a".into(),
    }
}

/// One table row: Recliner, then each other server and Recliner's ratio
/// to it (CouchDB, PouchDB Server).
fn row(what: &str, unit: &str, recliner: f64, others: [Option<f64>; 2]) {
    let mut line = format!("| {what} | {recliner:.0} {unit} |");
    for other in others {
        let shown = other.map_or("not run".into(), |p| format!("{p:.0} {unit}"));
        line.push_str(&format!(" {shown} | {} |", ratio(recliner, other)));
    }
    println!("{line}");
}

fn memory_row(what: &str, recliner: Option<f64>, others: [Option<&Option<f64>>; 2]) {
    let mut line = format!("| {what} | {} |", mib(recliner));
    for other in others {
        let shown = other.map_or("not run".into(), |p| mib(*p));
        let r = match (recliner, other) {
            (Some(r), Some(Some(p))) => ratio(r, Some(*p)),
            _ => "n/a".into(),
        };
        line.push_str(&format!(" {shown} | {r} |"));
    }
    println!("{line}");
}

fn goal(what: &str, met: bool, detail: String) {
    let verdict = if met { "met" } else { "**not met**" };
    println!("| {what} | {verdict}: {detail} |");
}

fn report(
    options: &Options,
    recliner: &Figures,
    limits: &ClientLimits,
    couchdb: Option<&Figures>,
    pouchdb: Option<&Figures>,
) {
    let n = options.docs;
    let p = |f: fn(&Figures) -> f64| [couchdb.map(f), pouchdb.map(f)];
    println!();
    println!(
        "| measurement | Recliner | CouchDB | Recliner / CouchDB | PouchDB Server | Recliner / PouchDB Server |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    row(
        &format!("`_bulk_docs`, {n} docs of 1 KiB, batches of {BATCH}"),
        "docs/s",
        recliner.bulk_docs,
        p(|f| f.bulk_docs),
    );
    row(
        "`_all_docs?include_docs=true`, full read (median of 3)",
        "rows/s",
        recliner.all_docs,
        p(|f| f.all_docs),
    );
    row(
        "`_changes`, full read (median of 3)",
        "rows/s",
        recliner.changes,
        p(|f| f.changes),
    );
    row(
        "`_changes?include_docs=true`, full read (median of 3)",
        "rows/s",
        recliner.changes_docs,
        p(|f| f.changes_docs),
    );
    row(
        &format!(
            "{} clients x {} single-document PUT then GET",
            options.clients, options.rounds
        ),
        "requests/s",
        recliner.single_docs,
        p(|f| f.single_docs),
    );
    memory_row(
        "server RSS after the load, before the reads",
        recliner.rss_before_reads,
        [
            couchdb.map(|f| &f.rss_before_reads),
            pouchdb.map(|f| &f.rss_before_reads),
        ],
    );
    memory_row(
        "peak server memory (VmHWM) during the `_all_docs` read",
        recliner.peak_all_docs,
        [
            couchdb.map(|f| &f.peak_all_docs),
            pouchdb.map(|f| &f.peak_all_docs),
        ],
    );
    memory_row(
        "peak server memory (VmHWM) during the `_changes` read",
        recliner.peak_changes,
        [
            couchdb.map(|f| &f.peak_changes),
            pouchdb.map(|f| &f.peak_changes),
        ],
    );
    memory_row(
        "peak server memory (VmHWM) during the `_changes?include_docs=true` read",
        recliner.peak_changes_docs,
        [
            couchdb.map(|f| &f.peak_changes_docs),
            pouchdb.map(|f| &f.peak_changes_docs),
        ],
    );

    println!();
    println!("| the client's own limit (one core, from memory, median of 3) | result |");
    println!("| --- | --- |");
    println!(
        "| serialize the `_bulk_docs` bodies (before timing) | {:.0} docs/s |",
        limits.serialize_bulk
    );
    for (what, value) in [
        ("`_all_docs?include_docs=true`", limits.parse_all_docs),
        ("`_changes`", limits.parse_changes),
        ("`_changes?include_docs=true`", limits.parse_changes_docs),
    ] {
        println!("| parse Recliner's {what} body into `serde_json::Value` | {value:.0} rows/s |");
    }

    println!();
    println!("| goal | result |");
    println!("| --- | --- |");
    goal(
        "`_bulk_docs` >= 50,000 docs/s",
        recliner.bulk_docs >= 50_000.0,
        format!("{:.0} docs/s", recliner.bulk_docs),
    );
    let times = |r: f64, f: fn(&Figures) -> f64, wanted: f64, what: &str| match pouchdb {
        Some(pouch) => goal(
            &format!("{what} >= {wanted}x PouchDB Server"),
            r >= wanted * f(pouch),
            format!("{:.2}x", r / f(pouch)),
        ),
        None => println!("| {what} >= {wanted}x PouchDB Server | not measured |"),
    };
    times(recliner.bulk_docs, |f| f.bulk_docs, 5.0, "`_bulk_docs`");
    times(recliner.all_docs, |f| f.all_docs, 3.0, "`_all_docs` read");
    times(recliner.changes, |f| f.changes, 3.0, "`_changes` read");
    times(
        recliner.changes_docs,
        |f| f.changes_docs,
        3.0,
        "`_changes?include_docs=true` read",
    );
    match recliner.peak_reads() {
        Some(peak) => goal(
            &format!("peak server memory during a full read of {n} documents < 100 MiB"),
            peak < 100.0,
            format!("{peak:.0} MiB"),
        ),
        None => println!("| peak server memory < 100 MiB | not measured (no /proc) |"),
    }
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // The workspace's reqwest has no default TLS provider; these requests
    // are plain HTTP, but a client cannot be built without one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(options.clients * 2)
        .build()
        .expect("an HTTP client");

    eprintln!("http_bench: building {} documents", options.docs);
    let (bodies, serialize_bulk) = bulk_bodies(options.docs);

    runtime.block_on(async {
        // With CouchDB, the two alternate A B B A on fresh servers, so that
        // neither always runs on the warmer (or more loaded) machine.
        let order: &[bool] = if options.couchdb_script.is_some() {
            &[false, true, true, false]
        } else {
            &[false]
        };
        let mut recliner_runs = Vec::new();
        let mut couchdb_runs = Vec::new();
        let mut limits = ClientLimits::default();
        for &couch in order {
            let mut server = match (&options.couchdb_script, couch) {
                (Some(script), true) => {
                    eprintln!("http_bench: CouchDB ({})", script.display());
                    BenchServer::couchdb(script)
                }
                _ => {
                    eprintln!("http_bench: Recliner ({})", recliner_bin().display());
                    BenchServer::recliner("bench-recliner")
                }
            };
            server.wait_until_up(&http).await;
            let (figures, run_limits) = run(&http, &server, &options, &bodies).await;
            server.stop();
            if couch {
                couchdb_runs.push(figures);
            } else {
                recliner_runs.push(figures);
                limits = run_limits;
            }
        }
        let combined = |runs: &[Figures]| match runs {
            [one] => Some(one.clone()),
            [a, b] => Some(a.combine(b)),
            _ => None,
        };
        let recliner = combined(&recliner_runs).expect("Recliner ran");
        let couchdb = combined(&couchdb_runs);
        limits.serialize_bulk = serialize_bulk;

        let pouchdb = match &options.pouchdb_server {
            Some(script) => {
                eprintln!("http_bench: PouchDB Server ({})", script.display());
                let mut server = BenchServer::pouchdb(&options.node, script);
                server.wait_until_up(&http).await;
                let (figures, _) = run(&http, &server, &options, &bodies).await;
                server.stop();
                Some(figures)
            }
            None => None,
        };
        report(
            &options,
            &recliner,
            &limits,
            couchdb.as_ref(),
            pouchdb.as_ref(),
        );
    });
}
