//! Target `http`: the real `recliner` binary, end to end. Each input is a
//! short sequence of requests (random methods on the document, bulk, feed,
//! attachment and replication paths; real query parameters with hostile
//! values; bodies shaped like real ones with hostile mutations; multipart
//! uploads with random boundaries and declared lengths), run against a
//! fresh database `db` on a server that lives across inputs and is
//! restarted if it dies.
//!
//! Invariants, per request: an answer comes (no dropped connection, no
//! timeout), it is valid JSON (except attachment bytes, multipart and event
//! streams), errors carry `error` and `reason`, and no 5xx other than
//! `501 not_implemented` and a `/_replicate` that failed with a named
//! error. After each input: the process is alive and logged no panic; every
//! database opens; `_all_docs?include_docs=true`,
//! `_changes?include_docs=true&style=all_docs` and every listed document
//! (plain and `open_revs=all`), all with `attachments=true`, are valid JSON;
//! every acknowledged write (2xx with `id` and `rev`) is still readable by
//! that revision (local documents: still there unless maybe deleted).
//!
//! Placeholders filled in at run time: `@REV@` is the last acknowledged
//! revision (so edits can hit a real parent), `@JREV@` the same escaped
//! for inside a JSON string, `@BASE@` the server's URL.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use recliner_tests::{TempDir, TestServer, percent_encode};
use serde_json::Value;

use crate::driver::Violations;
use crate::hostile::{self, object};

/// How long one request may take before it counts as a hang.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a server that dropped a connection gets to finish dying (an
/// abort prints a backtrace first) before it is taken to be alive.
const DYING_TIME: Duration = Duration::from_millis(1500);

const METHODS: &[&str] = &[
    "GET", "PUT", "POST", "DELETE", "HEAD", "COPY", "OPTIONS", "PATCH",
];

/// Document ids: a few fixed ones so requests meet the same documents.
const IDS: &[&str] = &["doc", "doc", "a", "_design/d", "a/b", "é\"\\", "x y"];

const ATTACHMENTS: &[&str] = &["att", "att", "a/b.txt", "x y", "_bad"];

/// The paths the fuzzer aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Template {
    Db,
    Doc,
    Local,
    BulkDocs,
    AllDocs,
    Changes,
    RevsDiff,
    BulkGet,
    Attachment,
    Replicate,
}

impl Template {
    fn label(self) -> &'static str {
        match self {
            Template::Db => "/{db}",
            Template::Doc => "/db/{doc}",
            Template::Local => "/db/_local/{x}",
            Template::BulkDocs => "/db/_bulk_docs",
            Template::AllDocs => "/db/_all_docs",
            Template::Changes => "/db/_changes",
            Template::RevsDiff => "/db/_revs_diff",
            Template::BulkGet => "/db/_bulk_get",
            Template::Attachment => "/db/{doc}/{att}",
            Template::Replicate => "/_replicate",
        }
    }

    /// Whether a 2xx answer to a writing method acknowledges document writes.
    fn writes(self) -> bool {
        matches!(
            self,
            Template::Db
                | Template::Doc
                | Template::Local
                | Template::BulkDocs
                | Template::Attachment
        )
    }
}

/// One request of an input.
#[derive(Clone)]
pub struct Req {
    template: Template,
    method: &'static str,
    /// Path and query, percent-encoded, possibly with placeholders.
    path: String,
    headers: Vec<(&'static str, String)>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

/// The requests of one input, run in order on a fresh database `db`.
#[derive(Clone)]
pub struct Case(Vec<Req>);

/// At most `limit` bytes of `bytes`, as text.
pub(crate) fn snippet(bytes: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]).into_owned();
    if bytes.len() > limit {
        format!("{text}... ({} bytes in all)", bytes.len())
    } else {
        text
    }
}

impl fmt::Debug for Req {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}", self.method, self.path)?;
        for (name, value) in &self.headers {
            writeln!(f, "    {name}: {value:?}")?;
        }
        if let Some(ct) = &self.content_type {
            writeln!(f, "    content-type: {ct:?}")?;
        }
        if let Some(body) = &self.body {
            writeln!(f, "    body: {:?}", snippet(body, 4000))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "(setup: DELETE every database, PUT /db; @REV@ = the last acknowledged rev)"
        )?;
        for (i, req) in self.0.iter().enumerate() {
            write!(f, "{}. {req:?}", i + 1)?;
        }
        Ok(())
    }
}

// --- generators ---

/// Percent-encodes a query value or path segment, keeping `@` for placeholders.
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A document id as a path segment: `percent_encode`, plus `.` encoded, so
/// that the client never resolves an id `..` as a relative path.
pub(crate) fn doc_path(id: &str) -> String {
    percent_encode(id).replace('.', "%2E")
}

fn doc_id() -> BoxedStrategy<String> {
    prop_oneof![6 => select(IDS).prop_map(str::to_string), 1 => hostile::text()].boxed()
}

fn method(likely: &'static [&'static str]) -> BoxedStrategy<&'static str> {
    prop_oneof![6 => select(likely), 1 => select(METHODS)].boxed()
}

fn param_value() -> BoxedStrategy<String> {
    prop_oneof![
        4 => select(&[
            "true", "false", "yes", "", "0", "1", "-1", "2", "18446744073709551615",
            "18446744073709551616", "100", "@REV@", "[\"@JREV@\"]", "\"all\"", "all", "[1]", "{",
            "null", "\"a\"", "[\"doc\",\"a\"]", "\"doc\"", "normal", "all_docs", "longpoll",
            "continuous", "eventsource", "_doc_ids", "_selector", "_design", "_view", "ok", "now",
            "\"\\u0000\"", "[\"@JREV@\",\"1-x\"]", "\"\\\"\"",
        ][..])
        .prop_map(str::to_string),
        1 => hostile::rev_text(),
        1 => hostile::text(),
        1 => hostile::number_text(),
    ]
    .boxed()
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
    "new_edits",
    "batch",
];
const ALL_DOCS_PARAMS: &[&str] = &[
    "include_docs",
    "descending",
    "limit",
    "skip",
    "startkey",
    "endkey",
    "start_key",
    "end_key",
    "key",
    "keys",
    "inclusive_end",
    "update_seq",
    "conflicts",
];
const CHANGES_PARAMS: &[&str] = &[
    "since",
    "style",
    "feed",
    "filter",
    "doc_ids",
    "include_docs",
    "descending",
    "limit",
    "heartbeat",
    "timeout",
    "conflicts",
    "attachments",
];
const BULK_GET_PARAMS: &[&str] = &["revs", "attachments", "latest"];
const WRITE_PARAMS: &[&str] = &["new_edits", "batch", "rev"];

