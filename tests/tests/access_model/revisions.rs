//! Documents by id and their revisions: `GET /db/id` (with `open_revs=all`
//! and `?rev=`), `_bulk_get` and `_revs_diff`, as one reader asks them.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use recliner_tests::{Reply, SplitMix};
use serde_json::{Value, json};

use crate::DB;
use crate::findings::{Asked, Findings, try_json};
use crate::model::{MISSING, Sight, sight};
use crate::reader::Reader;

/// Every document by id, and with `open_revs=all`: another's is
/// byte for byte a missing one. Answers the reader's tombstones: for each
/// document taken from them, the revision of the deletion they see.
pub(crate) async fn check_by_id(
    reader: &Reader<'_>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) -> BTreeMap<String, String> {
    let (model, who, name) = (reader.model, reader.who, reader.who.name);
    let client = reader.world.client(name);
    let missing_get = asked.get(&format!("/{DB}/{}", MISSING[0])).await;
    let missing_revs = asked
        .get(&format!("/{DB}/{}?open_revs=all", MISSING[0]))
        .await;
    found.equal(
        name,
        "GET a missing id",
        &json!([missing_get.status, missing_get.json()]),
        &json!([404, {"error": "not_found", "reason": "missing"}]),
    );
    found.equal(
        name,
        "GET a missing id ?open_revs=all",
        &json!(missing_revs.status),
        &json!(404),
    );
    let answers: Vec<(String, Reply, Reply)> = futures_util::stream::iter(model.docs.keys())
        .map(|id| async move {
            let one = client.get(&format!("/{DB}/{id}")).await;
            let revs = client.get(&format!("/{DB}/{id}?open_revs=all")).await;
            (id.clone(), one, revs)
        })
        .buffered(4)
        .collect()
        .await;
    let mut tombstones: BTreeMap<String, String> = BTreeMap::new();
    for (id, one, revs) in answers {
        let doc = &model.docs[&id];
        let route = format!("GET /db/{id}");
        match sight(who, doc) {
            Sight::Live => {
                found.equal(name, &route, &json!(one.status), &json!(200));
                if one.status == 200 {
                    found.equal(name, &route, &one.json(), &model.body(&id));
                }
                let expected = json!([{"ok": model.body(&id)}]);
                found.equal(
                    name,
                    &format!("{route}?open_revs=all"),
                    &try_json(&revs),
                    &expected,
                );
            }
            Sight::Deleted => {
                found.equal(
                    name,
                    &route,
                    &json!([one.status, try_json(&one)]),
                    &json!([404, {"error": "not_found", "reason": "deleted"}]),
                );
                let expected = json!([{"ok": {"_id": id, "_rev": doc.rev, "_deleted": true}}]);
                found.equal(
                    name,
                    &format!("{route}?open_revs=all"),
                    &try_json(&revs),
                    &expected,
                );
            }
            Sight::Lost | Sight::Faded => {
                if (one.status, &one.text) != (missing_get.status, &missing_get.text) {
                    found.leak(
                        name,
                        &route,
                        format!("a lost document answers {} {}", one.status, one.text),
                    );
                }
                let as_missing = missing_revs.text.replace(MISSING[0], &id);
                if sight(who, doc) == Sight::Faded
                    && (revs.status, &revs.text) == (missing_revs.status, &as_missing)
                {
                    continue;
                }
                // A deletion of their own, in place of the revision they held.
                let leaves = try_json(&revs);
                let leaf = &leaves[0]["ok"];
                let rev = leaf["_rev"].as_str().unwrap_or_default().to_string();
                let shape = json!([{"ok": {"_id": id, "_rev": rev, "_deleted": true}}]);
                if revs.status != 200 || leaves != shape || rev == doc.rev {
                    found.mismatch(
                        name,
                        &format!("{route}?open_revs=all"),
                        format!(
                            "a lost document should be one tombstone (not the current {}): {} {}",
                            doc.rev, revs.status, revs.text
                        ),
                    );
                }
                tombstones.insert(id.clone(), rev);
            }
            Sight::Never => {
                if (one.status, &one.text) != (missing_get.status, &missing_get.text) {
                    found.leak(
                        name,
                        &route,
                        format!("another's document answers {} {}", one.status, one.text),
                    );
                }
                let as_missing = missing_revs.text.replace(MISSING[0], &id);
                if (revs.status, &revs.text) != (missing_revs.status, &as_missing) {
                    found.leak(
                        name,
                        &format!("{route}?open_revs=all"),
                        format!("another's document answers {} {}", revs.status, revs.text),
                    );
                }
            }
        }
        // A revision of another's, asked by its number, is missing too.
        if sight(who, doc) == Sight::Never && rng.chance(20) {
            let asked_rev = client.get(&format!("/{DB}/{id}?rev={}", doc.rev)).await;
            let missing_rev = client
                .get(&format!("/{DB}/{}?rev={}", MISSING[1], doc.rev))
                .await;
            if (asked_rev.status, &asked_rev.text) != (missing_rev.status, &missing_rev.text) {
                found.leak(
                    name,
                    &format!("GET /db/{id}?rev="),
                    format!(
                        "{} {} (missing: {})",
                        asked_rev.status, asked_rev.text, missing_rev.text
                    ),
                );
            }
        }
    }
    tombstones
}

