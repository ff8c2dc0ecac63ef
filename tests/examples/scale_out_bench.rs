//! Write throughput of Recliner on PostgreSQL (one, two and three nodes on
//! one database) against one node on SQLite and PouchDB Server, the same
//! workload in one run, printed as a Markdown table for BENCHMARKS.md.
//!
//! `cargo xtask bench http --store postgres` builds it (release), starts a
//! PostgreSQL cluster that fsyncs every commit (as SQLite and PouchDB
//! Server do at their defaults) and runs it:
//!
//! ```text
//! scale_out_bench --store postgres://... [--pouchdb-server PATH] [--node node]
//!                 [--docs 20000] [--clients 64] [--rounds 40]
//! ```
//!
//! Each configuration gets fresh servers and a fresh database. Workloads:
//! `_bulk_docs` (batches of 500, four requests in flight, spread over the
//! nodes in turn), then `clients` concurrent writers each creating
//! `rounds` documents one `PUT` at a time, spread over the nodes.

use std::time::{Duration, Instant};

use recliner_tests::bench::{BenchServer, bench_doc};
use recliner_tests::{TempDir, TestServer};
use serde_json::json;

/// Documents per `_bulk_docs` request.
const BATCH: usize = 500;
/// `_bulk_docs` requests in flight at once.
const BULK_IN_FLIGHT: usize = 4;

