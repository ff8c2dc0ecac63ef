//! `_rewrite`: a design document's `rewrites` (rules, or a function of the
//! request) send a request elsewhere below its database, as CouchDB 3
//! does. The scenarios run on Recliner, and on CouchDB 3.5 too when
//! `COUCHDB_URL` names one, so the expected answers are CouchDB's. A
//! rewritten request passes the same gates as a direct one.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, Reply, TempDir, TestServer};
use serde_json::{Value, json};

/// The rules of CouchDB's own rewrite suite, with the functions they lead to.
fn rules_ddoc() -> Value {
    json!({
        "_id": "_design/test",
        "language": "javascript",
        "_attachments": {
            "foo.txt": {"content_type": "text/plain", "data": "VGhpcyBpcyBhIGJhc2U2NCBlbmNvZGVkIHRleHQ="}
        },
        "rewrites": [
            {"from": "foo", "to": "foo.txt"},
            {"from": "foo2", "to": "foo.txt", "method": "GET"},
            {"from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"},
            {"from": "/welcome", "to": "_show/welcome"},
            {"from": "/welcome/:name", "to": "_show/welcome", "query": {"name": ":name"}},
            {"from": "/welcome2", "to": "_show/welcome", "query": {"name": "user"}},
            {"from": "/welcome3/:name", "to": "_update/welcome2/:name", "method": "PUT"},
            {"from": "/welcome3/:name", "to": "_show/welcome2/:name", "method": "GET"},
            {"from": "/welcome4/*", "to": "_show/welcome3", "query": {"name": "*"}},
            {"from": "/welcome5/*", "to": "_show/*", "query": {"name": "*"}},
            {"from": "basicView", "to": "_view/basicView"},
            {"from": "simpleForm/basicView", "to": "_list/simpleForm/basicView"},
            {"from": "simpleForm/basicViewFixed", "to": "_list/simpleForm/basicView",
             "query": {"startkey": 3, "endkey": 8}},
            {"from": "simpleForm/basicViewPath/:start/:end", "to": "_list/simpleForm/basicView",
             "query": {"startkey": ":start", "endkey": ":end"},
             "formats": {"start": "int", "end": "int"}},
            {"from": "simpleForm/complexView", "to": "_list/simpleForm/complexView",
             "query": {"key": [1, 2]}},
            {"from": "simpleForm/complexView2", "to": "_list/simpleForm/complexView",
             "query": {"key": ["test", {}]}},
            {"from": "simpleForm/complexView3", "to": "_list/simpleForm/complexView",
             "query": {"key": ["test", ["test", "essai"]]}},
            {"from": "simpleForm/complexView4", "to": "_list/simpleForm/complexView2",
             "query": {"key": {"c": 1}}},
            {"from": "simpleForm/complexView5/:a/:b", "to": "_list/simpleForm/complexView3",
             "query": {"key": [":a", ":b"]}},
            {"from": "simpleForm/complexView6", "to": "_list/simpleForm/complexView3",
             "query": {"key": [":a", ":b"]}},
            {"from": "simpleForm/complexView7/:a/:b", "to": "_view/complexView3",
             "query": {"key": [":a", ":b"], "include_docs": ":doc"}},
            {"from": "/", "to": "_view/basicView"},
            {"from": "/db/*", "to": "../../*"}
        ],
        "lists": {"simpleForm": SIMPLE_FORM},
        "shows": shows(),
        "updates": updates(),
        "views": views(),
    })
}

const SIMPLE_FORM: &str = r#"function(head, req) {
    send('<ul>');
    var row, row_number = 0, prevKey, firstKey = null;
    while (row = getRow()) {
        row_number += 1;
        if (!firstKey) firstKey = row.key;
        prevKey = row.key;
        send('\n<li>Key: ' + row.key + ' Value: ' + row.value + ' LineNo: ' + row_number + '</li>');
    }
    return '</ul><p>FirstKey: ' + firstKey + ' LastKey: ' + prevKey + '</p>';
}"#;

fn shows() -> Value {
    json!({
        "welcome": "(function(doc,req) { return 'Welcome ' + req.query['name']; })",
        "welcome2": "(function(doc, req) { return 'Welcome ' + doc.name; })",
        "welcome3": "(function(doc,req) { return 'Welcome ' + req.query['name']; })"
    })
}

