//! A user of a database with per-document access learns nothing about a
//! document they may not read: not from a stale search, a bookmark, a
//! score, a count, or the answer to a write with a guessed revision.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine;
use recliner_tests::users::{FAST_PASSWORDS as FAST, add_user, as_user};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// A server with `alice` and `bob`, members of `notes`, a database with
/// per-document access.
async fn notes(label: &str) -> (TempDir, TestServer) {
    let data = TempDir::new(label);
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    add_user(&admin, "alice", json!([])).await;
    add_user(&admin, "bob", json!([])).await;
    assert_eq!(
        admin.put("/notes?access=true", json!(null)).await.status,
        201
    );
    let security = json!({"members": {"names": ["alice", "bob"]}});
    assert_eq!(admin.put("/notes/_security", security).await.status, 200);
    (data, server)
}

fn ids_of(hits: &Value) -> Vec<String> {
    let mut ids: Vec<String> = hits
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {hits}"))
        .iter()
        .map(|hit| hit["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

const SEARCH_DDOC: &str = "function (doc) { if (doc.title) { index('text', 'title', doc.title, {store: true}); } if (doc.body) { index('text', 'body', doc.body); } }";

#[tokio::test]
async fn a_stale_search_is_still_the_readers_and_forgets_a_revoked_reader() {
    let (_data, server) = notes("one-door-stale").await;
    let admin = Client::new(&server);
    let (alice, bob) = (as_user(&server, "alice"), as_user(&server, "bob"));
    let ddoc = json!({
        "nouveau": {"t": {"index": SEARCH_DDOC}},
        "indexes": {"t": {"index": "function (doc) { if (doc.title) { index('title', doc.title, {store: true}); } }"}},
    });
    assert_eq!(admin.put("/notes/_design/s", ddoc).await.status, 201);
    let docs = json!({"docs": [
        {"_id": "a-diary", "_access": ["alice"], "title": "alice private diary zebra"},
        {"_id": "b-note", "_access": ["bob"], "title": "bob zebra note"},
        {"_id": "shared", "_access": ["alice", "bob"], "title": "shared zebra plan"},
    ]});
    assert_eq!(admin.post("/notes/_bulk_docs", docs).await.status, 201);
    // Built by an admin's query, then read stale by bob.
    let built = admin.get("/notes/_design/s/_nouveau/t?q=title:zebra").await;
    assert_eq!(built.json()["total_hits"], 3, "{}", built.text);
    admin.get("/notes/_design/s/_search/t?q=title:zebra").await;
    for path in [
        "/notes/_design/s/_nouveau/t?q=title:zebra&update=false&include_docs=true",
        "/notes/_design/s/_nouveau/t?q=title:zebra",
    ] {
        let found = bob.get(path).await;
        assert_eq!(found.status, 200, "{}", found.text);
        let found = found.json();
        assert_eq!(found["total_hits"], 2, "{path}: {found}");
        assert_eq!(ids_of(&found["hits"]), ["b-note", "shared"], "{path}");
        assert!(!found.to_string().contains("diary"), "{found}");
    }
    let clouseau = bob
        .get("/notes/_design/s/_search/t?q=title:zebra&stale=ok")
        .await;
    assert_eq!(clouseau.status, 200, "{}", clouseau.text);
    let clouseau = clouseau.json();
    assert_eq!(clouseau["total_rows"], 2, "{clouseau}");
    assert!(!clouseau.to_string().contains("diary"), "{clouseau}");
    // An index's figures are for the database's admins.
    for info in ["_nouveau_info", "_search_info"] {
        let info = bob.get(&format!("/notes/_design/s/{info}/t")).await;
        assert_eq!(info.status, 403, "{}", info.text);
    }

    // Alice takes bob off the shared document: even a stale search of
    // his no longer finds it.
    let mut shared = admin.get("/notes/shared").await.json();
    shared["_access"] = json!(["alice"]);
    assert_eq!(alice.put("/notes/shared", shared).await.status, 201);
    let found = bob
        .get("/notes/_design/s/_nouveau/t?q=title:zebra&update=false")
        .await
        .json();
    assert_eq!(ids_of(&found["hits"]), ["b-note"], "{found}");
    let clouseau = bob
        .get("/notes/_design/s/_search/t?q=title:zebra&stale=ok")
        .await
        .json();
    assert_eq!(clouseau["total_rows"], 1, "{clouseau}");
    assert!(!clouseau.to_string().contains("shared"), "{clouseau}");
}

#[tokio::test]
async fn a_mango_text_bookmark_holds_only_what_the_reader_may_read() {
    let (_data, server) = notes("one-door-bookmark").await;
    let admin = Client::new(&server);
    let alice = as_user(&server, "alice");
    let mut docs = vec![json!({"_id": "a-1", "_access": ["alice"], "title": "zebra"})];
    for i in 0..20 {
        docs.push(json!({"_id": format!("z-bob-{i:02}"), "_access": ["bob"], "title": "zebra"}));
    }
    let written = admin.post("/notes/_bulk_docs", json!({"docs": docs})).await;
    assert_eq!(written.status, 201);
    let index = json!({"type": "nouveau", "name": "titles",
                       "index": {"fields": [{"name": "title", "type": "text"}]}});
    assert_eq!(admin.post("/notes/_index", index).await.status, 200);
    let query = json!({"selector": {"$text": "zebra"}});
    let built = admin.post("/notes/_find", query.clone()).await;
    assert_eq!(
        built.json()["docs"].as_array().unwrap().len(),
        21,
        "{}",
        built.text
    );
    for update in [true, false] {
        let mut query = query.clone();
        query["update"] = json!(update);
        let found = alice.post("/notes/_find", query).await;
        assert_eq!(found.status, 200, "{}", found.text);
        let found = found.json();
        assert_eq!(found["docs"].as_array().unwrap().len(), 1, "{found}");
        let bookmark = found["bookmark"].as_str().unwrap();
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(bookmark.trim_end_matches('='))
            .unwrap();
        let decoded = String::from_utf8(decoded).unwrap();
        assert!(!decoded.contains("bob"), "update={update}: {decoded}");
    }
}

/// Alice's score for `q`.
async fn score(alice: &Client, q: &str) -> f64 {
    let found = alice
        .get(&format!("/notes/_design/s/_nouveau/t?q={q}"))
        .await
        .json();
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    hits[0]["order"][0]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("no score: {found}"))
}

#[tokio::test]
async fn scores_do_not_move_with_what_others_hold() {
    let (_data, server) = notes("one-door-scores").await;
    let admin = Client::new(&server);
    let alice = as_user(&server, "alice");
    let ddoc = json!({"nouveau": {"t": {"index": SEARCH_DDOC}}});
    assert_eq!(admin.put("/notes/_design/s", ddoc).await.status, 201);
    let mine = json!({"_id": "mine", "_access": ["alice"], "body": "zqxalpha zqxbeta"});
    assert_eq!(admin.put("/notes/mine", mine).await.status, 201);
    let alpha = score(&alice, "body:zqxalpha").await;
    let beta = score(&alice, "body:zqxbeta").await;
    assert!((alpha - beta).abs() < 1e-9, "{alpha} vs {beta}");
    // Bob's thirty documents holding one of the two words change
    // nothing alice can see.
    let docs: Vec<Value> = (0..30)
        .map(|i| json!({"_id": format!("b{i}"), "_access": ["bob"], "body": format!("zqxalpha filler words {i}")}))
        .collect();
    let written = admin.post("/notes/_bulk_docs", json!({"docs": docs})).await;
    assert_eq!(written.status, 201);
    let alpha_after = score(&alice, "body:zqxalpha").await;
    let beta_after = score(&alice, "body:zqxbeta").await;
    assert!(
        (alpha_after - alpha).abs() < 1e-9 && (beta_after - beta).abs() < 1e-9,
        "before {alpha}/{beta}, after {alpha_after}/{beta_after}"
    );
    // The admin, who reads everything, sees the rare word score higher.
    let everyone = admin
        .get("/notes/_design/s/_nouveau/t?q=body:zqxbeta")
        .await
        .json();
    let admin_beta = everyone["hits"][0]["order"][0]["value"].as_f64().unwrap();
    assert!(admin_beta > alpha_after, "{admin_beta} vs {alpha_after}");
}

#[tokio::test]
async fn counts_are_the_readers_own() {
    let (_data, server) = notes("one-door-counts").await;
    let admin = Client::new(&server);
    let (alice, bob) = (as_user(&server, "alice"), as_user(&server, "bob"));
    for i in 0..3 {
        let doc = json!({"_access": ["alice"], "n": i});
        assert_eq!(alice.put(&format!("/notes/a{i}"), doc).await.status, 201);
    }
    let gone = alice
        .put("/notes/a-gone", json!({"_access": ["alice"]}))
        .await;
    let rev = gone.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        alice
            .delete(&format!("/notes/a-gone?rev={rev}"))
            .await
            .status,
        200
    );
    let before = alice.get("/notes").await.json();
    assert_eq!(
        (&before["doc_count"], &before["doc_del_count"]),
        (&json!(3), &json!(1)),
        "{before}"
    );
    for i in 0..3 {
        let doc = json!({"_access": ["bob"]});
        let put = bob.put(&format!("/notes/b{i}"), doc).await;
        assert_eq!(put.status, 201);
        if i == 0 {
            let rev = put.json()["rev"].as_str().unwrap().to_string();
            assert_eq!(
                bob.delete(&format!("/notes/b0?rev={rev}")).await.status,
                200
            );
        }
    }
    let after = alice.get("/notes").await.json();
    assert_eq!(after["doc_count"], before["doc_count"], "{after}");
    assert_eq!(after["doc_del_count"], before["doc_del_count"], "{after}");
    let everything = admin.get("/notes").await.json();
    assert_eq!(everything["doc_count"], 5, "{everything}");
    let keys = json!({"keys": ["a0", "b1", "nothing"]});
    let listed = alice.post("/notes/_all_docs", keys).await.json();
    assert_eq!(listed["total_rows"], 3, "{listed}");
    let page = alice.get("/notes/_all_docs").await.json();
    assert_eq!(page["total_rows"], 3, "{page}");
}

#[tokio::test]
async fn a_guessed_revision_does_not_tell_whether_a_document_exists() {
    let (_data, server) = notes("one-door-guess").await;
    let alice = as_user(&server, "alice");
    let bob = as_user(&server, "bob");
    let held = bob.put("/notes/bobs", json!({"_access": ["bob"]})).await;
    assert_eq!(held.status, 201);
    let real_rev = held.json()["rev"].as_str().unwrap().to_string();
    let guess = "1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for rev in [guess, real_rev.as_str()] {
        let mut answers = Vec::new();
        for id in ["bobs", "nobody-wrote-this"] {
            let body = json!({"_rev": rev, "_access": ["alice"]});
            let by_body = alice.put(&format!("/notes/{id}"), body).await;
            let by_query = alice
                .put(
                    &format!("/notes/{id}?rev={rev}"),
                    json!({"_access": ["alice"]}),
                )
                .await;
            let bulk = alice
                .post(
                    "/notes/_bulk_docs",
                    json!({"docs": [{"_id": id, "_rev": rev, "_access": ["alice"]}]}),
                )
                .await;
            let row = bulk.json()[0].clone();
            answers.push((
                by_body.status,
                by_body.json(),
                by_query.status,
                by_query.json(),
                bulk.status,
                row["error"].clone(),
                row["reason"].clone(),
            ));
        }
        assert_eq!(answers[0], answers[1], "rev {rev}");
        assert_eq!(answers[0].0, 409, "{:?}", answers[0]);
    }
    // Bob's document is untouched.
    let still = bob.get("/notes/bobs").await.json();
    assert_eq!(still["_rev"], real_rev.as_str());
}

