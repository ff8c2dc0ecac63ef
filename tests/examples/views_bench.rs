//! Views and filters of Recliner against PouchDB Server (and Apache CouchDB
//! when given its script), the same workload on each in one run, printed as
//! a Markdown table for BENCHMARKS.md.
//!
//! `cargo xtask bench views` builds it (release), installs PouchDB Server
//! and runs it:
//!
//! ```text
//! views_bench [--pouchdb-server PATH/bin/pouchdb-server] [--node node]
//!             [--couchdb-script PATH/couchdb.sh] [--docs 100000]
//! ```
//!
//! Per server, on a fresh one: load `--docs` documents of ~1 KiB with
//! `_bulk_docs`; build a view (`emit(doc.n, 1)` with `_sum`, and a second
//! one with `_count`) by its first query; query the reduction, a grouped
//! range and 200 single keys; read `_changes` through a filter function
//! that passes half the documents. The server's peak resident memory is
//! taken over the index build and the queries. Servers run one at a time,
//! so they never share the two cores with each other.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use recliner_tests::bench::{BenchServer, bench_doc, parse_options, proc_status_mib, reset_peak};
use serde_json::{Value, json};

const BATCH: usize = 1000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);
const KEY_QUERIES: usize = 200;

fn usage() -> ! {
    eprintln!(
        "usage: views_bench [--pouchdb-server PATH] [--node PATH] [--couchdb-script PATH] [--docs N]"
    );
    std::process::exit(2)
}

#[derive(Debug, Default, Clone)]
struct Figures {
    /// Documents indexed per second by the first query.
    index_docs_per_s: f64,
    /// The `_sum` of the whole view, seconds.
    reduce_s: f64,
    /// Single-key queries per second.
    key_queries_per_s: f64,
    /// Rows read per second through a filter function (all rows scanned).
    filtered_changes_rows_per_s: f64,
    /// MiB: highest resident set during the build and the queries.
    peak_mib: Option<f64>,
}

async fn run(http: &reqwest::Client, server: &BenchServer, docs: usize) -> Figures {
    let url = |path: &str| server.url(path);
    let send = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let body = response.text().await.expect("a body");
        assert!(
            status.is_success(),
            "{status}: {}",
            &body[..body.len().min(300)]
        );
        body
    };
    send(http.put(url("/bench"))).await;
    for start in (0..docs).step_by(BATCH) {
        let batch: Vec<Value> = (start..(start + BATCH).min(docs))
            .map(|n| bench_doc(&format!("doc{n:08}"), n))
            .collect();
        send(
            http.post(url("/bench/_bulk_docs"))
                .json(&json!({ "docs": batch })),
        )
        .await;
    }
    send(http.put(url("/bench/_design/b")).json(&json!({
        "views": {
            "by_n": {"map": "function (doc) { emit(doc.n, 1); }", "reduce": "_sum"},
            "count": {"map": "function (doc) { emit(doc.n % 100, 1); }", "reduce": "_count"}
        },
        "filters": {"even": "function (doc, req) { return doc.n % 2 === 0; }"}
    })))
    .await;
    reset_peak(server.pid());

    let started = Instant::now();
    send(http.get(url("/bench/_design/b/_view/by_n?limit=1&reduce=false"))).await;
    let index_docs_per_s = docs as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    let sum: Value =
        serde_json::from_str(&send(http.get(url("/bench/_design/b/_view/by_n"))).await)
            .unwrap_or_default();
    let reduce_s = started.elapsed().as_secs_f64();
    assert_eq!(sum["rows"][0]["value"], json!(docs), "the _sum of the 1s");
    send(http.get(url(
        "/bench/_design/b/_view/count?group=true&startkey=10&endkey=20",
    )))
    .await;

    let started = Instant::now();
    for i in 0..KEY_QUERIES {
        let key = (i * 7919) % docs;
        send(http.get(url(&format!(
            "/bench/_design/b/_view/by_n?reduce=false&key={key}"
        ))))
        .await;
    }
    let key_queries_per_s = KEY_QUERIES as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    let changes = send(http.get(url("/bench/_changes?filter=b/even"))).await;
    let filtered_changes_rows_per_s = docs as f64 / started.elapsed().as_secs_f64();
    assert!(
        changes.contains("doc00000002"),
        "the filter passes even documents"
    );

    Figures {
        index_docs_per_s,
        reduce_s,
        key_queries_per_s,
        filtered_changes_rows_per_s,
        peak_mib: proc_status_mib(server.pid(), "VmHWM:"),
    }
}

