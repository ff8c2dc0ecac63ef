//! Show and update functions: a design document's function renders a
//! document, or changes one, and answers with its own response object.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn show_and_update_functions_answer_with_their_response_objects() {
    let data = TempDir::new("render");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddoc = c
        .put(
            "/db/_design/r",
            json!({
                "shows": {
                    "hello": "function (doc, req) { return '<p>' + (doc ? doc.title : 'none') + ' ' + req.query.x + '</p>'; }",
                    "obj": "function (doc, req) { return {code: 202, headers: {'X-Show': req.id || 'no id'}, json: {id: doc && doc._id}}; }",
                    "fmt": "function (doc, req) { provides('json', function () { return {json: {t: doc.title}}; }); provides('html', function () { return '<b>' + doc.title + '</b>'; }); }",
                    "card": "function (doc, req) { registerType('vcard', 'text/x-vcard', 'text/vcard'); provides('html', function () { return '<p>card</p>'; }); provides('vcard', function () { return 'BEGIN:VCARD ' + doc.title; }); }"
                },
                "updates": {
                    "bump": "function (doc, req) { if (!doc) { return [{_id: req.id || req.uuid, n: 1}, 'created']; } doc.n = (doc.n || 0) + 1; return [doc, {json: {n: doc.n}}]; }",
                    "form": "function (doc, req) { return [null, 'got ' + req.form.a]; }"
                }
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    c.put("/db/page", json!({"title": "Hi"})).await;

    let hello = c.get("/db/_design/r/_show/hello/page?x=1").await;
    assert_eq!(hello.status, 200);
    assert_eq!(hello.text, "<p>Hi 1</p>");
    assert!(
        hello
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let missing = c.get("/db/_design/r/_show/hello/nope?x=2").await;
    assert_eq!(missing.text, "<p>none 2</p>");
    let obj = c.get("/db/_design/r/_show/obj/page").await;
    assert_eq!(obj.status, 202);
    assert_eq!(obj.header("x-show"), Some("page"));
    assert_eq!(obj.json(), json!({"id": "page"}));
    // A provider's `json` is dropped, as CouchDB drops it: only bodies add up.
    let json_fmt = c.get("/db/_design/r/_show/fmt/page?format=json").await;
    assert_eq!(json_fmt.text, "");
    assert_eq!(json_fmt.header("content-type"), Some("application/json"));
    let html = c
        .send(
            "GET",
            "/db/_design/r/_show/fmt/page",
            None,
            &[("accept", "text/html")],
        )
        .await;
    assert_eq!(html.text, "<b>Hi</b>");
    // A type the function registers is chosen by the Accept header.
    let card = c
        .send(
            "GET",
            "/db/_design/r/_show/card/page",
            None,
            &[("accept", "text/vcard")],
        )
        .await;
    assert_eq!(card.text, "BEGIN:VCARD Hi");
    // The type answered is the one the Accept header named, as CouchDB's.
    assert_eq!(card.header("content-type"), Some("text/vcard"));
    assert_eq!(c.get("/db/_design/r/_show/nope/page").await.status, 404);

    let bumped = c
        .send("PUT", "/db/_design/r/_update/bump/counter", None, &[])
        .await;
    assert_eq!(bumped.status, 201, "{}", bumped.text);
    assert_eq!(bumped.text, "created");
    assert_eq!(bumped.header("x-couch-id"), Some("counter"));
    let again = c
        .send("PUT", "/db/_design/r/_update/bump/counter", None, &[])
        .await;
    assert_eq!(again.json(), json!({"n": 2}));
    let rev = again.header("x-couch-update-newrev").unwrap().to_string();
    assert!(rev.starts_with("2-"));
    assert_eq!(c.get("/db/counter").await.json()["n"], 2);
    let form = c
        .send_bytes(
            "POST",
            "/db/_design/r/_update/form",
            b"a=b+c&d=e".to_vec(),
            "application/x-www-form-urlencoded",
        )
        .await;
    assert_eq!((form.status, form.text.as_str()), (200, "got b c"));
}

#[tokio::test]
async fn list_functions_render_a_views_rows() {
    let data = TempDir::new("render-list");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    c.put(
        "/db/_design/l",
        json!({
            "views": {"by_n": {"map": "function (doc) { emit(doc.n, doc.name); }"}},
            "lists": {
                "csv": "function (head, req) { start({headers: {'Content-Type': 'text/csv'}}); send('n,name\\n'); var row; while ((row = getRow())) { send(row.key + ',' + row.value + '\\n'); } return 'rows: ' + head.total_rows; }"
            }
        }),
    )
    .await;
    for (n, name) in [(1, "one"), (2, "two"), (3, "three")] {
        c.put(&format!("/db/d{n}"), json!({"n": n, "name": name}))
            .await;
    }
    let csv = c.get("/db/_design/l/_list/csv/by_n?startkey=2").await;
    assert_eq!(csv.status, 200, "{}", csv.text);
    assert_eq!(csv.header("content-type"), Some("text/csv"));
    assert_eq!(csv.text, "n,name\n2,two\n3,three\nrows: 3");
    // The view of another design document.
    c.put(
        "/db/_design/other",
        json!({"views": {"names": {"map": "function (doc) { emit(doc.name, doc.n); }"}}}),
    )
    .await;
    let other = c.get("/db/_design/l/_list/csv/other/names?limit=1").await;
    assert_eq!(other.text, "n,name\none,1\nrows: 3");
    assert_eq!(c.get("/db/_design/l/_list/nope/by_n").await.status, 404);
}

/// A list function streams: its head and first text reach the client
/// while it still reads rows, the call timeout counts per row (a long list
/// of quick rows is not cut), an error after the head ends the body with
/// CouchDB's error object, and a client that leaves frees the engine.
#[tokio::test]
async fn list_functions_stream_their_rows() {
    let data = TempDir::new("render-list-stream");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_OS_PROCESS_TIMEOUT", "1000"),
            ("RECLINER_QUERY_SERVER_THREADS", "1"),
        ],
    );
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let slow_row = "var until = Date.now() + 2; while (Date.now() < until) {}";
    c.put(
        "/db/_design/l",
        json!({
            "views": {"by_n": {"map": "function (doc) { emit(doc.n, null); }"}},
            "lists": {
                "slow": format!("function (head, req) {{ send('first;'); var row, n = 0; while ((row = getRow())) {{ {slow_row} n++; send(row.key + ';'); }} return 'rows ' + n; }}"),
                "typed": "function (head, req) { provides('text', function () { send('x'); var r; while ((r = getRow())) { send(r.key); } return 'end'; }); }",
                "late": "function (head, req) { send('a'); getRow(); throw new Error('bad'); }",
                "early": "function (head, req) { throw new Error('bad'); }"
            }
        }),
    )
    .await;
    let docs: Vec<serde_json::Value> = (0..1500).map(|n| json!({"n": n})).collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({ "docs": docs }))
            .await
            .status,
        201
    );
    // Build the index first, so the timings below are the list's own.
    c.get("/db/_design/l/_view/by_n?limit=1").await;

    let began = std::time::Instant::now();
    let mut response = c
        .http()
        .get(c.url("/db/_design/l/_list/slow/by_n"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    let first_at = began.elapsed();
    assert!(first.starts_with(b"first;"), "{first:?}");
    let mut body = first.to_vec();
    while let Some(chunk) = response.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let done_at = began.elapsed();
    let text = String::from_utf8(body).unwrap();
    assert!(text.ends_with(";rows 1500"), "{}", &text[text.len() - 40..]);
    assert!(text.contains(";0;1;2;"));
    // Longer than one call's timeout in all, yet not cut; and the first
    // text came long before the last.
    assert!(
        done_at > std::time::Duration::from_millis(1000),
        "{done_at:?}"
    );
    assert!(
        first_at * 4 < done_at,
        "first {first_at:?}, all {done_at:?}"
    );

    let typed = c
        .send(
            "GET",
            "/db/_design/l/_list/typed/by_n?limit=3",
            None,
            &[("accept", "text/plain")],
        )
        .await;
    assert_eq!(typed.text, "x012end");
    // No provider for what the client accepts: CouchDB's 406.
    let refused = c.get("/db/_design/l/_list/typed/by_n?limit=3").await;
    assert_eq!(refused.status, 406);
    assert_eq!(refused.json()["error"], "not_acceptable");
    assert_eq!(
        typed.header("content-type"),
        Some("text/plain; charset=utf-8")
    );

    let late = c.get("/db/_design/l/_list/late/by_n").await;
    assert_eq!(late.status, 200);
    // CouchDB's error object on a line of its own.
    assert!(late.text.starts_with("a\n{"), "{}", late.text);
    assert!(late.text.ends_with("}\n"), "{}", late.text);
    let error: serde_json::Value = serde_json::from_str(&late.text[1..]).unwrap();
    assert_eq!(error["code"], 500);
    assert!(error["error"].is_string() && error["reason"].is_string());

    let early = c.get("/db/_design/l/_list/early/by_n").await;
    assert_eq!(early.status, 500, "{}", early.text);
    assert!(early.json()["error"].is_string());

    // A client that stops reading and leaves: the one engine thread is
    // free again for the next request.
    let mut left = c
        .http()
        .get(c.url("/db/_design/l/_list/slow/by_n"))
        .send()
        .await
        .unwrap();
    assert!(left.chunk().await.unwrap().is_some());
    drop(left);
    let after = c
        .send(
            "GET",
            "/db/_design/l/_list/typed/by_n?limit=2",
            None,
            &[("accept", "text/plain")],
        )
        .await;
    assert_eq!(after.text, "x01end");
}

/// One answer read off a raw connection.
#[derive(Debug)]
struct RawAnswer {
    status: u16,
    /// The header block as sent, lines joined by `\n`.
    head: String,
    body: Vec<u8>,
}

/// Sends `requests` on one connection in one write (pipelined) and reads
/// until the server closes it or `limit` passes; returns every complete
/// answer read.
async fn exchange(
    server: &TestServer,
    requests: &str,
    limit: std::time::Duration,
) -> Vec<RawAnswer> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.plain_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = [0u8; 8192];
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
        bytes.extend_from_slice(&buf[..n]);
    }
    parse_answers(&bytes)
}

