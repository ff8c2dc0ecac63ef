//! Lucene's query syntax against a small index with known answers: each
//! kind of query on each kind of field, names with dots, and analyzers
//! per field.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod common;

use common::{definition, field};
use design_functions::search::FieldKind;
use search::index::Entry;
use search::{SearchIndex, SearchRequest};
use serde_json::json;

fn index() -> SearchIndex {
    let index = SearchIndex::open(None, &definition(&[("code", "keyword")]), "uuid").unwrap();
    let mut writer = index.writer().unwrap();
    let docs = [
        ("a", "The quick brown fox jumps", "Fox-1", "red", 1.0),
        ("b", "A lazy dog sleeps all day", "DOG-2", "brown", 2.5),
        ("c", "Quick thinking saves the day", "cat-3", "red", 10.0),
        ("d", "Foxes and dogs are friends", "Fox-4", "blue", -3.0),
    ];
    for (id, text, code, color, size) in docs {
        let fields = vec![
            field(FieldKind::Text, "default", json!(text)),
            field(FieldKind::Text, "code", json!(code)),
            field(FieldKind::String, "color.name", json!(color)),
            field(FieldKind::Double, "size.cm", json!(size)),
        ];
        writer
            .put(Entry::Put {
                id: id.into(),
                access: Vec::new(),
                fields,
            })
            .unwrap();
    }
    writer.commit(4, 0).unwrap();
    writer.finish().unwrap();
    index
}

fn ids(index: &SearchIndex, query: &str) -> Vec<String> {
    let results = index
        .search(&SearchRequest {
            query: query.into(),
            limit: 100,
            sort: vec![search::request::SortSpec::Field {
                name: "_id".into(),
                descending: false,
            }],
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    results.hits.into_iter().map(|h| h.id).collect()
}

#[test]
fn each_kind_of_query_finds_what_lucene_would() {
    let index = index();
    for (query, expected) in [
        ("quick", vec!["a", "c"]),
        ("QUICK", vec!["a", "c"]),
        ("default:quick AND day", vec!["c"]),
        ("quick -day", vec!["a"]),
        ("+day +lazy", vec!["b"]),
        ("quick OR dog", vec!["a", "b", "c"]),
        ("\"brown fox\"", vec!["a"]),
        ("\"fox brown\"", vec![]),
        ("\"quick fox\"~1", vec!["a"]),
        ("fox*", vec!["a", "d"]),
        ("f?x", vec!["a"]),
        ("*ogs", vec!["d"]),
        ("dgo~1", vec!["b"]),
        ("dgi~1", vec![]),
        ("dgi~2", vec!["b", "c", "d"]),
        ("foxs~1", vec!["a", "d"]),
        ("/fox(es)?/", vec!["a", "d"]),
        ("default:[dog TO dogs]", vec!["b", "d"]),
        ("*:*", vec!["a", "b", "c", "d"]),
        ("code:Fox-1", vec!["a"]),
        ("code:fox-1", vec![]),
        ("code:Fox*", vec!["a", "d"]),
        ("color.name:red", vec!["a", "c"]),
        ("color.name:Red", vec![]),
        ("color.name:[blue TO brown]", vec!["b", "d"]),
        ("color.name:*", vec!["a", "b", "c", "d"]),
        ("size.cm:2.5", vec!["b"]),
        ("size.cm:[1 TO 10]", vec!["a", "b", "c"]),
        ("size.cm:{1 TO 10}", vec!["b"]),
        ("size.cm:[* TO 0]", vec!["d"]),
        ("size.cm:[2 TO *]", vec!["b", "c"]),
        ("unknown:fox", vec![]),
        ("(quick OR lazy) AND size.cm:[2 TO 20]", vec!["b", "c"]),
        ("fox^4 dog", vec!["a", "b"]),
    ] {
        assert_eq!(ids(&index, query), expected, "{query}");
    }
}

#[test]
fn bad_queries_are_refused_with_a_reason() {
    let index = index();
    for query in [
        "(quick",
        "size.cm:[1 TO",
        "size.cm:abc",
        "",
        "a AND",
        "\"open",
    ] {
        let refused = index.search(&SearchRequest {
            query: query.into(),
            limit: 10,
            ..Default::default()
        });
        assert!(refused.is_err(), "{query} was accepted");
    }
}

#[test]
fn counting_work_is_bounded() {
    let index = index();
    let range = search::RangeSpec {
        label: "r".into(),
        min: None,
        max: None,
        min_inclusive: true,
        max_inclusive: true,
    };
    let too_many = index.search(&SearchRequest {
        query: "*:*".into(),
        limit: 1,
        ranges: vec![("size.cm".into(), vec![range.clone(); 1_001])],
        ..Default::default()
    });
    assert!(too_many.is_err());
    let enough = index
        .search(&SearchRequest {
            query: "*:*".into(),
            limit: 1,
            top_n: 10,
            ranges: vec![("size.cm".into(), vec![range; 1_000])],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(enough.ranges[0].1[0].1, 4);
    let counts = index.search(&SearchRequest {
        query: "*:*".into(),
        limit: 1,
        counts: vec!["color.name".into(); 101],
        ..Default::default()
    });
    assert!(counts.is_err());
}

#[test]
fn a_cancelled_search_stops_and_a_query_too_large_is_refused() {
    let index = index();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let request = |query: &str| SearchRequest {
        query: query.into(),
        limit: 10,
        cancel: Some(flag.clone()),
        ..Default::default()
    };
    assert_eq!(index.search(&request("*:*")).unwrap().total, 4);
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(index.search(&request("*:*")).is_err(), "nobody waits");

    let clauses = |n: usize, make: &dyn Fn(usize) -> String| {
        (0..n).map(make).collect::<Vec<_>>().join(" OR ")
    };
    let search = |query: String| {
        index.search(&SearchRequest {
            query,
            limit: 10,
            ..Default::default()
        })
    };
    let many = search(clauses(search::request::MAX_CLAUSES, &|i| format!("w{i}")));
    assert!(many.is_ok(), "{many:?}");
    let too_many = search(clauses(search::request::MAX_CLAUSES + 1, &|i| {
        format!("w{i}")
    }));
    assert!(matches!(too_many, Err(search::SearchError::QueryParse(_))));
    let wild = search(clauses(search::request::MAX_EXPANDING + 1, &|i| {
        format!("*x{i}*")
    }));
    assert!(matches!(wild, Err(search::SearchError::QueryParse(_))));
}
