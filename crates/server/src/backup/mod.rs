//! `recliner dump` and `recliner load`: backups in the line-delimited JSON
//! format of `@cloudant/couchbackup`, so backups move between the two
//! tools. A backup is a header line, then one JSON array of documents per
//! line, each document with its `_revisions` history and its attachments
//! inline; every leaf of a document is kept (conflicts and deleted
//! leaves), as couchbackup's `_bulk_get` by id keeps them.
//!
//! A peer is a database URL or, when no server runs on the data folder, a
//! database name in it.

mod dump;
mod format;
mod load;
mod peer;

pub use dump::{DumpArgs, dump};
pub use load::{LoadArgs, load};

/// A bar on a terminal, a line every few seconds elsewhere.
pub(crate) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    verb: &'static str,
    last_line: std::time::Instant,
}

impl Progress {
    pub(crate) fn new(verb: &'static str, total: u64) -> Progress {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {msg} ({per_sec})",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(verb);
            bar
        });
        Progress {
            bar,
            verb,
            last_line: std::time::Instant::now(),
        }
    }

    pub(crate) fn advance(&mut self, done: u64, total: u64) {
        match &self.bar {
            Some(bar) => {
                bar.set_length(total.max(done));
                bar.set_position(done);
            }
            None if self.last_line.elapsed() >= std::time::Duration::from_secs(5) => {
                self.last_line = std::time::Instant::now();
                eprintln!("{}: {done} of about {total}", self.verb);
            }
            None => {}
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
