//! `cargo xtask <task>`: the project's developer tasks, in Rust so they run
//! the same on every machine.
//!
//! - `test`: everything the test suite needs (the `recliner` binary, the npm
//!   clients of the interop tests, PouchDB Server for the replication
//!   tests), then the whole suite. Apache CouchDB 3.5 is started for the
//!   tests that compare with it when its release is beside the checkout
//!   (`../shared/couchdb`).
//! - `bench store`: the store's throughput and memory figures (BENCHMARKS.md).
//! - `bench http`: Recliner against PouchDB Server over HTTP, same workload,
//!   same run (BENCHMARKS.md).
//! - `bench replicate`: Recliner's replicator (HTTP, local, attachments)
//!   against a PouchDB Server pair replicating with PouchDB (BENCHMARKS.md).
//! - `bench views`: view builds and queries and filtered changes, against
//!   PouchDB Server (BENCHMARKS.md).
//! - `bench find`: Mango `_find` with and without an index, and the
//!   index build, against PouchDB Server (BENCHMARKS.md).
//! - `bench bodies`: peak memory under many large concurrent request
//!   bodies, against PouchDB Server (BENCHMARKS.md).
//! - `bench scale`: how load rate and read costs grow as a database grows,
//!   measured at each tenth (against CouchDB with `--couchdb-script`).
//! - `fuzz`: the fuzz targets of `tests/tests/fuzz`, each for a while.

mod couchdb;
mod layout;
mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("layout") => layout::check(&args.get(1).map_or_else(workspace_root, PathBuf::from)),
        _ => {
            eprintln!("usage: cargo xtask <test|bench|fuzz|layout> [args]");
            eprintln!(
                "  test   check the layout, build the recliner binary, then run every test of the workspace"
            );
            eprintln!(
                "  layout  no import circle between a crate's files, no source file over {} lines",
                layout::MAX_LINES
            );
            eprintln!(
                "  bench store  the store's throughput and peak-memory figures (release build)"
            );
            eprintln!(
                "  bench http [--recliner-only] [--docs N]  Recliner against PouchDB Server over HTTP"
            );
            eprintln!(
                "  bench replicate [--recliner-only] [--docs N] [--pouchdb-docs N]  replication \
                 throughput and memory, against a PouchDB Server pair"
            );
            eprintln!("  {FUZZ_USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn run(mut cmd: Command) -> Result<(), String> {
    let shown = couchdb::redact(&format!("{cmd:?}"));
    eprintln!("xtask: running {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed: {status}"))
    }
}

/// The whole test suite. The end-to-end tests start the real `recliner`
/// binary, so it is built first, in the same profile as the tests; the
/// interop tests run real npm clients, and the replication tests replicate
/// with PouchDB Server, all installed here when needed. The tests that
/// compare with Apache CouchDB get one instance through `COUCHDB_URL`
/// (started here when the release is beside the checkout, unless the
/// variable is already set) and skip themselves without it.
fn test(extra: &[String]) -> Result<(), String> {
    // The layout's rules are reported now and fail the run at its end, so
    // a broken rule never hides the tests' own results.
    let layout = layout::check(&workspace_root());
    if let Err(problems) = &layout {
        eprintln!("xtask: {problems}");
    }
    interop_packages()?;
    let pouchdb_server = pouchdb_server_for_tests()?;
    let mut build = cargo();
    build.args(["build", "--package", "server", "--bin", "recliner"]);
    run(build)?;
    let mut tests = cargo();
    tests
        // Every failing test binary is reported, not only the first.
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(extra)
        .env("RECLINER_POUCHDB_SERVER", pouchdb_server);
    // Held until the tests end, then stopped, whatever their outcome.
    let mut _couchdb = None;
    let mut _postgres = None;
    let postgres_url = match std::env::var(postgres::URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => match postgres::Postgres::start(false)? {
            Some(cluster) => {
                let url = cluster.url();
                _postgres = Some(cluster);
                Some(url)
            }
            None if std::env::var_os(postgres::REQUIRE_VAR).is_some() => {
                return Err(
                    "PostgreSQL is not installed (no initdb): the PostgreSQL backend's tests cannot run"
                        .into(),
                );
            }
            None => {
                eprintln!(
                    "xtask: PostgreSQL is not installed (no initdb): the PostgreSQL backend's tests will be skipped"
                );
                None
            }
        },
    };
    if std::env::var_os(couchdb::URL_VAR).is_none() {
        match couchdb::CouchDb::start(&workspace_root(), "tests")? {
            Some(instance) => {
                tests.env(couchdb::URL_VAR, instance.url());
                _couchdb = Some(instance);
            }
            None => eprintln!(
                "xtask: no CouchDB release beside the checkout (../shared/couchdb): \
                 the tests that compare with CouchDB will be skipped"
            ),
        }
    }
    tests.env_remove(postgres::URL_VAR);
    let sqlite = run(tests);
    // Then the store's conformance suite on PostgreSQL (the SQLite run is
    // part of the tests above) and the end-to-end tests on PostgreSQL.
    let postgres = match &postgres_url {
        Some(url) => {
            let mut store_tests = cargo();
            store_tests
                .args([
                    "test",
                    "--package",
                    "store-postgres",
                    "--tests",
                    "--no-fail-fast",
                ])
                .env(postgres::URL_VAR, url);
            let mut end_to_end = cargo();
            end_to_end
                .args([
                    "test",
                    "--package",
                    "recliner-tests",
                    "--tests",
                    "--no-fail-fast",
                ])
                .args(extra)
                .env(postgres::URL_VAR, url)
                .env("RECLINER_POUCHDB_SERVER", pouchdb_server_for_tests()?);
            if let Some(couchdb) = &_couchdb {
                end_to_end.env(couchdb::URL_VAR, couchdb.url());
            }
            run(store_tests).and_then(|()| run(end_to_end))
        }
        None => Ok(()),
    };
    sqlite.and(postgres).and(layout)
}

