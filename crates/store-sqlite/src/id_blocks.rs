//! Live documents counted in blocks of consecutive ids, so `_all_docs`'
//! `offset` (and a partition's counts) cost a few thousand block counts and
//! one block's rows, not a count of every id before the page: CouchDB keeps
//! these counts in its B-tree's inner nodes, SQLite's B-tree keeps none.
//!
//! A block starts at an id and holds every id up to the next block's
//! start; the first block starts at the empty id, before them all. The
//! writer's row storage ([`crate::WriteConn`]) records each document whose
//! liveness a write changes, the only way a write reaches the documents
//! table, and the changes are counted into their blocks, once per block,
//! when the transaction commits ([`apply`]); a block grown past
//! [`Shape::max`] live documents is split then. (Triggers counted each row as it
//! was written: a quarter of a bulk write's time.)
//!
//! Blocks are counted again in groups of consecutive blocks, split past
//! [`Shape::group_max`] blocks: a count sums the groups before its edge, the
//! blocks of its group before it, and the rows of its block, so it reads
//! about the same at ten million documents as at a hundred thousand.

use std::collections::HashMap;
use std::ops::Bound;

use rusqlite::{Connection, OptionalExtension, params};

use store::StoreError;

/// How large blocks and groups grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Live documents per block after a split (a block holds twice that).
    target: i64,
    /// Blocks per group after a split (a group holds twice that).
    group_target: i64,
}

/// The blocks and groups of every database.
const SHAPE: Shape = Shape {
    target: 1024,
    group_target: 64,
};

impl Shape {
    fn max(self) -> i64 {
        2 * self.target
    }

    fn group_max(self) -> i64 {
        2 * self.group_target
    }
}

/// The blocks.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS id_blocks (
    start TEXT PRIMARY KEY,
    live  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS id_block_groups (
    start  TEXT PRIMARY KEY,
    live   INTEGER NOT NULL,
    blocks INTEGER NOT NULL
) WITHOUT ROWID;
";

/// What schema version 4 had and 5 drops: triggers that counted row by row.
pub(crate) const DROP_TRIGGERS: &str = "
DROP TRIGGER IF EXISTS id_blocks_insert;
DROP TRIGGER IF EXISTS id_blocks_update;
DROP TRIGGER IF EXISTS id_blocks_delete;
DROP TRIGGER IF EXISTS id_blocks_grown;
DROP TABLE IF EXISTS id_blocks_full;
";

/// The documents a write transaction made live (`+1`) or not (`-1`).
pub(crate) type Changes = crate::change_log::ChangeLog<(String, i64)>;

/// Counts the changes into their blocks and splits the blocks that grew
/// too large: in the transaction, before it commits.
pub(crate) fn apply(conn: &Connection, changes: &Changes) -> Result<(), StoreError> {
    apply_shaped(conn, changes, SHAPE)
}

fn apply_shaped(conn: &Connection, changes: &Changes, shape: Shape) -> Result<(), StoreError> {
    let log = changes.take();
    if log.is_empty() {
        return Ok(());
    }
    let mut by_id: HashMap<String, i64> = HashMap::new();
    for (id, delta) in log {
        *by_id.entry(id).or_default() += delta;
    }
    let mut by_block: HashMap<String, i64> = HashMap::new();
    for (id, delta) in by_id {
        if delta != 0 {
            *by_block
                .entry(start_of(conn, "id_blocks", &id)?)
                .or_default() += delta;
        }
    }
    let mut add = conn.prepare_cached(
        "INSERT INTO id_blocks (start, live) VALUES (?1, ?2)
             ON CONFLICT (start) DO UPDATE SET live = live + excluded.live RETURNING live",
    )?;
    let mut by_group: HashMap<String, i64> = HashMap::new();
    let mut full = Vec::new();
    for (block, delta) in by_block {
        if delta == 0 {
            continue;
        }
        let live: i64 = add.query_row(params![block, delta], |r| r.get(0))?;
        *by_group
            .entry(start_of(conn, "id_block_groups", &block)?)
            .or_default() += delta;
        if live > shape.max() {
            full.push(block);
        }
    }
    let mut add = conn.prepare_cached(
        "INSERT INTO id_block_groups (start, live, blocks) VALUES (?1, ?2, 1)
             ON CONFLICT (start) DO UPDATE SET live = live + excluded.live",
    )?;
    for (group, delta) in by_group {
        add.execute(params![group, delta])?;
    }
    split(conn, full, shape)
}

