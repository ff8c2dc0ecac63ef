use super::*;
use serde_json::json;

mod errors;
mod paths;

fn parse(selector: Value) -> Selector {
    Selector::parse(&selector).expect("selector should parse")
}

fn matches(selector: Value, doc: Value) -> bool {
    parse(selector).matches(&doc)
}

fn parse_error(selector: Value) -> String {
    match Selector::parse(&selector) {
        Ok(parsed) => panic!("selector should be rejected, parsed as {parsed:?}"),
        Err(SelectorError(reason)) => reason,
    }
}

/// CouchDB's `check_selector`: `{"x": cond}` against `{"x": value}` gives
/// the expected result, and `{"x": {"$not": cond}}` gives its opposite.
fn check(cond: Value, cases: &[(bool, Value)]) {
    let positive = parse(json!({ "x": cond }));
    let negative = parse(json!({ "x": { "$not": cond } }));
    for (expected, value) in cases {
        let doc = json!({ "x": value });
        assert_eq!(
            positive.matches(&doc),
            *expected,
            "{cond} against {value} should be {expected}"
        );
        assert_eq!(
            negative.matches(&doc),
            !*expected,
            "$not {cond} against {value} should be {}",
            !*expected
        );
    }
}

// --- comparison operators (CouchDB's match_*_test cases) ---

#[test]
fn lt_matches_smaller_numbers_strings_and_arrays() {
    check(
        json!({"$lt": 5}),
        &[(true, json!(4)), (false, json!(5)), (false, json!(6))],
    );
    check(
        json!({"$lt": "hello"}),
        &[
            (true, json!("held")),
            (false, json!("hello")),
            (false, json!("help")),
        ],
    );
    check(
        json!({"$lt": [1, 2, 3]}),
        &[
            (true, json!([1, 2, 2])),
            (true, json!([1, 2])),
            (false, json!([1, 2, 3])),
            (false, json!([1, 2, 4])),
            (false, json!([1, 3])),
        ],
    );
}

#[test]
fn lte_matches_smaller_or_equal_values() {
    check(
        json!({"$lte": 5}),
        &[(true, json!(4)), (true, json!(5)), (false, json!(6))],
    );
    check(
        json!({"$lte": "hello"}),
        &[
            (true, json!("held")),
            (true, json!("hello")),
            (false, json!("help")),
        ],
    );
    check(
        json!({"$lte": [1, 2, 3]}),
        &[
            (true, json!([1, 2, 2])),
            (true, json!([1, 2])),
            (true, json!([1, 2, 3])),
            (false, json!([1, 2, 4])),
            (false, json!([1, 3])),
        ],
    );
}

#[test]
fn gt_matches_greater_values() {
    check(
        json!({"$gt": 5}),
        &[(false, json!(4)), (false, json!(5)), (true, json!(6))],
    );
    check(
        json!({"$gt": "hello"}),
        &[
            (false, json!("held")),
            (false, json!("hello")),
            (true, json!("help")),
        ],
    );
    check(
        json!({"$gt": [1, 2, 3]}),
        &[
            (false, json!([1, 2, 2])),
            (false, json!([1, 2])),
            (false, json!([1, 2, 3])),
            (true, json!([1, 2, 4])),
            (true, json!([1, 3])),
        ],
    );
}

#[test]
fn gte_matches_greater_or_equal_values() {
    check(
        json!({"$gte": 5}),
        &[(false, json!(4)), (true, json!(5)), (true, json!(6))],
    );
    check(
        json!({"$gte": "hello"}),
        &[
            (false, json!("held")),
            (true, json!("hello")),
            (true, json!("help")),
        ],
    );
    check(
        json!({"$gte": [1, 2, 3]}),
        &[
            (false, json!([1, 2, 2])),
            (false, json!([1, 2])),
            (true, json!([1, 2, 3])),
            (true, json!([1, 2, 4])),
            (true, json!([1, 3])),
        ],
    );
}

