//! Logins beyond passwords and cookies: JWT, proxy tokens, lockouts after
//! repeated failures, CORS warnings and HTTPS.

use super::*;

/// A server whose data folder's file holds `extra` (secrets and key tables
/// are file-only settings).
pub(crate) fn start_with_file(data: &TempDir, extra: &str, env: &[(&str, &str)]) -> TestServer {
    std::fs::write(data.path().join("recliner.toml"), extra).expect("the data folder is writable");
    let mut env = env.to_vec();
    env.push(TEST_ADMIN);
    TestServer::start_with_env(data.path(), &[], &env)
}

pub(crate) fn seconds_from_now(delta: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_secs() as i64;
    now + delta
}

#[tokio::test]
async fn jwt_tokens_log_in_when_valid_and_are_refused_when_expired_or_forged() {
    use base64::Engine;
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let secret = b"the key shared with the identity provider";
    let data = TempDir::new("jwt");
    let key = base64::engine::general_purpose::STANDARD.encode(secret);
    let server = start_with_file(
        &data,
        &format!("jwt_enabled = true\n\n[jwt_keys]\n\"hmac:_default\" = \"{key}\"\n"),
        &[],
    );
    let admin = Client::new(&server);
    assert_eq!(admin.put("/team", json!(null)).await.status, 201);
    let security = json!({"members": {"roles": ["team"]}});
    assert_eq!(admin.put("/team/_security", security).await.status, 200);

    let token = |claims: Value, key: &[u8]| {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(key),
        )
        .unwrap()
    };
    let http = recliner_tests::http_client();
    let call = |path: &str, token: String| {
        let request = http
            .get(format!("{}{path}", server.plain_url))
            .header("authorization", format!("Bearer {token}"));
        async move {
            let reply = request.send().await.unwrap();
            (
                reply.status().as_u16(),
                reply.json::<Value>().await.unwrap(),
            )
        }
    };
    let valid = token(
        json!({"sub": "carol", "exp": seconds_from_now(60), "_couchdb.roles": ["team"]}),
        secret,
    );
    let (status, me) = call("/_session", valid.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(me["userCtx"], json!({"name": "carol", "roles": ["team"]}));
    assert_eq!(me["info"]["authenticated"], "jwt");
    assert_eq!(
        me["info"]["authentication_handlers"],
        json!(["jwt", "cookie", "default"])
    );
    assert_eq!(
        call("/team", valid).await.0,
        200,
        "a member through the token's roles"
    );

    // Past the minute of leeway.
    let expired = token(
        json!({"sub": "carol", "exp": seconds_from_now(-120)}),
        secret,
    );
    let (status, body) = call("/_session", expired).await;
    assert_eq!(
        (status, body["reason"].clone()),
        (401, json!("exp not in future"))
    );
    // `nbf` is checked though no setting requires it: a token valid only
    // an hour from now does not log in now.
    let premature = token(
        json!({"sub": "carol", "exp": seconds_from_now(7200), "nbf": seconds_from_now(3600),
               "_couchdb.roles": ["team"]}),
        secret,
    );
    let (status, body) = call("/_session", premature.clone()).await;
    assert_eq!(
        (status, body["reason"].clone()),
        (401, json!("nbf not in past"))
    );
    assert_eq!(call("/team", premature).await.0, 401);
    let forged = token(
        json!({"sub": "carol", "exp": seconds_from_now(60)}),
        b"a guess",
    );
    let (status, body) = call("/_session", forged).await;
    assert_eq!(
        (status, body["reason"].clone()),
        (400, json!("Bad HMAC in authentication token"))
    );
    let logs = server.logs();
    assert!(!logs.contains(&key), "the key shows in the logs");
}

