//! The web console (`/_utils`) in a real browser: starts a server and runs
//! `tests/interop/console_browser.js`, which drives Chromium through
//! `playwright-core` (log in, databases, documents and their JSON editor,
//! a conflict resolved by picking a winner, attachments, replications
//! started from the form with the live dashboard and its throughput chart)
//! and fails on any console error of the page. Screenshots of every page go
//! to `<workspace>/target/console-screenshots`.
//!
//! Needs Node.js, the npm packages of `tests/interop` (`cargo xtask test`
//! installs them) and Chromium (`/usr/bin/chromium`, or `CHROMIUM`). Without
//! Chromium the test is skipped, unless `RECLINER_REQUIRE_BROWSER` is set
//! (CI sets it): then it fails.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use recliner_tests::{TempDir, TestServer};

/// The most the script may run before the test kills it; the script's own
/// watchdog (150 s) normally ends it first.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);

const SCRIPT: &str = "console_browser.js";

/// `tests/interop`, where the script and its `node_modules` live.
fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop")
}

/// `<workspace>/target/console-screenshots`.
fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .join("target")
        .join("console-screenshots")
}

fn node() -> String {
    std::env::var("INTEROP_NODE").unwrap_or_else(|_| "node".to_string())
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// Reads a child's pipe to the end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Log in, create a database, create and edit a document (with a JSON error
/// shown before saving and a server conflict shown after), upload an
/// attachment, resolve a conflict in the revision tree, start a continuous
/// and a one-shot replication from the form and watch the dashboard (chart
/// above zero, `completed`), stop, delete and restart jobs, log out.
#[test]
fn web_console_in_chromium() {
    let browser = chromium();
    if !browser.exists() {
        if std::env::var_os("RECLINER_REQUIRE_BROWSER").is_some() {
            panic!(
                "{} is missing and RECLINER_REQUIRE_BROWSER is set: install Chromium \
                 (Debian: apt-get install chromium) or point CHROMIUM at it",
                browser.display()
            );
        }
        println!(
            "skipped: no Chromium at {} (set CHROMIUM, or RECLINER_REQUIRE_BROWSER to make this a failure)",
            browser.display()
        );
        return;
    }

    let dir = interop_dir();
    let node = node();
    match Command::new(&node).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("`{node} --version` failed ({})", out.status),
        Err(e) => panic!("cannot run `{node}` ({e}): the console test needs Node.js 20 or later"),
    }
    let package = dir.join("node_modules").join("playwright-core");
    assert!(
        package.is_dir(),
        "{} is missing: run `cargo xtask test`, which installs the interop \
         tests' npm packages (`npm ci` in tests/interop) before the suite",
        package.display()
    );

    let data = TempDir::new("console");
    let server = TestServer::start(data.path(), &["--log-level", "warn"]);
    let shots = screenshots_dir();

    let started = Instant::now();
    let mut child = Command::new(&node)
        .arg(SCRIPT)
        .current_dir(&dir)
        .env("RECLINER_URL", &server.url)
        .env("CONSOLE_SCREENSHOTS", &shots)
        .env("CHROMIUM", &browser)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{node} {SCRIPT}`: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));

    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let elapsed = started.elapsed();
    drop(server);

    match status {
        Some(status) if status.success() => {
            println!(
                "{SCRIPT} passed in {elapsed:.1?}; screenshots in {}\n{stdout}{stderr}",
                shots.display()
            );
        }
        Some(status) => panic!(
            "{SCRIPT} failed ({status}) after {elapsed:.1?}\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
        None => panic!(
            "{SCRIPT} did not finish within {SCRIPT_TIMEOUT:?} and was killed\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
    }
}