/// `_bulk_get`: as a missing document, with the id its own.
pub(crate) async fn check_bulk_get(
    reader: &Reader<'_>,
    sample: &[&str],
    tombstones: &BTreeMap<String, String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let (model, who, name) = (reader.model, reader.who, reader.who.name);
    let bulk = asked
        .post(
            &format!("/{DB}/_bulk_get"),
            json!({"docs": sample.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()}),
        )
        .await;
    if bulk.status != 200 {
        found.mismatch(name, "POST _bulk_get", bulk.text.clone());
    } else {
        let results = bulk.json()["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let missing_entry = results
            .iter()
            .find(|r| r["id"] == MISSING[0])
            .cloned()
            .unwrap_or(Value::Null);
        found.equal(
            name,
            "POST _bulk_get (a missing id)",
            &missing_entry,
            &json!({"id": MISSING[0], "docs": [{"error": {"id": MISSING[0], "rev": null, "error": "not_found", "reason": "missing"}}]}),
        );
        let as_missing = |id: &str| -> Value {
            serde_json::from_str(&missing_entry.to_string().replace(MISSING[0], id)).unwrap()
        };
        for (id, result) in sample.iter().zip(&results) {
            let route = format!("POST _bulk_get {id}");
            let Some(doc) = model.docs.get(*id) else {
                found.equal(name, &route, result, &as_missing(id));
                continue;
            };
            let ok = |body: Value| json!({"id": id, "docs": [{"ok": body}]});
            match sight(who, doc) {
                Sight::Live => found.equal(name, &route, result, &ok(model.body(id))),
                Sight::Deleted => found.equal(
                    name,
                    &route,
                    result,
                    &ok(json!({"_id": id, "_rev": doc.rev, "_deleted": true})),
                ),
                Sight::Lost | Sight::Faded if tombstones.contains_key(*id) => found.equal(
                    name,
                    &route,
                    result,
                    &ok(json!({"_id": id, "_rev": tombstones[*id], "_deleted": true})),
                ),
                Sight::Lost | Sight::Faded | Sight::Never => {
                    if *result != as_missing(id) {
                        found.leak(name, &route, format!("{result}, not as a missing id"));
                    }
                }
            }
        }
    }
}

/// `_revs_diff`: a revision the reader may not read is missing, as one
/// of a document nobody wrote; their own (and their tombstones) are not.
pub(crate) async fn check_revs_diff(
    reader: &Reader<'_>,
    sample: &[&str],
    tombstones: &BTreeMap<String, String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let (model, who, name) = (reader.model, reader.who, reader.who.name);
    let mut asked_revs = serde_json::Map::new();
    for id in sample {
        let rev = model
            .docs
            .get(*id)
            .map_or("1-0123456789abcdef0123456789abcdef".to_string(), |d| {
                d.rev.clone()
            });
        asked_revs.insert(id.to_string(), json!([rev]));
    }
    let diff = asked
        .post(
            &format!("/{DB}/_revs_diff"),
            Value::Object(asked_revs.clone()),
        )
        .await;
    if diff.status != 200 {
        found.mismatch(name, "POST _revs_diff", diff.text.clone());
    } else {
        let diff = diff.json();
        for (id, revs) in &asked_revs {
            let readable = model
                .docs
                .get(id)
                .is_some_and(|d| matches!(sight(who, d), Sight::Live | Sight::Deleted));
            let expected = if readable {
                Value::Null
            } else {
                json!({"missing": revs})
            };
            let got = diff.get(id).cloned().unwrap_or(Value::Null);
            if got != expected {
                let route = format!("POST _revs_diff {id}");
                if readable {
                    found.mismatch(name, &route, format!("{got}: the reader holds it"));
                } else {
                    found.leak(
                        name,
                        &route,
                        format!("{got}, not as a missing id's {expected}"),
                    );
                }
            }
        }
    }
    if !tombstones.is_empty() {
        let held: serde_json::Map<String, Value> = tombstones
            .iter()
            .map(|(id, rev)| (id.clone(), json!([rev])))
            .collect();
        let diff = asked
            .post(&format!("/{DB}/_revs_diff"), Value::Object(held))
            .await;
        found.equal(
            name,
            "POST _revs_diff of the reader's tombstones",
            &try_json(&diff),
            &json!({}),
        );
    }
}
