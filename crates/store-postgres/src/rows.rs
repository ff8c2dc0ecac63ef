//! The store's rows in PostgreSQL: what the rules read and write, for the
//! writer (inside its transaction) and readers (inside a snapshot).
//!
//! Scans (changes, `_all_docs`) read in pages of [`SCAN_PAGE`] rows and
//! hand each row on: the rules may ask for more rows while they handle one,
//! which a connection cannot do in the middle of a result, and memory stays
//! bounded however long the feed.
//!
//! Every string (ids, revisions, names in `_access`, bounds) is sent as a
//! [`Text`] and read with [`PgRow::text`]: escaped and unescaped by the one
//! rule of `crate::text`, which keeps byte order (PostgreSQL's `text`
//! refuses U+0000, which CouchDB accepts).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use revtree::{RevId, RevTree};
use store::backend::{
    Attachments, CHUNK_SIZE, DbCounts, DocRow, DocUpdate, IdPage, LocalDocRow, PurgeInfoRow,
    ReadRows, RevisionRef, RowVisitor, StorageSizes, StoredBody, StoredDoc, WriteRows, decode_atts,
    decode_tree, encode_atts, new_blob_id, snappy_text,
};
use store::{PartitionInfo, StoreError, digest_of, partition_range};

use crate::conn::{Column, Param, PgConn, PgRow};
use crate::text::{Text, texts};

mod access;
mod pending;
mod read;

use pending::{Pending, PendingDoc};

/// Rows read per query of a scan.
const SCAN_PAGE: u64 = 500;

/// One database's rows over one connection (in a transaction its owner began).
pub(crate) struct PgRows<'a> {
    conn: RefCell<&'a mut PgConn>,
    db_id: i64,
    name: &'a str,
    /// Where commits are announced (`crate::listener`); `None` when nodes
    /// poll the counters instead.
    channel: Option<&'a str>,
    /// Documents a batch prefetched, as the transaction found them: each is
    /// handed out once, and any write that could change one drops them all.
    prefetched: RefCell<HashMap<String, Option<StoredDoc>>>,
    /// The writer's revision and document rows not sent yet: every other
    /// statement sends them first (see [`pending`]).
    pending: RefCell<Pending>,
    /// Metadata read with the write group's lock, answered without a
    /// query until written.
    known_meta: RefCell<KnownMeta>,
    /// The savepoint of the group's write now running, if any.
    savepoint: Cell<Savepoint>,
}

/// Where the savepoint of a group's running write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Savepoint {
    /// No write runs apart: rows are the group's.
    None,
    /// Not sent yet: nothing of the write has reached the database.
    HeldBack,
    /// Sent, before the write's first statement.
    Sent,
}

/// Metadata values by key (`None`: unset), as a write group read them.
pub(crate) type KnownMeta = HashMap<String, Option<String>>;

/// A query's arguments, built alongside its text.
type Args = Vec<Box<dyn Param>>;

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A column that is no string (strings: [`PgRow::text`]).
fn get<'r, T: Column<'r>>(row: &'r PgRow, index: usize) -> Result<T, StoreError> {
    row.get(index)
}

/// A body as stored, as JSON text.
fn body_text(body: Vec<u8>, snappy: bool) -> Result<String, StoreError> {
    if snappy {
        snappy_text(&body)
    } else {
        String::from_utf8(body).map_err(|e| StoreError::Corrupt {
            db: String::new(),
            detail: format!("revision body: {e}"),
        })
    }
}

/// `docs` columns a [`DocRow`] is read from, with the winner's body or without.
fn doc_columns(with_bodies: bool) -> &'static str {
    if with_bodies {
        "d.id, d.doc_key, d.seq, d.tree, d.winner, d.winner_row, r.body, r.snappy, r.atts
         FROM recliner_docs d LEFT JOIN recliner_revs r ON r.row = d.winner_row"
    } else {
        "d.id, d.doc_key, d.seq, d.tree, d.winner, d.winner_row FROM recliner_docs d"
    }
}

fn doc_row(row: &PgRow, with_body: bool) -> Result<(String, DocRow), StoreError> {
    doc_row_at(row, 0, with_body)
}

