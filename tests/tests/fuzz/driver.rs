//! The fuzz driver: proptest's generators and shrinking on stable Rust, run
//! in rounds until a time budget is spent.
//!
//! A target is a strategy plus a check that records [`Violations`] (and may
//! panic: panics are caught and count as violations named by their source
//! location). A failing input is shrunk by proptest to a minimal one and kept
//! as a finding; its kinds of violation are then *known*, so the run goes on
//! looking for different defects instead of stopping at the first one (or
//! rediscovering it). The run ends loudly, with every finding and its minimal
//! input, when anything was found.
//!
//! Modes (environment):
//! - `RECLINER_FUZZ_SECONDS=N`: fuzz for N seconds from a random seed
//!   (`cargo xtask fuzz` sets it). `RECLINER_FUZZ_SEED=S` starts from seed S
//!   instead, to replay a round a finding reported.
//! - unset: a smoke run for the normal test suite: a fixed seed and a fixed
//!   number of cases, so it is deterministic and short.
//! - `RECLINER_FUZZ_TRACE=1`: print every input before running it (to find
//!   the input of a crash that kills the process, such as a stack overflow).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::fmt::{self, Debug};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// How one target is run.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    /// Cases of a smoke run (the normal test suite).
    pub smoke_cases: u32,
    /// Cases per proptest round in a timed run; the budget is checked between
    /// cases too, so this only bounds how often a fresh seed is drawn.
    pub round_cases: u32,
    /// Longest time spent shrinking one failure.
    pub shrink_time: Duration,
    /// A case running longer than this is a hang: the process reports the
    /// input and exits, as a hung case cannot be interrupted.
    pub hang_after: Duration,
    /// Distinct findings after which the target stops early.
    pub max_findings: usize,
}

/// One broken invariant of one input.
#[derive(Debug, Clone)]
pub struct Violation {
    /// What broke, without input-specific data: findings are deduplicated on it.
    pub kind: String,
    /// The evidence: values, responses, log lines.
    pub detail: String,
}

/// The violations a check found for one input.
#[derive(Debug, Default)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// Records a broken invariant.
    pub fn add(&mut self, kind: impl Into<String>, detail: impl Into<String>) {
        self.0.push(Violation {
            kind: kind.into(),
            detail: detail.into(),
        });
    }

    /// Records `kind` unless `holds`; `detail` is only built on failure.
    pub fn check(&mut self, holds: bool, kind: &str, detail: impl FnOnce() -> String) {
        if !holds {
            self.add(kind, detail());
        }
    }
}

/// A minimal failing input and what it breaks.
#[derive(Debug)]
struct Finding {
    violations: Vec<Violation>,
    input: String,
    seed: u64,
    /// Whether running the minimal input once more broke the same things
    /// (an end-to-end input may depend on timing or on earlier inputs).
    reproduced: bool,
}

thread_local! {
    /// Set while a check runs on this thread: its panics are recorded, not printed.
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    /// `(location, message)` of the last captured panic.
    static LAST_PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that records panics of checks quietly and
/// leaves every other panic to the previous hook.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(Cell::get) {
                let location = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()))
                    .unwrap_or_else(|| "unknown location".into());
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "<non-string panic>".into());
                LAST_PANIC.with(|p| *p.borrow_mut() = Some((location, message)));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `check` on `input`, turning a panic into a violation named by its location.
fn run_check<V>(input: &V, check: &impl Fn(&V, &mut Violations)) -> Violations {
    let mut violations = Violations::default();
    CAPTURING.with(|c| c.set(true));
    let outcome = catch_unwind(AssertUnwindSafe(|| check(input, &mut violations)));
    CAPTURING.with(|c| c.set(false));
    if outcome.is_err() {
        let (location, message) = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| ("unknown location".into(), String::new()));
        violations.add(format!("panic at {location}"), message);
    }
    violations
}

/// How long and from where to fuzz.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Smoke,
    Timed { budget: Duration, seed: u64 },
}

