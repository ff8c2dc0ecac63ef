//! Throughput of Recliner on PostgreSQL (one, two and three nodes on one
//! database) against one node on SQLite and PouchDB Server, the same
//! workload in one run, printed as Markdown tables for BENCHMARKS.md:
//! writes, reads, and each node's peak memory.
//!
//! `cargo xtask bench http --store postgres` builds it (release), starts a
//! PostgreSQL cluster that fsyncs every commit (as SQLite and PouchDB
//! Server do at their defaults) and runs it:
//!
//! ```text
//! scale_out_bench --store postgres://... [--pouchdb-server PATH] [--node node]
//!                 [--docs 20000] [--clients 64] [--rounds 40] [--pin 1]
//!                 [--postgres-pid PID]
//! ```
//!
//! Each configuration gets fresh servers and a fresh database. Workloads:
//! `_bulk_docs` (batches of 1,000, four requests in flight, spread over the
//! nodes in turn), then `clients` concurrent writers each creating
//! `rounds` documents one `PUT` at a time, spread over the nodes; then
//! reads of the bulk documents, spread over the nodes: eight readers each
//! reading a slice with `_all_docs?include_docs=true`, the same with
//! `_changes?include_docs=true`, and `clients` readers each making `rounds`
//! `GET`s of single documents. `--pin 1` gives PostgreSQL (the server
//! `--postgres-pid` names, and its processes) a core, each node a core of
//! its own (`taskset`) and the client the rest, when the machine has a core
//! for each of them; otherwise it says so and runs unpinned.

use std::time::{Duration, Instant};

use recliner_tests::bench::{BenchServer, bench_doc};
use recliner_tests::{TempDir, TestServer};
use serde_json::json;

/// Documents per `_bulk_docs` request.
const BATCH: usize = 1000;
/// `_bulk_docs` requests in flight at once.
const BULK_IN_FLIGHT: usize = 4;
/// Concurrent readers of `_all_docs` and `_changes`, each reading a slice.
const SLICE_READERS: usize = 8;

struct Options {
    store: String,
    pouchdb_server: Option<std::path::PathBuf>,
    node: String,
    docs: usize,
    clients: usize,
    rounds: usize,
    pin: bool,
    /// PostgreSQL's server process, pinned with the nodes.
    postgres_pid: Option<u32>,
}

