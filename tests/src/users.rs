//! Users for tests that log in as someone other than the server admin:
//! created in `_users` with one shared password, and clients that log in
//! as them.

use serde_json::{Value, json};

use crate::{Client, TestServer};

/// Fewer PBKDF2 rounds than the default, so logins are quick in tests:
/// pass it to the server's environment.
pub const FAST_PASSWORDS: (&str, &str) = ("RECLINER_PASSWORD_ITERATIONS", "1000");

/// The password of every user [`add_user`] creates.
pub const PASSWORD: &str = "a-long-enough-password";

/// A client that logs in as `name` (with [`PASSWORD`]) by basic auth.
pub fn as_user(server: &TestServer, name: &str) -> Client {
    Client::at(
        &server
            .plain_url
            .replacen("http://", &format!("http://{name}:{PASSWORD}@"), 1),
    )
}

/// Creates user `name` with `roles`, as `admin`.
pub async fn add_user(admin: &Client, name: &str, roles: Value) {
    let created = admin
        .put(
            &format!("/_users/org.couchdb.user:{name}"),
            json!({"name": name, "password": PASSWORD, "roles": roles, "type": "user"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
}