#[test]
fn eq_compares_nested_arrays_and_objects_whole() {
    check(json!({"$eq": 5}), &[(true, json!(5)), (false, json!(6))]);
    check(
        json!({"$eq": "hello"}),
        &[(true, json!("hello")), (false, json!("help"))],
    );
    check(
        json!({"$eq": [1, [2, 3, 4], 5]}),
        &[
            (true, json!([1, [2, 3, 4], 5])),
            (false, json!([1, [2, 3, 4]])),
            (false, json!([1, [2, 3, 4], 5, 6])),
            (false, json!([1, [2, 7, 4], 5])),
        ],
    );
    check(
        json!({"$eq": {"a": {"b": {"c": 7}}}}),
        &[
            (true, json!({"a": {"b": {"c": 7}}})),
            (false, json!({"a": {"b": {"c": 8}}})),
            (false, json!({"a": {"b": {"d": 7}}})),
            (false, json!({"a": {"d": {"c": 7}}})),
        ],
    );
}

#[test]
fn ne_matches_different_values_but_never_a_missing_field() {
    check(json!({"$ne": 5}), &[(false, json!(5)), (true, json!(6))]);
    check(
        json!({"$ne": [1, [2, 3, 4], 5]}),
        &[
            (false, json!([1, [2, 3, 4], 5])),
            (true, json!([1, [2, 3, 4]])),
            (true, json!([1, [2, 7, 4], 5])),
        ],
    );
    assert!(!matches(json!({"x": {"$ne": 5}}), json!({})));
    // `$not` of an equality normalizes to `$ne`, so it misses too.
    assert!(!matches(json!({"$not": {"x": 5}}), json!({})));
    assert!(matches(json!({"x": {"$ne": 5}}), json!({"x": null})));
}

#[test]
fn implicit_equality_matches_nested_fields() {
    let doc = json!({"_id": "foo", "_rev": "bar", "user_id": 11});
    assert!(matches(json!({"user_id": 11}), doc.clone()));
    assert!(matches(json!({"_id": "foo"}), doc.clone()));
    assert!(matches(json!({"_id": "foo", "_rev": "bar"}), doc.clone()));
    assert!(!matches(json!({"user_id": 1234}), doc.clone()));
    // The string "11" is not the number 11.
    assert!(!matches(json!({"user_id": "11"}), doc.clone()));
    assert!(!matches(json!({"_id": "foo", "_rev": "quux"}), doc));
    assert!(matches(
        json!({"a": {"b": {"c": true}}}),
        json!({"a": {"b": {"c": true, "d": 1}}})
    ));
}

#[test]
fn integers_and_floats_compare_by_value() {
    assert!(matches(json!({"x": 1}), json!({"x": 1.0})));
    assert!(matches(json!({"x": 3.0}), json!({"x": 3})));
    assert!(matches(json!({"x": {"$lt": 2}}), json!({"x": 1.5})));
    assert!(matches(json!({"x": {"$gt": -1}}), json!({"x": -0.5})));
    // Beyond 2^53 an integer is compared exactly, not through a float.
    let big = 9_007_199_254_740_993_u64; // 2^53 + 1
    assert!(matches(
        json!({"x": {"$gt": 9_007_199_254_740_992.0_f64}}),
        json!({ "x": big })
    ));
    assert!(!matches(
        json!({"x": 9_007_199_254_740_992.0_f64}),
        json!({ "x": big })
    ));
    assert!(matches(
        json!({"x": {"$gt": i64::MAX}}),
        json!({"x": u64::MAX})
    ));
}

// --- collation ---

