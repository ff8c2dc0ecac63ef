//! The server's configuration, layered with figment: built-in defaults <
//! `recliner.toml` (the `--config` path, else the one in the data folder if
//! present) < `RECLINER_*` environment variables < command-line flags.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

mod couchdb_auth;

/// The configuration file looked for in the data folder when `--config` is not given.
pub const CONFIG_FILE_NAME: &str = "recliner.toml";

/// Every setting of a running server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on; loopback by default so a fresh install is not
    /// reachable from the network.
    pub bind: IpAddr,
    /// TCP port; CouchDB's 5984 by default so clients work unchanged. 0 picks a free port.
    pub port: u16,
    /// Folder holding the server uuid and one file per database (with
    /// `store` set: this node's own files, its indexes).
    pub data_dir: PathBuf,
    /// Where the databases are kept: empty for SQLite files in the data
    /// folder (the default), or `postgres://user:password@host/dbname` for a
    /// PostgreSQL database that any number of recliner nodes can share.
    pub store: String,
    /// With a PostgreSQL `store`: announce commits to the other nodes with
    /// `NOTIFY` (their feeds wake at once). Off for PostgreSQL-compatible
    /// engines without `LISTEN`/`NOTIFY`: nodes poll instead, every
    /// `store_poll_interval_ms`.
    pub store_notify: bool,
    /// With a PostgreSQL `store`: nodes starting together migrate the
    /// tables under an advisory lock. Off for engines without advisory
    /// locks: under a row lock in a table of its own.
    pub store_advisory_locks: bool,
    /// With `store_notify` off: milliseconds between two reads of the open
    /// databases' change counters, the longest a node takes to see another
    /// node's commit.
    pub store_poll_interval_ms: u64,
    /// Log filter, in `tracing` directive syntax (`info`, `debug`, `store=trace`).
    pub log_level: String,
    /// Log line format: `human` for terminals, `json` for log collectors.
    pub log_format: LogFormat,
    /// Write the log to this file instead of standard error; empty for
    /// standard error.
    pub log_file: PathBuf,
    /// Bytes past which the log file is renamed `FILE.1` (older ones
    /// shift to `FILE.2`...) and begun anew.
    pub log_max_size: u64,
    /// Rotated log files kept beside the current one.
    pub log_max_files: usize,
    /// The request log: `fields` (one event with the request's fields, in
    /// `log_format`) or `combined` (Apache's combined log format, one line
    /// per request, which access-log processors read).
    pub log_request_format: RequestLogFormat,
    /// Largest JSON body of one document in bytes; larger ones get 413
    /// `document_too_large` (CouchDB's default: 8 MB).
    pub max_document_size: u64,
    /// Largest request body in bytes; larger ones get 413 `too_large`
    /// (CouchDB's default: 4 GiB, generous for inline attachments).
    pub max_http_request_size: u64,
    /// Largest JSON body that is not documents (`_revs_diff`, `_bulk_get`,
    /// `keys`, `doc_ids`, `_security`, `_replicate`...), which is parsed
    /// whole; larger ones get 413 `too_large`. Document bodies are scanned
    /// as they arrive and bounded by `max_http_request_size` instead.
    pub max_json_body_size: u64,
    /// Longest document id in bytes; longer ones get 400 `illegal_docid`.
    pub max_document_id_length: usize,
    /// Most attachments on one document.
    pub max_attachments_per_document: usize,
    /// Longest attachment name in bytes.
    pub max_attachment_name_length: usize,
    /// Most items in one request (`_bulk_docs` and `_bulk_get` documents,
    /// `_revs_diff` revisions, `keys`, `doc_ids`).
    pub max_bulk_items: usize,
    /// Most rows a view or `_all_docs` query may ask for, and what it gets
    /// without a `limit` (CouchDB's `[query_server_config] query_limit`):
    /// a number, or `infinity`.
    pub query_limit: String,
    /// The same for queries of one partition (`partition_query_limit`).
    pub partition_query_limit: String,
    /// Largest attachment in bytes; larger ones get 413
    /// `attachment_too_large` (CouchDB's default: 1 GiB).
    pub max_attachment_size: u64,
    /// Size in bytes past which a partition takes no more edits (CouchDB's
    /// `max_partition_size`: 10 GiB; 0 for no limit).
    pub max_partition_size: u64,
    /// gzip level (1-9) new attachments of `compressible_types` are stored
    /// at; 0 stores every attachment as sent (CouchDB's default: 8).
    pub attachment_compression_level: u32,
    /// Media types whose attachments are stored gzip-compressed, comma
    /// separated, `*` for anything (CouchDB's default: text/*,
    /// application/javascript, application/json, application/xml). The
    /// compressed bytes' digest enters revision ids, as in CouchDB.
    pub compressible_types: String,
    /// Threads running design-document JavaScript (validation functions,
    /// filters, views), each with its own engine.
    pub query_server_threads: usize,
    /// Milliseconds one JavaScript function may run (CouchDB's
    /// `os_process_timeout`: 5000).
    pub os_process_timeout: u64,
    /// Bytes of memory each query server thread's JavaScript engine may use.
    pub query_server_memory: u64,
    /// `full` (the default, as CouchDB 3): every acknowledged write is
    /// fsynced and survives power loss, at the cost of an fsync per group
    /// commit; `normal`: acknowledged writes survive a crash of the process
    /// but the last ones may be lost on power loss (SQLite WAL,
    /// synchronous=NORMAL).
    pub durability: DurabilityMode,
    /// Databases kept open at once (CouchDB's default: 500). Past it the
    /// least recently used database that no request, feed or replication
    /// holds is closed (and reopened when next used), so thousands of
    /// databases do not each hold file descriptors and memory. Each open
    /// database holds a few file descriptors: the process's limit
    /// (`ulimit -n`) should allow several per open database.
    pub max_dbs_open: usize,
    /// Answer cross-origin requests (browser apps); off by default.
    pub cors_enabled: bool,
    /// Allowed origins when CORS is on: a list, or one comma-separated string; `*` for any.
    #[serde(deserialize_with = "string_or_list")]
    pub cors_origins: Vec<String>,
    /// Allow cookies and authorization headers on cross-origin requests.
    pub cors_credentials: bool,
    /// Methods allowed on cross-origin requests.
    #[serde(deserialize_with = "string_or_list")]
    pub cors_methods: Vec<String>,
    /// Request headers allowed on cross-origin requests.
    #[serde(deserialize_with = "string_or_list")]
    pub cors_headers: Vec<String>,
    /// Replications running at once; the others wait as `pending` and take
    /// turns (CouchDB's default: 500).
    pub replicator_max_jobs: usize,
    /// Milliseconds between turns of waiting and running replications.
    pub replicator_interval_ms: u64,
    /// Replications stopped and started per turn, at most.
    pub replicator_max_churn: usize,
    /// Milliseconds a replication runs before one woken by a change (a
    /// parked continuous job) may take its slot when none is free.
    pub replicator_first_turn_ms: u64,
    /// Events kept in each job's history (`_scheduler/jobs`).
    pub replicator_max_history: usize,
    /// Default milliseconds between a replication's checkpoints.
    pub replicator_checkpoint_interval_ms: u64,
    /// Default changes read per batch.
    pub replicator_worker_batch_size: u64,
    /// Default milliseconds before a request to a peer is abandoned.
    pub replicator_connection_timeout_ms: u64,
    /// Default retries of a failed request to a peer before the job crashes.
    pub replicator_retries_per_request: u64,
    /// The most one answer of a replication peer carrying documents may
    /// hold, in bytes (attachments inline included): a longer one fails
    /// the job instead of filling memory.
    pub replicator_max_answer_bytes: u64,
    /// Shares of the running replication slots by replicator database
    /// (CouchDB's `[replicator.shares]`: `"a/_replicator" = 300` in the
    /// table `[replicator_shares]`); a database not named has 100.
    #[serde(default)]
    pub replicator_shares: std::collections::BTreeMap<String, u32>,
    /// Compact databases automatically, in the background, when their file
    /// is mostly garbage (CouchDB's compaction daemon; on by default).
    pub compaction_daemon: bool,
    /// The share of a file (0 to 1) that must be garbage before it is
    /// compacted automatically (CouchDB's file-to-data ratio of 2: 0.5).
    pub compaction_min_garbage: f64,
    /// Files smaller than this many bytes are not compacted automatically.
    pub compaction_min_file_size: u64,
    /// Milliseconds between two looks at the databases written since.
    pub compaction_check_interval_ms: u64,
    /// Server admins, as CouchDB's `[admins]` table: name = password. A
    /// plain-text password is replaced by its PBKDF2 hash in this file when
    /// the server starts. Never printed by `--print-config`.
    #[serde(default, skip_serializing)]
    pub admins: std::collections::BTreeMap<String, String>,
    /// Every caller is a server admin (CouchDB 1's "admin party"). Only for
    /// a throwaway server nobody else can reach: a warning says so at every start.
    pub insecure_admin_party: bool,
    /// Refuse every anonymous request (CouchDB's `require_valid_user`).
    pub require_valid_user: bool,
    /// `_all_dbs` and `_dbs_info` only for server admins (CouchDB 3's default).
    pub admin_only_all_dbs: bool,
    /// `admin_only` (CouchDB 3's default): a new database is for server
    /// admins until its `_security` names members; `everyone`: it is open
    /// to every user.
    pub default_security: DefaultSecurityMode,
    /// Allow changing `_users`' `_security` (CouchDB's default: no).
    pub users_db_security_editable: bool,
    /// Let users read other users' documents' `public_fields`.
    pub users_db_public: bool,
    /// Fields of user documents others may read when `users_db_public` is on.
    #[serde(deserialize_with = "string_or_list")]
    pub public_fields: Vec<String>,
    /// Seconds a session cookie stays valid (CouchDB's `timeout`).
    pub auth_timeout: u64,
    /// Session cookies carry an expiry, so they outlive the browser session.
    pub allow_persistent_cookies: bool,
    /// PBKDF2 rounds for new passwords (CouchDB 3.5's 600,000).
    pub password_iterations: u32,
    /// The key of session cookies (CouchDB's `[chttpd_auth] secret`): give
    /// every node sharing sessions the same one. Generated and kept in the
    /// data folder when unset. Never printed by `--print-config`.
    #[serde(default, skip_serializing)]
    pub secret: Option<String>,
    /// Accept `Authorization: Bearer` JWTs (CouchDB's `jwt_authentication`).
    pub jwt_enabled: bool,
    /// JWT keys, as CouchDB's `[jwt_keys]`: `"hmac:_default" = "<base64>"`,
    /// `"rsa:KID"`/`"ec:KID" = "<PEM public key>"`. Never printed.
    #[serde(default, skip_serializing)]
    pub jwt_keys: std::collections::BTreeMap<String, String>,
    /// Claims every token must carry; `exp` and `nbf` are checked against the clock.
    #[serde(deserialize_with = "string_or_list")]
    pub jwt_required_claims: Vec<String>,
    /// Seconds of clock skew tolerated on a token's `exp` and `nbf`
    /// (`[jwt_auth] leeway_seconds`); 0 compares them as CouchDB does.
    pub jwt_leeway_seconds: u64,
    /// The claim holding the user's roles.
    pub jwt_roles_claim_name: String,
    /// A dotted path to the roles claim instead (`app.roles`); empty for none.
    pub jwt_roles_claim_path: String,
    /// Trust `X-Auth-CouchDB-UserName`/`-Roles` from a proxy (CouchDB's
    /// proxy authentication): only behind a proxy that sets them itself.
    pub proxy_auth_enabled: bool,
    /// Require `X-Auth-CouchDB-Token`, the HMAC of the name with `secret`.
    pub proxy_use_secret: bool,
    /// The headers a proxy names the user, the roles and the token in
    /// (CouchDB's `[chttpd_auth] x_auth_username`, `x_auth_roles`, `x_auth_token`).
    pub proxy_username_header: String,
    pub proxy_roles_header: String,
    pub proxy_token_header: String,
    /// CouchDB's `[chttpd] authentication_handlers`: naming
    /// `jwt_authentication_handler` or `proxy_authentication_handler` turns
    /// that way of logging in on, as `jwt_enabled`/`proxy_auth_enabled` do.
    pub authentication_handlers: String,
    /// The database logins are looked up in (CouchDB's `[chttpd_auth]
    /// authentication_db`); empty for `[couch_httpd_auth]`'s, else `_users`.
    pub authentication_db: String,
    /// CouchDB's `[chttpd_auth] password_regexp`: the patterns every new
    /// password must match (`auth::password_rules`); empty for none.
    pub password_regexp: String,
    /// Pause logins for a name from an address after repeated failures.
    pub lockout_enabled: bool,
    /// Failures before the pause.
    pub lockout_threshold: u32,
    /// How long the pause lasts, in milliseconds from the first failure.
    pub lockout_max_lifetime_ms: u64,
    /// Serve HTTPS with this certificate chain (PEM file); empty for none.
    pub tls_cert: PathBuf,
    /// The certificate's private key (PEM file).
    pub tls_key: PathBuf,
    /// The HTTPS port (CouchDB's 6984); 0 picks a free one.
    pub tls_port: u16,
    /// Check HTTPS peers' certificates when replicating (on by default,
    /// unlike CouchDB's `verify_ssl_certificates`: a peer that cannot prove
    /// who it is could be anyone).
    pub replicator_verify_ssl_certificates: bool,
    /// Extra certificate authorities (PEM file) trusted for HTTPS peers,
    /// beside the system's (CouchDB's `ssl_trusted_certificates_file`).
    pub replicator_ssl_trusted_certificates_file: PathBuf,
    /// This node's name in `/_membership` and `/_node/{name}` (CouchDB's
    /// `name@host` form).
    pub node_name: String,
    /// How `/_uuids` and `POST /db` make ids: `sequential` (CouchDB 3.5's
    /// default), `random`, `utc_random` or `utc_id`.
    pub uuids_algorithm: String,
    /// What `utc_id` ids end with; give each replicating node its own.
    pub utc_id_suffix: String,
    /// Answer `?callback=name` with JSONP (CouchDB's `allow_jsonp`; off by default).
    pub allow_jsonp: bool,
    /// A `+` in a URL path means a space, as CouchDB reads paths by default.
    pub decode_plus_to_space: bool,
    /// The header a proxy names the client's host in, for absolute `Location` URLs.
    pub x_forwarded_host: String,
    /// The header a proxy names the client's scheme in (`https` or `http`).
    pub x_forwarded_proto: String,
    /// The header a proxy sets to `on` for HTTPS clients.
    pub x_forwarded_ssl: String,
    /// How many times `_rewrite` may lead to `_rewrite` again in one
    /// request (CouchDB's `rewrite_limit`).
    pub rewrite_limit: u32,
    /// Refuse `rewrites` rules that climb out of their database with a
    /// third `..` (CouchDB's `secure_rewrites`, on by default).
    pub secure_rewrites: bool,
    /// CouchDB 3.5 keeps this list but its `/_node/{node}/_config` does not
    /// apply it; kept and shown the same way.
    pub config_whitelist: String,
    /// The finest interval of the time bins behind `_changes?since=<time>`
    /// and automatic purging, in seconds: CouchDB's 3 hours (10800). A
    /// shorter one only serves tests.
    pub time_seq_resolution: u64,
    /// How long deleted documents are kept before they are purged
    /// automatically, for databases that set none themselves (CouchDB's
    /// `[couch_auto_purge_plugin] deleted_document_ttl`: `3_mon`,
    /// `30_days`, `infinity`; empty: never).
    pub auto_purge_deleted_document_ttl: String,
    /// How often databases are looked at for deleted documents to purge
    /// automatically, in milliseconds.
    pub auto_purge_interval_ms: u64,
    /// Settings of CouchDB's that Recliner has no use for, kept as set
    /// through the configuration API (`[other.SECTION]` in this file) so
    /// scripts written for CouchDB can set and read them back.
    #[serde(default)]
    pub other: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

