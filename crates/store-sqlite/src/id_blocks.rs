//! Live documents counted in blocks of consecutive ids, so `_all_docs`'
//! `offset` (and a partition's counts) cost a few thousand block counts and
//! one block's rows, not a count of every id before the page: CouchDB keeps
//! these counts in its B-tree's inner nodes, SQLite's B-tree keeps none.
//!
//! A block starts at an id and holds every id up to the next block's
//! start; the first block starts at the empty id, before them all. The
//! counts are kept by triggers on the documents table, in the statement
//! that changes a document, so no write can forget them. A block grown past
//! [`MAX`] live documents is split in two when its write commits.

use std::ops::Bound;

use rusqlite::{Connection, OptionalExtension, params};

use store::StoreError;

/// Live documents per block after a split, and the most a block holds
/// (the `id_blocks_grown` trigger names the same number).
const TARGET: i64 = 1024;
const MAX: i64 = 2 * TARGET;
const _: () = assert!(MAX == 2048);

/// The blocks, the blocks to split, and the triggers that count.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS id_blocks (
    start TEXT PRIMARY KEY,
    live  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS id_blocks_full (start TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS id_blocks_insert AFTER INSERT ON docs WHEN NEW.deleted = 0
BEGIN
    UPDATE id_blocks SET live = live + 1
    WHERE start = (SELECT max(start) FROM id_blocks WHERE start <= NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS id_blocks_update AFTER UPDATE OF deleted ON docs
WHEN (OLD.deleted = 0) != (NEW.deleted = 0)
BEGIN
    UPDATE id_blocks SET live = live + (CASE WHEN NEW.deleted = 0 THEN 1 ELSE -1 END)
    WHERE start = (SELECT max(start) FROM id_blocks WHERE start <= NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS id_blocks_delete AFTER DELETE ON docs WHEN OLD.deleted = 0
BEGIN
    UPDATE id_blocks SET live = live - 1
    WHERE start = (SELECT max(start) FROM id_blocks WHERE start <= OLD.id);
END;
CREATE TRIGGER IF NOT EXISTS id_blocks_grown AFTER UPDATE OF live ON id_blocks
WHEN NEW.live > 2048
BEGIN
    INSERT OR IGNORE INTO id_blocks_full (start) VALUES (NEW.start);
END;
";

/// Counts the blocks anew from the documents: for a file written before
/// they were kept (once, when it is first opened by this version).
pub(crate) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("DELETE FROM id_blocks; DELETE FROM id_blocks_full;")?;
    let mut insert = conn.prepare("INSERT INTO id_blocks (start, live) VALUES (?1, ?2)")?;
    let mut ids = conn.prepare("SELECT id FROM docs WHERE deleted = 0 ORDER BY id")?;
    let mut rows = ids.query([])?;
    let (mut start, mut live) = (String::new(), 0i64);
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        if live == TARGET {
            insert.execute(params![start, live])?;
            (start, live) = (id, 0);
        }
        live += 1;
    }
    insert.execute(params![start, live])?;
    Ok(())
}

/// Splits the blocks that grew past [`MAX`] in this transaction (none, but
/// for about one write in a thousand): each keeps its first [`TARGET`]
/// live ids, and a new block starts at the next one.
pub(crate) fn split_full(conn: &Connection) -> Result<(), StoreError> {
    let mut full: Vec<String> = conn
        .prepare_cached("SELECT start FROM id_blocks_full")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if full.is_empty() {
        return Ok(());
    }
    while let Some(start) = full.pop() {
        let live: Option<i64> = conn
            .prepare_cached("SELECT live FROM id_blocks WHERE start = ?1")?
            .query_row([&start], |r| r.get(0))
            .optional()?;
        let Some(live) = live.filter(|n| *n > MAX) else {
            continue;
        };
        let second: String = conn
            .prepare_cached(
                "SELECT id FROM docs WHERE deleted = 0 AND id >= ?1 ORDER BY id LIMIT 1 OFFSET ?2",
            )?
            .query_row(params![start, TARGET], |r| r.get(0))?;
        conn.prepare_cached("UPDATE id_blocks SET live = ?2 WHERE start = ?1")?
            .execute(params![start, TARGET])?;
        conn.prepare_cached("INSERT INTO id_blocks (start, live) VALUES (?1, ?2)")?
            .execute(params![second, live - TARGET])?;
        // A block that grew by more than a block in one write splits again.
        full.push(second);
    }
    conn.prepare_cached("DELETE FROM id_blocks_full")?
        .execute([])?;
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
    let block: String = conn
        .prepare_cached("SELECT max(start) FROM id_blocks WHERE start <= ?1")?
        .query_row([at], |r| r.get::<_, Option<String>>(0))?
        .unwrap_or_default();
    let blocks_before: i64 = conn
        .prepare_cached("SELECT COALESCE(SUM(live), 0) FROM id_blocks WHERE start < ?1")?
        .query_row([&block], |r| r.get(0))?;
    let op = if inclusive { "<=" } else { "<" };
    let inside: i64 = conn
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM docs WHERE deleted = 0 AND id >= ?1 AND id {op} ?2"
        ))?
        .query_row(params![block, at], |r| r.get(0))?;
    Ok((blocks_before + inside).max(0) as u64)
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
                .prepare_cached("SELECT COALESCE(SUM(live), 0) FROM id_blocks")?
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

    /// A documents table as the triggers see it, and the blocks.
    fn table() -> Connection {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch("CREATE TABLE docs (id TEXT PRIMARY KEY, deleted INTEGER NOT NULL);")
            .expect("docs");
        conn.execute_batch(SCHEMA).expect("blocks");
        fill(&conn).expect("the first block");
        conn
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Writes a document live or deleted (new or not).
        Write(u16, bool),
        /// Purges it.
        Purge(u16),
    }

    fn ops() -> impl Strategy<Value = Vec<Vec<Op>>> {
        let op = prop_oneof![
            4 => (0u16..6000, any::<bool>()).prop_map(|(id, deleted)| Op::Write(id, deleted)),
            1 => (0u16..6000).prop_map(Op::Purge),
        ];
        // Batches as transactions; some large enough to grow a block past
        // two blocks at once.
        prop::collection::vec(prop::collection::vec(op, 1..3000), 1..6)
    }

    fn id(n: u16) -> String {
        format!("d{n:05}")
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
            for batch in batches {
                let tx = conn.transaction().expect("a transaction");
                for op in batch {
                    match op {
                        Op::Write(n, deleted) => {
                            tx.execute(
                                "INSERT INTO docs (id, deleted) VALUES (?1, ?2)
                                 ON CONFLICT (id) DO UPDATE SET deleted = excluded.deleted",
                                params![id(n), deleted],
                            ).expect("a write");
                            model.insert(id(n), !deleted);
                        }
                        Op::Purge(n) => {
                            tx.execute("DELETE FROM docs WHERE id = ?1", [id(n)]).expect("a purge");
                            model.remove(&id(n));
                        }
                    }
                }
                split_full(&tx).expect("splits");
                tx.commit().expect("a commit");
            }
            let most: i64 = conn
                .query_row("SELECT max(live) FROM id_blocks", [], |r| r.get(0))
                .expect("blocks");
            prop_assert!(most <= MAX, "{most}");
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
            fill(&conn).expect("a refill");
            prop_assert_eq!(
                live_between(&conn, &Bound::Unbounded, &Bound::Unbounded).expect("all"),
                live(&|_| true)
            );
        }
    }
}
