//! Full-text search (`_nouveau`) of Recliner against SQLite FTS5 over the
//! same texts, and PouchDB with `pouchdb-quick-search` when given Node.js
//! and its packages, printed as Markdown tables for BENCHMARKS.md.
//!
//! `cargo xtask bench search` builds it (release) and runs it:
//!
//! ```text
//! search_bench [--docs 100000] [--queries 200] [--sqlite3 sqlite3]
//!              [--quick-search-dir bench/node] [--quick-search-docs 2000]
//!              [--node node] [--builds 3]
//! ```
//!
//! The corpus: `--docs` documents of ~1 KiB from a deterministic generator
//! (a `title` of a few words, a `body` paragraph over a 5,000-word
//! vocabulary with a Zipf-like frequency and frequent collocations, one of
//! 20 `category` strings, a `price`). Recliner loads them with
//! `_bulk_docs`, then gets a design document with one nouveau index; the
//! first query (`update=true`) builds it; `--builds` builds (3) of a new
//! index each, the median reported, as for SQLite. Then `--queries` queries of each
//! kind, one at a time, `update=false`: a term (mid-frequency words), a
//! phrase (pairs of words adjacent in the corpus), a range of `price`, and
//! a term with `counts` on `category` and `ranges` on `price`. Peak RSS is
//! VmHWM, reset before each phase.
//!
//! SQLite: the `sqlite3` shell (FTS5 compiled in), one process fed SQL
//! through a pipe, the same documents in a table, then an external-content
//! FTS5 table rebuilt over it (the build) and the same queries; every
//! query's hit count is checked against Recliner's `total_hits`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use recliner_tests::bench::{BenchServer, cpu_seconds, proc_status_mib, reset_peak};
use serde_json::{Value, json};

const BATCH: usize = 1000;
const VOCABULARY: usize = 5000;
const CATEGORIES: [&str; 20] = [
    "books",
    "music",
    "garden",
    "kitchen",
    "toys",
    "sports",
    "outdoors",
    "tools",
    "beauty",
    "health",
    "grocery",
    "office",
    "pets",
    "baby",
    "automotive",
    "jewelry",
    "shoes",
    "clothing",
    "electronics",
    "software",
];
const SEARCH: &str = "/bench/_design/search/_nouveau/text";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);
/// Queries of each kind for PouchDB, whose queries take up to seconds.
const QUICK_SEARCH_QUERIES: usize = 50;
/// Untimed queries after the build, before the timed ones.
const WARMUP: usize = 20;

fn usage() -> ! {
    eprintln!(
        "usage: search_bench [--docs N] [--queries N] [--sqlite3 PATH] \
         [--quick-search-dir DIR] [--quick-search-docs N] [--node PATH] [--builds N]"
    );
    std::process::exit(2)
}

#[derive(Debug)]
struct Options {
    docs: usize,
    queries: usize,
    sqlite3: String,
    quick_search_dir: Option<PathBuf>,
    quick_search_docs: usize,
    node: String,
    /// Index builds of each system; the median is reported (this machine's
    /// speed varies by a sixth from one minute to the next).
    builds: usize,
}

fn options() -> Options {
    let mut o = Options {
        docs: 100_000,
        queries: 200,
        sqlite3: "sqlite3".into(),
        quick_search_dir: None,
        quick_search_docs: 2_000,
        node: "node".into(),
        builds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        let number = || value.parse::<usize>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--docs" => o.docs = number().max(BATCH).div_ceil(BATCH) * BATCH,
            "--queries" => o.queries = number().max(1),
            "--sqlite3" => o.sqlite3 = value,
            "--quick-search-dir" => o.quick_search_dir = Some(value.into()),
            "--quick-search-docs" => o.quick_search_docs = number(),
            "--node" => o.node = value,
            "--builds" => o.builds = number().max(1),
            _ => usage(),
        }
    }
    o
}

// ---------------------------------------------------------------- corpus

