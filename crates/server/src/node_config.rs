//! The running server's settings behind CouchDB's configuration API
//! (`/_node/{node}/_config`): each setting under CouchDB's section and key
//! where CouchDB has one, the others under `[recliner]` by their own name.
//! A change is validated as a whole configuration, written to the
//! configuration file unless asked not to (`X-Couch-Persist: false`), and
//! applied at once where the server can: the replication scheduler's limits
//! and replication defaults. Other settings take effect at the next start.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use http_api::{ConfigError, NodeConfig};
use serde_json::Value;

use crate::config::Config;

/// CouchDB's (section, key) for Recliner's settings that have one.
const COUCHDB_NAMES: &[(&str, &str, &str)] = &[
    ("replicator", "max_jobs", "replicator_max_jobs"),
    ("replicator", "interval", "replicator_interval_ms"),
    ("replicator", "max_churn", "replicator_max_churn"),
    ("replicator", "max_history", "replicator_max_history"),
    (
        "replicator",
        "checkpoint_interval",
        "replicator_checkpoint_interval_ms",
    ),
    (
        "replicator",
        "worker_batch_size",
        "replicator_worker_batch_size",
    ),
    (
        "replicator",
        "connection_timeout",
        "replicator_connection_timeout_ms",
    ),
    (
        "replicator",
        "retries_per_request",
        "replicator_retries_per_request",
    ),
    (
        "replicator",
        "verify_ssl_certificates",
        "replicator_verify_ssl_certificates",
    ),
    (
        "replicator",
        "ssl_trusted_certificates_file",
        "replicator_ssl_trusted_certificates_file",
    ),
    ("couchdb", "max_document_size", "max_document_size"),
    ("couchdb", "max_dbs_open", "max_dbs_open"),
    ("couchdb", "default_security", "default_security"),
    ("couchdb", "max_attachment_size", "max_attachment_size"),
    (
        "couchdb",
        "users_db_security_editable",
        "users_db_security_editable",
    ),
    ("chttpd", "port", "port"),
    ("chttpd", "bind_address", "bind"),
    ("chttpd", "max_http_request_size", "max_http_request_size"),
    ("chttpd", "require_valid_user", "require_valid_user"),
    ("chttpd", "admin_only_all_dbs", "admin_only_all_dbs"),
    ("chttpd_auth", "timeout", "auth_timeout"),
    ("chttpd_auth", "iterations", "password_iterations"),
    (
        "chttpd_auth",
        "allow_persistent_cookies",
        "allow_persistent_cookies",
    ),
    ("chttpd_auth", "users_db_public", "users_db_public"),
    ("chttpd_auth", "public_fields", "public_fields"),
    ("chttpd_auth", "proxy_use_secret", "proxy_use_secret"),
    ("httpd", "enable_cors", "cors_enabled"),
    ("cors", "origins", "cors_origins"),
    ("cors", "credentials", "cors_credentials"),
    ("cors", "methods", "cors_methods"),
    ("cors", "headers", "cors_headers"),
    ("uuids", "algorithm", "uuids_algorithm"),
    ("uuids", "utc_id_suffix", "utc_id_suffix"),
    ("log", "level", "log_level"),
    ("jwt_auth", "required_claims", "jwt_required_claims"),
    ("jwt_auth", "roles_claim_name", "jwt_roles_claim_name"),
    ("jwt_auth", "roles_claim_path", "jwt_roles_claim_path"),
    ("ssl", "cert_file", "tls_cert"),
    ("ssl", "key_file", "tls_key"),
    ("ssl", "port", "tls_port"),
];

/// Settings for Recliner's own needs, under `[recliner]`.
const OWN_SECTION: &str = "recliner";

/// The server's live configuration.
#[derive(Debug)]
pub struct ServerConfig {
    current: Mutex<Config>,
    /// The file changes are written to (`--config`, else the data folder's).
    file: PathBuf,
    scheduler: replicator::Scheduler,
    /// `[couchdb] uuid`, shown but not changeable.
    server_uuid: String,
}

/// Where a setting shows: CouchDB's (section, key), else `[recliner]` by name.
fn place(setting: &str) -> (String, String) {
    COUCHDB_NAMES
        .iter()
        .find(|(_, _, name)| *name == setting)
        .map(|(section, key, _)| (section.to_string(), key.to_string()))
        .unwrap_or_else(|| (OWN_SECTION.to_string(), setting.to_string()))
}