/// Who may use a database nobody has set a `_security` object on yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultSecurityMode {
    AdminOnly,
    Everyone,
}

/// How hard each commit works to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityMode {
    Normal,
    Full,
}

/// Accepts `["a", "b"]` or `"a, b"` (the form environment variables allow).
fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Either::deserialize(d)? {
        Either::One(s) => s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        Either::Many(v) => v,
    })
}

impl Config {
    /// The HTTP layer's share of the configuration.
    pub fn api_config(&self) -> http_api::ApiConfig {
        let defaults = http_api::CorsConfig::default();
        http_api::ApiConfig {
            max_document_size: self.max_document_size,
            max_http_request_size: self.max_http_request_size,
            max_json_body_size: self.max_json_body_size,
            limits: http_api::Limits {
                max_document_id_length: self.max_document_id_length,
                max_attachments_per_document: self.max_attachments_per_document,
                max_attachment_name_length: self.max_attachment_name_length,
                max_bulk_items: self.max_bulk_items,
                query_limit: query_limit_of(&self.query_limit),
                partition_query_limit: query_limit_of(&self.partition_query_limit),
            },
            auth: http_api::AuthConfig {
                admins: Vec::new(),
                admin_party: self.insecure_admin_party,
                require_valid_user: self.require_valid_user,
                secret: self.secret.clone().unwrap_or_default(),
                timeout: self.auth_timeout,
                allow_persistent_cookies: self.allow_persistent_cookies,
                iterations: self.password_iterations,
                admin_only_all_dbs: self.admin_only_all_dbs,
                users_db_security_editable: self.users_db_security_editable,
                public_fields: self.public_fields.clone(),
                users_db_public: self.users_db_public,
                jwt: self.jwt_on().then(|| auth::jwt::JwtConfig {
                    keys: self
                        .jwt_keys
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    required_claims: self.jwt_required_claims.clone(),
                    leeway_seconds: self.jwt_leeway_seconds,
                    roles_claim_name: self.jwt_roles_claim_name.clone(),
                    roles_claim_path: Some(self.jwt_roles_claim_path.clone())
                        .filter(|p| !p.is_empty()),
                }),
                proxy: self.proxy_on().then(|| http_api::ProxyConfig {
                    use_secret: self.proxy_use_secret,
                    username_header: self.proxy_username_header.clone(),
                    roles_header: self.proxy_roles_header.clone(),
                    token_header: self.proxy_token_header.clone(),
                }),
                cookie_login: self.cookie_login_on(),
                basic_login: self.basic_login_on(),
                lockout: self.lockout_enabled.then(|| http_api::LockoutConfig {
                    threshold: self.lockout_threshold.max(1),
                    lifetime: std::time::Duration::from_millis(self.lockout_max_lifetime_ms),
                }),
                ..http_api::AuthConfig::default()
            },
            node_name: self.node_name.clone(),
            http: http_api::HttpRules {
                allow_jsonp: self.allow_jsonp,
                decode_plus_to_space: self.decode_plus_to_space,
                x_forwarded_host: self.x_forwarded_host.clone(),
                x_forwarded_proto: self.x_forwarded_proto.clone(),
                x_forwarded_ssl: self.x_forwarded_ssl.clone(),
                rewrite_limit: self.rewrite_limit,
                secure_rewrites: self.secure_rewrites,
            },
            uuids: http_api::UuidAlgorithm::parse(&self.uuids_algorithm, &self.utc_id_suffix)
                .unwrap_or_default(),
            cors: self.cors_enabled.then(|| http_api::CorsConfig {
                origins: self.cors_origins.clone(),
                credentials: self.cors_credentials,
                methods: if self.cors_methods.is_empty() {
                    defaults.methods.clone()
                } else {
                    self.cors_methods.clone()
                },
                headers: if self.cors_headers.is_empty() {
                    defaults.headers.clone()
                } else {
                    self.cors_headers.clone()
                },
            }),
        }
    }

