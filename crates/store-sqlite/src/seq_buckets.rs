//! Documents counted by their sequence in buckets of fixed width, at three
//! widths, so a `_changes` page's `pending` (the documents changed after
//! its last sequence) costs a few hundred bucket counts and one bucket's
//! rows, not a count of every later change: at ten million documents a
//! page from the start counted ten million rows.
//!
//! A document's row sits at the sequence of its latest update, so each
//! write moves it from one bucket to another; the writer's row storage
//! ([`crate::WriteConn`]) records each move ([`Changes`]) and the buckets
//! are updated once per bucket when the transaction commits. Buckets never
//! split: a sequence's bucket is the sequence shifted right.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use store::StoreError;

/// The widths of the buckets, in bits of the sequence: 1,024, 65,536 and
/// 4,194,304 sequences. A count reads at most 1,024 rows, 63 buckets of
/// each of the two narrower widths, and the widest buckets after it (two
/// at ten million writes).
const WIDTHS: [u32; 3] = [10, 16, 22];

/// The buckets.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS seq_buckets (
    width  INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    docs   INTEGER NOT NULL,
    PRIMARY KEY (width, bucket)
) WITHOUT ROWID;
";

/// The sequences a write transaction gave a document row (`+1`) or took
/// from one (`-1`).
pub(crate) type Changes = crate::change_log::ChangeLog<(u64, i64)>;

/// Counts the moves into their buckets: in the transaction, before it
/// commits.
pub(crate) fn apply(conn: &Connection, changes: &Changes) -> Result<(), StoreError> {
    let mut by_bucket: HashMap<(u32, u64), i64> = HashMap::new();
    for (seq, delta) in changes.take() {
        for width in WIDTHS {
            *by_bucket.entry((width, seq >> width)).or_default() += delta;
        }
    }
    let mut add = conn.prepare_cached(
        "INSERT INTO seq_buckets (width, bucket, docs) VALUES (?1, ?2, ?3)
         ON CONFLICT (width, bucket) DO UPDATE SET docs = docs + excluded.docs",
    )?;
    for ((width, bucket), delta) in by_bucket {
        if delta != 0 {
            add.execute(params![width, int(bucket), delta])?;
        }
    }
    Ok(())
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Counts the buckets anew from the documents: for a file written before
/// they were kept (once, when it is first opened by this version).
pub(crate) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("DELETE FROM seq_buckets;")?;
    for width in WIDTHS {
        conn.execute(
            "INSERT INTO seq_buckets (width, bucket, docs)
             SELECT ?1, seq >> ?1, COUNT(*) FROM docs GROUP BY seq >> ?1",
            [width],
        )?;
    }
    Ok(())
}

/// Documents whose row is at a sequence after `seq`.
pub(crate) fn docs_after(conn: &Connection, seq: u64) -> Result<u64, StoreError> {
    let [narrow, _, widest] = WIDTHS;
    // The rows after `seq` in its own narrowest bucket.
    let end = int(((seq >> narrow) + 1) << narrow);
    let mut total: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM docs WHERE seq > ?1 AND seq < ?2")?
        .query_row(params![int(seq), end], |r| r.get(0))?;
    // Then, at each width, the buckets after `seq`'s own up to the end of
    // its bucket of the next width; at the widest, all after it.
    let mut sum = conn.prepare_cached(
        "SELECT COALESCE(SUM(docs), 0) FROM seq_buckets
         WHERE width = ?1 AND bucket > ?2 AND bucket < ?3",
    )?;
    for pair in WIDTHS.windows(2) {
        let (width, next) = (pair[0], pair[1]);
        let bucket = seq >> width;
        let end = ((seq >> next) + 1) << (next - width);
        total += sum.query_row(params![width, int(bucket), int(end)], |r| {
            r.get::<_, i64>(0)
        })?;
    }
    total += sum.query_row(params![widest, int(seq >> widest), i64::MAX], |r| {
        r.get::<_, i64>(0)
    })?;
    Ok(total.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use rusqlite::OptionalExtension;

    use super::*;

    fn table() -> Connection {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch("CREATE TABLE docs (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL);")
            .expect("docs");
        conn.execute_batch(SCHEMA).expect("buckets");
        conn
    }

    /// Writes document `id` at `seq` (or purges it) as the writer's row
    /// storage does: the row moved, and the move recorded.
    fn write(tx: &Connection, changes: &Changes, id: u32, seq: Option<u64>) {
        let old: Option<i64> = tx
            .query_row("SELECT seq FROM docs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .expect("a read");
        if let Some(old) = old {
            changes.record((old as u64, -1));
        }
        match seq {
            Some(seq) => {
                tx.execute(
                    "INSERT INTO docs (id, seq) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
                    params![id, seq as i64],
                )
                .expect("a write");
                changes.record((seq, 1));
            }
            None => {
                tx.execute("DELETE FROM docs WHERE id = ?1", [id])
                    .expect("a purge");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn counts_after_any_sequence_match_the_documents(
            // Documents written (or purged), the sequence advancing by a
            // random step, in batches some of which roll half back.
            batches in prop::collection::vec(
                (prop::collection::vec((0u32..3000, any::<bool>(), 1u64..20_000), 1..400), any::<bool>()),
                1..6,
            ),
            probes in prop::collection::vec(0u64..20_000_000, 30),
        ) {
            let mut conn = table();
            let mut seq = 0u64;
            for (batch, roll_back_half) in batches {
                let tx = conn.transaction().expect("a transaction");
                let changes = Changes::default();
                let half = batch.len() / 2;
                let mut savepoint = 0;
                for (i, (id, purge, step)) in batch.iter().enumerate() {
                    if i == half {
                        tx.execute_batch("SAVEPOINT job").expect("a savepoint");
                        savepoint = changes.mark();
                    }
                    seq += step;
                    write(&tx, &changes, *id, (!purge).then_some(seq));
                }
                if roll_back_half {
                    // The moves since the savepoint are forgotten with it.
                    tx.execute_batch("ROLLBACK TO job").expect("a rollback");
                    changes.rollback_to(savepoint);
                }
                tx.execute_batch("RELEASE job").expect("a release");
                apply(&tx, &changes).expect("counted");
                tx.commit().expect("a commit");
            }
            let seqs: BTreeMap<u64, ()> = conn
                .prepare("SELECT seq FROM docs")
                .expect("a statement")
                .query_map([], |r| r.get::<_, i64>(0))
                .expect("rows")
                .map(|s| (s.expect("a seq") as u64, ()))
                .collect();
            for probe in probes.into_iter().chain([0, seq]) {
                let want = seqs.range(probe + 1..).count() as u64;
                prop_assert_eq!(docs_after(&conn, probe).expect("a count"), want);
            }
            fill(&conn).expect("a refill");
            prop_assert_eq!(docs_after(&conn, 0).expect("all"), seqs.len() as u64);
        }
    }
}