fn mode() -> Mode {
    let Some(seconds) = std::env::var("RECLINER_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
    else {
        return Mode::Smoke;
    };
    let seed = std::env::var("RECLINER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    Mode::Timed {
        budget: Duration::from_secs_f64(seconds.max(0.0)),
        seed,
    }
}

/// splitmix64: the next round's seed.
fn next_seed(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn rng_for(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    let mut s = seed;
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&s.to_le_bytes());
        s = next_seed(s);
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

fn smoke_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The input of the case now running, for the hang watchdog.
type Current = Arc<Mutex<Option<(Instant, Box<dyn Debug + Send>)>>>;

/// Reports and ends the process when a case runs past `limit`.
fn start_watchdog(name: &'static str, limit: Duration, current: Current) -> Arc<Flag> {
    let done = Arc::new(Flag::default());
    let stop = done.clone();
    std::thread::spawn(move || {
        while !stop.get() {
            std::thread::sleep(Duration::from_millis(200));
            let Ok(slot) = current.lock() else { return };
            if let Some((started, input)) = slot.as_ref()
                && started.elapsed() > limit
            {
                eprintln!(
                    "\nFUZZ {name}: HANG: one case has run for more than {limit:?}; its input:\n\
                     {input:?}\n"
                );
                std::process::exit(3);
            }
        }
    });
    done
}

/// Tells the watchdog to stop.
#[derive(Debug, Default)]
struct Flag(std::sync::atomic::AtomicBool);

impl Flag {
    fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Fuzzes `check` with inputs from `strategy` (see the module comment).
/// Panics at the end, listing every finding with its minimal input, when
/// anything broke.
pub fn fuzz<S>(target: Target, strategy: S, check: impl Fn(&S::Value, &mut Violations))
where
    S: Strategy,
    S::Value: Clone + Send + 'static,
{
    install_panic_hook();
    let mode = mode();
    let trace = std::env::var_os("RECLINER_FUZZ_TRACE").is_some();
    let started = Instant::now();
    let tried = Cell::new(0u64);
    let known: RefCell<BTreeSet<String>> = RefCell::new(BTreeSet::new());
    let mut findings: Vec<Finding> = Vec::new();
    let current: Current = Arc::new(Mutex::new(None));
    let watchdog = start_watchdog(target.name, target.hang_after, current.clone());
    let (mut seed, deadline) = match mode {
        Mode::Smoke => (smoke_seed(target.name), None),
        Mode::Timed { budget, seed } => {
            eprintln!(
                "fuzz {}: {:?} from seed {seed} (replay a round: RECLINER_FUZZ_SEED=<its seed>)",
                target.name, budget
            );
            (seed, Some(started + budget))
        }
    };
    loop {
        let config = Config {
            cases: match mode {
                Mode::Smoke => target.smoke_cases,
                Mode::Timed { .. } => target.round_cases,
            },
            failure_persistence: None,
            max_shrink_time: target.shrink_time.as_millis() as u32,
            max_shrink_iters: 10_000,
            max_global_rejects: 100_000,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(config, rng_for(seed));
        // Once a case failed, proptest is shrinking it: never skip those runs.
        let shrinking = Cell::new(false);
        // What the latest failing run broke: proptest's minimal input is the
        // last one that failed, so this is its report.
        let last_failure: RefCell<Vec<Violation>> = RefCell::new(Vec::new());
        let result = runner.run(&strategy, |input| {
            if !shrinking.get() && deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(()); // the budget is spent: finish the round at once
            }
            tried.set(tried.get() + 1);
            if trace {
                eprintln!("fuzz {} input: {input:?}", target.name);
            }
            if let Ok(mut slot) = current.lock() {
                *slot = Some((Instant::now(), Box::new(input.clone())));
            }
            let violations = run_check(&input, &check);
            if let Ok(mut slot) = current.lock() {
                *slot = None;
            }
            let known = known.borrow();
            let new: Vec<&Violation> = violations
                .0
                .iter()
                .filter(|v| !known.contains(&v.kind))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            shrinking.set(true);
            *last_failure.borrow_mut() = new.iter().map(|v| (*v).clone()).collect();
            Err(TestCaseError::fail(
                new.iter()
                    .map(|v| format!("{}\n{}", v.kind, v.detail))
                    .collect::<Vec<_>>()
                    .join("\n---\n"),
            ))
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(_, input)) => {
                let violations = last_failure.take();
                // Once more, to tell a reproducible input from a flaky one.
                let again = run_check(&input, &check);
                let reproduced = violations
                    .iter()
                    .all(|v| again.0.iter().any(|w| w.kind == v.kind));
                let finding = Finding {
                    violations,
                    input: format!("{input:?}"),
                    seed,
                    reproduced,
                };
                eprintln!(
                    "\nFUZZ {} FINDING #{} (round seed {seed}):\n{}",
                    target.name,
                    findings.len() + 1,
                    Report(&finding)
                );
                known
                    .borrow_mut()
                    .extend(finding.violations.iter().map(|v| v.kind.clone()));
                findings.push(finding);
            }
            Err(TestError::Abort(reason)) => {
                panic!("fuzz {}: proptest aborted: {reason}", target.name)
            }
        }
        seed = next_seed(seed);
        let out_of_time = deadline.is_none_or(|d| Instant::now() >= d);
        if out_of_time || findings.len() >= target.max_findings {
            break;
        }
    }
    watchdog.set();
    let secs = started.elapsed().as_secs_f64();
    if findings.is_empty() {
        eprintln!(
            "{}: {} inputs in {secs:.1} s, clean",
            target.name,
            tried.get()
        );
        return;
    }
    let mut report = format!(
        "{}: {} inputs in {secs:.1} s, {} finding(s)\n",
        target.name,
        tried.get(),
        findings.len()
    );
    for (i, finding) in findings.iter().enumerate() {
        report.push_str(&format!(
            "\n=== finding #{} (round seed {}) ===\n{}",
            i + 1,
            finding.seed,
            Report(finding)
        ));
    }
    eprintln!("{report}");
    panic!(
        "fuzz target {} found {} defect(s); see the report above",
        target.name,
        findings.len()
    );
}

/// A finding as the report shows it.
struct Report<'a>(&'a Finding);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let violations = &self.0.violations;
        for (i, v) in violations.iter().enumerate() {
            if violations[..i].iter().any(|w| w.kind == v.kind) {
                continue; // shown once, with the first evidence
            }
            let times = violations.iter().filter(|w| w.kind == v.kind).count();
            match times {
                1 => writeln!(f, "* {}", v.kind)?,
                n => writeln!(f, "* {} ({n} times)", v.kind)?,
            }
            for line in v.detail.lines() {
                writeln!(f, "    {line}")?;
            }
        }
        if !self.0.reproduced {
            writeln!(
                f,
                "(not reproduced when run once more: it may depend on timing or on earlier inputs)"
            )?;
        }
        writeln!(f, "minimal input:\n{}", self.0.input)
    }
}
