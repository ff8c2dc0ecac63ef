//! One pass over the matching documents for everything a search answers:
//! the total, the page of hits in the requested order strictly after a
//! bookmark (search-after paging, with `_id` as the last key so the order
//! is total), string counts and double range counts.
//!
//! Within a segment each sort value is a `u64` whose order is the sort's
//! (strings by their ordinal in the segment's dictionary, so no string is
//! read while collecting); only the page's hits are turned back into
//! values, and pages of segments are merged by value.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, DynamicColumn, NumericalType, StrColumn};
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader, f64_to_u64};

/// One key of a sort.
#[derive(Debug, Clone, PartialEq)]
pub enum SortKey {
    Score {
        descending: bool,
    },
    /// A string fast column (its full name) or `_id`.
    Str {
        column: String,
        descending: bool,
    },
    Double {
        column: String,
        descending: bool,
    },
    /// A name the index has never seen: every hit ties on it.
    Constant,
}

impl SortKey {
    fn descending(&self) -> bool {
        match self {
            SortKey::Score { descending }
            | SortKey::Str { descending, .. }
            | SortKey::Double { descending, .. } => *descending,
            SortKey::Constant => false,
        }
    }
}

/// A hit's value for one sort key, as it appears in `order`.
#[derive(Debug, Clone, PartialEq)]
pub enum SortValue {
    Score(f32),
    Double(f64),
    Str(String),
    /// A hit without the field (or a key every hit ties on).
    Null,
}

/// A range of a range count: open ends are unbounded.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSpec {
    pub label: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub min_inclusive: bool,
    pub max_inclusive: bool,
}

impl RangeSpec {
    fn contains(&self, value: f64) -> bool {
        let above = match self.min {
            None => true,
            Some(min) if self.min_inclusive => value >= min,
            Some(min) => value > min,
        };
        let below = match self.max {
            None => true,
            Some(max) if self.max_inclusive => value <= max,
            Some(max) => value < max,
        };
        above && below
    }
}

/// What to collect.
#[derive(Debug, Clone, Default)]
pub struct Collect {
    pub sort: Vec<SortKey>,
    pub limit: usize,
    /// The `order` of the previous page's last hit.
    pub after: Option<Vec<SortValue>>,
    /// (name, string column) to count values of.
    pub counts: Vec<(String, String)>,
    /// (name, double column, ranges) to count.
    pub ranges: Vec<(String, String, Vec<RangeSpec>)>,
    /// Set once nobody waits for the answer (the client left): no further
    /// segment is opened and no further match is judged.
    pub cancel: Option<Cancel>,
}

/// A search's "stop": shared with whoever waits for it.
pub type Cancel = std::sync::Arc<std::sync::atomic::AtomicBool>;

fn cancelled(cancel: &Option<Cancel>) -> bool {
    cancel
        .as_ref()
        .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
}

/// What was collected.
#[derive(Debug, Default)]
pub struct Collected {
    pub total: u64,
    pub hits: Vec<(DocAddress, Vec<SortValue>)>,
    pub counts: BTreeMap<String, HashMap<String, u64>>,
    pub ranges: BTreeMap<String, Vec<u64>>,
}

/// A sort key's column in one segment.
enum Keyed {
    Score,
    Str(Option<StrColumn>),
    Double(Option<Column<f64>>),
    Constant,
}

fn double_column(reader: &SegmentReader, name: &str) -> tantivy::Result<Option<Column<f64>>> {
    for handle in reader.fast_fields().dynamic_column_handles(name)? {
        if let Some(DynamicColumn::F64(column)) =
            handle.open()?.coerce_numerical(NumericalType::F64)
        {
            return Ok(Some(column));
        }
    }
    Ok(None)
}

impl Keyed {
    fn open(key: &SortKey, reader: &SegmentReader) -> tantivy::Result<Keyed> {
        Ok(match key {
            SortKey::Score { .. } => Keyed::Score,
            SortKey::Str { column, .. } => Keyed::Str(reader.fast_fields().str(column)?),
            SortKey::Double { column, .. } => Keyed::Double(double_column(reader, column)?),
            SortKey::Constant => Keyed::Constant,
        })
    }

    /// The ascending `u64` of a document's value.
    fn local(&self, doc: DocId, score: Score) -> u64 {
        match self {
            Keyed::Score => f64_to_u64(f64::from(score)),
            Keyed::Str(Some(column)) => column
                .term_ords(doc)
                .next()
                .map_or(0, |ord| ord.saturating_mul(2).saturating_add(2)),
            Keyed::Str(None) | Keyed::Constant => 0,
            // A document without the double sorts as 0, as in Lucene.
            Keyed::Double(column) => {
                f64_to_u64(column.as_ref().and_then(|c| c.first(doc)).unwrap_or(0.0))
            }
        }
    }

