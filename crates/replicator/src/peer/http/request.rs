//! Speaking HTTP to a peer, as CouchDB's `couch_replicator_httpc`: building
//! each request (headers, credentials, the session cookie), waiting for a
//! free connection, retrying what failed transiently, reading answers
//! within their bounds and decoding them. Nothing else in the crate builds
//! a request.

use std::time::Duration;

use bytes::Bytes;
use reqwest::{Method, StatusCode};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use wire::rows::ErrorBody;

use super::HttpPeer;
use super::session::Credential;
use crate::peer::EndpointError;
use crate::peer::retry::with_retries;

/// The most an error answer (or the answer to a write) may hold.
pub(crate) const MAX_SMALL_ANSWER_BYTES: usize = 64 << 10;

/// The most an answer without documents may hold (database info, a page
/// of changes, `_revs_diff`): a page of 500 changes is a few hundred KiB,
/// and one parsed whole stays well within 100 MiB.
pub(crate) const MAX_LISTING_BYTES: usize = 16 << 20;

/// Reads an answer's body, up to `limit` bytes: a longer one (declared
/// or sent) is [`EndpointError::TooLarge`], read no further.
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
    shown: &str,
) -> Result<Bytes, EndpointError> {
    let too_large = || EndpointError::TooLarge {
        url: shown.to_string(),
        limit,
    };
    if response.content_length().unwrap_or(0) > limit as u64 {
        return Err(too_large());
    }
    // The chunks are kept as they come and joined once at the end: no
    // buffer doubles (and is copied) on the way to the bound.
    let mut chunks = Vec::new();
    let mut length = 0;
    while let Some(chunk) = response.chunk().await.map_err(transport(shown))? {
        length += chunk.len();
        if length > limit {
            return Err(too_large());
        }
        chunks.push(chunk);
    }
    if chunks.len() == 1 {
        return Ok(chunks.pop().unwrap_or_default());
    }
    let mut body = bytes::BytesMut::with_capacity(length);
    for chunk in chunks {
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Maps a reqwest failure to an error naming `url` (never with
/// credentials: reqwest's own URL is left out): a request that could not
/// be built is [`EndpointError::Request`], never retried; anything else is
/// a transport failure.
pub(crate) fn transport(url: &str) -> impl Fn(reqwest::Error) -> EndpointError + '_ {
    move |e| {
        let e = e.without_url();
        if e.is_builder() {
            // reqwest's own text ("builder error") says little; its source says what.
            let detail = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            EndpointError::Request {
                url: url.to_string(),
                detail,
            }
        } else {
            EndpointError::Transport {
                url: url.to_string(),
                detail: e.to_string(),
            }
        }
    }
}

/// Decodes a peer's JSON answer. Text that is not JSON, or stops short, is
/// a transport failure (a body cut short looks exactly like that, and is
/// worth another try); JSON of the wrong shape is the peer breaking the
/// protocol, which no retry mends.
pub(crate) fn decode<T: DeserializeOwned>(url: &str, bytes: &[u8]) -> Result<T, EndpointError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => EndpointError::Protocol {
            url: url.to_string(),
            detail: format!("malformed answer: {e}"),
        },
        _ => EndpointError::Transport {
            url: url.to_string(),
            detail: format!("truncated or invalid JSON: {e}"),
        },
    })
}

/// Decodes a document a peer sent, as CouchDB reads documents (`ejson`:
/// its numbers, duplicate keys and depth). Text that is not JSON is a
/// transport failure, as in [`decode`]; a document CouchDB could not hold
/// is the peer's fault.
pub(crate) fn decode_doc(url: &str, bytes: &[u8]) -> Result<Value, EndpointError> {
    ejson::from_slice(bytes).map_err(|e| match e {
        ejson::JsonError::Syntax { .. } => EndpointError::Transport {
            url: url.to_string(),
            detail: format!("truncated or invalid JSON: {e}"),
        },
        _ => EndpointError::Protocol {
            url: url.to_string(),
            detail: format!("a document CouchDB could not hold: {e}"),
        },
    })
}

