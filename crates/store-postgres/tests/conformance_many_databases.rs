//! The store's many-databases cases on PostgreSQL, in a test binary of
//! their own (they count the process's threads and descriptors), when
//! `RECLINER_TEST_POSTGRES` holds a server's URL (`cargo xtask test` starts
//! one); skipped with a note otherwise.

mod backend;

/// PostgreSQL with every feature the nodes coordinate with.
fn postgres() -> Option<backend::Postgres> {
    backend::postgres_with(Default::default())
}

store_conformance::many_databases_tests!(postgres);
