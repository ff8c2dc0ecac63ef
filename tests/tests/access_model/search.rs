//! Nouveau and Clouseau's `_search` as one reader asks them: everything
//! (stale and fresh), grouped and drilled down, by word, by another's
//! unique word, and page by page.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::DB;
use crate::findings::{Asked, Findings, field_of, try_json, walk_pages};
use crate::model::{KINDS, Model, Person, WORDS, token};

/// The counts asked of every search: by `kind`.
const COUNTS_PARAM: &str = "counts=%5B%22kind%22%5D";

/// The counts of `kind` over `ids`, as search answers give them.
fn kind_counts(model: &Model, ids: &BTreeSet<String>) -> Value {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for id in ids {
        *counts.entry(model.docs[id].kind.clone()).or_default() += 1;
    }
    json!({"kind": counts})
}

/// The `low` (n < 50) and `high` ranges of `n` over `ids`.
fn n_ranges(model: &Model, ids: &BTreeSet<String>) -> Value {
    let low = ids.iter().filter(|id| model.docs[*id].n < 50).count();
    json!({"n": {"low": low, "high": ids.len() - low}})
}

/// Nouveau and Clouseau's `_search`: ids, totals and counts are of the
/// reader's documents only, stale or not, paged or whole.
pub(crate) async fn check_searches(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    search_everything(model, who, live, asked, found).await;
    search_groups(model, who, live, asked, found).await;
    search_words(model, who, live, asked, found).await;
    search_tokens(model, who, live, asked, found).await;
    search_pages(who, live, asked, found).await;
}

/// Everything, with the documents, counts and ranges, stale and fresh.
async fn search_everything(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    // A member's stale query comes first: it must be brought up to date
    // for them. An admin's may be stale, so theirs come after a fresh one.
    let orders = if who.is_admin() {
        [false, true]
    } else {
        [true, false]
    };
    for stale in orders {
        let route = format!("_nouveau *:* stale={stale}");
        let reply = if stale {
            asked
                .get(&format!(
                    "/{DB}/_design/s/_nouveau/all?q=*:*&limit=200&update=false&{COUNTS_PARAM}&include_docs=true"
                ))
                .await
        } else {
            let ranges = json!({"n": [
                {"label": "low", "min": 0, "max": 50, "max_inclusive": false},
                {"label": "high", "min": 50, "max": 100},
            ]});
            asked
                .post(
                    &format!("/{DB}/_design/s/_nouveau/all"),
                    json!({"q": "*:*", "limit": 200, "counts": ["kind"], "ranges": ranges,
                           "include_docs": true}),
                )
                .await
        };
        let reply = try_json(&reply);
        found.ids(name, &route, &field_of(&reply["hits"], "id"), live, live);
        found.equal(name, &route, &reply["total_hits"], &json!(live.len()));
        found.equal(name, &route, &reply["counts"], &kind_counts(model, live));
        if !stale {
            found.equal(name, &route, &reply["ranges"], &n_ranges(model, live));
        }
        for hit in reply["hits"].as_array().into_iter().flatten() {
            let id = hit["id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &hit["doc"], &model.body(id));
            }
        }

        let route = format!("_search *:* stale={stale}");
        let stale_param = if stale { "&stale=ok" } else { "" };
        // ranges={"n":{"low":"[0 TO 50}","high":"[50 TO 100]"}}
        let ranges = "ranges=%7B%22n%22%3A%7B%22low%22%3A%22%5B0%20TO%2050%7D%22%2C%22high%22%3A%22%5B50%20TO%20100%5D%22%7D%7D";
        let reply = asked
            .get(&format!(
                "/{DB}/_design/s/_search/all?q=*:*&limit=200&{COUNTS_PARAM}&{ranges}&include_docs=true{stale_param}"
            ))
            .await;
        let reply = try_json(&reply);
        found.ids(name, &route, &field_of(&reply["rows"], "id"), live, live);
        found.equal(name, &route, &reply["total_rows"], &json!(live.len()));
        found.equal(name, &route, &reply["counts"], &kind_counts(model, live));
        found.equal(name, &route, &reply["ranges"], &n_ranges(model, live));
        for row in reply["rows"].as_array().into_iter().flatten() {
            let id = row["id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &row["doc"], &model.body(id));
            }
        }
    }
}

