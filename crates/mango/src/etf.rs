//! The slice of Erlang's external term format that CouchDB's Mango puts
//! where clients see it: generated index names hash a definition in this
//! form, and bookmarks are such terms in base64. JSON values are written as
//! CouchDB holds them (objects as `{[{Key, Value}]}`, strings as binaries,
//! `true`/`false`/`null` as atoms), so names and bookmarks come out byte
//! for byte as CouchDB's.

use serde_json::{Map, Number, Value};

const VERSION: u8 = 131;
const SMALL_INTEGER: u8 = 97;
const INTEGER: u8 = 98;
const FLOAT: u8 = 70;
const ATOM: u8 = 100;
const SMALL_ATOM_UTF8: u8 = 119;
const ATOM_UTF8: u8 = 118;
const SMALL_TUPLE: u8 = 104;
const NIL: u8 = 106;
const STRING: u8 = 107;
const LIST: u8 = 108;
const BINARY: u8 = 109;
const SMALL_BIG: u8 = 110;
const COMPRESSED: u8 = 80;

/// A term: enough of Erlang's to hold JSON and Mango's option lists.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Term {
    Atom(String),
    Binary(String),
    Int(i128),
    Float(f64),
    Tuple(Vec<Term>),
    List(Vec<Term>),
}

impl Term {
    /// A JSON value as CouchDB's JSON decoder gives it to Erlang.
    pub(crate) fn json(value: &Value) -> Term {
        match value {
            Value::Null => Term::Atom("null".into()),
            Value::Bool(b) => Term::Atom(if *b { "true" } else { "false" }.into()),
            Value::Number(n) => number(n),
            Value::String(s) => Term::Binary(s.clone()),
            Value::Array(items) => Term::List(items.iter().map(Term::json).collect()),
            Value::Object(members) => Term::Tuple(vec![Term::List(
                members
                    .iter()
                    .map(|(k, v)| Term::Tuple(vec![Term::Binary(k.clone()), Term::json(v)]))
                    .collect(),
            )]),
        }
    }

    /// Back to JSON, for the terms `json` makes (bookmark keys).
    pub(crate) fn to_json(&self) -> Option<Value> {
        Some(match self {
            Term::Atom(a) => match a.as_str() {
                "null" => Value::Null,
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return None,
            },
            Term::Binary(s) => Value::String(s.clone()),
            Term::Int(i) => Value::Number(i.to_string().parse().ok()?),
            Term::Float(f) => Value::Number(ejson::number::float_number(*f)?),
            Term::List(items) => {
                Value::Array(items.iter().map(Term::to_json).collect::<Option<_>>()?)
            }
            Term::Tuple(items) => match items.as_slice() {
                [Term::List(members)] => {
                    let mut map = Map::new();
                    for member in members {
                        let Term::Tuple(pair) = member else {
                            return None;
                        };
                        let [Term::Binary(k), v] = pair.as_slice() else {
                            return None;
                        };
                        map.insert(k.clone(), v.to_json()?);
                    }
                    Value::Object(map)
                }
                _ => return None,
            },
        })
    }
}

/// A number as CouchDB holds it (`ejson::number`). Integers past 128 bits,
/// which no bookmark or index name of a real client holds, are written as
/// the nearest double.
fn number(n: &Number) -> Term {
    match ejson::number::value_of(n.as_str()) {
        Ok(ejson::number::Decoded::Integer { negative, digits }) => match digits.parse::<i128>() {
            Ok(i) => Term::Int(if negative { -i } else { i }),
            Err(_) => Term::Float(n.as_f64().unwrap_or(0.0)),
        },
        Ok(ejson::number::Decoded::Float(x)) => Term::Float(x),
        Err(_) => Term::Float(n.as_f64().unwrap_or(0.0)),
    }
}

/// `term_to_binary(Term, [{minor_version, 1}])`.
pub(crate) fn encode(term: &Term) -> Vec<u8> {
    let mut out = vec![VERSION];
    write(term, &mut out);
    out
}

/// `term_to_binary(Term, [compressed, {minor_version, 1}])`: zlib (level
/// 6) when that is shorter, as Erlang does.
pub(crate) fn encode_compressed(term: &Term) -> Vec<u8> {
    use std::io::Write;
    let plain = encode(term);
    let body = &plain[1..];
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
    if zlib.write_all(body).is_err() {
        return plain;
    }
    let Ok(packed) = zlib.finish() else {
        return plain;
    };
    if packed.len() + 5 >= body.len() {
        return plain;
    }
    let mut out = vec![VERSION, COMPRESSED];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&packed);
    out
}

