//! JWT authentication as CouchDB 3.1+ does it (`jwt_authentication_handler`):
//! a `Bearer` token signed with a configured key (`[jwt_keys]`: `hmac:KID`
//! base64 secrets, `rsa:KID`/`ec:KID` PEM public keys, `_default` when the
//! token names no `kid`), the `sub` claim as the user's name, roles from a
//! configurable claim, and the required claims checked. `exp` and `nbf` are
//! checked against the clock whenever a token carries them, required or
//! not, as CouchDB's `jwtf` checks them (give or take `leeway_seconds`).
//! Failures carry CouchDB's reasons.

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::Value;

/// How tokens are checked (CouchDB's `[jwt_keys]` and `[jwt_auth]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// `kty:kid` → key: `hmac:_default` = base64 secret, `rsa:k1` = PEM...
    pub keys: Vec<(String, String)>,
    /// Claims a token must carry (`exp` by default), as CouchDB's
    /// `[jwt_auth] required_claims` lists them: a claim's name, or
    /// `{name, "value"}` for a claim that must have that value (the list
    /// may come split at its commas: it is read joined). `exp` and `nbf`
    /// are checked against the clock whenever present, required or not.
    pub required_claims: Vec<String>,
    /// Clock skew tolerated between the token's issuer and this server:
    /// a token is taken until `exp + leeway` and from `nbf - leeway`.
    pub leeway_seconds: u64,
    /// The claim listing the user's roles (`_couchdb.roles`, one key).
    pub roles_claim_name: String,
    /// A dotted path to the roles instead (`my.app.roles`; `\.` is a dot
    /// inside a name), if set: then a token without it is refused (404).
    pub roles_claim_path: Option<String>,
}

impl Default for JwtConfig {
    fn default() -> JwtConfig {
        JwtConfig {
            keys: Vec::new(),
            required_claims: vec!["exp".into()],
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            roles_claim_name: "_couchdb.roles".into(),
            roles_claim_path: None,
        }
    }
}

/// The default [`JwtConfig::leeway_seconds`]: none, as CouchDB (a token
/// is refused the second its `exp` is reached); set it where clocks
/// disagree.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 0;

/// A refused token: 401 (expired, no subject), 400 (malformed, bad key
/// or signature) or 404 (no roles at the configured path), with CouchDB's
/// reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtError {
    Unauthorized(String),
    BadRequest(String),
    NotFound(String),
}

/// One of [`JwtConfig::required_claims`]: a claim that must be present,
/// with the value it must have when one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredClaim {
    pub name: String,
    pub value: Option<String>,
}

/// Reads CouchDB's `required_claims` text (`exp, nbf, {iss, "MyCompany"}`)
/// as CouchDB's pattern finds them: runs of lowercase letters, or
/// `{name, "value"}`; anything else between them is passed over.
pub fn parse_required_claims(text: &str) -> Vec<RequiredClaim> {
    let bytes = text.as_bytes();
    let letters = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_lowercase())
            .count()
    };
    let spaces = |from: usize| bytes[from..].iter().take_while(|b| **b == b' ').count();
    // `{name, "value"}` starting at `at`, and where it ends.
    let tuple = |at: usize| -> Option<(RequiredClaim, usize)> {
        let mut i = at + 1;
        let n = letters(i);
        if n == 0 {
            return None;
        }
        let name = &text[i..i + n];
        i += n;
        i += spaces(i);
        (bytes.get(i) == Some(&b',')).then_some(())?;
        i += 1;
        i += spaces(i);
        (bytes.get(i) == Some(&b'"')).then_some(())?;
        i += 1;
        let len = bytes[i..].iter().position(|b| *b == b'"')?;
        if len == 0 || bytes.get(i + len + 1) != Some(&b'}') {
            return None;
        }
        let claim = RequiredClaim {
            name: name.to_string(),
            value: Some(text[i..i + len].to_string()),
        };
        Some((claim, i + len + 2))
    };
    let mut claims = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{'
            && let Some((claim, end)) = tuple(i)
        {
            claims.push(claim);
            i = end;
            continue;
        }
        let n = letters(i);
        if n > 0 {
            claims.push(RequiredClaim {
                name: text[i..i + n].to_string(),
                value: None,
            });
            i += n;
        } else {
            i += 1;
        }
    }
    claims
}

/// The segments of a roles claim path: split at dots, but `\.`, which is a
/// dot inside a name.
fn path_segments(path: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                if let Some(last) = segments.last_mut() {
                    last.push('.');
                }
            }
            '.' => segments.push(String::new()),
            c => {
                if let Some(last) = segments.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    segments
}

