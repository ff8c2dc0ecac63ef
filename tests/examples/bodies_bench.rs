//! Peak memory while many large request bodies arrive at once: the bound
//! the hardening work promised (20 concurrent 200 MiB bodies leave the
//! server's peak under 300 MiB), measured on Recliner and, in the same run,
//! on PouchDB Server.
//!
//! `cargo xtask bench bodies` builds it (release), installs PouchDB Server
//! from `bench/node` and runs it:
//!
//! ```text
//! bodies_bench [--pouchdb-server PATH/bin/pouchdb-server] [--node node]
//!              [--clients 20] [--mib 200]
//! ```
//!
//! Three workloads, each with `--clients` bodies of about `--mib` MiB sent
//! at once, on a fresh server each time:
//! - `PUT /db/doc` of one document with a large inline attachment;
//! - `POST /db/_bulk_docs` of 32 documents, each with an inline attachment;
//! - `PUT /db/doc` of a document over `max_document_size` (a large string
//!   field), which must be refused with 413 before it is parsed.
//!
//! Bodies are generated as they are sent (the client holds a few MiB per
//! body). Each stored document is then read back and its attachment length
//! checked. The server's peak is VmHWM, reset after start-up.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::StreamExt;
use recliner_tests::bench::{BenchServer, parse_options, proc_status_mib, reset_peak};
use serde_json::Value;

/// Raw bytes encoded per piece of a streamed body (a multiple of 3, so
/// pieces concatenate into one valid base64 text).
const PIECE: usize = 3 << 20;
/// Documents per `_bulk_docs` body.
const BULK_DOCS: usize = 32;
/// No request may take longer: keeps the run bounded if a server stalls.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(900);

struct Options {
    pouchdb_server: Option<PathBuf>,
    node: String,
    clients: usize,
    mib: usize,
}

fn usage() -> ! {
    eprintln!("usage: bodies_bench [--pouchdb-server PATH] [--node PATH] [--clients N] [--mib N]");
    std::process::exit(2)
}

fn options() -> Options {
    let (mut clients, mut mib) = (20, 200);
    let common = parse_options(usage, |flag, n| match flag {
        "--clients" => {
            clients = n;
            true
        }
        "--mib" => {
            mib = n;
            true
        }
        _ => false,
    });
    if clients == 0 || mib == 0 {
        usage();
    }
    Options {
        pouchdb_server: common.pouchdb_server,
        node: common.node,
        clients,
        mib,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    InlineAttachment,
    BulkDocs,
    Oversized,
}

impl Workload {
    fn label(self) -> &'static str {
        match self {
            Workload::InlineAttachment => "`PUT` one document with an inline attachment",
            Workload::BulkDocs => "`_bulk_docs` of 32 documents with inline attachments",
            Workload::Oversized => "`PUT` of a document over `max_document_size` (413)",
        }
    }
}

/// A JSON text streamed in pieces: `prefix`, then `raw` bytes of a pattern
/// as base64 (or as a plain string when `plain`), then `suffix`.
fn streamed_text(
    prefix: String,
    raw: usize,
    seed: usize,
    plain: bool,
    suffix: String,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
    let pieces = raw.div_ceil(PIECE);
    let middle = (0..pieces).map(move |p| {
        let len = PIECE.min(raw - p * PIECE);
        if plain {
            return Ok(vec![b'x'; len]);
        }
        let bytes: Vec<u8> = (0..len)
            .map(|i| ((p * PIECE + i) * 31 + seed * 7) as u8)
            .collect();
        Ok(base64::engine::general_purpose::STANDARD
            .encode(&bytes)
            .into_bytes())
    });
    futures_util::stream::iter(
        std::iter::once(Ok(prefix.into_bytes()))
            .chain(middle)
            .chain(std::iter::once(Ok(suffix.into_bytes()))),
    )
}

/// One client's request: method, path, body stream, and what it stores
/// (document ids and the raw length of each one's attachment).
type Request = (reqwest::Method, String, reqwest::Body, Vec<(String, usize)>);

