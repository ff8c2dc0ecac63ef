//! The index over time (deletions, purges, cleanup), errors, and who may search.

use crate::corpus::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_deleted_document_leaves_the_index() {
    let corpus = Corpus::empty("nouveau-delete");
    let c = &corpus.c;
    create_db(c, "db").await;
    let created = create_search_docs(c, "db").await;
    create_ddoc(c, "db", default_ddoc()).await;

    let before = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(before["total_hits"], 4, "{before}");

    let first = &created[0];
    let id = first["id"].as_str().unwrap();
    let rev = first["rev"].as_str().unwrap();
    let deleted = c.delete(&format!("/db/{id}?rev={rev}")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);

    let after = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(after["total_hits"], 3, "{after}");
    assert!(!hit_ids(&after).contains(&id.to_string()), "{after}");

    // Four documents, the design document and the deletion: sequence 6.
    let info = c.get(INFO).await;
    assert_eq!(info.status, 200, "{}", info.text);
    let info = info.json();
    let db = c.get("/db").await.json();
    assert_eq!(seq_num(&info["search_index"]["update_seq"]), 6, "{info}");
    assert_eq!(
        seq_num(&info["search_index"]["update_seq"]),
        seq_num(&db["update_seq"]),
        "index {info} and database {db}"
    );
    assert_eq!(seq_num(&info["search_index"]["purge_seq"]), 0, "{info}");
}

#[tokio::test]
async fn a_purged_document_leaves_the_index() {
    let corpus = Corpus::empty("nouveau-purge");
    let c = &corpus.c;
    create_db(c, "db").await;
    let created = create_search_docs(c, "db").await;
    create_ddoc(c, "db", default_ddoc()).await;

    let before = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(before["total_hits"], 4, "{before}");

    let first = &created[0];
    let id = first["id"].as_str().unwrap();
    let purged = c
        .post("/db/_purge", json!({ id: [first["rev"].clone()] }))
        .await;
    assert_eq!(purged.status, 201, "{}", purged.text);

    let after = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(after["total_hits"], 3, "{after}");
    assert!(!hit_ids(&after).contains(&id.to_string()), "{after}");

    let info = c.get(INFO).await;
    assert_eq!(info.status, 200, "{}", info.text);
    let info = info.json();
    let db = c.get("/db").await.json();
    assert_eq!(
        seq_num(&info["search_index"]["update_seq"]),
        seq_num(&db["update_seq"]),
        "index {info} and database {db}"
    );
    assert_eq!(
        seq_num(&info["search_index"]["purge_seq"]),
        seq_num(&db["purge_seq"]),
        "index {info} and database {db}"
    );
}

