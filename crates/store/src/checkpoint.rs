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

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;

use crate::StoreError;

/// WAL pages (4 KiB each) from which the checkpointer is woken: 32 MiB.
pub(crate) const BACKGROUND_PAGES: i32 = 8192;

/// The checkpointer thread of one database.
pub(crate) struct Checkpointer {
    wake: SyncSender<()>,
    thread: JoinHandle<()>,
    background_pages: i32,
}

impl Checkpointer {
    /// Starts the thread on `conn`, a connection of its own to the file.
    pub fn start(
        conn: Connection,
        db_name: &str,
        background_pages: i32,
    ) -> Result<Checkpointer, StoreError> {
        // A connection only checkpoints once it has opened the WAL.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // One pending wake-up is enough: a checkpoint covers every commit
        // before it, so wake-ups that arrive meanwhile coalesce.
        let (wake, woken) = sync_channel(1);
        let name = db_name.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("ckpt:{db_name}").chars().take(15).collect())
            .spawn(move || run(conn, woken, name))?;
        Ok(Checkpointer {
            wake,
            thread,
            background_pages,
        })
    }

    /// Installs the writer's side on its connection: after each commit,
    /// wake the checkpointer past the threshold, and checkpoint inline past
    /// four times it. This replaces SQLite's automatic checkpoint.
    pub fn attach(&self, writer: &mut Connection) -> rusqlite::Result<()> {
        let wake = self.wake.clone();
        let (background, backstop) = (self.background_pages, 4 * self.background_pages);
        writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
            if pages >= backstop {
                // Busy (the checkpointer is at work) is not a failure of
                // the commit; SQLite ignores it for automatic checkpoints.
                let _ = wal.checkpoint_v2(CheckpointMode::PASSIVE);
            } else if pages >= background {
                // Full: a wake-up is already pending. Disconnected: the
                // checkpointer is stopping with the database.
                let _ = wake.try_send(());
            }
            Ok(())
        }))
    }

    /// Stops the thread and closes its connection. Call it after the
    /// writer's connection (which holds a wake-up handle) is closed.
    pub fn stop(self) {
        drop(self.wake);
        let _ = self.thread.join();
    }
}

fn run(conn: Connection, woken: Receiver<()>, db_name: String) {
    while woken.recv().is_ok() {
        checkpoint(&conn, &db_name);
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
        let reader = Connection::open(&path).unwrap();
        let checkpointer = Checkpointer::start(reader, "t", BACKGROUND).unwrap();
        checkpointer.attach(&mut writer).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
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
