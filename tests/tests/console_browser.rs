//! The web console (`/_utils`) in a real browser: each test starts a server
//! and runs one of the console's scripts in `tests/interop` in Chromium or
//! in Firefox (ESR), both driven by `playwright-core`, and fails on any
//! console error of the page. The scripts share `console_lib.js`:
//! - `console_browser.js`: log in, databases, documents and their JSON
//!   editor, a conflict resolved by picking a winner, attachments,
//!   replications started from the form with the live dashboard;
//! - `console_query.js`: Mango queries, `_explain` and indexes, full-text
//!   search;
//! - `console_views.js`: views run with options and edited, design
//!   functions listed;
//! - `console_admin.js`: a database's permissions, users, as an admin, a
//!   member and a plain user;
//! - `console_server.js`: configuration, active tasks, node figures, the
//!   activity of databases;
//! - `console_conflicts.js`: conflicts across a database, resolved in bulk;
//! - `console_content.js`: content members stored, opened by an admin,
//!   runs no script.
//!
//! Screenshots of every page go to
//! `<workspace>/target/console-screenshots/<browser>`.
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
    run_console_script(&CHROMIUM, "console_browser.js");
}

/// The same walk through the console in Firefox, over WebDriver BiDi.
#[test]
fn web_console_in_firefox() {
    run_console_script(&FIREFOX, "console_browser.js");
}

/// Mango (a query, its explanation, indexes made and dropped, bookmarks)
/// and full-text search (hits, highlights, facets).
#[test]
fn query_pages_in_chromium() {
    run_console_script(&CHROMIUM, "console_query.js");
}

#[test]
fn query_pages_in_firefox() {
    run_console_script(&FIREFOX, "console_query.js");
}

/// Views run with options, a map function saved, a compile error shown
/// inline, and the design functions listed.
#[test]
fn view_pages_in_chromium() {
    run_console_script(&CHROMIUM, "console_views.js");
}

#[test]
fn view_pages_in_firefox() {
    run_console_script(&FIREFOX, "console_views.js");
}

/// Permissions (`_security` as a form, a member losing access in a second
/// session) and users (created, changed, logging in; a user changing their
/// own password), each as an admin, a member and a plain user.
#[test]
fn admin_pages_in_chromium() {
    run_console_script(&CHROMIUM, "console_admin.js");
}

#[test]
fn admin_pages_in_firefox() {
    run_console_script(&FIREFOX, "console_admin.js");
}

/// The server's configuration (a setting changed live), its active tasks
/// and figures, and the live activity of databases.
#[test]
fn server_pages_in_chromium() {
    run_console_script(&CHROMIUM, "console_server.js");
}

#[test]
fn server_pages_in_firefox() {
    run_console_script(&FIREFOX, "console_server.js");
}

/// Every conflicted document of a database found and resolved in bulk, by
/// the latest edit and by a pick per document.
#[test]
fn conflict_pages_in_chromium() {
    run_console_script(&CHROMIUM, "console_conflicts.js");
}

#[test]
fn conflict_pages_in_firefox() {
    run_console_script(&FIREFOX, "console_conflicts.js");
}

/// A member's HTML and SVG attachments and a show's HTML answer, each
/// holding a script that would make its writer a server admin, opened by
/// a server admin logged into the console: no script runs, nothing
/// changes on the server.
#[test]
fn stored_content_runs_no_script_in_chromium() {
    run_console_script(&CHROMIUM, "console_content.js");
}

#[test]
fn stored_content_runs_no_script_in_firefox() {
    run_console_script(&FIREFOX, "console_content.js");
}

fn run_console_script(browser: &Browser, script: &str) {
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
        .arg(script)
        .current_dir(&dir)
        .env("RECLINER_URL", &server.url)
        .env("CONSOLE_SCREENSHOTS", &shots)
        .env("BROWSER", browser.name)
        .env("BROWSER_PATH", &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{node} {script}`: {e}"));
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
                "{script} passed in {} in {elapsed:.1?}; screenshots in {}\n{stdout}{stderr}",
                browser.name,
                shots.display()
            );
        }
        Some(status) => panic!(
            "{script} failed in {} ({status}) after {elapsed:.1?}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            browser.name
        ),
        None => panic!(
            "{script} did not finish within {SCRIPT_TIMEOUT:?} and was killed\n--- stdout\n{stdout}--- stderr\n{stderr}"
        ),
    }
}
