//! What CouchDB's next release adds (on its `main`, not in 3.5), end to
//! end: `_changes?since=<time>` and `/{db}/_time_seq` (kept across a
//! restart), and `/{db}/_auto_purge` with the server-wide
//! `[couch_auto_purge_plugin] deleted_document_ttl`, purging as `_purge`
//! does.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, eventually, seq_num};
use serde_json::{Value, json};

async fn create_db(c: &Client, db: &str) {
    let created = c.put(&format!("/{db}"), json!({})).await;
    assert_eq!(created.status, 201, "{}", created.text);
}

/// `(last_seq, ids)` of a normal feed.
async fn changes(c: &Client, db: &str, query: &str) -> (u64, Vec<String>) {
    let reply = c.get(&format!("/{db}/_changes{query}")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    let ids = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    (seq_num(&body["last_seq"]), ids)
}

/// The one histogram of a database's `_time_seq`.
async fn histogram(c: &Client, db: &str) -> Vec<Value> {
    let reply = c.get(&format!("/{db}/_time_seq")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    let ranges = body["time_seq"].as_object().unwrap();
    assert_eq!(ranges.keys().collect::<Vec<_>>(), ["00000000-ffffffff"]);
    let nodes = ranges["00000000-ffffffff"].as_object().unwrap();
    assert_eq!(nodes.len(), 1, "{body}");
    nodes.values().next().unwrap().as_array().unwrap().clone()
}

#[tokio::test]
async fn changes_since_a_time_and_the_time_seq_survive_a_restart() {
    let dir = TempDir::new("next-time-seq");
    let server = TestServer::start(dir.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "ts").await;
    for id in ["a", "b", "c"] {
        assert_eq!(c.put(&format!("/ts/{id}"), json!({})).await.status, 201);
    }
    // One bin, this year, holding the three changes.
    let bins = histogram(&c, "ts").await;
    assert_eq!(bins.len(), 1, "{bins:?}");
    let year = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 31_556_952
        + 1970;
    assert!(bins[0][0].as_str().unwrap().starts_with(&year.to_string()));
    assert!(bins[0][0].as_str().unwrap().ends_with(":00:00Z"));
    assert_eq!(bins[0][1], 3);

    // Far in the future: nothing; before the bins: everything, as since=0.
    assert_eq!(
        changes(&c, "ts", "?since=3000-02-03T04:05:00Z").await,
        (3, vec![])
    );
    let all = changes(&c, "ts", "?since=0").await;
    assert_eq!(all.1, ["a", "b", "c"]);
    assert_eq!(changes(&c, "ts", "?since=2025-07-01T04:05:00Z").await, all);
    assert_eq!(changes(&c, "ts", "?since=1000-01-01T01:01:01Z").await, all);
    // Inside the bin: from its start, so nothing written since is missed.
    let start = bins[0][0].as_str().unwrap();
    assert_eq!(changes(&c, "ts", &format!("?since={start}")).await, all);

    for bad in ["2025-01-01Txx:yy:00Z", "2025-02-30T00:00:00Z"] {
        let reply = c.get(&format!("/ts/_changes?since={bad}")).await;
        assert_eq!(reply.status, 400, "{bad}");
        assert_eq!(
            reply.json(),
            json!({"error": "bad_request", "reason": "invalid_time_format"})
        );
    }
    assert_eq!(c.post("/ts/_time_seq", json!({})).await.status, 405);

    // Kept across a restart, even after SIGKILL (dropping the server).
    drop(server);
    let server = TestServer::start(dir.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(histogram(&c, "ts").await, bins);
    assert_eq!(
        changes(&c, "ts", "?since=3000-02-03T04:05:00Z").await,
        (3, vec![])
    );

    // A reset forgets the bins; feeds from a time start at 0 again.
    let reset = c.delete("/ts/_time_seq").await;
    assert_eq!((reset.status, reset.json()), (200, json!({"ok": true})));
    assert_eq!(histogram(&c, "ts").await, Vec::<Value>::new());
    assert_eq!(
        changes(&c, "ts", "?since=3000-02-03T04:05:00Z").await,
        all,
        "without bins, from the start"
    );
    assert_eq!(c.get("/missing/_time_seq").await.status, 404);
}

#[tokio::test]
async fn deleted_documents_past_their_ttl_are_purged_as_purge_does() {
    let dir = TempDir::new("next-auto-purge");
    let server = TestServer::start_with_env(
        dir.path(),
        &[],
        &[
            // One-second bins and a quick round, so a 1_sec TTL shows.
            ("RECLINER_TIME_SEQ_RESOLUTION", "1"),
            ("RECLINER_AUTO_PURGE_INTERVAL_MS", "300"),
        ],
    );
    let c = Client::new(&server);
    for db in ["own", "default", "kept"] {
        create_db(&c, db).await;
    }

    // The setting: CouchDB's shape and errors.
    assert_eq!(c.get("/own/_auto_purge").await.json(), json!({}));
    for (body, reason) in [
        (json!([1]), "Request body must be a JSON object"),
        (json!({"x": "1_sec"}), "invalid auto purge property"),
        (
            json!({"deleted_document_ttl": "soon"}),
            "deleted_document_ttl must be a valid string",
        ),
        (
            json!({"deleted_document_ttl": 5}),
            "deleted_document_ttl must be a valid string",
        ),
    ] {
        let reply = c.put("/own/_auto_purge", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.json()["reason"], reason, "{body}");
    }
    let set = c
        .put("/own/_auto_purge", json!({"deleted_document_ttl": "1_sec"}))
        .await;
    assert_eq!((set.status, set.json()), (201, json!({"ok": true})));
    assert_eq!(
        c.get("/own/_auto_purge").await.json(),
        json!({"deleted_document_ttl": "1_sec"})
    );
    let kept = c
        .put(
            "/kept/_auto_purge",
            json!({"deleted_document_ttl": "infinity"}),
        )
        .await;
    assert_eq!(kept.status, 201);
    assert_eq!(c.delete("/own/_auto_purge").await.status, 405);
    // Members read it; only database admins change it.
    assert_eq!(
        Client::anonymous(&server)
            .put("/own/_auto_purge", json!({"deleted_document_ttl": "1_sec"}))
            .await
            .status,
        401
    );

    // A view over `own`, built before the purge.
    let ddoc = json!({"views": {"all": {"map": "function(doc) { emit(doc._id, null); }"}}});
    assert_eq!(c.put("/own/_design/d", ddoc).await.status, 201);
    for db in ["own", "default", "kept"] {
        let put = c.put(&format!("/{db}/gone"), json!({"v": 1})).await;
        let rev = put.json()["rev"].as_str().unwrap().to_string();
        let deleted = c.delete(&format!("/{db}/gone?rev={rev}")).await;
        assert_eq!(deleted.status, 200, "{}", deleted.text);
        assert_eq!(c.put(&format!("/{db}/live"), json!({})).await.status, 201);
    }
    let rows = async || c.get("/own/_design/d/_view/all").await.json()["rows"].clone();
    assert_eq!(
        rows().await,
        json!([{"id": "live", "key": "live", "value": null}])
    );

    // The database's own TTL purges its deleted document, as `_purge` does.
    assert!(
        eventually(20, async || seq_num(
            &c.get("/own").await.json()["purge_seq"]
        ) > 0)
        .await,
        "own's deleted document was never purged"
    );
    let purged = c.get("/own/_purged_infos").await.json();
    assert_eq!(purged["purged_infos"][0]["id"], "gone", "{purged}");
    let info = c.get("/own").await.json();
    assert_eq!(
        (info["doc_count"].clone(), info["doc_del_count"].clone()),
        (json!(2), json!(0))
    );
    assert_eq!(c.get("/own/gone").await.json()["reason"], "missing");
    assert_eq!(
        changes(&c, "own", "?since=0").await.1,
        ["_design/d", "live"]
    );
    // The view reads the purge as it reads `_purge`'s.
    assert_eq!(
        rows().await,
        json!([{"id": "live", "key": "live", "value": null}])
    );
    // No server default yet: the others keep theirs.
    assert_eq!(c.get("/default").await.json()["doc_del_count"], 1);

    // The server-wide default, set through `_config`, reaches `default`;
    // `kept` opted out with `infinity`.
    let set = c
        .put(
            "/_node/_local/_config/couch_auto_purge_plugin/deleted_document_ttl",
            json!("1_sec"),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    assert!(
        eventually(20, async || c.get("/default").await.json()["doc_del_count"]
            == json!(0))
        .await,
        "the server's default TTL never purged"
    );
    assert_eq!(
        c.get("/default/_purged_infos").await.json()["purged_infos"][0]["id"],
        "gone"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(c.get("/kept").await.json()["doc_del_count"], 1);
    assert_eq!(seq_num(&c.get("/kept").await.json()["purge_seq"]), 0);

    // The settings survive SIGKILL (dropping the server).
    drop(server);
    let server = TestServer::start(dir.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(
        c.get("/own/_auto_purge").await.json(),
        json!({"deleted_document_ttl": "1_sec"})
    );
    assert_eq!(
        c.get("/kept/_auto_purge").await.json(),
        json!({"deleted_document_ttl": "infinity"})
    );
}

/// CouchDB's reason for a document a selector refuses.
fn not_valid() -> Value {
    json!({"error": "forbidden", "reason": "document is not valid"})
}

#[tokio::test]
async fn a_mango_validate_doc_update_judges_every_way_a_write_comes_in() {
    let dir = TempDir::new("next-mango-vdu");
    let server = TestServer::start(dir.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "v").await;
    let typed = json!({
        "language": "query",
        "validate_doc_update": {"newDoc": {"type": {"$type": "string"}, "year": {"$lt": 2026}}}
    });
    let ddoc = c.put("/v/_design/mango", typed).await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    let ddoc_rev = ddoc.json()["rev"].as_str().unwrap().to_string();

    // Single writes, admins included.
    let ok = c
        .put("/v/doc1", json!({"type": "movie", "year": 1994}))
        .await;
    assert_eq!(ok.status, 201, "{}", ok.text);
    for bad in [
        json!({"type": 42, "year": 1994}),
        json!({"type": "movie", "year": 2094}),
    ] {
        let refused = c.put("/v/doc2", bad.clone()).await;
        assert_eq!(
            (refused.status, refused.json()),
            (403, not_valid()),
            "{bad}"
        );
    }
    assert_eq!(c.post("/v", json!({"no": "type"})).await.status, 403);

    // `_bulk_docs`: a row per refusal, the others written.
    let bulk = c
        .post(
            "/v/_bulk_docs",
            json!({"docs": [{"_id": "b1", "type": "x", "year": 1}, {"_id": "b2"}]}),
        )
        .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    let rows = bulk.json();
    assert_eq!(rows[0]["ok"], true);
    assert_eq!(rows[1]["error"], "forbidden");
    assert_eq!(rows[1]["reason"], "document is not valid");

    // Replicated writes: `new_edits=false` and a replication.
    let replicated = c
        .post(
            "/v/_bulk_docs",
            json!({"new_edits": false, "docs": [{"_id": "r1", "_rev": "1-abc"}]}),
        )
        .await;
    assert_eq!(
        replicated.json()[0]["error"],
        "forbidden",
        "{}",
        replicated.text
    );
    create_db(&c, "src").await;
    for (id, body) in [
        ("good", json!({"type": "a", "year": 2000})),
        ("bad", json!({})),
    ] {
        assert_eq!(c.put(&format!("/src/{id}"), body).await.status, 201);
    }
    let url = |db: &str| format!("{}/{db}", server.url);
    let rep = c
        .post(
            "/_replicate",
            json!({"source": url("src"), "target": url("v")}),
        )
        .await;
    assert_eq!(rep.status, 200, "{}", rep.text);
    assert_eq!(
        rep.json()["history"][0]["doc_write_failures"],
        1,
        "{}",
        rep.text
    );
    assert_eq!(c.get("/v/good").await.status, 200);
    assert_eq!(c.get("/v/bad").await.status, 404);

    // `oldDoc`: the revision the write replaces (null for a new document).
    let keep_type = json!({
        "language": "query",
        "validate_doc_update": {"$or": [{"oldDoc": null}, {"newDoc.type": {"$exists": true}}]}
    });
    assert_eq!(c.put("/v/_design/keep", keep_type).await.status, 201);
    let doc1 = c.get("/v/doc1").await.json();
    let mut untyped = doc1.clone();
    untyped.as_object_mut().unwrap().remove("type");
    // Refused by `mango` too (no type), so check `keep` alone below.
    assert_eq!(c.put("/v/doc1", untyped).await.status, 403);

    // Replacing the selector with JavaScript changes the rule at once;
    // deleting the design documents lifts it.
    let js = json!({
        "language": "javascript",
        "validate_doc_update": "function(newDoc) { if (typeof newDoc.year !== 'number') { throw({forbidden: 'needs a year'}); } }"
    });
    let replaced = c.put(&format!("/v/_design/mango?rev={ddoc_rev}"), js).await;
    assert_eq!(replaced.status, 201, "{}", replaced.text);
    let js_rev = replaced.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        c.put("/v/y1", json!({"type": 5, "year": 3000}))
            .await
            .status,
        201
    );
    let refused = c.put("/v/y2", json!({"type": "t", "year": "1994"})).await;
    assert_eq!(refused.json()["reason"], "needs a year");
    assert_eq!(
        c.delete(&format!("/v/_design/mango?rev={js_rev}"))
            .await
            .status,
        200
    );
    // Only `keep` is left: a new document passes, an edit must keep a type.
    assert_eq!(c.put("/v/free", json!({})).await.status, 201);
    let free = c.get("/v/free").await.json();
    let edit = c.put("/v/free", free.clone()).await;
    assert_eq!((edit.status, edit.json()), (403, not_valid()));
    let mut typed_edit = free;
    typed_edit["type"] = json!("now");
    assert_eq!(c.put("/v/free", typed_edit).await.status, 201);
}
