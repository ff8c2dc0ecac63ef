use super::*;

// --- objects, paths and combinations ---

#[test]
fn empty_selector_matches_every_document() {
    let selector = parse(json!({}));
    for doc in [
        json!({}),
        json!({"x": {}}),
        json!({"x": {"a": 1}}),
        json!({"x": []}),
    ] {
        assert!(selector.matches(&doc));
    }
}

#[test]
fn inner_empty_object_matches_only_empty_objects() {
    let selector = parse(json!({"x": {}}));
    assert!(!selector.matches(&json!({})));
    assert!(selector.matches(&json!({"x": {}})));
    assert!(!selector.matches(&json!({"x": {"a": 1}})));
    assert!(!selector.matches(&json!({"x": []})));

    let negated = parse(json!({"$not": {"x": {}}}));
    assert!(!negated.matches(&json!({})));
    assert!(!negated.matches(&json!({"x": {}})));
    assert!(negated.matches(&json!({"x": {"a": 1}})));
    assert!(negated.matches(&json!({"x": []})));
}

#[test]
fn nested_objects_are_dotted_paths_matching_supersets() {
    let docs = [
        json!({}),
        json!({"x": {}}),
        json!({"x": {"a": 1}}),
        json!({"x": {"a": 1, "b": 2}}),
        json!({"x": []}),
    ];
    let results = |selector: Value| {
        let selector = parse(selector);
        docs.iter().map(|d| selector.matches(d)).collect::<Vec<_>>()
    };
    assert_eq!(
        results(json!({"x": {"a": 1}})),
        [false, false, true, true, false]
    );
    assert_eq!(
        results(json!({"x": {"a": 1, "b": 2}})),
        [false, false, false, true, false]
    );
    assert_eq!(
        results(json!({"x.b": 2})),
        [false, false, false, true, false]
    );
    assert_eq!(results(json!({"x": {"b": 2}})), results(json!({"x.b": 2})));
}

#[test]
fn operators_and_fields_mix_inside_a_nested_object() {
    let selector = parse(json!({"x": {"$exists": true, "a": {"$gt": 1}}}));
    assert!(selector.matches(&json!({"x": {"a": 2}})));
    assert!(!selector.matches(&json!({"x": {"a": 1}})));
    assert!(!selector.matches(&json!({})));
}

#[test]
fn dotted_paths_with_escaped_dots_address_literal_keys() {
    // CouchDB's key tests.
    let kvothe = json!({"name.first": "Kvothe", "none": {"dot": "none dot's value"}});
    let elodin = json!({"name": {"first": "Master Elodin"}, "deep": {"$key": "deep peso"}});
    assert!(matches(json!({"name\\.first": "Kvothe"}), kvothe.clone()));
    assert!(!matches(json!({"name.first": "Kvothe"}), kvothe.clone()));
    assert!(matches(
        json!({"name.first": "Master Elodin"}),
        elodin.clone()
    ));
    assert!(!matches(
        json!({"name\\.first": "Master Elodin"}),
        elodin.clone()
    ));
    assert!(matches(json!({"none.dot": "none dot's value"}), kvothe));
    assert!(matches(json!({"deep.$key": "deep peso"}), elodin));
    assert!(matches(
        json!({"a.b\\.c.d": 1}),
        json!({"a": {"b.c": {"d": 1}}})
    ));
    assert!(matches(
        json!({"\u{f8ff}": "apple"}),
        json!({"\u{f8ff}": "apple"})
    ));
}

#[test]
fn numeric_path_segments_index_into_arrays() {
    let doc = json!({"favorites": ["C", "Lisp", "Ruby", "C"], "n": {"3": "three"}});
    assert!(matches(json!({"favorites.3": "C"}), doc.clone()));
    assert!(matches(json!({"favorites.0": "C"}), doc.clone()));
    assert!(matches(json!({"favorites.+1": "Lisp"}), doc.clone()));
    assert!(matches(json!({"favorites.01": "Lisp"}), doc.clone()));
    assert!(!matches(json!({"favorites.1": "C"}), doc.clone()));
    // Digits are still plain member names on objects.
    assert!(matches(json!({"n.3": "three"}), doc.clone()));
    // Out of range, negative or non-numeric indexes match nothing.
    for path in ["favorites.4", "favorites.-1", "favorites.x", "favorites.1x"] {
        assert!(!matches(json!({ path: {"$exists": true} }), doc.clone()));
        assert!(!matches(json!({ path: {"$exists": false} }), doc.clone()));
    }
    assert!(matches(
        json!({"m.0.k": 1}),
        json!({"m": [{"k": 1}, {"k": 2}]})
    ));
}

#[test]
fn multiple_fields_and_operators_are_an_implicit_and() {
    let selector = parse(json!({"age": {"$gte": 18, "$lt": 30}, "name": {"$exists": true}}));
    assert!(selector.matches(&json!({"age": 20, "name": "x"})));
    assert!(!selector.matches(&json!({"age": 30, "name": "x"})));
    assert!(!selector.matches(&json!({"age": 20})));
}

