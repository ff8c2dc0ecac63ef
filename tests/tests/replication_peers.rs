//! One replication suite over the four pairs of peers: each scenario runs
//! local to local, local to HTTP, HTTP to local and HTTP to HTTP through
//! `POST /_replicate`, and must end the same way. A local peer is a
//! database name; an HTTP peer is the URL of a database of the same
//! server, with credentials, so the job goes through the HTTP peer.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, compare_dbs, without_credentials};
use serde_json::{Value, json};

/// How a replication reaches one of its databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Local,
    Http,
}

/// A source and a target, each local or over HTTP.
#[derive(Debug, Clone, Copy)]
struct Pair {
    source: Kind,
    target: Kind,
}

const LOCAL_TO_LOCAL: Pair = Pair {
    source: Kind::Local,
    target: Kind::Local,
};
const LOCAL_TO_HTTP: Pair = Pair {
    source: Kind::Local,
    target: Kind::Http,
};
const HTTP_TO_LOCAL: Pair = Pair {
    source: Kind::Http,
    target: Kind::Local,
};
const HTTP_TO_HTTP: Pair = Pair {
    source: Kind::Http,
    target: Kind::Http,
};

/// One test server and its admin's client.
struct Setup {
    _data: TempDir,
    server: TestServer,
    admin: Client,
}

impl Setup {
    fn start(label: &str, pair: Pair) -> Setup {
        let data = TempDir::new(&format!("{label}-{pair:?}"));
        let server = TestServer::start(data.path(), &[]);
        let admin = Client::new(&server);
        Setup {
            _data: data,
            server,
            admin,
        }
    }

    /// Database `db` as a peer of the given kind, reached as the admin.
    fn peer(&self, kind: Kind, db: &str) -> Value {
        match kind {
            Kind::Local => json!(db),
            Kind::Http => json!(self.server.url(&format!("/{db}"))),
        }
    }

    /// Database `db` as a peer of the given kind, reached as `user`.
    fn peer_as(&self, kind: Kind, db: &str, user: &str, password: &str) -> Value {
        match kind {
            Kind::Local => json!(db),
            Kind::Http => {
                let plain = without_credentials(&self.server.url);
                let (scheme, host) = plain.split_once("://").unwrap();
                json!(format!("{scheme}://{user}:{password}@{host}/{db}"))
            }
        }
    }

    /// Runs a one-shot replication of `pair` from `source` to `target`
    /// with the extra fields of `extra`, as the admin.
    async fn replicate(&self, pair: Pair, source: &str, target: &str, extra: Value) -> Value {
        let mut body = json!({
            "source": self.peer(pair.source, source),
            "target": self.peer(pair.target, target),
        });
        if let Value::Object(extra) = extra {
            body.as_object_mut().unwrap().extend(extra);
        }
        let answer = self.admin.post("/_replicate", body).await;
        assert_eq!(answer.status, 200, "{pair:?}: {}", answer.text);
        answer.json()
    }

    async fn create(&self, db: &str) {
        let created = self.admin.put(&format!("/{db}"), json!({})).await;
        assert_eq!(created.status, 201, "{db}: {}", created.text);
    }

    /// The ids of `db`'s documents, design documents included, sorted.
    async fn ids(&self, db: &str) -> Vec<String> {
        let rows = self.admin.get(&format!("/{db}/_all_docs")).await.json();
        rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Every leaf of `id` with its history, as `open_revs=all` gives them,
    /// sorted by revision.
    async fn tree(&self, db: &str, id: &str) -> Vec<Value> {
        let path = format!("/{db}/{id}?revs=true&open_revs=all");
        let answer = self.admin.get(&path).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.text);
        let mut leaves: Vec<Value> = answer.json().as_array().unwrap().clone();
        leaves.sort_by_key(|leaf| leaf["ok"]["_rev"].as_str().unwrap_or("").to_string());
        leaves
    }

