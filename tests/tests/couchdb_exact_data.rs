//! The generated differential corpus: documents built to hit every corner
//! of CouchDB's JSON (numbers of every size and spelling, `-0.0`,
//! subnormals, every string escape, non-BMP characters, duplicate and long
//! keys, empty and deep nesting) are written to Apache CouchDB 3.5 and to
//! Recliner the same way, and everything that comes back is compared byte
//! for byte: revision ids on every write route, documents on every read
//! route, bodies after replication both ways with both replicators, view
//! rows, and the documents Mango selects. Needs `COUCHDB_URL` (set by
//! `cargo xtask test`).
//!
//! The generator is seeded: a failure prints its seed, and
//! `RECLINER_EXACT_SEED=<seed>` replays it (`RECLINER_EXACT_DOCS` sets how
//! many documents, 240 by default).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, Reply, SplitMix, TempDir, TestServer, eventually};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// Numbers CouchDB treats specially, as clients spell them.
const SPECIAL_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "0.0",
    "-0.0",
    "1e2",
    "1E+2",
    "1e-7",
    "1E-7",
    "1e-6",
    "1e20",
    "1e21",
    "1e22",
    "5e-324",
    "4.9e-324",
    "1e-400",
    "-1.0e-400",
    "2.2250738585072011e-308",
    "2.2250738585072014e-308",
    "1.7976931348623157e308",
    "9007199254740993",
    "9007199254740993.0",
    "18446744073709551616",
    "-9223372036854775809",
    "100000000000000000000",
    "123456789012345678901234567890e5",
    "0.1",
    "0.30000000000000004",
    "1.0",
    "100.0",
    "12345678901234567890123",
    "1e0",
    "0e0",
    "-0e5",
];

/// Pieces of string text, as JSON writes them (escapes included).
const STRING_PIECES: &[&str] = &[
    "a",
    "Z",
    "0",
    " ",
    "plain text",
    "é",
    "ü",
    "日本",
    "😀",
    "\\ud83d\\ude00",
    "\\ud834\\udd1e",
    "\\\"",
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0000",
    "\\u0001",
    "\\u001f",
    "\\u001F",
    "\\u007f",
    "\\u00e9",
    "\\u2028",
    "\\uFFFF",
    "\u{7f}",
    "\u{2029}",
    "/",
    "<>&",
];

struct Gen {
    rng: SplitMix,
}

impl Gen {
    fn number(&mut self) -> String {
        let r = &mut self.rng;
        let sign = if r.chance(30) { "-" } else { "" };
        match r.below(6) {
            0 => SPECIAL_NUMBERS[r.below(SPECIAL_NUMBERS.len())].to_string(),
            // Integers of every width, far past 64 bits.
            1 => {
                let len = 1 + r.below(60);
                let digits = r.digits(len);
                let digits = digits.trim_start_matches('0');
                format!("{sign}{}", if digits.is_empty() { "0" } else { digits })
            }
            // Any double, in the shortest form or in exponent forms.
            2 | 3 => loop {
                let x = f64::from_bits(r.next_u64());
                if !x.is_finite() {
                    continue;
                }
                break match r.below(4) {
                    0 => format!("{x:?}"),
                    1 => format!("{x:e}"),
                    2 => format!("{x:E}").replace('E', "E+").replace("E+-", "E-"),
                    _ => format!("{x:.17e}"),
                };
            },
            // Decimal text with many digits, trailing zeros, exponents.
            4 => {
                let len = 1 + r.below(25);
                let int = r.digits(len);
                let int = int.trim_start_matches('0');
                let len = 1 + r.below(30);
                let frac = r.digits(len);
                let exp = match r.below(4) {
                    0 => String::new(),
                    1 => format!("e{}", r.below(300) as i32 - 150),
                    2 => format!("E+{}", r.below(40)),
                    _ => format!("e-{}", r.below(330)),
                };
                format!(
                    "{sign}{}.{frac}{exp}",
                    if int.is_empty() { "0" } else { int }
                )
            }
            // Integer mantissas with exponents (jiffy reads some of these
            // its own way).
            _ => {
                let len = 1 + r.below(35);
                let int = r.digits(len);
                let int = int.trim_start_matches('0');
                // Down to zero, up to where doubles end (past it, both
                // refuse the whole request).
                let exp = (r.below(660) as i32 - 360).min(300 - len as i32);
                format!("{sign}{}e{exp}", if int.is_empty() { "7" } else { int })
            }
        }
    }