#[test]
fn type_order_drives_range_queries_across_types() {
    // null < false < true < numbers < strings < arrays < objects
    let selector = parse(json!({"x": {"$gt": true, "$lt": "a"}}));
    assert!(selector.matches(&json!({"x": 42})));
    assert!(selector.matches(&json!({"x": ""})));
    assert!(!selector.matches(&json!({"x": "a"})));
    assert!(!selector.matches(&json!({"x": false})));
    assert!(!selector.matches(&json!({"x": []})));
    assert!(matches(json!({"x": {"$gt": "zzz"}}), json!({"x": [0]})));
    assert!(matches(json!({"x": {"$gt": [[[]]]}}), json!({"x": {}})));
    assert!(matches(json!({"x": {"$lt": 0}}), json!({"x": null})));
    assert!(matches(json!({"x": {"$gte": null}}), json!({"x": null})));
}

#[test]
fn in_matches_a_listed_value_or_an_element_of_an_array() {
    check(
        json!({"$in": []}),
        &[
            (false, json!(0)),
            (false, json!(true)),
            (false, json!("foo")),
        ],
    );
    check(
        json!({"$in": [42, false, "bar", [["nested"], "list"], {"b": 2}]}),
        &[
            (true, json!(42)),
            (true, json!(false)),
            (true, json!("bar")),
            (true, json!({"b": 2})),
            (false, json!(43)),
            (false, json!(true)),
            (false, json!("bars")),
            (false, json!({"b": 2, "c": 3})),
            (true, json!([0, 42])),
            (true, json!([0, false])),
            (true, json!([0, "bar"])),
            (true, json!([0, {"b": 2}])),
            // An array field is never compared whole...
            (false, json!([["nested"], "list"])),
            // ...only its elements are.
            (true, json!([0, [["nested"], "list"]])),
        ],
    );
    assert!(!matches(json!({"x": {"$in": [null]}}), json!({})));
}

#[test]
fn nin_matches_when_no_listed_value_is_present_but_not_a_missing_field() {
    check(
        json!({"$nin": []}),
        &[(true, json!(0)), (true, json!(true)), (true, json!("foo"))],
    );
    check(
        json!({"$nin": [42, false, "bar", [["nested"], "list"], {"b": 2}]}),
        &[
            (false, json!(42)),
            (false, json!(false)),
            (false, json!("bar")),
            (false, json!({"b": 2})),
            (true, json!(43)),
            (true, json!(true)),
            (true, json!("bars")),
            (true, json!({"b": 2, "c": 3})),
            (false, json!([0, 42])),
            (false, json!([0, false])),
            (false, json!([0, "bar"])),
            (false, json!([0, {"b": 2}])),
            (true, json!([["nested"], "list"])),
            (false, json!([0, [["nested"], "list"]])),
        ],
    );
    assert!(!matches(json!({"x": {"$nin": [1]}}), json!({})));
    assert!(!matches(json!({"x": {"$nin": []}}), json!({})));
}

#[test]
fn all_requires_every_listed_value_in_an_array() {
    // `$all: []` matches nothing, not even arrays.
    check(
        json!({"$all": []}),
        &[
            (false, json!([])),
            (false, json!([42])),
            (false, json!({})),
            (false, json!("foo")),
        ],
    );
    check(
        json!({"$all": [1, 2, 3, 4]}),
        &[
            (true, json!([3, 2, 4, 1])),
            (true, json!([0, 4, 3, 5, 2, 1, 6])),
            (false, json!([3, 2, 4])),
            (false, json!([])),
        ],
    );
    // `$all: [list]` also matches the list itself, or arrays containing it.
    check(
        json!({"$all": [[1, 2, 3, 4]]}),
        &[
            (true, json!([1, 2, 3, 4])),
            (false, json!([4, 3, 2, 1])),
            (false, json!([1, 3, 4])),
            (false, json!([])),
            (true, json!([5, [1, 2, 3, 4], 6])),
            (false, json!([5, [1, 3, 4], 6])),
            (false, json!([5, [1, 3, 2, 4], 6])),
        ],
    );
    check(
        json!({"$all": ["hello"]}),
        &[
            (false, json!("hello")),
            (true, json!(["hello"])),
            (true, json!([0, "hello", 1])),
            (false, json!([])),
        ],
    );
    // Values must be exactly equal: no extra members.
    check(
        json!({"$all": [{"a": 1}]}),
        &[
            (true, json!([{"a": 1}])),
            (false, json!([{"a": 1, "b": 2}])),
        ],
    );
    // Like Erlang's `=:=`, $all tells integers from floats.
    assert!(!matches(json!({"x": {"$all": [1]}}), json!({"x": [1.0]})));
}

