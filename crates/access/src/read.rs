//! The read gate for single documents of the special databases: in
//! `_users` a user sees their own document (and others' public fields);
//! in `_replicator` nobody but a document's owner sees its credentials.

use auth::users::UsersError;
use serde_json::{Map, Value};

use crate::{Gate, Kind, Refusal};

impl Gate {
    /// Whether reads must go through [`Gate::filter_read`]: a caller who
    /// is not an admin of `_users` or `_replicator`.
    pub fn reads_filtered(&self) -> bool {
        self.kind.is_special() && !self.is_db_admin()
    }

    /// What the caller may see of a document of this database.
    pub fn filter_read(
        &self,
        id: &str,
        body: Map<String, Value>,
        public_fields: &[String],
    ) -> Result<Map<String, Value>, Refusal> {
        match self.kind {
            // Per-document access is applied by the store's scoped handle.
            Kind::Plain | Kind::PerDoc => Ok(body),
            _ if self.is_db_admin() => Ok(body),
            Kind::Replicator => {
                let name = self.user.name.clone().map_or(Value::Null, Value::String);
                if id.starts_with("_design/")
                    || (!name.is_null() && body.get("owner") == Some(&name))
                {
                    Ok(body)
                } else {
                    Ok(without_credentials(body))
                }
            }
            Kind::Users => {
                auth::users::readable(id, body, &self.user, &self.security, public_fields).map_err(
                    |e| match e {
                        UsersError::NotFound => Refusal::NotFound("missing".into()),
                        UsersError::Forbidden(reason) | UsersError::BadRequest(reason) => {
                            Refusal::Forbidden(reason)
                        }
                    },
                )
            }
        }
    }
}

/// A replication document as anyone but its owner may see it: no
/// credentials in `source`/`target` URLs, no `auth` or `headers`.
pub fn without_credentials(mut body: Map<String, Value>) -> Map<String, Value> {
    for side in ["source", "target"] {
        match body.get_mut(side) {
            Some(Value::String(url)) => *url = strip_userinfo(url),
            Some(Value::Object(peer)) => {
                peer.remove("auth");
                peer.remove("headers");
                if let Some(Value::String(url)) = peer.get_mut("url") {
                    *url = strip_userinfo(url);
                }
            }
            _ => {}
        }
    }
    body
}

/// `http://user:pass@host/db` → `http://host/db`.
fn strip_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_taken_out_of_replication_documents() {
        let doc = serde_json::json!({
            "source": "https://bob:pw@example.com/db",
            "target": {"url": "http://u:p@h:5984/t", "auth": {"basic": {}}, "headers": {"x": "y"}},
            "owner": "bob"
        });
        let Value::Object(body) = doc else {
            unreachable!()
        };
        let seen = Value::Object(without_credentials(body));
        assert_eq!(
            seen,
            serde_json::json!({"source": "https://example.com/db", "target": {"url": "http://h:5984/t"}, "owner": "bob"})
        );
        assert_eq!(strip_userinfo("local-db"), "local-db");
        assert_eq!(strip_userinfo("http://h/a@b"), "http://h/a@b");
        assert_eq!(strip_userinfo("http://u:p@h?x@y"), "http://h?x@y");
    }
}
