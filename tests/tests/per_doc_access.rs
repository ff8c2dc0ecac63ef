//! One database, many users: a database created with `?access=true`,
//! where each document is for the users its `_access` names (by name or
//! role) and for admins. Every route a user may take is tried by each
//! role; a document a user may not read answers exactly as one that does
//! not exist; replication (by a user, by an admin, between two servers)
//! moves exactly what the rule allows.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

/// Fewer PBKDF2 rounds than the default, so logins are quick in tests.
const FAST: (&str, &str) = ("RECLINER_PASSWORD_ITERATIONS", "1000");
const PASSWORD: &str = "a-long-enough-password";

fn as_user(server: &TestServer, name: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{PASSWORD}@"), 1),
    )
}

/// A server with users alice (role `team`), bob, carol (role `team`) and
/// dave (database admin of `db`), and `db` with per-document access and
/// its documents: one per user, one shared by alice and bob, one for the
/// team, one for admins only.
async fn setup(data: &TempDir) -> (TestServer, Client) {
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    for (name, roles) in [
        ("alice", json!(["team"])),
        ("bob", json!([])),
        ("carol", json!(["team"])),
        ("dave", json!([])),
        ("eve", json!([])),
    ] {
        let created = admin
            .put(
                &format!("/_users/org.couchdb.user:{name}"),
                json!({"name": name, "password": PASSWORD, "roles": roles, "type": "user"}),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.text);
    }
    assert_eq!(admin.put("/db?access=true", json!(null)).await.status, 201);
    let security = json!({
        "members": {"names": ["alice", "bob", "carol"]},
        "admins": {"names": ["dave"]},
    });
    assert_eq!(admin.put("/db/_security", security).await.status, 200);
    let docs = json!({"docs": [
        {"_id": "a1", "_access": ["alice"], "v": "a"},
        {"_id": "b1", "_access": ["bob"], "v": "b"},
        {"_id": "c1", "_access": ["carol"], "v": "c"},
        {"_id": "ab", "_access": ["alice", "bob"], "v": "ab"},
        {"_id": "team", "_access": ["team"], "v": "team"},
        {"_id": "admins", "v": "x"},
    ]});
    assert_eq!(admin.post("/db/_bulk_docs", docs).await.status, 201);
    (server, admin)
}

async fn rev_of(admin: &Client, id: &str) -> String {
    admin.get(&format!("/db/{id}")).await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string()
}

fn ids(rows: &Value) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn creating_a_database_with_per_document_access() {
    let data = TempDir::new("access-create");
    let server = TestServer::start_with_env(data.path(), &[], &[FAST]);
    let admin = Client::new(&server);
    let refused = admin.put("/x?access=yes", json!(null)).await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json(),
        json!({"error": "bad_request", "reason": "The `access` value should be a boolean."})
    );
    assert_eq!(admin.put("/x?access=true", json!(null)).await.status, 201);
    assert_eq!(
        admin.get("/x").await.json()["props"],
        json!({"access": true})
    );
    assert_eq!(admin.put("/y?access=false", json!(null)).await.status, 201);
    assert_eq!(admin.get("/y").await.json()["props"], json!({}));
    assert!(
        admin.get("/").await.json()["features"]
            .as_array()
            .unwrap()
            .contains(&json!("access-ready"))
    );
    // Fixed for the database's life: a restart keeps it.
    server.stop();
    let server = TestServer::start_with_env(data.path(), &[], &[FAST]);
    let admin = Client::new(&server);
    assert_eq!(
        admin.get("/x").await.json()["props"],
        json!({"access": true})
    );
    // Design documents may not name readers, whoever writes them.
    let ddoc = admin
        .put("/x/_design/app", json!({"_access": ["alice"], "views": {}}))
        .await;
    assert_eq!(ddoc.status, 403, "{}", ddoc.text);
    assert_eq!(
        ddoc.json(),
        json!({"error": "ddocs_with_access", "reason": "Design Docs with an _access property are not allowed"})
    );
}