    /// The store's share of the configuration.
    pub fn store_options(&self) -> store::StoreOptions {
        store::StoreOptions {
            durability: match self.durability {
                DurabilityMode::Normal => store::Durability::Normal,
                DurabilityMode::Full => store::Durability::Full,
            },
            max_attachment_size: self.max_attachment_size,
            max_partition_size: self.max_partition_size,
            max_dbs_open: self.max_dbs_open,
            attachment_compression: store::AttachmentCompression {
                level: self.attachment_compression_level,
                types: self.compressible_types.clone(),
            },
            default_security: match self.default_security {
                DefaultSecurityMode::AdminOnly => store::DefaultSecurity::AdminOnly,
                DefaultSecurityMode::Everyone => store::DefaultSecurity::Everyone,
            },
            time_seq_resolution: self.time_seq_resolution,
            auto_purge_ttl: Some(self.auto_purge_deleted_document_ttl.clone())
                .filter(|ttl| !ttl.is_empty()),
            ..store::StoreOptions::default()
        }
    }

    /// The PostgreSQL URL `store` names, if it names one.
    fn postgres_url(&self) -> Option<&str> {
        let store = self.store.trim();
        (store.starts_with("postgres://") || store.starts_with("postgresql://")).then_some(store)
    }

    /// Opens the databases where `store` says: SQLite files in the data
    /// folder, or a PostgreSQL database shared with other nodes.
    pub fn open_store(&self) -> Result<store::Store, store::StoreError> {
        let options = self.store_options();
        match self.postgres_url() {
            None => store_sqlite::open_with(&self.data_dir, options),
            Some(url) => {
                std::fs::create_dir_all(&self.data_dir).map_err(|source| {
                    store::StoreError::DataDir {
                        path: self.data_dir.clone(),
                        source,
                    }
                })?;
                let coordination = store_postgres::PostgresOptions {
                    notify: self.store_notify,
                    advisory_locks: self.store_advisory_locks,
                    poll_interval: std::time::Duration::from_millis(self.store_poll_interval_ms),
                };
                let backend = store_postgres::PostgresStore::connect(
                    url,
                    self.data_dir.clone(),
                    coordination,
                )?;
                Ok(backend.into_store(self.data_dir.clone(), options))
            }
        }
    }

