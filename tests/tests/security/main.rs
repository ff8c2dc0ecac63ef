//! Authentication and authorization end to end, as CouchDB 3 does them:
//! secure by default, basic and cookie logins, users in `_users`, and each
//! database's `_security`.

use recliner_tests::{ADMIN, ADMIN_PASSWORD, Client, TempDir, TestServer};

/// `RECLINER_ADMIN` for the test admin.
const TEST_ADMIN: (&str, &str) = ("RECLINER_ADMIN", "admin:test-secret");
use serde_json::{Value, json};

mod logins;
use logins::*;

/// A client for `server` as `name:password` (basic auth).
fn as_user(server: &TestServer, name: &str, password: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{password}@"), 1),
    )
}

async fn create_user(admin: &Client, name: &str, password: &str, roles: &[&str]) {
    let created = admin
        .put(
            &format!("/_users/org.couchdb.user:{name}"),
            json!({"name": name, "password": password, "roles": roles, "type": "user"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
}

#[tokio::test]
async fn a_first_start_creates_an_admin_and_prints_its_password_once() {
    let data = TempDir::new("first-admin");
    let server = TestServer::start_without_admin(data.path(), &[], &[]);
    let output = server.output();
    let password = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| panic!("no password printed: {output}"));
    assert!(output.contains("name:     admin"), "{output}");

    let anonymous = Client::anonymous(&server);
    let refused = anonymous.put("/mine", json!(null)).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["reason"], "You are not a server admin.");
    let wrong = as_user(&server, "admin", "guess").get("/_all_dbs").await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["reason"], "Name or password is incorrect.");
    let admin = as_user(&server, "admin", &password);
    assert_eq!(admin.put("/mine", json!(null)).await.status, 201);
    // A new database is for admins until its `_security` says otherwise.
    assert_eq!(
        admin.get("/mine/_security").await.json(),
        json!({"members": {"roles": ["_admin"]}, "admins": {"roles": ["_admin"]}})
    );
    assert_eq!(anonymous.get("/mine").await.status, 401);

    // Only the hash is kept: the password is nowhere in the data folder,
    // and a restart prints no new one and keeps the old one working.
    let stored = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(!stored.contains(&password), "{stored}");
    assert!(stored.contains("-pbkdf2:sha256-"), "{stored}");
    server.stop();
    let again = TestServer::start_without_admin(data.path(), &[], &[]);
    assert!(!again.output().contains("password:"), "{}", again.output());
    assert_eq!(
        as_user(&again, "admin", &password)
            .get("/mine")
            .await
            .status,
        200
    );
    for line in again.logs().lines().chain(again.output().lines()) {
        assert!(
            !line.contains(&password),
            "a log line shows the password: {line}"
        );
    }
}

#[tokio::test]
async fn an_admin_party_needs_opting_in_and_is_warned_about() {
    let data = TempDir::new("party");
    let server = TestServer::start_without_admin(data.path(), &["--insecure-admin-party"], &[]);
    assert!(!server.output().contains("password:"));
    assert!(server.logs().contains("ADMIN PARTY"), "{}", server.logs());
    let anyone = Client::anonymous(&server);
    assert_eq!(anyone.put("/open", json!(null)).await.status, 201);
    let session = anyone.get("/_session").await.json();
    assert_eq!(session["userCtx"]["roles"], json!(["_admin"]));
}

