//! The error answers clients compare, one row each: status, `error` and
//! `reason` exactly as Apache CouchDB 3.5 gives them. Every row runs
//! against Recliner; with `COUCHDB_URL` set (as `cargo xtask test` sets it)
//! every row runs against CouchDB too, so the table itself is checked
//! against the reference.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// One request and the answer CouchDB gives it. `{db}` is a database
/// holding `doc` (with attachment `a.txt`) and `{rev}` that document's
/// revision.
struct Row {
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    content_type: &'static str,
    header: Option<(&'static str, &'static str)>,
    anonymous: bool,
    status: u16,
    error: &'static str,
    reason: &'static str,
}

const JSON: &str = "application/json";

const fn row(
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    status: u16,
    error: &'static str,
    reason: &'static str,
) -> Row {
    Row {
        method,
        path,
        body,
        content_type: JSON,
        header: None,
        anonymous: false,
        status,
        error,
        reason,
    }
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Bodies.
    row("PUT", "/{db}/x", Some("[1]"), 400, "bad_request", "Document must be a JSON object"),
    row("PUT", "/{db}/x", Some("{bad"), 400, "bad_request", "invalid UTF-8 JSON"),
    row("PUT", "/{db}/_local/x", Some("[1]"), 400, "bad_request", "Document must be a JSON object"),
    row("POST", "/{db}", Some("\"text\""), 400, "bad_request", "Document must be a JSON object"),
    row("POST", "/{db}/_all_docs", Some("{\"keys\":1}"), 400, "bad_request", "`keys` body member must be an array."),
    row("POST", "/{db}/_bulk_docs", Some("{}"), 400, "bad_request", "POST body must include `docs` parameter."),
    row("POST", "/{db}/_bulk_docs", Some("{\"docs\":1}"), 400, "bad_request", "`docs` parameter must be an array."),
    row("POST", "/{db}/_bulk_docs", Some("[]"), 400, "bad_request", "Request body must be a JSON object"),
    row("POST", "/{db}/_bulk_docs", Some("{\"docs\":[1]}"), 400, "bad_request", "Document must be a JSON object"),
    row("POST", "/{db}/_revs_diff", Some("[1]"), 400, "bad_request", "Request body must be a JSON object"),
    row("PUT", "/{db}/x", Some("{\"_foo\":1}"), 400, "doc_validation", "Bad special document member: _foo"),
    row("PUT", "/{db}/x", Some("{\"_deleted\":\"yes\"}"), 400, "doc_validation", "Bad special document member: _deleted"),
    row("PUT", "/{db}/stub", Some("{\"_attachments\":{\"a\":{\"stub\":true}}}"), 412, "missing_stub", "Invalid attachment stub in stub for a"),
    Row {
        content_type: "application/x-www-form-urlencoded",
        ..row("POST", "/{db}", Some("a=1"), 415, "bad_content_type", "Content-Type must be application/json")
    },
    // Names and ids.
    row("PUT", "/Bad", None, 400, "illegal_database_name", "Name: 'Bad'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."),
    row("PUT", "/{db}/_foo", Some("{}"), 400, "illegal_docid", "Only reserved document ids may start with underscore."),
    row("PUT", "/{db}", None, 412, "file_exists", "The database could not be created, the file already exists."),
    // Missing things.
    row("GET", "/{db}/missing", None, 404, "not_found", "missing"),
    row("GET", "/no-such-db-here", None, 404, "not_found", "Database does not exist."),
    row("GET", "/{db}/doc/none.txt", None, 404, "not_found", "Document is missing attachment"),
    row("DELETE", "/{db}/doc/none.txt?rev={rev}", None, 404, "not_found", "Document is missing attachment"),
    row("GET", "/{db}/missing/a.txt", None, 404, "not_found", "missing"),
    // Revisions.
    row("GET", "/{db}/doc?rev=abc", None, 400, "bad_request", "Invalid rev format"),
    row("PUT", "/{db}/doc", Some("{}"), 409, "conflict", "Document update conflict."),
    row("DELETE", "/{db}/doc", None, 409, "conflict", "Document update conflict."),
    row("PUT", "/{db}/doc?rev=1-00000000000000000000000000000000", Some("{}"), 409, "conflict", "Document update conflict."),
    // Methods.
    row("PATCH", "/{db}/doc", None, 405, "method_not_allowed", "Only DELETE,GET,HEAD,POST,PUT,COPY allowed"),
    row("COPY", "/{db}/doc", None, 400, "bad_request", "Destination header is mandatory for COPY."),
    Row {
        header: Some(("destination", "http://example.com/db/z")),
        ..row("COPY", "/{db}/doc", None, 400, "bad_request", "Destination URL must be relative.")
    },
    // Query parameters.
    row("GET", "/{db}/_changes?since=abc", None, 400, "bad_request", "Malformed sequence supplied in 'since' parameter."),
    row("GET", "/{db}/_changes?feed=longpoll&heartbeat=abc", None, 400, "bad_request", "Invalid heartbeat value. Expecting a positive integer value (in milliseconds)."),
    row("GET", "/{db}/_changes?feed=sideways", None, 400, "bad_request", "Supported `feed` types: normal, continuous, live, longpoll, eventsource"),
    row("GET", "/{db}/_all_docs?limit=abc", None, 400, "query_parse_error", "Invalid value for integer: \"abc\""),
    row("GET", "/{db}/_all_docs?descending=maybe", None, 400, "query_parse_error", "Invalid boolean parameter: \"maybe\""),
    row("GET", "/{db}/_all_docs?startkey=bad", None, 400, "bad_request", "invalid UTF-8 JSON"),
    row("GET", "/{db}/_all_docs?keys=1", None, 400, "bad_request", "`keys` parameter must be an array."),
    row("GET", "/{db}/doc?open_revs=bad", None, 400, "bad_request", "invalid UTF-8 JSON"),
    // Who may.
    Row {
        anonymous: true,
        ..row("GET", "/{db}", None, 401, "unauthorized", "You are not authorized to access this db.")
    },
    Row {
        anonymous: true,
        ..row("GET", "/_all_dbs", None, 401, "unauthorized", "You are not a server admin.")
    },
];