    /// Where the databases are, as it may be shown: any password hidden.
    pub fn store_shown(&self) -> String {
        if self.store.is_empty() {
            format!("SQLite in {}", self.data_dir.display())
        } else {
            redact_url(&self.store)
        }
    }

    /// Automatic compaction's settings, when it is on.
    pub fn auto_compaction(&self) -> Option<store::AutoCompaction> {
        self.compaction_daemon.then(|| store::AutoCompaction {
            min_garbage: self.compaction_min_garbage,
            min_file_size: self.compaction_min_file_size,
            check_interval: std::time::Duration::from_millis(self.compaction_check_interval_ms),
            ..store::AutoCompaction::default()
        })
    }

    /// The JavaScript query server's share of the configuration.
    pub fn query_server_limits(&self) -> design_functions::Limits {
        design_functions::Limits {
            threads: self.query_server_threads,
            timeout: std::time::Duration::from_millis(self.os_process_timeout),
            memory: usize::try_from(self.query_server_memory).unwrap_or(usize::MAX),
            ..Default::default()
        }
    }

    /// The replication scheduler's share of the configuration.
    pub fn scheduler_config(&self) -> replicator::SchedulerConfig {
        replicator::SchedulerConfig {
            max_jobs: self.replicator_max_jobs,
            interval: std::time::Duration::from_millis(self.replicator_interval_ms),
            max_churn: self.replicator_max_churn,
            first_turn: std::time::Duration::from_millis(self.replicator_first_turn_ms),
            max_history: self.replicator_max_history,
            shares: self.replicator_shares.clone(),
            spec_defaults: replicator::SpecDefaults {
                checkpoint_interval: self.replicator_checkpoint_interval_ms,
                worker_batch_size: self.replicator_worker_batch_size,
                connection_timeout: self.replicator_connection_timeout_ms,
                retries_per_request: self.replicator_retries_per_request,
                max_answer_bytes: self.replicator_max_answer_bytes,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The certificate and key to serve HTTPS with, when both are set.
    pub fn tls_files(&self) -> Option<(&Path, &Path)> {
        let set = |p: &PathBuf| !p.as_os_str().is_empty();
        (set(&self.tls_cert) && set(&self.tls_key))
            .then_some((self.tls_cert.as_path(), self.tls_key.as_path()))
    }

    /// How the replicator checks HTTPS peers.
    pub fn peer_tls(&self) -> Result<replicator::PeerTls, String> {
        let file = &self.replicator_ssl_trusted_certificates_file;
        let trusted_ca_pem = if file.as_os_str().is_empty() {
            None
        } else {
            Some(std::fs::read(file).map_err(|e| {
                format!(
                    "invalid configuration: setting `replicator_ssl_trusted_certificates_file`: {}: {e}",
                    file.display()
                )
            })?)
        };
        Ok(replicator::PeerTls {
            verify: self.replicator_verify_ssl_certificates,
            trusted_ca_pem,
        })
    }

    /// Checks what the type system cannot: one line naming the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_auth()?;
        if !self.store.is_empty() && self.postgres_url().is_none() {
            return Err(format!(
                "invalid configuration: setting `store`: a postgres://user:password@host/dbname URL, or empty for SQLite in the data folder; got {:?}",
                redact_url(&self.store)
            ));
        }
        if self.store_poll_interval_ms == 0 {
            return Err(
                "invalid configuration: setting `store_poll_interval_ms`: milliseconds, above 0"
                    .into(),
            );
        }
        if !(self.compaction_min_garbage > 0.0 && self.compaction_min_garbage <= 1.0) {
            return Err(
                "invalid configuration: setting `compaction_min_garbage`: a share of the file, above 0 and at most 1"
                    .into(),
            );
        }
        for (name, value) in [
            ("query_limit", &self.query_limit),
            ("partition_query_limit", &self.partition_query_limit),
        ] {
            if value != "infinity" && value.parse::<u64>().is_err() {
                return Err(format!(
                    "invalid configuration: setting `{name}`: a number of rows, or `infinity`; got {value:?}"
                ));
            }
        }
        if self.time_seq_resolution == 0 || self.auto_purge_interval_ms == 0 {
            return Err(
                "invalid configuration: settings `time_seq_resolution` and `auto_purge_interval_ms`: must be positive"
                    .into(),
            );
        }
        if !self.auto_purge_deleted_document_ttl.is_empty()
            && store::auto_purge::parse_ttl(&self.auto_purge_deleted_document_ttl).is_none()
        {
            return Err(format!(
                "invalid configuration: setting `deleted_document_ttl`: a period such as `3_mon`, `30_days` or `8_hours`, or `infinity`; got {:?}",
                self.auto_purge_deleted_document_ttl
            ));
        }
        if self.compaction_check_interval_ms == 0 {
            return Err(
                "invalid configuration: setting `compaction_check_interval_ms`: must be positive"
                    .into(),
            );
        }
        for (setting, name) in [
            ("x_forwarded_host", &self.x_forwarded_host),
            ("x_forwarded_proto", &self.x_forwarded_proto),
            ("x_forwarded_ssl", &self.x_forwarded_ssl),
            ("proxy_username_header", &self.proxy_username_header),
            ("proxy_roles_header", &self.proxy_roles_header),
            ("proxy_token_header", &self.proxy_token_header),
        ] {
            if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!(
                    "invalid configuration: setting `{setting}`: {name:?} is no header name"
                ));
            }
        }
        if http_api::UuidAlgorithm::parse(&self.uuids_algorithm, &self.utc_id_suffix).is_none() {
            return Err("invalid configuration: setting `uuids_algorithm`: one of random, sequential, utc_random, utc_id".into());
        }
        let set = |p: &PathBuf| !p.as_os_str().is_empty();
        if set(&self.tls_cert) != set(&self.tls_key) {
            return Err(
                "invalid configuration: settings `tls_cert` and `tls_key` go together".into(),
            );
        }
        let positive = [
            ("replicator_max_jobs", self.replicator_max_jobs as u64),
            ("replicator_interval_ms", self.replicator_interval_ms),
            ("replicator_max_history", self.replicator_max_history as u64),
            (
                "replicator_checkpoint_interval_ms",
                self.replicator_checkpoint_interval_ms,
            ),
            (
                "replicator_worker_batch_size",
                self.replicator_worker_batch_size,
            ),
            (
                "replicator_connection_timeout_ms",
                self.replicator_connection_timeout_ms,
            ),
            (
                "replicator_max_answer_bytes",
                self.replicator_max_answer_bytes,
            ),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!(
                "invalid configuration: setting `{name}`: must be positive"
            ));
        }
        if self.max_document_size == 0 {
            return Err(
                "invalid configuration: setting `max_document_size`: must be positive".into(),
            );
        }
        if self.max_http_request_size == 0 {
            return Err(
                "invalid configuration: setting `max_http_request_size`: must be positive".into(),
            );
        }
        for (name, value) in [
            ("query_server_threads", self.query_server_threads as u64),
            ("os_process_timeout", self.os_process_timeout),
            ("query_server_memory", self.query_server_memory),
            ("max_attachment_size", self.max_attachment_size),
            ("max_document_id_length", self.max_document_id_length as u64),
            (
                "max_attachments_per_document",
                self.max_attachments_per_document as u64,
            ),
            (
                "max_attachment_name_length",
                self.max_attachment_name_length as u64,
            ),
            ("max_bulk_items", self.max_bulk_items as u64),
            ("max_json_body_size", self.max_json_body_size),
            ("max_dbs_open", self.max_dbs_open as u64),
        ] {
            if value == 0 {
                return Err(format!(
                    "invalid configuration: setting `{name}`: must be positive"
                ));
            }
        }
        if self.attachment_compression_level > 9 {
            return Err("invalid configuration: setting `attachment_compression_level`: from 0 (no compression) to 9".into());
        }
        if self.auth_timeout == 0 || self.password_iterations == 0 {
            return Err("invalid configuration: settings `auth_timeout` and `password_iterations` must be positive".into());
        }
        if self.cors_enabled && self.cors_origins.is_empty() {
            return Err("invalid configuration: setting `cors_origins`: CORS is enabled but no origin is allowed".into());
        }
        http_api::validate_config(&self.api_config())
            .map_err(|e| format!("invalid configuration: CORS settings: {e}"))
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

/// How each request is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestLogFormat {
    Fields,
    Combined,
}