/// The start of the block (or group of blocks) that holds `key`: the
/// greatest start not after it (the first starts at the empty id).
fn start_of(conn: &Connection, table: &str, key: &str) -> Result<String, StoreError> {
    let start: Option<String> = conn
        .prepare_cached(&format!("SELECT max(start) FROM {table} WHERE start <= ?1"))?
        .query_row([key], |r| r.get(0))?;
    Ok(start.unwrap_or_default())
}

/// Splits the blocks named, each keeping its first `target` live ids and
/// a new block starting at the next one, until none holds more than
/// twice that.
fn split(conn: &Connection, mut full: Vec<String>, shape: Shape) -> Result<(), StoreError> {
    while let Some(start) = full.pop() {
        let live: Option<i64> = conn
            .prepare_cached("SELECT live FROM id_blocks WHERE start = ?1")?
            .query_row([&start], |r| r.get(0))
            .optional()?;
        let Some(live) = live.filter(|n| *n > shape.max()) else {
            continue;
        };
        let second: Option<String> = conn
            .prepare_cached(
                "SELECT id FROM docs WHERE deleted = 0 AND id >= ?1 ORDER BY id LIMIT 1 OFFSET ?2",
            )?
            .query_row(params![start, shape.target], |r| r.get(0))
            .optional()?;
        let Some(second) = second else {
            // The count is ahead of the rows: only a damaged file; counted again.
            tracing::warn!(block = %start, live, "an id block counts more than its rows: counting again");
            return fill_shaped(conn, shape).map_err(StoreError::from);
        };
        conn.prepare_cached("UPDATE id_blocks SET live = ?2 WHERE start = ?1")?
            .execute(params![start, shape.target])?;
        conn.prepare_cached("INSERT INTO id_blocks (start, live) VALUES (?1, ?2)")?
            .execute(params![second, live - shape.target])?;
        let group = start_of(conn, "id_block_groups", &second)?;
        let blocks: i64 = conn
            .prepare_cached(
                "UPDATE id_block_groups SET blocks = blocks + 1 WHERE start = ?1 RETURNING blocks",
            )?
            .query_row([&group], |r| r.get(0))?;
        if blocks > shape.group_max() {
            split_group(conn, &group, shape)?;
        }
        // A block that grew by more than a block in one write splits again.
        full.push(second);
    }
    Ok(())
}

/// Splits a group of blocks in two: its first `group_target` blocks
/// stay, the rest make a new group.
fn split_group(conn: &Connection, group: &str, shape: Shape) -> Result<(), StoreError> {
    let second: String = conn
        .prepare_cached(
            "SELECT start FROM id_blocks WHERE start >= ?1 ORDER BY start LIMIT 1 OFFSET ?2",
        )?
        .query_row(params![group, shape.group_target], |r| r.get(0))?;
    let end: Option<String> = conn
        .prepare_cached("SELECT min(start) FROM id_block_groups WHERE start > ?1")?
        .query_row([group], |r| r.get(0))?;
    let (live, blocks): (i64, i64) = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(live), 0), COUNT(*) FROM id_blocks
             WHERE start >= ?1 AND (?2 IS NULL OR start < ?2)",
        )?
        .query_row(params![second, end], |r| Ok((r.get(0)?, r.get(1)?)))?;
    conn.prepare_cached(
        "UPDATE id_block_groups SET live = live - ?2, blocks = blocks - ?3 WHERE start = ?1",
    )?
    .execute(params![group, live, blocks])?;
    conn.prepare_cached("INSERT INTO id_block_groups (start, live, blocks) VALUES (?1, ?2, ?3)")?
        .execute(params![second, live, blocks])?;
    Ok(())
}

