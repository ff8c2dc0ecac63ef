//! CouchDB's ways of reading requests and finishing answers, on the real
//! binary: `X-HTTP-Method-Override`, `+` in paths, absolute `Location`
//! URLs (behind a proxy too), JSONP, `X-CouchDB-Body-Time`, `w`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

async fn start() -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-rules");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/db", json!({})).await.status, 201);
    (data, server, client)
}

#[tokio::test]
async fn a_post_with_a_method_override_is_the_method_it_names() {
    let (_d, _s, c) = start().await;
    let put = c
        .send(
            "POST",
            "/db/over",
            Some(json!({"v": 1})),
            &[("x-http-method-override", "PUT")],
        )
        .await;
    assert_eq!(put.status, 201, "{}", put.text);
    let rev = put.json()["rev"].as_str().unwrap().to_string();
    let delete = c
        .send(
            "POST",
            &format!("/db/over?rev={rev}"),
            None,
            &[("x-http-method-override", "DELETE")],
        )
        .await;
    assert_eq!(delete.status, 200, "{}", delete.text);
    assert_eq!(c.get("/db/over").await.status, 404);
    // Only a POST is overridden, as CouchDB does.
    let get = c
        .send("GET", "/db", None, &[("x-http-method-override", "DELETE")])
        .await;
    assert_eq!(get.status, 200);
    assert_eq!(
        c.get("/db").await.status,
        200,
        "the database is still there"
    );
}

#[tokio::test]
async fn a_plus_in_a_path_is_a_space_and_in_an_encoded_id_a_plus() {
    let (_d, _s, c) = start().await;
    let spaced = c.put("/db/a+b", json!({})).await;
    assert_eq!(spaced.json()["id"], "a b");
    let plus = c.put("/db/c%2Bd", json!({})).await;
    assert_eq!(plus.json()["id"], "c+d");
    assert_eq!(c.get("/db/a%20b").await.status, 200);
    assert_eq!(c.get("/db/c%2Bd").await.status, 200);
}

#[tokio::test]
async fn locations_are_absolute_urls_from_the_host_or_the_proxy() {
    let (_d, s, c) = start().await;
    let host = s.plain_url.trim_start_matches("http://").to_string();
    let created = c.put("/other", json!({})).await;
    assert_eq!(
        created.header("location"),
        Some(format!("http://{host}/other").as_str())
    );
    // Ids are encoded only where a URL needs it.
    let doc = c.put("/db/a-b%0Ac:d", json!({})).await;
    assert_eq!(
        doc.header("location"),
        Some(format!("http://{host}/db/a-b%0Ac:d").as_str())
    );
    let proxied = c
        .send(
            "PUT",
            "/db/proxied",
            Some(json!({})),
            &[
                ("x-forwarded-host", "couch.example.org"),
                ("x-forwarded-proto", "https"),
            ],
        )
        .await;
    assert_eq!(
        proxied.header("location"),
        Some("https://couch.example.org/db/proxied")
    );
    let rev = proxied.json()["rev"].as_str().unwrap().to_string();
    let att = c
        .send_bytes(
            "PUT",
            &format!("/db/proxied/f.txt?rev={rev}"),
            b"hi".to_vec(),
            "text/plain",
        )
        .await;
    assert_eq!(
        att.header("location"),
        Some(format!("http://{host}/db/proxied/f.txt").as_str())
    );
}

#[tokio::test]
async fn jsonp_is_off_unless_configured_and_callbacks_are_checked() {
    let data = TempDir::new("http-rules-jsonp");
    std::fs::write(data.path().join("recliner.toml"), "allow_jsonp = true\n").unwrap();
    let s = TestServer::start(data.path(), &[]);
    let c = Client::new(&s);
    c.put("/db", json!({})).await;
    c.put("/db/d", json!({"v": 1})).await;
    let doc = c.get("/db/d?callback=app.cb").await;
    assert_eq!(doc.header("content-type"), Some("application/javascript"));
    let inner = doc
        .text
        .strip_prefix("/* CouchDB */app.cb(")
        .and_then(|t| t.strip_suffix(");"))
        .unwrap_or_else(|| panic!("{}", doc.text));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(inner).unwrap()["v"],
        1
    );
    // Errors and streamed answers are wrapped too.
    let missing = c.get("/db/nope?callback=cb").await;
    assert_eq!(missing.status, 404);
    assert!(
        missing
            .text
            .starts_with("/* CouchDB */cb({\"error\":\"not_found\"")
    );
    let feed = c.get("/db/_changes?callback=cb").await;
    assert!(
        feed.text.starts_with("/* CouchDB */cb({\"results\":["),
        "{}",
        feed.text
    );
    assert!(feed.text.ends_with(");"), "{}", feed.text);
    let bad = c.get("/db/d?callback=alert(1)").await;
    assert_eq!(
        (bad.status, bad.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "invalid_callback"})
        )
    );
}

#[tokio::test]
async fn answers_carry_the_body_time_and_more_copies_than_exist_is_202() {
    let (_d, _s, c) = start().await;
    let reply = c.put("/db/timed", json!({"v": 1})).await;
    let time: u64 = reply
        .header("x-couchdb-body-time")
        .unwrap()
        .parse()
        .unwrap();
    assert!(time < 10_000);
    assert_eq!(c.get("/db").await.header("x-couchdb-body-time"), Some("0"));
    // One node holds one copy: asking for two is accepted, not confirmed.
    let w2 = c.put("/db/w2?w=2", json!({})).await;
    assert_eq!((w2.status, w2.json()["ok"].clone()), (202, json!(true)));
    let w1 = c.put("/db/w1?w=1", json!({})).await;
    assert_eq!(w1.status, 201);
    let bulk = c
        .post("/db/_bulk_docs?w=3", json!({"docs": [{"_id": "b"}]}))
        .await;
    assert_eq!(bulk.status, 202);
    assert_eq!(c.get("/db/w2?r=2").await.status, 200);
}

#[tokio::test]
async fn uuids_are_never_cached_and_a_bad_heartbeat_gets_couchdbs_reason() {
    let (_d, _s, c) = start().await;
    let uuids = c.get("/_uuids").await;
    assert_eq!(
        (
            uuids.header("cache-control"),
            uuids.header("pragma"),
            uuids.header("expires")
        ),
        (
            Some("no-cache"),
            Some("no-cache"),
            Some("Mon, 01 Jan 1990 00:00:00 GMT")
        )
    );
    let bad = c.get("/db/_changes?feed=longpoll&heartbeat=abc").await;
    assert_eq!(
        (bad.status, bad.json()["reason"].clone()),
        (
            400,
            json!("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
        )
    );
}
