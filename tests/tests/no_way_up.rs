//! Nothing a member stores or sends acts with an admin's rights: stored
//! and function-made content is sandboxed in browsers, design functions
//! never see credentials, a rewrite is not a login, the handler list
//! decides which logins exist, and JWTs and `since` are checked as CouchDB
//! checks them.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::users::{FAST_PASSWORDS as FAST, add_user, as_user};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// A database `db` with `member` as a member and `dba` as its admin.
async fn shared_db(admin: &Client) {
    add_user(admin, "member", json!([])).await;
    add_user(admin, "dba", json!([])).await;
    assert_eq!(admin.put("/db", json!(null)).await.status, 201);
    let security = json!({"admins": {"names": ["dba"]}, "members": {"names": ["member"]}});
    assert_eq!(admin.put("/db/_security", security).await.status, 200);
}

fn assert_sandboxed(reply: &recliner_tests::Reply, what: &str) {
    let policies: Vec<&str> = reply
        .headers
        .get_all("content-security-policy")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert!(
        policies.contains(&"sandbox"),
        "{what}: no sandbox policy in {policies:?} ({} {})",
        reply.status,
        reply.text
    );
    assert_eq!(
        reply.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
}

#[tokio::test]
async fn stored_and_function_made_content_is_sandboxed_in_browsers() {
    let data = TempDir::new("no-way-up-csp");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    shared_db(&admin).await;
    let member = as_user(&server, "member");
    let script =
        b"<script>fetch('/_node/_local/_config/admins/evil',{method:'PUT',body:'\"x\"'})</script>";
    for (name, kind) in [("x.html", "text/html"), ("x.svg", "image/svg+xml")] {
        let path = format!("/db/d-{name}/{name}");
        let put = member.send_bytes("PUT", &path, script.to_vec(), kind).await;
        assert_eq!(put.status, 201, "{}", put.text);
        let got = admin.get(&path).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.header("content-type"), Some(kind));
        assert_sandboxed(&got, name);
    }

    let dba = as_user(&server, "dba");
    let ddoc = json!({
        "shows": {
            "html_json": "function(doc, req) { return {json: {a: 1}, headers: {'Content-Type': 'text/html'}}; }",
            "html": "function(doc, req) { return {body: '<script>1</script>', headers: {'Content-Security-Policy': \"default-src *; script-src 'unsafe-inline'\"}}; }",
        },
        "lists": {"l": "function(head, req) { start({headers: {'Content-Type': 'text/html'}}); send('<script>1</script>'); }"},
        "views": {"v": {"map": "function(doc) { emit(doc._id, null); }"}},
        "updates": {"u": "function(doc, req) { return [null, {json: {a: 1}, headers: {'Content-Type': 'text/html'}}]; }"},
        "rewrites": "function(req) { return {code: 200, body: '<script>1</script>', headers: {'Content-Type': 'text/html'}}; }",
    });
    assert_eq!(dba.put("/db/_design/f", ddoc).await.status, 201);
    for (method, path) in [
        ("GET", "/db/_design/f/_show/html_json"),
        ("GET", "/db/_design/f/_show/html"),
        ("GET", "/db/_design/f/_list/l/v"),
        ("POST", "/db/_design/f/_update/u"),
        ("GET", "/db/_design/f/_rewrite/x"),
        ("GET", "/db/d-x.html"),
        ("GET", "/db/_all_docs"),
        ("GET", "/"),
    ] {
        let reply = admin.send(method, path, None, &[]).await;
        assert!(
            reply.status < 300,
            "{path}: {} {}",
            reply.status,
            reply.text
        );
        assert_sandboxed(&reply, path);
    }
    // The console keeps its own strict policy, without the sandbox.
    let console = admin.get("/_utils/").await;
    assert_eq!(console.status, 200);
    let policy = console.header("content-security-policy").unwrap();
    assert!(policy.contains("default-src 'self'"), "{policy}");
    assert_eq!(
        console
            .headers
            .get_all("content-security-policy")
            .iter()
            .count(),
        1
    );
}

