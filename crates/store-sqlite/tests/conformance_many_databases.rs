//! The store's many-databases cases on SQLite files, in a test binary of
//! their own (they count the process's threads and descriptors).

mod backend;

use backend::sqlite;

store_conformance::many_databases_tests!(sqlite);
