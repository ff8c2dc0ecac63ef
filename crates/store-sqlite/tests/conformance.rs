//! The store's conformance suite on SQLite files: every case, under plain
//! `cargo test`.

mod backend;

use backend::sqlite;

store_conformance::conformance_tests!(sqlite);
