//! Checkpointing the WAL on a thread of its own.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its
//! threshold: the writer copies the WAL into the database file and fsyncs
//! it before it can take the next group of writes, a pause of tens of
//! milliseconds every few bulk commits. Here the writer only wakes a
//! checkpointer thread with its own connection, which checkpoints without
//! blocking writers or readers. When the checkpointer cannot keep up (the
//! WAL passes four times the threshold), the writer checkpoints inline as
//! SQLite would, so the WAL never grows without bound.
//!
//! The thread and its connection are started by the first wake-up, not
//! with the writer: most databases (one per user, say) never write 32 MiB
//! between two closes of their writer, and would otherwise hold an idle
//! thread and two file descriptors each for nothing.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;

/// WAL pages (4 KiB each) from which the checkpointer is woken: 32 MiB.
pub(crate) const BACKGROUND_PAGES: i32 = 8192;

/// Opens the checkpointer's own connection to the database file (the
/// error is only logged).
pub(crate) type Connect = Arc<dyn Fn() -> Result<Connection, String> + Send + Sync>;

/// The checkpointer of one writer session: its thread runs from the first
/// wake-up until [`Checkpointer::stop`].
pub(crate) struct Checkpointer {
    lazy: Arc<Mutex<Lazy>>,
    background_pages: i32,
}

/// Shared by the writer's WAL hook (which starts the thread) and `stop`.
struct Lazy {
    connect: Connect,
    db_name: String,
    running: Option<Running>,
}

struct Running {
    wake: SyncSender<()>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    /// A checkpointer that will open its connection with `connect` when
    /// first woken.
    pub fn new(connect: Connect, db_name: &str, background_pages: i32) -> Checkpointer {
        Checkpointer {
            lazy: Arc::new(Mutex::new(Lazy {
                connect,
                db_name: db_name.to_string(),
                running: None,
            })),
            background_pages,
        }
    }

    /// Installs the writer's side on its connection: after each commit,
    /// wake the checkpointer past the threshold, and checkpoint inline past
    /// four times it. This replaces SQLite's automatic checkpoint.
    pub fn attach(&self, writer: &mut Connection) -> rusqlite::Result<()> {
        let lazy = self.lazy.clone();
        let (background, backstop) = (self.background_pages, 4 * self.background_pages);
        writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
            if pages >= backstop {
                // Busy (the checkpointer is at work) is not a failure of
                // the commit; SQLite ignores it for automatic checkpoints.
                let _ = wal.checkpoint_v2(CheckpointMode::PASSIVE);
            } else if pages >= background {
                lock(&lazy).wake();
            }
            Ok(())
        }))
    }

    /// Whether the thread has been started (and not stopped).
    #[cfg(test)]
    pub fn is_running(&self) -> bool {
        lock(&self.lazy).running.is_some()
    }

    /// Stops the thread, if it was started, and closes its connection. Call
    /// it after the writer's connection (whose hook may start it) is closed.
    pub fn stop(self) {
        let running = lock(&self.lazy).running.take();
        if let Some(Running { wake, thread }) = running {
            drop(wake);
            let _ = thread.join();
        }
    }
}

fn lock(lazy: &Mutex<Lazy>) -> MutexGuard<'_, Lazy> {
    lazy.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Lazy {
    fn wake(&mut self) {
        if let Some(running) = &self.running {
            match running.wake.try_send(()) {
                // Full: a wake-up is already pending, and one is enough (a
                // checkpoint covers every commit before it).
                Ok(()) | Err(TrySendError::Full(())) => return,
                // The thread ended (it could not open its connection):
                // start another below.
                Err(TrySendError::Disconnected(())) => {}
            }
        }
        if let Some(Running { thread, .. }) = self.running.take() {
            let _ = thread.join();
        }
        let (wake, woken) = sync_channel(1);
        let connect = self.connect.clone();
        let name = self.db_name.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("ckpt:{}", self.db_name).chars().take(15).collect())
            .spawn(move || run(&connect, woken, &name));
        match spawned {
            Ok(thread) => {
                let _ = wake.try_send(());
                self.running = Some(Running { wake, thread });
            }
            // The writer's backstop still bounds the WAL.
            Err(e) => {
                tracing::warn!(db = %self.db_name, error = %e, "cannot start the checkpointer")
            }
        }
    }
}

fn run(connect: &Connect, woken: Receiver<()>, db_name: &str) {
    // A connection only checkpoints once it has opened the WAL.
    let conn = match connect().and_then(|conn| {
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| e.to_string())?;
        Ok(conn)
    }) {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(db = %db_name, error = %e, "the checkpointer cannot open the database");
            return;
        }
    };
    while woken.recv().is_ok() {
        checkpoint(&conn, db_name);
    }
}

/// One passive checkpoint. SQLite answers busy, without waiting, when the
/// writer's backstop checkpoint runs or the writer is mid-way through
/// updating the WAL index; that is retried shortly, and otherwise left to
/// the next wake-up (the WAL still holds every commit safely).
fn checkpoint(conn: &Connection, db_name: &str) {
    for attempt in 1..=BUSY_ATTEMPTS {
        match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
            Ok(_) => return,
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
                if attempt == BUSY_ATTEMPTS {
                    tracing::debug!(db = %db_name, "background checkpoint busy; left to the next");
                } else {
                    std::thread::sleep(BUSY_PAUSE);
                }
            }
            Err(e) => {
                tracing::warn!(db = %db_name, error = %e, "background checkpoint failed");
                return;
            }
        }
    }
}

const BUSY_ATTEMPTS: u32 = 3;
const BUSY_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpointer_keeps_the_wal_short_and_stops_cleanly() {
        const BACKGROUND: i32 = 64;
        let dir = std::env::temp_dir().join(format!("recliner-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sqlite");
        let wal = dir.join("db.sqlite-wal");
        let mut writer = Connection::open(&path).unwrap();
        writer.pragma_update(None, "journal_mode", "WAL").unwrap();
        writer.pragma_update(None, "synchronous", "OFF").unwrap();
        let reader_path = path.clone();
        let checkpointer = Checkpointer::new(
            // Without fsyncs, as the writer: the test is about who
            // checkpoints, not how fast this disk syncs.
            Arc::new(move || {
                let conn = Connection::open(&reader_path).map_err(|e| e.to_string())?;
                conn.pragma_update(None, "synchronous", "OFF")
                    .map_err(|e| e.to_string())?;
                Ok(conn)
            }),
            "t",
            BACKGROUND,
        );
        checkpointer.attach(&mut writer).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        assert!(
            !checkpointer.is_running(),
            "no thread before the WAL reaches the threshold"
        );
        let blob = vec![7u8; 3000];
        // Without checkpoints these commits would need a WAL of about 20
        // times the threshold; the writer alone would let it reach 4 times.
        let mut longest = 0;
        for _ in 0..(20 * BACKGROUND) {
            writer
                .execute("INSERT INTO t (x) VALUES (?1)", [&blob])
                .unwrap();
            longest = longest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The writer's backstop fires at four times the threshold, so a WAL
        // that never gets near that length was checkpointed in the background.
        let frame = 4096 + 24;
        let backstop = 4 * u64::try_from(BACKGROUND).unwrap() * frame;
        assert!(
            longest < backstop - 8 * frame,
            "the WAL reached {longest} bytes"
        );
        assert!(checkpointer.is_running());
        drop(writer);
        checkpointer.stop();
        let conn = Connection::open(&path).unwrap();
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, i64::from(20 * BACKGROUND));
        drop(conn);
        let _ = std::fs::remove_dir_all(dir);
    }
}
