//! `recliner dump` and `recliner load` against real servers, and backups
//! moving between them and couchbackup (npm, in `tests/couchbackup`).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;
use recliner_tests::{Client, TempDir, TestServer, compare_dbs, recliner_bin};
use serde_json::{Value, json};

fn recliner(args: &[&str]) -> Output {
    Command::new(recliner_bin())
        .args(args)
        .output()
        .expect("recliner runs")
}

/// `recliner` with `args` on the databases of the server of `data_dir`.
fn recliner_on(data_dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(recliner_bin());
    command.args(args).arg("--data-dir").arg(data_dir);
    if let Some((key, value)) = recliner_tests::store_env_for(data_dir) {
        command.env(key, value);
    }
    command.output().expect("recliner runs")
}

fn check(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A database with what a backup must keep: many documents (several
/// lines of a backup), conflicts, a deleted document with its history,
/// binary and text attachments.
async fn fill(c: &Client, db: &str) {
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let docs: Vec<Value> = (0..1_200)
        .map(|i| json!({"_id": format!("doc-{i:05}"), "n": i}))
        .collect();
    let written = c
        .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    assert_eq!(written.status, 201);
    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let b64 = base64::engine::general_purpose::STANDARD;
    let with_atts = json!({
        "_id": "with-attachments",
        "_attachments": {
            "blob.bin": {"content_type": "application/octet-stream", "data": b64.encode(&binary)},
            "note.txt": {"content_type": "text/plain", "data": b64.encode("a note ".repeat(500))}
        }
    });
    assert_eq!(c.post(&format!("/{db}"), with_atts).await.status, 201);
    let replicated = json!({"new_edits": false, "docs": [
        {"_id": "doc-00007", "_rev": "1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "n": "conflicting"},
        {"_id": "doc-00008", "_rev": "3-cccccccccccccccccccccccccccccccc", "n": "branch",
         "_revisions": {"start": 3, "ids": ["cccccccccccccccccccccccccccccccc", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}},
        {"_id": "gone", "_rev": "2-dddddddddddddddddddddddddddddddd", "_deleted": true,
         "_revisions": {"start": 2, "ids": ["dddddddddddddddddddddddddddddddd", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"]}}
    ]});
    let r = c.post(&format!("/{db}/_bulk_docs"), replicated).await;
    assert_eq!(r.status, 201, "{}", r.text);

    let conflicts = c
        .get(&format!("/{db}/doc-00007?conflicts=true"))
        .await
        .json();
    assert!(conflicts["_conflicts"].is_array(), "{conflicts}");
}

/// A document of numbers and strings as a client writes them, and as
/// CouchDB keeps them.
const EXACT_SENT: &str =
    r#"{"big":12345678901234567890123,"e":1e21,"z":-0.0,"r":0.36920404944799556,"s":"\u001f"}"#;
const EXACT_KEPT: &str =
    r#""big":12345678901234567890123,"e":1e+21,"z":0.0,"r":0.36920404944799556,"s":"\u001F"}"#;

fn db_url(server: &TestServer, db: &str) -> String {
    format!("{}/{db}", server.url)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("a backup file")
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn dumps_load_back_with_conflicts_deletions_and_attachments() {
    let data = TempDir::new("dump");
    let files = TempDir::new("dump-files");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    fill(&c, "src").await;
    // Values a backup must not change (CouchDB's text for each). Not in
    // `fill`: couchbackup, a JavaScript program, reads numbers as doubles.
    let exact = c
        .send_bytes(
            "PUT",
            "/src/exact",
            EXACT_SENT.as_bytes().to_vec(),
            "application/json",
        )
        .await;
    assert_eq!(exact.status, 201, "{}", exact.text);

    let file = files.path().join("src.jsonl");
    let file_arg = file.to_str().unwrap();
    check(
        &recliner(&["dump", &db_url(&server, "src"), "--output", file_arg]),
        "dump",
    );
    let written = lines(&file);
    let header: Value = serde_json::from_str(&written[0]).unwrap();
    assert_eq!(
        (&header["name"], &header["mode"], &header["attachments"]),
        (
            &json!("@cloudant/couchbackup"),
            &json!("full"),
            &json!(true)
        )
    );
    assert!(written.len() >= 4, "{} lines", written.len());
    assert!(
        !written.iter().any(|l| l.contains("pass")),
        "credentials in the backup"
    );

    check(
        &recliner(&["load", file_arg, &db_url(&server, "copy")]),
        "load",
    );
    compare_dbs(&c, "src", &c, "copy").await;
    let (src, copy) = (c.get("/src/exact").await, c.get("/copy/exact").await);
    assert!(src.text.trim_end().ends_with(EXACT_KEPT), "{}", src.text);
    assert_eq!(src.text, copy.text, "the backup keeps every value exactly");
    // A second load of the same file changes nothing.
    check(
        &recliner(&["load", file_arg, &db_url(&server, "copy")]),
        "load again",
    );
    compare_dbs(&c, "src", &c, "copy").await;

    // A dump cut short resumes after its last complete line.
    let cut = files.path().join("cut.jsonl");
    let first_page = c.get("/src/_changes?limit=500").await.json();
    let mut text = format!("{}\n{}\n", written[0], written[1]);
    text.push_str(&written[2][..written[2].len() / 2]);
    std::fs::write(&cut, text).unwrap();
    std::fs::write(
        files.path().join("cut.jsonl.progress"),
        first_page["last_seq"].as_str().unwrap(),
    )
    .unwrap();
    check(
        &recliner(&[
            "dump",
            &db_url(&server, "src"),
            "--output",
            cut.to_str().unwrap(),
        ]),
        "resumed dump",
    );
    assert!(!files.path().join("cut.jsonl.progress").exists());
    let resumed = lines(&cut);
    assert!(
        resumed
            .iter()
            .any(|l| l.ends_with("{\"marker\":\"@cloudant/couchbackup:resume\"}"))
    );
    check(
        &recliner(&["load", cut.to_str().unwrap(), &db_url(&server, "resumed")]),
        "load of the resumed dump",
    );
    compare_dbs(&c, "src", &c, "resumed").await;

    // A finished backup is not overwritten.
    let again = recliner(&["dump", &db_url(&server, "src"), "--output", file_arg]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("finished backup"));

    // A database name needs the data folder to itself (on SQLite: on
    // PostgreSQL, servers and commands share the databases).
    if !recliner_tests::on_postgres() {
        let busy = recliner(&["dump", "src", "--data-dir", data.path().to_str().unwrap()]);
        assert!(!busy.status.success());
        assert!(
            String::from_utf8_lossy(&busy.stderr).contains("give the database's URL"),
            "{}",
            String::from_utf8_lossy(&busy.stderr)
        );
    }
    // A second server on the same folder is refused too.
    let second = Command::new(recliner_bin())
        .args(["--port", "0", "--data-dir", data.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("another recliner process"));

    // With the server stopped, names work: dump and load in the folder.
    drop(server);
    let local = files.path().join("local.jsonl");
    check(
        &recliner_on(
            data.path(),
            &["dump", "src", "--output", local.to_str().unwrap()],
        ),
        "dump by name",
    );
    check(
        &recliner_on(data.path(), &["load", local.to_str().unwrap(), "by-name"]),
        "load by name",
    );
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    compare_dbs(&c, "src", &c, "by-name").await;
}

/// `tests/couchbackup`, where couchbackup is installed.
fn couchbackup_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("couchbackup")
}

fn couchbackup_tool(name: &str) -> PathBuf {
    let tool = couchbackup_dir()
        .join("node_modules")
        .join(".bin")
        .join(name);
    assert!(
        tool.exists(),
        "{} is missing: run `cargo xtask test`, which installs couchbackup (npm ci in tests/couchbackup)",
        tool.display()
    );
    tool
}

#[tokio::test]
async fn backups_move_between_couchbackup_and_recliner() {
    let data = TempDir::new("couchbackup");
    let files = TempDir::new("couchbackup-files");
    let server = TestServer::start(data.path(), &["--log-level", "warn"]);
    let c = Client::new(&server);
    fill(&c, "src").await;
    let base = server.url.clone();

    // couchbackup's file (it sends gzip-compressed requests) loads into Recliner.
    let theirs = files.path().join("theirs.jsonl");
    let out = Command::new(couchbackup_tool("couchbackup"))
        .args(["--url", &base, "--db", "src", "--attachments", "--quiet"])
        .args(["--output", theirs.to_str().unwrap()])
        .output()
        .expect("couchbackup runs");
    check(&out, "couchbackup");
    check(
        &recliner(&[
            "load",
            theirs.to_str().unwrap(),
            &db_url(&server, "from-couchbackup"),
        ]),
        "load of couchbackup's file",
    );
    compare_dbs(&c, "src", &c, "from-couchbackup").await;

    // Recliner's dump restores with couchrestore.
    let ours = files.path().join("ours.jsonl");
    check(
        &recliner(&[
            "dump",
            &db_url(&server, "src"),
            "--output",
            ours.to_str().unwrap(),
        ]),
        "dump",
    );
    assert_eq!(c.put("/from-recliner", json!({})).await.status, 201);
    let out = Command::new(couchbackup_tool("couchrestore"))
        .args([
            "--url",
            &base,
            "--db",
            "from-recliner",
            "--attachments",
            "--quiet",
        ])
        .stdin(std::fs::File::open(&ours).unwrap())
        .output()
        .expect("couchrestore runs");
    check(&out, "couchrestore");
    compare_dbs(&c, "src", &c, "from-recliner").await;
}