fn updates() -> Value {
    json!({
        "hello": "(function(doc, req) { if (!doc) { if (req.id) { return [{_id: req.id}, 'New World']; } return [null, 'Empty World']; } doc.world = 'hello'; doc.edited_by = req.userCtx; return [doc, 'hello doc']; })",
        "welcome2": "(function(doc, req) { if (!doc) { if (req.id) { return [{_id: req.id, name: req.id}, 'New World']; } return [null, 'Empty World']; } return [doc, 'hello doc']; })"
    })
}

fn views() -> Value {
    json!({
        "basicView": {"map": "(function(doc) { if (doc.integer) { emit(doc.integer, doc.string); } })"},
        "complexView": {"map": "(function(doc) { if (doc.type == 'complex') { emit([doc.a, doc.b], doc.string); } })"},
        "complexView2": {"map": "(function(doc) { if (doc.type == 'complex') { emit(doc.a, doc.string); } })"},
        "complexView3": {"map": "(function(doc) { if (doc.type == 'complex') { emit(doc.b, doc.string); } })"}
    })
}

/// The same application as a function of the request.
const REWRITE_FUNCTION: &str = r#"function(req) {
    prefix = req.path[4];
    if (prefix === 'foo') return 'foo.txt';
    if (prefix === 'foo2') return {path: 'foo.txt', method: 'GET'};
    if (prefix === 'hello') {
        if (req.method != 'PUT') return;
        return {path: '_update/hello/' + req.path[5]};
    }
    if (prefix === 'welcome') {
        if (req.path.length == 6) return {path: '_show/welcome', query: {'name': req.path[5]}};
        return '_show/welcome';
    }
    if (prefix === 'welcome2') return {path: '_show/welcome', query: {'name': 'user'}};
    if (prefix === 'welcome3') {
        name = req.path[5];
        if (req.method == 'PUT') return '_update/welcome2/' + name;
        if (req.method == 'GET') return '_show/welcome2/' + name;
        return;
    }
    if (prefix === 'welcome4') return {path: '_show/welcome3', query: {name: req.path[5]}};
    if (prefix === 'welcome5') {
        rest = req.path.slice(5).join('/');
        return {path: '_show/' + rest, query: {name: rest}};
    }
    if (prefix === 'basicView') return {path: '_view/basicView'};
    var tail = req.path.slice(4).join('/');
    if (tail === 'simpleForm/complexView') {
        return {path: '_list/simpleForm/complexView', query: {key: JSON.stringify([1, 2])}};
    }
    if (tail === 'simpleForm/complexView4') {
        return {path: '_list/simpleForm/complexView2', query: {key: JSON.stringify({"c": 1})}};
    }
    if (tail === 'simpleForm/sendBody1') {
        return {path: '_list/simpleForm/complexView2', method: 'POST', query: {limit: '1'},
                headers: {'Content-type': 'application/json'},
                body: JSON.stringify({keys: [{"c": 1}]})};
    }
    if (prefix === 'db') return {path: '../../' + req.path.slice(5).join('/')};
    if (prefix === 'early') {
        var status = parseInt(req.query.status);
        return {code: status, body: JSON.stringify({"status": status}),
                headers: {'x-foo': 'bar', 'Content-Type': 'application/json'}};
    }
    if (prefix === 'uuids') return '../../../_uuids';
    if (prefix === 'loop') return '_rewrite/loop';
    if (prefix === 'changes') return {path: '../../_changes', query: {'filter': '_doc_ids'}};
}"#;

fn function_ddoc() -> Value {
    let mut ddoc = rules_ddoc();
    ddoc["rewrites"] = json!(REWRITE_FUNCTION);
    ddoc
}

