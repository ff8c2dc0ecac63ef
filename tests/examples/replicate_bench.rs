//! Replication throughput and memory of Recliner's replicator, against
//! PouchDB Server replicating with PouchDB's own replicator, in one run,
//! printed as Markdown tables for BENCHMARKS.md.
//!
//! `cargo xtask bench replicate` builds it (release), installs PouchDB Server
//! from `bench/node` and runs it:
//!
//! ```text
//! replicate_bench [--pouchdb-server PATH/bin/pouchdb-server] [--node node]
//!                 [--couchdb-script PATH/couchdb.sh]
//!                 [--docs 100000] [--pouchdb-docs N]
//! ```
//!
//! The `recliner` binary is `RECLINER_BIN`, else the one beside this
//! example's target folder (`target/release/recliner`); without
//! `--pouchdb-server` only Recliner is measured.
//!
//! Runs, one after the other, each on fresh servers (loopback, ephemeral
//! ports, temporary data folders, request logging off):
//!
//! 1. two `recliner` servers; the source is loaded with `--docs` ~1 KiB
//!    documents (`_bulk_docs`, batches of 1,000); then `POST /_replicate` on
//!    the target pulls them (`create_target`), then on the source pushes them
//!    to a second database of the target, then on the source copies them to
//!    a local database (local -> local, no HTTP);
//! 2. the pull again on two fresh servers, with a 100 KiB attachment of
//!    random bytes on every tenth document;
//! 3. two PouchDB Server processes: the source is loaded with
//!    `--pouchdb-docs` (default `--docs`) of the same documents, then
//!    `POST /_replicate` on the target pulls them with PouchDB's replicator;
//! 4. with `--couchdb-script`, two Apache CouchDB instances: the same pull,
//!    without and with attachments, by CouchDB's replicator in the target
//!    (its random start-up delay set to 0). These run between Recliner's
//!    plain runs and its attachment run (A B B A).
//!
//! Each replication is timed from the request to its answer (a one-shot
//! replication answers when it is done). Meanwhile the replicating process's
//! resident memory is sampled every 50 ms; its peak is the highest sample or
//! its VmHWM (reset before the run), whichever is higher. Afterwards every
//! target must hold exactly the documents of its source (`doc_count`), else
//! the run fails after printing what it measured.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use recliner_tests::bench::{
    BenchServer, bench_doc, cpu_seconds, parse_options, proc_status_mib, reset_peak,
};
use recliner_tests::content::seeded_bytes;
use recliner_tests::recliner_bin;
use serde_json::{Value, json};

/// Documents per `_bulk_docs` request of the load.
const BATCH: usize = 1000;
/// Every this many documents, one carries an attachment (run 2).
const ATTACHMENT_EVERY: usize = 10;
/// Size of each attachment of run 2.
const ATTACHMENT_BYTES: usize = 100 * 1024;
/// Any request of the load may take this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);
/// A replication may take this long before the run gives up on it.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(3600);
/// How often the replicating process's memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

#[derive(Debug)]
struct Options {
    pouchdb_server: Option<PathBuf>,
    couchdb_script: Option<PathBuf>,
    node: String,
    docs: usize,
    pouchdb_docs: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: replicate_bench [--pouchdb-server PATH] [--node PATH] [--couchdb-script PATH] [--docs N] \
         [--pouchdb-docs N]  (document counts: multiples of {BATCH})"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut pouchdb_docs = 0;
    let common = parse_options(usage, |flag, n| {
        let known = flag == "--pouchdb-docs";
        if known {
            pouchdb_docs = n;
        }
        known
    });
    let mut options = Options {
        pouchdb_server: common.pouchdb_server,
        couchdb_script: common.couchdb_script,
        node: common.node,
        docs: common.docs,
        pouchdb_docs,
    };
    if options.pouchdb_docs == 0 {
        options.pouchdb_docs = options.docs;
    }
    for n in [options.docs, options.pouchdb_docs] {
        if n == 0 || !n.is_multiple_of(BATCH) {
            usage();
        }
    }
    options
}

fn doc_id(n: usize) -> String {
    format!("doc{n:08}")
}

