//! What the HTTP and replication benchmarks share: the servers they measure,
//! the documents they write, and the process figures they read (Linux).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::pouchdb_server::PouchDbServer;
use crate::{TempDir, TestServer};

/// How long a server may take to answer its first request.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A server under test. Dropping it kills the process.
#[derive(Debug)]
pub enum BenchServer {
    Recliner(TestServer, TempDir),
    PouchDb(PouchDbServer),
    CouchDb(crate::couchdb::CouchDbInstance),
}

impl BenchServer {
    /// A release `recliner` on a fresh data folder, request logging off (as
    /// for PouchDB Server).
    pub fn recliner(label: &str) -> BenchServer {
        let dir = TempDir::new(label);
        let server = TestServer::start(dir.path(), &["--log-level", "warn"]);
        BenchServer::Recliner(server, dir)
    }

    /// PouchDB Server run by `node` from `script`.
    pub fn pouchdb(node: &str, script: &Path) -> BenchServer {
        BenchServer::PouchDb(PouchDbServer::spawn(node, script))
    }

    /// Apache CouchDB started with the release's `couchdb.sh` (it fsyncs
    /// every acknowledged write, as Recliner's default does).
    pub fn couchdb(script: &Path) -> BenchServer {
        BenchServer::CouchDb(crate::couchdb::CouchDbInstance::start(script))
    }

    pub fn url(&self, path: &str) -> String {
        match self {
            BenchServer::Recliner(server, _) => server.url(path),
            BenchServer::PouchDb(server) => server.url(path),
            BenchServer::CouchDb(server) => format!("{}{path}", server.url()),
        }
    }

    pub fn pid(&self) -> u32 {
        match self {
            BenchServer::Recliner(server, _) => server.pid(),
            BenchServer::PouchDb(server) => server.pid(),
            BenchServer::CouchDb(server) => server.pid(),
        }
    }

    /// The server's data folder (PouchDB Server's is its own).
    pub fn data_dir(&self) -> Option<&Path> {
        match self {
            BenchServer::Recliner(_, dir) => Some(dir.path()),
            BenchServer::PouchDb(_) => None,
            BenchServer::CouchDb(server) => Some(server.dir()),
        }
    }

    /// Stops the server (gracefully for Recliner) and removes its data.
    pub fn stop(self) {
        match self {
            BenchServer::Recliner(server, _dir) => {
                server.stop();
            }
            BenchServer::PouchDb(server) => drop(server),
            BenchServer::CouchDb(server) => drop(server),
        }
    }

    /// What PouchDB Server printed, to explain a failure (Recliner's log is
    /// echoed on stderr as it comes).
    pub fn output(&self) -> String {
        match self {
            BenchServer::Recliner(..) | BenchServer::CouchDb(..) => String::new(),
            BenchServer::PouchDb(server) => server.output(),
        }
    }

    /// Polls `GET /` until the server answers.
    pub async fn wait_until_up(&mut self, http: &reqwest::Client) {
        if let BenchServer::PouchDb(pouch) = self {
            return pouch.wait_until_up().await;
        }
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(response) = http.get(self.url("/")).send().await
                && response.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not answer within {STARTUP_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The flags every benchmark takes.
#[derive(Debug)]
pub struct CommonOptions {
    /// PouchDB Server's script; without it only Recliner is measured.
    pub pouchdb_server: Option<std::path::PathBuf>,
    /// Apache CouchDB's `couchdb.sh`; without it CouchDB is not measured.
    pub couchdb_script: Option<std::path::PathBuf>,
    pub node: String,
    pub docs: usize,
}

/// Parses `--flag value` pairs: the common flags here, the others through
/// `extra`, which answers whether it knew the flag. A missing value, a bad
/// number or an unknown flag calls `usage`.
pub fn parse_options(usage: fn() -> !, extra: impl FnMut(&str, usize) -> bool) -> CommonOptions {
    parse_options_from(std::env::args().collect(), usage, extra)
}

/// [`parse_options`] of given arguments (the program's name first).
pub fn parse_options_from(
    args: Vec<String>,
    usage: fn() -> !,
    mut extra: impl FnMut(&str, usize) -> bool,
) -> CommonOptions {
    let mut options = CommonOptions {
        pouchdb_server: None,
        couchdb_script: None,
        node: "node".into(),
        docs: 100_000,
    };
    let mut args = args.into_iter().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        let number = || value.parse::<usize>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--pouchdb-server" => options.pouchdb_server = Some(value.clone().into()),
            "--couchdb-script" => options.couchdb_script = Some(value.clone().into()),
            "--node" => options.node = value.clone(),
            "--docs" => options.docs = number(),
            other => {
                if !extra(other, number()) {
                    usage()
                }
            }
        }
    }
    options
}

/// About 1 KiB of JSON, the same shape as the store's benchmark documents.
pub fn bench_doc(id: &str, n: usize) -> Value {
    json!({
        "_id": id,
        "type": "bench",
        "n": n,
        "title": format!("document number {n}"),
        "pad": "x".repeat(940),
    })
}

/// The bytes of the files under `dir`, folders within it included.
pub fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => folder_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// One `/proc/PID/status` field in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// CPU time (user + system) the process has used so far: shows whether a
/// slow step was the server working or waiting for a core.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses: utime and
    // stime are the 12th and 13th of them, in clock ticks (100 per second).
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Resets the process's peak-RSS mark (VmHWM) to its current RSS.
pub fn reset_peak(pid: u32) {
    if let Err(e) = std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
        eprintln!("bench: cannot reset the peak RSS of {pid}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_figures() {
        let pid = std::process::id();
        let rss = proc_status_mib(pid, "VmRSS:").unwrap();
        assert!(rss > 0.5, "{rss}");
        // Burn a little CPU so the counter is not zero.
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_seconds(pid).unwrap() > 0.0);
        assert_eq!(proc_status_mib(pid, "NoSuchField:"), None);
    }

    #[test]
    fn bench_documents_are_about_a_kibibyte() {
        let len = bench_doc("doc00000001", 1).to_string().len();
        assert!((1000..1100).contains(&len), "{len}");
    }
}
