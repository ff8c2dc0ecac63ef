//! One JavaScript runtime per worker thread, and in it one context per
//! design document revision: the document's functions see CouchDB's
//! globals and nothing of other design documents. Every call runs under a
//! deadline (the runtime's interrupt handler) and the runtime's memory limit.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rquickjs::{Context, Ctx, Exception, Function, Runtime};
use tokio::sync::mpsc;

use crate::index_fields::Gathered;
use crate::{DesignDoc, JsError};

const PRELUDE: &str = include_str!("prelude.js");

/// What an entry point of the prelude answered.
pub(crate) enum Answer {
    Ok(serde_json::Value),
    /// A JavaScript error or CouchDB's `["error", name, reason]`.
    Error(String, String),
    /// Any other value thrown.
    Thrown(serde_json::Value),
}

/// What a list function sends while it runs.
#[derive(Debug)]
pub enum ListChunk {
    /// The head `start()` set (with the content type its provider chose)
    /// and the text sent before its first row: the answer can begin.
    Start(serde_json::Value, String),
    /// Text sent since the previous row.
    Text(String),
}

/// The channels of a running list function: its rows in, its text out.
/// The engine's thread waits on them (never longer than the call timeout).
#[derive(Debug)]
pub struct ListIo {
    rows: mpsc::Receiver<String>,
    out: mpsc::Sender<ListChunk>,
    runtime: tokio::runtime::Handle,
}