    fn string(&mut self) -> String {
        let pieces = self.rng.below(6);
        let mut s = String::from("\"");
        for _ in 0..pieces {
            s.push_str(STRING_PIECES[self.rng.below(STRING_PIECES.len())]);
        }
        s.push('"');
        s
    }

    fn key(&mut self) -> String {
        if self.rng.chance(3) {
            format!("\"{}\"", "k".repeat(200 + self.rng.below(300)))
        } else {
            let s = self.string();
            // Top-level keys starting with `_` are CouchDB's own.
            if s.starts_with("\"_") {
                s.replacen('_', "u", 1)
            } else {
                s
            }
        }
    }

    fn value(&mut self, depth: usize) -> String {
        let kinds = if depth > 4 { 5 } else { 7 };
        match self.rng.below(kinds) {
            0 => ["null", "true", "false"][self.rng.below(3)].to_string(),
            1 | 2 => self.number(),
            3 | 4 => self.string(),
            5 => {
                let n = self.rng.below(5);
                let items: Vec<String> = (0..n).map(|_| self.value(depth + 1)).collect();
                format!("[{}]", items.join(","))
            }
            _ => {
                let n = self.rng.below(5);
                let mut members: Vec<String> = (0..n)
                    .map(|_| format!("{}:{}", self.key(), self.value(depth + 1)))
                    .collect();
                if n > 0 && self.rng.chance(20) {
                    // The same key again, later.
                    let again = members[0]
                        .split_once(':')
                        .map(|(k, _)| k.to_string())
                        .unwrap();
                    members.push(format!("{again}:{}", self.value(depth + 1)));
                }
                format!("{{{}}}", members.join(","))
            }
        }
    }

    /// A document: its `_id`, a number `n` (what views and Mango look
    /// at), then generated members, sometimes one given twice, sometimes
    /// one nested deep; with the text of the `n` CouchDB keeps (the last).
    fn doc(&mut self, id: &str) -> (String, String) {
        let mut n = self.number();
        let mut members = vec![format!("\"_id\":\"{id}\""), format!("\"n\":{n}")];
        for i in 0..self.rng.below(6) {
            members.push(format!("\"f{i}\":{}", self.value(0)));
        }
        if self.rng.chance(10) {
            n = self.number();
            members.push(format!("\"n\":{n}"));
        }
        if self.rng.chance(3) {
            let levels = 200 + self.rng.below(600);
            members.push(format!(
                "\"deep\":{}1{}",
                "[".repeat(levels),
                "]".repeat(levels)
            ));
        }
        (format!("{{{}}}", members.join(",")), n)
    }
}

/// Both servers, a database on each, and the seed for messages.
struct Pair {
    couch: Client,
    ours: Client,
    seed: u64,
}

impl Pair {
    async fn both(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        content_type: &str,
    ) -> (Reply, Reply) {
        let couch = self
            .couch
            .send_bytes(method, path, body.to_vec(), content_type)
            .await;
        let ours = self
            .ours
            .send_bytes(method, path, body.to_vec(), content_type)
            .await;
        (couch, ours)
    }

    async fn get(&self, path: &str, accept: &str) -> (Reply, Reply) {
        let headers = [("accept", accept)];
        (
            self.couch.send("GET", path, None, &headers).await,
            self.ours.send("GET", path, None, &headers).await,
        )
    }

    /// Same status, and the same `field` of the JSON answers.
    fn same_field(&self, what: &str, couch: &Reply, ours: &Reply, field: &str) {
        assert_eq!(
            couch.status,
            ours.status,
            "seed {}: {what}: status differs; CouchDB said {} and Recliner {}",
            self.seed,
            shown(&couch.text),
            shown(&ours.text)
        );
        if couch.status < 300 {
            assert_eq!(
                couch.json()[field],
                ours.json()[field],
                "seed {}: {what}: `{field}` differs",
                self.seed
            );
        }
    }

    fn same_docs(
        &self,
        what: &str,
        couch: &BTreeMap<String, String>,
        ours: &BTreeMap<String, String>,
    ) {
        assert_eq!(
            couch.len(),
            ours.len(),
            "seed {}: {what}: not the same documents",
            self.seed
        );
        for (id, text) in couch {
            let mine = ours.get(id).map(String::as_str).unwrap_or("<missing>");
            assert!(
                text == mine,
                "seed {}: {what}: {id} differs\n CouchDB: {}\nRecliner: {}",
                self.seed,
                shown(text),
                shown(mine)
            );
        }
    }
}