/// PouchDB Server, a peer of the replication tests, from `bench/node`
/// (pinned by its package-lock.json, shared with `bench http`), installed
/// when needed; returns the path of its `bin/pouchdb-server` script.
fn pouchdb_server_for_tests() -> Result<PathBuf, String> {
    pouchdb_server_script(
        "the replication tests run PouchDB Server",
        "cargo xtask test",
    )
}

/// PouchDB Server from `bench/node`, installed when needed (`why` and
/// `again` explain a failed install); the path of its script.
fn pouchdb_server_script(why: &str, again: &str) -> Result<PathBuf, String> {
    // --ignore-scripts: nothing to compile or download. leveldown (PouchDB
    // Server's on-disk store) ships prebuilt binaries that it loads at run
    // time; the only other install script is sqlite3's (for `--sqlite`,
    // unused), which downloads binaries and fails offline.
    let dir = workspace_root().join("bench").join("node");
    npm_packages(&dir, why, again, &["--ignore-scripts"])?;
    Ok(dir
        .join("node_modules")
        .join("pouchdb-server")
        .join("bin")
        .join("pouchdb-server"))
}

/// The interop tests' npm packages (PouchDB, nano), pinned by
/// `tests/interop/package-lock.json`.
fn interop_packages() -> Result<(), String> {
    npm_packages(
        &workspace_root().join("tests").join("interop"),
        "the interop tests (tests/interop) run PouchDB and nano",
        "cargo xtask test",
        &[],
    )?;
    npm_packages(
        &workspace_root().join("tests").join("couchbackup"),
        "the backup tests (tests/couchbackup) run couchbackup",
        "cargo xtask test",
        &[],
    )
}

/// The npm packages pinned by `dir/package-lock.json`: `npm ci` when
/// `node_modules` is missing or older than the lock (or package.json), else
/// nothing. npm writes `node_modules/.package-lock.json` last, once an install
/// is complete, so its time stands for the installed tree (an interrupted
/// install has none). `why` and `again` word the error when Node.js is missing.
fn npm_packages(dir: &Path, why: &str, again: &str, extra: &[&str]) -> Result<(), String> {
    let shown = dir
        .strip_prefix(workspace_root())
        .unwrap_or(dir)
        .display()
        .to_string();
    let installed = modified(&dir.join("node_modules").join(".package-lock.json"));
    let wanted = ["package-lock.json", "package.json"]
        .iter()
        .filter_map(|name| modified(&dir.join(name)))
        .max();
    if let (Some(installed), Some(wanted)) = (installed, wanted)
        && installed >= wanted
    {
        eprintln!("xtask: {shown}/node_modules is up to date");
        return Ok(());
    }
    for tool in ["node", npm()] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            return Err(format!(
                "`{tool}` is not installed: {why} under Node.js 20 or later with npm; install \
                 them (Debian: apt-get install nodejs npm) and run `{again}` again"
            ));
        }
    }
    let mut install = Command::new(npm());
    install
        .args(["ci", "--no-audit", "--no-fund"])
        .args(extra)
        .current_dir(dir);
    run(install)
}

