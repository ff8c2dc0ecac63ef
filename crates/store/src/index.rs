//! Secondary indexes (views now, Mango later): rows of (view, key, document
//! id, value) kept sorted by a binary sort key the caller computes (whose
//! byte order is the collation order), each index in a SQLite file of its
//! own beside the database's, so building one never holds the database's
//! writer. An index remembers the update sequence it has seen; the caller
//! feeds it the changes after that.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use crate::index_blocks::{self, ReducePart};
use crate::index_rows::{IndexEntry, IndexPosition, IndexRange, IndexedDoc};
use crate::index_sizes::{self, IndexSizes, RowBytes};
use crate::{Database, StoreError};

/// An open index. Cheap to clone; updates are serialized.
#[derive(Debug, Clone)]
pub struct Index {
    inner: Arc<IndexInner>,
}

#[derive(Debug)]
struct IndexInner {
    path: PathBuf,
    /// The one connection: updates and reads take turns (reads are short
    /// pages; an update is one transaction per batch).
    conn: Mutex<Connection>,
    /// The live rows' bytes, changed with them under the connection's lock
    /// and read without it, so `_info` does not wait for an update.
    counted: Mutex<RowBytes>,
    /// Whether a compaction is running (`compact_running`).
    compacting: AtomicBool,
}

