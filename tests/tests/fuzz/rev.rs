//! Target `rev`: revision ids (`RevId::parse`) and `_revisions` paths
//! (`RevPath`) from hostile text. Whatever is accepted must print back to
//! the same value, through `Display` and through serde_json, as valid JSON:
//! revisions travel between peers as text and must survive the trip.

use proptest::collection::vec;
use proptest::prelude::*;
use revtree::{RevId, RevPath};
use serde_json::Value;

use crate::driver::Violations;
use crate::hostile;

#[derive(Debug, Clone)]
pub enum Case {
    /// Two revision ids: each is checked, and the pair for ordering laws.
    Revs(String, String),
    /// `RevPath::from_parts(start, ids)`.
    Path { start: u64, ids: Vec<String> },
    /// A `_revisions` JSON text for serde.
    PathJson(String),
}

pub fn strategy() -> BoxedStrategy<Case> {
    let json_id = prop_oneof![
        4 => hostile::hash_text().prop_map(|h| Value::String(h).to_string()),
        1 => hostile::number_text(),
    ];
    prop_oneof![
        4 => (hostile::rev_text(), hostile::rev_text()).prop_map(|(a, b)| Case::Revs(a, b)),
        3 => (hostile::edge_u64(), vec(hostile::hash_text(), 0..5))
            .prop_map(|(start, ids)| Case::Path { start, ids }),
        2 => (hostile::number_text(), vec(json_id, 0..5)).prop_map(|(start, ids)| {
            Case::PathJson(format!("{{\"start\":{start},\"ids\":[{}]}}", ids.join(",")))
        }),
    ]
    .boxed()
}

pub fn check(case: &Case, v: &mut Violations) {
    match case {
        Case::Revs(a, b) => {
            let ra = check_rev(a, v);
            let rb = check_rev(b, v);
            if let (Some(ra), Some(rb)) = (ra, rb) {
                check_order(&ra, &rb, v);
            }
        }
        Case::Path { start, ids } => {
            let result = RevPath::from_parts(*start, ids);
            // Accepted exactly when CouchDB's shape rules hold.
            let acceptable = !ids.is_empty() && ids.len() as u64 <= *start;
            if result.is_ok() && !acceptable {
                v.add(
                    "RevPath accepted an inconsistent _revisions",
                    format!("start {start}, ids {ids:?}"),
                );
            }
            if let Ok(path) = result {
                check_path(&path, v);
            }
        }
        Case::PathJson(json) => {
            if let Ok(path) = serde_json::from_str::<RevPath>(json) {
                check_path(&path, v);
            }
        }
    }
}

/// Parses `text`; an accepted id must round-trip exactly (the hash kept verbatim).
fn check_rev(text: &str, v: &mut Violations) -> Option<RevId> {
    let rev = RevId::parse(text).ok()?;
    v.check(rev.pos() >= 1, "RevId accepted position 0", || {
        format!("{text:?}")
    });
    let shown = rev.to_string();
    match RevId::parse(&shown) {
        Ok(back) if back == rev => {}
        other => v.add(
            "RevId Display does not parse back to the same id",
            format!("{text:?} -> {shown:?} -> {other:?}"),
        ),
    }
    let hash_in = text.split_once('-').map(|(_, h)| h);
    let hash_out = shown.split_once('-').map(|(_, h)| h);
    v.check(hash_in == hash_out, "RevId hash not kept verbatim", || {
        format!("{text:?} -> {shown:?}")
    });
    check_json_string(&rev, &shown, v);
    Some(rev)
}

/// `rev` serializes to a valid JSON string equal to `shown` and back to itself.
fn check_json_string(rev: &RevId, shown: &str, v: &mut Violations) {
    let json = match serde_json::to_string(rev) {
        Ok(json) => json,
        Err(e) => {
            v.add("RevId does not serialize", format!("{rev:?}: {e}"));
            return;
        }
    };
    match serde_json::from_str::<Value>(&json) {
        Ok(Value::String(s)) if s == shown => {}
        other => v.add(
            "RevId serializes to invalid or different JSON",
            format!("{rev:?} -> {json} -> {other:?}"),
        ),
    }
    match serde_json::from_str::<RevId>(&json) {
        Ok(back) if &back == rev => {}
        other => v.add(
            "RevId serde round trip changes it",
            format!("{rev:?} -> {json} -> {other:?}"),
        ),
    }
}

/// `Ord` agrees with `Eq`, is antisymmetric, and puts position first.
fn check_order(a: &RevId, b: &RevId, v: &mut Violations) {
    use std::cmp::Ordering;
    let ab = a.cmp(b);
    v.check(
        ab == b.cmp(a).reverse(),
        "RevId order not antisymmetric",
        || format!("{a} vs {b}"),
    );
    v.check(
        (ab == Ordering::Equal) == (a == b),
        "RevId order disagrees with equality",
        || format!("{a} vs {b}"),
    );
    if a.pos() != b.pos() {
        v.check(
            ab == a.pos().cmp(&b.pos()),
            "RevId order not by position first",
            || format!("{a} vs {b}"),
        );
    }
}

/// An accepted path: consistent positions, and a faithful JSON round trip.
fn check_path(path: &RevPath, v: &mut Violations) {
    let revs: Vec<RevId> = path.revs().collect();
    v.check(
        revs.len() == path.ids().len() && !revs.is_empty(),
        "RevPath revs() and ids() disagree",
        || format!("{path:?}"),
    );
    for (i, rev) in revs.iter().enumerate() {
        let expected = path.start().checked_sub(i as u64);
        v.check(
            Some(rev.pos()) == expected && rev.pos() >= 1,
            "RevPath position out of line",
            || format!("{path:?}: revision {i} is {rev}"),
        );
        let shown = rev.to_string();
        v.check(
            RevId::parse(&shown).as_ref() == Ok(rev),
            "RevPath revision does not print back",
            || format!("{path:?}: {shown:?}"),
        );
    }
    v.check(
        revs.first() == Some(&path.leaf()),
        "RevPath leaf is not its first revision",
        || format!("{path:?}"),
    );
    match serde_json::to_string(path) {
        Ok(json) => {
            let parsed = serde_json::from_str::<Value>(&json);
            v.check(
                parsed
                    .as_ref()
                    .is_ok_and(|p| p["start"].as_u64() == Some(path.start())),
                "RevPath serializes to invalid JSON",
                || format!("{path:?} -> {json}"),
            );
            match serde_json::from_str::<RevPath>(&json) {
                Ok(back) if &back == path => {}
                other => v.add(
                    "RevPath serde round trip changes it",
                    format!("{path:?} -> {json} -> {other:?}"),
                ),
            }
        }
        Err(e) => v.add("RevPath does not serialize", format!("{path:?}: {e}")),
    }
    let len = path.ids().len();
    for limit in [0, 1, len, len + 1] {
        let short = path.truncated(limit);
        let keep = len.min(limit.max(1));
        v.check(
            short.leaf() == path.leaf() && short.ids() == &path.ids()[..keep],
            "RevPath truncation keeps the wrong revisions",
            || format!("{path:?} truncated to {limit}: {short:?}"),
        );
    }
}
