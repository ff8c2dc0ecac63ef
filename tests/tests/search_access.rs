//! Search through the side doors and across crashes: in a database with
//! per-document access a user's search finds, counts and returns only
//! the documents naming them (and forgets one they lose); the search
//! routes of `_users` and `_replicator` are for admins; an index survives
//! SIGKILL of the server and resumes from its last commit, and one whose
//! files are damaged is built again.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::users::{FAST_PASSWORDS as FAST, add_user, as_user};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// An index of every document's `kind` (a string, counted) and `text`.
fn ddoc() -> Value {
    json!({
        "nouveau": {"all": {"index": "function (doc) {
            index('string', 'kind', doc.kind, {store: true});
            index('text', 'text', doc.text);
        }"}},
        "indexes": {"all": {"index": "function (doc) {
            index('kind', doc.kind, {store: true, facet: true});
            index('text', doc.text);
        }"}},
    })
}

fn sorted_ids(results: &Value) -> Vec<String> {
    let mut ids: Vec<String> = results["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {results}"))
        .iter()
        .map(|hit| hit["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_users_search_sees_only_documents_naming_them() {
    let data = TempDir::new("search-access");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    add_user(&admin, "alice", json!(["team"])).await;
    add_user(&admin, "bob", json!([])).await;
    assert_eq!(admin.put("/db?access=true", json!(null)).await.status, 201);
    let security = json!({"members": {"names": ["alice", "bob"]}});
    assert_eq!(admin.put("/db/_security", security).await.status, 200);
    let docs = json!({"docs": [
        {"_id": "a1", "_access": ["alice"], "kind": "note", "text": "secret plans"},
        {"_id": "b1", "_access": ["bob"], "kind": "note", "text": "secret plans of bob"},
        {"_id": "b2", "_access": ["bob"], "kind": "memo", "text": "more secret plans"},
        {"_id": "ab", "_access": ["alice", "bob"], "kind": "memo", "text": "shared secret"},
        {"_id": "t1", "_access": ["team"], "kind": "task", "text": "team secret"},
        {"_id": "x1", "kind": "admin", "text": "admins only secret"},
    ]});
    assert_eq!(admin.post("/db/_bulk_docs", docs).await.status, 201);
    assert_eq!(admin.put("/db/_design/s", ddoc()).await.status, 201);

    let query = json!({"q": "text:secret", "counts": ["kind"], "include_docs": true});
    let everything = admin
        .post("/db/_design/s/_nouveau/all", query.clone())
        .await;
    assert_eq!(everything.status, 200, "{}", everything.text);
    assert_eq!(everything.json()["total_hits"], 6);

    let alice = as_user(&server, "alice");
    let found = alice
        .post("/db/_design/s/_nouveau/all", query.clone())
        .await;
    assert_eq!(found.status, 200, "{}", found.text);
    let found = found.json();
    assert_eq!(sorted_ids(&found), ["a1", "ab", "t1"], "{found}");
    assert_eq!(found["total_hits"], 3, "totals count only her documents");
    assert_eq!(
        found["counts"],
        json!({"kind": {"memo": 1, "note": 1, "task": 1}}),
        "counts see only her documents"
    );
    for hit in found["hits"].as_array().unwrap() {
        assert_eq!(hit["doc"]["_id"], hit["id"], "{hit}");
    }
    let bob = as_user(&server, "bob");
    let by_get = bob
        .get("/db/_design/s/_nouveau/all?q=kind:memo&include_docs=true")
        .await;
    assert_eq!(by_get.status, 200, "{}", by_get.text);
    assert_eq!(sorted_ids(&by_get.json()), ["ab", "b2"]);

    // Clouseau's API answers from the same rule.
    let clouseau = alice
        .get("/db/_design/s/_search/all?q=text:secret&counts=%5B%22kind%22%5D&include_docs=true")
        .await;
    assert_eq!(clouseau.status, 200, "{}", clouseau.text);
    let clouseau = clouseau.json();
    assert_eq!(clouseau["total_rows"], 3, "{clouseau}");
    let mut rows: Vec<&str> = clouseau["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    rows.sort_unstable();
    assert_eq!(rows, ["a1", "ab", "t1"]);
    assert_eq!(
        clouseau["counts"],
        json!({"kind": {"memo": 1, "note": 1, "task": 1}})
    );

    // Mango's `$text` too.
    let made = admin
        .post(
            "/db/_index",
            json!({"type": "nouveau", "name": "words",
                   "index": {"fields": [{"name": "text", "type": "text"}]}}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let mango = alice
        .post("/db/_find", json!({"selector": {"$text": "secret"}}))
        .await;
    assert_eq!(mango.status, 200, "{}", mango.text);
    let mut mango_ids: Vec<String> = mango.json()["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect();
    mango_ids.sort_unstable();
    assert_eq!(mango_ids, ["a1", "ab", "t1"]);

    // Taken off `ab`, alice no longer finds it; bob still does.
    let ab = admin.get("/db/ab").await.json();
    let mut edited = ab.clone();
    edited["_access"] = json!(["bob"]);
    assert_eq!(admin.put("/db/ab", edited).await.status, 201);
    let after = alice
        .post("/db/_design/s/_nouveau/all", query.clone())
        .await
        .json();
    assert_eq!(sorted_ids(&after), ["a1", "t1"], "{after}");
    let bobs = bob.post("/db/_design/s/_nouveau/all", query).await.json();
    assert_eq!(sorted_ids(&bobs), ["ab", "b1", "b2"], "{bobs}");

    // Paging stays inside her documents.
    let page = alice
        .post(
            "/db/_design/s/_nouveau/all",
            json!({"q": "*:*", "limit": 1}),
        )
        .await
        .json();
    let rest = alice
        .post(
            "/db/_design/s/_nouveau/all",
            json!({"q": "*:*", "limit": 10, "bookmark": page["bookmark"]}),
        )
        .await
        .json();
    let mut seen = sorted_ids(&page);
    seen.extend(sorted_ids(&rest));
    seen.sort();
    assert_eq!(seen, ["a1", "t1"]);

    // The index's own routes are for admins, as views are.
    let info = alice.get("/db/_design/s/_nouveau_info/all").await;
    assert_eq!(info.status, 403, "{}", info.text);
    let cleanup = alice.post("/db/_nouveau_cleanup", json!({})).await;
    assert_eq!(cleanup.status, 403, "{}", cleanup.text);
}

#[tokio::test]
async fn searches_of_users_and_replicator_databases_are_for_admins() {
    let data = TempDir::new("search-system-dbs");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    add_user(&admin, "mallory", json!([])).await;
    let users_index = json!({"nouveau": {"u": {"index": "function (doc) {
        index('string', 'name', doc.name || '', {store: true});
        index('stored', 'hash', doc.derived_key || '');
    }"}}});
    assert_eq!(
        admin.put("/_users/_design/s", users_index).await.status,
        201
    );
    let found = admin.get("/_users/_design/s/_nouveau/u?q=*:*").await;
    assert_eq!(found.status, 200, "{}", found.text);
    assert_eq!(found.json()["total_hits"], 1);

    let mallory = as_user(&server, "mallory");
    for path in [
        "/_users/_design/s/_nouveau/u?q=*:*",
        "/_users/_design/s/_nouveau_info/u",
    ] {
        let refused = mallory.get(path).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.text);
        assert!(!refused.text.contains("derived"), "{}", refused.text);
    }
    let posted = mallory
        .post("/_users/_design/s/_nouveau/u", json!({"q": "*:*"}))
        .await;
    assert_eq!(posted.status, 403, "{}", posted.text);

    let replicator_index = json!({"nouveau": {"r": {"index": "function (doc) {
        index('stored', 'source', JSON.stringify(doc.source || ''));
    }"}}});
    assert_eq!(
        admin
            .put("/_replicator/_design/s", replicator_index)
            .await
            .status,
        201
    );
    let refused = mallory.get("/_replicator/_design/s/_nouveau/r?q=*:*").await;
    assert_eq!(refused.status, 403, "{}", refused.text);
}

async fn total(c: &Client, q: &str) -> Value {
    let reply = c
        .post("/db/_design/s/_nouveau/all", json!({"q": q, "limit": 200}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["total_hits"].clone()
}

#[tokio::test]
async fn an_index_survives_sigkill_and_damaged_files() {
    let data = TempDir::new("search-crash");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(admin.put("/db", json!({})).await.status, 201);
    assert_eq!(admin.put("/db/_design/s", ddoc()).await.status, 201);
    let batch = |from: usize, to: usize| {
        json!({"docs": (from..to).map(|i| json!({
            "_id": format!("d{i:04}"),
            "kind": if i % 2 == 0 { "even" } else { "odd" },
            "text": format!("number {i} lives here"),
        })).collect::<Vec<_>>()})
    };
    assert_eq!(
        admin.post("/db/_bulk_docs", batch(0, 300)).await.status,
        201
    );
    assert_eq!(total(&admin, "*:*").await, 300);
    // Written after the index's last commit, then SIGKILL.
    assert_eq!(
        admin.post("/db/_bulk_docs", batch(300, 400)).await.status,
        201
    );
    let gone = admin.get("/db/d0001").await.json();
    let deleted = admin
        .delete(&format!("/db/d0001?rev={}", gone["_rev"].as_str().unwrap()))
        .await;
    assert_eq!(deleted.status, 200);
    drop(server);

    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(total(&admin, "*:*").await, 399);
    assert_eq!(total(&admin, "kind:odd").await, 199);
    assert_eq!(total(&admin, "text:number AND text:399").await, 1);
    drop(server);

    // Damaged files: the index is built again from the database.
    let mut damaged = 0;
    for entry in walk(data.path()) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        let in_search_index = entry
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|p| p.to_string_lossy().starts_with("search-"));
        if in_search_index && name == "meta.json" {
            std::fs::write(&entry, b"{ not json").unwrap();
            damaged += 1;
        }
    }
    assert_eq!(damaged, 1, "one search index on disk");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(total(&admin, "*:*").await, 399);
    assert_eq!(total(&admin, "kind:even").await, 200);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
