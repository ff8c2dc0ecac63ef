//! The conformance suite's backend on PostgreSQL, shared by its test binaries.

use std::path::Path;

use store::{Store, StoreOptions};
use store_conformance::{Backend, Place};
use store_postgres::{PostgresOptions, PostgresStore};

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Each test's databases in a schema of their own, the nodes coordinating
/// by `options`.
pub struct Postgres {
    url: String,
    options: PostgresOptions,
}

/// A test's schema, dropped with it.
#[derive(Debug)]
struct Schema {
    url: String,
    schema: String,
    options: PostgresOptions,
}

impl Backend for Postgres {
    fn create(&self, id: &str, dir: &Path, options: StoreOptions) -> (Store, Box<dyn Place>) {
        let place = Schema {
            url: self.url.clone(),
            schema: format!("t_{id}"),
            options: self.options,
        };
        (place.reopen(dir, options), Box::new(place))
    }
}

impl Place for Schema {
    fn reopen(&self, dir: &Path, options: StoreOptions) -> Store {
        // The node's own folder, as the server makes it before connecting.
        std::fs::create_dir_all(dir).expect("make the node's folder");
        PostgresStore::connect_in_schema(&self.url, &self.schema, dir.to_path_buf(), self.options)
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

/// The backend on the server `RECLINER_TEST_POSTGRES` names, if it names one.
pub fn postgres_with(options: PostgresOptions) -> Option<Postgres> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(Postgres { url, options }),
        _ => {
            eprintln!(
                "{URL_VAR} is not set: the store's conformance suite on PostgreSQL is skipped"
            );
            None
        }
    }
}
