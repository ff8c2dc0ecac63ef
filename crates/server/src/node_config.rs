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
    ("query_server_config", "query_limit", "query_limit"),
    (
        "query_server_config",
        "partition_query_limit",
        "partition_query_limit",
    ),
    ("couchdb", "max_dbs_open", "max_dbs_open"),
    ("couchdb", "os_process_timeout", "os_process_timeout"),
    ("couchdb", "default_security", "default_security"),
    ("couchdb", "max_attachment_size", "max_attachment_size"),
    ("couchdb", "max_partition_size", "max_partition_size"),
    (
        "attachments",
        "compression_level",
        "attachment_compression_level",
    ),
    ("attachments", "compressible_types", "compressible_types"),
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
    ("chttpd_auth", "x_auth_username", "proxy_username_header"),
    ("chttpd_auth", "x_auth_roles", "proxy_roles_header"),
    ("chttpd_auth", "x_auth_token", "proxy_token_header"),
    ("chttpd_auth", "authentication_db", "authentication_db"),
    ("chttpd_auth", "password_regexp", "password_regexp"),
    (
        "chttpd",
        "authentication_handlers",
        "authentication_handlers",
    ),
    ("httpd", "enable_cors", "cors_enabled"),
    ("cors", "origins", "cors_origins"),
    ("cors", "credentials", "cors_credentials"),
    ("cors", "methods", "cors_methods"),
    ("cors", "headers", "cors_headers"),
    ("uuids", "algorithm", "uuids_algorithm"),
    ("uuids", "utc_id_suffix", "utc_id_suffix"),
    ("log", "level", "log_level"),
    ("jwt_auth", "required_claims", "jwt_required_claims"),
    ("jwt_auth", "leeway_seconds", "jwt_leeway_seconds"),
    ("jwt_auth", "roles_claim_name", "jwt_roles_claim_name"),
    ("jwt_auth", "roles_claim_path", "jwt_roles_claim_path"),
    ("ssl", "cert_file", "tls_cert"),
    ("ssl", "key_file", "tls_key"),
    ("ssl", "port", "tls_port"),
    ("chttpd", "allow_jsonp", "allow_jsonp"),
    ("chttpd", "decode_plus_to_space", "decode_plus_to_space"),
    ("chttpd", "x_forwarded_host", "x_forwarded_host"),
    ("chttpd", "x_forwarded_proto", "x_forwarded_proto"),
    ("chttpd", "x_forwarded_ssl", "x_forwarded_ssl"),
    ("chttpd", "rewrite_limit", "rewrite_limit"),
    ("chttpd", "secure_rewrites", "secure_rewrites"),
    ("chttpd", "config_whitelist", "config_whitelist"),
    (
        "couch_auto_purge_plugin",
        "deleted_document_ttl",
        "auto_purge_deleted_document_ttl",
    ),
];

/// The settings whose change takes effect only at the next start; every
/// other one reaches the running server at once, through
/// [`ServerConfig::replace`]: the replication scheduler's limits and
/// replication defaults, then `on_change` (in `main.rs`), which rebuilds the
/// HTTP API's configuration (`api_config_of`: sizes, authentication, CORS,
/// uuids, HTTP rules, the admins), applies the store's live options
/// (`Store::apply_options`) and follows the authentication database. The
/// test `only_the_settings_read_once_wait_for_the_next_start` checks this
/// list against those: a setting they do not read must be here.
const APPLIED_AT_START: &[&str] = &[
    // Where it listens: bound once.
    "bind",
    "port",
    "tls_cert",
    "tls_key",
    "tls_port",
    // Where the databases are and how they are written: opened once.
    "data_dir",
    "store",
    "store_notify",
    "store_advisory_locks",
    "store_poll_interval_ms",
    "durability",
    // Logging: set up once, before anything else.
    "log_level",
    "log_format",
    "log_file",
    "log_max_size",
    "log_max_files",
    "log_request_format",
    // The JavaScript engines: started once with their limits.
    "query_server_threads",
    "os_process_timeout",
    "query_server_memory",
    // Background tasks, started with their settings.
    "compaction_daemon",
    "compaction_min_garbage",
    "compaction_min_file_size",
    "compaction_check_interval_ms",
    "auto_purge_interval_ms",
    // How replications check HTTPS peers: set once for the process.
    "replicator_verify_ssl_certificates",
    "replicator_ssl_trusted_certificates_file",
    // The HTTP API follows it at once, but the `_replicator` manager acts
    // for anonymous documents as the caller it was started with.
    "insecure_admin_party",
];

