//! The doors beside the front door: the replicator, `_users`, `_replicator`
//! and design functions let a user do nothing a plain request would
//! forbid. Each test is a hole found by attacking the server as a user
//! (`_users` and `_replicator` opened to users as CouchDB's documentation
//! describes for servers shared by many users).

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

const TEST_ADMIN: (&str, &str) = ("RECLINER_ADMIN", "admin:test-secret");

fn as_user(server: &TestServer, name: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{name}-pw@"), 1),
    )
}

/// A server with users `bob`, `ann` and `carol`; `_users` and
/// `_replicator` open to bob and ann; `secret` (carol's only, holding a
/// document), `bobs` (bob's) and `locked` (carol's, empty).
async fn shared_server(label: &str) -> (TempDir, TestServer) {
    let data = TempDir::new(label);
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_USERS_DB_SECURITY_EDITABLE", "true"), TEST_ADMIN],
    );
    let admin = Client::new(&server);
    for name in ["bob", "ann", "carol"] {
        let user =
            json!({"name": name, "password": format!("{name}-pw"), "roles": [], "type": "user"});
        let created = admin
            .put(&format!("/_users/org.couchdb.user:{name}"), user)
            .await;
        assert_eq!(created.status, 201, "{}", created.text);
    }
    let open = json!({"members": {"names": ["bob", "ann"]}, "admins": {}});
    for db in ["_users", "_replicator"] {
        let set = admin.put(&format!("/{db}/_security"), open.clone()).await;
        assert_eq!(set.status, 200, "{db}: {}", set.text);
    }
    for (db, members) in [("secret", "carol"), ("bobs", "bob"), ("locked", "carol")] {
        assert_eq!(admin.put(&format!("/{db}"), json!(null)).await.status, 201);
        let security = json!({"members": {"names": [members]}});
        let set = admin.put(&format!("/{db}/_security"), security).await;
        assert_eq!(set.status, 200);
    }
    let put = admin.put("/secret/s1", json!({"card": "4111"})).await;
    assert_eq!(put.status, 201);
    (data, server)
}

/// Waits until the scheduler has tried the replication of document `id`
/// (it failed, or completed), and returns its state.
async fn tried(admin: &Client, id: &str) -> String {
    let mut state = String::new();
    eventually(30, async || {
        let doc = admin
            .get(&format!("/_scheduler/docs/_replicator/{id}"))
            .await;
        state = doc.json()["state"].as_str().unwrap_or("").to_string();
        matches!(
            state.as_str(),
            "failed" | "completed" | "crashing" | "error"
        )
    })
    .await;
    state
}