impl ListIo {
    /// Made inside the async runtime, whose timers the waits use.
    pub fn new(rows: mpsc::Receiver<String>, out: mpsc::Sender<ListChunk>) -> ListIo {
        ListIo {
            rows,
            out,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

/// What a call exchanges with its caller while it runs, beside its answer.
pub(crate) enum CallIo {
    Nothing,
    /// A list function's rows in and text out.
    List(ListIo),
    /// The fields index functions name, gathered as they name them.
    Index(Arc<Mutex<Gathered>>),
}

/// The engine of one worker thread.
pub(crate) struct Sandbox {
    limits: crate::Limits,
    runtime: Runtime,
    contexts: HashMap<ContextKey, Entry>,
    /// When the running call must stop, in nanoseconds since `epoch`; 0 for none.
    deadline: Arc<AtomicU64>,
    /// Raised when the running call's caller has gone: it stops too.
    caller_gone: CallerGone,
    epoch: Instant,
    uses: u64,
    /// The running list function's channels, while one runs.
    list: Rc<RefCell<Option<ListIo>>>,
    /// Where the running index functions' fields go, while they run.
    gathering: Rc<RefCell<Option<Arc<Mutex<Gathered>>>>>,
}

type ContextKey = (String, String, String);

struct Entry {
    context: Context,
    last_use: u64,
}

impl Sandbox {
    pub(crate) fn new(limits: crate::Limits) -> Result<Sandbox, JsError> {
        let deadline = Arc::new(AtomicU64::new(0));
        let caller_gone = CallerGone::default();
        let epoch = Instant::now();
        let runtime = new_runtime(&limits, deadline.clone(), caller_gone.clone(), epoch)?;
        Ok(Sandbox {
            limits,
            runtime,
            contexts: HashMap::new(),
            deadline,
            caller_gone,
            epoch,
            uses: 0,
            list: Rc::new(RefCell::new(None)),
            gathering: Rc::new(RefCell::new(None)),
        })
    }

    /// Calls `entry` of the prelude in the design document's context,
    /// with JSON-text arguments.
    /// `gone` is raised when the caller stops waiting: the call stops at
    /// the engine's next look, as at its deadline.
    pub(crate) fn call(
        &mut self,
        ddoc: &DesignDoc,
        entry: &str,
        args: Vec<String>,
        io: CallIo,
        gone: Arc<AtomicBool>,
    ) -> Result<Answer, JsError> {
        self.caller_gone.set(Some(gone));
        let answer = self.call_for(ddoc, entry, args, io);
        self.caller_gone.set(None);
        answer
    }

    fn call_for(
        &mut self,
        ddoc: &DesignDoc,
        entry: &str,
        args: Vec<String>,
        io: CallIo,
    ) -> Result<Answer, JsError> {
        match io {
            CallIo::Nothing => {}
            CallIo::List(io) => *self.list.borrow_mut() = Some(io),
            CallIo::Index(gathered) => *self.gathering.borrow_mut() = Some(gathered),
        }
        // One deadline for the whole call: opening the design document's
        // context (its `init`) counts against it too.
        let (deadline, epoch, timeout) = (self.deadline.clone(), self.epoch, self.limits.timeout);
        let answer = timed(&deadline, epoch, timeout, || {
            self.call_in_context(ddoc, entry, args)
        });
        // Dropping the channels tells the other side the function is done.
        self.list.borrow_mut().take();
        self.gathering.borrow_mut().take();
        answer
    }

    fn call_in_context(
        &mut self,
        ddoc: &DesignDoc,
        entry: &str,
        args: Vec<String>,
    ) -> Result<Answer, JsError> {
        let key = (ddoc.db.clone(), ddoc.id.clone(), ddoc.rev.clone());
        if !self.contexts.contains_key(&key) {
            let context = self.open(ddoc)?;
            self.evict_one_if_full();
            self.contexts.insert(
                key.clone(),
                Entry {
                    context,
                    last_use: 0,
                },
            );
        }
        self.uses += 1;
        let Some(entry_ref) = self.contexts.get_mut(&key) else {
            return Err(JsError::Internal(
                "a design document's context vanished".into(),
            ));
        };
        entry_ref.last_use = self.uses;
        let context = entry_ref.context.clone();
        let outcome = self.timed(|| {
            context.with(|ctx| -> Result<String, JsError> {
                let couch: rquickjs::Object = ctx.globals().get("__couch").map_err(internal)?;
                let fun: Function = couch.get(entry).map_err(internal)?;
                let args: Vec<rquickjs::Value> = args
                    .into_iter()
                    .map(|a| rquickjs::String::from_str(ctx.clone(), &a).map(|s| s.into_value()))
                    .collect::<Result<_, _>>()
                    .map_err(internal)?;
                let mut call_args = rquickjs::function::Args::new(ctx.clone(), args.len());
                call_args.push_args(args).map_err(internal)?;
                fun.call_arg::<String>(call_args)
                    .map_err(|e| uncaught(&ctx, e))
            })
        });
        // Memory running out inside a function reaches the prelude's
        // handler as an ordinary error: it is the runtime's failure all the
        // same. When not even the error could be made, QuickJS throws
        // `null` instead; a function's own `throw null` (or `undefined`)
        // is read the same way (CouchDB's engine fails on it too, a 500).
        let outcome = outcome.and_then(|text| match parse_answer(&text)? {
            Answer::Error(name, reason)
                if name == "InternalError" && reason.contains("out of memory") =>
            {
                Err(JsError::OutOfMemory)
            }
            Answer::Thrown(serde_json::Value::Null) => Err(JsError::OutOfMemory),
            answer => Ok(answer),
        });
        match outcome {
            Ok(answer) => Ok(answer),
            Err(e) => {
                // The context may be half way through anything: start afresh.
                self.contexts.remove(&key);
                if matches!(e, JsError::OutOfMemory) {
                    self.reset()?;
                }
                Err(e)
            }
        }
    }

    /// A new context for a design document, with the prelude and the document.
    fn open(&mut self, ddoc: &DesignDoc) -> Result<Context, JsError> {
        if let Ok(doc) = serde_json::from_str::<serde_json::Value>(&ddoc.json) {
            crate::check_language(&doc)?;
        }
        let context = Context::full(&self.runtime).map_err(internal)?;
        let loaded = self.timed(|| {
            context.with(|ctx| -> Result<String, JsError> {
                let log = Function::new(ctx.clone(), {
                    let id = ddoc.id.clone();
                    move |message: String| {
                        tracing::info!(target: "design_functions", ddoc = %id, "{message}");
                    }
                })
                .map_err(internal)?;
                ctx.globals().set("__couch_log", log).map_err(internal)?;
                let script = Function::new(ctx.clone(), |source: String| {
                    crate::source::as_script(&source)
                })
                .map_err(internal)?;
                ctx.globals()
                    .set("__couch_script", script)
                    .map_err(internal)?;
                self.list_functions(&ctx)?;
                crate::index_fields::install(&ctx, self.gathering.clone()).map_err(internal)?;
                ctx.eval::<(), _>(PRELUDE).map_err(|e| uncaught(&ctx, e))?;
                let couch: rquickjs::Object = ctx.globals().get("__couch").map_err(internal)?;
                let init: Function = couch.get("init").map_err(internal)?;
                init.call::<_, String>((ddoc.json.to_string(),))
                    .map_err(|e| uncaught(&ctx, e))
            })
        })?;
        match parse_answer(&loaded)? {
            Answer::Ok(_) => Ok(context),
            Answer::Error(name, reason) => Err(JsError::Runtime {
                error: name,
                reason,
            }),
            Answer::Thrown(value) => Err(JsError::Runtime {
                error: "invalid_design_doc".into(),
                reason: value.to_string(),
            }),
        }
    }

    /// `__couch_list_row()` and `__couch_list_send(kind, head, text)`:
    /// a list function's way to its rows and its client. Each wait is
    /// bounded by the call timeout, and the deadline starts afresh after
    /// it (the timeout is per row, as CouchDB's is per message).
    fn list_functions(&self, ctx: &Ctx<'_>) -> Result<(), JsError> {
        let timeout = self.limits.timeout;
        let (list, deadline, epoch) = (self.list.clone(), self.deadline.clone(), self.epoch);
        let row = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'_>| -> rquickjs::Result<Option<String>> {
                let mut slot = list.borrow_mut();
                let Some(io) = slot.as_mut() else {
                    return Ok(None);
                };
                let runtime = io.runtime.clone();
                let next =
                    runtime.block_on(async { tokio::time::timeout(timeout, io.rows.recv()).await });
                rearm(&deadline, epoch, timeout);
                next.map_err(|_| Exception::throw_message(&ctx, "the view's rows did not come"))
            },
        )
        .map_err(internal)?;
        let (list, deadline) = (self.list.clone(), self.deadline.clone());
        let send = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'_>, kind: String, head: String, text: String| -> rquickjs::Result<()> {
                let mut slot = list.borrow_mut();
                let Some(io) = slot.as_mut() else {
                    return Ok(());
                };
                let chunk = if kind == "start" {
                    ListChunk::Start(ejson::from_str(&head).unwrap_or_default(), text)
                } else {
                    ListChunk::Text(text)
                };
                let runtime = io.runtime.clone();
                let sent = runtime
                    .block_on(async { tokio::time::timeout(timeout, io.out.send(chunk)).await });
                rearm(&deadline, epoch, timeout);
                match sent {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) => Err(Exception::throw_message(&ctx, "the client went away")),
                    Err(_) => Err(Exception::throw_message(&ctx, "the client stopped reading")),
                }
            },
        )
        .map_err(internal)?;
        ctx.globals()
            .set("__couch_list_row", row)
            .map_err(internal)?;
        ctx.globals()
            .set("__couch_list_send", send)
            .map_err(internal)?;
        Ok(())
    }

    /// Runs `work` under the call deadline; an interrupted call is a timeout.
    fn timed<T>(&self, work: impl FnOnce() -> Result<T, JsError>) -> Result<T, JsError> {
        timed(&self.deadline, self.epoch, self.limits.timeout, work)
    }

    fn evict_one_if_full(&mut self) {
        if self.contexts.len() < self.limits.contexts_per_thread.max(1) {
            return;
        }
        if let Some(oldest) = self
            .contexts
            .iter()
            .min_by_key(|(_, e)| e.last_use)
            .map(|(k, _)| k.clone())
        {
            self.contexts.remove(&oldest);
        }
    }

    /// Drops every context and the runtime, after the memory ran out.
    fn reset(&mut self) -> Result<(), JsError> {
        self.contexts.clear();
        self.runtime = new_runtime(
            &self.limits,
            self.deadline.clone(),
            self.caller_gone.clone(),
            self.epoch,
        )?;
        Ok(())
    }
}

