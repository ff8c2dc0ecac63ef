//! Target `http`: the real `recliner` binary, end to end. Each input is a
//! short sequence of requests (random methods on the document, bulk, feed,
//! attachment and replication paths; real query parameters with hostile
//! values; bodies shaped like real ones with hostile mutations; multipart
//! uploads with random boundaries and declared lengths), run against a
//! fresh database `db` on a server that lives across inputs and is
//! restarted if it dies.
//!
//! Invariants, per request: an answer comes (no dropped connection, no
//! timeout), it is valid JSON (except attachment bytes, multipart and event
//! streams), errors carry `error` and `reason`, and no 5xx other than
//! `501 not_implemented` and a `/_replicate` that failed with a named
//! error. After each input: the process is alive and logged no panic; every
//! database opens; `_all_docs?include_docs=true`,
//! `_changes?include_docs=true&style=all_docs` and every listed document
//! (plain and `open_revs=all`), all with `attachments=true`, are valid JSON;
//! every acknowledged write (2xx with `id` and `rev`) is still readable by
//! that revision (local documents: still there unless maybe deleted).
//!
//! Placeholders filled in at run time: `@REV@` is the last acknowledged
//! revision (so edits can hit a real parent), `@JREV@` the same escaped
//! for inside a JSON string, `@BASE@` the server's URL.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use recliner_tests::{TempDir, TestServer, percent_encode};
use serde_json::Value;

use crate::driver::Violations;
use crate::hostile::{self, object};

mod checks;
mod generate;
pub(crate) use checks::*;
pub(crate) use generate::*;

/// How long one request may take before it counts as a hang.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a server that dropped a connection gets to finish dying (an
/// abort prints a backtrace first) before it is taken to be alive.
const DYING_TIME: Duration = Duration::from_millis(1500);

const METHODS: &[&str] = &[
    "GET", "PUT", "POST", "DELETE", "HEAD", "COPY", "OPTIONS", "PATCH",
];

/// Document ids: a few fixed ones so requests meet the same documents.
const IDS: &[&str] = &["doc", "doc", "a", "_design/d", "a/b", "é\"\\", "x y"];

const ATTACHMENTS: &[&str] = &["att", "att", "a/b.txt", "x y", "_bad"];

/// The paths the fuzzer aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Template {
    Db,
    Doc,
    Local,
    BulkDocs,
    AllDocs,
    Changes,
    RevsDiff,
    BulkGet,
    Attachment,
    Replicate,
}

impl Template {
    fn label(self) -> &'static str {
        match self {
            Template::Db => "/{db}",
            Template::Doc => "/db/{doc}",
            Template::Local => "/db/_local/{x}",
            Template::BulkDocs => "/db/_bulk_docs",
            Template::AllDocs => "/db/_all_docs",
            Template::Changes => "/db/_changes",
            Template::RevsDiff => "/db/_revs_diff",
            Template::BulkGet => "/db/_bulk_get",
            Template::Attachment => "/db/{doc}/{att}",
            Template::Replicate => "/_replicate",
        }
    }

    /// Whether a 2xx answer to a writing method acknowledges document writes.
    fn writes(self) -> bool {
        matches!(
            self,
            Template::Db
                | Template::Doc
                | Template::Local
                | Template::BulkDocs
                | Template::Attachment
        )
    }
}

/// One request of an input.
#[derive(Clone)]
pub struct Req {
    template: Template,
    method: &'static str,
    /// Path and query, percent-encoded, possibly with placeholders.
    path: String,
    headers: Vec<(&'static str, String)>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

/// The requests of one input, run in order on a fresh database `db`.
#[derive(Clone)]
pub struct Case(Vec<Req>);

/// At most `limit` bytes of `bytes`, as text.
pub(crate) fn snippet(bytes: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]).into_owned();
    if bytes.len() > limit {
        format!("{text}... ({} bytes in all)", bytes.len())
    } else {
        text
    }
}