/// The (section, key) pairs of [`APPLIED_AT_START`], with the data folder
/// under CouchDB's name too, keys sorted.
fn applied_at_start_keys() -> BTreeMap<String, Vec<String>> {
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for setting in APPLIED_AT_START {
        let (section, key) = place(setting);
        keys.entry(section).or_default().push(key);
    }
    keys.entry("couchdb".into())
        .or_default()
        .push("database_dir".into());
    for list in keys.values_mut() {
        list.sort();
    }
    keys
}

/// Sections CouchDB refuses to change over HTTP (they name code to run).
const BLACKLISTED_SECTIONS: &[&str] = &[
    "daemons",
    "external",
    "httpd_design_handlers",
    "httpd_db_handlers",
    "httpd_global_handlers",
    "native_query_servers",
    "os_daemons",
    "query_servers",
    "feature_flags",
];

/// CouchDB's section of JWT keys, which is also the configuration file's
/// table of them.
const JWT_KEYS: &str = "jwt_keys";

/// Whether a (section, key) holds a secret: the JWT keys and the cookie
/// and proxy secret. They are set and removed through the API but never
/// shown, not even as the old value a change answers with.
fn is_secret(section: &str, key: &str) -> bool {
    section == JWT_KEYS || (section == "chttpd_auth" && key == "secret")
}

/// CouchDB's section of replicator databases' shares, and the table
/// that holds them in the configuration file.
const SHARES_SECTION: &str = "replicator.shares";
const SHARES_TABLE: &str = "replicator_shares";

/// The configuration field that holds CouchDB settings Recliner keeps
/// without using them; never a setting of its own.
const OTHER: &str = "other";

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
    /// Called with every accepted configuration before the change is
    /// answered: the parts of the server that rebuild themselves from it
    /// (the HTTP API) serve the very next request with it.
    on_change: std::sync::OnceLock<OnChange>,
}

/// What [`ServerConfig::on_change`] calls.
pub struct OnChange(pub Box<dyn Fn(&Config) + Send + Sync>);

