//! The tower layer that counts every request.

use axum::http::{Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use super::*;

/// The layer that counts every request: outermost, so that every answer
/// (CORS preflights, refusals, errors) counts once.
#[derive(Debug, Clone)]
pub(crate) struct CountLayer(pub(crate) Arc<Stats>);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            stats: self.0.clone(),
        }
    }
}

/// A service whose requests are counted.
#[derive(Debug, Clone)]
pub(crate) struct Counted<S> {
    inner: S,
    stats: Arc<Stats>,
}

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for Counted<S>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        self.stats.request_started(request.method());
        CountedFuture {
            started: Instant::now(),
            stats: self.stats.clone(),
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, counted when its head is ready.
    #[derive(Debug)]
    pub(crate) struct CountedFuture<F> {
        #[pin]
        inner: F,
        stats: Arc<Stats>,
        started: Instant,
    }
}

impl<F, ResBody, E> Future for CountedFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &result {
            this.stats
                .request_finished(response.status(), *this.started);
        }
        Poll::Ready(result)
    }
}
