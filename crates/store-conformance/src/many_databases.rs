//! Many databases, few open: the store keeps at most `max_dbs_open`
//! databases open, closes the least recently used idle one to make room,
//! never closes one somebody holds, and reopens closed ones transparently.
//! Threads and file descriptors follow the open databases, not the number
//! of databases. (Its own test binary, its tests one at a time: it counts
//! the process's threads and descriptors, which other tests running beside
//! it would disturb.)

use crate::Backend;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{TempStore, doc, get};
use serde_json::json;
use store::{Store, StoreError, StoreOptions};

const LIMIT: usize = 20;
const DATABASES: usize = 300;
const CONCURRENCY: usize = 8;
const IDLE: Duration = Duration::from_millis(200);

fn count_entries(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

fn threads() -> usize {
    count_entries("/proc/self/task")
}

fn fds() -> usize {
    count_entries("/proc/self/fd")
}

/// Held by each test: they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(CONCURRENCY * 2)
        .thread_keep_alive(Duration::from_millis(100))
        .enable_all()
        .build()
        .unwrap()
}

fn name(i: usize) -> String {
    format!("user-{i:04}")
}

/// A store (the second) with a small limit and short-lived writer threads,
/// in the first's temporary folder.
fn small_store(backend: &dyn Backend) -> (TempStore, Store) {
    let t = TempStore::new(backend);
    let options = StoreOptions {
        max_dbs_open: LIMIT,
        writer_idle_timeout: IDLE,
        durability: store::Durability::Normal,
        ..StoreOptions::default()
    };
    let store = t.reopen(options);
    (t, store)
}

