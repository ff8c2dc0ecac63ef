//! Shows, lists and updates as CouchDB 3.5 answers them: the cases its
//! own suite checks (heads given to `start()`, `provides` and
//! `registerType` by the Accept header, 406 when none fits, 404 for bad
//! paths and missing documents, the request object's paths, `_list` over
//! `_all_docs` and another design document's view, OPTIONS). Expected
//! answers were read off CouchDB 3.5.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

/// A server with `db` holding the design documents `t` (shows, lists,
/// updates and a view) and `o` (a view only), and the document `doc1`.
async fn setup(label: &str) -> (TempDir, TestServer) {
    let data = TempDir::new(label);
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddoc = c
        .put(
            "/db/_design/t",
            json!({
                "shows": {
                    "hello": "function (doc, req) { if (doc) { return 'Hello World'; } return req.id ? 'New World' : 'Empty World'; }",
                    "fail": "function (doc, req) { return doc._id; }",
                    "req": "function (doc, req) { return {json: req}; }",
                    "listapi": "function (doc, req) { start({'X-Couch-Test-Header': 'Yeah'}); send('Hey '); return 'Dude'; }",
                    "provides": "function (doc, req) { registerType('foo', 'application/foo', 'application/x-foo'); provides('html', function () { return 'html ' + doc._id; }); provides('foo', function () { return 'foofoo'; }); }"
                },
                "updates": {
                    "up": "function (doc, req) { return [null, 'up ' + (doc ? doc._id : 'null') + ' ' + req.method]; }",
                    "upfail": "function (doc, req) { return [null, doc._id]; }"
                },
                "lists": {
                    "rows": "function (head, req) { start({headers: {'Content-Type': 'application/json', 'X-Foo': 'bar'}}); var rows = [], row; while ((row = getRow())) { rows.push(row); } return JSON.stringify({head: head, rows: rows}); }",
                    "after": "function (head, req) { getRow(); start({code: 400, headers: {'X-My-Header': 'MyHeader'}}); send('bad request'); }",
                    "html": "function (head, req) { provides('html', function () { send('<ul>'); var row; while ((row = getRow())) { send('<li>' + row.key); } return '</ul>'; }); }"
                },
                "views": {"v": {"map": "function (doc) { if (doc.n) { emit(doc.n, null); } }"}}
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    let other = c
        .put(
            "/db/_design/o",
            json!({"views": {"ov": {"map": "function (doc) { emit(doc._id, 1); }"}}}),
        )
        .await;
    assert_eq!(other.status, 201, "{}", other.text);
    c.put("/db/doc1", json!({"n": 1})).await;
    (data, server)
}

#[tokio::test]
async fn heads_given_to_start_reach_the_answer() {
    let (_data, server) = setup("render-start").await;
    let c = Client::new(&server);
    let rows = c.get("/db/_design/t/_list/rows/v").await;
    assert_eq!(rows.status, 200);
    assert_eq!(rows.header("x-foo"), Some("bar"));
    assert_eq!(rows.header("content-type"), Some("application/json"));
    assert_eq!(
        rows.json(),
        json!({"head": {"total_rows": 1, "offset": 0}, "rows": [{"id": "doc1", "key": 1, "value": null}]})
    );
    // A head given after reading rows, before any text: CouchDB's status
    // and headers are the later head's.
    let after = c.get("/db/_design/t/_list/after/v").await;
    assert_eq!(after.status, 400);
    assert_eq!(after.header("x-my-header"), Some("MyHeader"));
    assert_eq!(after.header("content-security-policy"), Some("sandbox"));
    assert_eq!(after.text, "bad request");
    // In a show, each member given to start() is a header, and what was
    // sent comes before what the function returns.
    let show = c.get("/db/_design/t/_show/listapi/doc1").await;
    assert_eq!(show.status, 200);
    assert_eq!(show.header("x-couch-test-header"), Some("Yeah"));
    assert_eq!(show.text, "Hey Dude");
    // A list's provider over a view read row by row.
    let html = c
        .send(
            "GET",
            "/db/_design/t/_list/html/v",
            None,
            &[("accept", "text/html")],
        )
        .await;
    assert_eq!(
        html.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(html.text, "<ul><li>1</ul>");
}

#[tokio::test]
async fn every_answer_names_couchdb_first_in_its_server_header() {
    let (_data, server) = setup("render-server").await;
    let c = Client::new(&server);
    for path in ["/", "/db", "/db/_design/t/_show/hello/doc1", "/nodb"] {
        let reply = c.get(path).await;
        let value = reply.header("server").unwrap();
        assert!(
            value.starts_with("CouchDB/3.5.0 Recliner/"),
            "{path}: {value}"
        );
    }
    let show = c.get("/db/_design/t/_show/hello/doc1").await;
    assert_eq!(show.header("vary"), Some("Accept"));
    assert_eq!(show.header("content-security-policy"), Some("sandbox"));
    // An answer in `json` is sandboxed too (CouchDB leaves it out): a
    // function may still give it an HTML type.
    let json = c.get("/db/_design/t/_show/req/doc1").await;
    assert_eq!(json.header("content-security-policy"), Some("sandbox"));
}

#[tokio::test]
async fn paths_that_name_no_function_are_invalid() {
    let (_data, server) = setup("render-paths").await;
    let c = Client::new(&server);
    let cases = [
        ("GET", "/db/_design/t/_show/", "show_error"),
        ("GET", "/db/_design/t/_show", "show_error"),
        ("GET", "/db/_design/t/_list/rows", "list_error"),
        ("GET", "/db/_design/t/_list/rows/a/b/c", "list_error"),
        ("POST", "/db/_design/t/_update/", "update_error"),
    ];
    for (method, path, error) in cases {
        let reply = c.send(method, path, None, &[]).await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(
            reply.json(),
            json!({"error": error, "reason": "Invalid path."}),
            "{path}"
        );
    }
    // The design document is looked for first.
    let missing = c.get("/db/_design/nope/_show/").await;
    assert_eq!(
        missing.json(),
        json!({"error": "not_found", "reason": "missing"})
    );
}

#[tokio::test]
async fn providers_are_chosen_by_the_accept_header_or_refused() {
    let (_data, server) = setup("render-provides").await;
    let c = Client::new(&server);
    let accept = |value: &'static str| [("accept", value)];
    // The type of a registered name that the Accept header names is the
    // answer's, not the name's first type.
    let foo = c
        .send(
            "GET",
            "/db/_design/t/_show/provides/doc1",
            None,
            &accept("application/x-foo"),
        )
        .await;
    assert_eq!(foo.status, 200);
    assert_eq!(foo.header("content-type"), Some("application/x-foo"));
    assert_eq!(foo.text, "foofoo");
    let html = c
        .send(
            "GET",
            "/db/_design/t/_show/provides/doc1",
            None,
            &accept("text/html,application/atom+xml; q=0.9"),
        )
        .await;
    assert_eq!(
        html.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(html.text, "html doc1");
    let none = c
        .send(
            "GET",
            "/db/_design/t/_show/provides/doc1",
            None,
            &accept("text/monkeys"),
        )
        .await;
    assert_eq!(none.status, 406);
    assert_eq!(
        none.json(),
        json!({"error": "not_acceptable", "reason": "Content-Type text/monkeys not supported, try one of: application/foo, application/x-foo, text/html; charset=utf-8"})
    );
}

#[tokio::test]
async fn missing_documents_and_refused_methods() {
    let (_data, server) = setup("render-missing").await;
    let c = Client::new(&server);
    // The function runs with a null document; when it fails, 404.
    let fail = c.get("/db/_design/t/_show/fail/nodoc").await;
    assert_eq!(fail.status, 404);
    assert_eq!(
        fail.json(),
        json!({"error": "not_found", "reason": "document not found"})
    );
    assert_eq!(
        c.get("/db/_design/t/_show/hello/nodoc").await.text,
        "New World"
    );
    // Without a document id, the failure is the function's.
    let no_id = c.get("/db/_design/t/_show/fail").await;
    assert_eq!(no_id.status, 500);
    assert_eq!(no_id.json()["error"], "render_error");
    let up = c
        .send("POST", "/db/_design/t/_update/up/nodoc", None, &[])
        .await;
    assert_eq!((up.status, up.text.as_str()), (200, "up null POST"));
    let upfail = c
        .send("POST", "/db/_design/t/_update/upfail/nodoc", None, &[])
        .await;
    assert_eq!(upfail.status, 500);
    assert_eq!(upfail.json()["error"], "render_error");
    assert!(
        upfail.json()["reason"]
            .as_str()
            .unwrap()
            .starts_with("function raised error: TypeError"),
        "{}",
        upfail.text
    );
    let get = c.get("/db/_design/t/_update/up/doc1").await;
    assert_eq!(get.status, 405);
    assert_eq!(
        get.json(),
        json!({"error": "method_not_allowed", "reason": "Update functions do not allow GET"})
    );
    // Any other method runs the function, which sees it.
    let delete = c
        .send("DELETE", "/db/_design/t/_update/up/doc1", None, &[])
        .await;
    assert_eq!(
        (delete.status, delete.text.as_str()),
        (200, "up doc1 DELETE")
    );
}

#[tokio::test]
async fn the_request_object_holds_the_path_as_sent() {
    let (_data, server) = setup("render-req").await;
    let c = Client::new(&server);
    let req = c
        .send(
            "GET",
            "/db/_design/t/_show/req/doc1?a=1&b=%22x%22",
            None,
            &[("x-foo", "bar")],
        )
        .await
        .json();
    assert_eq!(req["id"], "doc1");
    assert_eq!(
        req["path"],
        json!(["db", "_design", "t", "_show", "req", "doc1"])
    );
    // As CouchDB splits it: the query stays in the last segment, decoded.
    assert_eq!(
        req["requested_path"],
        json!(["db", "_design", "t", "_show", "req", "doc1?a=1&b=\"x\""])
    );
    assert_eq!(
        req["raw_path"],
        "/db/_design/t/_show/req/doc1?a=1&b=%22x%22"
    );
    assert_eq!(req["query"], json!({"a": "1", "b": "\"x\""}));
    assert_eq!(req["headers"]["X-Foo"], "bar");
    assert_eq!(req["info"]["db_name"], "db");
    // Headers by name, as CouchDB lists them.
    let names: Vec<&String> = req["headers"].as_object().unwrap().keys().collect();
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| n.to_ascii_lowercase());
    assert_eq!(names, sorted);
    let keys: Vec<&String> = req.as_object().unwrap().keys().collect();
    assert_eq!(keys[..3], ["info", "uuid", "id"]);
}

#[tokio::test]
async fn lists_read_all_docs_and_other_design_documents_views() {
    let (_data, server) = setup("render-all-docs").await;
    let c = Client::new(&server);
    let listed = c.get("/db/_design/t/_list/rows/_all_docs").await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let all = c.get("/db/_all_docs").await.json();
    let listed = listed.json();
    assert_eq!(listed["head"], json!({"total_rows": 3, "offset": 0}));
    assert_eq!(listed["rows"], all["rows"]);
    // Its parameters and keys are `_all_docs`' own.
    let keyed = c
        .send(
            "POST",
            "/db/_design/t/_list/rows/_all_docs?include_docs=true",
            Some(json!({"keys": ["doc1", "zz"]})),
            &[],
        )
        .await
        .json();
    assert_eq!(keyed["rows"][0]["doc"]["n"], 1);
    // A key that names no document, as CouchDB hands it to the function.
    assert_eq!(
        keyed["rows"][1],
        json!({"id": "error", "key": "zz", "value": "not_found"})
    );
    // A POST's body is read as CouchDB reads it.
    let keys = c
        .send(
            "POST",
            "/db/_design/t/_list/rows/v",
            Some(json!({"keys": [1, 2]})),
            &[],
        )
        .await
        .json();
    assert_eq!(
        keys["rows"],
        json!([{"id": "doc1", "key": 1, "value": null}])
    );
    let plain = c
        .send(
            "POST",
            "/db/_design/t/_list/rows/v",
            None,
            &[("content-type", "text/plain")],
        )
        .await;
    assert_eq!(
        (plain.status, plain.json()),
        (
            415,
            json!({"error": "bad_content_type", "reason": "Content-Type must be application/json"})
        )
    );
    let empty = c
        .send(
            "POST",
            "/db/_design/t/_list/rows/v",
            None,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(
        (empty.status, empty.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "Missing request body"})
        )
    );
    let other = c.get("/db/_design/t/_list/rows/o/ov").await.json();
    assert_eq!(
        other["rows"],
        json!([{"id": "doc1", "key": "doc1", "value": 1}])
    );
    let missing = c.get("/db/_design/t/_list/rows/o/nov").await;
    assert_eq!(
        (missing.status, missing.json()),
        (
            404,
            json!({"error": "not_found", "reason": "missing_named_view"})
        )
    );
}

#[tokio::test]
async fn options_runs_shows_lists_and_updates() {
    let (_data, server) = setup("render-options").await;
    let c = Client::new(&server);
    let show = c
        .send("OPTIONS", "/db/_design/t/_show/hello/doc1", None, &[])
        .await;
    assert_eq!((show.status, show.text.as_str()), (200, "Hello World"));
    let list = c
        .send("OPTIONS", "/db/_design/t/_list/rows/v", None, &[])
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["rows"][0]["id"], "doc1");
    let update = c
        .send("OPTIONS", "/db/_design/t/_update/up", None, &[])
        .await;
    assert_eq!(
        (update.status, update.text.as_str()),
        (200, "up null OPTIONS")
    );
}

#[tokio::test]
async fn updates_write_and_answer_as_couchdb() {
    let data = TempDir::new("render-updates");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddoc = c
        .put(
            "/db/_design/u",
            json!({"updates": {
                "create": "function (doc, req) { return [{_id: req.id}, 'made']; }",
                "empty": "function (doc, req) { return [{}, 'oops']; }",
                "code": "function (doc, req) { return [null, {code: 302}]; }",
                "uuid": "function (doc, req) { return [null, req.uuid]; }"
            }}),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    // The new document's id, percent-encoded as CouchDB writes it.
    let made = c
        .send("PUT", "/db/_design/u/_update/create/x/y%20z", None, &[])
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.header("x-couch-id"), Some("x%2Fy%20z"));
    assert_eq!(c.get("/db/x%2Fy%20z").await.status, 200);
    let empty = c
        .send("PUT", "/db/_design/u/_update/empty/foo", None, &[])
        .await;
    assert_eq!(empty.status, 400);
    assert_eq!(
        empty.json(),
        json!({"error": "illegal_docid", "reason": "Document id must not be empty"})
    );
    // A response without a body is CouchDB's empty JSON answer.
    let code = c
        .send("PUT", "/db/_design/u/_update/code/", None, &[])
        .await;
    assert_eq!(code.status, 302);
    assert_eq!(code.header("content-type"), Some("application/json"));
    assert_eq!(code.text, "");
    let uuid = c.send("PUT", "/db/_design/u/_update/uuid", None, &[]).await;
    assert_eq!((uuid.status, uuid.text.len()), (200, 32));
    // A trailing slash names no document.
    let create = c
        .send("PUT", "/db/_design/u/_update/create/", None, &[])
        .await;
    assert_eq!(create.status, 400, "{}", create.text);
    assert_eq!(create.json()["reason"], "Document id must be a string");
}

#[tokio::test]
async fn with_cors_a_preflight_is_answered_before_any_function() {
    let data = TempDir::new("render-cors");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_CORS_ENABLED", "true"),
            ("RECLINER_CORS_ORIGINS", "https://app.example"),
        ],
    );
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    c.put(
        "/db/_design/t",
        json!({"shows": {"hello": "function (doc, req) { return 'Hello World'; }"}}),
    )
    .await;
    let preflight = c
        .send(
            "OPTIONS",
            "/db/_design/t/_show/hello",
            None,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "GET"),
            ],
        )
        .await;
    assert!(preflight.status < 300, "{}", preflight.status);
    assert_ne!(preflight.text, "Hello World");
    assert!(
        preflight
            .header("access-control-allow-methods")
            .unwrap()
            .contains("GET")
    );
    // Answers the CORS layer gives name their server too.
    assert!(
        preflight
            .header("server")
            .unwrap()
            .starts_with("CouchDB/3.5.0 Recliner/")
    );
}

/// A list over `_all_docs` holds its rows whole, so they are bounded as
/// any JSON held whole (`max_json_body_size`): more is a clear 400, and a
/// smaller page of the same rows is listed.
#[tokio::test]
async fn a_list_over_all_docs_is_bounded_by_the_json_body_size() {
    let data = TempDir::new("render-all-docs-bound");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_MAX_JSON_BODY_SIZE", "4096")]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let list = "function (head, req) { var n = 0; while (getRow()) { n++; } return String(n); }";
    let ddoc = json!({"lists": {"count": list}});
    assert_eq!(c.put("/db/_design/t", ddoc).await.status, 201);
    let docs: Vec<_> = (0..100)
        .map(|i| json!({"_id": format!("doc{i:03}"), "pad": "x".repeat(100)}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({"docs": docs})).await.status,
        201
    );
    let all = c
        .get("/db/_design/t/_list/count/_all_docs?include_docs=true")
        .await;
    assert_eq!(all.status, 400, "{}", all.text);
    assert!(
        all.json()["reason"]
            .as_str()
            .unwrap()
            .contains("max_json_body_size")
    );
    let page = c.get("/db/_design/t/_list/count/_all_docs?limit=5").await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.text, "5");
}
