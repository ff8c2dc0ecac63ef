//! The writer thread's checks on SQLite files.

#![allow(clippy::unwrap_used)]

use store::{Database, StoreOptions, writer_checks};

async fn new_db(options: StoreOptions) -> Database {
    let dir = std::env::temp_dir().join(format!("recliner-writer-{}", uuid::Uuid::new_v4()));
    let store = store_sqlite::open_with(&dir, options).unwrap();
    store.create_db("t").await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_write_fails_alone_and_the_database_keeps_working() {
    let db = new_db(StoreOptions::default()).await;
    writer_checks::a_panicking_write_fails_alone_and_the_database_keeps_working(db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_writer_survives_a_panic_outside_any_write() {
    let db = new_db(StoreOptions::default()).await;
    writer_checks::the_writer_survives_a_panic_outside_any_write(db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_write_queue_makes_writers_wait_for_room() {
    let db = new_db(StoreOptions::default()).await;
    writer_checks::the_write_queue_makes_writers_wait_for_room(db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_writer_ends_and_the_next_write_starts_another() {
    let db = new_db(StoreOptions {
        writer_idle_timeout: writer_checks::SHORT_WRITER_IDLE_TIMEOUT,
        ..StoreOptions::default()
    })
    .await;
    writer_checks::an_idle_writer_ends_and_the_next_write_starts_another(db).await;
}
