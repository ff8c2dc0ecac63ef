#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

fn ddoc(db: &str, body: Value) -> DesignDoc {
    let id = body["_id"].as_str().unwrap_or("_design/t").to_string();
    DesignDoc {
        db: db.into(),
        id,
        rev: body["_rev"].as_str().unwrap_or("1-a").to_string(),
        json: body.to_string().into(),
    }
}

fn engine() -> Engine {
    Engine::new(Limits {
        threads: 2,
        extra_threads: 2,
        timeout: Duration::from_millis(300),
        memory: 32 << 20,
        contexts_per_thread: 4,
    })
}

const VDU: &str = r#"function (newDoc, oldDoc, userCtx, secObj) {
    if (newDoc.forbid) throw({forbidden: "no " + newDoc.forbid});
    if (newDoc.who && userCtx.name !== newDoc.who) throw({unauthorized: "only " + newDoc.who});
    if (newDoc.odd) throw({odd: "an odd refusal"});
    if (newDoc.text) throw("plain text");
    if (newDoc.bug) return newDoc.missing.field;
    if (oldDoc && oldDoc.locked) throw({forbidden: "locked by " + secObj.admins.names[0]});
    if (this._id !== "_design/v") throw({forbidden: "this is not the design document"});
}"#;

async fn validate(e: &Engine, new_doc: Value, old_doc: Option<Value>) -> Result<Verdict, JsError> {
    e.validate(
        ddoc(
            "db",
            json!({"_id": "_design/v", "validate_doc_update": VDU}),
        ),
        new_doc.to_string(),
        old_doc.map(|d| d.to_string()),
        json!({"db": "db", "name": "bob", "roles": []}).to_string(),
        json!({"admins": {"names": ["alice"]}}).to_string(),
    )
    .await
}

#[tokio::test]
async fn validate_doc_update_answers_as_couchdb_reads_it() {
    let e = engine();
    assert_eq!(
        validate(&e, json!({"_id": "a"}), None).await,
        Ok(Verdict::Accepted)
    );
    assert_eq!(
        validate(&e, json!({"forbid": "x"}), None).await,
        Ok(Verdict::Forbidden("no x".into()))
    );
    assert_eq!(
        validate(&e, json!({"who": "carol"}), None).await,
        Ok(Verdict::Unauthorized("only carol".into()))
    );
    assert_eq!(
        validate(&e, json!({"who": "bob"}), None).await,
        Ok(Verdict::Accepted)
    );
    assert_eq!(
        validate(&e, json!({"odd": 1}), None).await,
        Ok(Verdict::Other("an odd refusal".into()))
    );
    assert_eq!(
        validate(&e, json!({"text": 1}), None).await,
        Ok(Verdict::Other("plain text".into()))
    );
    assert_eq!(
        validate(&e, json!({}), Some(json!({"locked": true}))).await,
        Ok(Verdict::Forbidden("locked by alice".into()))
    );
    match validate(&e, json!({"bug": 1}), None).await {
        Err(JsError::Runtime { error, .. }) => assert_eq!(error, "TypeError"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn missing_and_broken_functions_get_couchdbs_errors() {
    let e = engine();
    let none = ddoc("db", json!({"_id": "_design/none"}));
    match e.filter(none, "f", &["{}".into()], "{}".into()).await {
        Err(JsError::Runtime { error, reason }) => {
            assert_eq!(error, "not_found");
            assert_eq!(
                reason,
                "missing filters function f on design doc _design/none"
            );
        }
        other => panic!("{other:?}"),
    }
    let broken = ddoc(
        "db",
        json!({"_id": "_design/broken", "filters": {"f": "function (doc { return true; }", "g": "42"}}),
    );
    for name in ["f", "g"] {
        match e
            .filter(broken.clone(), name, &["{}".into()], "{}".into())
            .await
        {
            Err(JsError::Runtime { error, .. }) => assert_eq!(error, "compilation_error"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn filters_see_each_document_and_the_request() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/f", "filters": {
            "by_type": "function (doc, req) { return doc.type === req.query.type; }",
            "truthy": "function (doc) { return doc.n; }"
        }}),
    );
    let docs: Vec<String> = [json!({"type": "a", "n": 0}), json!({"type": "b", "n": 2})]
        .iter()
        .map(Value::to_string)
        .collect();
    let req = json!({"query": {"type": "b"}}).to_string();
    assert_eq!(
        e.filter(d.clone(), "by_type", &docs, req).await,
        Ok(vec![false, true])
    );
    assert_eq!(
        e.filter(d, "truthy", &docs, "{}".into()).await,
        Ok(vec![false, true])
    );
}

#[tokio::test]
async fn a_view_filter_passes_documents_that_emit() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/v", "views": {"evens": {
            "map": "function (doc) { if (doc.n % 2 === 0) { emit(doc.n, null); } }"
        }}}),
    );
    let docs: Vec<String> = (0..4).map(|n| json!({ "n": n }).to_string()).collect();
    assert_eq!(
        e.filter_view(d, "evens", &docs).await,
        Ok(vec![true, false, true, false])
    );
}

