//! Every route family tried by every role, in a plain database, `_users`,
//! `_replicator` and a database with per-document access: one table of the answers CouchDB 3.5 gives (or the
//! stricter ones Recliner gives where CouchDB leaks). The database with
//! per-document access has roles of its own (members named in a
//! document's `_access`, not named in it, or admitted by a role), and
//! beyond its statuses a member not named sees nothing of the document:
//! every answer about it is byte for byte a missing document's, and no
//! listing or search answer carries its id, its field values or a count
//! that includes it. Every answer of
//! Recliner's carries the sandbox policy and `nosniff`, stored content and
//! function answers included. With the reference
//! CouchDB at hand (`COUCHDB_URL`), the plain database's rows marked as
//! CouchDB's are asked of it too and must agree. The special databases are
//! Recliner's only: opening the shared reference's `_users` to test users
//! would change what its other tests see.

mod cast;
mod per_doc;
mod plain;
mod rows;
mod special;
mod unnamed;

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

use crate::cast::{Cast, design_doc};
use crate::per_doc::{ACCESS_ROLES, access_database, access_rows};
use crate::plain::{plain_content, plain_rows};
use crate::special::{replicator_rows, users_rows};
use crate::unnamed::{NOT_FOR_UNNAMED, listings, unlike_missing};

const TEST_ADMIN: (&str, &str) = ("RECLINER_ADMIN", "admin:test-secret");

#[tokio::test]
async fn every_route_answers_every_role_as_the_table_says() {
    let data = TempDir::new("access-matrix");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_USERS_DB_SECURITY_EDITABLE", "true"), TEST_ADMIN],
    );
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    for db in ["plain", "_users", "_replicator"] {
        cast.prepare(&admin, db, design_doc()).await;
    }
    let access_clients = access_database(&admin, &base, &cast, "perdoc").await;
    plain_content(&admin, "plain").await;
    let theirs = json!({"source": "http://x:secret@127.0.0.1:9/a", "target": "http://127.0.0.1:9/b", "owner": "admin"});
    assert_eq!(admin.put("/_replicator/theirs", theirs).await.status, 201);

    let mut wrong = cast.run("plain", &plain_rows(), false).await;
    wrong.extend(cast.run("_users", &users_rows(), false).await);
    wrong.extend(cast.run("_replicator", &replicator_rows(), false).await);
    wrong.extend(
        cast.run_as(
            "perdoc",
            &access_rows(),
            &ACCESS_ROLES,
            &access_clients,
            false,
        )
        .await,
    );
    assert!(
        wrong.is_empty(),
        "{} answers differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // What a member sees of another's replication is without credentials.
    let member = &cast.clients[2];
    let seen = member.get("/_replicator/theirs").await;
    assert!(!seen.text.contains("secret"), "{}", seen.text);
}

#[tokio::test]
async fn a_member_not_named_sees_nothing_of_the_document() {
    let data = TempDir::new("access-matrix-unnamed");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    let clients = access_database(&admin, &base, &cast, "perdoc").await;
    let (named, unnamed, byrole) = (&clients[2], &clients[3], &clients[4]);
    let rev_of = |id: &'static str| {
        let admin = admin.clone();
        async move {
            admin.get(&format!("/perdoc/{id}")).await.json()["_rev"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };

    // The indexes are last built while `unnamed` read `was-shared`; then
    // `unnamed` is taken off it (its feed shows that as a deletion of
    // its own, and nothing else shows it).
    let was_shared = json!({"_access": [cast.name("member"), cast.name("unnamed")],
                            "v": 1, "kind": "bygone", "secret": "quartz osprey"});
    let made = admin.put("/perdoc/was-shared", was_shared).await;
    assert_eq!(made.status, 201, "{}", made.text);
    for (method, path, body) in [
        ("GET", "/perdoc/_design/find/_nouveau/words?q=*:*", None),
        ("GET", "/perdoc/_design/find/_search/words?q=*:*", None),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}})),
        ),
    ] {
        let built = admin.send(method, path, body, &[]).await;
        assert_eq!(built.status, 200, "{method} {path}: {}", built.text);
        assert!(built.text.contains("was-shared"), "{}", built.text);
    }
    let mut taken = admin.get("/perdoc/was-shared").await.json();
    taken["_access"] = json!([cast.name("member")]);
    assert_eq!(admin.put("/perdoc/was-shared", taken).await.status, 201);

    // Listings and searches, stale ones first: nothing of the document,
    // and counts of `unnamed-own` alone.
    let mut wrong = Vec::new();
    for (method, path, body) in listings() {
        let answer = unnamed.send(method, path, body.clone(), &[]).await;
        if answer.status != 200 {
            wrong.push(format!(
                "unnamed: {method} {path}: {} {}",
                answer.status, answer.text
            ));
        }
        // Its feed shows `was-shared` taken from it, as a deletion.
        let feed = path.contains("_changes") && !path.contains("_selector");
        let secrets = NOT_FOR_UNNAMED
            .iter()
            .chain((!feed).then_some(&"was-shared"))
            .chain(&["osprey", "bygone"]);
        for secret in secrets {
            if answer.text.contains(secret) {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path} shows {secret:?}: {}",
                    answer.text
                ));
            }
        }
        let found = serde_json::from_str::<Value>(&answer.text).unwrap_or(Value::Null);
        let own = if path.contains("quartz")
            || body
                .as_ref()
                .is_some_and(|b| b.to_string().contains("quartz"))
            || path.contains("drilldown")
        {
            0
        } else {
            1
        };
        let own_counts = if own == 0 {
            json!({"kind": {}})
        } else {
            json!({"kind": {"ordinary": 1}})
        };
        for (figure, expected) in [
            ("total_hits", json!(own)),
            ("total_rows", json!(own)),
            ("doc_count", json!(own)),
            ("counts", own_counts),
        ] {
            if let Some(got) = found.get(figure)
                && !(figure == "counts" && got.is_null())
                && *got != expected
            {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path}: {figure} {got}, expected {expected} (of its own documents)"
                ));
            }
        }
        // What a query examined is of its own one document.
        let stats = &found["execution_stats"];
        for figure in ["total_keys_examined", "total_docs_examined"] {
            if stats.get(figure).is_some_and(|n| n.as_u64() > Some(1)) {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path}: {figure} {}, of one document of its own",
                    stats[figure]
                ));
            }
        }
        // Those the document names find it where it is asked for (the
        // check above can see a leak).
        if path.contains("*:*") && path.contains("include_docs") {
            for reader in [named, byrole] {
                let answer = reader.send(method, path, body.clone(), &[]).await;
                assert!(
                    answer.text.contains("shared-note") && answer.text.contains("quartz"),
                    "{method} {path}: {}",
                    answer.text
                );
            }
        }
    }

    // Every answer about another's document is a missing document's.
    let note_rev = rev_of("shared-note").await;
    let hidden_rev = rev_of("admins-only").await;
    let own_rev = rev_of("unnamed-own").await;
    let unnamed_name = cast.name("unnamed");
    let member_name = cast.name("member");
    let byrole_name = cast.name("byrole");
    for (client, user, other, rev) in [
        (unnamed, unnamed_name.as_str(), "shared-note", &note_rev),
        (unnamed, unnamed_name.as_str(), "admins-only", &hidden_rev),
        (named, member_name.as_str(), "admins-only", &hidden_rev),
        (named, member_name.as_str(), "unnamed-own", &own_rev),
        (byrole, byrole_name.as_str(), "unnamed-own", &own_rev),
    ] {
        wrong.extend(unlike_missing(client, user, other, rev).await);
    }
    assert!(
        wrong.is_empty(),
        "{} answers show what they should not:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Nothing was written by those refusals.
    assert_eq!(rev_of("shared-note").await, note_rev);
    assert_eq!(admin.get("/perdoc/copied-by-a-member").await.status, 404);
    let listed = unnamed.get("/perdoc/_all_docs").await.json();
    assert_eq!(listed["total_rows"], 1, "{listed}");
}

