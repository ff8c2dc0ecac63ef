//! Throughput and memory figures for the store, printed as a Markdown table.
//!
//! `cargo xtask bench store` runs it in release mode (see BENCHMARKS.md):
//!
//! ```text
//! store_bench insert              # bulk_docs new_edits=true/false, raw SQLite, 64 writers,
//!                                 # then new_edits=true and raw SQLite with incompressible bodies
//! store_bench scan N              # changes and all_docs?include_docs over N docs, peak RSS
//! ```
//!
//! `RECLINER_BENCH_DURABILITY=normal` measures the opt-in durability; the
//! default is the store's (`full`, an fsync per commit).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use store::{AllDocsQuery, ChangesQuery, DocInput, Durability, Store, StoreOptions};

/// The durability under test: the store's default unless
/// `RECLINER_BENCH_DURABILITY=normal`.
fn durability() -> Durability {
    match std::env::var("RECLINER_BENCH_DURABILITY").as_deref() {
        Ok("normal") => Durability::Normal,
        _ => Durability::Full,
    }
}

const BATCH: usize = 1000;
/// Rows per page while scanning: what the HTTP layer will stream with.
const PAGE: usize = 1000;

fn body(i: usize) -> Value {
    // About 1 KiB of JSON.
    json!({"type": "bench", "n": i, "title": format!("document number {i}"), "pad": "x".repeat(940)})
}

/// The same shape with a pad of pseudo-random characters: bodies that do
/// not compress, the store's worst case.
fn incompressible_body(i: usize) -> Value {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    let mut state = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let pad: String = (0..940)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ALPHABET[(state % 64) as usize] as char
        })
        .collect();
    json!({"type": "bench", "n": i, "title": format!("document number {i}"), "pad": pad})
}

fn temp_store(label: &str) -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("recliner-bench-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = StoreOptions {
        durability: durability(),
        ..Default::default()
    };
    (store_sqlite::open_with(&dir, options).unwrap(), dir)
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// Writes `n` documents in batches, preparing the next batch while the
/// previous one is written (as a server parses the next request meanwhile).
async fn pipelined(db: &store::Database, n: usize, new_edits: bool, make: impl Fn(usize) -> Value) {
    let mut in_flight: Option<tokio::task::JoinHandle<()>> = None;
    for b in 0..n / BATCH {
        let docs: Vec<DocInput> = (0..BATCH)
            .map(|i| DocInput::from_json(make(b * BATCH + i)).unwrap())
            .collect();
        if let Some(previous) = in_flight.take() {
            previous.await.unwrap();
        }
        let db = db.clone();
        in_flight = Some(tokio::spawn(async move {
            let results = db.bulk_docs(docs, new_edits).await.unwrap();
            assert!(results.iter().all(|r| r.result.is_ok()));
        }));
    }
    if let Some(last) = in_flight {
        last.await.unwrap();
    }
}

async fn insert_new_edits(n: usize, body: fn(usize) -> Value) -> f64 {
    let (store, dir) = temp_store("new");
    let db = store.create_db("bench").await.unwrap();
    let start = Instant::now();
    pipelined(&db, n, true, |k| {
        let mut d = body(k);
        d["_id"] = json!(format!("doc{k:08}"));
        d
    })
    .await;
    let r = rate(n, start.elapsed());
    drop(db);
    store.close_all().await;
    let _ = std::fs::remove_dir_all(dir);
    r
}

async fn insert_replicated(n: usize) -> f64 {
    let (store, dir) = temp_store("repl");
    let db = store.create_db("bench").await.unwrap();
    let start = Instant::now();
    pipelined(&db, n, false, |k| {
        let mut d = body(k);
        d["_id"] = json!(format!("doc{k:08}"));
        d["_rev"] = json!(format!("3-{:032x}", k * 3 + 2));
        d["_revisions"] = json!({"start": 3, "ids": [
            format!("{:032x}", k * 3 + 2), format!("{:032x}", k * 3 + 1), format!("{:032x}", k * 3)]});
        d
    })
    .await;
    let r = rate(n, start.elapsed());
    store.close_all().await;
    let _ = std::fs::remove_dir_all(dir);
    r
}

