//! How CouchDB reads a request and finishes an answer, around every
//! handler: `X-HTTP-Method-Override` on POST, `+` in a path as a space
//! (`decode_plus_to_space`), absolute `Location` URLs built from the
//! request's host (or a proxy's `X-Forwarded-*` headers), JSONP answers
//! (`allow_jsonp` and `?callback=`), and `X-CouchDB-Body-Time`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::base::error::ApiError;
use crate::{AppState, Https};

/// CouchDB's request and answer rules that can be configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRules {
    /// Answer `?callback=name` with JSONP (off by default, as CouchDB).
    pub allow_jsonp: bool,
    /// A `+` in a URL path is a space (on by default, as CouchDB).
    pub decode_plus_to_space: bool,
    /// The header a proxy names the client's host in.
    pub x_forwarded_host: String,
    /// The header a proxy names the client's scheme in.
    pub x_forwarded_proto: String,
    /// The header a proxy sets to `on` for HTTPS clients.
    pub x_forwarded_ssl: String,
    /// How many times one request may be rewritten by `_rewrite` into
    /// `_rewrite` again (CouchDB's `rewrite_limit`, 100).
    pub rewrite_limit: u32,
    /// Refuse `rewrites` rules whose paths climb more than two levels,
    /// out of the database (CouchDB's `secure_rewrites`, on).
    pub secure_rewrites: bool,
}

impl Default for HttpRules {
    fn default() -> HttpRules {
        HttpRules {
            allow_jsonp: false,
            decode_plus_to_space: true,
            x_forwarded_host: "X-Forwarded-Host".into(),
            x_forwarded_proto: "X-Forwarded-Proto".into(),
            x_forwarded_ssl: "X-Forwarded-Ssl".into(),
            rewrite_limit: 100,
            secure_rewrites: true,
        }
    }
}

/// The methods a POST may stand for, as CouchDB lists them.
const OVERRIDABLE: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY",
];

/// Applies the rules to one request and its answer.
pub(crate) async fn apply(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let rules = &state.config.http;
    override_method(&mut request);
    if rules.decode_plus_to_space {
        plus_to_space(&mut request);
    }
    let callback = match jsonp_callback(rules, request.uri()) {
        Ok(callback) => callback,
        Err(e) => return e.into_response(),
    };
    let origin = Origin::of(rules, &request);
    let unconfirmed = asks_more_copies_than_exist(&request);
    let body_time = time_body(&mut request);
    let mut response = next.run(request).await;
    if unconfirmed
        && matches!(response.status(), StatusCode::OK | StatusCode::CREATED)
        && response.extensions().get::<ConfirmedWrite>().is_none()
    {
        *response.status_mut() = StatusCode::ACCEPTED;
    }
    make_location_absolute(&mut response, &origin);
    let millis = body_time.map_or(0, |t| t.load(Ordering::Relaxed));
    if let Ok(value) = HeaderValue::from_str(&millis.to_string()) {
        response.headers_mut().insert("x-couchdb-body-time", value);
    }
    match callback {
        Some(callback) => wrap_jsonp(response, &callback).await,
        None => response,
    }
}

/// Old clients and proxies that only send GET and POST name the method
/// they mean in `X-HTTP-Method-Override`; CouchDB honours it on POST only.
fn override_method(request: &mut Request) {
    if request.method() != Method::POST {
        return;
    }
    let wanted = request
        .headers()
        .get("x-http-method-override")
        .and_then(|v| v.to_str().ok())
        .filter(|m| OVERRIDABLE.contains(m))
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok());
    if let Some(method) = wanted {
        tracing::debug!(%method, "method override (the real method was POST)");
        *request.method_mut() = method;
    }
}

/// Marks an answer CouchDB gives as it is whatever `w` asks: deleting an
/// attachment answers 200 even with `w=3`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConfirmedWrite;

/// A write with `w` over 1: this one node holds the only copy, so, as a
/// single-node CouchDB, the write is accepted (202) rather than confirmed
/// (201). CouchDB leaves COPY and replicated writes (`new_edits=false`) at
/// their usual answers.
fn asks_more_copies_than_exist(request: &Request) -> bool {
    let method = request.method();
    if !(method == Method::PUT || method == Method::POST || method == Method::DELETE) {
        return false;
    }
    let Some(query) = request.uri().query() else {
        return false;
    };
    let mut w = None;
    let mut replicated = false;
    for (key, value) in url_pairs(query) {
        match key.as_str() {
            "w" => w = value.parse::<u64>().ok(),
            "new_edits" => replicated = value == "false",
            _ => {}
        }
    }
    w.is_some_and(|w| w > 1) && !replicated
}

