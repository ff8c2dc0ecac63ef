//! Password hashes in CouchDB's formats, so credentials move between
//! CouchDB and Recliner unchanged: server admins as `-pbkdf2:PRF-KEY,SALT,ITER`
//! strings in the configuration, users as `password_scheme`/`derived_key`/
//! `salt`/`iterations` fields of their `_users` document.

use hmac::Hmac;
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;

/// CouchDB's default number of PBKDF2 rounds (3.5's `iterations`).
pub const DEFAULT_ITERATIONS: u32 = 600_000;

/// The HMAC digest PBKDF2 runs on (CouchDB's `pbkdf2_prf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prf {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl Prf {
    /// CouchDB's names: `sha` is SHA-1.
    pub fn parse(name: &str) -> Option<Prf> {
        Some(match name {
            "sha" => Prf::Sha1,
            "sha224" => Prf::Sha224,
            "sha256" => Prf::Sha256,
            "sha384" => Prf::Sha384,
            "sha512" => Prf::Sha512,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Prf::Sha1 => "sha",
            Prf::Sha224 => "sha224",
            Prf::Sha256 => "sha256",
            Prf::Sha384 => "sha384",
            Prf::Sha512 => "sha512",
        }
    }

    /// The derived key's length: the digest's, as CouchDB asks of PBKDF2.
    fn key_len(self) -> usize {
        match self {
            Prf::Sha1 => 20,
            Prf::Sha224 => 28,
            Prf::Sha256 => 32,
            Prf::Sha384 => 48,
            Prf::Sha512 => 64,
        }
    }
}

/// PBKDF2 as CouchDB computes it: the salt's text is the salt (not its hex
/// decoding), and the key is written in lowercase hex.
pub fn pbkdf2_hex(prf: Prf, password: &[u8], salt: &[u8], iterations: u32) -> String {
    let mut key = vec![0u8; prf.key_len()];
    let rounds = iterations.max(1);
    match prf {
        Prf::Sha1 => pbkdf2::pbkdf2::<Hmac<sha1::Sha1>>(password, salt, rounds, &mut key),
        Prf::Sha224 => pbkdf2::pbkdf2::<Hmac<sha2::Sha224>>(password, salt, rounds, &mut key),
        Prf::Sha256 => pbkdf2::pbkdf2::<Hmac<sha2::Sha256>>(password, salt, rounds, &mut key),
        Prf::Sha384 => pbkdf2::pbkdf2::<Hmac<sha2::Sha384>>(password, salt, rounds, &mut key),
        Prf::Sha512 => pbkdf2::pbkdf2::<Hmac<sha2::Sha512>>(password, salt, rounds, &mut key),
    }
    // An HMAC accepts keys of any length, so this cannot fail.
    .unwrap_or_default();
    hex(&key)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A random salt as CouchDB makes them: 32 hex digits of a random uuid.
pub fn new_salt() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What a stored password is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `password_scheme: "pbkdf2"` (and admins' `-pbkdf2-` strings).
    Pbkdf2 {
        prf: Prf,
        derived_key: String,
        salt: String,
        iterations: u32,
    },
    /// CouchDB 1's `password_sha` (SHA-1 of password + salt), still accepted
    /// by CouchDB for old user documents.
    Simple { password_sha: String, salt: String },
}

/// Why a stored hash cannot be used (CouchDB answers these as 403s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashError {
    /// `pbkdf2_prf` names no digest CouchDB knows.
    InvalidPrf,
    /// `iterations` is outside the server's `min_iterations..=max_iterations`.
    IterationsOutOfRange,
}

impl Credentials {
    /// The salt, which also keys session cookies (a new password, a new salt:
    /// old cookies stop working).
    pub fn salt(&self) -> &str {
        match self {
            Credentials::Pbkdf2 { salt, .. } | Credentials::Simple { salt, .. } => salt,
        }
    }

    /// Hashes `password` for a new admin or user (PBKDF2-SHA256, a new salt).
    pub fn hash(password: &str, iterations: u32) -> Credentials {
        let salt = new_salt();
        let derived_key = pbkdf2_hex(
            Prf::Sha256,
            password.as_bytes(),
            salt.as_bytes(),
            iterations,
        );
        Credentials::Pbkdf2 {
            prf: Prf::Sha256,
            derived_key,
            salt,
            iterations,
        }
    }

