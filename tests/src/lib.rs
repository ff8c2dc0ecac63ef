//! Helpers for the end-to-end tests: start the real `recliner` binary on an
//! ephemeral loopback port with a data folder of its own, talk HTTP to it,
//! and stop it (killing it if the test forgets).
//!
//! The binary is built by `cargo xtask test` before the tests run; set
//! `RECLINER_BIN` to test another build.

pub mod bench;
pub mod content;
pub mod couchdb;
pub mod hostile;
pub mod pouchdb_server;
pub mod users;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An HTTP client for talking to test servers.
///
/// The workspace builds rustls with the `ring` provider, which reqwest needs
/// installed once per process before a client exists.
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("an HTTP client")
}

/// A builder for clients with their own settings, the provider installed.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

/// The server admin every test server gets (through `RECLINER_ADMIN`),
/// unless the test names its own.
pub const ADMIN: &str = "admin";
/// [`ADMIN`]'s password.
pub const ADMIN_PASSWORD: &str = "test-secret";

/// How long a server may take to print its address before a test gives up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the `recliner` binary is: `RECLINER_BIN`, else beside the test
/// executable's target folder (`target/<profile>/recliner`).
pub fn recliner_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("RECLINER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    // target/<profile>/deps/<test-binary>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary in target/*/deps");
    let bin = profile_dir.join(format!("recliner{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run the tests with `cargo xtask test` (it builds the binary first)",
        bin.display()
    );
    bin
}

/// A peer that accepts connections and never answers, on a loopback port:
/// a replication reading from it stays running (it never catches up, so it
/// never parks) and costs nothing. Its connections are held until the
/// test process ends.
pub fn silent_peer() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().flatten().collect();
        drop(held);
    });
    port
}

/// `url` without its `user:password@`.
pub fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// A fresh, empty data folder for one test, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "recliner-e2e-{label}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&path).expect("create a temporary folder");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `recliner` process.
#[derive(Debug)]
pub struct TestServer {
    child: Child,
    /// Base URL without a trailing slash, with the admin's credentials
    /// (`http://admin:test-secret@127.0.0.1:41234`): clients, PouchDB and
    /// replication peers given it log in as that admin.
    pub url: String,
    /// The same without credentials, for anonymous requests.
    pub plain_url: String,
    /// Everything the server logged so far (its stderr), also echoed to ours.
    logs: std::sync::Arc<std::sync::Mutex<String>>,
    /// What it printed on stdout.
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl TestServer {
    /// Starts `recliner --port 0 --data-dir <dir>` plus `extra_args` and waits
    /// until it prints the address it listens on.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> TestServer {
        TestServer::start_with_env(data_dir, extra_args, &[])
    }

    /// [`TestServer::start`] with extra environment variables (settings).
    pub fn start_with_env(
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        TestServer::spawn(data_dir, 0, extra_args, env)
    }

    /// [`TestServer::start`] on a given port instead of any free one, e.g.
    /// to restart a server at the address its peers already know.
    pub fn start_on_port(data_dir: &Path, port: u16, extra_args: &[&str]) -> TestServer {
        TestServer::spawn(data_dir, port, extra_args, &[])
    }

    /// [`TestServer::start_with_env`] without the test admin: the server
    /// decides (a generated admin on a first start, or what `env` and the
    /// data folder's file say).
    pub fn start_without_admin(
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        TestServer::spawn_as(data_dir, 0, extra_args, env, false)
    }

    fn spawn(data_dir: &Path, port: u16, extra_args: &[&str], env: &[(&str, &str)]) -> TestServer {
        TestServer::spawn_as(data_dir, port, extra_args, env, true)
    }

