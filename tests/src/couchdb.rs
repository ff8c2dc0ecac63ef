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

/// An Apache CouchDB instance of its own, for the benchmarks: started with
/// the release's `couchdb.sh` on a free loopback port in a temporary
/// folder, stopped when dropped. Its admin is the script's default.
#[derive(Debug)]
pub struct CouchDbInstance {
    script: std::path::PathBuf,
    dir: crate::TempDir,
    url: String,
    pid: u32,
}

impl CouchDbInstance {
    /// Starts an instance and waits until it answers (the script waits).
    pub fn start(script: &std::path::Path) -> CouchDbInstance {
        let dir = crate::TempDir::new("couchdb");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let run = |args: &[&str]| {
            let output = std::process::Command::new("bash")
                .arg(script)
                .args(args)
                .arg(dir.path())
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
            assert!(
                output.status.success(),
                "couchdb.sh {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8_lossy(&output.stdout).trim().to_string()
        };
        let pid = run(&["start", &port.to_string()]);
        let pid = pid
            .lines()
            .last()
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("couchdb.sh printed no PID: {pid}"));
        let url = run(&["url"]);
        CouchDbInstance {
            script: script.to_path_buf(),
            dir,
            url,
            pid,
        }
    }

    /// The base URL, with the admin's credentials.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The Erlang VM's process id (its memory and CPU are CouchDB's).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Where its data is kept.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for CouchDbInstance {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
