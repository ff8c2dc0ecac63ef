//! Documents, bulk operations, `_all_docs`, local documents and
//! attachments over HTTP, against the real binary.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

async fn start(db: &str) -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-docs");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put(&format!("/{db}"), json!({})).await.status, 201);
    (data, server, client)
}

#[tokio::test]
async fn a_document_lives_through_put_get_update_and_delete() {
    let (_d, _s, c) = start("db").await;
    let created = c.put("/db/doc", json!({"a": 1})).await;
    assert_eq!(created.status, 201);
    let rev = created.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(created.json(), json!({"ok": true, "id": "doc", "rev": rev}));
    assert_eq!(created.header("etag"), Some(format!("\"{rev}\"").as_str()));

    let got = c.get("/db/doc").await;
    assert_eq!(got.json(), json!({"_id": "doc", "_rev": rev, "a": 1}));
    assert_eq!(got.header("etag"), Some(format!("\"{rev}\"").as_str()));
    let cached = c
        .send(
            "GET",
            "/db/doc",
            None,
            &[("if-none-match", &format!("\"{rev}\""))],
        )
        .await;
    assert_eq!(cached.status, 304);
    // As CouchDB: an empty body said in so many words, and the connection
    // goes on to the next request.
    assert_eq!(cached.header("content-length"), Some("0"));
    assert_eq!(cached.text, "");
    assert_eq!(c.get("/db/doc").await.status, 200);

    let conflict = c.put("/db/doc", json!({"a": 2})).await;
    assert_eq!(
        (conflict.status, conflict.json()["error"].as_str()),
        (409, Some("conflict"))
    );
    let mismatch = c
        .put(
            &format!("/db/doc?rev={rev}"),
            json!({"_rev": "1-other", "a": 2}),
        )
        .await;
    assert_eq!(mismatch.status, 400);
    let via_if_match = c
        .send(
            "PUT",
            "/db/doc",
            Some(json!({"a": 2})),
            &[("if-match", &rev)],
        )
        .await;
    assert_eq!(via_if_match.status, 201);
    let rev2 = via_if_match.json()["rev"].as_str().unwrap().to_string();

    assert_eq!(
        c.delete("/db/doc").await.status,
        409,
        "DELETE without a rev conflicts"
    );
    let deleted = c.delete(&format!("/db/doc?rev={rev2}")).await;
    assert_eq!(deleted.status, 200);
    let gone = c.get("/db/doc").await;
    assert_eq!(
        (gone.status, gone.json()),
        (404, json!({"error": "not_found", "reason": "deleted"}))
    );
    let missing = c.get("/db/never").await;
    assert_eq!(
        missing.json(),
        json!({"error": "not_found", "reason": "missing"})
    );
    assert_eq!(c.delete("/db/never?rev=1-a").await.status, 404);

    // Reading by revision, with history and revision info.
    let old = c
        .get(&format!("/db/doc?rev={rev}&revs=true&revs_info=true"))
        .await
        .json();
    assert_eq!(old["a"], 1);
    assert_eq!(old["_revisions"]["start"], 1);
}