#[test]
fn not_all_matches_arrays_lacking_a_value() {
    let selector = parse(json!({"x": {"$not": {"$all": [1, 2, 3, 4]}}}));
    assert!(selector.matches(&json!({"x": [2, 4, 1]})));
    assert!(!selector.matches(&json!({"x": [2, 4, 1, 3]})));
    assert!(selector.matches(&json!({"x": []})));
    assert!(!selector.matches(&json!({})));
}

// --- $exists, $type ---

#[test]
fn exists_tells_present_fields_from_missing_ones() {
    let exists = parse(json!({"x": {"$exists": true}}));
    assert!(exists.matches(&json!({"x": 0})));
    assert!(exists.matches(&json!({"x": null})));
    assert!(!exists.matches(&json!({"y": 0})));
    assert!(!exists.matches(&json!({})));

    let missing = parse(json!({"x": {"$exists": false}}));
    assert!(!missing.matches(&json!({"x": 0})));
    assert!(!missing.matches(&json!({"x": null})));
    assert!(missing.matches(&json!({"y": 0})));
    assert!(missing.matches(&json!({})));
}

#[test]
fn negated_exists_selects_missing_fields() {
    assert!(matches(
        json!({"$not": {"x": {"$exists": true}}}),
        json!({})
    ));
    assert!(matches(
        json!({"x": {"$not": {"$exists": true}}}),
        json!({"y": 1})
    ));
    // `{"x": {"$not": {"$eq": 0}}}` is `$ne` and misses the empty doc...
    assert!(!matches(json!({"x": {"$not": {"$eq": 0}}}), json!({})));
    // ...but putting `$exists: true` inside the negation catches it.
    let selector = parse(json!({"x": {"$not": {"$exists": true, "$eq": 0}}}));
    assert!(selector.matches(&json!({"x": 1})));
    assert!(!selector.matches(&json!({"x": 0})));
    assert!(selector.matches(&json!({})));
}

#[test]
fn exists_false_does_not_match_a_path_through_a_scalar() {
    // CouchDB reports a path through a non-object as a bad path, which
    // matches nothing, not even `$exists: false`.
    let selector = parse(json!({"a.b": {"$exists": false}}));
    assert!(selector.matches(&json!({})));
    assert!(selector.matches(&json!({"a": {}})));
    assert!(!selector.matches(&json!({"a": 5})));
    assert!(!selector.matches(&json!({"a": [1]})));
    assert!(!selector.matches(&json!({"a": {"b": null}})));
}

#[test]
fn type_matches_json_types() {
    check(
        json!({"$type": "null"}),
        &[
            (true, json!(null)),
            (false, json!(false)),
            (false, json!({})),
        ],
    );
    check(
        json!({"$type": "boolean"}),
        &[(true, json!(true)), (true, json!(false)), (false, json!(0))],
    );
    check(
        json!({"$type": "number"}),
        &[
            (true, json!(42)),
            (true, json!(2.5)),
            (true, json!(0)),
            (false, json!(true)),
            (false, json!([1])),
            (false, json!("1")),
        ],
    );
    check(
        json!({"$type": "string"}),
        &[
            (true, json!("")),
            (true, json!("hello")),
            (false, json!([])),
        ],
    );
    check(
        json!({"$type": "array"}),
        &[
            (true, json!([])),
            (true, json!([1, 2])),
            (false, json!({})),
            (false, json!("hi")),
        ],
    );
    check(
        json!({"$type": "object"}),
        &[
            (true, json!({})),
            (true, json!({"a": 1})),
            (false, json!([{"a": 1}])),
            (false, json!(null)),
        ],
    );
}