/// A query string from real parameter names with hostile values. A feed
/// that could wait (longpoll, continuous) is cut short by a last `timeout`
/// and never gets a heartbeat, which would keep it open for ever.
fn query(names: &'static [&'static str]) -> BoxedStrategy<String> {
    let all: Vec<&'static str> = DOC_PARAMS
        .iter()
        .chain(ALL_DOCS_PARAMS)
        .chain(CHANGES_PARAMS)
        .copied()
        .collect();
    let name = if names.is_empty() {
        select(all).boxed()
    } else {
        prop_oneof![8 => select(names), 1 => select(all)].boxed()
    };
    let param = name.prop_flat_map(|name| {
        (
            Just(name),
            prop_oneof![3 => sane_value(name), 1 => param_value()],
        )
    });
    vec(param, 0..4)
        .prop_map(|mut params| {
            if params.iter().any(|(k, _)| *k == "feed") {
                params.retain(|(k, _)| *k != "heartbeat");
                params.push(("timeout", "100".into()));
            }
            if params.is_empty() {
                return String::new();
            }
            let pairs: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{k}={}", enc(v)))
                .collect();
            format!("?{}", pairs.join("&"))
        })
        .boxed()
}

/// A value the parameter accepts (or nearly).
fn sane_value(name: &str) -> BoxedStrategy<String> {
    let values: &'static [&'static str] = match name {
        "rev" => &["@REV@"],
        "open_revs" => &["all", "[\"@JREV@\"]", "[]"],
        "atts_since" => &["[\"@JREV@\"]", "[]"],
        "limit" | "skip" => &["0", "1", "2", "10"],
        "heartbeat" | "timeout" => &["10", "100"],
        "startkey" | "endkey" | "start_key" | "end_key" | "key" => &["\"a\"", "\"doc\"", "\"\""],
        "keys" => &["[\"doc\",\"a\"]", "[]", "[\"missing\"]"],
        "since" => &["0", "now", "1", "2"],
        "style" => &["main_only", "all_docs"],
        "feed" => &["normal", "longpoll", "continuous", "eventsource"],
        "filter" => &["_doc_ids", "_selector", "_design"],
        "doc_ids" => &["[\"doc\"]", "[]"],
        "batch" => &["ok"],
        _ => &["true", "false"],
    };
    select(values).prop_map(str::to_string).boxed()
}

fn rev_value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => Just(Value::from("@REV@")),
        2 => hostile::rev_text().prop_map(Value::String),
        // A valid position with a hash that needs escaping wherever it is written.
        2 => (1u64..4, vec(select(hostile::PIECES), 1..3))
            .prop_map(|(pos, hash)| Value::String(format!("{pos}-{}", hash.concat()))),
        1 => hostile::json_leaf(),
    ]
    .boxed()
}

fn document() -> BoxedStrategy<Value> {
    let id = prop_oneof![4 => doc_id().prop_map(Value::String), 1 => hostile::json_leaf()];
    hostile::document(id, rev_value()).boxed()
}

/// Bodies nobody should send.
fn hostile_body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        3 => select(&[
            "", "{", "[]", "null", "1e999999", "{\"docs\": 1}", "{\"a\":\"\\ud800\"}",
            "123456789012345678901234567890", "{\"_id\":\"a\",\"_id\":\"b\"}", "\u{feff}{}",
            "{\"docs\":[{\"_id\":\"doc\",\"_rev\":\"1-\\\"\"}]}", "{\"new_edits\":false,\"docs\":[{}]}",
        ][..])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => (1usize..3000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()),
        1 => vec(any::<u8>(), 0..64),
    ]
    .boxed()
}

fn json_content_type() -> BoxedStrategy<String> {
    prop_oneof![
        12 => Just("application/json".to_string()),
        1 => select(&[
            "text/plain", "application/json; charset=utf-8", "", "multipart/related; boundary=x",
            "application/x-www-form-urlencoded", "application/json; boundary=\"",
        ][..])
        .prop_map(str::to_string),
    ]
    .boxed()
}

/// A JSON body from `shape`, sometimes swapped for a hostile one.
fn json_body(
    shape: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<(Option<String>, Option<Vec<u8>>)> {
    (
        json_content_type(),
        prop_oneof![10 => shape.prop_map(|v| v.to_string().into_bytes()), 1 => hostile_body()],
    )
        .prop_map(|(ct, body)| (Some(ct), Some(body)))
        .boxed()
}

/// A `multipart/related` document upload: the JSON part, then one part per
/// `follows` attachment (sometimes one too many or too few), with random
/// (sometimes mismatched or unclosed) boundaries, declared lengths that are
/// exact or at integer edges, and gzip-encoded parts valid or not.
fn multipart() -> BoxedStrategy<(Option<String>, Option<Vec<u8>>)> {
    let boundary = prop_oneof![
        4 => "[a-f0-9]{32}",
        1 => hostile::text(),
        1 => Just(String::new()),
        1 => Just("x".repeat(200)),
    ];
    let attachment = (
        "[a-z]{1,4}",
        prop::option::weighted(0.5, hostile::edge_u64()),
        prop::option::weighted(
            0.5,
            prop_oneof![3 => Just("gzip".to_string()), 1 => hostile::text()],
        ),
        vec(any::<u8>(), 0..48),
        any::<bool>(),
    );
    (
        boundary.clone(),
        prop::option::weighted(0.1, boundary),
        document(),
        vec(attachment, 0..3),
        prop_oneof![6 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)],
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.8),
    )
        .prop_map(
            |(boundary, declared, mut doc, attachments, miscount, closed, part_headers)| {
                let mut entries = Vec::new();
                let mut parts: Vec<Vec<u8>> = Vec::new();
                for (name, length, encoding, bytes, gzip_it) in attachments {
                    let mut entry = vec![
                        ("follows".to_string(), Value::Bool(true)),
                        ("content_type".into(), Value::from("text/plain")),
                        (
                            "length".into(),
                            Value::from(length.unwrap_or(bytes.len() as u64)),
                        ),
                    ];
                    if let Some(encoding) = encoding {
                        entry.push(("encoding".into(), Value::String(encoding)));
                    }
                    entries.push((name, object(entry)));
                    parts.push(if gzip_it { gzip(&bytes) } else { bytes });
                }
                if !entries.is_empty()
                    && let Some(map) = doc.as_object_mut()
                {
                    map.insert("_attachments".into(), object(entries));
                }
                match miscount {
                    -1 => {
                        parts.pop();
                    }
                    1 => parts.push(b"extra".to_vec()),
                    _ => {}
                }
                let mut body = Vec::new();
                let mut part = |headers: &str, content: &[u8]| {
                    body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n").as_bytes());
                    body.extend_from_slice(content);
                    body.extend_from_slice(b"\r\n");
                };
                part(
                    if part_headers {
                        "Content-Type: application/json\r\n"
                    } else {
                        ""
                    },
                    doc.to_string().as_bytes(),
                );
                for content in &parts {
                    part(
                        if part_headers {
                            "Content-Disposition: attachment; filename=\"att\"\r\n"
                        } else {
                            ""
                        },
                        content,
                    );
                }
                if closed {
                    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
                }
                let declared = declared.unwrap_or(boundary);
                (
                    Some(format!("multipart/related; boundary=\"{declared}\"")),
                    Some(body),
                )
            },
        )
        .boxed()
}

