//! ECDSA token signatures (`ES256`, `ES384`, `ES512`) as CouchDB's `jwtf`
//! checks them: the algorithm names the hash, and the configured key's own
//! curve (P-256, P-384 or P-521) is used with it, so an `ES512` token
//! signed with a P-384 key is good. The signature is `r || s`, two halves
//! of equal length: as long as the curve's field in JOSE, as long as the
//! algorithm's hash when CouchDB signs (an `ES384` token over a P-256 key
//! has 48-byte halves); either is read.

use base64::Engine;
use p256::pkcs8::DecodePublicKey;
use serde_json::Value;
use sha2::Digest;

/// Why an ECDSA token is refused (the JWT module says it in CouchDB's
/// words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EcRefusal {
    Malformed,
    BadSignature,
    NotAKey,
}

/// The hash an `ES*` algorithm names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EcHash {
    Sha256,
    Sha384,
    Sha512,
}

impl EcHash {
    pub(crate) fn of(alg: &str) -> Option<EcHash> {
        match alg {
            "ES256" => Some(EcHash::Sha256),
            "ES384" => Some(EcHash::Sha384),
            "ES512" => Some(EcHash::Sha512),
            _ => None,
        }
    }

    fn digest(self, input: &[u8]) -> Vec<u8> {
        match self {
            EcHash::Sha256 => sha2::Sha256::digest(input).to_vec(),
            EcHash::Sha384 => sha2::Sha384::digest(input).to_vec(),
            EcHash::Sha512 => sha2::Sha512::digest(input).to_vec(),
        }
    }
}

/// A token's header, read without checking anything else.
pub(crate) fn header(token: &str) -> Result<Value, EcRefusal> {
    let first = token.split('.').next().ok_or(EcRefusal::Malformed)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .map_err(|_| EcRefusal::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| EcRefusal::Malformed)
}

