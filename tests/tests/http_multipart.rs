//! Multipart bodies as CouchDB's replicator uses them: `open_revs` as
//! multipart/mixed, documents as multipart/related, and multipart/related
//! uploads with `new_edits=false`.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

async fn start() -> (TempDir, TestServer, Client) {
    let data = TempDir::new("http-multipart");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    for db in ["src", "dst"] {
        assert_eq!(client.put(&format!("/{db}"), json!({})).await.status, 201);
    }
    (data, server, client)
}

fn boundary_of(content_type: &str) -> String {
    content_type
        .split("boundary=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a quoted boundary")
        .to_string()
}

/// Splits a multipart body into (headers, body) parts.
fn parts(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delimiter = format!("--{boundary}");
    let text = body.to_vec();
    let mut out = Vec::new();
    let mut pieces: Vec<&[u8]> = Vec::new();
    let d = delimiter.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i + d.len() <= text.len() {
        if &text[i..i + d.len()] == d {
            pieces.push(&text[start..i]);
            i += d.len();
            start = i;
        } else {
            i += 1;
        }
    }
    pieces.push(&text[start..]);
    for piece in pieces.into_iter().skip(1) {
        if piece.starts_with(b"--") {
            break;
        }
        let piece = piece.strip_prefix(b"\r\n").unwrap_or(piece);
        let split = piece
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("headers end");
        let headers = String::from_utf8(piece[..split].to_vec()).expect("ASCII part headers");
        let mut content = piece[split + 4..].to_vec();
        if content.ends_with(b"\r\n") {
            content.truncate(content.len() - 2);
        }
        out.push((headers, content));
    }
    out
}

#[tokio::test]
async fn open_revs_as_multipart_mixed_round_trips_into_another_database() {
    let (_d, _s, c) = start().await;
    let bytes: Vec<u8> = (0..70_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let put = c
        .send_bytes(
            "PUT",
            "/src/doc/data.bin",
            bytes.clone(),
            "application/octet-stream",
        )
        .await;
    let rev = put.json()["rev"].as_str().unwrap().to_string();
    c.put("/src/plain", json!({"x": 1})).await;

    let response = c
        .http()
        .get(c.url(&format!(
            "/src/doc?revs=true&latest=true&open_revs=[%22{rev}%22,%229-missing%22]"
        )))
        .header("accept", "multipart/mixed")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let outer = boundary_of(response.headers()["content-type"].to_str().unwrap());
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("multipart/mixed")
    );
    let body = response.bytes().await.unwrap().to_vec();
    assert!(
        body.ends_with(format!("--{outer}--").as_bytes()),
        "closing delimiter"
    );
    let top = parts(&body, &outer);
    assert_eq!(top.len(), 2);
    assert!(top[1].0.contains("application/json; error=\"true\""));
    assert_eq!(
        serde_json::from_slice::<Value>(&top[1].1).unwrap(),
        json!({"missing": "9-missing"})
    );

    let inner = boundary_of(&top[0].0);
    let related = parts(&top[0].1, &inner);
    assert_eq!(related.len(), 2, "the JSON, then the attachment");
    let doc: Value = serde_json::from_slice(&related[0].1).unwrap();
    assert_eq!(doc["_attachments"]["data.bin"]["follows"], true);
    assert_eq!(doc["_revisions"]["start"], 1);
    assert!(
        related[1]
            .0
            .contains("Content-Disposition: attachment; filename=\"data.bin\"")
    );
    assert!(related[1].0.contains("Content-Length: 70000"));
    assert_eq!(related[1].1, bytes);

    // Write it into the other database exactly as CouchDB's replicator does.
    let upload_boundary = "a81a77b0ca68389dda3243a43ca946f2";
    let mut upload =
        format!("--{upload_boundary}\r\nContent-Type: application/json\r\n\r\n").into_bytes();
    upload.extend_from_slice(&related[0].1);
    upload.extend_from_slice(
        format!("\r\n--{upload_boundary}\r\nContent-Disposition: attachment; filename=\"data.bin\"\r\nContent-Type: application/octet-stream\r\nContent-Length: 70000\r\n\r\n").as_bytes(),
    );
    upload.extend_from_slice(&related[1].1);
    upload.extend_from_slice(format!("\r\n--{upload_boundary}--").as_bytes());
    let written = c
        .send_bytes(
            "PUT",
            "/dst/doc?new_edits=false",
            upload,
            &format!("multipart/related; boundary=\"{upload_boundary}\""),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    assert_eq!(written.json(), json!({"ok": true, "id": "doc", "rev": rev}));
    let src = c.get("/src/doc").await.json();
    let dst = c.get("/dst/doc").await.json();
    assert_eq!(
        src["_attachments"], dst["_attachments"],
        "identical digests and lengths"
    );
    let copy = c
        .http()
        .get(c.url("/dst/doc/data.bin"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(copy.to_vec(), bytes);

    // A document without attachments is a plain JSON part.
    let plain = c
        .http()
        .get(c.url("/src/plain?open_revs=all"))
        .header("accept", "multipart/mixed")
        .send()
        .await
        .unwrap();
    let outer = boundary_of(plain.headers()["content-type"].to_str().unwrap());
    let top = parts(&plain.bytes().await.unwrap(), &outer);
    assert!(top[0].0.contains("Content-Type: application/json"));
    assert_eq!(serde_json::from_slice::<Value>(&top[0].1).unwrap()["x"], 1);
}

#[tokio::test]
async fn a_document_with_attachments_answers_multipart_related_when_asked() {
    let (_d, _s, c) = start().await;
    c.send_bytes("PUT", "/src/d/a.txt", b"hello".to_vec(), "text/plain")
        .await;
    let response = c
        .http()
        .get(c.url("/src/d?attachments=true"))
        .header("accept", "multipart/related")
        .send()
        .await
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("multipart/related"),
        "{content_type}"
    );
    // Its length is known before it is sent, as CouchDB sends it: a
    // `Content-Length`, not chunked framing.
    assert!(response.headers().get("transfer-encoding").is_none());
    let declared: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = response.bytes().await.unwrap();
    assert_eq!(body.len(), declared);
    let related = parts(&body, &boundary_of(&content_type));
    let doc: Value = serde_json::from_slice(&related[0].1).unwrap();
    assert_eq!(doc["_attachments"]["a.txt"]["follows"], true);
    // Text is stored gzip-compressed and travels so, as CouchDB sends it:
    // the encoding in the JSON and on the part.
    assert_eq!(doc["_attachments"]["a.txt"]["encoding"], "gzip");
    assert!(
        related[1].0.contains("Content-Encoding: gzip"),
        "{}",
        related[1].0
    );
    let mut content = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&related[1].1[..]),
        &mut content,
    )
    .unwrap();
    assert_eq!(content, b"hello");
    assert_eq!(
        doc["_attachments"]["a.txt"]["encoded_length"],
        related[1].1.len()
    );
    // Asked for JSON, the same request is JSON with inline data.
    let json = c.get("/src/d?attachments=true").await.json();
    assert_eq!(json["_attachments"]["a.txt"]["data"], "aGVsbG8=");
}

