//! Attachments of the types CouchDB compresses (`[attachments]
//! compressible_types`) are stored gzip-compressed exactly as CouchDB 3.5
//! stores them, by every way they can arrive: the digest (the MD5 of the
//! compressed bytes), the encoded length and the revision id are CouchDB's,
//! and the content read back is the same. Needs `COUCHDB_URL` (set by
//! `cargo xtask test`) except for the configuration test at the end.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine;
use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, Reply, TempDir, TestServer};
use serde_json::{Value, json};

/// The same database on both servers.
struct Pair {
    couch: Client,
    recliner: Client,
    couch_db: String,
}

const RECLINER_DB: &str = "gz";

impl Pair {
    /// A new Recliner beside CouchDB, and a fresh database on each.
    async fn start(couch: Client, label: &str) -> (TempDir, TestServer, Pair) {
        let data = TempDir::new(label);
        let server = TestServer::start(data.path(), &[]);
        let pair = Pair {
            couch,
            recliner: Client::new(&server),
            couch_db: unique_db(label),
        };
        let c = pair
            .couch
            .put(&format!("/{}", pair.couch_db), json!({}))
            .await;
        let r = pair
            .recliner
            .put(&format!("/{RECLINER_DB}"), json!({}))
            .await;
        assert_eq!((c.status, r.status), (201, 201), "{} / {}", c.text, r.text);
        (data, server, pair)
    }

