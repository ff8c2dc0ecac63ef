//! Authentication: who each request is. CouchDB 3's handlers, in its order:
//! an `AuthSession` cookie, then HTTP basic auth; without either the
//! request is anonymous (or a server admin, in an admin party the operator
//! opted into). Server admins come from the configuration, users from the
//! authentication database (`_users` unless configured, see
//! [`access::authentication_db`]). Checked passwords are remembered (as a keyed digest,
//! never in clear) so basic auth on every request does not cost a PBKDF2
//! run each time, until the user's document changes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use auth::cookie::{self, COOKIE_NAME};
use auth::{Credentials, UserCtx};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::Digest;
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::base::error::ApiError;

/// How the server authenticates, from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// Server admins by name (CouchDB's `[admins]`), hashed.
    pub admins: Vec<(String, Credentials)>,
    /// Everyone is a server admin: only when the operator opted in.
    pub admin_party: bool,
    /// Refuse anonymous requests (CouchDB's `require_valid_user`).
    pub require_valid_user: bool,
    /// Keys session cookies; the same on every node that shares sessions.
    pub secret: String,
    /// Seconds a session cookie lasts (CouchDB's `timeout`, 600).
    pub timeout: u64,
    /// Cookies carry `Max-Age`/`Expires` so they outlive the browser session.
    pub allow_persistent_cookies: bool,
    /// PBKDF2 rounds for new passwords (CouchDB 3.5: 600,000).
    pub iterations: u32,
    /// Bounds on the rounds a stored hash may ask for.
    pub min_iterations: u32,
    pub max_iterations: u32,
    /// `_all_dbs` and `_dbs_info` are for server admins (CouchDB 3's default).
    pub admin_only_all_dbs: bool,
    /// Whether `_users`' `_security` may be changed (CouchDB: false).
    pub users_db_security_editable: bool,
    /// Fields of other users' documents any user may read (with `users_db_public`).
    pub public_fields: Vec<String>,
    pub users_db_public: bool,
    /// `Authorization: Bearer` tokens (CouchDB's `jwt_authentication`); off when `None`.
    pub jwt: Option<auth::jwt::JwtConfig>,
    /// Trusted `X-Auth-CouchDB-*` headers from a proxy; off when `None`.
    pub proxy: Option<ProxyConfig>,
    /// Session cookies log in (CouchDB's `cookie_authentication_handler`).
    pub cookie_login: bool,
    /// `Authorization: Basic` logs in (CouchDB's
    /// `default_authentication_handler`).
    pub basic_login: bool,
    /// Failed logins tolerated per address and name before a pause
    /// (CouchDB's `[chttpd_auth_lockout]`); off when `None`.
    pub lockout: Option<LockoutConfig>,
}

/// CouchDB's proxy authentication: a proxy in front of the server says who
/// the user is in headers, proven by a token when `use_secret` is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Require `X-Auth-CouchDB-Token`: hex HMAC-SHA256 of the name with the secret.
    pub use_secret: bool,
    pub username_header: String,
    pub roles_header: String,
    pub token_header: String,
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            use_secret: false,
            username_header: "X-Auth-CouchDB-UserName".into(),
            roles_header: "X-Auth-CouchDB-Roles".into(),
            token_header: "X-Auth-CouchDB-Token".into(),
        }
    }
}

/// CouchDB's lockout: `threshold` failures within `lifetime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockoutConfig {
    pub threshold: u32,
    pub lifetime: std::time::Duration,
}

impl Default for LockoutConfig {
    /// CouchDB 3.5's: 5 failures, locked for 5 minutes.
    fn default() -> LockoutConfig {
        LockoutConfig {
            threshold: 5,
            lifetime: std::time::Duration::from_secs(300),
        }
    }
}

