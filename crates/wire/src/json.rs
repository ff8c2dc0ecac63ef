//! Hand-written JSON, its strings escaped by `ejson`'s rule (as CouchDB
//! escapes them), so spliced answers match whole ones byte for byte.

use std::fmt::{self, Write};

/// Appends `s` as a JSON string literal.
pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Appends the `Display` form of `value` (a `RevId`, say) as a JSON string
/// literal, without building the intermediate string when it needs no escape.
pub fn push_display(out: &mut String, value: &impl fmt::Display) {
    out.push('"');
    let mut escaper = Escaper(out);
    // Writing into a String cannot fail.
    let _ = write!(escaper, "{value}");
    out.push('"');
}

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_string(&mut out, s);
    out
}

/// Appends `s` escaped for the inside of a JSON string literal.
fn push_escaped(out: &mut String, s: &str) {
    ejson::push_escaped(out, s);
}

/// A `fmt::Write` that escapes what is written into it.
struct Escaper<'a>(&'a mut String);

impl Write for Escaper<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        push_escaped(self.0, s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped() {
        assert_eq!(string("1-a\"b"), r#""1-a\"b""#);
        assert_eq!(
            string("a\\b\r\n\t\u{1}\u{7f}é"),
            "\"a\\\\b\\r\\n\\t\\u0001\u{7f}é\""
        );
        let mut out = String::new();
        push_display(&mut out, &"x\"y");
        assert_eq!(out, r#""x\"y""#);
    }

    proptest! {
        #[test]
        fn every_string_is_written_exactly_as_the_json_writer_writes_it(s in any::<String>()) {
            let expected = ejson::to_string(&serde_json::Value::String(s.clone()));
            prop_assert_eq!(&string(&s), &expected);
            let mut shown = String::new();
            push_display(&mut shown, &s);
            prop_assert_eq!(&shown, &expected);
            prop_assert_eq!(serde_json::from_str::<String>(&shown).ok(), Some(s));
        }
    }
}
