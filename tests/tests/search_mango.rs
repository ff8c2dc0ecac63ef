//! Mango on full-text indexes (`"type": "nouveau"`), as CouchDB 3.5
//! answers: `_index` creates, lists and deletes them; `_find` and
//! `_explain` run a selector on one as a Lucene query, then match every
//! document found against the whole selector. The first tests port the
//! Mango tests of CouchDB's `test/elixir/test/nouveau_test.exs` with its
//! documents; the others cover the operators, paging and per-document
//! access.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

const FAST: (&str, &str) = ("RECLINER_PASSWORD_ITERATIONS", "1000");
const PASSWORD: &str = "a-long-enough-password";

struct Server {
    c: Client,
    server: TestServer,
    _data: TempDir,
}

fn start(label: &str) -> Server {
    let data = TempDir::new(label);
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    Server {
        c: Client::new(&server),
        server,
        _data: data,
    }
}

/// The elixir test's `create_search_docs`.
async fn create_search_docs(c: &Client, db: &str) {
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"docs": [
                {"_id": "doc4", "foo": "foo", "bar": 42, "baz": "hello hello there"},
                {"_id": "doc3", "foo": "bar", "bar": 12.0, "baz": "hello"},
                {"_id": "doc1", "foo": "baz", "bar": 0, "baz": "there"},
                {"_id": "doc2", "foo": "foobar", "bar": 100, "baz": "hi"},
            ]}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// The elixir test's `create_mango_index`.