/// Checks `token`'s signature with the PEM public key `pem` and answers
/// its claims.
pub(crate) fn verify(token: &str, pem: &str, hash: EcHash) -> Result<Value, EcRefusal> {
    let malformed = || EcRefusal::Malformed;
    let mut parts = token.split('.');
    let (Some(head), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let signature = engine.decode(signature).map_err(|_| malformed())?;
    let digest = hash.digest(format!("{head}.{payload}").as_bytes());
    // Keys are often configured on one line with `\n`s, and end with a
    // blank line when Erlang wrote them.
    let pem = pem.replace("\\n", "\n");
    let verified = verify_prehash(pem.trim(), &digest, &signature)?;
    if !verified {
        return Err(EcRefusal::BadSignature);
    }
    let claims = engine.decode(payload).map_err(|_| malformed())?;
    match serde_json::from_slice(&claims) {
        Ok(Value::Object(claims)) => Ok(Value::Object(claims)),
        _ => Err(malformed()),
    }
}

/// Whether `signature` signs `digest` under the key, whatever its curve.
fn verify_prehash(pem: &str, digest: &[u8], signature: &[u8]) -> Result<bool, EcRefusal> {
    use p256::ecdsa::signature::hazmat::PrehashVerifier;
    if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_pem(pem) {
        let Some(Ok(signature)) =
            halves_of(signature, 32).map(|rs| p256::ecdsa::Signature::from_slice(&rs))
        else {
            return Ok(false);
        };
        return Ok(key.verify_prehash(digest, &signature).is_ok());
    }
    if let Ok(key) = p384::ecdsa::VerifyingKey::from_public_key_pem(pem) {
        let Some(Ok(signature)) =
            halves_of(signature, 48).map(|rs| p384::ecdsa::Signature::from_slice(&rs))
        else {
            return Ok(false);
        };
        return Ok(key.verify_prehash(digest, &signature).is_ok());
    }
    if let Ok(public) = p521::PublicKey::from_public_key_pem(pem) {
        let (Ok(key), Some(Ok(signature))) = (
            p521::ecdsa::VerifyingKey::from_affine(*public.as_affine()),
            halves_of(signature, 66).map(|rs| p521::ecdsa::Signature::from_slice(&rs)),
        ) else {
            return Ok(false);
        };
        return Ok(key.verify_prehash(digest, &signature).is_ok());
    }
    Err(EcRefusal::NotAKey)
}

/// `r || s` with each half as long as the curve's field (`field` bytes):
/// the halves of any even-length signature, read as numbers; `None` when
/// one does not fit.
fn halves_of(signature: &[u8], field: usize) -> Option<Vec<u8>> {
    if signature.is_empty() || !signature.len().is_multiple_of(2) {
        return None;
    }
    let (r, s) = signature.split_at(signature.len() / 2);
    let mut out = Vec::with_capacity(field * 2);
    for half in [r, s] {
        let first = half.iter().position(|b| *b != 0).unwrap_or(half.len());
        let digits = &half[first..];
        if digits.len() > field {
            return None;
        }
        out.resize(out.len() + field - digits.len(), 0);
        out.extend_from_slice(digits);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use p384::ecdsa::signature::hazmat::PrehashSigner;
    use p384::pkcs8::{EncodePublicKey, LineEnding};

    use super::*;

    fn token(alg: &str, key: &p384::ecdsa::SigningKey, hash: EcHash) -> String {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let head = engine.encode(serde_json::json!({"alg": alg, "typ": "JWT"}).to_string());
        let payload = engine.encode(r#"{"sub":"couch@apache.org"}"#);
        let digest = hash.digest(format!("{head}.{payload}").as_bytes());
        let signature: p384::ecdsa::Signature = key.sign_prehash(&digest).expect("a signature");
        format!("{head}.{payload}.{}", engine.encode(signature.to_bytes()))
    }

    #[test]
    fn each_algorithm_names_its_hash_over_the_keys_own_curve() {
        let key = p384::ecdsa::SigningKey::from_slice(&[7u8; 48]).expect("a key");
        let pem = key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("a PEM");
        for (alg, hash) in [
            ("ES256", EcHash::Sha256),
            ("ES384", EcHash::Sha384),
            ("ES512", EcHash::Sha512),
        ] {
            let signed = token(alg, &key, hash);
            assert_eq!(EcHash::of(alg), Some(hash));
            let claims = verify(&signed, &pem, hash).expect("a good token");
            assert_eq!(claims["sub"], "couch@apache.org");
            // Another hash than the one signed with: refused.
            let other = if hash == EcHash::Sha512 {
                EcHash::Sha256
            } else {
                EcHash::Sha512
            };
            assert_eq!(verify(&signed, &pem, other), Err(EcRefusal::BadSignature));
        }
        // A key given as one line with `\n`s, as configuration files hold it.
        let one_line = pem.replace('\n', "\\n");
        assert!(
            verify(
                &token("ES512", &key, EcHash::Sha512),
                &one_line,
                EcHash::Sha512
            )
            .is_ok()
        );
        // As Erlang writes a key: ending with a blank line.
        let erlang = format!("{}\\n", one_line);
        assert!(
            verify(
                &token("ES384", &key, EcHash::Sha384),
                &erlang,
                EcHash::Sha384
            )
            .is_ok()
        );
        assert_eq!(
            verify(
                &token("ES512", &key, EcHash::Sha512),
                "not a key",
                EcHash::Sha512
            ),
            Err(EcRefusal::NotAKey)
        );
    }

    /// CouchDB signs an `ES384` or `ES512` token over a P-256 key with
    /// halves as long as the hash (48 or 64 bytes), not the curve's field.
    #[test]
    fn halves_as_long_as_the_hash_are_read_over_a_smaller_curve() {
        use p256::ecdsa::signature::hazmat::PrehashSigner as _;
        use p256::pkcs8::EncodePublicKey as _;
        let key = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).expect("a key");
        let pem = key
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .expect("a PEM");
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for (alg, hash, half) in [
            ("ES256", EcHash::Sha256, 32),
            ("ES384", EcHash::Sha384, 48),
            ("ES512", EcHash::Sha512, 64),
        ] {
            let head = engine.encode(serde_json::json!({"alg": alg}).to_string());
            let payload = engine.encode(r#"{"sub":"couch@apache.org"}"#);
            let digest = hash.digest(format!("{head}.{payload}").as_bytes());
            let signature: p256::ecdsa::Signature = key.sign_prehash(&digest).expect("a signature");
            let (r, s) = signature.split_bytes();
            let mut padded = vec![0u8; half - 32];
            padded.extend_from_slice(&r);
            padded.extend(std::iter::repeat_n(0u8, half - 32));
            padded.extend_from_slice(&s);
            let signed = format!("{head}.{payload}.{}", engine.encode(&padded));
            let claims = verify(&signed, &pem, hash).expect("a good token");
            assert_eq!(claims["sub"], "couch@apache.org", "{alg}");
            // A half with more digits than the field is no signature.
            let mut long = vec![1u8];
            long.extend_from_slice(&r);
            long.push(1);
            long.extend_from_slice(&s);
            let signed = format!("{head}.{payload}.{}", engine.encode(&long));
            assert_eq!(verify(&signed, &pem, hash), Err(EcRefusal::BadSignature));
        }
    }
}