/// The error an unsuccessful answer carries: CouchDB's `{error, reason}`,
/// or, from something else (a proxy's page), the status and the start of
/// the text.
fn http_error(url: String, status: StatusCode, body: &[u8]) -> EndpointError {
    let (error, reason) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(body) => (body.error, body.reason),
        // Redirects are never followed (`http_client_builder`): say so.
        Err(_) if status.is_redirection() => (
            status
                .canonical_reason()
                .unwrap_or("redirect")
                .to_ascii_lowercase()
                .replace(' ', "_"),
            "the peer answered with a redirect, which replications do not follow: \
             give the address it redirects to"
                .to_string(),
        ),
        Err(_) => {
            let start = String::from_utf8_lossy(&body[..body.len().min(200)])
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>();
            (
                status
                    .canonical_reason()
                    .unwrap_or("unknown")
                    .to_ascii_lowercase()
                    .replace(' ', "_"),
                start.trim().to_string(),
            )
        }
    };
    EndpointError::Http {
        url,
        status: status.as_u16(),
        error,
        reason,
    }
}

/// An answer read as a stream (attachments), with the permit of its
/// request: the connection stays busy until the answer is read to its end.
#[derive(Debug)]
pub(crate) struct Streamed {
    pub response: reqwest::Response,
    pub permit: Option<OwnedSemaphorePermit>,
}

/// One HTTP client per timeout and pool size for the whole process: jobs
/// that stop and start again (parked ones, at every change) keep their
/// pooled connections instead of opening new ones.
pub(crate) fn shared_client(
    timeout: Duration,
    connections: usize,
) -> Result<reqwest::Client, reqwest::Error> {
    static CLIENTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<(Duration, usize), reqwest::Client>>,
    > = std::sync::OnceLock::new();
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(client) = clients.get(&(timeout, connections)) {
        return Ok(client.clone());
    }
    // No total timeout on the client: attachment transfers may take
    // long. JSON calls set one per request; every read has one.
    let client = crate::http_client_builder()
        .read_timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(connections)
        .build()?;
    clients.insert((timeout, connections), client.clone());
    Ok(client)
}

impl HttpPeer {
    /// Waits for a free connection to the peer.
    async fn permit(&self) -> Result<Option<OwnedSemaphorePermit>, EndpointError> {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map(Some)
            .map_err(|_| self.malformed("the connection pool is closed"))
    }

    /// One HTTP request to a remote peer, JSON in and out, its answer
    /// decoded as `T`; retried with exponential backoff while it fails
    /// transiently (connection errors, timeouts, truncated bodies, 408, 429, 5xx).
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<T, EndpointError> {
        let limit = self.max_answer.min(MAX_LISTING_BYTES);
        self.call_limited(method, path, body, limit).await
    }

