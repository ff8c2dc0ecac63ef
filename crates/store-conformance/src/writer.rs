//! The writer thread on each backend: a panicking write, a panic in the
//! writer's loop, back-pressure and idle exit (`store::writer_checks`,
//! which reach the writer's private parts).

use store::{StoreOptions, writer_checks};

use crate::Backend;
use crate::common::TempStore;

pub async fn a_panicking_write_fails_alone_and_the_database_keeps_working(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    writer_checks::a_panicking_write_fails_alone_and_the_database_keeps_working(t.db("t").await)
        .await;
}

pub async fn the_writer_survives_a_panic_outside_any_write(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    writer_checks::the_writer_survives_a_panic_outside_any_write(t.db("t").await).await;
}

pub async fn the_write_queue_makes_writers_wait_for_room(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    writer_checks::the_write_queue_makes_writers_wait_for_room(t.db("t").await).await;
}

pub async fn an_idle_writer_ends_and_the_next_write_starts_another(backend: &dyn Backend) {
    let t = TempStore::with_options(
        backend,
        StoreOptions {
            writer_idle_timeout: writer_checks::SHORT_WRITER_IDLE_TIMEOUT,
            ..StoreOptions::default()
        },
    );
    writer_checks::an_idle_writer_ends_and_the_next_write_starts_another(t.db("t").await).await;
}

pub async fn writes_failing_after_their_rows_leave_none_and_their_group_is_kept(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    writer_checks::writes_failing_after_their_rows_leave_none_and_their_group_is_kept(
        t.db("t").await,
    )
    .await;
}
