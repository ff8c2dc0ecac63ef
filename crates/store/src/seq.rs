//! Update sequences as clients see them: opaque strings `N-token`, as
//! CouchDB 2+ writes them. `N` is the database's own counter; the token
//! names the database instance, so a sequence kept from a database that was
//! since deleted and created again (or from another server) starts its
//! reader over from the beginning instead of skipping changes it never saw.

use base64::Engine;

/// Where a reader of the changes feed starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// After this sequence of this database.
    Seq(u64),
    /// After the latest change (`since=now`).
    Now,
}

/// A `since` that is no sequence at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Malformed sequence supplied in 'since' parameter.")]
pub struct MalformedSeq;

/// The token of the database instance whose uuid (32 hex digits) is given:
/// its 16 bytes in URL-safe base64, so a sequence needs no escaping in a
/// URL or a JSON string.
pub(crate) fn token_of(uuid: &str) -> String {
    let bytes: Vec<u8> = (0..uuid.len() / 2)
        .filter_map(|i| u8::from_str_radix(uuid.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `N-token`.
pub(crate) fn format(n: u64, token: &str) -> String {
    format!("{n}-{token}")
}

/// Reads a `since` (or a checkpointed sequence) of the database with
/// `token`: `now`, a plain integer (older CouchDB and PouchDB Server peers,
/// and checkpoints from before sequences were strings), or `N-token`. A
/// sequence of another database instance reads as 0, as CouchDB restarts a
/// shard whose sequence it does not recognise.
pub(crate) fn parse(text: &str, token: &str) -> Result<Since, MalformedSeq> {
    // A sequence may come JSON-quoted (an eventsource `id:` sent back as
    // `Last-Event-ID`), as CouchDB accepts it.
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    if text == "now" {
        return Ok(Since::Now);
    }
    let (number, rest) = match text.split_once('-') {
        Some((number, rest)) => (number, Some(rest)),
        None => (text, None),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MalformedSeq);
    }
    // Sequences are SQLite integers: past i64::MAX none is ours.
    let n = number
        .parse::<i64>()
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(MalformedSeq)?;
    match rest {
        None => Ok(Since::Seq(n)),
        Some(rest) if rest == token => Ok(Since::Seq(n)),
        Some("") => Err(MalformedSeq),
        Some(_) => Ok(Since::Seq(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UUID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_sequence_reads_back_as_its_number() {
        let token = token_of(UUID);
        assert_eq!(token.len(), 22);
        assert_eq!(parse(&format(42, &token), &token), Ok(Since::Seq(42)));
        assert_eq!(parse("42", &token), Ok(Since::Seq(42)));
        assert_eq!(parse("0", &token), Ok(Since::Seq(0)));
        assert_eq!(parse("now", &token), Ok(Since::Now));
        let quoted = format!("\"{}\"", format(7, &token));
        assert_eq!(parse(&quoted, &token), Ok(Since::Seq(7)));
    }

    #[test]
    fn another_instances_sequence_starts_over() {
        let ours = token_of(UUID);
        let theirs = token_of("fedcba9876543210fedcba9876543210");
        assert_eq!(parse(&format(42, &theirs), &ours), Ok(Since::Seq(0)));
        assert_eq!(
            parse("16-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISdI1", &ours),
            Ok(Since::Seq(0))
        );
    }

    #[test]
    fn malformed_sequences_are_refused() {
        let token = token_of(UUID);
        for bad in [
            "",
            "abc",
            "-1",
            "1-",
            "+1",
            " 1",
            "1.5",
            "9223372036854775808",
            "\"",
            "\"\"",
        ] {
            assert_eq!(parse(bad, &token), Err(MalformedSeq), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn every_sequence_of_ours_round_trips(n in 0u64..=i64::MAX as u64, uuid in "[0-9a-f]{32}") {
            let token = token_of(&uuid);
            let text = format(n, &token);
            prop_assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            prop_assert_eq!(parse(&text, &token), Ok(Since::Seq(n)));
        }
    }
}
