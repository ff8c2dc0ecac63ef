//! CouchDB's orders of JSON values, one implementation shared by every
//! part that compares: views, Mango, `_all_docs`-style ranges. This module
//! is the view collation (ICU's root order); [`raw`] is the raw order
//! (Erlang's term order) that views may ask for.

pub mod raw;

/// Which string order this is, as CouchDB names its ICU collator's version
/// in a view's `_info` (`collator_versions`): the collation library and its
/// major version, whose root order data changes only with it. An index
/// built under another name was sorted by another order.
pub const COLLATOR_VERSION: &str = "icu4x-2";

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// Orders two JSON values as CouchDB's view collation does:
/// `null < false < true < numbers < strings < arrays < objects`.
///
/// Numbers compare by value (`1` equals `1.0`), arrays element by element
/// with a prefix first, objects member by member in their stored order (key,
/// then value; a prefix first), so member order matters as it does in CouchDB.
///
/// Strings: CouchDB uses ICU's root collation (the Unicode Collation
/// Algorithm, tertiary strength), as [`collate_str`] does.
pub fn collate(a: &Value, b: &Value) -> Ordering {
    let by_type = type_rank(a).cmp(&type_rank(b));
    if by_type != Ordering::Equal {
        return by_type;
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => collate_str(x, y),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(i, j)| collate(i, j))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .zip(y)
            .map(|((ka, va), (kb, vb))| collate_str(ka, kb).then_with(|| collate(va, vb)))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        // null, or two booleans of the same rank.
        _ => Ordering::Equal,
    }
}

fn type_rank(value: &Value) -> u8 {
    match value {
        Value::Null => 0,
        Value::Bool(false) => 1,
        Value::Bool(true) => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

/// Erlang term equality, which CouchDB's `$all` uses instead of collation:
/// strings byte for byte, objects member by member in order. With `exact`
/// (Erlang's `=:=`) an integer never equals a float; without it (`==`) they
/// compare by value.
pub fn terms_equal(a: &Value, b: &Value, exact: bool) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => {
            if exact && (integer_of(x).is_some() != integer_of(y).is_some()) {
                return false;
            }
            compare_numbers(x, y) == Ordering::Equal
        }
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| terms_equal(i, j, exact))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && terms_equal(va, vb, exact))
        }
        _ => false,
    }
}

/// A JSON number that is written as an integer (as Erlang's `is_integer`).
pub fn integer_of(n: &Number) -> Option<i128> {
    n.as_i128()
}

/// A JSON value that is an integer (see [`integer_of`]).
pub fn integer(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => integer_of(n),
        _ => None,
    }
}

/// Compares numbers by exact value, integers against floats included.
pub(crate) fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (integer_of(a), integer_of(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(x), None) => compare_integer_float(x, b.as_f64().unwrap_or(0.0)),
        (None, Some(y)) => compare_integer_float(y, a.as_f64().unwrap_or(0.0)).reverse(),
        (None, None) => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

/// `i` against `f` without the rounding of a plain `i as f64`: the rounded
/// comparison is right unless it says "equal", and then `f` is a whole number
/// that can be compared as an integer.
fn compare_integer_float(i: i128, f: f64) -> Ordering {
    match (i as f64).partial_cmp(&f) {
        Some(Ordering::Equal) => i.cmp(&(f as i128)),
        Some(ordering) => ordering,
        None => Ordering::Equal,
    }
}

/// Orders strings as CouchDB does: ICU's root collation (the Unicode
/// Collation Algorithm with CLDR's root order, tertiary strength), here from
/// ICU4X. So `a < A < aa < b < B`, punctuation and symbols before digits
/// before letters, accents after case-insensitive letters, and ignorable
/// characters ignored. `tests/tests/couchdb_collation.rs` checks the order
/// against CouchDB's own.
pub(crate) fn collate_str(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match &*ROOT {
        Some(collator) => collator.compare(a, b),
        // The collation data is compiled in; without it, code points.
        None => a.cmp(b),
    }
}

/// Writes `value`'s sort key: bytes whose order (`memcmp`, as SQLite
/// orders BLOBs) is [`collate`]'s order, so an index can keep keys sorted
/// and answer ranges without decoding them. Keys equal under collation
/// (`"c"` and `"c\u{200B}"`) get equal bytes.
///
/// Each value starts with its type's byte (null 1, false 2, true 3, number
/// 4, string 5, array 6, object 7); a number is its double in an
/// order-keeping 8 bytes (integers past 2^53 round as doubles do); a string
/// is its ICU sort key, which never holds a zero byte, then 0; an array its
/// elements, then 0; an object its members (key as a string, then value),
/// then 0. The closing 0 sorts a prefix first, as collation does.
pub fn sort_key(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(1),
        Value::Bool(false) => out.push(2),
        Value::Bool(true) => out.push(3),
        Value::Number(n) => {
            out.push(4);
            number_sort_key(n, out);
        }
        Value::String(s) => string_sort_key(s, out),
        Value::Array(items) => {
            out.push(6);
            for item in items {
                sort_key(item, out);
            }
            out.push(0);
        }
        Value::Object(members) => {
            out.push(7);
            for (k, v) in members {
                string_sort_key(k, out);
                sort_key(v, out);
            }
            out.push(0);
        }
    }
}

