//! Fuzz targets, on stable Rust: proptest generates hostile inputs, a
//! time-bounded driver runs them and shrinks failures to minimal inputs
//! (see `driver.rs`). `cargo xtask fuzz` runs each target for a while; the
//! normal test suite runs each briefly from a fixed seed, so they stay
//! cheap and deterministic in CI.
//!
//! Targets: `rev` (revision ids and `_revisions` paths), `tree` (revision
//! trees), `doc` (document validation), `selector` (Mango selectors), and
//! three against the real server, end to end: `http` (requests of every
//! kind), `multipart` (multipart/related uploads and the multipart answers
//! they read back as) and `query` (query strings on the GET endpoints).
//! `answers.rs` holds the strict readers of the server's answers that the
//! last two share.

mod answers;
mod doc;
mod driver;
mod hostile;
mod http;
mod multipart;
mod query;
mod rev;
mod selector;
mod tree;

use std::time::Duration;

use driver::{Target, fuzz};

/// Defaults for the in-process targets. Smoke runs (the normal test suite)
/// take about a second each in a debug build.
const PURE: Target = Target {
    name: "",
    smoke_cases: 300,
    round_cases: 2000,
    shrink_time: Duration::from_secs(30),
    hang_after: Duration::from_secs(60),
    max_findings: 12,
};

#[test]
fn rev() {
    let target = Target {
        name: "rev",
        smoke_cases: 5000,
        ..PURE
    };
    fuzz(target, rev::strategy(), rev::check);
}

#[test]
fn tree() {
    let target = Target {
        name: "tree",
        smoke_cases: 500,
        ..PURE
    };
    fuzz(target, tree::strategy(), tree::check);
}

#[test]
fn doc() {
    let target = Target {
        name: "doc",
        smoke_cases: 3000,
        ..PURE
    };
    fuzz(target, doc::strategy(), doc::check);
}

#[test]
fn selector() {
    let target = Target {
        name: "selector",
        smoke_cases: 1000,
        ..PURE
    };
    fuzz(target, selector::strategy(), selector::check);
}

#[test]
fn http() {
    let target = Target {
        name: "http",
        smoke_cases: 40,
        round_cases: 50,
        shrink_time: Duration::from_secs(90),
        hang_after: Duration::from_secs(300),
        max_findings: 16,
    };
    let harness = http::Harness::new();
    fuzz(target, http::strategy(), |case, v| harness.check(case, v));
}

#[test]
fn multipart() {
    let target = Target {
        name: "multipart",
        smoke_cases: 120,
        round_cases: 50,
        shrink_time: Duration::from_secs(90),
        hang_after: Duration::from_secs(300),
        max_findings: 16,
    };
    let harness = multipart::Target::new();
    fuzz(target, multipart::strategy(), |case, v| {
        harness.check(case, v)
    });
}

#[test]
fn query() {
    let target = Target {
        name: "query",
        smoke_cases: 60,
        round_cases: 50,
        shrink_time: Duration::from_secs(90),
        hang_after: Duration::from_secs(300),
        max_findings: 16,
    };
    let harness = query::Target::new();
    fuzz(target, query::strategy(), |case, v| harness.check(case, v));
}