impl IndexInner {
    fn counted(&self) -> MutexGuard<'_, RowBytes> {
        self.counted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    view INTEGER NOT NULL,
    sort_key BLOB NOT NULL,
    doc_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (view, sort_key, doc_id, n)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_by_doc ON rows (doc_id);
CREATE TABLE IF NOT EXISTS view_rows (view INTEGER PRIMARY KEY, n INTEGER NOT NULL);
";

/// How a search index's folder name starts (then its signature).
const SEARCH_PREFIX: &str = "search-";

/// Prepared statements kept per index connection.
const STATEMENT_CACHE: usize = 128;

impl Database {
    /// The index of this database named `signature` (a design document's
    /// views, say), created empty when new. An index made for an earlier
    /// database of the same name starts over.
    pub async fn open_index(&self, signature: &str) -> Result<Index, StoreError> {
        if !signature
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(StoreError::bad_request("invalid index signature"));
        }
        let dir = self.index_dir();
        let path = dir.join(format!("{signature}.sqlite"));
        let uuid = self.uuid().to_string();
        tokio::task::spawn_blocking(move || -> Result<Index, StoreError> {
            std::fs::create_dir_all(&dir)?;
            let conn = Connection::open(&path)?;
            conn.execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;",
            )?;
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(index_blocks::SCHEMA)?;
            // Updates and reads cycle through more statements than the
            // default cache holds: without room, each is parsed anew.
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            let owner: Option<String> = conn
                .query_row("SELECT value FROM meta WHERE name = 'db_uuid'", [], |r| {
                    r.get(0)
                })
                .optional()?;
            if owner.as_deref() != Some(uuid.as_str()) {
                conn.execute_batch(
                    "DELETE FROM rows; DELETE FROM meta; DELETE FROM view_rows; DELETE FROM blocks;",
                )?;
                conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('db_uuid', ?1)",
                    [&uuid],
                )?;
            }
            let blocked: Option<String> = conn
                .query_row("SELECT value FROM meta WHERE name = 'blocks'", [], |r| {
                    r.get(0)
                })
                .optional()?;
            if blocked.is_none() {
                // An index written before rows were counted in blocks is
                // built again.
                conn.execute_batch(
                    "BEGIN; DELETE FROM rows; DELETE FROM view_rows; DELETE FROM blocks;
                     DELETE FROM meta WHERE name IN ('update_seq', 'stored_bytes', 'external_bytes');
                     INSERT INTO meta (name, value) VALUES ('blocks', '1'); COMMIT;",
                )?;
            }
            let counted = index_sizes::load(&conn)?;
            Ok(Index {
                inner: Arc::new(IndexInner {
                    path,
                    conn: Mutex::new(conn),
                    counted: Mutex::new(counted),
                    compacting: AtomicBool::new(false),
                }),
            })
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("opening an index: {e}")))?
    }

    /// The signatures of this database's index files.
    pub async fn index_signatures(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.index_dir();
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut found = Vec::new();
            for entry in entries {
                let name = entry?.file_name().to_string_lossy().into_owned();
                if let Some(signature) = name.strip_suffix(".sqlite") {
                    found.push(signature.to_string());
                }
            }
            found.sort();
            Ok(found)
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("listing indexes: {e}")))?
    }

    /// The folder of a full-text search index of this database, named for
    /// its signature, beside the view indexes (node-local derived data,
    /// deleted with the database). Not created here: the search engine
    /// owns what is inside.
    pub fn search_index_dir(&self, signature: &str) -> Result<PathBuf, StoreError> {
        if signature.is_empty()
            || !signature
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(StoreError::bad_request("invalid index signature"));
        }
        Ok(self.index_dir().join(format!("{SEARCH_PREFIX}{signature}")))
    }

    /// The signatures of this database's search index folders.
    pub async fn search_index_signatures(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.index_dir();
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut found = Vec::new();
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(signature) = name.strip_prefix(SEARCH_PREFIX)
                    && entry.file_type()?.is_dir()
                {
                    found.push(signature.to_string());
                }
            }
            found.sort();
            Ok(found)
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("listing search indexes: {e}")))?
    }

    /// Deletes a search index folder no design document needs any more.
    pub async fn drop_search_index(&self, signature: &str) -> Result<(), StoreError> {
        let dir = self.search_index_dir(signature)?;
        tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("dropping a search index: {e}")))?
    }

    /// Deletes an index file (and its journal), when no design document
    /// needs it any more.
    pub async fn drop_index(&self, signature: &str) -> Result<(), StoreError> {
        let base = self.index_dir().join(format!("{signature}.sqlite"));
        tokio::task::spawn_blocking(move || {
            for suffix in ["", "-wal", "-shm"] {
                let mut file = base.as_os_str().to_owned();
                file.push(suffix);
                match std::fs::remove_file(PathBuf::from(file)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(())
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("dropping an index: {e}")))?
    }
}

impl Index {
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> {
        let inner = self.inner.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = inner
                    .conn
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                work(&mut conn)
            })
            .await
            .map_err(|e| StoreError::CommitFailed(format!("an index task failed: {e}")))?
        }
    }

    /// The update sequence of the database this index has seen up to.
    pub async fn update_seq(&self) -> Result<u64, StoreError> {
        self.run(|conn| meta_number(conn, "update_seq")).await
    }

    /// Replaces the rows of changed documents and records the sequence
    /// seen, in one transaction.
    pub async fn apply(&self, docs: Vec<IndexedDoc>, seq: u64) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let counts = replace_counted(&tx, &inner, &docs)?;
            set_meta(&tx, "update_seq", seq)?;
            tx.commit()?;
            *inner.counted() = counts;
            Ok(())
        })
        .await
    }

    /// The database's purge sequence this index has seen up to.
    pub async fn purge_seq(&self) -> Result<u64, StoreError> {
        self.run(|conn| meta_number(conn, "purge_seq")).await
    }

    /// Drops the rows of purged documents (`ids`) and records the purge
    /// sequence seen, in one transaction.
    pub async fn forget(&self, ids: Vec<String>, purge_seq: u64) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let docs: Vec<IndexedDoc> = ids
                .into_iter()
                .map(|id| IndexedDoc {
                    id,
                    rows: Vec::new(),
                })
                .collect();
            let counts = replace_counted(&tx, &inner, &docs)?;
            set_meta(&tx, "purge_seq", purge_seq)?;
            tx.commit()?;
            *inner.counted() = counts;
            Ok(())
        })
        .await
    }

    /// Empties the index, to be built again from the first change, when
    /// what was purged since it was updated is no longer known.
    pub async fn reset(&self, purge_seq: u64) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            tx.execute_batch(
                "DELETE FROM rows; DELETE FROM view_rows; DELETE FROM blocks;
                 DELETE FROM meta WHERE name = 'update_seq';",
            )?;
            set_meta(&tx, "purge_seq", purge_seq)?;
            index_sizes::save(&tx, RowBytes::default())?;
            tx.commit()?;
            *inner.counted() = RowBytes::default();
            Ok(())
        })
        .await
    }

    /// Rows of a range, in key order (then document id), or the reverse.
    pub async fn range(&self, range: IndexRange) -> Result<Vec<IndexEntry>, StoreError> {
        self.run(move |conn| {
            let (cond, mut args) = range_condition(&range);
            let mut sql = format!("SELECT sort_key, key, doc_id, value, n FROM rows WHERE {cond}");
            if let Some((key, id, n)) = &range.after {
                let k = args.len() + 1;
                let op = if range.descending { "<" } else { ">" };
                sql.push_str(&format!(
                    " AND (sort_key, doc_id, n) {op} (?{k}, ?{}, ?{})",
                    k + 1,
                    k + 2
                ));
                args.push(key.clone().into());
                args.push(id.clone().into());
                args.push((*n).into());
            }
            sql.push_str(if range.descending {
                " ORDER BY sort_key DESC, doc_id DESC, n DESC"
            } else {
                " ORDER BY sort_key, doc_id, n"
            });
            let (l, o) = (args.len() + 1, args.len() + 2);
            sql.push_str(&format!(" LIMIT ?{l} OFFSET ?{o}"));
            args.push(i64::try_from(range.limit).unwrap_or(i64::MAX).into());
            args.push(i64::try_from(range.skip).unwrap_or(i64::MAX).into());
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), read_entry)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// How many rows one view holds.
    pub async fn count(&self, view: u32) -> Result<u64, StoreError> {
        self.run(move |conn| {
            let n: Option<i64> = conn
                .prepare_cached("SELECT n FROM view_rows WHERE view = ?1")?
                .query_row([i64::from(view)], |r| r.get(0))
                .optional()?;
            Ok(n.unwrap_or(0).max(0) as u64)
        })
        .await
    }

    /// How many rows of `view` have a sort key between `low` and `high`
    /// (both included; `None`: no bound), from the block counts: the cost
    /// of a few blocks, not of the rows.
    pub async fn count_between(
        &self,
        view: u32,
        low: Option<Vec<u8>>,
        high: Option<Vec<u8>>,
    ) -> Result<u64, StoreError> {
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let up_to_high = match high {
                Some(high) => {
                    index_blocks::count_prefix(&tx, view, "sort_key <= ?2", &[high.into()])?
                }
                None => tx
                    .prepare_cached("SELECT n FROM view_rows WHERE view = ?1")?
                    .query_row([i64::from(view)], |r| r.get::<_, i64>(0))
                    .optional()?
                    .unwrap_or(0)
                    .max(0) as u64,
            };
            let before_low = match low {
                Some(low) => index_blocks::count_prefix(&tx, view, "sort_key < ?2", &[low.into()])?,
                None => 0,
            };
            Ok(up_to_high.saturating_sub(before_low))
        })
        .await
    }

    /// How many rows of the range's view come before its start, in its
    /// direction: CouchDB's `offset` (plus the rows skipped).
    pub async fn rows_before(&self, range: &IndexRange) -> Result<u64, StoreError> {
        let Some((key, doc_id)) = range.start.clone() else {
            return Ok(0);
        };
        let (view, descending) = (range.view, range.descending);
        self.run(move |conn| {
            let tx = conn.transaction()?;
            // Ascending, the rows before the start; descending, the rows
            // after it: all but those up to and including it.
            let (cond, args): (&str, Vec<rusqlite::types::Value>) = match (&doc_id, descending) {
                (None, false) => ("sort_key < ?2", vec![key.into()]),
                (None, true) => ("sort_key <= ?2", vec![key.into()]),
                (Some(id), false) => (
                    "(sort_key < ?2 OR (sort_key = ?2 AND doc_id < ?3))",
                    vec![key.into(), id.clone().into()],
                ),
                (Some(id), true) => (
                    "(sort_key < ?2 OR (sort_key = ?2 AND doc_id <= ?3))",
                    vec![key.into(), id.clone().into()],
                ),
            };
            let prefix = index_blocks::count_prefix(&tx, view, cond, &args)?;
            if !descending {
                return Ok(prefix);
            }
            let total: Option<i64> = tx
                .prepare_cached("SELECT n FROM view_rows WHERE view = ?1")?
                .query_row([i64::from(view)], |r| r.get(0))
                .optional()?;
            Ok((total.unwrap_or(0).max(0) as u64).saturating_sub(prefix))
        })
        .await
    }

    /// A range split for a reduction: the rows at its ends, and between
    /// them whole blocks with their reduction by `reducer` when cached.
    /// Read at one moment: the parts fit together.
    pub async fn reduce_parts(
        &self,
        range: IndexRange,
        reducer: String,
    ) -> Result<Vec<ReducePart>, StoreError> {
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let (cond, args) = range_condition(&range);
            let blocks = index_blocks::blocks_inside(&tx, range.view, &cond, &args[1..], &reducer)?;
            let read =
                |extra: &str, at: Option<&IndexPosition>| -> Result<Vec<IndexEntry>, StoreError> {
                    let mut args = args.clone();
                    let mut sql =
                        format!("SELECT sort_key, key, doc_id, value, n FROM rows WHERE {cond}");
                    if let Some(at) = at {
                        let k = args.len() + 1;
                        sql.push_str(&format!(
                            " AND (sort_key, doc_id, n) {extra} (?{k}, ?{}, ?{})",
                            k + 1,
                            k + 2
                        ));
                        args.push(at.0.clone().into());
                        args.push(at.1.clone().into());
                        args.push(at.2.into());
                    }
                    sql.push_str(" ORDER BY sort_key, doc_id, n");
                    let mut stmt = tx.prepare_cached(&sql)?;
                    let rows = stmt
                        .query_map(rusqlite::params_from_iter(args.iter()), read_entry)?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                };
            let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
                // Inside one block: few rows.
                return Ok(vec![ReducePart::Rows(read("", None)?)]);
            };
            let mut parts = vec![ReducePart::Rows(read("<", Some(&first.0))?)];
            for (start, generation, reduction) in &blocks[..blocks.len() - 1] {
                parts.push(ReducePart::Block {
                    start: start.clone(),
                    generation: *generation,
                    reduction: reduction.clone(),
                });
            }
            parts.push(ReducePart::Rows(read(">=", Some(&last.0))?));
            Ok(parts)
        })
        .await
    }

    /// Every row of one block (see [`ReducePart::Block`]) and its generation.
    pub async fn block_rows(
        &self,
        view: u32,
        start: IndexPosition,
    ) -> Result<(i64, Vec<IndexEntry>), StoreError> {
        self.run(move |conn| index_blocks::block_rows(conn, view, &start))
            .await
    }

    /// Keeps a block's reduction by `reducer`, unless the block changed
    /// since generation `generation`.
    pub async fn cache_reduction(
        &self,
        view: u32,
        start: IndexPosition,
        generation: i64,
        reducer: String,
        reduction: String,
    ) -> Result<(), StoreError> {
        self.run(move |conn| {
            index_blocks::cache_reduction(conn, view, &start, generation, &reducer, &reduction)
        })
        .await
    }

    /// Rewrites the index file without its free pages (`_compact/{ddoc}`)
    /// and empties its write-ahead log, so the disk is given back.
    pub async fn compact(&self) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        inner.compacting.store(true, Ordering::SeqCst);
        let done = self
            .run(|conn| {
                conn.execute_batch("VACUUM")?;
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                Ok(())
            })
            .await;
        inner.compacting.store(false, Ordering::SeqCst);
        done
    }

    /// Whether a compaction of this index is running.
    pub fn compacting(&self) -> bool {
        self.inner.compacting.load(Ordering::SeqCst)
    }

    /// The index's sizes, read without waiting for an update.
    pub fn sizes(&self) -> IndexSizes {
        let len = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.inner.path.clone().into_os_string();
        wal.push("-wal");
        let file = len(&self.inner.path) + len(std::path::Path::new(&wal));
        let counted = *self.inner.counted();
        IndexSizes {
            file,
            active: (counted.stored.max(0) as u64).min(file),
            external: counted.external.max(0) as u64,
        }
    }
}