async fn fill(c: &Client, db: &str, ddoc: Value) {
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let put = c.put(&format!("/{db}/_design/test"), ddoc).await;
    assert_eq!(put.status, 201, "{}", put.text);
    let mut docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": i.to_string(), "integer": i, "string": i.to_string()}))
        .collect();
    docs.extend([
        json!({"a": 1, "b": 1, "string": "doc 1", "type": "complex"}),
        json!({"a": 1, "b": 2, "string": "doc 2", "type": "complex"}),
        json!({"a": "test", "b": {}, "string": "doc 3", "type": "complex"}),
        json!({"a": "test", "b": ["test", "essai"], "string": "doc 4", "type": "complex"}),
        json!({"a": {"c": 1}, "b": "", "string": "doc 5", "type": "complex"}),
    ]);
    let saved = c
        .post(&format!("/{db}/_bulk_docs"), json!({ "docs": docs }))
        .await;
    assert_eq!(saved.status, 201, "{}", saved.text);
}

async fn get(c: &Client, path: &str) -> Reply {
    c.send("GET", path, None, &[("accept", "*/*")]).await
}

/// What both forms answer alike.
async fn common_answers(c: &Client, db: &str) {
    let at = |p: &str| format!("/{db}/_design/test/_rewrite/{p}");
    for path in ["foo", "foo2"] {
        let text = get(c, &at(path)).await;
        assert_eq!(text.status, 200, "{path}: {}", text.text);
        assert_eq!(text.text, "This is a base64 encoded text");
        assert_eq!(text.header("content-type"), Some("text/plain"));
    }
    let created = c
        .post(
            &format!("/{db}"),
            json!({"word": "plankton", "name": "Rusty"}),
        )
        .await;
    let id = created.json()["id"].as_str().unwrap().to_string();
    let hello = c.send("PUT", &at(&format!("hello/{id}")), None, &[]).await;
    assert_eq!(hello.status, 201, "{}", hello.text);
    assert_eq!(hello.text, "hello doc");
    assert!(
        hello
            .header("content-type")
            .unwrap()
            .contains("charset=utf-8")
    );
    assert_eq!(c.get(&format!("/{db}/{id}")).await.json()["world"], "hello");
    // The update ran as the caller: the rewrite kept who asks.
    let edited = c.get(&format!("/{db}/{id}")).await.json();
    assert_eq!(edited["edited_by"]["roles"], json!(["_admin"]));

    for path in ["welcome?name=user", "welcome/user", "welcome2"] {
        assert_eq!(get(c, &at(path)).await.text, "Welcome user", "{path}");
    }
    let new_world = c.send("PUT", &at("welcome3/test"), None, &[]).await;
    assert_eq!(new_world.status, 201);
    assert_eq!(new_world.text, "New World");
    assert!(
        new_world
            .header("content-type")
            .unwrap()
            .contains("charset=utf-8")
    );
    assert_eq!(get(c, &at("welcome3/test")).await.text, "Welcome test");
    // Only GET and PUT are rewritten there.
    let deleted = c.send("DELETE", &at("welcome3/test"), None, &[]).await;
    assert_eq!(deleted.status, 404);

    let view = c.get(&at("basicView")).await;
    assert_eq!(view.status, 200);
    assert_eq!(view.json()["total_rows"], 9);

    let complex = get(c, &at("simpleForm/complexView")).await;
    assert_eq!(complex.status, 200);
    assert!(complex.text.contains("FirstKey: 1,2"), "{}", complex.text);
    let complex4 = get(c, &at("simpleForm/complexView4")).await;
    assert!(complex4.text.contains("Value: doc 5"), "{}", complex4.text);

    // A path that climbs back into the database (COUCHDB-2031: the query
    // string is not mistaken for a path).
    let meta = c.get(&at("db/_design/test?meta=true")).await;
    assert_eq!(meta.status, 200, "{}", meta.text);
    assert_eq!(meta.json()["_id"], "_design/test");
    assert!(meta.json().get("_revs_info").is_some());
}

