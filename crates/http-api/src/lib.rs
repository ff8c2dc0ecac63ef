//! The CouchDB REST API of Recliner, as an axum [`Router`].
//!
//! Handlers are thin: each one names its route in its doc header, extracts
//! the request, calls the store, and returns JSON. Every failure goes
//! through the one error table in [`error`], so status codes and
//! `{"error", "reason"}` bodies match CouchDB 3.x everywhere. Server routes
//! (`/`, `/_up`, `/_all_dbs`, ...) use axum's router; everything below a
//! database is routed by hand in `routes`, because document ids and
//! attachment names may contain encoded slashes.

pub mod base;
mod changes;
mod database;
mod design;
mod document;
mod find;
mod node;
mod replication;
mod routes;
mod server;
pub use replication::scheduler::publish_scheduler_state;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use store::Store;

use base::{auth, error, gzip_body, http_rules, stats};
use server::uuids;

pub use base::auth::{AuthConfig, LockoutConfig, ProxyConfig};
pub use base::error::ApiError;
pub use base::http_rules::HttpRules;
pub use node::{ConfigError, NodeConfig};
pub use server::uuids::UuidAlgorithm;

/// The node name CouchDB tooling sees unless configured otherwise.
pub const DEFAULT_NODE_NAME: &str = "recliner@127.0.0.1";

/// The CouchDB release whose API we follow; clients read it from `GET /`.
pub const COUCHDB_COMPAT_VERSION: &str = "3.5.0";

/// Limits and options the API enforces (from the server's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// Largest JSON body of one document, in bytes (CouchDB's `max_document_size`).
    pub max_document_size: u64,
    /// Largest request body, in bytes (CouchDB's `max_http_request_size`).
    pub max_http_request_size: u64,
    /// Largest JSON body that is not documents (`_revs_diff`, `_bulk_get`,
    /// `keys`, `_security`, `_replicate`...): such a body is parsed whole,
    /// unlike document bodies, which are scanned as they are read.
    pub max_json_body_size: u64,
    /// Cross-origin requests, for browser apps (PouchDB in a page); off when `None`.
    pub cors: Option<CorsConfig>,
    /// Bounds on what one request may declare.
    pub limits: Limits,
    /// Who may do what.
    pub auth: AuthConfig,
    /// This node's name in `/_membership` and `/_node/{name}`.
    pub node_name: String,
    /// How `/_uuids` and `POST /db` make ids (CouchDB's `[uuids] algorithm`).
    pub uuids: UuidAlgorithm,
    /// Method overrides, `+` in paths, absolute URLs, JSONP.
    pub http: HttpRules,
}

/// Bounds on what one request may declare, each answered by a clear 400:
/// nothing a client sends is trusted to be of reasonable size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest document id in bytes (CouchDB's `max_document_id_length`,
    /// unbounded there; a URL line holds about 8 KB anyway).
    pub max_document_id_length: usize,
    /// Most attachments on one document.
    pub max_attachments_per_document: usize,
    /// Longest attachment name in bytes.
    pub max_attachment_name_length: usize,
    /// Most items in one request: documents of `_bulk_docs` and
    /// `_bulk_get`, revisions of `_revs_diff`, `keys`, `doc_ids`.
    pub max_bulk_items: usize,
    /// Most rows a view or `_all_docs` query may ask for, and what one
    /// that names no `limit` gets (CouchDB's `query_limit`; `None`: no
    /// limit).
    pub query_limit: Option<u64>,
    /// The same for the queries of one partition (`partition_query_limit`).
    pub partition_query_limit: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_document_id_length: 8192,
            max_attachments_per_document: 10_000,
            max_attachment_name_length: 8192,
            max_bulk_items: 1_000_000,
            query_limit: None,
            partition_query_limit: None,
        }
    }
}

impl Limits {
    /// 400 when a request carries more than `max_bulk_items` of `what`.
    pub(crate) fn check_items(&self, count: usize, what: &str) -> Result<(), error::ApiError> {
        if count > self.max_bulk_items {
            return Err(error::ApiError::bad_request(format!(
                "Too many {what} in one request: {count}, the limit is {} (max_bulk_items)",
                self.max_bulk_items
            )));
        }
        Ok(())
    }

    /// A query's row limit as CouchDB applies it: the configured limit
    /// (of partitions, for a partition's query) when none is asked, and
    /// `query_parse_error` when more is asked.
    pub(crate) fn query_rows(
        &self,
        asked: Option<u64>,
        partition: bool,
    ) -> Result<Option<u64>, error::ApiError> {
        let most = if partition {
            self.partition_query_limit
        } else {
            self.query_limit
        };
        match (asked, most) {
            (Some(n), Some(most)) if n > most => Err(base::params::query_parse_error(format!(
                "Limit is too large, must not exceed {most}"
            ))),
            (None, most) => Ok(most),
            (asked, _) => Ok(asked),
        }
    }