impl Default for Config {
    fn default() -> Config {
        let scheduler = replicator::SchedulerConfig::default();
        let spec = replicator::SpecDefaults::default();
        let limits = http_api::Limits::default();
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 5984,
            data_dir: PathBuf::from("./data"),
            store: String::new(),
            store_notify: true,
            store_advisory_locks: true,
            store_poll_interval_ms: store_postgres::PostgresOptions::default()
                .poll_interval
                .as_millis() as u64,
            log_level: "info".into(),
            log_format: LogFormat::Human,
            log_file: PathBuf::new(),
            log_max_size: 64 << 20,
            log_max_files: 5,
            log_request_format: RequestLogFormat::Fields,
            max_document_size: 8_000_000,
            max_http_request_size: 4 << 30,
            max_json_body_size: 64 << 20,
            max_attachment_size: 1 << 30,
            max_partition_size: store::DEFAULT_MAX_PARTITION_SIZE,
            attachment_compression_level: store::AttachmentCompression::default().level,
            query_server_threads: design_functions::Limits::default().threads,
            os_process_timeout: design_functions::Limits::default().timeout.as_millis() as u64,
            query_server_memory: design_functions::Limits::default().memory as u64,
            compressible_types: store::DEFAULT_COMPRESSIBLE_TYPES.into(),
            max_document_id_length: limits.max_document_id_length,
            max_attachments_per_document: limits.max_attachments_per_document,
            max_attachment_name_length: limits.max_attachment_name_length,
            max_bulk_items: limits.max_bulk_items,
            query_limit: "infinity".into(),
            partition_query_limit: "infinity".into(),
            durability: DurabilityMode::Full,
            max_dbs_open: store::DEFAULT_MAX_DBS_OPEN,
            cors_enabled: false,
            cors_origins: Vec::new(),
            cors_credentials: false,
            cors_methods: Vec::new(),
            cors_headers: Vec::new(),
            replicator_max_jobs: scheduler.max_jobs,
            replicator_interval_ms: scheduler.interval.as_millis() as u64,
            replicator_max_churn: scheduler.max_churn,
            replicator_first_turn_ms: scheduler.first_turn.as_millis() as u64,
            replicator_max_history: scheduler.max_history,
            replicator_shares: Default::default(),
            compaction_daemon: true,
            compaction_min_garbage: store::AutoCompaction::default().min_garbage,
            compaction_min_file_size: store::AutoCompaction::default().min_file_size,
            compaction_check_interval_ms: store::AutoCompaction::default()
                .check_interval
                .as_millis() as u64,
            replicator_checkpoint_interval_ms: spec.checkpoint_interval,
            replicator_worker_batch_size: spec.worker_batch_size,
            replicator_connection_timeout_ms: spec.connection_timeout,
            replicator_retries_per_request: spec.retries_per_request,
            replicator_max_answer_bytes: spec.max_answer_bytes,
            admins: Default::default(),
            insecure_admin_party: false,
            require_valid_user: false,
            admin_only_all_dbs: true,
            default_security: DefaultSecurityMode::AdminOnly,
            users_db_security_editable: false,
            users_db_public: false,
            public_fields: Vec::new(),
            auth_timeout: 600,
            allow_persistent_cookies: true,
            password_iterations: auth::DEFAULT_ITERATIONS,
            secret: None,
            jwt_enabled: false,
            jwt_keys: Default::default(),
            jwt_required_claims: vec!["exp".into()],
            jwt_leeway_seconds: auth::jwt::DEFAULT_LEEWAY_SECONDS,
            jwt_roles_claim_name: "_couchdb.roles".into(),
            jwt_roles_claim_path: String::new(),
            proxy_auth_enabled: false,
            proxy_use_secret: false,
            proxy_username_header: "X-Auth-CouchDB-UserName".into(),
            proxy_roles_header: "X-Auth-CouchDB-Roles".into(),
            proxy_token_header: "X-Auth-CouchDB-Token".into(),
            authentication_handlers: String::new(),
            authentication_db: String::new(),
            password_regexp: String::new(),
            lockout_enabled: true,
            lockout_threshold: 5,
            lockout_max_lifetime_ms: 300_000,
            tls_cert: PathBuf::new(),
            tls_key: PathBuf::new(),
            tls_port: 6984,
            replicator_verify_ssl_certificates: true,
            replicator_ssl_trusted_certificates_file: PathBuf::new(),
            node_name: http_api::DEFAULT_NODE_NAME.into(),
            uuids_algorithm: "sequential".into(),
            utc_id_suffix: String::new(),
            allow_jsonp: false,
            decode_plus_to_space: true,
            x_forwarded_host: "X-Forwarded-Host".into(),
            x_forwarded_proto: "X-Forwarded-Proto".into(),
            x_forwarded_ssl: "X-Forwarded-Ssl".into(),
            rewrite_limit: 100,
            secure_rewrites: true,
            config_whitelist: String::new(),
            time_seq_resolution: store::time_seq::DEFAULT_RESOLUTION,
            auto_purge_deleted_document_ttl: String::new(),
            auto_purge_interval_ms: 3_600_000,
            other: Default::default(),
        }
    }
}