fn shown(text: &str) -> String {
    if text.len() > 600 {
        format!("{}... ({} bytes)", &text[..600], text.len())
    } else {
        text.to_string()
    }
}

#[derive(Deserialize)]
struct Row<'a> {
    id: String,
    #[serde(borrow, default)]
    doc: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Rows<'a> {
    #[serde(borrow)]
    rows: Vec<Row<'a>>,
}

#[derive(Deserialize)]
struct Changes<'a> {
    #[serde(borrow)]
    results: Vec<Row<'a>>,
}

#[derive(Deserialize)]
struct Found<'a> {
    #[serde(borrow)]
    docs: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct BulkGet<'a> {
    #[serde(borrow)]
    results: Vec<BulkGetResult<'a>>,
}

#[derive(Deserialize)]
struct BulkGetResult<'a> {
    id: String,
    #[serde(borrow)]
    docs: Vec<BTreeMap<String, &'a RawValue>>,
}

/// Documents by id, each as the exact text the server wrote.
fn by_id<'a>(rows: impl IntoIterator<Item = Row<'a>>) -> BTreeMap<String, String> {
    rows.into_iter()
        .filter_map(|r| r.doc.map(|d| (r.id, d.get().to_string())))
        .collect()
}

/// A view answer's lines, but for one thing: the rows of one document
/// whose keys are the same number written differently (`0` and `0.0`)
/// are put in one order. CouchDB's order there comes from how Erlang's
/// sort places terms that compare equal, which Recliner does not copy
/// (see docs/ARCHITECTURE.md, Views).
fn view_lines(text: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim_end_matches(',').to_string())
        .collect();
    let same_number = |a: &str, b: &str| {
        let (Ok(a), Ok(b)) = (
            serde_json::from_str::<Value>(a),
            serde_json::from_str::<Value>(b),
        ) else {
            return false;
        };
        a["id"] == b["id"]
            && matches!((a["key"].as_f64(), b["key"].as_f64()), (Some(x), Some(y)) if x == y)
    };
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut run: Vec<String> = Vec::new();
    for line in lines {
        if run.last().is_some_and(|last| !same_number(last, &line)) {
            run.sort();
            out.append(&mut run);
        }
        run.push(line);
    }
    run.sort();
    out.append(&mut run);
    out
}

fn id_of(raw: &RawValue) -> String {
    // The other members are skipped unread (serde_json skips without
    // recursion), so deep documents are fine.
    #[derive(Deserialize)]
    struct Id {
        #[serde(rename = "_id", default)]
        id: String,
    }
    serde_json::from_str::<Id>(raw.get())
        .map(|d| d.id)
        .unwrap_or_default()
}