    /// `illegal_docid` for an id over `max_document_id_length`, as CouchDB.
    pub(crate) fn check_doc_id(&self, id: &str) -> Result<(), error::ApiError> {
        if id.len() > self.max_document_id_length {
            return Err(error::ApiError::Invalid {
                error: "illegal_docid",
                reason: "Document id is too long".into(),
            });
        }
        Ok(())
    }

    /// 400 for an attachment name over `max_attachment_name_length`.
    pub(crate) fn check_attachment_name(&self, name: &str) -> Result<(), error::ApiError> {
        if name.len() > self.max_attachment_name_length {
            return Err(error::ApiError::bad_request(format!(
                "Attachment name is too long: {} bytes, the limit is {} (max_attachment_name_length)",
                name.len(),
                self.max_attachment_name_length
            )));
        }
        Ok(())
    }
}

/// CouchDB's CORS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsConfig {
    /// Allowed origins (`https://app.example`), or `*` for any.
    pub origins: Vec<String>,
    /// Whether cookies and authorization headers may be sent.
    pub credentials: bool,
    pub methods: Vec<String>,
    pub headers: Vec<String>,
}

impl Default for CorsConfig {
    /// CouchDB's defaults for methods and headers; no origin until configured.
    fn default() -> CorsConfig {
        CorsConfig {
            origins: Vec::new(),
            credentials: false,
            methods: ["GET", "PUT", "POST", "HEAD", "DELETE"]
                .map(String::from)
                .to_vec(),
            headers: [
                "accept",
                "authorization",
                "content-type",
                "origin",
                "referer",
                "x-csrf-token",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

impl Default for ApiConfig {
    /// CouchDB 3's defaults: 8 MB documents, 4 GiB requests, no CORS.
    fn default() -> ApiConfig {
        ApiConfig {
            max_document_size: 8_000_000,
            max_http_request_size: 4 << 30,
            max_json_body_size: 64 << 20,
            cors: None,
            limits: Limits::default(),
            auth: AuthConfig::default(),
            node_name: DEFAULT_NODE_NAME.into(),
            uuids: UuidAlgorithm::default(),
            http: HttpRules::default(),
        }
    }
}

/// The CORS layer for a configuration (errors name the bad entry).
fn cors_layer(cors: &CorsConfig) -> Result<tower_http::cors::CorsLayer, String> {
    use axum::http::{HeaderName, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let methods = cors
        .methods
        .iter()
        .map(|m| {
            Method::from_bytes(m.trim().as_bytes())
                .map_err(|_| format!("invalid CORS method {m:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let headers = cors
        .headers
        .iter()
        .map(|h| {
            HeaderName::from_bytes(h.trim().as_bytes())
                .map_err(|_| format!("invalid CORS header {h:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let origin = if cors.origins.iter().any(|o| o == "*") {
        if cors.credentials {
            // Browsers refuse `*` with credentials: mirror the caller's origin, as CouchDB does.
            AllowOrigin::mirror_request()
        } else {
            AllowOrigin::any()
        }
    } else {
        let list = cors
            .origins
            .iter()
            .map(|o| {
                HeaderValue::from_str(o.trim()).map_err(|_| format!("invalid CORS origin {o:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(list)
    };
    let expose = [
        "content-type",
        "cache-control",
        "accept-ranges",
        "etag",
        "server",
        "x-couch-request-id",
    ]
    .map(HeaderName::from_static);
    Ok(CorsLayer::new()
        .allow_origin(origin)
        .allow_methods(methods)
        .allow_headers(headers)
        .allow_credentials(cors.credentials)
        .expose_headers(expose)
        .max_age(std::time::Duration::from_secs(600)))
}

/// Checks a configuration before the server starts.
pub fn validate_config(config: &ApiConfig) -> Result<(), String> {
    match &config.cors {
        Some(cors) => cors_layer(cors).map(|_| ()),
        None => Ok(()),
    }
}

/// Marks requests that came over HTTPS (the server adds it to its HTTPS
/// router): session cookies are then `Secure`.
#[derive(Debug, Clone, Copy)]
pub struct Https;

/// Everything a handler may need, shared by all requests.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The databases, reached only through their door (`base::door`).
    pub(crate) databases: base::door::Databases,
    /// Shared: every request clones the state.
    pub config: std::sync::Arc<ApiConfig>,
    /// Every replication job of the server (`/_replicate` and `_replicator` documents).
    pub scheduler: replicator::Scheduler,
    /// Set to true when the server stops, so long-running answers (changes
    /// feeds) end and the graceful shutdown is not held up by them.
    pub shutdown: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    /// Set by `POST /_node/{node}/_restart`: the server starts again once
    /// it has stopped.
    pub restart: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Identifies callers (caches of credentials and checked passwords).
    pub(crate) auth: std::sync::Arc<auth::Authenticator>,
    /// When the server started (`_node/{node}/_system`'s uptime).
    pub(crate) started: std::time::Instant,
    /// Request and document counters (`_node/{node}/_stats`, `_prometheus`).
    pub(crate) stats: std::sync::Arc<stats::Stats>,
    pub(crate) uuids: std::sync::Arc<uuids::Uuids>,
    /// The configuration API's view of the server's settings, when the
    /// hosting server offers one.
    pub node_config: Option<std::sync::Arc<dyn NodeConfig>>,
    /// The JavaScript query server, and the validation functions of each
    /// database (shared with the replicator's local writes).
    pub validators: design_functions::Validators,
    /// Open view indexes (one update at a time each).
    pub views: design_functions::views::Views,
    /// Open search indexes (one update at a time each).
    pub searches: search::Searches,
    /// This process among the nodes sharing its store: what it publishes
    /// of its replications is filed under this name.
    pub node: std::sync::Arc<str>,
    /// `PUT /_reshard/state`'s switch.
    pub(crate) reshard: std::sync::Arc<server::reshard::ReshardSwitch>,
}

impl AppState {
    pub fn new(store: Store) -> AppState {
        AppState::with_config(store, ApiConfig::default())
    }

    pub fn with_config(store: Store, config: ApiConfig) -> AppState {
        let validators =
            design_functions::Validators::new(design_functions::Engine::new(Default::default()));
        let scheduler =
            replicator::Scheduler::new(store.clone(), Default::default(), validators.clone());
        AppState::with_scheduler(store, config, scheduler, validators)
    }

    pub fn with_scheduler(
        store: Store,
        config: ApiConfig,
        scheduler: replicator::Scheduler,
        validators: design_functions::Validators,
    ) -> AppState {
        AppState {
            validators,
            views: Default::default(),
            searches: Default::default(),
            reshard: Default::default(),
            auth: std::sync::Arc::new(auth::Authenticator::new(config.auth.clone())),
            started: std::time::Instant::now(),
            stats: std::sync::Arc::new(stats::Stats::new()),
            uuids: std::sync::Arc::new(uuids::Uuids::new(config.uuids.clone())),
            node_config: None,
            databases: base::door::Databases::new(store),
            config: std::sync::Arc::new(config),
            scheduler,
            shutdown: std::sync::Arc::new(tokio::sync::watch::channel(false).0),
            restart: std::sync::Arc::default(),
            node: uuid::Uuid::new_v4().simple().to_string().into(),
        }
    }
}

impl AppState {
    /// Database `name` as `user` may read it: the one way a handler
    /// reaches a database (see `base::door`).
    pub(crate) async fn open(
        &self,
        name: &str,
        user: &::auth::UserCtx,
    ) -> Result<store::Database, error::ApiError> {
        self.databases
            .open(name, user, self.auth.config.iterations)
            .await
    }

    /// A user's roles (`_admin` for a configured admin), `None` when no
    /// such user exists: the rights a `_replicator` document's owner has.
    pub async fn roles_of(&self, name: &str) -> Option<Vec<String>> {
        match self
            .auth
            .credentials(self.databases.for_logins(), name)
            .await
        {
            Ok(found) => found.map(|(_, roles)| roles),
            Err(e) => {
                tracing::warn!(user = %name, error = ?e, "cannot look up a user's roles");
                None
            }
        }
    }
}

/// Builds the whole API.
pub fn router(state: AppState) -> Router {
    let cors = state.config.cors.as_ref().and_then(|c| cors_layer(c).ok());
    let counting = stats::CountLayer(state.stats.clone());
    let router = server::routes()
        .merge(node::stats_routes())
        .fallback(routes::dispatch)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(conditional))
        .layer(axum::middleware::from_fn(gzip_body::inflate))
        .layer(axum::middleware::from_fn(request_log))
        .layer(axum::middleware::map_response(couchdb_headers))
        // Outside authentication: a method override or a `+` in the path
        // changes what the request asks for.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http_rules::apply,
        ));
    let router = match cors {
        Some(layer) => router.layer(layer),
        None => router,
    };
    // Outermost: every answer counts and names its server, CORS
    // preflights and refusals too.
    router
        .layer(axum::middleware::map_response(server_header))
        .layer(axum::middleware::map_response(base::content_policy::apply))
        .layer(counting)
        .with_state(state)
}

/// The API with a configuration that can change while it serves: a
/// change through `/_node/{node}/_config` builds the router anew from the
/// new configuration (sharing the store, scheduler, counters and, unless
/// their settings changed, the credential caches and uuid state), and
/// every later request goes to it.
#[derive(Debug, Clone)]
pub struct LiveApi {
    inner: std::sync::Arc<LiveInner>,
}

#[derive(Debug)]
struct LiveInner {
    state: std::sync::RwLock<AppState>,
    router: std::sync::RwLock<Router>,
}

impl LiveApi {
    pub fn new(state: AppState) -> LiveApi {
        LiveApi {
            inner: std::sync::Arc::new(LiveInner {
                router: std::sync::RwLock::new(router(state.clone())),
                state: std::sync::RwLock::new(state),
            }),
        }
    }

    /// The service to serve: each request goes to the current router.
    pub fn router(&self) -> Router {
        let live = self.clone();
        Router::new().fallback(move |request: Request| {
            let mut current = live.current();
            async move {
                match tower_service::Service::call(&mut current, request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        })
    }

    fn current(&self) -> Router {
        self.inner
            .router
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Serves later requests with `config`.
    pub fn reconfigure(&self, config: ApiConfig) {
        let mut state = self
            .inner
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if *state.config == config {
            return;
        }
        if state.config.auth != config.auth {
            state.auth = std::sync::Arc::new(auth::Authenticator::new(config.auth.clone()));
        }
        if state.config.uuids != config.uuids {
            state.uuids = std::sync::Arc::new(uuids::Uuids::new(config.uuids.clone()));
        }
        state.config = std::sync::Arc::new(config);
        let next = router(state.clone());
        *self.inner.state.write().unwrap_or_else(|p| p.into_inner()) = state;
        *self.inner.router.write().unwrap_or_else(|p| p.into_inner()) = next;
    }
}

/// One log line per request: method, path (never the query, which may carry
/// secrets), status and duration; and the `X-Couch-Request-ID` header.
fn header_text(headers: &header::HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The name a request was authenticated as, for the request log.
#[derive(Debug, Clone)]
pub(crate) struct LoggedUser(pub(crate) String);

/// One log event per request (target `recliner::http`, message
/// `request`), with what access-log formats need: the server can write it
/// as a line of the combined log format.
async fn request_log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query = request.uri().query().map(str::to_string);
    let version = request.version();
    let remote = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip().to_string());
    let user_agent = header_text(request.headers(), header::USER_AGENT);
    let referer = header_text(request.headers(), header::REFERER);
    let started = std::time::Instant::now();
    // A client's own request id is echoed, as CouchDB does, when it is a
    // plain token (it goes into logs and headers); else one is made.
    let request_id = request
        .headers()
        .get("x-couch-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..10].to_string());
    let mut response = next.run(request).await;
    let user = response
        .extensions()
        .get::<LoggedUser>()
        .map(|u| u.0.clone());
    // Known for whole bodies; streamed ones log none, as access logs allow.
    let bytes = http_body::Body::size_hint(response.body()).exact();
    tracing::info!(
        target: "recliner::http",
        %method,
        %path,
        query,
        version = ?version,
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
        request_id = %request_id,
        remote,
        user,
        bytes,
        user_agent,
        referer,
        "request"
    );
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-couch-request-id", value);
    }
    response
}

/// `If-None-Match` on any tagged answer (`_all_docs`, `_all_dbs`, local
/// documents...): when the client already has it, 304 instead of the body.
/// Documents and attachments check before reading their body.
async fn conditional(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let asked = request.headers().get(header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    let (Some(asked), true) = (
        asked,
        method == axum::http::Method::GET || method == axum::http::Method::HEAD,
    ) else {
        return response;
    };
    let etag = match response
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
    {
        Some(etag) if response.status() == axum::http::StatusCode::OK => etag.to_string(),
        _ => return response,
    };
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(header::IF_NONE_MATCH, asked);
    if base::response::etag_matches(&headers, &etag) {
        return base::response::not_modified(&etag);
    }
    response
}

/// Marks an answer a design function wrote itself (a show's or an
/// update's body): its headers are the function's, as in CouchDB.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderedByFunction;

/// What every answer's `Server` header says: CouchDB's product token
/// first (clients check that it starts with `CouchDB/`, as CouchDB's own
/// suite does), then ours.
pub(crate) const SERVER_HEADER: &str =
    concat!("CouchDB/3.5.0 Recliner/", env!("CARGO_PKG_VERSION"));

/// `Server` on every answer, whichever layer gave it.
async fn server_header(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::SERVER, HeaderValue::from_static(SERVER_HEADER));
    response
}

/// Headers CouchDB puts on the answers of its handlers: clients and
/// caches rely on `Cache-Control: must-revalidate` (unless a handler set
/// its own, and never on a 304, as CouchDB).
async fn couchdb_headers(mut response: Response) -> Response {
    let not_modified = response.status() == axum::http::StatusCode::NOT_MODIFIED;
    let rendered = response.extensions().get::<RenderedByFunction>().is_some();
    let headers = response.headers_mut();
    if !not_modified && !rendered && !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("must-revalidate"),
        );
    }
    response
}