/// A number kept in the index's meta table; 0 when not set.
fn meta_number(conn: &Connection, name: &str) -> Result<u64, StoreError> {
    let value: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?;
    Ok(value.and_then(|s| s.parse().ok()).unwrap_or(0))
}

fn set_meta(tx: &rusqlite::Transaction<'_>, name: &str, value: u64) -> Result<(), StoreError> {
    tx.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)",
        params![name, value.to_string()],
    )?;
    Ok(())
}

/// Replaces the rows of documents and records the bytes the index then
/// holds (in the transaction; the caller keeps them once it commits).
fn replace_counted(
    tx: &rusqlite::Transaction<'_>,
    inner: &IndexInner,
    docs: &[IndexedDoc],
) -> Result<RowBytes, StoreError> {
    let mut counts = *inner.counted();
    counts.add(replace_rows(tx, docs)?);
    index_sizes::save(tx, counts)?;
    Ok(counts)
}

/// Replaces the rows of each document with its new ones (none for a
/// deleted or purged document), keeping the counts and blocks in step;
/// answers how the rows' bytes changed.
fn replace_rows(
    tx: &rusqlite::Transaction<'_>,
    docs: &[IndexedDoc],
) -> Result<RowBytes, StoreError> {
    // Rows per view move with every change: kept counted, so
    // `total_rows` is a lookup, not a scan.
    let mut moved: std::collections::BTreeMap<u32, i64> = Default::default();
    let mut blocks = index_blocks::Deltas::new(tx)?;
    let mut bytes = RowBytes::default();
    let mut old_rows = tx.prepare_cached(&format!(
        "SELECT view, sort_key, n, {} FROM rows WHERE doc_id = ?1",
        index_sizes::KEY_VALUE_BYTES
    ))?;
    let mut delete = tx.prepare_cached("DELETE FROM rows WHERE doc_id = ?1")?;
    let mut insert = tx.prepare_cached(
        "INSERT OR REPLACE INTO rows (view, sort_key, doc_id, n, key, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for doc in docs {
        let mut old = old_rows.query([&doc.id])?;
        while let Some(row) = old.next()? {
            let view: u32 = row.get(0)?;
            *moved.entry(view).or_default() -= 1;
            let sort_key: Vec<u8> = row.get(1)?;
            let key_value: i64 = row.get(3)?;
            bytes.remove(RowBytes::of_row(
                sort_key.len(),
                doc.id.len(),
                key_value.max(0) as usize,
            ));
            let at = (sort_key, doc.id.clone(), row.get(2)?);
            blocks.row(view, &at, -1)?;
        }
        delete.execute([&doc.id])?;
        for (n, row) in doc.rows.iter().enumerate() {
            *moved.entry(row.view).or_default() += 1;
            bytes.add(RowBytes::of_row(
                row.sort_key.len(),
                doc.id.len(),
                row.key.len() + row.value.len(),
            ));
            let at = (row.sort_key.clone(), doc.id.clone(), n as i64);
            blocks.row(row.view, &at, 1)?;
            insert.execute(params![
                row.view,
                row.sort_key,
                doc.id,
                n as i64,
                row.key,
                row.value
            ])?;
        }
    }
    let mut add = tx.prepare_cached(
        "INSERT INTO view_rows (view, n) VALUES (?1, ?2) ON CONFLICT (view) DO UPDATE SET n = n + excluded.n",
    )?;
    for (view, delta) in moved {
        if delta != 0 {
            add.execute(params![view, delta])?;
        }
    }
    blocks.apply()?;
    Ok(bytes)
}