/// The same local replication run by different users of a database with
/// per-document access copies what each may read: one user's checkpoint
/// (which records how far *their* feed was read) is not another's.
#[tokio::test]
async fn a_replications_checkpoint_is_its_users_own() {
    let data = TempDir::new("access-matrix-checkpoints");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    let clients = access_database(&admin, &base, &cast, "perdoc").await;
    let (named, unnamed) = (&clients[2], &clients[3]);
    let members = json!({"members": {"names": [cast.name("member"), cast.name("unnamed")]}});
    for target in ["copy", "copy-with-access"] {
        let query = if target == "copy" { "" } else { "?access=true" };
        let made = admin.put(&format!("/{target}{query}"), json!(null)).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let set = admin
            .put(&format!("/{target}/_security"), members.clone())
            .await;
        assert_eq!(set.status, 200, "{}", set.text);
    }
    let mut wrong = Vec::new();
    let ids = |reply: Value| -> Vec<String> {
        reply["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .filter(|id| !id.starts_with("_design/"))
            .map(str::to_string)
            .collect()
    };

    // `named` copies theirs first; then the server admin runs the same
    // replication, which must copy every document.
    let spec = json!({"source": "perdoc", "target": "copy"});
    let first = named.post("/_replicate", spec.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(
        ids(admin.get("/copy/_all_docs").await.json()),
        ["shared-note"]
    );
    let all = admin.post("/_replicate", spec).await;
    assert_eq!(all.status, 200, "{}", all.text);
    let copied = ids(admin.get("/copy/_all_docs").await.json());
    if copied != ["admins-only", "shared-note", "unnamed-own"] {
        wrong.push(format!(
            "POST /_replicate {{\"source\": \"perdoc\", \"target\": \"copy\"}} as the server admin, \
             after the same as a member, copied only {copied:?}: it resumed from the member's \
             checkpoint (the replication id of local peers does not include the user): {}",
            all.text
        ));
    }

    // Into a database with per-document access: `named` first, then
    // `unnamed`, whose replication must copy theirs too.
    let spec = json!({"source": "perdoc", "target": "copy-with-access"});
    let first = named.post("/_replicate", spec.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let second = unnamed.post("/_replicate", spec).await;
    let copied = ids(admin.get("/copy-with-access/_all_docs").await.json());
    if second.status != 200 || copied != ["shared-note", "unnamed-own"] {
        wrong.push(format!(
            "POST /_replicate {{\"source\": \"perdoc\", \"target\": \"copy-with-access\"}} as a \
             second member answered {} {} and the target holds {copied:?}: the checkpoint the \
             first member wrote is theirs, and refused to the second",
            second.status, second.text
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn couchdb_answers_the_plain_database_rows_the_same() {
    let Some(reference) = couchdb("couchdb_answers_the_plain_database_rows_the_same") else {
        return;
    };
    let admin = reference.client();
    let prefix = format!("{}-", unique_db("m"));
    let cast = Cast::create(&admin, reference.url(), &prefix).await;
    let db = unique_db("matrix");
    cast.prepare(&admin, &db, design_doc()).await;
    plain_content(&admin, &db).await;
    let wrong = cast.run(&db, &plain_rows(), true).await;
    let _ = admin.delete(&format!("/{db}")).await;
    assert!(
        wrong.is_empty(),
        "CouchDB answers differently:\n{}",
        wrong.join("\n")
    );
}