/// The ceiling: what the store writes, without the store. The same bytes
/// (bodies Snappy-compressed by the store's rule: when that saves an eighth),
/// committed in the same batches with the same sync and WAL settings (one
/// commit per `BATCH` rows, `synchronous` as the store's durability, a WAL
/// checkpointed at the store's 32 MiB), into one plain table.
fn raw_sqlite(n: usize, body: fn(usize) -> Value) -> f64 {
    let dir = std::env::temp_dir().join(format!("recliner-bench-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("raw.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    let sync = match durability() {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 32 * 1024 * 1024 / 4096)
        .unwrap();
    conn.pragma_update(None, "journal_size_limit", 32 * 1024 * 1024)
        .unwrap();
    conn.execute_batch("CREATE TABLE t (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        .unwrap();
    let start = Instant::now();
    for b in 0..n / BATCH {
        let tx = conn.transaction().unwrap();
        {
            let mut stmt = tx
                .prepare_cached("INSERT INTO t (id, body) VALUES (?1, ?2)")
                .unwrap();
            for i in b * BATCH..(b + 1) * BATCH {
                let text = body(i).to_string();
                let compressed = snap::raw::Encoder::new()
                    .compress_vec(text.as_bytes())
                    .unwrap();
                let id = format!("doc{i:08}");
                if text.len() >= 64 && compressed.len() <= text.len() - text.len() / 8 {
                    stmt.execute(rusqlite::params![id, compressed]).unwrap();
                } else {
                    stmt.execute(rusqlite::params![id, text]).unwrap();
                }
            }
        }
        tx.commit().unwrap();
    }
    let r = rate(n, start.elapsed());
    let _ = std::fs::remove_dir_all(dir);
    r
}

async fn concurrent_writers(writers: usize, per_writer: usize) -> (f64, f64) {
    let (store, dir) = temp_store("group");
    let db = store.create_db("bench").await.unwrap();
    let commits_before = db.commit_count();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let mut d = body(i);
                d["_id"] = json!(format!("w{w}-{i}"));
                db.bulk_docs(vec![DocInput::from_json(d).unwrap()], true)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    let commits = db.commit_count() - commits_before;
    store.close_all().await;
    let _ = std::fs::remove_dir_all(dir);
    (
        rate(writers * per_writer, elapsed),
        rate(commits as usize, elapsed),
    )
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn scan(n: usize) {
    let (store, dir) = temp_store("scan");
    let db = store.create_db("bench").await.unwrap();
    for b in 0..n.div_ceil(BATCH) {
        let docs = (b * BATCH..((b + 1) * BATCH).min(n))
            .map(|k| {
                let mut d = body(k);
                d["_id"] = json!(format!("doc{k:08}"));
                d["_rev"] = json!(format!("1-{k:032x}"));
                DocInput::from_json(d).unwrap()
            })
            .collect();
        db.bulk_docs(docs, false).await.unwrap();
    }
    reset_peak_rss();
    let start = Instant::now();
    let mut since = 0;
    let mut rows = 0;
    loop {
        let page = db
            .changes(ChangesQuery {
                since,
                limit: PAGE,
                count_pending: false,
                ..Default::default()
            })
            .await
            .unwrap();
        rows += page.rows.len();
        since = page.last_seq;
        if page.rows.len() < PAGE {
            break;
        }
    }
    let changes_rate = rate(rows, start.elapsed());
    assert_eq!(rows, n);

    let start = Instant::now();
    let mut rows = 0;
    let mut after: Option<String> = None;
    loop {
        let q = AllDocsQuery {
            start: after
                .clone()
                .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
            limit: PAGE,
            include_docs: true,
            count_offset: after.is_none(),
            ..Default::default()
        };
        let page = db.all_docs(q).await.unwrap();
        rows += page.rows.len();
        after = page.rows.last().map(|r| r.id.clone());
        if page.rows.len() < PAGE {
            break;
        }
    }
    let all_docs_rate = rate(rows, start.elapsed());
    assert_eq!(rows, n);
    let peak = peak_rss_kib();
    println!("| changes scan, {n} docs | {changes_rate:.0} rows/s |");
    println!("| all_docs?include_docs scan, {n} docs | {all_docs_rate:.0} rows/s |");
    println!(
        "| peak RSS during both scans, {n} docs | {} MiB |",
        peak / 1024
    );
    store.close_all().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("insert") => {
            let n = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(100_000);
            let raw = raw_sqlite(n, body);
            let new = insert_new_edits(n, body).await;
            let repl = insert_replicated(n).await;
            let (docs, commits) = concurrent_writers(64, 200).await;
            println!(
                "| plain SQLite insert of the same bytes, batches and sync ({:?}), {n} rows | {raw:.0} rows/s | 1.00 |",
                durability()
            );
            println!(
                "| bulk_docs new_edits=true, {n} docs of 1 KiB, batches of {BATCH} | {new:.0} docs/s | {:.2} |",
                new / raw
            );
            println!(
                "| bulk_docs new_edits=false, 3-revision histories | {repl:.0} docs/s | {:.2} |",
                repl / raw
            );
            println!(
                "| 64 concurrent single-document writers | {docs:.0} docs/s, {commits:.0} commits/s | {:.2} |",
                docs / raw
            );
            let raw = raw_sqlite(n, incompressible_body);
            let new = insert_new_edits(n, incompressible_body).await;
            println!(
                "| plain SQLite insert, incompressible bodies, {n} rows | {raw:.0} rows/s | 1.00 |"
            );
            println!(
                "| bulk_docs new_edits=true, incompressible bodies | {new:.0} docs/s | {:.2} |",
                new / raw
            );
        }
        Some("scan") => {
            let n = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(100_000);
            scan(n).await;
        }
        _ => eprintln!("usage: store_bench insert [N] | scan N"),
    }
}