fn npm() -> &'static str {
    if cfg!(windows) { "npm.cmd" } else { "npm" }
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn bench(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("http")
            if args
                .windows(2)
                .any(|w| w[0] == "--store" && w[1] == "postgres") =>
        {
            bench_scale_out(&args[1..])
        }
        Some("store") => bench_store(),
        Some("http") => bench_against_pouchdb_server(
            "http_bench",
            "the HTTP benchmark runs PouchDB Server",
            "cargo xtask bench http",
            &args[1..],
            true,
        ),
        Some("replicate") => bench_against_pouchdb_server(
            "replicate_bench",
            "the replication benchmark runs PouchDB Server",
            "cargo xtask bench replicate",
            &args[1..],
            true,
        ),
        Some("views") => bench_against_pouchdb_server(
            "views_bench",
            "the views benchmark runs PouchDB Server",
            "cargo xtask bench views",
            &args[1..],
            true,
        ),
        Some("find") => bench_against_pouchdb_server(
            "find_bench",
            "the Mango benchmark runs PouchDB Server",
            "cargo xtask bench find",
            &args[1..],
            true,
        ),
        Some("many-replications") => bench_recliner_only("many_replications_bench", &args[1..]),
        Some("access") => bench_recliner_only("access_bench", &args[1..]),
        // How costs grow with the database; `--couchdb-script` adds CouchDB.
        Some("scale") => bench_recliner_only("scale_bench", &args[1..]),
        // Recliner's `_nouveau` against SQLite FTS5 (the `sqlite3` shell)
        // and, unless `--recliner-only`, PouchDB with pouchdb-quick-search
        // from `bench/node` on a smaller corpus.
        Some("search") => {
            let mut bench = bench_client("search_bench")?;
            bench.args(args[1..].iter().filter(|a| *a != "--recliner-only"));
            if !args.iter().any(|a| a == "--recliner-only") {
                pouchdb_server_script(
                    "the search benchmark runs PouchDB with pouchdb-quick-search",
                    "cargo xtask bench search",
                )?;
                let dir = workspace_root().join("bench").join("node");
                bench.arg("--quick-search-dir").arg(dir);
            }
            run(bench)
        }
        Some("bodies") => bench_against_pouchdb_server(
            "bodies_bench",
            "the request-body benchmark runs PouchDB Server",
            "cargo xtask bench bodies",
            &args[1..],
            false,
        ),
        _ => Err(
            "usage: cargo xtask bench <store|http [--recliner-only] [--docs N] [--store postgres [--pin 1]]|\
                  replicate [--recliner-only] [--docs N] [--pouchdb-docs N]|\
                  views [--recliner-only] [--docs N]|\
                  find [--recliner-only] [--docs N]|\
                  bodies [--recliner-only] [--clients N] [--mib N]|\
                  many-replications [--jobs N] [--remote-jobs N] [--seconds N] [--rate N]|\
                  access [--users N] [--docs-per-user N] [--pattern-users N] [--samples N]|\
                  scale [--docs N] [--couchdb-script PATH]|\
                  search [--recliner-only] [--docs N] [--queries N] [--quick-search-docs N]>"
                .into(),
        ),
    }
}

/// `bench http --store postgres`: write throughput of one, two and three
/// nodes on one PostgreSQL (a cluster started here, fsyncing every commit)
/// against one node on SQLite and PouchDB Server (BENCHMARKS.md).
fn bench_scale_out(args: &[String]) -> Result<(), String> {
    let cluster = postgres::Postgres::start(true)?
        .ok_or("PostgreSQL is not installed (no initdb): nothing to run the nodes on")?;
    let mut rest: Vec<&String> = Vec::new();
    let mut skip = false;
    for (i, arg) in args.iter().enumerate() {
        if skip {
            skip = false;
            continue;
        }
        if arg == "--store" && args.get(i + 1).is_some_and(|a| a == "postgres") {
            skip = true;
            continue;
        }
        if arg != "--recliner-only" {
            rest.push(arg);
        }
    }
    let mut bench = bench_client("scale_out_bench")?;
    bench.arg("--store").arg(cluster.url()).args(rest);
    // For `--pin 1`, which gives PostgreSQL a core of its own too.
    if let Some(pid) = cluster.server_pid() {
        bench.arg("--postgres-pid").arg(pid.to_string());
    }
    if !args.iter().any(|a| a == "--recliner-only") {
        bench.arg("--pouchdb-server").arg(pouchdb_server_script(
            "the scale-out benchmark runs PouchDB Server",
            "cargo xtask bench http --store postgres",
        )?);
    }
    run(bench)
}