/// `bytes` gzip-compressed, as CouchDB's replicator sends compressible attachments.
pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

fn no_body() -> BoxedStrategy<(Option<String>, Option<Vec<u8>>)> {
    Just((None, None)).boxed()
}

fn headers() -> BoxedStrategy<Vec<(&'static str, String)>> {
    let header = prop_oneof![
        2 => prop_oneof![Just("@REV@".to_string()), hostile::rev_text()].prop_map(|v| ("if-match", v)),
        1 => Just(("if-none-match", "\"@REV@\"".to_string())),
        2 => select(&[
            "application/json", "multipart/related", "multipart/mixed", "text/plain", "*/*",
        ][..])
        .prop_map(|v| ("accept", v.to_string())),
        1 => select(&[
            "bytes=0-1", "bytes=5-", "bytes=-1", "bytes=18446744073709551615-", "bytes=2-1",
            "bytes=0-0,2-3", "bytes=", "items=0-1", "bytes=-18446744073709551616",
        ][..])
        .prop_map(|v| ("range", v.to_string())),
        1 => (doc_id(), prop::bool::ANY).prop_map(|(id, with_rev)| {
            let rev = if with_rev { "?rev=@REV@" } else { "" };
            ("destination", format!("{}{rev}", doc_path(&id)))
        }),
    ];
    vec(header, 0..2).boxed()
}

/// Requests on one template.
fn request(template: Template) -> BoxedStrategy<Req> {
    type Body = (Option<String>, Option<Vec<u8>>);
    let (methods, path, query_names, body): (
        &'static [&'static str],
        BoxedStrategy<String>,
        &'static [&'static str],
        BoxedStrategy<Body>,
    ) = match template {
        Template::Db => (
            &["GET", "PUT", "POST", "POST", "HEAD", "DELETE"],
            prop_oneof![
                8 => Just("db"),
                2 => Just("db2"),
                1 => select(&["Bad", "_x", "a$()+-/b", "_users", "_replicator", "db%2F"][..]),
            ]
            .prop_map(|db| format!("/{}", enc(db).replace("%25", "%")))
            .boxed(),
            WRITE_PARAMS,
            prop_oneof![4 => json_body(document()), 1 => no_body()].boxed(),
        ),
        Template::Doc => (
            &["PUT", "PUT", "PUT", "GET", "GET", "DELETE", "COPY", "HEAD"],
            doc_id()
                .prop_map(|id| format!("/db/{}", doc_path(&id)))
                .boxed(),
            DOC_PARAMS,
            prop_oneof![5 => json_body(document()), 2 => multipart(), 1 => no_body()].boxed(),
        ),
        Template::Local => (
            &["PUT", "PUT", "GET", "DELETE"],
            prop_oneof![3 => Just("x".to_string()), 1 => hostile::text()]
                .prop_map(|x| format!("/db/_local/{}", enc(&x)))
                .boxed(),
            WRITE_PARAMS,
            prop_oneof![5 => json_body(document()), 1 => no_body()].boxed(),
        ),
        Template::BulkDocs => (
            &["POST"],
            Just("/db/_bulk_docs".to_string()).boxed(),
            WRITE_PARAMS,
            json_body(
                (
                    vec(document(), 0..5),
                    // Mostly replication-style writes: the revisions are the client's.
                    prop::option::weighted(
                        0.7,
                        prop_oneof![
                            4 => Just(Value::Bool(false)),
                            2 => Just(Value::Bool(true)),
                            1 => hostile::json_leaf(),
                        ],
                    ),
                )
                    .prop_map(|(docs, new_edits)| {
                        let mut pairs = vec![("docs".to_string(), Value::Array(docs))];
                        if let Some(new_edits) = new_edits {
                            pairs.push(("new_edits".into(), new_edits));
                        }
                        object(pairs)
                    }),
            )
            .boxed(),
        ),
        Template::AllDocs => (
            &["GET", "GET", "POST"],
            Just("/db/_all_docs".to_string()).boxed(),
            ALL_DOCS_PARAMS,
            prop_oneof![
                2 => no_body(),
                1 => json_body(
                    vec(prop_oneof![3 => doc_id().prop_map(Value::String), 1 => hostile::json_leaf()], 0..4)
                        .prop_map(|keys| object(vec![("keys".into(), Value::Array(keys))])),
                ),
                1 => json_body(hostile::json(2)),
            ]
            .boxed(),
        ),
        Template::Changes => (
            &["GET", "GET", "POST"],
            Just("/db/_changes".to_string()).boxed(),
            CHANGES_PARAMS,
            prop_oneof![
                2 => no_body(),
                1 => json_body(
                    (
                        vec(prop_oneof![3 => doc_id().prop_map(Value::String), 1 => hostile::json_leaf()], 0..3),
                        hostile::json(2),
                    )
                        .prop_map(|(ids, selector)| {
                            object(vec![
                                ("doc_ids".into(), Value::Array(ids)),
                                ("selector".into(), selector),
                            ])
                        }),
                ),
            ]
            .boxed(),
        ),
        Template::RevsDiff => (
            &["POST"],
            Just("/db/_revs_diff".to_string()).boxed(),
            &[],
            json_body(
                vec((doc_id(), vec(rev_value(), 0..4)), 0..3).prop_map(|entries| {
                    object(
                        entries
                            .into_iter()
                            .map(|(id, revs)| (id, Value::Array(revs)))
                            .collect(),
                    )
                }),
            )
            .boxed(),
        ),
        Template::BulkGet => (
            &["POST"],
            Just("/db/_bulk_get".to_string()).boxed(),
            BULK_GET_PARAMS,
            json_body(
                vec(
                    (
                        prop_oneof![4 => doc_id().prop_map(Value::String), 1 => hostile::json_leaf()],
                        prop::option::of(rev_value()),
                        prop::option::weighted(0.2, vec(rev_value(), 0..3)),
                    ),
                    0..4,
                )
                .prop_map(|docs| {
                    let docs = docs
                        .into_iter()
                        .map(|(id, rev, since)| {
                            let mut pairs = vec![("id".to_string(), id)];
                            if let Some(rev) = rev {
                                pairs.push(("rev".into(), rev));
                            }
                            if let Some(since) = since {
                                pairs.push(("atts_since".into(), Value::Array(since)));
                            }
                            object(pairs)
                        })
                        .collect();
                    object(vec![("docs".into(), Value::Array(docs))])
                }),
            )
            .boxed(),
        ),
        Template::Attachment => (
            &["PUT", "PUT", "GET", "GET", "DELETE", "HEAD"],
            (doc_id(), select(ATTACHMENTS))
                .prop_map(|(id, att)| {
                    let att: Vec<String> = att.split('/').map(enc).collect();
                    format!("/db/{}/{}", doc_path(&id), att.join("/"))
                })
                .boxed(),
            &["rev"],
            prop_oneof![
                3 => (
                    prop_oneof![
                        3 => Just("text/plain".to_string()),
                        1 => select(&["application/octet-stream", "", "a/b; x=\"", "image/png"][..])
                            .prop_map(str::to_string),
                    ],
                    vec(any::<u8>(), 0..200),
                )
                    .prop_map(|(ct, body)| (Some(ct), Some(body))),
                1 => no_body(),
            ]
            .boxed(),
        ),
        Template::Replicate => (
            &["POST"],
            Just("/_replicate".to_string()).boxed(),
            &[],
            json_body(replication()).boxed(),
        ),
    };
    (method(methods), path, query(query_names), headers(), body)
        .prop_map(
            move |(method, path, query, headers, (content_type, body))| {
                // Bodies only where a client would send one (any method may carry one).
                let (content_type, body) = match method {
                    "GET" | "HEAD" | "DELETE" | "COPY" | "OPTIONS" => (None, None),
                    _ => (content_type, body),
                };
                Req {
                    template,
                    method,
                    path: format!("{path}{query}"),
                    headers,
                    content_type,
                    body,
                }
            },
        )
        .boxed()
}

