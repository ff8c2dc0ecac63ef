//! The `_users` database's rules, as CouchDB 3 applies them to every write
//! and read there (its `_design/_auth` validation and `couch_users_db`):
//! passwords are hashed on write and never stored in clear; a user document
//! is `org.couchdb.user:NAME` with `type: "user"`; only admins grant roles;
//! users see only their own document.

use serde_json::{Map, Value};

use crate::password::{Credentials, Prf};
use crate::password_rules::PasswordRefusal;
use crate::security::{SecurityObject, UserCtx};

/// The prefix of every user document's id.
pub const USER_PREFIX: &str = "org.couchdb.user:";

/// Fields that hold a password or its hash, replaced on every new password.
const PASSWORD_FIELDS: [&str; 8] = [
    "derived_key",
    "iterations",
    "password",
    "password_scheme",
    "password_sha",
    "preserve_salt",
    "pbkdf2_prf",
    "salt",
];

/// The design document every users database holds, as in CouchDB, whose
/// `validate_doc_update` ([`VALIDATE_FUNCTION`]) states the rules of
/// [`validate`] for clients that read it.
pub const AUTH_DDOC_ID: &str = "_design/_auth";

/// The function of [`AUTH_DDOC_ID`]: the rules of [`validate`], in
/// JavaScript. The server does not run it while it is this text (the rules
/// are enforced in Rust before any function runs); an end-to-end test
/// checks that both refuse the same writes with the same reasons.
pub const VALIDATE_FUNCTION: &str = include_str!("users_validate.js");

/// [`AUTH_DDOC_ID`] as it is written into a new users database.
pub fn auth_design_doc() -> Map<String, Value> {
    let mut doc = Map::new();
    doc.insert("_id".into(), AUTH_DDOC_ID.into());
    doc.insert("language".into(), "javascript".into());
    doc.insert("validate_doc_update".into(), VALIDATE_FUNCTION.into());
    doc
}

/// A refusal, with CouchDB's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsersError {
    /// 403 `forbidden`.
    Forbidden(String),
    /// 400 `bad_request`: a new password the rules refuse
    /// (`[chttpd_auth] password_regexp`).
    BadRequest(String),
    /// 404 `not_found`: another user's document, as if it did not exist.
    NotFound,
}

fn forbidden(reason: &str) -> UsersError {
    UsersError::Forbidden(reason.to_string())
}

/// The user name a document id is for.
pub fn name_of(id: &str) -> Option<&str> {
    id.strip_prefix(USER_PREFIX)
}

/// Replaces a clear `password` by its PBKDF2-SHA256 hash fields (CouchDB's
/// `before_doc_update`); a document without one is left alone.
pub fn hash_password(body: &mut Map<String, Value>, iterations: u32) -> Result<(), UsersError> {
    let password = match body.get("password") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(p)) => p.clone(),
        Some(_) => return Err(forbidden("Password value is invalid.")),
    };
    crate::password_rules::password_rules()
        .check(&password)
        .map_err(|refusal| match refusal {
            PasswordRefusal::NotConforming(reason) => UsersError::BadRequest(reason),
            PasswordRefusal::CannotHash => forbidden(crate::password_rules::CANNOT_HASH),
        })?;
    let preserve_salt = body.get("preserve_salt") == Some(&Value::Bool(true));
    let old_salt = body.get("salt").and_then(Value::as_str).map(str::to_string);
    body.retain(|k, _| !PASSWORD_FIELDS.contains(&k.as_str()));
    let salt = match old_salt {
        Some(salt) if preserve_salt => salt,
        _ => crate::password::new_salt(),
    };
    let derived_key = crate::password::pbkdf2_hex(
        Prf::Sha256,
        password.as_bytes(),
        salt.as_bytes(),
        iterations,
    );
    // CouchDB puts the hash fields first.
    let mut hashed = Map::new();
    hashed.insert("password_scheme".into(), "pbkdf2".into());
    hashed.insert("pbkdf2_prf".into(), Prf::Sha256.name().into());
    hashed.insert("salt".into(), salt.into());
    hashed.insert("iterations".into(), iterations.into());
    hashed.insert("derived_key".into(), derived_key.into());
    hashed.append(body);
    *body = hashed;
    Ok(())
}

/// Who may write a user document at all (CouchDB's `before_doc_update`):
/// admins, the user themselves, and anonymous sign-ups; anyone else is told
/// it does not exist.
pub fn check_writer(id: &str, user: &UserCtx, security: &SecurityObject) -> Result<(), UsersError> {
    if security.is_admin(user) || user.name.is_none() || user.name.as_deref() == name_of(id) {
        Ok(())
    } else {
        Err(UsersError::NotFound)
    }
}

