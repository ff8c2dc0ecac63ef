//! CouchDB's ways of configuring authentication, read beside Recliner's own
//! settings, so a server configured as CouchDB is works the same: which
//! ways of logging in are on (`[chttpd] authentication_handlers` beside
//! `jwt_enabled` and `proxy_auth_enabled`) and which database holds the
//! users (`[chttpd_auth] authentication_db`, else `[couch_httpd_auth]`'s)
//! and the password rules (`password_regexp`, read the same way).
//! Each effective setting is decided here, once; the rest of the server
//! asks these methods.

use super::Config;

/// The section of CouchDB's older name for the users database's setting,
/// kept among the settings Recliner does not use itself.
const OLD_AUTH_SECTION: &str = "couch_httpd_auth";

impl Config {
    /// JWT logins: `jwt_enabled`, or CouchDB's handler list naming them.
    pub fn jwt_on(&self) -> bool {
        self.jwt_enabled || self.names_handler(&["jwt_authentication_handler"])
    }

    /// Proxy logins: `proxy_auth_enabled`, or CouchDB's handler list
    /// naming them (by either of CouchDB's spellings).
    pub fn proxy_on(&self) -> bool {
        self.proxy_auth_enabled
            || self.names_handler(&[
                "proxy_authentication_handler",
                "proxy_authentification_handler",
            ])
    }

    /// Session cookies log in: CouchDB's default, or its handler list
    /// naming `cookie_authentication_handler` when the list is set.
    pub fn cookie_login_on(&self) -> bool {
        self.handlers_unset() || self.names_handler(&["cookie_authentication_handler"])
    }

    /// `Authorization: Basic` logs in: CouchDB's default, or its handler
    /// list naming `default_authentication_handler` when the list is set.
    pub fn basic_login_on(&self) -> bool {
        self.handlers_unset() || self.names_handler(&["default_authentication_handler"])
    }

    /// No `[chttpd] authentication_handlers`: CouchDB's default list
    /// (cookies, then basic authentication).
    fn handlers_unset(&self) -> bool {
        self.authentication_handlers.trim().is_empty()
    }

    /// Whether `[chttpd] authentication_handlers` (`{chttpd_auth,
    /// jwt_authentication_handler}, ...`) names one of `handlers`.
    fn names_handler(&self, handlers: &[&str]) -> bool {
        self.authentication_handlers
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| handlers.contains(&word))
    }

    /// The configured users database: `authentication_db`, else
    /// `[couch_httpd_auth] authentication_db`; empty when neither is set
    /// (then `_users`).
    pub fn users_db(&self) -> String {
        if !self.authentication_db.is_empty() {
            return self.authentication_db.clone();
        }
        self.other
            .get(OLD_AUTH_SECTION)
            .and_then(|keys| keys.get("authentication_db"))
            .map(|name| name.trim().to_string())
            .unwrap_or_default()
    }

    /// The password rules: `[chttpd_auth] password_regexp`, else
    /// `[couch_httpd_auth] password_regexp`, as CouchDB reads them.
    pub fn password_rules(&self) -> String {
        if !self.password_regexp.trim().is_empty() {
            return self.password_regexp.clone();
        }
        self.other
            .get(OLD_AUTH_SECTION)
            .and_then(|keys| keys.get("password_regexp"))
            .cloned()
            .unwrap_or_default()
    }

    /// Refuses a users database no database could be named.
    pub(super) fn validate_auth(&self) -> Result<(), String> {
        let name = self.users_db();
        if !name.is_empty() && !store::name::is_valid_db_name(&name) {
            return Err(format!(
                "invalid configuration: setting `authentication_db`: {}",
                store::name::illegal_name_reason(&name)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_rules_are_chttpd_auths_else_couch_httpd_auths() {
        let mut config = Config::default();
        assert_eq!(config.password_rules(), "");
        config.other.insert(
            OLD_AUTH_SECTION.into(),
            [("password_regexp".to_string(), "[{\".{10,}\"}]".to_string())].into(),
        );
        assert_eq!(config.password_rules(), "[{\".{10,}\"}]");
        config.password_regexp = "[{\"[A-Z]+\"}]".into();
        assert_eq!(config.password_rules(), "[{\"[A-Z]+\"}]");
    }

    #[test]
    fn couchdbs_handler_list_turns_jwt_and_proxy_logins_on() {
        let mut config = Config::default();
        assert!(!config.jwt_on() && !config.proxy_on());
        config.authentication_handlers = "{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}".into();
        assert!(config.jwt_on() && !config.proxy_on());
        assert!(config.cookie_login_on() && config.basic_login_on());
        config.authentication_handlers = "{chttpd_auth, proxy_authentication_handler}, {chttpd_auth, default_authentication_handler}".into();
        assert!(!config.jwt_on() && config.proxy_on());
        assert!(!config.cookie_login_on() && config.basic_login_on());
        config.authentication_handlers = "{chttpd_auth, jwt_authentication_handler}".into();
        assert!(!config.cookie_login_on() && !config.basic_login_on());
        config.authentication_handlers = String::new();
        config.jwt_enabled = true;
        assert!(config.jwt_on());
        assert!(config.cookie_login_on() && config.basic_login_on());
    }

    #[test]
    fn the_users_db_is_chttpd_auths_else_couch_httpd_auths() {
        let mut config = Config::default();
        assert_eq!(config.users_db(), "");
        config
            .other
            .entry(OLD_AUTH_SECTION.into())
            .or_default()
            .insert("authentication_db".into(), "old_users".into());
        assert_eq!(config.users_db(), "old_users");
        config.authentication_db = "accounts".into();
        assert_eq!(config.users_db(), "accounts");
        assert!(config.validate_auth().is_ok());
        config.authentication_db = "Bad Name".into();
        assert!(config.validate_auth().is_err());
    }
}