    /// Checks a password in constant time (with respect to the stored key).
    pub fn verify(&self, password: &str) -> bool {
        let (computed, expected) = match self {
            Credentials::Pbkdf2 {
                prf,
                derived_key,
                salt,
                iterations,
            } => (
                pbkdf2_hex(*prf, password.as_bytes(), salt.as_bytes(), *iterations),
                derived_key,
            ),
            Credentials::Simple { password_sha, salt } => {
                use sha1::Digest;
                let mut hasher = sha1::Sha1::new();
                hasher.update(password.as_bytes());
                hasher.update(salt.as_bytes());
                (hex(&hasher.finalize()), password_sha)
            }
        };
        bool::from(
            computed
                .as_bytes()
                .ct_eq(expected.to_ascii_lowercase().as_bytes()),
        )
    }

    /// Checks the rounds against the server's bounds before any work is
    /// spent on them: a stored hash is input too.
    pub fn check(&self, min_iterations: u32, max_iterations: u32) -> Result<(), HashError> {
        match self {
            Credentials::Pbkdf2 { iterations, .. }
                if *iterations < min_iterations || *iterations > max_iterations =>
            {
                Err(HashError::IterationsOutOfRange)
            }
            _ => Ok(()),
        }
    }

    /// The admin form CouchDB writes into `[admins]`.
    pub fn to_admin_string(&self) -> String {
        match self {
            Credentials::Pbkdf2 {
                prf,
                derived_key,
                salt,
                iterations,
            } => format!("-pbkdf2:{}-{derived_key},{salt},{iterations}", prf.name()),
            Credentials::Simple { password_sha, salt } => format!("-hashed-{password_sha},{salt}"),
        }
    }