/// The complete HTTP/1.1 answers in `bytes`, framed by `Content-Length` or
/// chunked; an answer cut short ends the list.
fn parse_answers(mut bytes: &[u8]) -> Vec<RawAnswer> {
    let mut answers = Vec::new();
    while let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).replace("\r\n", "\n");
        let mut rest = &bytes[end + 4..];
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let header = |name: &str| {
            head.lines()
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        };
        let mut body = Vec::new();
        if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
                    return answers;
                };
                let size = String::from_utf8_lossy(&rest[..line_end]);
                let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16)
                else {
                    return answers;
                };
                rest = &rest[line_end + 2..];
                if rest.len() < size + 2 {
                    return answers;
                }
                body.extend_from_slice(&rest[..size]);
                rest = &rest[size + 2..];
                if size == 0 {
                    break;
                }
            }
        } else {
            let length: usize = header("content-length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            if rest.len() < length {
                return answers;
            }
            body.extend_from_slice(&rest[..length]);
            rest = &rest[length..];
        }
        answers.push(RawAnswer { status, head, body });
        bytes = rest;
    }
    answers
}

/// The `Authorization` header of the test admin.
fn admin_authorization() -> String {
    use base64::Engine;
    let pair = format!(
        "{}:{}",
        recliner_tests::ADMIN,
        recliner_tests::ADMIN_PASSWORD
    );
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// The server frames every answer itself: a list function's
/// `Content-Length` (the body it streams is shorter) is not sent, so the
/// answer ends and the next request on the same connection is answered.
#[tokio::test]
async fn a_list_function_cannot_frame_its_answer() {
    let data = TempDir::new("render-list-framing");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddoc = c
        .put(
            "/db/_design/l",
            json!({
                "views": {"by_n": {"map": "function (doc) { emit(doc.n, null); }"}},
                "lists": {
                    "lying": "function (head, req) { start({headers: {'Content-Length': '9999', 'Content-Type': 'text/plain', 'X-Kept': 'yes'}}); var row; while ((row = getRow())) { send(row.key + ';'); } return 'end'; }",
                    "hop": "function (head, req) { start({headers: {'Connection': 'close', 'Keep-Alive': 'timeout=1', 'Transfer-Encoding': 'identity', 'Trailer': 'X-T', 'Upgrade': 'h2c'}}); return 'hop'; }"
                }
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    c.put("/db/a", json!({"n": 1})).await;
    c.put("/db/b", json!({"n": 2})).await;
    let auth = admin_authorization();
    let requests = format!(
        "GET /db/_design/l/_list/lying/by_n HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET /db/_design/l/_list/hop/by_n HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let answers = exchange(&server, &requests, std::time::Duration::from_secs(10)).await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    let lying = &answers[0];
    assert_eq!(lying.status, 200);
    assert_eq!(String::from_utf8_lossy(&lying.body), "1;2;end");
    assert!(
        !lying
            .head
            .to_ascii_lowercase()
            .contains("content-length: 9999"),
        "{}",
        lying.head
    );
    assert!(
        lying.head.to_ascii_lowercase().contains("x-kept: yes"),
        "{}",
        lying.head
    );
    let hop = &answers[1];
    assert_eq!(String::from_utf8_lossy(&hop.body), "hop");
    let hop_head = hop.head.to_ascii_lowercase();
    for dropped in [
        "connection: close",
        "keep-alive",
        "identity",
        "trailer",
        "upgrade",
    ] {
        assert!(!hop_head.contains(dropped), "{dropped}: {}", hop.head);
    }
    assert_eq!(answers[2].status, 200);
    let welcome: serde_json::Value = serde_json::from_slice(&answers[2].body).unwrap();
    assert_eq!(welcome["couchdb"], "Welcome");
}

/// A show's framing headers are dropped (the answer is the body it
/// returned, framed by the server), and so are header names and values no
/// HTTP message can carry: nothing is injected into the header block.
#[tokio::test]
async fn a_show_function_cannot_frame_its_answer_nor_inject_headers() {
    let data = TempDir::new("render-show-framing");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddoc = c
        .put(
            "/db/_design/s",
            json!({
                "shows": {
                    "framed": "function (doc, req) { return {headers: {'Transfer-Encoding': 'chunked', 'Content-Length': '5'}, body: 'hello world'}; }",
                    "injecting": "function (doc, req) { return {headers: {'X Space': 'a', 'X-Line\\r\\nInjected-Name': 'b', 'X-Split': 'c\\r\\nInjected-Value: d', 'X-Fine': 'kept'}, body: 'fine'}; }"
                }
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    let auth = admin_authorization();
    let requests = format!(
        "GET /db/_design/s/_show/framed HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET /db/_design/s/_show/injecting HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let answers = exchange(&server, &requests, std::time::Duration::from_secs(10)).await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[0].status, 200, "{}", answers[0].head);
    assert_eq!(String::from_utf8_lossy(&answers[0].body), "hello world");
    assert!(!answers[0].head.to_ascii_lowercase().contains("chunked"));
    let injecting = &answers[1];
    assert_eq!(injecting.status, 200, "{}", injecting.head);
    assert_eq!(String::from_utf8_lossy(&injecting.body), "fine");
    let head = injecting.head.to_ascii_lowercase();
    assert!(head.contains("x-fine: kept"), "{}", injecting.head);
    for absent in ["injected", "x space", "x-split", "x-line"] {
        assert!(!head.contains(absent), "{absent}: {}", injecting.head);
    }
    assert_eq!(answers[2].status, 200);

    // Through an ordinary client as well.
    let framed = c.get("/db/_design/s/_show/framed").await;
    assert_eq!((framed.status, framed.text.as_str()), (200, "hello world"));
}