#[test]
fn type_with_an_unknown_name_matches_nothing() {
    // CouchDB accepts any string here; it simply never matches.
    check(
        json!({"$type": "integer"}),
        &[(false, json!(1)), (false, json!("integer"))],
    );
}

// --- $regex, $beginsWith, $mod, $size ---

#[test]
fn regex_matches_strings_only() {
    check(
        json!({"$regex": "^[0-9a-f]+$"}),
        &[
            (false, json!("")),
            (true, json!("3a0df5e")),
            (false, json!("3a0gf5e")),
            (false, json!(42)),
        ],
    );
    // Unanchored search, with inline flags.
    assert!(matches(
        json!({"x": {"$regex": "(?i)new.*"}}),
        json!({"x": "North New"})
    ));
    assert!(matches(json!({"x": {"$regex": "b"}}), json!({"x": "abc"})));
}

#[test]
fn begins_with_matches_string_prefixes() {
    check(
        json!({"$beginsWith": "foo"}),
        &[
            (true, json!("foo")),
            (true, json!("food")),
            (true, json!("fool me once")),
            (false, json!("more food")),
            (false, json!("fo")),
            (false, json!(42)),
        ],
    );
    // A prefix is matched exactly, not with collation.
    assert!(!matches(
        json!({"x": {"$beginsWith": "Foo"}}),
        json!({"x": "food"})
    ));
}

#[test]
fn mod_matches_integer_fields_only() {
    check(
        json!({"$mod": [28, 1]}),
        &[
            (true, json!(1)),
            (true, json!(29)),
            (true, json!(57)),
            (false, json!(58)),
            (false, json!("57")),
            (false, json!(57.0)),
        ],
    );
    // The remainder takes the sign of the dividend, as Erlang's `rem`.
    assert!(matches(json!({"x": {"$mod": [3, -1]}}), json!({"x": -7})));
    assert!(matches(json!({"x": {"$mod": [-3, 1]}}), json!({"x": 7})));
    assert!(matches(
        json!({"x": {"$mod": [2, 1]}}),
        json!({ "x": u64::MAX })
    ));
}

#[test]
fn size_matches_arrays_of_that_length() {
    check(
        json!({"$size": 3}),
        &[
            (false, json!(3)),
            (false, json!("fun")),
            (true, json!([0, 0, 0])),
            (false, json!([0, 0])),
            (false, json!([0, 0, 0, 0])),
        ],
    );
    assert!(matches(json!({"x": {"$size": 0}}), json!({"x": []})));
}

// --- $elemMatch, $allMatch, $keyMapMatch ---

#[test]
fn elem_match_needs_one_matching_element() {
    check(
        json!({"$elemMatch": {"$eq": 0}}),
        &[
            (false, json!([])),
            (true, json!([0])),
            (false, json!([1])),
            (true, json!([0, 1])),
        ],
    );
    // Because of empty arrays, `$not $allMatch S` differs from
    // `$elemMatch $not S`.
    check(
        json!({"$elemMatch": {"$ne": 0}}),
        &[
            (false, json!([])),
            (false, json!([0])),
            (true, json!([1])),
            (true, json!([0, 1])),
        ],
    );
    // The range must hold for one element, not across elements.
    let range = parse(json!({"score": {"$elemMatch": {"$gte": 80, "$lt": 85}}}));
    assert!(range.matches(&json!({"score": [70, 82]})));
    assert!(!range.matches(&json!({"score": [70, 90]})));
    assert!(!range.matches(&json!({"score": 82})));
}

#[test]
fn elem_match_applies_field_conditions_to_each_element() {
    // CouchDB's "elem match" operator test.
    let selector = parse(json!({
        "_id": {"$gt": null},
        "bang": {"$elemMatch": {"foo": {"$gte": 1}, "bam": true}}
    }));
    assert!(!selector.matches(&json!({"_id": "a", "bang": [{"foo": 1, "bar": 2}]})));
    assert!(selector.matches(&json!({"_id": "b", "bang": [{"foo": 2, "bam": true}]})));
}

