//! Partitioned databases: created with `?partitioned=true`, ids of the
//! form `partition:id` enforced on every write, a partition's counts and
//! `_all_docs`, and Mango queries within a partition.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

#[tokio::test]
async fn partitions_hold_their_documents() {
    let data = TempDir::new("partitioned");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db?partitioned=true", json!({})).await.status, 201);
    assert_eq!(
        c.get("/db").await.json()["props"],
        json!({"partitioned": true})
    );
    let bad = c.put("/other?partitioned=yes", json!({})).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["reason"], "Invalid `partitioned` parameter");
    c.put("/plain", json!({})).await;
    assert_eq!(c.get("/plain").await.json()["props"], json!({}));

    // Ids: partition:id, on every way in.
    let refused = c.put("/db/nocolon", json!({"v": 1})).await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json(),
        json!({"error": "illegal_docid", "reason": "Doc id must be of form partition:id"})
    );
    let empty = c.put("/db/:x", json!({})).await.json();
    assert_eq!(empty["error"], "illegal_partition");
    assert_eq!(
        c.post("/db", json!({"v": 1})).await.status,
        400,
        "a generated id has no partition"
    );
    let batch = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "s1:a"}, {"_id": "bad"}]}),
        )
        .await;
    assert_eq!(batch.status, 400, "the whole batch is refused");
    assert_eq!(c.get("/db/s1:a").await.status, 404);
    assert_eq!(c.put("/db/_local/x", json!({})).await.status, 201);
    assert_eq!(
        c.put("/db/_design/d", json!({"views": {}})).await.status,
        201
    );

    let docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": format!("s{}:d{i:02}", i % 2 + 1), "v": i}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({ "docs": docs }))
            .await
            .status,
        201
    );
    let gone = c.get("/db/s1:d00").await.json();
    c.delete(&format!(
        "/db/s1:d00?rev={}",
        gone["_rev"].as_str().unwrap()
    ))
    .await;

    let info = c.get("/db/_partition/s1").await.json();
    assert_eq!(info["partition"], "s1");
    assert_eq!(
        (info["doc_count"].as_u64(), info["doc_del_count"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(c.get("/db/_partition/nope").await.json()["doc_count"], 0);
    assert_eq!(
        c.get("/db/_partition/_bad").await.json()["error"],
        "illegal_partition"
    );
    assert_eq!(
        c.get("/plain/_partition/x").await.json(),
        json!({"error": "bad_request", "reason": "database is not partitioned"})
    );

    let all = c.get("/db/_partition/s2/_all_docs").await.json();
    assert_eq!(all["total_rows"], 5);
    let ids: Vec<&str> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s2:d01", "s2:d03", "s2:d05", "s2:d07", "s2:d09"]);
    let page = c
        .get("/db/_partition/s2/_all_docs?startkey=%22s2:d03%22&limit=2")
        .await
        .json();
    assert_eq!(page["offset"], 1);
    assert_eq!(page["rows"].as_array().unwrap().len(), 2);
    let down = c
        .get("/db/_partition/s1/_all_docs?descending=true&limit=1")
        .await
        .json();
    assert_eq!(down["rows"][0]["id"], "s1:d08");

    // Mango within a partition: with a full scan of the partition, then
    // through a partitioned index.
    let found = c
        .post(
            "/db/_partition/s1/_find",
            json!({"selector": {"v": {"$gt": 3}}}),
        )
        .await
        .json();
    let got: Vec<&str> = found["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["s1:d04", "s1:d06", "s1:d08"]);
    let made = c
        .post(
            "/db/_index",
            json!({"index": {"fields": ["v"]}, "ddoc": "v", "name": "v"}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let listed = c.get("/db/_index").await.json();
    assert_eq!(listed["indexes"][1]["partitioned"], true);
    let indexed = c
        .post(
            "/db/_partition/s2/_find",
            json!({"selector": {"v": {"$gt": 3}}, "execution_stats": true, "sort": ["v"]}),
        )
        .await
        .json();
    let got: Vec<&str> = indexed["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["s2:d05", "s2:d07", "s2:d09"]);
    // Only this partition's rows from the range's start (3, included as
    // CouchDB includes a `$gt` bound, then dropped by the selector).
    assert_eq!(indexed["execution_stats"]["total_keys_examined"], 4);
    // A global query cannot sort by a partitioned index.
    let global = c
        .post(
            "/db/_find",
            json!({"selector": {"v": {"$gt": 3}}, "sort": ["v"]}),
        )
        .await;
    assert_eq!(global.status, 400);
    assert_eq!(
        global.json()["reason"],
        "No global index exists for this sort, try indexing by the sort fields."
    );
    let explained = c
        .post(
            "/db/_partition/s2/_explain",
            json!({"selector": {"v": {"$gt": 3}}}),
        )
        .await
        .json();
    assert_eq!(explained["index"]["name"], "v");
    assert_eq!(explained["mrargs"]["partition"], "s2");

    // Views: a partitioned design document's views are read a partition
    // at a time; a global one's over the whole database.
    c.put(
        "/db/_design/pv",
        json!({"views": {"by_v": {"map": "function (doc) { emit(doc.v, 1); }", "reduce": "_sum"}}}),
    )
    .await;
    let rows = c
        .get("/db/_partition/s2/_design/pv/_view/by_v?reduce=false&startkey=5")
        .await
        .json();
    assert_eq!(
        (rows["total_rows"].as_u64(), rows["offset"].as_u64()),
        (Some(5), Some(2))
    );
    let ids: Vec<&str> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s2:d05", "s2:d07", "s2:d09"]);
    let down = c
        .get("/db/_partition/s1/_design/pv/_view/by_v?reduce=false&descending=true&limit=2")
        .await
        .json();
    assert_eq!(down["offset"], 0);
    assert_eq!(down["rows"][0]["id"], "s1:d08");
    let summed = c
        .get("/db/_partition/s1/_design/pv/_view/by_v")
        .await
        .json();
    assert_eq!(summed["rows"], json!([{"key": null, "value": 4}]));
    let global = c.get("/db/_design/pv/_view/by_v").await;
    assert_eq!(global.status, 400);
    assert_eq!(
        global.json()["reason"],
        "`partition` parameter is mandatory for queries to this view."
    );
    c.put(
        "/db/_design/gv",
        json!({"options": {"partitioned": false}, "views": {"by_v": {"map": "function (doc) { emit(doc.v, null); }"}}}),
    )
    .await;
    assert_eq!(
        c.get("/db/_design/gv/_view/by_v").await.json()["total_rows"],
        9
    );
    let scoped = c.get("/db/_partition/s1/_design/gv/_view/by_v").await;
    assert_eq!(scoped.status, 400);
}

/// A partition at `max_partition_size` takes no more edits (403
/// `partition_overflow`, per document in `_bulk_docs`); deletions still
/// go through, and other partitions are not held back.
#[tokio::test]
async fn a_full_partition_refuses_edits() {
    let data = TempDir::new("partition-limit");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_MAX_PARTITION_SIZE", "300")]);
    let c = Client::new(&server);
    c.put("/db?partitioned=true", json!({})).await;
    let pad = "x".repeat(100);
    for i in 0..3 {
        let put = c.put(&format!("/db/s1:d{i}"), json!({ "pad": pad })).await;
        assert_eq!(put.status, 201, "{}", put.text);
    }
    let refused = c.put("/db/s1:d3", json!({ "pad": pad })).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.json(),
        json!({"error": "partition_overflow", "reason": "Partition limit exceeded due to update on 's1:d3'"})
    );
    let rows = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "s1:d4"}, {"_id": "s2:a"}]}),
        )
        .await
        .json();
    assert_eq!(rows[0]["error"], "partition_overflow");
    assert_eq!(rows[1]["ok"], true, "another partition is not full");
    // An edit that makes a document smaller goes through (CouchDB's
    // "full partitions can accept updates that reduce size"); one that
    // keeps or grows it does not.
    let d1 = c.get("/db/s1:d1").await.json();
    let same = c
        .put("/db/s1:d1", json!({"_rev": d1["_rev"], "pad": pad}))
        .await;
    assert_eq!(same.status, 403, "{}", same.text);
    let smaller = c
        .put("/db/s1:d1", json!({"_rev": d1["_rev"], "pad": ""}))
        .await;
    assert_eq!(smaller.status, 201, "{}", smaller.text);
    let doc = c.get("/db/s1:d0").await.json();
    let deleted = c
        .delete(&format!("/db/s1:d0?rev={}", doc["_rev"].as_str().unwrap()))
        .await;
    assert_eq!(deleted.status, 200, "deletions go through");
    assert_eq!(
        c.put("/db/s1:d3", json!({ "pad": pad })).await.status,
        201,
        "room again"
    );
}