/// Settings given on the command line; `None` means "not given".
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlagOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_admin_party: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_port: Option<u16>,
}

impl Config {
    /// The configuration file in use, or the one the server writes (a
    /// generated admin, hashed passwords) when there is none yet: the
    /// `--config` path, else `recliner.toml` in the data folder.
    pub fn file_path(&self, config_path: Option<&Path>) -> PathBuf {
        config_path
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.data_dir.join(CONFIG_FILE_NAME))
    }

    /// Resolves the effective configuration from every layer.
    ///
    /// `env` is the process environment (passed in so tests need not touch
    /// the real one); `config_path` is the `--config` flag.
    pub fn load(
        config_path: Option<&Path>,
        flags: &FlagOverrides,
        env: &[(String, String)],
    ) -> Result<Config, String> {
        // The data folder decides where recliner.toml is looked for, so find
        // it first from every layer but the file.
        let pre = Figment::from(Serialized::defaults(Config::default()))
            .merge(env_provider(env))
            .merge(Serialized::defaults(flags));
        let data_dir: PathBuf = pre.extract_inner("data_dir").map_err(describe)?;
        let file = match config_path {
            Some(path) => {
                if !path.is_file() {
                    return Err(format!("config file {} does not exist", path.display()));
                }
                Some(path.to_path_buf())
            }
            None => Some(data_dir.join(CONFIG_FILE_NAME)).filter(|p| p.is_file()),
        };
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = &file {
            figment = figment.merge(Toml::file_exact(file));
        }
        figment
            .merge(env_provider(env))
            .merge(Serialized::defaults(flags))
            .extract()
            .map_err(describe)
    }
}

