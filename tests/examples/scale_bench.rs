//! How costs grow with a database: documents of ~1 KiB are loaded with
//! `_bulk_docs` (batches of 1,000, two at a time), and at every tenth the
//! load rate of that tenth, the rate of bringing a view and a Mango index
//! up to date with it, and the medians of random reads are measured: a page
//! of `_all_docs` from a random start key, a page of `_changes` from an
//! earlier tenth's sequence, a page of the view and of a Mango query from a
//! random key, a single `GET`, and `GET /db`; then the data folder's bytes
//! per document. After the load a tenth of the documents is rewritten and
//! the database compacted while single writes go on: the longest write
//! during compaction, and the file against its live data after it.
//! Printed as Markdown tables for BENCHMARKS.md, for Recliner and, with
//! `--couchdb-script`, Apache CouchDB in the same run.
//!
//! ```text
//! scale_bench [--docs 1000000] [--couchdb-script PATH/couchdb.sh]
//! ```
//!
//! `cargo xtask bench scale` builds it (release) and runs it.

use std::time::{Duration, Instant};

use recliner_tests::SplitMix;
use recliner_tests::bench::{BenchServer, bench_doc, folder_bytes, parse_options, proc_status_mib};
use serde_json::{Value, json};

const BATCH: usize = 1000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);
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
    view_docs_per_s: f64,
    mango_docs_per_s: f64,
    all_docs_page_ms: f64,
    changes_page_ms: f64,
    view_page_ms: f64,
    mango_page_ms: f64,
    get_ms: f64,
    db_info_ms: f64,
    bytes_per_doc: Option<f64>,
    rss_mib: Option<f64>,
}

