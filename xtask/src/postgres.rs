//! A throw-away PostgreSQL cluster for the tests of the PostgreSQL backend:
//! its own data folder and port, started with the distribution's `initdb`
//! and `pg_ctl`, stopped and removed when dropped. For tests it does not
//! fsync; for benchmarks it does, as the servers it is compared with.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable the tests read the cluster's URL from.
pub const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Set (by CI) when the PostgreSQL tests must run: no cluster is an error.
pub const REQUIRE_VAR: &str = "RECLINER_REQUIRE_POSTGRES";

pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Run as the `postgres` user (PostgreSQL refuses to run as root).
    as_postgres: bool,
}

/// Where the server's programs are: beside `initdb` on the PATH, or the
/// newest of Debian's `/usr/lib/postgresql/<version>/bin`.
fn find_bin() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

impl Postgres {
    /// Starts a cluster, or `None` when PostgreSQL is not installed;
    /// `durable`: every commit fsynced (PostgreSQL's defaults).
    pub fn start(durable: bool) -> Result<Option<Postgres>, String> {
        let Some(bin) = find_bin() else {
            return Ok(None);
        };
        let port = crate::couchdb::free_port()?;
        let dir = std::env::temp_dir().join(format!("recliner-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let as_postgres = is_root();
        let cluster = Postgres {
            dir,
            bin,
            port,
            as_postgres,
        };
        if as_postgres {
            cluster.checked(
                Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(&cluster.dir),
            )?;
        }
        let data = cluster.dir.join("data");
        let mut initdb = cluster.command("initdb");
        initdb.arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "recliner",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]);
        cluster.checked(&mut initdb)?;
        let tuning = if durable {
            ""
        } else {
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        };
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=1000{tuning}",
            cluster.dir.display()
        );
        let mut start = cluster.command("pg_ctl");
        start
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(cluster.dir.join("server.log"))
            .args(["-w", "-o", &options, "start"]);
        cluster.checked(&mut start)?;
        eprintln!("xtask: PostgreSQL for the tests at {}", cluster.url());
        Ok(Some(cluster))
    }

    /// The server's process id (its `postmaster.pid`), for pinning it to a
    /// core in benchmarks.
    pub fn server_pid(&self) -> Option<u32> {
        let file = std::fs::read_to_string(self.dir.join("data").join("postmaster.pid")).ok()?;
        file.lines().next()?.trim().parse().ok()
    }

    pub fn url(&self) -> String {
        format!("postgres://recliner@127.0.0.1:{}/postgres", self.port)
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn checked(&self, cmd: &mut Command) -> Result<(), String> {
        let out = cmd
            .current_dir(&self.dir)
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?} failed: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let mut stop = self.command("pg_ctl");
        stop.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"]);
        if let Err(e) = self.checked(&mut stop) {
            eprintln!("xtask: stopping the tests' PostgreSQL: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