/// splitmix64: the same stream on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A vocabulary of pronounceable non-words, frequent ones shorter, and a
/// Zipf-Mandelbrot sampler over it (rank r weighs 1 / (r + 2.7)).
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new() -> Words {
        const CONSONANTS: &[u8] = b"bcdfghklmnprstvz";
        const VOWELS: &[u8] = b"aeiou";
        let syllable = |n: usize| {
            let c = CONSONANTS[n % CONSONANTS.len()] as char;
            let v = VOWELS[(n / CONSONANTS.len()) % VOWELS.len()] as char;
            format!("{c}{v}")
        };
        let base = CONSONANTS.len() * VOWELS.len();
        let words: Vec<String> = (0..VOCABULARY)
            .map(|i| {
                // A scrambled index, so neighbouring ranks do not share
                // their first syllables.
                let k = (i * 7919 + 13) % (base * base * base);
                if i < 1000 {
                    let k = k % (base * base);
                    format!("{}{}", syllable(k / base), syllable(k % base))
                } else {
                    format!(
                        "{}{}{}",
                        syllable(k / (base * base)),
                        syllable((k / base) % base),
                        syllable(k % base)
                    )
                }
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        assert!(words.iter().all(|w| seen.insert(w.clone())), "unique words");
        let mut total = 0.0;
        let cumulative = (0..VOCABULARY)
            .map(|r| {
                total += 1.0 / (r as f64 + 2.7);
                total
            })
            .collect();
        Words { words, cumulative }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit() * self.cumulative[VOCABULARY - 1];
        self.cumulative
            .partition_point(|&c| c < u)
            .min(VOCABULARY - 1)
    }

    /// The word that often follows `w` (a collocation).
    fn partner(w: usize) -> usize {
        (w * 31 + 7) % 600
    }
}

#[derive(Debug, Clone)]
struct Doc {
    id: String,
    title: String,
    body: String,
    category: &'static str,
    /// Cents: the double is `cents / 100`, printed the same everywhere.
    cents: u64,
}

impl Doc {
    fn price(&self) -> String {
        format!("{}.{:02}", self.cents / 100, self.cents % 100)
    }

    fn json(&self) -> Value {
        json!({
            "_id": self.id, "title": self.title, "body": self.body,
            "category": self.category, "price": self.cents as f64 / 100.0,
        })
    }
}

/// The queries of each kind, the same for every system.
struct Queries {
    terms: Vec<String>,
    phrases: Vec<(String, String)>,
    ranges: Vec<(String, String)>,
}

fn text(
    words: &Words,
    rng: &mut Rng,
    bytes: usize,
    pairs: Option<&mut Vec<(usize, usize)>>,
) -> String {
    let mut out = String::with_capacity(bytes + 16);
    let mut prev = None;
    let mut picked = Vec::new();
    while out.len() < bytes {
        let w = match prev {
            Some(p) if rng.unit() < 0.25 => Words::partner(p),
            _ => words.sample(rng),
        };
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&words.words[w]);
        if let Some(p) = prev {
            picked.push((p, w));
        }
        prev = Some(w);
    }
    if let Some(pairs) = pairs
        && !picked.is_empty()
    {
        pairs.push(picked[rng.below(picked.len())]);
    }
    out
}

fn corpus(docs: usize, queries: usize) -> (Vec<Doc>, Queries) {
    let words = Words::new();
    let mut rng = Rng(42);
    let every = (docs / queries).max(1);
    let mut pairs = Vec::new();
    let corpus: Vec<Doc> = (0..docs)
        .map(|n| {
            let title_len = 12 + rng.below(30);
            let title = text(&words, &mut rng, title_len, None);
            let want_pair = n % every == 0 && pairs.len() < queries;
            let body_len = 780 + rng.below(120);
            let body = text(&words, &mut rng, body_len, want_pair.then_some(&mut pairs));
            // Categories skewed too: the first ones are the big ones.
            let category = CATEGORIES[(rng.unit() * rng.unit() * 20.0) as usize];
            // Prices log-uniform from 1.00 to 1,000.00.
            let cents = (100.0 * 1000f64.powf(rng.unit())) as u64;
            Doc {
                // Ids in another order than the generation.
                id: format!("doc{:08}", (n * 7919) % docs),
                title,
                body,
                category,
                cents,
            }
        })
        .collect();
    let mut rng = Rng(7);
    let terms = (0..queries)
        .map(|i| words.words[100 + (i * 900 / queries)].clone())
        .collect();
    let phrases = pairs
        .iter()
        .map(|&(a, b)| (words.words[a].clone(), words.words[b].clone()))
        .collect();
    let ranges = (0..queries)
        .map(|_| {
            let low = 100 + rng.below(50_000) as u64;
            let high = low + low * (1 + rng.below(20) as u64) / 100;
            let show = |c: u64| format!("{}.{:02}", c / 100, c % 100);
            (show(low), show(high))
        })
        .collect();
    (
        corpus,
        Queries {
            terms,
            phrases,
            ranges,
        },
    )
}

