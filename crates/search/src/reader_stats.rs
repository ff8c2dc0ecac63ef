//! Scores that depend only on what the reader may read.
//!
//! BM25 weighs a term by how many documents hold it and a field's length
//! by the average length: statistics of the whole index. In a database
//! with per-document access, those would let a user test whether any
//! document they may not read holds a word (a rare word scores high, a
//! common one low). A user limited by `_access` is scored with the
//! statistics of the documents they may read instead: their count, the
//! documents among them that hold each term, and their fields' lengths.
//! The cost is that of the reader's own documents (and of the postings of
//! the query's terms), whatever others hold.

use std::collections::HashMap;
use std::sync::Mutex;

use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{BitSet, DocId, DocSet, Searcher, SegmentReader, TERMINATED, Term};

/// The BM25 statistics of the documents holding one of a reader's access
/// terms, segment by segment.
pub(crate) struct ReaderStatistics<'a> {
    searcher: &'a Searcher,
    /// Per segment (in the searcher's order), the reader's live documents:
    /// as a set, and listed (so that a sum over them costs their number,
    /// not the segment's).
    readable: Vec<BitSet>,
    listed: Vec<Vec<u32>>,
    num_docs: u64,
    tokens: Mutex<HashMap<Field, u64>>,
}

impl<'a> ReaderStatistics<'a> {
    /// The statistics of the documents `access_terms` (a reader's
    /// principals in the access field) name.
    pub(crate) fn new(
        searcher: &'a Searcher,
        access_terms: &[Term],
    ) -> tantivy::Result<ReaderStatistics<'a>> {
        let mut readable = Vec::with_capacity(searcher.segment_readers().len());
        let mut listed = Vec::with_capacity(searcher.segment_readers().len());
        let mut num_docs = 0u64;
        for segment in searcher.segment_readers() {
            let mut set = BitSet::with_max_value(segment.max_doc());
            let mut list = Vec::new();
            for term in access_terms {
                each_posting(segment, term, |doc| {
                    if segment
                        .alive_bitset()
                        .is_none_or(|alive| alive.is_alive(doc))
                        && set.insert(doc)
                    {
                        list.push(doc);
                    }
                })?;
            }
            num_docs += list.len() as u64;
            readable.push(set);
            listed.push(list);
        }
        Ok(ReaderStatistics {
            searcher,
            readable,
            listed,
            num_docs,
            tokens: Mutex::new(HashMap::new()),
        })
    }

    /// The reader's documents' ids in each segment.
    fn each_readable(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.listed
            .iter()
            .enumerate()
            .flat_map(|(segment, docs)| docs.iter().map(move |doc| (segment, *doc)))
    }
}

impl Bm25StatisticsProvider for ReaderStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = cache.get(&field) {
            return Ok(*known);
        }
        let segments = self.searcher.segment_readers();
        let mut norms = Vec::with_capacity(segments.len());
        for segment in segments {
            // A field without norms is scored as if each document held one
            // token: so is its average here.
            norms.push(segment.get_fieldnorms_reader(field).ok());
        }
        let total = self
            .each_readable()
            .map(|(segment, doc)| match &norms[segment] {
                Some(norms) => u64::from(norms.fieldnorm(doc)),
                None => 1,
            })
            .sum();
        cache.insert(field, total);
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut count = 0u64;
        for (segment, set) in self.searcher.segment_readers().iter().zip(&self.readable) {
            each_posting(segment, term, |doc| {
                if set.contains(doc) {
                    count += 1;
                }
            })?;
        }
        Ok(count)
    }
}

/// Calls `visit` with each document of `segment` holding `term` (deleted
/// ones included: the caller decides).
fn each_posting(
    segment: &SegmentReader,
    term: &Term,
    mut visit: impl FnMut(DocId),
) -> tantivy::Result<()> {
    let postings = segment
        .inverted_index(term.field())?
        .read_postings(term, IndexRecordOption::Basic)?;
    if let Some(mut postings) = postings {
        let mut doc = postings.doc();
        while doc != TERMINATED {
            visit(doc);
            doc = postings.advance();
        }
    }
    Ok(())
}
