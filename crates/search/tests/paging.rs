//! The collector against a model: random documents (strings, doubles,
//! missing values) spread over several segments, sorted by random keys,
//! read page by page through bookmarks of random sizes. The pages must
//! join into exactly the model's order, and counts and range counts must
//! be the model's.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::cmp::Ordering;
use std::collections::HashMap;

mod common;
use common::{definition, field};

use design_functions::search::FieldKind;
use proptest::prelude::*;
use search::index::Entry;
use search::request::SortSpec;
use search::{RangeSpec, SearchIndex, SearchRequest, SortValue};
use serde_json::json;

#[derive(Debug, Clone)]
struct Doc {
    id: String,
    color: Option<String>,
    size: Option<f64>,
}

fn docs() -> impl Strategy<Value = Vec<Doc>> {
    let color = prop::option::of(prop::sample::select(vec![
        "red", "green", "blue", "Blue", "é", "",
    ]));
    let size = prop::option::of(prop::sample::select(vec![-1.5, 0.0, 2.0, 2.5, 10.0, 1e9]));
    prop::collection::vec((color, size), 1..60).prop_map(|values| {
        values
            .into_iter()
            .enumerate()
            .map(|(i, (color, size))| Doc {
                // Distinct ids in no particular order (37 and 100 are coprime).
                id: format!("d{:02}", (i * 37) % 100),
                color: color.map(str::to_string),
                size,
            })
            .collect()
    })
}

/// The model's order of two documents under `sort` (then `_id`).
fn model_order(a: &Doc, b: &Doc, sort: &[SortSpec]) -> Ordering {
    for spec in sort {
        let SortSpec::Field { name, descending } = spec else {
            continue;
        };
        let order = match name.as_str() {
            // Missing strings first; bytes order.
            "color" => a
                .color
                .as_deref()
                .map(str::as_bytes)
                .cmp(&b.color.as_deref().map(str::as_bytes)),
            // A missing double sorts as 0, as in Lucene.
            _ => a.size.unwrap_or(0.0).total_cmp(&b.size.unwrap_or(0.0)),
        };
        let order = if *descending { order.reverse() } else { order };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.id.cmp(&b.id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn pages_join_into_the_models_order(
        docs in docs(),
        sort_keys in prop::collection::vec((prop::bool::ANY, prop::bool::ANY), 0..3),
        page in 1usize..7,
        segments in 1usize..4,
    ) {
        let index = SearchIndex::open(None, &definition(&[]), "uuid").unwrap();
        let mut writer = index.writer().unwrap();
        let per_segment = docs.len().div_ceil(segments);
        for (n, chunk) in docs.chunks(per_segment.max(1)).enumerate() {
            for doc in chunk {
                let mut fields = vec![field(FieldKind::Text, "all", json!("x"))];
                if let Some(color) = &doc.color {
                    fields.push(field(FieldKind::String, "color", json!(color)));
                }
                if let Some(size) = doc.size {
                    fields.push(field(FieldKind::Double, "size", json!(size)));
                }
                writer.put(Entry::Put { id: doc.id.clone(), access: Vec::new(), fields }).unwrap();
            }
            writer.commit(n as u64 + 1, 0).unwrap();
        }
        writer.finish().unwrap();

        let sort: Vec<SortSpec> = sort_keys
            .iter()
            .map(|(by_color, descending)| SortSpec::Field {
                name: if *by_color { "color" } else { "size" }.into(),
                descending: *descending,
            })
            .collect();
        let mut expected = docs.clone();
        expected.sort_by(|a, b| model_order(a, b, &sort));
        let expected: Vec<String> = expected.into_iter().map(|d| d.id).collect();

        let ranges = vec![
            RangeSpec { label: "low".into(), min: None, max: Some(2.0), min_inclusive: true, max_inclusive: false },
            RangeSpec { label: "mid".into(), min: Some(2.0), max: Some(10.0), min_inclusive: true, max_inclusive: true },
        ];
        let mut got = Vec::new();
        let mut after: Option<Vec<SortValue>> = None;
        for _ in 0..=docs.len() {
            let results = index.search(&SearchRequest {
                query: "*:*".into(),
                limit: page,
                sort: sort.clone(),
                after: after.clone(),
                counts: vec!["color".into()],
                top_n: 100,
                ranges: vec![("size".into(), ranges.clone())],
                ..Default::default()
            }).unwrap();
            prop_assert_eq!(results.total, docs.len() as u64);
            let mut model_counts: HashMap<String, u64> = HashMap::new();
            for doc in &docs {
                if let Some(color) = &doc.color {
                    *model_counts.entry(color.clone()).or_default() += 1;
                }
            }
            let counted: HashMap<String, u64> = results.counts[0].1.iter().cloned().collect();
            prop_assert_eq!(counted, model_counts);
            let low = docs.iter().filter(|d| d.size.is_some_and(|s| s < 2.0)).count() as u64;
            let mid = docs.iter().filter(|d| d.size.is_some_and(|s| (2.0..=10.0).contains(&s))).count() as u64;
            let ranged: HashMap<String, u64> = results.ranges[0].1.iter().cloned().collect();
            prop_assert_eq!(ranged.get("low").copied().unwrap_or(0), low);
            prop_assert_eq!(ranged.get("mid").copied().unwrap_or(0), mid);
            let Some(last) = results.hits.last() else { break };
            after = Some(last.order.clone());
            got.extend(results.hits.iter().map(|h| h.id.clone()));
        }
        prop_assert_eq!(got, expected);
    }
}
