#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use serde_json::json;

use super::*;

fn rules(value: Value) -> Vec<Rule> {
    read(value.as_array().unwrap(), true).unwrap()
}

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn pairs(query: &[(&str, &str)]) -> Bindings {
    let owned: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    query_bindings(&owned).unwrap()
}

fn run(rules: &[Rule], method: &str, path: &str, query: &[(&str, &str)]) -> Option<String> {
    apply(rules, method, &segments(path), &pairs(query)).unwrap()
}

// Expected answers read off CouchDB 3.5 (the rewritten `raw_path`).
#[test]
fn variables_and_the_query_string_are_written_in_couchdbs_order() {
    let r = rules(json!([
        {"from": "echo/:x/*", "to": "_show/s/:x/*", "query": {"k": ":x", "star": "*"}},
        {"from": "e2/:x", "to": "_show/s", "query": {"key": ":x"}},
        {"from": "e3/*", "to": "_show/s/*"},
        {"from": "e5/:x", "to": "_show/s/:y"},
        {"from": "e6/:x/:y", "to": "_show/s/:x:y/:y"},
    ]));
    assert_eq!(
        run(&r, "GET", "echo/doc1/a/b", &[("z", "1"), ("x", "q")]).unwrap(),
        "_show/s/doc1/a/b?k=doc1&star=%2A&x=q&z=1&x=doc1"
    );
    assert_eq!(
        run(&r, "GET", "e2/hi", &[("a", "b"), ("key", "\"zz\"")]).unwrap(),
        "_show/s?key=%22hi%22&a=b&x=hi"
    );
    let decoded = ["e3", "a/b", "c d"].map(String::from);
    let query = pairs(&[("k", "\"x\""), ("startkey", "5")]);
    assert_eq!(
        apply(&r, "GET", &decoded, &query).unwrap().unwrap(),
        "_show/s/a%2Fb/c+d?startkey=5&k=%22x%22"
    );
    assert_eq!(
        run(&r, "GET", "e5/x", &[("y", "doc1")]).unwrap(),
        "_show/s/doc1?y=doc1&x=x"
    );
    assert_eq!(
        run(&r, "GET", "e6/a/b", &[]).unwrap(),
        "_show/s/undefined/b?x=a&y=b"
    );
    assert_eq!(run(&r, "GET", "nothing/here", &[]), None);
}

#[test]
fn methods_formats_and_json_keys() {
    let r = rules(json!([
        {"from": "m", "to": "put", "method": "PUT"},
        {"from": "m", "to": "any"},
        {"from": "v/:start/:end", "to": "_view/v",
         "query": {"startkey": ":start", "endkey": ":end", "flag": ":f"},
         "formats": {"start": "int", "end": "int", "f": "bool"}},
        {"from": "c/:a/:b", "to": "_view/c", "query": {"key": [":a", ":b", 3], "obj": {"x": ":a"}}},
        {"from": "fixed", "to": "_view/v",
         "query": {"startkey": 3, "endkey": [1, {}], "s": ["a", "b"], "i": [65, "b"]}},
    ]));
    assert_eq!(run(&r, "PUT", "m", &[]).unwrap(), "put");
    assert_eq!(run(&r, "GET", "m", &[]).unwrap(), "any");
    assert_eq!(
        run(&r, "GET", "v/3/8", &[("f", "x")]).unwrap(),
        "_view/v?startkey=3&endkey=8&flag=x&f=x&start=3&end=8"
    );
    // A true is no text outside the view keys: badarg, as CouchDB.
    let error = apply(&r, "GET", &segments("v/3/8"), &pairs(&[("f", "TRUE")])).unwrap_err();
    assert_eq!(error.error_info().2, "badarg");
    // What does not read as an integer stays CouchDB's list of bytes.
    assert_eq!(
        run(&r, "GET", "v/ 5/x", &[("f", "x")]).unwrap(),
        "_view/v?startkey=%5B32%2C53%5D&endkey=%5B120%5D&flag=x&f=x&start=+5&end=x"
    );
    assert_eq!(
        run(&r, "GET", "fixed", &[]).unwrap(),
        "_view/v?startkey=3&endkey=%5B1%2C%7B%7D%5D&s=ab&i=Ab"
    );
    // A number or an object in a query that is not a view key is no
    // text: badarg.
    let numbers = rules(json!([{"from": "n", "to": "x", "query": {"limit": 5}}]));
    let error = apply(&numbers, "GET", &segments("n"), &Vec::new()).unwrap_err();
    assert_eq!(error.error_info().2, "badarg");
    let error = apply(&r, "GET", &segments("c/x/y"), &Vec::new()).unwrap_err();
    assert_eq!(error.error_info().2, "badarg");
}

#[test]
fn rules_are_read_before_any_matches() {
    let insecure = json!([{"from": "a", "to": "b"}, {"from": "u", "to": "../../../_uuids"}]);
    let error = read(insecure.as_array().unwrap(), true).unwrap_err();
    assert_eq!(
        error.error_info(),
        (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "insecure_rewrite_rule",
            "too many ../.. segments".into()
        )
    );
    assert!(read(insecure.as_array().unwrap(), false).is_ok());
    let no_target = json!([{"from": "a"}]);
    let error = read(no_target.as_array().unwrap(), true).unwrap_err();
    assert_eq!(error.error_info().1, "error");
    assert_eq!(error.error_info().2, "invalid_rewrite_target");
    // Members that are not objects are skipped; no `from` matches anything.
    let r = rules(json!([1, "x", {"to": "everything/*"}]));
    assert_eq!(run(&r, "DELETE", "a/b", &[]).unwrap(), "everything/a/b");
}

#[test]
fn bad_json_in_a_view_key_is_a_400() {
    let error = query_bindings(&[("key".into(), "bad".into())]).unwrap_err();
    assert_eq!(error.error_info().2, "invalid UTF-8 JSON");
}

#[test]
fn paths_are_normalized_as_couchdb_does() {
    assert_eq!(normalize("/db/_design/x/../../doc"), "/db/doc");
    assert_eq!(normalize("/db/_design/x/../../../_uuids"), "/_uuids");
    assert_eq!(normalize("/db/_design/x/../../../../../a"), "/../../a");
    assert_eq!(normalize("/db//_design/./x/"), "/db/_design/x");
    assert_eq!(url_encode("a/b c:d_e.f-g"), "a%2Fb%20c:d_e.f-g");
    assert_eq!(quote_plus("a/b c*~"), "a%2Fb+c%2A~");
}
