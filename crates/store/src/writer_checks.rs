//! Checks of the writer thread (panics, back-pressure, idle exit) that
//! need private parts of it and a real database: compiled only for the
//! conformance suite (feature `test-hooks`), which runs them on each
//! backend. Each takes a new, empty database.

#![allow(clippy::unwrap_used)]
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::writer::{self, WriteCtx, WriteJob};
use crate::{Database, StoreError};

async fn put(db: &Database, id: &str) -> Result<String, StoreError> {
    let doc = crate::DocInput::new(id, serde_json::Map::new());
    db.put_doc(doc, true).await
}

/// A job that panics when the writer sizes its group: outside every
/// per-write guard, so it unwinds through the writer's loop itself.
struct PanicsWhenSized(Arc<AtomicBool>);

impl WriteJob for PanicsWhenSized {
    fn run(&mut self, _: &mut WriteCtx<'_>) -> bool {
        true
    }
    fn abort(&mut self, _: String) {}
    fn finish(self: Box<Self>, _: Option<&str>) {}
    fn weight(&self) -> usize {
        self.0.store(true, Ordering::Release);
        panic!("deliberate panic in the writer's loop");
    }
}

/// A write that panics fails alone; the writer goes on with the others.
pub async fn a_panicking_write_fails_alone_and_the_database_keeps_working(db: Database) {
    put(&db, "before").await.unwrap();
    let boom = db.write(1, |_| -> Result<(), StoreError> {
        panic!("deliberate panic in a write")
    });
    let neighbour = put(&db, "beside");
    let (boom, neighbour) = tokio::join!(boom, neighbour);
    assert!(matches!(boom, Err(StoreError::CommitFailed(_))), "{boom:?}");
    neighbour.unwrap();
    put(&db, "after").await.unwrap();
    assert_eq!(db.info().await.unwrap().doc_count, 3);
}

/// A panic in the writer's own loop ends neither the database nor its writes.
pub async fn the_writer_survives_a_panic_outside_any_write(db: Database) {
    put(&db, "before").await.unwrap();
    let reached = Arc::new(AtomicBool::new(false));
    db.writer()
        .submit(1, Box::new(PanicsWhenSized(reached.clone())))
        .await
        .unwrap();
    while !reached.load(Ordering::Acquire) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // The database is never reported missing, and writes go on.
    put(&db, "after").await.unwrap();
    let info = db.info().await.unwrap();
    assert_eq!((info.doc_count, info.update_seq), (2, 2));
}

/// Occupies the writer thread with a write that waits until the sender
/// given back is used (or dropped); the reply is that write's outcome.
async fn hold_writer(
    db: &Database,
) -> (std::sync::mpsc::Sender<()>, crate::database::WriteReply<()>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = oneshot::channel();
    let holding = db
        .submit_write(1, move |_| {
            let _ = started.send(());
            let _ = held.recv();
            Ok(())
        })
        .await
        .unwrap();
    running.await.unwrap();
    (release, holding)
}

/// A full write queue makes the next writer wait instead of growing.
pub async fn the_write_queue_makes_writers_wait_for_room(db: Database) {
    // Holds the writer thread until released, so the queue fills up.
    let (release, holding) = hold_writer(&db).await;
    // The writer took the first write; fill its queue to the brim.
    let mut queued = Vec::new();
    for _ in 0..4 {
        queued.push(
            db.submit_write(writer::QUEUE_DOCS / 4, |_| Ok(()))
                .await
                .unwrap(),
        );
    }
    let one_more = db.write(1, |_| Ok(()));
    tokio::pin!(one_more);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(200), &mut one_more)
            .await
            .is_err(),
        "a write past the queue's room waits"
    );
    release.send(()).unwrap();
    holding.await.unwrap();
    for reply in queued {
        reply.await.unwrap();
    }
    one_more.await.unwrap();
}

/// The writer idle time [`an_idle_writer_ends_and_the_next_write_starts_another`]
/// needs its database opened with.
pub const SHORT_WRITER_IDLE_TIMEOUT: Duration = Duration::from_millis(50);

/// A writer thread ends when idle, and the next write starts another; the
/// changes feed outlives it. `db` is new, in a store opened with
/// [`SHORT_WRITER_IDLE_TIMEOUT`].
pub async fn an_idle_writer_ends_and_the_next_write_starts_another(db: Database) {
    assert!(!db.writer_running(), "no thread before the first write");
    let mut feed = db.subscribe();
    put(&db, "a").await.unwrap();
    assert!(db.writer_running());
    for _ in 0..200 {
        if !db.writer_running() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(!db.writer_running(), "the writer ends when idle");
    // The feed's channel outlives the thread: it sees both commits.
    assert!(feed.has_changed().unwrap());
    assert_eq!(*feed.borrow_and_update(), 1);
    put(&db, "b").await.unwrap();
    feed.changed().await.unwrap();
    assert_eq!(*feed.borrow_and_update(), 2);
    assert_eq!(db.info().await.unwrap().doc_count, 2);
    // Closing ends the feed.
    db.close(false);
    assert!(feed.changed().await.is_err());
    assert!(matches!(
        put(&db, "c").await,
        Err(StoreError::CommitFailed(_))
    ));
}

/// Writes of one group that fail after writing documents leave none of
/// them, whether they failed before touching the database (their rows only
/// held) or after (a look-up sent), and the others of the group are kept.
pub async fn writes_failing_after_their_rows_leave_none_and_their_group_is_kept(db: Database) {
    // The writer is held so the next writes queue up and run as one group.
    let (release, holding) = hold_writer(&db).await;
    let write_then_fail = |id: &'static str, then_read: bool| {
        move |ctx: &mut WriteCtx<'_>| -> Result<(), StoreError> {
            let doc = crate::update::Prepared::new(
                crate::DocInput::new(id, serde_json::Map::new()),
                true,
            );
            crate::update::write_prepared(ctx, std::iter::once(doc), true)?;
            if then_read {
                ctx.rows.meta("no-such-key")?;
            }
            Err(StoreError::CommitFailed("deliberate failure".into()))
        }
    };
    let before = put(&db, "kept-before");
    let quiet = db.write_docs(1, vec!["ghost".into()], write_then_fail("ghost", false));
    let loud = db.write(1, write_then_fail("ghost-read", true));
    let after = put(&db, "kept-after");
    // Released once the four are queued behind the held write.
    let release_later = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        release.send(()).unwrap();
        holding.await.unwrap();
    };
    let (before, quiet, loud, after, ()) = tokio::join!(before, quiet, loud, after, release_later);
    before.unwrap();
    after.unwrap();
    assert!(quiet.is_err() && loud.is_err(), "{quiet:?} {loud:?}");
    for id in ["ghost", "ghost-read"] {
        assert!(
            matches!(
                db.get(id, Default::default()).await,
                Err(StoreError::DocNotFound(_))
            ),
            "{id} was kept"
        );
    }
    let info = db.info().await.unwrap();
    assert_eq!((info.doc_count, info.update_seq), (2, 2));
    let changes = db.changes(Default::default()).await.unwrap();
    assert_eq!(changes.rows.len(), 2);
}