/// A `/_replicate` body: local names, this server's own URL, and junk; never
/// `continuous: true` (it would outlive the input) nor an unreachable peer
/// (retries would make it slow, not wrong).
fn replication() -> BoxedStrategy<Value> {
    let peer = prop_oneof![
        6 => select(&[
            "db", "db2", "missing", "@BASE@/db", "@BASE@/db2", "@BASE@/missing", "", "http://",
            "/db", "Bad Name",
        ][..])
        .prop_map(Value::from),
        1 => hostile::text().prop_map(|h| object(vec![
            ("url".into(), Value::from("@BASE@/db")),
            ("headers".into(), object(vec![("x-fuzz".into(), Value::String(h))])),
        ])),
        1 => hostile::json_leaf(),
    ];
    let option = |key: &'static str, value: BoxedStrategy<Value>| {
        prop::option::weighted(0.25, value).prop_map(move |v| v.map(|v| (key.to_string(), v)))
    };
    let bool_or_junk =
        || prop_oneof![3 => any::<bool>().prop_map(Value::Bool), 1 => hostile::json_leaf()].boxed();
    let number = || hostile::edge_u64().prop_map(Value::from).boxed();
    (
        peer.clone(),
        peer,
        option("create_target", bool_or_junk()),
        option(
            "doc_ids",
            vec(doc_id().prop_map(Value::String), 0..3)
                .prop_map(Value::Array)
                .boxed(),
        ),
        option(
            "filter",
            select(&["_doc_ids", "_selector", "ddoc/f", ""][..])
                .prop_map(Value::from)
                .boxed(),
        ),
        option("selector", hostile::json(2)),
        option("since_seq", hostile::json_leaf()),
        option(
            "continuous",
            prop_oneof![
                Just(Value::Bool(false)),
                hostile::json_leaf().prop_filter("not true", |v| v != &Value::Bool(true))
            ]
            .boxed(),
        ),
        option("cancel", bool_or_junk()),
        (
            option("worker_batch_size", number()),
            option("worker_processes", number()),
            option("http_connections", number()),
            option("connection_timeout", number()),
            option(
                "retries_per_request",
                (0u64..3).prop_map(Value::from).boxed(),
            ),
            option("checkpoint_interval", number()),
            option("use_checkpoints", bool_or_junk()),
            option("winning_revs_only", bool_or_junk()),
        ),
    )
        .prop_map(
            |(source, target, a, b, c, d, e, f, g, (h, i, j, k, l, m, n, o))| {
                let mut pairs = vec![
                    ("source".to_string(), source),
                    ("target".to_string(), target),
                ];
                pairs.extend(
                    [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o]
                        .into_iter()
                        .flatten(),
                );
                object(pairs)
            },
        )
        .boxed()
}

pub fn strategy() -> BoxedStrategy<Case> {
    let req = prop_oneof![
        2 => request(Template::Db),
        6 => request(Template::Doc),
        2 => request(Template::Local),
        4 => request(Template::BulkDocs),
        2 => request(Template::AllDocs),
        2 => request(Template::Changes),
        2 => request(Template::RevsDiff),
        2 => request(Template::BulkGet),
        3 => request(Template::Attachment),
        1 => request(Template::Replicate),
    ];
    vec(req, 1..16).prop_map(Case).boxed()
}

// --- running ---

/// The server the inputs run against, restarted when it dies.
struct Server {
    server: TestServer,
    /// Its data folder, removed when the server is replaced.
    _data: TempDir,
    /// How much of its log was already scanned for panics.
    log_seen: usize,
}

/// A server answer.
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Lowercased.
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
}

/// Why an audit read failed: `class` names the kind of failure.
pub(crate) struct Failed {
    pub(crate) class: String,
    pub(crate) detail: String,
}

/// What became of a request sent with [`Harness::exchange`].
pub(crate) enum Sent {
    Answered(Answer),
    /// The server died on it (the caller of [`Harness::run_input`] reports that).
    Died,
    /// No answer, and the server lives on: already recorded as a violation.
    Lost,
}