    /// The ascending `u64` of a bookmark's value in this segment: a string
    /// not in the dictionary sits between the ordinals around it.
    fn threshold(&self, value: &SortValue) -> std::io::Result<u64> {
        Ok(match (self, value) {
            (Keyed::Score, SortValue::Score(score)) => f64_to_u64(f64::from(*score)),
            (Keyed::Double(_), SortValue::Double(v)) => f64_to_u64(*v),
            (Keyed::Str(Some(column)), SortValue::Str(s)) => {
                let dict = column.dictionary();
                match dict.term_ord(s.as_bytes())? {
                    Some(ord) => ord.saturating_mul(2).saturating_add(2),
                    None => {
                        let (lower, _) = dict.term_bounds_to_ord(
                            std::ops::Bound::Included(s.as_bytes()),
                            std::ops::Bound::Unbounded,
                        )?;
                        let next = match lower {
                            std::ops::Bound::Included(ord) | std::ops::Bound::Excluded(ord) => ord,
                            std::ops::Bound::Unbounded => 0,
                        };
                        next.saturating_mul(2).saturating_add(1)
                    }
                }
            }
            // Any string is after no string (and there is no string here).
            (Keyed::Str(None), SortValue::Str(_)) => 1,
            (Keyed::Double(_), SortValue::Score(v)) => f64_to_u64(f64::from(*v)),
            (Keyed::Score, SortValue::Double(v)) => f64_to_u64(*v),
            _ => 0,
        })
    }

    fn value(&self, local: u64, score: Score, doc: DocId) -> SortValue {
        match self {
            Keyed::Score => SortValue::Score(score),
            Keyed::Double(column) => {
                SortValue::Double(column.as_ref().and_then(|c| c.first(doc)).unwrap_or(0.0))
            }
            Keyed::Str(Some(column)) if local >= 2 => {
                let mut text = String::new();
                match column.ord_to_str((local - 2) / 2, &mut text) {
                    Ok(true) => SortValue::Str(text),
                    _ => SortValue::Null,
                }
            }
            Keyed::Str(_) | Keyed::Constant => SortValue::Null,
        }
    }
}

/// A candidate hit in a segment: its key (ascending in the sort's order),
/// the document and its score.
#[derive(Debug, PartialEq, Eq)]
struct Candidate {
    key: Vec<u64>,
    doc: DocId,
    score_bits: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key).then(self.doc.cmp(&other.doc))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub struct SegmentCollect {
    cancel: Option<Cancel>,
    segment: SegmentOrdinal,
    keyed: Vec<Keyed>,
    descending: Vec<bool>,
    threshold: Option<Vec<u64>>,
    limit: usize,
    /// The best `limit` so far; the worst on top.
    best: BinaryHeap<Candidate>,
    total: u64,
    counts: Vec<(Option<StrColumn>, Vec<u64>)>,
    ranges: Vec<RangeCounts>,
}

/// A double column in a segment, its ranges, and each range's count.
type RangeCounts = (Option<Column<f64>>, Vec<RangeSpec>, Vec<u64>);

impl Collector for Collect {
    type Fruit = Collected;
    type Child = SegmentCollect;

