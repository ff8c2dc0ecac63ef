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
    /// Claims a token must carry (`exp` by default). `exp` and `nbf` are
    /// checked against the clock whenever present, required or not.
    pub required_claims: Vec<String>,
    /// Clock skew tolerated between the token's issuer and this server:
    /// a token is taken until `exp + leeway` and from `nbf - leeway`.
    pub leeway_seconds: u64,
    /// The claim listing the user's roles (`_couchdb.roles`, one key).
    pub roles_claim_name: String,
    /// A dotted path to the roles instead (`my.app.roles`), if set.
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

/// The default [`JwtConfig::leeway_seconds`]: a minute of clock skew.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 60;

/// A refused token: 401 (expired, no subject) or 400 (malformed, bad key
/// or signature), with CouchDB's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtError {
    Unauthorized(String),
    BadRequest(String),
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
    let wanted = format!("{kty}:{}", kid.unwrap_or("_default"));
    let encoded = config
        .keys
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|(_, key)| key.as_str())
        .ok_or_else(|| bad("Unknown kid"))?;
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

/// Checks a token and returns the user's name and roles.
pub fn authenticate(token: &str, config: &JwtConfig) -> Result<(String, Vec<String>), JwtError> {
    let header =
        jsonwebtoken::decode_header(token).map_err(|_| bad("Malformed authentication token"))?;
    let key = key_for(config, header.alg, header.kid.as_deref())?;
    let mut validation = Validation::new(header.alg);
    validation.validate_aud = false;
    // The library reads `exp` and `nbf` only as unsigned integers and
    // skips them silently otherwise (`1.9e9`, `"soon"`): they are checked
    // below, whatever their type. It checks the signature, and the
    // presence of the other claims it knows.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    let spec_claims: Vec<&str> = config
        .required_claims
        .iter()
        .map(String::as_str)
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
                if matches!(
                    header.alg,
                    Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
                ) =>
            {
                bad("Bad HMAC in authentication token")
            }
            ErrorKind::InvalidSignature => bad("Bad signature in authentication token"),
            ErrorKind::InvalidAlgorithm => bad("Invalid alg header parameter"),
            _ => bad("Malformed authentication token"),
        })?;
    let claims = data.claims;
    // Claims the library does not know are only required to be present.
    for claim in &config.required_claims {
        if claims.get(claim).is_none() {
            return Err(JwtError::BadRequest(format!("Missing {claim} claim")));
        }
    }
    check_times(&claims, now_seconds(), config.leeway_seconds)?;
    let name = match claims.get("sub") {
        Some(Value::String(sub)) => sub.clone(),
        _ => return Err(JwtError::Unauthorized("Token missing sub claim.".into())),
    };
    let roles = match &config.roles_claim_path {
        Some(path) => path.split('.').try_fold(&claims, |at, key| at.get(key)),
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
        // Beyond the default minute of leeway, as a float too.
        assert_eq!(
            authenticate(&not_before(json!(now() + 90)), &config()),
            premature
        );
        assert_eq!(
            authenticate(&not_before(json!(now() as f64 + 90.5)), &config()),
            premature
        );
        // Within the leeway (an issuer's clock a little ahead), or past: taken.
        let bob = Ok(("bob".into(), vec![]));
        assert_eq!(authenticate(&not_before(json!(now() + 20)), &config()), bob);
        assert_eq!(authenticate(&not_before(json!(now() - 20)), &config()), bob);
        // Without leeway, CouchDB's rule: strictly in the past.
        let strict = JwtConfig {
            leeway_seconds: 0,
            ..config()
        };
        assert_eq!(
            authenticate(&not_before(json!(now() + 20)), &strict),
            premature
        );
        assert_eq!(authenticate(&not_before(json!(now() - 2)), &strict), bob);
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
        // Past within the leeway: taken; not with none.
        assert_eq!(authenticate(&with_exp(json!(now() - 20)), &config()), bob);
        let strict = JwtConfig {
            leeway_seconds: 0,
            ..config()
        };
        assert_eq!(authenticate(&with_exp(json!(now() - 20)), &strict), expired);
        assert_eq!(
            authenticate(&with_exp(json!(now() as f64 + 30.5)), &strict),
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
