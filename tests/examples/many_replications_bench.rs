//! Many continuous replications on one server: how soon a change reaches
//! its target when thousands of jobs share `max_jobs` (500) running slots.
//!
//! `cargo xtask bench many-replications` builds it (release) and runs it:
//!
//! ```text
//! many_replications_bench [--jobs 10000] [--remote-jobs 1000] [--seconds 120] [--rate 100]
//! ```
//!
//! 1. One `recliner` (release, fresh data folder, request log off) gets
//!    `--jobs` source databases of one document each and as many
//!    continuous `_replicator` documents, each to its own target
//!    (`create_target`). Measured: the time until every job has caught up
//!    (parked: `idle` in `_scheduler/jobs`).
//! 2. Idle: the server's CPU over 10 s with nothing to do, and its
//!    resident memory.
//! 3. Load: for `--seconds`, one document is written to `--rate` random
//!    sources per second. Each write's latency runs from its
//!    acknowledgement to the moment the document can be read from its
//!    target (the target's `updated` event in `_db_updates` prompts the
//!    read; a read every 500 ms is the fallback).
//! 4. Restart: the server is stopped and started again on the same data
//!    folder; measured: the time until every job is back and caught up.
//! 5. Remote: a second `recliner` holds `--remote-jobs` sources; the first
//!    one pulls each over HTTP into a target of its own. The same load
//!    (same rate, half the time) gives the latency over HTTP.
//!
//! Prints a Markdown table for BENCHMARKS.md with the issue's goals.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recliner_tests::bench::{cpu_seconds, parse_options, proc_status_mib};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// Requests in flight while databases and documents are made.
const CONCURRENCY: usize = 32;
/// `_replicator` documents per `_bulk_docs`.
const BATCH: usize = 1000;
/// How long jobs may take to catch up before the run gives up.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(1800);
/// How long a write may take to arrive before it counts as lost.
const DELIVERY_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Options {
    jobs: usize,
    remote_jobs: usize,
    seconds: u64,
    rate: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: many_replications_bench [--jobs 10000] [--remote-jobs 1000] [--seconds 120] [--rate 100]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        jobs: 10_000,
        remote_jobs: 1_000,
        seconds: 120,
        rate: 100,
    };
    parse_options(usage, |flag, n| {
        match flag {
            "--jobs" => o.jobs = n,
            "--remote-jobs" => o.remote_jobs = n,
            "--seconds" => o.seconds = n as u64,
            "--rate" => o.rate = n,
            _ => return false,
        }
        true
    });
    o
}

/// Runs `f` over `items`, `CONCURRENCY` at a time.
async fn each<T: Send + 'static>(
    items: Vec<T>,
    f: impl Fn(T) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync + 'static,
) {
    use futures_util::StreamExt;
    futures_util::stream::iter(items.into_iter().map(f))
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
}

/// Makes `count` sources (`{prefix}src-N`, one document each) on `source`.
async fn make_sources(source: &Client, prefix: &str, count: usize) {
    let items: Vec<(Client, String)> = (0..count)
        .map(|i| (source.clone(), format!("{prefix}src-{i}")))
        .collect();
    each(items, |(c, db)| {
        Box::pin(async move {
            assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
            assert_eq!(c.put(&format!("/{db}/first"), json!({})).await.status, 201);
        })
    })
    .await;
}

