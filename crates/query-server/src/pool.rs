//! Worker threads taking calls from one queue. Each owns a sandbox (its
//! JavaScript runtime is bound to the thread); a caller awaits its answer
//! without holding an async runtime thread.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::sandbox::{Answer, ListIo, Sandbox, THREAD_STACK};
use crate::{DesignDoc, JsError, Limits};

struct Call {
    ddoc: DesignDoc,
    entry: &'static str,
    args: Vec<String>,
    io: Option<ListIo>,
    reply: oneshot::Sender<Result<Answer, JsError>>,
}

pub(crate) struct Pool {
    queue: Mutex<Option<Sender<Call>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

impl Pool {
    /// Starts the workers; they end when the pool is dropped.
    pub(crate) fn new(limits: Limits) -> Pool {
        let (queue, calls) = channel::<Call>();
        let calls = Arc::new(Mutex::new(calls));
        for n in 0..limits.threads.max(1) {
            let calls = calls.clone();
            let started = std::thread::Builder::new()
                .name(format!("query-server-{n}"))
                .stack_size(THREAD_STACK)
                .spawn(move || work(limits, &calls));
            if let Err(e) = started {
                tracing::error!(error = %e, "a query server thread did not start");
            }
        }
        Pool {
            queue: Mutex::new(Some(queue)),
        }
    }

    pub(crate) async fn call(
        &self,
        ddoc: DesignDoc,
        entry: &'static str,
        args: Vec<String>,
    ) -> Result<Answer, JsError> {
        self.call_with(ddoc, entry, args, None).await
    }

    /// A call that talks to the caller while it runs (a list function).
    pub(crate) async fn call_with(
        &self,
        ddoc: DesignDoc,
        entry: &'static str,
        args: Vec<String>,
        io: Option<ListIo>,
    ) -> Result<Answer, JsError> {
        let (reply, answer) = oneshot::channel();
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .is_some_and(|queue| {
                queue
                    .send(Call {
                        ddoc,
                        entry,
                        args,
                        io,
                        reply,
                    })
                    .is_ok()
            });
        if !sent {
            return Err(JsError::Internal("the query server is stopped".into()));
        }
        answer
            .await
            .map_err(|_| JsError::Internal("a query server thread ended".into()))?
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Closing the queue ends every worker once it is idle.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
    }
}

fn work(limits: Limits, calls: &Mutex<Receiver<Call>>) {
    let mut sandbox = match Sandbox::new(limits) {
        Ok(sandbox) => sandbox,
        Err(e) => {
            tracing::error!(error = %e, "a query server thread could not start its runtime");
            return;
        }
    };
    loop {
        let next = calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .recv();
        let Ok(call) = next else { return };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sandbox.call(&call.ddoc, call.entry, call.args, call.io)
        }));
        let answer = match ran {
            Ok(answer) => answer,
            Err(_) => {
                // Our bug, not the function's: the thread goes on with a fresh engine.
                tracing::error!(ddoc = %call.ddoc.id, "a query server call panicked");
                match Sandbox::new(limits) {
                    Ok(fresh) => sandbox = fresh,
                    Err(e) => {
                        tracing::error!(error = %e, "a query server thread could not restart its runtime");
                        return;
                    }
                }
                Err(JsError::Internal("the query server failed".into()))
            }
        };
        if let Err(e) = &answer {
            tracing::warn!(ddoc = %call.ddoc.id, db = %call.ddoc.db, error = %e, "a design function failed");
        }
        // The caller may have gone (its request ended): nothing to do.
        let _ = call.reply.send(answer);
    }
}
