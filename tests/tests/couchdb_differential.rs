//! Differential tests: the same request sequences sent to Apache CouchDB 3.5
//! and to Recliner, answers compared. Needs `COUCHDB_URL` (set by
//! `cargo xtask test`); skipped without it.
//!
//! The corpus is data, one file per area in `tests/differential/*.json`:
//!
//! ```json
//! {"about": "what the area covers",
//!  "cases": [
//!    {"name": "a document's life",
//!     "steps": [
//!       ["PUT", "/{db}/a", {"x": 1}],
//!       ["GET", "/{db}/a"],
//!       {"method": "PUT", "path": "/{db}/a/f.txt?rev={0.rev}",
//!        "raw": "hello", "content_type": "text/plain",
//!        "headers": {"Accept": "application/json"}}
//!     ]}
//!  ]}
//! ```
//!
//! Each case runs on a fresh database `{db}` on each server (`"no_db": true`
//! leaves it uncreated); `{db2}` names a second database the case may
//! create. `{N.a.b.0}` is taken from step N's JSON answer on the same server
//! (so each server's own revisions are used), `{N.header.etag}` from its
//! headers. A step is `[method, path]`, `[method, path, json body]` or an
//! object with `body` (JSON), or `raw` and `content_type`, and `headers`.
//!
//! Compared: the status; `Content-Type` (the media type and parameters but a
//! multipart boundary), `ETag` (presence and quoting), `Location` (its
//! path), `Cache-Control` and `Accept-Ranges`; JSON bodies (newline-delimited
//! JSON as an array of lines) after normalizing what legitimately differs:
//! revision hashes and uuids (any 32 hex digits, in bodies and `Location`
//! paths), sequences (`seq`, `last_seq`, `update_seq`, `since`,
//! `purge_seq`) and `instance_start_time`; and for attachments of the types
//! CouchDB compresses (`text/*`, JSON, JavaScript, XML) their `digest`,
//! `encoding` and `encoded_length` and the `Accept-Ranges` of their
//! answers: CouchDB stores them gzip-encoded, digests its compressed bytes
//! and offers no ranges, Recliner stores them as sent. Other bodies are
//! compared as text, multipart bodies not at all.
//!
//! Every other difference must be fixed or listed, with its reason, in
//! `tests/differential/allowed.json`: `{"case": "area/name", "what":
//! "status" | "header:<name>" | "body<JSON pointer>", "steps": [N, ...]
//! (optional), "path": "/{db}/_changes*" (optional, the step's path as
//! written), "reason": "..."}`, where `*` in `case`, `what` or `path`
//! matches any run of characters.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::PathBuf;

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Map, Value, json};

/// The corpus may grow, never shrink below this many requests.
const MIN_REQUESTS: usize = 300;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("differential")
}

/// One request of a case, as written in the corpus.
#[derive(Debug, Clone)]
struct Step {
    method: String,
    path: String,
    body: Option<Value>,
    raw: Option<String>,
    content_type: Option<String>,
    headers: Vec<(String, String)>,
    /// Sent without the admin's credentials (`"anonymous": true`), or as
    /// another user (`"as": "name:password"`).
    as_user: Option<String>,
}

fn parse_step(value: &Value, at: &str) -> Step {
    match value {
        Value::Array(items) => Step {
            method: items[0]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: method"))
                .into(),
            path: items[1]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: path"))
                .into(),
            body: items.get(2).cloned(),
            raw: None,
            content_type: None,
            headers: Vec::new(),
            as_user: None,
        },
        Value::Object(map) => Step {
            method: map["method"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: method"))
                .into(),
            path: map["path"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: path"))
                .into(),
            body: map.get("body").cloned(),
            raw: map.get("raw").and_then(Value::as_str).map(str::to_string),
            content_type: map
                .get("content_type")
                .and_then(Value::as_str)
                .map(str::to_string),
            headers: map
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            as_user: match (map.get("anonymous"), map.get("as")) {
                (Some(Value::Bool(true)), _) => Some(String::new()),
                (_, Some(Value::String(user))) => Some(user.clone()),
                _ => None,
            },
        },
        _ => panic!("{at}: a step is an array or an object"),
    }
}

#[derive(Debug)]
struct Case {
    /// `area/name`.
    id: String,
    no_db: bool,
    steps: Vec<Step>,
}

fn load_corpus() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/differential exists")
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_stem().is_some_and(|s| s != "allowed")
        })
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let area = file.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let corpus: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
        for case in corpus["cases"].as_array().expect("a `cases` array") {
            let name = case["name"].as_str().expect("a case name");
            let id = format!("{area}/{name}");
            let steps = case["steps"]
                .as_array()
                .expect("a `steps` array")
                .iter()
                .enumerate()
                .map(|(i, s)| parse_step(s, &format!("{id} step {i}")))
                .collect();
            cases.push(Case {
                id,
                no_db: case["no_db"] == true,
                steps,
            });
        }
    }
    cases
}

