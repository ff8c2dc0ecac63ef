//! Apache CouchDB 3.5, the reference, for the tests and benchmarks that
//! compare with it: started from `../shared/couchdb/couchdb.sh` beside the
//! checkout when it is there, stopped when the task ends (also on failure).

use std::path::PathBuf;
use std::process::Command;

/// The environment variable that hands CouchDB's URL (with its admin's
/// credentials) to the tests.
pub const URL_VAR: &str = "COUCHDB_URL";

/// A running instance; dropping it stops the instance.
pub struct CouchDb {
    script: PathBuf,
    dir: PathBuf,
    url: String,
}

impl CouchDb {
    /// Starts an instance on a free loopback port, or says why not: `None`
    /// when the release is not beside the checkout (the tests that need
    /// CouchDB then skip themselves).
    pub fn start(root: &std::path::Path, label: &str) -> Result<Option<CouchDb>, String> {
        let script = root
            .join("..")
            .join("shared")
            .join("couchdb")
            .join("couchdb.sh");
        if !script.is_file() {
            return Ok(None);
        }
        let port = free_port()?;
        let dir = root
            .join("target")
            .join("couchdb")
            .join(format!("{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        eprintln!("xtask: starting CouchDB 3.5 on 127.0.0.1:{port}");
        let started = Command::new("bash")
            .arg(&script)
            .args(["start", &port.to_string()])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        // From here on the instance is stopped when this value is dropped.
        let mut couchdb = CouchDb {
            script,
            dir,
            url: String::new(),
        };
        if !started.status.success() {
            return Err(format!(
                "CouchDB did not start: {}",
                String::from_utf8_lossy(&started.stderr).trim()
            ));
        }
        let url = Command::new("bash")
            .arg(&couchdb.script)
            .arg("url")
            .arg(&couchdb.dir)
            .output()
            .map_err(|e| format!("cannot ask CouchDB's URL: {e}"))?;
        couchdb.url = String::from_utf8_lossy(&url.stdout).trim().to_string();
        if couchdb.url.is_empty() {
            return Err("CouchDB started but its URL is unknown".into());
        }
        Ok(Some(couchdb))
    }

    /// The base URL, with the admin's credentials.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for CouchDb {
    fn drop(&mut self) {
        eprintln!("xtask: stopping CouchDB");
        let stopped = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .status();
        if !matches!(stopped, Ok(status) if status.success()) {
            eprintln!(
                "xtask: CouchDB may still run (its folder: {})",
                self.dir.display()
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nothing listens on (the OS's pick, released at once).
pub(crate) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

/// `text` with the password of every URL in it replaced by `***`, for
/// showing commands and their environment.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '"' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..colon]);
                out.push_str(":***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_hidden() {
        assert_eq!(
            redact(r#"COUCHDB_URL="http://adm:pass@127.0.0.1:5984" x"#),
            r#"COUCHDB_URL="http://adm:***@127.0.0.1:5984" x"#
        );
        assert_eq!(
            redact("a http://127.0.0.1:1/x b https://u:p:q@h/ c"),
            "a http://127.0.0.1:1/x b https://u:***@h/ c"
        );
        assert_eq!(redact("no url"), "no url");
    }
}
