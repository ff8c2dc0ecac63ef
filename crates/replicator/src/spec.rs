//! The replication request: the body of `POST /_replicate` or a
//! `_replicator` document, parsed into a typed, validated spec. Every
//! refusal names the field at fault.

use reqwest::Url;
use serde_json::{Map, Value};

/// A refused replication request; the text names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn bad(reason: impl Into<String>) -> SpecError {
    SpecError(reason.into())
}

/// Credentials for HTTP basic authentication. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .field("password", &"*****")
            .finish()
    }
}

/// A remote database: its URL (credentials removed, path ending in `/`),
/// extra headers, and credentials if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteDb {
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub auth: Option<BasicAuth>,
}

/// One side of a replication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// A database of this server, called through the store directly.
    Local(String),
    /// A CouchDB-compatible database over HTTP.
    Remote(RemoteDb),
}

impl std::fmt::Display for Peer {
    /// The peer as it may be shown anywhere: never with credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Local(name) => f.write_str(name),
            Peer::Remote(remote) => f.write_str(remote.url.as_str()),
        }
    }
}

/// A replication's selector: as sent (for the replication id and remote
/// sources) and parsed once (for a local source, every batch).
#[derive(Debug, Clone)]
pub struct SelectorFilter {
    pub json: Value,
    pub parsed: std::sync::Arc<mango::selector::Selector>,
}

impl PartialEq for SelectorFilter {
    fn eq(&self, other: &SelectorFilter) -> bool {
        self.json == other.json
    }
}

/// Which changes a replication carries.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangesFilter {
    All,
    DocIds(Vec<String>),
    /// A Mango selector, evaluated by the source (`filter=_selector`).
    Selector(SelectorFilter),
    /// A design-document filter function `ddoc/name`, run by the source.
    Named {
        name: String,
        query_params: Map<String, Value>,
    },
}

/// A validated replication request with CouchDB's defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationSpec {
    pub source: Peer,
    pub target: Peer,
    pub continuous: bool,
    pub create_target: bool,
    pub create_target_params: Map<String, Value>,
    pub filter: ChangesFilter,
    /// Start from this source sequence instead of the checkpoint.
    pub since_seq: Option<Value>,
    pub winning_revs_only: bool,
    pub use_checkpoints: bool,
    /// Milliseconds between checkpoints.
    pub checkpoint_interval: u64,
    pub worker_processes: u64,
    pub worker_batch_size: u64,
    pub http_connections: u64,
    /// Milliseconds before a request is abandoned.
    pub connection_timeout: u64,
    pub retries_per_request: u64,
    pub use_bulk_get: bool,
    /// The most one JSON answer of a peer may hold, in bytes (the
    /// server's setting; a replication request cannot raise it).
    pub max_answer_bytes: u64,
    /// Whose rights the replication has on this server's databases (the
    /// user who asked for it, or the `owner` of its document); `None` for
    /// a server admin. Not part of the replication's id.
    pub user: Option<auth::UserCtx>,
}

/// CouchDB's replicator defaults.
pub mod defaults {
    /// The most one answer of a peer carrying documents may hold: a
    /// `_bulk_get` batch (one too large is fetched again document by
    /// document), one document with its attachments inline (as peers
    /// without multipart answers send them: PouchDB Server). Answers
    /// without documents are held to 16 MiB at most.
    pub const MAX_ANSWER_BYTES: u64 = 64 << 20;

    /// Checkpoint every 30 s: bounds re-transfer after a crash without
    /// writing checkpoints on every batch.
    pub const CHECKPOINT_INTERVAL_MS: u64 = 30_000;
    /// Four workers keep two cores busy while others wait on the network.
    pub const WORKER_PROCESSES: u64 = 4;
    /// Changes per worker batch: CouchDB's default.
    pub const WORKER_BATCH_SIZE: u64 = 500;
    pub const HTTP_CONNECTIONS: u64 = 20;
    pub const CONNECTION_TIMEOUT_MS: u64 = 30_000;
    pub const RETRIES_PER_REQUEST: u64 = 5;
}

