//! `GET /_db_updates`: the global changes feed of database events, against
//! the real binary.

#![allow(clippy::unwrap_used)]

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

fn events(reply: &Value) -> Vec<(String, String)> {
    reply["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| {
            (
                row["db_name"].as_str().expect("db_name").to_string(),
                row["type"].as_str().expect("type").to_string(),
            )
        })
        .collect()
}

/// The events of `db`, in feed order.
async fn events_of(c: &Client, db: &str) -> Vec<String> {
    events(&c.get("/_db_updates").await.json())
        .into_iter()
        .filter(|(name, _)| name == db)
        .map(|(_, kind)| kind)
        .collect()
}

#[tokio::test]
async fn database_events_are_recorded_and_followed() {
    let data = TempDir::new("db-updates");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);

    assert_eq!(c.put("/alpha", json!({})).await.status, 201);
    for i in 0..20 {
        assert_eq!(c.put(&format!("/alpha/d{i}"), json!({})).await.status, 201);
    }
    // Many commits of one database are one `updated` event.
    assert!(
        eventually(10, async || events_of(&c, "alpha").await
            == ["created", "updated"])
        .await,
        "{:?}",
        events_of(&c, "alpha").await
    );
    // Events are recorded every 100 ms: wait until the last writes' are.
    let mut normal = c.get("/_db_updates").await.json();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let again = c.get("/_db_updates").await.json();
        if again["last_seq"] == normal["last_seq"] {
            break;
        }
        normal = again;
    }
    assert!(normal["last_seq"].is_string(), "{normal}");
    assert!(normal.get("pending").is_none(), "{normal}");
    for row in normal["results"].as_array().unwrap() {
        assert_eq!(row["seq"].as_str().map(|s| !s.is_empty()), Some(true));
    }

    // A longpoll from now waits for the next event.
    let since = normal["last_seq"].as_str().unwrap().to_string();
    let waiting = {
        let c = Client::new(&server);
        let since = since.clone();
        tokio::spawn(async move {
            c.get(&format!(
                "/_db_updates?feed=longpoll&since={since}&timeout=10000"
            ))
            .await
            .json()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(c.delete("/alpha").await.status, 200);
    let woke = waiting.await.unwrap();
    assert_eq!(
        events(&woke),
        [("alpha".to_string(), "deleted".to_string())],
        "{woke}"
    );
    assert_ne!(woke["last_seq"].as_str(), Some(since.as_str()));

    // A continuous feed: one line per event, then `last_seq` at the timeout.
    let continuous = c.get("/_db_updates?feed=continuous&timeout=200").await;
    let lines: Vec<Value> = continuous
        .text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let last = lines.last().expect("a closing line");
    assert!(last.get("last_seq").is_some(), "{last}");
    assert!(
        lines
            .iter()
            .any(|l| l["db_name"] == "alpha" && l["type"] == "deleted")
    );

    // `since=now` with a normal feed: nothing, at the current sequence.
    let now = c.get("/_db_updates?since=now").await.json();
    assert_eq!(now["results"], json!([]));

    // `limit` and an event stream.
    let one = c.get("/_db_updates?limit=1").await.json();
    assert_eq!(one["results"].as_array().map(Vec::len), Some(1));
    let stream = c.get("/_db_updates?feed=eventsource&timeout=200").await;
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    assert!(
        stream.text.contains("data: {\"db_name\""),
        "{}",
        stream.text
    );

    // CouchDB's errors, word for word.
    let bad = c.get("/_db_updates?feed=bogus").await;
    assert_eq!(
        (bad.status, bad.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "Supported `feed` types: normal, continuous, longpoll, eventsource"})
        )
    );
    let bad = c.get("/_db_updates?limit=x").await;
    assert_eq!(
        (bad.status, bad.json()["reason"].clone()),
        (400, json!("invalid_integer"))
    );
    let post = c.post("/_db_updates", json!({})).await;
    assert_eq!(
        (post.status, post.json()["reason"].clone()),
        (405, json!("Only GET allowed"))
    );
    assert_eq!(
        Client::anonymous(&server).get("/_db_updates").await.status,
        401
    );
    assert_eq!(
        Client::anonymous(&server)
            .get("/_global_changes")
            .await
            .status,
        401
    );

    // Events survive a restart, and recording goes on after it.
    drop(server);
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(
        events_of(&c, "alpha").await,
        ["created", "updated", "deleted"]
    );
    assert_eq!(c.put("/beta", json!({})).await.status, 201);
    assert!(eventually(10, async || events_of(&c, "beta").await == ["created"]).await);

    // Without `_global_changes` there is no feed, as in CouchDB.
    assert_eq!(c.delete("/_global_changes").await.status, 200);
    let gone = c.get("/_db_updates").await;
    assert_eq!(
        (gone.status, gone.json()),
        (
            404,
            json!({"error": "not_found", "reason": "Database does not exist."})
        )
    );
}
