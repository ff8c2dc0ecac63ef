//! `recliner load FILE URL|DB`.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::format::{self, Line};
use super::peer::{BATCH, Peer};

/// Options of `recliner load`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// A backup written by `recliner dump` or by couchbackup
    pub file: PathBuf,
    /// The database to load it into, created if missing: a URL or the name
    /// of a database in the data folder (only while no server uses it)
    pub target: String,
}

/// How far an interrupted load of `file` got: the target and the lines done.
fn progress_file(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".loaded");
    PathBuf::from(name)
}

/// Runs the command; the process exit status.
pub async fn load(args: LoadArgs, config: &crate::config::Config) -> std::process::ExitCode {
    match run(&args, config).await {
        Ok((written, 0)) => {
            eprintln!("recliner load: {written} document revisions loaded");
            std::process::ExitCode::SUCCESS
        }
        Ok((written, refused)) => {
            eprintln!(
                "recliner load: {written} document revisions loaded, {refused} refused by the target"
            );
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("recliner load: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: &LoadArgs, config: &crate::config::Config) -> Result<(u64, u64), String> {
    let file =
        std::fs::File::open(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let target = Peer::open(&args.target, config, true).await?;
    // A load of the same file into the same target that was interrupted
    // skips the lines it finished (loading them again would be harmless,
    // only slower).
    let progress_path = progress_file(&args.file);
    let done_lines = std::fs::read_to_string(&progress_path)
        .ok()
        .and_then(|text| {
            let (who, lines) = text.trim().rsplit_once(' ')?;
            (who == target.display()).then(|| lines.parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut progress = super::Progress::new("bytes loaded", size);
    let mut reader = std::io::BufReader::new(file);
    let (mut written, mut refused, mut read_bytes) = (0u64, 0u64, 0u64);
    let mut text = String::new();
    let mut number = 0;
    loop {
        text.clear();
        let n = reader
            .read_line(&mut text)
            .map_err(|e| format!("{}: {e}", args.file.display()))?;
        if n == 0 {
            break;
        }
        number += 1;
        read_bytes += n as u64;
        if number <= done_lines {
            continue;
        }
        let mut docs = match format::parse_line(number, &text)? {
            Line::Docs(docs) => docs,
            Line::Nothing => continue,
        };
        docs.iter_mut().for_each(format::couchdb_attachment_names);
        for chunk in docs.chunks(BATCH) {
            let (bad, first) = target.write(chunk.to_vec()).await?;
            written += (chunk.len() - bad) as u64;
            refused += bad as u64;
            if let Some(reason) = first {
                eprintln!("recliner load: refused: {reason}");
            }
        }
        std::fs::write(&progress_path, format!("{} {number}", target.display()))
            .map_err(|e| format!("cannot record progress: {e}"))?;
        progress.advance(read_bytes, size);
    }
    progress.finish();
    let _ = std::fs::remove_file(&progress_path);
    target.close().await;
    Ok((written, refused))
}
