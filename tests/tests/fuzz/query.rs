//! Target `query`: query-string parsing end to end. Each input is a few
//! GET requests on `/db`, `/db/{doc}`, `/db/_all_docs`, `/db/_changes`,
//! `/db/_local/x`, `/db/{doc}/att`, `/_all_dbs`, `/_active_tasks`,
//! `/_scheduler/jobs` and `/_scheduler/docs` with random and hostile query
//! strings: the real parameter names (`key`, `keys`, `startkey`, `rev`,
//! `open_revs`, `since`, `limit`, `skip`, `descending`, `feed`,
//! `heartbeat`, `timeout`, `style`, `filter`, `doc_ids`, `attachments`,
//! `atts_since`, `revs`, `revs_info`, `conflicts`, `latest`,
//! `include_docs`, `batch`, `new_edits`, ...), sometimes percent-encoded,
//! with sane values, hostile JSON, huge and negative numbers, bad percent
//! escapes (`%`, `%zz`, `%2`), escapes that decode to invalid UTF-8
//! (`%FF`, `%C3%28`, `%ED%A0%80`), `+`, empty keys and values, repeated
//! keys and odd separators, sometimes with `Accept: multipart/...` or
//! `text/event-stream`. A feed that could wait (a `feed` parameter in any
//! spelling) never gets a `heartbeat` and ends with `timeout=100`.
//!
//! The database is a fixture made once per server (no input writes):
//! `db` with a document `doc` in conflict (`2-b`, `2-c`) carrying
//! attachment `att`, documents `a`, `é x` and `_design/d` (a view and a
//! filter), a deleted `gone`, `_local/x`, and an empty `db2`.
//!
//! Invariants: every answer comes within 10 s; no 5xx but
//! `501 not_implemented`; JSON answers are valid JSON (a continuous feed:
//! one per line; an event stream: JSON in every `data:`), with `error` and
//! `reason` on failure; attachment bytes, inline `data` and multipart
//! answers (read strictly, see `answers.rs`) carry exactly the fixture's
//! attachment; the server stays up and logs no panic. After each input
//! every database opens and the fixture reads back as it was made.

use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use crate::answers::{self, check_json, check_status};
use crate::driver::Violations;
use crate::hostile;
use crate::http::{Answer, Harness, Sent, enc, is_json, snippet};

/// The longest a request may take: feeds end after 100 ms here.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The fixture's attachment: bytes that need care in JSON and multipart.
const ATT: &[u8] = b"attachment \x00\xff\r\n--\"bytes\"";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Db,
    Doc,
    AllDocs,
    Changes,
    Local,
    Attachment,
    AllDbs,
    ActiveTasks,
    SchedulerJobs,
    SchedulerDocs,
}

impl Endpoint {
    fn label(self) -> &'static str {
        match self {
            Endpoint::Db => "GET /{db}",
            Endpoint::Doc => "GET /db/{doc}",
            Endpoint::AllDocs => "GET /db/_all_docs",
            Endpoint::Changes => "GET /db/_changes",
            Endpoint::Local => "GET /db/_local/x",
            Endpoint::Attachment => "GET /db/{doc}/att",
            Endpoint::AllDbs => "GET /_all_dbs",
            Endpoint::ActiveTasks => "GET /_active_tasks",
            Endpoint::SchedulerJobs => "GET /_scheduler/jobs",
            Endpoint::SchedulerDocs => "GET /_scheduler/docs",
        }
    }

    /// The parameters it reads.
    fn params(self) -> &'static [&'static str] {
        match self {
            Endpoint::Db | Endpoint::Local => &["rev", "revs", "attachments", "batch", "new_edits"],
            Endpoint::Doc => DOC_PARAMS,
            Endpoint::Attachment => &["rev", "attachments", "atts_since", "batch"],
            Endpoint::AllDocs | Endpoint::AllDbs => VIEW_PARAMS,
            Endpoint::Changes => CHANGES_PARAMS,
            Endpoint::ActiveTasks => &["limit"],
            Endpoint::SchedulerJobs | Endpoint::SchedulerDocs => &["limit", "skip", "states"],
        }
    }

    fn paths(self) -> &'static [&'static str] {
        match self {
            Endpoint::Db => &["/db", "/db", "/db2", "/missing"],
            Endpoint::Doc => &[
                "/db/doc",
                "/db/doc",
                "/db/a",
                "/db/gone",
                "/db/missing",
                "/db/_design/d",
                "/db/%C3%A9%20x",
                "/db2/doc",
            ],
            Endpoint::AllDocs => &["/db/_all_docs", "/db/_all_docs", "/db2/_all_docs"],
            Endpoint::Changes => &["/db/_changes", "/db/_changes", "/db2/_changes"],
            Endpoint::Local => &["/db/_local/x", "/db/_local/x", "/db/_local/missing"],
            Endpoint::Attachment => &["/db/doc/att", "/db/doc/att", "/db/a/att", "/db/doc/missing"],
            Endpoint::AllDbs => &["/_all_dbs"],
            Endpoint::ActiveTasks => &["/_active_tasks"],
            Endpoint::SchedulerJobs => &["/_scheduler/jobs"],
            Endpoint::SchedulerDocs => &["/_scheduler/docs"],
        }
    }
}

