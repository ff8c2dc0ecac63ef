//! One database per user, as PouchDB deployments do: thousands of
//! databases on one server. Only `max_dbs_open` stay open and a database's
//! writer thread runs only while it is written, so threads, open files and
//! memory follow the limit, not the number of databases; every document is
//! still there when its database is opened again.
//!
//! Before this, every database ever touched stayed open with two threads
//! of its own: 2,000 databases took the server to 4,049 threads, 10,682
//! open files and 933 MiB resident.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer, seq_num};
use serde_json::json;

const DATABASES: usize = 5_000;
const CONCURRENCY: usize = 16;
/// CouchDB's default, and the server's: the figures are those of a stock server.
const MAX_DBS_OPEN: usize = 500;

/// The most threads, open files and resident memory a process reached.
#[derive(Debug, Default)]
struct Peaks {
    threads: AtomicU64,
    fds: AtomicU64,
    rss_kib: AtomicU64,
    /// The threads by kind (name up to `:` or `-`) when there were most.
    threads_at_peak: std::sync::Mutex<String>,
}

/// A process's threads counted by kind: `writer`, `tokio`, ...
fn thread_kinds(pid: u32) -> String {
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let kind = name
                .trim()
                .split([':', '-'])
                .next()
                .unwrap_or("")
                .to_string();
            *kinds.entry(kind).or_default() += 1;
        }
    }
    format!("{kinds:?}")
}

impl Peaks {
    /// Samples `/proc/<pid>` once.
    fn sample(&self, pid: u32) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return;
        };
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let threads = field("Threads:");
        if self.threads.fetch_max(threads, Ordering::Relaxed) < threads
            && let Ok(mut kinds) = self.threads_at_peak.lock()
        {
            *kinds = thread_kinds(pid);
        }
        self.rss_kib.fetch_max(field("VmRSS:"), Ordering::Relaxed);
        if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            self.fds.fetch_max(fds.count() as u64, Ordering::Relaxed);
        }
    }

    fn report(&self) -> (u64, u64, u64) {
        (
            self.threads.load(Ordering::Relaxed),
            self.fds.load(Ordering::Relaxed),
            self.rss_kib.load(Ordering::Relaxed) / 1024,
        )
    }
}

/// Runs `step` for every database number, `CONCURRENCY` at a time.
async fn for_each_db<F, Fut>(client: &Client, step: F)
where
    F: Fn(Client, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let step = Arc::new(step);
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, step, next) = (client.clone(), step.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= DATABASES {
                    break;
                }
                step(client.clone(), i).await;
            }
        }));
    }
    for worker in workers {
        worker.await.expect("a worker finished");
    }
}

fn db_name(i: usize) -> String {
    format!("userdb-{i:05}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_databases_keep_threads_files_and_memory_bounded() {
    let data = TempDir::new("many-dbs");
    let limit = MAX_DBS_OPEN.to_string();
    let server = TestServer::start_with_env(data.path(), &[], &[("RECLINER_MAX_DBS_OPEN", &limit)]);
    let client = Client::new(&server);
    let pid = server.pid();
    let peaks = Arc::new(Peaks::default());
    let sampling = {
        let peaks = peaks.clone();
        tokio::spawn(async move {
            loop {
                peaks.sample(pid);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let started = Instant::now();
    for_each_db(&client, |c, i| async move {
        let db = db_name(i);
        let created = c.put(&format!("/{db}"), json!({})).await;
        assert_eq!(created.status, 201, "{db}: {}", created.text);
        let written = c
            .put(&format!("/{db}/profile"), json!({"owner": db, "n": i}))
            .await;
        assert_eq!(written.status, 201, "{db}: {}", written.text);
        let read = c.get(&format!("/{db}/profile")).await;
        assert_eq!(read.status, 200, "{db}: {}", read.text);
        assert_eq!(read.json()["n"], i);
    })
    .await;
    let written = started.elapsed();

    let started = Instant::now();
    for_each_db(&client, |c, i| async move {
        let db = db_name(i);
        let read = c.get(&format!("/{db}/profile")).await;
        assert_eq!(read.status, 200, "{db}: {}", read.text);
        let doc = read.json();
        assert_eq!((&doc["owner"], &doc["n"]), (&json!(db), &json!(i)));
        let info = c.get(&format!("/{db}")).await.json();
        assert_eq!(
            (&info["doc_count"], seq_num(&info["update_seq"])),
            (&json!(1), 1)
        );
    })
    .await;
    let reread = started.elapsed();
    peaks.sample(pid);
    sampling.abort();

    let all = client.get("/_all_dbs").await.json();
    let users = all
        .as_array()
        .expect("a list")
        .iter()
        .filter(|name| name.as_str().is_some_and(|n| n.starts_with("userdb-")))
        .count();
    assert_eq!(users, DATABASES);

    let (threads, fds, rss_mib) = peaks.report();
    let kinds = peaks
        .threads_at_peak
        .lock()
        .map(|k| k.clone())
        .unwrap_or_default();
    eprintln!(
        "{DATABASES} databases, max_dbs_open {MAX_DBS_OPEN}, {CONCURRENCY} clients: \
         created, written and read in {written:.1?}, all read again in {reread:.1?}; \
         at most {threads} threads ({kinds}), {fds} open files, {rss_mib} MiB resident"
    );
    // A writer thread per open database at most (it ends when idle), plus
    // the runtime's workers and blocking threads.
    let limit = MAX_DBS_OPEN as u64;
    assert!(threads < limit + 200, "{threads} threads: {kinds}");
    // A few per open database: each connection's file and write-ahead log,
    // and the shared memory index.
    assert!(fds < 6 * limit + 200, "{fds} open files");
    assert!(rss_mib < 300, "{rss_mib} MiB resident");
    let started = Instant::now();
    assert!(server.stop().success());
    eprintln!("stopped in {:.1?}", started.elapsed());
}