#[tokio::test]
async fn purging_conflicts_indexes_the_new_winner() {
    let corpus = Corpus::empty("nouveau-purge-conflicts");
    let c = &corpus.c;
    create_db(c, "db").await;
    create_conflicted_search_docs(c, "db").await;
    create_ddoc(c, "db", default_ddoc()).await;

    // Only winning revisions are indexed, and doc2's winner is deleted.
    let results = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(results["total_hits"], 3, "{results}");
    let mut found = hits(&results).clone();
    found.sort_by_key(|hit| hit["id"].as_str().unwrap().to_string());
    let [hit1, hit2, hit3] = &found[..] else {
        panic!("three hits: {results}");
    };
    assert_eq!(hit1["doc"]["_id"], "doc1", "{results}");
    assert_eq!(hit1["doc"]["_rev"], "1-a", "{results}");
    assert_fields(hit1, "baz", 0.0, "baz");
    assert_eq!(hit2["doc"]["_id"], "doc3", "{results}");
    assert_eq!(hit2["doc"]["_rev"], "2-c", "{results}");
    assert_fields(hit2, "barX", 13.0, "barX");
    assert_eq!(hit3["doc"]["_id"], "doc4", "{results}");
    assert_eq!(hit3["doc"]["_rev"], "1-b", "{results}");
    assert_fields(hit3, "fooX", 43.0, "fooX");

    let purged = c
        .post(
            "/db/_purge",
            json!({
                "doc1": ["2-c", "3-nonexistentrev"],
                "doc2": ["2-b"],
                "doc3": ["2-c"],
                "doc4": ["1-b"],
            }),
        )
        .await;
    assert_eq!(purged.status, 201, "{}", purged.text);

    let results = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(results["total_hits"], 2, "{results}");
    let mut found = hits(&results).clone();
    found.sort_by_key(|hit| hit["id"].as_str().unwrap().to_string());
    let [hit1, hit2] = &found[..] else {
        panic!("two hits: {results}");
    };
    // doc1: the deleted 2-c was purged, 1-a is still the winner.
    assert_eq!(hit1["doc"]["_id"], "doc1", "{results}");
    assert_eq!(hit1["doc"]["_rev"], "1-a", "{results}");
    assert_fields(hit1, "baz", 0.0, "baz");
    // doc2: deleted, and now purged entirely. doc3: only the deleted 1-a
    // is left. doc4: 1-b was purged, 1-a is the new winner.
    assert_eq!(hit2["doc"]["_id"], "doc4", "{results}");
    assert_eq!(hit2["doc"]["_rev"], "1-a", "{results}");
    assert_fields(hit2, "foo", 42.0, "foo");

    // Four revisions purged (the one doc1 never had is not counted).
    let db = c.get("/db").await.json();
    assert_eq!(seq_num(&db["purge_seq"]), 4, "{db}");

    let info = c.get(INFO).await;
    assert_eq!(info.status, 200, "{}", info.text);
    let info = info.json();
    assert_eq!(
        seq_num(&info["search_index"]["update_seq"]),
        seq_num(&db["update_seq"]),
        "index {info} and database {db}"
    );
    assert_eq!(
        seq_num(&info["search_index"]["purge_seq"]),
        seq_num(&db["purge_seq"]),
        "index {info} and database {db}"
    );
}

