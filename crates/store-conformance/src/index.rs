//! View indexes: after any sequence of writes, the rows read back, the
//! counts before a key (CouchDB's `offset`) and the parts a reduction is
//! split into agree with a plain model of the rows, whatever blocks the
//! counts were kept in.

use crate::Backend;

use std::collections::BTreeMap;

use crate::common::TempStore;
use proptest::prelude::*;
use store::{Index, IndexEntry, IndexRange, IndexRow, IndexedDoc, ReducePart};

/// A document's rows: (view, key byte, value).
type Rows = Vec<(u32, u8, u32)>;

fn batches() -> impl Strategy<Value = Vec<Vec<(u16, Rows)>>> {
    let rows = prop::collection::vec((0u32..2, 0u8..40, 0u32..1000), 0..12);
    let doc = (0u16..400, rows);
    prop::collection::vec(prop::collection::vec(doc, 1..300), 1..8)
}

fn model_rows(model: &BTreeMap<String, Rows>, view: u32) -> Vec<(Vec<u8>, String, i64)> {
    let mut out = Vec::new();
    for (id, rows) in model {
        for (n, (v, key, _)) in rows.iter().enumerate() {
            if *v == view {
                out.push((vec![*key], id.clone(), n as i64));
            }
        }
    }
    out.sort();
    out
}

fn positions(rows: &[IndexEntry]) -> Vec<(Vec<u8>, String, i64)> {
    rows.iter().map(IndexEntry::position).collect()
}

async fn parts_rows(index: &Index, view: u32, parts: Vec<ReducePart>) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            ReducePart::Rows(rows) => out.extend(rows),
            ReducePart::Block {
                start, generation, ..
            } => {
                let (now, rows) = index.block_rows(view, start).await.unwrap();
                assert_eq!(now, generation, "nothing wrote in between");
                out.extend(rows);
            }
        }
    }
    out
}

pub fn counts_and_reduce_parts_match_the_rows(backend: &dyn Backend) {
    proptest!(ProptestConfig { cases: 12, ..ProptestConfig::default() }, |(batches in batches(), probes in prop::collection::vec((0u8..42, 0u16..400), 8))| {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let temp = TempStore::new(backend);
        let db = temp.db("idx").await;
        let index = db.open_index("sig").await.unwrap();
        let mut model: BTreeMap<String, Rows> = BTreeMap::new();
        for (seq, batch) in batches.into_iter().enumerate() {
            let mut docs = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for (id, rows) in batch {
                let id = format!("d{id:03}");
                if !seen.insert(id.clone()) {
                    continue;
                }
                if rows.is_empty() {
                    model.remove(&id);
                } else {
                    model.insert(id.clone(), rows.clone());
                }
                docs.push(IndexedDoc {
                    id,
                    rows: rows
                        .iter()
                        .map(|(view, key, value)| IndexRow {
                            view: *view,
                            sort_key: vec![*key],
                            key: key.to_string(),
                            value: value.to_string(),
                        })
                        .collect(),
                });
            }
            index.apply(docs, seq as u64 + 1).await.unwrap();
        }
        for view in 0..2u32 {
            let want = model_rows(&model, view);
            assert_eq!(index.count(view).await.unwrap(), want.len() as u64);
            let all = index
                .range(IndexRange { view, limit: usize::MAX, ..Default::default() })
                .await
                .unwrap();
            assert_eq!(positions(&all), want);
            for (key, id) in &probes {
                let id = format!("d{id:03}");
                for doc_id in [None, Some(id.clone())] {
                    for descending in [false, true] {
                        let start = (vec![*key], doc_id.clone());
                        let range = IndexRange {
                            view,
                            start: Some(start.clone()),
                            descending,
                            limit: usize::MAX,
                            ..Default::default()
                        };
                        let before = want
                            .iter()
                            .filter(|(k, d, _)| {
                                let at = (k.clone(), d.clone());
                                let edge = (start.0.clone(), start.1.clone().unwrap_or_default());
                                match (&start.1, descending) {
                                    (None, false) => *k < start.0,
                                    (None, true) => *k > start.0,
                                    (Some(_), false) => at < edge,
                                    (Some(_), true) => at > edge,
                                }
                            })
                            .count() as u64;
                        assert_eq!(index.rows_before(&range).await.unwrap(), before, "{range:?}");
                    }
                }
                // A reduction's parts hold exactly the rows of its range.
                let end = key.saturating_add(7);
                let range = IndexRange {
                    view,
                    start: Some((vec![*key], None)),
                    end: Some((vec![end], None)),
                    inclusive_end: true,
                    limit: usize::MAX,
                    ..Default::default()
                };
                let parts = index.reduce_parts(range.clone(), "_sum".into()).await.unwrap();
                let from_parts = parts_rows(&index, view, parts).await;
                let direct = index.range(range).await.unwrap();
                assert_eq!(from_parts, direct);
            }
            let whole = IndexRange { view, limit: usize::MAX, ..Default::default() };
            let parts = index.reduce_parts(whole.clone(), "_sum".into()).await.unwrap();
            assert_eq!(positions(&parts_rows(&index, view, parts).await), want);
        }
        // The sizes count the live rows, and a reopened index reads the
        // same counts back.
        let external: u64 = model
            .values()
            .flatten()
            .map(|(_, key, value)| (key.to_string().len() + value.to_string().len()) as u64)
            .sum();
        let stored: u64 = model
            .iter()
            .map(|(id, rows)| rows.iter().map(|(_, key, value)| {
                (1 + id.len() + key.to_string().len() + value.to_string().len()) as u64
            }).sum::<u64>())
            .sum();
        let sizes = index.sizes();
        assert_eq!(sizes.external, external);
        assert_eq!(sizes.active, stored.min(sizes.file));
        let reopened = db.open_index("sig").await.unwrap();
        assert_eq!(reopened.sizes().external, external);
    });
    });
}