#[tokio::test]
async fn commonjs_modules_load_from_the_design_document() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/m",
            "lib": {
                "kinds": "exports.wanted = require('./words').list;",
                "words": "exports.list = ['keep'];"
            },
            "filters": {"f": "function (doc) { return require('lib/kinds').wanted.indexOf(doc.kind) >= 0; }",
                        "bad": "function (doc) { return require('lib/nothing'); }"}}),
    );
    let docs = vec![
        json!({"kind": "keep"}).to_string(),
        json!({"kind": "drop"}).to_string(),
    ];
    assert_eq!(
        e.filter(d.clone(), "f", &docs, "{}".into()).await,
        Ok(vec![true, false])
    );
    match e.filter(d, "bad", &docs, "{}".into()).await {
        Err(JsError::Runtime { error, .. }) => assert_eq!(error, "invalid_require_path"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_function_that_never_ends_times_out_and_the_engine_goes_on() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/loop", "filters": {
            "forever": "function (doc) { while (true) {} }",
            "fine": "function (doc) { return true; }"
        }}),
    );
    let started = Instant::now();
    let result = e
        .filter(d.clone(), "forever", &["{}".into()], "{}".into())
        .await;
    assert_eq!(result, Err(JsError::Timeout(Duration::from_millis(300))));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        e.filter(d, "fine", &["{}".into()], "{}".into()).await,
        Ok(vec![true])
    );
}

#[tokio::test]
async fn a_function_that_exhausts_memory_fails_and_the_engine_goes_on() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/mem", "filters": {
            "hog": "function (doc) { var a = []; while (true) { a.push(new Array(100000).fill(1)); } }",
            "fine": "function (doc) { return true; }"
        }}),
    );
    assert_eq!(
        e.filter(d.clone(), "hog", &["{}".into()], "{}".into())
            .await,
        Err(JsError::OutOfMemory)
    );
    assert_eq!(
        e.filter(d, "fine", &["{}".into()], "{}".into()).await,
        Ok(vec![true])
    );
}

#[tokio::test]
async fn design_documents_share_no_globals_and_reach_no_io() {
    let e = engine();
    let writer = ddoc(
        "db",
        json!({"_id": "_design/a", "filters": {"f": "function (doc) { leaked = 1; return true; }"}}),
    );
    let reader = ddoc(
        "db",
        json!({"_id": "_design/b", "filters": {"f": "function (doc) { return typeof leaked !== 'undefined'; }",
            "io": "function (doc) { return typeof setTimeout !== 'undefined' || typeof std !== 'undefined' || typeof os !== 'undefined' || typeof fetch !== 'undefined'; }"}}),
    );
    let one = vec!["{}".to_string()];
    for _ in 0..4 {
        assert_eq!(
            e.filter(writer.clone(), "f", &one, "{}".into()).await,
            Ok(vec![true])
        );
        assert_eq!(
            e.filter(reader.clone(), "f", &one, "{}".into()).await,
            Ok(vec![false])
        );
    }
    assert_eq!(
        e.filter(reader, "io", &one, "{}".into()).await,
        Ok(vec![false])
    );
}