/// [`doc_row`] of columns that start at `at`.
fn doc_row_at(row: &PgRow, at: usize, with_body: bool) -> Result<(String, DocRow), StoreError> {
    let id = row.text(at)?;
    let tree: Vec<u8> = get(row, at + 3)?;
    let winner_body = if with_body {
        match get::<Option<Vec<u8>>>(row, at + 6)? {
            Some(body) => Some((body_text(body, get(row, at + 7)?)?, row.opt_text(at + 8)?)),
            None => None,
        }
    } else {
        None
    };
    let doc = DocRow {
        key: get(row, at + 1)?,
        seq: get::<i64>(row, at + 2)?.max(0) as u64,
        tree: decode_tree(&id, &tree)?,
        winner: row.text(at + 4)?,
        winner_row: get(row, at + 5)?,
        winner_body,
    };
    Ok((id, doc))
}

/// ` AND {column} >= $n` and the like for a bound, its argument added to `args`.
fn bound_sql(
    column: &str,
    bound: &Bound<String>,
    incl: &str,
    excl: &str,
    args: &mut Args,
) -> String {
    match bound {
        Bound::Included(k) => {
            args.push(Box::new(Text(k.clone())));
            format!(" AND {column} {incl} ${}", args.len())
        }
        Bound::Excluded(k) => {
            args.push(Box::new(Text(k.clone())));
            format!(" AND {column} {excl} ${}", args.len())
        }
        Bound::Unbounded => String::new(),
    }
}

fn range_sql(column: &str, lo: &Bound<String>, hi: &Bound<String>, args: &mut Args) -> String {
    let mut sql = bound_sql(column, lo, ">=", ">", args);
    sql.push_str(&bound_sql(column, hi, "<=", "<", args));
    sql
}

fn refs(args: &Args) -> Vec<&dyn Param> {
    args.iter().map(|a| a.as_ref()).collect()
}

/// Strings as an owned `text[]` parameter.
fn owned_texts(items: &[String]) -> Vec<Text<String>> {
    items.iter().cloned().map(Text).collect()
}