/// The store's figures: inserts (against plain SQLite as the limit), group
/// commit, and full scans at two sizes to show memory does not grow with the
/// database. Prints Markdown rows for BENCHMARKS.md.
fn bench_store() -> Result<(), String> {
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "--package",
        "store-sqlite",
        "--example",
        "store_bench",
    ]);
    run(build)?;
    let bin = workspace_root().join("target/release/examples/store_bench");
    println!("| measurement | result | ratio to plain SQLite |");
    println!("| --- | --- | --- |");
    for args in [
        &["insert", "100000"][..],
        &["scan", "100000"],
        &["scan", "1000000"],
    ] {
        let mut cmd = Command::new(&bin);
        cmd.args(args);
        run(cmd)?;
    }
    Ok(())
}

/// A benchmark of Recliner alone (nothing else does the same work): the
/// release `recliner` and the client `tests/examples/<example>.rs`.
fn bench_recliner_only(example: &str, args: &[String]) -> Result<(), String> {
    let mut bench = bench_client(example)?;
    bench.args(args);
    run(bench)
}

/// Builds the release `recliner` and the benchmark client
/// `tests/examples/<example>.rs`; the client's command, told where
/// `recliner` is.
fn bench_client(example: &str) -> Result<Command, String> {
    for (package, target, name) in [
        ("server", "--bin", "recliner"),
        ("recliner-tests", "--example", example),
    ] {
        let mut build = cargo();
        build.args(["build", "--release", "--package", package, target, name]);
        run(build)?;
    }
    let release = workspace_root().join("target/release");
    let mut bench = Command::new(
        release
            .join("examples")
            .join(format!("{example}{}", std::env::consts::EXE_SUFFIX)),
    );
    bench.env(
        "RECLINER_BIN",
        release.join(format!("recliner{}", std::env::consts::EXE_SUFFIX)),
    );
    Ok(bench)
}

/// Recliner against PouchDB Server: the release `recliner` and a benchmark
/// client (`tests/examples/<example>.rs`: `http_bench` over HTTP,
/// `replicate_bench` replicating), PouchDB Server from `bench/node`, then one
/// run that starts, measures and stops the servers. Prints Markdown tables
/// for BENCHMARKS.md. `--recliner-only` skips PouchDB Server (no Node.js
/// needed) and CouchDB; other arguments go to the client. `why` and `again`
/// word the error when Node.js is missing. With `couchdb`, Apache CouchDB is
/// measured too when its release is beside the checkout.
fn bench_against_pouchdb_server(
    example: &str,
    why: &str,
    again: &str,
    args: &[String],
    couchdb: bool,
) -> Result<(), String> {
    let recliner_only = args.iter().any(|a| a == "--recliner-only");
    let client_args = args.iter().filter(|a| *a != "--recliner-only");
    let mut bench = bench_client(example)?;
    bench.args(client_args);
    let root = workspace_root();
    let couchdb_script = root
        .join("..")
        .join("shared")
        .join("couchdb")
        .join("couchdb.sh");
    if couchdb && !recliner_only && couchdb_script.is_file() {
        bench.arg("--couchdb-script").arg(&couchdb_script);
    }
    if !recliner_only {
        bench
            .arg("--pouchdb-server")
            .arg(pouchdb_server_script(why, again)?);
    }
    run(bench)
}

const FUZZ_USAGE: &str = "fuzz [--seconds N] [--seed S] [TARGET...]  run fuzz targets \
     (rev, tree, doc, selector, http, multipart, query; default all) for N seconds each \
     (default 60)";

/// Every fuzz target, in the order they run.
const FUZZ_TARGETS: &[&str] = &[
    "rev",
    "tree",
    "doc",
    "selector",
    "http",
    "multipart",
    "query",
];

/// The targets that start the `recliner` binary (end to end): `http`
/// (requests of every kind), `multipart` (multipart/related uploads and
/// read-backs) and `query` (query strings on the GET endpoints).
const END_TO_END_TARGETS: &[&str] = &["http", "multipart", "query"];

