//! Database and server endpoints over HTTP, against the real binary.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

async fn start() -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-db");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    (data, server, client)
}

#[tokio::test]
async fn databases_are_created_described_listed_and_deleted() {
    let (_data, _server, c) = start().await;
    let created = c.put("/alpha", json!({})).await;
    assert_eq!((created.status, created.json()), (201, json!({"ok": true})));
    assert!(
        created
            .header("location")
            .is_some_and(|l| l.starts_with("http://") && l.ends_with("/alpha")),
        "{:?}",
        created.header("location")
    );

    let again = c.put("/alpha", json!({})).await;
    assert_eq!(again.status, 412);
    assert_eq!(again.json()["error"], "file_exists");

    let bad = c.put("/Alpha", json!({})).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"], "illegal_database_name");
    assert!(
        bad.json()["reason"]
            .as_str()
            .unwrap()
            .starts_with("Name: 'Alpha'. Only lowercase")
    );

    let info = c.get("/alpha").await.json();
    for field in [
        "db_name",
        "update_seq",
        "instance_start_time",
        "doc_count",
        "doc_del_count",
        "purge_seq",
        "sizes",
        "compact_running",
        "disk_format_version",
        "props",
    ] {
        assert!(info.get(field).is_some(), "GET /db lacks {field}: {info}");
    }
    assert_eq!(info["db_name"], "alpha");
    assert_eq!(c.send("HEAD", "/alpha", None, &[]).await.status, 200);
    assert_eq!(c.send("HEAD", "/nope", None, &[]).await.status, 404);

    let all = c.get("/_all_dbs").await.json();
    assert_eq!(
        all,
        json!(["_global_changes", "_replicator", "_users", "alpha"])
    );
    assert_eq!(
        c.get("/_all_dbs?startkey=%22a%22&limit=1").await.json(),
        json!(["alpha"])
    );

    let delete = c.delete("/alpha").await;
    assert_eq!((delete.status, delete.json()), (200, json!({"ok": true})));
    let gone = c.get("/alpha").await;
    assert_eq!(
        (gone.status, gone.json()),
        (
            404,
            json!({"error": "not_found", "reason": "Database does not exist."})
        )
    );
    assert_eq!(c.delete("/alpha").await.status, 404);
}

#[tokio::test]
async fn trailing_slashes_and_encoded_names_work_as_pouchdb_uses_them() {
    let (_data, _server, c) = start().await;
    assert_eq!(c.put("/with%2Fslash/", json!({})).await.status, 201);
    assert_eq!(
        c.get("/with%2Fslash/").await.json()["db_name"],
        "with/slash"
    );
}

#[tokio::test]
async fn server_routes_answer_couchdb_shapes() {
    let (_data, _server, c) = start().await;
    let uuids = c.get("/_uuids?count=5").await.json();
    assert_eq!(uuids["uuids"].as_array().unwrap().len(), 5);
    c.put("/one", json!({})).await;
    let infos = c
        .post("/_dbs_info", json!({"keys": ["one", "missing"]}))
        .await
        .json();
    assert_eq!(infos[0]["info"]["db_name"], "one");
    assert_eq!(infos[1]["error"], "not_found");
    // As CouchDB: a read looks for the database first; a creation is told
    // the name is illegal.
    let underscore = c.get("/_nope").await;
    assert_eq!(
        (underscore.status, underscore.json()["reason"].as_str()),
        (404, Some("Database does not exist."))
    );
    let create = c.put("/_nope", json!({})).await;
    assert_eq!(
        (create.status, create.json()["error"].as_str()),
        (400, Some("illegal_database_name"))
    );
    let session = c.send("POST", "/_session", Some(json!({})), &[]).await;
    assert_eq!(
        (session.status, session.json()["reason"].clone()),
        (400, json!("request body must contain a username")),
        "a login names its user, as CouchDB asks"
    );
    let reply = c.get("/").await;
    assert!(reply.header("x-couch-request-id").is_some());
    assert_eq!(reply.header("cache-control"), Some("must-revalidate"));
    assert!(reply.text.ends_with('\n'));
}

