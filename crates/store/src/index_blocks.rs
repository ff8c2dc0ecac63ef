//! A view's rows counted, and their reductions cached, in blocks of
//! consecutive rows (in key order). CouchDB keeps counts and reductions in
//! the inner nodes of its B-tree; SQLite's B-tree keeps neither, so these
//! blocks do: `offset` sums a few hundred block counts and counts inside
//! one block, and a reduction of a long range combines cached block
//! reductions with the rows of at most two blocks, instead of reading
//! every row of the range.
//!
//! A block starts at the position of a row (sort key, document id, row
//! number) and holds every row up to the next block's start; each view's
//! first block starts before every row. Writes change counts and drop the
//! touched blocks' reductions; a block grown past `MAX` rows is split, one
//! shrunk under `MIN` joins the block before it.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;
use crate::index_rows::{IndexEntry, IndexPosition};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS blocks (
    view INTEGER NOT NULL,
    sort_key BLOB NOT NULL,
    doc_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    gen INTEGER NOT NULL DEFAULT 0,
    reducer TEXT,
    reduction TEXT,
    PRIMARY KEY (view, sort_key, doc_id, n)
) WITHOUT ROWID;
";

/// Rows per block after a split.
const TARGET: i64 = 512;
const MAX: i64 = 2 * TARGET;
const MIN: i64 = TARGET / 4;

/// Where each view's first block starts: before any row.
fn first_start() -> IndexPosition {
    (Vec::new(), String::new(), -1)
}

/// Finds the block holding `at` in `view` (making the view's first block
/// when it has none).
const BLOCK_OF: &str = "SELECT sort_key, doc_id, n FROM blocks WHERE view = ?1 AND (sort_key, doc_id, n) <= (?2, ?3, ?4)
     ORDER BY sort_key DESC, doc_id DESC, n DESC LIMIT 1";

/// Row count changes of one write, per block, applied together.
pub(crate) struct Deltas<'c> {
    conn: &'c Connection,
    /// Prepared once per write and kept: SQLite prepares this statement
    /// again whenever its bindings are cleared (as a statement cache does),
    /// and it runs once per row written.
    block_of: rusqlite::Statement<'c>,
    by_block: HashMap<(u32, IndexPosition), i64>,
}

impl<'c> Deltas<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Result<Deltas<'c>, StoreError> {
        Ok(Deltas {
            conn,
            block_of: conn.prepare(BLOCK_OF)?,
            by_block: HashMap::new(),
        })
    }

    /// A row added (`+1`) or removed (`-1`).
    pub(crate) fn row(
        &mut self,
        view: u32,
        at: &IndexPosition,
        delta: i64,
    ) -> Result<(), StoreError> {
        let found = self
            .block_of
            .query_row(params![view, at.0, at.1, at.2], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let start = match found {
            Some(start) => start,
            None => {
                let start = first_start();
                self.conn.execute(
                    "INSERT INTO blocks (view, sort_key, doc_id, n, rows) VALUES (?1, ?2, ?3, ?4, 0)",
                    params![view, start.0, start.1, start.2],
                )?;
                start
            }
        };
        *self.by_block.entry((view, start)).or_default() += delta;
        Ok(())
    }

    /// Writes the counts, drops the reductions of the blocks touched, then
    /// splits and joins blocks whose size left the bounds.
    pub(crate) fn apply(self) -> Result<(), StoreError> {
        let conn = self.conn;
        if self.by_block.is_empty() {
            return Ok(());
        }
        let generation = next_generation(conn)?;
        let mut update = conn.prepare_cached(
            "UPDATE blocks SET rows = rows + ?5, gen = ?6, reduction = NULL
             WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4 RETURNING rows",
        )?;
        let mut resize = Vec::new();
        for ((view, start), delta) in self.by_block {
            let rows: i64 = update.query_row(
                params![view, start.0, start.1, start.2, delta, generation],
                |r| r.get(0),
            )?;
            if rows > MAX || (rows < MIN && start != first_start()) {
                resize.push((view, start));
            }
        }
        for (view, start) in resize {
            resize_block(conn, view, &start, generation)?;
        }
        Ok(())
    }
}

/// A number no block had before: every change of a block gives it a new
/// one, so a reduction computed from an older state is never kept.
fn next_generation(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row(
        "INSERT INTO meta (name, value) VALUES ('block_gen', '1')
         ON CONFLICT (name) DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING CAST(value AS INTEGER)",
        [],
        |r| r.get(0),
    )?)
}

