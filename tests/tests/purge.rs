//! Purging end to end: `POST /{db}/_purge` and `_purged_infos_limit` as
//! CouchDB 3.5 answers them, what a purge does to every read (documents,
//! `_all_docs`, `_changes`, `_bulk_get`, `_revs_diff`, database info), its
//! durability, who may purge, and replication onto a database where
//! documents were purged. With `COUCHDB_URL` set, the same requests and
//! replications also run on CouchDB and the answers are compared.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{ADMIN, ADMIN_PASSWORD, Client, TempDir, TestServer, seq_num};
use serde_json::{Value, json};

/// `c` with three branches (`3-ccc` and `3-ddd` sharing `2-bbb`, and the
/// deleted `2-xxx`), and `other`: fixed revisions, so both servers agree.
fn conflicted_docs() -> Value {
    json!({"new_edits": false, "docs": [
        {"_id": "c", "_rev": "3-ccc", "_revisions": {"start": 3, "ids": ["ccc", "bbb", "aaa"]}, "v": "c"},
        {"_id": "c", "_rev": "3-ddd", "_revisions": {"start": 3, "ids": ["ddd", "bbb", "aaa"]}, "v": "d"},
        {"_id": "c", "_rev": "2-xxx", "_revisions": {"start": 2, "ids": ["xxx", "aaa"]}, "_deleted": true},
        {"_id": "other", "_rev": "1-ooo", "v": 1},
    ]})
}

async fn create_db(c: &Client, db: &str) {
    let created = c.put(&format!("/{db}"), json!({})).await;
    assert_eq!(created.status, 201, "{}", created.text);
}

async fn purge(c: &Client, db: &str, body: Value) -> (u16, Value) {
    let reply = c.post(&format!("/{db}/_purge"), body).await;
    (reply.status, reply.json())
}

async fn info(c: &Client, db: &str) -> Value {
    c.get(&format!("/{db}")).await.json()
}

/// `(doc_count, doc_del_count, purge_seq)` of a database.
async fn counts(c: &Client, db: &str) -> (u64, u64, u64) {
    let info = info(c, db).await;
    (
        info["doc_count"].as_u64().unwrap(),
        info["doc_del_count"].as_u64().unwrap(),
        seq_num(&info["purge_seq"]),
    )
}

/// The ids in `_all_docs`.
async fn all_ids(c: &Client, db: &str) -> Vec<String> {
    c.get(&format!("/{db}/_all_docs")).await.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// The `_changes` rows (`style=all_docs`) as `(id, [revs], deleted)`, in
/// id order (CouchDB's shards interleave their rows).
async fn changes(c: &Client, db: &str) -> Vec<(String, Vec<String>, bool)> {
    let feed = c
        .get(&format!("/{db}/_changes?style=all_docs"))
        .await
        .json();
    let mut rows: Vec<(String, Vec<String>, bool)> = feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let revs = r["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["rev"].as_str().unwrap().to_string())
                .collect();
            (
                r["id"].as_str().unwrap().to_string(),
                revs,
                r["deleted"] == true,
            )
        })
        .collect();
    rows.sort();
    rows
}

