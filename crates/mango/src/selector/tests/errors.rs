use super::*;

// --- parse errors ---

#[test]
fn a_selector_that_is_not_an_object_is_rejected() {
    for bad in [
        json!(null),
        json!(true),
        json!(false),
        json!(1.0),
        json!("foobarbaz"),
        json!([null, "bing"]),
    ] {
        assert!(parse_error(bad).starts_with("Selector must be a JSON object"));
    }
}

#[test]
fn unknown_operators_are_rejected_by_name() {
    assert_eq!(
        parse_error(json!({"foo": {"$not_an_op": 2}})),
        "Invalid operator: $not_an_op"
    );
    assert_eq!(
        parse_error(json!({"$key": "peso"})),
        "Invalid operator: $key"
    );
    assert_eq!(
        parse_error(json!({"a": {"$elemMatch": {"$bogus": 1}}})),
        "Invalid operator: $bogus"
    );
}

#[test]
fn unsupported_operators_are_rejected_by_name() {
    for op in [
        "$where",
        "$geoWithin",
        "$geoIntersects",
        "$near",
        "$nearSphere",
    ] {
        assert_eq!(
            parse_error(json!({ "a": { op: 1 } })),
            format!("Unsupported operator: {op}")
        );
    }
}

#[test]
fn a_condition_without_a_field_is_rejected() {
    for bad in [
        json!({"$gt": 2}),
        json!({"$not": {"$size": 2}}),
        json!({"$elemMatch": {"a": 1}}),
    ] {
        assert_eq!(
            parse_error(bad),
            "One or more conditions is missing a field name."
        );
    }
}

#[test]
fn empty_field_name_segments_are_rejected() {
    assert_eq!(
        parse_error(json!({"_id": {"": null}})),
        "Invalid field name: \"\""
    );
    for name in ["a..b", ".a", "a.", "", "a\\..", "."] {
        assert_eq!(
            parse_error(json!({ name: 1 })),
            format!("Invalid field name: {}", json!(name))
        );
    }
}

#[test]
fn operator_arguments_of_the_wrong_type_are_rejected_by_operator() {
    let cases = [
        ("$and", json!({})),
        ("$or", json!(1)),
        ("$nor", json!("a")),
        ("$not", json!([])),
        ("$in", json!(1)),
        ("$nin", json!({"a": 1})),
        ("$all", json!("a")),
        ("$exists", json!(1)),
        ("$exists", json!("true")),
        ("$type", json!(1)),
        ("$mod", json!(2)),
        ("$mod", json!([2])),
        ("$mod", json!([2, 1, 0])),
        ("$mod", json!([2.0, 1])),
        ("$mod", json!(["2", 1])),
        ("$regex", json!(1)),
        ("$size", json!(-1)),
        ("$size", json!(1.5)),
        ("$size", json!("1")),
        ("$beginsWith", json!(123)),
        ("$beginsWith", json!(true)),
        ("$beginsWith", json!([])),
        ("$beginsWith", json!({})),
        ("$elemMatch", json!([])),
        ("$allMatch", json!(1)),
        ("$keyMapMatch", json!("a")),
    ];
    for (op, arg) in cases {
        let reason = parse_error(json!({ "x": { op: arg } }));
        assert!(
            reason.starts_with(&format!("Bad argument for operator {op}: {arg} (")),
            "{op} {arg}: {reason}"
        );
    }
}

#[test]
fn mod_with_a_zero_divisor_is_rejected() {
    let reason = parse_error(json!({"x": {"$mod": [0, 1]}}));
    assert!(reason.contains("$mod"), "{reason}");
    assert!(reason.contains("zero"), "{reason}");
}

#[test]
fn invalid_regex_is_rejected_with_the_reason() {
    let reason = parse_error(json!({"x": {"$regex": "(unclosed"}}));
    assert!(
        reason.starts_with(
            "Bad argument for operator $regex: \"(unclosed\" (invalid regular expression: "
        ),
        "{reason}"
    );
    assert!(!reason.contains('\n'), "{reason}");
}

#[test]
fn long_bad_arguments_are_quoted_shortened() {
    let long = "x".repeat(1000);
    let reason = parse_error(json!({"a": {"$in": long}}));
    assert!(reason.len() < 300, "{reason}");
    assert!(reason.contains('…'));
}

