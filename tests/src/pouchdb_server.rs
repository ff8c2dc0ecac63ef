//! PouchDB Server (npm `pouchdb-server`, pinned in `bench/node`) as a real
//! peer of another make, for the replication tests and the benchmarks.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;

/// How long PouchDB Server may take to answer `GET /` after it was started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// `node pouchdb-server` in a temporary folder of its own, killed when
/// dropped. PouchDB Server cannot listen on port 0 (it takes 0 as unset and
/// uses 5984), so a free port is found first. Request logging is off (level
/// `warning`, nothing on stdout), as benchmarks of Recliner run it too.
#[derive(Debug)]
pub struct PouchDbServer {
    child: Child,
    /// `http://127.0.0.1:PORT`
    base: String,
    dir: TempDir,
}

impl PouchDbServer {
    /// The `pouchdb-server` script: `RECLINER_POUCHDB_SERVER`, else where
    /// `cargo xtask test` installs it (`bench/node/node_modules`).
    pub fn script() -> PathBuf {
        let script = match std::env::var_os("RECLINER_POUCHDB_SERVER") {
            Some(path) => PathBuf::from(path),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("bench/node/node_modules/pouchdb-server/bin/pouchdb-server"),
        };
        assert!(
            script.is_file(),
            "PouchDB Server is not installed ({} is missing): run the tests with \
             `cargo xtask test`, which installs it from bench/node",
            script.display()
        );
        script
    }

    /// Starts the installed PouchDB Server with `node` and waits until it answers.
    pub async fn start() -> PouchDbServer {
        let mut server = PouchDbServer::spawn("node", &PouchDbServer::script());
        server.wait_until_up().await;
        server
    }

    /// [`PouchDbServer::start`] with a server admin, so it checks logins.
    pub async fn start_with_admin(name: &str, password: &str) -> PouchDbServer {
        let mut server = PouchDbServer::spawn_with(
            "node",
            &PouchDbServer::script(),
            serde_json::json!({name: password}),
        );
        server.wait_until_up().await;
        server
    }

    /// Starts `node script` without waiting for it.
    pub fn spawn(node: &str, script: &Path) -> PouchDbServer {
        PouchDbServer::spawn_with(node, script, serde_json::json!({}))
    }

    /// [`PouchDbServer::spawn`] with `admins` (name → password) in its configuration.
    fn spawn_with(node: &str, script: &Path, admins: serde_json::Value) -> PouchDbServer {
        // The server runs in its own folder: resolve the script first.
        let script =
            std::fs::canonicalize(script).unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        let dir = TempDir::new("pouchdb-server");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        // Its log goes to a file in its folder, its output to another.
        let config = serde_json::json!({
            "log": {"file": dir.path().join("log.txt"), "level": "warning"},
            "admins": admins,
        });
        std::fs::write(dir.path().join("config.json"), config.to_string())
            .expect("write pouchdb-server's config.json");
        let output = File::create(dir.path().join("output.txt")).expect("create output.txt");
        // It spools uploaded attachments into the temporary folder and never
        // deletes them: keep them in its own folder, which goes with it.
        let spool = dir.path().join("tmp");
        std::fs::create_dir(&spool).expect("create pouchdb-server's tmp folder");
        let child = Command::new(node)
            .arg(&script)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(dir.path().join("config.json"))
            .arg("--no-stdout-logs")
            .current_dir(dir.path())
            .env("TMPDIR", &spool)
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("clone the output file"))
            .stderr(output)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{node} {}`: {e}", script.display()));
        PouchDbServer {
            child,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// Polls `GET /` until the server answers; panics with its output if it
    /// exits or stays silent.
    pub async fn wait_until_up(&mut self) {
        let http = crate::http_client();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(response) = http.get(self.url("/")).send().await
                && response.status().is_success()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "pouchdb-server exited during startup ({status}):\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "pouchdb-server did not answer within {STARTUP_TIMEOUT:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The URL of `path` on this server (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server printed, to explain a failure.
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("output.txt")).unwrap_or_default()
    }
}

impl Drop for PouchDbServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
