//! The generated differential corpus of view queries: random documents
//! whose keys cover CouchDB's collation (null, booleans, numbers, strings
//! with case and accents, arrays, objects) and whose values feed the
//! built-in reducers (numbers, arrays of numbers, a mix of both), then
//! random queries combining `keys`, `key`, `startkey`/`endkey`,
//! `startkey_docid`/`endkey_docid`, `limit`, `skip`, `descending`,
//! `inclusive_end`, `reduce`, `group` and `group_level`, by GET and by
//! POST, sent to Apache CouchDB 3.5 and to Recliner and compared byte for
//! byte (errors as JSON). Needs `COUCHDB_URL` (set by `cargo xtask test`).
//!
//! The generator is seeded: a failure prints its seed, and
//! `RECLINER_VIEW_SEED=<seed>` replays it (`RECLINER_VIEW_QUERIES` sets
//! how many queries, 400 by default).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, Reply, SplitMix, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

/// Keys of documents and of queries: each kind CouchDB's collation
/// orders, several of them equal under it or next to each other.
fn key_pool() -> Vec<Value> {
    vec![
        json!(null),
        json!(false),
        json!(true),
        json!(-2),
        json!(0),
        json!(1),
        json!(1.5),
        json!(2),
        json!(10),
        json!(""),
        json!("a"),
        json!("A"),
        json!("aa"),
        json!("b"),
        json!("B"),
        json!("é"),
        json!("e"),
        json!("1"),
        json!("_"),
        json!([]),
        json!([1]),
        json!([1, "a"]),
        json!(["a"]),
        json!(["a", 1]),
        json!(["a", [2]]),
        json!([null, false]),
        json!({}),
        json!({"a": 1}),
    ]
}

/// The design document: one view per built-in reducer, a view without a
/// reducer, and one emitting several rows per document.
fn design() -> Value {
    json!({
        "views": {
            "count": {"map": "function (doc) { emit(doc.k, null); }", "reduce": "_count"},
            "sum": {"map": "function (doc) { emit(doc.k, doc.n); }", "reduce": "_sum"},
            "stats": {"map": "function (doc) { emit(doc.k, doc.n); }", "reduce": "_stats"},
            "sum_arrays": {"map": "function (doc) { emit(doc.k, doc.a); }", "reduce": "_sum"},
            "stats_arrays": {"map": "function (doc) { emit(doc.k, doc.p); }", "reduce": "_stats"},
            "plain": {"map": "function (doc) { emit(doc.k, doc.n); }"},
            "tags": {"map": "function (doc) { doc.tags.forEach(function (t, i) { emit([t, doc.k, i], doc.n); }); }", "reduce": "_sum"}
        }
    })
}

struct Gen {
    rng: SplitMix,
    keys: Vec<Value>,
}

impl Gen {
    fn key(&mut self) -> Value {
        self.keys[self.rng.below(self.keys.len())].clone()
    }

    fn int(&mut self) -> i64 {
        self.rng.below(41) as i64 - 20
    }

    fn doc(&mut self, i: usize) -> Value {
        // A number, or an array of one to three numbers: `_sum` adds
        // position by position and a number to the first position.
        let a = if self.rng.chance(40) {
            json!(self.int())
        } else {
            let len = 1 + self.rng.below(3);
            Value::Array((0..len).map(|_| json!(self.int())).collect())
        };
        let p = json!([self.int(), self.int()]);
        let tags: Vec<Value> = (0..self.rng.below(3))
            .map(|_| json!(["x", "y", "z"][self.rng.below(3)]))
            .collect();
        json!({"_id": format!("d{i:03}"), "k": self.key(), "n": self.int(), "a": a, "p": p, "tags": tags})
    }

    fn doc_id(&mut self, docs: usize) -> String {
        if self.rng.chance(20) {
            // Between two ids, or past them all.
            ["d0055", "d", "e", ""][self.rng.below(4)].to_string()
        } else {
            format!("d{:03}", self.rng.below(docs))
        }
    }