const DOC_PARAMS: &[&str] = &[
    "rev",
    "revs",
    "revs_info",
    "open_revs",
    "latest",
    "conflicts",
    "deleted_conflicts",
    "local_seq",
    "meta",
    "attachments",
    "atts_since",
    "att_encoding_info",
];
const VIEW_PARAMS: &[&str] = &[
    "key",
    "keys",
    "startkey",
    "endkey",
    "start_key",
    "end_key",
    "startkey_docid",
    "endkey_docid",
    "inclusive_end",
    "descending",
    "limit",
    "skip",
    "include_docs",
    "conflicts",
    "attachments",
    "update_seq",
];
const CHANGES_PARAMS: &[&str] = &[
    "since",
    "limit",
    "descending",
    "feed",
    "heartbeat",
    "timeout",
    "style",
    "filter",
    "doc_ids",
    "include_docs",
    "conflicts",
    "attachments",
    "att_encoding_info",
    "seq_interval",
    "last-event-id",
];
/// Every name, for parameters sent where they mean nothing.
const ALL_PARAMS: &[&str] = &[
    "key",
    "keys",
    "startkey",
    "endkey",
    "rev",
    "open_revs",
    "since",
    "limit",
    "skip",
    "descending",
    "feed",
    "heartbeat",
    "timeout",
    "style",
    "filter",
    "doc_ids",
    "attachments",
    "atts_since",
    "revs",
    "revs_info",
    "conflicts",
    "latest",
    "include_docs",
    "batch",
    "new_edits",
    "states",
    "meta",
];

/// Raw query-string fragments, valid in a URI as they are: bad escapes,
/// escapes of invalid UTF-8, and separators.
const RAW: &[&str] = &[
    "%",
    "%%",
    "%G1",
    "%2",
    "%zz",
    "%FF",
    "%C3%28",
    "%ED%A0%80",
    "%F4%90%80%80",
    "%C0%AF",
    "%00",
    "%0D%0A",
    "+",
    "%2B",
    "%26",
    "%3D",
    "=",
    "%22",
    "%5C",
    "%EF%BB%BF",
    "%E2%80%A8",
    "a",
    "1",
    "-",
    "(",
    ")",
    "*",
    ",",
    "!",
    "$",
    ":",
    "@",
    "/",
    "?",
    "~",
    ".",
    "_",
    "%7B",
    "%5B",
];

/// One GET request.
#[derive(Clone)]
pub struct Get {
    endpoint: Endpoint,
    path: &'static str,
    /// The query string as sent, without `?` (empty: none).
    query: String,
    accept: Option<&'static str>,
}

impl Get {
    fn target(&self) -> String {
        if self.query.is_empty() {
            self.path.to_string()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }
}

impl fmt::Debug for Get {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "GET {}", self.target())?;
        if let Some(accept) = self.accept {
            writeln!(f, "    accept: {accept}")?;
        }
        Ok(())
    }
}

