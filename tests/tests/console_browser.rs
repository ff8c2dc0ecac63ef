//! The web console (`/_utils`) in a real browser: starts a server and runs
//! `tests/interop/console_browser.js` twice, in Chromium and in Firefox
//! (ESR), both driven by `playwright-core` (log in, databases, documents and their JSON editor,
//! a conflict resolved by picking a winner, attachments, replications
//! started from the form with the live dashboard and its throughput chart)
//! and fails on any console error of the page. Screenshots of every page go
//! to `<workspace>/target/console-screenshots/<browser>`.
//!
//! Needs Node.js, the npm packages of `tests/interop` (`cargo xtask test`
//! installs them) and the browsers (`/usr/bin/chromium` or `CHROMIUM`,
//! `/usr/bin/firefox-esr` or `FIREFOX`). Without a browser its test is
//! skipped, unless `RECLINER_REQUIRE_BROWSER` is set (CI sets it): then it
//! fails. The two tests take turns, so the browsers never share the cores.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recliner_tests::{TempDir, TestServer};

/// The most the script may run before the test kills it; the script's own
/// watchdog (150 s) normally ends it first.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);

const SCRIPT: &str = "console_browser.js";

/// Held by the test whose browser runs: one browser at a time.
static ONE_BROWSER: Mutex<()> = Mutex::new(());

/// A browser the script can drive: its name for the script (`BROWSER`),
/// the variable that overrides its path, and its default path.
struct Browser {
    name: &'static str,
    path_var: &'static str,
    default_path: &'static str,
    package: &'static str,
}

const CHROMIUM: Browser = Browser {
    name: "chromium",
    path_var: "CHROMIUM",
    default_path: "/usr/bin/chromium",
    package: "chromium",
};

const FIREFOX: Browser = Browser {
    name: "firefox",
    path_var: "FIREFOX",
    default_path: "/usr/bin/firefox-esr",
    package: "firefox-esr",
};

/// `tests/interop`, where the script and its `node_modules` live.
fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop")
}

/// `<workspace>/target/console-screenshots/<browser>`.
fn screenshots_dir(browser: &Browser) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .join("target")
        .join("console-screenshots")
        .join(browser.name)
}

fn node() -> String {
    std::env::var("INTEROP_NODE").unwrap_or_else(|_| "node".to_string())
}

fn browser_path(browser: &Browser) -> PathBuf {
    std::env::var_os(browser.path_var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(browser.default_path))
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
    run_console_script(&CHROMIUM);
}

/// The same walk through the console in Firefox, over WebDriver BiDi.
#[test]
fn web_console_in_firefox() {
    run_console_script(&FIREFOX);
}

fn run_console_script(browser: &Browser) {
    let _turn = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let path = browser_path(browser);
    if !path.exists() {
        if std::env::var_os("RECLINER_REQUIRE_BROWSER").is_some() {
            panic!(
                "{} is missing and RECLINER_REQUIRE_BROWSER is set: install it \
                 (Debian: apt-get install {}) or point {} at it",
                path.display(),
                browser.package,
                browser.path_var
            );
        }
        println!(
            "skipped: no {} at {} (set {}, or RECLINER_REQUIRE_BROWSER to make this a failure)",
            browser.name,
            path.display(),
            browser.path_var
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
    let shots = screenshots_dir(browser);

    let started = Instant::now();
    let mut child = Command::new(&node)
        .arg(SCRIPT)
        .current_dir(&dir)
        .env("RECLINER_URL", &server.url)
        .env("CONSOLE_SCREENSHOTS", &shots)
        .env("BROWSER", browser.name)
        .env("BROWSER_PATH", &path)
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
                "{SCRIPT} passed in {} in {elapsed:.1?}; screenshots in {}\n{stdout}{stderr}",
                browser.name,
                shots.display()
            );
        }
        Some(status) => panic!(
            "{SCRIPT} failed in {} ({status}) after {elapsed:.1?}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            browser.name
        ),
        None => panic!(
            "{SCRIPT} did not finish within {SCRIPT_TIMEOUT:?} and was killed\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
    }
}