async fn create_mango_index(c: &Client, db: &str) -> Value {
    let body = json!({"type": "nouveau", "index": {"fields": [
        {"name": "foo", "type": "string"},
        {"name": "bar", "type": "number"},
        {"name": "baz", "type": "string"},
    ]}});
    let reply = c.post(&format!("/{db}/_index"), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

async fn find(c: &Client, path: &str, body: Value) -> Value {
    let reply = c.post(path, body.clone()).await;
    assert_eq!(reply.status, 200, "{body}: {}", reply.text);
    reply.json()
}

fn ids(resp: &Value) -> Vec<&str> {
    resp["docs"]
        .as_array()
        .unwrap_or_else(|| panic!("no docs: {resp}"))
        .iter()
        .map(|d| d["_id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_elixir_mango_tests() {
    let s = start("search-mango-elixir");
    let c = &s.c;
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    create_search_docs(c, "db").await;
    create_mango_index(c, "db").await;

    // mango search by number
    let resp = find(c, "/db/_find", json!({"selector": {"bar": {"$gt": 5}}})).await;
    assert_eq!(ids(&resp), ["doc2", "doc3", "doc4"]);
    // mango search by string
    let resp = find(c, "/db/_find", json!({"selector": {"foo": {"$eq": "foo"}}})).await;
    assert_eq!(ids(&resp), ["doc4"]);
    // mango search by text
    let resp = find(c, "/db/_find", json!({"selector": {"$text": "hello"}})).await;
    assert_eq!(ids(&resp), ["doc4", "doc3"]);
    // mango sort by number
    let body = json!({"sort": [{"bar:number": "asc"}], "selector": {"bar": {"$gt": 5}}});
    assert_eq!(
        ids(&find(c, "/db/_find", body).await),
        ["doc3", "doc4", "doc2"]
    );
    // mango sort by string
    let body = json!({"sort": [{"foo:string": "asc"}], "selector": {"bar": {"$gte": 0}}});
    assert_eq!(
        ids(&find(c, "/db/_find", body).await),
        ["doc3", "doc1", "doc4", "doc2"]
    );
    // Descending, and `["field:type"]` as a plain sort.
    let body = json!({"sort": [{"bar:number": "desc"}], "selector": {"bar": {"$gt": 5}}});
    assert_eq!(
        ids(&find(c, "/db/_find", body).await),
        ["doc2", "doc4", "doc3"]
    );
    let body =
        json!({"sort": ["foo:string"], "selector": {"bar": {"$gte": 0}}, "fields": ["_id", "foo"]});
    let resp = find(c, "/db/_find", body).await;
    assert_eq!(resp["docs"][0], json!({"_id": "doc3", "foo": "bar"}));
    // A sort must name its type.
    let body = json!({"sort": ["foo"], "selector": {"bar": {"$gte": 0}}});
    let reply = c.post("/db/_find", body).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({"error": "text_sort_error", "reason": "Unspecified or ambiguous sort type. Try appending :number or :string to the sort field. foo"})
    );
}

#[tokio::test]
async fn the_elixir_partitioned_mango_test() {
    let s = start("search-mango-partitioned");
    let c = &s.c;
    assert_eq!(c.put("/db?partitioned=true", json!({})).await.status, 201);
    let reply = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [
                {"_id": "foo:doc4", "foo": "foo", "bar": 42},
                {"_id": "bar:doc3", "foo": "bar", "bar": 12.0},
                {"_id": "foo:doc1", "foo": "baz", "bar": 0},
                {"_id": "bar:doc2", "foo": "foobar", "bar": 100},
            ]}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    create_mango_index(c, "db").await;

    let resp = find(
        c,
        "/db/_partition/foo/_find",
        json!({"selector": {"foo": {"$eq": "foo"}}}),
    )
    .await;
    assert_eq!(ids(&resp), ["foo:doc4"]);
    let resp = find(
        c,
        "/db/_partition/bar/_find",
        json!({"selector": {"foo": {"$eq": "bar"}}}),
    )
    .await;
    assert_eq!(ids(&resp), ["bar:doc3"]);
    let resp = find(
        c,
        "/db/_partition/foo/_find",
        json!({"selector": {"bar": {"$gte": 0}}, "sort": ["bar:number"]}),
    )
    .await;
    assert_eq!(ids(&resp), ["foo:doc1", "foo:doc4"]);
}

#[tokio::test]
async fn indexes_are_created_listed_and_deleted() {
    let s = start("search-mango-index");
    let c = &s.c;
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    let body = json!({"type": "nouveau", "ddoc": "text", "name": "by_foo",
        "index": {"fields": [{"name": "foo", "type": "string"}, {"name": "bar", "type": "number"}]}});
    let made = c.post("/db/_index", body.clone()).await;
    assert_eq!(made.status, 200, "{}", made.text);
    assert_eq!(
        made.json(),
        json!({"result": "created", "id": "_design/text", "name": "by_foo"})
    );
    let again = c.post("/db/_index", body).await;
    assert_eq!(
        again.json(),
        json!({"result": "exists", "id": "_design/text", "name": "by_foo"})
    );
    // The design document, as CouchDB writes it.
    let ddoc = c.get("/db/_design/text").await.json();
    assert_eq!(ddoc["language"], "query");
    assert_eq!(
        ddoc["nouveau"]["by_foo"],
        json!({
            "index": {
                "default_analyzer": "keyword",
                "default_field": {},
                "partial_filter_selector": {},
                "selector": {},
                "fields": [{"name": "foo", "type": "string"}, {"name": "bar", "type": "number"}],
                "index_array_lengths": true,
            },
            "analyzer": {"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}},
        })
    );
    // A generated name, every field.
    let all = c
        .post("/db/_index", json!({"type": "nouveau", "index": {}}))
        .await
        .json();
    assert_eq!(all["result"], "created");
    let name = all["name"].as_str().unwrap().to_string();
    assert_eq!(all["id"], format!("_design/{name}"));

    let listed = c.get("/db/_index").await.json();
    assert_eq!(listed["total_rows"], 3, "{listed}");
    let text = listed["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "by_foo")
        .unwrap()
        .clone();
    assert_eq!(
        text,
        json!({"ddoc": "_design/text", "name": "by_foo", "type": "nouveau", "partitioned": false,
            "def": {"default_analyzer": "keyword", "default_field": {}, "selector": {},
                "fields": [{"foo": "string"}, {"bar": "number"}], "index_array_lengths": true}})
    );
    let every = listed["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name.as_str())
        .unwrap();
    assert_eq!(every["def"]["fields"], json!([]));

    // CouchDB's words for a bad field definition.
    let bad = c
        .post(
            "/db/_index",
            json!({"type": "nouveau", "index": {"fields": [{"name": "foo"}]}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"], "invalid_index_fields_definition");
    let bad = c
        .post(
            "/db/_index",
            json!({"type": "nouveau", "index": {"foo": 1}}),
        )
        .await;
    assert_eq!(
        bad.json(),
        json!({"error": "invalid_key", "reason": "Invalid key foo for this request."})
    );

    let gone = c.delete("/db/_index/text/nouveau/by_foo").await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    assert_eq!(gone.json(), json!({"ok": true}));
    assert_eq!(c.get("/db/_design/text").await.status, 404);
    assert_eq!(c.delete("/db/_index/text/nouveau/by_foo").await.status, 404);
    assert_eq!(c.get("/db/_index").await.json()["total_rows"], 2);
}

/// A database whose documents have arrays and nested objects, with an
/// index of every field.
async fn shelf(c: &Client) {
    assert_eq!(c.put("/shelf", json!({})).await.status, 201);
    let docs: Vec<Value> = (0..30)
        .map(|i| {
            let genre = ["fiction", "poetry", "history"][i % 3];
            json!({
                "_id": format!("b{i:02}"),
                "n": i,
                "title": format!("book {i}"),
                "genre": genre,
                "tags": if i % 2 == 0 { json!(["red", "blue"]) } else { json!(["green"]) },
                "author": {"name": format!("author{}", i % 5)},
                "blurb": if i == 7 { "a lucky seven" } else { "plain" },
            })
        })
        .collect();
    let mut docs = docs;
    docs.push(json!({"_id": "loose", "title": "no number here"}));
    let reply = c.post("/shelf/_bulk_docs", json!({ "docs": docs })).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let made = c
        .post(
            "/shelf/_index",
            json!({"type": "nouveau", "ddoc": "t", "name": "all", "index": {}}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
}

#[tokio::test]
async fn operators_paging_and_explain() {
    let s = start("search-mango-operators");
    let c = &s.c;
    shelf(c).await;
    let q = |selector: Value| json!({"selector": selector, "limit": 100, "sort": ["_id:string"]});

    let resp = find(c, "/shelf/_find", q(json!({"n": {"$exists": false}}))).await;
    assert_eq!(ids(&resp), ["loose"]);
    let resp = find(c, "/shelf/_find", q(json!({"n": {"$in": [3, 4, 99]}}))).await;
    assert_eq!(ids(&resp), ["b03", "b04"]);
    let resp = find(
        c,
        "/shelf/_find",
        q(json!({"$or": [{"n": 1}, {"genre": "history", "n": {"$lt": 6}}]})),
    )
    .await;
    assert_eq!(ids(&resp), ["b01", "b02", "b05"]);
    let resp = find(
        c,
        "/shelf/_find",
        q(json!({"tags": {"$elemMatch": {"$eq": "blue"}}, "n": {"$lte": 4}})),
    )
    .await;
    assert_eq!(ids(&resp), ["b00", "b02", "b04"]);
    // `$regex` asks the index for the field, then matches.
    let resp = find(
        c,
        "/shelf/_find",
        q(json!({"title": {"$regex": "^book 1[0-2]$"}})),
    )
    .await;
    assert_eq!(ids(&resp), ["b10", "b11", "b12"]);
    let resp = find(
        c,
        "/shelf/_find",
        q(json!({"author.name": "author3", "n": {"$gt": 10}})),
    )
    .await;
    assert_eq!(ids(&resp), ["b13", "b18", "b23", "b28"]);
    let resp = find(c, "/shelf/_find", q(json!({"$text": "lucky"}))).await;
    assert_eq!(ids(&resp), ["b07"]);
    let resp = find(
        c,
        "/shelf/_find",
        json!({"selector": {"n": {"$gte": 0}}, "use_index": ["t", "all"], "limit": 2, "sort": [{"n:number": "desc"}], "execution_stats": true}),
    )
    .await;
    assert_eq!(ids(&resp), ["b29", "b28"]);
    assert_eq!(resp["execution_stats"]["results_returned"], 2);
    assert_eq!(resp["execution_stats"]["total_keys_examined"], 0);

    // Two `$text` are refused.
    let two = c
        .post(
            "/shelf/_find",
            json!({"selector": {"$and": [{"$text": "a"}, {"$text": "b"}]}}),
        )
        .await;
    assert_eq!(two.status, 400, "{}", two.text);
    assert_eq!(two.json()["error"], "multiple_text_selector");
    assert!(
        two.json()["reason"]
            .as_str()
            .unwrap()
            .starts_with("Selector cannot contain more than one $text operator: ")
    );

    // Paging by bookmark: every document once.
    let mut seen = Vec::new();
    let mut bookmark: Option<String> = None;
    for _ in 0..10 {
        let mut body = json!({"selector": {"n": {"$gte": 0}}, "limit": 7, "sort": ["n:number"]});
        if let Some(b) = &bookmark {
            body["bookmark"] = json!(b);
        }
        let resp = find(c, "/shelf/_find", body).await;
        let page: Vec<String> = ids(&resp).iter().map(|s| s.to_string()).collect();
        if page.is_empty() {
            break;
        }
        seen.extend(page);
        bookmark = Some(resp["bookmark"].as_str().unwrap().to_string());
    }
    let expected: Vec<String> = (0..30).map(|i| format!("b{i:02}")).collect();
    assert_eq!(seen, expected);

    // `skip` counts matches.
    let resp = find(
        c,
        "/shelf/_find",
        json!({"selector": {"n": {"$gte": 0}}, "skip": 28, "sort": ["n:number"]}),
    )
    .await;
    assert_eq!(ids(&resp), ["b28", "b29"]);

    let explained = find(
        c,
        "/shelf/_explain",
        json!({"selector": {"n": {"$gt": 5}}, "sort": [{"n:number": "desc"}]}),
    )
    .await;
    assert_eq!(explained["index"]["type"], "nouveau");
    assert_eq!(explained["index"]["ddoc"], "_design/t");
    assert_eq!(explained["query"], "(n_3Anumber:{5 TO *])");
    assert_eq!(explained["sort"], json!(["-n_3Anumber"]));
    assert_eq!(explained["partition"], Value::Null);
    assert_eq!(explained["dbname"], "shelf");
}

/// `$size` asks `tags.[]:length`, a double whose name has a dot.
#[tokio::test]
async fn size_asks_the_array_length() {
    let s = start("search-mango-size");
    let c = &s.c;
    shelf(c).await;
    let resp = find(
        c,
        "/shelf/_find",
        json!({"selector": {"tags": {"$size": 1}, "n": {"$lt": 5}}, "sort": ["_id:string"]}),
    )
    .await;
    assert_eq!(ids(&resp), ["b01", "b03"]);
}

async fn add_user(admin: &Client, name: &str) {
    let created = admin
        .put(
            &format!("/_users/org.couchdb.user:{name}"),
            json!({"name": name, "password": PASSWORD, "roles": [], "type": "user"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
}

#[tokio::test]
async fn a_members_text_query_finds_only_their_documents() {
    let s = start("search-mango-access");
    let admin = &s.c;
    add_user(admin, "alice").await;
    add_user(admin, "bob").await;
    assert_eq!(admin.put("/db?access=true", json!(null)).await.status, 201);
    let security = json!({"members": {"names": ["alice", "bob"]}});
    assert_eq!(admin.put("/db/_security", security).await.status, 200);
    let docs = json!({"docs": [
        {"_id": "a1", "_access": ["alice"], "text": "secret plans"},
        {"_id": "b1", "_access": ["bob"], "text": "secret plans of bob"},
        {"_id": "ab", "_access": ["alice", "bob"], "text": "shared secret"},
        {"_id": "x1", "text": "admins only secret"},
    ]});
    assert_eq!(admin.post("/db/_bulk_docs", docs).await.status, 201);
    let made = admin
        .post(
            "/db/_index",
            json!({"type": "nouveau", "index": {"fields": [{"name": "text", "type": "text"}]}}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let alice = Client::at(&s.server.plain_url.replacen(
        "http://",
        &format!("http://alice:{PASSWORD}@"),
        1,
    ));
    let query = json!({"selector": {"$text": "secret"}, "sort": ["_id:string"]});
    let mine = find(&alice, "/db/_find", query.clone()).await;
    assert_eq!(ids(&mine), ["a1", "ab"]);
    let all = find(admin, "/db/_find", query).await;
    assert_eq!(ids(&all), ["a1", "ab", "b1", "x1"]);
}