    /// [`HttpPeer::call`] for an answer of at most `limit` bytes.
    pub(crate) async fn call_limited<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        limit: usize,
    ) -> Result<T, EndpointError> {
        with_retries(self.retries, "a request", || async {
            let (shown, bytes) = self
                .call_once(method.clone(), path, body.clone(), limit)
                .await?;
            decode(&shown, &bytes)
        })
        .await
    }

    /// One attempt: the URL as it may be shown and the successful answer's bytes.
    async fn call_once(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        limit: usize,
    ) -> Result<(String, Bytes), EndpointError> {
        let credential = self.credential().await;
        let (mut request, shown) =
            self.request(method, path, "application/json", credential.as_ref())?;
        request = request.timeout(self.timeout);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let _permit = self.permit().await?;
        let response = request.send().await.map_err(transport(&shown))?;
        self.observe(credential.as_ref(), &response, &shown)?;
        let status = response.status();
        if !status.is_success() {
            return Err(HttpPeer::error_of(response, shown).await);
        }
        let bytes = read_bounded(response, limit, &shown).await?;
        Ok((shown, bytes))
    }

    /// How the next request to a peer with credentials logs in (see
    /// [`super::session::Session`]); `None` without credentials.
    async fn credential(&self) -> Option<Credential> {
        let auth = self.db.auth.as_ref()?;
        Some(
            self.session
                .credential(&self.client, &self.db.url, auth, self.timeout)
                .await,
        )
    }

    /// Lets the session see an answer: a renewed cookie is kept; a refused
    /// one is a transient failure, retried after logging in again.
    fn observe(
        &self,
        used: Option<&Credential>,
        response: &reqwest::Response,
        shown: &str,
    ) -> Result<(), EndpointError> {
        let Some(used) = used else {
            return Ok(());
        };
        let status = response.status().as_u16();
        self.session.observe(used, status, response.headers());
        if status == 401 && matches!(used, Credential::Cookie(_)) {
            return Err(EndpointError::Transport {
                url: shown.to_string(),
                detail: "the session cookie was refused; logging in again".into(),
            });
        }
        Ok(())
    }

    /// A request to the peer with its headers and credentials (the
    /// session cookie, or basic auth), and the URL as it may be shown.
    fn request(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        credential: Option<&Credential>,
    ) -> Result<(reqwest::RequestBuilder, String), EndpointError> {
        let (client, db) = (&self.client, &self.db);
        let url = db.url.join(path).map_err(|e| EndpointError::Protocol {
            url: db.url.to_string(),
            detail: e.to_string(),
        })?;
        let shown = url.to_string();
        let mut request = client.request(method, url).header("accept", accept);
        for (k, v) in &db.headers {
            request = request.header(k, v);
        }
        match (credential, &db.auth) {
            (Some(Credential::Cookie(cookie)), _) => {
                request = request.header("cookie", format!("AuthSession={cookie}"));
            }
            (_, Some(auth)) => {
                request = request.basic_auth(&auth.username, Some(&auth.password));
            }
            (_, None) => {}
        }
        Ok((request, shown))
    }

    /// Turns an unsuccessful answer into its CouchDB error.
    async fn error_of(response: reqwest::Response, shown: String) -> EndpointError {
        let status = response.status();
        let body = read_bounded(response, MAX_SMALL_ANSWER_BYTES, &shown)
            .await
            .unwrap_or_default();
        http_error(shown, status, &body)
    }

    /// A request whose answer is read as a stream (attachments), retried
    /// while it fails transiently before the answer starts. The answer
    /// keeps its connection permit until it is dropped.
    pub(crate) async fn send_with_retries(
        &self,
        method: Method,
        path: &str,
        accept: &str,
    ) -> Result<Streamed, EndpointError> {
        with_retries(self.retries, "a request", || async {
            let credential = self.credential().await;
            let (request, shown) =
                self.request(method.clone(), path, accept, credential.as_ref())?;
            let permit = self.permit().await?;
            let response = request.send().await.map_err(transport(&shown))?;
            self.observe(credential.as_ref(), &response, &shown)?;
            if response.status().is_success() {
                Ok(Streamed { response, permit })
            } else {
                Err(HttpPeer::error_of(response, shown).await)
            }
        })
        .await
    }

    /// One request with a streamed body of `length` bytes (not retried: the
    /// caller starts the whole transfer again).
    pub(crate) async fn send_streaming(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: reqwest::Body,
        length: u64,
    ) -> Result<(), EndpointError> {
        let credential = self.credential().await;
        let (request, shown) =
            self.request(method, path, "application/json", credential.as_ref())?;
        let _permit = self.permit().await?;
        let response = request
            .header("content-type", content_type)
            .header("content-length", length)
            .body(body)
            .send()
            .await
            .map_err(transport(&shown))?;
        self.observe(credential.as_ref(), &response, &shown)?;
        if !response.status().is_success() {
            return Err(HttpPeer::error_of(response, shown).await);
        }
        let bytes = read_bounded(response, MAX_SMALL_ANSWER_BYTES, &shown).await?;
        decode::<IgnoredAny>(&shown, &bytes).map(|_| ())
    }

    /// The `_db_updates` feed of a remote database's server, from now on,
    /// continuous, with a heartbeat: read as a stream of event lines.
    pub(crate) async fn db_updates_feed(
        &self,
        heartbeat: Duration,
    ) -> Result<Streamed, EndpointError> {
        let path = format!(
            "../_db_updates?feed=continuous&since=now&heartbeat={}",
            heartbeat.as_millis()
        );
        // A 401 is the answer for credentials that are no server admin's:
        // a refused session cookie is tried once more after a new login,
        // then the refusal stands (not retried as a lost session would be).
        for fresh_login in [false, true] {
            let credential = self.credential().await;
            let (request, shown) =
                self.request(Method::GET, &path, "application/json", credential.as_ref())?;
            let response = request.send().await.map_err(transport(&shown))?;
            let status = response.status();
            if let Some(used) = credential.as_ref() {
                self.session
                    .observe(used, status.as_u16(), response.headers());
            }
            if status.is_success() {
                return Ok(Streamed {
                    response,
                    permit: None,
                });
            }
            let cookie = matches!(credential, Some(Credential::Cookie(_)));
            if status == StatusCode::UNAUTHORIZED && cookie && !fresh_login {
                continue;
            }
            return Err(HttpPeer::error_of(response, shown).await);
        }
        Err(self.malformed("no answer"))
    }
}