/// `+` in the path becomes `%20`, so every later reading of the path
/// (routing, authorization) sees a space, as CouchDB decodes it.
fn plus_to_space(request: &mut Request) {
    let uri = request.uri();
    if !uri.path().contains('+') {
        return;
    }
    let path = uri.path().replace('+', "%20");
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = path_and_query.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
}

/// The JSONP callback the request asks for, when JSONP is allowed: letters,
/// digits, `.`, `_`, `[` and `]` only, as CouchDB checks it.
fn jsonp_callback(rules: &HttpRules, uri: &Uri) -> Result<Option<String>, ApiError> {
    if !rules.allow_jsonp {
        return Ok(None);
    }
    let callback = uri
        .query()
        .and_then(|q| url_pairs(q).find(|(k, _)| k == "callback").map(|(_, v)| v));
    match callback {
        None => Ok(None),
        Some(c) if c.is_empty() => Ok(None),
        Some(c)
            if c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._[]".contains(&b)) =>
        {
            Ok(Some(c))
        }
        Some(_) => Err(ApiError::bad_request("invalid_callback")),
    }
}

fn url_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        };
        Some((decode(k)?, decode(v)?))
    })
}

/// The host a request was sent to, as CouchDB reads it: a proxy's
/// `x_forwarded_host` header, else `Host`.
pub(crate) fn request_host<'a>(
    rules: &HttpRules,
    headers: &'a HeaderMap,
) -> Option<&'a HeaderValue> {
    let value = |name: &str| headers.get(name).filter(|v| !v.is_empty());
    value(&rules.x_forwarded_host).or_else(|| value(header::HOST.as_str()))
}

/// What a request tells of its own URL, kept (cheaply) until an answer
/// needs an absolute one.
struct Origin {
    host: Option<HeaderValue>,
    https: bool,
}

impl Origin {
    /// As CouchDB builds absolute URLs: the proxy's host header, else
    /// `Host`; HTTPS when the proxy says so or the request came over HTTPS.
    fn of(rules: &HttpRules, request: &Request) -> Origin {
        let headers = request.headers();
        let value = |name: &str| headers.get(name).filter(|v| !v.is_empty());
        let host = request_host(rules, headers).cloned();
        let says = |name: &str, expected: &str| {
            value(name).and_then(|v| v.to_str().ok()).map(str::trim) == Some(expected)
        };
        let https = says(&rules.x_forwarded_ssl, "on")
            || says(&rules.x_forwarded_proto, "https")
            || request.extensions().get::<Https>().is_some();
        Origin { host, https }
    }

    /// `scheme://host`, when the host is a plain name or address and port.
    fn base(&self) -> Option<String> {
        let host = self.host.as_ref()?.to_str().ok()?.trim();
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
        {
            return None;
        }
        let scheme = if self.https { "https" } else { "http" };
        Some(format!("{scheme}://{host}"))
    }
}

fn make_location_absolute(response: &mut Response, origin: &Origin) {
    let headers = response.headers_mut();
    let Some(location) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok()) else {
        return;
    };
    if !location.starts_with('/') {
        return;
    }
    let Some(base) = origin.base() else {
        return;
    };
    if let Ok(value) = HeaderValue::from_str(&format!("{base}{location}")) {
        headers.insert(header::LOCATION, value);
    }
}

/// Measures how long reading the request body takes, from its first byte
/// asked for to its end, in milliseconds, when there is a body.
fn time_body(request: &mut Request) -> Option<Arc<AtomicU64>> {
    if !has_body(request.headers()) {
        return None;
    }
    let millis = Arc::new(AtomicU64::new(0));
    let body = std::mem::take(request.body_mut());
    *request.body_mut() = Body::new(TimedBody {
        inner: body,
        started: None,
        millis: millis.clone(),
    });
    Some(millis)
}

fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

