//! `AuthSession` cookies in CouchDB's format, so a session started on one
//! node is understood by another sharing the secret: base64url of
//! `NAME:HEXTIME:MAC`, where MAC is HMAC-SHA256 (SHA-1 also accepted) of
//! `NAME:HEXTIME` keyed by the server secret followed by the user's salt.
//! A new password means a new salt, which ends every session of the user.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use subtle::ConstantTimeEq;

/// The cookie's name, as CouchDB's clients expect it.
pub const COOKIE_NAME: &str = "AuthSession";

/// What an `AuthSession` value claims, before it is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionClaim {
    pub name: String,
    /// Seconds since the Unix epoch when the cookie was issued.
    pub issued: u64,
    hex_time: String,
    mac: Vec<u8>,
}

/// Why a cookie value could not even be read (CouchDB: 400 "Malformed
/// AuthSession cookie. Please clear your cookies.").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed;

/// An HMAC of `message`; HMAC takes keys of any length, so it cannot fail.
fn mac<M: Mac + KeyInit>(key: &[u8], message: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = <M as Mac>::new_from_slice(key) else {
        return Vec::new();
    };
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

fn mac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    mac::<Hmac<sha2::Sha256>>(key, message)
}

fn mac_sha1(key: &[u8], message: &[u8]) -> Vec<u8> {
    mac::<Hmac<sha1::Sha1>>(key, message)
}

/// Whether `token` (hex) is the HMAC-SHA256 (or SHA-1) of `name` with the
/// secret: how CouchDB's proxy authentication proves a proxy's word.
pub fn proxy_token_matches(secret: &str, name: &str, token: &str) -> bool {
    let Some(given) = decode_hex(token.trim()) else {
        return false;
    };
    let expected = match given.len() {
        32 => mac_sha256(secret.as_bytes(), name.as_bytes()),
        20 => mac_sha1(secret.as_bytes(), name.as_bytes()),
        _ => return false,
    };
    bool::from(expected.ct_eq(&given))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The token a proxy sends for `name` (hex HMAC-SHA256 with the secret).
pub fn proxy_token(secret: &str, name: &str) -> String {
    crate::password::hex(&mac_sha256(secret.as_bytes(), name.as_bytes()))
}

/// A cookie value for `name`, issued at `now` (seconds since the epoch).
pub fn sign(secret: &str, salt: &str, name: &str, now: u64) -> String {
    let data = format!("{name}:{now:X}");
    let key = [secret.as_bytes(), salt.as_bytes()].concat();
    let mut raw = data.into_bytes();
    let mac = mac_sha256(&key, &raw);
    raw.push(b':');
    raw.extend_from_slice(&mac);
    URL_SAFE_NO_PAD.encode(raw)
}

/// Reads a cookie value without trusting it.
pub fn parse(value: &str) -> Result<SessionClaim, Malformed> {
    let raw = URL_SAFE_NO_PAD
        .decode(value.trim_end_matches('=').as_bytes())
        .map_err(|_| Malformed)?;
    let mut parts = raw.splitn(3, |b| *b == b':');
    let (Some(name), Some(time), Some(mac)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Malformed);
    };
    let name = String::from_utf8(name.to_vec()).map_err(|_| Malformed)?;
    let hex_time = String::from_utf8(time.to_vec()).map_err(|_| Malformed)?;
    // A time that is not hex is not malformed to CouchDB, just never valid.
    let issued = u64::from_str_radix(&hex_time, 16).unwrap_or(0);
    Ok(SessionClaim {
        name,
        issued,
        hex_time,
        mac: mac.to_vec(),
    })
}

impl SessionClaim {
    /// True when the MAC is the server's for this user's salt (in constant time).
    pub fn is_signed_by(&self, secret: &str, salt: &str) -> bool {
        let data = format!("{}:{}", self.name, self.hex_time);
        let key = [secret.as_bytes(), salt.as_bytes()].concat();
        let expected = match self.mac.len() {
            32 => mac_sha256(&key, data.as_bytes()),
            20 => mac_sha1(&key, data.as_bytes()),
            _ => return false,
        };
        bool::from(expected.ct_eq(&self.mac))
    }

    /// Seconds left before the session ends (`None` once it has).
    pub fn time_left(&self, now: u64, timeout: u64) -> Option<u64> {
        let end = self.issued.checked_add(timeout)?;
        (now < end).then(|| end - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_couchdb_cookie_reads_as_couchdb_wrote_it() {
        // Issued by Apache CouchDB 3.5 to "adm".
        let claim = parse("YWRtOjZCMDRBMzU3OqDqiGla8fyKOglw4SDuNWYpbLOxl_KAP69CsTZXfTm-").unwrap();
        assert_eq!(claim.name, "adm");
        assert_eq!(claim.issued, 0x6B04A357);
        assert_eq!(claim.mac.len(), 32);
    }

    #[test]
    fn sessions_expire_and_are_bound_to_secret_and_salt() {
        let cookie = sign("s3cret", "salt1", "bob", 1000);
        let claim = parse(&cookie).unwrap();
        assert!(claim.is_signed_by("s3cret", "salt1"));
        assert!(
            !claim.is_signed_by("s3cret", "salt2"),
            "a new password ends it"
        );
        assert!(
            !claim.is_signed_by("other", "salt1"),
            "another server's secret"
        );
        assert_eq!(claim.time_left(1000, 600), Some(600));
        assert_eq!(claim.time_left(1599, 600), Some(1));
        assert_eq!(claim.time_left(1600, 600), None);
    }

    #[test]
    fn garbage_is_malformed_and_a_forged_name_fails() {
        assert_eq!(parse("%%%"), Err(Malformed));
        assert_eq!(parse(&URL_SAFE_NO_PAD.encode("no-colons")), Err(Malformed));
        let cookie = sign("k", "s", "bob", 5);
        let mut raw = URL_SAFE_NO_PAD.decode(cookie).unwrap();
        raw[0] = b'r'; // "rob"
        let forged = parse(&URL_SAFE_NO_PAD.encode(raw)).unwrap();
        assert_eq!(forged.name, "rob");
        assert!(!forged.is_signed_by("k", "s"));
    }

    #[test]
    fn proxy_tokens_prove_the_name_with_the_secret() {
        let token = proxy_token("s3cret", "bob");
        assert!(proxy_token_matches("s3cret", "bob", &token));
        assert!(proxy_token_matches("s3cret", "bob", &token.to_uppercase()));
        assert!(!proxy_token_matches("s3cret", "eve", &token));
        assert!(!proxy_token_matches("other", "bob", &token));
        assert!(!proxy_token_matches("s3cret", "bob", "zz"));
    }

    proptest! {
        #[test]
        fn any_signed_cookie_verifies_and_any_changed_byte_does_not(
            name in "[^:]{1,20}", secret in ".{1,20}", salt in "[0-9a-f]{0,32}",
            now in 0u64..u64::MAX / 2, flip in 0usize..1000,
        ) {
            let cookie = sign(&secret, &salt, &name, now);
            let claim = parse(&cookie).unwrap();
            prop_assert_eq!(&claim.name, &name);
            prop_assert_eq!(claim.issued, now);
            prop_assert!(claim.is_signed_by(&secret, &salt));
            let mut raw = URL_SAFE_NO_PAD.decode(&cookie).unwrap();
            let at = flip % raw.len();
            raw[at] ^= 0x01;
            if let Ok(changed) = parse(&URL_SAFE_NO_PAD.encode(&raw)) {
                prop_assert!(!changed.is_signed_by(&secret, &salt));
            }
        }
    }
}
