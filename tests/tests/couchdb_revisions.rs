//! The same edits made on Apache CouchDB 3.5 and on Recliner get the same
//! revision ids: generated documents (nested objects, unicode, numbers of
//! every shape, member orders) created, edited, deleted and re-created,
//! with inline, standalone and kept attachments, one by one and in
//! `_bulk_docs`. Needs `COUCHDB_URL` (set by `cargo xtask test`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, SplitMix as Rng, TempDir, TestServer};
use serde_json::{Value, json};

/// Number texts as clients write them: every integer width Erlang encodes
/// differently, and floats in plain and exponent forms.
const NUMBERS: &[&str] = &[
    "0",
    "7",
    "255",
    "256",
    "-1",
    "-255",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1.5",
    "-0.25",
    "0.1",
    "1.0",
    "100.0",
    "3.141592653589793",
    "1e3",
    "1E-7",
    "-2.5e+10",
    "123456.789e-3",
    "6.02214076e23",
    "2.2250738585072014e-308",
    "1.7976931348623157e308",
    "1e-310",
    "2.225073858507201e-308",
    "0.30000000000000004",
];

/// String texts, escapes included, as they appear in JSON.
const STRINGS: &[&str] = &[
    r#""""#,
    r#""plain""#,
    r#""é à ü""#,
    r#""日本語""#,
    r#""😀 emoji""#,
    r#""\ud83d\ude00 escaped pair""#,
    r#""tab\tnew\nline""#,
    r#""quote \" and \\ backslash""#,
    r#""\u0000 nul""#,
    r#""\u00e9 escaped""#,
    r#""/ and \/""#,
];

const KEYS: &[&str] = &[
    "a",
    "b",
    "value",
    "name",
    "é",
    "κλειδί",
    "nested",
    "list",
    "x y",
    "0",
    "",
];