/// The setting a (section, key) names.
fn setting_of(section: &str, key: &str, known: &serde_json::Map<String, Value>) -> Option<String> {
    if let Some((_, _, name)) = COUCHDB_NAMES
        .iter()
        .find(|(s, k, _)| *s == section && *k == key)
    {
        return Some(name.to_string());
    }
    (section == OWN_SECTION && known.contains_key(key) && place(key).0 == OWN_SECTION)
        .then(|| key.to_string())
}

/// A value as the configuration API shows it: text, lists comma-separated.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| i.to_string())
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Text read as the setting's type, judged by its current value.
fn typed(text: &str, like: &Value, key: &str) -> Result<Value, ConfigError> {
    match like {
        Value::Number(_) => text
            .parse::<u64>()
            .map(Value::from)
            .map_err(|_| ConfigError::Refused(format!("{key} must be a non-negative integer"))),
        Value::Bool(_) => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(ConfigError::Refused(format!("{key} must be true or false"))),
        },
        Value::Array(_) => Ok(Value::Array(
            text.split(',')
                .map(|p| p.trim())
                .filter(|p| !p.is_empty())
                .map(|p| Value::String(p.to_string()))
                .collect(),
        )),
        _ => Ok(Value::String(text.to_string())),
    }
}

impl ServerConfig {
    pub fn new(
        config: Config,
        file: PathBuf,
        scheduler: replicator::Scheduler,
        server_uuid: String,
    ) -> ServerConfig {
        ServerConfig {
            current: Mutex::new(config),
            file,
            scheduler,
            server_uuid,
        }
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Config> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the whole configuration once it validates, applying what
    /// can change while the server runs.
    fn replace(&self, next: Config) -> Result<(), ConfigError> {
        next.validate().map_err(ConfigError::Refused)?;
        let scheduler = next.scheduler_config();
        *self.current() = next;
        self.scheduler.update_config(|config| {
            config.max_jobs = scheduler.max_jobs;
            config.interval = scheduler.interval;
            config.max_churn = scheduler.max_churn;
            config.max_history = scheduler.max_history;
            config.spec_defaults = scheduler.spec_defaults;
        });
        Ok(())
    }

    /// `current` with one setting changed (`None`: back to its default).
    fn with_setting(&self, setting: &str, value: Option<Value>) -> Result<Config, ConfigError> {
        let current = self.current().clone();
        let mut fields = match serde_json::to_value(&current) {
            Ok(Value::Object(fields)) => fields,
            _ => {
                return Err(ConfigError::Refused(
                    "the configuration cannot be read".into(),
                ));
            }
        };
        let value = match value {
            Some(value) => value,
            None => match serde_json::to_value(Config::default()) {
                Ok(Value::Object(mut defaults)) => defaults.remove(setting).unwrap_or(Value::Null),
                _ => Value::Null,
            },
        };
        fields.insert(setting.to_string(), value);
        let mut next: Config = serde_json::from_value(Value::Object(fields))
            .map_err(|e| ConfigError::Refused(format!("{setting}: {e}")))?;
        // Settings never shown (admins, secrets) are kept as they were.
        next.admins = current.admins;
        next.secret = current.secret;
        next.jwt_keys = current.jwt_keys;
        Ok(next)
    }

    /// Writes (or, with `None`, removes) one setting in the file, keeping
    /// the rest of it as it was.
    fn persist(&self, setting: &str, value: Option<&Value>) -> Result<(), ConfigError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(ConfigError::Refused(format!(
                    "cannot read the configuration file: {e}"
                )));
            }
        };
        let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
            ConfigError::Refused(format!("cannot parse the configuration file: {e}"))
        })?;
        match value {
            None => {
                doc.remove(setting);
            }
            Some(value) => {
                let item = match value {
                    Value::Bool(b) => toml_edit::value(*b),
                    Value::Number(n) => toml_edit::value(n.as_i64().unwrap_or(i64::MAX)),
                    Value::Array(items) => {
                        let mut array = toml_edit::Array::new();
                        for i in items {
                            array.push(as_text(i));
                        }
                        toml_edit::value(array)
                    }
                    other => toml_edit::value(as_text(other)),
                };
                // Top-level keys go before the tables (`[admins]`...).
                doc.insert(setting, item);
            }
        }
        crate::security::write_private(&self.file, doc.to_string().as_bytes()).map_err(|e| {
            ConfigError::Refused(format!("cannot write the configuration file: {e:#}"))
        })
    }
}