/// The profile the fuzz targets build in: release speed, but with overflow
/// checks and debug assertions, so arithmetic on hostile numbers fails
/// loudly instead of wrapping. Defined here rather than in Cargo.toml, and
/// in its own folder (`target/fuzz`), so it never disturbs other builds.
const FUZZ_PROFILE: &[&str] = &[
    "--profile",
    "fuzz",
    "--config",
    "profile.fuzz.inherits=\"release\"",
    "--config",
    "profile.fuzz.overflow-checks=true",
    "--config",
    "profile.fuzz.debug-assertions=true",
    "--config",
    "profile.fuzz.lto=false",
    "--config",
    "profile.fuzz.codegen-units=16",
    "--config",
    "profile.fuzz.debug=\"line-tables-only\"",
];

/// `cargo xtask fuzz`: runs each chosen target of `tests/tests/fuzz` (see
/// its `main.rs` and `driver.rs`) for a time budget, one after the other,
/// then summarizes. Findings are printed by the targets themselves with
/// their minimal inputs; a target that dies (stack overflow, abort) or
/// hangs is reported as such and the next one still runs.
fn fuzz(args: &[String]) -> Result<(), String> {
    let mut seconds = "60".to_string();
    let mut seed = None;
    let mut targets = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .filter(|s| s.parse::<f64>().is_ok_and(|n| n >= 0.0))
                    .ok_or(format!(
                        "--seconds needs a number\nusage: cargo xtask {FUZZ_USAGE}"
                    ))?
                    .clone();
            }
            "--seed" => {
                seed = Some(
                    args.next()
                        .filter(|s| s.parse::<u64>().is_ok())
                        .ok_or(format!(
                            "--seed needs an integer\nusage: cargo xtask {FUZZ_USAGE}"
                        ))?
                        .clone(),
                );
            }
            name if FUZZ_TARGETS.contains(&name) => targets.push(name),
            other => {
                return Err(format!(
                    "unknown fuzz target or option {other:?}\nusage: cargo xtask {FUZZ_USAGE}"
                ));
            }
        }
    }
    if targets.is_empty() {
        targets = FUZZ_TARGETS.to_vec();
    }
    if targets.iter().any(|t| END_TO_END_TARGETS.contains(t)) {
        // The end-to-end targets start this binary (found beside the test's).
        let mut build = cargo();
        build
            .args(["build", "--package", "server", "--bin", "recliner"])
            .args(FUZZ_PROFILE);
        run(build)?;
    }
    let exe = fuzz_executable()?;
    let mut outcomes = Vec::new();
    for target in &targets {
        // The test binary itself, not `cargo test`, so its exit status tells
        // findings (101), a hang (3) and a crash (a signal) apart.
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", target, "--nocapture", "--test-threads", "1"])
            .current_dir(workspace_root().join("tests"))
            .env("RECLINER_FUZZ_SECONDS", &seconds);
        if let Some(seed) = &seed {
            cmd.env("RECLINER_FUZZ_SEED", seed);
        }
        eprintln!("xtask: fuzzing {target} for {seconds} s");
        let outcome = match cmd.status() {
            Ok(status) if status.success() => "clean".to_string(),
            Ok(status) if status.code() == Some(3) => {
                "HANG (its input is printed above)".to_string()
            }
            Ok(status) if status.code().is_none() => format!(
                "CRASHED ({status}: the process died, e.g. a stack overflow); rerun with \
                 RECLINER_FUZZ_TRACE=1 and the seed printed above to see the input"
            ),
            Ok(_) => "FINDINGS (listed above with minimal inputs)".to_string(),
            Err(e) => format!("could not run: {e}"),
        };
        outcomes.push((target, outcome));
    }
    eprintln!("\nxtask: fuzz summary ({seconds} s per target)");
    for (target, outcome) in &outcomes {
        eprintln!("  {target:<9} {outcome}");
    }
    if outcomes.iter().all(|(_, o)| o == "clean") {
        Ok(())
    } else {
        Err("fuzzing found defects".into())
    }
}

/// Builds the fuzz test binary and returns its path (from cargo's JSON
/// messages: the `executable` of the `fuzz` test target).
fn fuzz_executable() -> Result<PathBuf, String> {
    let mut build = cargo();
    build
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(["--package", "recliner-tests", "--test", "fuzz"])
        .args(FUZZ_PROFILE)
        .stderr(std::process::Stdio::inherit());
    eprintln!("xtask: building the fuzz targets");
    let output = build
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the fuzz targets failed: {}",
            output.status
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter(|line| line.contains("\"name\":\"fuzz\"") && line.contains("\"test\""))
        .find_map(|line| {
            let start = line.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + line[start..].find('"')?;
            Some(PathBuf::from(&line[start..end]))
        })
        .ok_or_else(|| "cargo built no fuzz test executable".into())
}