impl std::fmt::Debug for OnChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnChange")
    }
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
    (section == OWN_SECTION
        && key != OTHER
        && known.contains_key(key)
        && place(key).0 == OWN_SECTION)
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
            on_change: std::sync::OnceLock::new(),
            current: Mutex::new(config),
            file,
            scheduler,
            server_uuid,
        }
    }

    /// Sets what every accepted configuration is handed to (once).
    pub fn on_change(&self, apply: OnChange) {
        let _ = self.on_change.set(apply);
    }

    /// The configured admins (name → password hash).
    pub fn admins(&self) -> std::collections::BTreeMap<String, String> {
        self.current().admins.clone()
    }

    /// Replaces the admins in force (not in the file): what the other
    /// nodes sharing the store changed.
    pub fn set_admins(&self, admins: std::collections::BTreeMap<String, String>) {
        let mut next = self.current().clone();
        next.admins = admins;
        if let Err(e) = self.replace(next) {
            tracing::warn!(error = ?e, "the shared admins cannot be applied");
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
        *self.current() = next.clone();
        if let Some(apply) = self.on_change.get() {
            (apply.0)(&next);
        }
        self.scheduler.update_config(|config| {
            config.max_jobs = scheduler.max_jobs;
            config.interval = scheduler.interval;
            config.max_churn = scheduler.max_churn;
            config.first_turn = scheduler.first_turn;
            config.max_history = scheduler.max_history;
            config.spec_defaults = scheduler.spec_defaults;
            config.shares = scheduler.shares;
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
        // Settings never shown (admins, secrets) are kept as they were, and
        // where the databases are never changes while the server runs.
        next.store = current.store;
        next.admins = current.admins;
        next.secret = current.secret;
        next.jwt_keys = current.jwt_keys;
        Ok(next)
    }

    /// The configuration file as an editable document (empty when absent),
    /// so a change keeps the rest of it, comments included, as it was.
    fn read_file(&self) -> Result<toml_edit::DocumentMut, ConfigError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(ConfigError::Refused(format!(
                    "cannot read the configuration file: {e}"
                )));
            }
        };
        text.parse()
            .map_err(|e| ConfigError::Refused(format!("cannot parse the configuration file: {e}")))
    }

    fn write_file(&self, doc: &toml_edit::DocumentMut) -> Result<(), ConfigError> {
        crate::security::write_private(&self.file, doc.to_string().as_bytes()).map_err(|e| {
            ConfigError::Refused(format!("cannot write the configuration file: {e:#}"))
        })
    }

    /// Writes (or, with `None`, removes) one setting in the file, keeping
    /// the rest of it as it was.
    fn persist(&self, setting: &str, value: Option<&Value>) -> Result<(), ConfigError> {
        let mut doc = self.read_file()?;
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
        self.write_file(&doc)
    }
}

/// CouchDB's 403 for the sections that name code to run.
fn check_section(section: &str) -> Result<(), ConfigError> {
    if BLACKLISTED_SECTIONS.contains(&section) {
        return Err(ConfigError::Forbidden(
            "Config section blacklisted for modification over HTTP API.".into(),
        ));
    }
    Ok(())
}

