//! A view query's answer read page by page, so a view of any size is
//! answered (and reduced) in bounded memory and its rows can be streamed
//! to the client or to a list function as they are read.

use std::collections::VecDeque;

use serde_json::Value;
use store::{Index, IndexEntry, IndexPosition, IndexRange, ReducePart};

use crate::Engine;
use crate::views::reduce::{Reduced, Reduction};
use collation::raw::Collation;

use crate::views::{ViewError, ViewGroup, ViewQuery, partition_sort_key};

/// Index rows read at once.
const PAGE: usize = 500;

/// What comes before a view's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewHead {
    /// Map rows: `total_rows` and `offset`.
    Map { total_rows: u64, offset: u64 },
    /// Reduced rows: nothing before them.
    Reduced,
}

/// A page of a view's answer.
#[derive(Debug)]
pub enum ViewPage {
    Map(Vec<IndexEntry>),
    /// `(key, reduction)`; the key is `null` without grouping.
    Reduced(Vec<(Value, Reduced)>),
}

/// One query's answer, read on demand.
pub struct ViewReader {
    head: ViewHead,
    pager: Pager,
    reducing: Option<Reducing>,
    /// Rows computed when the query was opened (an ungrouped reduction).
    ready: Option<Vec<(Value, Reduced)>>,
    engine: Engine,
}

impl std::fmt::Debug for ViewReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewReader")
            .field("head", &self.head)
            .finish()
    }
}

