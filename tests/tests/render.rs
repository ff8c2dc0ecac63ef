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
                    "fmt": "function (doc, req) { provides('json', function () { return {json: {t: doc.title}}; }); provides('html', function () { return '<b>' + doc.title + '</b>'; }); }"
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
    let json_fmt = c.get("/db/_design/r/_show/fmt/page?format=json").await;
    assert_eq!(json_fmt.json(), json!({"t": "Hi"}));
    let html = c
        .send(
            "GET",
            "/db/_design/r/_show/fmt/page",
            None,
            &[("accept", "text/html")],
        )
        .await;
    assert_eq!(html.text, "<b>Hi</b>");
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