/// CouchDB's `_design/_auth` validation of a new revision of a user
/// document (`old` is the current one, if any).
pub fn validate(
    id: &str,
    new: &Map<String, Value>,
    old: Option<&Map<String, Value>>,
    user: &UserCtx,
    security: &SecurityObject,
) -> Result<(), UsersError> {
    let is_admin = security.is_admin(user);
    if new.get("_deleted") == Some(&Value::Bool(true)) {
        let old_name = old.and_then(|o| o.get("name")).and_then(Value::as_str);
        return if is_admin || (user.name.is_some() && user.name.as_deref() == old_name) {
            Ok(())
        } else {
            Err(forbidden("Only admins may delete other user docs."))
        };
    }
    if new.get("type").and_then(Value::as_str) != Some("user") {
        return Err(forbidden("doc.type must be user"));
    }
    let name = match new.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.as_str(),
        Some(Value::Null | Value::Bool(false)) | None => {
            return Err(forbidden("doc.name is required"));
        }
        Some(Value::String(_)) => return Err(forbidden("doc.name is required")),
        Some(_) => {
            return Err(forbidden(
                "Doc ID must be of the form org.couchdb.user:name",
            ));
        }
    };
    let roles = match new.get("roles") {
        None | Some(Value::Null) => return Err(forbidden("doc.roles must exist")),
        Some(Value::Array(roles)) => roles,
        Some(_) => return Err(forbidden("doc.roles must be an array")),
    };
    let roles: Vec<&str> = roles
        .iter()
        .map(|r| {
            r.as_str()
                .ok_or_else(|| forbidden("doc.roles can only contain strings"))
        })
        .collect::<Result<_, _>>()?;
    if name_of(id) != Some(name) {
        return Err(forbidden(
            "Doc ID must be of the form org.couchdb.user:name",
        ));
    }
    if let Some(old) = old
        && old.get("name").and_then(Value::as_str) != Some(name)
    {
        return Err(forbidden("Usernames can not be changed."));
    }
    if new.contains_key("password_sha") && !new.contains_key("salt") {
        return Err(forbidden(
            "Users with password_sha must have a salt.See /_utils/script/couch.js for example code.",
        ));
    }
    if let Some(scheme) = new.get("password_scheme") {
        let scheme = scheme.as_str().unwrap_or_default();
        if !["simple", "pbkdf2", "simple+pbkdf2"].contains(&scheme) {
            return Err(UsersError::Forbidden(format!(
                "Password scheme `{scheme}` not supported."
            )));
        }
        if scheme == "pbkdf2" {
            if !new.get("iterations").is_some_and(Value::is_number) {
                return Err(forbidden("iterations must be a number."));
            }
            if !new.get("derived_key").is_some_and(Value::is_string) {
                return Err(forbidden("derived_key must be a string."));
            }
        }
    }
    if !is_admin {
        match old {
            Some(old) => {
                if user.name.as_deref() != Some(name) {
                    return Err(forbidden("You may only update your own user document."));
                }
                let mut old_roles: Vec<&str> = old
                    .get("roles")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut new_roles = roles.clone();
                old_roles.sort_unstable();
                new_roles.sort_unstable();
                if old_roles != new_roles {
                    return Err(forbidden("Only _admin may edit roles"));
                }
            }
            None if !roles.is_empty() => return Err(forbidden("Only _admin may set roles")),
            None => {}
        }
    }
    if roles.iter().any(|r| *r != "_metrics" && r.starts_with('_')) {
        return Err(forbidden(
            "No system roles (starting with underscore) in users db.",
        ));
    }
    if name.starts_with('_') {
        return Err(forbidden("Username may not start with underscore."));
    }
    if name.contains(':') {
        return Err(forbidden("Character `:` is not allowed in usernames."));
    }
    Ok(())
}

/// What a reader may see of a user document (CouchDB's `after_doc_read`):
/// admins and the user see it all; others see only `public_fields` (none
/// by default, and then the document does not exist for them). Design
/// documents are for admins only.
pub fn readable(
    id: &str,
    body: Map<String, Value>,
    user: &UserCtx,
    security: &SecurityObject,
    public_fields: &[String],
) -> Result<Map<String, Value>, UsersError> {
    if security.is_admin(user) {
        return Ok(body);
    }
    if id.starts_with("_design/") {
        return Err(forbidden(
            "Only administrators can view design docs in the users database.",
        ));
    }
    if user.name.is_some() && user.name.as_deref() == name_of(id) {
        return Ok(body);
    }
    let public: Map<String, Value> = body
        .into_iter()
        .filter(|(k, _)| public_fields.iter().any(|f| f == k))
        .collect();
    if public.is_empty() {
        Err(UsersError::NotFound)
    } else {
        Ok(public)
    }
}