fn parse_peer(value: &Value, field: &str) -> Result<Peer, SpecError> {
    match value {
        Value::String(text) => peer_from_text(text, field, Vec::new(), None),
        Value::Object(map) => {
            let url = map
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("`{field}.url` must be a string")))?;
            let headers = match map.get("headers") {
                None => Vec::new(),
                Some(Value::Object(h)) => h
                    .iter()
                    .map(|(k, v)| {
                        let v = v.as_str().ok_or_else(|| {
                            bad(format!("`{field}.headers.{k}` must be a string"))
                        })?;
                        check_header(field, k, v)?;
                        Ok((k.clone(), v.to_string()))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(bad(format!("`{field}.headers` must be an object"))),
            };
            let auth = match map.get("auth") {
                None => None,
                Some(auth) => {
                    let basic = auth
                        .get("basic")
                        .ok_or_else(|| bad(format!("`{field}.auth` supports only `basic`")))?;
                    let part = |k: &str| {
                        basic
                            .get(k)
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .ok_or_else(|| {
                                bad(format!("`{field}.auth.basic.{k}` must be a string"))
                            })
                    };
                    Some(BasicAuth {
                        username: part("username")?,
                        password: part("password")?,
                    })
                }
            };
            peer_from_text(url, field, headers, auth)
        }
        _ => Err(bad(format!(
            "`{field}` must be a database name, a URL or an object with a `url`"
        ))),
    }
}

/// Refuses a header no HTTP request can carry: a name that is not an HTTP
/// token (empty, spaces, colons, CR/LF, non-ASCII) or a value with control
/// characters (CR, LF, NUL...). Such a header would fail every request the
/// replication makes, so it is a bad request, not a peer to retry. The
/// reason names the header (escaped) but never shows its value, which may
/// be a secret.
fn check_header(field: &str, name: &str, value: &str) -> Result<(), SpecError> {
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(bad(format!(
            "`{field}.headers` has an invalid HTTP header name {name:?}: a name is a non-empty token of letters, digits and !#$%&'*+-.^_`|~"
        )));
    }
    if reqwest::header::HeaderValue::from_str(value).is_err() {
        return Err(bad(format!(
            "`{field}.headers` has an invalid value for the HTTP header {name:?}: a value may not contain control characters such as CR or LF"
        )));
    }
    Ok(())
}

fn peer_from_text(
    text: &str,
    field: &str,
    headers: Vec<(String, String)>,
    auth: Option<BasicAuth>,
) -> Result<Peer, SpecError> {
    let lower = text.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        if !headers.is_empty() || auth.is_some() {
            return Err(bad(format!(
                "`{field}` names a local database; headers and auth need a URL"
            )));
        }
        // A local database, by name as this server knows it.
        let name = text.trim_end_matches('/');
        if !store::name::is_valid_db_name(name) {
            return Err(bad(format!(
                "`{field}`: {}",
                store::name::illegal_name_reason(name)
            )));
        }
        return Ok(Peer::Local(name.to_string()));
    }
    let mut url =
        Url::parse(text).map_err(|e| bad(format!("`{field}` is not a valid URL: {e}")))?;
    let mut auth = auth;
    if !url.username().is_empty() {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let from_url = BasicAuth {
            username: decode(url.username()),
            password: decode(url.password().unwrap_or("")),
        };
        auth.get_or_insert(from_url);
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    if url.cannot_be_a_base() || url.host_str().is_none() {
        return Err(bad(format!("`{field}` is not a database URL")));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url.set_fragment(None);
    Ok(Peer::Remote(RemoteDb { url, headers, auth }))
}

fn flag(map: &Map<String, Value>, field: &str, default: bool) -> Result<bool, SpecError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        // CouchDB's _replicator documents sometimes carry "true"/"false" strings.
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(_) => Err(bad(format!("`{field}` must be a boolean"))),
    }
}

fn number(map: &Map<String, Value>, field: &str, default: u64) -> Result<u64, SpecError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(format!("`{field}` must be a positive integer"))),
    }
}

/// The values a replication takes when its request leaves them out: a
/// server's configured replicator defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecDefaults {
    pub checkpoint_interval: u64,
    pub worker_processes: u64,
    pub worker_batch_size: u64,
    pub http_connections: u64,
    pub connection_timeout: u64,
    pub retries_per_request: u64,
    pub use_bulk_get: bool,
    /// See [`ReplicationSpec::max_answer_bytes`].
    pub max_answer_bytes: u64,
}

impl Default for SpecDefaults {
    fn default() -> SpecDefaults {
        SpecDefaults {
            checkpoint_interval: defaults::CHECKPOINT_INTERVAL_MS,
            worker_processes: defaults::WORKER_PROCESSES,
            worker_batch_size: defaults::WORKER_BATCH_SIZE,
            http_connections: defaults::HTTP_CONNECTIONS,
            connection_timeout: defaults::CONNECTION_TIMEOUT_MS,
            retries_per_request: defaults::RETRIES_PER_REQUEST,
            use_bulk_get: true,
            max_answer_bytes: defaults::MAX_ANSWER_BYTES,
        }
    }
}