    fn for_segment(
        &self,
        segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegmentCollect> {
        if cancelled(&self.cancel) {
            return Err(tantivy::TantivyError::InternalError(
                "the search was cancelled: nobody waits for it".into(),
            ));
        }
        let keyed = self
            .sort
            .iter()
            .map(|key| Keyed::open(key, reader))
            .collect::<tantivy::Result<Vec<_>>>()?;
        let descending: Vec<bool> = self.sort.iter().map(SortKey::descending).collect();
        let threshold = match &self.after {
            Some(after) => {
                let mut out = Vec::with_capacity(keyed.len());
                for (i, keyed) in keyed.iter().enumerate() {
                    let value = after.get(i).unwrap_or(&SortValue::Null);
                    let local = keyed.threshold(value)?;
                    out.push(if descending[i] { !local } else { local });
                }
                Some(out)
            }
            None => None,
        };
        let counts = self
            .counts
            .iter()
            .map(|(_, column)| {
                let column = reader.fast_fields().str(column)?;
                let size = column.as_ref().map_or(0, |c| c.num_terms());
                Ok((column, vec![0; size]))
            })
            .collect::<tantivy::Result<Vec<_>>>()?;
        let ranges = self
            .ranges
            .iter()
            .map(|(_, column, specs)| {
                Ok((
                    double_column(reader, column)?,
                    specs.clone(),
                    vec![0; specs.len()],
                ))
            })
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(SegmentCollect {
            cancel: self.cancel.clone(),
            segment,
            keyed,
            descending,
            threshold,
            limit: self.limit,
            best: BinaryHeap::new(),
            total: 0,
            counts,
            ranges,
        })
    }

    fn requires_scoring(&self) -> bool {
        self.sort
            .iter()
            .any(|key| matches!(key, SortKey::Score { .. }))
    }

    fn merge_fruits(&self, fruits: Vec<SegmentFruit>) -> tantivy::Result<Collected> {
        let mut collected = Collected::default();
        let mut hits = Vec::new();
        for fruit in fruits {
            collected.total += fruit.total;
            hits.extend(fruit.hits);
            for ((name, _), counts) in self.counts.iter().zip(fruit.counts) {
                let into = collected.counts.entry(name.clone()).or_default();
                for (value, n) in counts {
                    *into.entry(value).or_default() += n;
                }
            }
            for ((name, _, specs), counts) in self.ranges.iter().zip(fruit.ranges) {
                let into = collected
                    .ranges
                    .entry(name.clone())
                    .or_insert_with(|| vec![0; specs.len()]);
                for (total, n) in into.iter_mut().zip(counts) {
                    *total += n;
                }
            }
        }
        hits.sort_by(|(_, a), (_, b)| compare_values(a, b, &self.sort));
        hits.truncate(self.limit);
        collected.hits = hits;
        Ok(collected)
    }
}

/// The order of two hits' values under `sort`.
pub fn compare_values(a: &[SortValue], b: &[SortValue], sort: &[SortKey]) -> Ordering {
    for (i, key) in sort.iter().enumerate() {
        let (x, y) = (a.get(i), b.get(i));
        let order = match (x, y) {
            (Some(SortValue::Score(x)), Some(SortValue::Score(y))) => x.total_cmp(y),
            (Some(SortValue::Double(x)), Some(SortValue::Double(y))) => x.total_cmp(y),
            (Some(SortValue::Str(x)), Some(SortValue::Str(y))) => x.as_bytes().cmp(y.as_bytes()),
            (Some(SortValue::Null), Some(SortValue::Null)) => Ordering::Equal,
            (Some(SortValue::Null), _) => Ordering::Less,
            (_, Some(SortValue::Null)) => Ordering::Greater,
            _ => Ordering::Equal,
        };
        let order = if key.descending() {
            order.reverse()
        } else {
            order
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// A segment's share.
pub struct SegmentFruit {
    total: u64,
    hits: Vec<(DocAddress, Vec<SortValue>)>,
    counts: Vec<HashMap<String, u64>>,
    ranges: Vec<Vec<u64>>,
}

impl SegmentCollector for SegmentCollect {
    type Fruit = SegmentFruit;

    fn collect(&mut self, doc: DocId, score: Score) {
        if cancelled(&self.cancel) {
            return;
        }
        self.total += 1;
        for (column, counts) in &mut self.counts {
            if let Some(column) = column {
                for ord in column.term_ords(doc) {
                    if let Some(n) = counts.get_mut(ord as usize) {
                        *n += 1;
                    }
                }
            }
        }
        for (column, specs, counts) in &mut self.ranges {
            let Some(column) = column else { continue };
            for (spec, n) in specs.iter().zip(counts.iter_mut()) {
                if column.values_for_doc(doc).any(|v| spec.contains(v)) {
                    *n += 1;
                }
            }
        }
        if self.limit == 0 {
            return;
        }
        let key: Vec<u64> = self
            .keyed
            .iter()
            .zip(&self.descending)
            .map(|(keyed, descending)| {
                let local = keyed.local(doc, score);
                if *descending { !local } else { local }
            })
            .collect();
        if let Some(threshold) = &self.threshold
            && key <= *threshold
        {
            return;
        }
        let candidate = Candidate {
            key,
            doc,
            score_bits: score.to_bits(),
        };
        if self.best.len() < self.limit {
            self.best.push(candidate);
        } else if let Some(worst) = self.best.peek()
            && candidate < *worst
        {
            self.best.pop();
            self.best.push(candidate);
        }
    }

    fn harvest(self) -> SegmentFruit {
        let hits = self
            .best
            .into_sorted_vec()
            .into_iter()
            .map(|candidate| {
                let score = f32::from_bits(candidate.score_bits);
                let values = self
                    .keyed
                    .iter()
                    .zip(&self.descending)
                    .zip(&candidate.key)
                    .map(|((keyed, descending), local)| {
                        let local = if *descending { !local } else { *local };
                        keyed.value(local, score, candidate.doc)
                    })
                    .collect();
                (DocAddress::new(self.segment, candidate.doc), values)
            })
            .collect();
        let counts = self
            .counts
            .into_iter()
            .map(|(column, counts)| {
                let mut out = HashMap::new();
                if let Some(column) = column {
                    for (ord, n) in counts.into_iter().enumerate() {
                        let mut text = String::new();
                        if n > 0 && column.ord_to_str(ord as u64, &mut text).unwrap_or(false) {
                            out.insert(text, n);
                        }
                    }
                }
                out
            })
            .collect();
        let ranges = self
            .ranges
            .into_iter()
            .map(|(_, _, counts)| counts)
            .collect();
        SegmentFruit {
            total: self.total,
            hits,
            counts,
            ranges,
        }
    }
}