impl ViewGroup {
    /// Opens a query of view `name` on an up-to-date index.
    pub async fn read(
        &self,
        engine: &Engine,
        index: &Index,
        name: &str,
        q: &ViewQuery,
    ) -> Result<ViewReader, ViewError> {
        let view = self.view_number(name)?;
        let reducer = self.reduce_of(name);
        let reduce = match (q.reduce, reducer) {
            (Some(true), None) => {
                return Err(ViewError::BadRequest(
                    "Reduce is invalid for map-only views.".into(),
                ));
            }
            (Some(false), _) | (None, None) => false,
            (_, Some(_)) => true,
        };
        // CouchDB's checks, in its order: several keys reduce only to one
        // group each, and are not mixed with a range.
        if reduce && q.keys.is_some() && !q.group {
            return Err(ViewError::BadRequest(
                "Multi-key fetches for reduce views must use `group=true`".into(),
            ));
        }
        if q.keys.as_ref().is_some_and(|k| !k.is_empty())
            && (q.key.is_some() || q.start_key.is_some() || q.end_key.is_some())
        {
            return Err(ViewError::BadRequest(
                "`keys` is incompatible with `key`, `start_key` and `end_key`".into(),
            ));
        }
        // Grouping needs a reduce, and a reduce has no documents.
        if !reduce && (q.group || q.group_level.is_some()) {
            return Err(ViewError::BadRequest(
                "Invalid use of grouping on a map view.".into(),
            ));
        }
        if reduce && q.include_docs {
            return Err(ViewError::BadRequest(
                "`include_docs` is invalid for reduce".into(),
            ));
        }
        self.check_range(view, q)?;
        // A partitioned view is read one partition at a time: its keys
        // start with the partition's.
        let prefix = match (self.partitioned, &q.partition) {
            (true, Some(p)) => Some(partition_sort_key(p)),
            (true, None) => {
                return Err(ViewError::BadRequest(
                    "`partition` parameter is mandatory for queries to this view.".into(),
                ));
            }
            (false, Some(_)) => {
                return Err(ViewError::BadRequest(
                    "`partition` parameter is not supported in this design doc".into(),
                ));
            }
            (false, None) => None,
        };
        let kb = |k: &Value| {
            let mut bytes = prefix.clone().unwrap_or_default();
            bytes.extend(self.key_bytes(view, k));
            bytes
        };
        let partition_end = prefix.as_ref().map(|p| {
            let mut end = p.clone();
            end.push(0xff);
            end
        });
        let (low, high) = (prefix.clone(), partition_end.clone());
        let ranges: VecDeque<IndexRange> = match (&q.keys, &q.key) {
            // Descending, a map's rows of the keys are read last first, as
            // CouchDB reads them; a reduction's groups stay in the keys' order.
            (Some(keys), _) if q.descending && !reduce => {
                keys.iter().rev().map(|k| exact(view, kb(k), q)).collect()
            }
            (Some(keys), _) => keys.iter().map(|k| exact(view, kb(k), q)).collect(),
            (None, Some(key)) => [exact(view, kb(key), q)].into(),
            (None, None) => {
                let (first, last) = if q.descending {
                    (high, low)
                } else {
                    (low, high)
                };
                [IndexRange {
                    view,
                    start: q
                        .start_key
                        .as_ref()
                        .map(|k| (kb(k), q.start_docid.clone()))
                        .or(first.map(|b| (b, None))),
                    end: q
                        .end_key
                        .as_ref()
                        .map(|k| (kb(k), end_docid(q).0))
                        .or(last.map(|b| (b, None))),
                    inclusive_end: match q.end_key {
                        Some(_) => end_docid(q).1,
                        None => q.inclusive_end,
                    },
                    descending: q.descending,
                    ..Default::default()
                }]
                .into()
            }
        };
        if let Some(reducer) = reducer.filter(|_| reduce) {
            let level = match (q.group, q.group_level) {
                // Level 0 is one group of everything, as no grouping.
                (_, Some(0)) => None,
                (_, Some(level)) => Some(level),
                (true, None) => Some(usize::MAX),
                (false, None) => None,
            };
            let mut reader = ViewReader {
                head: ViewHead::Reduced,
                pager: Pager::new(index.clone(), ranges, 0, usize::MAX),
                reducing: None,
                ready: None,
                engine: engine.clone(),
            };
            if level.is_none() && super::reduce::merges(reducer) {
                // One row of the whole range: from the blocks' reductions.
                let Some(range) = reader.pager.ranges.pop_front() else {
                    return Ok(reader);
                };
                let value = reduce_range(engine, &self.ddoc, index, range, reducer).await?;
                let rows: Vec<(Value, Reduced)> = value
                    .map(|v| (Value::Null, v))
                    .into_iter()
                    .skip(q.skip)
                    .take(q.limit.unwrap_or(usize::MAX))
                    .collect();
                reader.ready = Some(rows);
                return Ok(reader);
            }
            reader.reducing = Some(Reducing {
                reducer: reducer.to_string(),
                ddoc: self.ddoc.clone(),
                collation: self.collation(view),
                level,
                current: None,
                skip: q.skip,
                limit: q.limit.unwrap_or(usize::MAX),
                done: false,
            });
            return Ok(reader);
        }
        // CouchDB's offset: the rows before the first range (the first key's).
        let mut before = match ranges.front() {
            Some(first) => index.rows_before(first).await?,
            None => 0,
        };
        let total_rows = match (&prefix, &partition_end) {
            (Some(low), Some(high)) => {
                // The partition's rows, and those of the partitions before
                // it in the direction of travel (not in its offset).
                let at = |bytes: &Vec<u8>, descending: bool| IndexRange {
                    view,
                    start: Some((bytes.clone(), None)),
                    descending,
                    ..Default::default()
                };
                let below = index.rows_before(&at(low, false)).await?;
                let upto = index.rows_before(&at(high, false)).await?;
                let outside = if q.descending {
                    index.rows_before(&at(high, true)).await?
                } else {
                    below
                };
                before = before.saturating_sub(outside);
                upto.saturating_sub(below)
            }
            _ => index.count(view).await?,
        };
        let offset = (before + q.skip as u64).min(total_rows);
        Ok(ViewReader {
            head: ViewHead::Map { total_rows, offset },
            pager: Pager::new(index.clone(), ranges, q.skip, q.limit.unwrap_or(usize::MAX)),
            reducing: None,
            ready: None,
            engine: engine.clone(),
        })
    }
}