/// A cached block reduction is given back for its reducer only, and a
/// write to the block drops it.
pub async fn block_reductions_are_kept_until_the_block_changes(backend: &dyn Backend) {
    let temp = TempStore::new(backend);
    let db = temp.db("idx").await;
    let index = db.open_index("sig").await.unwrap();
    let docs: Vec<IndexedDoc> = (0..5000u32)
        .map(|i| IndexedDoc {
            id: format!("d{i:05}"),
            rows: vec![IndexRow {
                view: 0,
                sort_key: i.to_be_bytes().to_vec(),
                key: i.to_string(),
                value: "1".into(),
            }],
        })
        .collect();
    index.apply(docs, 1).await.unwrap();
    let whole = IndexRange {
        view: 0,
        limit: usize::MAX,
        ..Default::default()
    };
    let blocks = |parts: &[ReducePart]| -> Vec<(store::IndexPosition, i64, Option<String>)> {
        parts
            .iter()
            .filter_map(|p| match p {
                ReducePart::Block {
                    start,
                    generation,
                    reduction,
                } => Some((start.clone(), *generation, reduction.clone())),
                ReducePart::Rows(_) => None,
            })
            .collect()
    };
    let parts = index
        .reduce_parts(whole.clone(), "_count".into())
        .await
        .unwrap();
    let first = blocks(&parts);
    assert!(first.len() >= 3, "5000 rows make several blocks");
    assert!(first.iter().all(|b| b.2.is_none()));
    for (start, generation, _) in &first {
        index
            .cache_reduction(0, start.clone(), *generation, "_count".into(), "42".into())
            .await
            .unwrap();
    }
    let cached = blocks(
        &index
            .reduce_parts(whole.clone(), "_count".into())
            .await
            .unwrap(),
    );
    assert!(cached.iter().all(|b| b.2.as_deref() == Some("42")));
    let other = blocks(
        &index
            .reduce_parts(whole.clone(), "_sum".into())
            .await
            .unwrap(),
    );
    assert!(
        other.iter().all(|b| b.2.is_none()),
        "another reducer's cache"
    );
    // A write into the second block drops its reduction only.
    let (start, generation, _) = first[1].clone();
    let inside = u32::from_be_bytes(start.0.clone().try_into().unwrap()) + 1;
    index
        .apply(
            vec![IndexedDoc {
                id: format!("d{inside:05}"),
                rows: Vec::new(),
            }],
            2,
        )
        .await
        .unwrap();
    let after = blocks(&index.reduce_parts(whole, "_count".into()).await.unwrap());
    let changed = after.iter().find(|b| b.0 == start).unwrap();
    assert!(changed.2.is_none() && changed.1 != generation);
    assert_eq!(
        after
            .iter()
            .filter(|b| b.2.as_deref() == Some("42"))
            .count(),
        after.len() - 1
    );
    // A stale generation is not kept.
    index
        .cache_reduction(0, start.clone(), generation, "_count".into(), "7".into())
        .await
        .unwrap();
    let again = blocks(
        &index
            .reduce_parts(
                IndexRange {
                    view: 0,
                    limit: usize::MAX,
                    ..Default::default()
                },
                "_count".into(),
            )
            .await
            .unwrap(),
    );
    assert!(again.iter().find(|b| b.0 == start).unwrap().2.is_none());
}

