//! The analyzers of the search APIs over HTTP: `POST /_nouveau_analyze`
//! (Nouveau's) and `GET|POST /_search_analyze` (Clouseau's), with
//! CouchDB's examples and errors, for server admins only.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn analyzers_answer_with_tokens_and_couchdbs_errors() {
    let data = TempDir::new("search-analyze");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);

    let analyzed = admin
        .post(
            "/_nouveau_analyze",
            json!({"analyzer": "standard", "text": "hello there"}),
        )
        .await;
    assert_eq!(analyzed.status, 200, "{}", analyzed.text);
    assert_eq!(analyzed.json(), json!({"tokens": ["hello", "there"]}));
    for (analyzer, tokens) in [
        ("standard", json!(["ablanks", "renovations.com"])),
        ("keyword", json!(["ablanks@renovations.com"])),
        ("email", json!(["ablanks@renovations.com"])),
        ("simple", json!(["ablanks", "renovations", "com"])),
    ] {
        let reply = admin
            .post(
                "/_nouveau_analyze",
                json!({"analyzer": analyzer, "text": "ablanks@renovations.com"}),
            )
            .await;
        assert_eq!(reply.json()["tokens"], tokens, "{analyzer}");
    }
    let english = admin
        .post(
            "/_nouveau_analyze",
            json!({"analyzer": "english", "text": "The runners were running"}),
        )
        .await;
    assert_eq!(english.json()["tokens"], json!(["runner", "were", "run"]));
    // Snowball stemmers beyond tantivy's, and Lucene's CJK bigrams.
    for (analyzer, text, tokens) in [
        (
            "polish",
            "książki w bibliotekach",
            json!(["książk", "w", "bibliotek"]),
        ),
        (
            "cjk",
            "一二三四 한국어",
            json!(["一二", "二三", "三四", "한국", "국어"]),
        ),
    ] {
        let reply = admin
            .post(
                "/_nouveau_analyze",
                json!({"analyzer": analyzer, "text": text}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.json()["tokens"], tokens, "{analyzer}");
    }

    for body in [
        json!({"analyzer": "standard"}),
        json!({"analyzer": "", "text": "x"}),
        json!({"analyzer": 1, "text": "x"}),
    ] {
        let refused = admin.post("/_nouveau_analyze", body).await;
        assert_eq!(refused.status, 400);
        assert_eq!(
            refused.json(),
            json!({"error": "bad_request", "reason": "'text' and 'analyzer' fields must be non-empty strings"})
        );
    }
    let unknown = admin
        .post(
            "/_nouveau_analyze",
            json!({"analyzer": "klingon", "text": "x"}),
        )
        .await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.json()["reason"], "klingon not a valid analyzer");
    // Lucene's analyzers with dictionaries (Thai's word breaker) are not here.
    let thai = admin
        .post(
            "/_nouveau_analyze",
            json!({"analyzer": "thai", "text": "x"}),
        )
        .await;
    assert_eq!(thai.status, 400);
    assert_eq!(thai.json()["reason"], "thai not a valid analyzer");
    assert_eq!(admin.get("/_nouveau_analyze").await.status, 405);

    // Clouseau's form: GET parameters or a JSON body.
    let get = admin
        .get("/_search_analyze?analyzer=standard&text=Hello%20World")
        .await;
    assert_eq!(get.json(), json!({"tokens": ["hello", "world"]}));
    let post = admin
        .post(
            "/_search_analyze",
            json!({"analyzer": {"name": "perfield", "default": "keyword"}, "text": "A B"}),
        )
        .await;
    assert_eq!(post.json(), json!({"tokens": ["A B"]}));
    for (path, reason) in [
        ("/_search_analyze?text=x", "analyzer parameter is mandatory"),
        (
            "/_search_analyze?analyzer=standard",
            "text parameter is mandatory",
        ),
    ] {
        let refused = admin.get(path).await;
        assert_eq!(refused.status, 400);
        assert_eq!(refused.json()["reason"], reason);
    }
    let typed = admin
        .post("/_search_analyze", json!({"analyzer": 3, "text": "x"}))
        .await;
    assert_eq!(
        typed.json()["reason"],
        "analyzer parameter must be a string or an object"
    );

    // For server admins.
    let anonymous = Client::anonymous(&server);
    let refused = anonymous
        .post(
            "/_nouveau_analyze",
            json!({"analyzer": "standard", "text": "x"}),
        )
        .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
}
