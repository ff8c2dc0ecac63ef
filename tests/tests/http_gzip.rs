//! Request bodies sent gzip-compressed, as CouchDB reads them and as the
//! Cloudant SDK (couchbackup) sends every request.

#![allow(clippy::unwrap_used)]

use std::io::Write;

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

async fn send(
    c: &Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = c
        .http()
        .request(method.parse().unwrap(), c.url(path))
        .header("accept", "application/json")
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

const JSON_GZIP: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("content-encoding", "gzip"),
];

#[tokio::test]
async fn gzip_encoded_json_bodies_are_read_and_bounded() {
    let data = TempDir::new("gzip");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_MAX_JSON_BODY_SIZE", "1048576")],
    );
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);

    let docs = json!({"docs": [{"_id": "a", "v": 1}, {"_id": "b", "v": 2}]});
    let (status, body) = send(
        &c,
        "POST",
        "/db/_bulk_docs",
        gzip(docs.to_string().as_bytes()),
        JSON_GZIP,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(&c, "PUT", "/db/c", gzip(br#"{"v":3}"#), JSON_GZIP).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(c.get("/db/c").await.json()["v"], 3);
    let asked = json!({"docs": [{"id": "a"}]});
    let (status, body) = send(
        &c,
        "POST",
        "/db/_bulk_get",
        gzip(asked.to_string().as_bytes()),
        JSON_GZIP,
    )
    .await;
    assert_eq!(
        (status, &body["results"][0]["docs"][0]["ok"]["v"]),
        (200, &json!(1))
    );

    // CouchDB's answers to what is not gzip, and to other encodings.
    let (status, body) = send(&c, "POST", "/db/_bulk_get", b"not gzip".to_vec(), JSON_GZIP).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("Request body is not properly gzipped.")
    );
    let (status, body) = send(
        &c,
        "POST",
        "/db/_bulk_get",
        b"{}".to_vec(),
        &[
            ("content-type", "application/json"),
            ("content-encoding", "br"),
        ],
    )
    .await;
    assert_eq!(
        (status, body),
        (
            415,
            json!({"error": "bad_content_type", "reason": "br is not a supported content encoding."})
        )
    );

    // A small body that inflates past the limit is refused, not held.
    let mut huge = b"{\"docs\":[{\"pad\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 16 << 20));
    huge.extend(b"\"}]}");
    let bomb = gzip(&huge);
    assert!(bomb.len() < 200_000, "{}", bomb.len());
    let (status, _) = send(&c, "POST", "/db/_bulk_get", bomb, JSON_GZIP).await;
    assert_eq!(status, 413);
    // The server answered without reading the rest: that connection is
    // closed, so go on with a new client.
    let c = Client::new(&server);

    // An attachment sent gzip-encoded is kept encoded, as CouchDB keeps it.
    let rev = c.get("/db/a").await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = send(
        &c,
        "PUT",
        &format!("/db/a/note.txt?rev={rev}"),
        gzip(b"hello hello hello"),
        &[("content-type", "text/plain"), ("content-encoding", "gzip")],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stub = c.get("/db/a?att_encoding_info=true").await.json();
    assert_eq!(
        stub["_attachments"]["note.txt"]["encoding"], "gzip",
        "{stub}"
    );
    let plain = c
        .http()
        .get(c.url("/db/a/note.txt"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&plain[..], b"hello hello hello");
}