/// An acknowledged write.
#[derive(Debug)]
struct Acked {
    rev: String,
    /// A later write of the id may have deleted it (then only its revision is checked).
    maybe_deleted: bool,
}

/// Runs inputs against a live server. The `multipart` and `query` targets
/// run theirs through it too ([`Harness::run_input`]).
pub struct Harness {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    server: RefCell<Option<Server>>,
    /// Whether a request of the current input went unanswered.
    troubled: std::cell::Cell<bool>,
    /// Names the server's data folder.
    label: &'static str,
}

impl Harness {
    /// Starts the server at once, so that a missing binary fails here, plainly.
    pub fn new() -> Harness {
        Harness::named("fuzz-http")
    }

    /// A harness whose server's data folder is named after `label`.
    pub(crate) fn named(label: &'static str) -> Harness {
        // Installs the TLS provider reqwest needs before any client exists.
        let _ = recliner_tests::http_client();
        let harness = Harness {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime"),
            http: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .build()
                .expect("an HTTP client"),
            server: RefCell::new(None),
            troubled: std::cell::Cell::new(false),
            label,
        };
        harness.base();
        harness
    }

    /// The base URL of a live server, starting a new one when needed.
    fn base(&self) -> String {
        let mut slot = self.server.borrow_mut();
        if let Some(server) = slot.as_ref()
            && alive(server.server.pid())
        {
            return server.server.url.clone();
        }
        let data = TempDir::new(self.label);
        // Backtraces name the frame of ours behind a panic in the standard library.
        let server = TestServer::start_with_env(
            data.path(),
            &["--log-level", "warn"],
            &[("RUST_BACKTRACE", "1")],
        );
        let url = server.url.clone();
        *slot = Some(Server {
            server,
            _data: data,
            log_seen: 0,
        });
        url
    }

    /// What the server logged since the last call (see [`LogNews`]).
    fn new_log(&self) -> LogNews {
        let mut slot = self.server.borrow_mut();
        let Some(server) = slot.as_mut() else {
            return LogNews::default();
        };
        let logs = server.server.logs();
        let fresh = logs.get(server.log_seen..).unwrap_or("").to_string();
        server.log_seen = logs.len();
        LogNews::read(&fresh)
    }