#[tokio::test]
async fn database_maintenance_endpoints_work() {
    let (_data, _server, c) = start().await;
    c.put("/m", json!({})).await;
    let commit = c.post("/m/_ensure_full_commit", json!({})).await;
    assert_eq!(commit.status, 201);
    assert_eq!(
        commit.json()["instance_start_time"],
        c.get("/m").await.json()["instance_start_time"]
    );
    assert_eq!(c.get("/m/_revs_limit").await.json(), json!(1000));
    assert_eq!(
        c.send("PUT", "/m/_revs_limit", Some(json!(5)), &[])
            .await
            .json(),
        json!({"ok": true})
    );
    assert_eq!(c.get("/m/_revs_limit").await.json(), json!(5));
    assert_eq!(
        c.send("PUT", "/m/_revs_limit", Some(json!("x")), &[])
            .await
            .status,
        400
    );
    let sec =
        json!({"admins": {"names": [], "roles": []}, "members": {"names": ["bob"], "roles": []}});
    assert_eq!(
        c.put("/m/_security", sec.clone()).await.json(),
        json!({"ok": true})
    );
    assert_eq!(c.get("/m/_security").await.json(), sec);
    let compact = c.post("/m/_compact", json!({})).await;
    assert_eq!((compact.status, compact.json()), (202, json!({"ok": true})));
    let wrong_type = c
        .send_bytes("POST", "/m/_compact", b"{}".to_vec(), "text/plain")
        .await;
    assert_eq!(wrong_type.status, 415);
    assert_eq!(c.get("/m/_compact").await.status, 405);
}

#[tokio::test]
async fn cors_is_off_by_default_and_answers_configured_origins() {
    let (_data, _server, c) = start().await;
    let plain = c
        .send("GET", "/", None, &[("origin", "https://app.example")])
        .await;
    assert!(
        plain.header("access-control-allow-origin").is_none(),
        "off by default"
    );

    let data = TempDir::new("http-cors");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_CORS_ENABLED", "true"),
            ("RECLINER_CORS_ORIGINS", "https://app.example"),
            ("RECLINER_CORS_CREDENTIALS", "true"),
        ],
    );
    let c = Client::new(&server);
    let allowed = c
        .send("GET", "/", None, &[("origin", "https://app.example")])
        .await;
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        allowed.header("access-control-allow-credentials"),
        Some("true")
    );
    let preflight = c
        .send(
            "OPTIONS",
            "/db/doc",
            None,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "PUT"),
                ("access-control-request-headers", "content-type"),
            ],
        )
        .await;
    assert!(preflight.status < 300, "{}", preflight.status);
    assert!(
        preflight
            .header("access-control-allow-methods")
            .unwrap()
            .contains("PUT")
    );
    let other = c
        .send("GET", "/", None, &[("origin", "https://evil.example")])
        .await;
    assert!(other.header("access-control-allow-origin").is_none());
}

/// A `_revs_limit` lowered after documents were written bounds the
/// history every read gives at once, as CouchDB's reads do, and compaction
/// then cuts the stored tree (`_revs_info`, which reads it whole, shows
/// when), as CouchDB's compaction stems trees.
#[tokio::test]
async fn compaction_stems_history_to_the_revs_limit() {
    let (_d, _s, c) = start().await;
    c.put("/stem", json!({})).await;
    let mut rev = c.put("/stem/d", json!({})).await.json()["rev"].clone();
    for _ in 0..4 {
        rev = c.put("/stem/d", json!({"_rev": rev})).await.json()["rev"].clone();
    }
    let history = async || {
        c.get("/stem/d?revs=true").await.json()["_revisions"]["ids"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let stored = async || {
        c.get("/stem/d?revs_info=true").await.json()["_revs_info"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(history().await, 5);
    let set = c.put("/stem/_revs_limit", json!(2)).await;
    assert_eq!(set.status, 200);
    assert_eq!(history().await, 2, "reads are bounded at once");
    assert_eq!(stored().await, 5, "the tree is cut from compaction on");
    let compact = c.post("/stem/_compact", json!({})).await;
    assert_eq!(compact.status, 202);
    assert!(recliner_tests::eventually(10, async || stored().await == 2).await);
    assert_eq!(history().await, 2);
    // The document is still whole and writable.
    let doc = c.get("/stem/d").await.json();
    assert_eq!(doc["_rev"], rev);
    assert_eq!(c.put("/stem/d", json!({"_rev": rev})).await.status, 201);
}
