//! Every value comes back exactly as CouchDB 3.5 returns it, under
//! CouchDB's revision id: numbers (integers of any size, doubles as CouchDB
//! reads and writes them), strings, duplicate keys and deep nesting, on
//! every way in and out. The expected texts and revision ids were read off
//! CouchDB 3.5 for the same requests; `couchdb_exact_data.rs` compares
//! generated documents with a live CouchDB.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

/// `(sent, what CouchDB answers, the revision CouchDB gives {"v": sent})`.
const NUMBERS: &[(&str, &str, &str)] = &[
    ("1e2", "100.0", "1-038bf73435d28dc02e8cbbb83a3cfc4b"),
    ("1E-7", "1e-7", "1-47bbb55740436c49dfe33cfff9b7213d"),
    ("1.5e300", "1.5e+300", "1-e9e97da44562be228bf1c1ce43af6fa2"),
    ("1.0", "1.0", "1-ed03183d83bd8187ad0acc41d3ed729c"),
    ("-0.0", "0.0", "1-5a7811452a4161777cd378304565ccf1"),
    ("-0", "0", "1-083d7391ec71ec717a762c87db469932"),
    ("1e-6", "0.000001", "1-a6b3397f1b6203b5c2c6eed0027c68a5"),
    (
        "1e20",
        "100000000000000000000.0",
        "1-65e3e8569f423d9b3af0a9de975610b2",
    ),
    ("1e21", "1e+21", "1-d779e4352613bbc43018f5f84fdd3efe"),
    (
        "123456789012345678901.5",
        "123456789012345680000.0",
        "1-1af2f3a6c3b54c8baaa730ee8a19e8f8",
    ),
    (
        "1e16",
        "10000000000000000.0",
        "1-3f09b31277fe55ea81a8def2e7421b03",
    ),
    (
        "12345678901234567890123",
        "12345678901234567890123",
        "1-05258dea959a73673d1a002f90cd403e",
    ),
    (
        "100000000000000000000",
        "100000000000000000000",
        "1-0842b42334c0d767673626b8b6ff6372",
    ),
    (
        "-18446744073709551617",
        "-18446744073709551617",
        "1-73a5dc9ad35c17043495ed2e55f75e75",
    ),
    (
        "0.36920404944799556",
        "0.36920404944799556",
        "1-fe1f7622ab86076e364348226ce75bbd",
    ),
    ("5e-324", "0.0", "1-68432df6fda388de9a3864ac7b1129d3"),
    ("4.9e-324", "5e-324", "1-0b7743efaff2fa0c3c7fd368d9d79cdc"),
    ("1e-320", "1e-320", "1-0b9e181b8753ca30ca8d8fe9d434eecf"),
    (
        "1.7976931348623157e308",
        "1.7976931348623157e+308",
        "1-a60ecdc46cf6843f53168d88b75d418b",
    ),
    ("-1.5E+3", "-1500.0", "1-895ba46acbebcaabf18b5b266ad56845"),
    (
        "9007199254740993",
        "9007199254740993",
        "1-f94701bd22643915e807e3edfe5ae7f7",
    ),
    (
        "9007199254740993.0",
        "9007199254740992.0",
        "1-9d2f8a455695819bd522c1df66b56601",
    ),
    (
        "123456789012345678901234567890e5",
        "1.2345678901234567e+34",
        "1-eb451dd5a3a3b0d602e7428db82b17a1",
    ),
    (
        "0.000000000000000000000000000000001",
        "1e-33",
        "1-d0bf79929cd4b07cdfb809ad8cb2a5d6",
    ),
];

/// The raw text of every number that follows `"v":` in a response, in
/// order: what the server wrote, before any client library reads it.
fn raw_values(text: &str) -> Vec<String> {
    text.match_indices("\"v\":")
        .map(|(at, m)| {
            let rest = &text[at + m.len()..];
            let end = rest
                .find(|c: char| !matches!(c, '0'..='9' | '-' | '+' | '.' | 'e' | 'E'))
                .unwrap_or(rest.len());
            rest[..end].to_string()
        })
        .collect()
}

async fn put_raw(client: &Client, path: &str, body: &str) -> recliner_tests::Reply {
    client
        .send_bytes("PUT", path, body.as_bytes().to_vec(), "application/json")
        .await
}

