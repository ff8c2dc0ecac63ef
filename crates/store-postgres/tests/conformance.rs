//! The store's conformance suite on PostgreSQL: every case, when
//! `RECLINER_TEST_POSTGRES` holds a server's URL (`cargo xtask test` starts
//! one); skipped with a note otherwise.

use std::path::Path;

use store::{Store, StoreOptions};
use store_conformance::{Backend, Place};
use store_postgres::PostgresStore;

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Each test's databases in a schema of their own.
struct Postgres {
    url: String,
}

/// A test's schema, dropped with it.
#[derive(Debug)]
struct Schema {
    url: String,
    schema: String,
}

impl Backend for Postgres {
    fn create(&self, id: &str, dir: &Path, options: StoreOptions) -> (Store, Box<dyn Place>) {
        let place = Schema {
            url: self.url.clone(),
            schema: format!("t_{id}"),
        };
        (place.reopen(dir, options), Box::new(place))
    }
}

impl Place for Schema {
    fn reopen(&self, dir: &Path, options: StoreOptions) -> Store {
        PostgresStore::connect_in_schema(&self.url, &self.schema, dir.to_path_buf())
            .expect("connect to the test server")
            .into_store(dir.to_path_buf(), options)
    }

    fn keeps_db_files(&self) -> bool {
        false
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = store_postgres::drop_schema(&self.url, &self.schema);
    }
}

fn postgres() -> Option<Postgres> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(Postgres { url }),
        _ => {
            eprintln!(
                "{URL_VAR} is not set: the store's conformance suite on PostgreSQL is skipped"
            );
            None
        }
    }
}

store_conformance::conformance_tests!(postgres);
