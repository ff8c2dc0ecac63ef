//! The one JSON reader: text to a `serde_json::Value` holding what CouchDB
//! would hold.
//!
//! Without recursion: containers wait on a stack of their own, so a
//! document nested [`MAX_DEPTH`] levels deep costs heap, not thread stack.
//! Numbers become CouchDB's ([`crate::number`]) unless the text is one this
//! server wrote ([`from_stored`]); a key given twice keeps its last value,
//! at the last place, as CouchDB keeps it; lone surrogates are refused.

use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::number::{self, NumberError};

/// How deep containers may nest inside a value (a document object and
/// this many levels inside it). CouchDB stores documents nested 10,000
/// levels deep; deeper ones are refused with a clear error.
pub const MAX_DEPTH: usize = 10_000;

/// The stack every thread that holds values needs. This crate reads,
/// writes and drops values without recursion, but serde's serializer,
/// `Clone`, `PartialEq` and Rust's drop glue recurse once per level: a
/// debug build needs about 12 MiB to answer `_find` over a document
/// [`MAX_DEPTH`] deep. Untouched stack costs address space, not memory.
pub const THREAD_STACK: usize = 32 << 20;

/// Why text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Not JSON (or not UTF-8, or a lone surrogate).
    #[error("invalid JSON at byte {at}: {what}")]
    Syntax { at: usize, what: &'static str },
    /// A number CouchDB cannot hold (infinite, or an integer past 2^1024).
    #[error("number out of range at byte {at}")]
    NumberOutOfRange { at: usize },
    /// Containers nested deeper than [`MAX_DEPTH`].
    #[error("JSON nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// Reads a client's or a peer's JSON, as CouchDB reads it.
pub fn from_slice(bytes: &[u8]) -> Result<Value, JsonError> {
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError::Syntax {
        at: e.valid_up_to(),
        what: "invalid UTF-8",
    })?;
    from_str(text)
}

/// Reads a client's or a peer's JSON, as CouchDB reads it.
pub fn from_str(text: &str) -> Result<Value, JsonError> {
    Reader::new(text, Numbers::AsCouchDbReads).document()
}

