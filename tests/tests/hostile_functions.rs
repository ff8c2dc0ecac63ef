//! Design functions written to hurt: one that loops never holds up another
//! database's requests for long, a filter that runs out of time answers
//! CouchDB's error instead of a feed cut short, and errors stay small.

use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

const TEST_ADMIN: (&str, &str) = ("RECLINER_ADMIN", "admin:test-secret");

fn server(label: &str, timeout_ms: &str) -> (TempDir, TestServer) {
    let data = TempDir::new(label);
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[TEST_ADMIN, ("RECLINER_OS_PROCESS_TIMEOUT", timeout_ms)],
    );
    (data, server)
}

async fn design_db(admin: &Client, db: &str, ddoc: serde_json::Value) {
    assert_eq!(admin.put(&format!("/{db}"), json!(null)).await.status, 201);
    let made = admin.put(&format!("/{db}/_design/app"), ddoc).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(
        admin
            .put(&format!("/{db}/doc"), json!({"v": 1}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn looping_functions_of_one_database_never_hold_up_another() {
    let (_data, server) = server("functions-fair", "3000");
    let admin = Client::new(&server);
    let looping = json!({"shows": {"spin": "function() { while (true) {} }"}});
    let quick = json!({"shows": {"hi": "function() { return 'hi'; }"}});
    design_db(&admin, "busy", looping).await;
    design_db(&admin, "calm", quick).await;
    // Warm the calm database's function up: its first call opens it.
    assert_eq!(
        admin.get("/calm/_design/app/_show/hi/doc").await.status,
        200
    );

    let spinners: Vec<_> = (0..8)
        .map(|_| {
            let admin = Client::new(&server);
            tokio::spawn(async move { admin.get("/busy/_design/app/_show/spin/doc").await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    let answer = admin.get("/calm/_design/app/_show/hi/doc").await;
    let waited = began.elapsed();
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.text, "hi");
    assert!(
        waited < Duration::from_secs(2),
        "another database's show waited {waited:?} behind looping ones"
    );
    for spinner in spinners {
        let spun = spinner.await.expect("the request ran");
        assert_eq!(spun.status, 500, "{}", spun.text);
        assert_eq!(spun.json()["reason"], "OS process timed out.");
    }
}

#[tokio::test]
async fn a_filter_that_runs_out_of_time_answers_couchdbs_error() {
    let (_data, server) = server("functions-filter", "1000");
    let admin = Client::new(&server);
    let ddoc = json!({"filters": {
        "spin": "function() { while (true) {} }",
        "late": "function(doc) { if (doc._id === 'later') { while (true) {} } return true; }"
    }});
    design_db(&admin, "db", ddoc).await;
    for feed in ["normal", "longpoll", "continuous"] {
        let answer = admin
            .get(&format!(
                "/db/_changes?filter=app/spin&feed={feed}&timeout=100"
            ))
            .await;
        assert_eq!(answer.status, 500, "{feed}: {}", answer.text);
        assert_eq!(answer.json()["error"], "os_process_error", "{feed}");
        assert_eq!(answer.json()["reason"], "OS process timed out.", "{feed}");
    }
    // Rows already sent: the feed ends with the error as its last line,
    // whole (not a connection cut off).
    let answer = admin
        .get("/db/_changes?filter=app/late&feed=continuous&timeout=3000")
        .await;
    assert_eq!(answer.status, 200);
    let before = answer
        .text
        .lines()
        .filter(|l| l.contains("\"doc\""))
        .count();
    assert_eq!(before, 1, "{}", answer.text);
    let quiet = Client::new(&server);
    let late = tokio::spawn(async move {
        quiet
            .get("/db/_changes?filter=app/late&feed=continuous&since=now&timeout=5000")
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(admin.put("/db/later", json!({})).await.status, 201);
    let ended = late.await.expect("the feed ran");
    assert_eq!(ended.status, 200);
    let last = ended.text.lines().rev().find(|l| !l.trim().is_empty());
    assert_eq!(
        last.map(|l| serde_json::from_str::<serde_json::Value>(l).ok()),
        Some(Some(
            json!({"error": "os_process_error", "reason": "OS process timed out."})
        )),
        "{}",
        ended.text
    );
}

#[tokio::test]
async fn a_deep_require_chain_fails_fast_with_a_small_error() {
    let (_data, server) = server("functions-require", "5000");
    let admin = Client::new(&server);
    let mut lib = serde_json::Map::new();
    for i in 0..10_000 {
        lib.insert(
            format!("m{i}"),
            json!(format!("module.exports = require('lib/m{}');", i + 1)),
        );
    }
    lib.insert("m10000".into(), json!("module.exports = 1;"));
    let ddoc = json!({
        "lib": lib,
        "shows": {
            "deep": "function() { return String(require('lib/m0')); }",
            "loud": "function() { throw new Error(new Array(1000000).join('x')); }"
        }
    });
    design_db(&admin, "db", ddoc).await;
    let began = Instant::now();
    let answer = admin.get("/db/_design/app/_show/deep/doc").await;
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(answer.status, 500, "{}", answer.text);
    assert!(answer.text.len() < 1024, "{} bytes", answer.text.len());
    let loud = admin.get("/db/_design/app/_show/loud/doc").await;
    assert_eq!(loud.status, 500);
    assert!(loud.text.len() < 20 << 10, "{} bytes", loud.text.len());
}