/// The figures of rewriting a tenth and compacting.
#[derive(Debug, Clone)]
struct Compaction {
    rewrite_docs_per_s: f64,
    file_before: u64,
    file_after: u64,
    active_after: u64,
    folder_after: Option<u64>,
    compaction_s: f64,
    writes_during: usize,
    write_p50_ms: f64,
    longest_write_ms: f64,
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

async fn send_json(request: reqwest::RequestBuilder) -> Value {
    serde_json::from_str(&send(request).await).expect("a JSON answer")
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The median of `SAMPLES` timings of the request made for a random
/// document number.
async fn median_ms(
    rng: &mut SplitMix,
    loaded: usize,
    request: impl Fn(usize) -> reqwest::RequestBuilder,
) -> f64 {
    let mut times = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let request = request(rng.below(loaded));
        let start = Instant::now();
        send(request).await;
        times.push(ms(start));
    }
    median(times)
}

/// The indexes every tenth brings up to date: a view and a Mango index,
/// both on the document's number.
async fn define_indexes(http: &reqwest::Client, server: &BenchServer) {
    let map = "function (doc) { if (doc.type === 'bench') { emit(doc.n, null); } }";
    send(
        http.put(server.url("/scale/_design/v"))
            .json(&json!({ "views": { "n": { "map": map } } })),
    )
    .await;
    send(http.post(server.url("/scale/_index")).json(
        &json!({ "index": { "fields": ["n"] }, "ddoc": "mango", "name": "n", "type": "json" }),
    ))
    .await;
}

fn find(http: &reqwest::Client, server: &BenchServer, from: usize) -> reqwest::RequestBuilder {
    http.post(server.url("/scale/_find")).json(&json!({
        "selector": { "n": { "$gte": from } },
        "sort": [{ "n": "asc" }],
        "limit": 100,
        "use_index": "mango",
    }))
}

async fn load_tenth(http: &reqwest::Client, server: &BenchServer, from: usize, end: usize) {
    let mut next = from;
    while next < end {
        let batch = |from: usize| {
            let docs: Vec<_> = (from..(from + BATCH).min(end))
                .map(|n| bench_doc(&id(n), n))
                .collect();
            http.post(server.url("/scale/_bulk_docs"))
                .json(&json!({ "docs": docs }))
        };
        if next + BATCH < end {
            tokio::join!(send(batch(next)), send(batch(next + BATCH)));
            next += 2 * BATCH;
        } else {
            send(batch(next)).await;
            next += BATCH;
        }
    }
}

async fn run(http: &reqwest::Client, server: &BenchServer, docs: usize) -> Vec<Tenth> {
    send(http.put(server.url("/scale"))).await;
    define_indexes(http, server).await;
    let mut rng = SplitMix(42);
    let tenth = docs / 10;
    // Where each tenth ended, as the server spells it (opaque to CouchDB).
    let mut seqs = vec![Value::from(0)];
    let mut out = Vec::new();
    for loaded in (tenth..=docs).step_by(tenth) {
        let start = Instant::now();
        load_tenth(http, server, loaded - tenth, loaded).await;
        let load_docs_per_s = tenth as f64 / start.elapsed().as_secs_f64();
        let start = Instant::now();
        send(http.get(server.url("/scale/_design/v/_view/n?limit=1"))).await;
        let view_docs_per_s = tenth as f64 / start.elapsed().as_secs_f64();
        let start = Instant::now();
        send(find(http, server, 0)).await;
        let mango_docs_per_s = tenth as f64 / start.elapsed().as_secs_f64();
        let all_docs_page_ms = median_ms(&mut rng, loaded, |n| {
            http.get(server.url(&format!(
                "/scale/_all_docs?include_docs=true&limit=100&startkey=%22{}%22",
                id(n)
            )))
        })
        .await;
        let since = seqs.clone();
        let changes_page_ms = median_ms(&mut rng, since.len(), |i| {
            http.get(server.url(&format!(
                "/scale/_changes?limit=100&since={}",
                text(&since[i])
            )))
        })
        .await;
        let view_page_ms = median_ms(&mut rng, loaded, |n| {
            http.get(server.url(&format!("/scale/_design/v/_view/n?limit=100&startkey={n}")))
        })
        .await;
        let mango_page_ms = median_ms(&mut rng, loaded, |n| find(http, server, n)).await;
        let get_ms = median_ms(&mut rng, loaded, |n| {
            http.get(server.url(&format!("/scale/{}", id(n))))
        })
        .await;
        let db_info_ms = median_ms(&mut rng, loaded, |_| http.get(server.url("/scale"))).await;
        let info = send_json(http.get(server.url("/scale"))).await;
        seqs.push(info["update_seq"].clone());
        let figures = Tenth {
            docs: loaded,
            load_docs_per_s,
            view_docs_per_s,
            mango_docs_per_s,
            all_docs_page_ms,
            changes_page_ms,
            view_page_ms,
            mango_page_ms,
            get_ms,
            db_info_ms,
            bytes_per_doc: server
                .data_dir()
                .map(|dir| folder_bytes(dir) as f64 / loaded as f64),
            rss_mib: proc_status_mib(server.pid(), "VmRSS:"),
        };
        eprintln!("scale_bench: {figures:?}");
        out.push(figures);
    }
    out
}

/// A sequence as a query parameter: a number as digits, a string as is
/// (CouchDB's are made of characters a URL takes as they are).
fn text(seq: &Value) -> String {
    seq.as_str().map_or_else(|| seq.to_string(), str::to_string)
}

/// Rewrites the first tenth of the documents, then compacts while one
/// client writes single documents and times each write.
async fn rewrite_and_compact(
    http: &reqwest::Client,
    server: &BenchServer,
    docs: usize,
) -> Compaction {
    let tenth = docs / 10;
    let start = Instant::now();
    for from in (0..tenth).step_by(BATCH) {
        let page = send_json(http.get(server.url(&format!(
            "/scale/_all_docs?startkey=%22{}%22&limit={}",
            id(from),
            BATCH.min(tenth - from)
        ))))
        .await;
        let rows = page["rows"].as_array().cloned().unwrap_or_default();
        let docs: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut doc = bench_doc(&id(from + i), from + i);
                doc["_rev"] = row["value"]["rev"].clone();
                doc["rewritten"] = json!(true);
                doc
            })
            .collect();
        send(
            http.post(server.url("/scale/_bulk_docs"))
                .json(&json!({ "docs": docs })),
        )
        .await;
    }
    let rewrite_docs_per_s = tenth as f64 / start.elapsed().as_secs_f64();
    let sizes = |info: &Value, key: &str| info["sizes"][key].as_u64().unwrap_or(0);
    let file_before = sizes(&send_json(http.get(server.url("/scale"))).await, "file");
    let start = Instant::now();
    send(http.post(server.url("/scale/_compact")).json(&json!({}))).await;
    let mut writes = Vec::new();
    loop {
        let write = Instant::now();
        send(
            http.put(server.url(&format!("/scale/pause{:06}", writes.len())))
                .json(&json!({ "n": writes.len() })),
        )
        .await;
        writes.push(ms(write));
        let info = send_json(http.get(server.url("/scale"))).await;
        if info["compact_running"] == false {
            break;
        }
    }
    let compaction_s = start.elapsed().as_secs_f64();
    let info = send_json(http.get(server.url("/scale"))).await;
    Compaction {
        rewrite_docs_per_s,
        file_before,
        file_after: sizes(&info, "file"),
        active_after: sizes(&info, "active"),
        folder_after: server.data_dir().map(folder_bytes),
        compaction_s,
        writes_during: writes.len(),
        longest_write_ms: writes.iter().copied().fold(0.0, f64::max),
        write_p50_ms: median(writes),
    }
}

