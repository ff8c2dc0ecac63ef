//! The node endpoints CouchDB 3 tooling calls first: it finds the node
//! through `/_membership` and reads `/_node/{node}/...`.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn tooling_finds_the_node_and_reads_its_versions_and_system() {
    let data = TempDir::new("node");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_NODE_NAME", "one@10.0.0.1")]);
    let admin = Client::new(&server);
    let members = admin.get("/_membership").await;
    assert_eq!(members.status, 200);
    assert_eq!(
        members.json(),
        json!({"all_nodes": ["one@10.0.0.1"], "cluster_nodes": ["one@10.0.0.1"]})
    );
    for node in ["_local", "one@10.0.0.1"] {
        assert_eq!(
            admin.get(&format!("/_node/{node}")).await.json(),
            json!({"name": "one@10.0.0.1"})
        );
        let versions = admin.get(&format!("/_node/{node}/_versions")).await.json();
        assert!(versions["recliner"]["version"].is_string(), "{versions}");
        let system = admin.get(&format!("/_node/{node}/_system")).await.json();
        assert!(
            system["memory"]["processes"].as_u64().unwrap() > 1 << 20,
            "{system}"
        );
        assert!(system["uptime"].is_u64(), "{system}");
    }
    let other = admin.get("/_node/two@10.0.0.2/_versions").await;
    assert_eq!(other.status, 404);
    assert_eq!(other.json()["reason"], "no such node: two@10.0.0.2");
    // For server admins only, as in CouchDB; the system figures also for
    // a read-only `_metrics` user.
    let anonymous = Client::anonymous(&server);
    let refused = anonymous.get("/_membership").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["reason"], "You are not a server admin.");
    let refused = anonymous.get("/_node/_local/_system").await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.json()["reason"],
        "You are not a server admin or read-only metrics user"
    );
    let watcher =
        json!({"name": "watcher", "password": "w", "roles": ["_metrics"], "type": "user"});
    assert_eq!(
        admin
            .put("/_users/org.couchdb.user:watcher", watcher)
            .await
            .status,
        201
    );
    let plain = server.plain_url.replacen("http://", "http://watcher:w@", 1);
    let metrics = Client::at(&plain);
    assert_eq!(metrics.get("/_node/_local/_system").await.status, 200);
    assert_eq!(metrics.get("/_membership").await.status, 401);
}

#[tokio::test]
async fn a_clients_request_id_is_echoed_and_a_bad_one_replaced() {
    let data = TempDir::new("request-id");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let echoed = c
        .send("GET", "/", None, &[("x-couch-request-id", "trace-42.a_b")])
        .await;
    assert_eq!(echoed.header("x-couch-request-id"), Some("trace-42.a_b"));
    let replaced = c
        .send("GET", "/", None, &[("x-couch-request-id", "bad id; x")])
        .await;
    let id = replaced.header("x-couch-request-id").unwrap();
    assert_ne!(id, "bad id; x");
    assert_eq!(id.len(), 10);
}

#[tokio::test]
async fn uuids_follow_the_configured_algorithm() {
    let data = TempDir::new("uuids-sequential");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let reply = c.get("/_uuids?count=5").await;
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let ids: Vec<String> = serde_json::from_value(reply.json()["uuids"].clone()).unwrap();
    for pair in ids.windows(2) {
        assert_eq!(
            pair[0][..26],
            pair[1][..26],
            "sequential by default, as CouchDB 3.5"
        );
        assert!(pair[0] < pair[1]);
    }
    // A document posted without an id gets the next one.
    c.put("/db", json!(null)).await;
    let posted = c.post("/db", json!({"a": 1})).await.json();
    let id = posted["id"].as_str().unwrap();
    assert_eq!(id[..26], ids[0][..26]);
    assert!(id > ids[4].as_str());

    let data = TempDir::new("uuids-utc-id");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_UUIDS_ALGORITHM", "utc_id"),
            ("RECLINER_UTC_ID_SUFFIX", "-east"),
        ],
    );
    let ids = Client::new(&server).get("/_uuids?count=2").await.json()["uuids"].clone();
    let (a, b) = (ids[0].as_str().unwrap(), ids[1].as_str().unwrap());
    assert!(a.ends_with("-east") && a.len() == 19 && a < b, "{a} {b}");
}
