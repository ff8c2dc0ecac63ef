//! Who administers the server, decided at startup as CouchDB 3 does it but
//! secure by default: admins come from the configuration file's `[admins]`
//! (plain-text passwords there are replaced by their hash, and the file
//! rewritten), from `--admin`/`RECLINER_ADMIN`, or, on a first start with
//! none, a generated one whose password is printed once. Only an explicit
//! opt-in runs the server as an admin party.

use std::path::{Path, PathBuf};

use anyhow::Context;
use auth::Credentials;

use crate::config::Config;

/// The name of the admin created on a first start without one.
pub const GENERATED_ADMIN: &str = "admin";

/// The file holding the session-cookie secret when none is configured.
const SECRET_FILE: &str = "auth_secret";

/// The authentication the server starts with.
#[derive(Debug)]
pub struct Setup {
    pub admins: Vec<(String, Credentials)>,
    /// The admin given with `--admin` or `RECLINER_ADMIN`, which the
    /// configuration file and API do not hold.
    pub explicit: Option<(String, Credentials)>,
    pub secret: String,
    /// Name and password of an admin created now (to be shown once).
    pub generated: Option<(String, String)>,
    /// The file the generated admin or hashed passwords were written to.
    pub written: Option<PathBuf>,
}

/// `NAME:PASSWORD` from `--admin` or `RECLINER_ADMIN`.
pub fn parse_admin_arg(value: &str) -> Result<(String, String), String> {
    match value.split_once(':') {
        Some((name, password)) if !name.is_empty() && !password.is_empty() => {
            Ok((name.to_string(), password.to_string()))
        }
        _ => Err("invalid configuration: setting `admin`: expected NAME:PASSWORD".into()),
    }
}

/// Resolves the admins (hashing plain-text ones into `config_file`) and
/// the cookie secret.
pub fn prepare(
    config: &Config,
    config_file: &Path,
    explicit: Option<(String, String)>,
) -> anyhow::Result<Setup> {
    let iterations = config.password_iterations;
    let mut admins = Vec::new();
    let mut rehashed = Vec::new();
    for (name, value) in &config.admins {
        let creds = match Credentials::parse_admin(value)
            .map_err(|e| anyhow::anyhow!("invalid configuration: admin {name:?}: {e}"))?
        {
            Some(creds) => creds,
            None => {
                let creds = Credentials::hash(value, iterations);
                rehashed.push((name.clone(), creds.to_admin_string()));
                creds
            }
        };
        admins.push((name.clone(), creds));
    }
    let mut written = None;
    if !rehashed.is_empty() {
        match write_admins(config_file, &rehashed) {
            Ok(()) => written = Some(config_file.to_path_buf()),
            Err(e) => tracing::warn!(
                file = %config_file.display(),
                error = %format!("{e:#}"),
                "cannot write the hashed admin passwords back; they stay in clear in the file"
            ),
        }
    }
    let explicit = explicit.map(|(name, password)| {
        admins.retain(|(n, _)| *n != name);
        let creds = Credentials::hash(&password, iterations);
        admins.push((name.clone(), creds.clone()));
        (name, creds)
    });
    let mut generated = None;
    if admins.is_empty() && !config.insecure_admin_party {
        let password = random_password();
        let creds = Credentials::hash(&password, iterations);
        write_admins(
            config_file,
            &[(GENERATED_ADMIN.to_string(), creds.to_admin_string())],
        )
        .with_context(|| {
            format!(
                "no admin is configured and the generated one cannot be saved in {}",
                config_file.display()
            )
        })?;
        written = Some(config_file.to_path_buf());
        admins.push((GENERATED_ADMIN.to_string(), creds));
        generated = Some((GENERATED_ADMIN.to_string(), password));
    }
    let secret = match &config.secret {
        Some(secret) if !secret.is_empty() => secret.clone(),
        _ => stored_secret(&config.data_dir)?,
    };
    Ok(Setup {
        admins,
        explicit,
        secret,
        generated,
        written,
    })
}

