//! CouchDB's view collation, checked against CouchDB 3.5 itself: the same
//! keys (strings of many scripts, punctuation, accents, case, ignorable
//! characters; numbers; arrays; objects) emitted by a view on CouchDB come
//! back in the order `collation::collate` gives them. Needs
//! `COUCHDB_URL` (set by `cargo xtask test`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::couchdb::{couchdb, unique_db};
use serde_json::{Value, json};

/// Keys clients emit: every ASCII character alone and in pairs with letters,
/// case and accents, other scripts, ignorable and combining characters.
fn keys() -> Vec<Value> {
    let mut keys: Vec<Value> = Vec::new();
    for c in (0x20u8..0x7f).map(char::from) {
        keys.push(json!(c.to_string()));
        keys.push(json!(format!("a{c}")));
        keys.push(json!(format!("{c}b")));
    }
    for word in [
        "",
        " ",
        "a",
        "A",
        "aa",
        "aA",
        "Aa",
        "AA",
        "ab",
        "aB",
        "b",
        "B",
        "ba",
        "bb",
        "abc",
        "Abc",
        "ABC",
        "abc1",
        "abc10",
        "abc2",
        "résumé",
        "resume",
        "Résumé",
        "rèsume",
        "e",
        "é",
        "è",
        "ê",
        "ë",
        "E",
        "É",
        "cote",
        "coté",
        "côte",
        "côté",
        "Straße",
        "strasse",
        "Strasse",
        "ß",
        "ss",
        "æ",
        "ae",
        "Æ",
        "ø",
        "o",
        "ö",
        "œ",
        "oe",
        "å",
        "aa",
        "ñ",
        "n",
        "ç",
        "c",
        "ı",
        "i",
        "İ",
        "Ω",
        "ω",
        "α",
        "β",
        "Α",
        "б",
        "Б",
        "а",
        "я",
        "ж",
        "中",
        "文",
        "日本",
        "한국",
        "ไทย",
        "עברית",
        "العربية",
        "हिन्दी",
        "😀",
        "😁",
        "🎉",
        "\u{200b}",
        "c\u{200b}",
        "\u{0301}",
        "e\u{0301}",
        "a\u{0300}",
        "à",
        "\u{00a0}",
        "\t",
        "\n",
        "\u{2028}",
        "١٢٣",
        "123",
        "½",
        "①",
        "ⅰ",
        "ｆｕｌｌ",
        "full",
        "㎏",
        "kg",
        "ﬁ",
        "fi",
        "~~",
        "$1",
        "€",
        "£",
        "¥",
        "©",
        "®",
        "§",
        "¶",
        "•",
        "…",
        "–",
        "—",
        "‘",
        "’",
        "“",
        "”",
        "«",
        "»",
    ] {
        keys.push(json!(word));
    }
    for n in [
        json!(-1e10),
        json!(-2),
        json!(-1.5),
        json!(-0.0001),
        json!(0),
        json!(0.5),
        json!(1),
        json!(1.0),
        json!(2),
        json!(10),
        json!(1e20),
    ] {
        keys.push(n);
    }
    keys.extend([
        json!(null),
        json!(false),
        json!(true),
        json!([]),
        json!([null]),
        json!(["a"]),
        json!(["A"]),
        json!(["a", 1]),
        json!(["b"]),
        json!([1, "a"]),
        json!([[1]]),
        json!({}),
        json!({"a": 1}),
        json!({"A": 1}),
        json!({"a": 2}),
        json!({"b": 1}),
        json!({"a": 1, "b": 2}),
        json!({"b": 2, "a": 1}),
    ]);
    keys
}

#[tokio::test]
async fn keys_collate_as_couchdb_orders_them() {
    let Some(couch) = couchdb("keys_collate_as_couchdb_orders_them") else {
        return;
    };
    let c = couch.client();
    let db = unique_db("collation");
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let keys = keys();
    let docs: Vec<Value> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| json!({"_id": format!("k{i:04}"), "k": k}))
        .collect();
    let written = c
        .post(&format!("/{db}/_bulk_docs"), json!({ "docs": docs }))
        .await;
    assert_eq!(written.status, 201, "{}", written.text);
    let view = c
        .put(
            &format!("/{db}/_design/c"),
            json!({"views": {"k": {"map": "function (doc) { emit(doc.k, null); }"}}}),
        )
        .await;
    assert_eq!(view.status, 201);
    let rows = c.get(&format!("/{db}/_design/c/_view/k")).await.json();
    let couch_order: Vec<String> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(couch_order.len(), keys.len());

    let mut ours: Vec<(String, &Value)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("k{i:04}"), k))
        .collect();
    // Equal keys are ordered by document id, as in a view.
    ours.sort_by(|(ia, a), (ib, b)| collation::collate(a, b).then_with(|| ia.cmp(ib)));
    let our_order: Vec<String> = ours.into_iter().map(|(id, _)| id).collect();
    let shown = |ids: &[String]| -> Vec<String> {
        ids.iter()
            .map(|id| {
                let i: usize = id[1..].parse().unwrap();
                format!("{id}={}", keys[i])
            })
            .collect()
    };
    // Every pair of keys CouchDB and we put in different orders. The only
    // ones allowed come from the Unicode data: CouchDB 3.5 uses ICU 72
    // (CLDR 42), ICU4X a later CLDR, where the curly quotation marks are
    // variants of the ASCII ones (`‘` beside `'`) instead of symbols of
    // their own.
    let position = |order: &[String]| -> std::collections::HashMap<String, usize> {
        order
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect()
    };
    let ours_at = position(&our_order);
    let key_of = |id: &str| -> &Value { &keys[id[1..].parse::<usize>().unwrap()] };
    let newer_cldr = |v: &Value| {
        v.as_str()
            .is_some_and(|s| s.contains(['\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}']))
    };
    let mut unexplained = Vec::new();
    let mut explained = 0;
    for (i, a) in couch_order.iter().enumerate() {
        for b in &couch_order[i + 1..] {
            if ours_at[a] > ours_at[b] {
                if newer_cldr(key_of(a)) || newer_cldr(key_of(b)) {
                    explained += 1;
                } else {
                    unexplained.push(format!("CouchDB: {} < {}", key_of(a), key_of(b)));
                }
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "{} pairs of keys order differently from CouchDB:\n{}\n{:?}\n{:?}",
        unexplained.len(),
        unexplained.join("\n"),
        shown(&couch_order[..couch_order.len().min(60)]),
        shown(&our_order[..our_order.len().min(60)])
    );
    assert!(
        explained <= 8,
        "{explained} pairs differ by the quotation marks"
    );
}