impl Default for AuthConfig {
    /// An admin party: what an embedded API with no admins configured
    /// means. The `recliner` server never starts like this unless asked.
    fn default() -> AuthConfig {
        AuthConfig {
            admins: Vec::new(),
            admin_party: true,
            require_valid_user: false,
            secret: uuid::Uuid::new_v4().simple().to_string(),
            timeout: 600,
            allow_persistent_cookies: true,
            iterations: auth::DEFAULT_ITERATIONS,
            min_iterations: 1,
            max_iterations: 1_000_000_000,
            admin_only_all_dbs: true,
            users_db_security_editable: false,
            public_fields: Vec::new(),
            users_db_public: false,
            jwt: None,
            proxy: None,
            cookie_login: true,
            basic_login: true,
            lockout: Some(LockoutConfig::default()),
        }
    }
}

/// A user's stored credentials as last read.
#[derive(Debug, Clone)]
struct CachedUser {
    /// The authentication database read, and its update sequence then:
    /// any later write there, or another database, rereads.
    users_db: std::sync::Arc<str>,
    users_seq: u64,
    found: Option<(Credentials, Vec<String>)>,
    /// The user's document is in conflict: it authenticates nobody.
    conflicted: bool,
}

/// CouchDB's refusal of a login whose user document is in conflict: which
/// revision's password counts would be the replication's accident.
const USER_DOC_CONFLICT: &str = "User document conflicts must be resolved before the document is used for authentication purposes.";

/// The authenticator shared by all requests.
#[derive(Debug)]
pub(crate) struct Authenticator {
    pub(crate) config: AuthConfig,
    users: Mutex<HashMap<String, CachedUser>>,
    /// name → (salt, digest of the password last verified with that salt).
    verified: Mutex<HashMap<String, (String, [u8; 32])>>,
    /// Keys the digests above, so they are useless outside this process.
    pepper: [u8; 32],
    lockout: Option<auth::lockout::Lockout>,
}

/// Entries kept in each cache; past it the cache starts over.
const CACHE_LIMIT: usize = 10_000;