/// The admins of a running server's configuration (hashes, as `_config`
/// keeps them) and the command line's.
pub fn admins_of(
    config: &Config,
    explicit: Option<&(String, Credentials)>,
) -> Vec<(String, Credentials)> {
    let mut admins: Vec<(String, Credentials)> = config
        .admins
        .iter()
        .filter_map(|(name, value)| match Credentials::parse_admin(value) {
            Ok(Some(creds)) => Some((name.clone(), creds)),
            _ => {
                tracing::warn!(admin = %name, "an admin without a password hash is ignored");
                None
            }
        })
        .collect();
    if let Some((name, creds)) = explicit {
        admins.retain(|(n, _)| n != name);
        admins.push((name.clone(), creds.clone()));
    }
    admins
}

/// 24 random characters from two v4 uuids (244 random bits, base64url).
fn random_password() -> String {
    use base64::Engine;
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    text.chars().take(24).collect()
}

/// Sets `[admins] name = hash` entries in a TOML file (created if absent),
/// keeping everything else in it as it was.
fn write_admins(file: &Path, entries: &[(String, String)]) -> anyhow::Result<()> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("parsing {}", file.display()))?;
    let admins = doc
        .entry("admins")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .context("`admins` in the configuration file is not a table")?;
    for (name, hash) in entries {
        admins.insert(name, toml_edit::value(hash.as_str()));
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_private(file, doc.to_string().as_bytes())
}

/// Writes a file only its owner can read, through a temporary file so a
/// crash never leaves half of it.
pub(crate) fn write_private(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = file.with_extension("tmp");
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut out = options
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        out.write_all(bytes)?;
        out.sync_all()?;
    }
    std::fs::rename(&tmp, file).with_context(|| format!("replacing {}", file.display()))?;
    Ok(())
}

/// The cookie secret kept in the data folder, made on first use.
fn stored_secret(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join(SECRET_FILE);
    match std::fs::read_to_string(&path) {
        Ok(secret) if !secret.trim().is_empty() => return Ok(secret.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let secret = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    write_private(&path, secret.as_bytes())?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "recliner-security-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn plain_passwords_are_hashed_into_the_file_keeping_the_rest() {
        let dir = temp_dir();
        let file = dir.join("recliner.toml");
        std::fs::write(&file, "# mine\nport = 1\n\n[admins]\nroot = \"s3cret\"\n").unwrap();
        let mut config = Config {
            data_dir: dir.clone(),
            password_iterations: 10,
            ..Config::default()
        };
        config.admins.insert("root".into(), "s3cret".into());
        let setup = prepare(&config, &file, None).unwrap();
        assert!(setup.generated.is_none());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("# mine") && text.contains("port = 1"),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("root = \"-pbkdf2:sha256-"), "{text}");
        assert!(setup.admins[0].1.verify("s3cret"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_first_start_generates_an_admin_once_and_a_party_needs_opting_in() {
        let dir = temp_dir();
        let file = dir.join("recliner.toml");
        let config = Config {
            data_dir: dir.clone(),
            password_iterations: 10,
            ..Config::default()
        };
        let setup = prepare(&config, &file, None).unwrap();
        let (name, password) = setup.generated.clone().unwrap();
        assert_eq!(name, GENERATED_ADMIN);
        assert!(password.len() >= 20);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&password));
        let reread: toml::Value = toml::from_str(&text).unwrap();
        let stored = reread["admins"]["admin"].as_str().unwrap();
        assert!(
            Credentials::parse_admin(stored)
                .unwrap()
                .unwrap()
                .verify(&password)
        );
        assert_eq!(setup.secret, prepare(&config, &file, None).unwrap().secret);

        let party = Config {
            data_dir: temp_dir(),
            insecure_admin_party: true,
            ..Config::default()
        };
        let setup = prepare(&party, &party.data_dir.join("recliner.toml"), None).unwrap();
        assert!(setup.admins.is_empty() && setup.generated.is_none());
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(&party.data_dir).unwrap();
    }

    #[test]
    fn an_explicit_admin_needs_a_name_and_a_password() {
        assert_eq!(
            parse_admin_arg("a:b:c").unwrap(),
            ("a".into(), "b:c".into())
        );
        assert!(parse_admin_arg("nopassword").is_err());
        assert!(parse_admin_arg(":x").is_err());
    }
}
