//! Users databases as CouchDB keeps them: the authentication database holds
//! `_design/_auth` (written when the database is created, its function put
//! back at start), whose function refuses exactly what the server's own
//! rules refuse; design documents there are refused to users as CouchDB
//! refuses them; and a configured `authentication_db` holds the logins and
//! gets the users rules.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// Fewer PBKDF2 rounds than the default, so logins are quick in tests.
const FAST: (&str, &str) = ("RECLINER_PASSWORD_ITERATIONS", "1000");

fn start(data: &TempDir) -> TestServer {
    TestServer::start_with_env(data.path(), &[], &[FAST])
}

/// A client logged in as `name` with `password` by basic auth.
fn as_user(server: &TestServer, name: &str, password: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{password}@"), 1),
    )
}

async fn design_rows(admin: &Client, db: &str) -> Vec<Value> {
    let reply = admin.get(&format!("/{db}/_changes?filter=_design")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn auth_function(admin: &Client, db: &str) -> Option<String> {
    let reply = admin.get(&format!("/{db}/_design/_auth")).await;
    (reply.status == 200).then(|| {
        reply.json()["validate_doc_update"]
            .as_str()
            .unwrap()
            .to_string()
    })
}

#[tokio::test]
async fn the_users_database_is_born_with_design_auth_and_keeps_its_function() {
    let data = TempDir::new("users-ddoc");
    let server = start(&data);
    let admin = Client::new(&server);
    assert_eq!(
        auth_function(&admin, "_users").await.as_deref(),
        Some(auth::users::VALIDATE_FUNCTION)
    );
    let rows = design_rows(&admin, "_users").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], "_design/_auth");

    // A users database created again has it again, from the start.
    assert_eq!(admin.delete("/_users").await.status, 200);
    assert_eq!(admin.put("/_users", json!(null)).await.status, 201);
    assert_eq!(design_rows(&admin, "_users").await.len(), 1);

    // An admin may change it; the server puts the function back at start.
    let doc = admin.get("/_users/_design/_auth").await.json();
    let mut changed = doc.clone();
    changed["validate_doc_update"] = json!("function (newDoc) {}");
    assert_eq!(
        admin.put("/_users/_design/_auth", changed).await.status,
        201
    );
    assert_eq!(
        auth_function(&admin, "_users").await.as_deref(),
        Some("function (newDoc) {}")
    );
    server.stop();
    let server = start(&data);
    let admin = Client::new(&server);
    assert_eq!(
        auth_function(&admin, "_users").await.as_deref(),
        Some(auth::users::VALIDATE_FUNCTION)
    );
    // Another database named for users has no design document made for it.
    assert_eq!(admin.put("/team%2F_users", json!(null)).await.status, 201);
    assert!(design_rows(&admin, "team%2F_users").await.is_empty());
}