/// The requests of one input, on the fixture.
#[derive(Clone)]
pub struct Case(Vec<Get>);

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "(fixture: see tests/tests/fuzz/query.rs, Target::fixture)"
        )?;
        for (i, get) in self.0.iter().enumerate() {
            write!(f, "{}. {get:?}", i + 1)?;
        }
        Ok(())
    }
}

// --- generators ---

/// A value the parameter takes (or nearly), unencoded.
fn sane_value(name: &str) -> BoxedStrategy<String> {
    let values: &'static [&'static str] = match name {
        "rev" => &["2-b", "2-c", "1-a", "3-z"],
        "open_revs" => &["all", "[\"2-b\"]", "[\"2-b\",\"2-c\",\"9-x\"]", "[]"],
        "atts_since" => &["[\"1-a\"]", "[\"2-b\"]", "[]"],
        "limit" | "skip" | "seq_interval" => &["0", "1", "2", "10"],
        "heartbeat" | "timeout" => &["10", "100", "true"],
        "key" | "startkey" | "endkey" | "start_key" | "end_key" => {
            &["\"a\"", "\"doc\"", "\"\"", "\"_design/\"", "\"\\ufff0\""]
        }
        "startkey_docid" | "endkey_docid" => &["a", "doc", ""],
        "keys" => &[
            "[\"doc\",\"a\"]",
            "[]",
            "[\"missing\",\"gone\"]",
            "[\"db\",\"db2\"]",
        ],
        "since" | "last-event-id" => &["0", "now", "1", "2", "3"],
        "style" => &["main_only", "all_docs"],
        "feed" => &["normal", "longpoll", "continuous", "eventsource"],
        "filter" => &[
            "_doc_ids",
            "_selector",
            "_design",
            "_view",
            "d/f",
            "d/missing",
        ],
        "doc_ids" => &["[\"doc\"]", "[]", "[\"a\",\"gone\"]"],
        "batch" => &["ok"],
        "states" => &["running", "failed,completed", "nope"],
        _ => &["true", "false"],
    };
    select(values).prop_map(str::to_string).boxed()
}

/// Hostile values, unencoded: JSON of every shape, numbers at the edges.
fn hostile_value() -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(&[
            "", "-1", "-0", "18446744073709551615", "18446744073709551616",
            "99999999999999999999999999", "9223372036854775808", "-9223372036854775809", "1e3",
            "1.5", "0x10", "01", " 1", "1 ", "١", "NaN", "null", "[", "{", "]", "\"", "\"a",
            "[1,", "{\"a\":1}", "[[[[[[[[]]]]]]]]", "\"\\ud800\"", "\"\\u0000\"", "true ", "TRUE",
            "all ", "[\"all\"]", "[null]", "[1]", "[\"1-\"]", "[\"-a\"]", "1-", "-1-a", "0-a",
            "18446744073709551616-a", "now ", "longpoll\u{0}", "continuous", "\"normal\"",
        ][..])
        .prop_map(str::to_string),
        1 => hostile::number_text(),
        1 => hostile::rev_text(),
        1 => hostile::text(),
        1 => hostile::json(2).prop_map(|v| v.to_string()),
    ]
    .boxed()
}

/// Raw text as it goes on the wire: fragments of [`RAW`].
fn raw_text() -> BoxedStrategy<String> {
    vec(select(RAW), 1..5).prop_map(|v| v.concat()).boxed()
}

/// A long value: a number, a JSON array or nesting.
fn long_value() -> BoxedStrategy<String> {
    prop_oneof![
        (1usize..2000).prop_map(|n| "9".repeat(n)),
        (1usize..500).prop_map(|n| format!("[{}]", vec!["\"doc\""; n].join(","))),
        (1usize..400).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
    ]
    .boxed()
}