    /// Whether the server is dead or dies within `limit`; marks the input
    /// as troubled either way (something went wrong on the wire).
    async fn dies_within(&self, limit: Duration) -> bool {
        self.troubled.set(true);
        let deadline = std::time::Instant::now() + limit;
        while self.server_alive() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    pub(crate) fn server_alive(&self) -> bool {
        self.server
            .borrow()
            .as_ref()
            .is_some_and(|s| alive(s.server.pid()))
    }

    pub fn check(&self, case: &Case, v: &mut Violations) {
        self.run_input(v, async |base, v| self.run(base, case, v).await);
    }

    /// Runs one input, `input(base URL, violations)`, against a live
    /// server (started anew if the last one died), then charges to it a
    /// death of the server or a panic it logged.
    pub(crate) fn run_input(
        &self,
        v: &mut Violations,
        input: impl AsyncFnOnce(&str, &mut Violations),
    ) {
        let base = self.base();
        let _ = self.new_log(); // whatever an earlier input left behind
        self.troubled.set(false);
        self.rt.block_on(input(&base, v));
        // A process that aborts first prints its backtrace, which takes a
        // while: after a dropped connection, give it time to finish dying so
        // the death is charged to this input and not to the next one.
        let died = if self.troubled.get() {
            self.rt.block_on(self.dies_within(DYING_TIME))
        } else {
            !self.server_alive()
        };
        if died {
            // Let the log reader catch the dying words.
            std::thread::sleep(Duration::from_millis(300));
        }
        let news = self.new_log();
        if died {
            let (signature, evidence) = news.fatal.unwrap_or_default();
            v.add(
                format!("server process died{signature}"),
                format!("{evidence}\nlog tail:\n{}", news.tail),
            );
        }
        for (location, detail) in news.panics {
            v.add(format!("server panicked at {location}"), detail);
        }
    }

    async fn run(&self, base: &str, case: &Case, v: &mut Violations) {
        if let Err(e) = self.reset(base).await {
            v.add("setup failed", e);
            return;
        }
        let mut ledger: BTreeMap<(String, String), Acked> = BTreeMap::new();
        let mut last_rev: Option<String> = None;
        for req in &case.0 {
            let rev = last_rev.clone().unwrap_or_else(|| "1-x".into());
            let Some((sent, result)) = self.send(base, req, &rev).await else {
                continue; // the client could not even build it (bad header, URL)
            };
            let answer = match result {
                Ok(answer) => answer,
                Err(e) => {
                    if self.dies_within(DYING_TIME).await {
                        return; // reported by the caller, with the log
                    }
                    let kind = if e.contains("timed out") {
                        "no answer in time"
                    } else {
                        "connection closed without an answer"
                    };
                    v.add(
                        format!("{kind}: {} {}", req.method, req.template.label()),
                        format!("{sent}\n{e}"),
                    );
                    continue;
                }
            };
            if std::env::var_os("RECLINER_FUZZ_TRACE").is_some() {
                eprintln!("{sent}-> {} {}", answer.status, snippet(&answer.body, 300));
            }
            check_answer(req, &sent, &answer, v);
            if (200..300).contains(&answer.status) {
                learn(req, &answer, &mut ledger, &mut last_rev);
            }
        }
        if self.server_alive() {
            self.audit(base, &ledger, v).await;
        }
    }

    /// The client requests go through (20 s timeout unless the request sets one).
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends `request`; an unanswered one is a violation (`shown` is the
    /// request as reports show it, `what` names it in the kind) unless the
    /// server died on it.
    pub(crate) async fn exchange(
        &self,
        request: reqwest::Request,
        shown: &str,
        what: &str,
        v: &mut Violations,
    ) -> Sent {
        let result = async {
            let response = self.http.execute(request).await.map_err(error_chain)?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let body = response.bytes().await.map_err(error_chain)?.to_vec();
            Ok::<_, String>(Answer {
                status,
                content_type,
                body,
            })
        }
        .await;
        match result {
            Ok(answer) => Sent::Answered(answer),
            Err(e) => {
                if self.dies_within(DYING_TIME).await {
                    return Sent::Died;
                }
                let kind = if e.contains("timed out") {
                    "no answer in time"
                } else {
                    "connection closed without an answer"
                };
                v.add(format!("{kind}: {what}"), format!("{shown}\n{e}"));
                Sent::Lost
            }
        }
    }

    /// Deletes every user database and creates an empty `db`.
    pub(crate) async fn reset(&self, base: &str) -> Result<(), String> {
        let dbs = self
            .get_json(base, "/_all_dbs")
            .await
            .map_err(|e| e.detail)?;
        for db in dbs
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !db.starts_with('_') {
                let url = format!("{base}/{}", enc(db));
                let _ = self.http.delete(url).send().await;
            }
        }
        let created = self
            .http
            .put(format!("{base}/db"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if created.status().as_u16() != 201 {
            return Err(format!("PUT /db answered {}", created.status()));
        }
        Ok(())
    }

    /// `GET path` answered 200 with valid JSON, or how it failed.
    pub(crate) async fn get_json(&self, base: &str, path: &str) -> Result<Value, Failed> {
        let request = self
            .http
            .get(format!("{base}{path}"))
            .header("accept", "application/json");
        self.audit_json(request, format!("GET {path}")).await
    }

    /// One revision of a document through `_bulk_get`, for the ids no path
    /// can name (see [`dot_segment`]).
    async fn bulk_get_rev(
        &self,
        base: &str,
        d: &str,
        id: &str,
        rev: &str,
    ) -> Result<Value, Failed> {
        let body = serde_json::json!({"docs": [{"id": id, "rev": rev}]}).to_string();
        let path = format!("/{d}/_bulk_get");
        let shown = format!("POST {path} {body}");
        let request = self
            .http
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(body);
        let value = self.audit_json(request, shown.clone()).await?;
        if value.is_null() {
            return Ok(value);
        }
        match value["results"][0]["docs"][0].get("ok") {
            Some(doc) => Ok(doc.clone()),
            None => Err(Failed {
                class: "answers an error".into(),
                detail: format!("{shown}: {value}"),
            }),
        }
    }

    /// Sends an audit request: 200 with valid JSON, or how it failed.
    /// JSON deeper than serde_json parses is valid but has nothing to look
    /// into (`Null`). `shown` names the request in reports.
    async fn audit_json(
        &self,
        request: reqwest::RequestBuilder,
        shown: String,
    ) -> Result<Value, Failed> {
        let failed = |class: String, detail: String| Failed {
            class,
            detail: format!("{shown}: {detail}"),
        };
        let answer = request.send().await.map_err(|e| {
            self.troubled.set(true);
            failed("no answer".into(), error_chain(e))
        })?;
        let status = answer.status().as_u16();
        let body = answer.bytes().await.map_err(|e| {
            self.troubled.set(true);
            failed("no answer".into(), error_chain(e))
        })?;
        if status != 200 {
            return Err(failed(format!("answers {status}"), snippet(&body, 300)));
        }
        match serde_json::from_slice(&body) {
            Ok(value) => Ok(value),
            Err(_) if is_json(&body) => Ok(Value::Null),
            Err(e) => Err(failed(
                "invalid JSON".into(),
                format!("({e}): {}", snippet(&body, 600)),
            )),
        }
    }

    /// Sends `req` with its placeholders filled in; `None` when the request
    /// cannot be built. Returns the request as sent, for reports.
    async fn send(
        &self,
        base: &str,
        req: &Req,
        rev: &str,
    ) -> Option<(String, Result<Answer, String>)> {
        let json_rev = Value::from(rev).to_string();
        let json_rev = &json_rev[1..json_rev.len() - 1];
        let path = req
            .path
            .replace("@JREV@", &enc(json_rev))
            .replace("@REV@", &enc(rev));
        let method = reqwest::Method::from_bytes(req.method.as_bytes()).ok()?;
        let mut builder = self.http.request(method, format!("{base}{path}"));
        let mut shown = format!("{} {path}\n", req.method);
        for (name, value) in &req.headers {
            let value = value.replace("@REV@", rev);
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                continue;
            }
            shown.push_str(&format!("    {name}: {value}\n"));
            builder = builder.header(*name, value);
        }
        if let Some(ct) = &req.content_type {
            reqwest::header::HeaderValue::from_str(ct).ok()?;
            shown.push_str(&format!("    content-type: {ct}\n"));
            builder = builder.header("content-type", ct);
        }
        if let Some(body) = &req.body {
            let body = replace_bytes(
                &replace_bytes(body, b"@REV@", json_rev.as_bytes()),
                b"@BASE@",
                base.as_bytes(),
            );
            shown.push_str(&format!("    body: {}\n", snippet(&body, 2000)));
            builder = builder.body(body);
        }
        let request = builder.build().ok()?;
        let result = async {
            let response = self.http.execute(request).await.map_err(error_chain)?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let body = response.bytes().await.map_err(error_chain)?.to_vec();
            Ok(Answer {
                status,
                content_type,
                body,
            })
        }
        .await;
        Some((shown, result))
    }

    /// The invariants after an input (see the module comment).
    async fn audit(
        &self,
        base: &str,
        ledger: &BTreeMap<(String, String), Acked>,
        v: &mut Violations,
    ) {
        let dbs: Vec<String> = match self.get_json(base, "/_all_dbs").await {
            Ok(Value::Array(dbs)) => dbs
                .iter()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect(),
            Ok(other) => {
                v.add("_all_dbs is not a list", other.to_string());
                return;
            }
            Err(e) => {
                v.add(format!("_all_dbs fails: {}", e.class), e.detail);
                return;
            }
        };
        for db in &dbs {
            let d = enc(db);
            if let Err(e) = self.get_json(base, &format!("/{d}")).await {
                v.add(format!("a database does not open: {}", e.class), e.detail);
                continue;
            }
            let all_docs = self
                .get_json(
                    base,
                    &format!("/{d}/_all_docs?include_docs=true&conflicts=true&attachments=true"),
                )
                .await;
            let ids: Vec<String> = match &all_docs {
                Ok(page) => page["rows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["id"].as_str().map(str::to_string))
                    .take(40)
                    .collect(),
                Err(e) => {
                    v.add(
                        format!("_all_docs?include_docs=true fails: {}", e.class),
                        e.detail.clone(),
                    );
                    Vec::new()
                }
            };
            if let Err(e) = self
                .get_json(
                    base,
                    &format!("/{d}/_changes?include_docs=true&style=all_docs&conflicts=true&attachments=true"),
                )
                .await
            {
                v.add(
                    format!(
                        "_changes?include_docs=true&style=all_docs fails: {}",
                        e.class
                    ),
                    e.detail,
                );
            }
            for id in ids.iter().filter(|id| !dot_segment(id)) {
                let p = doc_path(id);
                if let Err(e) = self
                    .get_json(
                        base,
                        &format!("/{d}/{p}?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&attachments=true"),
                    )
                    .await
                {
                    v.add(format!("GET of a document _all_docs lists fails: {}", e.class), e.detail);
                }
                if let Err(e) = self
                    .get_json(
                        base,
                        &format!("/{d}/{p}?open_revs=all&revs=true&latest=true&attachments=true"),
                    )
                    .await
                {
                    v.add(
                        format!(
                            "open_revs=all of a document _all_docs lists fails: {}",
                            e.class
                        ),
                        e.detail,
                    );
                }
            }
        }
        for ((db, id), acked) in ledger {
            if !dbs.contains(db) {
                continue;
            }
            let (d, p) = (enc(db), doc_path(id));
            if id.starts_with("_local/") {
                if !acked.maybe_deleted
                    && let Err(e) = self.get_json(base, &format!("/{d}/{p}")).await
                {
                    v.add(
                        format!("an acknowledged local document is gone: {}", e.class),
                        e.detail,
                    );
                }
                continue;
            }
            let read = if dot_segment(id) {
                self.bulk_get_rev(base, &d, id, &acked.rev).await
            } else {
                self.get_json(base, &format!("/{d}/{p}?rev={}", enc(&acked.rev)))
                    .await
            };
            match read {
                Ok(doc) if doc.is_null() || doc["_rev"].as_str() == Some(acked.rev.as_str()) => {}
                Ok(doc) => v.add(
                    "an acknowledged revision reads back as another",
                    format!("{db}/{id} rev {:?}: {doc}", acked.rev),
                ),
                Err(e) => v.add(
                    format!("an acknowledged revision is unreadable: {}", e.class),
                    format!("{db}/{id} rev {:?}: {}", acked.rev, e.detail),
                ),
            }
        }
    }
}

/// Whether `id` is `.` or `..`: a dot segment that every URL parser resolves
/// (`%2E` too, by the URL standard), so no client can name it in a path.
fn dot_segment(id: &str) -> bool {
    id == "." || id == ".."
}

/// Whether process `pid` is running (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        // Without /proc, trust the process until a request says otherwise.
        Err(_) => !cfg!(target_os = "linux"),
    }
}

/// What the server logged during one input.
#[derive(Default)]
struct LogNews {
    /// Each panic: its location (plus the first frame in our crates when it
    /// is inside the standard library) and its lines.
    panics: Vec<(String, String)>,
    /// What killed the process, if it died: `(": what", its lines)`, with
    /// numbers replaced by `N` so that one defect is one kind.
    fatal: Option<(String, String)>,
    tail: String,
}

impl LogNews {
    fn read(fresh: &str) -> LogNews {
        let lines: Vec<&str> = fresh.lines().collect();
        let mut panics = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some(at) = line.find("panicked at ") {
                let location = line[at + "panicked at ".len()..].trim_end_matches(':');
                let message = lines.get(i + 1).copied().unwrap_or("");
                panics.push((
                    with_our_frame(location, &lines[i + 1..]),
                    format!("{line}\n{message}"),
                ));
            }
        }
        let fatal = [
            "memory allocation of",
            "overflowed its stack",
            "fatal runtime error",
            "panicked at ",
        ]
        .iter()
        .find_map(|needle| {
            let i = lines.iter().position(|l| l.contains(needle))?;
            let text = &lines[i][lines[i].find(needle)?..];
            let words: String = text
                .chars()
                .map(|c| if c.is_ascii_digit() { 'N' } else { c })
                .collect();
            let evidence = lines[i..lines.len().min(i + 3)].join("\n");
            Some((
                format!(": {}", with_our_frame(&words, &lines[i + 1..])),
                evidence,
            ))
        });
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        LogNews {
            panics,
            fatal,
            tail,
        }
    }
}