/// Starts one of the servers compared.
type Starter = Box<dyn Fn() -> BenchServer>;

fn print_tenths(docs: usize, results: &[(&str, Vec<Tenth>, Compaction)]) {
    println!("\n{docs} documents of ~1 KiB, measured at each tenth (medians of {SAMPLES}).\n");
    println!(
        "| server | documents | `_bulk_docs` docs/s | view build docs/s | Mango index docs/s | `_all_docs` page ms | `_changes` page ms | view page ms | Mango page ms | `GET` ms | `GET /db` ms | bytes/doc | RSS MiB |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let or_dash = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    for (name, tenths, _) in results {
        for t in tenths {
            println!(
                "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |",
                t.docs,
                t.load_docs_per_s,
                t.view_docs_per_s,
                t.mango_docs_per_s,
                t.all_docs_page_ms,
                t.changes_page_ms,
                t.view_page_ms,
                t.mango_page_ms,
                t.get_ms,
                t.db_info_ms,
                or_dash(t.bytes_per_doc),
                or_dash(t.rss_mib),
            );
        }
    }
}

fn print_compactions(results: &[(&str, Vec<Tenth>, Compaction)]) {
    println!("\nA tenth rewritten, then `_compact` while one client writes single documents.\n");
    println!(
        "| server | rewrite docs/s | file before MB | file after MB | live (`sizes.active`) MB | file / live | data folder MB | compaction s | writes during | write p50 ms | longest write ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mb = |b: u64| b as f64 / 1e6;
    for (name, _, c) in results {
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {} | {:.2} | {:.1} |",
            c.rewrite_docs_per_s,
            mb(c.file_before),
            mb(c.file_after),
            mb(c.active_after),
            c.file_after as f64 / c.active_after.max(1) as f64,
            c.folder_after
                .map_or("-".into(), |b| format!("{:.1}", mb(b))),
            c.compaction_s,
            c.writes_during,
            c.write_p50_ms,
            c.longest_write_ms,
        );
    }
}

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
        let mut results = Vec::new();
        let mut servers: Vec<(&str, Starter)> = vec![(
            "Recliner",
            Box::new(|| BenchServer::recliner("scale-bench")),
        )];
        if let Some(script) = common.couchdb_script.clone() {
            servers.push((
                "CouchDB 3.5",
                Box::new(move || BenchServer::couchdb(&script)),
            ));
        }
        for (name, start) in &servers {
            let mut server = start();
            server.wait_until_up(&http).await;
            eprintln!("scale_bench: {name}, {} documents", common.docs);
            let tenths = run(&http, &server, common.docs).await;
            let compaction = rewrite_and_compact(&http, &server, common.docs).await;
            eprintln!("scale_bench: {compaction:?}");
            results.push((*name, tenths, compaction));
            server.stop();
        }
        print_tenths(common.docs, &results);
        print_compactions(&results);
    });
}