async fn post_raw(client: &Client, path: &str, body: &str) -> recliner_tests::Reply {
    client
        .send_bytes("POST", path, body.as_bytes().to_vec(), "application/json")
        .await
}

#[tokio::test]
async fn numbers_come_back_as_couchdb_writes_them_under_its_revision_ids() {
    let dir = TempDir::new("exact-numbers");
    let server = TestServer::start(dir.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/n", json!({})).await.status, 201);
    let expected: Vec<String> = NUMBERS
        .iter()
        .map(|(_, kept, _)| kept.to_string())
        .collect();
    for (i, (sent, kept, rev)) in NUMBERS.iter().enumerate() {
        let id = format!("n{i:02}");
        let put = put_raw(&client, &format!("/n/{id}"), &format!(r#"{{"v":{sent}}}"#)).await;
        assert_eq!(put.status, 201, "{sent}: {}", put.text);
        assert_eq!(
            put.json()["rev"],
            json!(rev),
            "the revision of {{\"v\":{sent}}}"
        );
        let got = client.get(&format!("/n/{id}")).await;
        assert_eq!(
            raw_values(&got.text),
            [kept.to_string()],
            "{sent}: {}",
            got.text
        );
    }

    // Every way documents are read gives the same text.
    let all = client.get("/n/_all_docs?include_docs=true").await;
    assert_eq!(raw_values(&all.text), expected, "_all_docs");
    for feed in ["normal", "longpoll", "continuous"] {
        let changes = client
            .get(&format!(
                "/n/_changes?include_docs=true&feed={feed}&timeout=100"
            ))
            .await;
        assert_eq!(raw_values(&changes.text), expected, "_changes feed={feed}");
    }
    let ids: Vec<Value> = (0..NUMBERS.len())
        .map(|i| json!({"id": format!("n{i:02}")}))
        .collect();
    let bulk_get = client
        .post("/n/_bulk_get?revs=true", json!({"docs": ids}))
        .await;
    assert_eq!(raw_values(&bulk_get.text), expected, "_bulk_get");
    let found = client
        .post(
            "/n/_find",
            json!({"selector": {"_id": {"$gt": null}}, "fields": ["_id", "v"], "sort": ["_id"]}),
        )
        .await;
    assert_eq!(raw_values(&found.text), expected, "_find with fields");
    let found = client
        .post("/n/_find", json!({"selector": {"_id": {"$gt": null}}}))
        .await;
    assert_eq!(raw_values(&found.text), expected, "_find");
    for (i, (_, kept, _)) in NUMBERS.iter().enumerate() {
        let open = client
            .get(&format!("/n/n{i:02}?open_revs=all&revs=true"))
            .await;
        assert_eq!(raw_values(&open.text), [kept.to_string()], "open_revs");
        let multipart = client
            .send(
                "GET",
                &format!("/n/n{i:02}?open_revs=all"),
                None,
                &[("accept", "multipart/mixed")],
            )
            .await;
        assert_eq!(
            raw_values(&multipart.text),
            [kept.to_string()],
            "open_revs multipart"
        );
    }

    // The same documents written in one `_bulk_docs` get the same ids, and
    // written again with those ids (`new_edits=false`, as a replicator
    // writes) keep CouchDB's bodies.
    assert_eq!(client.put("/m", json!({})).await.status, 201);
    let docs: Vec<String> = NUMBERS
        .iter()
        .enumerate()
        .map(|(i, (sent, _, _))| format!(r#"{{"_id":"m{i:02}","v":{sent}}}"#))
        .collect();
    let bulk = post_raw(
        &client,
        "/m/_bulk_docs",
        &format!(r#"{{"docs":[{}]}}"#, docs.join(",")),
    )
    .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    let revs: Vec<Value> = bulk
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rev"].clone())
        .collect();
    let couch: Vec<Value> = NUMBERS.iter().map(|(_, _, rev)| json!(rev)).collect();
    assert_eq!(revs, couch);
    assert_eq!(client.put("/r", json!({})).await.status, 201);
    let replicated: Vec<String> = NUMBERS
        .iter()
        .enumerate()
        .map(|(i, (_, kept, rev))| format!(r#"{{"_id":"r{i:02}","_rev":"{rev}","v":{kept}}}"#))
        .collect();
    let bulk = post_raw(
        &client,
        "/r/_bulk_docs",
        &format!(r#"{{"new_edits":false,"docs":[{}]}}"#, replicated.join(",")),
    )
    .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    let all = client.get("/r/_all_docs?include_docs=true").await;
    // A subnormal CouchDB wrote as `5e-324` reads back as zero on CouchDB
    // too (jiffy), so the replicated text is what CouchDB would store.
    let stored: Vec<String> = expected
        .iter()
        .map(|t| {
            if t == "5e-324" {
                "0.0".into()
            } else {
                t.clone()
            }
        })
        .collect();
    assert_eq!(raw_values(&all.text), stored, "replicated bodies");

    // Local documents too.
    let local = put_raw(
        &client,
        "/n/_local/x",
        r#"{"v":1e2,"w":[12345678901234567890123,1E-7]}"#,
    )
    .await;
    assert_eq!(local.status, 201, "{}", local.text);
    let local = client.get("/n/_local/x").await;
    assert!(
        local
            .text
            .contains(r#""v":100.0,"w":[12345678901234567890123,1e-7]"#),
        "{}",
        local.text
    );
}

#[tokio::test]
async fn random_doubles_survive_bulk_writes_and_replication_between_two_servers() {
    let dir_a = TempDir::new("exact-random-a");
    let dir_b = TempDir::new("exact-random-b");
    let a = TestServer::start(dir_a.path(), &[]);
    let b = TestServer::start(dir_b.path(), &[]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    assert_eq!(ca.put("/rand", json!({})).await.status, 201);
    // `Math.random()`-like doubles (53 random bits), written in their
    // shortest form as JavaScript writes them, and integers past 64 bits.
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut docs = Vec::new();
    let mut expected = Vec::new();
    for i in 0..2000 {
        let text = if i % 10 == 9 {
            format!(
                "{}{:020}",
                next() % 1000 + 1,
                next() % 10_000_000_000_000_000_000
            )
        } else {
            let x = (next() >> 11) as f64 / (1u64 << 53) as f64;
            format!("{x:?}")
        };
        docs.push(format!(r#"{{"_id":"d{i:04}","v":{text}}}"#));
        expected.push(text);
    }
    let bulk = post_raw(
        &ca,
        "/rand/_bulk_docs",
        &format!(r#"{{"docs":[{}]}}"#, docs.join(",")),
    )
    .await;
    assert_eq!(bulk.status, 201);
    let all = ca.get("/rand/_all_docs?include_docs=true").await;
    let got = raw_values(&all.text);
    let changed: Vec<_> = got
        .iter()
        .zip(&expected)
        .filter(|(g, e)| g != e)
        .take(5)
        .collect();
    assert!(changed.is_empty(), "values changed: {changed:?}");

    let source = a.url("/rand");
    let rep = cb
        .post(
            "/_replicate",
            json!({"source": source, "target": "rand", "create_target": true}),
        )
        .await;
    assert_eq!(rep.status, 200, "{}", rep.text);
    let replica = cb.get("/rand/_all_docs?include_docs=true").await;
    assert_eq!(replica.text.len(), all.text.len());
    assert_eq!(
        raw_values(&replica.text),
        expected,
        "bodies after replication"
    );
    assert!(
        eventually(5, async || cb.get("/rand").await.json()["doc_count"]
            == json!(2000))
        .await
    );
}

#[tokio::test]
async fn strings_duplicate_keys_and_limits_as_couchdb() {
    let dir = TempDir::new("exact-strings");
    let server = TestServer::start(dir.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/s", json!({})).await.status, 201);

    // The last of a duplicate key wins, at its place, and the revision is
    // CouchDB's.
    let put = put_raw(
        &client,
        "/s/dup",
        r#"{"a":1,"b":2,"a":3,"x":{"k":1,"j":2,"k":3}}"#,
    )
    .await;
    assert_eq!(put.status, 201);
    let got = client.get("/s/dup").await;
    assert!(
        got.text
            .trim_end()
            .ends_with(r#""b":2,"a":3,"x":{"j":2,"k":3}}"#),
        "{}",
        got.text
    );
    let put = put_raw(&client, "/s/dup2", r#"{"a":1,"b":2,"a":3}"#).await;
    assert_eq!(
        put.json()["rev"],
        json!("1-cf8195ee4268460f49235c8e98d42c6f")
    );

    // Strings come back escaped as CouchDB escapes them.
    let put = put_raw(
        &client,
        "/s/esc",
        r#"{"s":"\u0000\u0001\u001f\u007f\u2028\b\f\/é\ud83d\ude00"}"#,
    )
    .await;
    assert_eq!(
        put.json()["rev"],
        json!("1-429715d2290434fbc9a5c62f657b489f")
    );
    let got = client.get("/s/esc").await;
    assert!(
        got.text
            .contains("\"s\":\"\\u0000\\u0001\\u001F\u{7f}\u{2028}\\b\\f/é😀\""),
        "{}",
        got.text
    );

    // What CouchDB cannot hold is refused with its answer.
    for (body, reason) in [
        (r#"{"s":"\ud83d"}"#, "invalid UTF-8 JSON"),
        (r#"{"s":"\ude00x"}"#, "invalid UTF-8 JSON"),
        (r#"{"v":1e400}"#, "invalid UTF-8 JSON"),
        (r#"{"v":1.0e400}"#, "invalid UTF-8 JSON"),
        (r#"{"v":-2e308}"#, "invalid UTF-8 JSON"),
    ] {
        let put = put_raw(&client, "/s/bad", body).await;
        assert_eq!(put.status, 400, "{body}");
        assert_eq!(
            put.json(),
            json!({"error": "bad_request", "reason": reason}),
            "{body}"
        );
    }
    let huge = format!(r#"{{"v":1{}}}"#, "0".repeat(309));
    let put = put_raw(&client, "/s/bad", &huge).await;
    assert_eq!(
        put.status, 400,
        "an integer past what CouchDB holds: {}",
        put.text
    );
    let largest = format!(r#"{{"v":1{}}}"#, "0".repeat(308));
    let put = put_raw(&client, "/s/largest", &largest).await;
    assert_eq!(
        put.json()["rev"],
        json!("1-0eace677812c11d04dcb9bac1f29a543")
    );
}

#[tokio::test]
async fn documents_nested_ten_thousand_levels_are_kept_and_deeper_ones_refused() {
    let dir = TempDir::new("exact-deep");
    let server = TestServer::start(dir.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/deep", json!({})).await.status, 201);
    let nested = |levels: usize| {
        let mut text = String::from(r#"{"v":"#);
        for i in 0..levels {
            text.push_str(if i % 2 == 0 { "[" } else { r#"{"a":"# });
        }
        text.push('1');
        for i in (0..levels).rev() {
            text.push(if i % 2 == 0 { ']' } else { '}' });
        }
        text.push('}');
        text
    };
    let body = nested(10_000);
    let put = put_raw(&client, "/deep/d", &body).await;
    assert_eq!(put.status, 201, "{}", &put.text[..put.text.len().min(300)]);
    let got = client.get("/deep/d").await;
    assert_eq!(got.status, 200);
    let start = got.text.find(r#""v":"#).unwrap();
    let text = got.text.trim_end();
    // (Not `assert_eq!`: the texts are 40 kB.)
    assert!(
        text[start..text.len() - 1] == body[1..body.len() - 1],
        "the body comes back whole"
    );
    let bulk = post_raw(
        &client,
        "/deep/_bulk_docs",
        &format!(
            r#"{{"docs":[{}]}}"#,
            body.replacen('{', r#"{"_id":"b","#, 1)
        ),
    )
    .await;
    assert_eq!(
        bulk.status,
        201,
        "{}",
        &bulk.text[..bulk.text.len().min(300)]
    );
    let all = client.get("/deep/_all_docs?include_docs=true").await;
    assert_eq!(all.status, 200);
    assert!(all.text.len() > 2 * body.len());
    let changes = client.get("/deep/_changes?include_docs=true").await;
    assert_eq!(changes.status, 200);
    assert!(changes.text.len() > 2 * body.len());

    let too_deep = put_raw(&client, "/deep/e", &nested(10_001)).await;
    assert_eq!(too_deep.status, 400);
    let reason = too_deep.json()["reason"].as_str().unwrap_or("").to_string();
    assert!(reason.contains("too deeply nested"), "{reason}");
    // The server is still there.
    assert_eq!(client.get("/deep/d").await.status, 200);
}