    /// The bytes and content type of one attachment.
    async fn attachment(&self, db: &str, doc: &str, name: &str) -> (Vec<u8>, String) {
        let answer = self
            .admin
            .http()
            .get(self.admin.url(&format!("/{db}/{doc}/{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{db}/{doc}/{name}");
        let content_type = answer
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (answer.bytes().await.unwrap().to_vec(), content_type)
    }
}

/// Documents with updates, a deletion and a conflict of three branches
/// (one deleted) arrive with the same revision trees.
async fn revision_trees_arrive_whole(pair: Pair) {
    let s = Setup::start("peers-trees", pair);
    s.create("src").await;
    let written = s
        .admin
        .post(
            "/src/_bulk_docs",
            json!({"new_edits": false, "docs": [
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"},
                {"_id": "conflicted", "_revisions": {"start": 3, "ids": ["c3", "c", "a"]}, "side": "c"},
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["d", "a"]}, "_deleted": true},
                {"_id": "edited", "_revisions": {"start": 3, "ids": ["z", "y", "x"]}, "v": 3},
                {"_id": "gone", "_revisions": {"start": 2, "ids": ["g2", "g1"]}, "_deleted": true},
            ]}),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    s.create("dst").await;
    s.replicate(pair, "src", "dst", json!({})).await;
    for id in ["conflicted", "edited", "gone"] {
        let (there, here) = (s.tree("src", id).await, s.tree("dst", id).await);
        assert_eq!(here, there, "{pair:?}: the tree of {id}");
    }
    assert_eq!(s.tree("dst", "conflicted").await.len(), 3, "{pair:?}");
    compare_dbs(&s.admin, "src", &s.admin, "dst").await;
}

/// A binary attachment and a compressible one arrive byte for byte.
async fn attachments_arrive_byte_identical(pair: Pair) {
    let s = Setup::start("peers-atts", pair);
    s.create("src").await;
    let binary: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let text: Vec<u8> = "a line of compressible text that repeats\n"
        .repeat(20_000)
        .into_bytes();
    let first = s
        .admin
        .send_bytes(
            "PUT",
            "/src/files/blob.bin",
            binary.clone(),
            "application/octet-stream",
        )
        .await;
    assert_eq!(first.status, 201, "{}", first.text);
    let rev = first.json()["rev"].as_str().unwrap().to_string();
    let second = s
        .admin
        .send_bytes(
            "PUT",
            &format!("/src/files/notes.txt?rev={rev}"),
            text.clone(),
            "text/plain",
        )
        .await;
    assert_eq!(second.status, 201, "{}", second.text);
    s.create("dst").await;
    s.replicate(pair, "src", "dst", json!({})).await;
    let (bytes, content_type) = s.attachment("dst", "files", "blob.bin").await;
    assert!(bytes == binary, "{pair:?}: the binary attachment differs");
    assert_eq!(content_type, "application/octet-stream", "{pair:?}");
    let (bytes, content_type) = s.attachment("dst", "files", "notes.txt").await;
    assert!(bytes == text, "{pair:?}: the text attachment differs");
    assert!(
        content_type.starts_with("text/plain"),
        "{pair:?}: {content_type}"
    );
    compare_dbs(&s.admin, "src", &s.admin, "dst").await;
}

/// The checkpoint lets a second run find nothing new, and a third run
/// after a new write copies only that.
async fn a_checkpoint_lets_the_next_run_start_where_the_last_ended(pair: Pair) {
    let s = Setup::start("peers-checkpoint", pair);
    s.create("src").await;
    let docs: Vec<Value> = (0..30)
        .map(|i| json!({"_id": format!("d{i:02}")}))
        .collect();
    s.admin.post("/src/_bulk_docs", json!({"docs": docs})).await;
    s.create("dst").await;
    let first = s.replicate(pair, "src", "dst", json!({})).await;
    assert_eq!(first["history"][0]["docs_written"], 30, "{pair:?}: {first}");
    let checkpoints = s.admin.get("/dst/_local_docs").await.json();
    assert!(
        !checkpoints["rows"].as_array().unwrap().is_empty(),
        "{pair:?}: the target holds a checkpoint: {checkpoints}"
    );

    let second = s.replicate(pair, "src", "dst", json!({})).await;
    assert_eq!(second["no_changes"], true, "{pair:?}: {second}");

    s.admin.put("/src/late", json!({"v": 1})).await;
    let third = s.replicate(pair, "src", "dst", json!({})).await;
    assert_eq!(third["history"][0]["docs_written"], 31, "{pair:?}: {third}");
    assert_eq!(
        third["history"][0]["missing_found"], 31,
        "{pair:?}: only the new document was missing: {third}"
    );
    assert_eq!(s.ids("dst").await.len(), 31, "{pair:?}");
}

/// `doc_ids` and a selector copy only the documents they name.
async fn filters_copy_only_what_they_name(pair: Pair) {
    let s = Setup::start("peers-filter", pair);
    s.create("src").await;
    let docs: Vec<Value> = (0..6)
        .map(|i| json!({"_id": format!("d{i}"), "n": i}))
        .collect();
    s.admin.post("/src/_bulk_docs", json!({"docs": docs})).await;
    s.create("by_ids").await;
    s.replicate(pair, "src", "by_ids", json!({"doc_ids": ["d1", "d4"]}))
        .await;
    assert_eq!(s.ids("by_ids").await, ["d1", "d4"], "{pair:?}");
    s.create("by_selector").await;
    s.replicate(
        pair,
        "src",
        "by_selector",
        json!({"selector": {"n": {"$gte": 3}}}),
    )
    .await;
    assert_eq!(s.ids("by_selector").await, ["d3", "d4", "d5"], "{pair:?}");
}

/// `create_target` creates a missing target; without it the replication
/// fails and creates nothing.
async fn create_target_creates_the_target(pair: Pair) {
    let s = Setup::start("peers-create", pair);
    s.create("src").await;
    s.admin.put("/src/one", json!({"v": 1})).await;
    let body = json!({
        "source": s.peer(pair.source, "src"),
        "target": s.peer(pair.target, "absent"),
    });
    let refused = s.admin.post("/_replicate", body).await;
    assert_ne!(refused.status, 200, "{pair:?}: {}", refused.text);
    assert_eq!(s.admin.get("/absent").await.status, 404, "{pair:?}");
    s.replicate(pair, "src", "created", json!({"create_target": true}))
        .await;
    assert_eq!(s.ids("created").await, ["one"], "{pair:?}");
}

/// A user who may not read the source is refused, whichever way the source
/// is reached, and nothing arrives: the status and the answer, for the
/// caller to compare.
async fn a_reader_without_rights_to_the_source_is_refused(pair: Pair) -> (u16, Value) {
    let s = Setup::start("peers-refused", pair);
    for name in ["reader", "owner"] {
        let user = json!({"name": name, "password": "pw", "roles": [], "type": "user"});
        let created = s
            .admin
            .put(&format!("/_users/org.couchdb.user:{name}"), user)
            .await;
        assert_eq!(created.status, 201, "{}", created.text);
    }
    for (db, member) in [("secret", "owner"), ("mine", "reader")] {
        s.create(db).await;
        let security = json!({"members": {"names": [member]}});
        let set = s.admin.put(&format!("/{db}/_security"), security).await;
        assert_eq!(set.status, 200, "{}", set.text);
    }
    s.admin.put("/secret/s1", json!({"card": "4111"})).await;
    let reader = {
        let plain = without_credentials(&s.server.url);
        let (scheme, host) = plain.split_once("://").unwrap();
        Client::at(&format!("{scheme}://reader:pw@{host}"))
    };
    let answer = reader
        .post(
            "/_replicate",
            json!({
                "source": s.peer_as(pair.source, "secret", "reader", "pw"),
                "target": s.peer_as(pair.target, "mine", "reader", "pw"),
            }),
        )
        .await;
    assert_ne!(answer.status, 200, "{pair:?}: {}", answer.text);
    assert!(s.ids("mine").await.is_empty(), "{pair:?}: nothing arrives");
    (answer.status, answer.json())
}

/// Runs `scenario` for one pair (a macro: one `#[tokio::test]` per pair,
/// so a failure names its pair).
macro_rules! for_each_pair {
    ($scenario:ident) => {
        mod $scenario {
            use super::*;

            #[tokio::test]
            async fn local_to_local() {
                super::$scenario(LOCAL_TO_LOCAL).await;
            }

            #[tokio::test]
            async fn local_to_http() {
                super::$scenario(LOCAL_TO_HTTP).await;
            }

            #[tokio::test]
            async fn http_to_local() {
                super::$scenario(HTTP_TO_LOCAL).await;
            }

            #[tokio::test]
            async fn http_to_http() {
                super::$scenario(HTTP_TO_HTTP).await;
            }
        }
    };
}

for_each_pair!(revision_trees_arrive_whole);
for_each_pair!(attachments_arrive_byte_identical);
for_each_pair!(a_checkpoint_lets_the_next_run_start_where_the_last_ended);
for_each_pair!(filters_copy_only_what_they_name);
for_each_pair!(create_target_creates_the_target);

/// The source's refusal is the same in every pair: its own words, and
/// nothing copied. A local source is refused at the door (403, as the
/// source itself answers); a remote one refuses the job's first request,
/// and the failed job carries the source's 403 in its reason.
async fn the_source_refuses_a_reader_alike_in_every_pair(pair: Pair) {
    let (status, answer) = a_reader_without_rights_to_the_source_is_refused(pair).await;
    let reason = answer["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("You are not allowed to access this db."),
        "{pair:?}: {answer}"
    );
    match pair.source {
        Kind::Local => {
            assert_eq!(
                (status, &answer["error"]),
                (403, &json!("forbidden")),
                "{pair:?}"
            )
        }
        Kind::Http => {
            assert_eq!(
                (status, &answer["error"]),
                (500, &json!("replication_failed")),
                "{pair:?}"
            );
            assert!(reason.contains("403: forbidden"), "{pair:?}: {answer}");
        }
    }
}

for_each_pair!(the_source_refuses_a_reader_alike_in_every_pair);