// ---------------------------------------------------------------- figures

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Term,
    Phrase,
    Range,
    Facet,
}

const KINDS: [Kind; 4] = [Kind::Term, Kind::Phrase, Kind::Range, Kind::Facet];

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Term => "term (`body:<word>`, mid-frequency words)",
            Kind::Phrase => "phrase (`body:\"w1 w2\"`, pairs from the corpus)",
            Kind::Range => "range (`price:[a TO b]`)",
            Kind::Facet => "term + `counts` on category + 3 `ranges` on price",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Figures {
    load_s: f64,
    build_s: f64,
    /// CPU seconds the server (or shell) used during the build.
    build_cpu_s: Option<f64>,
    /// Per kind: the latencies, in ms, sorted.
    latencies: Vec<Vec<f64>>,
    /// Per kind: each query's hit count, to compare the systems.
    hits: Vec<Vec<u64>>,
    peak_load_mib: Option<f64>,
    peak_build_mib: Option<f64>,
    peak_query_mib: Option<f64>,
    docs: usize,
    note: String,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------- Recliner

fn facet_request(word: &str) -> Value {
    json!({
        "q": format!("body:{word}"), "update": false,
        "counts": ["category"], "top_n": CATEGORIES.len(),
        "ranges": {"price": [
            {"label": "under 10", "min": 0, "max": 10, "max_inclusive": false},
            {"label": "10 to 100", "min": 10, "max": 100, "max_inclusive": false},
            {"label": "100 and up", "min": 100},
        ]},
    })
}

fn recliner_request(kind: Kind, q: &Queries, i: usize) -> Value {
    match kind {
        Kind::Term => json!({"q": format!("body:{}", q.terms[i]), "update": false}),
        Kind::Phrase => {
            let (a, b) = &q.phrases[i];
            json!({"q": format!("body:\"{a} {b}\""), "update": false})
        }
        Kind::Range => {
            let (a, b) = &q.ranges[i];
            json!({"q": format!("price:[{a} TO {b}]"), "update": false})
        }
        Kind::Facet => facet_request(&q.terms[i]),
    }
}

/// The higher of two peaks, either unknown.
fn higher(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The build of median time, with its CPU seconds.
fn median_build(mut builds: Vec<(f64, Option<f64>)>) -> (f64, Option<f64>) {
    builds.sort_by(|a, b| a.0.total_cmp(&b.0));
    builds[builds.len() / 2]
}

async fn run_recliner(
    http: &reqwest::Client,
    docs: &[Doc],
    q: &Queries,
    builds_wanted: usize,
) -> Figures {
    let mut server = BenchServer::recliner("search-bench");
    server.wait_until_up(http).await;
    let pid = server.pid();
    let send = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let body = response.text().await.expect("a body");
        assert!(
            status.is_success(),
            "{status}: {}",
            &body[..body.len().min(300)]
        );
        body
    };
    send(http.put(server.url("/bench"))).await;
    let started = Instant::now();
    for chunk in docs.chunks(BATCH) {
        let batch: Vec<Value> = chunk.iter().map(Doc::json).collect();
        send(
            http.post(server.url("/bench/_bulk_docs"))
                .json(&json!({ "docs": batch })),
        )
        .await;
    }
    let load_s = started.elapsed().as_secs_f64();
    let peak_load_mib = proc_status_mib(pid, "VmHWM:");
    eprintln!(
        "search_bench: Recliner loaded {} docs in {load_s:.1} s",
        docs.len()
    );

    let index = "function (doc) {
        index('text', 'title', doc.title);
        index('text', 'body', doc.body);
        index('string', 'category', doc.category, {store: true});
        index('double', 'price', doc.price, {store: true});
    }";
    // Each build is of a new index (the function differs by a comment, so
    // its signature does); the one before is cleaned up first.
    let mut builds = Vec::new();
    let mut peak_build_mib: Option<f64> = None;
    let mut rev: Option<String> = None;
    for build in 0..builds_wanted {
        let mut ddoc = json!({"nouveau": {"text": {
            "default_analyzer": "standard",
            "index": format!("{index} // build {build}"),
        }}});
        if let Some(rev) = &rev {
            ddoc["_rev"] = json!(rev);
        }
        let saved = send(http.put(server.url("/bench/_design/search")).json(&ddoc)).await;
        rev = serde_json::from_str::<Value>(&saved)
            .ok()
            .and_then(|v| v["rev"].as_str().map(String::from));
        send(
            http.post(server.url("/bench/_nouveau_cleanup"))
                .json(&json!({})),
        )
        .await;
        reset_peak(pid);
        let cpu_before = cpu_seconds(pid);
        let started = Instant::now();
        let built = send(
            http.post(server.url(SEARCH))
                .json(&json!({"q": "*:*", "limit": 1})),
        )
        .await;
        let build_s = started.elapsed().as_secs_f64();
        let build_cpu_s = cpu_seconds(pid).zip(cpu_before).map(|(a, b)| a - b);
        let built: Value = serde_json::from_str(&built).expect("JSON");
        assert_eq!(built["total_hits"], docs.len(), "every document indexed");
        peak_build_mib = higher(peak_build_mib, proc_status_mib(pid, "VmHWM:"));
        eprintln!(
            "search_bench: Recliner built the index in {build_s:.1} s ({build_cpu_s:.1?} s CPU)"
        );
        builds.push((build_s, build_cpu_s));
    }
    let (build_s, build_cpu_s) = median_build(builds);

    for i in 0..WARMUP {
        let kind = KINDS[i % KINDS.len()];
        send(http.post(server.url(SEARCH)).json(&recliner_request(
            kind,
            q,
            (i * 37) % q.terms.len(),
        )))
        .await;
    }
    reset_peak(pid);
    let mut latencies = Vec::new();
    let mut hits = Vec::new();
    for kind in KINDS {
        let mut times = Vec::new();
        let mut counts = Vec::new();
        for i in 0..count(kind, q) {
            let request = recliner_request(kind, q, i);
            let started = Instant::now();
            let body = send(http.post(server.url(SEARCH)).json(&request)).await;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            let answer: Value = serde_json::from_str(&body).expect("JSON");
            counts.push(if kind == Kind::Facet {
                let total: u64 = answer["counts"]["category"]
                    .as_object()
                    .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
                let ranged: u64 = answer["ranges"]["price"]
                    .as_object()
                    .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
                total * 1_000_000 + ranged
            } else {
                answer["total_hits"].as_u64().expect("total_hits")
            });
        }
        times.sort_by(f64::total_cmp);
        latencies.push(times);
        hits.push(counts);
    }
    let peak_query_mib = proc_status_mib(pid, "VmHWM:");
    server.stop();
    Figures {
        load_s,
        build_s,
        build_cpu_s,
        latencies,
        hits,
        peak_load_mib,
        peak_build_mib,
        peak_query_mib,
        docs: docs.len(),
        note: String::new(),
    }
}