#[tokio::test]
async fn bad_indexes_answer_with_couchdbs_errors() {
    let corpus = Corpus::new("nouveau-bad-index").await;
    let c = &corpus.c;

    // An index the design document does not have.
    let missing = c
        .post(
            "/db/_design/foo/_nouveau/missing",
            json!({"q": "foo:bar", "include_docs": true}),
        )
        .await;
    assert_eq!(missing.status, 404, "{}", missing.text);
    assert_eq!(
        missing.json(),
        json!({"error": "not_found", "reason": "missing not found."}),
        "{}",
        missing.text
    );
    let missing_info = c.get("/db/_design/foo/_nouveau_info/missing").await;
    assert_eq!(missing_info.status, 404, "{}", missing_info.text);

    // One field name indexed with two types.
    create_db(c, "mixed").await;
    create_search_docs(c, "mixed").await;
    create_ddoc(
        c,
        "mixed",
        index_ddoc(
            r#"function (doc) {
              index("string", "foo", "bar", {store: true});
              index("double", "foo", 12.0, {store: true});
            }"#,
        ),
    )
    .await;
    let mixed = c
        .post(
            "/mixed/_design/foo/_nouveau/bar",
            json!({"q": "foo:bar", "include_docs": true}),
        )
        .await;
    assert_eq!(mixed.status, 400, "{}", mixed.text);

    // A function that throws indexes nothing, and the search still works.
    create_db(c, "throws").await;
    create_search_docs(c, "throws").await;
    create_ddoc(
        c,
        "throws",
        index_ddoc(
            r#"function (doc) {
              throw(new Error("some error"));
              index("string", "foo", doc.foo, {store: true});
            }"#,
        ),
    )
    .await;
    let thrown = search_post(
        c,
        "/throws/_design/foo/_nouveau/bar",
        json!({"q": "foo:bar", "include_docs": true}),
    )
    .await;
    assert_eq!(thrown["hits"], json!([]), "{thrown}");
    assert_eq!(thrown["total_hits"], 0, "{thrown}");

    // An index entry without its function: nothing checks it on save, the
    // query refuses it.
    create_db(c, "nofunction").await;
    create_ddoc(
        c,
        "nofunction",
        json!({"nouveau": {"bar": {"default_analyzer": "standard"}}}),
    )
    .await;
    let refused = c
        .get(&format!(
            "/nofunction/_design/foo/_nouveau/bar{}",
            query(&[("q", "*:*")])
        ))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(
        refused.json()["reason"],
        "index `bar` must have parameter `index`",
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn query_parameters_are_checked() {
    let corpus = Corpus::new("nouveau-params").await;
    let c = &corpus.c;

    let no_q_get = c.get(SEARCH).await;
    assert_query_parse_error(&no_q_get, "q parameter is mandatory");
    let no_q_get = c
        .get(&format!("{SEARCH}{}", query(&[("limit", "2")])))
        .await;
    assert_query_parse_error(&no_q_get, "q parameter is mandatory");
    let no_q_post = c.post(SEARCH, json!({"include_docs": true})).await;
    assert_query_parse_error(&no_q_post, "q parameter is mandatory");

    for limit in [0, -1] {
        let refused = c.post(SEARCH, json!({"q": "*:*", "limit": limit})).await;
        assert_query_parse_error(&refused, "limit parameter must be greater than zero");
    }
    let not_integer = c
        .get(&format!(
            "{SEARCH}{}",
            query(&[("q", "*:*"), ("limit", "abc")])
        ))
        .await;
    assert_query_parse_error(&not_integer, "limit parameter must be an integer");

    let top_n = c
        .post(SEARCH, json!({"q": "*:*", "counts": ["foo"], "top_n": 0}))
        .await;
    assert_query_parse_error(&top_n, "top_n parameter must be greater than zero");

    let include_docs = c
        .get(&format!(
            "{SEARCH}{}",
            query(&[("q", "*:*"), ("include_docs", "yes")])
        ))
        .await;
    assert_query_parse_error(&include_docs, "Invalid value for include_docs: \"yes\"");
}

#[tokio::test]
async fn stale_searches_and_cleanup() {
    let corpus = Corpus::empty("nouveau-stale");
    let c = &corpus.c;
    create_db(c, "db").await;
    create_ddoc(c, "db", default_ddoc()).await;

    // update=false on an index never built: there is nothing to search.
    let stale = c
        .get(&format!(
            "{SEARCH}{}",
            query(&[("q", "*:*"), ("update", "false"), ("include_docs", "true")])
        ))
        .await;
    assert_eq!(stale.status, 404, "{}", stale.text);

    create_search_docs(c, "db").await;
    let fresh = search_get(c, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(doc_ids(&fresh), ["doc1", "doc2", "doc3", "doc4"], "{fresh}");

    // Once built, update=false searches what the index holds.
    let built = search_get(c, SEARCH, &[("q", "*:*"), ("update", "false")]).await;
    assert_eq!(hit_ids(&built), ["doc1", "doc2", "doc3", "doc4"], "{built}");

    // Cleanup: POST with a JSON content type, answered 202.
    let cleanup = c
        .send(
            "POST",
            "/db/_nouveau_cleanup",
            Some(json!({})),
            &[("Content-Type", "application/json")],
        )
        .await;
    assert_eq!(cleanup.status, 202, "{}", cleanup.text);
    assert_eq!(cleanup.json(), json!({"ok": true}), "{}", cleanup.text);
    let not_post = c.get("/db/_nouveau_cleanup").await;
    assert_eq!(not_post.status, 405, "{}", not_post.text);
    let not_json = c
        .send_bytes("POST", "/db/_nouveau_cleanup", b"{}".to_vec(), "text/plain")
        .await;
    assert_eq!(not_json.status, 415, "{}", not_json.text);

    // The index in use survives the cleanup.
    let after = search_get(c, SEARCH, &[("q", "*:*")]).await;
    assert_eq!(hit_ids(&after), ["doc1", "doc2", "doc3", "doc4"], "{after}");
}

#[tokio::test]
async fn members_may_search_and_strangers_may_not() {
    let corpus = Corpus::new("nouveau-members").await;
    let c = &corpus.c;
    for name in ["reader", "stranger"] {
        let user = json!({"name": name, "password": "pw", "roles": [], "type": "user"});
        let made = c
            .put(&format!("/_users/org.couchdb.user:{name}"), user)
            .await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    let security = json!({"members": {"names": ["reader"]}, "admins": {"names": []}});
    let set = c.put("/db/_security", security).await;
    assert_eq!(set.status, 200, "{}", set.text);

    let plain = corpus.server.plain_url.clone();
    let as_user = |name: &str| Client::at(&plain.replacen("://", &format!("://{name}:pw@"), 1));

    let reader = as_user("reader");
    let read = search_get(&reader, SEARCH, &[("q", "*:*"), ("include_docs", "true")]).await;
    assert_eq!(doc_ids(&read), ["doc1", "doc2", "doc3", "doc4"], "{read}");
    let read = search_post(&reader, SEARCH, json!({"q": "foo:bar"})).await;
    assert_eq!(hit_ids(&read), ["doc3"], "{read}");

    let anonymous = Client::anonymous(&corpus.server);
    let refused = anonymous
        .get(&format!("{SEARCH}{}", query(&[("q", "*:*")])))
        .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.json()["error"], "unauthorized", "{}", refused.text);

    let stranger = as_user("stranger");
    let refused = stranger
        .get(&format!("{SEARCH}{}", query(&[("q", "*:*")])))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.json()["error"], "forbidden", "{}", refused.text);
}

#[tokio::test]
async fn a_long_build_shows_in_active_tasks() {
    let corpus = Corpus::empty("search-active-tasks");
    let c = &corpus.c;
    create_db(c, "db").await;
    for batch in 0..10 {
        let docs: Vec<_> = (0..1000)
            .map(|i| json!({"_id": format!("d{batch}-{i}"), "foo": "x", "bar": i, "baz": "some words to index"}))
            .collect();
        let reply = c.post("/db/_bulk_docs", json!({"docs": docs})).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    create_ddoc(c, "db", default_ddoc()).await;
    let path = format!("{SEARCH}?q=*:*&limit=1");
    let search = c.get(&path);
    let watch = async {
        loop {
            let tasks = c.get("/_active_tasks").await.json();
            if let Some(task) = tasks
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["type"] == "search_indexer")
            {
                // A stale search answers at once from what is committed
                // (nothing yet), without waiting for the build.
                let stale = c.get(&format!("{SEARCH}?q=*:*&update=false")).await;
                return (task.clone(), stale);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    let (found, task) = tokio::join!(search, async {
        tokio::time::timeout(std::time::Duration::from_secs(60), watch).await
    });
    assert_eq!(found.status, 200, "{}", found.text);
    assert_eq!(found.json()["total_hits"], 10_000);
    let (task, stale) = task.expect("a search_indexer task while the index builds");
    assert_eq!(stale.status, 200, "{}", stale.text);
    assert_eq!(stale.json()["total_hits"], 0, "{}", stale.text);
    assert_eq!(task["database"], "db", "{task}");
    assert_eq!(task["design_document"], "_design/foo", "{task}");
    assert_eq!(task["index"], "bar", "{task}");
    assert_eq!(task["total_changes"], 10_001, "{task}");
    assert!(task["progress"].as_u64().unwrap() <= 100, "{task}");
    let after = c.get("/_active_tasks").await.json();
    assert!(
        !after
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["type"] == "search_indexer"),
        "{after}"
    );
}

#[tokio::test]
async fn documents_edited_while_the_index_builds_are_indexed_once_as_they_end() {
    let corpus = Corpus::empty("search-edit-during-build");
    let c = &corpus.c;
    create_db(c, "db").await;
    let mut revs = Vec::new();
    for batch in 0..10 {
        let docs: Vec<_> = (0..1000)
            .map(|i| json!({"_id": format!("d{batch}-{i:04}"), "foo": "old", "bar": i}))
            .collect();
        let reply = c.post("/db/_bulk_docs", json!({"docs": docs})).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        revs.extend(reply.json().as_array().unwrap().iter().cloned());
    }
    create_ddoc(c, "db", default_ddoc()).await;
    // The first documents (indexed first) change while the build runs: the
    // build from an empty index adds what it meets without deleting, so the
    // edits must still replace what it added.
    let edits: Vec<_> = revs[..300]
        .iter()
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "foo": "new", "bar": -1}))
        .collect();
    let path = format!("{SEARCH}?q=*:*&limit=1");
    let build = c.get(&path);
    let edit = async {
        for _ in 0..6000 {
            let tasks = c.get("/_active_tasks").await.json();
            if tasks
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["type"] == "search_indexer")
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        c.post("/db/_bulk_docs", json!({"docs": edits})).await
    };
    let (built, edited) = tokio::join!(build, edit);
    assert_eq!(built.status, 200, "{}", built.text);
    assert_eq!(edited.status, 201, "{}", edited.text);
    let count = |q: &'static str| async move {
        let found = search_get(c, SEARCH, &[("q", q), ("limit", "1")]).await;
        found["total_hits"].as_u64().unwrap()
    };
    assert_eq!(count("*:*").await, 10_000, "each document once");
    assert_eq!(count("foo:new").await, 300);
    assert_eq!(count("foo:old").await, 9_700);
    assert_eq!(count("bar:[-1 TO -1]").await, 300);
}

