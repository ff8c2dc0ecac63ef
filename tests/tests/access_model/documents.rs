//! The database's figures and `_all_docs` (whole, with the documents, a
//! page from the middle and by keys), as one reader asks them.

use std::collections::BTreeSet;

use recliner_tests::SplitMix;
use serde_json::json;

use crate::DB;
use crate::findings::{Asked, Findings, field_of, try_json};
use crate::model::{MISSING, Model, Sight, sight};
use crate::reader::Reader;

/// The database's figures are the reader's own.
pub(crate) async fn check_db_info(
    reader: &Reader<'_>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = reader.who.name;
    let (listed, deleted_count) = (&reader.listed, reader.deleted_count);
    let info = asked.get(&format!("/{DB}")).await;
    if info.status != 200 {
        found.mismatch(name, "GET /db", format!("{}: {}", info.status, info.text));
    } else {
        let info = info.json();
        found.equal(
            name,
            "GET /db doc_count",
            &info["doc_count"],
            &json!(listed.len()),
        );
        found.equal(
            name,
            "GET /db doc_del_count",
            &info["doc_del_count"],
            &json!(deleted_count),
        );
    }
}

/// `_all_docs`, plain and with the documents.
pub(crate) async fn check_all_docs(
    reader: &Reader<'_>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let (model, name) = (reader.model, reader.who.name);
    let (live, listed) = (&reader.live, &reader.listed);
    for include_docs in [false, true] {
        let route = format!("GET _all_docs include_docs={include_docs}");
        let all = asked
            .get(&format!("/{DB}/_all_docs?include_docs={include_docs}"))
            .await;
        if all.status != 200 {
            found.mismatch(name, &route, all.text.clone());
            continue;
        }
        let all = all.json();
        found.ids(name, &route, &field_of(&all["rows"], "id"), listed, listed);
        found.equal(name, &route, &all["total_rows"], &json!(listed.len()));
        found.equal(name, &format!("{route} offset"), &all["offset"], &json!(0));
        if include_docs {
            for row in all["rows"].as_array().into_iter().flatten() {
                let id = row["id"].as_str().unwrap_or_default();
                if live.contains(id) {
                    found.equal(name, &route, &row["doc"], &model.body(id));
                }
            }
        }
    }
}

/// A page from the middle: its offset counts only the reader's rows.
pub(crate) async fn check_all_docs_page(
    reader: &Reader<'_>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) {
    let (model, name, listed) = (reader.model, reader.who.name, &reader.listed);
    let start = format!("d{:03}", rng.below(model.next_id));
    let (skip, limit) = (rng.below(3), 1 + rng.below(6));
    let route = format!("GET _all_docs startkey={start} skip={skip} limit={limit}");
    let page = asked
        .get(&format!(
            "/{DB}/_all_docs?startkey=%22{start}%22&skip={skip}&limit={limit}"
        ))
        .await;
    let page = try_json(&page);
    let before = listed.iter().filter(|id| **id < start).count();
    let rows: BTreeSet<String> = listed
        .iter()
        .filter(|id| **id >= start)
        .skip(skip)
        .take(limit)
        .cloned()
        .collect();
    found.ids(name, &route, &field_of(&page["rows"], "id"), &rows, listed);
    found.equal(
        name,
        &route,
        &json!([page["offset"], page["total_rows"]]),
        &json!([(before + skip).min(listed.len()), listed.len()]),
    );
}

/// A sample of ids: theirs, others', deleted, lost and missing.
pub(crate) fn sample_ids<'a>(model: &'a Model, rng: &mut SplitMix) -> Vec<&'a str> {
    let all_ids: Vec<&str> = model.docs.keys().map(String::as_str).collect();
    let mut sample: Vec<&str> = Vec::new();
    for _ in 0..24 {
        let id = all_ids[rng.below(all_ids.len())];
        if !sample.contains(&id) {
            sample.push(id);
        }
    }
    sample.extend(MISSING);
    sample
}

/// `_all_docs` by keys: another's document is a missing one, row for row.
pub(crate) async fn check_all_docs_keys(
    reader: &Reader<'_>,
    sample: &[&str],
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let (model, who, name, listed) = (reader.model, reader.who, reader.who.name, &reader.listed);
    let keyed = asked
        .post(
            &format!("/{DB}/_all_docs?include_docs=true"),
            json!({"keys": sample}),
        )
        .await;
    if keyed.status != 200 {
        found.mismatch(name, "POST _all_docs keys", keyed.text.clone());
    } else {
        let keyed = keyed.json();
        found.equal(
            name,
            "POST _all_docs keys total_rows",
            &keyed["total_rows"],
            &json!(listed.len()),
        );
        let rows = keyed["rows"].as_array().cloned().unwrap_or_default();
        if rows.len() != sample.len() {
            found.mismatch(name, "POST _all_docs keys", format!("{} rows", rows.len()));
        }
        let missing_row = |id: &str| json!({"key": id, "error": "not_found"});
        for (id, row) in sample.iter().zip(&rows) {
            let expected = match model.docs.get(*id).map(|d| (sight(who, d), d)) {
                Some((Sight::Live, d)) => {
                    json!({"id": id, "key": id, "value": {"rev": d.rev}, "doc": model.body(id)})
                }
                Some((Sight::Deleted, d)) => json!({"id": id, "key": id,
                    "value": {"rev": d.rev, "deleted": true}, "doc": null}),
                _ => missing_row(id),
            };
            if MISSING.contains(id) {
                found.equal(name, "POST _all_docs keys (a missing id)", row, &expected);
            } else if expected == missing_row(id) && *row != expected {
                found.leak(
                    name,
                    "POST _all_docs keys",
                    format!("{id} answers {row}, a missing id {}", missing_row(id)),
                );
            } else {
                found.equal(name, "POST _all_docs keys", row, &expected);
            }
        }
    }
}
