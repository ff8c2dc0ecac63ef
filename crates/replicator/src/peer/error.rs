//! Why a call to a peer failed, whatever the peer.

/// Why a protocol call failed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The database does not exist (CouchDB's `db_not_found`).
    #[error("could not open {0}")]
    NotFound(String),
    /// The peer answered with a CouchDB error.
    #[error("{url} answered {status}: {error}: {reason}")]
    Http {
        url: String,
        status: u16,
        error: String,
        reason: String,
    },
    /// The request did not complete (refused, reset, timed out, truncated).
    #[error("request to {url} failed: {detail}")]
    Transport { url: String, detail: String },
    /// The request could not even be built (a header no HTTP request can
    /// carry, a URL it cannot go to): the replication's own settings are
    /// wrong, and no retry mends them.
    #[error("a request to {url} cannot be made: {detail}")]
    Request { url: String, detail: String },
    /// The answer was not what the protocol says.
    #[error("unexpected answer from {url}: {detail}")]
    Protocol { url: String, detail: String },
    /// The peer's answer went past what one answer may hold: it is cut
    /// off, never buffered further (a peer that never stops talking).
    #[error("the answer from {url} is larger than {limit} bytes; a peer's answer may not be")]
    TooLarge { url: String, limit: usize },
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

impl EndpointError {
    /// Whether retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            EndpointError::Transport { .. } => true,
            EndpointError::Http { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            _ => false,
        }
    }
}
