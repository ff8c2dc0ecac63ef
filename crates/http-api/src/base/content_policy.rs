//! What a browser may do with an answer, decided once for every route.
//!
//! Attachments, design-function answers and documents are written by
//! users. Opened in a browser on the server's origin, an HTML or SVG body
//! would run with the cookie of whoever opened it (a server admin logged
//! into the console, say). So every answer carries
//! `Content-Security-Policy: sandbox` (no script, no same-origin access)
//! and `X-Content-Type-Options: nosniff`, whatever its route or type, as
//! CouchDB does for attachments and shows (and beyond it, for every other
//! answer, so a new route cannot forget it). The only exception is the
//! console's own files, which carry their own strict policy and mark
//! themselves with [`OwnPolicy`], a value only this server's code makes.
//!
//! A policy a design function adds is kept beside ours: a browser applies
//! every policy it is given, so a function's policy can only narrow the
//! sandbox, never lift it.

use axum::http::{HeaderValue, header};
use axum::response::Response;

/// The sandbox every answer but the console's carries.
pub(crate) const SANDBOX: &str = "sandbox";

/// Marks an answer whose content is the server's own (the console's
/// files): it keeps the policy it set instead of the sandbox.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnPolicy;

/// The layer: the sandbox and `nosniff` on every answer without
/// [`OwnPolicy`].
pub(crate) async fn apply(mut response: Response) -> Response {
    let own = response.extensions().get::<OwnPolicy>().is_some();
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if own {
        return response;
    }
    let sandboxed = headers
        .get_all(header::CONTENT_SECURITY_POLICY)
        .iter()
        .any(|v| v.as_bytes() == SANDBOX.as_bytes());
    if !sandboxed {
        headers.append(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn policies(response: &Response) -> Vec<String> {
        response
            .headers()
            .get_all(header::CONTENT_SECURITY_POLICY)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect()
    }

    #[tokio::test]
    async fn every_answer_is_sandboxed_and_a_functions_policy_cannot_lift_it() {
        let plain = apply(Response::new(Body::empty())).await;
        assert_eq!(policies(&plain), ["sandbox"]);
        assert_eq!(plain.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");

        let mut permissive = Response::new(Body::empty());
        permissive.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src *; script-src 'unsafe-inline'"),
        );
        let permissive = apply(permissive).await;
        assert!(policies(&permissive).contains(&"sandbox".to_string()));

        let mut already = Response::new(Body::empty());
        already.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX),
        );
        assert_eq!(policies(&apply(already).await), ["sandbox"]);

        let mut console = Response::new(Body::empty());
        console.extensions_mut().insert(OwnPolicy);
        console.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'"),
        );
        assert_eq!(policies(&apply(console).await), ["default-src 'self'"]);
    }
}