#[tokio::test]
async fn users_read_only_what_names_them_on_every_route() {
    let data = TempDir::new("access-reads");
    let (server, admin) = setup(&data).await;
    let alice = as_user(&server, "alice");
    let bob = as_user(&server, "bob");

    // Documents: a missing one and another's answer the same.
    for id in ["b1", "c1", "admins", "never-written"] {
        let got = alice.get(&format!("/db/{id}")).await;
        assert_eq!(got.status, 404, "{id}: {}", got.text);
        assert_eq!(
            got.json(),
            json!({"error": "not_found", "reason": "missing"})
        );
        let head = alice.send("HEAD", &format!("/db/{id}"), None, &[]).await;
        assert_eq!(head.status, 404);
        let revs = alice.get(&format!("/db/{id}?open_revs=all")).await;
        assert_eq!(revs.status, 404, "{id}: {}", revs.text);
    }
    let b1_rev = rev_of(&admin, "b1").await;
    let asked = alice.get(&format!("/db/b1?rev={b1_rev}")).await;
    assert_eq!(asked.status, 404);
    assert_eq!(alice.get("/db/a1").await.json()["v"], "a");
    // Through a role.
    assert_eq!(alice.get("/db/team").await.json()["v"], "team");
    assert_eq!(bob.get("/db/team").await.status, 404);

    // `_all_docs`: only theirs, counted on their own.
    let all = alice.get("/db/_all_docs").await.json();
    assert_eq!(ids(&all["rows"]), ["a1", "ab", "team"]);
    assert_eq!(all["total_rows"], 3);
    let page = alice
        .get("/db/_all_docs?startkey=%22ab%22&limit=1")
        .await
        .json();
    assert_eq!(page["offset"], 1);
    assert_eq!(ids(&page["rows"]), ["ab"]);
    let keyed = alice
        .post("/db/_all_docs", json!({"keys": ["a1", "b1", "nope"]}))
        .await
        .json();
    assert_eq!(keyed["rows"][0]["id"], "a1");
    assert_eq!(keyed["rows"][1], json!({"key": "b1", "error": "not_found"}));
    assert_eq!(
        keyed["rows"][2],
        json!({"key": "nope", "error": "not_found"})
    );
    let with_docs = bob.get("/db/_all_docs?include_docs=true").await.json();
    assert_eq!(ids(&with_docs["rows"]), ["ab", "b1"]);

    // `_changes`, in each feed style.
    let feed = alice.get("/db/_changes").await.json();
    assert_eq!(ids(&feed["results"]), ["a1", "ab", "team"]);
    let longpoll = alice
        .get("/db/_changes?feed=longpoll&timeout=100")
        .await
        .json();
    assert_eq!(ids(&longpoll["results"]), ["a1", "ab", "team"]);
    let continuous = alice.get("/db/_changes?feed=continuous&timeout=100").await;
    let lines: Vec<Value> = continuous
        .text
        .lines()
        .filter(|l| l.contains("\"id\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ids(&Value::Array(lines)), ["a1", "ab", "team"]);
    let by_id = alice
        .post(
            "/db/_changes?filter=_doc_ids",
            json!({"doc_ids": ["a1", "b1", "admins"]}),
        )
        .await
        .json();
    assert_eq!(ids(&by_id["results"]), ["a1"]);
    let selected = alice
        .post(
            "/db/_changes?filter=_selector",
            json!({"selector": {"v": {"$gt": ""}}}),
        )
        .await
        .json();
    assert_eq!(ids(&selected["results"]), ["a1", "ab", "team"]);
    // `since` is honoured: a later change of someone else's is not seen.
    let since = feed["last_seq"].as_str().unwrap().to_string();
    let c1_rev = rev_of(&admin, "c1").await;
    let edited = admin
        .put(
            "/db/c1",
            json!({"_rev": c1_rev, "_access": ["carol"], "v": "c2"}),
        )
        .await;
    assert_eq!(edited.status, 201);
    let later = alice
        .get(&format!("/db/_changes?since={since}"))
        .await
        .json();
    assert_eq!(later["results"], json!([]));

    // `_bulk_get`: not found, as for a missing document.
    let bulk = alice
        .post(
            "/db/_bulk_get",
            json!({"docs": [{"id": "b1", "rev": b1_rev}, {"id": "b1"}, {"id": "a1"}]}),
        )
        .await
        .json();
    let results = bulk["results"].as_array().unwrap();
    assert_eq!(results[0]["docs"][0]["error"]["error"], "not_found");
    assert_eq!(results[1]["docs"][0]["error"]["error"], "not_found");
    assert_eq!(results[2]["docs"][0]["ok"]["_id"], "a1");

    // `_revs_diff`: another's revisions are missing, with no ancestors.
    let diff = alice
        .post("/db/_revs_diff", json!({"b1": [b1_rev]}))
        .await
        .json();
    assert_eq!(diff, json!({"b1": {"missing": [b1_rev]}}));

    // `_find`: only theirs, with an index or without.
    let found = alice
        .post("/db/_find", json!({"selector": {"v": {"$exists": true}}}))
        .await
        .json();
    assert_eq!(
        ids(&Value::Array(
            found["docs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| json!({"id": d["_id"]}))
                .collect()
        )),
        ["a1", "ab", "team"]
    );
    let index = admin
        .post(
            "/db/_index",
            json!({"index": {"fields": ["v"]}, "name": "by-v"}),
        )
        .await;
    assert_eq!(index.status, 200, "{}", index.text);
    let indexed = bob
        .post(
            "/db/_find",
            json!({"selector": {"v": {"$gt": ""}}, "fields": ["_id", "v"], "use_index": "by-v"}),
        )
        .await
        .json();
    let found_ids: Vec<&str> = indexed["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap())
        .collect();
    assert_eq!(found_ids, ["ab", "b1"], "{indexed}");
    // Its statistics count only what the user may read.
    let stats = bob
        .post(
            "/db/_find",
            json!({"selector": {"v": {"$gt": ""}}, "use_index": "by-v", "execution_stats": true}),
        )
        .await
        .json();
    assert_eq!(
        stats["execution_stats"]["total_keys_examined"], 2,
        "{stats}"
    );
    assert_eq!(
        stats["execution_stats"]["total_docs_examined"], 2,
        "{stats}"
    );
    // The index itself holds every document (the admin's query sees all).
    let everything = admin
        .post(
            "/db/_find",
            json!({"selector": {"v": {"$gt": ""}}, "use_index": "by-v"}),
        )
        .await
        .json();
    assert_eq!(everything["docs"].as_array().unwrap().len(), 6);

    // Attachments follow their document.
    let a1_rev = rev_of(&admin, "a1").await;
    let att = admin
        .send_bytes(
            "PUT",
            &format!("/db/a1/note.txt?rev={a1_rev}"),
            b"alice's".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(att.status, 201, "{}", att.text);
    assert_eq!(alice.get("/db/a1/note.txt").await.text, "alice's");
    let peek = bob.get("/db/a1/note.txt").await;
    assert_eq!(peek.status, 404);
    assert_eq!(
        peek.json(),
        json!({"error": "not_found", "reason": "missing"})
    );
}

#[tokio::test]
async fn users_write_only_documents_that_keep_naming_them() {
    let data = TempDir::new("access-writes");
    let (server, admin) = setup(&data).await;
    let alice = as_user(&server, "alice");
    let bob = as_user(&server, "bob");
    let refused = json!({"error": "forbidden", "reason": "access"});

    // New documents must name the writer (or a role they hold).
    assert_eq!(
        alice
            .put("/db/mine", json!({"_access": ["alice"]}))
            .await
            .status,
        201
    );
    assert_eq!(
        alice
            .put("/db/ours", json!({"_access": ["team"]}))
            .await
            .status,
        201
    );
    for body in [
        json!({"_access": ["bob"]}),
        json!({"x": 1}),
        json!({"_access": []}),
    ] {
        let denied = alice.put("/db/not-mine", body).await;
        assert_eq!(denied.status, 403, "{}", denied.text);
        assert_eq!(denied.json(), refused);
    }
    let malformed = alice.put("/db/odd", json!({"_access": "alice"})).await;
    assert_eq!(malformed.status, 400, "{}", malformed.text);
    // Another's document, existing or not, cannot be written over.
    let b1_rev = rev_of(&admin, "b1").await;
    let over = alice
        .put(
            "/db/b1",
            json!({"_rev": b1_rev, "_access": ["alice", "bob"]}),
        )
        .await;
    // With a revision, answered as for an id nobody wrote: a conflict
    // (a different answer would tell which ids exist).
    assert_eq!(over.status, 409, "{}", over.text);
    assert_eq!(over.json()["error"], "conflict");
    let recreate = alice.put("/db/b1", json!({"_access": ["alice"]})).await;
    assert_eq!(recreate.status, 403);
    // Deleting opens the document first: as a missing one.
    let deleted = alice.delete(&format!("/db/b1?rev={b1_rev}")).await;
    assert_eq!(deleted.status, 404);
    // A shared document: edited by either; neither may take themselves off.
    let ab_rev = rev_of(&admin, "ab").await;
    let edit = bob
        .put(
            "/db/ab",
            json!({"_rev": ab_rev, "_access": ["alice", "bob"], "v": 2}),
        )
        .await;
    assert_eq!(edit.status, 201, "{}", edit.text);
    let ab_rev = edit.json()["rev"].as_str().unwrap().to_string();
    let leave = bob
        .put(
            "/db/ab",
            json!({"_rev": ab_rev, "_access": ["alice"], "v": 3}),
        )
        .await;
    assert_eq!(leave.status, 403);
    let drop = bob.put("/db/ab", json!({"_rev": ab_rev, "v": 3})).await;
    assert_eq!(drop.status, 403);
    // A deletion keeps the readers: both see it go.
    let gone = bob.delete(&format!("/db/ab?rev={ab_rev}")).await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    let feed = alice.get("/db/_changes").await.json();
    let row = feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "ab")
        .cloned()
        .unwrap();
    assert_eq!(row["deleted"], true);

    // `_bulk_docs`: refused per row, interactive and replicated.
    let results = alice
        .post(
            "/db/_bulk_docs",
            json!({"docs": [
                {"_id": "bulk-mine", "_access": ["alice"]},
                {"_id": "bulk-bob", "_access": ["bob"]},
            ]}),
        )
        .await
        .json();
    assert!(results[0]["ok"] == true, "{results}");
    assert_eq!(results[1]["error"], "forbidden");
    assert_eq!(results[1]["reason"], "access");
    let replicated = alice
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [
                {"_id": "rep-bob", "_rev": "1-abc", "_access": ["bob"]},
                {"_id": "rep-mine", "_rev": "1-abc", "_access": ["alice"]},
            ]}),
        )
        .await;
    assert_eq!(replicated.status, 201);
    let rows = replicated.json();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], "rep-bob");
    assert_eq!(rows[0]["error"], "forbidden");
    assert_eq!(admin.get("/db/rep-mine").await.status, 200);
    assert_eq!(admin.get("/db/rep-bob").await.status, 404);

    // Admins of the database and of the server write any `_access`.
    let dave = as_user(&server, "dave");
    assert_eq!(
        dave.put("/db/for-bob", json!({"_access": ["bob"]}))
            .await
            .status,
        201
    );
    assert_eq!(
        admin
            .put("/db/for-carol", json!({"_access": ["carol"]}))
            .await
            .status,
        201
    );
    assert_eq!(dave.get("/db/b1").await.status, 200);

    // Local documents (checkpoints) name their writer and are theirs.
    let local = alice.put("/db/_local/cp", json!({"seq": 1})).await;
    assert_eq!(local.status, 201, "{}", local.text);
    assert_eq!(
        admin.get("/db/_local/cp").await.json()["_access"],
        json!(["alice"])
    );
    assert_eq!(alice.get("/db/_local/cp").await.json()["seq"], 1);
    assert_eq!(bob.get("/db/_local/cp").await.status, 404);
    let taken = bob.put("/db/_local/cp", json!({"seq": 9})).await;
    assert_eq!(taken.status, 403);
    assert_eq!(bob.delete("/db/_local/cp").await.status, 403);
    assert_eq!(admin.get("/db/_local/cp").await.json()["seq"], 1);
}

