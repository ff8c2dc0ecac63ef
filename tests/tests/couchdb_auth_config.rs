//! JWT and proxy logins configured CouchDB's way, through
//! `/_node/_local/_config` as CouchDB's own test suite configures them:
//! `[chttpd] authentication_handlers`, `[jwt_keys]`, `[jwt_auth]`,
//! `[chttpd_auth] proxy_use_secret`/`secret`/`authentication_db`, each
//! change applied at once and undone by `DELETE`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

const HANDLERS: &str = "{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}";

/// Sets `[section] key` for the running server only, as CouchDB's tests do.
async fn set(admin: &Client, section: &str, key: &str, value: &str) {
    let reply = admin
        .send(
            "PUT",
            &format!("/_node/_local/_config/{section}/{key}"),
            Some(json!(value)),
            &[("X-Couch-Persist", "false")],
        )
        .await;
    assert_eq!(reply.status, 200, "{section}/{key}: {}", reply.text);
}

async fn unset(admin: &Client, section: &str, key: &str) {
    let reply = admin
        .send(
            "DELETE",
            &format!("/_node/_local/_config/{section}/{key}"),
            None,
            &[("X-Couch-Persist", "false")],
        )
        .await;
    assert_eq!(reply.status, 200, "{section}/{key}: {}", reply.text);
}

/// `GET /_session` with `headers`: status and answer.
async fn session(server: &TestServer, headers: &[(&str, &str)]) -> (u16, Value) {
    let reply = Client::anonymous(server)
        .send("GET", "/_session", None, headers)
        .await;
    (reply.status, reply.json())
}

async fn with_token(server: &TestServer, token: &str) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    session(server, &[("authorization", bearer.as_str())]).await
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn hmac_token(alg: Algorithm, kid: Option<&str>, claims: &Value, secret: &[u8]) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    encode(&header, claims, &EncodingKey::from_secret(secret)).unwrap()
}

#[tokio::test]
async fn jwt_logins_are_configured_through_couchdbs_sections() {
    let data = TempDir::new("jwt-config");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    let secret = b"zxczxc12zxczxc12";
    let claims = json!({
        "nbf": now() - 60, "exp": now() + 60,
        "sub": "couch@apache.org", "_couchdb.roles": ["testing"]
    });
    let token = hmac_token(Algorithm::HS256, None, &claims, secret);
    // Off until the handler list names it: the token is not looked at.
    let (status, body) = with_token(&server, &token).await;
    assert_eq!((status, &body["userCtx"]["name"]), (200, &Value::Null));

    set(&admin, "chttpd", "authentication_handlers", HANDLERS).await;
    let key = base64::engine::general_purpose::STANDARD.encode(secret);
    set(&admin, "jwt_keys", "hmac:_default", &key).await;
    for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        let (status, body) = with_token(&server, &hmac_token(alg, None, &claims, secret)).await;
        assert_eq!(status, 200, "{alg:?}: {body}");
        assert_eq!(body["userCtx"]["name"], "couch@apache.org");
        assert_eq!(body["userCtx"]["roles"], json!(["testing"]));
        assert_eq!(body["info"]["authenticated"], "jwt");
    }
    // Keys are secrets: never shown, an empty old value.
    let shown = admin.get("/_node/_local/_config/jwt_keys").await.json();
    assert_eq!(shown, json!({}));

    // A required claim with a value, in CouchDB's syntax.
    set(&admin, "jwt_auth", "required_claims", r#"{iss, "hello"}"#).await;
    let iss =
        |iss: &str| json!({"iss": iss, "sub": "couch@apache.org", "_couchdb.roles": ["testing"]});
    let (status, body) = with_token(
        &server,
        &hmac_token(Algorithm::HS256, None, &iss("hello"), secret),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["info"]["authenticated"], "jwt");
    let (status, body) = with_token(
        &server,
        &hmac_token(Algorithm::HS256, None, &iss("goodbye"), secret),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "bad_request", "reason": "Invalid iss claim"})
        )
    );
    unset(&admin, "jwt_auth", "required_claims").await;

    // An EC key, its PEM on one line with `\n` escaped, as CouchDB's tests set it.
    let pair = rcgen::KeyPair::generate().unwrap();
    let public = pair.public_key_pem().replace('\n', "\\n");
    set(&admin, "jwt_keys", "ec:_default", &public).await;
    let private = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
    let token = encode(&Header::new(Algorithm::ES256), &claims, &private).unwrap();
    let (status, body) = with_token(&server, &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["info"]["authenticated"], "jwt");

    // Undone: the key gone, then the handler list.
    unset(&admin, "jwt_keys", "hmac:_default").await;
    let token = hmac_token(Algorithm::HS256, None, &claims, secret);
    let (status, body) = with_token(&server, &token).await;
    assert_eq!((status, &body["reason"]), (400, &json!("Unknown kid")));
    unset(&admin, "chttpd", "authentication_handlers").await;
    let (status, body) = with_token(&server, &token).await;
    assert_eq!((status, &body["userCtx"]["name"]), (200, &Value::Null));
}