/// One continuous `_replicator` document per source, on `server`.
async fn make_jobs(server: &Client, source_base: Option<&str>, prefix: &str, count: usize) {
    for start in (0..count).step_by(BATCH) {
        let docs: Vec<Value> = (start..(start + BATCH).min(count))
            .map(|i| {
                let source = match source_base {
                    Some(base) => json!(format!("{base}/{prefix}src-{i}")),
                    None => json!(format!("{prefix}src-{i}")),
                };
                json!({"_id": format!("{prefix}job-{i}"), "source": source,
                       "target": format!("{prefix}dst-{i}"), "create_target": true,
                       "continuous": true})
            })
            .collect();
        let r = server
            .post("/_replicator/_bulk_docs", json!({"docs": docs}))
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
}

/// Waits until `count` jobs are parked; the time it took.
async fn all_caught_up(c: &Client, count: usize) -> Duration {
    let started = Instant::now();
    loop {
        let jobs = c
            .get(&format!("/_scheduler/jobs?limit={count}"))
            .await
            .json();
        let idle = jobs["jobs"]
            .as_array()
            .map_or(0, |j| j.iter().filter(|j| j["idle"] == true).count());
        if idle >= count {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CATCH_UP_LIMIT,
            "only {idle} of {count} jobs caught up"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Wakes, per target database, whoever waits for a write to arrive there.
#[derive(Default)]
struct Arrivals {
    targets: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
}

impl Arrivals {
    fn of(&self, db: &str) -> Arc<tokio::sync::Notify> {
        self.targets
            .lock()
            .unwrap()
            .entry(db.to_string())
            .or_default()
            .clone()
    }

    /// Follows `_db_updates` of the target server.
    fn follow(self: &Arc<Self>, target: &Client) -> tokio::task::JoinHandle<()> {
        let arrivals = self.clone();
        let url = target.url("/_db_updates?feed=continuous&since=now&heartbeat=5000");
        let http = target.http().clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let response = http.get(url).send().await.unwrap();
            let mut body = response.bytes_stream();
            let mut line = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                for byte in chunk {
                    if byte != b'\n' {
                        line.push(byte);
                        continue;
                    }
                    if let Ok(event) = serde_json::from_slice::<Value>(&line)
                        && let Some(db) = event["db_name"].as_str()
                    {
                        arrivals.of(db).notify_waiters();
                    }
                    line.clear();
                }
            }
        })
    }
}

/// Latencies in ms, sorted.
struct Latencies(Vec<f64>);

impl Latencies {
    fn at(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let i = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[i]
    }
}

/// Writes one document per second to `rate` random sources for `seconds`;
/// the latency of each from its acknowledgement to its arrival.
async fn load(
    source: &Client,
    target: &Client,
    prefix: &str,
    count: usize,
    rate: usize,
    seconds: u64,
) -> (Latencies, usize) {
    let arrivals = Arc::new(Arrivals::default());
    let follower = arrivals.follow(target);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut written = 0;
    for second in 0..seconds {
        ticker.tick().await;
        for k in 0..rate {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed % count as u64) as usize;
            let (source, target) = (source.clone(), target.clone());
            let (src, dst) = (format!("{prefix}src-{i}"), format!("{prefix}dst-{i}"));
            let id = format!("w-{second}-{k}");
            let arrived = arrivals.of(&dst);
            let latencies = latencies.clone();
            written += 1;
            tasks.spawn(async move {
                let r = source
                    .put(&format!("/{src}/{id}"), json!({"at": second}))
                    .await;
                assert_eq!(r.status, 201, "{}", r.text);
                let acked = Instant::now();
                loop {
                    let notified = arrived.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if target.get(&format!("/{dst}/{id}")).await.status == 200 {
                        latencies
                            .lock()
                            .unwrap()
                            .push(acked.elapsed().as_secs_f64() * 1000.0);
                        return;
                    }
                    if acked.elapsed() > DELIVERY_LIMIT {
                        return;
                    }
                    let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
                }
            });
        }
    }
    while tasks.join_next().await.is_some() {}
    follower.abort();
    let mut all = latencies.lock().unwrap().clone();
    all.sort_by(f64::total_cmp);
    (Latencies(all), written)
}

fn start(data: &TempDir) -> TestServer {
    TestServer::start(data.path(), &["--log-level", "warn"])
}