/// Gives the running call its whole timeout again from now.
fn rearm(deadline: &AtomicU64, epoch: Instant, timeout: Duration) {
    let until = epoch.elapsed() + timeout;
    deadline.store(until.as_nanos().max(1) as u64, Ordering::Relaxed);
}

/// Runs `work` under a deadline `timeout` from now (the runtime's interrupt
/// handler stops JavaScript past it); inside a timed call, under the
/// deadline already set, so one call has one timeout whatever it runs.
fn timed<T>(
    deadline: &AtomicU64,
    epoch: Instant,
    timeout: Duration,
    work: impl FnOnce() -> Result<T, JsError>,
) -> Result<T, JsError> {
    if deadline.load(Ordering::Relaxed) != 0 {
        return work();
    }
    let until = epoch.elapsed() + timeout;
    deadline.store(until.as_nanos().max(1) as u64, Ordering::Relaxed);
    let result = work();
    // A list function's deadline moves on with each row it reads.
    let until = Duration::from_nanos(deadline.swap(0, Ordering::Relaxed));
    match result {
        Err(JsError::Internal(_) | JsError::Runtime { .. }) if epoch.elapsed() >= until => {
            Err(JsError::Timeout(timeout))
        }
        other => other,
    }
}

fn new_runtime(
    limits: &crate::Limits,
    deadline: Arc<AtomicU64>,
    caller_gone: CallerGone,
    epoch: Instant,
) -> Result<Runtime, JsError> {
    let runtime = Runtime::new().map_err(internal)?;
    runtime.set_memory_limit(limits.memory);
    runtime.set_max_stack_size(MAX_JS_STACK);
    runtime.set_interrupt_handler(Some(Box::new(move || {
        let until = deadline.load(Ordering::Relaxed);
        (until != 0 && epoch.elapsed().as_nanos() as u64 >= until) || caller_gone.is_raised()
    })));
    Ok(runtime)
}