/// Grouped by kind, and drilled down to one: groups and totals of the
/// reader's documents.
async fn search_groups(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let reply = asked
        .get(&format!(
            "/{DB}/_design/s/_search/all?q=*:*&group_field=kind&group_limit=200&limit=200"
        ))
        .await;
    let reply = try_json(&reply);
    let route = "_search group_field=kind";
    found.equal(name, route, &reply["total_rows"], &json!(live.len()));
    let mut groups = BTreeMap::new();
    for group in reply["groups"].as_array().into_iter().flatten() {
        let ids = field_of(&group["rows"], "id");
        found.equal(name, route, &group["total_rows"], &json!(ids.len()));
        groups.insert(group["by"].as_str().unwrap_or_default().to_string(), ids);
    }
    for kind in KINDS {
        let expected = model.live_where(who, |d| d.kind == kind);
        let got = groups.remove(kind).unwrap_or_default();
        found.ids(name, &format!("{route} {kind}"), &got, &expected, live);
        let path = format!(
            "/{DB}/_design/s/_search/all?q=*:*&limit=200&drilldown=%5B%22kind%22%2C%22{kind}%22%5D"
        );
        let reply = try_json(&asked.get(&path).await);
        let route = format!("_search drilldown kind={kind}");
        found.ids(
            name,
            &route,
            &field_of(&reply["rows"], "id"),
            &expected,
            live,
        );
        found.equal(name, &route, &reply["total_rows"], &json!(expected.len()));
    }
    if !groups.is_empty() {
        found.mismatch(name, route, format!("groups of no kind: {groups:?}"));
    }
}

/// A word: the reader's documents holding it, counted as theirs.
async fn search_words(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    for word in WORDS {
        let expected = model.live_where(who, |d| d.has_word(word));
        for stale in [false, true] {
            let route = format!("_nouveau text:{word} stale={stale}");
            let reply = asked
                .get(&format!(
                    "/{DB}/_design/s/_nouveau/all?q=text:{word}&limit=200&{COUNTS_PARAM}&update={}",
                    !stale
                ))
                .await;
            let reply = try_json(&reply);
            found.ids(
                name,
                &route,
                &field_of(&reply["hits"], "id"),
                &expected,
                live,
            );
            found.equal(name, &route, &reply["total_hits"], &json!(expected.len()));
            found.equal(
                name,
                &route,
                &reply["counts"],
                &kind_counts(model, &expected),
            );
            let route = format!("_search text:{word} stale={stale}");
            let stale_param = if stale { "&stale=ok" } else { "" };
            let reply = asked
                .get(&format!(
                    "/{DB}/_design/s/_search/all?q=text:{word}&limit=200&{COUNTS_PARAM}{stale_param}"
                ))
                .await;
            let reply = try_json(&reply);
            found.ids(
                name,
                &route,
                &field_of(&reply["rows"], "id"),
                &expected,
                live,
            );
            found.equal(name, &route, &reply["total_rows"], &json!(expected.len()));
            found.equal(
                name,
                &route,
                &reply["counts"],
                &kind_counts(model, &expected),
            );
        }
    }
}

/// Another's unique word finds nothing; the reader's own finds one.
async fn search_tokens(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let live_docs = model.docs.iter().filter(|(_, d)| !d.deleted);
    for id in live_docs.map(|(id, _)| id).take(12) {
        let expected: BTreeSet<String> = if live.contains(id) {
            [id.clone()].into()
        } else {
            BTreeSet::new()
        };
        let route = format!("_nouveau text:{}", token(id));
        let reply = asked
            .get(&format!(
                "/{DB}/_design/s/_nouveau/all?q=text:{}",
                token(id)
            ))
            .await;
        let reply = try_json(&reply);
        found.ids(
            name,
            &route,
            &field_of(&reply["hits"], "id"),
            &expected,
            live,
        );
        found.equal(name, &route, &reply["total_hits"], &json!(expected.len()));
    }
}

/// Every page, following bookmarks.
async fn search_pages(
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let route = "_nouveau *:* paged";
    let ids = walk_pages(asked, found, route, 4, async |asked, bookmark| {
        let mut query = json!({"q": "*:*", "limit": 4});
        if let Some(bookmark) = bookmark {
            query["bookmark"] = bookmark;
        }
        let reply = asked
            .post(&format!("/{DB}/_design/s/_nouveau/all"), query)
            .await;
        let reply = try_json(&reply);
        (field_of(&reply["hits"], "id"), reply["bookmark"].clone())
    })
    .await;
    found.ids(name, route, &ids, live, live);
    let route = "_search *:* paged";
    let ids = walk_pages(asked, found, route, 4, async |asked, bookmark| {
        let mut path = format!("/{DB}/_design/s/_search/all?q=*:*&limit=4");
        if let Some(bookmark) = bookmark.as_ref().and_then(Value::as_str) {
            path.push_str(&format!("&bookmark={bookmark}"));
        }
        let reply = asked.get(&path).await;
        let reply = try_json(&reply);
        (field_of(&reply["rows"], "id"), reply["bookmark"].clone())
    })
    .await;
    found.ids(name, route, &ids, live, live);
}