fn count(kind: Kind, q: &Queries) -> usize {
    match kind {
        Kind::Term | Kind::Facet => q.terms.len(),
        Kind::Phrase => q.phrases.len(),
        Kind::Range => q.ranges.len(),
    }
}

// ---------------------------------------------------------------- SQLite

mod sqlite;
use sqlite::run_sqlite;

// ---------------------------------------------------------------- PouchDB

/// PouchDB (leveldb adapter) with `pouchdb-quick-search` in node, on the
/// first `docs` documents, by `tests/interop/bench_search_quick.js`.
fn run_quick_search(
    o: &Options,
    dir: &std::path::Path,
    docs: &[Doc],
    q: &Queries,
) -> Result<Figures, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join("bench_search_quick.js");
    let work = recliner_tests::TempDir::new("search-bench-pouchdb");
    let input = work.path().join("input.json");
    let queries: Vec<Value> = KINDS
        .iter()
        .map(|&kind| {
            let items: Vec<Value> = (0..count(kind, q).min(QUICK_SEARCH_QUERIES))
                .map(|i| match kind {
                    Kind::Term | Kind::Facet => json!({"q": q.terms[i], "fields": ["body"]}),
                    Kind::Phrase => json!({
                        "q": format!("{} {}", q.phrases[i].0, q.phrases[i].1),
                        "fields": ["body"], "mm": "100%"}),
                    Kind::Range => json!({"min": q.ranges[i].0, "max": q.ranges[i].1}),
                })
                .collect();
            json!(items)
        })
        .collect();
    let corpus: Vec<Value> = docs.iter().map(Doc::json).collect();
    std::fs::write(
        &input,
        json!({"docs": corpus, "queries": queries, "warmup": WARMUP}).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let out = Command::new(&o.node)
        .arg(&script)
        .arg(&input)
        .arg(work.path().join("db"))
        .arg(dir)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", o.node))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), out.status));
    }
    let answer: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let list = |v: &Value| -> Vec<f64> {
        v.as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let latencies = answer["latencies"]
        .as_array()
        .map(|kinds| {
            kinds
                .iter()
                .map(|k| {
                    let mut t = list(k);
                    t.sort_by(f64::total_cmp);
                    t
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Figures {
        load_s: answer["load_s"].as_f64().unwrap_or(f64::NAN),
        build_s: answer["build_s"].as_f64().unwrap_or(f64::NAN),
        build_cpu_s: None,
        latencies,
        hits: Vec::new(),
        peak_load_mib: answer["peak_load_mib"].as_f64(),
        peak_build_mib: answer["peak_build_mib"].as_f64(),
        peak_query_mib: answer["peak_query_mib"].as_f64(),
        docs: docs.len(),
        note: format!(
            "{}; the first {} queries of each kind",
            answer["note"].as_str().unwrap_or_default(),
            QUICK_SEARCH_QUERIES.min(q.terms.len())
        ),
    })
}

// ---------------------------------------------------------------- report

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let mem = proc_status_mib_of_meminfo().map_or("?".into(), |g| format!("{g:.0} GiB"));
    format!(
        "{cores} cores ({cpu}), {mem} of memory, {}",
        std::env::consts::OS
    )
}

fn proc_status_mib_of_meminfo() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: f64 = info
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0 / 1024.0)
}

