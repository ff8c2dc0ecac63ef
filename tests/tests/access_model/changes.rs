//! `_changes` as one reader asks it: whole, with the documents, by ids,
//! by selector and since the previous check, and its `pending`.

use std::collections::{BTreeMap, BTreeSet};

use recliner_tests::SplitMix;
use serde_json::{Value, json};

use crate::DB;
use crate::findings::{Asked, Findings, field_of, try_json};
use crate::model::{KINDS, Sight, sight};
use crate::reader::Reader;

fn ids_path(ids: &[&str]) -> String {
    json!(ids)
        .to_string()
        .replace('"', "%22")
        .replace('[', "%5B")
        .replace(']', "%5D")
        .replace(',', "%2C")
}

/// One feed to ask: its route (as findings name it), path, body, and the
/// ids it must answer.
type Feed = (String, String, Option<Value>, BTreeSet<String>);

/// The feeds one reader asks, by ids of `sample` among them.
fn feeds(reader: &Reader<'_>, sample: &[&str], rng: &mut SplitMix) -> Vec<Feed> {
    let (world, model, who, name) = (reader.world, reader.model, reader.who, reader.who.name);
    let (in_feed, faded) = (&reader.in_feed, &reader.faded);
    let doc_ids_filter: Vec<&str> = sample.to_vec();
    let filtered: BTreeSet<String> = in_feed
        .iter()
        .filter(|id| doc_ids_filter.contains(&id.as_str()))
        .cloned()
        .collect();
    let mut feeds = vec![
        (
            "GET _changes".to_string(),
            format!("/{DB}/_changes"),
            None,
            in_feed.clone(),
        ),
        (
            "GET _changes include_docs".to_string(),
            format!("/{DB}/_changes?include_docs=true"),
            None,
            in_feed.clone(),
        ),
        (
            "POST _changes filter=_doc_ids".to_string(),
            format!("/{DB}/_changes?filter=_doc_ids"),
            Some(json!({"doc_ids": doc_ids_filter})),
            filtered.clone(),
        ),
        (
            "GET _changes filter=_doc_ids".to_string(),
            format!(
                "/{DB}/_changes?filter=_doc_ids&doc_ids={}",
                ids_path(&doc_ids_filter)
            ),
            None,
            filtered,
        ),
    ];
    // A selector sees what the reader sees: a tombstone holds no fields.
    let kind = rng.pick(&KINDS);
    feeds.push((
        format!("POST _changes filter=_selector kind={kind}"),
        format!("/{DB}/_changes?filter=_selector&include_docs=true"),
        Some(json!({"selector": {"kind": kind}})),
        model.live_where(who, |d| d.kind == kind),
    ));
    feeds.push((
        "POST _changes filter=_selector _deleted".to_string(),
        format!("/{DB}/_changes?filter=_selector&include_docs=true"),
        Some(json!({"selector": {"_deleted": true}})),
        model
            .docs
            .iter()
            .filter(|(_, d)| matches!(sight(who, d), Sight::Deleted | Sight::Lost))
            .map(|(id, _)| id.clone())
            .collect(),
    ));
    // Since the previous check: only what the round's writes did to
    // documents the reader read before or after them.
    if let Some(since) = world.since.get(name).and_then(Value::as_str) {
        feeds.push((
            format!("GET _changes since the previous round ({since})"),
            format!("/{DB}/_changes?include_docs=true&since={since}"),
            None,
            world
                .touched
                .get(name)
                .map(|touched| touched.difference(faded).cloned().collect())
                .unwrap_or_default(),
        ));
    }
    feeds
}

/// `_changes`: each document once, a lost one as a deletion of the
/// reader's own; with the documents; by ids. Answers the whole feed's
/// `last_seq` and length.
pub(crate) async fn check_changes(
    reader: &Reader<'_>,
    sample: &[&str],
    tombstones: &BTreeMap<String, String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) -> (Value, usize) {
    let name = reader.who.name;
    let (in_feed, faded) = (&reader.in_feed, &reader.faded);
    let faded_asked: BTreeSet<String> = faded
        .iter()
        .filter(|id| sample.contains(&id.as_str()))
        .cloned()
        .collect();
    let feeds = feeds(reader, sample, rng);
    let mut last_seq = Value::Null;
    let mut feed_len = 0;
    let allowed: BTreeSet<String> = in_feed.union(faded).cloned().collect();
    for (route, path, body, expected) in feeds {
        let route = route.as_str();
        let optional = if route.contains("_doc_ids") {
            &faded_asked
        } else {
            faded
        };
        let feed = match body {
            Some(body) => asked.post(&path, body).await,
            None => asked.get(&path).await,
        };
        if feed.status != 200 {
            found.mismatch(name, route, feed.text.clone());
            continue;
        }
        let feed = feed.json();
        let rows = feed["results"].as_array().cloned().unwrap_or_default();
        if route == "GET _changes" {
            last_seq = feed["last_seq"].clone();
            feed_len = rows.len();
        }
        found.ids_or(
            name,
            route,
            &field_of(&json!(rows), "id"),
            &expected,
            optional,
            &allowed,
        );
        check_feed_rows(reader, route, &rows, tombstones, found);
    }
    (last_seq, feed_len)
}

/// Each row of a feed: its flags and revision, and its document where
/// the feed carries them.
fn check_feed_rows(
    reader: &Reader<'_>,
    route: &str,
    rows: &[Value],
    tombstones: &BTreeMap<String, String>,
    found: &mut Findings,
) {
    let (model, who, name) = (reader.model, reader.who, reader.who.name);
    for row in rows {
        let id = row["id"].as_str().unwrap_or_default();
        let Some(doc) = model.docs.get(id) else {
            continue;
        };
        let rev = row["changes"][0]["rev"].clone();
        let route = format!("{route} {id}");
        let (flags, expected_rev, body) = match sight(who, doc) {
            Sight::Live => ((Value::Null, Value::Null), json!(doc.rev), model.body(id)),
            Sight::Deleted => (
                (json!(true), Value::Null),
                json!(doc.rev),
                json!({"_id": id, "_rev": doc.rev, "_deleted": true}),
            ),
            Sight::Lost | Sight::Faded => {
                let tomb = tombstones.get(id).cloned().unwrap_or_default();
                (
                    (json!(true), json!(true)),
                    json!(tomb),
                    json!({"_id": id, "_rev": tomb, "_deleted": true}),
                )
            }
            Sight::Never => continue,
        };
        found.equal(
            name,
            &route,
            &json!([row["deleted"], row["removed"], rev]),
            &json!([flags.0, flags.1, expected_rev]),
        );
        if ["include_docs", "since", "_selector"]
            .iter()
            .any(|with_docs| route.contains(with_docs))
        {
            found.equal(name, &route, &row["doc"], &body);
        }
    }
}

/// A feed's `pending` counts the reader's changes only.
pub(crate) async fn check_pending(
    reader: &Reader<'_>,
    feed_len: usize,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) {
    let name = reader.who.name;
    let limit = 1 + rng.below(feed_len.max(1));
    let feed = asked.get(&format!("/{DB}/_changes?limit={limit}")).await;
    let feed = try_json(&feed);
    found.equal(
        name,
        &format!("GET _changes?limit={limit}"),
        &json!([feed["results"].as_array().map(Vec::len), feed["pending"]]),
        &json!([limit.min(feed_len), feed_len.saturating_sub(limit)]),
    );
}
