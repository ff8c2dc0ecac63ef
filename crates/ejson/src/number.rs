//! Numbers as CouchDB keeps them.
//!
//! CouchDB decodes JSON with jiffy and keeps each number as an Erlang term:
//! an integer of any size, or a double. Its revision ids hash those terms
//! and its answers print them, so a number's text on the way out is a
//! function of the term, not of what the client sent. This module is that
//! function, applied once where JSON is read ([`canonical`]) and once where
//! a double is written ([`push_float`]):
//!
//! - Integers (no fraction, no exponent) are kept exactly, whatever their
//!   size, as long as they convert to a finite double (CouchDB fails on
//!   larger ones; we refuse them with the out-of-range error).
//! - Other numbers become doubles as jiffy makes them: the nearest double
//!   for text shorter than 32 bytes whose value is a normal double; for the
//!   rest, Erlang's own conversions (`list_to_float` when there is a
//!   fraction, else the integer times `math:pow(10, Exp)`), which is why
//!   `5e-324` reads as `0.0` on CouchDB while `4.9e-324` reads as `5e-324`.
//!   Infinity is out of range.
//! - Doubles are written in the shortest form that reads back to the same
//!   double, as double-conversion writes them for jiffy: plain decimals
//!   with a trailing `.0` for exponents from -6 to 20, otherwise
//!   `d.ddde+XX`/`d.ddde-XX`; `-0.0` is written `0.0`. Parsed values keep
//!   the sign of a negative zero as the text `-0.0` (it enters revision
//!   ids as in CouchDB); only writers drop it ([`output_form`]).

use std::borrow::Cow;

/// jiffy copies a number into a 32-byte buffer for the C library's
/// conversions; longer text takes Erlang's slower path.
const SHORT_NUMBER: usize = 32;

/// A number's text could not be kept: not a JSON number, or outside what
/// CouchDB can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("not a JSON number")]
    Syntax,
    #[error("number out of range")]
    OutOfRange,
}

/// A number as CouchDB holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decoded<'a> {
    /// An integer: its sign and its decimal digits without leading zeros
    /// (`"0"` for zero, which is never negative).
    Integer { negative: bool, digits: &'a str },
    /// A double (a negative zero keeps its sign).
    Float(f64),
}

/// The parts of a number's text, checked against JSON's grammar
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
struct Parts<'a> {
    negative: bool,
    int: &'a str,
    frac: Option<&'a str>,
    exp: Option<&'a str>,
}

fn parts(text: &str) -> Result<Parts<'_>, NumberError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = bytes.first() == Some(&b'-');
    if negative {
        i = 1;
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map_or(bytes.len(), |n| from + n)
    };
    let int_end = digits(i);
    let int = &text[i..int_end];
    if int.is_empty() || (int.len() > 1 && int.starts_with('0')) {
        return Err(NumberError::Syntax);
    }
    i = int_end;
    let mut frac = None;
    if bytes.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return Err(NumberError::Syntax);
        }
        frac = Some(&text[i + 1..end]);
        i = end;
    }
    let mut exp = None;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
        let end = digits(i + 1 + sign);
        if end == i + 1 + sign {
            return Err(NumberError::Syntax);
        }
        exp = Some(&text[i + 1..end]);
        i = end;
    }
    if i != bytes.len() {
        return Err(NumberError::Syntax);
    }
    Ok(Parts {
        negative,
        int,
        frac,
        exp,
    })
}