impl fmt::Debug for Req {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}", self.method, self.path)?;
        for (name, value) in &self.headers {
            writeln!(f, "    {name}: {value:?}")?;
        }
        if let Some(ct) = &self.content_type {
            writeln!(f, "    content-type: {ct:?}")?;
        }
        if let Some(body) = &self.body {
            writeln!(f, "    body: {:?}", snippet(body, 4000))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "(setup: DELETE every database, PUT /db; @REV@ = the last acknowledged rev)"
        )?;
        for (i, req) in self.0.iter().enumerate() {
            write!(f, "{}. {req:?}", i + 1)?;
        }
        Ok(())
    }
}

// --- running ---

/// The server the inputs run against, restarted when it dies.
struct Server {
    server: TestServer,
    /// Its data folder, removed when the server is replaced.
    _data: TempDir,
    /// How much of its log was already scanned for panics.
    log_seen: usize,
}

/// A server answer.
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Lowercased.
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
}

/// Why an audit read failed: `class` names the kind of failure.
pub(crate) struct Failed {
    pub(crate) class: String,
    pub(crate) detail: String,
}

/// What became of a request sent with [`Harness::exchange`].
pub(crate) enum Sent {
    Answered(Answer),
    /// The server died on it (the caller of [`Harness::run_input`] reports that).
    Died,
    /// No answer, and the server lives on: already recorded as a violation.
    Lost,
}

/// An acknowledged write.
#[derive(Debug)]
struct Acked {
    rev: String,
    /// A later write of the id may have deleted it (then only its revision is checked).
    maybe_deleted: bool,
}

/// Runs inputs against a live server. The `multipart` and `query` targets
/// run theirs through it too ([`Harness::run_input`]).
pub struct Harness {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    server: RefCell<Option<Server>>,
    /// Whether a request of the current input went unanswered.
    troubled: std::cell::Cell<bool>,
    /// Names the server's data folder.
    label: &'static str,
}

impl Harness {
    /// Starts the server at once, so that a missing binary fails here, plainly.
    pub fn new() -> Harness {
        Harness::named("fuzz-http")
    }

    /// A harness whose server's data folder is named after `label`.
    pub(crate) fn named(label: &'static str) -> Harness {
        // Installs the TLS provider reqwest needs before any client exists.
        let _ = recliner_tests::http_client();
        let harness = Harness {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime"),
            http: recliner_tests::http_client_builder()
                .timeout(REQUEST_TIMEOUT)
                .build()
                .expect("an HTTP client"),
            server: RefCell::new(None),
            troubled: std::cell::Cell::new(false),
            label,
        };
        harness.base();
        harness
    }

    /// The base URL of a live server, starting a new one when needed.
    fn base(&self) -> String {
        let mut slot = self.server.borrow_mut();
        if let Some(server) = slot.as_ref()
            && alive(server.server.pid())
        {
            return server.server.url.clone();
        }
        let data = TempDir::new(self.label);
        // Backtraces name the frame of ours behind a panic in the standard library.
        let server = TestServer::start_with_env(
            data.path(),
            &["--log-level", "warn"],
            &[("RUST_BACKTRACE", "1")],
        );
        let url = server.url.clone();
        *slot = Some(Server {
            server,
            _data: data,
            log_seen: 0,
        });
        url
    }

    /// What the server logged since the last call (see [`LogNews`]).
    fn new_log(&self) -> LogNews {
        let mut slot = self.server.borrow_mut();
        let Some(server) = slot.as_mut() else {
            return LogNews::default();
        };
        let logs = server.server.logs();
        let fresh = logs.get(server.log_seen..).unwrap_or("").to_string();
        server.log_seen = logs.len();
        LogNews::read(&fresh)
    }