#[test]
fn duplicate_keys_keep_the_last_condition() {
    // As CouchDB's "multi cond duplicate field" test: the later one wins.
    let selector: Value = serde_json::from_str(
        r#"{"location.city": {"$regex": "^L+"}, "location.city": {"$exists": true}}"#,
    )
    .expect("valid JSON");
    let selector = parse(selector);
    assert!(selector.matches(&json!({"location": {"city": "Ronco"}})));
}

#[test]
fn and_with_an_empty_list_matches_everything() {
    let empty = parse(json!({"x": {"$and": []}}));
    for doc in [
        json!({"x": 0}),
        json!({"x": false}),
        json!({"x": []}),
        json!({}),
    ] {
        assert!(empty.matches(&doc));
    }
    // Its negation is `{"$or": []}`, which also matches everything.
    let not_empty = parse(json!({"x": {"$not": {"$and": []}}}));
    for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
        assert!(not_empty.matches(&doc));
    }
    let multi = parse(json!({"x": {"$and": [{"$gt": 3}, {"$lt": 7}]}}));
    assert!(multi.matches(&json!({"x": 6})));
    assert!(!multi.matches(&json!({"x": 2})));
    assert!(!multi.matches(&json!({"x": 9})));
    assert!(!multi.matches(&json!({})));
    let not_multi = parse(json!({"x": {"$not": {"$and": [{"$gt": 3}, {"$lt": 7}]}}}));
    assert!(!not_multi.matches(&json!({"x": 6})));
    assert!(not_multi.matches(&json!({"x": 2})));
    assert!(not_multi.matches(&json!({"x": 9})));
    assert!(!not_multi.matches(&json!({})));
}

#[test]
fn or_with_an_empty_list_matches_everything() {
    let empty = parse(json!({"x": {"$or": []}}));
    for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
        assert!(empty.matches(&doc));
    }
    let not_empty = parse(json!({"x": {"$not": {"$or": []}}}));
    for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
        assert!(not_empty.matches(&doc));
    }
    let multi = parse(json!({"x": {"$or": [{"$lt": 3}, {"$gt": 7}]}}));
    assert!(!multi.matches(&json!({"x": 6})));
    assert!(multi.matches(&json!({"x": 2})));
    assert!(multi.matches(&json!({"x": 9})));
    assert!(!multi.matches(&json!({})));
    let not_multi = parse(json!({"x": {"$not": {"$or": [{"$lt": 3}, {"$gt": 7}]}}}));
    assert!(not_multi.matches(&json!({"x": 6})));
    assert!(!not_multi.matches(&json!({"x": 2})));
    assert!(!not_multi.matches(&json!({"x": 9})));
    assert!(!not_multi.matches(&json!({})));
}

#[test]
fn nor_matches_when_no_clause_matches() {
    let empty = parse(json!({"x": {"$nor": []}}));
    for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
        assert!(empty.matches(&doc));
    }
    let multi = parse(json!({"x": {"$nor": [{"$lt": 3}, {"$gt": 7}]}}));
    assert!(multi.matches(&json!({"x": 6})));
    assert!(!multi.matches(&json!({"x": 2})));
    assert!(!multi.matches(&json!({"x": 9})));
    assert!(!multi.matches(&json!({})));
    let top = parse(json!({"$nor": [{"age": 22}, {"age": 33}]}));
    assert!(top.matches(&json!({"age": 23})));
    assert!(!top.matches(&json!({"age": 33})));
    assert!(!top.matches(&json!({})));
}

#[test]
fn double_negation_cancels_out() {
    let selector = parse(json!({"$not": {"$not": {"x": {"$size": 1}}}}));
    assert!(selector.matches(&json!({"x": [1]})));
    assert!(!selector.matches(&json!({"x": [1, 2]})));
    assert!(!selector.matches(&json!({})));
}

#[test]
fn negated_conditions_without_an_opposite_still_need_the_field() {
    let selector = parse(json!({"x": {"$not": {"$size": 1}}}));
    assert!(selector.matches(&json!({"x": [1, 2]})));
    assert!(selector.matches(&json!({"x": "a"})));
    assert!(!selector.matches(&json!({"x": [1]})));
    assert!(!selector.matches(&json!({})));
}

#[test]
fn an_operator_without_a_field_inside_and_applies_to_the_whole_document() {
    // CouchDB only rejects a missing field name at the top level.
    let selector = parse(json!({"$and": [{"$type": "object"}]}));
    assert!(selector.matches(&json!({"a": 1})));
}

#[test]
fn matching_odd_documents_never_fails() {
    let selector = parse(json!({"a.0.b": {"$gt": 1}, "c": {"$elemMatch": {"d": 1}}}));
    for doc in [
        json!(null),
        json!(5),
        json!("a"),
        json!([1, 2]),
        json!({"a": "string"}),
        json!({"a": [[]], "c": {}}),
    ] {
        assert!(!selector.matches(&doc));
    }
}