/// Counts the blocks anew from the documents: for a file written before
/// they were kept (once, when it is first opened by this version).
pub(crate) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    fill_shaped(conn, SHAPE)
}

fn fill_shaped(conn: &Connection, shape: Shape) -> rusqlite::Result<()> {
    conn.execute_batch("DELETE FROM id_blocks; DELETE FROM id_block_groups;")?;
    let mut insert = conn.prepare("INSERT INTO id_blocks (start, live) VALUES (?1, ?2)")?;
    let mut ids = conn.prepare("SELECT id FROM docs WHERE deleted = 0 ORDER BY id")?;
    let mut rows = ids.query([])?;
    let (mut start, mut live) = (String::new(), 0i64);
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        if live == shape.target {
            insert.execute(params![start, live])?;
            (start, live) = (id, 0);
        }
        live += 1;
    }
    insert.execute(params![start, live])?;
    fill_groups(conn, shape)
}

/// Groups the blocks anew, `group_target` to a group.
fn fill_groups(conn: &Connection, shape: Shape) -> rusqlite::Result<()> {
    let mut insert =
        conn.prepare("INSERT INTO id_block_groups (start, live, blocks) VALUES (?1, ?2, ?3)")?;
    let mut blocks = conn.prepare("SELECT start, live FROM id_blocks ORDER BY start")?;
    let mut rows = blocks.query([])?;
    let (mut start, mut live, mut count) = (String::new(), 0i64, 0i64);
    while let Some(row) = rows.next()? {
        if count == shape.group_target {
            insert.execute(params![start, live, count])?;
            (start, live, count) = (row.get(0)?, 0, 0);
        }
        live += row.get::<_, i64>(1)?;
        count += 1;
    }
    insert.execute(params![start, live, count])?;
    Ok(())
}

/// Live documents whose id is before `edge` (`Excluded(x)`: ids below x;
/// `Included(x)`: up to x; `Unbounded`: none before).
pub(crate) fn live_before(conn: &Connection, edge: &Bound<String>) -> Result<u64, StoreError> {
    let (at, inclusive) = match edge {
        Bound::Unbounded => return Ok(0),
        Bound::Included(x) => (x, true),
        Bound::Excluded(x) => (x, false),
    };
    let block = start_of(conn, "id_blocks", at)?;
    let group = start_of(conn, "id_block_groups", &block)?;
    let groups_before: i64 = conn
        .prepare_cached("SELECT COALESCE(SUM(live), 0) FROM id_block_groups WHERE start < ?1")?
        .query_row([&group], |r| r.get(0))?;
    let blocks_before: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(live), 0) FROM id_blocks WHERE start >= ?1 AND start < ?2",
        )?
        .query_row([&group, &block], |r| r.get(0))?;
    let op = if inclusive { "<=" } else { "<" };
    let inside: i64 = conn
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM docs WHERE deleted = 0 AND id >= ?1 AND id {op} ?2"
        ))?
        .query_row(params![block, at], |r| r.get(0))?;
    Ok((groups_before + blocks_before + inside).max(0) as u64)
}