fn write(term: &Term, out: &mut Vec<u8>) {
    match term {
        Term::Atom(name) => {
            out.push(ATOM);
            out.extend_from_slice(&(name.len() as u16).to_be_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        Term::Binary(s) => {
            out.push(BINARY);
            out.extend_from_slice(&(s.len() as u32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Term::Int(i) => write_int(*i, out),
        Term::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Term::Tuple(items) => {
            out.push(SMALL_TUPLE);
            out.push(items.len().min(255) as u8);
            for item in items {
                write(item, out);
            }
        }
        Term::List(items) if items.is_empty() => out.push(NIL),
        Term::List(items) => {
            // A list of bytes is Erlang's string form.
            let bytes: Option<Vec<u8>> = items
                .iter()
                .map(|t| match t {
                    Term::Int(i) => u8::try_from(*i).ok(),
                    _ => None,
                })
                .collect();
            match bytes {
                Some(bytes) if bytes.len() < 65536 => {
                    out.push(STRING);
                    out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                    out.extend_from_slice(&bytes);
                }
                _ => {
                    out.push(LIST);
                    out.extend_from_slice(&(items.len() as u32).to_be_bytes());
                    for item in items {
                        write(item, out);
                    }
                    out.push(NIL);
                }
            }
        }
    }
}

fn write_int(i: i128, out: &mut Vec<u8>) {
    if (0..=255).contains(&i) {
        out.push(SMALL_INTEGER);
        out.push(i as u8);
    } else if let Ok(small) = i32::try_from(i) {
        out.push(INTEGER);
        out.extend_from_slice(&small.to_be_bytes());
    } else {
        let mut magnitude = i.unsigned_abs();
        let mut digits = Vec::new();
        while magnitude > 0 {
            digits.push((magnitude & 0xff) as u8);
            magnitude >>= 8;
        }
        out.push(SMALL_BIG);
        out.push(digits.len() as u8);
        out.push(u8::from(i < 0));
        out.extend_from_slice(&digits);
    }
}

/// Reads a term written by `encode` or `encode_compressed` (or by
/// CouchDB), refusing anything else; never panics on hostile input.
pub(crate) fn decode(bytes: &[u8]) -> Option<Term> {
    let (&version, rest) = bytes.split_first()?;
    if version != VERSION {
        return None;
    }
    let owned;
    let body = match rest.split_first() {
        Some((&COMPRESSED, packed)) => {
            use std::io::Read;
            let size = u32::from_be_bytes(packed.get(..4)?.try_into().ok()?) as usize;
            // Bookmarks are small: refuse to inflate anything large.
            if size > MAX_DECODED {
                return None;
            }
            let mut inflated = Vec::with_capacity(size);
            flate2::read::ZlibDecoder::new(packed.get(4..)?)
                .take(MAX_DECODED as u64 + 1)
                .read_to_end(&mut inflated)
                .ok()?;
            if inflated.len() != size {
                return None;
            }
            owned = inflated;
            &owned[..]
        }
        _ => rest,
    };
    let mut reader = Reader { bytes: body, at: 0 };
    let term = reader.term(0)?;
    (reader.at == body.len()).then_some(term)
}

/// The largest decoded term accepted.
const MAX_DECODED: usize = 1 << 20;

/// How deeply terms may nest when read.
const MAX_DEPTH: usize = 100;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<usize> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?) as usize)
    }

    fn u32(&mut self) -> Option<usize> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?) as usize)
    }

    fn text(&mut self, n: usize) -> Option<String> {
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }

    fn term(&mut self, depth: usize) -> Option<Term> {
        if depth > MAX_DEPTH {
            return None;
        }
        Some(match self.u8()? {
            SMALL_INTEGER => Term::Int(i128::from(self.u8()?)),
            INTEGER => Term::Int(i128::from(i32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            FLOAT => Term::Float(f64::from_bits(u64::from_be_bytes(
                self.take(8)?.try_into().ok()?,
            ))),
            ATOM | ATOM_UTF8 => {
                let n = self.u16()?;
                Term::Atom(self.text(n)?)
            }
            SMALL_ATOM_UTF8 => {
                let n = usize::from(self.u8()?);
                Term::Atom(self.text(n)?)
            }
            BINARY => {
                let n = self.u32()?;
                Term::Binary(self.text(n)?)
            }
            SMALL_TUPLE => {
                let n = usize::from(self.u8()?);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.term(depth + 1)?);
                }
                Term::Tuple(items)
            }
            NIL => Term::List(Vec::new()),
            STRING => {
                let n = self.u16()?;
                Term::List(
                    self.take(n)?
                        .iter()
                        .map(|b| Term::Int(i128::from(*b)))
                        .collect(),
                )
            }
            LIST => {
                let n = self.u32()?;
                // Each element is at least one byte: a count past the
                // input is a lie, not an allocation to make.
                if n > self.bytes.len() - self.at {
                    return None;
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.term(depth + 1)?);
                }
                // Only proper lists.
                if self.u8()? != NIL {
                    return None;
                }
                Term::List(items)
            }
            SMALL_BIG => {
                let n = usize::from(self.u8()?);
                let negative = self.u8()? == 1;
                if n > 16 {
                    return None;
                }
                let mut magnitude: u128 = 0;
                for (i, b) in self.take(n)?.iter().enumerate() {
                    magnitude |= u128::from(*b) << (8 * i);
                }
                let value = i128::try_from(magnitude).ok()?;
                Term::Int(if negative { -value } else { value })
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_terms() {
        for value in [
            json!(null),
            json!([1, 300, -5, 99999999999i64, 1.5, "x", true, false]),
            json!({"a": [{"b": null}], "c": "d"}),
            json!([]),
            json!([40]),
        ] {
            let term = Term::json(&value);
            let back = decode(&encode(&term)).unwrap();
            assert_eq!(back.to_json(), Some(value.clone()));
            let back = decode(&encode_compressed(&term)).unwrap();
            assert_eq!(back.to_json(), Some(value));
        }
    }

    #[test]
    fn hostile_input_is_refused_not_trusted() {
        for bad in [
            &b""[..],
            &[131],
            &[131, 108, 255, 255, 255, 255],
            &[131, 109, 0, 0, 0, 9, b'a'],
            &[131, 80, 255, 255, 255, 255, 1, 2],
            &[130, 106],
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
