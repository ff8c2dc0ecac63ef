//! The SQLite FTS5 reference: the `sqlite3` shell fed SQL through a pipe,
//! the same documents, builds and queries.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use recliner_tests::bench::{cpu_seconds, proc_status_mib, reset_peak};

use super::*;

/// One `sqlite3` shell fed through a pipe: each exchange ends with a
/// marker line, so its answer is everything read before it.
struct Shell {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

const MARK: &str = "#done#";

impl Shell {
    fn start(program: &str, file: &std::path::Path) -> Option<Shell> {
        let mut child = Command::new(program)
            .arg("-batch")
            .arg(file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let input = child.stdin.take()?;
        let output = BufReader::new(child.stdout.take()?);
        Some(Shell {
            child,
            input,
            output,
        })
    }

    /// Runs `sql` and returns the lines it printed.
    fn run(&mut self, sql: &str) -> Vec<String> {
        writeln!(self.input, "{sql}\nSELECT '{MARK}';").expect("sqlite3 reads");
        self.input.flush().expect("sqlite3 reads");
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = self.output.read_line(&mut line).expect("sqlite3 answers");
            assert!(n > 0, "sqlite3 stopped; it printed {lines:?}");
            let line = line.trim_end().to_string();
            if line == MARK {
                return lines;
            }
            lines.push(line);
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sqlite_query(kind: Kind, q: &Queries, i: usize) -> String {
    let hits = "SELECT d.id, d.category, d.price FROM fts JOIN docs d ON d.rowid = fts.rowid";
    match kind {
        Kind::Term | Kind::Phrase => {
            let m = match kind {
                Kind::Term => format!("body:{}", q.terms[i]),
                _ => format!("body:\"{} {}\"", q.phrases[i].0, q.phrases[i].1),
            };
            format!(
                "{hits} WHERE fts MATCH '{m}' ORDER BY rank LIMIT 25;\n\
                 SELECT count(*) FROM fts WHERE fts MATCH '{m}';"
            )
        }
        Kind::Range => {
            let (a, b) = &q.ranges[i];
            format!(
                "SELECT id, category, price FROM docs WHERE price BETWEEN {a} AND {b} \
                 ORDER BY id LIMIT 25;\n\
                 SELECT count(*) FROM docs WHERE price BETWEEN {a} AND {b};"
            )
        }
        Kind::Facet => {
            let m = format!("body:{}", q.terms[i]);
            format!(
                "{hits} WHERE fts MATCH '{m}' ORDER BY rank LIMIT 25;\n\
                 SELECT category, count(*) FROM fts JOIN docs d ON d.rowid = fts.rowid \
                 WHERE fts MATCH '{m}' GROUP BY category;\n\
                 SELECT sum(price < 10), sum(price >= 10 AND price < 100), sum(price >= 100) \
                 FROM fts JOIN docs d ON d.rowid = fts.rowid WHERE fts MATCH '{m}';"
            )
        }
    }
}

pub(super) fn run_sqlite(
    program: &str,
    docs: &[Doc],
    q: &Queries,
    builds_wanted: usize,
) -> Result<Figures, String> {
    let dir = recliner_tests::TempDir::new("search-bench-sqlite");
    let mut shell = Shell::start(program, &dir.path().join("fts.db"))
        .ok_or_else(|| format!("cannot run `{program}`"))?;
    let fts5 = shell.run("SELECT sqlite_compileoption_used('ENABLE_FTS5'), sqlite_version();");
    if fts5.first().is_none_or(|l| !l.starts_with('1')) {
        return Err(format!("`{program}` has no FTS5: {fts5:?}"));
    }
    let version = fts5[0].split('|').nth(1).unwrap_or("?").to_string();
    let pid = shell.pid();
    shell.run(
        "CREATE TABLE docs(id TEXT PRIMARY KEY, title TEXT, body TEXT, category TEXT, price REAL);",
    );
    let started = Instant::now();
    for chunk in docs.chunks(BATCH) {
        let rows: Vec<String> = chunk
            .iter()
            .map(|d| {
                format!(
                    "('{}','{}','{}','{}',{})",
                    d.id,
                    d.title,
                    d.body,
                    d.category,
                    d.price()
                )
            })
            .collect();
        shell.run(&format!("INSERT INTO docs VALUES {};", rows.join(",")));
    }
    let load_s = started.elapsed().as_secs_f64();
    let peak_load_mib = proc_status_mib(pid, "VmHWM:");
    let mut builds = Vec::new();
    let mut peak_build_mib: Option<f64> = None;
    for _ in 0..builds_wanted {
        shell.run("DROP TABLE IF EXISTS fts; DROP INDEX IF EXISTS docs_price;");
        reset_peak(pid);
        let cpu_before = cpu_seconds(pid);
        let started = Instant::now();
        shell.run(
            "BEGIN;\n\
             CREATE VIRTUAL TABLE fts USING fts5(title, body, content='docs', content_rowid='rowid');\n\
             INSERT INTO fts(fts) VALUES('rebuild');\n\
             CREATE INDEX docs_price ON docs(price);\n\
             COMMIT;",
        );
        let build_s = started.elapsed().as_secs_f64();
        let build_cpu_s = cpu_seconds(pid).zip(cpu_before).map(|(a, b)| a - b);
        peak_build_mib = higher(peak_build_mib, proc_status_mib(pid, "VmHWM:"));
        builds.push((build_s, build_cpu_s));
    }
    let (build_s, build_cpu_s) = median_build(builds);
    for i in 0..WARMUP {
        shell.run(&sqlite_query(
            KINDS[i % KINDS.len()],
            q,
            (i * 37) % q.terms.len(),
        ));
    }
    reset_peak(pid);
    let mut latencies = Vec::new();
    let mut hits = Vec::new();
    for kind in KINDS {
        let mut times = Vec::new();
        let mut counts = Vec::new();
        for i in 0..count(kind, q) {
            let sql = sqlite_query(kind, q, i);
            let started = Instant::now();
            let lines = shell.run(&sql);
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            counts.push(sqlite_count(kind, &lines));
        }
        times.sort_by(f64::total_cmp);
        latencies.push(times);
        hits.push(counts);
    }
    let peak_query_mib = proc_status_mib(pid, "VmHWM:");
    Ok(Figures {
        load_s,
        build_s,
        build_cpu_s,
        latencies,
        hits,
        peak_load_mib,
        peak_build_mib,
        peak_query_mib,
        docs: docs.len(),
        note: format!("SQLite {version}"),
    })
}

/// The hit count in a shell's answer, shaped as Recliner's (see
/// [`run_recliner`]): the last line, or for a facet the category counts'
/// sum and the ranges' sum.
fn sqlite_count(kind: Kind, lines: &[String]) -> u64 {
    let number = |s: &str| s.trim().parse::<u64>().unwrap_or(0);
    if kind != Kind::Facet {
        return lines.last().map_or(0, |l| number(l));
    }
    let ranged: u64 = lines.last().map_or(0, |l| l.split('|').map(number).sum());
    let total: u64 = lines
        .iter()
        .filter_map(|l| {
            let (category, n) = l.rsplit_once('|')?;
            CATEGORIES.contains(&category).then(|| number(n))
        })
        .sum();
    total * 1_000_000 + ranged
}
