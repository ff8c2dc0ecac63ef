//! CouchDB's HTML form upload of attachments: `POST /{db}/{docid}` with
//! `multipart/form-data`, a `_rev` or `_doc` field and `_attachments` files.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

const BOUNDARY: &str = "----form-boundary-7d1";

/// A form body: text fields, then files (name, content type, bytes).
fn form(fields: &[(&str, &str)], files: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    for (file, content_type, bytes) in files {
        out.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"{file}\"\r\n"
            )
            .as_bytes(),
        );
        if let Some(t) = content_type {
            out.extend_from_slice(format!("Content-Type: {t}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

async fn post_form(
    c: &Client,
    path: &str,
    body: Vec<u8>,
    referer: Option<String>,
) -> recliner_tests::Reply {
    let mut request = c
        .http()
        .post(c.url(path))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body);
    if let Some(referer) = referer {
        request = request.header("referer", referer);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    recliner_tests::Reply {
        status,
        headers,
        text,
    }
}

#[tokio::test]
async fn a_form_uploads_files_as_attachments_before_the_kept_ones() {
    let data = TempDir::new("forms");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let rev = c
        .put(
            "/db/d",
            json!({"a": 1, "_attachments": {"old.txt": {"content_type": "text/plain", "data": "b2xk"}}}),
        )
        .await
        .json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let host = server.plain_url.trim_start_matches("http://").to_string();
    let referer = Some(format!("http://{host}/_utils/"));
    let body = form(
        &[("_rev", &rev)],
        &[
            ("up.txt", Some("text/plain"), b"hello\n"),
            ("up2.bin", None, b"second file"),
        ],
    );
    let done = post_form(&c, "/db/d", body, referer.clone()).await;
    assert_eq!(done.status, 201, "{}", done.text);
    let new_rev = done.json()["rev"].as_str().unwrap().to_string();
    assert!(new_rev.starts_with("2-"));
    assert_eq!(done.header("etag"), Some(format!("\"{new_rev}\"").as_str()));
    let doc = c.get("/db/d").await.json();
    let names: Vec<&String> = doc["_attachments"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["up.txt", "up2.bin", "old.txt"], "{doc}");
    assert_eq!(doc["a"], 1);
    assert_eq!(
        doc["_attachments"]["up2.bin"]["content_type"],
        "application/octet-stream"
    );
    assert_eq!(c.get("/db/d/up.txt").await.text, "hello\n");
    assert_eq!(c.get("/db/d/up2.bin").await.text, "second file");

    // A whole new document from a `_doc` field.
    let body = form(
        &[("_doc", r#"{"x": 1}"#)],
        &[("f.txt", Some("text/plain"), b"f")],
    );
    let made = post_form(&c, "/db/e", body, referer.clone()).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let e = c.get("/db/e").await.json();
    assert_eq!(
        (e["x"].clone(), e["_attachments"]["f.txt"]["length"].clone()),
        (json!(1), json!(1))
    );

    // CouchDB's refusals: no Referer, another host, not a form, a stale rev.
    let body = || form(&[("_rev", &new_rev)], &[("z.txt", None, b"z")]);
    let none = post_form(&c, "/db/d", body(), None).await;
    assert_eq!(
        (none.status, none.json()["reason"].clone()),
        (400, json!("Referer header required."))
    );
    let elsewhere = post_form(&c, "/db/d", body(), Some("http://evil.example/".into())).await;
    assert_eq!(
        (elsewhere.status, elsewhere.json()["reason"].clone()),
        (400, json!("Referer header must match host."))
    );
    let json_post = c
        .send(
            "POST",
            "/db/d",
            Some(json!({})),
            &[("referer", referer.as_deref().unwrap())],
        )
        .await;
    assert_eq!(
        (json_post.status, json_post.json()["error"].clone()),
        (415, json!("bad_content_type"))
    );
    let stale = post_form(
        &c,
        "/db/d",
        form(&[("_rev", &rev)], &[("z.txt", None, b"z")]),
        referer,
    )
    .await;
    assert_eq!(stale.status, 409, "{}", stale.text);
}
