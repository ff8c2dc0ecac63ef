//! Multi-term queries (wildcards, fuzzy terms, regular expressions, and
//! `field:*`) over one field name's terms: the terms under the name's path
//! are scanned and those the test accepts are matched with a constant
//! score, as Lucene rewrites such queries. tantivy's own automaton queries
//! see a JSON field's whole term, path included, so they do not fit.

use std::sync::Arc;

use tantivy::query::{
    BitSetDocSet, ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{BitSet, DocId, DocSet, Score, SegmentReader, TantivyError};

/// Which terms match, given the term's text (its bytes after the path).
pub type TermTest = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Every document holding a term of `field` that starts with `prefix`
/// (the path of a name and the string type) and passes `test`.
#[derive(Clone)]
pub struct TermFilterQuery {
    field: Field,
    prefix: Vec<u8>,
    test: TermTest,
}

impl std::fmt::Debug for TermFilterQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermFilterQuery")
            .field("field", &self.field)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl TermFilterQuery {
    pub fn new(field: Field, prefix: Vec<u8>, test: TermTest) -> TermFilterQuery {
        TermFilterQuery {
            field,
            prefix,
            test,
        }
    }
}

impl Query for TermFilterQuery {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl Weight for TermFilterQuery {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut docs = BitSet::with_max_value(reader.max_doc());
        let inverted = reader.inverted_index(self.field)?;
        let mut range = inverted.terms().range().ge(&self.prefix);
        if let Some(end) = prefix_end(&self.prefix) {
            range = range.lt(end);
        }
        let mut terms = range.into_stream()?;
        while terms.advance() {
            let suffix = terms.key().get(self.prefix.len()..).unwrap_or_default();
            if !(self.test)(suffix) {
                continue;
            }
            let mut postings = inverted
                .read_block_postings_from_terminfo(terms.value(), IndexRecordOption::Basic)?;
            loop {
                let block = postings.docs();
                if block.is_empty() {
                    break;
                }
                for &doc in block {
                    docs.insert(doc);
                }
                postings.advance();
            }
        }
        Ok(Box::new(ConstScorer::new(BitSetDocSet::from(docs), boost)))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) == doc {
            Ok(Explanation::new("TermFilterQuery", 1.0))
        } else {
            Err(TantivyError::InvalidArgument(
                "the document does not match".into(),
            ))
        }
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Whether `a` is within `max` edits of `b` (insertions, deletions,
/// substitutions and transpositions of adjacent characters), as Lucene's
/// fuzzy queries count them.
pub fn within_edits(a: &[char], b: &[char], max: usize) -> bool {
    if a.len().abs_diff(b.len()) > max {
        return false;
    }
    // Optimal string alignment distance, three rows.
    let width = b.len() + 1;
    let mut before: Vec<usize> = vec![0; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current: Vec<usize> = vec![0; width];
    for i in 1..=a.len() {
        current[0] = i;
        let mut row_min = current[0];
        for j in 1..width {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
            row_min = row_min.min(best);
        }
        if row_min > max {
            return false;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()] <= max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn edits_count_as_lucene_counts_them() {
        assert!(within_edits(&chars("japan"), &chars("japon"), 1));
        assert!(
            within_edits(&chars("ab"), &chars("ba"), 1),
            "a transposition is one edit"
        );
        assert!(within_edits(&chars("hello"), &chars("hell"), 1));
        assert!(within_edits(&chars("hello"), &chars("yellow"), 2));
        assert!(!within_edits(&chars("hello"), &chars("yellow"), 1));
        assert!(!within_edits(&chars("abc"), &chars("xyz"), 2));
        assert!(within_edits(&chars(""), &chars("ab"), 2));
    }

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 255]), Some(vec![2]));
        assert_eq!(prefix_end(&[255]), None);
    }
}