#[tokio::test]
async fn generated_documents_come_back_from_recliner_exactly_as_from_couchdb() {
    let Some(couchdb) =
        couchdb("generated_documents_come_back_from_recliner_exactly_as_from_couchdb")
    else {
        return;
    };
    let seed = std::env::var("RECLINER_EXACT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let count: usize = std::env::var("RECLINER_EXACT_DOCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(240);
    eprintln!(
        "generated corpus: seed {seed} (RECLINER_EXACT_SEED={seed} replays it), {count} documents"
    );
    let dir = TempDir::new("exact-corpus");
    let server = TestServer::start(dir.path(), &[]);
    let db = unique_db("exact");
    eprintln!("generated corpus: database {db} on both servers");
    let pair = Pair {
        couch: Client::at(&couchdb.db_url(&db)),
        ours: Client::at(&server.url(&format!("/{db}"))),
        seed,
    };
    let (c, o) = pair.both("PUT", "", b"", "application/json").await;
    assert_eq!((c.status, o.status), (201, 201));
    let mut corpus = Gen {
        rng: SplitMix(seed),
    };
    let generated: Vec<(String, String, String)> = (0..count)
        .map(|i| {
            let id = format!("g{i:04}");
            let (text, n) = corpus.doc(&id);
            (id, text, n)
        })
        .collect();
    let docs: Vec<(String, String)> = generated
        .iter()
        .map(|(id, text, _)| (id.clone(), text.clone()))
        .collect();

    // Writes, each route for a share of the documents: the same revision.
    let mut bulk = Vec::new();
    for (i, (id, text)) in docs.iter().enumerate() {
        match i % 5 {
            0 => {
                let (c, o) = pair
                    .both(
                        "PUT",
                        &format!("/{id}"),
                        text.as_bytes(),
                        "application/json",
                    )
                    .await;
                pair.same_field(&format!("PUT {id} {text}"), &c, &o, "rev");
            }
            1 => {
                let (c, o) = pair
                    .both("POST", "", text.as_bytes(), "application/json")
                    .await;
                pair.same_field(&format!("POST {id} {text}"), &c, &o, "rev");
            }
            2 => {
                // multipart/related: the JSON, then an attachment.
                let body = text.trim_end_matches('}').to_string()
                    + r#","_attachments":{"a.txt":{"follows":true,"content_type":"text/plain","length":5}}}"#;
                let mut upload = b"--B\r\ncontent-type: application/json\r\n\r\n".to_vec();
                upload.extend_from_slice(body.as_bytes());
                upload.extend_from_slice(
                    b"\r\n--B\r\ncontent-type: text/plain\r\n\r\nhello\r\n--B--",
                );
                let (c, o) = pair
                    .both(
                        "PUT",
                        &format!("/{id}"),
                        &upload,
                        "multipart/related; boundary=B",
                    )
                    .await;
                pair.same_field(&format!("multipart PUT {id} {text}"), &c, &o, "rev");
            }
            _ => bulk.push(text.clone()),
        }
    }
    let body = format!(r#"{{"docs":[{}]}}"#, bulk.join(","));
    let (c, o) = pair
        .both("POST", "/_bulk_docs", body.as_bytes(), "application/json")
        .await;
    assert_eq!(
        (c.status, o.status),
        (201, 201),
        "seed {seed}: _bulk_docs: {}",
        shown(&o.text)
    );
    assert_eq!(c.json(), o.json(), "seed {seed}: _bulk_docs revisions");
    for (id, text) in docs.iter().take(20) {
        let (c, o) = pair
            .both(
                "PUT",
                &format!("/_local/{id}"),
                text.as_bytes(),
                "application/json",
            )
            .await;
        pair.same_field(&format!("PUT _local/{id} {text}"), &c, &o, "rev");
        let (c, o) = pair.get(&format!("/_local/{id}"), "application/json").await;
        assert!(
            c.text == o.text,
            "seed {seed}: _local/{id}\n CouchDB: {}\nRecliner: {}",
            shown(&c.text),
            shown(&o.text)
        );
    }

    // Reads: every route gives the same text for every document.
    let mut from_get = (BTreeMap::new(), BTreeMap::new());
    for (i, (id, _)) in docs.iter().enumerate() {
        let query = [
            "",
            "?revs=true",
            "?attachments=true",
            "?revs_info=true",
            "?conflicts=true",
        ][i % 5];
        let (c, o) = pair.get(&format!("/{id}{query}"), "application/json").await;
        from_get.0.insert(id.clone(), c.text.trim_end().to_string());
        from_get.1.insert(id.clone(), o.text.trim_end().to_string());
        if i % 7 == 0 {
            let (c, o) = pair
                .get(
                    &format!("/{id}?open_revs=all&revs=true"),
                    "application/json",
                )
                .await;
            assert!(
                c.text.trim_end() == o.text.trim_end(),
                "seed {seed}: open_revs {id}\n CouchDB: {}\nRecliner: {}",
                shown(&c.text),
                shown(&o.text)
            );
        }
    }
    pair.same_docs("GET", &from_get.0, &from_get.1);

    let (c, o) = pair
        .get("/_all_docs?include_docs=true", "application/json")
        .await;
    let (c_rows, o_rows): (Rows, Rows) = (
        serde_json::from_str(&c.text).unwrap(),
        serde_json::from_str(&o.text).unwrap(),
    );
    pair.same_docs(
        "_all_docs?include_docs",
        &by_id(c_rows.rows),
        &by_id(o_rows.rows),
    );

    for feed in ["normal", "longpoll"] {
        let path = format!("/_changes?include_docs=true&feed={feed}&timeout=200");
        let (c, o) = pair.get(&path, "application/json").await;
        let (cc, oc): (Changes, Changes) = (
            serde_json::from_str(&c.text).unwrap(),
            serde_json::from_str(&o.text).unwrap(),
        );
        pair.same_docs(
            &format!("_changes feed={feed}"),
            &by_id(cc.results),
            &by_id(oc.results),
        );
    }
    for (feed, prefix) in [("continuous", ""), ("eventsource", "data: ")] {
        let path = format!("/_changes?include_docs=true&feed={feed}&timeout=200");
        let (c, o) = pair.get(&path, "*/*").await;
        let lines = |text: &str| {
            by_id(
                text.lines()
                    .filter_map(|l| l.strip_prefix(prefix))
                    .filter_map(|l| serde_json::from_str::<Row>(l).ok())
                    .collect::<Vec<_>>(),
            )
        };
        pair.same_docs(
            &format!("_changes feed={feed}"),
            &lines(&c.text),
            &lines(&o.text),
        );
    }

    let ids: Vec<Value> = docs.iter().map(|(id, _)| json!({"id": id})).collect();
    let body = json!({"docs": ids}).to_string();
    let (c, o) = pair
        .both(
            "POST",
            "/_bulk_get?revs=true",
            body.as_bytes(),
            "application/json",
        )
        .await;
    let per_doc = |text: &str| -> BTreeMap<String, String> {
        let answer: BulkGet = serde_json::from_str(text).unwrap();
        answer
            .results
            .into_iter()
            .filter_map(|r| {
                r.docs
                    .first()
                    .and_then(|d| d.get("ok"))
                    .map(|ok| (r.id, ok.get().to_string()))
            })
            .collect()
    };
    pair.same_docs("_bulk_get", &per_doc(&c.text), &per_doc(&o.text));

    for fields in [None, Some(json!(["_id", "n", "f0", "f1"]))] {
        let mut query = json!({"selector": {"_id": {"$gt": null}}, "limit": 100_000});
        if let Some(fields) = &fields {
            query["fields"] = fields.clone();
        }
        let (c, o) = pair
            .both(
                "POST",
                "/_find",
                query.to_string().as_bytes(),
                "application/json",
            )
            .await;
        let found = |text: &str| -> BTreeMap<String, String> {
            let found: Found = serde_json::from_str(text).unwrap();
            found
                .docs
                .into_iter()
                .map(|d| (id_of(d), d.get().to_string()))
                .collect()
        };
        pair.same_docs(
            &format!("_find fields={fields:?}"),
            &found(&c.text),
            &found(&o.text),
        );
    }

    // Views: every top-level value emitted as key and value; the rows,
    // their order, keys and values as CouchDB's JavaScript engine gives them.
    let ddoc = r#"{"views":{"all":{"map":"function(doc) { for (var k in doc) { if (k[0] !== '_' && k !== 'deep') emit(doc[k], doc[k]); } }"},"n":{"map":"function(doc) { emit(doc.n, [doc.n, typeof doc.n]); }"}}}"#;
    let (c, o) = pair
        .both("PUT", "/_design/v", ddoc.as_bytes(), "application/json")
        .await;
    assert_eq!((c.status, o.status), (201, 201));
    for view in ["all", "n"] {
        let (c, o) = pair
            .get(&format!("/_design/v/_view/{view}"), "application/json")
            .await;
        let rows = |text: &str| -> Vec<String> {
            let rows: Value = serde_json::from_str(text).unwrap();
            rows["rows"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .map(|r| r["id"].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(
            rows(&c.text),
            rows(&o.text),
            "seed {seed}: view {view}: row order"
        );
        let c_lines = view_lines(&c.text);
        let o_lines = view_lines(&o.text);
        let c_lines: Vec<&str> = c_lines.iter().map(String::as_str).collect();
        let o_lines: Vec<&str> = o_lines.iter().map(String::as_str).collect();
        for (i, (cl, ol)) in c_lines.iter().zip(&o_lines).enumerate() {
            let around =
                |lines: &[&str]| lines[i.saturating_sub(2)..(i + 3).min(lines.len())].join("\n");
            assert!(
                cl.trim_end_matches(',') == ol.trim_end_matches(','),
                "seed {seed}: view {view}, row {i}\n CouchDB:\n{}\nRecliner:\n{}",
                shown(&around(&c_lines)),
                shown(&around(&o_lines))
            );
        }
    }

    // Mango: the same documents for comparisons on the generated numbers.
    let mut probe = SplitMix(seed ^ 0xA5A5);
    for _ in 0..12 {
        let n: Value = serde_json::from_str(&generated[probe.below(docs.len())].2).unwrap();
        let other: Value = serde_json::from_str(&generated[probe.below(docs.len())].2).unwrap();
        for selector in [
            json!({"n": {"$eq": n}}),
            json!({"n": {"$gt": n}}),
            json!({"n": {"$lte": n}}),
            json!({"n": {"$in": [n, other]}}),
        ] {
            let query = json!({"selector": selector, "fields": ["_id"], "limit": 100_000});
            let (c, o) = pair
                .both(
                    "POST",
                    "/_find",
                    query.to_string().as_bytes(),
                    "application/json",
                )
                .await;
            let ids = |text: &str| -> Vec<String> {
                let mut ids: Vec<String> = serde_json::from_str::<Value>(text).unwrap()["docs"]
                    .as_array()
                    .map(|d| {
                        d.iter()
                            .map(|d| d["_id"].as_str().unwrap_or("").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                ids.sort();
                ids
            };
            assert_eq!(ids(&c.text), ids(&o.text), "seed {seed}: _find {selector}");
        }
    }

    // Replication: CouchDB -> Recliner (Recliner's replicator, pull) and
    // Recliner -> CouchDB (CouchDB's replicator, pull; Recliner's, push):
    // each copy holds what CouchDB's replicator makes of the original.
    let reference = unique_db("exact-ref");
    let spec = json!({"source": couchdb.db_url(&db), "target": couchdb.db_url(&reference), "create_target": true});
    let r = Client::at(couchdb.url()).post("/_replicate", spec).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let ours = Client::new(&server);
    let pulled = unique_db("exact-pulled");
    let r = ours
        .post(
            "/_replicate",
            json!({"source": couchdb.db_url(&db), "target": pulled, "create_target": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let back = unique_db("exact-back");
    let r = Client::at(couchdb.url())
        .post("/_replicate", json!({"source": server.url(&format!("/{pulled}")), "target": couchdb.db_url(&back), "create_target": true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let pushed = unique_db("exact-pushed");
    let r = ours
        .post(
            "/_replicate",
            json!({"source": pulled, "target": couchdb.db_url(&pushed), "create_target": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let all = async |client: Client| -> BTreeMap<String, String> {
        let reply = client.get("/_all_docs?include_docs=true").await;
        let rows: Rows = serde_json::from_str(&reply.text).unwrap();
        by_id(rows.rows)
    };
    let expected = all(Client::at(&couchdb.db_url(&reference))).await;
    assert!(
        eventually(10, async || all(Client::at(
            &server.url(&format!("/{pulled}"))
        ))
        .await
        .len()
            == expected.len())
        .await
    );
    pair.same_docs(
        "CouchDB -> Recliner",
        &expected,
        &all(Client::at(&server.url(&format!("/{pulled}")))).await,
    );
    pair.same_docs(
        "CouchDB -> Recliner -> CouchDB (CouchDB's replicator)",
        &expected,
        &all(Client::at(&couchdb.db_url(&back))).await,
    );
    pair.same_docs(
        "CouchDB -> Recliner -> CouchDB (Recliner's replicator)",
        &expected,
        &all(Client::at(&couchdb.db_url(&pushed))).await,
    );

    // `_bulk_docs` with `new_edits=false` (CouchDB's documents under their
    // revisions, as a replicator writes them) to both: the same bodies.
    let copies = unique_db("exact-copies");
    let both = Pair {
        couch: Client::at(&couchdb.db_url(&copies)),
        ours: Client::at(&server.url(&format!("/{copies}"))),
        seed,
    };
    let (c, o) = both.both("PUT", "", b"", "application/json").await;
    assert_eq!((c.status, o.status), (201, 201));
    // (Those with attachment stubs would need their attachments.)
    let texts: Vec<&str> = expected
        .values()
        .map(String::as_str)
        .filter(|t| !t.contains(r#""_attachments":"#))
        .collect();
    let body = format!(r#"{{"new_edits":false,"docs":[{}]}}"#, texts.join(","));
    let (c, o) = both
        .both("POST", "/_bulk_docs", body.as_bytes(), "application/json")
        .await;
    assert_eq!(
        (c.status, o.status),
        (201, 201),
        "seed {seed}: {}",
        shown(&o.text)
    );
    both.same_docs(
        "_bulk_docs new_edits=false",
        &all(Client::at(&couchdb.db_url(&copies))).await,
        &all(Client::at(&server.url(&format!("/{copies}")))).await,
    );
}
