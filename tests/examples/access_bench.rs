//! One database, many users: what per-document access costs at scale, and
//! the "database per user" pattern it replaces, in the same run.
//!
//! `cargo xtask bench access` builds it (release) and runs it:
//!
//! ```text
//! access_bench [--users 10000] [--docs-per-user 100] [--pattern-users 10000] [--samples 10]
//! ```
//!
//! 1. One `recliner` gets one database with per-document access holding
//!    `--users` × `--docs-per-user` documents, each naming one user in
//!    `_access` (users' documents interleaved over the whole sequence).
//!    While it fills, at a quarter, half and all of it, `--samples` users
//!    each get one new document and read their feed `since` where they
//!    left it: that read must cost their new rows, not the database's
//!    (flat as the database grows).
//! 2. Then, for each sampled user: their first `_changes` (all their rows)
//!    and their `_all_docs`; a stock PouchDB (node, memory adapter)
//!    replicating their documents; how soon an admin's write reaches a
//!    user waiting on a longpoll feed; an admin's Mango query across all
//!    users; the server's memory and the data folder's size.
//! 3. The pattern it replaces, on a second `recliner`: `--pattern-users`
//!    databases of `--docs-per-user` documents, each with one continuous
//!    replication into one shared database. Measured: the time until the
//!    shared database holds everything, memory, disk, how soon a user's
//!    write reaches the shared database, and the same admin query there.
//!
//! Prints Markdown tables for BENCHMARKS.md with the issue's goals.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::path::Path;
use std::time::{Duration, Instant};

use recliner_tests::bench::{parse_options, proc_status_mib};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// Documents per `_bulk_docs`.
const BATCH: usize = 1000;
/// Requests in flight while loading.
const CONCURRENCY: usize = 4;
const PASSWORD: &str = "bench-password-for-users";
/// How long the pattern's replications may take to catch up.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct Options {
    users: usize,
    docs_per_user: usize,
    pattern_users: usize,
    samples: usize,
    node: String,
    /// CouchDB's `couchdb.sh`: the pattern measured on CouchDB 3.5 too.
    couchdb_script: Option<std::path::PathBuf>,
    couchdb_users: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: access_bench [--users 10000] [--docs-per-user 100] [--pattern-users 10000] [--samples 10] [--node node] [--couchdb-script PATH] [--couchdb-users 1000]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        users: 10_000,
        docs_per_user: 100,
        pattern_users: 10_000,
        samples: 10,
        node: "node".into(),
        couchdb_script: None,
        couchdb_users: 1_000,
    };
    let common = parse_options(usage, |flag, n| {
        match flag {
            "--users" => o.users = n,
            "--docs-per-user" => o.docs_per_user = n,
            "--pattern-users" => o.pattern_users = n,
            "--samples" => o.samples = n,
            "--couchdb-users" => o.couchdb_users = n,
            _ => return false,
        }
        true
    });
    o.node = common.node;
    o.couchdb_script = common.couchdb_script;
    o.samples = o.samples.clamp(1, o.users);
    o.docs_per_user = o.docs_per_user.max(2);
    o
}

fn user_name(u: usize) -> String {
    format!("u{u:05}")
}

/// A small document of user `u`.
fn doc(id: &str, u: usize, n: usize) -> Value {
    json!({"_id": id, "_access": [user_name(u)], "n": n, "note": format!("note {n} of {}", user_name(u))})
}

fn as_user(server: &TestServer, u: usize) -> Client {
    Client::at(&server.plain_url.replacen(
        "http://",
        &format!("http://{}:{PASSWORD}@", user_name(u)),
        1,
    ))
}

