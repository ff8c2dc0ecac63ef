//! Interop: real npm clients against the real server. Each test starts a
//! `recliner` with a data folder of its own and runs one Node.js script from
//! `tests/interop/` with `RECLINER_URL` pointing at it; the script drives
//! PouchDB (memory adapter locally, HTTP adapter remotely) or nano and exits
//! non-zero on the first thing that differs from CouchDB's behaviour.
//!
//! The npm packages are pinned in `tests/interop/package-lock.json`;
//! `cargo xtask test` installs them (`npm ci`) before running the suite.
//! `INTEROP_NODE` names another `node` executable.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use recliner_tests::{TempDir, TestServer};

/// The most a script may run before the test kills it. The scripts have
/// watchdogs of their own (50 s); this is the backstop.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// `tests/interop`, where the scripts and their `node_modules` live.
fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop")
}

fn node() -> String {
    std::env::var("INTEROP_NODE").unwrap_or_else(|_| "node".to_string())
}

/// Fails, rather than skips, when the clients are not installed.
fn check_prerequisites(dir: &Path) {
    let node = node();
    match Command::new(&node).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`{node} --version` failed ({}): the interop tests need Node.js 20 or later",
            out.status
        ),
        Err(e) => panic!(
            "cannot run `{node}` ({e}): the interop tests need Node.js 20 or later \
             (Debian: apt-get install nodejs npm; .ci/run installs them)"
        ),
    }
    for package in ["pouchdb-core", "pouchdb-adapter-memory", "nano"] {
        let path = dir.join("node_modules").join(package);
        assert!(
            path.is_dir(),
            "{} is missing: run `cargo xtask test`, which installs the interop \
             tests' npm packages (`npm ci` in tests/interop) before the suite",
            path.display()
        );
    }
}

/// Starts a server, runs `tests/interop/<script>` against it, and panics with
/// the script's whole output unless it exits 0 within [`SCRIPT_TIMEOUT`].
fn run_script(script: &str) {
    let dir = interop_dir();
    check_prerequisites(&dir);
    let data = TempDir::new("interop");
    // Request logs at info would drown the test output; warnings still show.
    let server = TestServer::start(data.path(), &["--log-level", "warn"]);

    let started = Instant::now();
    let mut child = Command::new(node())
        .arg(script)
        .current_dir(&dir)
        .env("RECLINER_URL", &server.url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{} {script}`: {e}", node()));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));

    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let elapsed = started.elapsed();
    drop(server);

    match status {
        Some(status) if status.success() => {
            // Shown with --nocapture: the steps and their timings.
            println!("{script} passed in {elapsed:.1?}\n{stdout}{stderr}");
        }
        Some(status) => panic!(
            "{script} failed ({status}) after {elapsed:.1?}\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
        None => panic!(
            "{script} did not finish within {SCRIPT_TIMEOUT:?} and was killed\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
    }
}

/// Reads a child's pipe to the end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// PouchDB pushes docs, edits, a deletion, a `new_edits: false` conflict, a
/// design doc and attachments (text and 5 MiB binary) to recliner, pulls them
/// into a fresh database, and all three agree on winners, `_conflicts`,
/// revision trees and attachment bytes and digests.
#[test]
fn pouchdb_push_and_pull_keep_docs_conflicts_rev_trees_and_attachments() {
    run_script("pouchdb_replication.js");
}

/// PouchDB as a member who is not an admin: logs in, syncs both ways with a
/// database shared with it, and is refused (403, 401) where it should be.
#[test]
fn pouchdb_syncs_as_a_logged_in_member() {
    run_script("pouchdb_member_sync.js");
}

/// PouchDB live two-way sync: writes, edits, deletions, attachments and a
/// conflict made on either side reach the other within 10 s; cancel completes.
#[test]
fn pouchdb_live_sync_both_ways() {
    run_script("pouchdb_live_sync.js");
}

/// PouchDB with design functions: pulls through a filter function (with
/// query_params) and `filter: '_view'`, filtered `changes()`, and a push
/// that validate_doc_update refuses in part.
#[test]
fn pouchdb_filters_and_validation() {
    run_script("pouchdb_design.js");
}

/// pouchdb-find against Recliner's Mango: createIndex, getIndexes,
/// find with sort, fields and bookmarks, explain, deleteIndex.
#[test]
fn pouchdb_find_queries_with_mango() {
    run_script("pouchdb_find.js");
}

/// PouchDB's HTTP adapter used directly: CRUD, bulkDocs conflicts, allDocs
/// with keys, changes (one-shot, doc_ids, live), attachments, revsDiff,
/// bulkGet, `_local` docs.
#[test]
fn pouchdb_remote_api() {
    run_script("pouchdb_remote_api.js");
}

/// nano: server info, uuids, databases, documents, bulk, `_all_docs`,
/// changes, standalone attachments.
#[test]
fn nano_databases_documents_bulk_all_docs_and_attachments() {
    run_script("nano_basics.js");
}

/// nano's multipart/related upload and download of a document with attachments.
#[test]
fn nano_multipart_documents() {
    run_script("nano_multipart.js");
}

/// One database, many users: PouchDB as three users and an admin over a
/// database with per-document access (revocation included).
#[test]
fn pouchdb_syncs_each_user_their_own_documents_of_one_database() {
    run_script("pouchdb_access.js");
}
