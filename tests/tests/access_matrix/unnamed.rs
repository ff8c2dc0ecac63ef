//! What a member not named in a document may ask about it, and the
//! listings and searches it may ask: the requests, and the comparison of
//! its answers with a missing document's.

use recliner_tests::Client;
use serde_json::{Value, json};

/// What of `shared-note` and `admins-only` may show to someone who may
/// not read them: nothing (their ids and every field value).
pub(crate) const NOT_FOR_UNNAMED: [&str; 7] = [
    "shared-note",
    "quartz",
    "heron",
    "classified",
    "admins-only",
    "falcon",
    "restricted",
];

/// A document id nobody wrote.
const NOTHING: &str = "nothing-here";

/// A request: method, path, body and headers.
type Request = (
    &'static str,
    &'static str,
    Option<Value>,
    Vec<(&'static str, &'static str)>,
);

/// Requests about one document (`{id}`, `{rev}` and `{self}` filled in),
/// each asked of a document the caller may not read and of `NOTHING`.
fn about_one_document() -> Vec<Request> {
    let none = Vec::new;
    vec![
        ("GET", "/perdoc/{id}", None, none()),
        ("HEAD", "/perdoc/{id}", None, none()),
        ("GET", "/perdoc/{id}?open_revs=all", None, none()),
        (
            "GET",
            "/perdoc/{id}?open_revs=all",
            None,
            vec![("accept", "multipart/mixed")],
        ),
        (
            "GET",
            "/perdoc/{id}?open_revs=%5B%22{rev}%22%5D",
            None,
            none(),
        ),
        ("GET", "/perdoc/{id}?rev={rev}", None, none()),
        (
            "GET",
            "/perdoc/{id}?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&meta=true",
            None,
            none(),
        ),
        ("GET", "/perdoc/{id}?attachments=true", None, none()),
        ("GET", "/perdoc/{id}/a.txt", None, none()),
        ("HEAD", "/perdoc/{id}/a.txt", None, none()),
        ("GET", "/perdoc/{id}/a.txt?rev={rev}", None, none()),
        (
            "POST",
            "/perdoc/_bulk_get",
            Some(json!({"docs": [{"id": "{id}"}]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_bulk_get?revs=true",
            Some(json!({"docs": [{"id": "{id}", "rev": "{rev}"}]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_all_docs",
            Some(json!({"keys": ["{id}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_all_docs/queries",
            Some(json!({"queries": [{"keys": ["{id}"], "include_docs": true}, {}]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_all_docs?include_docs=true&conflicts=true",
            Some(json!({"keys": ["{id}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_revs_diff",
            Some(json!({"{id}": ["{rev}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_missing_revs",
            Some(json!({"{id}": ["{rev}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_changes?filter=_doc_ids&include_docs=true",
            Some(json!({"doc_ids": ["{id}"]})),
            none(),
        ),
        (
            "GET",
            "/perdoc/_changes?filter=_doc_ids&doc_ids=%5B%22{id}%22%5D",
            None,
            none(),
        ),
        // Writes with a revision: refused as for a document nobody wrote.
        (
            "PUT",
            "/perdoc/{id}",
            Some(json!({"_rev": "{rev}", "_access": ["{self}"]})),
            none(),
        ),
        (
            "PUT",
            "/perdoc/{id}/b.txt?rev={rev}",
            Some(json!("b")),
            none(),
        ),
        ("DELETE", "/perdoc/{id}?rev={rev}", None, none()),
        ("DELETE", "/perdoc/{id}/a.txt?rev={rev}", None, none()),
        (
            "POST",
            "/perdoc/_bulk_docs",
            Some(json!({"docs": [{"_id": "{id}", "_rev": "{rev}", "_access": ["{self}"]}]})),
            none(),
        ),
        (
            "COPY",
            "/perdoc/{id}",
            None,
            vec![("destination", "copied-by-a-member")],
        ),
    ]
}

/// The answers of `client` (logged in as `user`) about `other`, a
/// document it may not read, that differ from its answers about a
/// document nobody wrote: status, body (with the id in place),
/// content type, whether it has an ETag, or (for HEAD) length.
pub(crate) async fn unlike_missing(
    client: &Client,
    user: &str,
    other: &str,
    rev: &str,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (method, path, body, headers) in about_one_document() {
        let fill = |text: &str, id: &str| {
            text.replace("{id}", id)
                .replace("{rev}", rev)
                .replace("{self}", user)
        };
        let mut answers = Vec::new();
        for id in [other, NOTHING] {
            let body = body
                .as_ref()
                .map(|b| serde_json::from_str(&fill(&b.to_string(), id)).unwrap_or(Value::Null));
            let answer = client.send(method, &fill(path, id), body, &headers).await;
            // A HEAD answer's length is its GET's.
            let length = (method == "HEAD")
                .then(|| answer.header("content-length").map(str::to_string))
                .flatten();
            answers.push((
                answer.status,
                answer.text.replace(id, NOTHING),
                answer.header("content-type").map(str::to_string),
                // A feed's tag is of its query, which names the id.
                answer.header("etag").is_some(),
                length,
            ));
        }
        if answers[0] != answers[1] {
            wrong.push(format!(
                "LEAK {user}: {method} {} answers {:?}, where a missing document's answer is {:?}",
                fill(path, other),
                answers[0],
                answers[1]
            ));
        }
    }
    wrong
}

/// Listing and search requests of the database with per-document access:
/// the first of each pair is asked before any fresh query, of indexes last
/// built while `unnamed` still read `shared-note`.
pub(crate) fn listings() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        (
            "GET",
            "/perdoc/_design/find/_nouveau/words?q=*:*&update=false&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&stale=ok&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}, "update": false})),
        ),
        (
            "GET",
            "/perdoc/_design/find/_nouveau/words?q=*:*&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}})),
        ),
        (
            "POST",
            "/perdoc/_design/find/_nouveau/words",
            Some(json!({"q": "secret:quartz", "counts": ["kind"], "include_docs": true})),
        ),
        (
            "POST",
            "/perdoc/_design/find/_search/words",
            Some(json!({"q": "secret:quartz", "counts": ["kind"], "include_docs": true})),
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&group_field=kind",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&drilldown=%5B%22kind%22%2C%22classified%22%5D",
            None,
        ),
        ("GET", "/perdoc", None),
        ("GET", "/perdoc/_all_docs?include_docs=true", None),
        ("GET", "/perdoc/_changes?include_docs=true", None),
        (
            "GET",
            "/perdoc/_changes?feed=longpoll&include_docs=true",
            None,
        ),
        (
            "POST",
            "/perdoc/_changes?filter=_selector&include_docs=true",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"secret": {"$regex": "quartz"}}, "execution_stats": true})),
        ),
        (
            "POST",
            "/perdoc/_explain",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
    ]
}