fn value(rng: &mut Rng, depth: u32) -> String {
    let kinds = if depth >= 3 { 5 } else { 8 };
    match rng.below(kinds) {
        0 => rng.pick(NUMBERS).to_string(),
        1 => rng.pick(STRINGS).to_string(),
        2 => rng.pick(&["true", "false", "null"]).to_string(),
        // A list of small integers: Erlang writes it as a byte string.
        3 => {
            let n = rng.below(5);
            let items: Vec<String> = (0..n).map(|_| (rng.below(300)).to_string()).collect();
            format!("[{}]", items.join(","))
        }
        4 => rng.pick(NUMBERS).to_string(),
        5 | 6 => object(rng, depth + 1, false),
        _ => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| value(rng, depth + 1)).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

/// An object's text with members in a random order; `top` leaves room
/// for the fields the test adds.
fn object(rng: &mut Rng, depth: u32, top: bool) -> String {
    let mut keys: Vec<&str> = KEYS.to_vec();
    let n = rng.below(if top { 6 } else { 4 }) + usize::from(top);
    let mut members = Vec::new();
    for _ in 0..n {
        let key = keys.remove(rng.below(keys.len()));
        members.push(format!(
            "{}: {}",
            serde_json::to_string(key).unwrap(),
            value(rng, depth)
        ));
    }
    format!("{{{}}}", members.join(", "))
}

/// `body` (an object's text) with `extra` members first.
fn with_members(body: &str, extra: &str) -> String {
    let inner = body.trim_start_matches('{');
    if inner.trim() == "}" {
        format!("{{{extra}}}")
    } else {
        format!("{{{extra}, {inner}")
    }
}

struct Pair {
    couch: Client,
    recliner: Client,
    couch_db: String,
    recliner_db: String,
}

impl Pair {
    /// The same request to both servers; both must succeed with the same rev.
    async fn same(&self, method: &str, path: &str, body: &str, content_type: &str) -> String {
        let c = self
            .couch
            .send_bytes(
                method,
                &format!("/{}{path}", self.couch_db),
                body.as_bytes().to_vec(),
                content_type,
            )
            .await;
        let r = self
            .recliner
            .send_bytes(
                method,
                &format!("/{}{path}", self.recliner_db),
                body.as_bytes().to_vec(),
                content_type,
            )
            .await;
        assert!(
            c.status == 201 || c.status == 202 || c.status == 200,
            "CouchDB: {method} {path} {body}: {} {}",
            c.status,
            c.text
        );
        assert_eq!(
            r.status, c.status,
            "{method} {path} {body}: Recliner {}",
            r.text
        );
        let (cj, rj): (Value, Value) = (c.json(), r.json());
        assert_eq!(
            rj["rev"], cj["rev"],
            "{method} {path} with {body}: Recliner's revision differs from CouchDB's"
        );
        cj["rev"].as_str().unwrap().to_string()
    }

    async fn put_doc(&self, id: &str, body: &str) -> String {
        self.same("PUT", &format!("/{id}"), body, "application/json")
            .await
    }
}

#[tokio::test]
async fn edits_get_the_same_revision_ids_as_on_couchdb() {
    let Some(couch) = couchdb("edits_get_the_same_revision_ids_as_on_couchdb") else {
        return;
    };
    let data = TempDir::new("couch-revs");
    let server = TestServer::start(data.path(), &[]);
    let pair = Pair {
        couch: couch.client(),
        recliner: Client::new(&server),
        couch_db: unique_db("revs"),
        recliner_db: "revs".to_string(),
    };
    assert_eq!(
        pair.couch
            .put(&format!("/{}", pair.couch_db), json!({}))
            .await
            .status,
        201
    );
    assert_eq!(pair.recliner.put("/revs", json!({})).await.status, 201);

    let mut rng = Rng(0x5EED_2026);
    let mut compared = 0;
    for i in 0..200 {
        let id = format!("doc-{i:03}");
        let body = object(&mut rng, 0, true);
        let mut rev = pair.put_doc(&id, &body).await;
        compared += 1;

        // An edit, sometimes with an inline attachment or two.
        let edit = object(&mut rng, 0, true);
        let edit = match rng.below(3) {
            0 => with_members(
                &edit,
                r#""_attachments": {"note.txt": {"content_type": "text/plain", "data": "aGVsbG8gd29ybGQ="}, "a.bin": {"content_type": "application/octet-stream", "data": "AAECAwQF"}}"#,
            ),
            1 => with_members(
                &edit,
                r#""_attachments": {"z.json": {"content_type": "application/json", "data": "eyJ4IjoxfQ=="}}"#,
            ),
            _ => edit,
        };
        let edit = with_members(&edit, &format!(r#""_rev": "{rev}""#));
        rev = pair.put_doc(&id, &edit).await;
        compared += 1;

        match rng.below(5) {
            // A standalone attachment written beside the kept ones.
            0 => {
                rev = pair
                    .same(
                        "PUT",
                        &format!("/{id}/extra.txt?rev={rev}"),
                        "extra bytes",
                        "text/plain; charset=utf-8",
                    )
                    .await;
                compared += 1;
                // Another edit keeping every attachment as a stub.
                let doc = pair.recliner.get(&format!("/revs/{id}")).await.json();
                let stubs = serde_json::to_string(&doc["_attachments"]).unwrap();
                let next = with_members(
                    &object(&mut rng, 0, true),
                    &format!(r#""_rev": "{rev}", "_attachments": {stubs}"#),
                );
                pair.put_doc(&id, &next).await;
                compared += 1;
            }
            // Deleted by DELETE, then re-created without a revision.
            1 => {
                pair.same(
                    "DELETE",
                    &format!("/{id}?rev={rev}"),
                    "",
                    "application/json",
                )
                .await;
                pair.put_doc(&id, &object(&mut rng, 0, true)).await;
                compared += 2;
            }
            // Deleted with a body that keeps fields.
            2 => {
                let gone = with_members(
                    &object(&mut rng, 0, true),
                    &format!(r#""_rev": "{rev}", "_deleted": true"#),
                );
                pair.put_doc(&id, &gone).await;
                compared += 1;
            }
            _ => {}
        }
    }

    // New documents and edits through _bulk_docs.
    for round in 0..10 {
        let docs: Vec<String> = (0..10)
            .map(|j| {
                with_members(
                    &object(&mut rng, 0, true),
                    &format!(r#""_id": "bulk-{round}-{j}""#),
                )
            })
            .collect();
        let body = format!(r#"{{"docs": [{}]}}"#, docs.join(", "));
        let c = pair
            .couch
            .send_bytes(
                "POST",
                &format!("/{}/_bulk_docs", pair.couch_db),
                body.clone().into_bytes(),
                "application/json",
            )
            .await;
        let r = pair
            .recliner
            .send_bytes(
                "POST",
                "/revs/_bulk_docs",
                body.clone().into_bytes(),
                "application/json",
            )
            .await;
        assert_eq!((c.status, r.status), (201, 201), "{} / {}", c.text, r.text);
        let revs = |v: Value| -> Vec<Value> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|row| row["rev"].clone())
                .collect()
        };
        assert_eq!(revs(r.json()), revs(c.json()), "_bulk_docs {body}");
        compared += 10;
    }
    assert!(compared >= 500, "{compared} edits compared");
}