#[tokio::test]
async fn jwt_roles_come_from_the_configured_claim_or_path() {
    let data = TempDir::new("jwt-roles");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    set(&admin, "chttpd", "authentication_handlers", HANDLERS).await;
    let secret = b"a-string-secret-at-least-256-bits-long";
    let key = base64::engine::general_purpose::STANDARD.encode(secret);
    set(&admin, "jwt_keys", "hmac:myjwttestkey", &key).await;
    let claims = json!({
        "sub": "1234567890", "exp": now() + 600,
        "_couchdb.roles": ["top_1", "top_2"],
        "my._couchdb.roles": "named_1, named_2",
        "foo": {"bar.zonk": {"baz.buu": {"roles": ["nested_1", "nested_2"]}}}
    });
    let token = hmac_token(Algorithm::HS256, Some("myjwttestkey"), &claims, secret);
    let roles = async || {
        let (status, body) = with_token(&server, &token).await;
        assert_eq!(status, 200, "{body}");
        body["userCtx"]["roles"].clone()
    };
    assert_eq!(roles().await, json!(["top_1", "top_2"]));
    set(&admin, "jwt_auth", "roles_claim_name", "my._couchdb.roles").await;
    assert_eq!(roles().await, json!(["named_1", "named_2"]));
    // A path wins over a name; `\.` is a dot inside a name.
    set(
        &admin,
        "jwt_auth",
        "roles_claim_path",
        r"foo.bar\.zonk.baz\.buu.roles",
    )
    .await;
    assert_eq!(roles().await, json!(["nested_1", "nested_2"]));
    // A path that leads nowhere is CouchDB's 404.
    set(
        &admin,
        "jwt_auth",
        "roles_claim_path",
        r"<<foo.bar\.zonk.roles",
    )
    .await;
    let (status, body) = with_token(&server, &token).await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"error": "not_found", "reason": "missing json key: <<foo"})
        )
    );
}