/// What one server answered to one step.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
    json: Option<Value>,
}

/// Fills `{db}`, `{db2}` and `{N.path}` placeholders of `text`.
fn expand(text: &str, dbs: &[String; 2], answers: &[Answer]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..close];
        match name {
            "db" => out.push_str(&dbs[0]),
            "db2" => out.push_str(&dbs[1]),
            _ => match lookup(name, answers) {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[open..=close]),
            },
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `N.a.b.0` from step N's JSON, or `N.header.name` from its headers.
fn lookup(name: &str, answers: &[Answer]) -> Option<String> {
    let mut parts = name.split('.');
    let step: usize = parts.next()?.parse().ok()?;
    let answer = answers.get(step)?;
    let path: Vec<&str> = parts.collect();
    if path.first() == Some(&"header") {
        let value = answer.headers.get(*path.get(1)?)?.to_str().ok()?;
        return Some(value.to_string());
    }
    let mut value = answer.json.as_ref()?;
    for key in path {
        value = match value {
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            Value::Object(map) => map.get(key)?,
            _ => return None,
        };
    }
    Some(match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// Expands placeholders in every string of a JSON body.
fn expand_value(value: &Value, dbs: &[String; 2], answers: &[Answer]) -> Value {
    match value {
        Value::String(s) => Value::String(expand(s, dbs, answers)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| expand_value(v, dbs, answers))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (expand(k, dbs, answers), expand_value(v, dbs, answers)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn send(client: &Client, step: &Step, dbs: &[String; 2], answers: &[Answer]) -> Answer {
    let method = reqwest::Method::from_bytes(step.method.as_bytes()).expect("a method");
    let mut url = client.url(&expand(&step.path, dbs, answers));
    if let Some(user) = &step.as_user {
        url = recliner_tests::without_credentials(&url);
        if !user.is_empty() {
            let user = expand(user, dbs, answers);
            url = url.replacen("://", &format!("://{user}@"), 1);
        }
    }
    let mut request = client.http().request(method, url);
    for (name, value) in &step.headers {
        request = request.header(name, expand(value, dbs, answers));
    }
    if let Some(body) = &step.body {
        request = request
            .header("content-type", "application/json")
            .body(expand_value(body, dbs, answers).to_string());
    }
    if let Some(raw) = &step.raw {
        request = request.body(expand(raw, dbs, answers));
    }
    if let Some(content_type) = &step.content_type {
        request = request.header("content-type", content_type);
    }
    let response = request
        .timeout(std::time::Duration::from_secs(30))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{} {}: {e}", step.method, step.path));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    let json = parse_json_or_lines(&text);
    Answer {
        status,
        headers,
        text,
        json,
    }
}

/// A JSON document, or newline-delimited JSON as an array of its lines.
fn parse_json_or_lines(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let lines: Option<Vec<Value>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).ok())
        .collect();
    lines.filter(|l| !l.is_empty()).map(Value::Array)
}

/// Keys whose values are sequences or times: opaque and different by
/// design.
const OPAQUE_KEYS: &[&str] = &[
    "seq",
    "last_seq",
    "update_seq",
    "since",
    "purge_seq",
    "instance_start_time",
];

fn is_hex32(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The types CouchDB stores gzip-encoded (its `compressible_types`).
fn compressible(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.starts_with("text/")
        || [
            "application/javascript",
            "application/json",
            "application/xml",
        ]
        .contains(&media)
}

/// Replaces what legitimately differs between the two servers.
fn normalize(value: &mut Value) {
    if let Value::Object(map) = value
        && map
            .get("content_type")
            .and_then(Value::as_str)
            .is_some_and(compressible)
    {
        if map.contains_key("digest") {
            map.insert("digest".into(), "<digest of a compressible type>".into());
        }
        map.remove("encoding");
        map.remove("encoded_length");
    }
    match value {
        Value::String(s) => {
            if is_hex32(s) {
                *s = "<hash>".into();
            } else if let Some((pos, hash)) = s.split_once('-')
                && pos.bytes().all(|b| b.is_ascii_digit())
                && !pos.is_empty()
                && is_hex32(hash)
            {
                *s = format!("{pos}-<hash>");
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if OPAQUE_KEYS.contains(&key.as_str()) && !v.is_null() {
                    *v = Value::String("<opaque>".into());
                } else {
                    normalize(v);
                }
            }
        }
        _ => {}
    }
}

/// Every JSON pointer where `a` and `b` differ, with both values.
fn json_differences(a: &Value, b: &Value, pointer: String, out: &mut Vec<(String, String)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let at = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => json_differences(p, q, at, out),
                    (p, q) => out.push((at, format!("{} | {}", shown(p), shown(q)))),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                json_differences(p, q, format!("{pointer}/{i}"), out);
            }
        }
        _ if a == b => {}
        _ => out.push((pointer, format!("{a} | {b}"))),
    }
}

fn shown(value: Option<&Value>) -> String {
    value.map_or("(absent)".into(), Value::to_string)
}

/// The media type and parameters of a `Content-Type`, lowercased, with a
/// multipart boundary left out.
fn content_type(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let value = headers
        .get("content-type")?
        .to_str()
        .ok()?
        .to_ascii_lowercase();
    let kept: Vec<String> = value
        .split(';')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.starts_with("boundary="))
        .collect();
    Some(kept.join("; "))
}