/// CouchDB 3.5 refuses to partition a system database, and to purge an id
/// without a partition from a partitioned one (ids starting with `_` pass).
#[tokio::test]
async fn system_databases_and_purges_without_a_partition_are_refused() {
    let data = TempDir::new("partitioned-refusals");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let refused = json!({"error": "bad_request", "reason": "Cannot partition a system database"});
    for db in [
        "_replicator",
        "_users",
        "_global_changes",
        "a%2F_replicator",
        "a%2Fb%2F_users",
    ] {
        let reply = c.put(&format!("/{db}?partitioned=true"), json!({})).await;
        assert_eq!((reply.status, reply.json()), (400, refused.clone()), "{db}");
    }
    let plain = c
        .put("/a%2F_global_changes?partitioned=true", json!({}))
        .await;
    assert_eq!(plain.status, 201, "{}", plain.text);

    assert_eq!(c.put("/pdb?partitioned=true", json!({})).await.status, 201);
    assert_eq!(c.put("/pdb/p:a", json!({})).await.status, 201);
    for body in [
        json!({"nopart": ["1-x"]}),
        json!({"p:a": ["1-x"], "nopart": ["1-x"]}),
    ] {
        let reply = c.post("/pdb/_purge", body.clone()).await;
        assert_eq!(
            (reply.status, reply.json()),
            (
                400,
                json!({"error": "illegal_docid", "reason": "Doc id must be of form partition:id"})
            ),
            "{body}"
        );
    }
    let loose = c
        .post(
            "/pdb/_purge",
            json!({"_design/x": ["1-x"], "_x": ["1-x"], ":x": ["1-x"]}),
        )
        .await;
    assert_eq!(loose.status, 201, "{}", loose.text);
    assert_eq!(
        loose.json()["purged"],
        json!({"_design/x": [], "_x": [], ":x": []})
    );
}