/// The settings `RECLINER_*` variables may set: the names of [`Config`]'s
/// fields. Other `RECLINER_*` variables (`RECLINER_CONFIG`, or ones meant for
/// other programs) are not settings and are left alone rather than refused.
fn setting_names() -> Vec<String> {
    match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

fn env_provider(env: &[(String, String)]) -> figment::providers::Serialized<figment::value::Dict> {
    let names = setting_names();
    let mut dict = figment::value::Dict::new();
    for (key, value) in env {
        let Some(name) = key.strip_prefix("RECLINER_") else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        if !names.contains(&name) {
            continue;
        }
        // Parse like figment's Env provider does, so "5984" is a number.
        let parsed: figment::value::Value = value
            .parse()
            .unwrap_or_else(|_| figment::value::Value::from(value.clone()));
        dict.insert(name, parsed);
    }
    Serialized::defaults(dict)
}

/// One line naming the setting at fault and where its value came from.
fn describe(error: figment::Error) -> String {
    let mut line = String::from("invalid configuration: ");
    if let Some(path) = error.path.last() {
        line.push_str(&format!("setting `{}`: ", path));
    }
    line.push_str(&error.kind.to_string());
    if let Some(meta) = &error.metadata {
        line.push_str(&format!(" (from {}", meta.name));
        if let Some(source) = &meta.source {
            line.push_str(&format!(" {source}"));
        }
        line.push(')');
    }
    line
}

/// A URL as it may be printed or logged: any password replaced by `*****`.
pub fn redact_url(text: &str) -> String {
    match reqwest::Url::parse(text) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("*****"));
            url.to_string()
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests;

/// A query limit as CouchDB writes it: a number of rows, or `infinity`
/// (none).
fn query_limit_of(text: &str) -> Option<u64> {
    text.parse().ok()
}