fn request(workload: Workload, client: usize, mib: usize) -> Request {
    let total_raw = (mib << 20) / 4 * 3;
    match workload {
        Workload::InlineAttachment => {
            let id = format!("inline{client}");
            let body = streamed_text(
                format!(
                    r#"{{"n":{client},"_attachments":{{"big.bin":{{"content_type":"application/octet-stream","data":""#
                ),
                total_raw,
                client,
                false,
                "\"}}}".into(),
            );
            (
                reqwest::Method::PUT,
                format!("/db/{id}"),
                reqwest::Body::wrap_stream(body),
                vec![(id, total_raw)],
            )
        }
        Workload::BulkDocs => {
            let each = total_raw / BULK_DOCS / 3 * 3;
            let ids: Vec<(String, usize)> = (0..BULK_DOCS)
                .map(|d| (format!("bulk{client}-{d}"), each))
                .collect();
            let streams = ids.clone().into_iter().enumerate().map(move |(d, (id, len))| {
                let open = if d == 0 { r#"{"docs":["# } else { "," };
                streamed_text(
                    format!(r#"{open}{{"_id":"{id}","_attachments":{{"a.bin":{{"content_type":"application/octet-stream","data":""#),
                    len,
                    client * BULK_DOCS + d,
                    false,
                    "\"}}}".into(),
                )
            });
            let body = futures_util::stream::iter(streams)
                .flatten()
                .chain(futures_util::stream::iter([Ok(b"]}".to_vec())]));
            (
                reqwest::Method::POST,
                "/db/_bulk_docs".into(),
                reqwest::Body::wrap_stream(body),
                ids,
            )
        }
        Workload::Oversized => {
            let body = streamed_text(
                format!(r#"{{"n":{client},"pad":""#),
                mib << 20,
                client,
                true,
                "\"}".into(),
            );
            (
                reqwest::Method::PUT,
                format!("/db/big{client}"),
                reqwest::Body::wrap_stream(body),
                Vec::new(),
            )
        }
    }
}

/// What one workload did on one server.
struct Outcome {
    seconds: f64,
    idle_mib: Option<f64>,
    peak_mib: Option<f64>,
    /// Why it did not complete, when it did not.
    failure: Option<String>,
}

async fn run(
    server: &mut BenchServer,
    http: &reqwest::Client,
    workload: Workload,
    options: &Options,
) -> Outcome {
    server.wait_until_up(http).await;
    let created = http.put(server.url("/db")).send().await;
    if let Err(e) = created {
        panic!("PUT /db: {e}");
    }
    let pid = server.pid();
    reset_peak(pid);
    let idle_mib = proc_status_mib(pid, "VmRSS:");
    let started = Instant::now();
    let sends = (0..options.clients).map(|client| {
        let (method, path, body, stored) = request(workload, client, options.mib);
        let url = server.url(&path);
        async move {
            let response = http
                .request(method, url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| format!("{path}: {e}"))?;
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let wanted = if workload == Workload::Oversized {
                413
            } else {
                201
            };
            if status != wanted {
                return Err(format!("{path}: {status} {:.300}", text.trim()));
            }
            Ok::<_, String>(stored)
        }
    });
    let results = futures_util::future::join_all(sends).await;
    let seconds = started.elapsed().as_secs_f64();
    let peak_mib = proc_status_mib(pid, "VmHWM:");
    let mut failure = results.iter().find_map(|r| r.clone().err());
    if failure.is_none() {
        failure = check_stored(server, http, results.into_iter().flatten().flatten()).await;
    }
    Outcome {
        seconds,
        idle_mib,
        peak_mib,
        failure,
    }
}

/// Every stored document has its attachment at its full length.
async fn check_stored(
    server: &BenchServer,
    http: &reqwest::Client,
    stored: impl Iterator<Item = (String, usize)>,
) -> Option<String> {
    for (id, length) in stored {
        let doc: Value = match http.get(server.url(&format!("/db/{id}"))).send().await {
            Ok(response) => response.json().await.unwrap_or(Value::Null),
            Err(e) => return Some(format!("GET /db/{id}: {e}")),
        };
        let stubs = doc["_attachments"].as_object();
        let found = stubs.and_then(|s| s.values().next()?["length"].as_u64());
        if found != Some(length as u64) {
            return Some(format!("{id}: attachment length {found:?}, sent {length}"));
        }
    }
    None
}

fn mib(value: Option<f64>) -> String {
    value.map_or("n/a".into(), |v| format!("{v:.0} MiB"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let options = options();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("an HTTP client");
    println!(
        "{} concurrent bodies of about {} MiB each ({} MiB in all)\n",
        options.clients,
        options.mib,
        options.clients * options.mib
    );
    println!("| workload | server | time | RSS before | peak RSS | completed |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for workload in [
        Workload::InlineAttachment,
        Workload::BulkDocs,
        Workload::Oversized,
    ] {
        let mut servers = vec![("Recliner", BenchServer::recliner("bodies-bench"))];
        if let Some(script) = &options.pouchdb_server {
            servers.push((
                "PouchDB Server",
                BenchServer::pouchdb(&options.node, script),
            ));
        }
        for (name, mut server) in servers {
            let outcome = run(&mut server, &http, workload, &options).await;
            let completed = match &outcome.failure {
                None => "yes".to_string(),
                Some(why) => format!("no: {}", why.replace('|', "/")),
            };
            println!(
                "| {} | {name} | {:.1} s | {} | {} | {completed} |",
                workload.label(),
                outcome.seconds,
                mib(outcome.idle_mib),
                mib(outcome.peak_mib),
            );
            if outcome.failure.is_some() {
                eprintln!("{}", server.output());
            }
            server.stop();
        }
    }
}