#[tokio::test]
async fn design_documents_of_a_users_database_are_refused_as_couchdb_refuses_them() {
    let data = TempDir::new("users-design");
    let server = start(&data);
    let admin = Client::new(&server);
    let user = json!({"name": "ann", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(
        admin.put("/_users/org.couchdb.user:ann", user).await.status,
        201
    );
    let db = "/team%2F_users";
    assert_eq!(admin.put(db, json!(null)).await.status, 201);
    let open = json!({"members": {"names": []}});
    assert_eq!(
        admin.put(&format!("{db}/_security"), open).await.status,
        200
    );
    let ann = as_user(&server, "ann", "pw");
    let anonymous = Client::anonymous(&server);
    let missing = json!({"error": "not_found", "reason": "missing"});
    let not_admin = json!({"error": "unauthorized", "reason": "You are not a db or server admin."});
    let for_admins = json!({"error": "forbidden", "reason": "Only administrators can view design docs in the users database."});

    // A user is told a design document does not exist, by every route.
    let reply = ann.put(&format!("{db}/_design/_auth"), json!({})).await;
    assert_eq!((reply.status, reply.json()), (404, missing.clone()));
    let reply = ann.post(db, json!({"_id": "_design/x"})).await;
    assert_eq!((reply.status, reply.json()), (404, missing.clone()));
    let bulk = json!({"docs": [{"_id": "_design/x"}]});
    let reply = ann.post(&format!("{db}/_bulk_docs"), bulk.clone()).await;
    assert_eq!((reply.status, reply.json()), (404, missing));
    // An anonymous caller that it is for admins.
    let reply = anonymous.put(&format!("{db}/_design/x"), json!({})).await;
    assert_eq!((reply.status, reply.json()), (401, not_admin.clone()));
    let reply = anonymous.post(&format!("{db}/_bulk_docs"), bulk).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.json()[0]["error"], not_admin["error"]);
    // Reading or deleting one is for admins.
    for client in [&ann, &anonymous] {
        let reply = client.get(&format!("{db}/_design/x")).await;
        assert_eq!((reply.status, reply.json()), (403, for_admins.clone()));
        let reply = client.delete(&format!("{db}/_design/x?rev=1-x")).await;
        assert_eq!((reply.status, reply.json()), (403, for_admins.clone()));
    }
    let reply = admin.put(&format!("{db}/_design/x"), json!({})).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// One write, sent by the same caller to `_users` and to a plain database
/// judged by `_design/_auth`'s function alone.
struct Write {
    who: &'static str,
    doc: Value,
}

async fn outcome(client: &Client, db: &str, doc: &Value) -> (u16, Value) {
    let id = doc["_id"].as_str().unwrap();
    let reply = client.put(&format!("/{db}/{id}"), doc.clone()).await;
    let body = reply.json();
    let answer = if reply.status < 300 {
        json!("ok")
    } else {
        body["reason"].clone()
    };
    (reply.status, answer)
}

#[tokio::test]
async fn the_design_function_refuses_what_the_servers_rules_refuse() {
    let data = TempDir::new("users-function");
    // `_users` open to sign-ups, as on CouchDB.
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[FAST, ("RECLINER_USERS_DB_SECURITY_EDITABLE", "true")],
    );
    let admin = Client::new(&server);
    let open = json!({"members": {"names": []}});
    assert_eq!(admin.put("/_users/_security", open).await.status, 200);
    // A plain database whose only rules are the function's.
    let function = auth_function(&admin, "_users").await.unwrap();
    assert_eq!(admin.put("/mirror", json!(null)).await.status, 201);
    let open = json!({"members": {"names": []}});
    assert_eq!(admin.put("/mirror/_security", open).await.status, 200);
    let ddoc = json!({"validate_doc_update": function});
    assert_eq!(admin.put("/mirror/_design/auth", ddoc).await.status, 201);

    // `dan` exists in both, written by an admin with a role.
    let dan =
        json!({"_id": "org.couchdb.user:dan", "name": "dan", "roles": ["staff"], "type": "user"});
    for db in ["_users", "mirror"] {
        let mut doc = dan.clone();
        if db == "_users" {
            doc["password"] = json!("pw");
        }
        let reply = admin.put(&format!("/{db}/org.couchdb.user:dan"), doc).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    let user = |id: &str, name: Value, roles: Value| json!({"_id": format!("org.couchdb.user:{id}"), "name": name, "roles": roles, "type": "user"});
    let with = |mut doc: Value, key: &str, value: Value| {
        doc[key] = value;
        doc
    };
    let without = |mut doc: Value, key: &str| {
        doc.as_object_mut().unwrap().remove(key);
        doc
    };
    let eve = user("eve", json!("eve"), json!([]));
    let writes = vec![
        Write {
            who: "anonymous",
            doc: eve.clone(),
        },
        Write {
            who: "anonymous",
            doc: user("fay", json!("fay"), json!(["x"])),
        },
        Write {
            who: "anonymous",
            doc: without(user("gil", json!("gil"), json!([])), "type"),
        },
        Write {
            who: "anonymous",
            doc: user("hal", Value::Null, json!([])),
        },
        Write {
            who: "anonymous",
            doc: user("ida", json!(""), json!([])),
        },
        Write {
            who: "anonymous",
            doc: user("jo", json!(5), json!([])),
        },
        Write {
            who: "anonymous",
            doc: without(user("kim", json!("kim"), json!([])), "roles"),
        },
        Write {
            who: "anonymous",
            doc: user("lee", json!("lee"), json!("x")),
        },
        Write {
            who: "anonymous",
            doc: user("max", json!("max"), json!([1])),
        },
        Write {
            who: "anonymous",
            doc: user("ned", json!("someone"), json!([])),
        },
        Write {
            who: "anonymous",
            doc: user("_oz", json!("_oz"), json!([])),
        },
        Write {
            who: "anonymous",
            doc: user("p:q", json!("p:q"), json!([])),
        },
        Write {
            who: "anonymous",
            doc: with(
                user("ray", json!("ray"), json!([])),
                "password_scheme",
                json!("md5"),
            ),
        },
        Write {
            who: "anonymous",
            doc: with(
                user("sam", json!("sam"), json!([])),
                "password_scheme",
                json!("pbkdf2"),
            ),
        },
        Write {
            who: "anonymous",
            doc: with(
                user("tom", json!("tom"), json!([])),
                "password_sha",
                json!("abc"),
            ),
        },
        Write {
            who: "admin",
            doc: user("uma", json!("uma"), json!(["_admin"])),
        },
        Write {
            who: "admin",
            doc: user("val", json!("val"), json!(["_metrics", "staff"])),
        },
        Write {
            who: "dan",
            doc: with(dan.clone(), "roles", json!(["staff", "boss"])),
        },
        Write {
            who: "dan",
            doc: with(dan.clone(), "age", json!(40)),
        },
    ];
    let anonymous = Client::anonymous(&server);
    let as_dan = as_user(&server, "dan", "pw");
    for write in &writes {
        let client = match write.who {
            "anonymous" => &anonymous,
            "admin" => &admin,
            _ => &as_dan,
        };
        let mut answers = Vec::new();
        for db in ["_users", "mirror"] {
            let mut doc = write.doc.clone();
            if doc["_id"] == "org.couchdb.user:dan" {
                // An edit of the stored document, which keeps the password's
                // hash (and `_rev`) in `_users`.
                let mut current = admin
                    .get(&format!("/{db}/org.couchdb.user:dan"))
                    .await
                    .json();
                for (key, value) in doc.as_object().unwrap() {
                    current[key] = value.clone();
                }
                doc = current;
            }
            answers.push(outcome(client, db, &doc).await);
        }
        assert_eq!(
            answers[0], answers[1],
            "{} writing {}: the server's rules | the function",
            write.who, write.doc
        );
    }
    // Deletions: only admins and the user themselves.
    for db in ["_users", "mirror"] {
        let current = admin
            .get(&format!("/{db}/org.couchdb.user:dan"))
            .await
            .json();
        let path = format!(
            "/{db}/org.couchdb.user:dan?rev={}",
            current["_rev"].as_str().unwrap()
        );
        let reply = anonymous.delete(&path).await;
        assert_eq!(reply.status, 403, "{db}: {}", reply.text);
        assert_eq!(
            reply.json()["reason"],
            "Only admins may delete other user docs."
        );
    }
}

#[tokio::test]
async fn a_configured_authentication_db_holds_the_logins_and_gets_the_users_rules() {
    let data = TempDir::new("users-authdb");
    let server = start(&data);
    let admin = Client::new(&server);
    let config = |section: &str, key: &str| format!("/_node/_local/_config/{section}/{key}");
    let no_persist = [("X-Couch-Persist", "false")];
    // `frank` may log in from `_users` until the setting names another db.
    let frank = json!({"name": "frank", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(
        admin
            .put("/_users/org.couchdb.user:frank", frank)
            .await
            .status,
        201
    );
    assert_eq!(
        as_user(&server, "frank", "pw")
            .get("/_session")
            .await
            .json()["userCtx"]["name"],
        "frank"
    );
    let session = admin.get("/_session").await.json();
    assert!(
        session["info"].get("authentication_db").is_none(),
        "{session}"
    );

    assert_eq!(admin.put("/accounts", json!(null)).await.status, 201);
    for section in ["chttpd_auth", "couch_httpd_auth"] {
        let reply = admin
            .send(
                "PUT",
                &config(section, "authentication_db"),
                Some(json!("accounts")),
                &no_persist,
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    // The database the setting names gets `_design/_auth`.
    assert!(
        recliner_tests::eventually(10, async || !design_rows(&admin, "accounts")
            .await
            .is_empty())
        .await
    );
    // Its documents get the users rules: passwords hashed, no system roles.
    let carol = json!({"name": "carol", "password": "pw", "roles": ["team"], "type": "user"});
    let reply = admin.put("/accounts/org.couchdb.user:carol", carol).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let stored = admin.get("/accounts/org.couchdb.user:carol").await.json();
    assert!(stored.get("password").is_none() && stored["derived_key"].is_string());
    let boss = json!({"name": "boss", "roles": ["_admin"], "type": "user"});
    let reply = admin.put("/accounts/org.couchdb.user:boss", boss).await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    // Its security object is the protected one.
    let reply = admin.put("/accounts/_security", json!({})).await;
    assert_eq!(reply.status, 403, "{}", reply.text);

    // Basic auth, `_session` and cookies log in against it.
    let session = as_user(&server, "carol", "pw")
        .get("/_session")
        .await
        .json();
    assert_eq!(
        session["userCtx"],
        json!({"name": "carol", "roles": ["team"]})
    );
    assert_eq!(session["info"]["authenticated"], "default");
    assert_eq!(session["info"]["authentication_db"], "accounts");
    let anonymous = Client::anonymous(&server);
    let login = anonymous
        .post("/_session", json!({"name": "carol", "password": "pw"}))
        .await;
    assert_eq!(login.status, 200, "{}", login.text);
    let cookie = login
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let by_cookie = anonymous
        .send("GET", "/_session", None, &[("cookie", cookie.as_str())])
        .await
        .json();
    assert_eq!(by_cookie["userCtx"]["name"], "carol");
    assert_eq!(by_cookie["info"]["authenticated"], "cookie");
    let reply = as_user(&server, "frank", "pw").get("/_session").await;
    assert_eq!(reply.status, 401, "{}", reply.text);

    // Back to `_users`.
    for section in ["chttpd_auth", "couch_httpd_auth"] {
        let path = config(section, "authentication_db");
        let reply = admin.send("DELETE", &path, None, &no_persist).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let reply = as_user(&server, "carol", "pw").get("/_session").await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(
        as_user(&server, "frank", "pw")
            .get("/_session")
            .await
            .json()["userCtx"]["name"],
        "frank"
    );
}

#[tokio::test]
async fn admins_get_the_users_rules_from_design_auth_and_users_always() {
    let data = TempDir::new("users-admin-rules");
    let server = start(&data);
    let admin = Client::new(&server);
    let db = "/team%2F_users";
    assert_eq!(admin.put(db, json!(null)).await.status, 201);
    let open = json!({"members": {"names": []}});
    assert_eq!(
        admin.put(&format!("{db}/_security"), open).await.status,
        200
    );
    let untyped = |name: &str| json!({"_id": format!("org.couchdb.user:{name}"), "name": name, "roles": [], "password": "pw"});
    // No `_design/_auth` here: as on CouchDB, an admin's documents are not
    // judged, but their passwords are hashed all the same.
    let reply = admin.post(db, untyped("ann")).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let stored = admin
        .get(&format!("{db}/org.couchdb.user:ann"))
        .await
        .json();
    assert!(stored.get("password").is_none() && stored["derived_key"].is_string());
    // Users are judged whatever the database holds.
    let reply = Client::anonymous(&server).post(db, untyped("bob")).await;
    assert_eq!(
        (reply.status, reply.json()),
        (
            403,
            json!({"error": "forbidden", "reason": "doc.type must be user"})
        )
    );
    // With `_design/_auth`, admins too.
    let ddoc = json!({"validate_doc_update": auth::users::VALIDATE_FUNCTION});
    let reply = admin.put(&format!("{db}/_design/_auth"), ddoc).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let reply = admin.post(db, untyped("cy")).await;
    assert_eq!(reply.status, 403, "{}", reply.text);
}

/// A user document in conflict logs nobody in, by password or cookie, as
/// CouchDB refuses it (which revision's password counts would be an
/// accident of replication); resolving the conflict lets the user in again.
#[tokio::test]
async fn a_user_document_in_conflict_authenticates_nobody() {
    let data = TempDir::new("users-db-conflict");
    let server = start(&data);
    let admin = Client::new(&server);
    let id = "/_users/org.couchdb.user:conf";
    let user = json!({"name": "conf", "password": "pw-one", "roles": [], "type": "user"});
    assert_eq!(admin.put(id, user).await.status, 201);
    let alice = as_user(&server, "conf", "pw-one");
    assert_eq!(
        alice.get("/_session").await.json()["userCtx"]["name"],
        "conf"
    );

    // A second leaf, as a replication would bring it, with a password
    // someone else knows.
    let mut other = admin.get(id).await.json();
    let winner = other["_rev"].as_str().unwrap().to_string();
    other["_rev"] = json!(format!("1-{}", "f".repeat(32)));
    other["roles"] = json!(["other"]);
    let written = admin
        .post(
            "/_users/_bulk_docs",
            json!({"docs": [other], "new_edits": false}),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    let conflicts = admin.get(&format!("{id}?conflicts=true")).await.json();
    assert!(conflicts["_conflicts"].is_array(), "{conflicts}");

    let reason = "User document conflicts must be resolved before the document is used for authentication purposes.";
    let refused = alice.get("/_session").await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.json()["reason"], reason);
    let cookie_login = Client::anonymous(&server)
        .post("/_session", json!({"name": "conf", "password": "pw-one"}))
        .await;
    assert_eq!(cookie_login.status, 401, "{}", cookie_login.text);
    assert_eq!(cookie_login.json()["reason"], reason);

    // The losing leaf deleted: one revision again, and the login works.
    let loser = if conflicts["_rev"] == winner {
        conflicts["_conflicts"][0].as_str().unwrap().to_string()
    } else {
        winner
    };
    let deleted = admin.delete(&format!("{id}?rev={loser}")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let back = alice.get("/_session").await;
    assert_eq!(back.status, 200, "{}", back.text);
    assert_eq!(back.json()["userCtx"]["name"], "conf");
}

/// `[chttpd_auth] password_regexp`, as CouchDB reads and applies it: every
/// new password must match every pattern (a failing rule's reason follows
/// CouchDB's refusal), whoever writes it; a setting that cannot be read
/// refuses every new password; no setting, no rule.
#[tokio::test]
async fn new_passwords_obey_password_regexp() {
    let data = TempDir::new("users-db-password-regexp");
    let server = start(&data);
    let admin = Client::new(&server);
    let set = |value: Value| {
        let admin = admin.clone();
        async move {
            let path = "/_node/_local/_config/chttpd_auth/password_regexp";
            let reply = if value.is_null() {
                admin.delete(path).await
            } else {
                admin.put(path, value).await
            };
            assert_eq!(reply.status, 200, "{}", reply.text);
        }
    };
    let write = |name: &'static str, password: &'static str| {
        let admin = admin.clone();
        async move {
            let user = json!({"name": name, "password": password, "roles": [], "type": "user"});
            admin
                .put(&format!("/_users/org.couchdb.user:{name}"), user)
                .await
        }
    };
    set(json!(r#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}]"#)).await;
    let short = write("u1", "short").await;
    assert_eq!(short.status, 400, "{}", short.text);
    assert_eq!(
        short.json(),
        json!({"error": "bad_request", "reason": "Password does not conform to requirements."})
    );
    let lower = write("u2", "longbutlower").await;
    assert_eq!(lower.status, 400, "{}", lower.text);
    assert_eq!(
        lower.json()["reason"],
        "Password does not conform to requirements. Requirement 2."
    );
    let good = write("u3", "LongEnoughX").await;
    assert_eq!(good.status, 201, "{}", good.text);

    // A password changed later obeys the rules too.
    let mut doc = admin.get("/_users/org.couchdb.user:u3").await.json();
    doc["password"] = json!("tooshort");
    let changed = admin.put("/_users/org.couchdb.user:u3", doc).await;
    assert_eq!(changed.status, 400, "{}", changed.text);
    // In _bulk_docs, the row says so.
    let bulk = admin
        .post(
            "/_users/_bulk_docs",
            json!({"docs": [{"_id": "org.couchdb.user:u4", "name": "u4", "password": "x", "roles": [], "type": "user"}]}),
        )
        .await;
    assert_eq!(bulk.status, 201, "{}", bulk.text);
    assert_eq!(bulk.json()[0]["error"], "bad_request", "{}", bulk.text);

    // A setting that cannot be read refuses every new password.
    set(json!("garbage[")).await;
    let broken = write("u5", "AnythingLongEnough").await;
    assert_eq!(broken.status, 403, "{}", broken.text);
    assert_eq!(
        broken.json()["reason"],
        "Server cannot hash passwords at this time."
    );
    // A document written without a new password is not judged.
    let doc = admin.get("/_users/org.couchdb.user:u3").await.json();
    let kept = admin.put("/_users/org.couchdb.user:u3", doc).await;
    assert_eq!(kept.status, 201, "{}", kept.text);

    set(Value::Null).await;
    assert_eq!(write("u6", "x").await.status, 201);
}
