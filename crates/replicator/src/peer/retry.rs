//! Retrying what failed transiently, with exponential backoff: one HTTP
//! request, or a whole copy of a document with attachments.

use std::time::Duration;

use super::EndpointError;

/// Runs `attempt` again after transient failures (connection errors,
/// timeouts, truncated bodies, 408, 429, 5xx), at most `retries` times,
/// waiting 250 ms, then twice as long each time up to 10 s.
pub(crate) async fn with_retries<T, F, Fut>(
    retries: u64,
    what: &str,
    mut attempt: F,
) -> Result<T, EndpointError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, EndpointError>>,
{
    let mut wait = RETRY_START;
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_transient() && tries < retries => {
                tries += 1;
                tracing::warn!(error = %e, attempt = tries, "retrying {what}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            other => return other,
        }
    }
}

/// First wait before retrying a transient failure; doubles each attempt.
pub(crate) const RETRY_START: Duration = Duration::from_millis(250);
/// Longest wait between retries.
const RETRY_MAX: Duration = Duration::from_secs(10);
