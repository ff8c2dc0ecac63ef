//! Durability: a writer process killed with SIGKILL loses no acknowledged write.
//!
//! The test re-runs its own binary as a child that writes batches in a loop
//! (several concurrent writers, so group commits are in flight) and prints
//! each acknowledged batch. The parent kills it mid-stream, reopens the
//! database and checks every acknowledged document and revision.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::json;
use store::{AllDocsQuery, DocInput, GetOptions};

const DIR_VAR: &str = "RECLINER_CRASH_TEST_DIR";
const WRITERS: usize = 4;
const ACKS_BEFORE_KILL: usize = 3000;

/// The child: writes until killed, printing `ACK id rev` after each commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by acknowledged_writes_survive_sigkill as a child process"]
async fn crash_child_writer() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let store = store_sqlite::open(dir).unwrap();
    let db = store.ensure_db("crash").await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let mut revs: HashMap<String, String> = HashMap::new();
            for round in 0u64.. {
                // Each batch creates two documents and updates one earlier one.
                let mut docs = vec![
                    json!({"_id": format!("w{w}-r{round}-a"), "round": round, "pad": "x".repeat(200)}),
                    json!({"_id": format!("w{w}-r{round}-b"), "round": round}),
                ];
                let upd = format!("w{w}-r{}-a", round / 2);
                if let Some(rev) = revs.get(&upd) {
                    docs.push(json!({"_id": upd, "_rev": rev, "updated_in": round}));
                }
                let inputs = docs.into_iter().map(|d| DocInput::from_json(d).unwrap()).collect();
                let results = db.bulk_docs(inputs, true).await.unwrap();
                let mut out = std::io::stdout().lock();
                for r in results {
                    let rev = r.result.unwrap();
                    writeln!(out, "ACK {} {}", r.id, rev).unwrap();
                    revs.insert(r.id, rev);
                }
                out.flush().unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir =
        std::env::temp_dir().join(format!("recliner-crash-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_VAR, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked: HashMap<String, String> = HashMap::new();
    let mut lines = BufReader::new(stdout).lines();
    let mut count = 0;
    while count < ACKS_BEFORE_KILL {
        let Some(Ok(line)) = lines.next() else {
            panic!("the child stopped before being killed")
        };
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (id, rev) = rest.split_once(' ').unwrap();
            acked.insert(id.to_string(), rev.to_string());
            count += 1;
        }
    }
    // SIGKILL mid-stream: no chance to flush or close anything.
    child.kill().unwrap();
    // Acknowledgements printed before the kill landed still count.
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("ACK ")
            && let Some((id, rev)) = rest.split_once(' ')
        {
            acked.insert(id.to_string(), rev.to_string());
        }
    }
    child.wait().unwrap();

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = store_sqlite::open(&dir).unwrap();
        let db = store.db("crash").await.unwrap();
        for (id, rev) in &acked {
            let doc = db
                .get(id, GetOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{id} lost: {e}"));
            let doc: serde_json::Value = serde_json::from_str(doc.as_str()).unwrap();
            // The newest acknowledged revision, or a later one whose
            // acknowledgement the kill cut off.
            let (have, want) = (doc["_rev"].as_str().unwrap(), rev.as_str());
            let pos = |r: &str| r.split('-').next().unwrap().parse::<u64>().unwrap();
            assert!(
                have == want || pos(have) > pos(want),
                "{id}: have {have}, acknowledged {want}"
            );
        }
        let info = db.info().await.unwrap();
        let scan = db.all_docs(AllDocsQuery::default()).await.unwrap();
        assert_eq!(
            info.doc_count,
            scan.rows.len() as u64,
            "doc_count matches a full scan"
        );
        assert!(info.doc_count as usize >= acked.keys().filter(|k| !k.is_empty()).count());
        let changes = db.changes(Default::default()).await.unwrap();
        assert_eq!(
            changes.rows.len() as u64,
            info.doc_count,
            "every document once in the feed"
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}