    /// A query: the view and its parameters as JSON values.
    fn query(&mut self, docs: usize) -> (&'static str, Vec<(&'static str, Value)>) {
        let view = [
            "count",
            "sum",
            "stats",
            "sum_arrays",
            "stats_arrays",
            "plain",
            "tags",
        ][self.rng.below(7)];
        let mut params: Vec<(&'static str, Value)> = Vec::new();
        let key = |g: &mut Gen| -> Value {
            if view == "tags" && g.rng.chance(70) {
                let tag = json!(["x", "y", "z", "w"][g.rng.below(4)]);
                match g.rng.below(3) {
                    0 => json!([tag]),
                    1 => json!([tag, g.key()]),
                    _ => json!([tag, g.key(), g.rng.below(2)]),
                }
            } else {
                g.key()
            }
        };
        match self.rng.below(10) {
            0..=2 => {
                // No key twice: CouchDB answers a repeated key with rows
                // that depend on how its shards split them.
                let mut keys: Vec<Value> = Vec::new();
                for _ in 0..self.rng.below(5) {
                    let k = key(self);
                    if !keys.iter().any(|seen| collation::collate(seen, &k).is_eq()) {
                        keys.push(k);
                    }
                }
                params.push(("keys", Value::Array(keys)));
            }
            3 => params.push(("key", key(self))),
            _ => {
                if self.rng.chance(70) {
                    params.push(("startkey", key(self)));
                }
                if self.rng.chance(70) {
                    params.push(("endkey", key(self)));
                }
            }
        }
        if self.rng.chance(8) {
            // Rarely, ranges beside keys: CouchDB refuses the mix.
            params.push(("startkey", key(self)));
        }
        if self.rng.chance(25) {
            params.push(("startkey_docid", json!(self.doc_id(docs))));
        }
        if self.rng.chance(25) {
            params.push(("endkey_docid", json!(self.doc_id(docs))));
        }
        let descending = self.rng.chance(40);
        if descending {
            params.push(("descending", json!(true)));
        }
        // Mostly ranges in the query's direction; the others are refused.
        let start = params.iter().position(|(name, _)| *name == "startkey");
        let end = params.iter().position(|(name, _)| *name == "endkey");
        if let (Some(start), Some(end)) = (start, end)
            && self.rng.chance(85)
        {
            let order = collation::collate(&params[start].1, &params[end].1);
            if (order == std::cmp::Ordering::Greater) != descending
                && order != std::cmp::Ordering::Equal
            {
                let (low, high) = (params[start].1.clone(), params[end].1.clone());
                params[start].1 = high;
                params[end].1 = low;
            }
        }
        if self.rng.chance(25) {
            params.push(("inclusive_end", json!(false)));
        }
        if self.rng.chance(40) {
            params.push(("limit", json!(self.rng.below(8))));
        }
        if self.rng.chance(25) {
            params.push(("skip", json!(self.rng.below(6))));
        }
        if view != "plain" {
            match self.rng.below(6) {
                0 | 1 => params.push(("reduce", json!(false))),
                2 => params.push(("group", json!(true))),
                3 => params.push(("group_level", json!(self.rng.below(4)))),
                _ => {}
            }
        }
        (view, params)
    }
}

/// A parameter's value in a query string: JSON, except the ids, which are
/// plain strings.
fn query_string(params: &[(&str, Value)]) -> String {
    params
        .iter()
        .map(|(name, value)| {
            let text = match value {
                Value::String(s) if name.ends_with("_docid") => s.clone(),
                other => other.to_string(),
            };
            format!("{name}={}", percent_encode(&text))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// What is compared: the status and the answer's bytes, but an error's
/// JSON without CouchDB's `ref` (a number naming the place in its code that
/// threw), and a query of several keys without its `offset` (CouchDB
/// reports one that depends on how its two shards split the rows;
/// `allowed.json` of the hand-written corpus says so).
fn comparable(reply: &Reply, params: &[(&str, Value)]) -> (u16, String) {
    if reply.status >= 400 {
        let mut body: Value = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
        if let Some(object) = body.as_object_mut() {
            object.remove("ref");
        }
        return (reply.status, body.to_string());
    }
    let mut text = reply.text.clone();
    if params.iter().any(|(name, _)| *name == "keys")
        && let Some(at) = text.find(",\"offset\":")
        && let Some(end) = text[at + 1..].find(',')
    {
        text.replace_range(at..at + 1 + end, "");
    }
    (reply.status, text)
}

#[tokio::test]
async fn random_view_queries_get_couchdbs_answers() {
    let Some(couchdb) = couchdb("random_view_queries_get_couchdbs_answers") else {
        return;
    };
    let seed = std::env::var("RECLINER_VIEW_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let queries: usize = std::env::var("RECLINER_VIEW_QUERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    eprintln!("view queries: seed {seed} (RECLINER_VIEW_SEED={seed} replays it)");
    let dir = TempDir::new("view-queries");
    let server = TestServer::start(dir.path(), &[]);
    let db = unique_db("viewq");
    let couch = Client::at(&couchdb.db_url(&db));
    let ours = Client::at(&server.url(&format!("/{db}")));
    let mut generator = Gen {
        rng: SplitMix(seed),
        keys: key_pool(),
    };
    let docs_count = 60;
    let docs: Vec<Value> = (0..docs_count).map(|i| generator.doc(i)).collect();
    for c in [&couch, &ours] {
        assert_eq!(c.put("", json!({})).await.status, 201);
        let written = c.post("/_bulk_docs", json!({ "docs": docs })).await;
        assert_eq!(written.status, 201, "{}", written.text);
        let ddoc = c.put("/_design/q", design()).await;
        assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    }

    let mut differences = Vec::new();
    for n in 0..queries {
        let (view, params) = generator.query(docs_count);
        let by_post = generator.rng.chance(30);
        let path = format!("/_design/q/_view/{view}");
        let (couch_reply, our_reply, shown) = if by_post {
            let body: serde_json::Map<String, Value> = params
                .iter()
                .map(|(name, value)| (name.to_string(), value.clone()))
                .collect();
            let body = Value::Object(body);
            (
                couch.post(&path, body.clone()).await,
                ours.post(&path, body.clone()).await,
                format!("POST {path} {body}"),
            )
        } else {
            let path = format!("{path}?{}", query_string(&params));
            (
                couch.get(&path).await,
                ours.get(&path).await,
                format!("GET {path}"),
            )
        };
        let (want, got) = (
            comparable(&couch_reply, &params),
            comparable(&our_reply, &params),
        );
        if want != got {
            differences.push(format!(
                "query {n}: {shown}\n  CouchDB:  {} {}\n  Recliner: {} {}",
                want.0, want.1, got.0, got.1
            ));
        }
    }
    let _ = couch
        .send_bytes("DELETE", "", Vec::new(), "application/json")
        .await;
    assert!(
        differences.is_empty(),
        "seed {seed} (RECLINER_VIEW_SEED={seed} replays it): {} of {queries} queries differ:\n{}",
        differences.len(),
        differences
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