async fn rev_of(c: &Client, db: &str, id: &str) -> String {
    c.get(&format!("/{db}/{id}")).await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn purging_takes_leaves_out_of_every_read() {
    let data = TempDir::new("purge-reads");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "db").await;
    c.post("/db/_bulk_docs", conflicted_docs()).await;
    let start = seq_num(&info(&c, "db").await["update_seq"]);
    assert_eq!(counts(&c, "db").await, (2, 0, 0));

    // A revision that is not a leaf and one the document never had are
    // ignored: only 3-ddd goes (2-bbb stays: 3-ccc still needs it).
    let (status, body) = purge(&c, "db", json!({"c": ["2-bbb", "3-ddd", "9-zzz"]})).await;
    assert_eq!(status, 201);
    assert_eq!(body, json!({"purge_seq": null, "purged": {"c": ["3-ddd"]}}));
    let doc = c
        .get("/db/c?conflicts=true&deleted_conflicts=true&revs_info=true")
        .await
        .json();
    assert_eq!(doc["_rev"], "3-ccc");
    assert!(doc.get("_conflicts").is_none(), "{doc}");
    assert_eq!(doc["_deleted_conflicts"], json!(["2-xxx"]));
    assert_eq!(
        doc["_revs_info"][1],
        json!({"rev": "2-bbb", "status": "missing"})
    );
    assert_eq!(c.get("/db/c?rev=3-ddd").await.status, 404);
    let leaves = c.get("/db/c?open_revs=all").await.json();
    assert_eq!(leaves.as_array().unwrap().len(), 2);
    // The document moved to the end of the feed: one new sequence per
    // remaining leaf, as CouchDB relabels them.
    let after = info(&c, "db").await;
    assert_eq!(seq_num(&after["update_seq"]), start + 2);
    assert_eq!(counts(&c, "db").await, (2, 0, 1));
    let feed = c.get("/db/_changes").await.json();
    let last = feed["results"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["id"], "c");
    assert_eq!(seq_num(&last["seq"]), start + 2);
    let diff = c
        .post("/db/_revs_diff", json!({"c": ["3-ddd", "2-bbb", "3-ccc"]}))
        .await
        .json();
    assert_eq!(
        diff,
        json!({"c": {"missing": ["3-ddd"], "possible_ancestors": ["2-xxx"]}})
    );

    // Purging the live leaf leaves the deleted branch: a deleted document.
    let (_, body) = purge(&c, "db", json!({"c": ["3-ccc"]})).await;
    assert_eq!(body["purged"], json!({"c": ["3-ccc"]}));
    assert_eq!(counts(&c, "db").await, (1, 1, 2));
    let gone = c.get("/db/c").await;
    assert_eq!(
        (gone.status, gone.json()["reason"].clone()),
        (404, json!("deleted"))
    );
    assert_eq!(all_ids(&c, "db").await, ["other"]);
    assert_eq!(
        changes(&c, "db").await,
        [
            ("c".into(), vec!["2-xxx".into()], true),
            ("other".into(), vec!["1-ooo".into()], false)
        ]
    );

    // The last leaf takes the document with it: never existed.
    let before = seq_num(&info(&c, "db").await["update_seq"]);
    let (_, body) = purge(&c, "db", json!({"c": ["2-xxx", "1-aaa"]})).await;
    assert_eq!(body["purged"], json!({"c": ["2-xxx"]}));
    assert_eq!(counts(&c, "db").await, (1, 0, 3));
    assert_eq!(seq_num(&info(&c, "db").await["update_seq"]), before + 1);
    let missing = c.get("/db/c").await;
    assert_eq!(
        (missing.status, missing.json()["reason"].clone()),
        (404, json!("missing"))
    );
    assert_eq!(changes(&c, "db").await.len(), 1);
    let keyed = c.get("/db/_all_docs?keys=%5B%22c%22%5D").await.json();
    assert_eq!(keyed["rows"], json!([{"key": "c", "error": "not_found"}]));
    let fetched = c
        .post(
            "/db/_bulk_get",
            json!({"docs": [{"id": "c", "rev": "3-ccc"}]}),
        )
        .await
        .json();
    assert_eq!(
        fetched["results"][0]["docs"][0]["error"]["error"],
        "not_found"
    );
    let diff = c
        .post("/db/_revs_diff", json!({"c": ["3-ccc", "1-aaa"]}))
        .await
        .json();
    assert_eq!(diff, json!({"c": {"missing": ["3-ccc", "1-aaa"]}}));
    // The id is free again; a new document starts a new history.
    let again = c.put("/db/c", json!({"fresh": true})).await;
    assert_eq!(again.status, 201);
    assert!(again.json()["rev"].as_str().unwrap().starts_with("1-"));

    // Several documents at once, in request order; one purge sequence each.
    let (status, body) = purge(
        &c,
        "db",
        json!({"zzz": ["1-a"], "other": ["1-ooo"], "c": []}),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(
        serde_json::to_string(&body).unwrap(),
        r#"{"purge_seq":null,"purged":{"zzz":[],"other":["1-ooo"],"c":[]}}"#
    );
    assert_eq!(counts(&c, "db").await, (1, 0, 6));
    // An empty request changes nothing.
    let seq = info(&c, "db").await["update_seq"].clone();
    assert_eq!(
        purge(&c, "db", json!({})).await,
        (201, json!({"purge_seq": null, "purged": {}}))
    );
    assert_eq!(info(&c, "db").await["update_seq"], seq);
    assert_eq!(counts(&c, "db").await, (1, 0, 6));
}

#[tokio::test]
async fn a_purge_survives_a_crash_and_attachments_of_purged_revisions_go() {
    let data = TempDir::new("purge-durable");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "db").await;
    for id in ["keep", "drop"] {
        let put = c
            .send_bytes(
                "PUT",
                &format!("/db/{id}/a.bin"),
                id.repeat(1000).into_bytes(),
                "application/octet-stream",
            )
            .await;
        assert_eq!(put.status, 201, "{}", put.text);
    }
    let rev = rev_of(&c, "db", "drop").await;
    let (status, _) = purge(&c, "db", json!({"drop": [rev]})).await;
    assert_eq!(status, 201);
    assert_eq!(c.put("/db/_purged_infos_limit", json!(7)).await.status, 200);
    // Killed, not stopped: what was acknowledged is on disk.
    std::process::Command::new("kill")
        .args(["-KILL", &server.pid().to_string()])
        .status()
        .unwrap();
    drop(server);
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.get("/db/drop").await.status, 404);
    assert_eq!(c.get("/db/drop/a.bin").await.status, 404);
    assert_eq!(counts(&c, "db").await, (1, 0, 1));
    assert_eq!(c.get("/db/_purged_infos_limit").await.json(), json!(7));
    // The purge is remembered, as CouchDB's `_purged_infos` lists it.
    assert_eq!(
        c.get("/db/_purged_infos").await.json(),
        json!({"purged_infos": [{"id": "drop", "revs": [rev]}]})
    );
    assert_eq!(c.post("/db/_purged_infos", json!({})).await.status, 405);
    // Compaction takes the bytes only the purged revision used.
    let compact = c.post("/db/_compact", json!({})).await;
    assert_eq!(compact.status, 202, "{}", compact.text);
    let kept = c.get("/db/keep/a.bin").await;
    assert_eq!(kept.text, "keep".repeat(1000));
}

