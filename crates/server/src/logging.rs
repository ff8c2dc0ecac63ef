//! Where and how the server logs: standard error or a file rotated by
//! size (`--log-file`), lines for people or JSON for collectors, and the
//! request log either as fields or as lines of the combined log format
//! that access-log processors read.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::config::{Config, LogFormat, RequestLogFormat};

/// The request log's target, as the HTTP layer names it.
const REQUEST_TARGET: &str = "recliner::http";

/// Caps the PostgreSQL client's own log (see [`init`]).
const QUIET_CLIENT: &str = "tokio_postgres=info";

pub fn init(config: &Config) -> Result<(), String> {
    let filter = EnvFilter::try_new(&config.log_level)
        .map_err(|e| format!("invalid configuration: setting `log_level`: {e}"))?
        // The PostgreSQL client logs every statement's parameters at debug
        // level: documents, and secrets the store shares. Never shown.
        .add_directive(QUIET_CLIENT.parse().map_err(|e| format!("{e}"))?);
    let to_file = !config.log_file.as_os_str().is_empty();
    // Colours only on a terminal: log files and collectors get plain text.
    let ansi = !to_file && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let combined = config.log_request_format == RequestLogFormat::Combined;
    let writer = if to_file {
        let file = RotatingFile::open(&config.log_file, config.log_max_size, config.log_max_files)
            .map_err(|e| {
                format!(
                    "cannot open the log file {}: {e}",
                    config.log_file.display()
                )
            })?;
        LogWriter::File(std::sync::Arc::new(file))
    } else {
        LogWriter::Stderr
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let result = match config.log_format {
        LogFormat::Human => {
            let inner = tracing_subscriber::fmt::format().with_ansi(ansi);
            builder
                .event_format(RequestLines { inner, combined })
                .try_init()
        }
        LogFormat::Json => {
            let inner = tracing_subscriber::fmt::format().json();
            builder
                .json()
                .event_format(RequestLines { inner, combined })
                .try_init()
        }
    };
    result.map_err(|e| format!("cannot set up logging: {e}"))
}

/// Standard error, or the rotating file.
#[derive(Clone)]
enum LogWriter {
    Stderr,
    File(std::sync::Arc<RotatingFile>),
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match self {
            LogWriter::Stderr => Box::new(std::io::stderr()),
            LogWriter::File(file) => Box::new(FileWriter(file)),
        }
    }
}

/// A log file that, past `max_size` bytes, is renamed `NAME.1` (the older
/// ones shift to `NAME.2`...; past `keep` they are deleted) and begun anew.
pub struct RotatingFile {
    path: PathBuf,
    max_size: u64,
    keep: usize,
    state: Mutex<Open>,
}

struct Open {
    file: File,
    size: u64,
}

impl RotatingFile {
    pub fn open(path: &Path, max_size: u64, keep: usize) -> std::io::Result<RotatingFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max_size: max_size.max(1),
            keep,
            state: Mutex::new(Open { file, size }),
        })
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one whole event (never split across two files).
    fn write_event(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut open = self.lock();
        if open.size > 0 && open.size + bytes.len() as u64 > self.max_size {
            self.rotate(&mut open)?;
        }
        open.file.write_all(bytes)?;
        open.size += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&self, open: &mut Open) -> std::io::Result<()> {
        if self.keep == 0 {
            open.file.set_len(0)?;
            open.size = 0;
            return Ok(());
        }
        let _ = std::fs::remove_file(self.numbered(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.numbered(1))?;
        open.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        open.size = 0;
        Ok(())
    }
}

/// Writes to the rotating file; the formatter hands each event over in
/// one write, so a rotation never splits an event.
struct FileWriter<'a>(&'a RotatingFile);