/// CouchDB's `[query_server_config]` limits, set through the configuration
/// API: a partition's queries get `partition_query_limit` rows when they
/// name no limit and are refused past it; other queries follow
/// `query_limit`.
#[tokio::test]
async fn query_limits_bound_partition_and_global_queries() {
    let data = TempDir::new("query-limits");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db?partitioned=true", json!({})).await.status, 201);
    let docs: Vec<Value> = (0..5)
        .map(|i| json!({"_id": format!("p:{i}"), "n": i}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({"docs": docs})).await.status,
        201
    );
    let ddoc = json!({"views": {"n": {"map": "function (d) { emit(d.n, null); }"}}});
    assert_eq!(c.put("/db/_design/v", ddoc).await.status, 201);
    let set = c
        .put(
            "/_node/_local/_config/query_server_config/partition_query_limit",
            json!("2"),
        )
        .await;
    assert_eq!(set.status, 200, "{:?}", set.json());
    let rows = |v: &Value| v["rows"].as_array().map_or(0, Vec::len);
    for path in [
        "/db/_partition/p/_all_docs",
        "/db/_partition/p/_design/v/_view/n",
    ] {
        assert_eq!(rows(&c.get(path).await.json()), 2, "{path}");
        let over = c.get(&format!("{path}?limit=3")).await;
        assert_eq!(over.status, 400, "{path}");
        assert_eq!(
            over.json(),
            json!({"error": "query_parse_error", "reason": "Limit is too large, must not exceed 2"})
        );
        assert_eq!(rows(&c.get(&format!("{path}?limit=1")).await.json()), 1);
    }
    assert_eq!(rows(&c.get("/db/_all_docs").await.json()), 6);
    c.put(
        "/_node/_local/_config/query_server_config/query_limit",
        json!("3"),
    )
    .await;
    assert_eq!(rows(&c.get("/db/_all_docs").await.json()), 3);
    assert_eq!(c.get("/db/_all_docs?limit=4").await.status, 400);
    let bad = c
        .put(
            "/_node/_local/_config/query_server_config/query_limit",
            json!("lots"),
        )
        .await;
    assert_eq!(bad.status, 400, "{:?}", bad.json());
}