fn usage() -> ! {
    eprintln!(
        "usage: scale_out_bench --store postgres://... [--pouchdb-server PATH] [--node PATH] \
         [--docs N] [--clients N] [--rounds N] [--pin 0|1] [--postgres-pid PID]"
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
    let (mut clients, mut rounds, mut pin, mut postgres_pid) = (64, 40, false, None);
    let common = recliner_tests::bench::parse_options_from(args, usage, |flag, n| match flag {
        "--clients" => {
            clients = n;
            true
        }
        "--rounds" => {
            rounds = n;
            true
        }
        "--pin" => {
            pin = n != 0;
            true
        }
        "--postgres-pid" => {
            postgres_pid = u32::try_from(n).ok();
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
        pin,
        postgres_pid,
    }
}

/// What one configuration did.
struct Figures {
    bulk_docs_per_s: f64,
    writes_per_s: f64,
    all_docs_per_s: f64,
    changes_per_s: f64,
    gets_per_s: f64,
    /// The largest peak RSS of its servers, in MiB.
    peak_rss_mib: f64,
}

/// The servers of one configuration: their base URLs (with credentials).
struct Servers {
    urls: Vec<String>,
    /// The server processes, whose peak memory is reported.
    pids: Vec<u32>,
    _recliner: Vec<(TestServer, TempDir)>,
    _pouchdb: Option<BenchServer>,
}

fn recliner_nodes(count: usize, store: &str, label: &str, cores: Option<&Cores>) -> Servers {
    let mut nodes = Vec::new();
    for i in 0..count {
        let dir = TempDir::new(&format!("{label}-{i}"));
        let server = TestServer::start_with_env(
            dir.path(),
            &["--log-level", "warn"],
            &[("RECLINER_STORE", store)],
        );
        if let Some(cores) = cores {
            pin(server.pid(), &cores.nodes[i].to_string());
        }
        nodes.push((server, dir));
    }
    Servers {
        urls: nodes.iter().map(|(s, _)| s.url.clone()).collect(),
        pids: nodes.iter().map(|(s, _)| s.pid()).collect(),
        _recliner: nodes,
        _pouchdb: None,
    }
}

/// Where `--pin` puts each process: a core for PostgreSQL, one per node,
/// the rest for the client.
struct Cores {
    postgres: usize,
    nodes: Vec<usize>,
    client: String,
}

/// A core for PostgreSQL, one per node of the largest configuration and at
/// least one for the client, or `None` (with a note) when the machine has
/// too few.
fn plan_cores(nodes: usize) -> Option<Cores> {
    let available = std::thread::available_parallelism().map_or(1, usize::from);
    let needed = nodes + 2;
    if available < needed {
        eprintln!(
            "scale_out_bench: --pin needs {needed} cores (PostgreSQL, one per node, the \
             client); this machine has {available}: running unpinned"
        );
        return None;
    }
    Some(Cores {
        postgres: 0,
        nodes: (1..=nodes).collect(),
        client: format!("{}-{}", nodes + 1, available - 1),
    })
}

/// Pins PostgreSQL's server and the processes it runs now (those it
/// starts later inherit the server's cores).
fn pin_postgres(pid: u32, core: usize) {
    let children = std::process::Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let core = core.to_string();
    pin(pid, &core);
    for child in children
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
    {
        pin(child, &core);
    }
}

/// Moves every thread of `pid` onto `cores` (a `taskset` list).
fn pin(pid: u32, cores: &str) {
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cores, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status();
    if !pinned.is_ok_and(|s| s.success()) {
        eprintln!("scale_out_bench: cannot pin {pid} to cores {cores}");
    }
}

/// The largest peak RSS of `pids`, in MiB.
fn peak_rss(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|pid| recliner_tests::bench::proc_status_mib(*pid, "VmHWM:"))
        .fold(0.0, f64::max)
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
    let reads = read(http, urls, options, db).await;
    Figures {
        bulk_docs_per_s: options.docs as f64 / bulk.as_secs_f64(),
        writes_per_s: (options.clients * options.rounds) as f64 / singles.as_secs_f64(),
        all_docs_per_s: reads.0,
        changes_per_s: reads.1,
        gets_per_s: reads.2,
        peak_rss_mib: peak_rss(&servers.pids),
    }
}

/// GETs `url` and parses its JSON, which must come with a 200.
async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    let reply = http.get(url).send().await.expect("a GET answer");
    assert_eq!(reply.status(), 200, "GET {url} refused");
    reply.json().await.expect("a JSON answer")
}

/// Reads the bulk documents back, spread over the nodes: rows per second
/// of `_all_docs?include_docs=true` and `_changes?include_docs=true` by
/// [`SLICE_READERS`] concurrent readers, and `GET`s per second.
async fn read(
    http: &reqwest::Client,
    urls: &[String],
    options: &Options,
    db: &str,
) -> (f64, f64, f64) {
    let node = |i: usize| &urls[i % urls.len()];
    let slice = options.docs.div_ceil(SLICE_READERS);
    // `_all_docs`: reader r reads the ids of its slice.
    let started = Instant::now();
    let reads = (0..SLICE_READERS).map(|r| {
        // Keys are JSON: the ids as JSON strings.
        let key = |n: usize| serde_json::Value::from(format!("bulk-{n:08}")).to_string();
        let first = key(r * slice);
        let last = key(((r + 1) * slice).min(options.docs) - 1);
        let url = format!(
            "{}/{db}/_all_docs?include_docs=true&startkey={}&endkey={}",
            node(r),
            urlencoding(&first),
            urlencoding(&last)
        );
        async move {
            get_json(http, &url).await["rows"]
                .as_array()
                .map_or(0, Vec::len)
        }
    });
    let rows: usize = futures_util::future::join_all(reads).await.iter().sum();
    assert!(rows >= options.docs, "_all_docs read {rows} rows");
    let all_docs = rows as f64 / started.elapsed().as_secs_f64();
    // `_changes`: where each slice starts, found first (untimed), then
    // reader r reads its slice from there.
    let mut marks = vec![serde_json::Value::from(0)];
    while marks.len() < SLICE_READERS {
        let since = marks.last().map(|m| m.to_string()).unwrap_or_default();
        let since = since.trim_matches('"').to_string();
        let page = get_json(
            http,
            &format!(
                "{}/{db}/_changes?since={}&limit={slice}",
                node(0),
                urlencoding(&since)
            ),
        )
        .await;
        marks.push(page["last_seq"].clone());
    }
    let started = Instant::now();
    let reads = marks.iter().enumerate().map(|(r, since)| {
        let since = since.to_string().trim_matches('"').to_string();
        let url = format!(
            "{}/{db}/_changes?include_docs=true&since={}&limit={slice}",
            node(r),
            urlencoding(&since)
        );
        async move {
            get_json(http, &url).await["results"]
                .as_array()
                .map_or(0, Vec::len)
        }
    });
    let rows: usize = futures_util::future::join_all(reads).await.iter().sum();
    let changes = rows as f64 / started.elapsed().as_secs_f64();
    // Single documents: each reader its own sequence of ids.
    let started = Instant::now();
    let readers = (0..options.clients).map(|c| {
        let url = node(c).clone();
        async move {
            let mut n = c.wrapping_mul(7919);
            for _ in 0..options.rounds {
                n = (n.wrapping_mul(1_103_515_245).wrapping_add(12_345)) % options.docs.max(1);
                get_json(http, &format!("{url}/{db}/bulk-{n:08}")).await;
            }
        }
    });
    futures_util::future::join_all(readers).await;
    let gets = (options.clients * options.rounds) as f64 / started.elapsed().as_secs_f64();
    (all_docs, changes, gets)
}

/// Percent-encodes a query parameter's value.
fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
    let cores = if options.pin { plan_cores(3) } else { None };
    if let Some(cores) = &cores {
        pin(std::process::id(), &cores.client);
        match options.postgres_pid {
            Some(pid) => pin_postgres(pid, cores.postgres),
            None => eprintln!("scale_out_bench: no --postgres-pid: PostgreSQL runs unpinned"),
        }
    }
    runtime.block_on(async {
        let mut rows: Vec<(String, Figures)> = Vec::new();
        if let Some(script) = &options.pouchdb_server {
            eprintln!("scale_out_bench: PouchDB Server");
            let mut pouch = BenchServer::pouchdb(&options.node, script);
            pouch.wait_until_up(&http).await;
            let servers = Servers {
                urls: vec![pouch.url("")],
                pids: vec![pouch.pid()],
                _recliner: Vec::new(),
                _pouchdb: Some(pouch),
            };
            let figures = run(&http, &servers, &options, "bench").await;
            rows.push(("PouchDB Server (LevelDB)".into(), figures));
        }
        eprintln!("scale_out_bench: one node on SQLite");
        let sqlite = recliner_nodes(1, "", "sqlite", cores.as_ref());
        rows.push((
            "Recliner, 1 node on SQLite".into(),
            run(&http, &sqlite, &options, "bench").await,
        ));
        drop(sqlite);
        for count in 1..=3 {
            eprintln!("scale_out_bench: {count} node(s) on PostgreSQL");
            let nodes = recliner_nodes(count, &options.store, "pg", cores.as_ref());
            let db = format!("bench{count}");
            rows.push((
                format!("Recliner, {count} node(s) on one PostgreSQL"),
                run(&http, &nodes, &options, &db).await,
            ));
        }
        print_tables(&rows, &options, cores.is_some());
    });
}

