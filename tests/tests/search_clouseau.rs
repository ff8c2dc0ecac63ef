//! Clouseau's `_search` API over HTTP, as CouchDB with dreyfus answers it:
//! term, phrase and numeric range queries, string and number sorts,
//! bookmarks, counts, ranges, drilldown, `include_docs`, `include_fields`,
//! highlights, grouping, `_search_info`, `_search_disk_size`,
//! `_search_cleanup`, partitioned searches and dreyfus's errors. The corpus
//! is eight animals whose answers are counted by hand.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

const SEARCH: &str = "/zoo/_design/zoo/_search/animals";

/// A server with database `zoo` holding the animals and `_design/zoo`.
/// Fields drop in order: the server stops before its data folder goes.
struct Zoo {
    c: Client,
    _server: TestServer,
    _data: TempDir,
}

impl Zoo {
    async fn new(label: &str) -> Zoo {
        let data = TempDir::new(label);
        let server = TestServer::start(data.path(), &[]);
        let c = Client::new(&server);
        let zoo = Zoo {
            c,
            _server: server,
            _data: data,
        };
        let made = zoo.c.put("/zoo", json!({})).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let docs = json!({"docs": [
            animal("aardvark", "insectivore", "mammal", 40.0,
                "The aardvark is a medium-sized burrowing nocturnal mammal native to Africa."),
            animal("badger", "omnivore", "mammal", 7.0,
                "Badgers are short-legged omnivores in the family Mustelidae."),
            animal("elephant", "herbivore", "mammal", 2700.0,
                "The African elephant is the largest living land animal."),
            animal("giraffe", "herbivore", "mammal", 830.0,
                "The giraffe is an African even-toed ungulate mammal, the tallest living terrestrial animal."),
            animal("kookaburra", "carnivore", "bird", 0.3,
                "Kookaburras are terrestrial tree kingfishers native to Australia and New Guinea."),
            animal("lemur", "omnivore", "mammal", 2.2,
                "Lemurs are strepsirrhine primates endemic to the island of Madagascar."),
            animal("llama", "herbivore", "mammal", 130.0,
                "The llama is a domesticated South American camelid."),
            animal("snipe", "omnivore", "bird", 0.08,
                "The snipe is a wading bird with a long slender bill."),
        ]});
        let made = zoo.c.post("/zoo/_bulk_docs", docs).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let ddoc = json!({"indexes": {"animals": {
            "analyzer": {"name": "perfield", "default": "standard",
                         "fields": {"name": "keyword"}},
            "index": r#"function (doc) {
                if (!doc.name) return;
                index("name", doc.name, {store: true});
                index("diet", doc.diet, {store: true, facet: true});
                index("class", doc.class, {store: true, facet: true});
                index("min_weight", doc.min_weight, {store: true, facet: true});
                index("description", doc.description, {store: true});
                index("default", doc.description);
            }"#,
        }}});
        let made = zoo.c.put("/zoo/_design/zoo", ddoc).await;
        assert_eq!(made.status, 201, "{}", made.text);
        zoo
    }

    async fn get(&self, params: &[(&str, &str)]) -> Value {
        let reply = self.c.get(&format!("{SEARCH}{}", query(params))).await;
        assert_eq!(reply.status, 200, "GET {params:?}: {}", reply.text);
        reply.json()
    }

    /// A request that must fail with `status`: its body.
    async fn refused(&self, params: &[(&str, &str)], status: u16) -> Value {
        let reply = self.c.get(&format!("{SEARCH}{}", query(params))).await;
        assert_eq!(reply.status, status, "GET {params:?}: {}", reply.text);
        reply.json()
    }
}

/// A request's parameters, the status, `error` and `reason` it gets.
type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str, &'a str);

fn animal(name: &str, diet: &str, class: &str, min_weight: f64, description: &str) -> Value {
    json!({"_id": name, "name": name, "diet": diet, "class": class,
           "min_weight": min_weight, "description": description})
}

fn query(params: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect();
    format!("?{}", pairs.join("&"))
}

fn ids(results: &Value) -> Vec<String> {
    results["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("rows: {results}"))
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_string())
        .collect()
}

fn sorted_ids(results: &Value) -> Vec<String> {
    let mut ids = ids(results);
    ids.sort();
    ids
}

