//! Generators of the `multipart` target: uploads with hostile framing.

use super::*;

pub(super) fn boundary() -> BoxedStrategy<String> {
    prop_oneof![
        8 => "[a-f0-9]{32}",
        2 => "[a-zA-Z0-9'()+_,./:=?-][a-zA-Z0-9'()+_,./:=? -]{0,68}[a-zA-Z0-9'()+_,./:=?-]",
        1 => "[a-z]{71,200}",
        1 => select(&[
            "a\"b", "semi;colon", "back\\slash", "x y ", "--", "-", "é", "\t", "a,b", "=",
            "\"quoted\"", "a\r\nb", "x",
        ][..])
        .prop_map(str::to_string),
        1 => hostile::text(),
    ]
    .boxed()
}

pub(super) fn declared() -> BoxedStrategy<Declared> {
    prop_oneof![
        20 => Just(Declared::Quoted),
        4 => Just(Declared::Bare),
        1 => Just(Declared::WithParams),
        1 => Just(Declared::Upper),
        1 => boundary().prop_map(Declared::Other),
        1 => Just(Declared::Missing),
        1 => Just(Declared::Empty),
        1 => boundary().prop_map(Declared::Twice),
    ]
    .boxed()
}

/// Attachment contents that look like multipart syntax.
pub(super) const SEPARATORS: &[&[u8]] = &[b"--", b"\r\n", b"\r\n--", b"--\r\n", b"\r\n\r\n"];

pub(super) fn content() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        8 => vec(any::<u8>(), 0..48),
        1 => select(SEPARATORS).prop_map(<[u8]>::to_vec),
        1 => (1usize..6000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
    ]
    .boxed()
}

pub(super) fn length() -> BoxedStrategy<Length> {
    prop_oneof![
        24 => Just(Length::Exact),
        3 => Just(Length::Absent),
        1 => Just(Length::Less),
        1 => Just(Length::More),
        1 => select(&[
            1_000_000_000_000_000_000u64, u64::MAX, i64::MAX as u64, i64::MAX as u64 + 1, 1 << 53,
            1 << 32, 0,
        ][..])
        .prop_map(Length::Is),
        1 => select(&["\"5\"", "-1", "1.5", "null", "true", "\"\"", "1e3", "[]"][..])
            .prop_map(|s| Length::Junk(serde_json::from_str(s).unwrap_or(Value::Null))),
    ]
    .boxed()
}

pub(super) fn encoding() -> BoxedStrategy<Encoding> {
    prop_oneof![
        12 => Just(Encoding::Identity),
        4 => Just(Encoding::Gzip),
        1 => Just(Encoding::GzipButPlain),
        1 => select(&["deflate", "GZIP", "identity", "", "gzip\r\nX: 1", "br"][..])
            .prop_map(|e| Encoding::Other(e.to_string())),
    ]
    .boxed()
}

pub(super) fn att() -> BoxedStrategy<Att> {
    (
        select(NAMES),
        prop_oneof![8 => Just(Kind::Follows), 1 => Just(Kind::Inline), 1 => Just(Kind::Stub)],
        select(CONTENT_TYPES),
        content(),
        length(),
        encoding(),
        prop_oneof![3 => Just(PartName::Own), 2 => Just(PartName::None), 1 => Just(PartName::Wrong)],
        any::<bool>(),
        prop::option::weighted(0.2, prop::bool::weighted(0.7)),
    )
        .prop_map(
            |(name, kind, content_type, bytes, length, encoding, part_name, part_type, part_length)| Att {
                name,
                kind,
                content_type,
                bytes,
                length,
                encoding,
                part_name,
                part_type,
                part_length,
            },
        )
        .boxed()
}

pub(super) fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::DropPart),
        any::<Index>().prop_map(Mutation::DuplicatePart),
        content().prop_map(Mutation::ExtraPart),
        Just(Mutation::Reverse),
        Just(Mutation::NoClose),
        Just(Mutation::Preamble),
        Just(Mutation::Epilogue),
        Just(Mutation::LfOnly),
        Just(Mutation::NoJson),
        any::<Index>().prop_map(Mutation::BoundaryInContent),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
    .boxed()
}

pub(super) fn rev_field(new_edits: bool) -> BoxedStrategy<RevField> {
    let hash = || select(&["a", "b", "c", "0123456789abcdef0123456789abcdef"][..]);
    if new_edits {
        prop_oneof![
            6 => Just(RevField::Last),
            2 => Just(RevField::Absent),
            1 => hostile::rev_text().prop_map(RevField::Junk),
        ]
        .boxed()
    } else {
        prop_oneof![
            8 => (1u64..4, hash(), prop::option::weighted(0.4, vec(hash(), 0..3))).prop_map(
                |(pos, hash, history)| {
                    let history = history.map(|h| {
                        h.into_iter().take(pos as usize - 1).collect::<Vec<_>>()
                    });
                    RevField::Replicated { pos, hash, history }
                }
            ),
            1 => Just(RevField::Last),
            1 => Just(RevField::Absent),
            1 => hostile::rev_text().prop_map(RevField::Junk),
        ]
        .boxed()
    }
}

pub(super) fn upload() -> BoxedStrategy<Upload> {
    (select(IDS), prop::bool::weighted(0.7))
        .prop_flat_map(|(id, new_edits)| {
            (
                Just(id),
                Just(new_edits),
                boundary(),
                declared(),
                prop_oneof![
                    6 => Just(IdField::Absent),
                    2 => Just(IdField::Same),
                    1 => hostile::json_leaf().prop_map(IdField::Other),
                ],
                rev_field(new_edits),
                vec(
                    (
                        prop_oneof![4 => "[a-z]{1,3}", 1 => hostile::key()],
                        hostile::json(1),
                    ),
                    0..3,
                ),
                prop::bool::weighted(0.05),
                vec(att(), 0..4),
                prop_oneof![3 => Just(Vec::new()), 1 => vec(mutation(), 1..3)],
            )
        })
        .prop_map(
            |(
                id,
                new_edits,
                boundary,
                declared,
                id_field,
                rev,
                fields,
                deleted,
                atts,
                mutations,
            )| {
                Upload {
                    id,
                    new_edits,
                    boundary,
                    declared,
                    id_field,
                    rev,
                    fields,
                    deleted,
                    atts,
                    mutations,
                }
            },
        )
        .boxed()
}

pub fn strategy() -> BoxedStrategy<Case> {
    vec(upload(), 1..5).prop_map(Case).boxed()
}