/// How a header compares: `ETag` by presence and quoting, `Location` by
/// its path, the others as they are.
fn header_form(name: &str, headers: &reqwest::header::HeaderMap) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    Some(match name {
        "etag" => {
            if value.starts_with('"') && value.ends_with('"') {
                "quoted".into()
            } else {
                "unquoted".into()
            }
        }
        "location" => {
            let after_scheme = value.split_once("://").map_or(value, |(_, rest)| rest);
            let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
            path.split('/')
                .map(|segment| if is_hex32(segment) { "<hash>" } else { segment })
                .collect::<Vec<_>>()
                .join("/")
        }
        // No ranges on what CouchDB stores compressed.
        "accept-ranges"
            if headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(compressible) =>
        {
            return None;
        }
        _ => value.to_string(),
    })
}

const COMPARED_HEADERS: &[&str] = &["etag", "location", "cache-control", "accept-ranges"];

/// Differences between the two answers to one step: (what, detail).
fn differences(couch: &Answer, ours: &Answer) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if couch.status != ours.status {
        out.push((
            "status".to_string(),
            format!("{} | {}", couch.status, ours.status),
        ));
    }
    let (ct_couch, ct_ours) = (content_type(&couch.headers), content_type(&ours.headers));
    if ct_couch != ct_ours {
        out.push((
            "header:content-type".into(),
            format!("{ct_couch:?} | {ct_ours:?}"),
        ));
    }
    for name in COMPARED_HEADERS {
        let (a, b) = (
            header_form(name, &couch.headers),
            header_form(name, &ours.headers),
        );
        if a != b {
            out.push((format!("header:{name}"), format!("{a:?} | {b:?}")));
        }
    }
    let multipart = ct_couch
        .as_deref()
        .is_some_and(|t| t.starts_with("multipart/"));
    match (&couch.json, &ours.json) {
        _ if multipart => {}
        (Some(a), Some(b)) => {
            let (mut a, mut b) = (a.clone(), b.clone());
            normalize(&mut a);
            normalize(&mut b);
            let mut found = Vec::new();
            json_differences(&a, &b, String::new(), &mut found);
            out.extend(found.into_iter().map(|(p, d)| (format!("body{p}"), d)));
        }
        _ if couch.text != ours.text => out.push((
            "body".into(),
            format!("{:.200} | {:.200}", couch.text, ours.text),
        )),
        _ => {}
    }
    out
}

/// One allowed difference, with its reason.
#[derive(Debug)]
struct Allowed {
    case: String,
    what: String,
    /// Only at these steps, when given.
    steps: Option<Vec<usize>>,
    /// Only for requests to this path (as the corpus writes it), when given.
    path: Option<String>,
    reason: String,
    used: std::cell::Cell<bool>,
}

