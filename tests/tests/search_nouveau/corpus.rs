//! The elixir test's corpus, design documents and request helpers.

pub(crate) use recliner_tests::{Client, Reply, TempDir, TestServer, percent_encode, seq_num};
use serde_json::{Value, json};

/// The search route of the corpus's index in database `db`.
pub(crate) const SEARCH: &str = "/db/_design/foo/_nouveau/bar";
/// Its info route.
pub(crate) const INFO: &str = "/db/_design/foo/_nouveau_info/bar";

/// A server with a database `db` holding the elixir test's corpus and its
/// design document. Fields drop in order: the server stops before its data
/// folder goes.
pub(crate) struct Corpus {
    pub(crate) c: Client,
    pub(crate) server: TestServer,
    pub(crate) _data: TempDir,
}

impl Corpus {
    pub(crate) async fn new(label: &str) -> Corpus {
        let corpus = Corpus::empty(label);
        create_db(&corpus.c, "db").await;
        create_search_docs(&corpus.c, "db").await;
        create_ddoc(&corpus.c, "db", default_ddoc()).await;
        corpus
    }

    /// A server with no database yet.
    pub(crate) fn empty(label: &str) -> Corpus {
        let data = TempDir::new(label);
        let server = TestServer::start(data.path(), &[]);
        let c = Client::new(&server);
        Corpus {
            c,
            server,
            _data: data,
        }
    }
}

pub(crate) async fn create_db(c: &Client, db: &str) {
    let made = c.put(&format!("/{db}"), json!({})).await;
    assert_eq!(made.status, 201, "{}", made.text);
}

/// The elixir test's `create_search_docs`; returns `_bulk_docs`'s rows
/// (doc4 first, as sent).
pub(crate) async fn create_search_docs(c: &Client, db: &str) -> Value {
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
    reply.json()
}

/// The elixir test's `create_conflicted_search_docs` (`new_edits: false`).
pub(crate) async fn create_conflicted_search_docs(c: &Client, db: &str) {
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"docs": [
                // doc4: conflict between 1-a and 1-b, 1-b wins, 1-b will be purged
                {"_id": "doc4", "foo": "foo", "bar": 42, "baz": "hello there",
                 "_revisions": {"start": 1, "ids": ["a"]}},
                {"_id": "doc4", "foo": "fooX", "bar": 43, "baz": "hello thereX",
                 "_revisions": {"start": 1, "ids": ["b"]}},
                // doc3: conflict between 1-a deleted and 2-c
                {"_id": "doc3", "foo": "bar", "bar": 12.0, "baz": "hello",
                 "_revisions": {"start": 1, "ids": ["a"]}, "_deleted": true},
                {"_id": "doc3", "foo": "barX", "bar": 13.0, "baz": "helloX",
                 "_revisions": {"start": 2, "ids": ["c", "b"]}},
                // doc1: conflict between 1-a and 2-c, 2-c is deleted
                {"_id": "doc1", "foo": "baz", "bar": 0, "baz": "there",
                 "_revisions": {"start": 1, "ids": ["a"]}},
                {"_id": "doc1", "foo": "bazX", "bar": 1, "baz": "thereX",
                 "_revisions": {"start": 2, "ids": ["c", "b"]}, "_deleted": true},
                // doc2: 2-b is deleted
                {"_id": "doc2", "foo": "foobar", "bar": 100, "baz": "hi",
                 "_revisions": {"start": 2, "ids": ["b", "a"]}, "_deleted": true},
            ], "new_edits": false}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// The elixir test's `create_partitioned_search_docs`.
pub(crate) async fn create_partitioned_search_docs(c: &Client, db: &str) {
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"docs": [
                {"_id": "foo:doc4", "foo": "foo", "bar": 42},
                {"_id": "bar:doc3", "foo": "bar", "bar": 12.0},
                {"_id": "foo:doc1", "foo": "baz", "bar": 0},
                {"_id": "bar:doc2", "foo": "foobar", "bar": 100},
            ]}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// The elixir test's default design document: index `bar` with a string