struct Options {
    store: String,
    pouchdb_server: Option<std::path::PathBuf>,
    node: String,
    docs: usize,
    clients: usize,
    rounds: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: scale_out_bench --store postgres://... [--pouchdb-server PATH] [--node PATH] \
         [--docs N] [--clients N] [--rounds N]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    // --store takes a URL, not a number: taken out before the common parser.
    let mut args: Vec<String> = std::env::args().collect();
    let store = match args.iter().position(|a| a == "--store") {
        Some(at) if at + 1 < args.len() => {
            let url = args.remove(at + 1);
            args.remove(at);
            url
        }
        _ => usage(),
    };
    let (mut clients, mut rounds) = (64, 40);
    let common = recliner_tests::bench::parse_options_from(args, usage, |flag, n| match flag {
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
    Options {
        store,
        pouchdb_server: common.pouchdb_server,
        node: common.node,
        docs: if common.docs == 100_000 {
            20_000
        } else {
            common.docs
        },
        clients,
        rounds,
    }
}

/// What one configuration did.
struct Figures {
    bulk_docs_per_s: f64,
    writes_per_s: f64,
}

/// The servers of one configuration: their base URLs (with credentials).
struct Servers {
    urls: Vec<String>,
    _recliner: Vec<(TestServer, TempDir)>,
    _pouchdb: Option<BenchServer>,
}

fn recliner_nodes(count: usize, store: &str, label: &str) -> Servers {
    let mut nodes = Vec::new();
    for i in 0..count {
        let dir = TempDir::new(&format!("{label}-{i}"));
        let server = TestServer::start_with_env(
            dir.path(),
            &["--log-level", "warn"],
            &[("RECLINER_STORE", store)],
        );
        nodes.push((server, dir));
    }
    Servers {
        urls: nodes.iter().map(|(s, _)| s.url.clone()).collect(),
        _recliner: nodes,
        _pouchdb: None,
    }
}

async fn run(http: &reqwest::Client, servers: &Servers, options: &Options, db: &str) -> Figures {
    let urls = &servers.urls;
    let created = http
        .put(format!("{}/{db}", urls[0]))
        .send()
        .await
        .expect("a PUT /db answer");
    assert!(created.status().is_success(), "cannot create {db}");
    // _bulk_docs: batches spread over the nodes, a few in flight.
    let batches: Vec<serde_json::Value> = (0..options.docs)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(|chunk| {
            let docs: Vec<_> = chunk
                .iter()
                .map(|n| bench_doc(&format!("bulk-{n:08}"), *n))
                .collect();
            json!({ "docs": docs })
        })
        .collect();
    let started = Instant::now();
    for (wave, group) in batches.chunks(BULK_IN_FLIGHT).enumerate() {
        let sends = group.iter().enumerate().map(|(i, body)| {
            let url = &urls[(wave * BULK_IN_FLIGHT + i) % urls.len()];
            http.post(format!("{url}/{db}/_bulk_docs"))
                .json(body)
                .send()
        });
        for reply in futures_util::future::join_all(sends).await {
            let reply = reply.expect("a _bulk_docs answer");
            assert_eq!(reply.status(), 201, "_bulk_docs refused");
        }
    }
    let bulk = started.elapsed();
    // Single-document writers, spread over the nodes.
    let started = Instant::now();
    let writers = (0..options.clients).map(|c| {
        let url = urls[c % urls.len()].clone();
        let http = http.clone();
        let rounds = options.rounds;
        let db = db.to_string();
        async move {
            for r in 0..rounds {
                let id = format!("single-{c:03}-{r:05}");
                let reply = http
                    .put(format!("{url}/{db}/{id}"))
                    .json(&bench_doc(&id, r))
                    .send()
                    .await
                    .expect("a PUT answer");
                assert_eq!(reply.status(), 201, "PUT refused");
            }
        }
    });
    futures_util::future::join_all(writers).await;
    let singles = started.elapsed();
    Figures {
        bulk_docs_per_s: options.docs as f64 / bulk.as_secs_f64(),
        writes_per_s: (options.clients * options.rounds) as f64 / singles.as_secs_f64(),
    }
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .pool_max_idle_per_host(options.clients * 2)
        .build()
        .expect("an HTTP client");
    runtime.block_on(async {
        let mut rows: Vec<(String, Figures)> = Vec::new();
        if let Some(script) = &options.pouchdb_server {
            eprintln!("scale_out_bench: PouchDB Server");
            let mut pouch = BenchServer::pouchdb(&options.node, script);
            pouch.wait_until_up(&http).await;
            let servers = Servers {
                urls: vec![pouch.url("")],
                _recliner: Vec::new(),
                _pouchdb: Some(pouch),
            };
            let figures = run(&http, &servers, &options, "bench").await;
            rows.push(("PouchDB Server (LevelDB)".into(), figures));
        }
        eprintln!("scale_out_bench: one node on SQLite");
        let sqlite = recliner_nodes(1, "", "sqlite");
        rows.push((
            "Recliner, 1 node on SQLite".into(),
            run(&http, &sqlite, &options, "bench").await,
        ));
        drop(sqlite);
        for count in 1..=3 {
            eprintln!("scale_out_bench: {count} node(s) on PostgreSQL");
            let nodes = recliner_nodes(count, &options.store, "pg");
            let db = format!("bench{count}");
            rows.push((
                format!("Recliner, {count} node(s) on one PostgreSQL"),
                run(&http, &nodes, &options, &db).await,
            ));
        }
        let base = rows
            .iter()
            .find(|(name, _)| name.starts_with("PouchDB"))
            .map(|(_, f)| (f.bulk_docs_per_s, f.writes_per_s));
        println!(
            "\n{} documents by `_bulk_docs` ({BATCH} per request, {BULK_IN_FLIGHT} in flight); \
             {} writers × {} single-document `PUT`s\n",
            options.docs, options.clients, options.rounds
        );
        println!("| configuration | `_bulk_docs` docs/s | ratio | single writes/s | ratio |");
        println!("| --- | --- | --- | --- | --- |");
        for (name, f) in &rows {
            let ratio = |value: f64, of: Option<f64>| match of {
                Some(of) if of > 0.0 => format!("{:.2}×", value / of),
                _ => "–".into(),
            };
            println!(
                "| {name} | {:.0} | {} | {:.0} | {} |",
                f.bulk_docs_per_s,
                ratio(f.bulk_docs_per_s, base.map(|b| b.0)),
                f.writes_per_s,
                ratio(f.writes_per_s, base.map(|b| b.1)),
            );
        }
    });
}