/// A user's credentials and roles, read from their document.
pub fn credentials(body: &Map<String, Value>) -> Option<(Credentials, Vec<String>)> {
    let creds = Credentials::from_user_doc(body).ok()??;
    let roles = body
        .get("roles")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Some((creds, roles))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn user(name: &str) -> UserCtx {
        UserCtx {
            name: Some(name.into()),
            roles: vec![],
            handler: None,
        }
    }

    fn open_db() -> SecurityObject {
        SecurityObject::from_json(&json!({"admins": {"roles": ["_admin"]}}))
    }

    #[test]
    fn a_clear_password_becomes_couchdbs_hash_fields() {
        let mut doc = obj(
            json!({"_id": "org.couchdb.user:bob", "name": "bob", "password": "pw", "salt": "old", "password_sha": "x", "roles": [], "type": "user"}),
        );
        hash_password(&mut doc, 5).unwrap();
        assert!(!doc.contains_key("password") && !doc.contains_key("password_sha"));
        assert_eq!(doc["password_scheme"], "pbkdf2");
        assert_eq!(doc["iterations"], 5);
        assert_ne!(doc["salt"], "old");
        let (creds, _) = credentials(&doc).unwrap();
        assert!(creds.verify("pw"));
        assert!(!creds.verify("pW"));
        assert_eq!(
            doc.keys().next().map(String::as_str),
            Some("password_scheme")
        );
        let mut odd = obj(json!({"password": 5}));
        assert!(hash_password(&mut odd, 5).is_err());
    }

    #[test]
    fn users_cannot_grant_themselves_roles_or_touch_others() {
        let sec = open_db();
        let id = "org.couchdb.user:bob";
        let old = obj(json!({"name": "bob", "roles": [], "type": "user"}));
        let promoted = obj(json!({"name": "bob", "roles": ["boss"], "type": "user"}));
        assert_eq!(
            validate(id, &promoted, Some(&old), &user("bob"), &sec),
            Err(forbidden("Only _admin may edit roles"))
        );
        assert_eq!(
            validate(id, &promoted, None, &UserCtx::anonymous(), &sec),
            Err(forbidden("Only _admin may set roles"))
        );
        assert!(validate(id, &promoted, Some(&old), &UserCtx::party_admin(), &sec).is_ok());
        let same = obj(json!({"name": "bob", "roles": [], "type": "user", "x": 1}));
        assert!(validate(id, &same, Some(&old), &user("bob"), &sec).is_ok());
        assert_eq!(
            validate(id, &same, Some(&old), &user("eve"), &sec),
            Err(forbidden("You may only update your own user document."))
        );
        assert_eq!(
            check_writer(id, &user("eve"), &sec),
            Err(UsersError::NotFound)
        );
        assert!(check_writer(id, &user("bob"), &sec).is_ok());
    }

    #[test]
    fn malformed_user_documents_get_couchdbs_reasons() {
        let sec = open_db();
        let admin = UserCtx::party_admin();
        let id = "org.couchdb.user:bob";
        let cases = [
            (json!({"name": "bob", "roles": []}), "doc.type must be user"),
            (json!({"type": "user", "roles": []}), "doc.name is required"),
            (
                json!({"type": "user", "name": "bob"}),
                "doc.roles must exist",
            ),
            (
                json!({"type": "user", "name": "bob", "roles": "x"}),
                "doc.roles must be an array",
            ),
            (
                json!({"type": "user", "name": "bob", "roles": [1]}),
                "doc.roles can only contain strings",
            ),
            (
                json!({"type": "user", "name": "eve", "roles": []}),
                "Doc ID must be of the form org.couchdb.user:name",
            ),
            (
                json!({"type": "user", "name": "bob", "roles": ["_admin"]}),
                "No system roles (starting with underscore) in users db.",
            ),
            (
                json!({"type": "user", "name": "bob", "roles": [], "password_scheme": "md5"}),
                "Password scheme `md5` not supported.",
            ),
        ];
        for (doc, reason) in cases {
            assert_eq!(
                validate(id, &obj(doc), None, &admin, &sec),
                Err(forbidden(reason))
            );
        }
        let underscore = obj(json!({"type": "user", "name": "_x", "roles": []}));
        assert!(validate("org.couchdb.user:_x", &underscore, None, &admin, &sec).is_err());
    }

    #[test]
    fn readers_see_their_own_document_only() {
        let sec = open_db();
        let doc = obj(json!({"name": "bob", "roles": [], "derived_key": "k"}));
        let id = "org.couchdb.user:bob";
        assert!(readable(id, doc.clone(), &user("bob"), &sec, &[]).is_ok());
        assert_eq!(
            readable(id, doc.clone(), &user("eve"), &sec, &[]),
            Err(UsersError::NotFound)
        );
        let public = readable(id, doc.clone(), &user("eve"), &sec, &["name".into()]).unwrap();
        assert_eq!(Value::Object(public), json!({"name": "bob"}));
        assert!(readable("_design/_auth", doc, &user("bob"), &sec, &[]).is_err());
    }
}