#[tokio::test]
async fn design_functions_and_listings_are_for_admins() {
    let data = TempDir::new("access-design");
    let (server, admin) = setup(&data).await;
    let ddoc = json!({
        "views": {"all": {"map": "function (doc) { emit(doc._id, doc.v); }"}},
        "shows": {"s": "function (doc) { return 'x'; }"},
        "updates": {"u": "function (doc, req) { return [null, 'x']; }"},
        "filters": {"f": "function (doc) { return true; }"},
    });
    assert_eq!(admin.put("/db/_design/app", ddoc).await.status, 201);
    let alice = as_user(&server, "alice");
    let denied = json!({"error": "forbidden", "reason": "access denied"});
    for (method, path) in [
        ("GET", "/db/_design/app"),
        ("GET", "/db/_design/app/_view/all"),
        ("GET", "/db/_design/app/_show/s/a1"),
        ("POST", "/db/_design/app/_update/u"),
        ("GET", "/db/_design/app/_info"),
        ("GET", "/db/_design_docs"),
        ("GET", "/db/_local_docs"),
    ] {
        let reply = alice.send(method, path, None, &[]).await;
        assert_eq!(reply.status, 403, "{method} {path}: {}", reply.text);
        assert_eq!(reply.json(), denied, "{method} {path}");
    }
    let filtered = alice.get("/db/_changes?filter=app/f").await;
    assert_eq!(filtered.status, 403, "{}", filtered.text);
    // Anonymous callers are asked to log in; outsiders are refused.
    let anonymous = Client::anonymous(&server);
    assert_eq!(anonymous.get("/db/a1").await.status, 401);
    assert_eq!(anonymous.get("/db/_design/app").await.status, 401);
    let eve = as_user(&server, "eve");
    assert_eq!(eve.get("/db/_all_docs").await.status, 403);
    // The database admin runs them.
    let dave = as_user(&server, "dave");
    let view = dave.get("/db/_design/app/_view/all").await;
    assert_eq!(view.status, 200, "{}", view.text);
    assert_eq!(view.json()["total_rows"], 6);
}