impl<'a> PgRows<'a> {
    pub(crate) fn new(
        conn: &'a mut PgConn,
        db_id: i64,
        name: &'a str,
        channel: Option<&'a str>,
    ) -> PgRows<'a> {
        PgRows {
            conn: RefCell::new(conn),
            db_id,
            name,
            channel,
            prefetched: RefCell::default(),
            pending: RefCell::default(),
            known_meta: RefCell::default(),
            savepoint: Cell::new(Savepoint::None),
        }
    }

    /// Metadata the write group read with its lock (see `WRITE_GROUP_META`).
    pub(crate) fn know_meta(&self, meta: KnownMeta) {
        *self.known_meta.borrow_mut() = meta;
    }

    /// The connection, once the rows held back are sent: every statement
    /// goes through here, so each sees the writes made before it. A write
    /// whose savepoint was held back gets it now, after the group's rows
    /// (which are not to be rolled back with it).
    fn conn(&self) -> Result<std::cell::RefMut<'_, &'a mut PgConn>, StoreError> {
        self.conn_sending(true)
    }

    /// [`PgRows::conn`], sending the rows held back only when `send_held`
    /// (a statement that cannot see them may go first; the savepoint of a
    /// write held back is sent either way).
    fn conn_sending(
        &self,
        send_held: bool,
    ) -> Result<std::cell::RefMut<'_, &'a mut PgConn>, StoreError> {
        let mut conn = self.conn.borrow_mut();
        let mut pending = self.pending.borrow_mut();
        if self.savepoint.get() == Savepoint::HeldBack {
            pending.send_group(&mut conn, self.db_id)?;
            conn.batch("SAVEPOINT job")?;
            self.savepoint.set(Savepoint::Sent);
        }
        if send_held && !pending.is_empty() {
            pending.send(&mut conn, self.db_id)?;
        }
        Ok(conn)
    }

    /// Sends the rows held back (before a commit).
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        self.conn().map(drop)
    }

    /// One write of a group begins, in a savepoint held back until the
    /// write needs the database: a write that only loads documents the
    /// group read already and writes revisions and documents (most do)
    /// costs no statement of its own, and its rows go with the group's.
    pub(crate) fn begin_job(&self) {
        self.pending.borrow_mut().begin_job();
        self.savepoint.set(Savepoint::HeldBack);
    }

    /// The write begun by [`PgRows::begin_job`] ended, `kept` or not:
    /// whether it is kept in the end. Held back, its rows join the group's
    /// or are dropped, without a statement. Sent, its rows are sent inside
    /// its savepoint (a row refused fails this write alone) or dropped, and
    /// the savepoint is released or rolled back.
    pub(crate) fn end_job(&self, kept: bool) -> Result<bool, StoreError> {
        if self.savepoint.replace(Savepoint::None) == Savepoint::HeldBack {
            self.pending.borrow_mut().end_job(kept);
            return Ok(kept);
        }
        let sent = if kept {
            self.flush()
        } else {
            self.pending.borrow_mut().discard();
            Ok(())
        };
        self.pending.borrow_mut().end_job(false);
        let mut conn = self.conn.borrow_mut();
        if !kept || sent.is_err() {
            conn.batch("ROLLBACK TO SAVEPOINT job")?;
        }
        conn.batch("RELEASE SAVEPOINT job")?;
        sent.map(|()| kept)
    }

    /// Announces a change to the other nodes, if they listen (delivered
    /// when the transaction commits).
    fn notify(&self, payload: &str) -> Result<(), StoreError> {
        if let Some(channel) = self.channel {
            self.execute(
                "SELECT pg_notify($1, $2)",
                &[&Text(channel), &Text(payload)],
            )?;
        }
        Ok(())
    }

    /// Writes the counters back (a design change moves `design_gen`, which
    /// polling nodes follow) and tells every listening node the database
    /// moved.
    pub(crate) fn save_state(&self, state: &store::backend::DbState) -> Result<(), StoreError> {
        const UPDATE: &str = "UPDATE recliner_dbs SET update_seq = $2, purge_seq = $3,
             doc_count = $4, doc_del_count = $5, external_size = $6, next_doc_key = $7,
             design_gen = design_gen + CASE WHEN $8 THEN 1 ELSE 0 END WHERE db_id = $1";
        let counters: [&dyn Param; 8] = [
            &self.db_id,
            &int(state.update_seq),
            &int(state.purge_seq),
            &int(state.doc_count),
            &int(state.doc_del_count),
            &state.external_size,
            &state.next_doc_key,
            &state.design_changed,
        ];
        let Some(channel) = self.channel else {
            self.execute(UPDATE, &counters)?;
            return Ok(());
        };
        // The announcement rides on the update: one round trip, not two.
        let design = if state.design_changed { "design" } else { "-" };
        let payload = format!("{} {} {design}", self.db_id, state.update_seq);
        let (channel, payload) = (Text(channel), Text(payload.as_str()));
        let mut params = counters.to_vec();
        params.extend([&channel as &dyn Param, &payload]);
        self.execute(&format!("{UPDATE} RETURNING pg_notify($9, $10)"), &params)?;
        Ok(())
    }

    fn query(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<PgRow>, StoreError> {
        self.conn()?.query(sql, params)
    }

    fn query_opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<PgRow>, StoreError> {
        self.conn()?.query_opt(sql, params)
    }

    fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, StoreError> {
        self.conn()?.execute(sql, params)
    }

    /// Runs `sql` (with `$1` the database) and collects its rows' first column.
    fn count(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, StoreError> {
        let row = self.conn()?.query_one(sql, params)?;
        Ok(get::<i64>(&row, 0)?.max(0) as u64)
    }

    fn blob_id(&self, digest: &str) -> Result<Option<i64>, StoreError> {
        self.query_opt(
            "SELECT blob_id FROM recliner_blobs WHERE db_id = $1 AND digest = $2",
            &[&self.db_id, &Text(digest)],
        )?
        .map(|row| get(&row, 0))
        .transpose()
    }

    fn atts_of(&self, key: i64, rev: &RevId) -> Result<Option<Option<String>>, StoreError> {
        self.query_opt(
            "SELECT atts FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND rev = $3",
            &[&self.db_id, &key, &Text(rev.to_string())],
        )?
        .map(|row| row.opt_text(0))
        .transpose()
    }

    fn read_blob(&self, digest: &str) -> Result<Vec<u8>, StoreError> {
        let Some(id) = self.blob_id(digest)? else {
            return Err(StoreError::Corrupt {
                db: self.name.to_string(),
                detail: format!("attachment {digest} is not stored"),
            });
        };
        let mut out = Vec::new();
        for row in self.query(
            "SELECT data FROM recliner_chunks WHERE db_id = $1 AND blob_id = $2 ORDER BY idx",
            &[&self.db_id, &id],
        )? {
            out.extend_from_slice(&get::<Vec<u8>>(&row, 0)?);
        }
        Ok(out)
    }

    fn get_meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        if let Some(known) = self.known_meta.borrow().get(key) {
            return Ok(known.clone());
        }
        self.query_opt(
            "SELECT value FROM recliner_meta WHERE db_id = $1 AND key = $2",
            &[&self.db_id, &Text(key)],
        )?
        .map(|row| row.text(0))
        .transpose()
    }

    fn partition(&self, partition: &str) -> Result<PartitionInfo, StoreError> {
        let (start, end) = partition_range(partition);
        let row = self.conn()?.query_one(
            "SELECT count(*) FILTER (WHERE NOT d.deleted), count(*) FILTER (WHERE d.deleted),
                    COALESCE(sum(r.body_len) FILTER (WHERE NOT d.deleted), 0)::bigint
             FROM recliner_docs d JOIN recliner_revs r ON r.row = d.winner_row
             WHERE d.db_id = $1 AND d.id >= $2 AND d.id < $3",
            &[&self.db_id, &Text(&start), &Text(&end)],
        )?;
        Ok(PartitionInfo {
            doc_count: get::<i64>(&row, 0)?.max(0) as u64,
            doc_del_count: get::<i64>(&row, 1)?.max(0) as u64,
            external_size: get::<i64>(&row, 2)?.max(0) as u64,
        })
    }

    /// One page of live documents: within the bounds, skipping `skip`;
    /// with `reader`, only those its principals may read.
    #[allow(clippy::too_many_arguments)]
    fn live_page(
        &self,
        reader: Option<&[String]>,
        lo: &Bound<String>,
        hi: &Bound<String>,
        descending: bool,
        skip: u64,
        limit: u64,
        with_bodies: bool,
    ) -> Result<Vec<(String, DocRow)>, StoreError> {
        let mut args: Args = vec![Box::new(self.db_id)];
        let live = match reader {
            Some(principals) => {
                args.push(Box::new(owned_texts(principals)));
                access::READABLE
            }
            None => "d.db_id = $1 AND NOT d.deleted",
        };
        let filter = range_sql("d.id", lo, hi, &mut args);
        let order = if descending { "DESC" } else { "ASC" };
        args.push(Box::new(int(limit)));
        let limit_arg = args.len();
        args.push(Box::new(int(skip)));
        let skip_arg = args.len();
        let sql = format!(
            "SELECT {} WHERE {live}{filter}
             ORDER BY d.id {order} LIMIT ${limit_arg} OFFSET ${skip_arg}",
            doc_columns(with_bodies)
        );
        self.query(&sql, &refs(&args))?
            .iter()
            .map(|row| doc_row(row, with_bodies))
            .collect()
    }
    /// Live documents page by page (see [`PgRows::live_page`]), each
    /// handed on once its page is read.
    fn scan_live(
        &self,
        reader: Option<&[String]>,
        page: &IdPage<'_>,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let (mut lo, mut hi) = (page.lo.clone(), page.hi.clone());
        let (mut skip, mut left) = (page.skip, page.limit);
        while left > 0 {
            let want = left.min(SCAN_PAGE);
            let rows = self.live_page(
                reader,
                &lo,
                &hi,
                page.descending,
                skip,
                want,
                page.with_bodies,
            )?;
            let got = rows.len() as u64;
            skip = 0;
            for (id, doc) in rows {
                // The next page starts past the last id seen.
                if page.descending {
                    hi = Bound::Excluded(id.clone());
                } else {
                    lo = Bound::Excluded(id.clone());
                }
                each(id, doc)?;
            }
            if got < want {
                break;
            }
            left -= got;
        }
        Ok(())
    }
}