/// The headers a show function saw, for a request with `headers`.
async fn seen_headers(client: &Client, headers: &[(&str, &str)]) -> Value {
    let reply = client
        .send("GET", "/db/_design/echo/_show/headers", None, headers)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

#[tokio::test]
async fn design_functions_never_see_credentials_and_a_rewrite_is_not_a_login() {
    let data = TempDir::new("no-way-up-proxy");
    // Proxy logins on, proven by a token: the token must never reach a
    // function a database admin wrote.
    std::fs::write(
        data.path().join("recliner.toml"),
        "secret = \"proxy-shared-secret\"\nproxy_auth_enabled = true\nproxy_use_secret = true\n",
    )
    .unwrap();
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    shared_db(&admin).await;
    let dba = as_user(&server, "dba");
    let echo = json!({
        "shows": {"headers": "function(doc, req) { return {json: req.headers}; }"},
        "updates": {"headers": "function(doc, req) { return [null, {json: req.headers}]; }"},
        "filters": {"clean": "function(doc, req) { var h = req.headers; return !h['Authorization'] && !h['Cookie'] && !h['X-Auth-CouchDB-Token'] && !h['X-Auth-CouchDB-UserName'] && !h['X-Auth-CouchDB-Roles']; }"},
    });
    assert_eq!(dba.put("/db/_design/echo", echo).await.status, 201);
    assert_eq!(admin.put("/db/doc", json!({})).await.status, 201);

    let token = auth::cookie::proxy_token("proxy-shared-secret", "member");
    let anonymous = Client::anonymous(&server);
    let proxied = [
        ("X-Auth-CouchDB-UserName", "member"),
        ("X-Auth-CouchDB-Roles", "staff"),
        ("X-Auth-CouchDB-Token", token.as_str()),
        ("X-Custom", "kept"),
    ];
    let seen = seen_headers(&anonymous, &proxied).await;
    assert_eq!(seen["X-Custom"], "kept", "{seen}");
    let seen = seen_headers(&dba, &[("Cookie", "theme=dark; other=1")]).await;
    for (name, _) in seen.as_object().unwrap() {
        let lower = name.to_ascii_lowercase();
        assert!(
            !["authorization", "cookie"].contains(&lower.as_str())
                && !lower.starts_with("x-auth-couchdb-"),
            "a function saw {name}: {seen}"
        );
    }
    let seen = seen_headers(&anonymous, &proxied).await;
    for (name, _) in seen.as_object().unwrap() {
        assert!(
            !name.to_ascii_lowercase().starts_with("x-auth-couchdb-"),
            "a function saw {name}: {seen}"
        );
    }
    let updated = anonymous
        .send("POST", "/db/_design/echo/_update/headers", None, &proxied)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert!(
        !updated.text.to_ascii_lowercase().contains("x-auth-couchdb"),
        "{}",
        updated.text
    );
    // A filter sees no credentials either: it lets every document through.
    let filtered = anonymous
        .send("GET", "/db/_changes?filter=echo/clean", None, &proxied)
        .await;
    assert_eq!(filtered.status, 200, "{}", filtered.text);
    assert_eq!(
        filtered.json()["results"].as_array().unwrap().len(),
        2,
        "{}",
        filtered.text
    );

    // A database admin's rewrite that claims the server admin role and
    // reaches for the configuration: refused, as its caller would be.
    let pwn = json!({
        "rewrites": "function(req) { return {method: 'PUT', path: '../../../_node/_local/_config/admins/pwn', body: '\"owned-password\"', headers: {'X-Auth-CouchDB-UserName': 'dba', 'X-Auth-CouchDB-Roles': '_admin', 'X-Auth-CouchDB-Token': req.query.t || '', 'Authorization': 'Basic ' + req.query.b}}; }",
    });
    assert_eq!(dba.put("/db/_design/pwn", pwn).await.status, 201);
    let dba_token = auth::cookie::proxy_token("proxy-shared-secret", "dba");
    let admin_basic = base64_of("admin:test-secret");
    let path = format!("/db/_design/pwn/_rewrite/x?t={dba_token}&b={admin_basic}");
    for caller in [&dba, &anonymous] {
        let reply = caller.send("GET", &path, None, &[]).await;
        assert!(
            reply.status == 401 || reply.status == 403,
            "a rewrite reached the configuration: {} {}",
            reply.status,
            reply.text
        );
    }
    let admins = admin.get("/_node/_local/_config/admins").await.json();
    assert!(admins.get("pwn").is_none(), "{admins}");

    // Into `_users` and another database: the caller's rights, no more.
    admin.put("/other", json!(null)).await;
    let reach = json!({
        "rewrites": "function(req) { return {path: '../../../' + req.query.to, headers: {'X-Auth-CouchDB-UserName': 'admin', 'X-Auth-CouchDB-Roles': '_admin'}}; }",
    });
    assert_eq!(dba.put("/db/_design/reach", reach).await.status, 201);
    for target in ["_users/_all_docs", "other/_all_docs", "_all_dbs"] {
        let reply = dba
            .get(&format!("/db/_design/reach/_rewrite/x?to={target}"))
            .await;
        assert!(
            reply.status == 401 || reply.status == 403,
            "{target}: {} {}",
            reply.status,
            reply.text
        );
    }
    // While the caller's own rights still carry: the admin reaches them.
    let reply = admin
        .get("/db/_design/reach/_rewrite/x?to=other/_all_docs")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn the_handler_list_decides_which_logins_exist() {
    let data = TempDir::new("no-way-up-handlers");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    let login = Client::anonymous(&server)
        .post(
            "/_session",
            json!({"name": "admin", "password": "test-secret"}),
        )
        .await;
    assert_eq!(login.status, 200, "{}", login.text);
    let cookie = login
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let with_cookie = |client: Client| {
        let cookie = cookie.clone();
        async move {
            client
                .send("GET", "/_session", None, &[("cookie", cookie.as_str())])
                .await
                .json()
        }
    };
    assert_eq!(
        with_cookie(Client::anonymous(&server)).await["userCtx"]["name"],
        "admin"
    );
    let reply = admin
        .send(
            "PUT",
            "/_node/_local/_config/chttpd/authentication_handlers",
            Some(json!("{chttpd_auth, jwt_authentication_handler}")),
            &[("X-Couch-Persist", "false")],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    // Neither the admin's password nor a session cookie logs in now.
    let by_password = admin.get("/_session").await.json();
    assert_eq!(by_password["userCtx"]["name"], Value::Null, "{by_password}");
    assert_eq!(
        by_password["info"]["authentication_handlers"],
        json!(["jwt"])
    );
    assert_eq!(admin.get("/_all_dbs").await.status, 401);
    let by_cookie = with_cookie(Client::anonymous(&server)).await;
    assert_eq!(by_cookie["userCtx"]["name"], Value::Null, "{by_cookie}");
}

#[tokio::test]
async fn jwt_expiry_has_no_leeway_and_since_past_the_end_is_refused() {
    use jsonwebtoken::{EncodingKey, Header, encode};
    let data = TempDir::new("no-way-up-jwt");
    let secret = b"the key shared with the identity provider";
    let key = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(secret)
    };
    std::fs::write(
        data.path().join("recliner.toml"),
        format!("jwt_enabled = true\n[jwt_keys]\n\"hmac:_default\" = \"{key}\"\n"),
    )
    .unwrap();
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let token = |exp: i64| {
        encode(
            &Header::default(),
            &json!({"sub": "jo", "exp": exp}),
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    };
    let session = |token: String| {
        let client = Client::anonymous(&server);
        async move {
            let bearer = format!("Bearer {token}");
            client
                .send(
                    "GET",
                    "/_session",
                    None,
                    &[("authorization", bearer.as_str())],
                )
                .await
        }
    };
    let fresh = session(token(now + 60)).await;
    assert_eq!(fresh.json()["userCtx"]["name"], "jo", "{}", fresh.text);
    // Expired 20 s ago: refused at once, as CouchDB refuses it.
    let stale = session(token(now - 20)).await;
    assert_eq!(stale.status, 401, "{}", stale.text);
    assert_eq!(stale.json()["reason"], "exp not in future");

    let admin = Client::new(&server);
    assert_eq!(admin.put("/db", json!(null)).await.status, 201);
    assert_eq!(admin.put("/db/a", json!({})).await.status, 201);
    let changes = admin.get("/db/_changes").await.json();
    let last = changes["last_seq"].as_str().unwrap().to_string();
    let (n, token) = last.split_once('-').unwrap();
    let n: u64 = n.parse().unwrap();
    for since in [format!("{}-{token}", n + 1), format!("{}", n + 5)] {
        let reply = admin.get(&format!("/db/_changes?since={since}")).await;
        assert_eq!(reply.status, 400, "since={since}: {}", reply.text);
        assert_eq!(
            reply.json(),
            json!({"error": "bad_request", "reason": "Malformed sequence supplied in 'since' parameter."})
        );
    }
    let at_end = admin.get(&format!("/db/_changes?since={last}")).await;
    assert_eq!(at_end.status, 200, "{}", at_end.text);
    assert_eq!(at_end.json()["results"], json!([]));
}

#[tokio::test]
async fn a_search_query_is_bounded_in_clauses_and_expansions() {
    let data = TempDir::new("no-way-up-search");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    assert_eq!(admin.put("/db", json!(null)).await.status, 201);
    let ddoc = json!({"nouveau": {"t": {"index": "function (doc) { if (doc.body) { index('text', 'body', doc.body); } }"}}});
    assert_eq!(admin.put("/db/_design/s", ddoc).await.status, 201);
    assert_eq!(
        admin
            .put("/db/a", json!({"body": "alpha beta"}))
            .await
            .status,
        201
    );
    let ask = |q: String| {
        let admin = admin.clone();
        async move {
            admin
                .post("/db/_design/s/_nouveau/t", json!({"q": q}))
                .await
        }
    };
    let words = |n: usize, word: &str| {
        (0..n)
            .map(|i| format!("body:{word}{i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    let fine = ask(format!("{} OR body:alpha", words(1_000, "w"))).await;
    assert_eq!(fine.status, 200, "{}", fine.text);
    assert_eq!(fine.json()["total_hits"], 1);
    let too_many = ask(words(2_000, "w")).await;
    assert_eq!(too_many.status, 400, "{}", too_many.text);
    assert!(
        too_many.text.contains("too many clauses"),
        "{}",
        too_many.text
    );
    let wild = (0..200)
        .map(|i| format!("body:*a{i}*"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let expanding = ask(wild).await;
    assert_eq!(expanding.status, 400, "{}", expanding.text);
    assert!(expanding.text.contains("wildcard"), "{}", expanding.text);
}