/// Every character percent-encoded: `limit` as `%6C%69%6D%69%74`.
fn encode_all(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// One `key=value` piece of a query string, as sent.
fn param(names: &'static [&'static str]) -> BoxedStrategy<String> {
    let name = prop_oneof![8 => select(names), 2 => select(ALL_PARAMS)];
    name.prop_flat_map(|name| {
        let key = prop_oneof![
            12 => Just(name.to_string()),
            1 => Just(encode_all(name)),
            1 => Just(name.to_ascii_uppercase()),
            1 => raw_text(),
        ];
        let value = prop_oneof![
            6 => sane_value(name).prop_map(|v| enc(&v)),
            4 => hostile_value().prop_map(|v| enc(&v)),
            2 => raw_text(),
            1 => sane_value(name).prop_map(|v| encode_all(&v)),
            1 => sane_value(name).prop_map(|v| v.replace(' ', "+").replace('"', "%22")),
            1 => long_value().prop_map(|v| enc(&v)),
        ];
        let form = prop_oneof![20 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
        (key, value, form).prop_map(|(key, value, form)| match form {
            0 => format!("{key}={value}"),
            1 => key,
            2 => format!("={value}"),
            _ => format!("{key}={value}={value}"),
        })
    })
    .boxed()
}

/// `application/x-www-form-urlencoded` decoding, as the server reads a
/// query: `+` is a space, bad escapes stay as they are, invalid UTF-8
/// becomes U+FFFD.
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if bytes.len() > i + 2
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit() =>
            {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
                continue;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded key of a `key=value` piece.
fn key_of(piece: &str) -> String {
    form_decode(piece.split('=').next().unwrap_or(""))
}

/// Pieces an endpoint's query often starts with, so that its interesting
/// answers come up: a document's attachments inline or as multipart, its
/// open revisions; a feed of each kind.
fn leading(endpoint: Endpoint) -> BoxedStrategy<Vec<&'static str>> {
    let choices: &'static [&'static [&'static str]] = match endpoint {
        Endpoint::Doc => &[
            &[],
            &[],
            &["attachments=true"],
            &["open_revs=all", "attachments=true"],
            &[
                "open_revs=%5B%222-b%22%2C%229-x%22%5D",
                "attachments=true",
                "latest=true",
            ],
            &["atts_since=%5B%221-a%22%5D"],
        ],
        Endpoint::Changes => &[
            &[],
            &["feed=normal"],
            &["feed=longpoll"],
            &["feed=continuous"],
            &["feed=eventsource"],
            &["feed=longpoll", "since=now"],
            &["include_docs=true", "attachments=true"],
        ],
        Endpoint::AllDocs => &[&[], &[], &["include_docs=true", "attachments=true"]],
        _ => &[&[]],
    };
    select(choices).prop_map(<[&str]>::to_vec).boxed()
}

/// A query string: pieces joined by `&` (sometimes `&&` or `;`). A feed
/// parameter in any spelling drops every `heartbeat` and gets a last
/// `timeout=100`, so nothing waits long.
fn query(endpoint: Endpoint) -> BoxedStrategy<String> {
    let separator = prop_oneof![20 => Just("&"), 1 => Just("&&"), 1 => Just(";")];
    (
        leading(endpoint),
        vec((param(endpoint.params()), separator), 0..7),
        0u8..8,
    )
        .prop_map(|(lead, random, edges)| {
            let mut pieces: Vec<(String, &str)> =
                lead.into_iter().map(|p| (p.to_string(), "&")).collect();
            pieces.extend(random);
            if pieces.iter().any(|(p, _)| key_of(p) == "feed") {
                pieces.retain(|(p, _)| key_of(p) != "heartbeat");
                pieces.push(("timeout=100".to_string(), "&"));
            }
            let mut query = String::new();
            if edges == 0 {
                query.push('&');
            }
            for (i, (piece, separator)) in pieces.iter().enumerate() {
                if i > 0 {
                    query.push_str(separator);
                }
                query.push_str(piece);
            }
            if edges == 1 {
                query.push('&');
            }
            query
        })
        .boxed()
}

fn get(endpoint: Endpoint) -> BoxedStrategy<Get> {
    let accepts: &'static [Option<&'static str>] = match endpoint {
        Endpoint::Doc => &[
            None,
            Some("application/json"),
            Some("multipart/related"),
            Some("multipart/mixed"),
            Some("multipart/mixed, multipart/related"),
        ],
        Endpoint::Changes => &[None, Some("application/json"), Some("text/event-stream")],
        _ => &[None, None, Some("application/json"), Some("*/*")],
    };
    (select(endpoint.paths()), query(endpoint), select(accepts))
        .prop_map(move |(path, query, accept)| Get {
            endpoint,
            path,
            query,
            accept,
        })
        .boxed()
}