/// The users measured: spread over the whole range.
fn sampled(o: &Options) -> Vec<usize> {
    (0..o.samples).map(|i| i * (o.users / o.samples)).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn dir_mib(path: &Path) -> f64 {
    fn walk(path: &Path) -> u64 {
        match std::fs::read_dir(path) {
            Ok(entries) => entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum(),
            Err(_) => 0,
        }
    }
    walk(path) as f64 / (1024.0 * 1024.0)
}

/// Posts batches of documents, `CONCURRENCY` at a time.
async fn load(admin: &Client, db: &str, batches: Vec<Vec<Value>>) {
    use futures_util::StreamExt;
    futures_util::stream::iter(batches.into_iter().map(|docs| {
        let admin = admin.clone();
        let path = format!("/{db}/_bulk_docs");
        async move {
            let r = admin.post(&path, json!({"docs": docs})).await;
            assert_eq!(r.status, 201, "{}", r.text);
        }
    }))
    .buffer_unordered(CONCURRENCY)
    .collect::<Vec<()>>()
    .await;
}

/// The access database's documents `from..to` (in sequence order).
fn access_batches(o: &Options, from: usize, to: usize) -> Vec<Vec<Value>> {
    (from..to)
        .step_by(BATCH)
        .map(|start| {
            (start..(start + BATCH).min(to))
                .map(|i| doc(&format!("d{i:08}"), i % o.users, i / o.users))
                .collect()
        })
        .collect()
}

/// A user's feed since `since`: the time it took, its rows, its last_seq.
async fn feed(user: &Client, since: &str) -> (Duration, usize, String) {
    let started = Instant::now();
    let r = user.get(&format!("/shared/_changes?since={since}")).await;
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    (
        took,
        body["results"].as_array().unwrap().len(),
        body["last_seq"].as_str().unwrap().to_string(),
    )
}

/// Runs the PouchDB sync script for one user: its time in ms and the
/// documents it replicated.
fn pouchdb_sync(o: &Options, url: &str) -> Option<(f64, u64)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/bench_access_sync.js");
    let out = std::process::Command::new(&o.node)
        .arg(&script)
        .arg(url)
        .current_dir(script.parent().unwrap())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "bench: PouchDB sync failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let result: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((result["ms"].as_f64()?, result["docs"].as_u64()?))
}