#[tokio::test]
async fn a_multipart_upload_missing_its_bytes_is_refused() {
    let (_d, _s, c) = start().await;
    let b = "xyz";
    let body = format!(
        "--{b}\r\nContent-Type: application/json\r\n\r\n{}\r\n--{b}--",
        json!({"_attachments": {"f": {"follows": true, "content_type": "text/plain", "length": 3}}})
    );
    let reply = c
        .send_bytes(
            "PUT",
            "/dst/nobytes",
            body.into_bytes(),
            &format!("multipart/related; boundary=\"{b}\""),
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(c.get("/dst/nobytes").await.status, 404);
}

/// A headerless attachment part is read as CouchDB reads it: its bytes
/// start right after the blank line (the multipart reader once took the
/// bytes up to the next blank line for its headers, and stored `world`
/// for an upload that sent `hello`). A document part not said to be JSON
/// is CouchDB's 415.
#[tokio::test]
async fn a_headerless_attachment_part_is_read_as_couchdb_reads_it() {
    let (_d, _s, c) = start().await;
    let b = "B";
    let doc = json!({"_attachments": {"a": {"follows": true, "content_type": "text/plain"}}});
    let attachment_headerless = format!(
        "--{b}\r\nContent-Type: application/json\r\n\r\n{doc}\r\n--{b}\r\n\r\nhello\r\n--{b}\r\n\r\nworld\r\n--{b}--\r\n"
    );
    let document_headerless = format!(
        "--{b}\r\n\r\n{doc}\r\n--{b}\r\nContent-Type: text/plain\r\n\r\nhello\r\n--{b}--\r\n"
    );
    let put = async |id: &str, body: String| {
        c.send_bytes(
            "PUT",
            &format!("/dst/{id}"),
            body.into_bytes(),
            &format!("multipart/related; boundary=\"{b}\""),
        )
        .await
    };
    let reply = put("d1", attachment_headerless).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(c.get("/dst/d1/a").await.text, "hello");
    let reply = put("d2", document_headerless).await;
    assert_eq!(reply.status, 415, "{}", reply.text);
    assert_eq!(reply.json()["error"], "bad_content_type");
    assert_eq!(c.get("/dst/d2").await.status, 404);
    // CouchDB's own case: every attachment part headerless, a blank line
    // inside none, an epilogue after the closing delimiter.
    let three = json!({"_attachments": {
        "foo.txt": {"follows": true, "content_type": "application/test", "length": 21},
        "bar.txt": {"follows": true, "content_type": "application/test", "length": 20},
        "baz.txt": {"follows": true, "content_type": "text/plain", "length": 19}}});
    let body = format!(
        "--{b}\r\ncontent-type: application/json\r\n\r\n{three}\r\n--{b}\r\n\r\nthis is 21 chars long\r\n--{b}\r\n\r\nthis is 20 chars lon\r\n--{b}\r\n\r\nthis is 19 chars lo\r\n--{b}--epilogue"
    );
    let reply = put("d4", body).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(c.get("/dst/d4/foo.txt").await.text, "this is 21 chars long");
    assert_eq!(c.get("/dst/d4/bar.txt").await.text, "this is 20 chars lon");
    assert_eq!(c.get("/dst/d4/baz.txt").await.text, "this is 19 chars lo");
    // The same upload with a header on each part is stored as sent.
    let good = format!(
        "--{b}\r\nContent-Type: application/json\r\n\r\n{doc}\r\n--{b}\r\nContent-Type: text/plain\r\n\r\nhello\r\n--{b}--\r\n"
    );
    let reply = c
        .send_bytes(
            "PUT",
            "/dst/d3",
            good.into_bytes(),
            &format!("multipart/related; boundary=\"{b}\""),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let att = c.get("/dst/d3/a").await;
    assert_eq!(att.text, "hello");
}