/// Splits a block grown too large, or joins a small one to the block before.
fn resize_block(
    conn: &Connection,
    view: u32,
    start: &IndexPosition,
    generation: i64,
) -> Result<(), StoreError> {
    let rows: Option<i64> = conn
        .query_row(
            "SELECT rows FROM blocks WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4",
            params![view, start.0, start.1, start.2],
            |r| r.get(0),
        )
        .optional()?;
    let Some(rows) = rows else { return Ok(()) };
    if rows < MIN && *start != first_start() {
        let before: IndexPosition = conn.query_row(
            "SELECT sort_key, doc_id, n FROM blocks WHERE view = ?1 AND (sort_key, doc_id, n) < (?2, ?3, ?4)
             ORDER BY sort_key DESC, doc_id DESC, n DESC LIMIT 1",
            params![view, start.0, start.1, start.2],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        conn.execute(
            "DELETE FROM blocks WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4",
            params![view, start.0, start.1, start.2],
        )?;
        conn.execute(
            "UPDATE blocks SET rows = rows + ?5, gen = ?6, reduction = NULL
             WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4",
            params![view, before.0, before.1, before.2, rows, generation],
        )?;
        return Ok(());
    }
    if rows <= MAX {
        return Ok(());
    }
    // Cut the block's rows into runs of TARGET (the last run at least
    // half of one), each a block of its own.
    let end = next_start(conn, view, start)?;
    let positions = block_positions(conn, view, start, end.as_ref())?;
    let total = positions.len() as i64;
    let mut cuts = Vec::new();
    let mut at = TARGET;
    while total - at >= TARGET / 2 {
        cuts.push(at);
        at += TARGET;
    }
    let mut insert = conn.prepare_cached(
        "INSERT OR REPLACE INTO blocks (view, sort_key, doc_id, n, rows, gen) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut first_rows = total;
    for (i, cut) in cuts.iter().enumerate() {
        let next = cuts.get(i + 1).copied().unwrap_or(total);
        let p = &positions[*cut as usize];
        insert.execute(params![view, p.0, p.1, p.2, next - cut, generation])?;
        first_rows = first_rows.min(*cut);
    }
    conn.execute(
        "UPDATE blocks SET rows = ?5, gen = ?6, reduction = NULL
         WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4",
        params![view, start.0, start.1, start.2, first_rows, generation],
    )?;
    Ok(())
}

/// Where the block after the one starting at `start` starts, if any.
fn next_start(
    conn: &Connection,
    view: u32,
    start: &IndexPosition,
) -> Result<Option<IndexPosition>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT sort_key, doc_id, n FROM blocks WHERE view = ?1 AND (sort_key, doc_id, n) > (?2, ?3, ?4)
             ORDER BY sort_key, doc_id, n LIMIT 1",
        )?
        .query_row(params![view, start.0, start.1, start.2], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?)
}

/// The positions of a block's rows, in order.
fn block_positions(
    conn: &Connection,
    view: u32,
    start: &IndexPosition,
    end: Option<&IndexPosition>,
) -> Result<Vec<IndexPosition>, StoreError> {
    let mut out = Vec::new();
    let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
    match end {
        Some(end) => {
            let mut stmt = conn.prepare_cached(
                "SELECT sort_key, doc_id, n FROM rows WHERE view = ?1 AND (sort_key, doc_id, n) >= (?2, ?3, ?4)
                 AND (sort_key, doc_id, n) < (?5, ?6, ?7) ORDER BY sort_key, doc_id, n",
            )?;
            for p in stmt.query_map(
                params![view, start.0, start.1, start.2, end.0, end.1, end.2],
                map,
            )? {
                out.push(p?);
            }
        }
        None => {
            let mut stmt = conn.prepare_cached(
                "SELECT sort_key, doc_id, n FROM rows WHERE view = ?1 AND (sort_key, doc_id, n) >= (?2, ?3, ?4)
                 ORDER BY sort_key, doc_id, n",
            )?;
            for p in stmt.query_map(params![view, start.0, start.1, start.2], map)? {
                out.push(p?);
            }
        }
    }
    Ok(out)
}