/// The value at a roles claim path, or CouchDB's 404.
fn at_path<'v>(claims: &'v Value, path: &str) -> Result<&'v Value, JwtError> {
    path_segments(path)
        .iter()
        .try_fold(claims, |at, key| match at {
            Value::Object(members) => members
                .get(key)
                .ok_or_else(|| JwtError::NotFound(format!("missing json key: {key}"))),
            _ => Err(JwtError::NotFound("json_mismatch".into())),
        })
}

fn bad(reason: &str) -> JwtError {
    JwtError::BadRequest(reason.to_string())
}

/// The key for a token's algorithm and `kid`.
fn key_for(config: &JwtConfig, alg: Algorithm, kid: Option<&str>) -> Result<DecodingKey, JwtError> {
    use Algorithm::*;
    let kty = match alg {
        HS256 | HS384 | HS512 => "hmac",
        RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => "rsa",
        ES256 | ES384 => "ec",
        EdDSA => return Err(bad("Unknown kty")),
    };
    let encoded = configured_key(config, kty, kid)?;
    match kty {
        "hmac" => {
            use base64::Engine;
            let secret = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| bad("Not a valid key"))?;
            Ok(DecodingKey::from_secret(&secret))
        }
        // Configuration files often hold a PEM on one line with `\n`s.
        "rsa" => DecodingKey::from_rsa_pem(encoded.replace("\\n", "\n").as_bytes())
            .map_err(|_| bad("not an RSA public key")),
        _ => DecodingKey::from_ec_pem(encoded.replace("\\n", "\n").as_bytes())
            .map_err(|_| bad("not an EC public key")),
    }
}

/// The configured key of kind `kty` for a token's `kid`.
fn configured_key<'a>(
    config: &'a JwtConfig,
    kty: &str,
    kid: Option<&str>,
) -> Result<&'a str, JwtError> {
    let wanted = format!("{kty}:{}", kid.unwrap_or("_default"));
    config
        .keys
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|(_, key)| key.as_str())
        .ok_or_else(|| bad("Unknown kid"))
}

/// Checks a token and returns the user's name and roles.
pub fn authenticate(token: &str, config: &JwtConfig) -> Result<(String, Vec<String>), JwtError> {
    let required = parse_required_claims(&config.required_claims.join(","));
    let header = crate::jwt_ec::header(token).map_err(ec_refusal)?;
    let claims = match header
        .get("alg")
        .and_then(Value::as_str)
        .and_then(crate::jwt_ec::EcHash::of)
    {
        // ECDSA as CouchDB checks it (the algorithm names only the hash).
        Some(hash) => {
            let kid = header.get("kid").and_then(Value::as_str);
            let pem = configured_key(config, "ec", kid)?;
            crate::jwt_ec::verify(token, pem, hash).map_err(ec_refusal)?
        }
        None => verified_claims(token, &header, config, &required)?,
    };
    claims_user(&claims, config, &required)
}

/// An ECDSA token's refusal in CouchDB's words.
fn ec_refusal(refusal: crate::jwt_ec::EcRefusal) -> JwtError {
    use crate::jwt_ec::EcRefusal;
    bad(match refusal {
        EcRefusal::Malformed => "Malformed authentication token",
        EcRefusal::BadSignature => "Bad signature in authentication token",
        EcRefusal::NotAKey => "not an EC public key",
    })
}

/// A token's claims once the library has checked its signature (HMAC and
/// RSA keys).
fn verified_claims(
    token: &str,
    header: &Value,
    config: &JwtConfig,
    required: &[RequiredClaim],
) -> Result<Value, JwtError> {
    // The header read once (`authenticate`): its algorithm as the library
    // names them, and its key id.
    let alg: Algorithm = header
        .get("alg")
        .and_then(Value::as_str)
        .and_then(|alg| alg.parse().ok())
        .ok_or_else(|| bad("Malformed authentication token"))?;
    let kid = header.get("kid").and_then(Value::as_str);
    let key = key_for(config, alg, kid)?;
    let mut validation = Validation::new(alg);
    validation.validate_aud = false;
    // The library reads `exp` and `nbf` only as unsigned integers and
    // skips them silently otherwise (`1.9e9`, `"soon"`): they are checked
    // below, whatever their type. It checks the signature, and the
    // presence of the other claims it knows.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    let spec_claims: Vec<&str> = required
        .iter()
        .map(|c| c.name.as_str())
        .filter(|c| !matches!(*c, "exp" | "nbf"))
        .collect();
    validation.set_required_spec_claims(&spec_claims);
    let data =
        jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => JwtError::Unauthorized("exp not in future".into()),
            ErrorKind::ImmatureSignature => JwtError::Unauthorized("nbf not in past".into()),
            ErrorKind::MissingRequiredClaim(claim) => {
                JwtError::BadRequest(format!("Missing {claim} claim"))
            }
            ErrorKind::InvalidSignature
                if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) =>
            {
                bad("Bad HMAC in authentication token")
            }
            ErrorKind::InvalidSignature => bad("Bad signature in authentication token"),
            ErrorKind::InvalidAlgorithm => bad("Invalid alg header parameter"),
            _ => bad("Malformed authentication token"),
        })?;
    Ok(data.claims)
}