/// What CouchDB makes of a number's text.
pub fn decode(text: &str) -> Result<Decoded<'_>, NumberError> {
    let p = parts(text)?;
    match (p.frac, p.exp) {
        (None, None) => {
            let digits = p.int;
            // Past 2^1024 Erlang cannot make a double of it, and CouchDB
            // fails; 309 digits is where that can start.
            if digits.len() >= 309 && !integer_to_f64(digits).is_finite() {
                return Err(NumberError::OutOfRange);
            }
            Ok(Decoded::Integer {
                negative: p.negative && digits != "0",
                digits,
            })
        }
        (frac, Some(exp)) if frac.is_none() => {
            if text.len() < SHORT_NUMBER
                && let Some(x) = short_float(text, &p)
            {
                return Ok(Decoded::Float(x));
            }
            // jiffy's `bignum_e`: the integer times `math:pow(10, Exp)`,
            // each an Erlang double operation that fails on infinity.
            let scale = pow10(exponent_value(exp));
            let magnitude = integer_to_f64(p.int);
            if !scale.is_finite() || !magnitude.is_finite() {
                return Err(NumberError::OutOfRange);
            }
            let signed = if p.negative { -magnitude } else { magnitude };
            let x = signed * scale;
            if x.is_finite() {
                Ok(Decoded::Float(x))
            } else {
                Err(NumberError::OutOfRange)
            }
        }
        _ => {
            if text.len() < SHORT_NUMBER
                && let Some(x) = short_float(text, &p)
            {
                return Ok(Decoded::Float(x));
            }
            // jiffy's `bigdbl`: Erlang's `list_to_float`, the nearest
            // double, refused when infinite.
            let x = parse_nearest(text);
            if x.is_finite() {
                Ok(Decoded::Float(x))
            } else {
                Err(NumberError::OutOfRange)
            }
        }
    }
}

/// What a number's text holds when the text is one of ours (a parsed
/// value's, or stored): an integer, or the nearest double. Unlike
/// [`decode`], no jiffy rule applies twice: `5e-324` is the smallest
/// double here, as it was when CouchDB's rules made that text.
pub fn value_of(text: &str) -> Result<Decoded<'_>, NumberError> {
    let p = parts(text)?;
    if p.frac.is_none() && p.exp.is_none() {
        return Ok(Decoded::Integer {
            negative: p.negative && p.int != "0",
            digits: p.int,
        });
    }
    Ok(Decoded::Float(parse_nearest(text)))
}

/// The C library's `strtod` on short text, unless it reports a range
/// error (infinite, subnormal, or zero from non-zero digits): jiffy then
/// hands the text to Erlang.
fn short_float(text: &str, p: &Parts<'_>) -> Option<f64> {
    let x = parse_nearest(text);
    let tiny = x.abs() < f64::MIN_POSITIVE;
    let zero_digits = p
        .int
        .bytes()
        .chain(p.frac.unwrap_or("").bytes())
        .all(|b| b == b'0');
    let range_error = x.is_infinite() || (tiny && (x != 0.0 || !zero_digits));
    (!range_error).then_some(x)
}

/// The nearest double (the standard library's parser rounds correctly, as
/// glibc's `strtod` and Erlang's `list_to_float` do); infinite past the
/// largest double.
fn parse_nearest(text: &str) -> f64 {
    text.parse::<f64>().unwrap_or(f64::NAN)
}

/// An exponent's value, clamped far past where any double under- or
/// overflows.
fn exponent_value(exp: &str) -> i32 {
    let (negative, digits) = match exp.as_bytes().first() {
        Some(b'-') => (true, &exp[1..]),
        Some(b'+') => (false, &exp[1..]),
        _ => (false, exp),
    };
    let digits = digits.trim_start_matches('0');
    let magnitude = if digits.len() > 6 {
        1_000_000
    } else {
        digits.parse::<i32>().unwrap_or(0)
    };
    if negative { -magnitude } else { magnitude }
}

/// `math:pow(10, Exp)`: the C library's `pow`, as Erlang calls it. The base
/// is hidden from the optimizer so that the call is not rewritten into
/// another function with other roundings.
fn pow10(exp: i32) -> f64 {
    std::hint::black_box(10.0_f64).powf(f64::from(exp))
}

/// An integer's digits as Erlang converts a bignum to a double: 64-bit
/// digits from the most significant, `d * 2^64 + digit` at each step, each
/// step rounded (not always the nearest double, and that is the point).
fn integer_to_f64(digits: &str) -> f64 {
    let mut d = 0.0_f64;
    for limb in limbs(digits).iter().rev() {
        d = d * 18_446_744_073_709_551_616.0 + *limb as f64;
    }
    d
}