#[tokio::test]
async fn post_creates_with_a_generated_id_and_copy_duplicates() {
    let (_d, _s, c) = start("db").await;
    let posted = c.post("/db", json!({"v": 1})).await;
    assert_eq!(posted.status, 201);
    let id = posted.json()["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert!(posted.header("location").unwrap().ends_with(&id));
    let batch = c.post("/db?batch=ok", json!({"_id": "b", "v": 2})).await;
    assert_eq!(
        (batch.status, batch.json()),
        (202, json!({"ok": true, "id": "b"}))
    );
    let copied = c
        .send(
            "COPY",
            &format!("/db/{id}"),
            None,
            &[("destination", "copy")],
        )
        .await;
    assert_eq!(copied.status, 201);
    assert_eq!(c.get("/db/copy").await.json()["v"], 1);
}

#[tokio::test]
async fn invalid_documents_are_refused_with_couchdbs_errors() {
    let (_d, _s, c) = start("db").await;
    let reserved = c.put("/db/_foo", json!({})).await;
    assert_eq!(
        (reserved.status, reserved.json()["error"].as_str()),
        (400, Some("illegal_docid"))
    );
    let special = c.put("/db/x", json!({"_bad": 1})).await;
    assert_eq!(
        special.json(),
        json!({"error": "doc_validation", "reason": "Bad special document member: _bad"})
    );
    let not_json = c
        .send_bytes("PUT", "/db/x", b"{nope".to_vec(), "application/json")
        .await;
    assert_eq!(
        not_json.json(),
        json!({"error": "bad_request", "reason": "invalid UTF-8 JSON"})
    );
    let array = c
        .send_bytes("PUT", "/db/x", b"[1]".to_vec(), "application/json")
        .await;
    assert_eq!(array.status, 400);
    let big = c
        .put("/db/big", json!({"pad": "x".repeat(8_100_000)}))
        .await;
    // CouchDB's reason is the id the body names; this body names none.
    assert_eq!(
        big.json(),
        json!({"error": "document_too_large", "reason": ""})
    );
    let no_db = c.put("/nodb/x", json!({})).await;
    assert_eq!(no_db.status, 404);
    assert_eq!(c.send("PATCH", "/db/x", None, &[]).await.status, 405);
}

#[tokio::test]
async fn bulk_docs_answers_per_document_and_refuses_bad_requests_whole() {
    let (_d, _s, c) = start("db").await;
    let r = c.put("/db/a", json!({})).await.json()["rev"].clone();
    let reply = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "a"}, {"_id": "b", "v": 1}, {"_id": "a", "_rev": r, "v": 2}]}),
        )
        .await;
    assert_eq!(reply.status, 201);
    let rows = reply.json();
    assert_eq!(
        rows[0],
        json!({"id": "a", "error": "conflict", "reason": "Document update conflict."})
    );
    assert_eq!(rows[1]["ok"], true);
    assert_eq!(rows[2]["ok"], true);

    let replicated = c
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [
            {"_id": "r", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}, "v": 1}]}),
        )
        .await;
    assert_eq!((replicated.status, replicated.json()), (201, json!([])));
    assert_eq!(c.get("/db/r").await.json()["_rev"], "2-b");

    for (body, status) in [
        (json!({"docs": [{"_id": "ok"}, {"_id": "_reserved"}]}), 400),
        (json!({"nodocs": []}), 400),
        (json!({"docs": {}}), 400),
        (json!({"docs": [], "new_edits": "yes"}), 400),
        (json!({"new_edits": false, "docs": [{"_id": "norev"}]}), 400),
        (
            json!({"docs": [{"_id": "s", "_attachments": {"a": {"stub": true}}}]}),
            412,
        ),
    ] {
        let reply = c.post("/db/_bulk_docs", body.clone()).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
    }
    assert_eq!(
        c.get("/db/ok").await.status,
        404,
        "a refused request writes nothing"
    );
    let wrong_type = c
        .send_bytes(
            "POST",
            "/db/_bulk_docs",
            b"{\"docs\":[]}".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(wrong_type.json()["error"], "bad_content_type");
}