#[tokio::test]
async fn revocation_reaches_the_user_as_a_tombstone_that_never_comes_back() {
    let data = TempDir::new("access-revoke");
    let (server, admin) = setup(&data).await;
    let bob = as_user(&server, "bob");
    let before = bob.get("/db/_changes").await.json()["last_seq"].clone();
    let ab_rev = rev_of(&admin, "ab").await;
    let revoked = admin
        .put(
            "/db/ab",
            json!({"_rev": ab_rev, "_access": ["alice"], "v": "alice's now"}),
        )
        .await;
    assert_eq!(revoked.status, 201);
    let feed = bob
        .get(&format!(
            "/db/_changes?since={}&style=all_docs&include_docs=true",
            before.as_str().unwrap()
        ))
        .await
        .json();
    let rows = feed["results"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{feed}");
    assert_eq!(rows[0]["id"], "ab");
    assert_eq!(rows[0]["deleted"], true);
    assert_eq!(rows[0]["removed"], true);
    let tombstone = rows[0]["changes"][0]["rev"].as_str().unwrap().to_string();
    assert!(tombstone.starts_with("2-"), "{tombstone}");
    assert_eq!(
        rows[0]["doc"],
        json!({"_id": "ab", "_rev": tombstone, "_deleted": true})
    );
    // Nothing of the new revision shows.
    assert!(!feed.to_string().contains("alice's now"));
    let served = bob
        .get(&format!("/db/ab?rev={tombstone}&revs=true"))
        .await
        .json();
    assert_eq!(served["_deleted"], true);
    assert_eq!(
        served["_revisions"]["ids"][1],
        ab_rev.split_once('-').unwrap().1
    );
    assert_eq!(bob.get("/db/ab").await.status, 404);
    // The user's replica holds it: `_revs_diff` says so; sent back anyway,
    // it is answered and dropped.
    let diff = bob
        .post("/db/_revs_diff", json!({"ab": [tombstone]}))
        .await
        .json();
    assert_eq!(diff, json!({}));
    let back = bob
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [{
                "_id": "ab", "_rev": tombstone, "_deleted": true,
                "_revisions": {"start": 2, "ids": [tombstone.split_once('-').unwrap().1, ab_rev.split_once('-').unwrap().1]},
            }]}),
        )
        .await;
    assert_eq!(back.status, 201);
    assert_eq!(back.json(), json!([]));
    let leaves = admin
        .send(
            "GET",
            "/db/ab?open_revs=all",
            None,
            &[("accept", "application/json")],
        )
        .await
        .json();
    assert_eq!(leaves.as_array().unwrap().len(), 1, "{leaves}");
    assert_eq!(leaves[0]["ok"]["_rev"], revoked.json()["rev"]);
}

