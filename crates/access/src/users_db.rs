//! Which databases hold users, and the design document each keeps.
//!
//! The node's authentication database (CouchDB's `[chttpd_auth]
//! authentication_db`, `_users` unless configured) is where logins are
//! looked up; it, `_users` and any `PREFIX/_users` get the users rules, as
//! CouchDB's `is_users_db` says. The name is a setting of the whole node,
//! set by the server from its configuration, and read here by every way
//! in (HTTP, the replicator's local peer, `load`) through [`crate::Kind::of`]:
//! one place decides, so no route writes into a users database without
//! its rules.

use std::sync::{Arc, RwLock};

use serde_json::Value;
use store::{Database, DocInput, StoreError};

/// The users database when none is configured.
pub const USERS_DB: &str = "_users";

static AUTHENTICATION_DB: RwLock<Option<Arc<str>>> = RwLock::new(None);

/// Sets the node's authentication database (empty: not configured, so
/// `_users`).
pub fn set_authentication_db(name: &str) {
    let name = (!name.is_empty()).then(|| Arc::from(name));
    *AUTHENTICATION_DB.write().unwrap_or_else(|p| p.into_inner()) = name;
}

/// The authentication database when one is configured (`GET /_session`
/// names it then, as CouchDB does).
pub fn configured_authentication_db() -> Option<Arc<str>> {
    AUTHENTICATION_DB
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The database logins are looked up in.
pub fn authentication_db() -> Arc<str> {
    configured_authentication_db().unwrap_or_else(|| Arc::from(USERS_DB))
}

/// Whether `name` gets the users rules: the authentication database,
/// `_users`, or a database whose name ends in `/_users`.
pub fn is_users_db(name: &str) -> bool {
    name == USERS_DB || name.ends_with("/_users") || *authentication_db() == *name
}

/// Makes sure the authentication database holds `_design/_auth` with the
/// rules' function, as CouchDB does when it starts following that
/// database: written when missing, its function put back when changed.
/// Another writer winning the race (a conflict) is as good.
pub async fn ensure_auth_design_doc(database: &Database) -> Result<(), StoreError> {
    let mut doc = auth::users::auth_design_doc();
    match database
        .get(auth::users::AUTH_DDOC_ID, store::GetOptions::default())
        .await
    {
        Ok(found) => {
            let Value::Object(mut stored) = found.to_value()? else {
                return Ok(());
            };
            let function = stored.get("validate_doc_update").and_then(Value::as_str);
            if function == Some(auth::users::VALIDATE_FUNCTION) {
                return Ok(());
            }
            stored.insert(
                "validate_doc_update".into(),
                auth::users::VALIDATE_FUNCTION.into(),
            );
            doc = stored;
        }
        Err(StoreError::DocNotFound(_)) => {}
        Err(e) => return Err(e),
    }
    let input = DocInput::from_json(Value::Object(doc))?;
    match database.put_doc(input, true).await {
        Ok(_) | Err(StoreError::Conflict) => Ok(()),
        Err(e) => Err(e),
    }
}
