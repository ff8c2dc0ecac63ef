//! Erlang's external term format, for the few terms CouchDB hashes into a
//! revision id: a JSON body in CouchDB's EJSON form (objects as `{[{K, V}]}`,
//! strings and keys as binaries, `true`/`false`/`null` as atoms), integers,
//! binaries and lists. The bytes are what `term_to_binary(T, [{minor_version,
//! 1}])` writes, so an MD5 over them equals CouchDB's.

use std::io::{self, Write};

use ejson::number::Decoded;
use serde_json::{Number, Value};

/// The version byte every encoded term starts with.
pub const VERSION: u8 = 131;

const NEW_FLOAT: u8 = 70;
const SMALL_INTEGER: u8 = 97;
const INTEGER: u8 = 98;
const ATOM: u8 = 100;
const SMALL_TUPLE: u8 = 104;
const NIL: u8 = 106;
const STRING: u8 = 107;
const LIST: u8 = 108;
const BINARY: u8 = 109;
const SMALL_BIG: u8 = 110;
const LARGE_BIG: u8 = 111;

/// An atom such as `true`; only Latin-1 names, which are all CouchDB hashes.
pub fn atom(out: &mut impl Write, name: &str) -> io::Result<()> {
    out.write_all(&[ATOM])?;
    out.write_all(&(name.len() as u16).to_be_bytes())?;
    out.write_all(name.as_bytes())
}

/// A binary (`<<...>>`): how CouchDB holds strings, keys and digests.
pub fn binary(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    out.write_all(&[BINARY])?;
    out.write_all(&(bytes.len() as u32).to_be_bytes())?;
    out.write_all(bytes)
}

/// A tuple header; its `arity` elements follow.
pub fn tuple_header(out: &mut impl Write, arity: u8) -> io::Result<()> {
    out.write_all(&[SMALL_TUPLE, arity])
}

/// A proper list header; its `len` elements and then [`nil`] follow.
/// An empty list is [`nil`] alone.
pub fn list_header(out: &mut impl Write, len: u32) -> io::Result<()> {
    out.write_all(&[LIST])?;
    out.write_all(&len.to_be_bytes())
}

/// The empty list, which also ends every proper list.
pub fn nil(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&[NIL])
}

/// An integer of any size: small, 32-bit, or a bignum.
pub fn integer(out: &mut impl Write, value: i128) -> io::Result<()> {
    if (0..=255).contains(&value) {
        out.write_all(&[SMALL_INTEGER, value as u8])
    } else if i32::try_from(value).is_ok() {
        out.write_all(&[INTEGER])?;
        out.write_all(&(value as i32).to_be_bytes())
    } else {
        let magnitude = value.unsigned_abs().to_le_bytes();
        let len = magnitude.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        out.write_all(&[SMALL_BIG, len as u8, u8::from(value < 0)])?;
        out.write_all(&magnitude[..len])
    }
}

/// A float, as the 8 big-endian bytes of the double.
pub fn float(out: &mut impl Write, value: f64) -> io::Result<()> {
    out.write_all(&[NEW_FLOAT])?;
    out.write_all(&value.to_be_bytes())
}

/// A JSON value in CouchDB's EJSON form, object members in their order.
/// Containers wait on a stack of their own, so a value nested
/// `ejson::MAX_DEPTH` levels deep costs heap, not thread stack.
pub fn ejson(out: &mut impl Write, value: &Value) -> io::Result<()> {
    /// What is left to write of an open container.
    enum Open<'a> {
        Array(std::slice::Iter<'a, Value>),
        Object(serde_json::map::Iter<'a>),
    }
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Null => atom(out, "null")?,
                Value::Bool(true) => atom(out, "true")?,
                Value::Bool(false) => atom(out, "false")?,
                Value::Number(n) => number(out, n)?,
                Value::String(s) => binary(out, s.as_bytes())?,
                Value::Array(items) => {
                    if items.is_empty() {
                        nil(out)?;
                    } else if let Some(bytes) = byte_string(items) {
                        out.write_all(&[STRING])?;
                        out.write_all(&(bytes.len() as u16).to_be_bytes())?;
                        out.write_all(&bytes)?;
                    } else {
                        list_header(out, items.len() as u32)?;
                        stack.push(Open::Array(items.iter()));
                    }
                }
                Value::Object(map) => {
                    tuple_header(out, 1)?;
                    if map.is_empty() {
                        nil(out)?;
                    } else {
                        list_header(out, map.len() as u32)?;
                        stack.push(Open::Object(map.iter()));
                    }
                }
            }
        }
        let Some(top) = stack.last_mut() else {
            return Ok(());
        };
        match top {
            Open::Array(items) => match items.next() {
                Some(item) => next = Some(item),
                None => {
                    nil(out)?;
                    stack.pop();
                }
            },
            Open::Object(members) => match members.next() {
                Some((key, item)) => {
                    tuple_header(out, 2)?;
                    binary(out, key.as_bytes())?;
                    next = Some(item);
                }
                None => {
                    nil(out)?;
                    stack.pop();
                }
            },
        }
    }
}