/// A document row as the writer loads it (columns of [`LOAD_DOC`]).
fn stored_doc(id: &str, row: &PgRow) -> Result<StoredDoc, StoreError> {
    let tree: Vec<u8> = get(row, 1)?;
    let deleted: bool = get(row, 2)?;
    let body_len: Option<i64> = get(row, 3)?;
    Ok(StoredDoc {
        key: get(row, 0)?,
        tree: decode_tree(id, &tree)?,
        live_body_len: (!deleted).then_some(body_len.unwrap_or(0)),
    })
}

/// The columns [`stored_doc`] reads, and where from.
const LOAD_DOC: &str = "SELECT d.doc_key, d.tree, d.deleted, r.body_len, d.id
     FROM recliner_docs d LEFT JOIN recliner_revs r ON r.row = d.winner_row";

/// [`LOAD_DOC`] for a batch's ids (`$2`), one index probe per id whatever
/// the planner believes of the tables' sizes. A statement's plan is cached
/// on its connection, and one made while the tables looked empty (fresh
/// tables are not analyzed for a minute) scanned every document of the
/// database for `id = ANY($2)`: a batch then cost as much as the database
/// held, and the first 20,000 documents loaded at a quarter of the speed.
/// A lateral lookup with `LIMIT 1` cannot be turned into a scan of the
/// table, and a scalar subquery reads the winner's length by its key.
const PREFETCH_DOCS: &str = "SELECT d.doc_key, d.tree, d.deleted,
         (SELECT r.body_len FROM recliner_revs r WHERE r.row = d.winner_row), d.id
     FROM unnest($2::text[]) AS wanted(id)
     CROSS JOIN LATERAL (SELECT * FROM recliner_docs d
                         WHERE d.db_id = $1 AND d.id = wanted.id LIMIT 1) d";

