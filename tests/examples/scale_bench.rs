//! How costs grow with a database: documents of ~1 KiB are loaded with
//! `_bulk_docs` (batches of 1,000, two at a time), and at every tenth the
//! load rate of that tenth and the median of random reads are measured:
//! a page of `_all_docs` from a random start key, a single `GET`, and
//! `GET /db`. Printed as a Markdown table for BENCHMARKS.md, for Recliner
//! and, with `--couchdb-script`, Apache CouchDB in the same run.
//!
//! ```text
//! scale_bench [--docs 1000000] [--couchdb-script PATH/couchdb.sh]
//! ```
//!
//! `cargo xtask bench scale` builds it (release) and runs it.

use std::time::{Duration, Instant};

use recliner_tests::SplitMix;
use recliner_tests::bench::{BenchServer, bench_doc, parse_options, proc_status_mib};

const BATCH: usize = 1000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Random reads of each kind per tenth.
const SAMPLES: usize = 60;

fn usage() -> ! {
    eprintln!("usage: scale_bench [--docs N] [--couchdb-script PATH]");
    std::process::exit(2)
}

/// The figures of one tenth.
#[derive(Debug, Clone)]
struct Tenth {
    docs: usize,
    load_docs_per_s: f64,
    all_docs_page_ms: f64,
    get_ms: f64,
    db_info_ms: f64,
    rss_mib: Option<f64>,
}

fn id(n: usize) -> String {
    format!("doc{n:09}")
}

async fn send(request: reqwest::RequestBuilder) -> String {
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    let body = response.text().await.expect("a body");
    assert!(
        status.is_success(),
        "{status}: {}",
        &body[..body.len().min(300)]
    );
    body
}

/// The median of `SAMPLES` timings of `path_of(random document number)`.
async fn median_ms(
    http: &reqwest::Client,
    server: &BenchServer,
    rng: &mut SplitMix,
    loaded: usize,
    path_of: impl Fn(usize) -> String,
) -> f64 {
    let mut times = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let path = path_of(rng.below(loaded));
        let start = Instant::now();
        send(http.get(server.url(&path))).await;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

async fn run(http: &reqwest::Client, server: &BenchServer, docs: usize) -> Vec<Tenth> {
    send(http.put(server.url("/scale"))).await;
    let mut rng = SplitMix(42);
    let tenth = docs / 10;
    let mut loaded = 0;
    let mut out = Vec::new();
    while loaded < docs {
        let start = Instant::now();
        let end = loaded + tenth;
        let mut next = loaded;
        while next < end {
            let batch = |from: usize| {
                let docs: Vec<_> = (from..(from + BATCH).min(end))
                    .map(|n| bench_doc(&id(n), n))
                    .collect();
                http.post(server.url("/scale/_bulk_docs"))
                    .json(&serde_json::json!({ "docs": docs }))
            };
            if next + BATCH < end {
                tokio::join!(send(batch(next)), send(batch(next + BATCH)));
                next += 2 * BATCH;
            } else {
                send(batch(next)).await;
                next += BATCH;
            }
        }
        let load_docs_per_s = tenth as f64 / start.elapsed().as_secs_f64();
        loaded = end;
        let all_docs_page_ms = median_ms(http, server, &mut rng, loaded, |n| {
            format!(
                "/scale/_all_docs?include_docs=true&limit=100&startkey=%22{}%22",
                id(n)
            )
        })
        .await;
        let get_ms = median_ms(http, server, &mut rng, loaded, |n| {
            format!("/scale/{}", id(n))
        })
        .await;
        let db_info_ms = median_ms(http, server, &mut rng, loaded, |_| "/scale".into()).await;
        let figures = Tenth {
            docs: loaded,
            load_docs_per_s,
            all_docs_page_ms,
            get_ms,
            db_info_ms,
            rss_mib: proc_status_mib(server.pid(), "VmRSS:"),
        };
        eprintln!("scale_bench: {figures:?}");
        out.push(figures);
    }
    out
}

/// Starts one of the servers compared.
type Starter = Box<dyn Fn() -> BenchServer>;

fn main() {
    let mut common = parse_options(usage, |_, _| false);
    common.docs = common.docs.div_ceil(10 * BATCH).max(1) * 10 * BATCH;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("an HTTP client");
    runtime.block_on(async {
        let mut results: Vec<(&str, Vec<Tenth>)> = Vec::new();
        let mut servers: Vec<(&str, Starter)> =
            vec![("Recliner", Box::new(|| BenchServer::recliner("scale-bench")))];
        if let Some(script) = common.couchdb_script.clone() {
            servers.push(("CouchDB 3.5", Box::new(move || BenchServer::couchdb(&script))));
        }
        for (name, start) in &servers {
            let mut server = start();
            server.wait_until_up(&http).await;
            eprintln!("scale_bench: {name}, {} documents", common.docs);
            results.push((name, run(&http, &server, common.docs).await));
            server.stop();
        }
        println!("\n{} documents of ~1 KiB, measured at each tenth (medians of {SAMPLES}).\n", common.docs);
        println!("| server | documents | `_bulk_docs` docs/s (that tenth) | `_all_docs` page of 100 with docs, ms | `GET` ms | `GET /db` ms | RSS MiB |");
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        for (name, tenths) in &results {
            for t in tenths {
                println!(
                    "| {name} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
                    t.docs,
                    t.load_docs_per_s,
                    t.all_docs_page_ms,
                    t.get_ms,
                    t.db_info_ms,
                    t.rss_mib.map_or("-".into(), |m| format!("{m:.0}"))
                );
            }
        }
    });
}