/// A number as its double in 8 bytes whose order is the numbers' order.
pub(crate) fn number_sort_key(n: &Number, out: &mut Vec<u8>) {
    let f = n.as_f64().unwrap_or(0.0);
    // -0 equals 0, as in CouchDB.
    let bits = if f == 0.0 {
        0.0f64.to_bits()
    } else {
        f.to_bits()
    };
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    out.extend_from_slice(&ordered.to_be_bytes());
}

fn string_sort_key(s: &str, out: &mut Vec<u8>) {
    out.push(5);
    match &*ROOT {
        Some(collator) => {
            let _ = collator.write_sort_key_to(s, out);
        }
        // Code points, shifted clear of the terminator.
        None => out.extend(s.bytes().map(|b| b.saturating_add(1).max(1))),
    }
    out.push(0);
}

/// The root collator, made once.
static ROOT: std::sync::LazyLock<Option<icu_collator::CollatorBorrowed<'static>>> =
    std::sync::LazyLock::new(|| {
        icu_collator::Collator::try_new(Default::default(), Default::default()).ok()
    });

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn collation_orders_couchdb_reference_values() {
        // From couch_ejson_compare_tests.erl and view_collation tests.
        let ordered = [
            json!(null),
            json!(false),
            json!(true),
            json!(-2),
            json!(-0.1),
            json!(0),
            json!(0.1),
            json!(1),
            json!(2),
            json!(3.0),
            json!(4),
            json!("a"),
            json!("A"),
            json!("aa"),
            json!("b"),
            json!("B"),
            json!("ba"),
            json!("bb"),
            json!(["a"]),
            json!(["b"]),
            json!(["b", "c"]),
            json!(["b", "c", "a"]),
            json!(["b", "d"]),
            json!(["b", "d", "e"]),
            json!({"a": 1}),
            json!({"a": 2}),
            json!({"b": 1}),
            json!({"b": 2}),
            json!({"b": 2, "a": 1}),
            json!({"b": 2, "c": 2}),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(collate(a, b), i.cmp(&j), "{a} against {b}");
            }
        }
    }

    #[test]
    fn strings_compare_case_insensitively_first_then_lowercase_first() {
        // CouchDB's documented examples: abc < Abc < ABC < abc1 < AbcZZZZZ.
        let ordered = ["abc", "Abc", "ABC", "abc1", "AbcZZZZZ"];
        for pair in ordered.windows(2) {
            if let [a, b] = pair {
                assert_eq!(collate_str(a, b), Ordering::Less, "{a} < {b}");
                assert_eq!(collate_str(b, a), Ordering::Greater, "{b} > {a}");
            }
        }
        assert_eq!(collate_str("A", "aa"), Ordering::Less);
        assert_eq!(collate_str("a", "AA"), Ordering::Less);
        assert_eq!(collate_str("Zebra", "apple"), Ordering::Greater);
    }

    #[test]
    fn ascii_symbols_sort_before_digits_and_letters_in_icu_order() {
        let order: Vec<String> =
            "\t\n\u{b}\u{c}\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCyYzZ"
                .chars()
                .map(String::from)
                .collect();
        for pair in order.windows(2) {
            if let [a, b] = pair {
                assert_eq!(collate_str(a, b), Ordering::Less, "{a:?} < {b:?}");
            }
        }
        // "Even the high symbols like tilde" sort before numbers and letters.
        assert_eq!(collate_str("~", "0"), Ordering::Less);
        assert_eq!(collate_str("10", "9"), Ordering::Less);
        assert_eq!(collate_str("a-b", "a_b"), Ordering::Greater);
    }

    #[test]
    fn zero_width_and_control_characters_are_ignored_in_comparisons() {
        assert_eq!(collate_str("c", "c\u{200B}"), Ordering::Equal);
        assert_eq!(
            collate_str("c", "\u{200C}c\u{200D}\u{200B}"),
            Ordering::Equal
        );
        assert_eq!(collate_str("ab", "a\u{1}b"), Ordering::Equal);
        assert_eq!(collate(&json!("c"), &json!("c\u{200B}")), Ordering::Equal);
    }

    #[test]
    fn accented_letters_sort_beside_their_base_letter() {
        let ordered = ["e", "E", "é", "É", "ea", "éa", "f"];
        for pair in ordered.windows(2) {
            if let [a, b] = pair {
                assert_eq!(collate_str(a, b), Ordering::Less, "{a} < {b}");
            }
        }
        assert_eq!(collate_str("côte", "cote"), Ordering::Greater);
        assert_eq!(collate_str("côte", "cotf"), Ordering::Less);
        assert_eq!(collate_str("Ærø", "aero"), Ordering::Greater);
        assert_eq!(collate_str("Ærø", "aerp"), Ordering::Less);
        assert_eq!(collate_str("straße", "strasse"), Ordering::Greater);
        assert_eq!(collate_str("straße", "strasses"), Ordering::Less);
        assert_eq!(collate_str("Łódź", "lodz"), Ordering::Greater);
        assert_eq!(collate_str("Łódź", "lodza"), Ordering::Less);
        // Precomposed and decomposed forms are canonically equivalent.
        assert_eq!(collate_str("\u{e9}", "e\u{301}"), Ordering::Equal);
        assert_eq!(collate_str("\u{c5}", "A\u{30a}"), Ordering::Equal);
    }

    #[test]
    fn other_scripts_and_high_code_points_sort_after_latin_letters() {
        assert_eq!(collate_str("z", "α"), Ordering::Less);
        assert_eq!(collate_str("α", "Α"), Ordering::Less);
        assert_eq!(collate_str("Α", "β"), Ordering::Less);
        // The usual "end of range" sentinels sort above every common string.
        assert_eq!(collate_str("abcz", "abc\u{fff0}"), Ordering::Less);
        assert_eq!(collate_str("abc漢字", "abc\u{fff0}"), Ordering::Less);
        assert_eq!(collate_str("zzz", "\u{f8ff}"), Ordering::Less);
        // Non-ASCII punctuation still sorts before digits.
        assert_eq!(collate_str("\u{2014}", "0"), Ordering::Less);
    }

    #[test]
    fn objects_compare_member_by_member_in_their_order() {
        let ab = json!({"a": 1, "b": 2});
        assert_ne!(collate(&ab, &json!({"b": 2, "a": 1})), Ordering::Equal);
        assert_eq!(collate(&ab, &json!({"a": 1, "b": 2})), Ordering::Equal);
        assert_eq!(
            collate(&json!({"a": 1}), &json!({"a": 1, "b": 0})),
            Ordering::Less
        );
    }

    fn key(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        sort_key(v, &mut out);
        out
    }

    #[test]
    fn sort_keys_order_the_reference_values() {
        let ordered = [
            json!(null),
            json!(false),
            json!(true),
            json!(-1e300),
            json!(-2),
            json!(-0.5),
            json!(0),
            json!(1e-300),
            json!(1),
            json!(2.5),
            json!(1e300),
            json!(""),
            json!(" "),
            json!("a"),
            json!("A"),
            json!("aa"),
            json!("b"),
            json!([]),
            json!([null]),
            json!(["a"]),
            json!(["a", 1]),
            json!(["b"]),
            json!({}),
            json!({"a": 1}),
            json!({"a": 1, "b": 1}),
            json!({"b": 0}),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(key(a).cmp(&key(b)), i.cmp(&j), "{a} against {b}");
            }
        }
        assert_eq!(key(&json!(-0.0)), key(&json!(0)));
        assert_eq!(key(&json!(1.0)), key(&json!(1)));
        assert_eq!(key(&json!("c")), key(&json!("c\u{200B}")));
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000_000i64..1_000_000).prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-cA-C ,.'\\-_éè\u{200b}ß中]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[ab]{1,2}", inner), 0..3)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The bytes order exactly as collation does.
        #[test]
        fn sort_keys_agree_with_collate(a in any_json(), b in any_json()) {
            proptest::prop_assert_eq!(key(&a).cmp(&key(&b)), collate(&a, &b), "{} against {}", a, b);
        }
    }
}