/// The figures as two Markdown tables, each with ratios to PouchDB Server
/// and to one node on SQLite.
fn print_tables(rows: &[(String, Figures)], options: &Options, pinned: bool) {
    let of = |prefix: &str| rows.iter().find(|(name, _)| name.starts_with(prefix));
    let pouch = of("PouchDB").map(|(_, f)| f);
    let sqlite = of("Recliner, 1 node on SQLite").map(|(_, f)| f);
    let ratio = |value: f64, base: Option<f64>| match base {
        Some(base) if base > 0.0 => format!("{:.2}×", value / base),
        _ => "–".into(),
    };
    let cell = |value: f64, pick: fn(&Figures) -> f64| {
        format!(
            "{value:.0} | {} | {}",
            ratio(value, pouch.map(pick)),
            ratio(value, sqlite.map(pick))
        )
    };
    println!(
        "\n{} documents by `_bulk_docs` ({BATCH} per request, {BULK_IN_FLIGHT} in flight); \
         {} writers × {} single-document `PUT`s; reads of the bulk documents by \
         {SLICE_READERS} readers of slices, and {} readers × {} `GET`s; {}\n",
        options.docs,
        options.clients,
        options.rounds,
        options.clients,
        options.rounds,
        if pinned {
            "PostgreSQL and each node pinned to a core of its own"
        } else {
            "unpinned"
        }
    );
    println!(
        "| configuration | `_bulk_docs` docs/s | vs PouchDB | vs SQLite | single writes/s | vs PouchDB | vs SQLite |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, f) in rows {
        println!(
            "| {name} | {} | {} |",
            cell(f.bulk_docs_per_s, |f| f.bulk_docs_per_s),
            cell(f.writes_per_s, |f| f.writes_per_s)
        );
    }
    println!(
        "\n| configuration | `_all_docs?include_docs` rows/s | vs PouchDB | vs SQLite | `_changes?include_docs` rows/s | vs PouchDB | vs SQLite | `GET`s/s | vs PouchDB | vs SQLite | peak RSS per node |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, f) in rows {
        println!(
            "| {name} | {} | {} | {} | {:.0} MiB |",
            cell(f.all_docs_per_s, |f| f.all_docs_per_s),
            cell(f.changes_per_s, |f| f.changes_per_s),
            cell(f.gets_per_s, |f| f.gets_per_s),
            f.peak_rss_mib
        );
    }
}