/// How long an admin's write takes to reach `user`'s longpoll feed.
async fn delivery(admin: &Client, user: &Client, u: usize, id: &str) -> Duration {
    let since = user
        .get("/shared/_changes?descending=true&limit=1")
        .await
        .json()["last_seq"]
        .as_str()
        .unwrap()
        .to_string();
    let waiting = {
        let user = user.clone();
        tokio::spawn(async move {
            user.get(&format!(
                "/shared/_changes?feed=longpoll&since={since}&timeout=30000"
            ))
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    assert_eq!(
        admin
            .put(&format!("/shared/{id}"), doc(id, u, 0))
            .await
            .status,
        201
    );
    let answer = waiting.await.unwrap();
    let took = started.elapsed();
    assert!(answer.text.contains(id), "{}", answer.text);
    took
}

/// An admin's query across all users: every user's document number `n`.
async fn admin_query(admin: &Client, db: &str, users: usize) -> (Duration, Duration) {
    let index = admin
        .post(
            &format!("/{db}/_index"),
            json!({"index": {"fields": ["n"]}, "name": "by-n"}),
        )
        .await;
    assert_eq!(index.status, 200, "{}", index.text);
    let query = json!({"selector": {"n": 1}, "limit": users * 2, "use_index": "by-n"});
    let mut times = Vec::new();
    for _ in 0..2 {
        let started = Instant::now();
        let r = admin.post(&format!("/{db}/_find"), query.clone()).await;
        times.push(started.elapsed());
        assert_eq!(r.status, 200, "{}", r.text);
        let found = r.json()["docs"].as_array().unwrap().len();
        assert_eq!(found, users, "one document numbered 1 per user");
    }
    (times[0], times[1])
}

async fn make_users(admin: &Client, users: &[usize]) {
    for &u in users {
        let name = user_name(u);
        let r = admin
            .put(
                &format!("/_users/org.couchdb.user:{name}"),
                json!({"name": name, "password": PASSWORD, "roles": ["reader"], "type": "user"}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
}

struct AccessFigures {
    load: Duration,
    since_by_size: Vec<(usize, f64, f64)>,
    first_feed: Vec<f64>,
    all_docs: Vec<f64>,
    pouchdb: Vec<f64>,
    delivery: Vec<f64>,
    query: (Duration, Duration),
    rss: f64,
    peak: f64,
    disk: f64,
}

async fn run_access(o: &Options) -> AccessFigures {
    let data = TempDir::new("access-bench");
    let server = TestServer::start(data.path(), &["--log-level", "warn"]);
    let admin = Client::new(&server);
    let samples = sampled(o);
    make_users(&admin, &samples).await;
    assert_eq!(
        admin.put("/shared?access=true", json!(null)).await.status,
        201
    );
    let security = json!({"members": {"roles": ["reader"]}});
    assert_eq!(admin.put("/shared/_security", security).await.status, 200);
    let total = o.users * o.docs_per_user;
    let clients: Vec<Client> = samples.iter().map(|&u| as_user(&server, u)).collect();
    let mut last: Vec<String> = vec!["0".to_string(); samples.len()];
    let mut since_by_size = Vec::new();
    let started = Instant::now();
    let mut loaded = 0;
    let mut load_time = Duration::ZERO;
    for step in [total / 4, total / 2, total] {
        let t = Instant::now();
        load(&admin, "shared", access_batches(o, loaded, step)).await;
        load_time += t.elapsed();
        loaded = step;
        // Each sampled user catches up, gets one new document, and reads
        // their feed since where they left it.
        let mut times = Vec::new();
        for (i, (&u, user)) in samples.iter().zip(&clients).enumerate() {
            let (_, _, caught_up) = feed(user, &last[i]).await;
            let id = format!("new-{u}-{step}");
            assert_eq!(
                admin
                    .put(&format!("/shared/{id}"), doc(&id, u, 0))
                    .await
                    .status,
                201
            );
            let (took, rows, seq) = feed(user, &caught_up).await;
            assert_eq!(rows, 1, "the new document only");
            times.push(ms(took));
            last[i] = seq;
        }
        eprintln!(
            "bench: {step} documents loaded ({:.0} s); since= median {:.2} ms",
            started.elapsed().as_secs_f64(),
            median(times.clone())
        );
        since_by_size.push((step, median(times.clone()), max(&times)));
    }
    let mut first_feed = Vec::new();
    let mut all_docs = Vec::new();
    for user in &clients {
        let (took, rows, _) = feed(user, "0").await;
        assert_eq!(
            rows,
            o.docs_per_user + 3,
            "the user's documents and the three new ones"
        );
        first_feed.push(ms(took));
        let started = Instant::now();
        let r = user.get("/shared/_all_docs").await;
        all_docs.push(ms(started.elapsed()));
        assert_eq!(r.json()["total_rows"], o.docs_per_user + 3);
    }
    let mut pouchdb = Vec::new();
    for &u in &samples {
        let url = server.plain_url.replacen(
            "http://",
            &format!("http://{}:{PASSWORD}@", user_name(u)),
            1,
        ) + "/shared";
        if let Some((took, docs)) = pouchdb_sync(o, &url) {
            assert_eq!(docs as usize, o.docs_per_user + 3);
            pouchdb.push(took);
        }
    }
    let mut delivered = Vec::new();
    for (&u, user) in samples.iter().zip(&clients) {
        delivered.push(ms(delivery(&admin, user, u, &format!("live-{u}")).await));
    }
    let query = admin_query(&admin, "shared", o.users).await;
    let rss = proc_status_mib(server.pid(), "VmRSS").unwrap_or(0.0);
    let peak = proc_status_mib(server.pid(), "VmHWM").unwrap_or(0.0);
    server.stop();
    AccessFigures {
        load: load_time,
        since_by_size,
        first_feed,
        all_docs,
        pouchdb,
        delivery: delivered,
        query,
        rss,
        peak,
        disk: dir_mib(data.path()),
    }
}

struct PatternFigures {
    users: usize,
    setup: Duration,
    catch_up: Duration,
    delivery: Vec<f64>,
    query: (Duration, Duration),
    rss: f64,
    peak: f64,
    disk: f64,
}

/// Where the pattern is measured: a server, and how its replication
/// documents name a source database.
struct PatternServer {
    admin: Client,
    pid: u32,
    dir: std::path::PathBuf,
    /// A database's name as a replication's source.
    source: Box<dyn Fn(&str) -> String>,
    /// Created with `?q=1`: CouchDB's one shard, as Recliner's database.
    one_shard: bool,
}

async fn run_pattern(o: &Options, server: PatternServer, users: usize) -> PatternFigures {
    use futures_util::StreamExt;
    let admin = server.admin.clone();
    let create = if server.one_shard { "?q=1" } else { "" };
    let started = Instant::now();
    futures_util::stream::iter((0..users).map(|u| {
        let admin = admin.clone();
        async move {
            let db = format!("userdb-{u:05}");
            assert_eq!(
                admin
                    .put(&format!("/{db}{create}"), json!(null))
                    .await
                    .status,
                201
            );
            let docs: Vec<Value> = (0..o.docs_per_user)
                .map(|n| doc(&format!("d{u:05}-{n:04}"), u, n))
                .collect();
            let r = admin
                .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
                .await;
            assert_eq!(r.status, 201, "{}", r.text);
        }
    }))
    .buffer_unordered(CONCURRENCY * 4)
    .collect::<Vec<()>>()
    .await;
    assert_eq!(
        admin
            .put(&format!("/shared{create}"), json!(null))
            .await
            .status,
        201
    );
    let _ = admin.put("/_replicator", json!(null)).await;
    let setup = started.elapsed();
    let started = Instant::now();
    let shared = (server.source)("shared");
    for start in (0..users).step_by(BATCH) {
        let jobs: Vec<Value> = (start..(start + BATCH).min(users))
            .map(|u| {
                json!({"_id": format!("job-{u:05}"), "source": (server.source)(&format!("userdb-{u:05}")),
                       "target": shared, "continuous": true})
            })
            .collect();
        let r = admin
            .post("/_replicator/_bulk_docs", json!({"docs": jobs}))
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let total = (users * o.docs_per_user) as u64;
    loop {
        let count = admin.get("/shared").await.json()["doc_count"]
            .as_u64()
            .unwrap_or(0);
        if count >= total {
            break;
        }
        assert!(
            started.elapsed() < CATCH_UP_LIMIT,
            "only {count} of {total} replicated"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let catch_up = started.elapsed();
    eprintln!(
        "bench: the pattern's shared database caught up in {:.0} s",
        catch_up.as_secs_f64()
    );
    let mut delivery = Vec::new();
    for i in 0..o.samples.min(users) {
        let u = i * (users / o.samples.min(users)).max(1);
        let id = format!("live-{u}");
        let since = admin
            .get("/shared/_changes?descending=true&limit=1")
            .await
            .json()["last_seq"]
            .clone();
        let since = match since {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let waiting = {
            let admin = admin.clone();
            let id = id.clone();
            tokio::spawn(async move {
                admin
                    .post(
                        &format!("/shared/_changes?feed=longpoll&since={since}&timeout=60000&filter=_doc_ids"),
                        json!({"doc_ids": [id]}),
                    )
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        let r = admin
            .put(&format!("/userdb-{u:05}/{id}"), doc(&id, u, 0))
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let answer = waiting.await.unwrap();
        delivery.push(ms(started.elapsed()));
        assert!(answer.text.contains(&id), "{}", answer.text);
    }
    let query = admin_query(&admin, "shared", users).await;
    let rss = proc_status_mib(server.pid, "VmRSS").unwrap_or(0.0);
    let peak = proc_status_mib(server.pid, "VmHWM").unwrap_or(0.0);
    PatternFigures {
        users,
        setup,
        catch_up,
        delivery,
        query,
        rss,
        peak,
        disk: dir_mib(&server.dir),
    }
}

/// The pattern on a `recliner` of its own.
async fn run_pattern_on_recliner(o: &Options) -> PatternFigures {
    let data = TempDir::new("access-bench-pattern");
    let server = TestServer::start(data.path(), &["--log-level", "warn"]);
    let target = PatternServer {
        admin: Client::new(&server),
        pid: server.pid(),
        dir: data.path().to_path_buf(),
        source: Box::new(|db: &str| db.to_string()),
        one_shard: false,
    };
    let figures = run_pattern(o, target, o.pattern_users).await;
    server.stop();
    figures
}

/// The pattern on Apache CouchDB 3.5 (`--couchdb-script`), at
/// `--couchdb-users`: CouchDB's replicator names databases by URL.
async fn run_pattern_on_couchdb(o: &Options, script: &Path) -> PatternFigures {
    let couch = recliner_tests::couchdb::CouchDbInstance::start(script);
    let base = couch.url().trim_end_matches('/').to_string();
    let target = PatternServer {
        admin: Client::at(&base),
        pid: couch.pid(),
        dir: couch.dir().to_path_buf(),
        source: Box::new(move |db: &str| format!("{base}/{db}")),
        one_shard: true,
    };
    run_pattern(o, target, o.couchdb_users).await
}

fn print_pattern(label: &str, p: &PatternFigures, o: &Options) {
    println!(
        "| {label}: {} databases of {} documents | {:.0} s setup, {:.0} s until the shared database holds everything | {:.1} / {:.1} ms | {:.2} s / {:.0} ms | {:.0} / {:.0} MiB | {:.0} MiB |",
        p.users,
        o.docs_per_user,
        p.setup.as_secs_f64(),
        p.catch_up.as_secs_f64(),
        median(p.delivery.clone()),
        max(&p.delivery),
        p.query.0.as_secs_f64(),
        ms(p.query.1),
        p.rss,
        p.peak,
        p.disk
    );
}

#[tokio::main]
async fn main() {
    let o = options();
    eprintln!("bench: {o:?}");
    let a = run_access(&o).await;
    let p = run_pattern_on_recliner(&o).await;
    let couch = match &o.couchdb_script {
        Some(script) => Some(run_pattern_on_couchdb(&o, script).await),
        None => None,
    };
    let total = o.users * o.docs_per_user;
    println!(
        "\nOne database with per-document access: {} users, {} documents each ({total} documents), {} sampled users.\n",
        o.users, o.docs_per_user, o.samples
    );
    println!("| measure | goal | result |\n| --- | --- | --- |");
    println!(
        "| loading {total} documents (`_bulk_docs` of {BATCH}, {CONCURRENCY} at a time) | | {:.0} s ({:.0} docs/s) |",
        a.load.as_secs_f64(),
        total as f64 / a.load.as_secs_f64()
    );
    println!(
        "| a user's first `_changes` ({} rows), median / max | < 50 ms | {:.1} / {:.1} ms |",
        o.docs_per_user + 3,
        median(a.first_feed.clone()),
        max(&a.first_feed)
    );
    println!(
        "| a user's `_all_docs`, median / max | | {:.1} / {:.1} ms |",
        median(a.all_docs.clone()),
        max(&a.all_docs)
    );
    for (size, med, worst) in &a.since_by_size {
        println!(
            "| `_changes?since=` with one new row, database at {size} documents, median / max | flat | {med:.2} / {worst:.2} ms |"
        );
    }
    if a.pouchdb.is_empty() {
        println!("| stock PouchDB syncs a user's documents | < 1 s | not measured (no Node.js) |");
    } else {
        println!(
            "| stock PouchDB (node, memory adapter) replicates a user's {} documents, median / max | < 1 s | {:.0} / {:.0} ms |",
            o.docs_per_user + 3,
            median(a.pouchdb.clone()),
            max(&a.pouchdb)
        );
    }
    println!(
        "| an admin's write reaches the user's longpoll feed, median / max | | {:.1} / {:.1} ms |",
        median(a.delivery.clone()),
        max(&a.delivery)
    );
    println!(
        "| an admin's Mango query across all users ({} rows), first (index built) / next | | {:.2} s / {:.0} ms |",
        o.users,
        a.query.0.as_secs_f64(),
        ms(a.query.1)
    );
    println!(
        "| server memory at the end (RSS / peak) | < 150 MiB | {:.0} / {:.0} MiB |",
        a.rss, a.peak
    );
    println!("| data folder | | {:.0} MiB |", a.disk);
    println!(
        "\nThe pattern it replaces, same run: {} databases of {} documents, one continuous replication each into one shared database.\n",
        p.users, o.docs_per_user
    );
    println!("| measure | per-document access | database per user |\n| --- | --- | --- |");
    println!(
        "| writing the documents | {:.0} s | {:.0} s (databases and documents) |",
        a.load.as_secs_f64(),
        p.setup.as_secs_f64()
    );
    println!(
        "| until the admin's view (the shared database) holds everything | at once (one database) | {:.0} s |",
        p.catch_up.as_secs_f64()
    );
    println!(
        "| one change reaches its other side, median / max | {:.1} / {:.1} ms (admin → user's feed) | {:.1} / {:.1} ms (user's database → shared) |",
        median(a.delivery.clone()),
        max(&a.delivery),
        median(p.delivery.clone()),
        max(&p.delivery)
    );
    println!(
        "| an admin's query across all users, first / next | {:.2} s / {:.0} ms | {:.2} s / {:.0} ms |",
        a.query.0.as_secs_f64(),
        ms(a.query.1),
        p.query.0.as_secs_f64(),
        ms(p.query.1)
    );
    println!(
        "| memory at the end (RSS / peak) | {:.0} / {:.0} MiB | {:.0} / {:.0} MiB |",
        a.rss, a.peak, p.rss, p.peak
    );
    println!("| data folder | {:.0} MiB | {:.0} MiB |", a.disk, p.disk);
    if let Some(c) = couch {
        println!(
            "\nThe pattern on each server, same run (CouchDB 3.5's databases made with `?q=1`, one shard as Recliner's; its replications name databases by URL):\n"
        );
        println!(
            "| server | time | one change user → shared, median / max | admin's query, first / next | memory (RSS / peak) | data folder |\n| --- | --- | --- | --- | --- | --- |"
        );
        print_pattern("Recliner", &p, &o);
        print_pattern("CouchDB 3.5", &c, &o);
    }
}