impl ServerConfig {
    /// `PUT _config/admins/NAME`: a password is kept only as its hash (a
    /// value that already is one is kept as given); the admin can log in at once.
    fn set_admin(&self, name: &str, value: &str, persist: bool) -> Result<String, ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::Refused("an admin needs a name".into()));
        }
        let mut next = self.current().clone();
        let hash = match auth::password::Credentials::parse_admin(value) {
            Ok(Some(_)) => value.to_string(),
            Ok(None) => {
                auth::password::Credentials::hash(value, next.password_iterations).to_admin_string()
            }
            Err(e) => return Err(ConfigError::Refused(e.to_string())),
        };
        let old = next
            .admins
            .insert(name.to_string(), hash.clone())
            .unwrap_or_default();
        if persist {
            self.persist_table_entry("admins", name, Some(&hash))?;
        }
        self.replace(next)?;
        tracing::info!(admin = %name, persist, "server admin set");
        Ok(old)
    }

    /// `DELETE _config/admins/NAME`.
    fn delete_admin(&self, name: &str, persist: bool) -> Result<String, ConfigError> {
        let mut next = self.current().clone();
        let old = next.admins.remove(name).ok_or(ConfigError::Unknown)?;
        if persist {
            self.persist_table_entry("admins", name, None)?;
        }
        self.replace(next)?;
        tracing::info!(admin = %name, persist, "server admin removed");
        Ok(old)
    }

    /// `PUT _config/replicator.shares/DB` (`None`: `DELETE`, back to the
    /// default 100): the next turns share the slots accordingly.
    fn set_shares(
        &self,
        db: &str,
        value: Option<&str>,
        persist: bool,
    ) -> Result<String, ConfigError> {
        let mut next = self.current().clone();
        let old = match value {
            Some(text) => {
                let shares = text
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        ConfigError::Refused(format!(
                            "shares of {db} must be an integer from 1 to 1000"
                        ))
                    })?;
                next.replicator_shares.insert(db.to_string(), shares)
            }
            None => next.replicator_shares.remove(db),
        };
        if value.is_none() && old.is_none() {
            return Err(ConfigError::Unknown);
        }
        if persist {
            let shares = value
                .and_then(|_| next.replicator_shares.get(db))
                .map(|n| toml_edit::value(i64::from(*n)));
            self.persist_table_item(SHARES_TABLE, db, shares)?;
        }
        self.replace(next)?;
        tracing::info!(db, persist, "replicator shares changed");
        Ok(old.map(|n| n.to_string()).unwrap_or_default())
    }

    /// `PUT`/`DELETE` of a secret (see [`is_secret`]), `None` removing it:
    /// applied at once, as CouchDB applies a new key, and answered with an
    /// empty old value.
    fn set_secret(
        &self,
        section: &str,
        key: &str,
        value: Option<&str>,
        persist: bool,
    ) -> Result<String, ConfigError> {
        let mut next = self.current().clone();
        let existed = if section == JWT_KEYS {
            match value {
                Some(value) => next.jwt_keys.insert(key.into(), value.into()),
                None => next.jwt_keys.remove(key),
            }
            .is_some()
        } else {
            std::mem::replace(&mut next.secret, value.map(str::to_string)).is_some()
        };
        if value.is_none() && !existed {
            return Err(ConfigError::Unknown);
        }
        if persist {
            if section == JWT_KEYS {
                self.persist_table_entry(JWT_KEYS, key, value)?;
            } else {
                self.persist("secret", value.map(Value::from).as_ref())?;
            }
        }
        self.replace(next)?;
        tracing::info!(section, key, persist, "secret configuration changed");
        Ok(String::new())
    }

    /// A CouchDB setting Recliner has no use for: kept (and shown) as set,
    /// as CouchDB keeps any key; `None` removes it.
    fn set_other(
        &self,
        section: &str,
        key: &str,
        value: Option<&str>,
        persist: bool,
    ) -> Result<String, ConfigError> {
        let mut next = self.current().clone();
        let keys = next.other.entry(section.to_string()).or_default();
        let old = match value {
            Some(value) => keys.insert(key.to_string(), value.to_string()),
            None => keys.remove(key),
        };
        if keys.is_empty() {
            next.other.remove(section);
        }
        if value.is_none() && old.is_none() {
            return Err(ConfigError::Unknown);
        }
        if persist {
            self.persist_table_entry(&format!("{OTHER}.{section}"), key, value)?;
        }
        self.replace(next)?;
        tracing::info!(
            section,
            key,
            persist,
            "configuration changed (kept, unused by Recliner)"
        );
        Ok(old.unwrap_or_default())
    }

    /// Sets (or with `None` removes) `key` in the file's table `table`
    /// (dotted for a nested one), keeping the rest of the file as it was.
    fn persist_table_entry(
        &self,
        table: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), ConfigError> {
        self.persist_table_item(table, key, value.map(toml_edit::value))
    }

    /// [`ServerConfig::persist_table_entry`] with a value of any type.
    fn persist_table_item(
        &self,
        table: &str,
        key: &str,
        value: Option<toml_edit::Item>,
    ) -> Result<(), ConfigError> {
        let mut doc = self.read_file()?;
        let mut table_item = doc.as_table_mut();
        for part in table.split('.') {
            let entry = table_item
                .entry(part)
                .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            // A nested table shows under its full name only.
            if let Some(t) = entry.as_table_mut() {
                t.set_implicit(part == OTHER);
            }
            table_item = entry.as_table_mut().ok_or_else(|| {
                ConfigError::Refused(format!(
                    "`{table}` in the configuration file is not a table"
                ))
            })?;
        }
        match value {
            Some(value) => {
                table_item.insert(key, value);
            }
            None => {
                table_item.remove(key);
            }
        }
        self.write_file(&doc)
    }
}