/// An EJSON object, `{[{Key, Value}, ...]}`, from its members in order.
pub fn object<'a>(
    out: &mut impl Write,
    members: impl ExactSizeIterator<Item = (&'a String, &'a Value)>,
) -> io::Result<()> {
    tuple_header(out, 1)?;
    if members.len() > 0 {
        list_header(out, members.len() as u32)?;
        for (key, value) in members {
            tuple_header(out, 2)?;
            binary(out, key.as_bytes())?;
            ejson(out, value)?;
        }
    }
    nil(out)
}

/// A number as CouchDB holds it (`ejson::number`): an integer of any size,
/// or a double (a negative zero with its sign).
fn number(out: &mut impl Write, n: &Number) -> io::Result<()> {
    match ejson::number::value_of(n.as_str()) {
        Ok(Decoded::Integer { negative, digits }) if digits.len() <= 38 => {
            // 38 digits always fit an i128.
            let magnitude = digits.parse::<i128>().unwrap_or(0);
            integer(out, if negative { -magnitude } else { magnitude })
        }
        Ok(Decoded::Integer { negative, digits }) => {
            big(out, negative, &ejson::number::integer_bytes(digits))
        }
        Ok(Decoded::Float(x)) => float(out, x),
        // Numbers in values are checked when read; never reached.
        Err(_) => float(out, n.as_f64().unwrap_or(0.0)),
    }
}

/// A bignum from its sign and magnitude bytes (little-endian).
fn big(out: &mut impl Write, negative: bool, magnitude: &[u8]) -> io::Result<()> {
    match u8::try_from(magnitude.len()) {
        Ok(len) => out.write_all(&[SMALL_BIG, len, u8::from(negative)])?,
        Err(_) => {
            out.write_all(&[LARGE_BIG])?;
            out.write_all(&(magnitude.len() as u32).to_be_bytes())?;
            out.write_all(&[u8::from(negative)])?;
        }
    }
    out.write_all(magnitude)
}