async fn rules_answers(c: &Client, db: &str) {
    let at = |p: &str| format!("/{db}/_design/test/_rewrite/{p}");
    // `/` takes the request without a path.
    let root = c.get(&format!("/{db}/_design/test/_rewrite")).await;
    assert_eq!(root.status, 200);
    assert_eq!(root.json()["total_rows"], 9);
    for path in [
        "simpleForm/basicView?startkey=3&endkey=8",
        "simpleForm/basicViewFixed",
        // The rule's own `startkey` wins over the query string's.
        "simpleForm/basicViewFixed?startkey=4",
        "simpleForm/basicViewPath/3/8",
    ] {
        let list = get(c, &at(path)).await;
        assert_eq!(list.status, 200, "{path}: {}", list.text);
        assert!(!list.text.contains("Key: 1 "), "{path}: {}", list.text);
        assert!(
            list.text.contains("FirstKey: 3 LastKey: 8"),
            "{path}: {}",
            list.text
        );
    }
    for (path, value) in [
        ("simpleForm/complexView2", "doc 3"),
        ("simpleForm/complexView3", "doc 4"),
        ("simpleForm/complexView5/test/essai", "doc 4"),
        ("simpleForm/complexView6?a=test&b=essai", "doc 4"),
    ] {
        let list = get(c, &at(path)).await;
        assert_eq!(list.status, 200, "{path}");
        assert!(
            list.text.contains(&format!("Value: {value}")),
            "{path}: {}",
            list.text
        );
    }
    let with_docs = c
        .get(&at("simpleForm/complexView7/test/essai?doc=true"))
        .await;
    assert_eq!(with_docs.status, 200, "{}", with_docs.text);
    assert_eq!(with_docs.json()["rows"][0]["doc"]["string"], "doc 4");
    // `*` as a query value is the text itself when nothing binds it.
    assert_eq!(get(c, &at("welcome4/user")).await.text, "Welcome *");
    assert_eq!(get(c, &at("welcome5/welcome3")).await.text, "Welcome *");
    // No rule takes it.
    let none = c.get(&at("nothing/here")).await;
    assert_eq!(
        (none.status, none.json()),
        (404, json!({"error": "not_found", "reason": "missing"}))
    );
}

async fn function_answers(c: &Client, db: &str) {
    let at = |p: &str| format!("/{db}/_design/test/_rewrite/{p}");
    assert_eq!(get(c, &at("welcome4/user")).await.text, "Welcome user");
    assert_eq!(
        get(c, &at("welcome5/welcome3")).await.text,
        "Welcome welcome3"
    );
    // GET becomes a POST with a body of the function's (COUCHDB-1612).
    let sent = get(c, &at("simpleForm/sendBody1")).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert!(
        sent.text.contains("Value: doc 5 LineNo: 1"),
        "{}",
        sent.text
    );

    // The function answers itself.
    let early = c.get(&at("early?status=200")).await;
    assert_eq!(early.status, 200);
    assert_eq!(early.header("x-foo"), Some("bar"));
    assert_eq!(early.json(), json!({"status": 200}));
    let early = c.get(&at("early?status=451")).await;
    assert_eq!(early.status, 451);
    assert_eq!(early.header("content-type"), Some("application/json"));
    assert_eq!(c.get(&at("early?status=500")).await.status, 500);

    // A function's path may leave the database (checked like any request).
    let uuids = c.get(&at("uuids")).await;
    assert_eq!(uuids.status, 200, "{}", uuids.text);
    assert_eq!(uuids.json()["uuids"].as_array().unwrap().len(), 1);
    let looped = c.get(&at("loop")).await;
    assert_eq!(
        (looped.status, looped.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "Exceeded rewrite recursion limit"})
        )
    );
    // A POST keeps its body, and the query string the function gives.
    for id in ["qs1", "qs2"] {
        c.put(&format!("/{db}/{id}"), json!({})).await;
    }
    let changes = c.post(&at("changes"), json!({"doc_ids": ["qs2"]})).await;
    assert_eq!(changes.status, 200, "{}", changes.text);
    let results = changes.json()["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], "qs2");
    // Nothing to rewrite to.
    let none = c.get(&at("nothing")).await;
    assert_eq!(
        (none.status, none.json()),
        (
            404,
            json!({"error": "rewrite_error", "reason": "Invalid path."})
        )
    );
}