fn main() {
    let mut common = parse_options(usage, |_, _| false);
    if common.docs == 0 || !common.docs.is_multiple_of(BATCH) {
        common.docs = common.docs.div_ceil(BATCH).max(1) * BATCH;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The workspace's reqwest has no default TLS provider; these requests
    // are plain HTTP, but a client cannot be built without one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("an HTTP client");
    runtime.block_on(async {
        let mut results: Vec<(&str, Figures)> = Vec::new();
        let mut servers: Vec<(&str, Starter)> = vec![(
            "Recliner",
            Box::new(|| BenchServer::recliner("views-bench")),
        )];
        if let Some(script) = common.pouchdb_server.clone() {
            let node = common.node.clone();
            servers.push((
                "PouchDB Server",
                Box::new(move || BenchServer::pouchdb(&node, &script)),
            ));
        }
        if let Some(script) = common.couchdb_script.clone() {
            let script: PathBuf = script;
            servers.push((
                "CouchDB 3.5",
                Box::new(move || BenchServer::couchdb(&script)),
            ));
        }
        for (name, start) in &servers {
            let mut server = start();
            server.wait_until_up(&http).await;
            eprintln!("views_bench: {name}, {} documents", common.docs);
            let figures = run(&http, &server, common.docs).await;
            eprintln!("views_bench: {name}: {figures:?}");
            results.push((name, figures));
            server.stop();
        }
        print_table(&results, common.docs);
    });
}

/// Starts one of the servers compared.
type Starter = Box<dyn Fn() -> BenchServer>;

fn print_table(results: &[(&str, Figures)], docs: usize) {
    let base = results
        .iter()
        .find(|(n, _)| *n == "PouchDB Server")
        .map(|(_, f)| f.clone());
    println!("\n{docs} documents of ~1 KiB; one query at a time.\n");
    print!("| measurement |");
    for (name, _) in results {
        print!(" {name} |");
    }
    if base.is_some() {
        print!(" Recliner / PouchDB Server |");
    }
    println!();
    print!("| --- |");
    for _ in results {
        print!(" --- |");
    }
    if base.is_some() {
        print!(" --- |");
    }
    println!();
    type Pick = fn(&Figures) -> f64;
    let rows: [(&str, Pick, bool); 4] = [
        (
            "view build (first query), docs/s",
            |f| f.index_docs_per_s,
            true,
        ),
        (
            "`_sum` of the whole view, ms",
            |f| f.reduce_s * 1000.0,
            false,
        ),
        ("single-key queries/s", |f| f.key_queries_per_s, true),
        (
            "filtered `_changes`, rows scanned/s",
            |f| f.filtered_changes_rows_per_s,
            true,
        ),
    ];
    for (label, pick, higher_is_better) in rows {
        print!("| {label} |");
        for (_, f) in results {
            print!(" {:.0} |", pick(f));
        }
        if let (Some(base), Some((_, ours))) = (&base, results.first()) {
            let ratio = if higher_is_better {
                pick(ours) / pick(base)
            } else {
                pick(base) / pick(ours)
            };
            print!(" {ratio:.1}x |");
        }
        println!();
    }
    print!("| peak RSS during build and queries, MiB |");
    for (_, f) in results {
        match f.peak_mib {
            Some(mib) => print!(" {mib:.0} |"),
            None => print!(" - |"),
        }
    }
    if base.is_some() {
        print!(" |");
    }
    println!();
}