pub fn strategy() -> BoxedStrategy<Case> {
    let get = prop_oneof![
        2 => get(Endpoint::Db),
        6 => get(Endpoint::Doc),
        3 => get(Endpoint::AllDocs),
        4 => get(Endpoint::Changes),
        1 => get(Endpoint::Local),
        2 => get(Endpoint::Attachment),
        1 => get(Endpoint::AllDbs),
        1 => get(Endpoint::ActiveTasks),
        1 => get(Endpoint::SchedulerJobs),
        1 => get(Endpoint::SchedulerDocs),
    ];
    vec(get, 1..8).prop_map(Case).boxed()
}

// --- running ---

/// What the fixture reads as right after it was made.
struct Snapshot {
    /// `(path, JSON)` of reads that must not change.
    reads: Vec<(String, Value)>,
}

/// The reads the audit repeats; `/db` is compared on its counters only.
const SNAPSHOT_READS: &[&str] = &[
    "/db",
    "/db2",
    "/db/doc?conflicts=true&revs=true",
    "/db/doc?rev=2-b",
    "/db/a",
    "/db/_design/d",
    "/db/%C3%A9%20x",
    "/db/_local/x",
    "/db/_all_docs",
];

/// Runs inputs against a live server holding the fixture.
pub struct Target {
    harness: Harness,
    /// The server the fixture was made on, and what it read as.
    fixture: RefCell<Option<(String, Snapshot)>>,
}

impl Target {
    pub fn new() -> Target {
        Target {
            harness: Harness::named("fuzz-query"),
            fixture: RefCell::new(None),
        }
    }

    pub fn check(&self, case: &Case, v: &mut Violations) {
        self.harness
            .run_input(v, async |base, v| self.run(base, case, v).await);
    }

    async fn run(&self, base: &str, case: &Case, v: &mut Violations) {
        let fresh = !matches!(&*self.fixture.borrow(), Some((b, _)) if b == base);
        if fresh {
            match self.fixture(base).await {
                Ok(snapshot) => *self.fixture.borrow_mut() = Some((base.to_string(), snapshot)),
                Err(e) => {
                    v.add("setup failed", e);
                    return;
                }
            }
        }
        for get in &case.0 {
            let target = get.target();
            let mut shown = format!("GET {target}");
            let mut request = self
                .harness
                .client()
                .get(format!("{base}{target}"))
                .timeout(QUERY_TIMEOUT);
            if let Some(accept) = get.accept {
                shown.push_str(&format!("\n    accept: {accept}"));
                request = request.header("accept", accept);
            }
            let Ok(request) = request.build() else {
                continue; // no client can send it
            };
            match self
                .harness
                .exchange(request, &shown, get.endpoint.label(), v)
                .await
            {
                Sent::Answered(answer) => check_answer(get, &shown, &answer, v),
                Sent::Died => return,
                Sent::Lost => {}
            }
        }
        if self.harness.server_alive() {
            self.audit(base, v).await;
        }
    }

