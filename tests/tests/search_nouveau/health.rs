//! `/_up`'s word on search indexes (open, updating, failing, with no
//! names: anyone may call `/_up`), and a deleted database's indexes closed
//! with it, a new database of the same name starting afresh.

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

use crate::corpus::{create_db, search_get};

async fn search_health(c: &Client) -> Value {
    let up = c.get("/_up").await;
    assert_eq!(up.status, 200, "{}", up.text);
    up.json()["search"].clone()
}

const OK_INDEX: &str = "/db/_design/foo/_nouveau/ok";
const SPIN_INDEX: &str = "/db/_design/foo/_nouveau/spin";

fn ddoc() -> Value {
    json!({"nouveau": {
        "ok": {"index": "function (doc) { index('string', 'foo', doc.foo); }"},
        "spin": {"index": "function (doc) { if (doc.spin) { while (true) {} } index('string', 'foo', doc.foo); }"},
    }})
}

#[tokio::test]
async fn up_counts_open_updating_and_failing_indexes_and_deleted_databases_close_theirs() {
    let data = TempDir::new("search-health");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_OS_PROCESS_TIMEOUT", "500")]);
    let c = Client::new(&server);
    assert_eq!(
        search_health(&c).await,
        json!({"status": "ok", "open_indexes": 0, "updating": 0, "failing": 0})
    );

    create_db(&c, "db").await;
    let made = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "a", "foo": "old"}, {"_id": "b", "foo": "old"}]}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(c.put("/db/_design/foo", ddoc()).await.status, 201);
    let found = search_get(&c, OK_INDEX, &[("q", "foo:old")]).await;
    assert_eq!(found["total_hits"], 2, "{found}");
    assert_eq!(
        search_health(&c).await,
        json!({"status": "ok", "open_indexes": 1, "updating": 0, "failing": 0})
    );

    // An index function that never ends on one document: the update fails
    // (the node stays up, and says one index is failing) until the
    // document is gone.
    let spin = c
        .put("/db/spinner", json!({"spin": true, "foo": "x"}))
        .await;
    assert_eq!(spin.status, 201, "{}", spin.text);
    let failed = c.get(&format!("{SPIN_INDEX}?q=*:*")).await;
    assert_eq!(failed.status, 500, "{}", failed.text);
    assert_eq!(
        search_health(&c).await,
        json!({"status": "failing", "open_indexes": 2, "updating": 0, "failing": 1})
    );
    let rev = spin.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        c.delete(&format!("/db/spinner?rev={rev}")).await.status,
        200
    );
    let recovered = search_get(&c, SPIN_INDEX, &[("q", "*:*")]).await;
    assert_eq!(recovered["total_hits"], 2, "{recovered}");
    assert_eq!(search_health(&c).await["failing"], 0);

    // Deleted, the database's indexes close; a new one of the same name
    // has none of the old one's entries.
    assert_eq!(c.delete("/db").await.status, 200);
    let mut health = search_health(&c).await;
    for _ in 0..100 {
        if health["open_indexes"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        health = search_health(&c).await;
    }
    assert_eq!(health["open_indexes"], 0, "{health}");
    create_db(&c, "db").await;
    assert_eq!(c.put("/db/c", json!({"foo": "new"})).await.status, 201);
    assert_eq!(c.put("/db/_design/foo", ddoc()).await.status, 201);
    let fresh = search_get(&c, OK_INDEX, &[("q", "*:*")]).await;
    assert_eq!(fresh["total_hits"], 1, "{fresh}");
    assert_eq!(fresh["hits"][0]["id"], "c", "{fresh}");
}