/// The user a token's checked claims name, once the required claims and
/// the clock agree.
fn claims_user(
    claims: &Value,
    config: &JwtConfig,
    required: &[RequiredClaim],
) -> Result<(String, Vec<String>), JwtError> {
    // Claims the library does not know are only required to be present,
    // or to have the value the configuration gives.
    for RequiredClaim { name, value } in required {
        match (claims.get(name), value) {
            (None, _) => return Err(JwtError::BadRequest(format!("Missing {name} claim"))),
            (Some(found), Some(value)) if found.as_str() != Some(value.as_str()) => {
                return Err(JwtError::BadRequest(format!("Invalid {name} claim")));
            }
            _ => {}
        }
    }
    check_times(claims, now_seconds(), config.leeway_seconds)?;
    let name = match claims.get("sub") {
        Some(Value::String(sub)) => sub.clone(),
        _ => return Err(JwtError::Unauthorized("Token missing sub claim.".into())),
    };
    let roles = match &config.roles_claim_path {
        Some(path) => Some(at_path(claims, path)?),
        None => claims.get(&config.roles_claim_name),
    };
    let roles = match roles {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|r| {
                r.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("Malformed token"))
            })
            .collect::<Result<_, _>>()?,
        // A comma-separated string is accepted too, as CouchDB does.
        Some(Value::String(list)) => list
            .split(',')
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect(),
        Some(_) => return Err(bad("Malformed token")),
    };
    Ok((name, roles))
}