/// CouchDB's answers to rewrites that cannot go anywhere.
async fn error_answers(c: &Client, db: &str) {
    let ddocs = [
        ("norules", json!({"views": {}})),
        (
            "insecure",
            json!({"rewrites": [{"from": "a", "to": "b"}, {"from": "uuids", "to": "../../../_uuids"}]}),
        ),
        ("notarget", json!({"rewrites": [{"from": "a"}]})),
        (
            "numbers",
            json!({"rewrites": [{"from": "n", "to": "x", "query": {"limit": 5}}]}),
        ),
        (
            "fn",
            json!({"rewrites": r#"function(req) {
            var p = req.path[4];
            if (p === 'throw') throw 'boom';
            if (p === 'nopath') return {method: 'GET'};
            if (p === 'badquery') return {path: 'x', query: {a: 1}};
            if (p === 'badcode') return {code: 700};
            if (p === 'badmethod') return {path: 'x', method: 5};
            if (p === 'number') return 5;
            if (p === 'created') return {code: 201};
            return null;
        }"#}),
        ),
    ];
    for (name, ddoc) in ddocs {
        let put = c.put(&format!("/{db}/_design/{name}"), ddoc).await;
        assert_eq!(put.status, 201, "{name}: {}", put.text);
    }
    let refused = c
        .put(
            &format!("/{db}/_design/object"),
            json!({"rewrites": {"from": "a", "to": "b"}}),
        )
        .await;
    assert_eq!(
        (refused.status, refused.json()),
        (
            400,
            json!({"error": "invalid_design_doc", "reason": "`rewrites` field must have array or string type"})
        )
    );
    let cases: &[(&str, u16, Value)] = &[
        (
            "missing/_rewrite/x",
            404,
            json!({"error": "not_found", "reason": "missing"}),
        ),
        (
            "norules/_rewrite",
            404,
            json!({"error": "rewrite_error", "reason": "Invalid path."}),
        ),
        (
            "norules/_rewrite/x",
            404,
            json!({"error": "rewrite_error", "reason": "Invalid path."}),
        ),
        // Every rule is read before one is chosen: the bad one fails them all.
        (
            "insecure/_rewrite/a",
            500,
            json!({"error": "insecure_rewrite_rule", "reason": "too many ../.. segments"}),
        ),
        (
            "notarget/_rewrite/a",
            500,
            json!({"error": "error", "reason": "invalid_rewrite_target"}),
        ),
        (
            "fn/_rewrite/throw",
            500,
            json!({"error": "rewrite_error", "reason": "function raised error: boom \nstacktrace: undefined"}),
        ),
        (
            "fn/_rewrite/nopath",
            500,
            json!({"error": "rewrite_error", "reason": "Rewrite result must produce a new path."}),
        ),
        (
            "fn/_rewrite/badquery",
            500,
            json!({"error": "rewrite_error", "reason": "object key/value must be strings <<\"a\">>=1"}),
        ),
        (
            "fn/_rewrite/badcode",
            500,
            json!({"error": "rewrite_error", "reason": "bad code"}),
        ),
        (
            "fn/_rewrite/badmethod",
            500,
            json!({"error": "rewrite_error", "reason": "bad method"}),
        ),
        (
            "fn/_rewrite/number",
            500,
            json!({"error": "rewrite_error", "reason": "bad rewrite"}),
        ),
        (
            "fn/_rewrite/nothing",
            404,
            json!({"error": "rewrite_error", "reason": "Invalid path."}),
        ),
        // The view keys are JSON to the function, as to shows and lists.
        (
            "fn/_rewrite/nothing?key=bad",
            400,
            json!({"error": "bad_request", "reason": "invalid UTF-8 JSON"}),
        ),
        // ...and read before any rule.
        (
            "notarget/_rewrite/a?key=bad",
            400,
            json!({"error": "bad_request", "reason": "invalid UTF-8 JSON"}),
        ),
    ];
    for (path, status, body) in cases {
        let reply = c.get(&format!("/{db}/_design/{path}")).await;
        assert_eq!(
            (reply.status, reply.json()),
            (*status, body.clone()),
            "{path}"
        );
    }
    // A number where text must be: CouchDB's 500 (its reason names no more).
    let numbers = c.get(&format!("/{db}/_design/numbers/_rewrite/n")).await;
    assert_eq!(numbers.status, 500);
    assert_eq!(numbers.json()["reason"], "badarg");
    // `{code}` alone: that status, an empty body, no headers of ours.
    let created = c.get(&format!("/{db}/_design/fn/_rewrite/created")).await;
    assert_eq!((created.status, created.text.as_str()), (201, ""));
    assert_eq!(created.header("content-type"), None);
    assert_eq!(created.header("cache-control"), None);
}

async fn every_scenario(c: &Client, base: &str) {
    for db in [base.to_string(), format!("{base}%2Fwith_slashes")] {
        let rules_db = format!("{db}-rules");
        fill(c, &rules_db, rules_ddoc()).await;
        common_answers(c, &rules_db).await;
        rules_answers(c, &rules_db).await;
        let function_db = format!("{db}-function");
        fill(c, &function_db, function_ddoc()).await;
        common_answers(c, &function_db).await;
        function_answers(c, &function_db).await;
    }
    let errors_db = format!("{base}-errors");
    assert_eq!(c.put(&format!("/{errors_db}"), json!({})).await.status, 201);
    error_answers(c, &errors_db).await;
}

#[tokio::test]
async fn rewrites_answer_as_couchdb() {
    let data = TempDir::new("rewrite");
    let server = TestServer::start(data.path(), &[]);
    every_scenario(&Client::new(&server), "rw").await;
}

/// The same scenarios on CouchDB: the expectations above are its answers.
#[tokio::test]
async fn the_expectations_are_couchdbs() {
    let Some(couch) = couchdb("the_expectations_are_couchdbs") else {
        return;
    };
    let c = couch.client();
    let base = unique_db("rewrite");
    every_scenario(&c, &base).await;
    for suffix in [
        "-rules",
        "-function",
        "%2Fwith_slashes-rules",
        "%2Fwith_slashes-function",
        "-errors",
    ] {
        c.delete(&format!("/{base}{suffix}")).await;
    }
}

#[tokio::test]
async fn the_limits_are_settings() {
    let data = TempDir::new("rewrite-limits");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let ddocs = [
        (
            "loop",
            json!({"rewrites": [{"from": "loop", "to": "_rewrite/loop"}]}),
        ),
        (
            "chain",
            json!({"rewrites": [{"from": "a", "to": "_rewrite/b"}, {"from": "b", "to": "_rewrite/c"}, {"from": "c", "to": "../../doc"}]}),
        ),
        (
            "up",
            json!({"rewrites": [{"from": "uuids", "to": "../../../_uuids"}]}),
        ),
    ];
    for (name, ddoc) in ddocs {
        assert_eq!(
            c.put(&format!("/db/_design/{name}"), ddoc).await.status,
            201
        );
    }
    c.put("/db/doc", json!({"v": 1})).await;
    // Two rewrites within one request are allowed, a third is not.
    let set = c
        .put("/_node/_local/_config/chttpd/rewrite_limit", json!("2"))
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    let looped = c.get("/db/_design/loop/_rewrite/loop").await;
    assert_eq!(looped.status, 400);
    assert_eq!(looped.json()["reason"], "Exceeded rewrite recursion limit");
    let chain = c.get("/db/_design/chain/_rewrite/b").await;
    assert_eq!((chain.status, chain.json()["v"].clone()), (200, json!(1)));
    assert_eq!(c.get("/db/_design/chain/_rewrite/a").await.status, 400);
    // Requests one after another are not one loop.
    for _ in 0..5 {
        assert_eq!(c.get("/db/_design/chain/_rewrite/b").await.status, 200);
    }
    // Leaving the database takes `secure_rewrites = false`.
    let insecure = c.get("/db/_design/up/_rewrite/uuids").await;
    assert_eq!(insecure.status, 500);
    assert_eq!(insecure.json()["error"], "insecure_rewrite_rule");
    let set = c
        .put(
            "/_node/_local/_config/chttpd/secure_rewrites",
            json!("false"),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    let uuids = c.get("/db/_design/up/_rewrite/uuids").await;
    assert_eq!(uuids.status, 200, "{}", uuids.text);
    assert_eq!(uuids.json()["uuids"].as_array().unwrap().len(), 1);
}

fn as_user(server: &TestServer, name: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{name}-pw@"), 1),
    )
}

/// A rewrite is no side door: what it leads to is judged as if asked
/// directly, by the caller's own rights.
#[tokio::test]
async fn a_rewrite_reaches_nothing_the_front_door_refuses() {
    let data = TempDir::new("rewrite-gates");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    for name in ["bob", "carol"] {
        let user =
            json!({"name": name, "password": format!("{name}-pw"), "roles": [], "type": "user"});
        let created = admin
            .put(&format!("/_users/org.couchdb.user:{name}"), user)
            .await;
        assert_eq!(created.status, 201, "{}", created.text);
    }
    for (db, security) in [
        ("public", json!({"members": {}, "admins": {}})),
        (
            "secret",
            json!({"members": {"names": ["carol"]}, "admins": {}}),
        ),
    ] {
        assert_eq!(admin.put(&format!("/{db}"), json!({})).await.status, 201);
        assert_eq!(
            admin
                .put(&format!("/{db}/_security"), security)
                .await
                .status,
            200
        );
    }
    admin.put("/secret/s1", json!({"card": "4111"})).await;
    let door = json!({
        "rewrites": r#"function(req) {
            var p = req.path[4];
            if (p === 'secret') return '../../../secret/s1';
            if (p === 'config') return '../../../_node/_local/_config';
            if (p === 'security') return {path: '../../_security', method: 'PUT',
                headers: {'Content-Type': 'application/json'},
                body: JSON.stringify({members: {names: ['bob']}, admins: {names: ['bob']}})};
        }"#
    });
    assert_eq!(admin.put("/public/_design/door", door).await.status, 201);
    let rules = json!({"rewrites": [
        {"from": "security", "to": "../../_security", "method": "PUT"},
        {"from": "purge", "to": "../../_purge", "method": "POST"},
    ]});
    assert_eq!(admin.put("/public/_design/rules", rules).await.status, 201);

    let anonymous = Client::anonymous(&server);
    let bob = as_user(&server, "bob");
    let carol = as_user(&server, "carol");
    let same =
        async |c: &Client, method: &str, direct: &str, rewritten: &str, body: Option<Value>| {
            let front = c.send(method, direct, body.clone(), &[]).await;
            let side = c.send(method, rewritten, body, &[]).await;
            assert_eq!(
                (side.status, side.json()),
                (front.status, front.json()),
                "{method} {rewritten} as {direct}"
            );
            side.status
        };
    // A member-only document.
    for c in [&anonymous, &bob] {
        let status = same(
            c,
            "GET",
            "/secret/s1",
            "/public/_design/door/_rewrite/secret",
            None,
        )
        .await;
        assert!(status == 401 || status == 403, "{status}");
    }
    assert_eq!(
        same(
            &carol,
            "GET",
            "/secret/s1",
            "/public/_design/door/_rewrite/secret",
            None
        )
        .await,
        200
    );
    // Server admins' settings.
    for c in [&anonymous, &bob] {
        let status = same(
            c,
            "GET",
            "/_node/_local/_config",
            "/public/_design/door/_rewrite/config",
            None,
        )
        .await;
        assert_eq!(status, 401);
    }
    // The database's admins' security object, by function and by rule.
    let security = json!({"members": {"names": ["bob"]}, "admins": {"names": ["bob"]}});
    for c in [&anonymous, &bob] {
        let front = c
            .send("PUT", "/public/_security", Some(security.clone()), &[])
            .await;
        assert!(front.status == 401 || front.status == 403, "{}", front.text);
        let by_function = c.get("/public/_design/door/_rewrite/security").await;
        assert_eq!(by_function.status, front.status, "{}", by_function.text);
        let by_rule = c
            .send(
                "PUT",
                "/public/_design/rules/_rewrite/security",
                Some(security.clone()),
                &[],
            )
            .await;
        assert_eq!(by_rule.status, front.status, "{}", by_rule.text);
        let purge = json!({"s1": ["1-x"]});
        same(
            c,
            "POST",
            "/public/_purge",
            "/public/_design/rules/_rewrite/purge",
            Some(purge),
        )
        .await;
    }
    assert_eq!(
        admin.get("/public/_security").await.json(),
        json!({"members": {}, "admins": {}})
    );
    // The admin's own rewrite does reach it.
    let by_admin = admin.get("/public/_design/door/_rewrite/security").await;
    assert_eq!(by_admin.status, 200, "{}", by_admin.text);
    assert_eq!(admin.get("/public/_security").await.json(), security);
}