/// A view's `_info` sizes: the bytes of the live rows (counted in bytes,
/// not characters), kept through purges and a reset, and a compaction
/// that gives the file's free pages back to the disk.
pub async fn sizes_count_the_live_rows_and_compaction_gives_the_rest_back(backend: &dyn Backend) {
    let temp = TempStore::new(backend);
    let db = temp.db("idx").await;
    let index = db.open_index("sig").await.unwrap();
    let row = |i: u32, value: &str| IndexRow {
        view: 0,
        sort_key: i.to_be_bytes().to_vec(),
        key: serde_json::Value::String(format!("clé {i}")).to_string(),
        value: value.to_string(),
    };
    let value = serde_json::Value::String("ü".repeat(200)).to_string();
    let docs = |seq: u32| -> Vec<IndexedDoc> {
        (0..2000u32)
            .map(|i| IndexedDoc {
                id: format!("d{i:05}"),
                rows: vec![row(i + seq, &value)],
            })
            .collect()
    };
    let one_row = |i: u32| {
        let r = row(i, &value);
        (r.key.len() + r.value.len()) as u64
    };
    for seq in 0..3 {
        index.apply(docs(seq), u64::from(seq) + 1).await.unwrap();
    }
    let all: u64 = (2..2002).map(one_row).sum();
    let before = index.sizes();
    assert_eq!(before.external, all, "bytes, not characters");
    assert!(
        before.active > before.external && before.active < before.file,
        "{before:?}"
    );

    // Purged documents leave the counts.
    let gone: Vec<String> = (0..1500u32).map(|i| format!("d{i:05}")).collect();
    index.forget(gone, 1).await.unwrap();
    let left: u64 = (1502..2002).map(one_row).sum();
    let purged = index.sizes();
    assert_eq!(purged.external, left);
    assert_eq!(
        db.open_index("sig").await.unwrap().sizes(),
        purged,
        "kept on disk"
    );

    // Compaction gives back what the rows no longer use.
    index.compact().await.unwrap();
    assert!(!index.compacting());
    let compacted = index.sizes();
    assert_eq!(compacted.external, left);
    assert!(compacted.file < purged.file, "{purged:?} -> {compacted:?}");
    assert!(compacted.active < compacted.file, "{compacted:?}");

    index.reset(2).await.unwrap();
    let empty = index.sizes();
    assert_eq!((empty.active, empty.external), (0, 0));
    assert_eq!(db.open_index("sig").await.unwrap().sizes().external, 0);
}