#[tokio::test]
async fn an_index_of_documents_edited_again_and_again_stays_compact() {
    let corpus = Corpus::empty("search-compacts");
    let c = &corpus.c;
    create_db(c, "db").await;
    create_ddoc(c, "db", default_ddoc()).await;
    let mut docs: Vec<Value> = (0..200)
        .map(|i| json!({"_id": format!("d{i:03}"), "foo": "x", "bar": i, "baz": "words words words"}))
        .collect();
    let mut first_size = 0;
    for round in 0..40 {
        // All but the first `round` documents: each round's segment keeps
        // one live document among many replaced ones.
        let edited: Vec<usize> = (round..docs.len()).collect();
        let batch: Vec<Value> = edited.iter().map(|&i| docs[i].clone()).collect();
        let reply = c.post("/db/_bulk_docs", json!({"docs": batch})).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        for (&i, row) in edited.iter().zip(reply.json().as_array().unwrap()) {
            docs[i]["_rev"] = row["rev"].clone();
            docs[i]["foo"] = json!(format!("round{round}"));
        }
        let found = search_get(c, SEARCH, &[("q", "*:*"), ("limit", "1")]).await;
        assert_eq!(found["total_hits"], 200, "{found}");
        if round == 0 {
            let info = c.get(INFO).await.json();
            first_size = info["search_index"]["disk_size"].as_u64().unwrap();
        }
    }
    let info = c.get(INFO).await.json();
    assert_eq!(info["search_index"]["num_docs"], 200, "{info}");
    let size = info["search_index"]["disk_size"].as_u64().unwrap();
    assert!(
        size < first_size * 3,
        "after 40 rounds of edits the index holds {size} bytes, {first_size} after the first"
    );
}

#[tokio::test]
async fn searches_show_in_the_nodes_statistics() {
    let corpus = Corpus::new("search-stats").await;
    let c = &corpus.c;
    for _ in 0..3 {
        search_get(c, SEARCH, &[("q", "*:*")]).await;
    }
    let stats = c.get("/_node/_local/_stats").await.json();
    let nouveau = &stats["nouveau"];
    assert_eq!(nouveau["active_searches"]["value"], 0, "{nouveau}");
    assert_eq!(nouveau["active_searches"]["type"], "counter", "{nouveau}");
    assert_eq!(nouveau["search_latency"]["type"], "histogram", "{nouveau}");
    assert_eq!(nouveau["search_latency"]["value"]["n"], 3, "{nouveau}");
    assert_eq!(nouveau["update_latency"]["value"]["n"], 3, "{nouveau}");
}
