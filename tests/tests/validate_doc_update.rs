//! `validate_doc_update` functions judge every write, as in CouchDB: single
//! writes, attachments, `_bulk_docs` (both `new_edits` modes, per-document
//! rows), and replicated writes (counted as `doc_write_failures`, the
//! checkpoint past them); with `newDoc`, `oldDoc`, `userCtx` and `secObj`.
//! A function that never ends times out with CouchDB's error while the
//! server goes on serving.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

const VDU: &str = r#"function (newDoc, oldDoc, userCtx, secObj) {
  var admin = userCtx.roles.indexOf('_admin') >= 0;
  if (newDoc._deleted) {
    if (!admin) throw({forbidden: 'only admins delete'});
    return;
  }
  if (!newDoc.author) throw({forbidden: 'documents need an author'});
  if (newDoc.author !== userCtx.name && !admin) throw({unauthorized: 'you are not ' + newDoc.author});
  if (oldDoc && oldDoc.locked) throw({forbidden: 'locked since revision ' + oldDoc._rev});
  if (newDoc.boom) throw('boom');
  if (newDoc.check_sec && secObj.members.names.indexOf(userCtx.name) < 0) throw({forbidden: 'not a named member'});
}"#;

fn as_user(server: &TestServer, name: &str, password: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{password}@"), 1),
    )
}

async fn setup(admin: &Client, db: &str) {
    assert_eq!(admin.put(&format!("/{db}"), json!({})).await.status, 201);
    let ddoc = admin
        .put(
            &format!("/{db}/_design/rules"),
            json!({"validate_doc_update": VDU}),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
}

fn error_of(reply: &recliner_tests::Reply) -> (u16, Value, Value) {
    let body = reply.json();
    (reply.status, body["error"].clone(), body["reason"].clone())
}

#[tokio::test]
async fn writes_are_judged_by_the_design_documents_functions() {
    let data = TempDir::new("vdu");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    setup(&admin, "db").await;
    let created = admin
        .put(
            "/_users/org.couchdb.user:bob",
            json!({"name": "bob", "password": "pw", "roles": [], "type": "user"}),
        )
        .await;
    assert_eq!(created.status, 201);
    let security = admin
        .put(
            "/db/_security",
            json!({"members": {"names": ["bob"]}, "admins": {"names": []}}),
        )
        .await;
    assert_eq!(security.status, 200);
    let bob = as_user(&server, "bob", "pw");

    // Refusals, as CouchDB answers them, admins included.
    assert_eq!(
        error_of(&admin.put("/db/a", json!({"x": 1})).await),
        (403, json!("forbidden"), json!("documents need an author"))
    );
    assert_eq!(
        error_of(&bob.put("/db/a", json!({"author": "carol"})).await),
        (401, json!("unauthorized"), json!("you are not carol"))
    );
    assert_eq!(
        error_of(
            &bob.put("/db/a", json!({"author": "bob", "boom": true}))
                .await
        ),
        (500, json!("unknown_error"), json!("boom"))
    );
    let ok = bob.put("/db/a", json!({"author": "bob"})).await;
    assert_eq!(ok.status, 201, "{}", ok.text);
    let rev = ok.json()["rev"].as_str().unwrap().to_string();
    // secObj is the database's security object.
    assert_eq!(
        bob.put("/db/s", json!({"author": "bob", "check_sec": true}))
            .await
            .status,
        201
    );

    // oldDoc is the revision being replaced.
    let locked = bob
        .put(
            "/db/a",
            json!({"_rev": rev, "author": "bob", "locked": true}),
        )
        .await;
    assert_eq!(locked.status, 201, "{}", locked.text);
    let locked_rev = locked.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        error_of(
            &bob.put("/db/a", json!({"_rev": locked_rev, "author": "bob"}))
                .await
        ),
        (
            403,
            json!("forbidden"),
            json!(format!("locked since revision {locked_rev}"))
        )
    );

    // Deleting, by DELETE, is for admins here.
    let deleted = bob
        .delete(&format!("/db/s?rev={}", {
            let s = bob.get("/db/s").await.json();
            s["_rev"].as_str().unwrap().to_string()
        }))
        .await;
    assert_eq!(
        error_of(&deleted),
        (403, json!("forbidden"), json!("only admins delete"))
    );

    // A standalone attachment makes a new revision the function judges.
    let fresh = admin.put("/db/att", json!({"author": "admin"})).await;
    let fresh_rev = fresh.json()["rev"].as_str().unwrap().to_string();
    let attachment = bob
        .send_bytes(
            "PUT",
            &format!("/db/att/a.txt?rev={fresh_rev}"),
            b"hi".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(
        error_of(&attachment),
        (401, json!("unauthorized"), json!("you are not admin"))
    );

    // _bulk_docs: a row per refused document, the others written.
    let bulk = bob
        .post(
            "/db/_bulk_docs",
            json!({"docs": [
                {"_id": "b1", "author": "bob"},
                {"_id": "b2"},
                {"_id": "b3", "author": "eve"},
            ]}),
        )
        .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    let rows = bulk.json();
    assert_eq!(rows[0]["ok"], true);
    assert_eq!(
        (&rows[1]["id"], &rows[1]["error"], &rows[1]["reason"]),
        (
            &json!("b2"),
            &json!("forbidden"),
            &json!("documents need an author")
        )
    );
    assert_eq!(rows[2]["error"], "unauthorized");
    assert_eq!(bob.get("/db/b2").await.status, 404);

    // new_edits=false (what replication writes) is judged too.
    let replicated = admin
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [
                {"_id": "r1", "_rev": "1-abc", "author": "x"},
                {"_id": "r2", "_rev": "1-def"},
            ]}),
        )
        .await;
    assert_eq!(replicated.status, 201, "{}", replicated.text);
    let rows = replicated.json();
    let refused: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("error").is_some())
        .collect();
    assert_eq!(refused.len(), 1, "{rows}");
    assert_eq!(refused[0]["id"], "r2");
    assert_eq!(refused[0]["error"], "forbidden");
    assert_eq!(admin.get("/db/r1").await.status, 200);
    assert_eq!(admin.get("/db/r2").await.status, 404);

    // Design documents are not judged by validation functions.
    assert_eq!(
        admin
            .put("/db/_design/other", json!({"views": {}}))
            .await
            .status,
        201
    );
    // A change of the functions applies to the next write.
    let rules = admin.get("/db/_design/rules").await.json();
    let relaxed = admin
        .put(
            "/db/_design/rules",
            json!({"_rev": rules["_rev"], "validate_doc_update": "function (doc) {}"}),
        )
        .await;
    assert_eq!(relaxed.status, 201);
    assert_eq!(admin.put("/db/a2", json!({"x": 1})).await.status, 201);
}

