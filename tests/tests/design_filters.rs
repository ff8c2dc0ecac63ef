//! Filter functions: `_changes?filter=ddoc/name` (normal and continuous,
//! with the request object) and `filter=_view`, and filtered replications
//! with `query_params` from a local source and from an HTTP one; editing
//! the filter starts the replication over, as CouchDB's replication id
//! covers the filter's code.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

const BY_TYPE: &str = "function (doc, req) { return doc.type === req.query.type; }";

async fn seed(c: &Client, db: &str) {
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let ddoc = c
        .put(
            &format!("/{db}/_design/app"),
            json!({
                "filters": {"by_type": BY_TYPE},
                "views": {"big": {"map": "function (doc) { if (doc.n > 5) { emit(doc.n, null); } }"}}
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    let docs: Vec<Value> = (0..10)
        .map(|n| json!({"_id": format!("d{n}"), "type": if n % 2 == 0 { "even" } else { "odd" }, "n": n}))
        .collect();
    assert_eq!(
        c.post(&format!("/{db}/_bulk_docs"), json!({ "docs": docs }))
            .await
            .status,
        201
    );
}

fn ids(changes: &Value) -> Vec<String> {
    let mut ids: Vec<String> = changes["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

async fn all_ids(c: &Client, db: &str) -> Vec<String> {
    let rows = c.get(&format!("/{db}/_all_docs")).await.json();
    rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .filter(|id| !id.starts_with("_design/"))
        .collect()
}

#[tokio::test]
async fn changes_pass_through_filter_functions_and_views() {
    let data = TempDir::new("filters");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    seed(&c, "db").await;
    let odd = c
        .get("/db/_changes?filter=app/by_type&type=odd")
        .await
        .json();
    assert_eq!(ids(&odd), ["d1", "d3", "d5", "d7", "d9"]);
    let big = c.get("/db/_changes?filter=_view&view=app/big").await.json();
    assert_eq!(ids(&big), ["d6", "d7", "d8", "d9"]);
    // POST and limit: the limit counts rows that pass.
    let posted = c
        .post(
            "/db/_changes?filter=app/by_type&type=even&limit=2",
            json!({}),
        )
        .await
        .json();
    assert_eq!(ids(&posted), ["d0", "d2"]);

    // A continuous feed shows only the new changes that pass.
    let url =
        c.url("/db/_changes?feed=continuous&filter=app/by_type&type=new&since=now&timeout=3000");
    let feed = tokio::spawn({
        let http = c.http().clone();
        async move { http.get(url).send().await.unwrap().text().await.unwrap() }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    c.put("/db/other", json!({"type": "old"})).await;
    c.put("/db/fresh", json!({"type": "new"})).await;
    let text = feed.await.unwrap();
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(seen, ["fresh"], "{text}");

    // A filter that throws ends the feed; the server goes on.
    c.put(
        "/db/_design/bad",
        json!({"filters": {"f": "function (doc) { return doc.missing.field; }"}}),
    )
    .await;
    let _ = c
        .http()
        .get(c.url("/db/_changes?filter=bad/f"))
        .send()
        .await
        .unwrap()
        .text()
        .await;
    assert_eq!(c.get("/db").await.status, 200);
}

#[tokio::test]
async fn filtered_replications_copy_what_the_filter_passes() {
    let data = TempDir::new("filtered-replication");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    seed(&c, "source").await;

    // A local source, with query_params.
    let local = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "local-odd", "create_target": true,
                   "filter": "app/by_type", "query_params": {"type": "odd"}}),
        )
        .await;
    assert_eq!(local.status, 200, "{}", local.text);
    assert_eq!(
        all_ids(&c, "local-odd").await,
        ["d1", "d3", "d5", "d7", "d9"]
    );

    // The same over HTTP: the source runs the filter for the replicator.
    let remote_source = format!("{}/source", server.url);
    let remote = c
        .post(
            "/_replicate",
            json!({"source": remote_source, "target": "remote-even", "create_target": true,
                   "filter": "app/by_type", "query_params": {"type": "even"}}),
        )
        .await;
    assert_eq!(remote.status, 200, "{}", remote.text);
    assert_eq!(
        all_ids(&c, "remote-even").await,
        ["d0", "d2", "d4", "d6", "d8"]
    );

    // filter=_view, from a local source.
    let view = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "big", "create_target": true,
                   "filter": "_view", "query_params": {"view": "app/big"}}),
        )
        .await;
    assert_eq!(view.status, 200, "{}", view.text);
    assert_eq!(all_ids(&c, "big").await, ["d6", "d7", "d8", "d9"]);

    // Editing the filter changes the replication id: the next run starts
    // over and copies what the new code passes, old changes included.
    let ddoc = c.get("/source/_design/app").await.json();
    let edited = c
        .put(
            "/source/_design/app",
            json!({"_rev": ddoc["_rev"], "views": ddoc["views"],
                   "filters": {"by_type": "function (doc, req) { return doc.type === req.query.type || doc.n === 0; }"}}),
        )
        .await;
    assert_eq!(edited.status, 201);
    let again = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "local-odd",
                   "filter": "app/by_type", "query_params": {"type": "odd"}}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        all_ids(&c, "local-odd").await,
        ["d0", "d1", "d3", "d5", "d7", "d9"]
    );

    // A filter the source lacks fails the replication with CouchDB's 404.
    let missing = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "nothing", "create_target": true,
                   "filter": "app/nope"}),
        )
        .await;
    assert!(missing.status >= 400, "{}", missing.text);
}

/// A filter whose client left stops: with one engine thread and a minute
/// of allowed run time, an endless filter abandoned by its client does not
/// hold the engine from the next request.
#[tokio::test]
async fn a_filter_stops_when_its_client_leaves() {
    let data = TempDir::new("filters-client-leaves");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_OS_PROCESS_TIMEOUT", "60000"),
            ("RECLINER_QUERY_SERVER_THREADS", "1"),
        ],
    );
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    let ddoc = json!({"filters": {
        "forever": "function (doc, req) { while (true) {} }",
        "all": "function (doc, req) { return true; }",
    }});
    assert_eq!(c.put("/db/_design/f", ddoc).await.status, 201);
    assert_eq!(c.put("/db/d", json!({"v": 1})).await.status, 201);

    let left = c
        .http()
        .get(c.url("/db/_changes?filter=f/forever"))
        .timeout(std::time::Duration::from_millis(500))
        .send()
        .await;
    assert!(left.is_err(), "the endless filter answered");
    let next = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        c.get("/db/_changes?filter=f/all"),
    )
    .await
    .expect("the engine was still held by the filter whose client left");
    assert_eq!(next.status, 200, "{}", next.text);
    assert_eq!(ids(&next.json()), ["_design/f", "d"]);
}