/// Seconds since the epoch (0 for a clock set before it).
fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `nbf` must be in the past and `exp` in the future, each as CouchDB's
/// `jwtf` compares them (strictly), widened by `leeway` seconds. A value
/// that is not a number is refused with the same reason: no token is taken
/// on a time nobody can read.
fn check_times(claims: &Value, now: i64, leeway: u64) -> Result<(), JwtError> {
    let leeway = leeway.min(i64::MAX as u64) as f64;
    let now = now as f64;
    let time = |claim: &str| {
        claims
            .get(claim)
            .map(|v| v.as_f64().filter(|t| t.is_finite()))
    };
    if let Some(nbf) = time("nbf")
        && nbf.is_none_or(|nbf| nbf >= now + leeway)
    {
        return Err(JwtError::Unauthorized("nbf not in past".into()));
    }
    if let Some(exp) = time("exp")
        && exp.is_none_or(|exp| exp <= now - leeway)
    {
        return Err(JwtError::Unauthorized("exp not in future".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    const SECRET: &[u8] = b"a shared secret of enough length";

    fn config() -> JwtConfig {
        let key = base64::engine::general_purpose::STANDARD.encode(SECRET);
        JwtConfig {
            keys: vec![("hmac:_default".into(), key)],
            ..JwtConfig::default()
        }
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn token(claims: Value, secret: &[u8]) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    #[test]
    fn a_valid_token_names_the_user_and_roles() {
        let t = token(
            json!({"sub": "bob", "exp": now() + 60, "_couchdb.roles": ["a", "b"]}),
            SECRET,
        );
        assert_eq!(
            authenticate(&t, &config()),
            Ok(("bob".into(), vec!["a".into(), "b".into()]))
        );
        let nested = JwtConfig {
            roles_claim_path: Some("app.roles".into()),
            ..config()
        };
        let t = token(
            json!({"sub": "bob", "exp": now() + 60, "app": {"roles": "x, y"}}),
            SECRET,
        );
        assert_eq!(
            authenticate(&t, &nested),
            Ok(("bob".into(), vec!["x".into(), "y".into()]))
        );
    }

    #[test]
    fn required_claims_are_read_as_couchdb_writes_them() {
        let claim = |name: &str, value: Option<&str>| RequiredClaim {
            name: name.into(),
            value: value.map(str::to_string),
        };
        assert_eq!(
            parse_required_claims(r#"exp, nbf, {iss, "My Company"}"#),
            vec![
                claim("exp", None),
                claim("nbf", None),
                claim("iss", Some("My Company"))
            ]
        );
        // The same list split at its commas, as a list setting keeps it.
        let split = ["{iss", " \"hello\"}"].join(",");
        assert_eq!(
            parse_required_claims(&split),
            vec![claim("iss", Some("hello"))]
        );
        assert_eq!(parse_required_claims(""), vec![]);
    }

    #[test]
    fn a_required_value_must_match() {
        let config = JwtConfig {
            required_claims: vec!["{iss".into(), " \"hello\"}".into()],
            ..config()
        };
        let good = token(json!({"sub": "bob", "iss": "hello"}), SECRET);
        assert_eq!(authenticate(&good, &config), Ok(("bob".into(), vec![])));
        let bad = token(json!({"sub": "bob", "iss": "goodbye"}), SECRET);
        assert_eq!(
            authenticate(&bad, &config),
            Err(JwtError::BadRequest("Invalid iss claim".into()))
        );
        let none = token(json!({"sub": "bob"}), SECRET);
        assert_eq!(
            authenticate(&none, &config),
            Err(JwtError::BadRequest("Missing iss claim".into()))
        );
    }

    #[test]
    fn a_roles_path_escapes_dots_and_must_lead_somewhere() {
        assert_eq!(path_segments(r"a.b\.c.d"), vec!["a", "b.c", "d"]);
        let config = JwtConfig {
            roles_claim_path: Some(r"foo.bar\.zonk.roles".into()),
            ..config()
        };
        let t = token(
            json!({"sub": "bob", "exp": now() + 60, "foo": {"bar.zonk": {"roles": ["r"]}}}),
            SECRET,
        );
        assert_eq!(
            authenticate(&t, &config),
            Ok(("bob".into(), vec!["r".into()]))
        );
        let t = token(json!({"sub": "bob", "exp": now() + 60}), SECRET);
        assert_eq!(
            authenticate(&t, &config),
            Err(JwtError::NotFound("missing json key: foo".into()))
        );
    }

    #[test]
    fn expired_forged_and_incomplete_tokens_are_refused_with_couchdbs_reasons() {
        let expired = token(json!({"sub": "bob", "exp": now() - 120}), SECRET);
        assert_eq!(
            authenticate(&expired, &config()),
            Err(JwtError::Unauthorized("exp not in future".into()))
        );
        let forged = token(
            json!({"sub": "bob", "exp": now() + 60}),
            b"another secret entirely",
        );
        assert_eq!(
            authenticate(&forged, &config()),
            Err(bad("Bad HMAC in authentication token"))
        );
        let no_exp = token(json!({"sub": "bob"}), SECRET);
        assert_eq!(
            authenticate(&no_exp, &config()),
            Err(bad("Missing exp claim"))
        );
        let no_sub = token(json!({"exp": now() + 60}), SECRET);
        assert_eq!(
            authenticate(&no_sub, &config()),
            Err(JwtError::Unauthorized("Token missing sub claim.".into()))
        );
        assert_eq!(
            authenticate("not.a.token", &config()),
            Err(bad("Malformed authentication token"))
        );
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("other".into());
        let unknown = encode(
            &header,
            &json!({"sub": "bob", "exp": now() + 60}),
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap();
        assert_eq!(authenticate(&unknown, &config()), Err(bad("Unknown kid")));
    }

    #[test]
    fn ec_keys_verify_es256_tokens_by_kid() {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let config = JwtConfig {
            // One line with `\n`s, as configuration files hold PEMs.
            keys: vec![("ec:k1".into(), pair.public_key_pem().replace('\n', "\\n"))],
            ..JwtConfig::default()
        };
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let claims = json!({"sub": "ann", "exp": now() + 60});
        let signed = |key: &rcgen::KeyPair| {
            let private = EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap();
            encode(&header, &claims, &private).unwrap()
        };
        assert_eq!(
            authenticate(&signed(&pair), &config),
            Ok(("ann".into(), vec![]))
        );
        assert_eq!(
            authenticate(&signed(&other), &config),
            Err(bad("Bad signature in authentication token"))
        );
    }

    fn not_before(nbf: Value) -> String {
        token(
            json!({"sub": "bob", "exp": now() + 7200, "nbf": nbf}),
            SECRET,
        )
    }

    #[test]
    fn nbf_is_checked_whenever_present_within_the_leeway() {
        let premature = Err(JwtError::Unauthorized("nbf not in past".into()));
        // An hour ahead: refused, though `nbf` is not a required claim.
        assert!(!config().required_claims.contains(&"nbf".to_string()));
        assert_eq!(
            authenticate(&not_before(json!(now() + 3600)), &config()),
            premature
        );
        // Beyond a minute of leeway, as a float too.
        let lenient = JwtConfig {
            leeway_seconds: 60,
            ..config()
        };
        assert_eq!(
            authenticate(&not_before(json!(now() + 90)), &lenient),
            premature
        );
        assert_eq!(
            authenticate(&not_before(json!(now() as f64 + 90.5)), &lenient),
            premature
        );
        // Within the leeway (an issuer's clock a little ahead), or past: taken.
        let bob = Ok(("bob".into(), vec![]));
        assert_eq!(authenticate(&not_before(json!(now() + 20)), &lenient), bob);
        assert_eq!(authenticate(&not_before(json!(now() - 20)), &lenient), bob);
        // By default no leeway, CouchDB's rule: strictly in the past.
        assert_eq!(DEFAULT_LEEWAY_SECONDS, 0);
        assert_eq!(
            authenticate(&not_before(json!(now() + 20)), &config()),
            premature
        );
        assert_eq!(authenticate(&not_before(json!(now() - 2)), &config()), bob);
        // A time that is not a number is no time at all (an array is not
        // even a token the library reads).
        let huge: Value = serde_json::from_str("1e400").unwrap();
        for odd in [json!("0"), json!(null), huge] {
            assert_eq!(
                authenticate(&not_before(odd.clone()), &config()),
                premature,
                "{odd}"
            );
        }
        assert!(authenticate(&not_before(json!([1])), &config()).is_err());
    }

    #[test]
    fn exp_is_checked_whenever_present_within_the_leeway() {
        let expired = Err(JwtError::Unauthorized("exp not in future".into()));
        let bob = Ok(("bob".into(), vec![]));
        let optional = JwtConfig {
            required_claims: vec![],
            ..config()
        };
        let with_exp = |exp: Value| token(json!({"sub": "bob", "exp": exp}), SECRET);
        // Not required, but present and past beyond the leeway: refused.
        assert_eq!(
            authenticate(&with_exp(json!(now() - 120)), &optional),
            expired
        );
        assert_eq!(
            authenticate(&with_exp(json!(now() as f64 - 120.5)), &optional),
            expired
        );
        assert_eq!(authenticate(&with_exp(json!("never")), &optional), expired);
        // Not required and absent: taken.
        assert_eq!(
            authenticate(&token(json!({"sub": "bob"}), SECRET), &optional),
            bob
        );
        // Past within a leeway that is set: taken; not with none (the default).
        let lenient = JwtConfig {
            leeway_seconds: 60,
            ..config()
        };
        assert_eq!(authenticate(&with_exp(json!(now() - 20)), &lenient), bob);
        assert_eq!(
            authenticate(&with_exp(json!(now() - 20)), &config()),
            expired
        );
        assert_eq!(
            authenticate(&with_exp(json!(now() as f64 + 30.5)), &config()),
            bob
        );
    }

    #[test]
    fn times_compare_as_couchdb_compares_them() {
        // Strictly: `nbf` equal to now is not yet past, `exp` equal to now is
        // not in the future (before any leeway).
        let at = |claims: Value, leeway| check_times(&claims, 1_000, leeway);
        assert!(at(json!({"nbf": 1_000}), 0).is_err());
        assert!(at(json!({"nbf": 999}), 0).is_ok());
        assert!(at(json!({"nbf": 1_060}), 60).is_err());
        assert!(at(json!({"nbf": 1_059}), 60).is_ok());
        assert!(at(json!({"exp": 1_000}), 0).is_err());
        assert!(at(json!({"exp": 1_001}), 0).is_ok());
        assert!(at(json!({"exp": 940}), 60).is_err());
        assert!(at(json!({"exp": 941}), 60).is_ok());
        assert!(at(json!({}), 0).is_ok());
        assert!(at(json!({"exp": 1_001, "nbf": 999}), u64::MAX).is_ok());
    }
}