impl ReplicationSpec {
    /// Parses a `/_replicate` body or `_replicator` document with CouchDB's defaults.
    /// The databases of this server a replication request names, for the
    /// replication rules (`access::replication`); `None` when the request
    /// is not a valid replication.
    pub fn local_peers(value: &Value) -> Option<access::replication::LocalPeers> {
        let spec = ReplicationSpec::parse(value).ok()?;
        let local = |peer: Peer| match peer {
            Peer::Local(name) => Some(name),
            Peer::Remote(_) => None,
        };
        Some(access::replication::LocalPeers {
            source: local(spec.source),
            target: local(spec.target),
            create_target: spec.create_target,
        })
    }

    pub fn parse(value: &Value) -> Result<ReplicationSpec, SpecError> {
        ReplicationSpec::parse_with(value, &SpecDefaults::default())
    }

    /// Parses a request, filling what it leaves out from `defaults`.
    pub fn parse_with(
        value: &Value,
        defaults: &SpecDefaults,
    ) -> Result<ReplicationSpec, SpecError> {
        let Value::Object(map) = value else {
            return Err(bad("a replication request must be a JSON object"));
        };
        let source = parse_peer(
            map.get("source")
                .ok_or_else(|| bad("`source` is missing"))?,
            "source",
        )?;
        let target = parse_peer(
            map.get("target")
                .ok_or_else(|| bad("`target` is missing"))?,
            "target",
        )?;

        let doc_ids = match map.get("doc_ids") {
            None | Some(Value::Null) => None,
            Some(Value::Array(ids)) => {
                // As CouchDB: the ids may be percent-encoded (`+` is a
                // space), and are kept sorted and each once.
                let mut ids = ids
                    .iter()
                    .map(|id| {
                        id.as_str()
                            .map(unquote)
                            .ok_or_else(|| bad("`doc_ids` must be an array of strings"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                ids.sort();
                ids.dedup();
                Some(ids)
            }
            Some(_) => return Err(bad("`doc_ids` must be an array of strings")),
        };
        let selector = match map.get("selector") {
            None | Some(Value::Null) => None,
            Some(sel @ Value::Object(_)) => {
                let parsed = mango::selector::Selector::parse(sel)
                    .map_err(|e| bad(format!("`selector` is invalid: {e}")))?;
                Some(SelectorFilter {
                    json: sel.clone(),
                    parsed: std::sync::Arc::new(parsed),
                })
            }
            Some(_) => return Err(bad("`selector` must be an object")),
        };
        let named = match map.get("filter") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) if name.contains('/') && !name.starts_with('/') => {
                Some(name.clone())
            }
            Some(Value::String(name)) if name == "_doc_ids" || name == "_selector" => None,
            // CouchDB's builtin filters (`_view` with a `view` parameter,
            // `_design`) are the source's to run, as named ones.
            Some(Value::String(name)) if name.starts_with('_') => Some(name.clone()),
            Some(_) => return Err(bad("`filter` must be a string `designdoc/filtername`")),
        };
        let query_params = match map.get("query_params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(q)) => q.clone(),
            Some(_) => return Err(bad("`query_params` must be an object")),
        };
        let chosen = [doc_ids.is_some(), selector.is_some(), named.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if chosen > 1 {
            return Err(bad(
                "`doc_ids`, `filter` and `selector` are mutually exclusive",
            ));
        }
        let filter = match (doc_ids, selector, named) {
            (Some(ids), _, _) => ChangesFilter::DocIds(ids),
            (_, Some(sel), _) => ChangesFilter::Selector(sel),
            (_, _, Some(name)) => ChangesFilter::Named { name, query_params },
            _ => ChangesFilter::All,
        };
        let create_target_params = match map.get("create_target_params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(bad("`create_target_params` must be an object")),
        };
        let since_seq = match map.get("since_seq") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        };
        Ok(ReplicationSpec {
            source,
            target,
            continuous: flag(map, "continuous", false)?,
            create_target: flag(map, "create_target", false)?,
            create_target_params,
            filter,
            since_seq,
            winning_revs_only: flag(map, "winning_revs_only", false)?,
            use_checkpoints: flag(map, "use_checkpoints", true)?,
            checkpoint_interval: number(map, "checkpoint_interval", defaults.checkpoint_interval)?,
            worker_processes: number(map, "worker_processes", defaults.worker_processes)?,
            worker_batch_size: number(map, "worker_batch_size", defaults.worker_batch_size)?,
            http_connections: number(map, "http_connections", defaults.http_connections)?,
            connection_timeout: number(map, "connection_timeout", defaults.connection_timeout)?,
            retries_per_request: match map.get("retries_per_request") {
                Some(Value::Number(n)) if n.as_u64() == Some(0) => 0,
                _ => number(map, "retries_per_request", defaults.retries_per_request)?,
            },
            use_bulk_get: flag(map, "use_bulk_get", defaults.use_bulk_get)?,
            max_answer_bytes: defaults.max_answer_bytes,
            user: None,
        })
    }
}

/// A document id as CouchDB reads one in `doc_ids`: `+` is a space and
/// `%XX` a byte; anything else, a malformed escape included, as it is.
fn unquote(id: &str) -> String {
    percent_encoding::percent_decode_str(&id.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: Value) -> Result<ReplicationSpec, SpecError> {
        ReplicationSpec::parse(&v)
    }

    fn err(v: Value) -> String {
        parse(v).unwrap_err().0
    }

    #[test]
    fn defaults_follow_couchdb() {
        let spec = parse(json!({"source": "a", "target": "b"})).unwrap();
        assert_eq!(spec.source, Peer::Local("a".into()));
        assert!(
            !spec.continuous && !spec.create_target && spec.use_checkpoints && spec.use_bulk_get
        );
        assert_eq!(
            (
                spec.checkpoint_interval,
                spec.worker_processes,
                spec.worker_batch_size,
                spec.http_connections,
                spec.connection_timeout,
                spec.retries_per_request
            ),
            (30_000, 4, 500, 20, 30_000, 5)
        );
        assert_eq!(spec.filter, ChangesFilter::All);
    }

    #[test]
    fn urls_lose_their_credentials_into_basic_auth() {
        let spec =
            parse(json!({"source": "http://bob:s%40cret@Example.com:5984/db", "target": "b"}))
                .unwrap();
        let Peer::Remote(remote) = &spec.source else {
            panic!("remote")
        };
        assert_eq!(remote.url.as_str(), "http://example.com:5984/db/");
        assert_eq!(
            remote.auth,
            Some(BasicAuth {
                username: "bob".into(),
                password: "s@cret".into()
            })
        );
        assert_eq!(spec.source.to_string(), "http://example.com:5984/db/");
        assert!(
            !format!("{spec:?}").contains("s@cret"),
            "Debug never shows the password"
        );
    }

    #[test]
    fn object_peers_carry_headers_and_auth() {
        let spec = parse(json!({
            "source": {"url": "https://h/db", "headers": {"X-Key": "1"}, "auth": {"basic": {"username": "u", "password": "p"}}},
            "target": "t"
        }))
        .unwrap();
        let Peer::Remote(remote) = &spec.source else {
            panic!("remote")
        };
        assert_eq!(remote.headers, vec![("X-Key".to_string(), "1".to_string())]);
        assert_eq!(remote.auth.as_ref().map(|a| a.username.as_str()), Some("u"));
    }

    #[test]
    fn headers_no_request_can_carry_are_refused_naming_the_header_not_its_value() {
        let with = |headers: Value| {
            parse(json!({"source": {"url": "http://h/db", "headers": headers}, "target": "t"}))
        };
        for name in ["X-Bad\r\nInjected", "Bad Name", "", "X:Y", "Ünï", "X\u{0}"] {
            let reason = with(json!({ name: "v" })).unwrap_err().0;
            assert!(
                reason.contains("`source.headers`")
                    && reason.contains("header name")
                    && reason.contains(&format!("{name:?}")),
                "{name:?}: {reason}"
            );
            assert!(
                !reason.contains('\r') && !reason.contains('\n'),
                "{reason:?}"
            );
        }
        for value in [
            "a\r\nInjected: yes",
            "line\nbreak",
            "cr\r",
            "nul\u{0}",
            "del\u{7f}",
        ] {
            let reason = with(json!({"X-Secret": value})).unwrap_err().0;
            assert!(
                reason.contains("`source.headers`") && reason.contains("\"X-Secret\""),
                "{value:?}: {reason}"
            );
            assert!(
                !reason.contains(value),
                "the value is never shown: {reason}"
            );
        }
        // The target is checked the same way.
        let reason = parse(
            json!({"source": "s", "target": {"url": "http://h/db", "headers": {"X": "a\nb"}}}),
        )
        .unwrap_err()
        .0;
        assert!(reason.contains("`target.headers`"), "{reason}");
        // What a request can carry is kept: tabs, non-ASCII text (sent as
        // its UTF-8 bytes), empty values, any token name.
        let spec = with(json!({"X-Tab": "a\tb", "X-Utf8": "é", "X-Empty": "", "x.odd~name!": "1"}))
            .unwrap();
        let Peer::Remote(remote) = &spec.source else {
            panic!("remote")
        };
        assert_eq!(remote.headers.len(), 4);
    }

    #[test]
    fn filters_are_parsed_and_mutually_exclusive() {
        let ids = parse(json!({"source": "a", "target": "b", "doc_ids": ["x", "y"]})).unwrap();
        assert_eq!(
            ids.filter,
            ChangesFilter::DocIds(vec!["x".into(), "y".into()])
        );
        // Percent-encoded as CouchDB reads them, sorted, each once.
        let encoded = parse(json!({"source": "a", "target": "b",
            "doc_ids": ["_design%2Ffoo", "8", "a+b", "8", "100%", "%C3%A9"]}))
        .unwrap();
        assert_eq!(
            encoded.filter,
            ChangesFilter::DocIds(vec![
                "100%".into(),
                "8".into(),
                "_design/foo".into(),
                "a b".into(),
                "é".into()
            ])
        );
        let sel = parse(json!({"source": "a", "target": "b", "selector": {"type": "t"}})).unwrap();
        assert!(matches!(sel.filter, ChangesFilter::Selector(_)));
        let named = parse(
            json!({"source": "a", "target": "b", "filter": "app/f", "query_params": {"k": 1}}),
        )
        .unwrap();
        assert!(matches!(named.filter, ChangesFilter::Named { ref name, .. } if name == "app/f"));
        assert!(
            err(json!({"source": "a", "target": "b", "doc_ids": ["x"], "selector": {}}))
                .contains("mutually exclusive")
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            (json!({"target": "b"}), "`source`"),
            (json!({"source": "a"}), "`target`"),
            (json!({"source": 5, "target": "b"}), "`source`"),
            (json!({"source": "Bad Name", "target": "b"}), "`source`"),
            (json!({"source": "a", "target": "http://"}), "`target`"),
            (json!({"source": {"url": 1}, "target": "b"}), "`source.url`"),
            (
                json!({"source": {"url": "http://h/d", "headers": []}, "target": "b"}),
                "`source.headers`",
            ),
            (
                json!({"source": {"url": "http://h/d", "auth": {"oauth": {}}}, "target": "b"}),
                "`source.auth`",
            ),
            (
                json!({"source": "a", "target": "b", "continuous": "yes"}),
                "`continuous`",
            ),
            (
                json!({"source": "a", "target": "b", "doc_ids": "x"}),
                "`doc_ids`",
            ),
            (
                json!({"source": "a", "target": "b", "selector": {"a": {"$nope": 1}}}),
                "`selector`",
            ),
            (
                json!({"source": "a", "target": "b", "filter": 3}),
                "`filter`",
            ),
            (
                json!({"source": "a", "target": "b", "query_params": []}),
                "`query_params`",
            ),
            (
                json!({"source": "a", "target": "b", "worker_processes": 0}),
                "`worker_processes`",
            ),
            (
                json!({"source": "a", "target": "b", "checkpoint_interval": "soon"}),
                "`checkpoint_interval`",
            ),
            (
                json!({"source": "a", "target": "b", "create_target_params": 1}),
                "`create_target_params`",
            ),
            (json!([1]), "JSON object"),
        ];
        for (body, field) in cases {
            let reason = err(body.clone());
            assert!(reason.contains(field), "{body}: {reason}");
        }
    }

    #[test]
    fn since_seq_and_options_are_kept() {
        let spec = parse(json!({
            "source": "a", "target": "http://h/b", "since_seq": "12-abc", "continuous": true,
            "create_target": "true", "winning_revs_only": true, "worker_batch_size": "100",
            "retries_per_request": 0, "use_bulk_get": false
        }))
        .unwrap();
        assert_eq!(spec.since_seq, Some(json!("12-abc")));
        assert!(
            spec.continuous && spec.create_target && spec.winning_revs_only && !spec.use_bulk_get
        );
        assert_eq!((spec.worker_batch_size, spec.retries_per_request), (100, 0));
    }
}