async fn prepare(c: &Client, db: &str) -> String {
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let rev = c.put(&format!("/{db}/doc"), json!({"v": 1})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let att = c
        .send_bytes(
            "PUT",
            &format!("/{db}/doc/a.txt?rev={rev}"),
            b"hello".to_vec(),
            "text/plain",
        )
        .await;
    att.json()["rev"].as_str().unwrap().to_string()
}

/// Every row's answer from one server; the differences from the table.
async fn check(server: &str, admin: &Client, anonymous: &Client, db: &str) -> Vec<String> {
    let rev = prepare(admin, db).await;
    let mut wrong = Vec::new();
    for row in ROWS {
        let path = row.path.replace("{db}", db).replace("{rev}", &rev);
        let client = if row.anonymous { anonymous } else { admin };
        let mut request = client
            .http()
            .request(
                reqwest::Method::from_bytes(row.method.as_bytes()).unwrap(),
                client.url(&path),
            )
            .header("content-type", row.content_type)
            .body(row.body.unwrap_or("").to_string());
        if let Some((name, value)) = row.header {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let allow = response.headers().contains_key("allow");
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let got = (status, body["error"].clone(), body["reason"].clone());
        let want = (row.status, json!(row.error), json!(row.reason));
        if got != want {
            wrong.push(format!(
                "{server}: {} {} {}: got {} {} {}, the table says {} {} {}",
                row.method,
                row.path,
                row.body.unwrap_or(""),
                got.0,
                got.1,
                got.2,
                want.0,
                want.1,
                want.2
            ));
        }
        if row.status == 405 {
            assert!(allow, "{server}: 405 names what is allowed");
        }
    }
    wrong
}

#[tokio::test]
async fn every_row_of_the_error_table_is_answered_as_couchdb_answers_it() {
    let data = TempDir::new("error-table");
    let server = TestServer::start(data.path(), &[]);
    let mut wrong = check(
        "Recliner",
        &Client::new(&server),
        &Client::anonymous(&server),
        "db",
    )
    .await;
    if let Some(couch) = couchdb("every_row_of_the_error_table_is_answered_as_couchdb_answers_it") {
        let anonymous = Client::at(&recliner_tests::without_credentials(couch.url()));
        let db = unique_db("errors");
        wrong.extend(check("CouchDB", &couch.client(), &anonymous, &db).await);
        couch.client().delete(&format!("/{db}")).await;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
