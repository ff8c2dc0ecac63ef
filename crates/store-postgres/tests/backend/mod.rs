//! The conformance suite's backend on PostgreSQL, shared by its test binaries.

use std::path::Path;

use store::{Store, StoreOptions};
use store_conformance::{Backend, Place};
use store_postgres::PostgresStore;

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Each test's databases in a schema of their own.
pub struct Postgres {
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
        // The node's own folder, as the server makes it before connecting.
        std::fs::create_dir_all(dir).expect("make the node's folder");
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

pub fn postgres() -> Option<Postgres> {
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