/// Reads JSON this server wrote (stored bodies, index rows): numbers are
/// already CouchDB's text and are kept as they are. Reading a client's
/// JSON this way would keep numbers CouchDB changes.
pub fn from_stored(text: &str) -> Result<Value, JsonError> {
    Reader::new(text, Numbers::AsWritten).document()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbers {
    AsCouchDbReads,
    AsWritten,
}

/// A container being read.
enum Open {
    Array(Vec<Value>),
    /// An object and the key whose value is being read.
    Object(Map<String, Value>, String),
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    numbers: Numbers,
    /// Numbers out of range read so far and still in the value, and where
    /// the first was: jiffy converts such numbers only after dropping
    /// duplicate keys, so one whose key is given again later is no error.
    out_of_range: usize,
    first_out_of_range: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, numbers: Numbers) -> Reader<'a> {
        Reader {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            numbers,
            out_of_range: 0,
            first_out_of_range: 0,
        }
    }

    fn error(&self, what: &'static str) -> JsonError {
        JsonError::Syntax { at: self.pos, what }
    }

    fn skip_blank(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte that is not blank, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.skip_blank();
        let b = self.bytes.get(self.pos).copied();
        self.pos += 1;
        b
    }

    fn document(mut self) -> Result<Value, JsonError> {
        let mut stack: Vec<Open> = Vec::new();
        'value: loop {
            let token = self.next_token();
            if matches!(token, Some(b'[' | b'{')) && stack.len() > MAX_DEPTH {
                return Err(JsonError::TooDeep);
            }
            let mut value = match token {
                Some(b'[') => {
                    self.skip_blank();
                    if self.bytes.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Open::Array(Vec::new()));
                        continue 'value;
                    }
                }
                Some(b'{') => {
                    self.skip_blank();
                    if self.bytes.get(self.pos) == Some(&b'}') {
                        self.pos += 1;
                        Value::Object(Map::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Open::Object(Map::new(), key));
                        continue 'value;
                    }
                }
                Some(b'"') => Value::String(self.string()?),
                Some(b't') => self.literal("rue", Value::Bool(true))?,
                Some(b'f') => self.literal("alse", Value::Bool(false))?,
                Some(b'n') => self.literal("ull", Value::Null)?,
                Some(b'-' | b'0'..=b'9') => {
                    self.pos -= 1;
                    Value::Number(self.number()?)
                }
                Some(_) => {
                    self.pos -= 1;
                    return Err(self.error("expected a value"));
                }
                None => return Err(self.error("unexpected end")),
            };
            // Hand the value to its container, closing every container
            // that ends right after it.
            loop {
                match stack.last_mut() {
                    None => {
                        self.skip_blank();
                        if self.pos < self.bytes.len() {
                            return Err(self.error("trailing characters"));
                        }
                        if self.out_of_range > 0 {
                            return Err(JsonError::NumberOutOfRange {
                                at: self.first_out_of_range,
                            });
                        }
                        return Ok(value);
                    }
                    Some(Open::Array(items)) => {
                        items.push(value);
                        match self.next_token() {
                            Some(b',') => continue 'value,
                            Some(b']') => {}
                            _ => return Err(self.back("expected `,` or `]`")),
                        }
                    }
                    Some(Open::Object(map, key)) => {
                        if let Some(dropped) = insert_last_wins(map, std::mem::take(key), value)
                            && self.out_of_range > 0
                        {
                            self.out_of_range -= count_out_of_range(&dropped);
                        }
                        match self.next_token() {
                            Some(b',') => {
                                *key = self.key()?;
                                continue 'value;
                            }
                            Some(b'}') => {}
                            _ => return Err(self.back("expected `,` or `}`")),
                        }
                    }
                }
                value = match stack.pop() {
                    Some(Open::Array(items)) => Value::Array(items),
                    Some(Open::Object(map, _)) => Value::Object(map),
                    None => unreachable!("a container was just closed"),
                };
            }
        }
    }

    /// The error for the token just consumed.
    fn back(&mut self, what: &'static str) -> JsonError {
        self.pos = self.pos.saturating_sub(1).min(self.bytes.len());
        self.error(what)
    }

    /// `"key" :`
    fn key(&mut self) -> Result<String, JsonError> {
        if self.next_token() != Some(b'"') {
            return Err(self.back("expected a key"));
        }
        let key = self.string()?;
        if self.next_token() != Some(b':') {
            return Err(self.back("expected `:`"));
        }
        Ok(key)
    }

    fn literal(&mut self, rest: &str, value: Value) -> Result<Value, JsonError> {
        if self.bytes[self.pos..].starts_with(rest.as_bytes()) {
            self.pos += rest.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn number(&mut self) -> Result<Number, JsonError> {
        let start = self.pos;
        let end = self.bytes[start..]
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .map_or(self.bytes.len(), |n| start + n);
        let text = &self.text[start..end];
        let held = match self.numbers {
            Numbers::AsCouchDbReads => number::canonical(text),
            Numbers::AsWritten => number::decode(text).map(|_| text.into()),
        }
        .or_else(|e| match e {
            NumberError::Syntax => Err(JsonError::Syntax {
                at: start,
                what: "invalid number",
            }),
            // Kept as written for now: an error only if it stays.
            NumberError::OutOfRange => {
                if self.out_of_range == 0 {
                    self.first_out_of_range = start;
                }
                self.out_of_range += 1;
                Ok(text.into())
            }
        })?;
        self.pos = end;
        number_from_text(&held).ok_or(JsonError::Syntax {
            at: start,
            what: "invalid number",
        })
    }

    /// A string's contents; the opening quote is consumed.
    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.pos;
        // Most strings have no escape: one scan, one copy.
        self.pos = skip_plain(self.bytes, self.pos);
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b'"' => {
                    let s = self.text[start..self.pos].to_owned();
                    self.pos += 1;
                    return Ok(s);
                }
                b'\\' => break,
                0x00..=0x1f => return Err(self.error("control character in string")),
                _ => self.pos += 1,
            }
        }
        let mut out = String::with_capacity(self.pos - start + 16);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.error("control character in string")),
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    /// One escape after its backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), JsonError> {
        let b = self.bytes.get(self.pos).copied();
        self.pos += 1;
        let c = match b {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let first = self.hex4()?;
                match first {
                    0xD800..=0xDBFF => {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return Err(self.error("lone surrogate"));
                        }
                        self.pos += 2;
                        let second = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return Err(self.error("lone surrogate"));
                        }
                        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        char::from_u32(code).ok_or(self.error("lone surrogate"))?
                    }
                    0xDC00..=0xDFFF => return Err(self.error("lone surrogate")),
                    _ => char::from_u32(first).ok_or(self.error("invalid escape"))?,
                }
            }
            _ => return Err(self.back("invalid escape")),
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or(self.error("invalid escape"))?;
        let mut code = 0;
        for &d in digits {
            let v = (d as char)
                .to_digit(16)
                .ok_or(self.error("invalid escape"))?;
            code = code * 16 + v;
        }
        self.pos += 4;
        Ok(code)
    }
}

/// For `#[serde(deserialize_with = "ejson::value")]`: a document inside a
/// peer's typed answer, read by this reader (CouchDB's numbers, any depth)
/// instead of serde's. The text is taken raw first, which serde_json does
/// without recursion.
pub fn value<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    let raw: Box<serde_json::value::RawValue> = serde::Deserialize::deserialize(deserializer)?;
    from_str(raw.get()).map_err(serde::de::Error::custom)
}

