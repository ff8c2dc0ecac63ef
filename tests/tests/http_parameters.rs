//! The document and feed parameters not covered elsewhere, over HTTP.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

async fn start() -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-params");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/db", json!({})).await.status, 201);
    (data, server, client)
}

/// A document with two conflicting branches (2-b loses to 2-c) and a deleted one.
async fn conflicted(c: &Client) {
    let docs = json!({"new_edits": false, "docs": [
        {"_id": "d", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"},
        {"_id": "d", "_revisions": {"start": 2, "ids": ["c", "a"]}, "side": "c"},
        {"_id": "d", "_revisions": {"start": 3, "ids": ["z", "y", "a"]}, "_deleted": true},
    ]});
    assert_eq!(c.post("/db/_bulk_docs", docs).await.json(), json!([]));
}

#[tokio::test]
async fn document_read_options_show_conflicts_history_and_sequence() {
    let (_d, _s, c) = start().await;
    conflicted(&c).await;
    let doc = c
        .get("/db/d?conflicts=true&deleted_conflicts=true&local_seq=true&revs=true")
        .await
        .json();
    assert_eq!(doc["_rev"], "2-c");
    assert_eq!(doc["_conflicts"], json!(["2-b"]));
    assert_eq!(doc["_deleted_conflicts"], json!(["3-z"]));
    assert_eq!(doc["_local_seq"], 3);
    assert_eq!(doc["_revisions"], json!({"start": 2, "ids": ["c", "a"]}));
    let meta = c.get("/db/d?meta=true").await.json();
    assert!(meta["_revs_info"].is_array() && meta["_conflicts"].is_array());
    // `latest` answers with the leaf the revision leads to (first in winner order).
    let latest = c.get("/db/d?rev=1-a&latest=true").await.json();
    assert_eq!(latest["_rev"], "2-c");
    assert_eq!(
        c.get("/db/d?rev=1-a").await.status,
        404,
        "1-a itself has no body here"
    );
    let leaf = c.get("/db/d?rev=2-b").await.json();
    assert_eq!(leaf["side"], "b");
    let tomb = c.get("/db/d?rev=3-z").await.json();
    assert_eq!(tomb["_deleted"], true);

    let head = c.send("HEAD", "/db/d", None, &[]).await;
    assert_eq!((head.status, head.text.as_str()), (200, ""));
    assert_eq!(head.header("etag"), Some("\"2-c\""));
    assert_eq!(c.send("HEAD", "/db/nope", None, &[]).await.status, 404);
}

#[tokio::test]
async fn changes_options_list_leaves_conflicts_and_run_backwards() {
    let (_d, _s, c) = start().await;
    conflicted(&c).await;
    c.put("/db/later", json!({})).await;
    let all = c
        .get("/db/_changes?style=all_docs&include_docs=true&conflicts=true")
        .await
        .json();
    let row = &all["results"][0];
    let revs: Vec<&str> = row["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rev"].as_str().unwrap())
        .collect();
    assert_eq!(revs, ["2-c", "2-b", "3-z"]);
    assert_eq!(row["doc"]["_conflicts"], json!(["2-b"]));
    let desc = c.get("/db/_changes?descending=true&limit=1").await.json();
    assert_eq!(desc["results"][0]["id"], "later");
    let ids = c
        .get("/db/_changes?filter=_doc_ids&doc_ids=%5B%22later%22%5D&seq_interval=10")
        .await
        .json();
    assert_eq!(ids["results"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn writes_honour_if_match_batch_and_copy_over_a_revision() {
    let (_d, _s, c) = start().await;
    let r1 = c.put("/db/a", json!({"v": 1})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let batch = c.put("/db/b?batch=ok", json!({"v": 2})).await;
    assert_eq!(
        (batch.status, batch.json()),
        (202, json!({"ok": true, "id": "b"}))
    );
    let rb = c.get("/db/b").await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let copied = c
        .send(
            "COPY",
            "/db/a",
            None,
            &[("destination", &format!("b?rev={rb}"))],
        )
        .await;
    assert_eq!(copied.status, 201, "{}", copied.text);
    assert_eq!(c.get("/db/b").await.json()["v"], 1);
    let stale = c
        .send(
            "COPY",
            "/db/a",
            None,
            &[("destination", &format!("b?rev={rb}"))],
        )
        .await;
    assert_eq!(stale.status, 409);
    let wrong = c
        .send("DELETE", "/db/a", None, &[("if-match", "\"1-nope\"")])
        .await;
    assert_eq!(wrong.status, 409);
    let deleted = c
        .send(
            "DELETE",
            "/db/a",
            None,
            &[("if-match", &format!("\"{r1}\""))],
        )
        .await;
    assert_eq!(deleted.status, 200);
    let design = c.put("/db/_design/app", json!({"views": {}})).await;
    assert_eq!(design.status, 201);
    assert_eq!(c.get("/db/_design/app").await.json()["_id"], "_design/app");
    let replicated = c
        .put("/db/r?new_edits=false", json!({"_rev": "5-five", "v": 5}))
        .await;
    assert_eq!(replicated.json()["rev"], "5-five");
    assert_eq!(
        c.put("/db/s?new_edits=false", json!({"v": 1})).await.status,
        400
    );
}

#[tokio::test]
async fn atts_since_and_attachment_heads_work_over_http() {
    let (_d, _s, c) = start().await;
    let r1 = c
        .send_bytes("PUT", "/db/doc/one.txt", b"first".to_vec(), "text/plain")
        .await
        .json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let r2 = c
        .send_bytes(
            "PUT",
            &format!("/db/doc/two.txt?rev={r1}"),
            b"second".to_vec(),
            "text/plain",
        )
        .await
        .json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let since: Value = c
        .get(&format!("/db/doc?atts_since=%5B%22{r1}%22%5D"))
        .await
        .json();
    assert_eq!(since["_attachments"]["one.txt"]["stub"], true);
    assert_eq!(since["_attachments"]["two.txt"]["data"], "c2Vjb25k");
    let head = c.send("HEAD", "/db/doc/two.txt", None, &[]).await;
    assert_eq!(
        (head.status, head.header("content-length")),
        (200, Some("6"))
    );
    // Stored gzip-compressed (text): no Content-MD5 of the content, as CouchDB.
    assert!(head.header("etag").is_some());
    let old = c.get(&format!("/db/doc/one.txt?rev={r2}")).await;
    assert_eq!(old.text, "first");
    let etag = head.header("etag").unwrap().to_string();
    let cached = c
        .send("GET", "/db/doc/two.txt", None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(cached.status, 304);
}

#[tokio::test]
async fn post_all_docs_takes_the_query_string_over_the_body_as_couchdb_does() {
    let (_d, _s, c) = start().await;
    for id in ["a", "b", "c"] {
        c.put(&format!("/db/{id}"), json!({})).await;
    }
    let ids = |v: Value| -> Vec<String> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let limited = c
        .post("/db/_all_docs?limit=0", json!({"limit": 5}))
        .await
        .json();
    assert_eq!(ids(limited), Vec::<String>::new());
    let ordered = c
        .post(
            "/db/_all_docs?descending=false&limit=2",
            json!({"descending": true, "limit": 1}),
        )
        .await
        .json();
    assert_eq!(ids(ordered), ["a", "b"]);
    let started = c
        .post("/db/_all_docs?startkey=%22b%22", json!({"startkey": "a"}))
        .await
        .json();
    assert_eq!(ids(started), ["b", "c"]);
    // The body still counts for what the query does not say.
    let from_body = c
        .post("/db/_all_docs", json!({"descending": true, "limit": 1}))
        .await
        .json();
    assert_eq!(ids(from_body), ["c"]);
}

/// Sends raw bytes on one connection and reads until the server closes it.
async fn raw_exchange(server: &TestServer, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.plain_url.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).to_string()
}

/// curl sends `?key="x"` with the quotes as they are; CouchDB answers it,
/// and so must we, also after a body on the same connection that holds
/// the same bytes (which must be stored as sent).
#[tokio::test]
async fn raw_quotes_in_the_request_target_are_accepted() {
    let (_d, server, c) = start().await;
    let auth = "Authorization: Basic YWRtaW46dGVzdC1zZWNyZXQ=\r\n";
    let body = r#"{"line": "GET /db/_all_docs?key=\"x\" HTTP/1.1"}"#;
    let request = format!(
        "PUT /db/x HTTP/1.1\r\nHost: h\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}\
         GET /db/_all_docs?key=\"x\"&include_docs=true HTTP/1.1\r\nHost: h\r\n{auth}\r\n\
         GET /db/_all_docs?startkey=\"a\"&endkey=\"z\" HTTP/1.1\r\nHost: h\r\n{auth}Connection: close\r\n\r\n",
        body.len()
    );
    let answer = raw_exchange(&server, request.as_bytes()).await;
    let statuses: Vec<&str> = answer
        .lines()
        .filter(|l| l.starts_with("HTTP/1.1"))
        .collect();
    assert_eq!(
        statuses,
        ["HTTP/1.1 201 Created", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK"],
        "{answer}"
    );
    assert!(answer.contains(r#""key":"x""#), "{answer}");
    let doc = c.get("/db/x").await.json();
    assert_eq!(doc["line"], r#"GET /db/_all_docs?key="x" HTTP/1.1"#);
}