/// One `_bulk_docs` body of documents `first..first + BATCH`, with an inline
/// attachment on every tenth when `attachments`; and the bytes it carries
/// (documents' JSON without attachments, plus attachment bytes).
fn bulk_body(first: usize, attachments: bool) -> (String, u64) {
    let mut payload = 0u64;
    let docs: Vec<Value> = (first..first + BATCH)
        .map(|n| {
            let mut d = bench_doc(&doc_id(n), n);
            payload += d.to_string().len() as u64;
            if attachments && n.is_multiple_of(ATTACHMENT_EVERY) {
                let bytes = seeded_bytes(n as u64 + 1, ATTACHMENT_BYTES);
                payload += bytes.len() as u64;
                d["_attachments"] = json!({"blob.bin": {
                    "content_type": "application/octet-stream",
                    "data": base64::engine::general_purpose::STANDARD.encode(&bytes),
                }});
            }
            d
        })
        .collect();
    (
        json!({"docs": docs, "new_edits": true}).to_string(),
        payload,
    )
}

/// Samples a process's VmRSS every [`SAMPLE_EVERY`] on a thread of its own
/// (the client's runtime is busy waiting for the replication).
#[derive(Debug)]
struct MemorySampler {
    pid: u32,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<f64>>,
}

impl MemorySampler {
    fn start(pid: u32) -> MemorySampler {
        reset_peak(pid);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak: Option<f64> = None;
            loop {
                if let Some(rss) = proc_status_mib(pid, "VmRSS:") {
                    peak = Some(peak.map_or(rss, |p| p.max(rss)));
                }
                if flag.load(Ordering::Relaxed) {
                    return peak;
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        MemorySampler { pid, stop, thread }
    }

    /// The peak in MiB: the highest sample or VmHWM, whichever is higher.
    fn finish(self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let sampled = self.thread.join().ok().flatten();
        let hwm = proc_status_mib(self.pid, "VmHWM:");
        match (sampled, hwm) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

async fn expect_status(response: reqwest::Response, wanted: &[u16], what: &str) -> String {
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{what}: no body: {e}"));
    assert!(wanted.contains(&status), "{what}: {status} {text}");
    text
}

async fn create_db(http: &reqwest::Client, server: &BenchServer, name: &str) {
    let response = http
        .put(server.url(&format!("/{name}")))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT /{name}: {e}"));
    expect_status(response, &[201], &format!("PUT /{name}")).await;
}

/// Posts one `_bulk_docs` body and checks every document was saved.
async fn post_bulk(http: &reqwest::Client, server: &BenchServer, db: &str, body: String) {
    let response = http
        .post(server.url(&format!("/{db}/_bulk_docs")))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST _bulk_docs: {e}"));
    let text = expect_status(response, &[201], "POST _bulk_docs").await;
    let results: Vec<Value> = serde_json::from_str(&text).expect("_bulk_docs answers an array");
    assert!(
        results.len() == BATCH && results.iter().all(|r| r["ok"] == json!(true)),
        "_bulk_docs did not save every document: {text:.400}"
    );
}

/// Creates `db` and loads `docs` documents into it; returns the payload
/// bytes (documents' JSON plus attachment bytes).
async fn load(
    http: &reqwest::Client,
    server: &BenchServer,
    db: &str,
    docs: usize,
    attachments: bool,
) -> u64 {
    create_db(http, server, db).await;
    let started = Instant::now();
    let mut payload = 0;
    for first in (0..docs).step_by(BATCH) {
        let (body, bytes) = bulk_body(first, attachments);
        payload += bytes;
        post_bulk(http, server, db, body).await;
    }
    eprintln!(
        "replicate_bench:   loaded {docs} documents ({:.0} MiB) in {:.2?}",
        payload as f64 / MIB,
        started.elapsed()
    );
    payload
}

const MIB: f64 = (1 << 20) as f64;

/// A database's `doc_count`.
async fn doc_count(http: &reqwest::Client, server: &BenchServer, db: &str) -> Option<u64> {
    let response = http.get(server.url(&format!("/{db}"))).send().await.ok()?;
    let info: Value = response.json().await.ok()?;
    info["doc_count"].as_u64()
}

/// What one replication measured.
#[derive(Debug, Clone)]
struct Figures {
    what: String,
    docs: usize,
    payload: u64,
    seconds: f64,
    /// MiB, of the replicating process: before the request, and its peak.
    rss_before: Option<f64>,
    rss_peak: Option<f64>,
    /// Seconds of CPU during the run: replicating process, the other peer.
    cpu_replicator: Option<f64>,
    cpu_peer: Option<f64>,
}

impl Figures {
    fn docs_per_s(&self) -> f64 {
        self.docs as f64 / self.seconds
    }

    fn mib_per_s(&self) -> f64 {
        self.payload as f64 / MIB / self.seconds
    }
}

/// One replication: `body` posted to `/_replicate` on `on` (the replicating
/// process); `peer` is the other process, if any. Checks afterwards that
/// `target_db` on `target` holds `docs` documents; a mismatch is pushed
/// onto `failures`.
#[allow(clippy::too_many_arguments)]
async fn replicate(
    http: &reqwest::Client,
    what: &str,
    on: &BenchServer,
    peer: Option<&BenchServer>,
    body: Value,
    (target, target_db): (&BenchServer, &str),
    (docs, payload): (usize, u64),
    failures: &mut Vec<String>,
) -> Figures {
    // Shown without the peers' passwords.
    let mut shown = body.clone();
    for side in ["source", "target"] {
        if let Some(Value::String(url)) = shown.get_mut(side) {
            *url = recliner_tests::without_credentials(url);
        }
    }
    eprintln!("replicate_bench:   {what}: POST /_replicate {shown}");
    let rss_before = proc_status_mib(on.pid(), "VmRSS:");
    let cpu_before = cpu_seconds(on.pid());
    let peer_cpu_before = peer.and_then(|p| cpu_seconds(p.pid()));
    let sampler = MemorySampler::start(on.pid());
    let started = Instant::now();
    let response = http
        .post(on.url("/_replicate"))
        .timeout(REPLICATION_TIMEOUT)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let rss_peak = sampler.finish();
    let cpu_replicator = cpu_seconds(on.pid())
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let cpu_peer = peer
        .and_then(|p| cpu_seconds(p.pid()))
        .zip(peer_cpu_before)
        .map(|(after, before)| after - before);
    match response {
        Ok(response) => {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if status != 200 || answer["ok"] != json!(true) {
                failures.push(format!(
                    "{what}: /_replicate answered {status}: {text:.600}"
                ));
                let output = on.output();
                if !output.is_empty() {
                    eprintln!("replicate_bench:   server output:\n{output}");
                }
            } else {
                let history = &answer["history"][0];
                eprintln!(
                    "replicate_bench:   {what}: {seconds:.2} s, docs_read {} docs_written {} \
                     doc_write_failures {}",
                    history["docs_read"], history["docs_written"], history["doc_write_failures"]
                );
            }
        }
        Err(e) => failures.push(format!("{what}: /_replicate failed: {e}")),
    }
    let count = doc_count(http, target, target_db).await;
    if count != Some(docs as u64) {
        failures.push(format!(
            "{what}: the target database `{target_db}` holds {} documents, not {docs}",
            count.map_or("an unknown number of".into(), |c| c.to_string())
        ));
    }
    Figures {
        what: what.into(),
        docs,
        payload,
        seconds,
        rss_before,
        rss_peak,
        cpu_replicator,
        cpu_peer,
    }
}

/// Checks the first document's attachment reached the target whole.
async fn check_attachment(
    http: &reqwest::Client,
    source: &BenchServer,
    target: &BenchServer,
    failures: &mut Vec<String>,
) {
    let path = format!("/db/{}", doc_id(0));
    let stub = |server: &BenchServer| {
        let url = server.url(&path);
        async move {
            let doc: Value = http.get(url).send().await.ok()?.json().await.ok()?;
            Some(doc["_attachments"]["blob.bin"].clone())
        }
    };
    let (a, b) = (stub(source).await, stub(target).await);
    let ok = match (&a, &b) {
        (Some(a), Some(b)) => {
            a["digest"] == b["digest"] && b["length"] == json!(ATTACHMENT_BYTES) && !b.is_null()
        }
        _ => false,
    };
    if !ok {
        failures.push(format!(
            "attachments: {path} has attachment {b:?} on the target, {a:?} on the source"
        ));
    }
}

/// Runs 1 (Recliner -> Recliner over HTTP, pull and push; local -> local).
async fn recliner_plain(
    http: &reqwest::Client,
    docs: usize,
    failures: &mut Vec<String>,
) -> Vec<Figures> {
    eprintln!("replicate_bench: Recliner ({})", recliner_bin().display());
    let source = BenchServer::recliner("bench-replicate");
    let target = BenchServer::recliner("bench-replicate");
    let payload = load(http, &source, "db", docs, false).await;
    let pull = replicate(
        http,
        "Recliner -> Recliner over HTTP, pull (target replicates)",
        &target,
        Some(&source),
        json!({"source": source.url("/db"), "target": "db", "create_target": true}),
        (&target, "db"),
        (docs, payload),
        failures,
    )
    .await;
    let push = replicate(
        http,
        "Recliner -> Recliner over HTTP, push (source replicates)",
        &source,
        Some(&target),
        json!({"source": "db", "target": target.url("/pushed"), "create_target": true}),
        (&target, "pushed"),
        (docs, payload),
        failures,
    )
    .await;
    let local = replicate(
        http,
        "Recliner local -> local (one process)",
        &source,
        None,
        json!({"source": "db", "target": "copy", "create_target": true}),
        (&source, "copy"),
        (docs, payload),
        failures,
    )
    .await;
    source.stop();
    target.stop();
    vec![pull, push, local]
}

/// Run 2: the pull with attachments, on fresh servers.
async fn recliner_attachments(
    http: &reqwest::Client,
    docs: usize,
    failures: &mut Vec<String>,
) -> Figures {
    eprintln!("replicate_bench: Recliner, with attachments");
    let source = BenchServer::recliner("bench-replicate");
    let target = BenchServer::recliner("bench-replicate");
    let payload = load(http, &source, "db", docs, true).await;
    let figures = replicate(
        http,
        &format!(
            "Recliner -> Recliner over HTTP, pull, 1 in {ATTACHMENT_EVERY} documents with a \
             {} KiB attachment",
            ATTACHMENT_BYTES / 1024
        ),
        &target,
        Some(&source),
        json!({"source": source.url("/db"), "target": "db", "create_target": true}),
        (&target, "db"),
        (docs, payload),
        failures,
    )
    .await;
    check_attachment(http, &source, &target, failures).await;
    source.stop();
    target.stop();
    figures
}

/// Run 3: PouchDB Server -> PouchDB Server, PouchDB's replicator running in
/// the target server (express-pouchdb's `/_replicate` calls
/// `PouchDB.replicate`; a local target is created on demand).
async fn pouchdb_pair(
    http: &reqwest::Client,
    node: &str,
    script: &Path,
    docs: usize,
    failures: &mut Vec<String>,
) -> Figures {
    eprintln!("replicate_bench: PouchDB Server ({})", script.display());
    let mut source = BenchServer::pouchdb(node, script);
    let mut target = BenchServer::pouchdb(node, script);
    source.wait_until_up(http).await;
    target.wait_until_up(http).await;
    let payload = load(http, &source, "db", docs, false).await;
    let figures = replicate(
        http,
        "PouchDB Server -> PouchDB Server over HTTP, pull (PouchDB's replicator in the target)",
        &target,
        Some(&source),
        json!({"source": source.url("/db"), "target": "db"}),
        (&target, "db"),
        (docs, payload),
        failures,
    )
    .await;
    source.stop();
    target.stop();
    figures
}

/// Run 4: Apache CouchDB -> Apache CouchDB, CouchDB's replicator in the
/// target, without or with attachments.
async fn couchdb_pair(
    http: &reqwest::Client,
    script: &Path,
    docs: usize,
    attachments: bool,
    failures: &mut Vec<String>,
) -> Figures {
    eprintln!("replicate_bench: CouchDB ({})", script.display());
    let mut source = BenchServer::couchdb(script);
    let mut target = BenchServer::couchdb(script);
    source.wait_until_up(http).await;
    target.wait_until_up(http).await;
    // A job waits up to 5 s at random before it starts: not replication work.
    let jitter = http
        .put(target.url("/_node/_local/_config/replicator/startup_jitter"))
        .body("\"0\"")
        .send()
        .await;
    if !jitter.is_ok_and(|r| r.status().is_success()) {
        failures.push("CouchDB: cannot set replicator/startup_jitter".into());
    }
    let payload = load(http, &source, "db", docs, attachments).await;
    let what = if attachments {
        format!(
            "CouchDB -> CouchDB over HTTP, pull, 1 in {ATTACHMENT_EVERY} documents with a {} KiB \
             attachment (CouchDB's replicator in the target)",
            ATTACHMENT_BYTES / 1024
        )
    } else {
        "CouchDB -> CouchDB over HTTP, pull (CouchDB's replicator in the target)".to_string()
    };
    let figures = replicate(
        http,
        &what,
        &target,
        Some(&source),
        json!({"source": source.url("/db"), "target": "db", "create_target": true}),
        (&target, "db"),
        (docs, payload),
        failures,
    )
    .await;
    source.stop();
    target.stop();
    figures
}

fn mib(value: Option<f64>) -> String {
    value.map_or("n/a".into(), |v| format!("{v:.0} MiB"))
}

fn secs(value: Option<f64>) -> String {
    value.map_or("n/a".into(), |v| format!("{v:.1} s"))
}

fn goal(what: &str, met: bool, detail: String) {
    let verdict = if met { "met" } else { "**not met**" };
    println!("| {what} | {verdict}: {detail} |");
}

fn report(options: &Options, runs: &[Figures], couchdb: &[Figures], pouchdb: Option<&Figures>) {
    println!();
    println!(
        "| replication | documents | time | docs/s | MiB/s | replicating process RSS before | \
         its peak RSS | its CPU | the other peer's CPU |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for f in runs.iter().chain(couchdb).chain(pouchdb) {
        println!(
            "| {} | {} | {:.2} s | {:.0} | {:.1} | {} | {} | {} | {} |",
            f.what,
            f.docs,
            f.seconds,
            f.docs_per_s(),
            f.mib_per_s(),
            mib(f.rss_before),
            mib(f.rss_peak),
            secs(f.cpu_replicator),
            f.cpu_peer.map_or("-".into(), |c| format!("{c:.1} s")),
        );
    }
    println!();
    println!(
        "MiB/s counts the documents' JSON plus attachment bytes. Documents are ~1 KiB; the \
         source is loaded with `_bulk_docs` in batches of {BATCH} before each replication."
    );
    if let Some(p) = pouchdb
        && p.docs != options.docs
    {
        println!(
            "PouchDB Server replicated {} documents (`--pouchdb-docs`), Recliner {}: the \
             comparison is of rates (docs/s).",
            p.docs, options.docs
        );
    }

    let http = &runs[0];
    let local = &runs[2];
    println!();
    println!("| goal | result |");
    println!("| --- | --- |");
    goal(
        "Recliner -> Recliner over HTTP >= 20,000 docs/s",
        http.docs_per_s() >= 20_000.0,
        format!(
            "{:.0} docs/s pulled ({:.0} pushed)",
            http.docs_per_s(),
            runs[1].docs_per_s()
        ),
    );
    goal(
        "local -> local >= 50,000 docs/s",
        local.docs_per_s() >= 50_000.0,
        format!("{:.0} docs/s", local.docs_per_s()),
    );
    if let [plain, with_attachments] = couchdb {
        println!(
            "| over HTTP against the CouchDB pair (CouchDB's replicator) | {:.1}x ({:.0} against \
             {:.0} docs/s); with attachments {:.1}x ({:.0} against {:.0} docs/s) |",
            http.docs_per_s() / plain.docs_per_s(),
            http.docs_per_s(),
            plain.docs_per_s(),
            runs[3].docs_per_s() / with_attachments.docs_per_s(),
            runs[3].docs_per_s(),
            with_attachments.docs_per_s(),
        );
    }
    match pouchdb {
        Some(p) => {
            let times = http.docs_per_s() / p.docs_per_s();
            goal(
                "over HTTP >= 10x the PouchDB Server pair",
                times >= 10.0,
                format!(
                    "{times:.1}x ({:.0} against {:.0} docs/s)",
                    http.docs_per_s(),
                    p.docs_per_s()
                ),
            );
        }
        None => println!("| over HTTP >= 10x the PouchDB Server pair | not measured |"),
    }
    let peaks: Option<Vec<f64>> = runs.iter().map(|f| f.rss_peak).collect();
    match peaks {
        Some(peaks) => {
            let peak = peaks.into_iter().fold(0.0, f64::max);
            goal(
                "peak memory of the replicating Recliner process < 100 MiB",
                peak < 100.0,
                format!("{peak:.0} MiB at most, over every Recliner run"),
            );
        }
        None => println!("| peak replicator memory < 100 MiB | not measured (no /proc) |"),
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
        .build()
        .expect("an HTTP client");

    let failures = runtime.block_on(async {
        let mut failures = Vec::new();
        let mut runs = recliner_plain(&http, options.docs, &mut failures).await;
        let mut couchdb = Vec::new();
        if let Some(script) = &options.couchdb_script {
            for attachments in [false, true] {
                couchdb.push(
                    couchdb_pair(&http, script, options.docs, attachments, &mut failures).await,
                );
            }
        }
        runs.push(recliner_attachments(&http, options.docs, &mut failures).await);
        let pouchdb = match &options.pouchdb_server {
            Some(script) => Some(
                pouchdb_pair(
                    &http,
                    &options.node,
                    script,
                    options.pouchdb_docs,
                    &mut failures,
                )
                .await,
            ),
            None => None,
        };
        report(&options, &runs, &couchdb, pouchdb.as_ref());
        failures
    });
    if !failures.is_empty() {
        eprintln!();
        for failure in &failures {
            eprintln!("replicate_bench: FAILED: {failure}");
        }
        println!();
        println!(
            "**The run failed** ({} checks): see the FAILED lines.",
            failures.len()
        );
        std::process::exit(1);
    }
}
