//! Apache CouchDB 3.5, the reference, for the tests that compare with it.
//! `cargo xtask test` starts one instance and hands its URL (with the
//! admin's credentials) to the tests in `COUCHDB_URL`; without it those
//! tests skip themselves with one line saying why.

use crate::Client;

/// The variable that holds CouchDB's base URL.
pub const URL_VAR: &str = "COUCHDB_URL";

/// The shared CouchDB instance, or `None` (after printing why `test` is
/// skipped) when there is none.
pub fn couchdb(test: &str) -> Option<CouchDb> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(CouchDb {
            url: url.trim().trim_end_matches('/').to_string(),
        }),
        _ => {
            eprintln!(
                "skipped {test}: {URL_VAR} is not set (`cargo xtask test` sets it when \
                 Apache CouchDB's release is beside the checkout, in ../shared/couchdb)"
            );
            None
        }
    }
}

/// A CouchDB instance shared by every test of a run: each test works in
/// databases of its own ([`unique_db`]).
#[derive(Debug, Clone)]
pub struct CouchDb {
    url: String,
}

impl CouchDb {
    /// A client as the instance's admin.
    pub fn client(&self) -> Client {
        Client::at(&self.url)
    }

    /// The base URL with the admin's credentials (for replication specs).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of database `db`, with credentials.
    pub fn db_url(&self, db: &str) -> String {
        format!("{}/{db}", self.url)
    }
}

/// A database name no other test (or earlier run) uses.
pub fn unique_db(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