#[tokio::test]
async fn replication_moves_exactly_what_the_rule_allows() {
    let data = TempDir::new("access-replication");
    let (server, admin) = setup(&data).await;
    // A user replicating from it gets theirs; into it, others' are write
    // failures.
    assert_eq!(admin.put("/bob-copy", json!(null)).await.status, 201);
    assert_eq!(
        admin
            .put(
                "/bob-copy/_security",
                json!({"members": {"names": ["bob"]}})
            )
            .await
            .status,
        200
    );
    let bob = as_user(&server, "bob");
    let pulled = bob
        .post("/_replicate", json!({"source": "db", "target": "bob-copy"}))
        .await;
    assert_eq!(pulled.status, 200, "{}", pulled.text);
    let copied = admin.get("/bob-copy/_all_docs").await.json();
    assert_eq!(ids(&copied["rows"]), ["ab", "b1"]);
    let checkpoint = pulled.json()["session_id"].clone();
    assert!(checkpoint.is_string());
    assert_eq!(
        admin
            .post(
                "/bob-copy/_bulk_docs",
                json!({"docs": [{"_id": "sneak", "_access": ["alice"]}, {"_id": "ok", "_access": ["bob"]}]})
            )
            .await
            .status,
        201
    );
    let pushed = bob
        .post("/_replicate", json!({"source": "bob-copy", "target": "db"}))
        .await;
    assert_eq!(pushed.status, 200, "{}", pushed.text);
    let history = &pushed.json()["history"][0];
    assert_eq!(history["doc_write_failures"], 1, "{history}");
    assert_eq!(admin.get("/db/ok").await.status, 200);
    assert_eq!(admin.get("/db/sneak").await.status, 404);
    // Checkpoints written as bob name him.
    let locals = admin.get("/db/_local_docs?include_docs=true").await.json();
    assert!(
        locals["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["doc"]["_access"] == json!(["bob"])),
        "{locals}"
    );

    // An admin's replication to a second server copies everything, with
    // `_access` intact; the target made with `?access=true` keeps the rule.
    let other_data = TempDir::new("access-replication-2");
    let other = TestServer::start_with_env(other_data.path(), &["--log-level", "warn"], &[FAST]);
    let other_admin = Client::new(&other);
    assert_eq!(
        other_admin.put("/db?access=true", json!(null)).await.status,
        201
    );
    let target = format!("{}/db", other.url);
    let copied = admin
        .post("/_replicate", json!({"source": "db", "target": target}))
        .await;
    assert_eq!(copied.status, 200, "{}", copied.text);
    recliner_tests::compare_dbs(&admin, "db", &other_admin, "db").await;
    assert_eq!(
        other_admin.get("/db/c1").await.json()["_access"],
        json!(["carol"])
    );
    let back = format!("{}/db", server.url);
    let round = other_admin
        .post("/_replicate", json!({"source": "db", "target": back}))
        .await;
    assert_eq!(round.status, 200, "{}", round.text);
    assert!(
        eventually(5, async || other_admin.get("/db").await.json()["doc_count"]
            == admin.get("/db").await.json()["doc_count"])
        .await
    );
}