/// `foo`, a double `bar` (both stored), a stored `baz` (= doc.foo) and a
/// text `txt` (= doc.baz).
pub(crate) fn default_ddoc() -> Value {
    index_ddoc(
        r#"function (doc) {
              index("string", "foo", doc.foo, {store: true});
              index("double", "bar", doc.bar, {store: true});
              index("stored", "baz", doc.foo);
              if (doc.baz) {index("text", "txt", doc.baz);}
            }"#,
    )
}

/// A design document with one nouveau index `bar` running `source`.
pub(crate) fn index_ddoc(source: &str) -> Value {
    json!({"nouveau": {"bar": {"default_analyzer": "standard", "index": source}}})
}

pub(crate) async fn create_ddoc(c: &Client, db: &str, ddoc: Value) {
    let made = c.put(&format!("/{db}/_design/foo"), ddoc).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.json()["ok"], true, "{}", made.text);
}

/// `?k=v&...`, each value percent-encoded.
pub(crate) fn query(params: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect();
    format!("?{}", pairs.join("&"))
}

/// `GET path?params`, which must answer 200; its body.
pub(crate) async fn search_get(c: &Client, path: &str, params: &[(&str, &str)]) -> Value {
    let reply = c.get(&format!("{path}{}", query(params))).await;
    assert_eq!(reply.status, 200, "GET {path} {params:?}: {}", reply.text);
    reply.json()
}

/// `POST path` with `body`, which must answer 200; its body.
pub(crate) async fn search_post(c: &Client, path: &str, body: Value) -> Value {
    let reply = c.post(path, body.clone()).await;
    assert_eq!(reply.status, 200, "POST {path} {body}: {}", reply.text);
    reply.json()
}

pub(crate) fn hits(results: &Value) -> &Vec<Value> {
    results["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("hits is an array: {results}"))
}

/// The `_id`s of the hits' documents (`include_docs=true`), in order, as
/// the elixir test's `get_ids`.
pub(crate) fn doc_ids(results: &Value) -> Vec<String> {
    hits(results)
        .iter()
        .map(|hit| {
            hit["doc"]["_id"]
                .as_str()
                .unwrap_or_else(|| panic!("a hit with its doc: {hit}"))
                .to_string()
        })
        .collect()
}

/// The hits' `id`s, in order.
pub(crate) fn hit_ids(results: &Value) -> Vec<String> {
    hits(results)
        .iter()
        .map(|hit| {
            hit["id"]
                .as_str()
                .unwrap_or_else(|| panic!("a hit with an id: {hit}"))
                .to_string()
        })
        .collect()
}

/// The first `order` value of each hit (the score for relevance sorts).
pub(crate) fn first_order_values(results: &Value) -> Vec<f64> {
    hits(results)
        .iter()
        .map(|hit| {
            hit["order"][0]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("a numeric first order value: {hit}"))
        })
        .collect()
}

/// Checks a hit's stored fields are exactly `foo` (string), `bar` (a
/// double, compared as f64: CouchDB writes `0.0`) and `baz` (string).
pub(crate) fn assert_fields(hit: &Value, foo_value: &str, bar_value: f64, baz_value: &str) {
    let fields = hit["fields"]
        .as_object()
        .unwrap_or_else(|| panic!("fields is an object: {hit}"));
    let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["bar", "baz", "foo"], "{hit}");
    assert_eq!(fields["foo"], foo_value, "{hit}");
    assert_eq!(fields["bar"].as_f64(), Some(bar_value), "{hit}");
    assert_eq!(fields["baz"], baz_value, "{hit}");
}

/// A 400 `query_parse_error` with `reason`.
pub(crate) fn assert_query_parse_error(reply: &Reply, reason: &str) {
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({"error": "query_parse_error", "reason": reason}),
        "{}",
        reply.text
    );
}
