//! Operations against the real binary: automatic compaction.

#![allow(clippy::unwrap_used)]

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

/// The bytes of the file in use (`sizes.active`): old revisions count
/// until compaction drops them. (`sizes.file` also counts the write-ahead
/// log, which keeps its size.)
fn active_size(info: &Value) -> u64 {
    info["sizes"]["active"].as_u64().expect("sizes.active")
}

/// How many revisions of a document still have their body.
async fn available_revisions(c: &Client, doc: &str) -> usize {
    let revs = c.get(&format!("{doc}?revs_info=true")).await.json();
    revs["_revs_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "available")
        .count()
}

/// A database whose file is mostly old revisions is compacted without
/// being asked; its documents stay as they were.
#[tokio::test]
async fn databases_full_of_garbage_are_compacted_automatically() {
    let data = TempDir::new("auto-compaction");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_COMPACTION_CHECK_INTERVAL_MS", "200"),
            ("RECLINER_COMPACTION_MIN_FILE_SIZE", "65536"),
        ],
    );
    let c = Client::new(&server);
    assert_eq!(c.put("/churn", json!({})).await.status, 201);
    // Bodies that do not compress, edited again and again.
    let pad = |round: usize| -> String {
        (0..1_000)
            .map(|i| format!("{:x}", (i * 7919 + round * 104_729) % 65_521))
            .collect()
    };
    let mut docs: Vec<Value> = (0..100)
        .map(|i| json!({"_id": format!("d{i}"), "pad": pad(i)}))
        .collect();
    for round in 0..6 {
        let written = c
            .post("/churn/_bulk_docs", json!({"docs": docs}))
            .await
            .json();
        for (doc, row) in docs.iter_mut().zip(written.as_array().unwrap()) {
            doc["_rev"] = row["rev"].clone();
            doc["pad"] = json!(pad(round + 1_000));
        }
    }
    // Six rounds wrote six times the live documents: compacted (possibly
    // already while they were written), the file holds little more than
    // the live ones.
    let live = |info: &Value| info["sizes"]["external"].as_u64().unwrap_or(0);
    assert!(
        eventually(20, async || {
            let info = c.get("/churn").await.json();
            active_size(&info) < live(&info) * 3 / 2
        })
        .await,
        "not compacted: {}",
        c.get("/churn").await.text
    );
    let doc = c.get("/churn/d7").await.json();
    assert_eq!(doc["_rev"], docs[7]["_rev"]);
    assert!(doc["_rev"].as_str().unwrap().starts_with("6-"));
    // The old revisions are gone, as after `_compact`.
    assert_eq!(available_revisions(&c, "/churn/d7").await, 1);
}

/// Turned off, the daemon leaves garbage alone.
#[tokio::test]
async fn automatic_compaction_can_be_turned_off() {
    let data = TempDir::new("no-auto-compaction");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_COMPACTION_DAEMON", "false"),
            ("RECLINER_COMPACTION_CHECK_INTERVAL_MS", "100"),
            ("RECLINER_COMPACTION_MIN_FILE_SIZE", "0"),
        ],
    );
    let c = Client::new(&server);
    assert_eq!(c.put("/keep", json!({})).await.status, 201);
    let mut rev = c.put("/keep/a", json!({"v": 0})).await.json()["rev"].clone();
    for v in 1..20 {
        rev = c.put("/keep/a", json!({"_rev": rev, "v": v})).await.json()["rev"].clone();
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(available_revisions(&c, "/keep/a").await, 20);
}