impl ViewGroup {
    /// CouchDB's refusal of a range no row can be in: `start_key` after
    /// `end_key` in the view's order (before it, when descending). Equal
    /// keys are a range of one key, never refused.
    fn check_range(&self, view: u32, q: &ViewQuery) -> Result<(), ViewError> {
        let (Some(start), Some(end)) = (&q.start_key, &q.end_key) else {
            return Ok(());
        };
        if q.keys.is_some() || q.key.is_some() || start == end {
            return Ok(());
        }
        // The document ids a range starts and ends at when none is given.
        let (low, high) = ("", "\u{10ffff}");
        let (start_id, end_id) = if q.descending {
            (high, low)
        } else {
            (low, high)
        };
        let start = (
            self.key_bytes(view, start),
            q.start_docid.as_deref().unwrap_or(start_id),
        );
        let end = (
            self.key_bytes(view, end),
            q.end_docid.as_deref().unwrap_or(end_id),
        );
        let reason = match (q.descending, start < end) {
            (false, false) => "set descending=true",
            (true, true) => "set descending=false",
            _ => return Ok(()),
        };
        Err(ViewError::BadRequest(format!(
            "No rows can match your key range, reverse your start_key and end_key or {reason}"
        )))
    }
    /// After an update, computes the block reductions of the views with a
    /// built-in reducer that the update dropped, as CouchDB keeps its
    /// reductions current in its B-tree: a reduction query then combines
    /// them instead of reading rows. A reducer that fails here (values it
    /// cannot sum) fails again, with its error, when a query asks for it.
    pub(crate) async fn warm_reductions(&self, engine: &Engine, index: &Index) {
        if self.is_mango() {
            return;
        }
        for (view, reducer) in self.reduces.iter().enumerate() {
            let Some(reducer) = reducer else { continue };
            if !reducer.starts_with('_') || !super::reduce::merges(reducer) {
                continue;
            }
            let whole = IndexRange {
                view: view as u32,
                ..Default::default()
            };
            if let Err(e) = reduce_range(engine, &self.ddoc, index, whole, reducer).await {
                tracing::debug!(error = ?e, "a view's reductions were not computed ahead");
            }
        }
    }
}

/// Tries before a reduction gives up on a consistent reading of the
/// blocks (each try fails only if a write changed a block under it).
const BLOCK_TRIES: usize = 3;

/// The reduction of a whole range, or `None` when it holds no row: whole
/// blocks by their cached reductions (computed and kept when missing),
/// and only the rows at the two ends read.
async fn reduce_range(
    engine: &Engine,
    ddoc: &crate::DesignDoc,
    index: &Index,
    range: IndexRange,
    reducer: &str,
) -> Result<Option<Reduced>, ViewError> {
    let reducer_id = reducer_id(reducer);
    'tries: for _ in 0..BLOCK_TRIES {
        let parts = index
            .reduce_parts(range.clone(), reducer_id.clone())
            .await?;
        let mut total = Reduction::new(ddoc, reducer)?;
        let mut any = false;
        for part in parts {
            match part {
                ReducePart::Rows(rows) => {
                    for row in &rows {
                        total.add(engine, row).await?;
                    }
                    any |= !rows.is_empty();
                }
                ReducePart::Block {
                    reduction: Some(text),
                    ..
                } => {
                    total
                        .merge(engine, ejson::from_stored(&text).unwrap_or(Value::Null))
                        .await?;
                    any = true;
                }
                ReducePart::Block {
                    start,
                    generation,
                    reduction: None,
                } => {
                    let (now, rows) = index.block_rows(range.view, start.clone()).await?;
                    if now != generation {
                        continue 'tries;
                    }
                    if rows.is_empty() {
                        continue;
                    }
                    let mut block = Reduction::new(ddoc, reducer)?;
                    for row in &rows {
                        block.add(engine, row).await?;
                    }
                    let value = match block.finish(engine).await? {
                        Reduced::Value(value) => value,
                        // The whole range's row is the block's error.
                        error @ Reduced::Error { .. } => return Ok(Some(error)),
                    };
                    index
                        .cache_reduction(
                            range.view,
                            start,
                            generation,
                            reducer_id.clone(),
                            ejson::to_string(&value),
                        )
                        .await?;
                    total.merge(engine, value).await?;
                    any = true;
                }
            }
        }
        return Ok(if any {
            Some(total.finish(engine).await?)
        } else {
            None
        });
    }
    // Writes kept changing the blocks: read the range row by row.
    let mut pager = Pager::new(index.clone(), [range].into(), 0, usize::MAX);
    let mut total = Reduction::new(ddoc, reducer)?;
    let mut any = false;
    while let Some(rows) = pager.next().await? {
        for row in &rows {
            total.add(engine, row).await?;
        }
        any = true;
    }
    Ok(if any {
        Some(total.finish(engine).await?)
    } else {
        None
    })
}

