//! A wildcard pattern (`*` any run, `?` any one character) against one
//! token, for highlighting the words a query matched. It runs in time
//! proportional to the token's length times the pattern's, whatever the
//! pattern: a backtracking match takes exponential time on patterns such
//! as `*a*a*a*a*b` against a long run of `a`, and both the pattern and the
//! stored text come from users.

use crate::query_syntax::WildPiece;

/// Whether `pieces` matches all of `chars`, case-insensitively (the token
/// is analyzed, the pattern is not).
pub(crate) fn matches(pieces: &[WildPiece], chars: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // After the last `*` seen: where the pattern resumes, and the first
    // character that `*` has not yet swallowed.
    let mut last_star: Option<(usize, usize)> = None;
    while t < chars.len() {
        match pieces.get(p) {
            Some(WildPiece::AnyMany) => {
                p += 1;
                last_star = Some((p, t));
            }
            Some(WildPiece::AnyOne) => {
                p += 1;
                t += 1;
            }
            Some(WildPiece::Literal(c)) if same_letter(*c, chars[t]) => {
                p += 1;
                t += 1;
            }
            // A mismatch: the last `*` swallows one more character. The
            // pieces before it matched the shortest way, which is never
            // worse for what follows.
            _ => match last_star {
                Some((resume, swallowed)) => {
                    p = resume;
                    t = swallowed + 1;
                    last_star = Some((resume, swallowed + 1));
                }
                None => return false,
            },
        }
    }
    pieces[p..]
        .iter()
        .all(|piece| matches!(piece, WildPiece::AnyMany))
}

fn same_letter(a: char, b: char) -> bool {
    a == b || a.to_lowercase().eq(b.to_lowercase())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The plain recursive definition, as the model.
    fn by_backtracking(pieces: &[WildPiece], chars: &[char]) -> bool {
        match pieces.split_first() {
            None => chars.is_empty(),
            Some((WildPiece::AnyMany, rest)) => {
                (0..=chars.len()).any(|i| by_backtracking(rest, &chars[i..]))
            }
            Some((WildPiece::AnyOne, rest)) => {
                !chars.is_empty() && by_backtracking(rest, &chars[1..])
            }
            Some((WildPiece::Literal(c), rest)) => {
                chars.first().is_some_and(|first| same_letter(*c, *first))
                    && by_backtracking(rest, &chars[1..])
            }
        }
    }

    fn piece() -> impl Strategy<Value = WildPiece> {
        prop_oneof![
            3 => prop::sample::select(vec!['a', 'b', 'A', 'é']).prop_map(WildPiece::Literal),
            1 => Just(WildPiece::AnyOne),
            2 => Just(WildPiece::AnyMany),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_the_recursive_definition(
            pieces in prop::collection::vec(piece(), 0..8),
            token in "[abAÉé]{0,10}",
        ) {
            let chars: Vec<char> = token.chars().collect();
            prop_assert_eq!(matches(&pieces, &chars), by_backtracking(&pieces, &chars));
        }
    }

    #[test]
    fn a_pattern_made_to_backtrack_answers_at_once() {
        let mut pieces = Vec::new();
        for _ in 0..30 {
            pieces.push(WildPiece::AnyMany);
            pieces.push(WildPiece::Literal('a'));
        }
        pieces.push(WildPiece::Literal('b'));
        let token = vec!['a'; 10_000];
        // Backtracking would try more combinations than there are atoms;
        // this is at most 10,000 x 61 steps.
        assert!(!matches(&pieces, &token));
        let mut token = token;
        token.push('b');
        assert!(matches(&pieces, &token));
    }

    #[test]
    fn case_is_ignored_and_question_marks_take_one_character() {
        use WildPiece::{AnyMany, AnyOne, Literal};
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert!(matches(&[Literal('Z'), AnyMany], &chars("zebra")));
        assert!(matches(&[AnyOne, AnyOne], &chars("ab")));
        assert!(!matches(&[AnyOne, AnyOne], &chars("abc")));
        assert!(matches(&[], &chars("")));
        assert!(!matches(&[], &chars("a")));
        assert!(matches(&[AnyMany], &chars("")));
    }
}
