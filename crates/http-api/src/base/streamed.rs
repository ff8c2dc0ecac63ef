//! Response bodies written by a task as their content is read (view rows,
//! list output): a small channel between the two, so a slow client holds
//! the writer back, a gone client stops it, and memory stays bounded
//! however long the answer.

use axum::body::Body;
use bytes::Bytes;
use futures_util::stream;
use tokio::sync::mpsc;

use crate::base::error::ApiError;

/// Bytes gathered before they are handed to the connection.
const FLUSH_AT: usize = 32 * 1024;

/// Chunks in flight between the writer and the connection.
const IN_FLIGHT: usize = 4;

/// The client went away: stop writing.
#[derive(Debug)]
pub(crate) struct Gone;

/// Why writing a streamed answer stopped early.
pub(crate) enum Stop {
    /// The client went away: nothing more to do.
    Gone,
    /// Reading what to write failed: the answer is cut.
    Failed(String),
}

impl From<Gone> for Stop {
    fn from(_: Gone) -> Stop {
        Stop::Gone
    }
}

impl From<ApiError> for Stop {
    fn from(e: ApiError) -> Stop {
        tracing::warn!(error = ?e, "an answer failed while it was written");
        Stop::Failed(format!("{e:?}"))
    }
}

impl From<store::StoreError> for Stop {
    fn from(e: store::StoreError) -> Stop {
        Stop::from(ApiError::from(e))
    }
}

/// The writing end of a streamed body.
pub(crate) struct BodyWriter {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl BodyWriter {
    /// A writer and the body it feeds.
    pub(crate) fn channel() -> (BodyWriter, Body) {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let chunks = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        });
        (
            BodyWriter {
                tx,
                buf: Vec::with_capacity(FLUSH_AT),
            },
            Body::from_stream(chunks),
        )
    }

    pub(crate) async fn write(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    /// `Gone` once the client has left: a task that reads much before it
    /// writes anything (a query whose rows mostly do not match) asks
    /// between pages, so its work stops with its client.
    pub(crate) fn still_wanted(&self) -> Result<(), Gone> {
        if self.tx.is_closed() {
            Err(Gone)
        } else {
            Ok(())
        }
    }

    /// Hands what is gathered to the connection now.
    pub(crate) async fn flush(&mut self) -> Result<(), Gone> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(FLUSH_AT),
        ));
        self.tx.send(Ok(chunk)).await.map_err(|_| Gone)
    }

    /// Sends the rest; the body ends when the writer is dropped.
    pub(crate) async fn finish(mut self) -> Result<(), Gone> {
        self.flush().await
    }

    /// Ends the body as writing it went: sent whole, left (the client is
    /// gone), or cut.
    pub(crate) async fn close(self, outcome: Result<(), Stop>) {
        match outcome {
            Ok(()) => {
                let _ = self.finish().await;
            }
            Err(Stop::Gone) => {}
            Err(Stop::Failed(reason)) => self.fail(reason).await,
        }
    }

    /// Ends the body with an error: the connection is cut, so the client
    /// sees an incomplete answer rather than a short one that looks whole.
    pub(crate) async fn fail(mut self, reason: String) {
        tracing::warn!(%reason, "a streamed answer was cut short");
        let _ = self.flush().await;
        let _ = self.tx.send(Err(std::io::Error::other(reason))).await;
    }
}