/// `--log-file` writes the log to a file rotated by size, and the request
/// log can be Apache's combined format, a line per request.
#[tokio::test]
async fn logs_go_to_a_rotated_file_with_combined_request_lines() {
    let data = TempDir::new("log-file");
    let log = data.path().join("logs").join("recliner.log");
    let server = TestServer::start_with_env(
        data.path(),
        &["--log-file", log.to_str().unwrap()],
        &[
            ("RECLINER_LOG_REQUEST_FORMAT", "combined"),
            ("RECLINER_LOG_MAX_SIZE", "4000"),
            ("RECLINER_LOG_MAX_FILES", "2"),
        ],
    );
    let c = Client::new(&server);
    assert_eq!(c.put("/logged", json!({})).await.status, 201);
    for i in 0..100 {
        let path = format!("/logged/doc-{i}");
        assert_eq!(c.put(&path, json!({"i": i})).await.status, 201);
    }
    let read = |suffix: &str| {
        let mut name = log.as_os_str().to_owned();
        name.push(suffix);
        std::fs::read_to_string(std::path::PathBuf::from(name)).unwrap_or_default()
    };
    assert!(
        eventually(10, async || read("")
            .contains("\"PUT /logged/doc-99 HTTP/1.1\" 201"))
        .await,
        "{}",
        read("")
    );
    let (current, older, oldest) = (read(""), read(".1"), read(".2"));
    assert!(current.len() <= 4000 && !older.is_empty() && !oldest.is_empty());
    assert!(read(".3").is_empty(), "only two rotated files are kept");
    // host ident user [time] "request" status bytes "referer" "agent"
    let line = current
        .lines()
        .find(|l| l.contains("PUT /logged/doc-99"))
        .unwrap();
    let parts: Vec<&str> = line.splitn(4, ' ').collect();
    assert_eq!(&parts[..3], &["127.0.0.1", "-", "admin"], "{line}");
    assert!(
        parts[3].starts_with('[')
            && parts[3].contains(" +0000] \"PUT /logged/doc-99 HTTP/1.1\" 201 "),
        "{line}"
    );
    // Nothing about the requests went to standard error.
    assert!(!server.logs().contains("PUT /logged/doc-99"));
}

/// The bytes on disk of one database's files (its file and write-ahead
/// log, not its index folder).
fn files_of(dir: &std::path::Path, db: &str) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                pending.push(path);
            } else if name == format!("{db}.sqlite") || name == format!("{db}.sqlite-wal") {
                total += entry.metadata().unwrap().len();
            }
        }
    }
    total
}

/// Compaction gives the disk back: afterwards nothing freed is left on
/// disk (no free pages, an empty log), so the database's files are its
/// live data and the slack of the pages holding it (`sizes.active` counts
/// the live bytes, measured by the compaction; SQLite pages of these
/// documents hold about three quarters live bytes, even fully vacuumed).
#[tokio::test]
async fn compaction_gives_the_disk_back() {
    if recliner_tests::on_postgres() {
        eprintln!("skipped: PostgreSQL keeps no database files of its own");
        return;
    }
    let data = TempDir::new("compaction-disk");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_COMPACTION_DAEMON", "false")]);
    let c = Client::new(&server);
    assert_eq!(c.put("/big", json!({})).await.status, 201);
    // Text that does not compress, as bodies are stored compressed.
    let mut rng = recliner_tests::SplitMix(7);
    let mut docs: Vec<Value> = (0..3000)
        .map(|i| json!({"_id": format!("d{i:05}"), "text": rng.digits(1500)}))
        .collect();
    let texts: Vec<Value> = docs.iter().map(|d| d["text"].clone()).collect();
    for round in 0..4 {
        let written = c.post("/big/_bulk_docs", json!({ "docs": docs })).await;
        assert_eq!(written.status, 201, "{}", written.text);
        for (doc, result) in docs.iter_mut().zip(written.json().as_array().unwrap()) {
            doc["_rev"] = result["rev"].clone();
            doc["round"] = json!(round);
        }
    }
    let before = files_of(data.path(), "big");
    assert_eq!(c.post("/big/_compact", json!({})).await.status, 202);
    assert!(
        eventually(30, async || {
            c.get("/big").await.json()["compact_running"] == false
                && files_of(data.path(), "big") * 2 < before
        })
        .await,
        "{before} bytes before, {} after",
        files_of(data.path(), "big")
    );
    let info = c.get("/big").await.json();
    let (file, active) = (info["sizes"]["file"].as_u64().unwrap(), active_size(&info));
    let on_disk = files_of(data.path(), "big");
    assert_eq!(file, on_disk, "sizes.file is what is on disk: {info}");
    // As CouchDB's own compaction test reads them.
    assert!(active < file, "{info}");
    // Bodies of 1.5 KiB fill 4 KiB pages to about three quarters (see the
    // page size in the SQLite backend): 1.3 times, never 2 as before.
    assert!(
        on_disk * 10 <= active * 14,
        "{on_disk} bytes on disk for {active} live: {info}"
    );
    // Every document reads back as last written (the fourth write carried
    // the round before it).
    let all = c.get("/big/_all_docs?include_docs=true").await.json();
    assert_eq!(all["total_rows"], 3000);
    assert!(
        all["rows"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&texts)
            .all(|(r, text)| r["doc"]["round"] == 2 && r["doc"]["text"] == *text)
    );
}