/// Erlang writes a list whose elements are all integers 0..=255 as a byte
/// string, and so must we.
fn byte_string(items: &[Value]) -> Option<Vec<u8>> {
    if items.len() >= 65536 {
        return None;
    }
    items
        .iter()
        .map(|v| match v {
            Value::Number(n) => n.as_u64().and_then(|u| u8::try_from(u).ok()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn encode(value: &Value) -> Vec<u8> {
        let mut out = vec![VERSION];
        ejson(&mut out, value).unwrap();
        out
    }

    /// Bytes written by `term_to_binary(T, [{minor_version, 1}])` in the
    /// Erlang runtime CouchDB 3.5 ships, for the EJSON form of each value.
    #[test]
    fn values_encode_as_erlang_writes_them() {
        let cases: &[(Value, &[u8])] = &[
            (json!(null), &[131, 100, 0, 4, 110, 117, 108, 108]),
            (json!(true), &[131, 100, 0, 4, 116, 114, 117, 101]),
            (json!(0), &[131, 97, 0]),
            (json!(255), &[131, 97, 255]),
            (json!(256), &[131, 98, 0, 0, 1, 0]),
            (json!(-1), &[131, 98, 255, 255, 255, 255]),
            (json!(2147483647), &[131, 98, 127, 255, 255, 255]),
            (json!(2147483648_i64), &[131, 110, 4, 0, 0, 0, 0, 128]),
            (json!(-2147483649_i64), &[131, 110, 4, 1, 1, 0, 0, 128]),
            (
                json!(18446744073709551615_u64),
                &[131, 110, 8, 0, 255, 255, 255, 255, 255, 255, 255, 255],
            ),
            (
                ejson::from_str("12345678901234567890123").unwrap(),
                &[131, 110, 10, 0, 203, 68, 66, 113, 118, 78, 182, 66, 157, 2],
            ),
            (
                ejson::from_str("-12345678901234567890123").unwrap(),
                &[131, 110, 10, 1, 203, 68, 66, 113, 118, 78, 182, 66, 157, 2],
            ),
            (json!(1.5), &[131, 70, 63, 248, 0, 0, 0, 0, 0, 0]),
            (json!(-0.0), &[131, 70, 128, 0, 0, 0, 0, 0, 0, 0]),
            (json!("é"), &[131, 109, 0, 0, 0, 2, 195, 169]),
            (json!([]), &[131, 106]),
            (json!([1, 2, 3]), &[131, 107, 0, 3, 1, 2, 3]),
            (
                json!([1, 256]),
                &[131, 108, 0, 0, 0, 2, 97, 1, 98, 0, 0, 1, 0, 106],
            ),
            (
                json!([1.0]),
                &[131, 108, 0, 0, 0, 1, 70, 63, 240, 0, 0, 0, 0, 0, 0, 106],
            ),
            (json!({}), &[131, 104, 1, 106]),
            (
                json!({"a": [null]}),
                &[
                    131, 104, 1, 108, 0, 0, 0, 1, 104, 2, 109, 0, 0, 0, 1, 97, 108, 0, 0, 0, 1,
                    100, 0, 4, 110, 117, 108, 108, 106, 106,
                ],
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(&encode(value), expected, "{value}");
        }
    }

    #[test]
    fn object_members_keep_their_order() {
        let ab: Value = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        let ba: Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_ne!(encode(&ab), encode(&ba));
    }

    /// Reads back what [`ejson`] writes: enough of the format to show that
    /// the encoding loses nothing and that each term ends where it should.
    fn decode(bytes: &mut &[u8]) -> Value {
        fn take<'a>(bytes: &mut &'a [u8], n: usize) -> &'a [u8] {
            let (head, rest) = bytes.split_at(n);
            *bytes = rest;
            head
        }
        fn len32(bytes: &mut &[u8]) -> usize {
            u32::from_be_bytes(take(bytes, 4).try_into().unwrap()) as usize
        }
        let tag = take(bytes, 1)[0];
        match tag {
            SMALL_INTEGER => json!(take(bytes, 1)[0]),
            INTEGER => json!(i32::from_be_bytes(take(bytes, 4).try_into().unwrap())),
            SMALL_BIG => {
                let n = take(bytes, 1)[0] as usize;
                let negative = take(bytes, 1)[0] == 1;
                let mut magnitude = [0u8; 16];
                magnitude[..n].copy_from_slice(take(bytes, n));
                let m = u128::from_le_bytes(magnitude);
                if negative {
                    json!(-(m as i128) as i64)
                } else {
                    json!(m as u64)
                }
            }
            NEW_FLOAT => json!(f64::from_be_bytes(take(bytes, 8).try_into().unwrap())),
            ATOM => {
                let n = u16::from_be_bytes(take(bytes, 2).try_into().unwrap()) as usize;
                match take(bytes, n) {
                    b"null" => Value::Null,
                    b"true" => json!(true),
                    b"false" => json!(false),
                    other => panic!("atom {other:?}"),
                }
            }
            BINARY => {
                let n = len32(bytes);
                json!(std::str::from_utf8(take(bytes, n)).unwrap())
            }
            NIL => json!([]),
            STRING => {
                let n = u16::from_be_bytes(take(bytes, 2).try_into().unwrap()) as usize;
                json!(take(bytes, n))
            }
            LIST => {
                let n = len32(bytes);
                let items: Vec<Value> = (0..n).map(|_| decode(bytes)).collect();
                assert_eq!(take(bytes, 1)[0], NIL);
                Value::Array(items)
            }
            SMALL_TUPLE => {
                assert_eq!(take(bytes, 1)[0], 1, "an object is a 1-tuple");
                let mut map = serde_json::Map::new();
                match take(bytes, 1)[0] {
                    NIL => {}
                    LIST => {
                        for _ in 0..len32(bytes) {
                            assert_eq!(take(bytes, 2), [SMALL_TUPLE, 2]);
                            let Value::String(key) = decode(bytes) else {
                                panic!("a key is a binary")
                            };
                            map.insert(key, decode(bytes));
                        }
                        assert_eq!(take(bytes, 1)[0], NIL);
                    }
                    other => panic!("members tag {other}"),
                }
                Value::Object(map)
            }
            other => panic!("tag {other}"),
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (0u8..=255).prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec(("[a-z_é]{0,6}", inner), 0..8)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn every_value_reads_back_whole_and_nothing_more(value in json_value()) {
            let bytes = encode(&value);
            let mut rest = &bytes[1..];
            prop_assert_eq!(decode(&mut rest), value);
            prop_assert!(rest.is_empty());
        }

        #[test]
        fn different_values_encode_differently(a in json_value(), b in json_value()) {
            prop_assume!(a != b);
            prop_assert_ne!(encode(&a), encode(&b));
        }
    }
}