impl PgRows<'_> {
    /// Forgets every prefetched document (a write changed rows).
    fn forget_prefetched(&self) {
        self.prefetched.borrow_mut().clear();
    }
}

impl WriteRows for PgRows<'_> {
    fn load_doc(&self, id: &str) -> Result<Option<StoredDoc>, StoreError> {
        if let Some(found) = self.prefetched.borrow_mut().remove(id) {
            return Ok(found);
        }
        let sql = format!("{LOAD_DOC} WHERE d.db_id = $1 AND d.id = $2");
        self.query_opt(&sql, &[&self.db_id, &Text(id)])?
            .map(|row| stored_doc(id, &row))
            .transpose()
    }

    fn prefetch_docs(&self, ids: &[&str]) -> Result<(), StoreError> {
        // Ids held already (the group's look-up, then a batch of it) are
        // not read again.
        let wanted: Vec<&str> = {
            let held = self.prefetched.borrow();
            let mut seen = HashSet::new();
            ids.iter()
                .copied()
                .filter(|id| !held.contains_key(*id) && seen.insert(*id))
                .collect()
        };
        if wanted.is_empty() {
            return Ok(());
        }
        // The rows held back are sent first only when they may be of these
        // documents: a batch read in chunks then sends its rows once.
        let send_held = self.pending.borrow().holds_any_of(&wanted);
        let rows = self
            .conn_sending(send_held)?
            .query(PREFETCH_DOCS, &[&self.db_id, &texts(&wanted)])?;
        let mut found: HashMap<String, Option<StoredDoc>> =
            wanted.iter().map(|id| (id.to_string(), None)).collect();
        for row in &rows {
            let id = row.text(4)?;
            let doc = stored_doc(&id, row)?;
            found.insert(id, Some(doc));
        }
        self.prefetched.borrow_mut().extend(found);
        Ok(())
    }

    fn revision_attachments(&self, key: i64, rev: &RevId) -> Result<Attachments, StoreError> {
        decode_atts(self.atts_of(key, rev)?.flatten().as_deref())
    }

    fn every_revision_attachments(&self, key: i64) -> Result<Vec<Attachments>, StoreError> {
        self.query(
            "SELECT atts FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND atts IS NOT NULL",
            &[&self.db_id, &key],
        )?
        .iter()
        .map(|row| decode_atts(Some(&row.text(0)?)))
        .collect()
    }

    fn write_revision(
        &self,
        key: i64,
        rev: &RevId,
        body: &StoredBody,
        atts: &Attachments,
    ) -> Result<RevisionRef, StoreError> {
        let (bytes, snappy): (&[u8], bool) = match body {
            StoredBody::Text(text) => (text.as_bytes(), false),
            StoredBody::Snappy { data, .. } => (data, true),
        };
        let body_len = body.text_len();
        let row = self.pending.borrow_mut().revision(
            key,
            rev.to_string(),
            bytes,
            snappy,
            body_len,
            encode_atts(atts),
        );
        Ok(RevisionRef { row, body_len })
    }

    fn revision_ref(&self, key: i64, rev: &RevId) -> Result<Option<RevisionRef>, StoreError> {
        self.query_opt(
            "SELECT row, body_len FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND rev = $3",
            &[&self.db_id, &key, &Text(rev.to_string())],
        )?
        .map(|row| {
            Ok(RevisionRef {
                row: get(&row, 0)?,
                body_len: get(&row, 1)?,
            })
        })
        .transpose()
    }

    fn drop_revision(&self, key: i64, rev: &RevId) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND rev = $3",
            &[&self.db_id, &key, &Text(rev.to_string())],
        )?;
        Ok(())
    }

    fn write_doc(&self, u: &DocUpdate<'_>) -> Result<(), StoreError> {
        self.prefetched.borrow_mut().remove(u.id);
        self.pending.borrow_mut().doc(PendingDoc {
            key: u.key,
            id: u.id.to_string(),
            seq: int(u.seq),
            winner: u.winner.to_string(),
            deleted: u.deleted,
            winner_row: u.winner_row,
            tree: u.tree.encode(),
            is_new: u.is_new,
        });
        Ok(())
    }

    fn put_blob(&self, data: &[u8]) -> Result<String, StoreError> {
        let digest = digest_of(data);
        if self.blob_id(&digest)?.is_some() {
            return Ok(digest);
        }
        let id = new_blob_id();
        for (i, chunk) in data.chunks(CHUNK_SIZE).enumerate() {
            self.put_chunk(id, i as u64, chunk)?;
        }
        self.execute(
            "INSERT INTO recliner_blobs (db_id, digest, blob_id, length) VALUES ($1, $2, $3, $4)",
            &[&self.db_id, &Text(&digest), &id, &(data.len() as i64)],
        )?;
        Ok(digest)
    }

    fn has_blob(&self, digest: &str) -> Result<bool, StoreError> {
        Ok(self.blob_id(digest)?.is_some())
    }

    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError> {
        self.read_blob(digest)
    }

    fn partition_size(&self, partition: &str) -> Result<u64, StoreError> {
        Ok(self.partition(partition)?.external_size)
    }

    fn put_local(&self, id: &str, rev: u64, body: &str) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO recliner_local (db_id, id, rev, body) VALUES ($1, $2, $3, $4)
             ON CONFLICT (db_id, id) DO UPDATE SET rev = EXCLUDED.rev, body = EXCLUDED.body",
            &[&self.db_id, &Text(id), &int(rev), &Text(body)],
        )?;
        Ok(())
    }

    fn delete_local(&self, id: &str) -> Result<bool, StoreError> {
        let removed = self.execute(
            "DELETE FROM recliner_local WHERE db_id = $1 AND id = $2",
            &[&self.db_id, &Text(id)],
        )?;
        Ok(removed > 0)
    }

    fn delete_doc(&self, key: i64) -> Result<(), StoreError> {
        self.forget_prefetched();
        self.execute(
            "DELETE FROM recliner_revs WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key],
        )?;
        self.execute(
            "DELETE FROM recliner_docs WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key],
        )?;
        self.execute(
            "DELETE FROM recliner_access WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key],
        )?;
        Ok(())
    }

    fn record_purge(&self, info: &PurgeInfoRow) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO recliner_purges (db_id, purge_seq, uuid, doc_id, revs) VALUES ($1, $2, $3, $4, $5)",
            &[
                &self.db_id,
                &int(info.purge_seq),
                &Text(&info.uuid),
                &Text(&info.id),
                &Text(&info.revs),
            ],
        )?;
        Ok(())
    }

    fn drop_purge_infos_through(&self, purge_seq: u64) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM recliner_purges WHERE db_id = $1 AND purge_seq <= $2",
            &[&self.db_id, &int(purge_seq)],
        )?;
        Ok(())
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.get_meta(key)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        // Read back from the table from now on: a savepoint rolled back
        // may undo this write.
        self.known_meta.borrow_mut().remove(key);
        self.execute(
            "INSERT INTO recliner_meta (db_id, key, value) VALUES ($1, $2, $3)
             ON CONFLICT (db_id, key) DO UPDATE SET value = EXCLUDED.value",
            &[&self.db_id, &Text(key), &Text(value)],
        )?;
        if key == "security" {
            // Every node caches `_security`: tell them all, by counter
            // (polling nodes) and by notification (listening ones).
            self.execute(
                "UPDATE recliner_dbs SET security_gen = security_gen + 1 WHERE db_id = $1",
                &[&self.db_id],
            )?;
            let payload = format!("{} security", self.db_id);
            self.notify(&payload)?;
        }
        Ok(())
    }

    fn put_chunk(&self, blob: i64, index: u64, data: &[u8]) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO recliner_chunks (db_id, blob_id, idx, data) VALUES ($1, $2, $3, $4)",
            &[&self.db_id, &blob, &int(index), &data],
        )?;
        Ok(())
    }

    fn file_blob(&self, digest: &str, blob: i64, length: u64) -> Result<(), StoreError> {
        if self.blob_id(digest)?.is_some() {
            self.execute(
                "DELETE FROM recliner_chunks WHERE db_id = $1 AND blob_id = $2",
                &[&self.db_id, &blob],
            )?;
        } else {
            self.execute(
                "INSERT INTO recliner_blobs (db_id, digest, blob_id, length) VALUES ($1, $2, $3, $4)",
                &[&self.db_id, &Text(digest), &blob, &int(length)],
            )?;
        }
        Ok(())
    }

    fn docs_after(
        &self,
        after_key: i64,
        limit: u64,
    ) -> Result<Vec<(i64, String, RevTree)>, StoreError> {
        self.query(
            "SELECT doc_key, id, tree FROM recliner_docs WHERE db_id = $1 AND doc_key > $2
             ORDER BY doc_key LIMIT $3",
            &[&self.db_id, &after_key, &int(limit)],
        )?
        .iter()
        .map(|row| {
            let id = row.text(1)?;
            let tree = decode_tree(&id, &get::<Vec<u8>>(row, 2)?)?;
            Ok((get(row, 0)?, id, tree))
        })
        .collect()
    }

    fn set_tree(&self, key: i64, tree: &RevTree) -> Result<(), StoreError> {
        self.forget_prefetched();
        self.execute(
            "UPDATE recliner_docs SET tree = $3 WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key, &tree.encode()],
        )?;
        Ok(())
    }

    fn referenced_digests(&self) -> Result<HashSet<String>, StoreError> {
        let mut referenced = HashSet::new();
        for row in self.query(
            "SELECT atts FROM recliner_revs WHERE db_id = $1 AND atts IS NOT NULL",
            &[&self.db_id],
        )? {
            for (_, meta) in decode_atts(Some(&row.text(0)?))? {
                referenced.insert(meta.digest);
            }
        }
        Ok(referenced)
    }

    fn blobs(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.query(
            "SELECT digest, blob_id FROM recliner_blobs WHERE db_id = $1",
            &[&self.db_id],
        )?
        .iter()
        .map(|row| Ok((row.text(0)?, get(row, 1)?)))
        .collect()
    }

    fn delete_blob(&self, digest: &str, blob: i64) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM recliner_chunks WHERE db_id = $1 AND blob_id = $2",
            &[&self.db_id, &blob],
        )?;
        self.execute(
            "DELETE FROM recliner_blobs WHERE db_id = $1 AND digest = $2",
            &[&self.db_id, &Text(digest)],
        )?;
        Ok(())
    }

    fn delete_unfiled_chunks(&self) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM recliner_chunks c WHERE c.db_id = $1 AND NOT EXISTS
             (SELECT 1 FROM recliner_blobs b WHERE b.db_id = c.db_id AND b.blob_id = c.blob_id)",
            &[&self.db_id],
        )?;
        Ok(())
    }

    fn reclaim_space(&self, _most_pages: u64) -> Result<bool, StoreError> {
        // PostgreSQL's autovacuum reuses the space of deleted rows.
        Ok(false)
    }

    fn revision_text(&self, key: i64, rev: &RevId) -> Result<Option<String>, StoreError> {
        match self.query_opt(
            "SELECT body, snappy FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND rev = $3",
            &[&self.db_id, &key, &Text(rev.to_string())],
        )? {
            Some(row) => Ok(Some(body_text(get(&row, 0)?, get(&row, 1)?)?)),
            None => Ok(None),
        }
    }

    fn access_rows(&self, key: i64) -> Result<Vec<store::backend::AccessRow>, StoreError> {
        self.read_access_rows(key)
    }

    fn set_access_rows(
        &self,
        key: i64,
        rows: &[store::backend::AccessRow],
    ) -> Result<(), StoreError> {
        self.write_access_rows(key, rows)
    }
}