/// Decimal digits as little-endian 64-bit limbs.
pub(crate) fn limbs(digits: &str) -> Vec<u64> {
    let mut limbs: Vec<u64> = Vec::with_capacity(digits.len() / 19 + 1);
    // Nineteen decimal digits at a time: limbs = limbs * 10^n + chunk.
    for chunk in digits.as_bytes().chunks(19) {
        let mut multiplier: u128 = 1;
        let mut value: u128 = 0;
        for b in chunk {
            multiplier *= 10;
            value = value * 10 + u128::from(b - b'0');
        }
        let mut carry = value;
        for limb in limbs.iter_mut() {
            let product = u128::from(*limb) * multiplier + carry;
            *limb = product as u64;
            carry = product >> 64;
        }
        if carry != 0 {
            limbs.push(carry as u64);
        }
    }
    limbs
}

/// An integer's magnitude as little-endian bytes, without trailing zeros
/// (Erlang's bignum digits).
pub fn integer_bytes(digits: &str) -> Vec<u8> {
    let mut bytes: Vec<u8> = limbs(digits).iter().flat_map(|l| l.to_le_bytes()).collect();
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

/// The text CouchDB writes for this number (negative zero kept as `-0.0`,
/// see [`output_form`]); borrowed when the text is already that.
pub fn canonical(text: &str) -> Result<Cow<'_, str>, NumberError> {
    match decode(text)? {
        Decoded::Integer { negative, digits } => {
            if negative == text.starts_with('-')
                && digits.len() + usize::from(negative) == text.len()
            {
                Ok(Cow::Borrowed(text))
            } else {
                // Only `-0` gets here.
                Ok(Cow::Owned(digits.to_owned()))
            }
        }
        Decoded::Float(x) => {
            let mut out = String::with_capacity(24);
            push_float_keeping_sign(&mut out, x);
            if out == text {
                Ok(Cow::Borrowed(text))
            } else {
                Ok(Cow::Owned(out))
            }
        }
    }
}

/// The text a writer sends for a number held as `text`: a negative zero
/// is written `0.0`, as CouchDB writes it, and a double in exponent form
/// made elsewhere (serde_json writes `1e21`) is rewritten as CouchDB writes
/// the same double. Everything else is already CouchDB's text: integers,
/// and doubles in decimal form, which every shortest formatter writes
/// alike. Unlike [`canonical`], a double is read back as the nearest one:
/// this is text of ours, not a client's.
pub fn output_form(text: &str) -> Cow<'_, str> {
    if text == "-0.0" || text == "-0" {
        return Cow::Borrowed(if text == "-0" { "0" } else { "0.0" });
    }
    if !text.bytes().any(|b| b == b'e' || b == b'E') {
        return Cow::Borrowed(text);
    }
    match parts(text) {
        Ok(_) => {
            let x = parse_nearest(text);
            if x.is_finite() {
                let mut out = String::with_capacity(24);
                push_float(&mut out, x);
                Cow::Owned(out)
            } else {
                Cow::Borrowed(text)
            }
        }
        // Not a number this module can hold: left as it is.
        Err(_) => Cow::Borrowed(text),
    }
}

/// Appends a finite double as CouchDB writes it (`-0.0` as `0.0`).
pub fn push_float(out: &mut String, x: f64) {
    if x == 0.0 {
        out.push_str("0.0");
    } else {
        push_float_keeping_sign(out, x);
    }
}

/// A finite double as a JSON number with CouchDB's text, or `None` for
/// infinities and NaN (which JSON cannot hold).
pub fn float_number(x: f64) -> Option<serde_json::Number> {
    if !x.is_finite() {
        return None;
    }
    let mut text = String::with_capacity(24);
    push_float_keeping_sign(&mut text, x);
    text.parse().ok()
}

/// double-conversion's shortest form with jiffy's flags.
fn push_float_keeping_sign(out: &mut String, x: f64) {
    if x.is_sign_negative() {
        out.push('-');
    }
    if x == 0.0 {
        out.push_str("0.0");
        return;
    }
    let mut buffer = ryu::Buffer::new();
    let shortest = buffer.format_finite(x.abs());
    let (digits, point) = digits_and_point(shortest);
    let digits = digits.as_str();
    let exponent = point - 1;
    if (-6..21).contains(&exponent) {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(digits);
        } else if point as usize >= digits.len() {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&exponent.unsigned_abs().to_string());
    }
}