#[tokio::test]
async fn replication_documents_run_with_their_writers_rights_whatever_route_wrote_them() {
    let (_data, server) = shared_server("side-doors-owner").await;
    let admin = Client::new(&server);
    let bob = as_user(&server, "bob");

    // Through `_bulk_docs`, interactive or replicated, a document naming a
    // database bob may not use is refused, and one naming another owner
    // too.
    for new_edits in [true, false] {
        let docs = json!([
            {"_id": format!("steal-{new_edits}"), "_rev": "1-abc", "source": "secret", "target": "bobs"},
            {"_id": format!("push-{new_edits}"), "_rev": "1-abc", "source": "bobs", "target": "locked"},
            {"_id": format!("forged-{new_edits}"), "_rev": "1-abc", "source": "bobs", "target": "bobs", "owner": "admin"},
        ]);
        let docs: Vec<Value> = docs
            .as_array()
            .into_iter()
            .flatten()
            .cloned()
            .map(|mut d| {
                if new_edits {
                    d.as_object_mut().map(|o| o.remove("_rev"));
                }
                d
            })
            .collect();
        let written = bob
            .post(
                "/_replicator/_bulk_docs",
                json!({"docs": docs, "new_edits": new_edits}),
            )
            .await;
        assert_eq!(written.status, 201, "{}", written.text);
        for row in written.json().as_array().into_iter().flatten() {
            assert_eq!(row["error"], "forbidden", "new_edits={new_edits}: {row}");
        }
    }
    // A replication bob may run is stored as his.
    let mine = bob
        .post(
            "/_replicator/_bulk_docs",
            json!({"docs": [{"_id": "mine", "source": "bobs", "target": "bobs"}]}),
        )
        .await;
    assert_eq!(mine.status, 201, "{}", mine.text);
    assert_eq!(admin.get("/_replicator/mine").await.json()["owner"], "bob");

    // Replicating documents into `_replicator` is judged as writing them:
    // a replication bob may not run, or one naming another owner, is a
    // write failure, and nothing is planted.
    assert_eq!(admin.put("/plants", json!(null)).await.status, 201);
    let security = json!({"members": {"names": ["bob"]}});
    assert_eq!(admin.put("/plants/_security", security).await.status, 200);
    for (id, body) in [
        ("steal", json!({"source": "secret", "target": "bobs"})),
        ("push", json!({"source": "bobs", "target": "locked"})),
        (
            "forged",
            json!({"source": "secret", "target": "bobs", "owner": "admin"}),
        ),
        ("fine", json!({"source": "bobs", "target": "bobs"})),
    ] {
        let put = bob.put(&format!("/plants/{id}"), body).await;
        assert_eq!(put.status, 201, "{}", put.text);
    }
    assert_eq!(bob.put("/bobs/b1", json!({"v": 1})).await.status, 201);
    let planted = bob
        .post(
            "/_replicate",
            json!({"source": "plants", "target": "_replicator"}),
        )
        .await;
    assert_eq!(planted.status, 200, "{}", planted.text);
    assert_eq!(planted.json()["history"][0]["doc_write_failures"], 3);
    for id in ["steal", "push", "forged"] {
        let doc = admin.get(&format!("/_replicator/{id}")).await;
        assert_eq!(doc.status, 404, "{id} was planted: {}", doc.text);
    }
    let fine = admin.get("/_replicator/fine").await.json();
    assert_eq!(fine["owner"], "bob", "{fine}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(admin.get("/bobs/s1").await.status, 404, "secret was copied");
    assert_eq!(
        admin.get("/locked/b1").await.status,
        404,
        "locked was written"
    );
}

#[tokio::test]
async fn password_hashes_are_read_through_no_design_function_or_replication() {
    let (_data, server) = shared_server("side-doors-users").await;
    let admin = Client::new(&server);
    let bob = as_user(&server, "bob");
    let ddoc = json!({
        "views": {"keys": {"map": "function(d) { emit(d._id, [d.salt, d.derived_key]); }"}},
        "shows": {"whole": "function(d) { return JSON.stringify(d); }"},
        "lists": {"rows": "function() { var r; while ((r = getRow())) { send(JSON.stringify(r)); } }"}
    });
    assert_eq!(admin.put("/_users/_design/peek", ddoc).await.status, 201);
    let refusal = "Only administrators can view design docs in the users database.";
    for path in [
        "/_users/_design/peek",
        "/_users/_design/peek/_view/keys",
        "/_users/_design/peek/_show/whole/org.couchdb.user:ann",
        "/_users/_design/peek/_list/rows/keys",
    ] {
        let answer = bob.get(path).await;
        assert_eq!(answer.status, 403, "{path}: {}", answer.text);
        assert_eq!(answer.json()["reason"], refusal, "{path}");
    }
    let posted = bob
        .post("/_users/_design/peek/_view/keys", json!({"keys": []}))
        .await;
    assert_eq!(posted.status, 403, "{}", posted.text);

    let copied = bob
        .post("/_replicate", json!({"source": "_users", "target": "bobs"}))
        .await;
    assert_ne!(copied.status, 200, "{}", copied.text);
    let in_bobs = admin.get("/bobs/_all_docs").await.json();
    assert_eq!(in_bobs["total_rows"], 0, "{in_bobs}");
    // Bob still reads his own document, and only his.
    let own = bob.get("/_users/org.couchdb.user:bob").await;
    assert_eq!(own.status, 200);
    assert!(own.json()["derived_key"].is_string());
    assert_eq!(bob.get("/_users/org.couchdb.user:ann").await.status, 404);
}

#[tokio::test]
async fn replication_credentials_are_shown_to_their_owner_only() {
    let (_data, server) = shared_server("side-doors-credentials").await;
    let admin = Client::new(&server);
    let (bob, ann) = (as_user(&server, "bob"), as_user(&server, "ann"));
    let annsdb = "http://ann:ann-secret@127.0.0.1:9/anns";
    let doc = json!({"source": annsdb, "target": {"url": annsdb, "headers": {"Authorization": "Basic c2VjcmV0"}}});
    assert_eq!(ann.put("/_replicator/anns", doc).await.status, 201);
    let ddoc = json!({
        "views": {"urls": {"map": "function(d) { emit(d._id, [d.source, d.target]); }"}},
        "shows": {"whole": "function(d) { return JSON.stringify(d); }"}
    });
    assert_eq!(
        admin.put("/_replicator/_design/peek", ddoc).await.status,
        201
    );
    for path in [
        "/_replicator/_design/peek/_view/urls",
        "/_replicator/_design/peek/_show/whole/anns",
    ] {
        let answer = bob.get(path).await;
        assert_eq!(answer.status, 403, "{path}: {}", answer.text);
        assert!(!answer.text.contains("ann-secret"), "{path}");
    }
    let seen = bob.get("/_replicator/anns").await;
    assert_eq!(seen.status, 200);
    assert!(!seen.text.contains("ann-secret") && !seen.text.contains("c2VjcmV0"));
    let owner = ann.get("/_replicator/anns").await;
    assert!(owner.text.contains("ann-secret"), "the owner sees it all");

    let copied = bob
        .post(
            "/_replicate",
            json!({"source": "_replicator", "target": "bobs"}),
        )
        .await;
    assert_ne!(copied.status, 200, "{}", copied.text);
    assert_eq!(admin.get("/bobs/anns").await.status, 404);
}

#[tokio::test]
async fn only_the_owner_changes_a_replication_document_on_any_route() {
    let (_data, server) = shared_server("side-doors-takeover").await;
    let admin = Client::new(&server);
    let (bob, ann) = (as_user(&server, "bob"), as_user(&server, "ann"));
    let doc = json!({"source": "http://127.0.0.1:9/a", "target": "http://127.0.0.1:9/b"});
    let written = ann.put("/_replicator/anns", doc).await;
    assert_eq!(written.status, 201);
    let rev = written.json()["rev"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    let edit = json!({"docs": [{"_id": "anns", "_rev": rev, "source": "bobs", "target": "bobs"}]});
    let answer = bob.post("/_replicator/_bulk_docs", edit).await;
    assert_eq!(answer.json()[0]["error"], "forbidden", "{}", answer.text);
    let takeover = json!({"new_edits": false, "docs": [
        {"_id": "anns", "_rev": "99-ffff", "source": "bobs", "target": "bobs"}
    ]});
    let answer = bob.post("/_replicator/_bulk_docs", takeover).await;
    assert_eq!(answer.json()[0]["error"], "forbidden", "{}", answer.text);
    let deleted = bob
        .send("DELETE", &format!("/_replicator/anns?rev={rev}"), None, &[])
        .await;
    assert_eq!(deleted.status, 403, "{}", deleted.text);

    let stored = admin.get("/_replicator/anns?conflicts=true").await.json();
    assert_eq!(stored["_rev"], rev.as_str(), "{stored}");
    assert_eq!(stored["owner"], "ann");
    assert!(stored.get("_conflicts").is_none(), "{stored}");
}

#[tokio::test]
async fn a_member_who_is_not_a_database_admin_cannot_set_revs_limit() {
    let (_data, server) = shared_server("side-doors-revs-limit").await;
    let admin = Client::new(&server);
    let bob = as_user(&server, "bob");
    let set = bob.put("/bobs/_revs_limit", json!(1)).await;
    assert_eq!(set.status, 403, "{}", set.text);
    assert_eq!(set.json()["error"], "forbidden");
    assert_eq!(admin.get("/bobs/_revs_limit").await.text.trim(), "1000");
    let anonymous = Client::anonymous(&server)
        .put("/bobs/_revs_limit", json!(1))
        .await;
    assert_eq!(anonymous.status, 401);
    let db_admin = json!({"members": {"names": ["bob"]}, "admins": {"names": ["bob"]}});
    assert_eq!(admin.put("/bobs/_security", db_admin).await.status, 200);
    assert_eq!(bob.put("/bobs/_revs_limit", json!(5)).await.status, 200);
    assert_eq!(admin.get("/bobs/_revs_limit").await.text.trim(), "5");
}

#[tokio::test]
async fn in_an_admin_party_replication_documents_still_run_as_admins() {
    // Every caller is a server admin there and has no name: the documents
    // they write have no owner, and run as what an anonymous caller is.
    let data = TempDir::new("side-doors-party");
    let server = TestServer::start_without_admin(data.path(), &["--insecure-admin-party"], &[]);
    let anyone = Client::anonymous(&server);
    for db in ["a", "b"] {
        assert_eq!(anyone.put(&format!("/{db}"), json!(null)).await.status, 201);
    }
    assert_eq!(anyone.put("/a/doc", json!({"v": 1})).await.status, 201);
    let job = anyone
        .put("/_replicator/party", json!({"source": "a", "target": "b"}))
        .await;
    assert_eq!(job.status, 201, "{}", job.text);
    assert!(
        anyone
            .get("/_replicator/party")
            .await
            .json()
            .get("owner")
            .is_none()
    );
    assert_eq!(tried(&anyone, "party").await, "completed");
    assert_eq!(anyone.get("/b/doc").await.status, 200);
}

#[tokio::test]
async fn only_who_started_a_replication_cancels_it() {
    let (_data, server) = shared_server("side-doors-cancel").await;
    let admin = Client::new(&server);
    let (bob, ann) = (as_user(&server, "bob"), as_user(&server, "ann"));
    let spec = json!({"source": "bobs", "target": "bobs", "continuous": true});
    let started = bob.post("/_replicate", spec.clone()).await;
    assert_eq!(started.status, 202, "{}", started.text);
    let id = started.json()["_local_id"].as_str().unwrap().to_string();

    // By its request: ann's request names her own replication (a job's
    // id covers whose rights it runs with), which does not exist.
    let mut cancel = spec.clone();
    cancel["cancel"] = json!(true);
    let by_request = ann.post("/_replicate", cancel).await;
    assert_eq!(by_request.status, 404, "{}", by_request.text);
    let by_id = ann
        .post("/_replicate", json!({"replication_id": id, "cancel": true}))
        .await;
    assert_eq!(by_id.status, 401, "ann cancelled by its id: {}", by_id.text);
    assert_eq!(
        by_id.json()["reason"],
        "Can't cancel a replication triggered by another user"
    );
    let unknown = ann
        .post(
            "/_replicate",
            json!({"replication_id": "nope", "cancel": true}),
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    let jobs = admin.get("/_scheduler/jobs").await.json();
    assert_eq!(jobs["total_rows"], 1, "the job still runs: {jobs}");

    let cancelled = bob
        .post("/_replicate", json!({"replication_id": id, "cancel": true}))
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    let jobs = admin.get("/_scheduler/jobs").await.json();
    assert_eq!(jobs["total_rows"], 0, "{jobs}");
}
