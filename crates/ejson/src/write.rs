//! The one JSON writer: what CouchDB would send for a value.
//!
//! Compact, members in their order, strings escaped as jiffy escapes them
//! (`\uXXXX` in uppercase hex for control characters without a short
//! escape; everything else, `/` and non-ASCII included, as it is), numbers
//! through [`crate::number::output_form`]. Values are walked with a stack
//! of their own, so depth costs heap, not thread stack.

use std::io;

use serde::Serialize;
use serde_json::ser::CharEscape;
use serde_json::{Map, Value};

use crate::number;

/// A value's JSON text.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// A value's JSON text.
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_into(&mut out, value);
    out
}

/// Where the writer puts text: a `String` (no UTF-8 check afterwards) or
/// bytes.
trait Sink {
    fn put(&mut self, s: &str);
    /// An ASCII byte.
    fn put_ascii(&mut self, b: u8);
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
    fn put_ascii(&mut self, b: u8) {
        self.push(char::from(b));
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
    fn put_ascii(&mut self, b: u8) {
        self.push(b);
    }
}

/// Any serializable answer's JSON text, through the same rules; a
/// `Value` inside it is written by serde (depth costs stack there).
pub fn to_vec_of<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Formatter);
    value.serialize(&mut serializer)?;
    Ok(out)
}

/// Any serializable answer's JSON text; see [`to_vec_of`].
pub fn to_string_of<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    to_vec_of(value).map(|bytes| String::from_utf8(bytes).unwrap_or_default())
}

/// A container being written: what is left of it, and whether a member
/// was written already.
enum Open<'a> {
    Array(std::slice::Iter<'a, Value>, bool),
    Object(serde_json::map::Iter<'a>, bool),
}

/// Appends a value's JSON text.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    write_into(out, value);
}

fn write_into(out: &mut impl Sink, value: &Value) {
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Null => out.put("null"),
                Value::Bool(true) => out.put("true"),
                Value::Bool(false) => out.put("false"),
                Value::Number(n) => out.put(&number::output_form(n.as_str())),
                Value::String(s) => put_string(out, s),
                Value::Array(items) => {
                    out.put_ascii(b'[');
                    stack.push(Open::Array(items.iter(), false));
                }
                Value::Object(map) => {
                    out.put_ascii(b'{');
                    stack.push(Open::Object(map.iter(), false));
                }
            }
        }
        // The next member of the innermost open container, or its end.
        let Some(top) = stack.last_mut() else {
            return;
        };
        match top {
            Open::Array(items, any) => match items.next() {
                Some(item) => {
                    if std::mem::replace(any, true) {
                        out.put_ascii(b',');
                    }
                    next = Some(item);
                }
                None => {
                    out.put_ascii(b']');
                    stack.pop();
                }
            },
            Open::Object(members, any) => match members.next() {
                Some((key, item)) => {
                    if std::mem::replace(any, true) {
                        out.put_ascii(b',');
                    }
                    put_string(out, key);
                    out.put_ascii(b':');
                    next = Some(item);
                }
                None => {
                    out.put_ascii(b'}');
                    stack.pop();
                }
            },
        }
    }
}

/// Appends `s` as a JSON string literal.
pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Appends `s` escaped for the inside of a JSON string literal.
pub fn push_escaped(out: &mut String, s: &str) {
    put_escaped(out, s);
}

/// `s` as a JSON string literal.
fn put_string(out: &mut impl Sink, s: &str) {
    out.put_ascii(b'"');
    put_escaped(out, s);
    out.put_ascii(b'"');
}

fn put_escaped(out: &mut impl Sink, s: &str) {
    let bytes = s.as_bytes();
    let mut plain_from = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Most of a string needs no escape: skip it eight bytes at a time.
        i = crate::read::skip_plain(bytes, i);
        let Some(&b) = bytes.get(i) else { break };
        if let Some(escape) = escape_of(b) {
            // Escapes are found at ASCII bytes, which are char boundaries.
            out.put(&s[plain_from..i]);
            out.put(escape.as_str());
            plain_from = i + 1;
        }
        i += 1;
    }
    out.put(&s[plain_from..]);
}

/// An escape, held without allocating.
struct Escape {
    bytes: [u8; 6],
    len: usize,
}

impl Escape {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn as_str(&self) -> &str {
        // Escapes are ASCII.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

/// jiffy's escape for a byte, if it needs one.
fn escape_of(b: u8) -> Option<Escape> {
    let short = |c: u8| Escape {
        bytes: [b'\\', c, 0, 0, 0, 0],
        len: 2,
    };
    Some(match b {
        b'"' => short(b'"'),
        b'\\' => short(b'\\'),
        b'\n' => short(b'n'),
        b'\r' => short(b'r'),
        b'\t' => short(b't'),
        0x08 => short(b'b'),
        0x0c => short(b'f'),
        0x00..=0x1f => {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            Escape {
                bytes: [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ],
                len: 6,
            }
        }
        _ => return None,
    })
}

/// serde_json's compact writer with CouchDB's numbers and escapes, for
/// answers built from typed values.
#[derive(Debug, Clone, Copy, Default)]
pub struct Formatter;

impl serde_json::ser::Formatter for Formatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.is_finite() {
            let mut text = String::with_capacity(24);
            number::push_float(&mut text, value);
            writer.write_all(text.as_bytes())
        } else {
            writer.write_all(b"null")
        }
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }

    fn write_number_str<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        value: &str,
    ) -> io::Result<()> {
        writer.write_all(number::output_form(value).as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        let byte = match char_escape {
            CharEscape::Quote => b'"',
            CharEscape::ReverseSolidus => b'\\',
            CharEscape::Solidus => b'/',
            CharEscape::Backspace => 0x08,
            CharEscape::FormFeed => 0x0c,
            CharEscape::LineFeed => b'\n',
            CharEscape::CarriageReturn => b'\r',
            CharEscape::Tab => b'\t',
            CharEscape::AsciiControl(b) => b,
        };
        match escape_of(byte) {
            Some(escape) => writer.write_all(escape.as_bytes()),
            None => writer.write_all(&[byte]),
        }
    }
}

/// Drops a value without recursion: serde_json's own drop recurses once
/// per level, which a value [`crate::MAX_DEPTH`] deep can take a thread's
/// stack with. Shallow values cost one look.
pub fn drop_deep(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(Map::into_iter(map).map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn writes_compact_json_in_member_order() {
        let v = json!({"b": [1, "x", null, true, {}], "a": {"c": []}, "": false});
        assert_eq!(
            to_string(&v),
            r#"{"b":[1,"x",null,true,{}],"a":{"c":[]},"":false}"#
        );
        assert_eq!(
            to_string(&json!([[], [[]], {"a": [{}]}])),
            r#"[[],[[]],{"a":[{}]}]"#
        );
    }

    #[test]
    fn strings_are_escaped_as_jiffy_escapes_them() {
        let v = json!("\u{0}\u{1}\u{1f}\u{7f}\u{2028}\u{8}\u{c}/é😀\"\\\n\r\t");
        let expected = "\"\\u0000\\u0001\\u001F\u{7f}\u{2028}\\b\\f/é😀\\\"\\\\\\n\\r\\t\"";
        assert_eq!(to_string(&v), expected);
        assert_eq!(String::from_utf8(to_vec_of(&v).unwrap()).unwrap(), expected);
        let mut pushed = String::new();
        push_string(&mut pushed, v.as_str().unwrap());
        assert_eq!(pushed, expected);
    }

    #[test]
    fn numbers_are_written_as_couchdb_writes_them() {
        let v = crate::from_str(r#"[-0.0, 1e21, 1.5, 7, -12345678901234567890123]"#).unwrap();
        assert_eq!(to_string(&v), "[0.0,1e+21,1.5,7,-12345678901234567890123]");
        assert_eq!(
            String::from_utf8(to_vec_of(&v).unwrap()).unwrap(),
            "[0.0,1e+21,1.5,7,-12345678901234567890123]"
        );
        // Doubles made in code, by serde_json or as typed fields.
        assert_eq!(
            to_string(&json!([1e21, 1e16, 0.5])),
            "[1e+21,10000000000000000.0,0.5]"
        );
        assert_eq!(
            to_string_of(&(1e21_f64, -0.0_f64, 2.0_f64)).unwrap(),
            "[1e+21,0.0,2.0]"
        );
    }

    #[test]
    fn deep_values_are_written_and_dropped_without_recursion() {
        let depth = crate::MAX_DEPTH + 1;
        let text = format!(
            "{}1{}",
            "[{\"a\":".repeat(depth / 2),
            "}]".repeat(depth / 2)
        );
        let v = crate::from_str(&text).unwrap();
        assert_eq!(to_string(&v), text);
        drop_deep(v);
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(|x| json!(x)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// What the writer writes, the reader reads back to an equal value
        /// (numbers compared by the double or integer they hold), and the
        /// writer through serde writes the same bytes.
        #[test]
        fn written_text_reads_back(v in any_json()) {
            let text = to_string(&v);
            let back = crate::from_str(&text).unwrap();
            prop_assert_eq!(to_string(&back), text.clone());
            prop_assert_eq!(String::from_utf8(to_vec_of(&v).unwrap()).unwrap(), text.clone());
            let plain: Value = serde_json::from_str(&text).unwrap();
            let original: Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
            prop_assert!(same_numbers(&plain, &original), "{}", text);
        }
    }

    /// Equal but for how numbers are spelled.
    fn same_numbers(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_numbers(a, b))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((k, a), (l, b))| k == l && same_numbers(a, b))
            }
            _ => a == b,
        }
    }
}
