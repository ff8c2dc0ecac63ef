//! The store's conformance suite on PostgreSQL as PostgreSQL-compatible
//! engines without `LISTEN`/`NOTIFY` or advisory locks run it: nodes poll
//! the change counters and migrate under a row lock. Run when
//! `RECLINER_TEST_POSTGRES` holds a server's URL; skipped otherwise.

mod backend;

use std::time::Duration;

use store_postgres::PostgresOptions;

/// PostgreSQL with `NOTIFY` and advisory locks left unused.
fn without_notify() -> Option<backend::Postgres> {
    backend::postgres_with(PostgresOptions {
        notify: false,
        advisory_locks: false,
        poll_interval: Duration::from_millis(100),
    })
}

store_conformance::conformance_tests!(without_notify);
