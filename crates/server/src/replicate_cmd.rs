//! `recliner replicate SOURCE TARGET`: one replication run from the command
//! line by the same engine the server uses, with live progress (a progress
//! bar on a terminal, plain lines otherwise) and a final summary. The exit
//! status is 0 only when the replication succeeded.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use replicator::{Progress, ProgressSnapshot, ReplicationSpec, SpecDefaults};
use serde_json::{Value, json};

/// Options of `recliner replicate`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplicateArgs {
    /// Source database URL, e.g. http://user:pass@host:5984/db
    pub source: String,
    /// Target database URL
    pub target: String,
    /// Keep running and replicate new changes until interrupted (Ctrl-C)
    #[arg(long)]
    pub continuous: bool,
    /// Create the target database if it does not exist
    #[arg(long)]
    pub create_target: bool,
    /// Replicate only these documents (comma-separated ids, or repeat the flag)
    #[arg(long, value_delimiter = ',')]
    pub doc_ids: Vec<String>,
    /// Replicate only documents matching this Mango selector (JSON)
    #[arg(long)]
    pub selector: Option<String>,
}

impl ReplicateArgs {
    /// The replication request these options describe, validated by the
    /// replicator's own parser. Peers must be URLs: a local name would open
    /// a running server's files behind its back.
    fn spec(&self, defaults: &SpecDefaults) -> Result<ReplicationSpec, String> {
        for (side, peer) in [("SOURCE", &self.source), ("TARGET", &self.target)] {
            if !(peer.starts_with("http://") || peer.starts_with("https://")) {
                return Err(format!(
                    "{side} must be a database URL (http://host:port/db), got {:?}",
                    redact(peer)
                ));
            }
        }
        let mut request = json!({
            "source": self.source,
            "target": self.target,
            "continuous": self.continuous,
            "create_target": self.create_target,
        });
        if !self.doc_ids.is_empty() {
            request["doc_ids"] = json!(self.doc_ids);
        }
        if let Some(selector) = &self.selector {
            let selector: Value = ejson::from_str(selector)
                .map_err(|e| format!("--selector is not valid JSON: {e}"))?;
            request["selector"] = selector;
        }
        ReplicationSpec::parse_with(&request, defaults).map_err(|e| e.0)
    }
}

/// A URL as it may be printed: any password replaced by `*****`.
fn redact(text: &str) -> String {
    match reqwest::Url::parse(text) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("*****"));
            url.to_string()
        }
        _ => text.to_string(),
    }
}

/// Runs the command; the process exit status.
pub async fn run(
    args: ReplicateArgs,
    store: store::Store,
    defaults: &SpecDefaults,
) -> std::process::ExitCode {
    let spec = match args.spec(defaults) {
        Ok(spec) => spec,
        Err(reason) => {
            eprintln!("recliner replicate: {reason}");
            return std::process::ExitCode::from(2);
        }
    };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    // Ctrl-C stops a continuous run cleanly: it checkpoints, then reports.
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let progress = Progress::default();
    let started = Instant::now();
    let display = Display::new(std::io::stderr().is_terminal());
    // Local targets obey their validation functions here too.
    let validators =
        design_functions::Validators::new(design_functions::Engine::new(Default::default()));
    let run = replicator::run(&store, &spec, stop, &progress, Some(&validators));
    tokio::pin!(run);
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + display.every(),
        display.every(),
    );
    let result = loop {
        tokio::select! {
            result = &mut run => break result,
            _ = ticker.tick() => display.show(&progress.snapshot(), started.elapsed()),
        }
    };
    display.finish();
    let snapshot = progress.snapshot();
    match result {
        Ok(log) => {
            let stats = &snapshot.stats;
            let secs = started.elapsed().as_secs_f64();
            println!(
                "replication of {} to {} finished: {} docs read, {} written, {} failed, {} revisions checked, in {secs:.1} s ({:.0} docs/s); last source sequence {}",
                spec.source,
                spec.target,
                stats.docs_read,
                stats.docs_written,
                stats.doc_write_failures,
                stats.missing_checked,
                stats.docs_written as f64 / secs.max(0.001),
                log["source_last_seq"],
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("recliner replicate: the replication failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Live progress: a bar on a terminal, a plain line every few seconds elsewhere.
enum Display {
    Bar(indicatif::ProgressBar),
    Lines,
}

impl Display {
    fn new(terminal: bool) -> Display {
        if !terminal {
            return Display::Lines;
        }
        let bar = indicatif::ProgressBar::new(0);
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} written  {msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        Display::Bar(bar)
    }

    fn every(&self) -> Duration {
        match self {
            Display::Bar(_) => Duration::from_millis(200),
            Display::Lines => Duration::from_secs(5),
        }
    }

    fn show(&self, p: &ProgressSnapshot, elapsed: Duration) {
        let rate = p.stats.docs_written as f64 / elapsed.as_secs_f64().max(0.001);
        let pending = p
            .changes_pending
            .map_or_else(|| "?".to_string(), |n| n.to_string());
        match self {
            Display::Bar(bar) => {
                bar.set_length(p.stats.docs_written + p.changes_pending.unwrap_or(0));
                bar.set_position(p.stats.docs_written);
                bar.set_message(format!(
                    "read {}  pending {pending}  {rate:.0} docs/s",
                    p.stats.docs_read
                ));
            }
            Display::Lines => println!(
                "progress: {} docs read, {} written, {pending} changes pending, {rate:.0} docs/s",
                p.stats.docs_read, p.stats.docs_written
            ),
        }
    }

    fn finish(&self) {
        if let Display::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(source: &str, target: &str) -> ReplicateArgs {
        ReplicateArgs {
            source: source.into(),
            target: target.into(),
            continuous: false,
            create_target: false,
            doc_ids: Vec::new(),
            selector: None,
        }
    }

    #[test]
    fn peers_must_be_urls_and_errors_hide_passwords() {
        let err = args("mydb", "http://h/db")
            .spec(&SpecDefaults::default())
            .unwrap_err();
        assert!(err.starts_with("SOURCE must be a database URL"), "{err}");
        assert!(
            args("http://a:b@h/db", "http://h/db2")
                .spec(&SpecDefaults::default())
                .is_ok()
        );
        assert_eq!(redact("http://u:secret@h:1/db"), "http://u:*****@h:1/db");
    }

    #[test]
    fn filters_become_the_spec_filter() {
        let mut a = args("http://h/a", "http://h/b");
        a.doc_ids = vec!["x".into(), "y".into()];
        let spec = a.spec(&SpecDefaults::default()).unwrap();
        assert_eq!(
            spec.filter,
            replicator::ChangesFilter::DocIds(vec!["x".into(), "y".into()])
        );
        let mut a = args("http://h/a", "http://h/b");
        a.selector = Some("{\"type\": \"post\"".into());
        assert!(
            a.spec(&SpecDefaults::default())
                .unwrap_err()
                .contains("--selector")
        );
    }
}