#[tokio::main]
async fn main() {
    let o = options();
    let data = TempDir::new("bench-many-reps");
    let mut server = start(&data);
    let c = Client::new(&server);

    let made = Instant::now();
    make_sources(&c, "", o.jobs).await;
    make_jobs(&c, None, "", o.jobs).await;
    let setup = made.elapsed();
    let caught_up = all_caught_up(&c, o.jobs).await;
    eprintln!(
        "bench: {} jobs made in {setup:.1?}, caught up after {caught_up:.1?}",
        o.jobs
    );

    let pid = server.pid();
    let cpu_before = cpu_seconds(pid).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_cpu = (cpu_seconds(pid).unwrap_or(0.0) - cpu_before) / 10.0 * 100.0;
    let rss_idle = proc_status_mib(pid, "VmRSS:").unwrap_or(f64::NAN);

    // The high-water mark so far is the first catch-up's; from here on the
    // load's (writing 5 to `clear_refs` resets it).
    let rss_catch_up = proc_status_mib(pid, "VmHWM:").unwrap_or(f64::NAN);
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    let (local, written) = load(&c, &c, "", o.jobs, o.rate, o.seconds).await;
    let rss_load = proc_status_mib(pid, "VmHWM:").unwrap_or(f64::NAN);
    eprintln!(
        "bench: local load: {} of {written} arrived, p50 {:.0} ms, p99 {:.0} ms",
        local.0.len(),
        local.at(0.5),
        local.at(0.99)
    );

    server.stop();
    let restarted = Instant::now();
    server = start(&data);
    let c = Client::new(&server);
    all_caught_up(&c, o.jobs).await;
    let restart = restarted.elapsed();
    eprintln!("bench: restarted and caught up in {restart:.1?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_restarted = proc_status_mib(server.pid(), "VmRSS:").unwrap_or(f64::NAN);

    let remote_data = TempDir::new("bench-many-reps-remote");
    let remote = TestServer::start(remote_data.path(), &["--log-level", "warn"]);
    let r = Client::new(&remote);
    make_sources(&r, "r-", o.remote_jobs).await;
    make_jobs(&c, Some(&remote.url), "r-", o.remote_jobs).await;
    all_caught_up(&c, o.jobs + o.remote_jobs).await;
    let (over_http, remote_written) =
        load(&r, &c, "r-", o.remote_jobs, o.rate, o.seconds / 2).await;

    println!("| measurement | result | goal |");
    println!("| --- | --- | --- |");
    println!(
        "| {} jobs made ({} sources, `_replicator` documents) | {setup:.1?} | |",
        o.jobs, o.jobs
    );
    println!("| every job caught up (parked) | {caught_up:.1?} | |");
    println!("| CPU while idle | {idle_cpu:.2}% of a core | under 2% |");
    println!(
        "| resident memory idle / peak under load | {rss_idle:.0} / {rss_load:.0} MiB | under 500 MiB |"
    );
    println!("| peak resident memory while every job first caught up | {rss_catch_up:.0} MiB | |");
    println!(
        "| local: {written} writes at {}/s for {} s, arrived | {} | all |",
        o.rate,
        o.seconds,
        local.0.len()
    );
    println!(
        "| local: latency p50 / p99 / max | {:.0} / {:.0} / {:.0} ms | p99 under 2 s |",
        local.at(0.5),
        local.at(0.99),
        local.at(1.0)
    );
    println!("| restart: every job back and caught up | {restart:.1?} | under 60 s |");
    println!(
        "| resident memory after the restart, caught up | {rss_restarted:.0} MiB | under 500 MiB |"
    );
    println!(
        "| over HTTP: {} jobs, {remote_written} writes, arrived | {} | all |",
        o.remote_jobs,
        over_http.0.len()
    );
    println!(
        "| over HTTP: latency p50 / p99 / max | {:.0} / {:.0} / {:.0} ms | p99 under 5 s |",
        over_http.at(0.5),
        over_http.at(0.99),
        over_http.at(1.0)
    );
    drop(remote);
    server.stop();
}