/// What names a reduce function among cached reductions: a built-in's
/// name, or a digest of the function's source.
fn reducer_id(reducer: &str) -> String {
    use md5::{Digest, Md5};
    if reducer.starts_with('_') {
        return reducer.to_string();
    }
    Md5::digest(reducer.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl ViewReader {
    pub fn head(&self) -> ViewHead {
        self.head
    }

    /// The next rows, or `None` once all are read.
    pub async fn next_page(&mut self) -> Result<Option<ViewPage>, ViewError> {
        if let Some(rows) = self.ready.take() {
            // Given once, then the end.
            self.pager.ranges.clear();
            return Ok((!rows.is_empty()).then_some(ViewPage::Reduced(rows)));
        }
        match &mut self.reducing {
            None => Ok(self.pager.next().await?.map(ViewPage::Map)),
            Some(reducing) => {
                let rows = reducing.next(&self.engine, &mut self.pager).await?;
                Ok(rows.map(ViewPage::Reduced))
            }
        }
    }
}

/// Reads a query's ranges in order, a page at a time, skipping and
/// limiting across all of them.
struct Pager {
    index: Index,
    ranges: VecDeque<IndexRange>,
    after: Option<IndexPosition>,
    skip: usize,
    limit: usize,
}

impl Pager {
    fn new(index: Index, ranges: VecDeque<IndexRange>, skip: usize, limit: usize) -> Pager {
        Pager {
            index,
            ranges,
            after: None,
            skip,
            limit,
        }
    }

    async fn next(&mut self) -> Result<Option<Vec<IndexEntry>>, ViewError> {
        while self.limit > 0 {
            let Some(range) = self.ranges.front() else {
                return Ok(None);
            };
            // One range left: the index skips for us.
            let skip_here = if self.ranges.len() == 1 {
                std::mem::take(&mut self.skip)
            } else {
                0
            };
            let want = PAGE.min(self.limit);
            let mut rows = self
                .index
                .range(IndexRange {
                    after: self.after.take(),
                    skip: skip_here,
                    limit: want,
                    ..range.clone()
                })
                .await?;
            if rows.len() < want {
                self.ranges.pop_front();
            } else if let Some(last) = rows.last() {
                self.after = Some(last.position());
            }
            if self.skip > 0 {
                let dropped = self.skip.min(rows.len());
                rows.drain(..dropped);
                self.skip -= dropped;
            }
            rows.truncate(self.limit);
            self.limit -= rows.len();
            if !rows.is_empty() {
                return Ok(Some(rows));
            }
        }
        Ok(None)
    }
}

/// Rows grouped as asked (all together, by whole key, or by the first
/// `level` elements of array keys) and reduced group by group.
struct Reducing {
    reducer: String,
    ddoc: crate::DesignDoc,
    /// The view's key order: groups of array prefixes are keyed in it.
    collation: Collation,
    level: Option<usize>,
    current: Option<Group>,
    skip: usize,
    limit: usize,
    done: bool,
}

struct Group {
    key: Value,
    bytes: Vec<u8>,
    reduction: Reduction,
}

impl Reducing {
    /// The next reduced rows: at least one, unless all are given.
    async fn next(
        &mut self,
        engine: &Engine,
        pager: &mut Pager,
    ) -> Result<Option<Vec<(Value, Reduced)>>, ViewError> {
        let mut out = Vec::new();
        while !self.done && self.limit > 0 && out.is_empty() {
            let Some(rows) = pager.next().await? else {
                self.done = true;
                // Nothing in range is no row at all, grouped or not (as CouchDB).
                if let Some(group) = self.current.take() {
                    self.give(&mut out, engine, group).await?;
                }
                break;
            };
            for row in &rows {
                if self.limit == 0 {
                    break;
                }
                let (key, bytes) = self.group_key(row);
                let same = self.current.as_ref().is_some_and(|g| g.bytes == bytes);
                if !same {
                    let next = self.group(key, bytes)?;
                    if let Some(done) = self.current.replace(next) {
                        self.give(&mut out, engine, done).await?;
                    }
                }
                if let Some(group) = &mut self.current {
                    group.reduction.add(engine, row).await?;
                }
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }

    fn group(&self, key: Value, bytes: Vec<u8>) -> Result<Group, ViewError> {
        Ok(Group {
            key,
            bytes,
            reduction: Reduction::new(&self.ddoc, &self.reducer)?,
        })
    }

    /// A finished group: skipped, or reduced into `out` within the limit.
    async fn give(
        &mut self,
        out: &mut Vec<(Value, Reduced)>,
        engine: &Engine,
        group: Group,
    ) -> Result<(), ViewError> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(());
        }
        if self.limit == 0 {
            return Ok(());
        }
        self.limit -= 1;
        out.push((group.key, group.reduction.finish(engine).await?));
        Ok(())
    }

    /// The row's group key and its sort key.
    fn group_key(&self, row: &IndexEntry) -> (Value, Vec<u8>) {
        match self.level {
            None => (Value::Null, Vec::new()),
            Some(usize::MAX) => (
                ejson::from_stored(&row.key).unwrap_or(Value::Null),
                row.sort_key.clone(),
            ),
            Some(level) => match ejson::from_stored(&row.key).unwrap_or(Value::Null) {
                Value::Array(items) => {
                    let grouped = Value::Array(items.into_iter().take(level).collect());
                    let mut bytes = Vec::new();
                    self.collation.sort_key(&grouped, &mut bytes);
                    (grouped, bytes)
                }
                other => (other, row.sort_key.clone()),
            },
        }
    }
}

/// The rows of one key: within it, from `startkey_docid` to
/// `endkey_docid` when given, as CouchDB bounds each key.
fn exact(view: u32, bytes: Vec<u8>, q: &ViewQuery) -> IndexRange {
    let (end_docid, inclusive_end) = end_docid(q);
    IndexRange {
        view,
        start: Some((bytes.clone(), q.start_docid.clone())),
        end: Some((bytes, end_docid)),
        inclusive_end,
        descending: q.descending,
        ..Default::default()
    }
}

/// The end key's document id and whether the end is included, as CouchDB
/// reads them: an excluded end whose id is empty ends past every id of the
/// end key ascending (its rows are in), and before them all descending
/// (they are out), the way CouchDB swaps the empty id for the highest.
fn end_docid(q: &ViewQuery) -> (Option<String>, bool) {
    match (q.inclusive_end, q.end_docid.as_deref(), q.descending) {
        (false, Some(""), false) => (None, true),
        (false, Some(""), true) => (None, false),
        _ => (q.end_docid.clone(), q.inclusive_end),
    }
}