impl Write for FileWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_event(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The request log as combined-log-format lines when asked; every other
/// event as the inner format writes it.
struct RequestLines<F> {
    inner: F,
    combined: bool,
}

impl<S, N, F> FormatEvent<S, N> for RequestLines<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        if !self.combined || event.metadata().target() != REQUEST_TARGET {
            return self.inner.format_event(ctx, writer, event);
        }
        let mut fields = RequestFields::default();
        event.record(&mut fields);
        writeln!(
            writer,
            "{}",
            fields.combined_line(std::time::SystemTime::now())
        )
    }
}

/// The fields of one request event.
#[derive(Default)]
struct RequestFields {
    method: String,
    path: String,
    query: Option<String>,
    version: String,
    status: u64,
    remote: Option<String>,
    user: Option<String>,
    bytes: Option<u64>,
    user_agent: Option<String>,
    referer: Option<String>,
}

impl Visit for RequestFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let value = value.to_string();
        match field.name() {
            "query" => self.query = Some(value),
            "remote" => self.remote = Some(value),
            "user" => self.user = Some(value),
            "user_agent" => self.user_agent = Some(value),
            "referer" => self.referer = Some(value),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "status" => self.status = value,
            "bytes" => self.bytes = Some(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "method" => self.method = format!("{value:?}"),
            "path" => self.path = format!("{value:?}"),
            "version" => self.version = format!("{value:?}"),
            _ => {}
        }
    }
}

impl RequestFields {
    /// `host ident user [time] "request" status bytes "referer" "agent"`,
    /// Apache's combined log format.
    fn combined_line(&self, now: std::time::SystemTime) -> String {
        let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let quoted = |v: &Option<String>| match v {
            Some(text) => text.replace('\\', "\\\\").replace('"', "\\\""),
            None => "-".into(),
        };
        let mut target = self.path.clone();
        if let Some(query) = &self.query {
            target.push('?');
            target.push_str(query);
        }
        let mut line = String::new();
        let _ = write!(
            line,
            "{} - {} [{}] \"{} {} {}\" {} {} \"{}\" \"{}\"",
            dash(&self.remote),
            // A name with spaces would shift every field after it.
            dash(&self.user).replace(' ', "%20"),
            wire::time::access_log_date(now),
            self.method,
            target.replace('"', "%22"),
            self.version,
            self.status,
            self.bytes
                .map_or_else(|| "-".to_string(), |b| b.to_string()),
            quoted(&self.referer),
            quoted(&self.user_agent),
        );
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_one_combined_line() {
        let fields = RequestFields {
            method: "GET".into(),
            path: "/db/doc".into(),
            query: Some("rev=1-a".into()),
            version: "HTTP/1.1".into(),
            status: 200,
            remote: Some("127.0.0.1".into()),
            user: Some("bob".into()),
            bytes: Some(42),
            user_agent: Some("curl/8 \"x\"".into()),
            referer: None,
        };
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_509_600);
        assert_eq!(
            fields.combined_line(at),
            r#"127.0.0.1 - bob [24/Nov/2026:08:40:00 +0000] "GET /db/doc?rev=1-a HTTP/1.1" 200 42 "-" "curl/8 \"x\"""#
        );
    }

    #[test]
    fn files_rotate_by_size_and_keep_so_many() {
        let dir = std::env::temp_dir().join(format!("recliner-log-{}", uuid::Uuid::new_v4()));
        let path = dir.join("recliner.log");
        let file = RotatingFile::open(&path, 100, 2).unwrap();
        for i in 0..12 {
            file.write_event(format!("event {i:02} {}\n", "x".repeat(30)).as_bytes())
                .unwrap();
        }
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let current = read(path.clone());
        assert!(current.len() <= 100, "{current}");
        assert!(current.ends_with(&format!("event 11 {}\n", "x".repeat(30))));
        assert!(
            read(file.numbered(1)).contains("event 08"),
            "{}",
            read(file.numbered(1))
        );
        assert!(file.numbered(2).exists());
        assert!(!file.numbered(3).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