#[tokio::test]
async fn requests_are_checked_as_couchdb_checks_them() {
    let data = TempDir::new("purge-errors");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "db").await;
    c.put("/db/a", json!({"v": 1})).await;
    let bad = |reason: &str| json!({"error": "bad_request", "reason": reason});
    for (body, reason) in [
        (json!([]), "Request body must be a JSON object"),
        (json!("x"), "Request body must be a JSON object"),
        (json!(null), "Request body must be a JSON object"),
        (json!({"a": "1-x"}), "Invalid list of revisions"),
        (json!({"a": null}), "Invalid list of revisions"),
        (json!({"a": {}}), "Invalid list of revisions"),
        (json!({"a": [1]}), "Invalid rev format"),
        (json!({"a": ["bogus"]}), "Invalid rev format"),
        (json!({"a": ["1-x", 2]}), "Invalid rev format"),
        (json!({"a": ["-1-x"]}), "Invalid rev format"),
        (
            json!({"a": ["1-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"]}),
            "Invalid rev format",
        ),
    ] {
        assert_eq!(
            purge(&c, "db", body.clone()).await,
            (400, bad(reason)),
            "{body}"
        );
    }
    // Revisions CouchDB reads but no tree holds purge nothing.
    let (status, body) = purge(
        &c,
        "db",
        json!({"a": ["0-x", "01-x", "+1-x", "1-", "99999999999999999999-x"]}),
    )
    .await;
    assert_eq!(
        (status, body),
        (201, json!({"purge_seq": null, "purged": {"a": []}}))
    );
    // A 32-digit hash in capitals names the same revision.
    let rev = rev_of(&c, "db", "a").await;
    let (_, body) = purge(&c, "db", json!({"a": [rev.to_uppercase()]})).await;
    assert_eq!(body["purged"]["a"], json!([rev]));
    // No body at all (reqwest sends no length for an empty one) is
    // missing; a blank one or anything else that is not JSON is bad JSON.
    for (raw, reason) in [
        ("", "Missing request body"),
        ("  ", "invalid UTF-8 JSON"),
        ("nojson", "invalid UTF-8 JSON"),
    ] {
        let reply = c
            .send_bytes("POST", "/db/_purge", raw.into(), "application/json")
            .await;
        assert_eq!((reply.status, reply.json()), (400, bad(reason)), "{raw:?}");
    }
    let wrong_type = c
        .send_bytes("POST", "/db/_purge", b"{}".to_vec(), "text/plain")
        .await;
    assert_eq!(wrong_type.status, 415);
    assert_eq!(wrong_type.json()["error"], "bad_content_type");

    // CouchDB's limits: 100 documents, 1000 revisions (duplicates count).
    let docs = |n: usize, revs: usize| {
        Value::Object(
            (0..n)
                .map(|i| (format!("d{i}"), json!(vec!["1-a"; revs])))
                .collect(),
        )
    };
    assert_eq!(purge(&c, "db", docs(100, 10)).await.0, 201);
    assert_eq!(
        purge(&c, "db", docs(101, 0)).await,
        (400, bad("Exceeded maximum number of documents."))
    );
    assert_eq!(purge(&c, "db", docs(1, 1000)).await.0, 201);
    assert_eq!(
        purge(&c, "db", docs(1, 1001)).await,
        (400, bad("Exceeded maximum number of revisions."))
    );
    assert_eq!(
        purge(&c, "db", json!({"x": [1], "y": vec!["1-a"; 1001]})).await,
        (400, bad("Invalid rev format")),
        "revisions are read before they are counted"
    );

    // Methods, and the database looked for first.
    let get = c.get("/db/_purge").await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    assert_eq!(c.get("/nodb/_purge").await.status, 404);
    assert_eq!(purge(&c, "nodb", json!({})).await.0, 404);
    let delete = c.delete("/db/_purged_infos_limit").await;
    assert_eq!(
        (delete.status, delete.header("allow")),
        (405, Some("GET,PUT"))
    );
    assert_eq!(c.get("/nodb/_purged_infos_limit").await.status, 404);

    // `_purged_infos_limit`: 1000 by default, a positive integer, no
    // content type needed.
    assert_eq!(c.get("/db/_purged_infos_limit").await.json(), json!(1000));
    let limit_error = bad("`purged_infos_limit` must be positive integer");
    for body in ["0", "-1", "1.5", "\"10\"", "null", "[]"] {
        let reply = c
            .send_bytes("PUT", "/db/_purged_infos_limit", body.into(), "text/plain")
            .await;
        assert_eq!(
            (reply.status, reply.json()),
            (400, limit_error.clone()),
            "{body}"
        );
    }
    let reply = c
        .send_bytes(
            "PUT",
            "/db/_purged_infos_limit",
            b"abc".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(
        (reply.status, reply.json()),
        (400, bad("invalid UTF-8 JSON"))
    );
    let reply = c
        .send_bytes(
            "PUT",
            "/db/_purged_infos_limit",
            b"10".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!((reply.status, reply.json()), (200, json!({"ok": true})));
    assert_eq!(c.get("/db/_purged_infos_limit").await.json(), json!(10));
}

#[tokio::test]
async fn only_server_admins_purge() {
    let data = TempDir::new("purge-access");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    create_db(&admin, "db").await;
    for name in ["boss", "member"] {
        let created = admin
            .put(
                &format!("/_users/org.couchdb.user:{name}"),
                json!({"name": name, "password": "pw", "roles": [], "type": "user"}),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.text);
    }
    admin
        .put(
            "/db/_security",
            json!({"admins": {"names": ["boss"]}, "members": {"names": ["member"]}}),
        )
        .await;
    admin.put("/db/a", json!({})).await;
    let user = |name: &str| {
        Client::at(
            &server
                .plain_url
                .replacen("http://", &format!("http://{name}:pw@"), 1),
        )
    };
    let refused = json!({"error": "unauthorized", "reason": "You are not a server admin."});
    // A database admin is not enough (CouchDB 3: `require_admin`).
    for c in [Client::anonymous(&server), user("boss"), user("member")] {
        let rev = rev_of(&admin, "db", "a").await;
        for (method, path, body) in [
            ("POST", "/db/_purge", Some(json!({"a": [rev]}))),
            ("GET", "/db/_purged_infos_limit", None),
            ("PUT", "/db/_purged_infos_limit", Some(json!(5))),
            ("POST", "/nodb/_purge", Some(json!({}))),
        ] {
            let reply = c.send(method, path, body, &[]).await;
            assert_eq!(
                (reply.status, reply.json()),
                (401, refused.clone()),
                "{method} {path}"
            );
        }
    }
    assert_eq!(admin.get("/db/a").await.status, 200);
    assert_eq!(counts(&admin, "db").await.2, 0);
    let admin_by_name = Client::at(&server.plain_url.replacen(
        "http://",
        &format!("http://{ADMIN}:{ADMIN_PASSWORD}@"),
        1,
    ));
    let rev = rev_of(&admin, "db", "a").await;
    assert_eq!(
        purge(&admin_by_name, "db", json!({"a": [rev]})).await.0,
        201
    );
}

/// One replication, waited for; its answer.
async fn replicate(runner: &Client, spec: Value) -> Value {
    let reply = runner.post("/_replicate", spec).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// What a target holds after each step of [`purged_then_replicated`].
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    /// Ids after the first replication.
    copied: Vec<String>,
    /// Ids after `d1` and `d2` were purged on the target.
    purged: Vec<String>,
    /// Ids after the same replication ran again.
    same_again: Vec<String>,
    /// `d2`'s revisions on the target after it was edited on the source and
    /// the same replication ran: `(rev, status)` of its `_revs_info`.
    edited: Vec<(String, String)>,
    /// Ids after a replication with another id (new checkpoints).
    new_id: Vec<String>,
}

/// The scenario, by `runner`'s replicator, from `source` to `target`
/// (databases given to the replicator as `source_spec`/`target_spec`):
/// replicate, purge two documents on the target, replicate again with the
/// same replication (checkpointed: nothing comes back), edit one purged
/// document on the source (its new revision comes, with the purged one as
/// missing history), then replicate with a new replication id (the other
/// purged document comes back: `_revs_diff` knows nothing of purges).
async fn purged_then_replicated(
    runner: &Client,
    source: (&Client, &str, Value),
    target: (&Client, &str, Value),
) -> Observed {
    let (src, src_db, source_spec) = source;
    let (tgt, tgt_db, target_spec) = target;
    create_db(src, src_db).await;
    create_db(tgt, tgt_db).await;
    let bulk = src
        .post(
            &format!("/{src_db}/_bulk_docs"),
            json!({"docs": [{"_id": "d1", "v": 1}, {"_id": "d2", "v": 2}, {"_id": "d3", "v": 3}]}),
        )
        .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    let spec = json!({"source": source_spec, "target": target_spec});
    replicate(runner, spec.clone()).await;
    let copied = all_ids(tgt, tgt_db).await;
    let d1 = rev_of(tgt, tgt_db, "d1").await;
    let d2 = rev_of(tgt, tgt_db, "d2").await;
    let (status, body) = purge(tgt, tgt_db, json!({"d1": [d1], "d2": [d2.clone()]})).await;
    assert_eq!(status, 201, "{body}");
    let purged = all_ids(tgt, tgt_db).await;
    let again = replicate(runner, spec.clone()).await;
    assert_eq!(again["no_changes"], true, "{again}");
    let same_again = all_ids(tgt, tgt_db).await;
    let edit = src
        .put(&format!("/{src_db}/d2?rev={d2}"), json!({"v": 22}))
        .await;
    assert_eq!(edit.status, 201, "{}", edit.text);
    replicate(runner, spec.clone()).await;
    let info = tgt
        .get(&format!("/{tgt_db}/d2?revs_info=true"))
        .await
        .json();
    let edited = info["_revs_info"]
        .as_array()
        .unwrap_or_else(|| panic!("{info}"))
        .iter()
        .map(|r| {
            (
                r["rev"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut other = spec.clone();
    other["doc_ids"] = json!(["d1", "d2", "d3"]);
    replicate(runner, other).await;
    let new_id = all_ids(tgt, tgt_db).await;
    Observed {
        copied,
        purged,
        same_again,
        edited,
        new_id,
    }
}

/// What CouchDB 3.5 does (checked on it): purged revisions stay purged for
/// a replication whose checkpoint is past them, and come back with any
/// replication that reads the source's changes again.
fn expected(d2_first: &str, d2_second: &str) -> Observed {
    let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Observed {
        copied: ids(&["d1", "d2", "d3"]),
        purged: ids(&["d3"]),
        same_again: ids(&["d3"]),
        edited: vec![
            (d2_second.to_string(), "available".into()),
            (d2_first.to_string(), "missing".into()),
        ],
        new_id: ids(&["d1", "d2", "d3"]),
    }
}

#[tokio::test]
async fn purged_documents_come_back_only_with_a_replication_that_reads_them_again() {
    let data = TempDir::new("purge-replication");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    // Local peers (through the store) and HTTP peers (through the API).
    for (src, tgt, source_spec, target_spec) in [
        ("ls", "lt", json!("ls"), json!("lt")),
        (
            "hs",
            "ht",
            json!(server.url("/hs")),
            json!(server.url("/ht")),
        ),
    ] {
        let seen = purged_then_replicated(&c, (&c, src, source_spec), (&c, tgt, target_spec)).await;
        let second = rev_of(&c, src, "d2").await;
        let history = c.get(&format!("/{src}/d2?revs_info=true")).await.json();
        let first = history["_revs_info"][1]["rev"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(seen, expected(&first, &second), "{src} -> {tgt}");
    }
}

#[tokio::test]
async fn purge_answers_and_replications_match_couchdb() {
    let Some(couch) = couchdb("purge_answers_and_replications_match_couchdb") else {
        return;
    };
    let data = TempDir::new("purge-couchdb");
    let server = TestServer::start(data.path(), &[]);
    let r = Client::new(&server);
    let cc = couch.client();

    // The same requests, answered alike.
    let c_db = unique_db("purge");
    create_db(&r, "db").await;
    create_db(&cc, &c_db).await;
    for (c, db) in [(&r, "db"), (&cc, c_db.as_str())] {
        c.post(&format!("/{db}/_bulk_docs"), conflicted_docs())
            .await;
        c.put(&format!("/{db}/plain"), json!({"v": 1})).await;
    }
    let plain = rev_of(&r, "db", "plain").await;
    assert_eq!(plain, rev_of(&cc, &c_db, "plain").await);
    let requests = [
        json!({"c": ["2-bbb", "3-ddd", "9-zzz"]}),
        json!({}),
        json!({"c": ["3-ccc"], "nope": ["1-x"], "plain": []}),
        json!({"c": ["3-ccc", "2-xxx", "0-x"], "plain": [plain.to_uppercase()]}),
        json!({"c": "1-x"}),
        json!({"c": ["x"]}),
        json!([]),
    ];
    for (step, body) in requests.into_iter().enumerate() {
        let ours = r.post("/db/_purge", body.clone()).await;
        let theirs = cc.post(&format!("/{c_db}/_purge"), body.clone()).await;
        assert_eq!(ours.status, theirs.status, "{body}");
        assert_eq!(ours.json(), theirs.json(), "{body}");
        let (live, deleted, purge_seq) = counts(&cc, &c_db).await;
        // The one known difference: when a purge leaves a live document
        // with only deleted leaves, CouchDB 3.5 does not recompute the
        // document's deleted flag, so `doc_count` still counts it (every
        // read shows it deleted) until it is next written or purged whole.
        // Recliner counts it as deleted.
        let expected = if step == 2 {
            (live - 1, deleted + 1, purge_seq)
        } else {
            (live, deleted, purge_seq)
        };
        assert_eq!(counts(&r, "db").await, expected, "after {body}");
        assert_eq!(
            changes(&r, "db").await,
            changes(&cc, &c_db).await,
            "after {body}"
        );
        assert_eq!(all_ids(&r, "db").await, all_ids(&cc, &c_db).await);
        for id in ["c", "plain"] {
            let ours = r
                .get(&format!("/db/{id}?conflicts=true&deleted_conflicts=true"))
                .await;
            let theirs = cc
                .get(&format!(
                    "/{c_db}/{id}?conflicts=true&deleted_conflicts=true"
                ))
                .await;
            assert_eq!(
                (ours.status, ours.json()),
                (theirs.status, theirs.json()),
                "{id} after {body}"
            );
        }
    }
    for (method, body) in [
        ("GET", None),
        ("PUT", Some(json!(3))),
        ("PUT", Some(json!(0))),
        ("GET", None),
    ] {
        let ours = r
            .send(method, "/db/_purged_infos_limit", body.clone(), &[])
            .await;
        let theirs = cc
            .send(method, &format!("/{c_db}/_purged_infos_limit"), body, &[])
            .await;
        assert_eq!((ours.status, ours.json()), (theirs.status, theirs.json()));
    }
    cc.delete(&format!("/{c_db}")).await;

    // Replication onto a purged target, every pairing of replicator and
    // servers, against what CouchDB does on its own.
    let on_couchdb = |name: &str| (cc.clone(), name.to_string(), json!(couch.db_url(name)));
    let on_recliner = |name: &str| {
        (
            r.clone(),
            name.to_string(),
            json!(server.url(&format!("/{name}"))),
        )
    };
    let name = || unique_db("purge-repl");
    let runs = [
        (
            "couchdb alone",
            cc.clone(),
            on_couchdb(&name()),
            on_couchdb(&name()),
        ),
        (
            "couchdb's replicator into recliner",
            cc.clone(),
            on_couchdb(&name()),
            on_recliner(&name()),
        ),
        (
            "recliner's replicator into couchdb",
            r.clone(),
            on_recliner(&name()),
            on_couchdb(&name()),
        ),
        (
            "recliner's replicator from couchdb",
            r.clone(),
            on_couchdb(&name()),
            on_recliner(&name()),
        ),
    ];
    let mut reference = None;
    for (what, runner, (src, src_db, src_spec), (tgt, tgt_db, tgt_spec)) in runs {
        let seen = purged_then_replicated(
            &runner,
            (&src, &src_db, src_spec),
            (&tgt, &tgt_db, tgt_spec),
        )
        .await;
        let second = rev_of(&src, &src_db, "d2").await;
        let history = src
            .get(&format!("/{src_db}/d2?revs_info=true"))
            .await
            .json();
        let first = history["_revs_info"][1]["rev"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(seen, expected(&first, &second), "{what}");
        match &reference {
            None => reference = Some(seen),
            Some(reference) => assert_eq!(&seen, reference, "{what} differs from CouchDB"),
        }
        for (c, db) in [(&src, &src_db), (&tgt, &tgt_db)] {
            c.delete(&format!("/{db}")).await;
        }
    }
}

/// The ids and `total_rows` of a view, and its `_count` reduction.
async fn view_state(c: &Client, view: &str) -> (Vec<String>, u64, Value) {
    let rows = c.get(&format!("{view}?reduce=false")).await;
    assert_eq!(rows.status, 200, "{}", rows.text);
    let rows = rows.json();
    let ids = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let reduced = c.get(view).await.json();
    (
        ids,
        rows["total_rows"].as_u64().unwrap(),
        reduced["rows"].clone(),
    )
}

#[tokio::test]
async fn purged_documents_leave_the_views() {
    let data = TempDir::new("purge-views");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    create_db(&c, "db").await;
    for id in ["a", "b", "c", "keep"] {
        assert_eq!(c.put(&format!("/db/{id}"), json!({})).await.status, 201);
    }
    let ddoc = json!({"views": {"v": {"map": "function (doc) { emit(doc._id, 1); }", "reduce": "_count"}}});
    assert_eq!(c.put("/db/_design/d", ddoc.clone()).await.status, 201);
    let view = "/db/_design/d/_view/v";
    let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        view_state(&c, view).await,
        (
            ids(&["a", "b", "c", "keep"]),
            4,
            json!([{"key": null, "value": 4}])
        )
    );

    let rev = rev_of(&c, "db", "a").await;
    assert_eq!(purge(&c, "db", json!({"a": [rev]})).await.0, 201);
    assert_eq!(
        view_state(&c, view).await,
        (
            ids(&["b", "c", "keep"]),
            3,
            json!([{"key": null, "value": 3}])
        )
    );
    // Written again after its purge, it is mapped again.
    assert_eq!(c.put("/db/a", json!({})).await.status, 201);
    assert_eq!(view_state(&c, view).await.0, ids(&["a", "b", "c", "keep"]));

    // Purges the index missed beyond the infos kept: it is built again.
    let limit = c.put("/db/_purged_infos_limit", json!(1)).await;
    assert_eq!(limit.status, 200, "{}", limit.text);
    for id in ["b", "c"] {
        let rev = rev_of(&c, "db", id).await;
        assert_eq!(purge(&c, "db", json!({ id: [rev] })).await.0, 201);
    }
    assert_eq!(
        view_state(&c, view).await,
        (ids(&["a", "keep"]), 2, json!([{"key": null, "value": 2}]))
    );

    // Partitioned views drop them too.
    let created = c.put("/pdb?partitioned=true", json!({})).await;
    assert_eq!(created.status, 201, "{}", created.text);
    for id in ["p:a", "p:b", "q:c"] {
        assert_eq!(c.put(&format!("/pdb/{id}"), json!({})).await.status, 201);
    }
    assert_eq!(c.put("/pdb/_design/d", ddoc).await.status, 201);
    let view = "/pdb/_partition/p/_design/d/_view/v";
    assert_eq!(
        view_state(&c, view).await,
        (ids(&["p:a", "p:b"]), 2, json!([{"key": null, "value": 2}]))
    );
    let rev = rev_of(&c, "pdb", "p:a").await;
    assert_eq!(purge(&c, "pdb", json!({"p:a": [rev]})).await.0, 201);
    assert_eq!(
        view_state(&c, view).await,
        (ids(&["p:b"]), 1, json!([{"key": null, "value": 1}]))
    );
}
