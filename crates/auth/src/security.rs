//! Who a request is (`UserCtx`) and what a database's `_security` object
//! lets them do, by CouchDB 3's rules: server admins (`_admin` role) may do
//! everything; a database's admins (by name or role) also write design
//! documents and `_security`; when a database lists members, only members
//! and admins may read or write it, otherwise it is public.

use serde_json::{Value, json};

/// The server admin role.
pub const ADMIN_ROLE: &str = "_admin";

/// Who is asking, as CouchDB's `userCtx`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserCtx {
    /// `None` for an anonymous request.
    pub name: Option<String>,
    pub roles: Vec<String>,
    /// The authentication handler that recognized them (`default` for basic
    /// auth, `cookie`, `jwt`, `proxy`), shown by `GET /_session`.
    pub handler: Option<&'static str>,
}

impl UserCtx {
    pub fn anonymous() -> UserCtx {
        UserCtx::default()
    }

    /// Everyone, when the server runs as an "admin party" (opted in).
    pub fn party_admin() -> UserCtx {
        UserCtx {
            name: None,
            roles: vec![ADMIN_ROLE.to_string()],
            handler: None,
        }
    }

    pub fn is_server_admin(&self) -> bool {
        self.roles.iter().any(|r| r == ADMIN_ROLE)
    }

    /// CouchDB's `userCtx` object, as handed to clients and functions.
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "roles": self.roles})
    }

    /// CouchDB's answer to a request this user may not make: 401 for
    /// anonymous requests (log in and try again), 403 otherwise.
    pub fn denial(&self) -> Denial {
        if self.name.is_none() {
            Denial::Unauthorized
        } else {
            Denial::Forbidden
        }
    }
}

/// The status CouchDB picks for a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// 401 `unauthorized`.
    Unauthorized,
    /// 403 `forbidden`.
    Forbidden,
}

/// A database's `_security` object, read leniently as CouchDB does (absent
/// lists are empty; `readers` is the old name of `members`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityObject {
    pub admins: Group,
    pub members: Group,
}

/// The `names` and `roles` of one side of a security object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group {
    pub names: Vec<String>,
    pub roles: Vec<String>,
}

impl Group {
    fn from_json(value: Option<&Value>) -> Group {
        let list = |key: &str| -> Vec<String> {
            value
                .and_then(|v| v.get(key))
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Group {
            names: list("names"),
            roles: list("roles"),
        }
    }

    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.roles.is_empty()
    }

    /// CouchDB's `is_authorized`: a shared role (`_admin` always counts) or
    /// the user's name in `names`.
    fn admits(&self, user: &UserCtx) -> bool {
        user.roles
            .iter()
            .any(|r| r == ADMIN_ROLE || self.roles.contains(r))
            || user
                .name
                .as_ref()
                .is_some_and(|name| self.names.contains(name))
    }
}

impl SecurityObject {
    pub fn from_json(value: &Value) -> SecurityObject {
        SecurityObject {
            admins: Group::from_json(value.get("admins")),
            members: Group::from_json(value.get("members").or_else(|| value.get("readers"))),
        }
    }

    /// CouchDB 3's `default_security = admin_only`: what a new database gets.
    pub fn admin_only_json() -> Value {
        json!({"members": {"roles": [ADMIN_ROLE]}, "admins": {"roles": [ADMIN_ROLE]}})
    }

    /// Server admins and the database's admins.
    pub fn is_admin(&self, user: &UserCtx) -> bool {
        self.admins.admits(user)
    }

    /// Readers and writers of documents: admins, members, or anyone when
    /// the database lists no members.
    pub fn is_member(&self, user: &UserCtx) -> bool {
        self.is_admin(user) || self.members.is_empty() || self.members.admits(user)
    }

    /// CouchDB's checks on a new `_security` object: `names` and `roles`
    /// are lists of strings. The error is CouchDB's reason.
    pub fn validate(value: &Value) -> Result<(), String> {
        let Some(object) = value.as_object() else {
            return Err("Security object must be a JSON object".into());
        };
        for side in ["admins", "members", "readers"] {
            let Some(group) = object.get(side) else {
                continue;
            };
            let Some(group) = group.as_object() else {
                return Err(format!("{side} must be a JSON object"));
            };
            for key in ["names", "roles"] {
                match group.get(key) {
                    None => {}
                    Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
                    Some(_) => return Err(format!("{key} must be a JSON list of strings")),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, roles: &[&str]) -> UserCtx {
        UserCtx {
            name: Some(name.into()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            handler: Some("default"),
        }
    }

    #[test]
    fn members_and_admins_by_name_or_role() {
        let sec = SecurityObject::from_json(&json!({
            "members": {"names": ["bob"], "roles": ["staff"]},
            "admins": {"roles": ["boss"]}
        }));
        assert!(sec.is_member(&user("bob", &[])));
        assert!(sec.is_member(&user("ann", &["staff"])));
        assert!(sec.is_member(&user("eve", &["boss"])), "admins are members");
        assert!(!sec.is_member(&user("mallory", &["other"])));
        assert!(!sec.is_member(&UserCtx::anonymous()));
        assert!(sec.is_admin(&user("eve", &["boss"])));
        assert!(!sec.is_admin(&user("bob", &[])));
        assert!(sec.is_admin(&user("root", &["_admin"])));
    }

    #[test]
    fn no_members_means_public_and_admin_only_means_admins() {
        let open = SecurityObject::from_json(&json!({}));
        assert!(open.is_member(&UserCtx::anonymous()));
        assert!(!open.is_admin(&user("bob", &[])));
        let closed = SecurityObject::from_json(&SecurityObject::admin_only_json());
        assert!(!closed.is_member(&user("bob", &[])));
        assert!(closed.is_member(&UserCtx::party_admin()));
        let old = SecurityObject::from_json(&json!({"readers": {"names": ["bob"]}}));
        assert!(old.is_member(&user("bob", &[])));
        assert!(!old.is_member(&user("ann", &[])));
    }

    #[test]
    fn security_objects_are_validated_like_couchdbs() {
        assert!(SecurityObject::validate(&json!({"admins": {"names": ["a"]}})).is_ok());
        assert!(SecurityObject::validate(&json!({"admins": {"names": "a"}})).is_err());
        assert!(SecurityObject::validate(&json!({"members": {"roles": [1]}})).is_err());
        assert!(SecurityObject::validate(&json!([])).is_err());
    }
}