/// The running call's "caller gone" flag, which the runtime's interrupt
/// handler looks at: the worker sets it for each call (the handler is
/// made once per runtime, the flag is the call's).
#[derive(Clone, Default)]
struct CallerGone(Arc<Mutex<Option<Arc<AtomicBool>>>>);

impl CallerGone {
    fn set(&self, flag: Option<Arc<AtomicBool>>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = flag;
    }

    fn is_raised(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

/// JavaScript's stack, well inside the worker thread's own (see `pool`):
/// room for `JSON.stringify` of a key nested thousands of levels deep,
/// which CouchDB's engine indexes (a document past it is skipped alone).
const MAX_JS_STACK: usize = 8 << 20;

/// The worker threads' stack size: room for `MAX_JS_STACK`, the engine,
/// and values as deep as `ejson` reads.
pub(crate) const THREAD_STACK: usize = ejson::THREAD_STACK;

fn internal(e: rquickjs::Error) -> JsError {
    match e {
        rquickjs::Error::Allocation => JsError::OutOfMemory,
        other => JsError::Internal(other.to_string()),
    }
}

/// An exception that escaped the prelude: only what it cannot catch (an
/// interrupted call, memory exhausted, a stack overflow in its own code).
fn uncaught(ctx: &Ctx<'_>, e: rquickjs::Error) -> JsError {
    if !matches!(e, rquickjs::Error::Exception) {
        return internal(e);
    }
    let caught = ctx.catch();
    let text = caught
        .as_exception()
        .map(|ex| ex.message().unwrap_or_else(|| "uncaught exception".into()))
        .or_else(|| caught.as_string().and_then(|s| s.to_string().ok()))
        .unwrap_or_else(|| "uncaught exception".into());
    if text.contains("out of memory") {
        JsError::OutOfMemory
    } else {
        JsError::Internal(bounded(text))
    }
}

fn parse_answer(text: &str) -> Result<Answer, JsError> {
    // What a function hands back is read as CouchDB reads couchjs's
    // answers (numbers included).
    let value: serde_json::Value = ejson::from_str(text)
        .map_err(|e| JsError::Internal(format!("the query server answered no JSON: {e}")))?;
    let serde_json::Value::Object(mut map) = value else {
        return Err(JsError::Internal(
            "the query server answered no object".into(),
        ));
    };
    if let Some(ok) = map.remove("ok") {
        return Ok(Answer::Ok(ok));
    }
    if let Some(serde_json::Value::Array(pair)) = map.remove("error") {
        let text = |i: usize| match pair.get(i) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => ejson::to_string(other),
            None => String::new(),
        };
        return Ok(Answer::Error(bounded(text(0)), bounded(text(1))));
    }
    let thrown = map.remove("thrown").unwrap_or(serde_json::Value::Null);
    let size = ejson::to_vec(&thrown).len();
    Ok(Answer::Thrown(if size > MAX_REASON {
        serde_json::Value::String(bounded(ejson::to_string(&thrown)))
    } else {
        thrown
    }))
}

/// The most of an error's text a function's failure carries to a client.
const MAX_REASON: usize = 16 << 10;

/// `text`, cut to [`MAX_REASON`] bytes (at a character's boundary).
fn bounded(mut text: String) -> String {
    if text.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}
