//! The changes feed over HTTP: normal, longpoll, continuous and
//! eventsource, with heartbeats, timeouts and wake-ups on commit.

use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer, seq_num};
use serde_json::json;

async fn start() -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-changes");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/db", json!({})).await.status, 201);
    (data, server, client)
}

#[tokio::test]
async fn the_normal_feed_lists_each_document_once_with_last_seq_and_pending() {
    let (_d, _s, c) = start().await;
    let rev = c.put("/db/a", json!({})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.put("/db/b", json!({"v": 1})).await;
    c.put(&format!("/db/a?rev={rev}"), json!({"v": 2})).await;
    let feed = c.get("/db/_changes").await.json();
    let rows = feed["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["id"].as_str(), seq_num(&rows[0]["seq"])),
        (Some("b"), 2)
    );
    assert_eq!(seq_num(&rows[1]["seq"]), 3);
    assert!(rows[1]["seq"].is_string(), "sequences are opaque strings");
    assert!(
        rows[1]["changes"][0]["rev"]
            .as_str()
            .unwrap()
            .starts_with("2-")
    );
    assert_eq!(
        (seq_num(&feed["last_seq"]), feed["pending"].as_u64()),
        (3, Some(0))
    );

    let limited = c.get("/db/_changes?limit=1&include_docs=true").await.json();
    assert_eq!(limited["results"].as_array().unwrap().len(), 1);
    assert_eq!(limited["results"][0]["doc"]["v"], 1);
    assert_eq!(
        (seq_num(&limited["last_seq"]), limited["pending"].as_u64()),
        (2, Some(1))
    );
    // A plain number (older clients, PouchDB Server peers) or the opaque string.
    let since = c.get("/db/_changes?since=2").await.json();
    assert_eq!(since["results"].as_array().unwrap().len(), 1);
    let opaque = limited["last_seq"].as_str().unwrap();
    let since = c.get(&format!("/db/_changes?since={opaque}")).await.json();
    assert_eq!(since["results"].as_array().unwrap().len(), 1);
    let now = c.get("/db/_changes?since=now").await.json();
    assert_eq!(
        (
            now["results"].as_array().unwrap().len(),
            seq_num(&now["last_seq"])
        ),
        (0, 3)
    );
    let ids = c
        .post("/db/_changes?filter=_doc_ids", json!({"doc_ids": ["a"]}))
        .await
        .json();
    assert_eq!(ids["results"].as_array().unwrap().len(), 1);
    assert_eq!(ids["results"][0]["id"], "a");
    c.put("/db/_design/x", json!({})).await;
    let design = c.get("/db/_changes?filter=_design").await.json();
    assert_eq!(design["results"].as_array().unwrap().len(), 1);
    assert_eq!(c.get("/db/_changes?feed=bogus").await.status, 400);
    assert_eq!(c.get("/db/_changes?since=abc").await.status, 400);
}

#[tokio::test]
async fn a_longpoll_wakes_within_moments_of_a_commit() {
    let (_d, _s, c) = start().await;
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let feed = c
                .get("/db/_changes?feed=longpoll&since=now&heartbeat=10000")
                .await;
            (started.elapsed(), feed.json())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let wrote = Instant::now();
    c.put("/db/late", json!({})).await;
    let (elapsed, feed) = waiter.await.unwrap();
    assert!(
        elapsed >= Duration::from_millis(250),
        "it waited for the write"
    );
    assert!(
        wrote.elapsed() < Duration::from_secs(2),
        "and woke right after it"
    );
    assert_eq!(feed["results"][0]["id"], "late");
    assert_eq!(seq_num(&feed["last_seq"]), 1);
}

#[tokio::test]
async fn a_longpoll_with_nothing_new_ends_at_its_timeout() {
    let (_d, _s, c) = start().await;
    let started = Instant::now();
    let feed = c
        .get("/db/_changes?feed=longpoll&since=now&timeout=300")
        .await
        .json();
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(feed["results"], json!([]));
}

#[tokio::test]
async fn a_continuous_feed_streams_rows_heartbeats_and_ends_at_its_limit() {
    let (_d, _s, c) = start().await;
    c.put("/db/first", json!({})).await;
    let mut response = c
        .http()
        .get(c.url("/db/_changes?feed=continuous&heartbeat=100&limit=2"))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    let line: serde_json::Value = serde_json::from_slice(first.trim_ascii()).unwrap();
    assert_eq!(line["id"], "first");
    // Nothing new: newlines keep the connection alive.
    let beat = tokio::time::timeout(Duration::from_secs(2), response.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(&beat[..], b"\n");
    c.put("/db/second", json!({})).await;
    let mut rest = Vec::new();
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(5), response.chunk())
        .await
        .unwrap()
    {
        rest.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(rest).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let second: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(second["id"], "second");
    let last: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(seq_num(&last["last_seq"]), 2);
}

#[tokio::test]
async fn a_continuous_feed_ends_when_its_timeout_passes_without_changes() {
    let (_d, _s, c) = start().await;
    let started = Instant::now();
    let text = c.get("/db/_changes?feed=continuous&timeout=200").await.text;
    assert!(started.elapsed() >= Duration::from_millis(150));
    let end: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!((seq_num(&end["last_seq"]), &end["pending"]), (0, &json!(0)));
}

#[tokio::test]
async fn an_eventsource_feed_frames_rows_as_events() {
    let (_d, _s, c) = start().await;
    c.put("/db/e", json!({})).await;
    let mut response = c
        .http()
        .get(c.url("/db/_changes?feed=eventsource&timeout=300"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut text = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(text).unwrap();
    let data: serde_json::Value =
        serde_json::from_str(text.lines().next().unwrap().strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!((seq_num(&data["seq"]), &data["id"]), (1, &json!("e")));
    let seq = data["seq"].as_str().unwrap();
    // The id is the sequence as JSON, as CouchDB writes it, and comes back
    // as Last-Event-ID when a browser reconnects.
    assert!(text.contains(&format!("\nid: \"{seq}\"\n\n")), "{text}");
    c.put("/db/f", json!({})).await;
    let mut resumed = c
        .http()
        .get(c.url("/db/_changes?feed=eventsource&timeout=300"))
        .header("last-event-id", format!("\"{seq}\""))
        .send()
        .await
        .unwrap();
    let mut text = Vec::new();
    while let Some(chunk) = resumed.chunk().await.unwrap() {
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("\"id\":\"f\"") && !text.contains("\"id\":\"e\""),
        "{text}"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_does_not_keep_the_server_busy() {
    let (_d, _s, c) = start().await;
    for _ in 0..20 {
        let response = c
            .http()
            .get(c.url("/db/_changes?feed=continuous&heartbeat=50"))
            .send()
            .await
            .unwrap();
        drop(response);
    }
    // The server still answers promptly and writes still wake feeds.
    let started = Instant::now();
    assert_eq!(c.put("/db/after", json!({})).await.status, 201);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_selector_filter_keeps_only_matching_documents() {
    let (_d, _s, c) = start().await;
    for (id, kind, n) in [("a", "fruit", 1), ("b", "veg", 2), ("c", "fruit", 3)] {
        c.put(
            &format!("/db/{id}"),
            json!({"kind": kind, "n": n, "tags": ["x", kind]}),
        )
        .await;
    }
    let body = json!({"selector": {"kind": "fruit", "n": {"$gt": 1}}});
    let feed = c.post("/db/_changes?filter=_selector", body).await.json();
    let ids: Vec<&str> = feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c"]);
    assert!(
        feed["results"][0].get("doc").is_none(),
        "docs only with include_docs"
    );
    assert_eq!(seq_num(&feed["last_seq"]), 3);

    let with_docs = c
        .post(
            "/db/_changes?filter=_selector&include_docs=true",
            json!({"selector": {"tags": {"$elemMatch": {"$eq": "veg"}}}}),
        )
        .await
        .json();
    assert_eq!(with_docs["results"][0]["doc"]["_id"], "b");

    let bad = c
        .post(
            "/db/_changes?filter=_selector",
            json!({"selector": {"n": {"$bogus": 1}}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.json()["reason"].as_str().unwrap().contains("$bogus"),
        "{}",
        bad.text
    );
    let missing = c.post("/db/_changes?filter=_selector", json!({})).await;
    assert_eq!(missing.status, 400);
}

#[tokio::test]
async fn a_sequence_of_a_deleted_and_recreated_database_starts_the_feed_over() {
    let (_d, _s, c) = start().await;
    for id in ["a", "b", "c"] {
        c.put(&format!("/db/{id}"), json!({})).await;
    }
    let old = c.get("/db/_changes").await.json()["last_seq"].clone();
    assert_eq!(seq_num(&old), 3);
    assert_eq!(c.delete("/db").await.status, 200);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    for id in ["x", "y", "z", "w"] {
        c.put(&format!("/db/{id}"), json!({})).await;
    }
    // The old sequence names the old database: every change of the new one
    // is sent, where a bare number would skip three of them.
    let old = old.as_str().unwrap();
    let feed = c.get(&format!("/db/_changes?since={old}")).await.json();
    assert_eq!(feed["results"].as_array().unwrap().len(), 4, "{feed}");
    let feed = c.get("/db/_changes?since=3").await.json();
    assert_eq!(feed["results"].as_array().unwrap().len(), 1, "{feed}");
    // The database's own sequences differ from the old one's.
    let info = c.get("/db").await.json();
    assert_eq!(seq_num(&info["update_seq"]), 4);
    assert_ne!(
        info["update_seq"]
            .as_str()
            .unwrap()
            .split_once('-')
            .unwrap()
            .1,
        old.split_once('-').unwrap().1
    );
}

#[tokio::test]
async fn malformed_sequences_are_refused_as_couchdb_refuses_them() {
    let (_d, _s, c) = start().await;
    for since in ["abc", "-1", "1-", "%22%22", "1.5"] {
        let reply = c.get(&format!("/db/_changes?since={since}")).await;
        assert_eq!(reply.status, 400, "{since}: {}", reply.text);
        assert_eq!(
            reply.json(),
            json!({"error": "bad_request", "reason": "Malformed sequence supplied in 'since' parameter."})
        );
    }
}

#[tokio::test]
async fn a_normal_feed_is_tagged_and_answers_304_until_the_database_changes() {
    let (_d, _s, c) = start().await;
    c.put("/db/a", json!({})).await;
    let first = c.get("/db/_changes").await;
    let etag = first.header("etag").unwrap().to_string();
    let again = c
        .send("GET", "/db/_changes", None, &[("if-none-match", &etag)])
        .await;
    assert_eq!((again.status, again.text.as_str()), (304, ""));
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    // Another query is another answer.
    let other = c
        .send(
            "GET",
            "/db/_changes?since=1",
            None,
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(other.status, 200);
    c.put("/db/b", json!({})).await;
    let changed = c
        .send("GET", "/db/_changes", None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.json()["results"].as_array().unwrap().len(), 2);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    // Waiting feeds are not tagged.
    let longpoll = c.get("/db/_changes?feed=longpoll&since=0").await;
    assert_eq!(longpoll.header("etag"), None);
}

/// `max_http_request_size` bounds a POSTed `_changes` body as it bounds
/// every request, with CouchDB's 413.
#[tokio::test]
async fn a_changes_body_over_the_request_size_is_too_large() {
    let (_d, _s, c) = start().await;
    let set = c
        .put(
            "/_node/_local/_config/chttpd/max_http_request_size",
            json!("16"),
        )
        .await;
    assert_eq!(set.status, 200);
    let reply = c
        .post(
            "/db/_changes?filter=_doc_ids",
            json!({"doc_ids": ["doc1", "doc3", "doc4"]}),
        )
        .await;
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.json(),
        json!({"error": "too_large", "reason": "the request entity is too large"})
    );
}
