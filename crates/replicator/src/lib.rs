//! The CouchDB Replication Protocol, version 3: one replication from a source
//! to a target, each a local database (called through `store`) or a remote
//! CouchDB-compatible database (over HTTP).
//!
//! This crate owns the replication spec and its validation ([`spec`]), the
//! replication id ([`rep_id`]), checkpoints and their comparison
//! ([`checkpoint`]), the peers by role ([`peer`]: a local database through
//! the store, a remote one over HTTP, behind one set of calls: changes,
//! `revs_diff`, `_bulk_get`, `_bulk_docs`), one run of a replication ([`job`])
//! and the [`scheduler`] that runs a server's jobs within its limits. It
//! knows nothing of axum or of the `_replicator` database; the server drives it.

pub mod checkpoint;
pub mod job;
pub mod peer;
pub mod rep_id;
pub mod scheduler;
pub mod share;
pub mod spec;
pub mod transfer;

use std::sync::Once;

pub use checkpoint::{HistoryEntry, ReplicationLog, Resume, StoredLog, compare_logs};
pub use job::{
    ProcessStatus, Progress, ProgressSnapshot, ReplicationError, RunEnd, Stats, rfc3339, run,
    run_once, run_parking,
};
pub use peer::{Endpoint, EndpointError, HttpOptions};
pub use rep_id::{REP_ID_VERSION, job_id, replication_id};
pub use scheduler::{
    Added, DOC_STATES, DocCompleted, DocInfo, DocPhase, Event, EventKind, JobInfo, JobState,
    Outcome, Owner, Scheduler, SchedulerConfig, progress_json,
};
pub use spec::{
    BasicAuth, ChangesFilter, Peer, RemoteDb, ReplicationSpec, SpecDefaults, SpecError,
};

/// A `reqwest` client builder ready for HTTPS peers, that follows no
/// redirect.
///
/// A peer's `3xx` is an answer like any other unsuccessful one (the
/// request fails), never a new request to the address it names: a
/// redirected login would carry the password in its body to that address,
/// a redirected write the documents. CouchDB 3.5's replicator follows no
/// `307` and, with credentials, fails at its login on any redirect; it
/// follows `301`-`303` for peers without credentials, which we do not.
///
/// We build rustls with the `ring` provider (a far lighter build than the
/// default aws-lc-rs), and reqwest then needs the process-wide provider
/// installed before any client is built; this does it once.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    install_tls_provider();
    let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if let Some(tls) = PEER_TLS.get() {
        if !tls.verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        if let Some(pem) = &tls.trusted_ca_pem
            && let Ok(certs) = reqwest::Certificate::from_pem_bundle(pem)
        {
            builder = builder.tls_certs_merge(certs);
        }
    }
    builder
}

/// How the replicator checks HTTPS peers (CouchDB's
/// `verify_ssl_certificates` and `ssl_trusted_certificates_file`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerTls {
    /// Refuse peers whose certificate does not verify.
    pub verify: bool,
    /// Certificate authorities (PEM) trusted beside the system's.
    pub trusted_ca_pem: Option<Vec<u8>>,
}

static PEER_TLS: std::sync::OnceLock<PeerTls> = std::sync::OnceLock::new();

/// Sets how every replication checks HTTPS peers, once, at startup; a CA
/// file that holds no certificate is refused.
pub fn set_peer_tls(tls: PeerTls) -> Result<(), String> {
    if let Some(pem) = &tls.trusted_ca_pem {
        match reqwest::Certificate::from_pem_bundle(pem) {
            Ok(certs) if !certs.is_empty() => {}
            _ => return Err("the trusted certificates file holds no PEM certificate".into()),
        }
    }
    PEER_TLS
        .set(tls)
        .map_err(|_| "the replicator's TLS settings are already set".to_string())
}

/// Installs the `ring` TLS provider for the whole process (idempotent).
pub fn install_tls_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Fails only if another provider is already installed: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_can_be_built_without_a_preinstalled_tls_provider() {
        assert!(super::http_client_builder().build().is_ok());
    }

    #[tokio::test]
    async fn a_redirect_is_an_answer_not_a_new_request() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = elsewhere.local_addr().unwrap().port();
        let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = peer.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = peer.accept().await {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{other}/_session\r\n\
                     Content-Length: 0\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        let client = super::http_client_builder().build().unwrap();
        let answer = client
            .post(format!("http://{address}/_session"))
            .body("{\"name\": \"n\", \"password\": \"p\"}")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 307);
        let nothing =
            tokio::time::timeout(std::time::Duration::from_millis(200), elsewhere.accept()).await;
        assert!(nothing.is_err(), "the other address was called");
    }
}