/// `what`, shortened past the toolchain's path, plus the first backtrace
/// frame in our crates when `what` does not name one (a panic in the
/// standard library, an allocation failure).
fn with_our_frame(what: &str, after: &[&str]) -> String {
    if what.contains("crates/") {
        return what.to_string();
    }
    let short = what.find("library/").map_or(what, |i| &what[i..]);
    let frame = after.iter().take(150).find_map(|l| {
        let l = l.trim();
        l.starts_with("at ")
            .then(|| l.find("crates/").map(|i| &l[i..]))
            .flatten()
    });
    match frame {
        Some(frame) => format!("{short} (from {frame})"),
        None => short.to_string(),
    }
}

fn error_chain(e: reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

pub(crate) fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// The per-request invariants.
fn check_answer(req: &Req, sent: &str, answer: &Answer, v: &mut Violations) {
    let what = format!("{} {}", req.method, req.template.label());
    let report = || {
        format!(
            "{sent}-> {} {}\n{}",
            answer.status,
            answer.content_type,
            snippet(&answer.body, 1500)
        )
    };
    let json: Option<Value> = serde_json::from_slice(&answer.body).ok();
    if answer.status >= 500 {
        let error = json
            .as_ref()
            .and_then(|j| j["error"].as_str())
            .unwrap_or("?")
            .to_string();
        let expected = (answer.status == 501
            && (error == "not_implemented" || req.method == "HEAD"))
            || (answer.status == 500
                && req.template == Template::Replicate
                && error != "unknown_error"
                && error != "?");
        if !expected {
            v.add(format!("{} {error} from {what}", answer.status), report());
        }
    }
    let ct = answer.content_type.as_str();
    let bytes_expected = req.template == Template::Attachment
        && matches!(req.method, "GET")
        && (200..300).contains(&answer.status);
    if req.method == "HEAD"
        || answer.status == 304
        || bytes_expected
        || ct.starts_with("multipart/")
        || ct.starts_with("text/event-stream")
    {
        return;
    }
    if !ct.starts_with("application/json") {
        v.add(
            format!("non-JSON answer ({}, {ct:?}) from {what}", answer.status),
            report(),
        );
        return;
    }
    let valid = json.is_some()
        || is_json(&answer.body)
        || (req.template == Template::Changes
            && !answer.body.is_empty()
            && answer
                .body
                .split(|&b| b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .all(is_json));
    if !valid {
        v.add(format!("invalid JSON from {what}"), report());
        return;
    }
    if answer.status >= 400 {
        let shaped = json
            .as_ref()
            .is_some_and(|j| j["error"].is_string() && j["reason"].is_string());
        v.check(
            shaped,
            &format!("error without error/reason from {what}"),
            report,
        );
    }
}

/// Records the writes a 2xx answer acknowledges.
fn learn(
    req: &Req,
    answer: &Answer,
    ledger: &mut BTreeMap<(String, String), Acked>,
    last_rev: &mut Option<String>,
) {
    let db = req
        .path
        .trim_start_matches('/')
        .split(['/', '?'])
        .next()
        .map(percent_decode)
        .unwrap_or_default();
    // A database is deleted by its own path, with or without a trailing
    // slash (`DELETE /db/`, which a document path with an empty id becomes).
    let names_a_database = req
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .filter(|segment| !segment.is_empty())
        .count()
        == 1;
    if req.method == "DELETE"
        && (req.template == Template::Db || (names_a_database && answer.status == 200))
    {
        ledger.retain(|(d, _), _| *d != db);
        return;
    }
    if !req.template.writes() || !matches!(req.method, "PUT" | "POST" | "DELETE" | "COPY") {
        return;
    }
    let Ok(json) = serde_json::from_slice::<Value>(&answer.body) else {
        return;
    };
    let deleting = req.method == "DELETE"
        || req
            .body
            .as_ref()
            .is_some_and(|b| b.windows(8).any(|w| w == b"_deleted"));
    let rows = match &json {
        Value::Array(rows) => rows.iter().collect(),
        row => vec![row],
    };
    for row in rows {
        if row.get("error").is_some() {
            continue;
        }
        let (Some(id), Some(rev)) = (row["id"].as_str(), row["rev"].as_str()) else {
            continue;
        };
        *last_rev = Some(rev.to_string());
        let key = (db.clone(), id.to_string());
        ledger.insert(
            key,
            Acked {
                rev: rev.to_string(),
                maybe_deleted: deleting,
            },
        );
    }
}

/// Decodes `%XX` escapes (a database name from a request path).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `bytes` is exactly one JSON value (RFC 8259), at any depth:
/// serde_json stops at 128 levels, which a server may legitimately pass
/// (a deep document inside a response's rows), so deep answers are checked
/// here instead. Iterative, so no depth can exhaust the stack.
pub(crate) fn is_json(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut stack: Vec<u8> = Vec::new(); // the open `[` and `{`
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while bytes
            .get(*i)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            *i += 1;
        }
    };
    // After `{` or `,` in an object: a key and its colon.
    let key = |i: &mut usize| {
        skip_ws(i);
        if !json_string(bytes, i) {
            return false;
        }
        skip_ws(i);
        if bytes.get(*i) != Some(&b':') {
            return false;
        }
        *i += 1;
        true
    };
    'value: loop {
        skip_ws(&mut i);
        match bytes.get(i) {
            Some(&open @ (b'[' | b'{')) => {
                i += 1;
                skip_ws(&mut i);
                let close = if open == b'[' { b']' } else { b'}' };
                if bytes.get(i) == Some(&close) {
                    i += 1;
                } else {
                    stack.push(open);
                    if open == b'{' && !key(&mut i) {
                        return false;
                    }
                    continue 'value;
                }
            }
            Some(b'"') => {
                if !json_string(bytes, &mut i) {
                    return false;
                }
            }
            Some(b't') | Some(b'f') | Some(b'n') => {
                let word: &[u8] = match bytes[i] {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !bytes[i..].starts_with(word) {
                    return false;
                }
                i += word.len();
            }
            Some(_) => {
                if !json_number(bytes, &mut i) {
                    return false;
                }
            }
            None => return false,
        }
        // A value is complete: close containers, or go on to the next value.
        loop {
            skip_ws(&mut i);
            let Some(&open) = stack.last() else {
                return i == bytes.len();
            };
            match bytes.get(i) {
                Some(b',') => {
                    i += 1;
                    if open == b'{' && !key(&mut i) {
                        return false;
                    }
                    continue 'value;
                }
                Some(b']') if open == b'[' => {
                    i += 1;
                    stack.pop();
                }
                Some(b'}') if open == b'{' => {
                    i += 1;
                    stack.pop();
                }
                _ => return false,
            }
        }
    }
}