fn load_allowed() -> Vec<Allowed> {
    let text = std::fs::read_to_string(corpus_dir().join("allowed.json")).unwrap();
    let list: Vec<Map<String, Value>> =
        serde_json::from_str(&text).expect("allowed.json is a list");
    list.into_iter()
        .map(|entry| {
            let field = |k: &str| {
                entry
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let allowed = Allowed {
                case: field("case"),
                what: field("what"),
                steps: entry.get("steps").and_then(Value::as_array).map(|steps| {
                    steps
                        .iter()
                        .filter_map(Value::as_u64)
                        .map(|n| n as usize)
                        .collect()
                }),
                path: entry
                    .get("path")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                reason: field("reason"),
                used: std::cell::Cell::new(false),
            };
            assert!(
                !allowed.reason.trim().is_empty(),
                "every allowed difference says why: {entry:?}"
            );
            allowed
        })
        .collect()
}

/// Whether `value` matches `pattern`, where `*` stands for any run of
/// characters.
fn pattern_matches(pattern: &str, value: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

fn is_allowed(allowed: &[Allowed], case: &str, step: (usize, &str), what: &str) -> bool {
    let (index, path) = step;
    let hit = allowed.iter().find(|a| {
        pattern_matches(&a.case, case)
            && pattern_matches(&a.what, what)
            && a.steps.as_ref().is_none_or(|steps| steps.contains(&index))
            && a.path.as_ref().is_none_or(|p| pattern_matches(p, path))
    });
    if let Some(a) = hit {
        a.used.set(true);
    }
    hit.is_some()
}

#[test]
fn patterns_match_any_run_of_characters_at_each_star() {
    assert!(pattern_matches("body/a", "body/a"));
    assert!(!pattern_matches("body/a", "body/ab"));
    assert!(pattern_matches("body*", "body/x/y"));
    assert!(pattern_matches("*/sizes/*", "body/0/info/sizes/file"));
    assert!(pattern_matches(
        "body/results/*/docs/*/error/rev",
        "body/results/2/docs/0/error/rev"
    ));
    assert!(!pattern_matches(
        "body/results/*/error",
        "body/results/2/ok"
    ));
    assert!(pattern_matches("*", ""));
}

#[tokio::test]
async fn the_same_requests_get_the_same_answers_from_couchdb_and_recliner() {
    let cases = load_corpus();
    let requests: usize = cases.iter().map(|c| c.steps.len()).sum();
    let allowed = load_allowed();
    let Some(couch) = couchdb("the_same_requests_get_the_same_answers_from_couchdb_and_recliner")
    else {
        return;
    };
    let data = TempDir::new("differential");
    // The same admin on both, so `/_session` and `userCtx` answers compare.
    let admin = couch
        .url()
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map(|(credentials, _)| credentials.to_string())
        .expect("COUCHDB_URL carries the admin's credentials");
    let server = TestServer::start_with_env(
        data.path(),
        &["--log-level", "warn"],
        &[("RECLINER_ADMIN", admin.as_str())],
    );
    let servers = [couch.client(), Client::new(&server)];
    let mut unexplained: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in &cases {
        let dbs = [unique_db("diff"), unique_db("diff2")];
        if !case.no_db {
            for client in &servers {
                let reply = client.put(&format!("/{}", dbs[0]), json!({})).await;
                assert_eq!(reply.status, 201, "{}: {}", case.id, reply.text);
            }
        }
        let mut answers: [Vec<Answer>; 2] = [Vec::new(), Vec::new()];
        for (i, step) in case.steps.iter().enumerate() {
            for (side, client) in servers.iter().enumerate() {
                let answer = send(client, step, &dbs, &answers[side]).await;
                answers[side].push(answer);
            }
            let (couch_answer, ours) = (&answers[0][i], &answers[1][i]);
            for (what, detail) in differences(couch_answer, ours) {
                if !is_allowed(&allowed, &case.id, (i, &step.path), &what) {
                    unexplained
                        .entry(case.id.clone())
                        .or_default()
                        .push(format!(
                            "  step {i} ({} {}): {what}: CouchDB | Recliner: {detail}",
                            step.method, step.path
                        ));
                }
            }
        }
        for client in &servers {
            for db in &dbs {
                let _ = client.delete(&format!("/{db}")).await;
            }
        }
    }
    for a in allowed.iter().filter(|a| !a.used.get()) {
        eprintln!(
            "allowed.json: no difference matched {} {} ({})",
            a.case, a.what, a.reason
        );
    }
    let count: usize = unexplained.values().map(Vec::len).sum();
    let report: Vec<String> = unexplained
        .iter()
        .map(|(case, lines)| format!("{case}\n{}", lines.join("\n")))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{count} differences from CouchDB over {requests} requests in {} cases, neither fixed nor \
         allowed (tests/differential/allowed.json):\n{}",
        cases.len(),
        report.join("\n")
    );
    assert!(
        requests >= MIN_REQUESTS,
        "the corpus has {requests} requests, fewer than {MIN_REQUESTS}"
    );
}
