//! JWT authentication as CouchDB 3.1+ does it (`jwt_authentication_handler`):
//! a `Bearer` token signed with a configured key (`[jwt_keys]`: `hmac:KID`
//! base64 secrets, `rsa:KID`/`ec:KID` PEM public keys, `_default` when the
//! token names no `kid`), the `sub` claim as the user's name, roles from a
//! configurable claim, and the required claims checked. Failures carry
//! CouchDB's reasons.

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::Value;

/// How tokens are checked (CouchDB's `[jwt_keys]` and `[jwt_auth]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// `kty:kid` → key: `hmac:_default` = base64 secret, `rsa:k1` = PEM...
    pub keys: Vec<(String, String)>,
    /// Claims a token must carry (`exp` by default); `exp` and `nbf` are
    /// also checked against the clock.
    pub required_claims: Vec<String>,
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
            roles_claim_name: "_couchdb.roles".into(),
            roles_claim_path: None,
        }
    }
}

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
    validation.leeway = 0;
    validation.validate_aud = false;
    let required = |claim: &str| config.required_claims.iter().any(|c| c == claim);
    validation.validate_exp = required("exp");
    validation.validate_nbf = required("nbf");
    let spec_claims: Vec<&str> = config.required_claims.iter().map(String::as_str).collect();
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
        let expired = token(json!({"sub": "bob", "exp": now() - 5}), SECRET);
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
}