#[tokio::test]
async fn cookies_log_in_expire_renew_and_cannot_be_forged() {
    let data = TempDir::new("cookies");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_AUTH_TIMEOUT", "4"), TEST_ADMIN],
    );
    let http = recliner_tests::http_client();
    let login = http
        .post(format!("{}/_session", server.plain_url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("name={ADMIN}&password={ADMIN_PASSWORD}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let set_cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("Max-Age=4"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let body: Value = login.json().await.unwrap();
    assert_eq!(
        body,
        json!({"ok": true, "name": ADMIN, "roles": ["_admin"]})
    );

    let whoami = |cookie: String| {
        let http = http.clone();
        let url = format!("{}/_session", server.plain_url);
        async move {
            let reply = http.get(url).header("cookie", cookie).send().await.unwrap();
            let renewed = reply.headers().get("set-cookie").is_some();
            let body: Value = reply.json().await.unwrap();
            (body, renewed)
        }
    };
    let (me, renewed) = whoami(cookie.clone()).await;
    assert_eq!(me["userCtx"]["name"], ADMIN);
    assert_eq!(me["info"]["authenticated"], "cookie");
    assert!(!renewed, "a fresh cookie is not renewed");

    // A cookie for another name, or with one byte changed, is nobody's.
    use base64::Engine;
    let value = cookie.trim_start_matches("AuthSession=");
    let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 1;
    let forged = format!(
        "AuthSession={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw)
    );
    assert_eq!(whoami(forged).await.0["userCtx"]["name"], Value::Null);
    let garbage = http
        .get(format!("{}/_session", server.plain_url))
        .header("cookie", "AuthSession=%%%")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);

    // Past 10% of its life the cookie is renewed; past its timeout it is refused.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (me, renewed) = whoami(cookie.clone()).await;
    assert_eq!(me["userCtx"]["name"], ADMIN);
    assert!(renewed, "an aging cookie is renewed");
    tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
    assert_eq!(
        whoami(cookie.clone()).await.0["userCtx"]["name"],
        Value::Null
    );

    let logout = http
        .delete(format!("{}/_session", server.plain_url))
        .send()
        .await
        .unwrap();
    assert!(
        logout.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("AuthSession=;")
    );
    for line in server.logs().lines() {
        assert!(!line.contains(value), "a log line shows the cookie: {line}");
        assert!(
            !line.contains(ADMIN_PASSWORD),
            "a log line shows the password: {line}"
        );
    }
}

#[tokio::test]
async fn users_reach_only_the_databases_they_are_members_of() {
    let data = TempDir::new("members");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    create_user(&admin, "bob", "bobpw", &[]).await;
    create_user(&admin, "eve", "evepw", &["boss"]).await;
    // The password is stored as CouchDB stores it, never in clear.
    let stored = admin.get("/_users/org.couchdb.user:bob").await.json();
    assert!(stored.get("password").is_none(), "{stored}");
    assert_eq!(stored["password_scheme"], "pbkdf2");
    assert_eq!(stored["pbkdf2_prf"], "sha256");
    assert!(stored["derived_key"].is_string() && stored["salt"].is_string());

    for db in ["shared", "private"] {
        assert_eq!(admin.put(&format!("/{db}"), json!(null)).await.status, 201);
    }
    let security = json!({"members": {"names": ["bob"]}, "admins": {"roles": ["boss"]}});
    assert_eq!(
        admin
            .put("/shared/_security", security.clone())
            .await
            .status,
        200
    );

    let bob = as_user(&server, "bob", "bobpw");
    let me = bob.get("/_session").await.json();
    assert_eq!(me["userCtx"], json!({"name": "bob", "roles": []}));
    assert_eq!(
        bob.put("/shared/note", json!({"by": "bob"})).await.status,
        201
    );
    assert_eq!(bob.get("/shared/note").await.json()["by"], "bob");
    assert_eq!(bob.get("/shared/_security").await.json(), security);
    let design = bob.put("/shared/_design/app", json!({})).await;
    assert_eq!(design.status, 403);
    assert_eq!(design.json()["reason"], "You are not a db or server admin.");
    let bulk = bob
        .post(
            "/shared/_bulk_docs",
            json!({"docs": [{"_id": "_design/x"}, {"_id": "y"}]}),
        )
        .await;
    assert_eq!(bulk.status, 201);
    let rows = bulk.json();
    assert_eq!(rows[0]["error"], "forbidden", "{rows}");
    assert_eq!(rows[1]["ok"], true, "{rows}");
    assert_eq!(bob.put("/shared/_security", json!({})).await.status, 403);

    let private = bob.get("/private").await;
    assert_eq!(private.status, 403);
    assert_eq!(
        private.json()["reason"],
        "You are not allowed to access this db."
    );
    assert_eq!(bob.put("/private/x", json!({})).await.status, 403);
    assert_eq!(bob.get("/_all_dbs").await.status, 401);
    assert_eq!(bob.delete("/shared").await.status, 401);

    let anonymous = Client::anonymous(&server);
    let refused = anonymous.get("/shared/note").await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.json()["reason"],
        "You are not authorized to access this db."
    );

    // A database admin by role writes design documents and `_security`.
    let eve = as_user(&server, "eve", "evepw");
    assert_eq!(eve.put("/shared/_design/app", json!({})).await.status, 201);
    assert_eq!(eve.put("/shared/_security", security).await.status, 200);
    assert_eq!(eve.get("/private").await.status, 403);

    // `_users` stays for admins (CouchDB 3's default) and its `_security`
    // cannot be opened unless the operator allows it.
    assert_eq!(bob.get("/_users/org.couchdb.user:bob").await.status, 403);
    assert_eq!(bob.get("/_users/_all_docs").await.status, 401);
    let locked = admin.put("/_users/_security", json!({})).await;
    assert_eq!(locked.status, 403, "{}", locked.text);
}