    /// Makes the fixture (see the module comment) on a fresh server, with
    /// fixed revisions (`new_edits=false`), and reads it as it stands.
    async fn fixture(&self, base: &str) -> Result<Snapshot, String> {
        use base64::Engine;
        let http = self.harness.client();
        let data = base64::engine::general_purpose::STANDARD.encode(ATT);
        let att = json!({"att": {"content_type": "text/plain", "data": data}});
        let docs = json!({"new_edits": false, "docs": [
            {"_id": "doc", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}, "v": 2, "_attachments": att},
            {"_id": "doc", "_rev": "2-c", "_revisions": {"start": 2, "ids": ["c", "a"]}, "v": "c", "_attachments": att},
            {"_id": "a", "_rev": "1-a", "n": 1},
            {"_id": "gone", "_rev": "2-d", "_revisions": {"start": 2, "ids": ["d", "a"]}, "_deleted": true},
            {"_id": "é x", "_rev": "1-a", "text": "é\u{0}\"\\"},
            {"_id": "_design/d", "_rev": "1-a",
             "views": {"v": {"map": "function(d){emit(d._id,1)}"}},
             "filters": {"f": "function(d,req){return true}"}},
        ]});
        let steps: [(reqwest::Method, &str, Option<Value>); 4] = [
            (reqwest::Method::PUT, "/db", None),
            (reqwest::Method::PUT, "/db2", None),
            (reqwest::Method::POST, "/db/_bulk_docs", Some(docs)),
            (reqwest::Method::PUT, "/db/_local/x", Some(json!({"l": 1}))),
        ];
        for (method, path, body) in steps {
            let mut request = http.request(method.clone(), format!("{base}{path}"));
            if let Some(body) = body {
                request = request
                    .header("content-type", "application/json")
                    .body(body.to_string());
            }
            let response = request
                .send()
                .await
                .map_err(|e| format!("{method} {path}: {e}"))?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if !status.is_success() || text.contains("\"error\"") {
                return Err(format!("{method} {path} answered {status}: {text}"));
            }
        }
        let mut reads = Vec::new();
        for path in SNAPSHOT_READS {
            let value = self
                .harness
                .get_json(base, path)
                .await
                .map_err(|e| format!("{}: {}", e.class, e.detail))?;
            reads.push((path.to_string(), comparable(path, value)));
        }
        Ok(Snapshot { reads })
    }

    /// After each input: every database opens, the fixture is unchanged
    /// and its attachment still reads.
    async fn audit(&self, base: &str, v: &mut Violations) {
        let h = &self.harness;
        match h.get_json(base, "/_all_dbs").await {
            Ok(Value::Array(dbs)) => {
                for db in dbs.iter().filter_map(Value::as_str) {
                    if let Err(e) = h.get_json(base, &format!("/{}", enc(db))).await {
                        v.add(format!("a database does not open: {}", e.class), e.detail);
                    }
                }
            }
            Ok(other) => v.add("_all_dbs is not a list", other.to_string()),
            Err(e) => v.add(format!("_all_dbs fails: {}", e.class), e.detail),
        }
        let reads = match &*self.fixture.borrow() {
            Some((_, snapshot)) => snapshot.reads.clone(),
            None => return,
        };
        for (path, before) in &reads {
            match h.get_json(base, path).await {
                Ok(now) => {
                    let now = comparable(path, now);
                    if now != *before {
                        v.add(
                            format!("the fixture changed: GET {path}"),
                            format!("was {before}\nnow {now}"),
                        );
                    }
                }
                Err(e) => v.add(
                    format!("the fixture does not read: GET {path}: {}", e.class),
                    e.detail,
                ),
            }
        }
        match h.client().get(format!("{base}/db/doc/att")).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let bytes = response
                    .bytes()
                    .await
                    .map(|b| b.to_vec())
                    .unwrap_or_default();
                if status != 200 || bytes != ATT {
                    v.add(
                        "the fixture's attachment does not read back",
                        format!("GET /db/doc/att -> {status} b\"{}\"", bytes.escape_ascii()),
                    );
                }
            }
            Err(e) => v.add("the fixture's attachment does not read back", e.to_string()),
        }
    }
}

/// What of a read must stay the same: a database's counters, anything
/// else whole.
fn comparable(path: &str, value: Value) -> Value {
    if path == "/db" || path == "/db2" {
        json!({
            "doc_count": value["doc_count"],
            "doc_del_count": value["doc_del_count"],
            "update_seq": value["update_seq"],
        })
    } else {
        value
    }
}

