//! The store's conformance suite on PostgreSQL: every case, when
//! `RECLINER_TEST_POSTGRES` holds a server's URL (`cargo xtask test` starts
//! one); skipped with a note otherwise.

mod backend;

use backend::postgres;

store_conformance::conformance_tests!(postgres);