#[tokio::test]
async fn all_docs_pages_ranges_and_keys() {
    let (_d, _s, c) = start("db").await;
    let docs: Vec<Value> = (0..25)
        .map(|i| json!({"_id": format!("d{i:02}"), "i": i}))
        .collect();
    c.post("/db/_bulk_docs", json!({"docs": docs})).await;
    let all = c.get("/db/_all_docs").await.json();
    assert_eq!(
        (all["total_rows"].as_u64(), all["offset"].as_u64()),
        (Some(25), Some(0))
    );
    assert_eq!(all["rows"].as_array().unwrap().len(), 25);
    assert_eq!(all["rows"][0]["id"], "d00");
    assert!(all["rows"][0]["value"]["rev"].is_string());

    let page = c
        .get("/db/_all_docs?startkey=%22d10%22&endkey=%22d12%22&include_docs=true")
        .await
        .json();
    let ids: Vec<&str> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d10", "d11", "d12"]);
    assert_eq!(page["offset"], 10);
    assert_eq!(page["rows"][0]["doc"]["i"], 10);
    let exclusive = c
        .get("/db/_all_docs?startkey=%22d10%22&endkey=%22d12%22&inclusive_end=false")
        .await
        .json();
    assert_eq!(exclusive["rows"].as_array().unwrap().len(), 2);
    let desc = c
        .get("/db/_all_docs?descending=true&limit=2&skip=1")
        .await
        .json();
    let ids: Vec<&str> = desc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d23", "d22"]);

    let rev = c.get("/db/d03").await.json()["_rev"].clone();
    c.delete(&format!("/db/d03?rev={}", rev.as_str().unwrap()))
        .await;
    let keys = c
        .post("/db/_all_docs", json!({"keys": ["d01", "d03", "zz"]}))
        .await
        .json();
    assert_eq!(keys["rows"][0]["id"], "d01");
    assert_eq!(keys["rows"][1]["value"]["deleted"], true);
    assert_eq!(keys["rows"][2], json!({"key": "zz", "error": "not_found"}));
    let bad = c.get("/db/_all_docs?limit=x").await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn replication_endpoints_answer_couchdbs_shapes() {
    let (_d, _s, c) = start("db").await;
    let rev = c.put("/db/a", json!({"v": 1})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let diff = c
        .post("/db/_revs_diff", json!({"a": [rev, "2-x"], "b": ["1-y"]}))
        .await
        .json();
    assert_eq!(
        diff["a"],
        json!({"missing": ["2-x"], "possible_ancestors": [rev]})
    );
    assert_eq!(diff["b"], json!({"missing": ["1-y"]}));
    let missing = c
        .post("/db/_missing_revs", json!({"a": [rev, "2-x"]}))
        .await
        .json();
    assert_eq!(missing, json!({"missing_revs": {"a": ["2-x"]}}));

    let got = c
        .post(
            "/db/_bulk_get?revs=true",
            json!({"docs": [{"id": "a", "rev": rev}, {"id": "a", "rev": "9-z"}, {"id": "nope"}]}),
        )
        .await
        .json();
    let results = got["results"].as_array().unwrap();
    assert_eq!(results[0]["docs"][0]["ok"]["_revisions"]["start"], 1);
    assert_eq!(results[1]["docs"][0]["error"]["error"], "not_found");
    assert_eq!(results[2]["docs"][0]["error"]["reason"], "missing");

    let open = c
        .get(&format!("/db/a?open_revs=[%22{rev}%22,%229-z%22]"))
        .await
        .json();
    assert_eq!(open[0]["ok"]["_id"], "a");
    assert_eq!(open[1], json!({"missing": "9-z"}));
    let all = c.get("/db/a?open_revs=all&revs=true").await.json();
    assert_eq!(all.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn local_documents_have_their_own_revisions() {
    let (_d, _s, c) = start("db").await;
    let first = c.put("/db/_local/cp", json!({"seq": 1})).await;
    assert_eq!(
        (first.status, first.json()["rev"].as_str()),
        (201, Some("0-1"))
    );
    let second = c
        .put("/db/_local/cp", json!({"_rev": "0-1", "seq": 2}))
        .await;
    assert_eq!(second.json()["rev"], "0-2");
    assert_eq!(
        c.get("/db/_local/cp").await.json(),
        json!({"_id": "_local/cp", "_rev": "0-2", "seq": 2})
    );
    assert_eq!(c.get("/db/_changes").await.json()["results"], json!([]));
    assert_eq!(c.delete("/db/_local/cp").await.status, 200);
    assert_eq!(c.get("/db/_local/cp").await.status, 404);
    let att = c
        .send_bytes("PUT", "/db/_local/cp/att", b"x".to_vec(), "text/plain")
        .await;
    assert_eq!(att.status, 400);
}

#[tokio::test]
async fn attachments_stream_in_and_out_with_ranges() {
    let (_d, _s, c) = start("db").await;
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let put = c
        .send_bytes(
            "PUT",
            "/db/doc/dir/file.bin",
            bytes.clone(),
            "application/x-test",
        )
        .await;
    assert_eq!(put.status, 201, "{}", put.text);
    let rev = put.json()["rev"].as_str().unwrap().to_string();

    let response = c
        .http()
        .get(c.url("/db/doc/dir/file.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-test");
    let digest = c.get("/db/doc").await.json()["_attachments"]["dir/file.bin"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        response.headers()["etag"],
        format!("\"{}\"", digest.trim_start_matches("md5-")).as_str()
    );
    assert_eq!(response.bytes().await.unwrap().to_vec(), bytes);

    let partial = c
        .http()
        .get(c.url("/db/doc/dir/file.bin"))
        .header("range", "bytes=262140-262150")
        .send()
        .await
        .unwrap();
    assert_eq!(partial.status(), 206);
    assert_eq!(
        partial.headers()["content-range"],
        "bytes 262140-262150/300000"
    );
    assert_eq!(
        partial.bytes().await.unwrap().to_vec(),
        bytes[262140..=262150].to_vec()
    );

    let second = c
        .send_bytes(
            "PUT",
            &format!("/db/doc/other.txt?rev={rev}"),
            b"hello".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(second.status, 201);
    let rev2 = second.json()["rev"].as_str().unwrap().to_string();
    let doc = c.get("/db/doc?attachments=true").await.json();
    assert_eq!(doc["_attachments"]["other.txt"]["data"], "aGVsbG8=");
    assert_eq!(doc["_attachments"]["dir/file.bin"]["revpos"], 1);

    let removed = c.delete(&format!("/db/doc/other.txt?rev={rev2}")).await;
    assert_eq!(removed.status, 200);
    assert_eq!(
        c.get("/db/doc/other.txt").await.json()["reason"],
        "Document is missing attachment"
    );
    assert_eq!(
        c.send_bytes("PUT", "/db/doc/x.txt", b"x".to_vec(), "text/plain")
            .await
            .status,
        409,
        "needs the rev"
    );
}

/// `_local_docs` as CouchDB 3.5 answers it: local documents only, in id
/// order, `null` totals, `keys` that are not local ids left out.
#[tokio::test]
async fn local_docs_lists_local_documents_with_all_docs_parameters() {
    let (_d, _s, c) = start("locals").await;
    for (id, body) in [("_local/b", json!({"x": 1})), ("_local/a", json!({"y": 1}))] {
        assert_eq!(c.put(&format!("/locals/{id}"), body).await.status, 201);
    }
    assert_eq!(c.put("/locals/d", json!({})).await.status, 201);
    let rows = |reply: recliner_tests::Reply| -> Value {
        assert_eq!(reply.status, 200, "{}", reply.text);
        let body = reply.json();
        assert_eq!(body["total_rows"], Value::Null);
        assert_eq!(body["offset"], Value::Null);
        body["rows"].clone()
    };
    let row = |id: &str| json!({"id": id, "key": id, "value": {"rev": "0-1"}});
    assert_eq!(
        rows(c.get("/locals/_local_docs").await),
        json!([row("_local/a"), row("_local/b")])
    );
    let mut b = row("_local/b");
    b["doc"] = json!({"_id": "_local/b", "_rev": "0-1", "x": 1});
    assert_eq!(
        rows(
            c.get("/locals/_local_docs?include_docs=true&descending=true&limit=1")
                .await
        ),
        json!([b])
    );
    assert_eq!(
        rows(c.get("/locals/_local_docs?startkey=%22_local/b%22").await),
        json!([row("_local/b")])
    );
    assert_eq!(
        rows(
            c.get("/locals/_local_docs?endkey=%22_local/a%22&inclusive_end=false")
                .await
        ),
        json!([])
    );
    assert_eq!(
        rows(
            c.get("/locals/_local_docs?keys=%5B%22nope%22,%22_local/b%22,3,%22_local/zz%22%5D")
                .await
        ),
        json!([row("_local/b"), {"key": "_local/zz", "error": "not_found"}])
    );
    assert_eq!(
        rows(
            c.post("/locals/_local_docs", json!({"keys": ["_local/a", "nope"]}))
                .await
        ),
        json!([row("_local/a")])
    );
    let reply = c.delete("/locals/_local_docs").await;
    assert_eq!(reply.status, 405, "{}", reply.text);
}

#[tokio::test]
async fn batch_writes_are_accepted_even_when_the_write_itself_fails() {
    let data = TempDir::new("batch-ok");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let first = c.put("/db/bb?batch=ok", json!({"a": 1})).await;
    assert_eq!(
        (first.status, first.json()),
        (202, json!({"ok": true, "id": "bb"}))
    );
    // The same id again conflicts, which CouchDB's batch mode never reports.
    let second = c.put("/db/bb?batch=ok", json!({"a": 2})).await;
    assert_eq!(
        (second.status, second.json()),
        (202, json!({"ok": true, "id": "bb"}))
    );
    let posted = c.post("/db?batch=ok", json!({"_id": "bb", "a": 3})).await;
    assert_eq!(posted.status, 202);
    assert_eq!(c.get("/db/bb").await.json()["a"], 1);
}