    async fn both(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> (Reply, Reply) {
        let send = |client: &Client, db: &str| {
            let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let mut request = client
                .http()
                .request(method, client.url(&format!("/{db}{path}")))
                .header("accept", "application/json")
                // Form uploads must come from a page of the same server.
                .header(
                    "referer",
                    recliner_tests::without_credentials(&client.url("/")),
                )
                .body(body.to_vec());
            for (k, v) in headers {
                request = request.header(*k, *v);
            }
            async move {
                let response = request.send().await.unwrap();
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let bytes = response.bytes().await.unwrap();
                Reply {
                    status,
                    headers,
                    text: String::from_utf8_lossy(&bytes).into_owned(),
                }
            }
        };
        let c = send(&self.couch, &self.couch_db).await;
        let r = send(&self.recliner, RECLINER_DB).await;
        (c, r)
    }

    /// A write both must accept with the same revision.
    async fn same_rev(&self, method: &str, path: &str, body: &[u8], content_type: &str) -> String {
        let (c, r) = self
            .both(method, path, body, &[("content-type", content_type)])
            .await;
        assert!(
            (200..300).contains(&c.status),
            "CouchDB: {method} {path}: {} {}",
            c.status,
            c.text
        );
        assert_eq!(r.status, c.status, "{method} {path}: Recliner {}", r.text);
        let (cj, rj) = (c.json(), r.json());
        assert_eq!(
            rj["rev"], cj["rev"],
            "{method} {path}: Recliner's revision differs from CouchDB's"
        );
        cj["rev"].as_str().unwrap().to_string()
    }

    /// The document's attachment stubs, with their encoding, are the same.
    async fn same_stubs(&self, id: &str) -> Value {
        let (c, r) = self
            .both("GET", &format!("/{id}?att_encoding_info=true"), b"", &[])
            .await;
        assert_eq!((c.status, r.status), (200, 200), "{} / {}", c.text, r.text);
        let (cj, rj) = (c.json(), r.json());
        assert_eq!(
            rj["_attachments"], cj["_attachments"],
            "{id}: Recliner's attachment stubs differ from CouchDB's"
        );
        cj["_attachments"].clone()
    }

    /// An attachment reads back as the same content from both, and as the
    /// same gzip bytes to a client that takes gzip.
    async fn same_content(&self, id: &str, name: &str, content: &[u8]) {
        let path = format!("/{id}/{name}");
        let (c, r) = self.both("GET", &path, b"", &[]).await;
        assert_eq!((c.status, r.status), (200, 200));
        assert_eq!(c.text.as_bytes(), content, "CouchDB's content of {path}");
        assert_eq!(r.text, c.text, "Recliner's content of {path}");
        let raw = |client: &Client, db: &str| {
            let url = client.url(&format!("/{db}{path}"));
            let http = client.http().clone();
            async move {
                let response = http
                    .get(url)
                    .header("accept-encoding", "gzip")
                    .send()
                    .await
                    .unwrap();
                let encoding = response
                    .headers()
                    .get("content-encoding")
                    .map(|v| v.to_str().unwrap().to_string());
                (encoding, response.bytes().await.unwrap().to_vec())
            }
        };
        let c = raw(&self.couch, &self.couch_db).await;
        let r = raw(&self.recliner, RECLINER_DB).await;
        assert_eq!(c.0.as_deref(), Some("gzip"), "CouchDB sends {path} gzipped");
        assert_eq!(r, c, "Recliner sends the gzip bytes CouchDB sends");
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Text that compresses but not to nothing: lines of varied words.
fn text(lines: usize) -> String {
    let words = [
        "couch",
        "recliner",
        "replicate",
        "revision",
        "seq",
        "digest",
    ];
    (0..lines)
        .map(|i| {
            format!(
                "{i}: {} {} {}\n",
                words[i % 6],
                words[(i * 7) % 6],
                i * 31 % 977
            )
        })
        .collect()
}

#[tokio::test]
async fn text_attachments_are_stored_as_couchdb_stores_them() {
    let Some(couch) = couchdb("text_attachments_are_stored_as_couchdb_stores_them") else {
        return;
    };
    let (_data, _server, pair) = Pair::start(couch.client(), "gzip").await;

    // Inline, beside an attachment of a type stored as sent.
    let note = text(40);
    let doc = json!({"v": 1, "_attachments": {
        "note.txt": {"content_type": "text/plain", "data": b64(note.as_bytes())},
        "page.html": {"content_type": "TEXT/HTML; charset=utf-8", "data": b64(b"<p>hi</p>")},
        "raw.bin": {"content_type": "application/octet-stream", "data": b64(note.as_bytes())},
    }});
    let rev = pair
        .same_rev(
            "PUT",
            "/inline",
            doc.to_string().as_bytes(),
            "application/json",
        )
        .await;
    let stubs = pair.same_stubs("inline").await;
    assert_eq!(stubs["note.txt"]["encoding"], "gzip");
    assert!(stubs["raw.bin"].get("encoding").is_none());
    pair.same_content("inline", "note.txt", note.as_bytes())
        .await;

    // An edit keeping them as stubs, then a standalone upload beside them.
    let edit = json!({"_rev": rev, "v": 2, "_attachments": stubs});
    let rev = pair
        .same_rev(
            "PUT",
            "/inline",
            edit.to_string().as_bytes(),
            "application/json",
        )
        .await;
    let script = text(25).replace('\n', ";\n");
    pair.same_rev(
        "PUT",
        &format!("/inline/app.js?rev={rev}"),
        script.as_bytes(),
        "application/javascript",
    )
    .await;
    pair.same_stubs("inline").await;
    pair.same_content("inline", "app.js", script.as_bytes())
        .await;

    // _bulk_docs large enough to be prepared in chunks, JSON attachments.
    let docs: Vec<Value> = (0..20)
        .map(|i| {
            json!({"_id": format!("bulk-{i}"), "_attachments": {
                "d.json": {"content_type": "application/json",
                           "data": b64(json!({"i": i, "text": text(i + 1)}).to_string().as_bytes())}
            }})
        })
        .collect();
    let body = json!({ "docs": docs }).to_string();
    let (c, r) = pair
        .both(
            "POST",
            "/_bulk_docs",
            body.as_bytes(),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!((c.status, r.status), (201, 201), "{} / {}", c.text, r.text);
    assert_eq!(r.json(), c.json(), "the same revisions from _bulk_docs");
    pair.same_stubs("bulk-19").await;

    // Inline data too large to keep in memory, sent before its content
    // type: stored first, compressed once the type is known.
    let big = text(60_000);
    assert!(big.len() > 1 << 20);
    let body = format!(
        r#"{{"_attachments": {{"big.txt": {{"data": "{}", "content_type": "text/plain"}}}}}}"#,
        b64(big.as_bytes())
    );
    pair.same_rev("PUT", "/big", body.as_bytes(), "application/json")
        .await;
    pair.same_stubs("big").await;
    pair.same_content("big", "big.txt", big.as_bytes()).await;

    // multipart/related, the attachment following the JSON.
    let xml = format!("<notes>{}</notes>", text(30));
    let json_part = json!({"_attachments": {"n.xml": {
        "content_type": "application/xml", "follows": true, "length": xml.len()}}});
    let body = format!(
        "--B\r\nContent-Type: application/json\r\n\r\n{json_part}\r\n\
         --B\r\nContent-Type: application/xml\r\n\r\n{xml}\r\n--B--"
    );
    pair.same_rev(
        "PUT",
        "/related",
        body.as_bytes(),
        "multipart/related; boundary=B",
    )
    .await;
    pair.same_stubs("related").await;
    pair.same_content("related", "n.xml", xml.as_bytes()).await;

    // A browser's form upload.
    let rev = pair
        .same_rev("PUT", "/form", br#"{"v": 1}"#, "application/json")
        .await;
    let csv = text(35).replace(' ', ",");
    let body = format!(
        "--F\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n{rev}\r\n\
         --F\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"t.csv\"\r\n\
         Content-Type: text/csv\r\n\r\n{csv}\r\n--F--\r\n"
    );
    let (c, r) = pair
        .both(
            "POST",
            "/form",
            body.as_bytes(),
            &[("content-type", "multipart/form-data; boundary=F")],
        )
        .await;
    assert_eq!((c.status, r.status), (201, 201), "{} / {}", c.text, r.text);
    assert_eq!(r.json()["rev"], c.json()["rev"], "form upload revisions");
    pair.same_stubs("form").await;
    pair.same_content("form", "t.csv", csv.as_bytes()).await;
}

#[tokio::test]
async fn an_upload_sent_gzipped_is_kept_as_sent() {
    let Some(couch) = couchdb("an_upload_sent_gzipped_is_kept_as_sent") else {
        return;
    };
    let (_data, _server, pair) = Pair::start(couch.client(), "gzsent").await;
    let content = text(50);
    // Compressed at another level than CouchDB's: kept as sent, not redone.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
    std::io::Write::write_all(&mut gz, content.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let (c, r) = pair
        .both(
            "PUT",
            "/sent/a.txt",
            &gz,
            &[("content-type", "text/plain"), ("content-encoding", "gzip")],
        )
        .await;
    assert_eq!((c.status, r.status), (201, 201), "{} / {}", c.text, r.text);
    assert_eq!(r.json()["rev"], c.json()["rev"]);
    let (c, r) = pair
        .both("GET", "/sent?att_encoding_info=true", b"", &[])
        .await;
    let (c, r) = (
        &c.json()["_attachments"]["a.txt"],
        &r.json()["_attachments"]["a.txt"],
    );
    for field in ["digest", "encoding", "encoded_length", "content_type"] {
        assert_eq!(r[field], c[field], "{field}");
    }
    // CouchDB reports the encoded length as `length` here; Recliner the
    // content's, which is what a reader gets.
    assert_eq!(r["length"], content.len());
    pair.same_content("sent", "a.txt", content.as_bytes()).await;

    // An encoding CouchDB does not take.
    let (c, r) = pair
        .both(
            "PUT",
            "/sent2/a.txt",
            b"x",
            &[("content-type", "text/plain"), ("content-encoding", "br")],
        )
        .await;
    assert_eq!((c.status, r.status), (415, 415));
    assert_eq!(r.json(), c.json());
}

/// `[attachments]` changes through `_config` apply to the next upload.
#[tokio::test]
async fn compression_follows_the_attachments_configuration() {
    let data = TempDir::new("gzip-config");
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    client.put("/c", json!({})).await;
    let stub = async |id: &str, content_type: &str| -> Value {
        let doc = json!({"_attachments": {"a": {"content_type": content_type, "data": b64(b"some text, some text")}}});
        assert_eq!(client.put(&format!("/c/{id}"), doc).await.status, 201);
        client
            .get(&format!("/c/{id}?att_encoding_info=true"))
            .await
            .json()["_attachments"]["a"]
            .clone()
    };
    let plain_digest = {
        use md5::Digest;
        format!("md5-{}", b64(&md5::Md5::digest(b"some text, some text")))
    };
    assert_eq!(stub("default", "text/plain").await["encoding"], "gzip");
    assert!(
        stub("other", "application/x-note")
            .await
            .get("encoding")
            .is_none()
    );

    let set = async |key: &str, value: &str| {
        let reply = client
            .send(
                "PUT",
                &format!("/_node/_local/_config/attachments/{key}"),
                Some(json!(value)),
                &[],
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    };
    set("compressible_types", "application/x-*").await;
    assert_eq!(
        stub("custom", "application/x-note").await["encoding"],
        "gzip"
    );
    let text = stub("text-now", "text/plain").await;
    assert!(text.get("encoding").is_none());
    assert_eq!(text["digest"], plain_digest.as_str());

    set("compression_level", "0").await;
    let off = stub("off", "application/x-note").await;
    assert!(off.get("encoding").is_none());
    assert_eq!(off["digest"], plain_digest.as_str());

    let reply = client
        .send(
            "PUT",
            "/_node/_local/_config/attachments/compression_level",
            Some(json!("12")),
            &[],
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
}