    /// Reads an `[admins]` value: `Ok(None)` for a plain-text password
    /// (which the server hashes and writes back), `Err` for a hash it
    /// cannot read.
    pub fn parse_admin(value: &str) -> Result<Option<Credentials>, String> {
        if let Some(rest) = value.strip_prefix("-hashed-") {
            let (sha, salt) = rest
                .split_once(',')
                .ok_or("a -hashed- value is HASH,SALT")?;
            return Ok(Some(Credentials::Simple {
                password_sha: sha.to_string(),
                salt: salt.to_string(),
            }));
        }
        let rest = if let Some(rest) = value.strip_prefix("-pbkdf2-") {
            Some((Prf::Sha1, rest))
        } else if let Some(rest) = value.strip_prefix("-pbkdf2:") {
            let (name, rest) = rest
                .split_once('-')
                .ok_or("a -pbkdf2: value is -pbkdf2:PRF-KEY,SALT,ITERATIONS")?;
            let prf = Prf::parse(name).ok_or_else(|| format!("unknown pbkdf2 digest {name:?}"))?;
            Some((prf, rest))
        } else {
            None
        };
        let Some((prf, rest)) = rest else {
            return Ok(None);
        };
        let mut parts = rest.splitn(3, ',');
        let (Some(key), Some(salt), Some(iterations)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("a -pbkdf2- value is KEY,SALT,ITERATIONS".into());
        };
        let iterations = iterations
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|i| *i > 0)
            .ok_or("the iterations of a -pbkdf2- value must be a positive integer")?;
        Ok(Some(Credentials::Pbkdf2 {
            prf,
            derived_key: key.to_string(),
            salt: salt.to_string(),
            iterations,
        }))
    }

    /// Reads the password fields of a `_users` document (`None` when it has
    /// none usable, e.g. no `derived_key`: nobody can log in as it).
    pub fn from_user_doc(doc: &Map<String, Value>) -> Result<Option<Credentials>, HashError> {
        let salt = doc
            .get("salt")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match doc
            .get("password_scheme")
            .and_then(Value::as_str)
            .unwrap_or("simple")
        {
            "pbkdf2" => {
                let prf = match doc.get("pbkdf2_prf") {
                    None => Prf::Sha1,
                    Some(v) => v
                        .as_str()
                        .and_then(Prf::parse)
                        .ok_or(HashError::InvalidPrf)?,
                };
                let iterations = match doc.get("iterations") {
                    None => 10_000,
                    Some(v) => v
                        .as_u64()
                        .and_then(|i| u32::try_from(i).ok())
                        .ok_or(HashError::IterationsOutOfRange)?,
                };
                let Some(derived_key) = doc.get("derived_key").and_then(Value::as_str) else {
                    return Ok(None);
                };
                Ok(Some(Credentials::Pbkdf2 {
                    prf,
                    derived_key: derived_key.to_string(),
                    salt,
                    iterations,
                }))
            }
            "simple" => {
                Ok(doc
                    .get("password_sha")
                    .and_then(Value::as_str)
                    .map(|sha| Credentials::Simple {
                        password_sha: sha.to_string(),
                        salt,
                    }))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn couchdbs_own_admin_hash_verifies() {
        // Written by Apache CouchDB 3.5 for the password "pass".
        let stored = "-pbkdf2:sha256-28c7a722b807225242dbf0d6017d82a4305597435df7658986cb798511c14dcd,1da34f7b3cd27e7d136b99ec80bfd8db,600000";
        let creds = Credentials::parse_admin(stored).unwrap().unwrap();
        assert!(creds.verify("pass"));
        assert!(!creds.verify("pasS"));
        assert_eq!(creds.to_admin_string(), stored);
    }

    #[test]
    fn couchdbs_user_document_fields_verify() {
        // A _users document written by Apache CouchDB 3.5 for "bobpw".
        let doc: Value = serde_json::json!({
            "password_scheme": "pbkdf2", "pbkdf2_prf": "sha256",
            "salt": "b30694c5a4bc69a29f96301631e47988", "iterations": 600000,
            "derived_key": "3e90befffdc61b48143e71f5a6e0bc9b74d706e3e4e3d47ee7c3d523d9af66cb"
        });
        let creds = Credentials::from_user_doc(doc.as_object().unwrap())
            .unwrap()
            .unwrap();
        assert!(creds.verify("bobpw"));
        assert!(!creds.verify("bobpw "));
    }

    #[test]
    fn pbkdf2_matches_the_rfc_6070_vector() {
        assert_eq!(
            pbkdf2_hex(Prf::Sha1, b"password", b"salt", 2),
            "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"
        );
    }

    #[test]
    fn plain_text_and_broken_admin_values_are_told_apart() {
        assert_eq!(Credentials::parse_admin("secret").unwrap(), None);
        assert!(Credentials::parse_admin("-pbkdf2-abc").is_err());
        assert!(Credentials::parse_admin("-pbkdf2:md5-a,b,1").is_err());
        assert!(Credentials::parse_admin("-pbkdf2-a,b,0").is_err());
        let old = Credentials::parse_admin("-pbkdf2-k,s,10").unwrap().unwrap();
        assert!(matches!(old, Credentials::Pbkdf2 { prf: Prf::Sha1, .. }));
    }

    #[test]
    fn a_new_hash_round_trips_through_the_admin_form() {
        let creds = Credentials::hash("correct horse", 10);
        let parsed = Credentials::parse_admin(&creds.to_admin_string())
            .unwrap()
            .unwrap();
        assert!(parsed.verify("correct horse"));
        assert!(!parsed.verify("correct horsE"));
        assert_eq!(parsed.check(1, 1000), Ok(()));
        assert_eq!(parsed.check(11, 1000), Err(HashError::IterationsOutOfRange));
    }

    #[test]
    fn user_documents_with_bad_hash_fields_are_refused_not_trusted() {
        let bad_prf = serde_json::json!({"password_scheme": "pbkdf2", "pbkdf2_prf": "md5", "derived_key": "x"});
        assert_eq!(
            Credentials::from_user_doc(bad_prf.as_object().unwrap()),
            Err(HashError::InvalidPrf)
        );
        let huge = serde_json::json!({"password_scheme": "pbkdf2", "iterations": 1e30, "derived_key": "x"});
        assert_eq!(
            Credentials::from_user_doc(huge.as_object().unwrap()),
            Err(HashError::IterationsOutOfRange)
        );
        let none = serde_json::json!({"name": "x"});
        assert_eq!(
            Credentials::from_user_doc(none.as_object().unwrap()),
            Ok(None)
        );
    }
}
