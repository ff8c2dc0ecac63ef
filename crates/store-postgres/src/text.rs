//! Strings as PostgreSQL keeps them: the one rule every string the backend
//! sends or reads goes through.
//!
//! PostgreSQL's `text` refuses U+0000, which CouchDB accepts anywhere in a
//! string (a document id, a revision's hash, a name in `_access`, ...). So
//! every string is stored escaped, by an escape that keeps byte order:
//!
//! - U+0000 is stored as U+0001 U+0001,
//! - U+0001 is stored as U+0001 U+0002,
//! - every other character as itself.
//!
//! Every other character is U+0002 or above, and its UTF-8 bytes start with
//! a byte of 0x02 or above; the two escapes start with 0x01 and differ in
//! their second byte, in the order of the characters they stand for. No
//! character's bytes are a prefix of another's, so two strings compare (by
//! bytes, as `COLLATE "C"` does) as their escaped forms do: ranges, bounds
//! and `ORDER BY id` over escaped ids select and order exactly as CouchDB
//! does over the ids, and the escape is injective.
//!
//! A string without U+0000 or U+0001 is its own escape: rows written before
//! this rule read back unchanged (the migration that introduced it escaped
//! the few stored strings holding U+0001, see `schema`).
//!
//! Enforced by types: a statement's parameters are [`crate::conn::Param`]s,
//! which `&str` and `String` are not, so a string is bound only as a
//! [`Text`] (escaped as it is sent); and a row's string columns are read
//! only through [`crate::conn::PgRow::text`] (unescaped as they are read).

use std::borrow::Cow;
use std::error::Error;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// The character that starts an escape.
const ESCAPE: char = '\u{1}';

/// `text` as stored: U+0000 and U+0001 escaped (see the module's rule).
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['\u{0}', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        match c {
            '\u{0}' => out.push_str("\u{1}\u{1}"),
            ESCAPE => out.push_str("\u{1}\u{2}"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A stored string as it was given: [`escape`] undone. A U+0001 that starts
/// no escape (never written by [`escape`]) is kept as it is.
pub(crate) fn unescape(stored: &str) -> Cow<'_, str> {
    if !stored.contains(ESCAPE) {
        return Cow::Borrowed(stored);
    }
    let mut out = String::with_capacity(stored.len());
    let mut chars = stored.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ESCAPE {
            match chars.peek() {
                Some('\u{1}') => {
                    chars.next();
                    out.push('\u{0}');
                    continue;
                }
                Some('\u{2}') => {
                    chars.next();
                    out.push(ESCAPE);
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// A string parameter, sent [`escape`]d: the only way a statement binds a
/// string. `Vec<Text<_>>` and `Vec<Option<Text<_>>>` bind `text[]` arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Text<S>(pub S);

impl<S: AsRef<str> + std::fmt::Debug> ToSql for Text<S> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        escape(self.0.as_ref()).as_ref().to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <&str as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// Each string of `items` as a [`Text`] (for an array parameter).
pub(crate) fn texts<S: AsRef<str>>(items: &[S]) -> Vec<Text<&str>> {
    items.iter().map(|s| Text(s.as_ref())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NUL: char = '\u{0}';

    /// Strings where U+0000 and U+0001 are common, beside a few others
    /// (U+0002, ASCII, two- to four-byte characters).
    fn tricky() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                3 => Just('\u{0}'),
                3 => Just('\u{1}'),
                2 => Just('\u{2}'),
                2 => prop::char::range('a', 'c'),
                1 => Just('é'),
                1 => Just('\u{ffff}'),
                1 => Just('😀'),
                1 => any::<char>(),
            ],
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    #[test]
    fn plain_strings_are_their_own_escape() {
        for s in [
            "",
            "abc",
            "_design/x",
            "p:1",
            "é😀\u{2}\u{7f}",
            "\u{10ffff}",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(_)));
            assert_eq!(escape(s), s);
            assert_eq!(unescape(s), s);
        }
    }

    #[test]
    fn escapes_are_as_documented() {
        assert_eq!(escape("a\u{0}b"), "a\u{1}\u{1}b");
        assert_eq!(escape("\u{1}"), "\u{1}\u{2}");
        assert_eq!(escape("\u{0}\u{1}\u{0}"), "\u{1}\u{1}\u{1}\u{2}\u{1}\u{1}");
        assert!(!escape("\u{0}x\u{0}").contains('\u{0}'));
        // A U+0001 no escape wrote is kept.
        assert_eq!(unescape("a\u{1}b\u{1}"), "a\u{1}b\u{1}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn escape_round_trips_and_holds_no_nul(s in tricky()) {
            let stored = escape(&s);
            prop_assert!(!stored.contains(NUL));
            prop_assert_eq!(unescape(&stored), s.as_str());
        }

        #[test]
        fn escape_keeps_byte_order_and_is_injective(a in tricky(), b in tricky()) {
            let (ea, eb) = (escape(&a), escape(&b));
            prop_assert_eq!(a.as_bytes().cmp(b.as_bytes()), ea.as_bytes().cmp(eb.as_bytes()));
            prop_assert_eq!(a == b, ea == eb);
            // A prefix stays a prefix: ranges by prefix (partitions) hold.
            prop_assert_eq!(b.starts_with(a.as_str()), eb.starts_with(ea.as_ref()));
        }

        #[test]
        fn escape_keeps_order_of_arbitrary_strings(a in any::<String>(), b in any::<String>()) {
            let (ea, eb) = (escape(&a), escape(&b));
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            prop_assert_eq!(unescape(&ea), a.as_str());
        }
    }
}
