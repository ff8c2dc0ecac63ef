//! `recliner dump URL|DB [--output FILE]`.

use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};

use super::format;
use super::peer::Peer;

/// Options of `recliner dump`.
#[derive(Debug, Clone, clap::Args)]
pub struct DumpArgs {
    /// The database: a URL (http://user:pass@host:5984/db) or the name of
    /// a database in the data folder (only while no server uses it)
    pub source: String,
    /// Write the backup to this file instead of standard output; an
    /// interrupted dump to a file resumes where it stopped when run again
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Where an interrupted dump to `file` stopped: the sequence after its
/// last complete line.
fn progress_file(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".progress");
    PathBuf::from(name)
}

/// Runs the command; the process exit status.
pub async fn dump(args: DumpArgs, config: &crate::config::Config) -> std::process::ExitCode {
    match run(&args, config).await {
        Ok(count) => {
            eprintln!("recliner dump: {count} document revisions written");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("recliner dump: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: &DumpArgs, config: &crate::config::Config) -> Result<u64, String> {
    let source = Peer::open(&args.source, config, false).await?;
    let (mut out, mut since): (Box<dyn Write>, Option<String>) = match &args.output {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            writeln!(out, "{}", format::header()).map_err(|e| e.to_string())?;
            (Box::new(out), None)
        }
        Some(path) => {
            let (file, since) = open_output(path)?;
            (Box::new(file), since)
        }
    };
    let total = source.doc_total().await?;
    let mut progress = super::Progress::new("documents dumped", total);
    let mut written = 0u64;
    let mut docs_seen = 0u64;
    loop {
        let page = source.changes(since.as_deref()).await?;
        if page.ids.is_empty() {
            break;
        }
        docs_seen += page.ids.len() as u64;
        let mut docs = source.leaves(page.ids).await?;
        docs.iter_mut()
            .for_each(format::couchbackup_attachment_names);
        written += docs.len() as u64;
        let line = ejson::to_string_of(&docs).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| format!("cannot write the backup: {e}"))?;
        out.flush()
            .map_err(|e| format!("cannot write the backup: {e}"))?;
        if let Some(path) = &args.output {
            // After the line is out: a crash between the two writes the
            // batch again on resume, which loading takes as it is.
            std::fs::write(progress_file(path), &page.last_seq)
                .map_err(|e| format!("cannot record progress: {e}"))?;
        }
        since = Some(page.last_seq);
        progress.advance(docs_seen, total);
    }
    progress.finish();
    drop(out);
    if let Some(path) = &args.output {
        let _ = std::fs::remove_file(progress_file(path));
    }
    eprintln!("recliner dump: {} backed up", source.display());
    source.close().await;
    Ok(written)
}

/// Opens the output file: a new one with the header, or an interrupted
/// one (its progress file is beside it) cut back to its last complete line
/// and continued after a resume marker, as couchbackup resumes.
fn open_output(path: &Path) -> Result<(std::fs::File, Option<String>), String> {
    let progress = progress_file(path);
    let cannot = |e: std::io::Error| format!("{}: {e}", path.display());
    match std::fs::read_to_string(&progress) {
        Ok(since) if path.exists() => {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(cannot)?;
            let mut reader = std::io::BufReader::new(&file);
            let mut complete = 0u64;
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = reader.read_until(b'\n', &mut line).map_err(cannot)?;
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                complete += n as u64;
            }
            drop(reader);
            file.set_len(complete).map_err(cannot)?;
            file.seek(std::io::SeekFrom::End(0)).map_err(cannot)?;
            writeln!(file, "{}", format::resume_line()).map_err(cannot)?;
            eprintln!("recliner dump: resuming {}", path.display());
            Ok((file, Some(since.trim().to_string())))
        }
        _ if path.exists() => Err(format!(
            "{} exists and is a finished backup: remove it or choose another file",
            path.display()
        )),
        _ => {
            let mut file = std::fs::File::create(path).map_err(cannot)?;
            writeln!(file, "{}", format::header()).map_err(cannot)?;
            Ok((file, None))
        }
    }
}