/// Where the run of plain string bytes from `at` ends, eight bytes at a
/// time (no `"`, `\` or control character in them): strings are most of
/// a document's bytes. The caller looks at the bytes from there one by one.
pub(crate) fn skip_plain(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    while let Some(chunk) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        let v = u64::from_le_bytes(*chunk);
        let quote = has_zero_byte(v ^ (ONES * u64::from(b'"')));
        let backslash = has_zero_byte(v ^ (ONES * u64::from(b'\\')));
        let control = v.wrapping_sub(ONES * 0x20) & !v & HIGHS;
        if quote | backslash | control != 0 {
            break;
        }
        at += 8;
    }
    at
}

/// A key given twice keeps its last value, at the last place (CouchDB
/// decodes with jiffy's `dedupe_keys`); the value it replaces.
fn insert_last_wins(map: &mut Map<String, Value>, key: String, value: Value) -> Option<Value> {
    match map.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(value);
            None
        }
        Entry::Occupied(taken) => {
            let (key, dropped) = taken.shift_remove_entry();
            map.insert(key, value);
            Some(dropped)
        }
    }
}

/// How many numbers out of range a value holds (kept as written, see
/// `Reader::out_of_range`).
fn count_out_of_range(value: &Value) -> usize {
    let mut count = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Number(n) => {
                count += usize::from(number::decode(n.as_str()) == Err(NumberError::OutOfRange));
            }
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// A `Number` holding exactly `text` (already checked).
pub(crate) fn number_from_text(text: &str) -> Option<Number> {
    if !text.starts_with('-')
        && text.len() <= 19
        && let Ok(n) = text.parse::<u64>()
    {
        return Some(Number::from(n));
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Value {
        from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn reads_what_serde_json_reads_for_plain_json() {
        for text in [
            "null",
            "true",
            " [1, \"a\", {\"b\": [false, null]}, [], {}] ",
            "{\"a\":\"\\u00e9\\n\\\"\\\\\\/\",\"b\":-12}",
            "\"\\ud83d\\ude00\"",
            "\"\\u0000\"",
        ] {
            assert_eq!(
                read(text),
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn numbers_are_couchdbs_unless_stored() {
        let v = read(r#"{"a":1e2,"b":12345678901234567890123,"c":-0,"d":5e-324}"#);
        assert_eq!(v["a"].as_number().map(Number::as_str), Some("100.0"));
        assert_eq!(
            v["b"].as_number().map(Number::as_str),
            Some("12345678901234567890123")
        );
        assert_eq!(v["c"].as_number().map(Number::as_str), Some("0"));
        assert_eq!(v["d"].as_number().map(Number::as_str), Some("0.0"));
        let stored = from_stored(r#"{"d":5e-324}"#).unwrap();
        assert_eq!(stored["d"].as_number().map(Number::as_str), Some("5e-324"));
    }

    proptest::proptest! {
        /// Strings read back whatever they hold, wherever a quote, a
        /// backslash or a control character falls in the eight-byte steps.
        #[test]
        fn strings_read_back(s in "[a-z\"\\\\\u{0}-\u{1f}é😀]{0,40}") {
            let text = serde_json::to_string(&s).unwrap();
            proptest::prop_assert_eq!(read(&text), Value::String(s));
        }
    }

    #[test]
    fn the_last_of_a_duplicate_key_wins_at_its_place() {
        let v = read(r#"{"a":1,"b":2,"a":3}"#);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(v["a"], json!(3));
    }

    #[test]
    fn bad_text_is_refused_with_where() {
        for text in [
            "",
            "[",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "[1 2]",
            "tru",
            "nul",
            "01",
            "1.",
            "\"a",
            "\"\\ud83d\"",
            "\"\\ude00x\"",
            "\"\\x\"",
            "\"a\nb\"",
            "{1:2}",
            "[1]x",
            "\"\\u12\"",
        ] {
            assert!(
                matches!(from_str(text), Err(JsonError::Syntax { .. })),
                "{text:?}: {:?}",
                from_str(text)
            );
        }
        assert!(from_slice(b"\"\xff\"").is_err());
        assert_eq!(
            from_str("[1e400]"),
            Err(JsonError::NumberOutOfRange { at: 1 })
        );
        assert_eq!(
            from_str(r#"{"a":{"b":1e400,"b":2},"c":[1e999]}"#),
            Err(JsonError::NumberOutOfRange { at: 28 })
        );
    }

    /// jiffy converts large numbers after it drops duplicate keys, so
    /// CouchDB takes a number out of range whose key comes again.
    #[test]
    fn a_number_out_of_range_under_a_key_given_again_is_no_error() {
        let v = read(r#"{"a":1e400,"b":{"c":[2e308],"c":3},"a":1}"#);
        assert_eq!(crate::to_string(&v), r#"{"b":{"c":3},"a":1}"#);
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // The limit counts levels inside the outermost value.
        assert!(from_str(&deep(MAX_DEPTH + 1)).is_ok());
        assert_eq!(from_str(&deep(MAX_DEPTH + 2)), Err(JsonError::TooDeep));
        let objects = format!(
            "{}1{}",
            "{\"a\":".repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        let v = from_str(&objects).unwrap();
        crate::drop_deep(v);
    }
}