struct TimedBody {
    inner: Body,
    started: Option<Instant>,
    millis: Arc<AtomicU64>,
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            let millis = started.elapsed().as_millis() as u64;
            self.millis.store(millis, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A JSON answer as JSONP: `/* CouchDB */name(...);`, typed as JavaScript.
/// A whole answer loses its final newline, as CouchDB writes it; a
/// streamed one is wrapped as it goes.
async fn wrap_jsonp(response: Response, callback: &str) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !is_json || response.status() == StatusCode::NOT_MODIFIED {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/javascript"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    let open = Bytes::from(format!("/* CouchDB */{callback}("));
    let close = Bytes::from_static(b");");
    let whole = http_body::Body::size_hint(&body).exact();
    let body = match whole {
        Some(len) if len <= 64 << 20 => match axum::body::to_bytes(body, len as usize).await {
            Ok(bytes) => {
                let inner = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                let mut out = Vec::with_capacity(inner.len() + open.len() + 2);
                out.extend_from_slice(&open);
                out.extend_from_slice(inner);
                out.extend_from_slice(&close);
                Body::from(out)
            }
            Err(e) => return ApiError::Internal(e.to_string()).into_response(),
        },
        _ => {
            let stream = futures_util::stream::once(async move { Ok::<_, axum::Error>(open) })
                .chain(body.into_data_stream())
                .chain(futures_util::stream::once(async move { Ok(close) }));
            Body::from_stream(stream)
        }
    };
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn callbacks_are_checked_as_couchdb_checks_them() {
        let on = HttpRules {
            allow_jsonp: true,
            ..HttpRules::default()
        };
        assert_eq!(
            jsonp_callback(&on, &uri("/db/doc?callback=app.cb_1[0]")).unwrap(),
            Some("app.cb_1[0]".to_string())
        );
        assert_eq!(jsonp_callback(&on, &uri("/db/doc")).unwrap(), None);
        assert!(jsonp_callback(&on, &uri("/db/doc?callback=alert(1)")).is_err());
        assert!(jsonp_callback(&on, &uri("/db/doc?callback=a%3Bb")).is_err());
        let off = HttpRules::default();
        assert_eq!(
            jsonp_callback(&off, &uri("/db/doc?callback=alert(1)")).unwrap(),
            None
        );
    }

    #[test]
    fn a_plus_in_the_path_is_a_space_but_not_in_the_query() {
        let mut request = Request::new(Body::empty());
        *request.uri_mut() = uri("/db/a+b?key=%22c+d%22");
        plus_to_space(&mut request);
        assert_eq!(request.uri(), "/db/a%20b?key=%22c+d%22");
    }

    #[test]
    fn only_a_post_is_overridden_and_only_with_couchdbs_methods() {
        let with = |method: Method, value: &str| {
            let mut request = Request::new(Body::empty());
            *request.method_mut() = method;
            request.headers_mut().insert(
                "x-http-method-override",
                HeaderValue::from_str(value).unwrap(),
            );
            override_method(&mut request);
            request.method().clone()
        };
        assert_eq!(with(Method::POST, "PUT"), Method::PUT);
        assert_eq!(with(Method::POST, "COPY").as_str(), "COPY");
        assert_eq!(with(Method::GET, "DELETE"), Method::GET);
        assert_eq!(with(Method::POST, "PATCH"), Method::POST);
        assert_eq!(with(Method::POST, "put"), Method::POST);
    }

    #[test]
    fn absolute_urls_follow_the_proxy_headers() {
        let rules = HttpRules::default();
        let request = |headers: &[(&str, &str)]| {
            let mut request = Request::new(Body::empty());
            for (k, v) in headers {
                request.headers_mut().insert(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            Origin::of(&rules, &request).base()
        };
        assert_eq!(
            request(&[("host", "127.0.0.1:5984")]).as_deref(),
            Some("http://127.0.0.1:5984")
        );
        assert_eq!(
            request(&[
                ("host", "127.0.0.1:5984"),
                ("x-forwarded-host", "db.example.com"),
                ("x-forwarded-proto", "https")
            ])
            .as_deref(),
            Some("https://db.example.com")
        );
        assert_eq!(
            request(&[("host", "h"), ("x-forwarded-ssl", "on")]).as_deref(),
            Some("https://h")
        );
        assert_eq!(request(&[("host", "evil\"host")]), None);
        assert_eq!(request(&[]), None);
    }
}