#[tokio::test]
async fn a_member_is_judged_by_every_validation_function_though_they_cannot_read_it() {
    let (_data, server) = notes("one-door-validate").await;
    let admin = Client::new(&server);
    let alice = as_user(&server, "alice");
    let ddoc = json!({"validate_doc_update": "function (doc) { if (doc.bad) { throw({forbidden: 'no bad documents'}); } }"});
    assert_eq!(admin.put("/notes/_design/rules", ddoc).await.status, 201);
    // The member writes first: the functions are read whole for her too,
    // though the design document is hidden from her reads.
    let refused = alice
        .put("/notes/x", json!({"_access": ["alice"], "bad": true}))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.json()["reason"], "no bad documents");
    let bulk = alice
        .post(
            "/notes/_bulk_docs",
            json!({"docs": [{"_id": "y", "_access": ["alice"], "bad": true}]}),
        )
        .await;
    assert_eq!(bulk.json()[0]["error"], "forbidden", "{}", bulk.text);
    assert_eq!(alice.get("/notes/_design/rules").await.status, 403);
    let fine = alice.put("/notes/z", json!({"_access": ["alice"]})).await;
    assert_eq!(fine.status, 201, "{}", fine.text);
}

/// The ids of a `_find` answer.
fn found_ids(reply: &Value) -> Vec<String> {
    reply["docs"]
        .as_array()
        .unwrap_or_else(|| panic!("no docs: {reply}"))
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

/// Every page of a `_find`, following its bookmarks.
async fn all_pages(client: &Client, query: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    let mut query = query.clone();
    loop {
        let reply = client.post("/notes/_find", query.clone()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let reply = reply.json();
        let page = found_ids(&reply);
        if page.is_empty() {
            return ids;
        }
        ids.extend(page);
        query["bookmark"] = reply["bookmark"].clone();
    }
}

#[tokio::test]
async fn a_find_costs_the_readers_documents_not_what_others_hold_in_the_index() {
    let (_data, server) = notes("one-door-find").await;
    let admin = Client::new(&server);
    let alice = as_user(&server, "alice");
    let mut docs = Vec::new();
    for i in 0..12 {
        // Some of hers repeat a value, and one lacks the field.
        docs.push(
            json!({"_id": format!("a{i:02}"), "_access": ["alice"], "n": (i * 7) % 5, "m": i}),
        );
    }
    docs.push(json!({"_id": "a-none", "_access": ["alice"], "other": 1}));
    for i in 0..5_000 {
        docs.push(json!({"_id": format!("b{i:05}"), "_access": ["bob"], "n": i % 5, "k": i}));
    }
    for chunk in docs.chunks(5_000) {
        let written = admin
            .post("/notes/_bulk_docs", json!({"docs": chunk}))
            .await;
        assert_eq!(written.status, 201);
    }
    for (name, field) in [("by-n", "n"), ("by-m", "m")] {
        let index = json!({"index": {"fields": [field]}, "name": name, "ddoc": name});
        assert_eq!(admin.post("/notes/_index", index).await.status, 200);
    }
    // Built by the admin's queries, which read the index's rows.
    let warm = json!({"selector": {"n": {"$gte": 0}}, "use_index": "by-n", "limit": 1});
    assert_eq!(admin.post("/notes/_find", warm).await.status, 200);
    let warm = json!({"selector": {"m": {"$gte": 0}}, "use_index": "by-m", "limit": 1});
    assert_eq!(admin.post("/notes/_find", warm).await.status, 200);

    // The same answers as the index gives, in the index's order, paged.
    for query in [
        json!({"selector": {"n": {"$gte": 1}}, "use_index": "by-n"}),
        json!({"selector": {"n": {"$gte": 0}}, "sort": [{"n": "desc"}], "use_index": "by-n"}),
        json!({"selector": {"n": {"$gt": 0, "$lt": 4}}, "limit": 2, "use_index": "by-n"}),
        json!({"selector": {"n": {"$gte": 0}}, "skip": 3, "limit": 4, "use_index": "by-n"}),
    ] {
        let everyone = all_pages(&admin, &query).await;
        let hers: Vec<String> = everyone
            .into_iter()
            .filter(|id| id.starts_with('a'))
            .collect();
        if query.get("skip").is_none() {
            assert_eq!(all_pages(&alice, &query).await, hers, "{query}");
        } else {
            // A skip applies to each page: compare the first.
            let mut whole = query.clone();
            whole.as_object_mut().unwrap().remove("skip");
            whole.as_object_mut().unwrap().remove("limit");
            let hers: Vec<String> = all_pages(&admin, &whole)
                .await
                .into_iter()
                .filter(|id| id.starts_with('a'))
                .skip(3)
                .take(4)
                .collect();
            let first = alice.post("/notes/_find", query.clone()).await.json();
            assert_eq!(found_ids(&first), hers, "{query}");
        }
    }

    // What bob holds in an index does not show in alice's time: her query
    // on `n` (5,000 of bob's rows) against one on `m` (none of his).
    let timed = |query: Value| {
        let alice = alice.clone();
        async move {
            let mut times = Vec::new();
            for _ in 0..7 {
                let started = std::time::Instant::now();
                let reply = alice.post("/notes/_find", query.clone()).await;
                times.push(started.elapsed());
                assert_eq!(found_ids(&reply.json()).len(), 12);
            }
            times.sort();
            times[times.len() / 2]
        }
    };
    let crowded = timed(json!({"selector": {"n": {"$gte": 0}}, "use_index": "by-n"})).await;
    let empty = timed(json!({"selector": {"m": {"$gte": 0}}, "use_index": "by-m"})).await;
    // Reading bob's rows took tens of times her own; her own documents
    // cost a few milliseconds either way. A factor of 5 leaves room for a
    // loaded machine and none for 5,000 rows.
    assert!(
        crowded < empty * 5 + std::time::Duration::from_millis(20),
        "crowded {crowded:?}, empty {empty:?}"
    );
}