    /// Whether the server is dead or dies within `limit`; marks the input
    /// as troubled either way (something went wrong on the wire).
    async fn dies_within(&self, limit: Duration) -> bool {
        self.troubled.set(true);
        let deadline = std::time::Instant::now() + limit;
        while self.server_alive() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    pub(crate) fn server_alive(&self) -> bool {
        self.server
            .borrow()
            .as_ref()
            .is_some_and(|s| alive(s.server.pid()))
    }

    pub fn check(&self, case: &Case, v: &mut Violations) {
        self.run_input(v, async |base, v| self.run(base, case, v).await);
    }

    /// Runs one input, `input(base URL, violations)`, against a live
    /// server (started anew if the last one died), then charges to it a
    /// death of the server or a panic it logged.
    pub(crate) fn run_input(
        &self,
        v: &mut Violations,
        input: impl AsyncFnOnce(&str, &mut Violations),
    ) {
        let base = self.base();
        let _ = self.new_log(); // whatever an earlier input left behind
        self.troubled.set(false);
        self.rt.block_on(input(&base, v));
        // A process that aborts first prints its backtrace, which takes a
        // while: after a dropped connection, give it time to finish dying so
        // the death is charged to this input and not to the next one.
        let died = if self.troubled.get() {
            self.rt.block_on(self.dies_within(DYING_TIME))
        } else {
            !self.server_alive()
        };
        if died {
            // Let the log reader catch the dying words.
            std::thread::sleep(Duration::from_millis(300));
        }
        let news = self.new_log();
        if died {
            let (signature, evidence) = news.fatal.unwrap_or_default();
            v.add(
                format!("server process died{signature}"),
                format!("{evidence}\nlog tail:\n{}", news.tail),
            );
        }
        for (location, detail) in news.panics {
            v.add(format!("server panicked at {location}"), detail);
        }
    }

    async fn run(&self, base: &str, case: &Case, v: &mut Violations) {
        if let Err(e) = self.reset(base).await {
            v.add("setup failed", e);
            return;
        }
        let mut ledger: BTreeMap<(String, String), Acked> = BTreeMap::new();
        let mut last_rev: Option<String> = None;
        for req in &case.0 {
            let rev = last_rev.clone().unwrap_or_else(|| "1-x".into());
            let Some((sent, result)) = self.send(base, req, &rev).await else {
                continue; // the client could not even build it (bad header, URL)
            };
            let answer = match result {
                Ok(answer) => answer,
                Err(e) => {
                    if self.dies_within(DYING_TIME).await {
                        return; // reported by the caller, with the log
                    }
                    let kind = if e.contains("timed out") {
                        "no answer in time"
                    } else {
                        "connection closed without an answer"
                    };
                    v.add(
                        format!("{kind}: {} {}", req.method, req.template.label()),
                        format!("{sent}\n{e}"),
                    );
                    continue;
                }
            };
            if std::env::var_os("RECLINER_FUZZ_TRACE").is_some() {
                eprintln!("{sent}-> {} {}", answer.status, snippet(&answer.body, 300));
            }
            check_answer(req, &sent, &answer, v);
            if (200..300).contains(&answer.status) {
                learn(req, &answer, &mut ledger, &mut last_rev);
            }
        }
        if self.server_alive() {
            self.audit(base, &ledger, v).await;
        }
    }

    /// The client requests go through (20 s timeout unless the request sets one).
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends `request`; an unanswered one is a violation (`shown` is the
    /// request as reports show it, `what` names it in the kind) unless the
    /// server died on it.
    pub(crate) async fn exchange(
        &self,
        request: reqwest::Request,
        shown: &str,
        what: &str,
        v: &mut Violations,
    ) -> Sent {
        let result = async {
            let response = self.http.execute(request).await.map_err(error_chain)?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let body = response.bytes().await.map_err(error_chain)?.to_vec();
            Ok::<_, String>(Answer {
                status,
                content_type,
                body,
            })
        }
        .await;
        match result {
            Ok(answer) => Sent::Answered(answer),
            Err(e) => {
                if self.dies_within(DYING_TIME).await {
                    return Sent::Died;
                }
                let kind = if e.contains("timed out") {
                    "no answer in time"
                } else {
                    "connection closed without an answer"
                };
                v.add(format!("{kind}: {what}"), format!("{shown}\n{e}"));
                Sent::Lost
            }
        }
    }

    /// Deletes every user database and creates an empty `db`.
    pub(crate) async fn reset(&self, base: &str) -> Result<(), String> {
        let dbs = self
            .get_json(base, "/_all_dbs")
            .await
            .map_err(|e| e.detail)?;
        for db in dbs
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !db.starts_with('_') {
                let url = format!("{base}/{}", enc(db));
                let _ = self.http.delete(url).send().await;
            }
        }
        let created = self
            .http
            .put(format!("{base}/db"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if created.status().as_u16() != 201 {
            return Err(format!("PUT /db answered {}", created.status()));
        }
        Ok(())
    }

    /// `GET path` answered 200 with valid JSON, or how it failed.
    pub(crate) async fn get_json(&self, base: &str, path: &str) -> Result<Value, Failed> {
        let request = self
            .http
            .get(format!("{base}{path}"))
            .header("accept", "application/json");
        self.audit_json(request, format!("GET {path}")).await
    }

    /// One revision of a document through `_bulk_get`, for the ids no path
    /// can name (see [`dot_segment`]).
    async fn bulk_get_rev(
        &self,
        base: &str,
        d: &str,
        id: &str,
        rev: &str,
    ) -> Result<Value, Failed> {
        let body = serde_json::json!({"docs": [{"id": id, "rev": rev}]}).to_string();
        let path = format!("/{d}/_bulk_get");
        let shown = format!("POST {path} {body}");
        let request = self
            .http
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(body);
        let value = self.audit_json(request, shown.clone()).await?;
        if value.is_null() {
            return Ok(value);
        }
        match value["results"][0]["docs"][0].get("ok") {
            Some(doc) => Ok(doc.clone()),
            None => Err(Failed {
                class: "answers an error".into(),
                detail: format!("{shown}: {value}"),
            }),
        }
    }

    /// Sends an audit request: 200 with valid JSON, or how it failed.
    /// JSON deeper than serde_json parses is valid but has nothing to look
    /// into (`Null`). `shown` names the request in reports.
    async fn audit_json(
        &self,
        request: reqwest::RequestBuilder,
        shown: String,
    ) -> Result<Value, Failed> {
        let failed = |class: String, detail: String| Failed {
            class,
            detail: format!("{shown}: {detail}"),
        };
        let answer = request.send().await.map_err(|e| {
            self.troubled.set(true);
            failed("no answer".into(), error_chain(e))
        })?;
        let status = answer.status().as_u16();
        let body = answer.bytes().await.map_err(|e| {
            self.troubled.set(true);
            failed("no answer".into(), error_chain(e))
        })?;
        if status != 200 {
            return Err(failed(format!("answers {status}"), snippet(&body, 300)));
        }
        match serde_json::from_slice(&body) {
            Ok(value) => Ok(value),
            Err(_) if is_json(&body) => Ok(Value::Null),
            Err(e) => Err(failed(
                "invalid JSON".into(),
                format!("({e}): {}", snippet(&body, 600)),
            )),
        }
    }

    /// Sends `req` with its placeholders filled in; `None` when the request
    /// cannot be built. Returns the request as sent, for reports.
    async fn send(
        &self,
        base: &str,
        req: &Req,
        rev: &str,
    ) -> Option<(String, Result<Answer, String>)> {
        let json_rev = Value::from(rev).to_string();
        let json_rev = &json_rev[1..json_rev.len() - 1];
        let path = req
            .path
            .replace("@JREV@", &enc(json_rev))
            .replace("@REV@", &enc(rev));
        let method = reqwest::Method::from_bytes(req.method.as_bytes()).ok()?;
        let mut builder = self.http.request(method, format!("{base}{path}"));
        let mut shown = format!("{} {path}\n", req.method);
        for (name, value) in &req.headers {
            let value = value.replace("@REV@", rev);
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                continue;
            }
            shown.push_str(&format!("    {name}: {value}\n"));
            builder = builder.header(*name, value);
        }
        if let Some(ct) = &req.content_type {
            reqwest::header::HeaderValue::from_str(ct).ok()?;
            shown.push_str(&format!("    content-type: {ct}\n"));
            builder = builder.header("content-type", ct);
        }
        if let Some(body) = &req.body {
            let body = replace_bytes(
                &replace_bytes(body, b"@REV@", json_rev.as_bytes()),
                b"@BASE@",
                base.as_bytes(),
            );
            shown.push_str(&format!("    body: {}\n", snippet(&body, 2000)));
            builder = builder.body(body);
        }
        let request = builder.build().ok()?;
        let result = async {
            let response = self.http.execute(request).await.map_err(error_chain)?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let body = response.bytes().await.map_err(error_chain)?.to_vec();
            Ok(Answer {
                status,
                content_type,
                body,
            })
        }
        .await;
        Some((shown, result))
    }

    /// The invariants after an input (see the module comment).
    async fn audit(
        &self,
        base: &str,
        ledger: &BTreeMap<(String, String), Acked>,
        v: &mut Violations,
    ) {
        let dbs: Vec<String> = match self.get_json(base, "/_all_dbs").await {
            Ok(Value::Array(dbs)) => dbs
                .iter()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect(),
            Ok(other) => {
                v.add("_all_dbs is not a list", other.to_string());
                return;
            }
            Err(e) => {
                v.add(format!("_all_dbs fails: {}", e.class), e.detail);
                return;
            }
        };
        for db in &dbs {
            let d = enc(db);
            if let Err(e) = self.get_json(base, &format!("/{d}")).await {
                v.add(format!("a database does not open: {}", e.class), e.detail);
                continue;
            }
            let all_docs = self
                .get_json(
                    base,
                    &format!("/{d}/_all_docs?include_docs=true&conflicts=true&attachments=true"),
                )
                .await;
            let ids: Vec<String> = match &all_docs {
                Ok(page) => page["rows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["id"].as_str().map(str::to_string))
                    .take(40)
                    .collect(),
                Err(e) => {
                    v.add(
                        format!("_all_docs?include_docs=true fails: {}", e.class),
                        e.detail.clone(),
                    );
                    Vec::new()
                }
            };
            if let Err(e) = self
                .get_json(
                    base,
                    &format!("/{d}/_changes?include_docs=true&style=all_docs&conflicts=true&attachments=true"),
                )
                .await
            {
                v.add(
                    format!(
                        "_changes?include_docs=true&style=all_docs fails: {}",
                        e.class
                    ),
                    e.detail,
                );
            }
            for id in ids.iter().filter(|id| !dot_segment(id)) {
                let p = doc_path(id);
                if let Err(e) = self
                    .get_json(
                        base,
                        &format!("/{d}/{p}?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&attachments=true"),
                    )
                    .await
                {
                    v.add(format!("GET of a document _all_docs lists fails: {}", e.class), e.detail);
                }
                if let Err(e) = self
                    .get_json(
                        base,
                        &format!("/{d}/{p}?open_revs=all&revs=true&latest=true&attachments=true"),
                    )
                    .await
                {
                    v.add(
                        format!(
                            "open_revs=all of a document _all_docs lists fails: {}",
                            e.class
                        ),
                        e.detail,
                    );
                }
            }
        }
        for ((db, id), acked) in ledger {
            if !dbs.contains(db) {
                continue;
            }
            let (d, p) = (enc(db), doc_path(id));
            if id.starts_with("_local/") {
                if !acked.maybe_deleted
                    && let Err(e) = self.get_json(base, &format!("/{d}/{p}")).await
                {
                    v.add(
                        format!("an acknowledged local document is gone: {}", e.class),
                        e.detail,
                    );
                }
                continue;
            }
            let read = if dot_segment(id) {
                self.bulk_get_rev(base, &d, id, &acked.rev).await
            } else {
                self.get_json(base, &format!("/{d}/{p}?rev={}", enc(&acked.rev)))
                    .await
            };
            match read {
                Ok(doc) if doc.is_null() || doc["_rev"].as_str() == Some(acked.rev.as_str()) => {}
                Ok(doc) => v.add(
                    "an acknowledged revision reads back as another",
                    format!("{db}/{id} rev {:?}: {doc}", acked.rev),
                ),
                Err(e) => v.add(
                    format!("an acknowledged revision is unreadable: {}", e.class),
                    format!("{db}/{id} rev {:?}: {}", acked.rev, e.detail),
                ),
            }
        }
    }
}

/// Whether `id` is `.` or `..`: a dot segment that every URL parser resolves
/// (`%2E` too, by the URL standard), so no client can name it in a path.
fn dot_segment(id: &str) -> bool {
    id == "." || id == ".."
}

/// Whether process `pid` is running (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        // Without /proc, trust the process until a request says otherwise.
        Err(_) => !cfg!(target_os = "linux"),
    }
}

/// What the server logged during one input.
#[derive(Default)]
struct LogNews {
    /// Each panic: its location (plus the first frame in our crates when it
    /// is inside the standard library) and its lines.
    panics: Vec<(String, String)>,
    /// What killed the process, if it died: `(": what", its lines)`, with
    /// numbers replaced by `N` so that one defect is one kind.
    fatal: Option<(String, String)>,
    tail: String,
}

impl LogNews {
    fn read(fresh: &str) -> LogNews {
        let lines: Vec<&str> = fresh.lines().collect();
        let mut panics = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some(at) = line.find("panicked at ") {
                let location = line[at + "panicked at ".len()..].trim_end_matches(':');
                let message = lines.get(i + 1).copied().unwrap_or("");
                panics.push((
                    with_our_frame(location, &lines[i + 1..]),
                    format!("{line}\n{message}"),
                ));
            }
        }
        let fatal = [
            "memory allocation of",
            "overflowed its stack",
            "fatal runtime error",
            "panicked at ",
        ]
        .iter()
        .find_map(|needle| {
            let i = lines.iter().position(|l| l.contains(needle))?;
            let text = &lines[i][lines[i].find(needle)?..];
            let words: String = text
                .chars()
                .map(|c| if c.is_ascii_digit() { 'N' } else { c })
                .collect();
            let evidence = lines[i..lines.len().min(i + 3)].join("\n");
            Some((
                format!(": {}", with_our_frame(&words, &lines[i + 1..])),
                evidence,
            ))
        });
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        LogNews {
            panics,
            fatal,
            tail,
        }
    }
}