#[tokio::test]
async fn replicated_writes_obey_the_targets_functions() {
    let data = TempDir::new("vdu-replication");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    admin.put("/source", json!({})).await;
    setup(&admin, "target").await;
    let docs: Vec<Value> = (0..20)
        .map(|i| {
            if i % 4 == 0 {
                json!({"_id": format!("d{i:02}")})
            } else {
                json!({"_id": format!("d{i:02}"), "author": "someone"})
            }
        })
        .collect();
    let written = admin
        .post("/source/_bulk_docs", json!({ "docs": docs }))
        .await;
    assert_eq!(written.status, 201);
    let first = admin
        .post(
            "/_replicate",
            json!({"source": "source", "target": "target"}),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let history = &first.json()["history"][0];
    assert_eq!(history["docs_written"], 15, "{history}");
    assert_eq!(history["doc_write_failures"], 5, "{history}");
    assert_eq!(admin.get("/target/d00").await.status, 404);
    assert_eq!(admin.get("/target/d01").await.status, 200);
    // The checkpoint is past the refused documents: nothing more to do.
    let again = admin
        .post(
            "/_replicate",
            json!({"source": "source", "target": "target"}),
        )
        .await;
    assert_eq!(again.json()["no_changes"], true, "{}", again.text);
}

#[tokio::test]
async fn a_function_that_never_ends_times_out_and_the_server_goes_on() {
    let data = TempDir::new("vdu-loop");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_OS_PROCESS_TIMEOUT", "300")]);
    let admin = Client::new(&server);
    admin.put("/db", json!({})).await;
    admin
        .put(
            "/db/_design/loop",
            json!({"validate_doc_update": "function (doc) { if (doc.spin) { while (true) {} } }"}),
        )
        .await;
    let started = std::time::Instant::now();
    let (spin, calm) = tokio::join!(admin.put("/db/spin", json!({"spin": true})), async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        admin.put("/db/calm", json!({"spin": false})).await
    });
    assert_eq!(
        error_of(&spin),
        (
            500,
            json!("os_process_error"),
            json!("OS process timed out.")
        )
    );
    assert_eq!(calm.status, 201, "{}", calm.text);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(admin.get("/db/spin").await.status, 404);
    assert_eq!(admin.get("/").await.status, 200);
}

#[tokio::test]
async fn a_bulk_body_too_large_for_memory_is_judged_too() {
    let data = TempDir::new("vdu-large-bulk");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    setup(&admin, "db").await;
    // Over the 8 MiB a `_bulk_docs` body is decoded from memory.
    let pad = "x".repeat(8 * 1024);
    let docs: Vec<Value> = (0..1200)
        .map(|i| {
            if i % 100 == 7 {
                json!({"_id": format!("big{i:04}"), "pad": pad})
            } else {
                json!({"_id": format!("big{i:04}"), "author": "admin", "pad": pad})
            }
        })
        .collect();
    let body = json!({ "docs": docs }).to_string();
    assert!(body.len() > 8 << 20);
    let reply = admin
        .send_bytes(
            "POST",
            "/db/_bulk_docs",
            body.into_bytes(),
            "application/json",
        )
        .await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        &reply.text[..reply.text.len().min(300)]
    );
    let rows = reply.json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1200);
    let refused: Vec<&Value> = rows.iter().filter(|r| r.get("error").is_some()).collect();
    assert_eq!(refused.len(), 12);
    assert!(
        refused
            .iter()
            .all(|r| r["error"] == "forbidden" && r["reason"] == "documents need an author")
    );
    assert_eq!(rows[7]["id"], "big0007");
    assert_eq!(rows[7]["error"], "forbidden");
    assert_eq!(rows[8]["ok"], true);
    assert_eq!(admin.get("/db/big0007").await.status, 404);
    assert_eq!(admin.get("/db/big0008").await.status, 200);
}