#[test]
fn elem_match_keeps_plain_not_semantics_inside() {
    // CouchDB does not push negations into sub-selectors, so there `$not`
    // is a plain "not" and matches an element lacking the field...
    let inner = parse(json!({"a": {"$elemMatch": {"$not": {"b": 1}}}}));
    assert!(inner.matches(&json!({"a": [{}]})));
    assert!(inner.matches(&json!({"a": [{"b": 2}]})));
    assert!(!inner.matches(&json!({"a": [{"b": 1}]})));
    // ...whereas at the top level it becomes `$ne`, which does not.
    assert!(!matches(json!({"$not": {"b": 1}}), json!({})));
}

#[test]
fn nor_inside_elem_match_matches_elements_that_match_no_clause() {
    let selector = parse(json!({"a": {"$elemMatch": {"$nor": [{"b": 1}, {"b": 2}]}}}));
    assert!(selector.matches(&json!({"a": [{"b": 1}, {"b": 3}]})));
    assert!(!selector.matches(&json!({"a": [{"b": 1}, {"b": 2}]})));
}

#[test]
fn all_match_is_false_for_empty_arrays() {
    check(
        json!({"$allMatch": {"$eq": 0}}),
        &[
            (false, json!([])),
            (true, json!([0])),
            (false, json!([1])),
            (false, json!([0, 1])),
            (false, json!(0)),
        ],
    );
    // CouchDB's "all match" operator test.
    let selector =
        parse(json!({"bang": {"$allMatch": {"foo": {"$mod": [2, 1]}, "bar": {"$mod": [2, 0]}}}}));
    assert!(selector.matches(&json!({"bang": [{"foo": 1, "bar": 2}, {"foo": 3, "bar": 4}]})));
    assert!(!selector.matches(&json!({"bang": [{"foo": 1, "bar": 2}, {"foo": 4, "bar": 4}]})));
}

#[test]
fn key_map_match_tests_the_keys_of_an_object() {
    check(
        json!({"$keyMapMatch": {"$regex": "^[a-z]+$"}}),
        &[
            (true, json!({"hello": 0})),
            (true, json!({"a": 1, "b": 2})),
            (true, json!({"a": 1, "b4": 2})),
            (false, json!({"b4": 2})),
            (false, json!({})),
            (false, json!(["a"])),
        ],
    );
    let selector = parse(json!({"foo": {"$keyMapMatch": {"$eq": "aa"}}}));
    assert!(selector.matches(&json!({"foo": {"aa": "bar", "bb": "bang"}})));
    assert!(!selector.matches(&json!({"foo": {"cc": "bar", "bb": "bang"}})));
}

#[test]
fn ids_come_after_every_value_that_is_not_a_string() {
    let doc = json!({"_id": "a", "other": "a"});
    for (op, arg, expected) in [
        ("$gt", json!({}), true),
        ("$gte", json!([]), true),
        ("$gt", json!(null), true),
        ("$gt", json!(7), true),
        ("$lt", json!({}), false),
        ("$lte", json!([]), false),
        ("$lt", json!(false), false),
        ("$eq", json!({}), false),
        ("$ne", json!([]), true),
        // Strings compare as ever.
        ("$gt", json!("0"), true),
        ("$lt", json!("b"), true),
    ] {
        assert_eq!(
            matches(json!({"_id": {op: arg.clone()}}), doc.clone()),
            expected,
            "_id {op} {arg}"
        );
    }
    // Only the id: other fields keep view collation (objects last).
    assert!(!matches(json!({"other": {"$gt": {}}}), doc.clone()));
    assert!(matches(json!({"other": {"$lt": {}}}), doc.clone()));
    // Negated, the opposite.
    assert!(!matches(json!({"_id": {"$not": {"$gt": {}}}}), doc));
}