/// `what`, shortened past the toolchain's path, plus the first backtrace
/// frame in our crates when `what` does not name one (a panic in the
/// standard library, an allocation failure).
fn with_our_frame(what: &str, after: &[&str]) -> String {
    if what.contains("crates/") {
        return what.to_string();
    }
    let short = what.find("library/").map_or(what, |i| &what[i..]);
    let frame = after.iter().take(150).find_map(|l| {
        let l = l.trim();
        l.starts_with("at ")
            .then(|| l.find("crates/").map(|i| &l[i..]))
            .flatten()
    });
    match frame {
        Some(frame) => format!("{short} (from {frame})"),
        None => short.to_string(),
    }
}

fn error_chain(e: reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

pub(crate) fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The harness's own validator agrees with serde_json where serde_json
    /// can tell (shallow texts), on valid JSON and on damaged JSON.
    #[test]
    fn json_validator_agrees_with_serde_json(
        value in hostile::json(4),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut text = value.to_string().into_bytes();
        prop_assert!(is_json(&text), "{}", value);
        for (at, byte) in edits {
            if text.is_empty() {
                break;
            }
            let i = at.index(text.len());
            if byte % 3 == 0 {
                text.remove(i);
            } else {
                text[i] = byte;
            }
        }
        let serde = serde_json::from_slice::<Value>(&text);
        // serde_json also refuses numbers out of f64's range: valid JSON.
        prop_assume!(!serde.as_ref().is_err_and(|e| e.to_string().contains("out of range")));
        prop_assert_eq!(is_json(&text), serde.is_ok(), "{:?}", String::from_utf8_lossy(&text));
    }
}