/// How many rows of `view` satisfy `before`, an SQL condition on
/// `sort_key`, `doc_id` and `n` that holds for a prefix of the view (all
/// rows up to some point). `args` are its parameters, numbered from 2.
pub(crate) fn count_prefix(
    conn: &Connection,
    view: u32,
    before: &str,
    args: &[rusqlite::types::Value],
) -> Result<u64, StoreError> {
    let mut all: Vec<rusqlite::types::Value> = vec![i64::from(view).into()];
    all.extend(args.iter().cloned());
    // The last block starting inside the prefix holds its end; the blocks
    // before it are wholly inside.
    let last: Option<IndexPosition> = conn
        .prepare_cached(&format!(
            "SELECT sort_key, doc_id, n FROM blocks WHERE view = ?1 AND ({before})
             ORDER BY sort_key DESC, doc_id DESC, n DESC LIMIT 1"
        ))?
        .query_row(rusqlite::params_from_iter(all.iter()), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some(last) = last else { return Ok(0) };
    let whole: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(rows), 0) FROM blocks WHERE view = ?1 AND (sort_key, doc_id, n) < (?2, ?3, ?4)",
        )?
        .query_row(params![view, last.0, last.1, last.2], |r| r.get(0))?;
    let k = all.len() + 1;
    let mut inside = all.clone();
    inside.push(last.0.into());
    inside.push(last.1.into());
    inside.push(last.2.into());
    let part: i64 = conn
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM rows WHERE view = ?1 AND (sort_key, doc_id, n) >= (?{k}, ?{}, ?{}) AND ({before})",
            k + 1,
            k + 2
        ))?
        .query_row(rusqlite::params_from_iter(inside.iter()), |r| r.get(0))?;
    Ok((whole + part).max(0) as u64)
}

/// A part of a range to reduce: rows to reduce, or a whole block (its
/// cached reduction by `reducer` when there is one).
#[derive(Debug, Clone)]
pub enum ReducePart {
    Rows(Vec<IndexEntry>),
    Block {
        start: IndexPosition,
        generation: i64,
        reduction: Option<String>,
    },
}

/// The blocks that start inside a range (`inside`: an SQL condition on
/// `sort_key`, `doc_id` and `n` with parameters from 2), in order, with
/// their generation and their reduction by `reducer` when cached.
pub(crate) fn blocks_inside(
    conn: &Connection,
    view: u32,
    inside: &str,
    args: &[rusqlite::types::Value],
    reducer: &str,
) -> Result<Vec<(IndexPosition, i64, Option<String>)>, StoreError> {
    let mut all: Vec<rusqlite::types::Value> = vec![i64::from(view).into()];
    all.extend(args.iter().cloned());
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT sort_key, doc_id, n, gen, reducer, reduction FROM blocks WHERE view = ?1 AND ({inside})
         ORDER BY sort_key, doc_id, n"
    ))?;
    let rows = stmt.query_map(rusqlite::params_from_iter(all.iter()), |r| {
        let by: Option<String> = r.get(4)?;
        let reduction: Option<String> = r.get(5)?;
        Ok((
            (r.get(0)?, r.get(1)?, r.get(2)?),
            r.get(3)?,
            reduction.filter(|_| by.as_deref() == Some(reducer)),
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every row of the block starting at `start`, and its generation.
pub(crate) fn block_rows(
    conn: &Connection,
    view: u32,
    start: &IndexPosition,
) -> Result<(i64, Vec<IndexEntry>), StoreError> {
    let generation: Option<i64> = conn
        .query_row(
            "SELECT gen FROM blocks WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4",
            params![view, start.0, start.1, start.2],
            |r| r.get(0),
        )
        .optional()?;
    let Some(generation) = generation else {
        return Ok((-1, Vec::new()));
    };
    let end = next_start(conn, view, start)?;
    let read = |r: &rusqlite::Row<'_>| {
        Ok(IndexEntry {
            sort_key: r.get(0)?,
            key: r.get(1)?,
            id: r.get(2)?,
            value: r.get(3)?,
            n: r.get(4)?,
        })
    };
    let rows = match end {
        Some(end) => conn
            .prepare_cached(
                "SELECT sort_key, key, doc_id, value, n FROM rows WHERE view = ?1
                 AND (sort_key, doc_id, n) >= (?2, ?3, ?4) AND (sort_key, doc_id, n) < (?5, ?6, ?7)
                 ORDER BY sort_key, doc_id, n",
            )?
            .query_map(
                params![view, start.0, start.1, start.2, end.0, end.1, end.2],
                read,
            )?
            .collect::<Result<Vec<_>, _>>()?,
        None => conn
            .prepare_cached(
                "SELECT sort_key, key, doc_id, value, n FROM rows WHERE view = ?1
                 AND (sort_key, doc_id, n) >= (?2, ?3, ?4) ORDER BY sort_key, doc_id, n",
            )?
            .query_map(params![view, start.0, start.1, start.2], read)?
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok((generation, rows))
}

/// Keeps a block's reduction, unless the block changed since it was read.
pub(crate) fn cache_reduction(
    conn: &Connection,
    view: u32,
    start: &IndexPosition,
    generation: i64,
    reducer: &str,
    reduction: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE blocks SET reducer = ?6, reduction = ?7
         WHERE view = ?1 AND sort_key = ?2 AND doc_id = ?3 AND n = ?4 AND gen = ?5",
        params![
            view, start.0, start.1, start.2, generation, reducer, reduction
        ],
    )?;
    Ok(())
}