/// A JSON string at `*i` (which must be its opening quote); moves past it.
fn json_string(bytes: &[u8], i: &mut usize) -> bool {
    if bytes.get(*i) != Some(&b'"') {
        return false;
    }
    *i += 1;
    loop {
        match bytes.get(*i) {
            None => return false,
            Some(b'"') => {
                *i += 1;
                return true;
            }
            Some(b'\\') => match bytes.get(*i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => *i += 2,
                Some(b'u')
                    if bytes
                        .get(*i + 2..*i + 6)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                {
                    *i += 6
                }
                _ => return false,
            },
            Some(&b) if b < 0x20 => return false,
            Some(_) => *i += 1,
        }
    }
}

/// A JSON number at `*i`; moves past it.
fn json_number(bytes: &[u8], i: &mut usize) -> bool {
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if bytes.get(*i) == Some(&b'-') {
        *i += 1;
    }
    match bytes.get(*i) {
        Some(b'0') => *i += 1,
        Some(b'1'..=b'9') => {
            digits(i);
        }
        _ => return false,
    }
    if bytes.get(*i) == Some(&b'.') {
        *i += 1;
        if !digits(i) {
            return false;
        }
    }
    if matches!(bytes.get(*i), Some(b'e' | b'E')) {
        *i += 1;
        if matches!(bytes.get(*i), Some(b'+' | b'-')) {
            *i += 1;
        }
        if !digits(i) {
            return false;
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The harness's own validator agrees with serde_json where serde_json
    /// can tell (shallow texts), on valid JSON and on damaged JSON.
    #[test]
    fn json_validator_agrees_with_serde_json(
        value in hostile::json(4),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut text = value.to_string().into_bytes();
        prop_assert!(is_json(&text), "{}", value);
        for (at, byte) in edits {
            if text.is_empty() {
                break;
            }
            let i = at.index(text.len());
            if byte % 3 == 0 {
                text.remove(i);
            } else {
                text[i] = byte;
            }
        }
        let serde = serde_json::from_slice::<Value>(&text);
        // serde_json also refuses numbers out of f64's range: valid JSON.
        prop_assume!(!serde.as_ref().is_err_and(|e| e.to_string().contains("out of range")));
        prop_assert_eq!(is_json(&text), serde.is_ok(), "{:?}", String::from_utf8_lossy(&text));
    }
}