#[tokio::test]
async fn in_an_open_users_database_each_user_sees_and_edits_only_their_own_document() {
    let data = TempDir::new("users-db");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_USERS_DB_SECURITY_EDITABLE", "true"), TEST_ADMIN],
    );
    let admin = Client::new(&server);
    let open = json!({"admins": {"roles": ["_admin"]}, "members": {}});
    assert_eq!(admin.put("/_users/_security", open).await.status, 200);

    // Anyone may sign up, without roles.
    let anonymous = Client::anonymous(&server);
    let signup = json!({"name": "bob", "password": "bobpw", "roles": [], "type": "user"});
    assert_eq!(
        anonymous
            .put("/_users/org.couchdb.user:bob", signup)
            .await
            .status,
        201
    );
    let greedy = json!({"name": "dan", "password": "d", "roles": ["boss"], "type": "user"});
    let refused = anonymous.put("/_users/org.couchdb.user:dan", greedy).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["reason"], "Only _admin may set roles");
    let misnamed = json!({"name": "eve", "password": "e", "roles": [], "type": "user"});
    let refused = anonymous
        .put("/_users/org.couchdb.user:dan", misnamed)
        .await;
    assert_eq!(
        refused.json()["reason"],
        "Doc ID must be of the form org.couchdb.user:name"
    );
    create_user(&admin, "eve", "evepw", &[]).await;

    let bob = as_user(&server, "bob", "bobpw");
    let mine = bob.get("/_users/org.couchdb.user:bob").await;
    assert_eq!(mine.status, 200);
    let mut mine = mine.json();
    assert_eq!(bob.get("/_users/org.couchdb.user:eve").await.status, 404);
    assert_eq!(
        admin.put("/_users/_design/app", json!({})).await.status,
        201
    );
    assert_eq!(
        bob.get("/_users/_design/app").await.status,
        403,
        "admins only"
    );
    let theirs = json!({"name": "eve", "password": "owned", "roles": [], "type": "user"});
    assert_eq!(
        bob.put("/_users/org.couchdb.user:eve", theirs).await.status,
        404
    );
    assert_eq!(
        bob.post(
            "/_users/_bulk_get",
            json!({"docs": [{"id": "org.couchdb.user:eve"}]})
        )
        .await
        .status,
        401
    );

    mine["roles"] = json!(["boss"]);
    let promoted = bob.put("/_users/org.couchdb.user:bob", mine.clone()).await;
    assert_eq!(promoted.status, 403);
    assert_eq!(promoted.json()["reason"], "Only _admin may edit roles");

    // A new password takes effect at once (the credentials cache notices).
    mine["roles"] = json!([]);
    mine["password"] = json!("newpw");
    assert_eq!(
        bob.put("/_users/org.couchdb.user:bob", mine).await.status,
        201
    );
    assert_eq!(bob.get("/_session").await.status, 401);
    let renewed = as_user(&server, "bob", "newpw")
        .get("/_session")
        .await
        .json();
    assert_eq!(renewed["userCtx"]["name"], "bob");
}

