//! Mango `_find` of Recliner against PouchDB Server (and Apache CouchDB
//! when given its script), the same workload on each in one run, printed
//! as a Markdown table for BENCHMARKS.md.
//!
//! `cargo xtask bench find` builds it (release), installs PouchDB Server
//! and runs it:
//!
//! ```text
//! find_bench [--pouchdb-server PATH/bin/pouchdb-server] [--node node]
//!            [--couchdb-script PATH/couchdb.sh] [--docs 100000]
//! ```
//!
//! Per server, on a fresh one: load `--docs` documents of ~1 KiB; run a
//! `_find` returning 1,000 documents by a range of `n` without an index (a
//! full scan; ids are not in `n`'s order); create a JSON index on `n` and
//! time its build (the creation and the first query through it); then run
//! the same `_find` through the index. Servers
//! run one at a time, so they never share the two cores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use recliner_tests::bench::{BenchServer, bench_doc, parse_options, proc_status_mib, reset_peak};
use serde_json::{Value, json};

const BATCH: usize = 1000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);
/// Documents each `_find` returns.
const MATCHES: usize = 1000;
const SCANS: usize = 3;
const INDEXED: usize = 30;

fn usage() -> ! {
    eprintln!(
        "usage: find_bench [--pouchdb-server PATH] [--node PATH] [--couchdb-script PATH] [--docs N]"
    );
    std::process::exit(2)
}

#[derive(Debug, Default, Clone)]
struct Figures {
    /// `_find`s of 1,000 documents per second, without an index.
    scan_queries_per_s: f64,
    /// Documents indexed per second (creation and first query).
    index_docs_per_s: f64,
    /// `_find`s of 1,000 documents per second, through the index.
    indexed_queries_per_s: f64,
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
            // Ids in another order than `n`: a scan finds the matches
            // anywhere, not in one run at the start.
            .map(|n| bench_doc(&format!("doc{:08}", (n * 7919) % docs), n))
            .collect();
        send(
            http.post(url("/bench/_bulk_docs"))
                .json(&json!({ "docs": batch })),
        )
        .await;
    }
    reset_peak(server.pid());
    let find = |i: usize| {
        let from = (i * 7919) % (docs - MATCHES);
        json!({"selector": {"n": {"$gte": from, "$lt": from + MATCHES}}, "limit": MATCHES})
    };
    let check = |body: &str| {
        let answer: Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(
            answer["docs"].as_array().map(Vec::len),
            Some(MATCHES),
            "every match"
        );
    };

    let started = Instant::now();
    for i in 0..SCANS {
        check(&send(http.post(url("/bench/_find")).json(&find(i))).await);
    }
    let scan_queries_per_s = SCANS as f64 / started.elapsed().as_secs_f64();

    // PouchDB Server builds an index when it is created, CouchDB and
    // Recliner at its first query: the build is both.
    let started = Instant::now();
    send(
        http.post(url("/bench/_index"))
            .json(&json!({"index": {"fields": ["n"]}, "ddoc": "by-n", "name": "by-n"})),
    )
    .await;
    check(&send(http.post(url("/bench/_find")).json(&find(0))).await);
    let index_docs_per_s = docs as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    for i in 1..=INDEXED {
        check(&send(http.post(url("/bench/_find")).json(&find(i))).await);
    }
    let indexed_queries_per_s = INDEXED as f64 / started.elapsed().as_secs_f64();

    Figures {
        scan_queries_per_s,
        index_docs_per_s,
        indexed_queries_per_s,
        peak_mib: proc_status_mib(server.pid(), "VmHWM:"),
    }
}

fn main() {
    let mut common = parse_options(usage, |_, _| false);
    if common.docs < 2 * MATCHES || !common.docs.is_multiple_of(BATCH) {
        common.docs = common.docs.div_ceil(BATCH).max(2 * MATCHES / BATCH) * BATCH;
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
        let mut servers: Vec<(&str, Starter)> =
            vec![("Recliner", Box::new(|| BenchServer::recliner("find-bench")))];
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
            eprintln!("find_bench: {name}, {} documents", common.docs);
            let figures = run(&http, &server, common.docs).await;
            eprintln!("find_bench: {name}: {figures:?}");
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
    println!("\n{docs} documents of ~1 KiB; each _find returns {MATCHES}; one query at a time.\n");
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
    let rows: [(&str, Pick); 3] = [
        ("`_find` without an index, queries/s", |f| {
            f.scan_queries_per_s
        }),
        ("index build (creation and first query), docs/s", |f| {
            f.index_docs_per_s
        }),
        ("`_find` through the index, queries/s", |f| {
            f.indexed_queries_per_s
        }),
    ];
    for (label, pick) in rows {
        print!("| {label} |");
        for (_, f) in results {
            print!(" {:.1} |", pick(f));
        }
        if let (Some(base), Some((_, ours))) = (&base, results.first()) {
            print!(" {:.1}x |", pick(ours) / pick(base));
        }
        println!();
    }
    print!("| peak RSS, MiB |");
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
    if let Some((_, ours)) = results.first() {
        println!(
            "\nRecliner: the index makes the query {:.1}x faster than the scan.",
            ours.indexed_queries_per_s / ours.scan_queries_per_s
        );
    }
}