/// Runs `step` for every database, `CONCURRENCY` at a time, checking
/// after each step that the open databases stay within the limit (plus the
/// ones the steps in flight hold) and recording the most threads and
/// descriptors seen.
async fn for_each_db<F, Fut>(store: &Store, step: F, peak: &Peaks)
where
    F: Fn(Store, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let step = Arc::new(step);
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (store, step, next, peak) = (store.clone(), step.clone(), next.clone(), peak.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= DATABASES {
                    break;
                }
                step(store.clone(), name(i)).await;
                peak.record(&store);
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
}

#[derive(Clone, Default)]
struct Peaks {
    open: Arc<AtomicUsize>,
    threads: Arc<AtomicUsize>,
    fds: Arc<AtomicUsize>,
}

impl Peaks {
    fn record(&self, store: &Store) {
        self.open.fetch_max(store.open_dbs(), Ordering::Relaxed);
        self.threads.fetch_max(threads(), Ordering::Relaxed);
        self.fds.fetch_max(fds(), Ordering::Relaxed);
    }
}

pub fn many_databases_hold_threads_and_files_for_the_open_ones_only(backend: &dyn Backend) {
    let _serial = serial();
    let rt = runtime();
    rt.block_on(async {
        let (_dir, store) = small_store(backend);
        let (base_threads, base_fds) = (threads(), fds());
        let peak = Peaks::default();
        let started = Instant::now();
        for_each_db(
            &store,
            |store, name| async move {
                let db = store.create_db(&name).await.unwrap();
                let rev = db
                    .put_doc(doc(json!({"_id": "profile", "owner": name})), true)
                    .await
                    .unwrap();
                let back = get(&db, "profile").await;
                assert_eq!((back["_rev"].as_str(), back["owner"].as_str()), (Some(rev.as_str()), Some(name.as_str())));
            },
            &peak,
        )
        .await;
        let written = started.elapsed();
        // Let every writer thread go idle, and the runtime's spare blocking threads end.
        tokio::time::sleep(IDLE * 3).await;
        let idle_threads = threads();
        for_each_db(
            &store,
            |store, name| async move {
                let db = store.db(&name).await.unwrap();
                let back = get(&db, "profile").await;
                assert_eq!(back["owner"].as_str(), Some(name.as_str()));
                assert_eq!(db.info().await.unwrap().doc_count, 1);
            },
            &peak,
        )
        .await;
        assert_eq!(store.all_dbs().await.unwrap().len(), DATABASES);
        let (open, most_threads, most_fds) = (
            peak.open.load(Ordering::Relaxed),
            peak.threads.load(Ordering::Relaxed),
            peak.fds.load(Ordering::Relaxed),
        );
        eprintln!(
            "{DATABASES} databases, max_dbs_open {LIMIT}: written and read in {written:?}; \
             at most {open} open, {most_threads} threads (base {base_threads}, {idle_threads} once idle), \
             {most_fds} descriptors (base {base_fds})"
        );
        // Each step in flight holds its database, which may keep it open past the limit.
        assert!(open <= LIMIT + CONCURRENCY, "{open} databases open");
        // A writer thread per open database at most (none for checkpoints
        // of small databases), plus the runtime's threads.
        let runtime_threads = 2 + CONCURRENCY * 2;
        assert!(
            most_threads <= base_threads + runtime_threads + LIMIT + CONCURRENCY,
            "{most_threads} threads"
        );
        assert!(
            idle_threads <= base_threads + 2,
            "{idle_threads} threads once the writers are idle"
        );
        // A few descriptors per open database (its file, write-ahead log and
        // shared memory, per connection), not per database.
        assert!(
            most_fds <= base_fds + 8 * (LIMIT + CONCURRENCY),
            "{most_fds} descriptors"
        );
    });
}

pub fn a_database_in_use_is_never_closed_to_make_room(backend: &dyn Backend) {
    let _serial = serial();
    let rt = runtime();
    rt.block_on(async {
        let (_dir, store) = small_store(backend);
        let held = store.create_db("held").await.unwrap();
        let mut feed = held.subscribe();
        let fed = store.create_db("fed").await.unwrap();
        let mut fed_feed = fed.subscribe();
        drop(fed);
        for i in 0..(LIMIT * 3) {
            let db = store.create_db(&name(i)).await.unwrap();
            crate::common::put(&db, json!({"_id": "x"})).await;
        }
        assert!(store.open_dbs() <= LIMIT + 2);
        // The held handle and the store's agree: the same open database.
        crate::common::put(&held, json!({"_id": "still here"})).await;
        feed.changed().await.unwrap();
        let again = store.db("held").await.unwrap();
        assert_eq!(again.info().await.unwrap().doc_count, 1);
        crate::common::put(&again, json!({"_id": "and here"})).await;
        feed.changed().await.unwrap();
        assert_eq!(*feed.borrow(), 2);
        // A feed alone (no handle) keeps its database open too.
        let fed = store.db("fed").await.unwrap();
        crate::common::put(&fed, json!({"_id": "news"})).await;
        fed_feed.changed().await.unwrap();
        // Closed databases come back with their documents.
        let first = store.db(&name(0)).await.unwrap();
        assert_eq!(get(&first, "x").await["_id"], "x");
        // Deleting one in use still answers DbNotFound through old handles.
        store.delete_db("held").await.unwrap();
        assert!(matches!(held.info().await, Err(StoreError::DbNotFound(_))));
        assert!(
            feed.changed().await.is_err(),
            "the deleted database's feed ends"
        );
    });
}

pub fn concurrent_opens_of_one_closed_database_share_one_handle(backend: &dyn Backend) {
    let _serial = serial();
    let rt = runtime();
    rt.block_on(async {
        let (_dir, store) = small_store(backend);
        for i in 0..(LIMIT * 2) {
            let db = store.create_db(&name(i)).await.unwrap();
            crate::common::put(&db, json!({"_id": "x"})).await;
        }
        // user-0000 was closed long ago: open it from many tasks at once,
        // each writing, while others push it out again.
        let mut tasks = Vec::new();
        for k in 0..32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let db = store.db(&name(0)).await.unwrap();
                crate::common::put(&db, json!({"_id": format!("k{k}")})).await;
                let other = store.db(&name(1 + k % (LIMIT * 2 - 1))).await.unwrap();
                get(&other, "x").await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let db = store.db(&name(0)).await.unwrap();
        let info = db.info().await.unwrap();
        // One writer at a time ever wrote: every write counted once.
        assert_eq!((info.doc_count, info.update_seq), (33, 33));
    });
}

/// A database closed to make room keeps its (emptied) write-ahead log and
/// its index file, so reopening it creates no files: with many more
/// databases than the limit, creating and deleting those two files at
/// every close was most of the work. Its data is all there when reopened.
pub fn closed_databases_keep_their_log_files_and_reopen_with_their_data(backend: &dyn Backend) {
    let _serial = serial();
    let rt = runtime();
    rt.block_on(async {
        let (t, store) = small_store(backend);
        for i in 0..LIMIT * 2 {
            let db = store.create_db(&name(i)).await.unwrap();
            db.bulk_docs(vec![doc(json!({"_id": "d", "i": i}))], true)
                .await
                .unwrap();
        }
        if !t.keeps_db_files() {
            // No files: what is left to check is the data after reopening.
            for i in 0..LIMIT * 2 {
                let db = store.db(&name(i)).await.unwrap();
                assert_eq!(get(&db, "d").await["i"], i);
            }
            return;
        }
        // The first half was closed to make room for the second.
        let first = t.dir.join(store::name::file_name(&name(0)));
        let sibling = |suffix: &str| {
            let mut path = first.as_os_str().to_owned();
            path.push(suffix);
            std::path::PathBuf::from(path)
        };
        assert!(store.open_dbs() <= LIMIT);
        assert_eq!(std::fs::metadata(sibling("-wal")).unwrap().len(), 0);
        assert!(sibling("-shm").exists());
        for i in 0..LIMIT * 2 {
            let db = store.db(&name(i)).await.unwrap();
            assert_eq!(get(&db, "d").await["i"], i);
        }
        // Deleting a database takes them with it.
        store.delete_db(&name(0)).await.unwrap();
        assert!(!sibling("-wal").exists() && !sibling("-shm").exists());
    });
}