#[tokio::test]
async fn replication_documents_belong_to_their_writer_and_hide_their_credentials() {
    let data = TempDir::new("replicator-owner");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    create_user(&admin, "bob", "bobpw", &[]).await;
    create_user(&admin, "eve", "evepw", &[]).await;
    for db in ["bobs", "copy", "private"] {
        assert_eq!(admin.put(&format!("/{db}"), json!(null)).await.status, 201);
    }
    let members = json!({"members": {"names": ["bob", "eve"]}});
    for db in ["_replicator", "bobs", "copy"] {
        let set = admin
            .put(&format!("/{db}/_security"), members.clone())
            .await;
        assert_eq!(set.status, 200, "{}", set.text);
    }
    let bob = as_user(&server, "bob", "bobpw");
    let eve = as_user(&server, "eve", "evepw");
    let secret_source = format!(
        "{}/bobs",
        server.plain_url.replacen("http://", "http://bob:bobpw@", 1)
    );
    let written = bob
        .put(
            "/_replicator/mine",
            json!({"source": secret_source, "target": "copy", "owner": "eve"}),
        )
        .await;
    assert_eq!(
        written.status, 403,
        "an owner cannot be forged: {}",
        written.text
    );
    let written = bob
        .put(
            "/_replicator/mine",
            json!({"source": secret_source, "target": "copy"}),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    let own = bob.get("/_replicator/mine").await.json();
    assert_eq!(own["owner"], "bob");
    assert_eq!(
        own["source"],
        secret_source.as_str(),
        "the owner sees it all"
    );

    let seen = eve.get("/_replicator/mine").await.json();
    assert_eq!(seen["owner"], "bob");
    assert!(!seen.to_string().contains("bobpw"), "{seen}");
    assert_eq!(seen["source"], format!("{}/bobs", server.plain_url));
    let mut taken = own.clone();
    taken["owner"] = json!("eve");
    let refused = eve.put("/_replicator/mine", taken).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.json()["reason"],
        "Can't update replication documents from other users."
    );
    for listing in ["/_replicator/_all_docs", "/_replicator/_changes"] {
        assert_eq!(eve.get(listing).await.status, 401, "{listing}");
    }
    let bulk_get = eve
        .post("/_replicator/_bulk_get", json!({"docs": [{"id": "mine"}]}))
        .await;
    assert_eq!(bulk_get.status, 401);

    // A user replicates only databases they may use.
    let out_of_reach = bob
        .put(
            "/_replicator/theirs",
            json!({"source": "private", "target": "copy"}),
        )
        .await;
    assert_eq!(out_of_reach.status, 403, "{}", out_of_reach.text);
    let replicate = bob
        .post(
            "/_replicate",
            json!({"source": "private", "target": "copy"}),
        )
        .await;
    assert_eq!(replicate.status, 403, "{}", replicate.text);
    let create = bob
        .post(
            "/_replicate",
            json!({"source": "bobs", "target": "fresh", "create_target": true}),
        )
        .await;
    assert_eq!(
        create.status, 401,
        "only admins create databases: {}",
        create.text
    );
    let anonymous = Client::anonymous(&server)
        .post("/_replicate", json!({"source": "bobs", "target": "copy"}))
        .await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        anonymous.json()["reason"],
        "You are not an authenticated user"
    );
    bob.put("/bobs/doc", json!({"v": 1})).await;
    let allowed = bob
        .post("/_replicate", json!({"source": "bobs", "target": "copy"}))
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.text);
    assert_eq!(bob.get("/copy/doc").await.json()["v"], 1);
}