#[tokio::test]
async fn queries_sorts_and_pages() {
    let zoo = Zoo::new("clouseau-queries").await;

    // A term: rows with stored fields and Clouseau's `[score, position]`.
    let birds = zoo.get(&[("q", "class:bird")]).await;
    assert_eq!(birds["total_rows"], 2, "{birds}");
    assert_eq!(sorted_ids(&birds), ["kookaburra", "snipe"], "{birds}");
    let row = &birds["rows"][0];
    assert!(row["order"][0].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(row["order"][1], 0, "{row}");
    assert_eq!(row["fields"]["class"], "bird", "{row}");
    assert!(row.get("doc").is_none(), "{row}");
    assert!(birds["bookmark"].is_string(), "{birds}");
    assert!(birds.get("counts").is_none(), "{birds}");

    // A phrase, in the default field and in a named one; `query` is `q`.
    let land = zoo.get(&[("q", "\"living land animal\"")]).await;
    assert_eq!(ids(&land), ["elephant"], "{land}");
    let land = zoo
        .get(&[("query", "description:\"largest living\"")])
        .await;
    assert_eq!(ids(&land), ["elephant"], "{land}");

    // A numeric range.
    let light = zoo.get(&[("q", "min_weight:[0 TO 50]")]).await;
    assert_eq!(
        sorted_ids(&light),
        ["aardvark", "badger", "kookaburra", "lemur", "snipe"],
        "{light}"
    );

    // Sorts: a string field (keyword-analyzed), a number field descending.
    let by_name = zoo
        .get(&[("q", "class:mammal"), ("sort", "\"name<string>\"")])
        .await;
    assert_eq!(
        ids(&by_name),
        [
            "aardvark", "badger", "elephant", "giraffe", "lemur", "llama"
        ],
        "{by_name}"
    );
    assert_eq!(by_name["rows"][0]["order"], json!(["aardvark", 0]));
    let heavy_first = zoo
        .get(&[("q", "class:mammal"), ("sort", "[\"-min_weight\"]")])
        .await;
    assert_eq!(
        ids(&heavy_first),
        [
            "elephant", "giraffe", "llama", "aardvark", "badger", "lemur"
        ],
        "{heavy_first}"
    );
    assert_eq!(heavy_first["rows"][0]["order"], json!([2700.0, 0]));

    // Paging with the bookmark, to an empty page that keeps it.
    let sort = ("sort", "\"name<string>\"");
    let first = zoo
        .get(&[("q", "class:mammal"), sort, ("limit", "4")])
        .await;
    assert_eq!(first["rows"].as_array().unwrap().len(), 4, "{first}");
    let bookmark = first["bookmark"].as_str().unwrap().to_string();
    let second = zoo
        .get(&[
            ("q", "class:mammal"),
            sort,
            ("limit", "4"),
            ("bookmark", &bookmark),
        ])
        .await;
    assert_eq!(ids(&second), ["lemur", "llama"], "{second}");
    assert_eq!(second["total_rows"], 6, "{second}");
    assert_eq!(second["rows"][0]["order"], json!(["lemur", 4]));
    let bookmark = second["bookmark"].as_str().unwrap().to_string();
    let third = zoo
        .get(&[
            ("q", "class:mammal"),
            sort,
            ("limit", "4"),
            ("bookmark", &bookmark),
        ])
        .await;
    assert_eq!(third["rows"], json!([]), "{third}");
    assert_eq!(third["bookmark"], bookmark.as_str(), "{third}");
    // The bookmark of one sort does not fit another.
    let mismatch = zoo
        .refused(
            &[
                ("q", "class:mammal"),
                ("sort", "[\"diet<string>\", \"name<string>\"]"),
                ("bookmark", &bookmark),
            ],
            400,
        )
        .await;
    assert_eq!(
        mismatch["reason"], "sort order not compatible with given bookmark",
        "{mismatch}"
    );

    // POST takes the same parameters as JSON.
    let posted = zoo
        .c
        .post(
            SEARCH,
            json!({"query": "diet:herbivore", "sort": "-min_weight<number>", "limit": 2}),
        )
        .await;
    assert_eq!(posted.status, 200, "{}", posted.text);
    assert_eq!(
        ids(&posted.json()),
        ["elephant", "giraffe"],
        "{}",
        posted.text
    );
}

#[tokio::test]
async fn facets_drilldown_docs_fields_and_highlights() {
    let zoo = Zoo::new("clouseau-facets").await;

    let counted = zoo
        .get(&[
            ("q", "*:*"),
            ("limit", "0"),
            ("counts", "[\"diet\", \"class\"]"),
            (
                "ranges",
                r#"{"min_weight": {"light": "[0 TO 100]", "heavy": "{100 TO Infinity}"}}"#,
            ),
        ])
        .await;
    assert_eq!(counted["total_rows"], 8, "{counted}");
    assert_eq!(counted["rows"], json!([]), "{counted}");
    assert_eq!(
        counted["counts"],
        json!({"class": {"mammal": 6, "bird": 2},
               "diet": {"herbivore": 3, "omnivore": 3, "insectivore": 1, "carnivore": 1}}),
        "{counted}"
    );
    assert_eq!(
        counted["ranges"],
        json!({"min_weight": {"light": 5, "heavy": 3}}),
        "{counted}"
    );
    let none = zoo
        .get(&[
            ("q", "class:fish"),
            ("counts", "[\"class\"]"),
            ("ranges", r#"{"min_weight": {}}"#),
        ])
        .await;
    assert_eq!(none["counts"], json!({"class": {}}), "{none}");
    assert_eq!(none["ranges"], json!({"min_weight": {}}), "{none}");

    // Drilldown: one dimension, values ORed, dimensions ANDed, repeated.
    let herbivores = zoo
        .get(&[("q", "*:*"), ("drilldown", "[\"diet\", \"herbivore\"]")])
        .await;
    assert_eq!(sorted_ids(&herbivores), ["elephant", "giraffe", "llama"]);
    let either = zoo
        .get(&[
            ("q", "*:*"),
            ("drilldown", "[\"diet\", \"omnivore\", \"carnivore\"]"),
        ])
        .await;
    assert_eq!(
        sorted_ids(&either),
        ["badger", "kookaburra", "lemur", "snipe"]
    );
    let both = zoo
        .get(&[
            ("q", "*:*"),
            ("drilldown", r#"[["diet", "omnivore"], ["class", "bird"]]"#),
        ])
        .await;
    assert_eq!(ids(&both), ["snipe"], "{both}");
    let repeated = zoo
        .get(&[
            ("q", "*:*"),
            ("drilldown", "[\"diet\", \"omnivore\"]"),
            ("drilldown", "[\"class\", \"mammal\"]"),
        ])
        .await;
    assert_eq!(sorted_ids(&repeated), ["badger", "lemur"], "{repeated}");

    // include_docs and include_fields.
    let with_docs = zoo
        .get(&[
            ("q", "name:llama"),
            ("include_docs", "true"),
            ("include_fields", "[\"diet\"]"),
        ])
        .await;
    let row = &with_docs["rows"][0];
    assert_eq!(row["doc"]["_id"], "llama", "{row}");
    assert_eq!(row["doc"]["min_weight"], 130.0, "{row}");
    assert!(row["doc"]["_rev"].is_string(), "{row}");
    assert_eq!(row["fields"], json!({"diet": "herbivore"}), "{row}");

    // Highlights with custom tags: every stored value of the field, the
    // query's words marked.
    let lit = zoo
        .get(&[
            ("q", "description:african"),
            ("sort", "\"name<string>\""),
            ("highlight_fields", "[\"description\"]"),
            ("highlight_pre_tag", "\"<b>\""),
            ("highlight_post_tag", "\"</b>\""),
        ])
        .await;
    assert_eq!(ids(&lit), ["elephant", "giraffe"], "{lit}");
    assert_eq!(
        lit["rows"][0]["highlights"],
        json!({"description": ["The <b>African</b> elephant is the largest living land animal."]}),
        "{lit}"
    );
    // Default tags, small fragments, two of them, a wildcard.
    let small = zoo
        .get(&[
            ("q", "name:giraffe OR terr*"),
            ("highlight_fields", "[\"description\"]"),
            ("highlight_size", "20"),
            ("highlight_number", "2"),
        ])
        .await;
    let giraffe = small["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "giraffe")
        .unwrap_or_else(|| panic!("{small}"));
    let fragments = giraffe["highlights"]["description"].as_array().unwrap();
    assert_eq!(fragments.len(), 2, "{giraffe}");
    assert!(
        fragments[0].as_str().unwrap().contains("<em>giraffe</em>"),
        "{giraffe}"
    );
    assert!(
        fragments[1]
            .as_str()
            .unwrap()
            .contains("<em>terrestrial</em>"),
        "{giraffe}"
    );
}

#[tokio::test]
async fn groups() {
    let zoo = Zoo::new("clouseau-groups").await;
    let grouped = zoo
        .get(&[
            ("q", "*:*"),
            ("group_field", "class"),
            ("sort", "\"name<string>\""),
        ])
        .await;
    assert_eq!(grouped["total_rows"], 8, "{grouped}");
    assert!(grouped.get("bookmark").is_none(), "{grouped}");
    let groups = grouped["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{grouped}");
    // Relevance ties on `*:*`: groups by their best hit's id (aardvark).
    assert_eq!(groups[0]["by"], "mammal", "{grouped}");
    assert_eq!(groups[0]["total_rows"], 6, "{grouped}");
    assert_eq!(groups[0]["rows"].as_array().unwrap().len(), 6);
    assert_eq!(groups[1]["by"], "bird", "{grouped}");
    assert_eq!(groups[1]["total_rows"], 2, "{grouped}");
    assert_eq!(ids(&groups[1]), ["kookaburra", "snipe"], "{grouped}");
    assert_eq!(groups[1]["rows"][1]["order"], json!(["snipe", 1]));

    // group_sort orders the groups, group_limit bounds them, limit the rows.
    let heaviest = zoo
        .get(&[
            ("q", "*:*"),
            ("group_field", "class"),
            ("group_sort", "\"-min_weight\""),
            ("group_limit", "1"),
            ("sort", "\"-min_weight\""),
            ("limit", "2"),
        ])
        .await;
    let groups = heaviest["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{heaviest}");
    assert_eq!(groups[0]["by"], "mammal", "{heaviest}");
    assert_eq!(groups[0]["total_rows"], 6, "{heaviest}");
    assert_eq!(ids(&groups[0]), ["elephant", "giraffe"], "{heaviest}");

    let number = zoo
        .refused(&[("q", "*:*"), ("group_field", "min_weight<number>")], 400)
        .await;
    assert_eq!(
        number["reason"], "Group by number not supported. Group by string terms only.",
        "{number}"
    );
    let too_many = zoo
        .refused(
            &[
                ("q", "*:*"),
                ("group_field", "class"),
                ("group_limit", "201"),
            ],
            400,
        )
        .await;
    assert_eq!(
        too_many["reason"], "Value for group_limit is too large, must not exceed 200",
        "{too_many}"
    );
}

#[tokio::test]
async fn info_cleanup_and_errors() {
    let zoo = Zoo::new("clouseau-info").await;
    zoo.get(&[("q", "*:*")]).await;

    let info = zoo.c.get("/zoo/_design/zoo/_search_info/animals").await;
    assert_eq!(info.status, 200, "{}", info.text);
    let info = info.json();
    assert_eq!(info["name"], "_design/zoo/animals", "{info}");
    let index = &info["search_index"];
    assert_eq!(index["doc_count"], 8, "{info}");
    assert_eq!(index["doc_del_count"], 0, "{info}");
    assert!(index["disk_size"].as_u64().unwrap() > 0, "{info}");
    assert!(index["committed_seq"].as_u64().unwrap() > 0, "{info}");
    assert_eq!(index["pending_seq"], index["committed_seq"], "{info}");

    let size = zoo
        .c
        .get("/zoo/_design/zoo/_search_disk_size/animals")
        .await;
    assert_eq!(size.status, 200, "{}", size.text);
    let size = size.json();
    assert_eq!(size["name"], "_design/zoo/animals", "{size}");
    assert!(
        size["search_index"]["disk_size"].as_u64().unwrap() > 0,
        "{size}"
    );

    // A deleted document leaves the count and waits in doc_del_count for a
    // merge.
    let llama = zoo.c.get("/zoo/llama").await.json();
    let gone = zoo
        .c
        .delete(&format!(
            "/zoo/llama?rev={}",
            llama["_rev"].as_str().unwrap()
        ))
        .await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    assert_eq!(zoo.get(&[("q", "*:*")]).await["total_rows"], 7);
    let info = zoo
        .c
        .get("/zoo/_design/zoo/_search_info/animals")
        .await
        .json();
    assert_eq!(info["search_index"]["doc_count"], 7, "{info}");
    assert_eq!(info["search_index"]["doc_del_count"], 1, "{info}");

    let cleaned = zoo.c.post("/zoo/_search_cleanup", json!({})).await;
    assert_eq!(cleaned.status, 202, "{}", cleaned.text);
    assert_eq!(cleaned.json(), json!({"ok": true}));

    // stale=ok answers from the index as it is.
    let stale = zoo.get(&[("q", "class:bird"), ("stale", "ok")]).await;
    assert_eq!(stale["total_rows"], 2, "{stale}");

    let cases: &[Case] = &[
        (
            &[("limit", "3")],
            400,
            "query_parse_error",
            "Query must include a 'q' or 'query' argument",
        ),
        (
            &[("q", "*:*"), ("limit", "201")],
            400,
            "query_parse_error",
            "Value for limit is too large, must not exceed 200",
        ),
        (
            &[("q", "*:*"), ("limit", "-1")],
            400,
            "query_parse_error",
            "limit must be greater than or equal to zero",
        ),
        (
            &[("q", "*:*"), ("stale", "no")],
            400,
            "query_parse_error",
            "stale only available as stale=ok",
        ),
        (
            &[("q", "*:*"), ("include_docs", "yes")],
            400,
            "query_parse_error",
            "Invalid value for include_docs: \"yes\"",
        ),
        (
            &[("q", "*:*"), ("highlight_number", "0")],
            400,
            "query_parse_error",
            "highlight_number must be greater than zero",
        ),
        (
            &[("q", "*:*"), ("sort", "\"name<date>\"")],
            400,
            "bad_request",
            "Unrecognized type: date",
        ),
        (
            &[("q", "*:*"), ("sort", "\"a b\"")],
            400,
            "bad_request",
            "Unrecognized sort parameter: a b",
        ),
        (
            &[("q", "*:*"), ("sort", "\"diet<number>\"")],
            400,
            "bad_request",
            "cannot sort string field as numeric field",
        ),
        (
            &[("q", "*:*"), ("ranges", r#"{"min_weight": {"x": "cat"}}"#)],
            400,
            "bad_request",
            "cat was not a well-formed range specification",
        ),
        (
            &[("q", "*:*"), ("counts", "\"diet\"")],
            400,
            "bad_request",
            "\"diet\" is not a valid counts query",
        ),
    ];
    for (params, status, error, reason) in cases {
        let body = zoo.refused(params, *status).await;
        assert_eq!(body["error"], *error, "{params:?}: {body}");
        assert_eq!(body["reason"], *reason, "{params:?}: {body}");
    }
    let geo = zoo
        .refused(
            &[
                ("q", "*:*"),
                ("sort", "\"<distance,lon,lat,-74.0,40.7,km>\""),
            ],
            400,
        )
        .await;
    assert_eq!(geo["error"], "bad_request", "{geo}");
    assert!(
        geo["reason"]
            .as_str()
            .unwrap()
            .contains("geo distance sort is not supported"),
        "{geo}"
    );

    let missing = zoo.c.get("/zoo/_design/zoo/_search/nope?q=*:*").await;
    assert_eq!(missing.status, 404, "{}", missing.text);
    assert_eq!(
        missing.json(),
        json!({"error": "not_found", "reason": "nope not found."})
    );
    let info = zoo.c.get("/zoo/_design/zoo/_search_info/nope").await;
    assert_eq!(info.status, 404, "{}", info.text);
    let put = zoo.c.put(&format!("{SEARCH}?q=x"), json!({})).await;
    assert_eq!(put.status, 405, "{}", put.text);
}

/// `partition_search_test.exs`'s corpus: `foo:2..10` even, `bar:1..9` odd.
async fn partition_docs(c: &Client, db: &str) {
    let docs: Vec<Value> = (1..=10)
        .map(|i| {
            let p = if i % 2 == 0 { "foo" } else { "bar" };
            json!({"_id": format!("{p}:{i}"), "value": i, "some": "field"})
        })
        .collect();
    let made = c
        .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
}

fn library(options: Option<Value>) -> Value {
    let mut ddoc = json!({"indexes": {"books": {
        "analyzer": {"name": "standard"},
        "index": "function(doc) {\n  if (doc.some) {\n    index('some', doc.some);\n }\n}",
    }}});
    if let Some(options) = options {
        ddoc["options"] = options;
    }
    ddoc
}

#[tokio::test]
async fn partitioned_searches() {
    let data = TempDir::new("clouseau-partitioned");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/pdb?partitioned=true", json!({})).await.status, 201);
    partition_docs(&c, "pdb").await;
    let made = c.put("/pdb/_design/library", library(None)).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let made = c
        .put(
            "/pdb/_design/global",
            library(Some(json!({"partitioned": false}))),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);

    let url = "/pdb/_partition/foo/_design/library/_search/books";
    let foo = c.get(&format!("{url}?q=some:field")).await;
    assert_eq!(foo.status, 200, "{}", foo.text);
    assert_eq!(
        ids(&foo.json()),
        ["foo:10", "foo:2", "foo:4", "foo:6", "foo:8"]
    );
    // Bookmarks and the partitioned limit (2000).
    let page = c.get(&format!("{url}?q=some:field&limit=3")).await.json();
    assert_eq!(ids(&page), ["foo:10", "foo:2", "foo:4"]);
    let bookmark = percent_encode(page["bookmark"].as_str().unwrap());
    let next = c
        .get(&format!(
            "{url}?q=some:field&limit=2000&bookmark={bookmark}"
        ))
        .await;
    assert_eq!(next.status, 200, "{}", next.text);
    assert_eq!(ids(&next.json()), ["foo:6", "foo:8"]);
    let over = c.get(&format!("{url}?q=some:field&limit=2001")).await;
    assert_eq!(over.status, 400, "{}", over.text);
    let posted = c
        .post(
            url,
            json!({"q": "some:field", "limit": 1, "partition": "true"}),
        )
        .await;
    assert_eq!(posted.status, 200, "{}", posted.text);

    let counts = c
        .get(&format!("{url}?q=some:field&counts=%5B%22some%22%5D"))
        .await;
    assert_eq!(counts.status, 400, "{}", counts.text);
    assert_eq!(
        counts.json()["reason"],
        "`partition` and any of `drilldown`, `ranges`, `group_field`, `group_sort`, `group_limit` or `group_by` are incompatible"
    );
    let global = c
        .get("/pdb/_design/library/_search/books?q=some:field")
        .await;
    assert_eq!(global.status, 400, "{}", global.text);
    assert_eq!(
        global.json()["reason"],
        "`partition` parameter is mandatory for queries to this index."
    );
    let unsupported = c
        .get("/pdb/_partition/foo/_design/global/_search/books?q=some:field")
        .await;
    assert_eq!(unsupported.status, 400, "{}", unsupported.text);
    assert_eq!(
        unsupported.json()["reason"],
        "`partition` not supported on this index"
    );
    let everything = c
        .get("/pdb/_design/global/_search/books?q=some:field")
        .await;
    assert_eq!(everything.status, 200, "{}", everything.text);
    assert_eq!(everything.json()["total_rows"], 10);
}

/// Highlighting a wildcard made to backtrack (`*a*a*...*b`, from the
/// query) against a long word (from a document) answers at once: a
/// backtracking match of it never ended, and held a thread for good.
#[tokio::test]
async fn a_wildcard_made_to_backtrack_is_highlighted_at_once() {
    let zoo = Zoo::new("search-clouseau-wildcard").await;
    let word = "a".repeat(200);
    let put = zoo
        .c
        .put(
            "/zoo/long",
            animal("long", "none", "word", 1.0, &format!("b {word}")),
        )
        .await;
    assert_eq!(put.status, 201, "{}", put.text);
    let evil = format!("description:b OR description:{}b", "*a".repeat(12));
    let path = format!(
        "{SEARCH}{}",
        query(&[("q", &evil), ("highlight_fields", "[\"description\"]")])
    );
    let answered = tokio::time::timeout(std::time::Duration::from_secs(30), zoo.c.get(&path))
        .await
        .expect("the search did not answer within 30 s");
    assert_eq!(answered.status, 200, "{}", answered.text);
    let rows = answered.json()["rows"].clone();
    let long = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["id"] == "long")
        .unwrap_or_else(|| panic!("no row for the long word: {rows}"));
    let marked = long["highlights"]["description"].to_string();
    assert!(marked.contains("<em>b</em>"), "{marked}");
    assert!(!marked.contains(&format!("<em>{word}")), "{marked}");
}
