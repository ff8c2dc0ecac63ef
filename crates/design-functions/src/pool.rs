//! Worker threads taking calls from one queue. Each owns a sandbox (its
//! JavaScript runtime is bound to the thread); a caller awaits its answer
//! without holding an async runtime thread.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::sandbox::{Answer, CallIo, Sandbox, THREAD_STACK};
use crate::{DesignDoc, JsError, Limits};

/// How long an extra worker waits for work before it stops.
const EXTRA_IDLE: Duration = Duration::from_secs(30);

struct Call {
    ddoc: DesignDoc,
    entry: &'static str,
    args: Vec<String>,
    io: CallIo,
    reply: oneshot::Sender<Result<Answer, JsError>>,
    /// Raised when the caller stops waiting (its request ended): a call
    /// not begun is skipped, a running one stops.
    gone: Arc<AtomicBool>,
}

/// Raises its flag when dropped: held while a caller waits for its answer.
struct RaiseOnDrop(Arc<AtomicBool>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The calls waiting, per database, and who works on what: workers take
/// the next call of the database with the fewest calls running, so a
/// database flooding the engine with slow calls waits behind its own.
#[derive(Default)]
struct State {
    open: bool,
    waiting: HashMap<String, VecDeque<Call>>,
    running: HashMap<String, usize>,
    workers: usize,
    idle: usize,
}

impl State {
    /// The next call to run: of the waiting database with the fewest
    /// calls running (the one waiting longest among equals is unknown;
    /// the map's order decides, which is fair enough between equals).
    fn next(&mut self) -> Option<Call> {
        let db = self
            .waiting
            .keys()
            .min_by_key(|db| self.running.get(*db).copied().unwrap_or(0))?
            .clone();
        let queue = self.waiting.get_mut(&db)?;
        let call = queue.pop_front();
        if queue.is_empty() {
            self.waiting.remove(&db);
        }
        if call.is_some() {
            *self.running.entry(db).or_default() += 1;
        }
        call
    }

    fn done(&mut self, db: &str) {
        if let Some(count) = self.running.get_mut(db) {
            *count -= 1;
            if *count == 0 {
                self.running.remove(db);
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    limits: Limits,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(crate) struct Pool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

impl Pool {
    /// Starts the workers; they end when the pool is dropped.
    pub(crate) fn new(limits: Limits) -> Pool {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                open: true,
                ..State::default()
            }),
            wake: Condvar::new(),
            limits,
        });
        for _ in 0..limits.threads.max(1) {
            let mut state = shared.lock();
            spawn_worker(&shared, &mut state, false);
        }
        Pool { shared }
    }

    pub(crate) async fn call(
        &self,
        ddoc: DesignDoc,
        entry: &'static str,
        args: Vec<String>,
    ) -> Result<Answer, JsError> {
        self.call_with(ddoc, entry, args, CallIo::Nothing).await
    }

    /// A call that talks to the caller while it runs (a list function,
    /// index functions).
    pub(crate) async fn call_with(
        &self,
        ddoc: DesignDoc,
        entry: &'static str,
        args: Vec<String>,
        io: CallIo,
    ) -> Result<Answer, JsError> {
        let (reply, answer) = oneshot::channel();
        let gone = Arc::new(AtomicBool::new(false));
        let _waiting = RaiseOnDrop(gone.clone());
        {
            let mut state = self.shared.lock();
            if !state.open {
                return Err(JsError::Internal("the query server is stopped".into()));
            }
            let db = ddoc.db.clone();
            let starved = !state.running.contains_key(&db);
            state.waiting.entry(db).or_default().push_back(Call {
                ddoc,
                entry,
                args,
                io,
                reply,
                gone,
            });
            let most = self.shared.limits.threads.max(1) + self.shared.limits.extra_threads;
            if state.idle > 0 {
                self.shared.wake.notify_one();
            } else if starved && state.workers < most {
                spawn_worker(&self.shared, &mut state, true);
            }
        }
        answer
            .await
            .map_err(|_| JsError::Internal("a query server thread ended".into()))?
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Every worker ends once no call waits.
        self.shared.lock().open = false;
        self.shared.wake.notify_all();
    }
}

/// Starts a worker (counted at once, so callers see it coming).
fn spawn_worker(shared: &Arc<Shared>, state: &mut State, extra: bool) {
    let n = state.workers;
    let for_worker = shared.clone();
    let started = std::thread::Builder::new()
        .name(format!("design-fn-{n}"))
        .stack_size(THREAD_STACK)
        .spawn(move || work(&for_worker, extra));
    match started {
        Ok(_) => state.workers += 1,
        Err(e) => tracing::error!(error = %e, "a query server thread did not start"),
    }
}

/// The next call for a worker; `None` when it should stop (the pool is
/// dropped, or an extra worker stayed idle).
fn take(shared: &Shared, extra: bool) -> Option<Call> {
    let mut state = shared.lock();
    state.idle += 1;
    loop {
        if let Some(call) = state.next() {
            state.idle -= 1;
            return Some(call);
        }
        if !state.open {
            break;
        }
        if extra {
            let (next, waited) = shared
                .wake
                .wait_timeout(state, EXTRA_IDLE)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            state = next;
            if waited.timed_out() && state.waiting.is_empty() {
                break;
            }
        } else {
            state = shared
                .wake
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
    state.idle -= 1;
    state.workers -= 1;
    None
}

fn work(shared: &Shared, extra: bool) {
    let limits = shared.limits;
    let mut sandbox = match Sandbox::new(limits) {
        Ok(sandbox) => sandbox,
        Err(e) => {
            tracing::error!(error = %e, "a query server thread could not start its runtime");
            shared.lock().workers -= 1;
            return;
        }
    };
    loop {
        let Some(call) = take(shared, extra) else {
            return;
        };
        let db = call.ddoc.db.clone();
        if call.gone.load(Ordering::Relaxed) {
            // Nobody waits for it any more.
            shared.lock().done(&db);
            continue;
        }
        let gone = call.gone.clone();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sandbox.call(&call.ddoc, call.entry, call.args, call.io, gone)
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
                        let _ = call
                            .reply
                            .send(Err(JsError::Internal("the query server failed".into())));
                        let mut state = shared.lock();
                        state.done(&db);
                        state.workers -= 1;
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
        shared.lock().done(&db);
    }
}