#[tokio::test]
async fn the_replicator_logs_in_to_a_peer_that_requires_it_with_a_session_cookie() {
    let (da, db) = (TempDir::new("login-a"), TempDir::new("login-b"));
    let a = TestServer::start_with_env(da.path(), &[], &[TEST_ADMIN]);
    let b = TestServer::start_with_env(db.path(), &[], &[("RECLINER_ADMIN", "peer:peerpw")]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    assert_eq!(ca.put("/src", json!(null)).await.status, 201);
    for i in 0..30 {
        ca.put(&format!("/src/d{i:02}"), json!({"i": i})).await;
    }
    let target = b.url("/dst");
    let pushed = ca
        .post(
            "/_replicate",
            json!({"source": "src", "target": target, "create_target": true}),
        )
        .await;
    assert_eq!(pushed.status, 200, "{}", pushed.text);
    recliner_tests::compare_dbs(&ca, "src", &cb, "dst").await;
    let logs = b.logs();
    let logins = logs
        .lines()
        .filter(|l| l.contains("path=/_session") && l.contains("status=200"))
        .count();
    assert!(logins >= 1, "the replicator logged in: {logs}");
    // With a wrong password the login fails, basic auth says why, and
    // nothing of the password shows.
    let wrong = b.url("/dst").replace("peer:peerpw@", "peer:nope@");
    let refused = ca
        .post("/_replicate", json!({"source": "src", "target": wrong}))
        .await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(refused.text.contains("401"), "{}", refused.text);
    assert!(!refused.text.contains("nope"), "{}", refused.text);
}

#[tokio::test]
async fn no_password_hash_cookie_or_token_shows_in_logs_answers_or_printed_settings() {
    use base64::Engine;
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let jwt_secret = b"jwt-signing-key-never-shown";
    let jwt_key = base64::engine::general_purpose::STANDARD.encode(jwt_secret);
    let file_text = format!(
        "secret = \"cookie-secret-never-shown\"\njwt_enabled = true\n\n\
         [admins]\nroot = \"root-password-in-clear\"\n\n[jwt_keys]\n\"hmac:_default\" = \"{jwt_key}\"\n"
    );
    let data = TempDir::new("secrets");
    // Debug logging: the most a server ever writes.
    let server = start_with_file(&data, &file_text, &[("RECLINER_LOG_LEVEL", "debug")]);
    let admin = Client::new(&server);
    // The clear password in the file was replaced by its hash.
    let stored = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(!stored.contains("root-password-in-clear"), "{stored}");
    let root_hash = stored
        .lines()
        .find_map(|l| l.strip_prefix("root = \""))
        .and_then(|h| h.split(',').next())
        .and_then(|h| h.rsplit('-').next())
        .expect("root's hash in the file")
        .to_string();

    create_user(&admin, "sam", "sams-password", &[]).await;
    let sam_key = admin.get("/_users/org.couchdb.user:sam").await.json()["derived_key"]
        .as_str()
        .unwrap()
        .to_string();
    let root = as_user(&server, "root", "root-password-in-clear");
    assert_eq!(
        root.get("/_session").await.json()["userCtx"]["name"],
        "root"
    );
    assert_eq!(
        as_user(&server, "sam", "wrong-guess")
            .get("/_session")
            .await
            .status,
        401
    );
    let http = recliner_tests::http_client();
    let login = http
        .post(format!("{}/_session", server.plain_url))
        .json(&json!({"name": "sam", "password": "sams-password"}))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    let cookie_value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("AuthSession=")
        .to_string();
    let token = encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "sam", "exp": seconds_from_now(60)}),
        &EncodingKey::from_secret(jwt_secret),
    )
    .unwrap();
    let _ = http
        .get(format!("{}/_session", server.plain_url))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    // A replication with every kind of credential, one of which fails.
    admin.put("/src", json!(null)).await;
    let peer = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let continuous = json!({
        "source": {"url": format!("{}/src", server.plain_url),
                   "auth": {"basic": {"username": "root", "password": "root-password-in-clear"}}},
        "target": {"url": format!("{peer}/dst"),
                   "headers": {"X-Api-Key": "header-token-never-shown"}},
        "create_target": true, "continuous": true});
    assert_eq!(admin.post("/_replicate", continuous).await.status, 202);
    let failing = admin
        .post(
            "/_replicate",
            json!({"source": format!("{}/src", server.plain_url.replacen("http://", "http://sam:sams-password@", 1)), "target": "x"}),
        )
        .await;
    assert_eq!(
        failing.status, 500,
        "sam is no member of src: {}",
        failing.text
    );

    let mut seen = vec![server.logs(), server.output(), failing.text.clone()];
    for path in [
        "/_active_tasks",
        "/_scheduler/jobs",
        "/_scheduler/docs",
        "/_session",
    ] {
        seen.push(admin.get(path).await.text);
    }
    let printed = std::process::Command::new(recliner_tests::recliner_bin())
        .args(["--print-config", "--data-dir"])
        .arg(data.path())
        .env_remove("RECLINER_ADMIN")
        .output()
        .unwrap();
    assert!(printed.status.success());
    let printed = String::from_utf8_lossy(&printed.stdout).to_string();
    assert!(
        printed.contains("# admins (passwords hidden): root"),
        "{printed}"
    );
    seen.push(printed);
    let secrets = [
        "root-password-in-clear",
        "sams-password",
        "test-secret",
        root_hash.as_str(),
        sam_key.as_str(),
        cookie_value.as_str(),
        token.as_str(),
        jwt_key.as_str(),
        "cookie-secret-never-shown",
        "header-token-never-shown",
    ];
    for text in &seen {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret:?} shows in:\n{text}");
        }
    }
}

