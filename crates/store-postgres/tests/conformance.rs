//! The store's conformance suite on PostgreSQL: every case, when
//! `RECLINER_TEST_POSTGRES` holds a server's URL (`cargo xtask test` starts
//! one); skipped with a note otherwise.

mod backend;

/// PostgreSQL with every feature the nodes coordinate with.
fn postgres() -> Option<backend::Postgres> {
    backend::postgres_with(Default::default())
}

store_conformance::conformance_tests!(postgres);