#[tokio::test]
async fn a_proxy_vouches_for_users_with_its_token() {
    let data = TempDir::new("proxy");
    let server = start_with_file(
        &data,
        "secret = \"proxy-shared-secret\"\nproxy_auth_enabled = true\nproxy_use_secret = true\n",
        &[],
    );
    let http = recliner_tests::http_client();
    let session = |headers: Vec<(&'static str, String)>| {
        let mut request = http.get(format!("{}/_session", server.plain_url));
        for (k, v) in headers {
            request = request.header(k, v);
        }
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let token = auth::cookie::proxy_token("proxy-shared-secret", "dora");
    let me = session(vec![
        ("x-auth-couchdb-username", "dora".into()),
        ("x-auth-couchdb-roles", "staff, ops".into()),
        ("x-auth-couchdb-token", token),
    ])
    .await;
    assert_eq!(
        me["userCtx"],
        json!({"name": "dora", "roles": ["staff", "ops"]})
    );
    assert_eq!(me["info"]["authenticated"], "proxy");
    let unproven = session(vec![
        ("x-auth-couchdb-username", "dora".into()),
        ("x-auth-couchdb-roles", "_admin".into()),
        ("x-auth-couchdb-token", "00".repeat(32)),
    ])
    .await;
    assert_eq!(
        unproven["userCtx"]["name"],
        Value::Null,
        "a wrong token is nobody"
    );
}

#[tokio::test]
async fn repeated_failures_lock_a_name_out_from_that_address_only() {
    let data = TempDir::new("lockout");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[TEST_ADMIN, ("RECLINER_LOCKOUT_THRESHOLD", "3")],
    );
    let from = |ip: [u8; 4]| {
        recliner_tests::http_client_builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let here = from([127, 0, 0, 1]);
    let elsewhere = from([127, 0, 0, 2]);
    let login = |client: &reqwest::Client, password: &str| {
        let request = client
            .post(format!("{}/_session", server.plain_url))
            .json(&json!({"name": ADMIN, "password": password}));
        async move {
            let reply = request.send().await.unwrap();
            (
                reply.status().as_u16(),
                reply.json::<Value>().await.unwrap(),
            )
        }
    };
    for _ in 0..3 {
        assert_eq!(login(&here, "guess").await.0, 401);
    }
    let (status, body) = login(&here, ADMIN_PASSWORD).await;
    assert_eq!(status, 403, "locked even with the right password: {body}");
    assert_eq!(
        body["reason"],
        "Account is temporarily locked due to multiple authentication failures"
    );
    assert_eq!(
        login(&elsewhere, ADMIN_PASSWORD).await.0,
        200,
        "not from elsewhere"
    );
}

#[tokio::test]
async fn cors_with_any_origin_and_credentials_is_warned_about() {
    let data = TempDir::new("cors-warning");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            TEST_ADMIN,
            ("RECLINER_CORS_ENABLED", "true"),
            ("RECLINER_CORS_ORIGINS", "*"),
            ("RECLINER_CORS_CREDENTIALS", "true"),
        ],
    );
    assert!(
        server
            .logs()
            .contains("CORS allows any origin with credentials"),
        "{}",
        server.logs()
    );
}

/// A test CA and a certificate it signed for 127.0.0.1 and localhost, as
/// PEM files in `dir`: (CA, certificate, key).
pub(crate) fn test_certificates(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Recliner test CA");
    let ca = ca_params.self_signed(&ca_key).expect("a CA certificate");
    let key = KeyPair::generate().expect("a server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server parameters");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("a server certificate");
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).expect("write the CA");
    std::fs::write(&paths.1, cert.pem()).expect("write the certificate");
    std::fs::write(&paths.2, key.serialize_pem()).expect("write the key");
    paths
}

/// The HTTPS URL a server announced (it follows the HTTP line).
async fn https_url(server: &TestServer) -> String {
    for _ in 0..100 {
        if let Some(url) = server
            .output()
            .lines()
            .find_map(|l| l.strip_prefix("Recliner listening on https://"))
        {
            return format!("https://{}", url.trim());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no HTTPS address announced: {}", server.output())
}

#[tokio::test]
async fn https_is_served_and_replicated_to_with_a_trusted_ca_only() {
    let certs = TempDir::new("tls-certs");
    let (ca, cert, key) = test_certificates(certs.path());
    let data = TempDir::new("tls-server");
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let secure = TestServer::start_with_env(
        data.path(),
        &["--tls-cert", cert, "--tls-key", key, "--tls-port", "0"],
        &[TEST_ADMIN],
    );
    let base = https_url(&secure).await;
    let _ = recliner_tests::http_client(); // installs the TLS provider
    let trusting = recliner_tests::http_client_builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap()])
        .build()
        .unwrap();
    let up = trusting.get(format!("{base}/_up")).send().await.unwrap();
    assert_eq!(up.status(), 200);
    let login = trusting
        .post(format!("{base}/_session"))
        .json(&json!({"name": ADMIN, "password": ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("; Secure"),
        "an HTTPS session cookie is Secure: {cookie}"
    );
    let admin = Client::new(&secure);
    assert_eq!(admin.put("/vault", json!(null)).await.status, 201);
    assert_eq!(
        admin.put("/vault/gold", json!({"kg": 12})).await.status,
        201
    );
    let source =
        base.replacen("https://", &format!("https://{ADMIN}:{ADMIN_PASSWORD}@"), 1) + "/vault";

    // A replicator that trusts the test CA copies the database over HTTPS.
    let trusting_data = TempDir::new("tls-trusting");
    let ca_path = ca.to_str().unwrap();
    let puller = TestServer::start_with_env(
        trusting_data.path(),
        &[],
        &[
            TEST_ADMIN,
            ("RECLINER_REPLICATOR_SSL_TRUSTED_CERTIFICATES_FILE", ca_path),
        ],
    );
    let pulled = Client::new(&puller)
        .post(
            "/_replicate",
            json!({"source": source, "target": "copy", "create_target": true}),
        )
        .await;
    assert_eq!(pulled.status, 200, "{}", pulled.text);
    assert_eq!(
        Client::new(&puller).get("/copy/gold").await.json()["kg"],
        12
    );

    // One that does not trust it refuses the peer, without showing the password.
    let doubting_data = TempDir::new("tls-doubting");
    let doubter = TestServer::start_with_env(doubting_data.path(), &[], &[TEST_ADMIN]);
    let refused = Client::new(&doubter)
        .post(
            "/_replicate",
            json!({"source": source, "target": "copy", "create_target": true}),
        )
        .await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(!refused.text.contains(ADMIN_PASSWORD), "{}", refused.text);
    assert_eq!(Client::new(&doubter).get("/copy/gold").await.status, 404);
}