#[tokio::test]
async fn proxy_logins_are_configured_through_couchdbs_sections() {
    let data = TempDir::new("proxy-config");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_PASSWORD_ITERATIONS", "1000")],
    );
    let admin = Client::new(&server);
    let proxied = [
        ("X-Auth-CouchDB-UserName", "couch@apache.org"),
        ("X-Auth-CouchDB-Roles", "role_1, role_2"),
    ];
    let (_, body) = session(&server, &proxied).await;
    assert_eq!(body["userCtx"]["name"], Value::Null, "off by default");

    // As CouchDB's test: a users database of its own, a secret.
    assert_eq!(admin.put("/proxy_users", json!(null)).await.status, 201);
    set(&admin, "chttpd", "authentication_handlers", HANDLERS).await;
    set(&admin, "chttpd_auth", "authentication_db", "proxy_users").await;
    set(&admin, "chttpd_auth", "proxy_use_secret", "true").await;
    set(
        &admin,
        "chttpd_auth",
        "secret",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
    )
    .await;
    let user = json!({"_id": "org.couchdb.user:couch@apache.org", "name": "couch@apache.org",
        "password": "test", "roles": [], "type": "user"});
    assert_eq!(admin.post("/proxy_users", user).await.status, 201);
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("couch@apache.org:test")
    );
    let (status, body) = session(&server, &[("authorization", basic.as_str())]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["userCtx"]["name"], "couch@apache.org");
    assert_eq!(body["info"]["authenticated"], "default");

    // The token is the HMAC of the name with the secret (SHA-1 here, as
    // CouchDB's test computes it; SHA-256 is taken too).
    let token = auth_token_sha1("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", "couch@apache.org");
    let mut with_token = proxied.to_vec();
    with_token.push(("X-Auth-CouchDB-Token", token.as_str()));
    let (status, body) = session(&server, &with_token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["userCtx"]["roles"], json!(["role_1", "role_2"]));
    assert_eq!(body["info"]["authenticated"], "proxy");
    let (_, body) = session(&server, &proxied).await;
    assert_eq!(body["userCtx"]["name"], Value::Null, "no token, no login");

    // Without the secret the headers alone are trusted.
    set(&admin, "chttpd_auth", "proxy_use_secret", "false").await;
    let (_, body) = session(&server, &proxied).await;
    assert_eq!(body["userCtx"]["name"], "couch@apache.org");
    assert_eq!(body["info"]["authenticated"], "proxy");
    // Other header names, as `x_auth_username` and `x_auth_roles` say.
    set(&admin, "chttpd_auth", "x_auth_username", "X-Who").await;
    set(&admin, "chttpd_auth", "x_auth_roles", "X-What").await;
    let (_, body) = session(&server, &[("X-Who", "ann"), ("X-What", "a,b")]).await;
    assert_eq!(body["userCtx"], json!({"name": "ann", "roles": ["a", "b"]}));

    unset(&admin, "chttpd", "authentication_handlers").await;
    let (_, body) = session(&server, &[("X-Who", "ann")]).await;
    assert_eq!(body["userCtx"]["name"], Value::Null);
}

/// Hex HMAC-SHA1 of `message` keyed by `secret`.
fn auth_token_sha1(secret: &str, message: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    let digest = mac.finalize().into_bytes();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token signed with a P-384 key under `ES256`, `ES384` and `ES512`, as
/// CouchDB's own JWT test signs them: the algorithm names the hash, the
/// key brings its curve. A token whose header names another hash than the
/// one signed with is refused.
#[tokio::test]
async fn ecdsa_tokens_take_their_hash_from_the_algorithm_name() {
    use p384::ecdsa::signature::hazmat::PrehashSigner;
    use p384::pkcs8::{EncodePublicKey, LineEnding};
    use sha2::Digest;

    let data = TempDir::new("jwt-ecdsa");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    set(&admin, "chttpd", "authentication_handlers", HANDLERS).await;
    // A fixed key: any scalar below the curve's order is one.
    let key = p384::ecdsa::SigningKey::from_slice(&[0x5a; 48]).unwrap();
    let public = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap()
        .replace('\n', "\\n");
    set(&admin, "jwt_keys", "ec:_default", &public).await;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let sign = |alg: &str, hash_as: &str| {
        let head = engine.encode(json!({"alg": alg, "typ": "JWT"}).to_string());
        let claims = json!({"nbf": now() - 60, "exp": now() + 60, "sub": "couch@apache.org", "_couchdb.roles": ["testing"]});
        let payload = engine.encode(claims.to_string());
        let input = format!("{head}.{payload}");
        let digest = match hash_as {
            "ES256" => sha2::Sha256::digest(input.as_bytes()).to_vec(),
            "ES384" => sha2::Sha384::digest(input.as_bytes()).to_vec(),
            _ => sha2::Sha512::digest(input.as_bytes()).to_vec(),
        };
        let signature: p384::ecdsa::Signature = key.sign_prehash(&digest).unwrap();
        format!("{input}.{}", engine.encode(signature.to_bytes()))
    };
    for alg in ["ES256", "ES384", "ES512"] {
        let (status, body) = with_token(&server, &sign(alg, alg)).await;
        assert_eq!(status, 200, "{alg}: {body}");
        assert_eq!(body["userCtx"]["name"], "couch@apache.org", "{alg}: {body}");
        assert_eq!(body["userCtx"]["roles"], json!(["testing"]));
        assert_eq!(body["info"]["authenticated"], "jwt");
    }
    let (status, body) = with_token(&server, &sign("ES512", "ES384")).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "bad_request", "reason": "Bad signature in authentication token"})
        )
    );
}