/// The per-request invariants (see the module comment).
fn check_answer(get: &Get, shown: &str, answer: &Answer, v: &mut Violations) {
    let what = get.endpoint.label();
    let report = || {
        format!(
            "{shown}\n-> {} {}\n{}",
            answer.status,
            answer.content_type,
            snippet(&answer.body, 1500)
        )
    };
    let ct = answer.content_type.as_str();
    let ok = (200..300).contains(&answer.status);
    if get.endpoint == Endpoint::Attachment && ok && !ct.starts_with("application/json") {
        if answer.body != ATT {
            v.add("attachment bytes differ from the fixture's", report());
        }
        return;
    }
    if ct.starts_with("multipart/") {
        check_status(what, answer, None, &report, v);
        check_multipart(what, answer, &report, v);
        return;
    }
    if ct.starts_with("text/event-stream") {
        check_status(what, answer, None, &report, v);
        let valid = answer.body.split(|&b| b == b'\n').all(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match line.strip_prefix(b"data:") {
                Some(data) => {
                    let data = data.strip_prefix(b" ").unwrap_or(data);
                    data.is_empty() || is_json(data)
                }
                None => {
                    line.is_empty()
                        || line.starts_with(b":")
                        || line.starts_with(b"id:")
                        || line.starts_with(b"event:")
                        || line.starts_with(b"retry:")
                }
            }
        });
        if !valid {
            v.add(format!("malformed event stream from {what}"), report());
        }
        return;
    }
    // A continuous feed: one JSON value per line.
    let lines = get.endpoint == Endpoint::Changes
        && ct.starts_with("application/json")
        && !is_json(&answer.body)
        && !answer.body.is_empty()
        && answer
            .body
            .split(|&b| b == b'\n')
            .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
            .all(is_json);
    if lines {
        check_status(what, answer, None, &report, v);
        return;
    }
    let Some(json) = check_json(what, shown, answer, v) else {
        return;
    };
    if ok {
        check_inline_data(&json, &report, v);
    }
}

/// Every attachment `data` in a JSON answer (a document, an `open_revs`
/// list, rows with `doc`s, changes with `doc`s) is the fixture's.
fn check_inline_data(json: &Value, report: &dyn Fn() -> String, v: &mut Violations) {
    use base64::Engine;
    let mut stack = vec![json];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(atts)) = map.get("_attachments") {
                    for (name, entry) in atts {
                        let Some(data) = entry.get("data").and_then(Value::as_str) else {
                            continue;
                        };
                        let decoded = base64::engine::general_purpose::STANDARD.decode(data);
                        if name != "att" || decoded.as_deref().ok() != Some(ATT) {
                            v.add(
                                "inline attachment data differs from the fixture's",
                                report(),
                            );
                        }
                    }
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

/// A multipart answer, read strictly; every attachment is the fixture's.
fn check_multipart(what: &str, answer: &Answer, report: &dyn Fn() -> String, v: &mut Violations) {
    let docs = if answer.content_type.starts_with("multipart/mixed") {
        answers::read_mixed(&answer.content_type, &answer.body).map(|parts| {
            parts
                .into_iter()
                .filter_map(|p| match p {
                    answers::MixedPart::Doc(doc) => Some(doc),
                    answers::MixedPart::Missing => None,
                })
                .collect()
        })
    } else {
        answers::read_related(&answer.content_type, &answer.body).map(|doc| vec![doc])
    };
    match docs {
        Ok(docs) => {
            for doc in docs {
                for (name, att) in &doc.atts {
                    if name != "att" || att.identity().as_deref() != Ok(ATT) {
                        v.add(
                            format!(
                                "a multipart attachment from {what} differs from the fixture's"
                            ),
                            format!("attachment {name:?}\n{}", report()),
                        );
                    }
                }
            }
        }
        Err(e) => v.add(
            format!("malformed multipart answer from {what}"),
            format!("{e}\n{}", report()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_decoded_as_the_server_decodes_them() {
        assert_eq!(key_of("%66eed=longpoll"), "feed");
        assert_eq!(key_of("fe+ed"), "fe ed");
        assert_eq!(key_of("%zz=1"), "%zz");
        assert_eq!(key_of("%FF"), "\u{fffd}");
        assert_eq!(key_of("%2"), "%2");
    }
}