#[tokio::test]
async fn replications_keep_their_users_rights_while_they_run() {
    let data = TempDir::new("replication-rights");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    create_user(&admin, "bob", "bobpw", &[]).await;
    for db in ["mine", "ours"] {
        assert_eq!(admin.put(&format!("/{db}"), json!(null)).await.status, 201);
        let members = json!({"members": {"names": ["bob"]}});
        assert_eq!(
            admin.put(&format!("/{db}/_security"), members).await.status,
            200
        );
    }
    let open = json!({"members": {"names": ["bob"]}, "admins": {"roles": ["_admin"]}});
    assert_eq!(admin.put("/_replicator/_security", open).await.status, 200);
    // A design document an admin wrote into the source: bob may read it,
    // but his replication may not write it where he is no database admin.
    assert_eq!(
        admin
            .put("/mine/_design/app", json!({"views": {}}))
            .await
            .status,
        201
    );
    let bob = as_user(&server, "bob", "bobpw");
    assert_eq!(bob.put("/mine/first", json!({"n": 1})).await.status, 201);
    let once = bob
        .post("/_replicate", json!({"source": "mine", "target": "ours"}))
        .await;
    assert_eq!(once.status, 200, "{}", once.text);
    let history = &once.json()["history"][0];
    assert_eq!(history["docs_written"], 1, "{history}");
    assert_eq!(
        history["doc_write_failures"], 1,
        "the design document: {history}"
    );
    assert_eq!(admin.get("/ours/_design/app").await.status, 404);

    // A continuous replication from his document runs as bob: once he is
    // no longer a member of the target, nothing more reaches it.
    let written = bob
        .put(
            "/_replicator/live",
            json!({"source": "mine", "target": "ours", "continuous": true}),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    assert_eq!(bob.put("/mine/second", json!({"n": 2})).await.status, 201);
    assert!(
        recliner_tests::eventually(10, async || admin.get("/ours/second").await.status == 200)
            .await,
        "the owner's replication runs"
    );
    let closed = json!({"members": {"names": ["someone-else"]}});
    assert_eq!(admin.put("/ours/_security", closed).await.status, 200);
    assert_eq!(bob.put("/mine/third", json!({"n": 3})).await.status, 201);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        admin.get("/ours/third").await.status,
        404,
        "bob lost the target"
    );
    let state = admin.get("/_scheduler/docs/_replicator/live").await.json();
    assert_ne!(state["state"], "running", "{state}");
}
