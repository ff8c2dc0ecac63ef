//! Mango's `_find` as one reader asks it: a JSON index, a scan and
//! `$text`, every page, and what each query examined.

use std::collections::BTreeSet;

use recliner_tests::SplitMix;
use serde_json::{Value, json};

use crate::DB;
use crate::findings::{Asked, Findings, field_of, try_json, walk_pages};
use crate::model::{KINDS, Model, Person, WORDS};

pub(crate) async fn check_find(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) {
    let name = who.name;
    let floor = rng.below(80) as i64;
    let kind = rng.pick(&KINDS);
    let word = rng.pick(&WORDS);
    let mut queries = vec![
        (
            "_find by-n",
            json!({"selector": {"n": {"$gte": floor}}, "use_index": "by-n"}),
            7,
            model.live_where(who, |d| d.n >= floor),
        ),
        (
            "_find kind (no index)",
            json!({"selector": {"kind": kind}}),
            5,
            model.live_where(who, |d| d.kind == kind),
        ),
        (
            "_find $text",
            json!({"selector": {"$text": word}}),
            6,
            model.live_where(who, |d| d.has_word(word)),
        ),
    ];
    if !who.is_admin() {
        // Before any fresh query of this round: a member's stale `$text`
        // is still of what they read now.
        queries.insert(
            0,
            (
                "_find $text update=false",
                json!({"selector": {"$text": word}, "update": false}),
                6,
                model.live_where(who, |d| d.has_word(word)),
            ),
        );
    }
    for (route, query, limit, expected) in queries {
        let route = format!("{route} {query}");
        let mut bodies = Vec::new();
        let ids = walk_pages(asked, found, &route, limit, async |asked, bookmark| {
            let mut query = query.clone();
            query["limit"] = json!(limit);
            if let Some(bookmark) = bookmark {
                query["bookmark"] = bookmark;
            }
            let reply = asked.post(&format!("/{DB}/_find"), query).await;
            if reply.status != 200 {
                return (
                    vec![format!("status {}: {}", reply.status, reply.text)],
                    Value::Null,
                );
            }
            let reply = reply.json();
            let docs = reply["docs"].as_array().cloned().unwrap_or_default();
            bodies.extend(docs.clone());
            (field_of(&json!(docs), "_id"), reply["bookmark"].clone())
        })
        .await;
        found.ids(name, &route, &ids, &expected, live);
        for doc in bodies {
            let id = doc["_id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &doc, &model.body(id));
            }
        }
        // Its statistics: what a member's query examined is theirs.
        let mut whole = query.clone();
        whole["limit"] = json!(1000);
        whole["execution_stats"] = json!(true);
        let reply = asked.post(&format!("/{DB}/_find"), whole).await;
        let stats = try_json(&reply)["execution_stats"].clone();
        let route = format!("{route} execution_stats");
        found.equal(
            name,
            &route,
            &stats["results_returned"],
            &json!(expected.len()),
        );
        if who.is_admin() {
            continue;
        }
        for figure in ["total_keys_examined", "total_docs_examined"] {
            let examined = stats[figure].as_u64();
            let scan = route.contains("no index");
            let fits = examined.is_some_and(|n| {
                if scan {
                    n == live.len() as u64
                } else {
                    n <= live.len() as u64
                }
            });
            if !fits {
                found.leak(
                    name,
                    &route,
                    format!(
                        "{figure} {examined:?}, the reader has {} documents",
                        live.len()
                    ),
                );
            }
        }
    }
}