impl NodeConfig for ServerConfig {
    fn sections(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        if let Ok(Value::Object(fields)) = serde_json::to_value(&*self.current()) {
            for (setting, value) in fields {
                let (section, key) = place(&setting);
                sections
                    .entry(section)
                    .or_default()
                    .insert(key, as_text(&value));
            }
        }
        sections
            .entry("couchdb".into())
            .or_default()
            .insert("uuid".into(), self.server_uuid.clone());
        sections
    }

    fn set(
        &self,
        section: &str,
        key: &str,
        value: &str,
        persist: bool,
    ) -> Result<String, ConfigError> {
        if section == "couchdb" && key == "uuid" {
            return Err(ConfigError::Refused(
                "the server's uuid cannot be changed".into(),
            ));
        }
        let fields = match serde_json::to_value(&*self.current()) {
            Ok(Value::Object(fields)) => fields,
            _ => return Err(ConfigError::Unknown),
        };
        let setting = setting_of(section, key, &fields).ok_or_else(|| {
            ConfigError::Refused(format!("Recliner has no setting [{section}] {key}"))
        })?;
        let old = fields.get(&setting).cloned().unwrap_or(Value::Null);
        let new = typed(value, &old, key)?;
        let next = self.with_setting(&setting, Some(new.clone()))?;
        next.validate().map_err(ConfigError::Refused)?;
        if persist {
            self.persist(&setting, Some(&new))?;
        }
        self.replace(next)?;
        tracing::info!(section, key, persist, "configuration changed");
        Ok(as_text(&old))
    }

    fn delete(&self, section: &str, key: &str, persist: bool) -> Result<String, ConfigError> {
        let fields = match serde_json::to_value(&*self.current()) {
            Ok(Value::Object(fields)) => fields,
            _ => return Err(ConfigError::Unknown),
        };
        let setting = setting_of(section, key, &fields).ok_or(ConfigError::Unknown)?;
        let old = fields.get(&setting).cloned().unwrap_or(Value::Null);
        let next = self.with_setting(&setting, None)?;
        if persist {
            self.persist(&setting, None)?;
        }
        self.replace(next)?;
        tracing::info!(section, key, persist, "configuration reset to its default");
        Ok(as_text(&old))
    }

    fn reload(&self) -> Result<(), ConfigError> {
        let current = self.current().clone();
        let flags = crate::config::FlagOverrides {
            data_dir: Some(current.data_dir.clone()),
            ..Default::default()
        };
        let env: Vec<(String, String)> = std::env::vars().collect();
        let file = self.file.is_file().then_some(self.file.as_path());
        let mut next = Config::load(file, &flags, &env).map_err(ConfigError::Refused)?;
        // Where it listens and keeps its data do not change while it runs.
        next.bind = current.bind;
        next.port = current.port;
        next.data_dir = current.data_dir;
        self.replace(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_show_under_couchdbs_names_or_recliners_own() {
        assert_eq!(
            place("replicator_max_jobs"),
            ("replicator".into(), "max_jobs".into())
        );
        assert_eq!(
            place("durability"),
            ("recliner".into(), "durability".into())
        );
        let fields = match serde_json::to_value(Config::default()) {
            Ok(Value::Object(f)) => f,
            _ => unreachable!(),
        };
        assert_eq!(
            setting_of("chttpd", "bind_address", &fields).as_deref(),
            Some("bind")
        );
        assert_eq!(
            setting_of("recliner", "durability", &fields).as_deref(),
            Some("durability")
        );
        assert_eq!(
            setting_of("recliner", "replicator_max_jobs", &fields),
            None,
            "only by CouchDB's name"
        );
        assert_eq!(setting_of("nope", "x", &fields), None);
    }

    #[test]
    fn text_is_read_as_the_settings_type() {
        assert_eq!(typed("7", &Value::from(1), "k"), Ok(Value::from(7)));
        assert!(typed("seven", &Value::from(1), "k").is_err());
        assert_eq!(
            typed("true", &Value::Bool(false), "k"),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            typed("a, b", &serde_json::json!([]), "k"),
            Ok(serde_json::json!(["a", "b"]))
        );
        assert_eq!(as_text(&serde_json::json!(["a", "b"])), "a, b");
    }
}