fn read_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<IndexEntry> {
    Ok(IndexEntry {
        sort_key: r.get(0)?,
        key: r.get(1)?,
        id: r.get(2)?,
        value: r.get(3)?,
        n: r.get(4)?,
    })
}

/// The SQL condition of a range's rows (`view = ?1 AND ...`) and its parameters.
fn range_condition(range: &IndexRange) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = String::from("view = ?1");
    let mut args: Vec<rusqlite::types::Value> = vec![i64::from(range.view).into()];
    let (lower, upper) = if range.descending {
        (&range.end, &range.start)
    } else {
        (&range.start, &range.end)
    };
    let lower_inclusive = !range.descending || range.inclusive_end;
    let upper_inclusive = range.descending || range.inclusive_end;
    bound(&mut sql, &mut args, lower, ">", lower_inclusive);
    bound(&mut sql, &mut args, upper, "<", upper_inclusive);
    (sql, args)
}

/// Adds `(sort_key, doc_id) > / >= bound` (or `<`) to a query.
fn bound(
    sql: &mut String,
    args: &mut Vec<rusqlite::types::Value>,
    edge: &Option<(Vec<u8>, Option<String>)>,
    op: &str,
    inclusive: bool,
) {
    let Some((key, doc_id)) = edge else { return };
    let eq = if inclusive { "=" } else { "" };
    let k = args.len() + 1;
    args.push(key.clone().into());
    match doc_id {
        None if inclusive => sql.push_str(&format!(" AND sort_key {op}= ?{k}")),
        None => sql.push_str(&format!(" AND sort_key {op} ?{k}")),
        Some(id) => {
            let d = args.len() + 1;
            args.push(id.clone().into());
            sql.push_str(&format!(
                " AND (sort_key {op} ?{k} OR (sort_key = ?{k} AND doc_id {op}{eq} ?{d}))"
            ));
        }
    }
}
