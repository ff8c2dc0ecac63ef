//! Bad input gets a CouchDB-style JSON error, never a panic or a hang: a
//! battery of malformed requests, then a check that the server still works.

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn malformed_requests_get_json_errors_and_the_server_survives() {
    let data = TempDir::new("bad-input");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let rev = c.put("/db/doc", json!({"v": 1})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();

    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let json_bodies: Vec<(&str, &str, String)> = vec![
        ("POST", "/db/_bulk_docs", "{\"docs\": [".into()),
        ("POST", "/db/_bulk_docs", deep.clone()),
        (
            "POST",
            "/db/_bulk_docs",
            "{\"docs\": [1, \"x\", null]}".into(),
        ),
        ("POST", "/db/_bulk_get", "[]".into()),
        ("POST", "/db/_revs_diff", "{\"doc\": \"not-a-list\"}".into()),
        ("POST", "/db/_revs_diff", "{\"doc\": [\"bad rev\"]}".into()),
        ("POST", "/db/_all_docs", "{\"keys\": 7}".into()),
        (
            "POST",
            "/db/_changes?filter=_doc_ids",
            "{\"doc_ids\": [1]}".into(),
        ),
        ("POST", "/db", "\"just a string\"".into()),
        ("PUT", "/db/x", deep.clone()),
        (
            "PUT",
            "/db/x",
            "{\"_revisions\": {\"start\": -1, \"ids\": []}}".into(),
        ),
        (
            "PUT",
            "/db/x",
            "{\"_attachments\": {\"a\": {\"data\": 12}}}".into(),
        ),
        (
            "PUT",
            "/db/x",
            format!("{{\"n\": 1e999999, \"_rev\": \"{rev}\"}}"),
        ),
        ("PUT", "/db/_local/x", "{\"_rev\": \"abc\"}".into()),
        ("PUT", "/db/_revs_limit", "-5".into()),
        ("PUT", "/db/_security", "[]".into()),
        ("POST", "/_dbs_info", "{\"keys\": \"db\"}".into()),
    ];
    for (method, path, body) in &json_bodies {
        let reply = c
            .send_bytes(method, path, body.clone().into_bytes(), "application/json")
            .await;
        assert!(
            (400..500).contains(&reply.status),
            "{method} {path} {body:.60} -> {} {}",
            reply.status,
            reply.text
        );
        let error = reply.json();
        assert!(
            error["error"].is_string() && error["reason"].is_string(),
            "{method} {path}: {error}"
        );
    }

    let queries = [
        "/db/doc?rev=nope",
        "/db/doc?open_revs=%5B1%5D",
        "/db/doc?open_revs=garbage",
        "/db/doc?atts_since=%5B%22x%22%5D",
        "/db/_all_docs?startkey=%7Bbroken",
        "/db/_all_docs?skip=-1",
        "/db/_changes?since=%5B%5D",
        "/db/_changes?heartbeat=soon",
        "/db/_changes?style=odd",
        "/db/%FF%FE",
        "/_uuids?count=nan",
        "/db/doc/att?rev=zz",
    ];
    for path in queries {
        let reply = c.get(path).await;
        assert!(
            (400..500).contains(&reply.status),
            "GET {path} -> {} {}",
            reply.status,
            reply.text
        );
        assert!(reply.json()["error"].is_string(), "GET {path}");
    }

    let multipart = c
        .send_bytes(
            "PUT",
            "/db/mp",
            b"--b\r\nno headers end".to_vec(),
            "multipart/related; boundary=\"b\"",
        )
        .await;
    assert_eq!(multipart.status, 400, "{}", multipart.text);
    // As CouchDB: a document read ignores a boolean it cannot read.
    let lenient = c.get("/db/doc?revs=maybe").await;
    assert_eq!(lenient.status, 200, "{}", lenient.text);
    assert!(lenient.json().get("_revisions").is_none());
    let range = c
        .send("GET", "/db/doc", None, &[("range", "bytes=zz")])
        .await;
    assert_eq!(range.status, 200, "a Range on a document is ignored");
    // As CouchDB: a `_bulk_get` entry without an id fails alone.
    let bulk_get = c
        .post(
            "/db/_bulk_get",
            json!({"docs": [{"rev": 5}, {"id": "doc"}]}),
        )
        .await;
    assert_eq!(bulk_get.status, 200, "{}", bulk_get.text);
    let results = bulk_get.json()["results"].clone();
    assert_eq!(
        results[0]["docs"][0]["error"]["reason"], "document id missed",
        "{results}"
    );
    assert_eq!(results[1]["docs"][0]["ok"]["v"], 1, "{results}");
    let long_id = "x".repeat(10_000);
    let reply = c.put(&format!("/db/{long_id}"), json!({})).await;
    assert!(reply.status == 201 || (400..500).contains(&reply.status));

    // Still alive and correct.
    let alive = tokio::time::timeout(Duration::from_secs(5), c.get("/db/doc"))
        .await
        .expect("no hang");
    assert_eq!(alive.json()["v"], 1);
}