/// Live documents with ids between `lo` and `hi`, from the blocks.
pub(crate) fn live_between(
    conn: &Connection,
    lo: &Bound<String>,
    hi: &Bound<String>,
) -> Result<u64, StoreError> {
    let up_to_hi = match hi {
        Bound::Unbounded => {
            let total: i64 = conn
                .prepare_cached("SELECT COALESCE(SUM(live), 0) FROM id_block_groups")?
                .query_row([], |r| r.get(0))?;
            total.max(0) as u64
        }
        edge => live_before(conn, edge)?,
    };
    // The ids before `lo`: below it when it is included, up to it when not.
    let before_lo = match lo {
        Bound::Unbounded => 0,
        Bound::Included(x) => live_before(conn, &Bound::Excluded(x.clone()))?,
        Bound::Excluded(x) => live_before(conn, &Bound::Included(x.clone()))?,
    };
    Ok(up_to_hi.saturating_sub(before_lo))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Blocks and groups small enough that a few thousand documents split
    /// them often.
    const SMALL: Shape = Shape {
        target: 8,
        group_target: 4,
    };

    /// A documents table as the blocks read it, and the blocks.
    fn table() -> Connection {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch("CREATE TABLE docs (id TEXT PRIMARY KEY, deleted INTEGER NOT NULL);")
            .expect("docs");
        conn.execute_batch(SCHEMA).expect("blocks");
        fill_shaped(&conn, SMALL).expect("the first block");
        conn
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Writes a document live or deleted (new or not).
        Write(u16, bool),
        /// Purges it.
        Purge(u16),
    }

    fn ops() -> impl Strategy<Value = Vec<(Vec<Op>, bool)>> {
        let op = prop_oneof![
            4 => (0u16..6000, any::<bool>()).prop_map(|(id, deleted)| Op::Write(id, deleted)),
            1 => (0u16..6000).prop_map(Op::Purge),
        ];
        // Batches as transactions (some large enough to grow a block past
        // two blocks at once), each with a savepoint that may roll back.
        prop::collection::vec((prop::collection::vec(op, 1..3000), any::<bool>()), 1..6)
    }

    fn id(n: u16) -> String {
        format!("d{n:05}")
    }

    /// Applies one operation as the writer's row storage does: the row
    /// written, and the change of liveness recorded.
    fn write(tx: &Connection, changes: &Changes, op: &Op) {
        let (Op::Write(n, _) | Op::Purge(n)) = op;
        let was_live: Option<bool> = tx
            .query_row(
                "SELECT deleted = 0 FROM docs WHERE id = ?1",
                [id(*n)],
                |r| r.get(0),
            )
            .optional()
            .expect("a read");
        match op {
            Op::Write(n, deleted) => {
                tx.execute(
                    "INSERT INTO docs (id, deleted) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET deleted = excluded.deleted",
                    params![id(*n), deleted],
                )
                .expect("a write");
                match (was_live.unwrap_or(false), !deleted) {
                    (false, true) => changes.record((id(*n), 1)),
                    (true, false) => changes.record((id(*n), -1)),
                    _ => {}
                }
            }
            Op::Purge(n) => {
                tx.execute("DELETE FROM docs WHERE id = ?1", [id(*n)])
                    .expect("a purge");
                if was_live == Some(true) {
                    changes.record((id(*n), -1));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
        #[test]
        fn counts_before_any_id_match_the_documents(
            batches in ops(),
            edges in prop::collection::vec((0u16..6100, any::<bool>()), 20),
        ) {
            let mut conn = table();
            let mut model: BTreeMap<String, bool> = BTreeMap::new();
            for (batch, roll_back_half) in batches {
                let tx = conn.transaction().expect("a transaction");
                let changes = Changes::default();
                let half = batch.len() / 2;
                for op in &batch[..half] {
                    write(&tx, &changes, op);
                }
                tx.execute_batch("SAVEPOINT job").expect("a savepoint");
                let mark = changes.mark();
                let mut kept = model.clone();
                for (i, op) in batch.iter().enumerate() {
                    if i >= half {
                        write(&tx, &changes, op);
                    }
                    match op {
                        Op::Write(n, deleted) => { kept.insert(id(*n), !deleted); }
                        Op::Purge(n) => { kept.remove(&id(*n)); }
                    }
                }
                if roll_back_half {
                    tx.execute_batch("ROLLBACK TO job").expect("a rollback");
                    changes.rollback_to(mark);
                    for op in &batch[..half] {
                        match op {
                            Op::Write(n, deleted) => { model.insert(id(*n), !deleted); }
                            Op::Purge(n) => { model.remove(&id(*n)); }
                        }
                    }
                } else {
                    model = kept;
                }
                tx.execute_batch("RELEASE job").expect("a release");
                apply_shaped(&tx, &changes, SMALL).expect("counted");
                tx.commit().expect("a commit");
            }
            let most: i64 = conn
                .query_row("SELECT max(live) FROM id_blocks", [], |r| r.get(0))
                .expect("blocks");
            prop_assert!(most <= SMALL.max(), "{most}");
            // Each group counts the blocks from its start to the next one's.
            let wrong: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM id_block_groups g WHERE g.blocks > ?1
                       OR (g.live, g.blocks) IS NOT (
                         SELECT COALESCE(SUM(b.live), 0), COUNT(*) FROM id_blocks b
                         WHERE b.start >= g.start AND b.start < COALESCE(
                           (SELECT min(n.start) FROM id_block_groups n WHERE n.start > g.start),
                           x'FF'))",
                    [SMALL.group_max()],
                    |r| r.get(0),
                )
                .expect("groups");
            prop_assert_eq!(wrong, 0);
            let live = |keep: &dyn Fn(&str) -> bool| {
                model.iter().filter(|(k, v)| **v && keep(k)).count() as u64
            };
            prop_assert_eq!(
                live_between(&conn, &Bound::Unbounded, &Bound::Unbounded).expect("all"),
                live(&|_| true)
            );
            for (n, inclusive) in edges {
                let at = id(n);
                let edge = if inclusive { Bound::Included(at.clone()) } else { Bound::Excluded(at.clone()) };
                let want = live(&|k| if inclusive { k <= at.as_str() } else { k < at.as_str() });
                prop_assert_eq!(live_before(&conn, &edge).expect("before"), want);
                let from = Bound::Included(id(n / 2));
                let want = live(&|k| k >= id(n / 2).as_str() && (if inclusive { k <= at.as_str() } else { k < at.as_str() }));
                prop_assert_eq!(live_between(&conn, &from, &edge).expect("between"), want);
            }
            // Counted anew from the documents, the blocks say the same.
            fill_shaped(&conn, SMALL).expect("a refill");
            prop_assert_eq!(
                live_between(&conn, &Bound::Unbounded, &Bound::Unbounded).expect("all"),
                live(&|_| true)
            );
        }
    }

    /// The most SQLite steps a count before an id takes, over ids spread
    /// through `n` live documents counted in blocks of the real shape.
    fn most_steps_to_count(n: u32) -> u64 {
        let mut conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch("CREATE TABLE docs (id TEXT PRIMARY KEY, deleted INTEGER NOT NULL);")
            .expect("docs");
        conn.execute(
            "INSERT INTO docs (id, deleted)
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
             SELECT printf('d%09d', (i * 7919) % ?1), 0 FROM n",
            // (7919 is prime: every number below n once, out of order)
            [n],
        )
        .expect("rows");
        conn.execute_batch(SCHEMA).expect("blocks");
        fill(&conn).expect("counted");
        let steps = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = steps.clone();
        conn.progress_handler(
            1,
            Some(move || {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            }),
        )
        .expect("a progress handler");
        let mut most = 0;
        for k in 0..40u32 {
            let at = format!("d{:09}", u64::from(k) * u64::from(n) / 40 + 3);
            steps.store(0, std::sync::atomic::Ordering::Relaxed);
            let counted = live_before(&conn, &Bound::Excluded(at)).expect("a count");
            assert_eq!(counted, u64::from(k) * u64::from(n) / 40 + 3);
            most = most.max(steps.load(std::sync::atomic::Ordering::Relaxed));
        }
        most
    }

    /// The cost of `_all_docs`' offset does not grow with the database:
    /// counted in SQLite's own steps, not timed, at forty times the
    /// documents.
    #[test]
    fn counting_costs_the_same_at_forty_times_the_documents() {
        // (Summing every block before the id instead of the groups costs
        // twice as much at the larger size, and fails.)
        let small = most_steps_to_count(50_000);
        let large = most_steps_to_count(2_000_000);
        assert!(large * 10 <= small * 15, "{small} steps, then {large}");
    }
}