impl Authenticator {
    pub(crate) fn new(config: AuthConfig) -> Authenticator {
        let mut pepper = [0u8; 32];
        pepper[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        pepper[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Authenticator {
            lockout: config
                .lockout
                .map(|l| auth::lockout::Lockout::new(l.threshold, l.lifetime)),
            config,
            users: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
            pepper,
        }
    }

    /// A user's credentials and roles: a configured admin, else the
    /// user's document in the authentication database (read at most once
    /// per change of that database).
    pub(crate) async fn credentials(
        &self,
        store: &store::Store,
        name: &str,
    ) -> Result<Option<(Credentials, Vec<String>)>, ApiError> {
        if let Some((_, creds)) = self.config.admins.iter().find(|(n, _)| n == name) {
            return Ok(Some((
                creds.clone(),
                vec![auth::security::ADMIN_ROLE.into()],
            )));
        }
        let users_db = access::authentication_db();
        let users = match store.db(&users_db).await {
            Ok(db) => db,
            Err(store::StoreError::DbNotFound(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let seq = users.update_seq();
        if let Some(hit) = self.users.lock().ok().and_then(|c| c.get(name).cloned())
            && hit.users_seq == seq
            && hit.users_db == users_db
        {
            if hit.conflicted {
                return Err(ApiError::Unauthorized(USER_DOC_CONFLICT.into()));
            }
            return Ok(hit.found);
        }
        let id = format!("{}{name}", auth::users::USER_PREFIX);
        let with_conflicts = store::GetOptions {
            conflicts: true,
            ..Default::default()
        };
        let mut conflicted = false;
        let found = match users.get(&id, with_conflicts).await {
            Ok(doc) => match doc.to_value()? {
                serde_json::Value::Object(body) => {
                    conflicted = body.contains_key("_conflicts");
                    auth::users::credentials(&body)
                }
                _ => None,
            },
            Err(store::StoreError::DocNotFound(_)) => None,
            Err(e) => return Err(e.into()),
        };
        if let Ok(mut cache) = self.users.lock() {
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(
                name.to_string(),
                CachedUser {
                    users_db,
                    users_seq: seq,
                    found: found.clone(),
                    conflicted,
                },
            );
        }
        if conflicted {
            return Err(ApiError::Unauthorized(USER_DOC_CONFLICT.into()));
        }
        Ok(found)
    }

    fn digest(&self, password: &str) -> [u8; 32] {
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.pepper);
        hasher.update(password.as_bytes());
        hasher.finalize().into()
    }

    /// Checks a password: from the cache when this password was verified
    /// for this salt before, else by PBKDF2 off the async threads.
    async fn verify(
        &self,
        name: &str,
        password: &str,
        creds: &Credentials,
    ) -> Result<bool, ApiError> {
        creds
            .check(self.config.min_iterations, self.config.max_iterations)
            .map_err(|e| {
                ApiError::Forbidden(match e {
                    auth::password::HashError::InvalidPrf => "PRF is invalid".into(),
                    auth::password::HashError::IterationsOutOfRange => {
                        "Iteration count is out of range for this server".into()
                    }
                })
            })?;
        let digest = self.digest(password);
        let cached = self.verified.lock().ok().and_then(|c| c.get(name).cloned());
        if let Some((salt, known)) = cached
            && salt == creds.salt()
            && bool::from(known.ct_eq(&digest))
        {
            return Ok(true);
        }
        let (creds_owned, password_owned) = (creds.clone(), password.to_string());
        let ok = tokio::task::spawn_blocking(move || creds_owned.verify(&password_owned))
            .await
            .map_err(|e| ApiError::Internal(format!("password check failed: {e}")))?;
        if ok && let Ok(mut cache) = self.verified.lock() {
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(name.to_string(), (creds.salt().to_string(), digest));
        }
        Ok(ok)
    }

    /// Name and password checked, as `POST /_session` and basic auth do.
    /// `Ok(None)`: wrong name or password (the caller answers 401).
    pub(crate) async fn login(
        &self,
        store: &store::Store,
        name: &str,
        password: &str,
        peer: Option<IpAddr>,
    ) -> Result<Option<(Vec<String>, String)>, ApiError> {
        let now = std::time::Instant::now();
        if let Some(lockout) = &self.lockout
            && lockout.is_locked(peer, name, now)
        {
            tracing::warn!(target: "recliner::auth", user = %name, "login refused: locked out after repeated failures");
            return Err(ApiError::Forbidden(auth::lockout::LOCKED_REASON.into()));
        }
        let verified = match self.credentials(store, name).await? {
            Some((creds, roles)) if self.verify(name, password, &creds).await? => {
                Some((roles, creds.salt().to_string()))
            }
            _ => None,
        };
        if verified.is_none() {
            tracing::warn!(target: "recliner::auth", user = %name, "authentication failed");
            if let Some(lockout) = &self.lockout {
                lockout.failed(peer, name, now);
            }
        }
        Ok(verified)
    }

    /// A `Bearer` token, when JWT authentication is on.
    fn jwt_user(&self, headers: &HeaderMap) -> Result<Option<UserCtx>, ApiError> {
        let Some(config) = &self.config.jwt else {
            return Ok(None);
        };
        let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return Ok(None);
        };
        match auth::jwt::authenticate(token.trim(), config) {
            Ok((name, roles)) => Ok(Some(UserCtx {
                name: Some(name),
                roles,
                handler: Some("jwt"),
            })),
            Err(auth::jwt::JwtError::Unauthorized(reason)) => Err(ApiError::Unauthorized(reason)),
            Err(auth::jwt::JwtError::BadRequest(reason)) => Err(ApiError::bad_request(reason)),
            Err(auth::jwt::JwtError::NotFound(reason)) => Err(ApiError::not_found(reason)),
        }
    }

    /// The user a trusted proxy names, when proxy authentication is on
    /// (and, with `use_secret`, proves with its token).
    fn proxy_user(&self, headers: &HeaderMap) -> Option<UserCtx> {
        let config = self.config.proxy.as_ref()?;
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let name = text(&config.username_header)?.to_string();
        if config.use_secret {
            let token = text(&config.token_header)?;
            if !auth::cookie::proxy_token_matches(&self.config.secret, &name, token) {
                return None;
            }
        }
        let roles = text(&config.roles_header)
            .map(|r| {
                r.split(',')
                    .map(|r| r.trim().to_string())
                    .filter(|r| !r.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Some(UserCtx {
            name: Some(name),
            roles,
            handler: Some("proxy"),
        })
    }

    /// The handlers `GET /_session` lists, in the order they are tried.
    pub(crate) fn handler_names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.config.jwt.is_some() {
            names.push("jwt");
        }
        if self.config.proxy.is_some() {
            names.push("proxy");
        }
        if self.config.cookie_login {
            names.push("cookie");
        }
        if self.config.basic_login {
            names.push("default");
        }
        names
    }

    /// Who a request is, and whether its session cookie should be renewed.
    async fn identify(
        &self,
        store: &store::Store,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<(UserCtx, Option<String>), ApiError> {
        if let Some(user) = self.jwt_user(headers)? {
            return Ok((user, None));
        }
        if let Some(user) = self.proxy_user(headers) {
            return Ok((user, None));
        }
        if self.config.cookie_login
            && let Some(value) = session_cookie(headers)
        {
            let claim = cookie::parse(value).map_err(|_| {
                ApiError::bad_request("Malformed AuthSession cookie. Please clear your cookies.")
            })?;
            if let Some((creds, roles)) = self.credentials(store, &claim.name).await?
                && let Some(left) = claim.time_left(now(), self.config.timeout)
                && claim.is_signed_by(&self.config.secret, creds.salt())
            {
                // Renewed once less than 90% of the session is left, as CouchDB.
                let renew = (left * 10 < self.config.timeout * 9).then(|| creds.salt().to_string());
                let user = UserCtx {
                    name: Some(claim.name),
                    roles,
                    handler: Some("cookie"),
                };
                return Ok((user, renew));
            }
        }
        if self.config.basic_login
            && let Some((name, password)) = basic_credentials(headers)?
        {
            return match self.login(store, &name, &password, peer).await? {
                Some((roles, _)) => Ok((
                    UserCtx {
                        name: Some(name),
                        roles,
                        handler: Some("default"),
                    },
                    None,
                )),
                None => Err(ApiError::Unauthorized(
                    "Name or password is incorrect.".into(),
                )),
            };
        }
        if self.config.admin_party {
            return Ok((UserCtx::party_admin(), None));
        }
        Ok((UserCtx::anonymous(), None))
    }

    /// `Set-Cookie` for a new session of `name`.
    pub(crate) fn session_cookie(&self, name: &str, salt: &str, secure: bool) -> String {
        let value = cookie::sign(&self.config.secret, salt, name, now());
        self.cookie_header(&value, secure)
    }

    /// `Set-Cookie` that ends the session (an empty value, as CouchDB).
    pub(crate) fn cleared_cookie(&self, secure: bool) -> String {
        self.cookie_header("", secure)
    }

    fn cookie_header(&self, value: &str, secure: bool) -> String {
        let mut header = format!("{COOKIE_NAME}={value}; Version=1; Path=/; HttpOnly");
        if self.config.allow_persistent_cookies {
            let expires =
                std::time::SystemTime::now() + std::time::Duration::from_secs(self.config.timeout);
            header.push_str(&format!(
                "; Expires={}; Max-Age={}",
                wire::time::cookie_date(expires),
                self.config.timeout
            ));
        }
        if secure {
            header.push_str("; Secure");
        }
        header
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The `AuthSession` cookie's value, if the request carries a non-empty one.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.trim().trim_matches('"'))
        .filter(|v| !v.is_empty())
}

/// `Authorization: Basic` name and password; `_:_` means "log me out".
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let Some(encoded) = value.to_str().ok().and_then(|v| {
        v.strip_prefix("Basic ")
            .or_else(|| v.strip_prefix("basic "))
    }) else {
        return Ok(None);
    };
    let invalid = || ApiError::bad_request("Authorization header has invalid base64 value");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| invalid())?;
    let text = String::from_utf8(decoded).map_err(|_| invalid())?;
    match text.split_once(':') {
        Some(("_", "_")) | None => Ok(None),
        Some((name, password)) => Ok(Some((name.to_string(), password.to_string()))),
    }
}

/// The caller's address, when the server records it (lockouts are per address).
pub(crate) fn peer_of<B>(request: &axum::http::Request<B>) -> Option<IpAddr> {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip())
}

/// Who a rewritten request is for: the caller of the rewrite, as
/// [`authenticate`] found them. Only the server makes it, and
/// [`authenticate`] takes it instead of reading credentials again.
#[derive(Debug, Clone)]
pub(crate) struct AuthenticatedCaller(pub(crate) UserCtx);

/// The prefix of CouchDB's proxy headers, whatever names are configured.
const PROXY_HEADER_PREFIX: &str = "x-auth-couchdb-";

/// Takes every header that proves who the caller is out of a request once
/// it is authenticated: the one place that decides what design functions
/// (shows, lists, updates, filters, rewrites) and anything else behind
/// authentication may see of a request's credentials: nothing.
/// `Authorization`, `Cookie`, and the proxy's user, roles and token
/// headers (CouchDB's names and the configured ones).
pub(crate) fn remove_credentials(headers: &mut HeaderMap, proxy: Option<&ProxyConfig>) {
    headers.remove(header::AUTHORIZATION);
    headers.remove(header::COOKIE);
    headers.remove(header::PROXY_AUTHORIZATION);
    if let Some(proxy) = proxy {
        for name in [
            &proxy.username_header,
            &proxy.roles_header,
            &proxy.token_header,
        ] {
            headers.remove(name.as_str());
        }
    }
    let proxied: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with(PROXY_HEADER_PREFIX))
        .cloned()
        .collect();
    for name in proxied {
        headers.remove(name);
    }
}

/// The user a handler serves (set by [`authenticate`]).
pub(crate) fn user_of<B>(request: &axum::http::Request<B>) -> UserCtx {
    request
        .extensions()
        .get::<UserCtx>()
        .cloned()
        .unwrap_or_default()
}

/// The middleware: identifies the caller, checks the request is theirs to
/// make (see `access`), and renews an aging session cookie on the way out.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = peer_of(&request);
    // A rewritten request is its caller's, as they were authenticated:
    // nothing a rewrite function wrote into its headers logs anyone in.
    let carried = request
        .extensions_mut()
        .remove::<AuthenticatedCaller>()
        .map(|AuthenticatedCaller(user)| (user, None));
    let identified = match carried {
        Some(found) => Ok(found),
        None => {
            state
                .auth
                .identify(state.databases.for_logins(), request.headers(), peer)
                .await
        }
    };
    let (user, renew) = match identified {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    remove_credentials(request.headers_mut(), state.auth.config.proxy.as_ref());
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    if let Err(e) = crate::base::access::authorize(&state, &method, &path, &user).await {
        return e.into_response();
    }
    let name = user.name.clone();
    let secure = request.extensions().get::<crate::Https>().is_some();
    request.extensions_mut().insert(user);
    let mut response = next.run(request).await;
    if let Some(name) = &name {
        // For the request log, outside this layer.
        response
            .extensions_mut()
            .insert(crate::LoggedUser(name.clone()));
    }
    if let (Some(salt), Some(name)) = (renew, name)
        && !response.headers().contains_key(header::SET_COOKIE)
        && let Ok(value) = HeaderValue::from_str(&state.auth.session_cookie(&name, &salt, secure))
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_and_bad_base64_is_a_400() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic Ym9iOnB3OjE="),
        );
        assert_eq!(
            basic_credentials(&headers).unwrap(),
            Some(("bob".into(), "pw:1".into()))
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic Xzpf"),
        );
        assert_eq!(basic_credentials(&headers).unwrap(), None, "_:_ logs out");
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic %%%"));
        assert!(basic_credentials(&headers).is_err());
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; AuthSession=xyz; c=d"),
        );
        assert_eq!(session_cookie(&headers), Some("xyz"));
        headers.insert(header::COOKIE, HeaderValue::from_static("AuthSession="));
        assert_eq!(session_cookie(&headers), None);
    }
}