impl NodeConfig for ServerConfig {
    fn sections(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let current = self.current().clone();
        if let Ok(Value::Object(fields)) = serde_json::to_value(&current) {
            for (setting, value) in fields {
                if setting == OTHER || setting == SHARES_TABLE {
                    continue;
                }
                let (section, key) = place(&setting);
                let text = if setting == "store" {
                    crate::config::redact_url(&as_text(&value))
                } else {
                    as_text(&value)
                };
                sections.entry(section).or_default().insert(key, text);
            }
        }
        let couchdb = sections.entry("couchdb".into()).or_default();
        couchdb.insert("uuid".into(), self.server_uuid.clone());
        // Where the databases are, under CouchDB's name (shown, not set:
        // the data folder is chosen at start).
        couchdb
            .entry("database_dir".into())
            .or_insert_with(|| current.data_dir.display().to_string());
        if !current.replicator_shares.is_empty() {
            sections.insert(
                SHARES_SECTION.into(),
                current
                    .replicator_shares
                    .iter()
                    .map(|(db, shares)| (db.clone(), shares.to_string()))
                    .collect(),
            );
        }
        // Password hashes, as CouchDB shows them to server admins.
        sections.insert("admins".into(), current.admins.clone());
        for (section, keys) in &current.other {
            let shown = sections.entry(section.clone()).or_default();
            for (key, value) in keys {
                shown.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        sections
    }

    fn set(
        &self,
        section: &str,
        key: &str,
        value: &str,
        persist: bool,
    ) -> Result<String, ConfigError> {
        check_section(section)?;
        if section == "couchdb" && key == "uuid" {
            return Err(ConfigError::Refused(
                "the server's uuid cannot be changed".into(),
            ));
        }
        if section == "admins" {
            return self.set_admin(key, value, persist);
        }
        if section == SHARES_SECTION {
            return self.set_shares(key, Some(value), persist);
        }
        if is_secret(section, key) {
            return self.set_secret(section, key, Some(value), persist);
        }
        let fields = match serde_json::to_value(&*self.current()) {
            Ok(Value::Object(fields)) => fields,
            _ => return Err(ConfigError::Unknown),
        };
        let Some(setting) = setting_of(section, key, &fields) else {
            return self.set_other(section, key, Some(value), persist);
        };
        if setting == "store" {
            return Err(ConfigError::Refused(
                "where the databases are kept cannot change while the server runs: restart it with --store".into(),
            ));
        }
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
        check_section(section)?;
        if section == "admins" {
            return self.delete_admin(key, persist);
        }
        if section == SHARES_SECTION {
            return self.set_shares(key, None, persist);
        }
        if is_secret(section, key) {
            return self.set_secret(section, key, None, persist);
        }
        let fields = match serde_json::to_value(&*self.current()) {
            Ok(Value::Object(fields)) => fields,
            _ => return Err(ConfigError::Unknown),
        };
        let Some(setting) = setting_of(section, key, &fields) else {
            return self.set_other(section, key, None, persist);
        };
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
        // Passwords written in clear since the start are hashed now (the
        // file keeps them until the next start rewrites them).
        for value in next.admins.values_mut() {
            if let Ok(None) = auth::password::Credentials::parse_admin(value) {
                *value = auth::password::Credentials::hash(value, next.password_iterations)
                    .to_admin_string();
            }
        }
        // Where it listens and keeps its data do not change while it runs.
        next.bind = current.bind;
        next.port = current.port;
        next.data_dir = current.data_dir;
        next.store = current.store;
        self.replace(next)
    }

    fn applied_at_start(&self) -> BTreeMap<String, Vec<String>> {
        applied_at_start_keys()
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

    /// What the running server rebuilds from a new configuration: the
    /// HTTP API's configuration, the store's live options, the scheduler's
    /// and the authentication database (see [`APPLIED_AT_START`]).
    fn live_view(config: &Config) -> String {
        let mut store = config.store_options();
        // Kept as the databases were opened with (`Store::apply_options`).
        store.durability = Default::default();
        // The users database and the password rules are put in force by
        // the server's change hook (`main.rs`), beside the API's config.
        format!(
            "{:?}\n{store:?}\n{:?}\n{}\n{}",
            config.api_config(),
            config.scheduler_config(),
            config.users_db(),
            config.password_regexp
        )
    }

    /// Other values for a setting, of its type (one may fit an enum).
    fn variants(value: &Value) -> Vec<Value> {
        match value {
            Value::Bool(b) => vec![Value::Bool(!b)],
            Value::Number(n) => match n.as_u64() {
                Some(u) => vec![Value::from(u + 1), Value::from(u.saturating_sub(1))],
                None => vec![Value::from(n.as_f64().unwrap_or(1.0) / 2.0)],
            },
            Value::String(_) => [
                "127.0.0.2",
                "7",
                "x",
                "json",
                "combined",
                "normal",
                "everyone",
                "random",
                "30_days",
                "X-Other",
                "postgres://u@h/d",
                "jwt_authentication_handler, proxy_authentication_handler",
            ]
            .into_iter()
            .map(Value::from)
            .collect(),
            Value::Array(_) => vec![serde_json::json!(["x"])],
            _ => Vec::new(),
        }
    }

    #[test]
    fn only_the_settings_read_once_wait_for_the_next_start() {
        let everything_on = Config {
            jwt_enabled: true,
            proxy_auth_enabled: true,
            cors_enabled: true,
            cors_origins: vec!["http://a.example".into()],
            uuids_algorithm: "utc_id".into(),
            ..Config::default()
        };
        let bases = [Config::default(), everything_on];
        let Ok(Value::Object(fields)) = serde_json::to_value(Config::default()) else {
            unreachable!()
        };
        for (setting, value) in &fields {
            if value.is_object() {
                continue; // `other` (unused) and the shares (the scheduler's).
            }
            let followed = bases.iter().any(|base| {
                let Ok(Value::Object(base_fields)) = serde_json::to_value(base) else {
                    unreachable!()
                };
                variants(&base_fields[setting]).into_iter().any(|v| {
                    let mut changed = base_fields.clone();
                    changed.insert(setting.clone(), v);
                    serde_json::from_value::<Config>(Value::Object(changed))
                        .is_ok_and(|next| live_view(&next) != live_view(base))
                })
            });
            let at_start = APPLIED_AT_START.contains(&setting.as_str());
            match setting.as_str() {
                // Kept and shown as CouchDB 3.5 does, applied nowhere.
                "config_whitelist" => assert!(!followed && !at_start),
                // Live in the HTTP API, not in the `_replicator` manager.
                "insecure_admin_party" => assert!(followed && at_start),
                _ => assert_ne!(
                    followed,
                    at_start,
                    "`{setting}`: {}",
                    if at_start {
                        "the running server follows it: remove it from APPLIED_AT_START"
                    } else {
                        "nothing the running server rebuilds reads it: list it in APPLIED_AT_START"
                    }
                ),
            }
        }
    }

    #[test]
    fn the_console_learns_which_keys_need_a_restart() {
        let keys = applied_at_start_keys();
        let needs_restart = |section: &str, key: &str| {
            keys.get(section)
                .is_some_and(|k| k.iter().any(|k| k == key))
        };
        assert!(needs_restart("chttpd", "port"));
        assert!(needs_restart("chttpd", "bind_address"));
        assert!(needs_restart("recliner", "data_dir"));
        assert!(needs_restart("couchdb", "database_dir"));
        assert!(needs_restart("log", "level"));
        assert!(needs_restart("recliner", "durability"));
        assert!(needs_restart("couchdb", "os_process_timeout"));
        assert!(!needs_restart("replicator", "max_jobs"));
        assert!(!needs_restart("couchdb", "max_document_size"));
        assert!(!needs_restart("uuids", "algorithm"));
        assert!(!needs_restart("admins", "admin"));
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