#[tokio::test]
async fn the_builtins_couchdb_gives_are_there() {
    let e = engine();
    let d = ddoc(
        "db",
        json!({"_id": "_design/g", "filters": {"f": "function (doc) { log({seen: doc}); return sum([1, 2, 3]) === 6 && isArray([]) && toJSON({a: 1}) === '{\"a\":1}' && this._id === '_design/g'; }"}}),
    );
    assert_eq!(
        e.filter(d, "f", &["{}".into()], "{}".into()).await,
        Ok(vec![true])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_databases_looping_calls_never_hold_up_another_database() {
    let e = Arc::new(engine());
    let filters = json!({"_id": "_design/f", "filters": {
        "forever": "function (doc) { while (true) {} }",
        "fine": "function (doc) { return true; }"
    }});
    let busy = ddoc("busy", filters.clone());
    let spinning: Vec<_> = (0..6)
        .map(|_| {
            let (e, d) = (e.clone(), busy.clone());
            tokio::spawn(async move { e.filter(d, "forever", &["{}".into()], "{}".into()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Both workers loop for the busy database, four more loops wait: in
    // turn the calm call would wait three timeouts (900 ms). It gets an
    // extra worker instead.
    let started = Instant::now();
    let calm = e
        .filter(ddoc("calm", filters), "fine", &["{}".into()], "{}".into())
        .await;
    assert_eq!(calm, Ok(vec![true]));
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "waited {:?}",
        started.elapsed()
    );
    for spinner in spinning {
        assert_eq!(
            spinner.await.unwrap(),
            Err(JsError::Timeout(Duration::from_millis(300)))
        );
    }
}

#[tokio::test]
async fn a_rewrites_function_answers_a_path_an_object_nothing_or_its_error() {
    let e = engine();
    let source = r#"function (req) {
        var p = req.path[4];
        if (p === "text") return "_show/s/" + req.query.id;
        if (p === "object") return {path: "x", query: {a: "b"}, headers: {"X-A": "1"}};
        if (p === "throw") throw new TypeError("broken " + this._id);
        if (p === "named") throw {error: "forbidden_here", reason: "no"};
        return null;
    }"#;
    let d = ddoc("db", json!({"_id": "_design/r", "rewrites": source}));
    let req = |p: &str| {
        json!({"method": "PUT", "path": ["db", "_design", "r", "_rewrite", p], "query": {"id": "7"}})
            .to_string()
    };
    assert_eq!(
        e.rewrite(d.clone(), req("text")).await,
        Ok(Some(json!({"path": "_show/s/7", "method": "PUT"})))
    );
    assert_eq!(
        e.rewrite(d.clone(), req("object")).await,
        Ok(Some(
            json!({"path": "x", "query": {"a": "b"}, "headers": {"X-A": "1"}})
        ))
    );
    assert_eq!(e.rewrite(d.clone(), req("none")).await, Ok(None));
    match e.rewrite(d.clone(), req("throw")).await {
        Err(JsError::Runtime { error, reason }) => {
            assert_eq!(error, "rewrite_error");
            assert!(
                reason.starts_with(
                    "function raised error: TypeError: broken _design/r \nstacktrace: "
                ),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.rewrite(d, req("named")).await,
        Err(JsError::Runtime {
            error: "forbidden_here".into(),
            reason: "no".into()
        })
    );
}

#[tokio::test]
async fn rewrites_must_be_rules_or_a_function() {
    let e = engine();
    let doc = |rewrites: Value| store::DocInput {
        id: Some("_design/r".into()),
        rev: None,
        local_rev: None,
        revisions: None,
        deleted: false,
        body: json!({ "rewrites": rewrites }).as_object().unwrap().clone(),
        attachments: Vec::new(),
    };
    for good in [json!([]), json!("function(req) {}")] {
        assert_eq!(check_design_doc(&e, &doc(good)).await, Ok(Ok(())));
    }
    for bad in [json!({}), json!(null), json!(1)] {
        assert_eq!(
            check_design_doc(&e, &doc(bad)).await,
            Ok(Err(DesignRefusal::Invalid(
                "`rewrites` field must have array or string type".into()
            )))
        );
    }
}

#[tokio::test]
async fn providers_are_chosen_as_couchdbs_mime_matcher_chooses() {
    let e = engine();
    let source = r#"function (doc, req) {
        registerType("foo", "application/foo", "application/x-foo");
        provides("html", function () { return "html"; });
        provides("foo", function () { return "foo"; });
        provides("json", function () { return "json"; });
    }"#;
    let d = ddoc("db", json!({"_id": "_design/p", "shows": {"p": source}}));
    let show = |accept: Option<&str>, format: Option<&str>| {
        let mut req = json!({"method": "GET", "path": ["db", "_design", "p", "_show", "p"], "headers": {}, "query": {}});
        if let Some(accept) = accept {
            req["headers"]["Accept"] = json!(accept);
        }
        if let Some(format) = format {
            req["query"]["format"] = json!(format);
        }
        e.show(d.clone(), "p", "null".into(), req.to_string())
    };
    let answer = |value: Value| {
        (
            value["body"].clone(),
            value["headers"]["Content-Type"].clone(),
        )
    };
    // The type the Accept header matched is answered, not the name's first.
    assert_eq!(
        answer(show(Some("application/x-foo"), None).await.unwrap()),
        (json!("foo"), json!("application/x-foo"))
    );
    // Quality and specificity decide; among equals, CouchDB's order (a
    // sort of the candidates' texts) picks.
    assert_eq!(
        answer(
            show(Some("text/html;q=0.5, application/json"), None)
                .await
                .unwrap()
        ),
        (json!("json"), json!("application/json"))
    );
    assert_eq!(
        answer(
            show(Some("text/html,application/atom+xml; q=0.9"), None)
                .await
                .unwrap()
        ),
        (json!("html"), json!("text/html; charset=utf-8"))
    );
    assert_eq!(
        answer(show(Some("*/*"), None).await.unwrap()).1,
        json!("text/html; charset=utf-8")
    );
    // No Accept header: the first provider; `format` names one.
    assert_eq!(
        answer(show(None, None).await.unwrap()),
        (json!("html"), json!("text/html; charset=utf-8"))
    );
    assert_eq!(
        answer(show(Some("text/html"), Some("foo")).await.unwrap()),
        (json!("foo"), json!("application/foo"))
    );
    // None fits: CouchDB's 406 and its list of what would.
    assert_eq!(
        show(Some("image/png"), None).await,
        Err(JsError::Runtime {
            error: "not_acceptable".into(),
            reason: "Content-Type image/png not supported, try one of: application/json, text/x-json, application/foo, application/x-foo, text/html; charset=utf-8".into(),
        })
    );
}

/// A list function that reads every row and sends nothing until its end.
fn counting_list() -> DesignDoc {
    ddoc(
        "db",
        json!({"lists": {"count": "function (head, req) {
            var n = 0;
            while (getRow()) { n++; }
            return 'rows: ' + n;
        }"}}),
    )
}

#[tokio::test]
async fn a_list_function_stops_reading_rows_once_nobody_reads_its_answer() {
    let e = engine();
    let design = counting_list();
    const ROWS: usize = 10_000;
    let (rows_in, rows_out) = tokio::sync::mpsc::channel::<String>(4);
    let (chunks_out, mut chunks) = tokio::sync::mpsc::channel::<ListChunk>(2);
    // The client reads the answer's head, then leaves.
    let reader = tokio::spawn(async move {
        chunks.recv().await;
    });
    let fed = tokio::spawn(async move {
        let mut sent = 0;
        for i in 0..ROWS {
            let row = json!({"id": format!("d{i}"), "key": i, "value": null}).to_string();
            if rows_in.send(row).await.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    // Once the reader has gone, the function stops at its next row (each
    // row sends the text gathered since the last, as CouchDB's protocol
    // does, and that send fails); with a reader it reads every row (the
    // test below).
    let answer = e
        .list(
            design,
            "count",
            "{}".into(),
            "{}".into(),
            ListIo::new(rows_out, chunks_out),
        )
        .await;
    assert!(answer.is_err(), "the function read to its end: {answer:?}");
    reader.await.unwrap();
    let sent = fed.await.unwrap();
    assert!(sent < 100, "{sent} of {ROWS} rows were read for nobody");
}

#[tokio::test]
async fn a_list_function_with_a_reader_reads_every_row() {
    let e = engine();
    let design = counting_list();
    let (rows_in, rows_out) = tokio::sync::mpsc::channel::<String>(4);
    let (chunks_out, mut chunks) = tokio::sync::mpsc::channel::<ListChunk>(2);
    tokio::spawn(async move { while chunks.recv().await.is_some() {} });
    tokio::spawn(async move {
        for i in 0..500 {
            let row = json!({"id": format!("d{i}"), "key": i, "value": null}).to_string();
            let _ = rows_in.send(row).await;
        }
    });
    let answer = e
        .list(
            design,
            "count",
            "{}".into(),
            "{}".into(),
            ListIo::new(rows_out, chunks_out),
        )
        .await;
    assert_eq!(answer.unwrap(), "rows: 500");
}

/// A call whose caller stops waiting (its client left) stops too: the one
/// worker is free for the next call long before the first's deadline.
#[tokio::test]
async fn a_call_stops_when_its_caller_stops_waiting() {
    let e = Engine::new(Limits {
        threads: 1,
        extra_threads: 0,
        timeout: Duration::from_secs(60),
        memory: 32 << 20,
        contexts_per_thread: 4,
    });
    let design = ddoc(
        "db",
        json!({"filters": {
            "forever": "function (doc, req) { while (true) {} }",
            "all": "function (doc, req) { return true; }",
        }}),
    );
    let docs = vec!["{\"_id\":\"a\"}".to_string()];
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        e.filter(design.clone(), "forever", &docs, "{}".into()),
    )
    .await;
    assert!(
        abandoned.is_err(),
        "the endless filter answered: {abandoned:?}"
    );
    let next = tokio::time::timeout(
        Duration::from_secs(20),
        e.filter(design, "all", &docs, "{}".into()),
    )
    .await
    .expect("the worker was still held by the abandoned call");
    assert_eq!(next.unwrap(), vec![true]);
}