fn mib(v: Option<f64>) -> String {
    v.map_or("-".into(), |m| format!("{m:.0} MiB"))
}

fn print_report(o: &Options, results: &[(&str, Figures)]) {
    let recliner = &results[0].1;
    let sqlite = results.iter().find(|(n, _)| n.starts_with("SQLite"));
    println!("\nMachine: {}.", machine());
    println!(
        "Command: `{}`.",
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    println!(
        "{} documents of ~1 KiB; {} queries of each kind, one at a time, after {WARMUP} \
         untimed ones; every query returns the top 25 hits and the total hit count.\n",
        recliner.docs, o.queries
    );
    print!("| measurement |");
    for (name, f) in results {
        if f.docs == recliner.docs {
            print!(" {name} |");
        } else {
            print!(" {name} ({} docs) |", f.docs);
        }
    }
    if sqlite.is_some() {
        print!(" Recliner / SQLite |");
    }
    println!();
    println!(
        "|{}",
        " --- |".repeat(results.len() + 1 + usize::from(sqlite.is_some()))
    );
    let row = |label: &str, cell: &dyn Fn(&Figures) -> String, ratio: Option<(f64, f64)>| {
        print!("| {label} |");
        for (_, f) in results {
            print!(" {} |", cell(f));
        }
        if sqlite.is_some() {
            match ratio {
                Some((ours, theirs)) if theirs > 0.0 => print!(" {:.2}x |", ours / theirs),
                _ => print!(" |"),
            }
        }
        println!();
    };
    let s = sqlite.map(|(_, f)| f);
    row(
        "loading the documents (`_bulk_docs` of 1,000 / INSERTs of 1,000)",
        &|f| format!("{:.1} s ({:.0} docs/s)", f.load_s, f.docs as f64 / f.load_s),
        None,
    );
    row(
        "index build, docs/s, median of the builds (first query with `update=true` / FTS5 `rebuild` + price index)",
        &|f| {
            let cpu = f
                .build_cpu_s
                .map_or(String::new(), |c| format!(", {c:.1} s CPU"));
            format!("{:.0} ({:.1} s{cpu})", f.docs as f64 / f.build_s, f.build_s)
        },
        s.map(|s| {
            (
                recliner.docs as f64 / recliner.build_s,
                s.docs as f64 / s.build_s,
            )
        }),
    );
    for (k, kind) in KINDS.iter().enumerate() {
        let cell = |f: &Figures, p: f64| f.latencies.get(k).map_or(f64::NAN, |l| percentile(l, p));
        row(
            &format!("{} p50 / p99, ms", kind.label()),
            &|f| match f.latencies.get(k) {
                Some(_) => format!("{:.2} / {:.2}", cell(f, 0.5), cell(f, 0.99)),
                None => "not supported".into(),
            },
            s.map(|s| (cell(recliner, 0.5), cell(s, 0.5))),
        );
    }
    row("peak RSS while loading", &|f| mib(f.peak_load_mib), None);
    row(
        "peak RSS during the build",
        &|f| mib(f.peak_build_mib),
        None,
    );
    row(
        "peak RSS during the queries",
        &|f| mib(f.peak_query_mib),
        None,
    );
    if let Some(s) = s {
        let mut same = 0;
        let mut total = 0;
        for (a, b) in recliner.hits.iter().zip(&s.hits) {
            total += a.len();
            same += a.iter().zip(b).filter(|(x, y)| x == y).count();
        }
        println!(
            "\nHit counts: {same} of {total} queries found the same number of documents in \
             Recliner and {} (facets: the same category and price-range counts).",
            s.note
        );
    }
    for (name, f) in results.iter().skip(1) {
        if !f.note.is_empty() {
            println!("{name}: {}.", f.note);
        }
    }
    let goals = [
        (
            "index build >= 20,000 docs/s".to_string(),
            recliner.docs as f64 / recliner.build_s >= 20_000.0,
            format!("{:.0} docs/s", recliner.docs as f64 / recliner.build_s),
        ),
        (
            "query p50 < 5 ms and p99 < 50 ms, each kind".to_string(),
            recliner
                .latencies
                .iter()
                .all(|l| percentile(l, 0.5) < 5.0 && percentile(l, 0.99) < 50.0),
            recliner
                .latencies
                .iter()
                .map(|l| format!("{:.1}/{:.1}", percentile(l, 0.5), percentile(l, 0.99)))
                .collect::<Vec<_>>()
                .join(", ")
                + " ms",
        ),
        (
            "memory under 150 MiB (peak during build and queries)".to_string(),
            recliner
                .peak_build_mib
                .zip(recliner.peak_query_mib)
                .is_some_and(|(b, q)| b.max(q) < 150.0),
            format!(
                "{} / {}",
                mib(recliner.peak_build_mib),
                mib(recliner.peak_query_mib)
            ),
        ),
    ];
    println!("\n| goal (issue) | Recliner | met |\n| --- | --- | --- |");
    for (goal, met, value) in goals {
        println!("| {goal} | {value} | {} |", if met { "yes" } else { "NO" });
    }
}

fn main() {
    let o = options();
    eprintln!("search_bench: {o:?}");
    let started = Instant::now();
    let (docs, queries) = corpus(o.docs, o.queries);
    let bytes: usize = docs.iter().map(|d| d.json().to_string().len()).sum();
    eprintln!(
        "search_bench: {} documents, {:.0} bytes each on average, generated in {:.1} s",
        docs.len(),
        bytes as f64 / docs.len() as f64,
        started.elapsed().as_secs_f64()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let http = recliner_tests::http_client_builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("an HTTP client");
    let mut results = vec![(
        "Recliner",
        runtime.block_on(run_recliner(&http, &docs, &queries, o.builds)),
    )];
    match run_sqlite(&o.sqlite3, &docs, &queries, o.builds) {
        Ok(f) => results.push(("SQLite FTS5", f)),
        Err(e) => println!("SQLite FTS5 skipped: {e}"),
    }
    if let Some(dir) = &o.quick_search_dir {
        let n = o.quick_search_docs.min(docs.len());
        match run_quick_search(&o, dir, &docs[..n], &queries) {
            Ok(f) => results.push(("PouchDB + quick-search", f)),
            Err(e) => println!("PouchDB + pouchdb-quick-search skipped: {e}"),
        }
    }
    print_report(&o, &results);
}