/// The significant digits of ryu's shortest text (no leading or trailing
/// zeros) and where the decimal point goes: the value is
/// `0.DIGITS * 10^point`.
fn digits_and_point(shortest: &str) -> (String, i32) {
    let (mantissa, exp) = match shortest.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (shortest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut point = int.len() as i32 + exp;
    let mut digits: String = int.chars().chain(frac.chars()).collect();
    let leading = digits.len() - digits.trim_start_matches('0').len();
    digits.drain(..leading);
    point -= leading as i32;
    let kept = digits.trim_end_matches('0').len();
    digits.truncate(kept);
    (digits, point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(text: &str) -> String {
        canonical(text).expect(text).into_owned()
    }

    /// Pairs read off CouchDB 3.5: what it answers for each number written.
    #[test]
    fn numbers_come_back_as_couchdb_writes_them() {
        for (sent, kept) in [
            ("1e2", "100.0"),
            ("1E-7", "1e-7"),
            ("1.5e300", "1.5e+300"),
            ("1.0", "1.0"),
            ("-0", "0"),
            ("0.1", "0.1"),
            ("1e-6", "0.000001"),
            ("1e-5", "0.00001"),
            ("1e20", "100000000000000000000.0"),
            ("1e21", "1e+21"),
            ("123456789012345678901.5", "123456789012345680000.0"),
            ("1e15", "1000000000000000.0"),
            ("1e16", "10000000000000000.0"),
            ("12345678901234567890123", "12345678901234567890123"),
            ("100000000000000000000", "100000000000000000000"),
            ("-18446744073709551617", "-18446744073709551617"),
            ("0.36920404944799556", "0.36920404944799556"),
            ("5e-324", "0.0"),
            ("4.9e-324", "5e-324"),
            ("1e-400", "0.0"),
            ("1.0e-400", "0.0"),
            ("1e-320", "1e-320"),
            ("1.5e-320", "1.5e-320"),
            ("9e-324", "0.0"),
            ("2.4703282292062328e-324", "5e-324"),
            ("2.4703282292062327e-324", "0.0"),
            ("2.2250738585072014e-308", "2.2250738585072014e-308"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("-1.5E+3", "-1500.0"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("123.456e5", "12345600.0"),
            ("1e0", "1.0"),
            ("0e0", "0.0"),
            ("9007199254740993", "9007199254740993"),
            ("9007199254740993.0", "9007199254740992.0"),
            ("123456789012345678901234567890e5", "1.2345678901234567e+34"),
            (
                "1234567890123456789012345678901e-5",
                "1.234567890123457e+25",
            ),
            ("0.000000000000000000000000000000001", "1e-33"),
            (
                "123456789012345678901234567890.123",
                "1.2345678901234568e+29",
            ),
        ] {
            let mut shown = canon(sent);
            if shown == "-0.0" {
                shown = "0.0".into();
            }
            assert_eq!(shown, kept, "{sent}");
            assert_eq!(output_form(&canon(sent)), kept, "{sent}");
        }
    }

    #[test]
    fn negative_zero_keeps_its_sign_until_written() {
        for sent in ["-0.0", "-0e5", "-5e-324", "-1e-400", "-1.0e-400"] {
            assert_eq!(canon(sent), "-0.0", "{sent}");
            assert_eq!(output_form(&canon(sent)), "0.0", "{sent}");
        }
        assert_eq!(
            decode("-0"),
            Ok(Decoded::Integer {
                negative: false,
                digits: "0"
            })
        );
    }

    #[test]
    fn what_couchdb_cannot_hold_is_out_of_range() {
        for sent in [
            "1e400",
            "2e308",
            "1.0e400",
            "1.7976931348623159e308",
            "-1e309",
        ] {
            assert_eq!(decode(sent), Err(NumberError::OutOfRange), "{sent}");
        }
        let at_limit = format!("1{}", "0".repeat(308));
        assert!(decode(&at_limit).is_ok());
        let past = format!("1{}", "0".repeat(309));
        assert_eq!(decode(&past), Err(NumberError::OutOfRange));
    }

    #[test]
    fn text_that_is_not_a_number_is_refused() {
        for sent in [
            "", "-", "00", "01", "1.", ".5", "+1", "1e", "1e+", "1.e5", "--1", "1x", "0x10", " 1",
        ] {
            assert_eq!(decode(sent), Err(NumberError::Syntax), "{sent:?}");
        }
    }

    #[test]
    fn canonical_text_borrows_when_unchanged() {
        assert!(matches!(canonical("42").unwrap(), Cow::Borrowed(_)));
        assert!(matches!(canonical("0.5").unwrap(), Cow::Borrowed(_)));
        assert!(matches!(canonical("1e+21").unwrap(), Cow::Borrowed(_)));
        assert!(matches!(canonical("1e21").unwrap(), Cow::Owned(_)));
    }

    #[test]
    fn integer_bytes_are_little_endian_magnitude() {
        assert_eq!(integer_bytes("0"), Vec::<u8>::new());
        assert_eq!(integer_bytes("255"), vec![255]);
        assert_eq!(integer_bytes("256"), vec![0, 1]);
        assert_eq!(
            integer_bytes("18446744073709551617"),
            vec![1, 0, 0, 0, 0, 0, 0, 0, 1]
        );
    }

    proptest! {
        /// Every double is written so that it reads back to itself, and
        /// writing that text again changes nothing.
        #[test]
        fn doubles_round_trip(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            prop_assume!(x.is_finite());
            let mut text = String::new();
            push_float_keeping_sign(&mut text, x);
            let back: f64 = text.parse().unwrap();
            prop_assert_eq!(back.to_bits(), x.to_bits(), "{}", text);
            // Normal doubles come back from their text unchanged; jiffy's
            // Erlang path may move subnormals written with an exponent.
            if x.abs() >= f64::MIN_POSITIVE || x == 0.0 {
                prop_assert_eq!(canon(&text), text.clone());
            }
            // A writer keeps it, subnormals too (but for the zero's sign).
            let shown = if x == 0.0 { "0.0".to_string() } else { text.clone() };
            prop_assert_eq!(output_form(&text).into_owned(), shown);
        }

        /// The decimal digits of an integer survive the trip through limbs.
        #[test]
        fn integers_convert_exactly(n in any::<u128>()) {
            let digits = n.to_string();
            let bytes = integer_bytes(&digits);
            let mut back = [0u8; 16];
            back[..bytes.len()].copy_from_slice(&bytes);
            prop_assert_eq!(u128::from_le_bytes(back), n);
            prop_assert_eq!(integer_to_f64(&digits), {
                let hi = (n >> 64) as u64;
                let lo = n as u64;
                hi as f64 * 18_446_744_073_709_551_616.0 + lo as f64
            });
        }

        /// Any number text either decodes to what its canonical text
        /// decodes to, or is refused.
        #[test]
        fn canonical_text_is_stable(
            negative in any::<bool>(),
            int in "(0|[1-9][0-9]{0,40})",
            frac in proptest::option::of("[0-9]{1,30}"),
            exp in proptest::option::of("[eE][+-]?[0-9]{1,3}"),
        ) {
            let text = format!(
                "{}{}{}{}",
                if negative { "-" } else { "" },
                int,
                frac.map(|f| format!(".{f}")).unwrap_or_default(),
                exp.unwrap_or_default()
            );
            // (Subnormals are not: jiffy reads `5e-324`, which it writes
            // for the smallest one, as zero.)
            let subnormal = matches!(decode(&text), Ok(Decoded::Float(x)) if x != 0.0 && x.abs() < f64::MIN_POSITIVE);
            if let (Ok(c), false) = (canonical(&text), subnormal) {
                let again = canon(&c);
                prop_assert_eq!(&again, c.as_ref(), "{}", text);
            }
        }
    }
}