    fn spawn_as(
        data_dir: &Path,
        port: u16,
        extra_args: &[&str],
        env: &[(&str, &str)],
        test_admin: bool,
    ) -> TestServer {
        // Every test server requires logins, as `recliner` does by default:
        // its admin is the test admin, or the one the test names in
        // `RECLINER_ADMIN`, and `url` carries the admin's credentials.
        let given = env
            .iter()
            .find(|(k, _)| *k == "RECLINER_ADMIN")
            .map(|(_, v)| v.to_string());
        let own_admin = !test_admin
            || given.is_some()
            || extra_args
                .iter()
                .any(|a| a.starts_with("--admin") || *a == "--insecure-admin-party");
        let credentials = match given {
            Some(given) => Some(given),
            None if own_admin => None,
            None => Some(format!("{ADMIN}:{ADMIN_PASSWORD}")),
        };
        let mut command = Command::new(recliner_bin());
        // The outer environment's settings are not the test's.
        command
            .env_remove("RECLINER_ADMIN")
            .env_remove("RECLINER_INSECURE_ADMIN_PARTY");
        if !own_admin {
            command.env("RECLINER_ADMIN", format!("{ADMIN}:{ADMIN_PASSWORD}"));
        }
        if let Some(store) = postgres_store_for(data_dir, extra_args, env) {
            command.env("RECLINER_STORE", store);
        }
        let mut child = command
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--data-dir",
            ])
            .arg(data_dir)
            .args(extra_args)
            .env_remove("RECLINER_PORT")
            .env_remove("RECLINER_BIND")
            .env_remove("RECLINER_DATA_DIR")
            .env_remove("RECLINER_CONFIG")
            .env_remove("RECLINER_TEST_POSTGRES")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start recliner");
        let logs = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{line}");
                if let Ok(mut logs) = sink.lock() {
                    logs.push_str(&line);
                    logs.push('\n');
                }
            }
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let printed = output.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut printed) = printed.lock() {
                    printed.push_str(&line);
                    printed.push('\n');
                }
                if !sent
                    && let Some(url) = line.strip_prefix("Recliner listening on ")
                    && url.starts_with("http://")
                {
                    let _ = tx.send(url.trim().to_string());
                    sent = true;
                }
            }
        });
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let url = loop {
            if let Ok(url) = rx.recv_timeout(Duration::from_millis(100)) {
                break url;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("recliner exited during startup: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("recliner did not report its address within {STARTUP_TIMEOUT:?}");
            }
        };
        let url = match credentials {
            Some(credentials) => url.replacen("http://", &format!("http://{credentials}@"), 1),
            None => url,
        };
        let plain_url = without_credentials(&url);
        TestServer {
            child,
            url,
            plain_url,
            logs,
            output,
        }
    }

    /// What the server has printed on stdout so far.
    pub fn output(&self) -> String {
        self.output.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// What the server has logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The URL of `path` on this server (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.url, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the server to stop (SIGTERM) and waits for it to exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        #[cfg(unix)]
        {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
        }
        #[cfg(not(unix))]
        let _ = self.child.kill();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("recliner did not stop within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The variable that runs the end-to-end tests on PostgreSQL: a server URL
/// (`cargo xtask test` starts a throw-away cluster and runs them twice).
pub const POSTGRES_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Whether test servers keep their databases in PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(POSTGRES_VAR).is_ok_and(|url| !url.is_empty())
}

/// With [`POSTGRES_VAR`] set, where a test server keeps its databases: a
/// schema named after its data folder, so a server started again on the
/// same folder finds its databases, and two servers never share by accident.
/// `None` when the test chose a store itself, or runs on SQLite.
fn postgres_store_for(
    data_dir: &Path,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> Option<String> {
    let url = std::env::var(POSTGRES_VAR)
        .ok()
        .filter(|url| !url.is_empty())?;
    let chosen = extra_args.iter().any(|a| a.starts_with("--store"))
        || env.iter().any(|(k, _)| *k == "RECLINER_STORE");
    if chosen {
        return None;
    }
    let schema = postgres_schema_of(data_dir);
    store_postgres::create_schema(&url, &schema).expect("create the test server's schema");
    let joiner = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{joiner}options=-csearch_path%3D{schema}"))
}

/// With [`POSTGRES_VAR`] set, the `RECLINER_STORE` a `recliner` command run
/// on `data_dir` needs to see the databases its test server keeps.
pub fn store_env_for(data_dir: &Path) -> Option<(&'static str, String)> {
    postgres_store_for(data_dir, &[], &[]).map(|store| ("RECLINER_STORE", store))
}

/// The schema of a data folder: a hash of its path (schema names are short).
pub fn postgres_schema_of(data_dir: &Path) -> String {
    // FNV-1a: stable across runs and processes, unlike the std hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in data_dir.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("e2e_{hash:016x}")
}

/// A JSON-speaking client for one test server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    /// The body as JSON (panics with the body text when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Client {
    /// A client logged in as the server's test admin.
    pub fn new(server: &TestServer) -> Client {
        Client::at(&server.url)
    }

    /// A client without credentials.
    pub fn anonymous(server: &TestServer) -> Client {
        Client::at(&server.plain_url)
    }

    /// A client for any CouchDB-compatible server at `base` (without a
    /// trailing slash), such as another product used as a replication peer.
    pub fn at(base: &str) -> Client {
        Client {
            http: http_client(),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self.http.request(method, format!("{}{}", self.base, path));
        // As CouchDB's clients (nano, PouchDB) ask: without it, CouchDB and
        // Recliner answer some requests with multipart.
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
        {
            request = request.header("accept", "application/json");
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("the request is answered");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        Reply {
            status,
            headers,
            text,
        }
    }

    /// A raw request with a byte body and a content type.
    pub async fn send_bytes(
        &self,
        method: &str,
        path: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let response = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("the request is answered");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            text,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None, &[]).await
    }

    pub async fn put(&self, path: &str, body: serde_json::Value) -> Reply {
        self.send("PUT", path, Some(body), &[]).await
    }

    pub async fn post(&self, path: &str, body: serde_json::Value) -> Reply {
        self.send("POST", path, Some(body), &[]).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, None, &[]).await
    }

    /// The underlying HTTP client, for streaming tests.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// Checks two databases hold the same documents: for every id in either
/// changes feed, the same leaves (`open_revs=all`), each with the same
/// `_revisions` history, body and attachment digests and bytes, and the same
/// winner. Documents are compared as JSON values (key order aside), so the
/// two may be different servers. Panics with the first difference.
pub async fn compare_dbs(a: &Client, db_a: &str, b: &Client, db_b: &str) {
    compare_dbs_by(a, db_a, b, db_b, |_| {}).await
}

/// [`compare_dbs`] after `normalize` has been applied to every document
/// read on either side, for differences two servers may legitimately have.
pub async fn compare_dbs_by(
    a: &Client,
    db_a: &str,
    b: &Client,
    db_b: &str,
    normalize: impl Fn(&mut serde_json::Value),
) {
    async fn ids(c: &Client, db: &str) -> Vec<String> {
        let feed = c.get(&format!("/{db}/_changes")).await.json();
        let mut ids: Vec<String> = feed["results"]
            .as_array()
            .expect("a changes feed")
            .iter()
            .map(|r| r["id"].as_str().expect("an id").to_string())
            .collect();
        ids.sort();
        ids
    }
    async fn leaves(c: &Client, db: &str, id: &str) -> Vec<serde_json::Value> {
        let path = format!(
            "/{db}/{}?open_revs=all&revs=true&attachments=true",
            percent_encode(id)
        );
        // CouchDB answers multipart/mixed unless JSON is asked for.
        let mut leaves: Vec<serde_json::Value> = c
            .send("GET", &path, None, &[("accept", "application/json")])
            .await
            .json()
            .as_array()
            .expect("open_revs answers an array")
            .iter()
            .map(|r| r["ok"].clone())
            .collect();
        leaves.sort_by(|x, y| x["_rev"].as_str().cmp(&y["_rev"].as_str()));
        leaves
    }
    let (ids_a, ids_b) = (ids(a, db_a).await, ids(b, db_b).await);
    assert_eq!(ids_a, ids_b, "the same document ids in {db_a} and {db_b}");
    for id in &ids_a {
        let (mut la, mut lb) = (leaves(a, db_a, id).await, leaves(b, db_b, id).await);
        la.iter_mut().chain(lb.iter_mut()).for_each(&normalize);
        assert_eq!(la, lb, "document {id} differs between {db_a} and {db_b}");
        let winner = |c: &Client, db: &str| {
            let path = format!("/{db}/{}", percent_encode(id));
            let c = c.clone();
            async move { c.get(&path).await.json() }
        };
        let (mut wa, mut wb) = (winner(a, db_a).await, winner(b, db_b).await);
        normalize(&mut wa);
        normalize(&mut wb);
        assert_eq!(wa, wb, "winner of {id}");
    }
}

/// Percent-encodes a document id for a URL path (keeping `_design/`'s slash).
pub fn percent_encode(id: &str) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    match id.strip_prefix("_design/") {
        Some(rest) => format!("_design/{}", encode(rest)),
        None => encode(id),
    }
}

/// A TCP proxy on loopback that misbehaves on purpose: it delays data,
/// cuts connections after a few bytes and resets others, at random, so tests
/// can show replication survives a bad network. Stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Forwards to `target` (`127.0.0.1:PORT`); about one connection in
    /// `one_in` is cut or reset.
    pub async fn start(target: std::net::SocketAddr, one_in: u64) -> FaultProxy {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let task = tokio::spawn(async move {
            let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            while let Ok((client, _)) = listener.accept().await {
                let fate = next() % one_in.max(1);
                let delay_ms = next() % 20;
                let cut_after = 64 + (next() % 4096) as usize;
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    if fate == 0 {
                        // Reset: close at once without a word.
                        return;
                    }
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let upstream = tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n) = cr.read(&mut buf).await {
                            if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut sent = 0usize;
                    loop {
                        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                        let Ok(n) = sr.read(&mut buf).await else {
                            break;
                        };
                        if n == 0 {
                            break;
                        }
                        if fate == 1 && sent + n > cut_after {
                            // Cut mid-answer.
                            let _ = cw.write_all(&buf[..cut_after.saturating_sub(sent)]).await;
                            break;
                        }
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        sent += n;
                    }
                    upstream.abort();
                });
            }
        });
        FaultProxy { url, task }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls `check` every 50 ms until it holds or `secs` seconds pass; whether it held.
pub async fn eventually(secs: u64, check: impl AsyncFnMut() -> bool) -> bool {
    eventually_within(Duration::from_secs(secs), check).await
}

/// [`eventually`] with any time limit.
pub async fn eventually_within(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check().await
}

/// The number of an update sequence: Recliner's (and CouchDB's) are
/// opaque strings `N-...`, PouchDB Server's are numbers. Panics on anything
/// else, which is no sequence.
pub fn seq_num(seq: &serde_json::Value) -> u64 {
    match seq {
        serde_json::Value::Number(n) => n.as_u64().expect("a sequence number"),
        serde_json::Value::String(s) => {
            let (n, token) = s.split_once('-').expect("a sequence N-token");
            assert!(!token.is_empty(), "sequence {s:?} has its token");
            n.parse().expect("a sequence's number")
        }
        other => panic!("{other} is no sequence"),
    }
}

/// A small seeded generator (splitmix64), the same on every machine, so a
/// generated case that fails can be named by its seed and replayed.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (which is not 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// `n` random decimal digits.
    pub fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }
}