#[test]
fn deeply_nested_selectors_are_rejected() {
    let mut selector = json!({"a": 1});
    for _ in 0..MAX_DEPTH + 5 {
        selector = json!({ "$and": [selector] });
    }
    assert!(parse_error(selector).contains("nested"));
    let mut deep_array = json!(1);
    for _ in 0..1000 {
        deep_array = Value::Array(vec![deep_array]);
    }
    assert!(parse_error(deep_array).contains("nested"));
    let mut shallow = json!({"a": 1});
    for _ in 0..50 {
        shallow = json!({ "$and": [shallow] });
    }
    assert!(parse(shallow).matches(&json!({"a": 1})));
}

#[test]
fn errors_display_their_reason() {
    let error = Selector::parse(&json!({"a": {"$nope": 1}})).expect_err("invalid");
    assert_eq!(error.to_string(), "Invalid operator: $nope");
}

// --- CouchDB's integration tests over its user documents ---

/// The 15 user documents of CouchDB's Mango test suite (`user_docs`),
/// without the fields no test here reads.
fn user_docs() -> Vec<Value> {
    serde_json::from_str(USER_DOCS).expect("valid fixture")
}

fn user_ids(selector: Value) -> Vec<i64> {
    user_ids_in(selector, &user_docs())
}

fn user_ids_in(selector: Value, docs: &[Value]) -> Vec<i64> {
    let selector = parse(selector);
    let mut ids: Vec<i64> = docs
        .iter()
        .filter(|doc| selector.matches(doc))
        .filter_map(|doc| doc.get("user_id").and_then(Value::as_i64))
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn couchdb_basic_find_cases_select_the_same_users() {
    assert_eq!(user_ids(json!({"age": {"$lt": 35}})), [1, 7, 9]);
    assert_eq!(
        user_ids(json!({"manager": true, "location.city": "Longbranch"})),
        [7]
    );
    assert_eq!(
        user_ids(json!({"$and": [
            {"age": {"$gte": 75}},
            {"$or": [{"name.first": "Mathis"}, {"name.first": "Whitley"}]}
        ]})),
        [11, 13]
    );
    assert_eq!(
        user_ids(json!({
            "location.state": {"$and": [{"$gt": "Hawaii"}, {"$lt": "Maine"}]},
            "location.city": {"$lt": "Longbranch"}
        })),
        [6]
    );
    assert_eq!(user_ids(json!({"favorites.3": "C"})), [6]);
    assert_eq!(user_ids(json!({"favorites.3": null})), Vec::<i64>::new());
    assert_eq!(user_ids(json!({"twitter": {"$gt": null}})), [0, 1, 4, 13]);
    assert_eq!(user_ids(json!({})).len(), 15);
    assert_eq!(
        user_ids(json!({"_id": {"$gt": null}, "location": {}})),
        Vec::<i64>::new()
    );
    assert_eq!(
        user_ids(json!({"$and": [{"age": {"$gt": 0}}, {"age": {"$lt": 0}}]})),
        Vec::<i64>::new()
    );
    assert_eq!(user_ids(json!({"favorites": {"$nin": []}})).len(), 15);
    assert_eq!(
        user_ids(json!({"age": 22, "company": {"$all": []}})),
        Vec::<i64>::new()
    );
}

#[test]
fn couchdb_operator_cases_select_the_same_users() {
    assert_eq!(
        user_ids(json!({"manager": true, "favorites": {"$all": ["Lisp", "Python"]}})),
        [2, 9, 12]
    );
    assert_eq!(
        user_ids(json!({"manager": true, "location": {"$all": ["Ohai"]}})),
        Vec::<i64>::new()
    );
    assert_eq!(
        user_ids(json!({"manager": true, "favorites": {"$in": ["Ruby", "Python"]}})),
        [2, 6, 7, 9, 11, 12]
    );
    assert_eq!(
        user_ids(json!({"manager": true, "favorites": {"$nin": ["Erlang", "Python"]}})),
        [5, 6, 8, 11]
    );
    assert_eq!(
        user_ids(json!({"age": {"$gt": 40}, "location.state": {"$regex": "(?i)new.*"}})),
        [2, 10]
    );
    assert_eq!(
        user_ids(json!({"age": {"$gt": 0}, "twitter": {"$exists": false}})),
        [2, 3, 5, 6, 7, 8, 10, 11, 12, 14]
    );
    assert_eq!(user_ids(json!({"twitter": null})), [9]);
    assert_eq!(
        user_ids(json!({"twitter": {"$ne": "notamatch"}})),
        [0, 1, 4, 9, 13]
    );
    assert_eq!(user_ids(json!({"twitter": {"$lte": null}})), [9]);
    assert_eq!(
        user_ids(json!({"twitter": {"$and": [{"$lte": "@z"}, {"$ne": null}]}})),
        [0, 1, 4, 13]
    );
    assert_eq!(user_ids(json!({"twitter": {"$gte": null}})).len(), 5);
    assert_eq!(user_ids(json!({"twitter": {"$lt": 1}})), [9]);
    assert_eq!(user_ids(json!({"twitter": {"$lte": 1}})), [9]);
    assert_eq!(
        user_ids(json!({"favorites": {"$allMatch": {"$eq": "Erlang"}}})),
        [10]
    );
    assert_eq!(user_ids(json!({"favorites": {"$size": 4}})), [1, 3, 4, 6]);
    assert_eq!(
        user_ids(json!({"exists_object.should": {"$exists": true}})),
        [11]
    );
    assert_eq!(
        user_ids(json!({"exists_array": {"$exists": true}})),
        [9, 10]
    );
}

#[test]
fn couchdb_unicode_collation_cases_select_the_same_users() {
    // "ordered" holds null, false, true, 9, 10000, "a", "A", "aa".
    assert_eq!(
        user_ids(json!({"ordered": {"$lte": "a"}})),
        [7, 8, 9, 10, 11, 12]
    );
    assert_eq!(user_ids(json!({"ordered": {"$gte": "a"}})), [12, 13, 14]);
}

#[test]
fn couchdb_begins_with_cases_select_the_same_users() {
    let mut docs = user_docs();
    docs.push(json!({"user_id": 99, "location": {"state": ":Bar"}}));
    let cases: [(&str, &[i64]); 6] = [
        ("New", &[2, 10]),
        ("New ", &[2, 10]),
        (":", &[99]),
        ("Foo", &[]),
        ("\"Foo", &[]),
        (" New", &[]),
    ];
    for (prefix, expected) in cases {
        assert_eq!(
            user_ids_in(json!({"location.state": {"$beginsWith": prefix}}), &docs),
            expected,
            "prefix {prefix:?}"
        );
    }
}

#[test]
fn couchdb_multi_type_value_cases_select_the_same_documents() {
    let docs = [
        json!({"_id": "1", "name": "Jimi", "age": 10}),
        json!({"_id": "2", "name": {"forename": "Eddie"}, "age": 20}),
        json!({"_id": "3", "name": null, "age": 30}),
        json!({"_id": "4", "name": 1, "age": 40}),
        json!({"_id": "5", "forename": "Sam", "age": 50}),
    ];
    let ids = |selector: Value| {
        let selector = parse(selector);
        docs.iter()
            .filter(|d| selector.matches(d))
            .filter_map(|d| d.get("_id").and_then(Value::as_str))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(json!({"name": {"$exists": true}})),
        ["1", "2", "3", "4"]
    );
    assert_eq!(ids(json!({"name.forename": {"$exists": true}})), ["2"]);
    assert_eq!(ids(json!({"name": {"$gte": 0}})), ["1", "2", "4"]);
    assert_eq!(
        ids(json!({"age": {"$gte": 0, "$lt": 40}, "name": {"$gte": 0}})),
        ["1", "2"]
    );
}

const USER_DOCS: &str = r##"[
{"_id": "71562648-6acb-42bc-a182-df6b1f005b09", "user_id": 0, "name": {"first": "Stephanie", "last": "Kirkland"}, "age": 48, "location": {"state": "Nevada", "city": "Ronco"}, "manager": false, "twitter": "@stephaniekirkland", "favorites": ["Ruby", "C", "Python"], "test": [{"a": 1}, {"b": 2}]},
{"_id": "12a2800c-4fe2-45a8-8d78-c084f4e242a9", "user_id": 1, "name": {"first": "Abbott", "last": "Watson"}, "age": 31, "location": {"state": "Connecticut", "city": "Gerber"}, "manager": false, "twitter": "@abbottwatson", "favorites": ["Ruby", "Python", "C", {"Versions": {"Alpha": "Beta"}}], "test": [{"a": 1, "b": 2}]},
{"_id": "48ca0455-8bd0-473f-9ae2-459e42e3edd1", "user_id": 2, "name": {"first": "Shelly", "last": "Ewing"}, "age": 42, "location": {"state": "New Mexico", "city": "Thornport"}, "manager": true, "favorites": ["Lisp", "Python", "Erlang"], "test_in": {"val1": 1, "val2": "val2"}},
{"_id": "0461444c-e60a-457d-a4bb-b8d811853f21", "user_id": 3, "name": {"first": "Madelyn", "last": "Soto"}, "age": 79, "location": {"state": "Utah", "city": "Albany"}, "manager": true, "favorites": [["Lisp", "Erlang", "Python"], "Erlang", "C", "Erlang"], "11111": "number_field", "22222": {"33333": "nested_number_field"}},
{"_id": "8e1c90c0-ac18-4832-8081-40d14325bde0", "user_id": 4, "name": {"first": "Nona", "last": "Horton"}, "age": 61, "location": {"state": "Georgia", "city": "Corinne"}, "manager": false, "twitter": "@nonahorton", "favorites": ["Lisp", "C", "Ruby", "Ruby"], "name.first": "name dot first"},
{"_id": "a33d5457-741a-4dce-a217-3eab28b24e3e", "user_id": 5, "name": {"first": "Sheri", "last": "Perkins"}, "age": 73, "location": {"state": "Michigan", "city": "Nutrioso"}, "manager": true, "favorites": ["Lisp", "Lisp"]},
{"_id": "b31dad3f-ae8b-4f86-8327-dfe8770beb27", "user_id": 6, "name": {"first": "Tate", "last": "Guy"}, "age": 47, "location": {"state": "Illinois", "city": "Helen"}, "manager": true, "favorites": ["C", "Lisp", "Ruby", "C"]},
{"_id": "659d0430-b1f4-413a-a6b7-9ea1ef071325", "user_id": 7, "name": {"first": "Jewell", "last": "Stafford"}, "age": 33, "location": {"state": "Iowa", "city": "Longbranch"}, "manager": true, "favorites": ["C", "C", "Ruby", "Ruby", "Erlang"], "exists_field": "should_exist1", "ordered": null},
{"_id": "6c0afcf1-e57e-421d-a03d-0c0717ebf843", "user_id": 8, "name": {"first": "James", "last": "Mcdaniel"}, "age": 68, "location": {"state": "Maine", "city": "Craig"}, "manager": true, "favorites": null, "exists_field": "should_exist2", "ordered": false},
{"_id": "954272af-d5ed-4039-a5eb-8ed57e9def01", "user_id": 9, "name": {"first": "Ramona", "last": "Floyd"}, "age": 22, "location": {"state": "Missouri", "city": "Foxworth"}, "manager": true, "twitter": null, "favorites": ["Lisp", "Erlang", "Python"], "exists_array": ["should", "exist", "array1"], "complex_field_value": "+-()%{}[]^~&&*||\"\\/? =>!", "ordered": true},
{"_id": "e900001d-bc48-48a6-9b1a-ac9a1f5d1a03", "user_id": 10, "name": {"first": "Charmaine", "last": "Mills"}, "age": 43, "location": {"state": "New Hampshire", "city": "Kiskimere"}, "manager": true, "favorites": ["Erlang", "Erlang"], "exists_array": ["should", "exist", "array2"], "ordered": 9},
{"_id": "b06aadcf-cd0f-4ca6-9f7e-2c993e48d4c4", "user_id": 11, "name": {"first": "Mathis", "last": "Hernandez"}, "age": 75, "location": {"state": "Hawaii", "city": "Dupuyer"}, "manager": true, "favorites": ["Ruby", "Lisp", "C", "C++", "C++"], "exists_object": {"should": "object"}, "ordered": 10000},
{"_id": "5b61abc1-a3d3-4092-b9d7-ced90e675536", "user_id": 12, "name": {"first": "Patti", "last": "Rosales"}, "age": 71, "location": {"state": "Pennsylvania", "city": "Juntura"}, "manager": true, "favorites": ["C", "Python", "Lisp"], "exists_object": {"another": "object"}, "ordered": "a"},
{"_id": "b1e70402-8add-4068-af8f-b4f3d0feb049", "user_id": 13, "name": {"first": "Whitley", "last": "Harvey"}, "age": 78, "location": {"state": "Minnesota", "city": "Trail"}, "manager": false, "twitter": "@whitleyharvey", "favorites": ["C", "Ruby", "Ruby"], "ordered": "A"},
{"_id": "c78c529f-0b07-4947-90a6-d6b7ca81da62", "user_id": 14, "name": {"first": "Faith", "last": "Hess"}, "age": 51, "location": {"state": "North Dakota", "city": "Axis"}, "foo": "bar car apple", "favorites": ["Erlang", "Python", "Lisp"], "ordered": "aa"}
]"##;
