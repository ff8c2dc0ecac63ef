//! Generators of the `http` target: requests of every kind, hostile and sane.

use super::*;

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

pub(super) fn doc_id() -> BoxedStrategy<String> {
    prop_oneof![6 => select(IDS).prop_map(str::to_string), 1 => hostile::text()].boxed()
}

pub(super) fn method(likely: &'static [&'static str]) -> BoxedStrategy<&'static str> {
    prop_oneof![6 => select(likely), 1 => select(METHODS)].boxed()
}

pub(super) fn param_value() -> BoxedStrategy<String> {
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

pub(super) const DOC_PARAMS: &[&str] = &[
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
pub(super) const ALL_DOCS_PARAMS: &[&str] = &[
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
pub(super) const CHANGES_PARAMS: &[&str] = &[
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
pub(super) const BULK_GET_PARAMS: &[&str] = &["revs", "attachments", "latest"];
pub(super) const WRITE_PARAMS: &[&str] = &["new_edits", "batch", "rev"];

/// A query string from real parameter names with hostile values. A feed
/// that could wait (longpoll, continuous) is cut short by a last `timeout`
/// and never gets a heartbeat, which would keep it open for ever.
pub(super) fn query(names: &'static [&'static str]) -> BoxedStrategy<String> {
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
pub(super) fn sane_value(name: &str) -> BoxedStrategy<String> {
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

pub(super) fn rev_value() -> BoxedStrategy<Value> {
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

pub(super) fn document() -> BoxedStrategy<Value> {
    let id = prop_oneof![4 => doc_id().prop_map(Value::String), 1 => hostile::json_leaf()];
    hostile::document(id, rev_value()).boxed()
}

/// Bodies nobody should send.
pub(super) fn hostile_body() -> BoxedStrategy<Vec<u8>> {
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

pub(super) fn json_content_type() -> BoxedStrategy<String> {
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
pub(super) fn json_body(
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
pub(super) fn multipart() -> BoxedStrategy<(Option<String>, Option<Vec<u8>>)> {
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

pub(super) fn no_body() -> BoxedStrategy<(Option<String>, Option<Vec<u8>>)> {
    Just((None, None)).boxed()
}

pub(super) fn headers() -> BoxedStrategy<Vec<(&'static str, String)>> {
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
pub(super) fn request(template: Template) -> BoxedStrategy<Req> {
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
pub(super) fn replication() -> BoxedStrategy<Value> {
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
