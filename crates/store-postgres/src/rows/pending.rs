//! Revision and document rows a write transaction has not sent yet.
//!
//! Each row written alone costs a round trip to PostgreSQL, which made a
//! batch of 1,000 documents 2,000 statements. The writer's rows are held
//! here instead and sent as one multi-row statement per table (`unnest` of
//! arrays) before the next statement of any other kind, so every read and
//! every other write still sees them, in the order they were made.
//!
//! A revision's row id is only known once it is inserted, and a document
//! row names its winner's: until then the writer gets a placeholder
//! (negative, where real ids are positive), replaced as the rows are sent.

use std::collections::HashMap;

use crate::conn::{Param, PgConn};
use crate::text::Text;
use store::StoreError;

use super::get;

/// A revision's row to insert (or to complete, for a revision known until
/// now without its body).
struct PendingRev {
    /// Its row id until it is sent.
    placeholder: i64,
    key: i64,
    rev: String,
    body: Vec<u8>,
    snappy: bool,
    body_len: i64,
    atts: Option<String>,
}

/// A document's row to insert or update.
pub(crate) struct PendingDoc {
    pub key: i64,
    pub id: String,
    pub seq: i64,
    pub winner: String,
    pub deleted: bool,
    /// A real row id, 0 for none, or a placeholder of a pending revision.
    pub winner_row: i64,
    pub tree: Vec<u8>,
    pub is_new: bool,
}

/// Rows held, each once: a row written twice keeps its last values (as
/// two statements in a row would have left it).
#[derive(Default)]
struct Held {
    revs: Vec<PendingRev>,
    rev_at: HashMap<(i64, String), usize>,
    docs: Vec<PendingDoc>,
    doc_at: HashMap<i64, usize>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.revs.is_empty() && self.docs.is_empty()
    }

    fn put_rev(&mut self, rev: PendingRev) {
        match self.rev_at.get(&(rev.key, rev.rev.clone())) {
            Some(&i) => self.revs[i] = rev,
            None => {
                self.rev_at
                    .insert((rev.key, rev.rev.clone()), self.revs.len());
                self.revs.push(rev);
            }
        }
    }

    fn put_doc(&mut self, doc: PendingDoc) {
        match self.doc_at.get(&doc.key) {
            Some(&i) => {
                // Inserted by this transaction, it is still inserted.
                let is_new = self.docs[i].is_new || doc.is_new;
                self.docs[i] = PendingDoc { is_new, ..doc };
            }
            None => {
                self.doc_at.insert(doc.key, self.docs.len());
                self.docs.push(doc);
            }
        }
    }

    /// Takes `later`'s rows in, each replacing its earlier values.
    fn absorb(&mut self, later: Held) {
        for rev in later.revs {
            self.put_rev(rev);
        }
        for doc in later.docs {
            self.put_doc(doc);
        }
    }
}

/// The rows a transaction has not sent: the group's, and those of the one
/// write of the group now running in a savepoint not sent yet (see
/// `PgTx::savepoint`), kept apart so a failed write's rows are dropped
/// without a statement.
#[derive(Default)]
pub(crate) struct Pending {
    group: Held,
    /// The running write's rows, while its savepoint is held back.
    job: Option<Held>,
    /// Placeholders given out so far in this transaction.
    given: i64,
    /// Each sent revision's placeholder and real row id: a document row may
    /// name one sent by an earlier statement of the transaction.
    sent: HashMap<i64, i64>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.group.is_empty() && self.job.as_ref().is_none_or(Held::is_empty)
    }

    /// Whether a row of any of these documents is held: a look-up of
    /// others needs none of the held rows sent first.
    pub fn holds_any_of(&self, ids: &[&str]) -> bool {
        let held: std::collections::HashSet<&str> = [Some(&self.group), self.job.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|held| held.docs.iter().map(|doc| doc.id.as_str()))
            .collect();
        !held.is_empty() && ids.iter().any(|id| held.contains(id))
    }

    /// Rows from now on are the running write's (until [`Pending::end_job`]).
    pub fn begin_job(&mut self) {
        self.job = Some(Held::default());
    }

    /// The running write ended: its rows join the group's when it is kept,
    /// and are dropped otherwise.
    pub fn end_job(&mut self, kept: bool) {
        if let Some(job) = self.job.take()
            && kept
        {
            self.group.absorb(job);
        }
    }

    /// Where rows go now.
    fn target(&mut self) -> &mut Held {
        match &mut self.job {
            Some(job) => job,
            None => &mut self.group,
        }
    }

    /// Holds a revision's row; answers the placeholder of its row id.
    pub fn revision(
        &mut self,
        key: i64,
        rev: String,
        body: &[u8],
        snappy: bool,
        body_len: i64,
        atts: Option<String>,
    ) -> i64 {
        // A revision held already keeps its placeholder: rows naming it
        // stay right whichever values win.
        let held = [self.job.as_ref(), Some(&self.group)]
            .into_iter()
            .flatten()
            .find_map(|held| {
                let i = *held.rev_at.get(&(key, rev.clone()))?;
                Some(held.revs[i].placeholder)
            });
        let placeholder = held.unwrap_or_else(|| {
            self.given += 1;
            -self.given
        });
        self.target().put_rev(PendingRev {
            placeholder,
            key,
            rev,
            body: body.to_vec(),
            snappy,
            body_len,
            atts,
        });
        placeholder
    }

    /// Holds a document's row.
    pub fn doc(&mut self, mut doc: PendingDoc) {
        if self.job.is_some()
            && let Some(&i) = self.group.doc_at.get(&doc.key)
        {
            doc.is_new |= self.group.docs[i].is_new;
        }
        self.target().put_doc(doc);
    }

    /// Forgets the running write's rows unsent, or every row when no write
    /// runs apart (their savepoint is rolled back).
    pub fn discard(&mut self) {
        *self.target() = Held::default();
    }

    /// Sends the group's rows only (before a running write's savepoint is
    /// sent: they are not to be rolled back with it).
    pub fn send_group(&mut self, conn: &mut PgConn, db_id: i64) -> Result<(), StoreError> {
        let group = std::mem::take(&mut self.group);
        send_held(conn, db_id, group, &mut self.sent)
    }

    /// Sends every held row (the group's, then the running write's) and
    /// forgets them, sent or not: after a failure, the caller rolls back.
    pub fn send(&mut self, conn: &mut PgConn, db_id: i64) -> Result<(), StoreError> {
        self.send_group(conn, db_id)?;
        if let Some(job) = &mut self.job {
            let job = std::mem::take(job);
            send_held(conn, db_id, job, &mut self.sent)?;
        }
        Ok(())
    }
}

/// Sends `held` (revisions first, for their ids).
fn send_held(
    conn: &mut PgConn,
    db_id: i64,
    held: Held,
    sent: &mut HashMap<i64, i64>,
) -> Result<(), StoreError> {
    let Held {
        revs, rev_at, docs, ..
    } = held;
    send_revisions(conn, db_id, revs, &rev_at, sent)?;
    let rows = &*sent;
    let (inserts, updates): (Vec<PendingDoc>, Vec<PendingDoc>) =
        docs.into_iter().partition(|d| d.is_new);
    for (docs, sql) in [(inserts, INSERT_DOCS), (updates, UPDATE_DOCS)] {
        if docs.is_empty() {
            continue;
        }
        let mut keys = Vec::with_capacity(docs.len());
        let mut ids = Vec::with_capacity(docs.len());
        let mut seqs = Vec::with_capacity(docs.len());
        let mut winners = Vec::with_capacity(docs.len());
        let mut deleted = Vec::with_capacity(docs.len());
        let mut winner_rows = Vec::with_capacity(docs.len());
        let mut trees = Vec::with_capacity(docs.len());
        for doc in docs {
            let winner_row = if doc.winner_row < 0 {
                *rows
                    .get(&doc.winner_row)
                    .ok_or_else(|| StoreError::Corrupt {
                        db: String::new(),
                        detail: format!("document {} names a revision row never written", doc.id),
                    })?
            } else {
                doc.winner_row
            };
            keys.push(doc.key);
            ids.push(Text(doc.id));
            seqs.push(doc.seq);
            winners.push(Text(doc.winner));
            deleted.push(doc.deleted);
            winner_rows.push(winner_row);
            trees.push(doc.tree);
        }
        let params: [&dyn Param; 8] = [
            &db_id,
            &keys,
            &ids,
            &seqs,
            &winners,
            &deleted,
            &winner_rows,
            &trees,
        ];
        conn.execute(sql, &params)?;
    }
    Ok(())
}

/// Inserts the held revisions; records each placeholder's real row id in
/// `sent`.
fn send_revisions(
    conn: &mut PgConn,
    db_id: i64,
    revs: Vec<PendingRev>,
    rev_at: &HashMap<(i64, String), usize>,
    sent: &mut HashMap<i64, i64>,
) -> Result<(), StoreError> {
    if revs.is_empty() {
        return Ok(());
    }
    let keys: Vec<i64> = revs.iter().map(|r| r.key).collect();
    let ids: Vec<Text<&str>> = revs.iter().map(|r| Text(r.rev.as_str())).collect();
    let bodies: Vec<&[u8]> = revs.iter().map(|r| r.body.as_slice()).collect();
    let snappy: Vec<bool> = revs.iter().map(|r| r.snappy).collect();
    let lens: Vec<i64> = revs.iter().map(|r| r.body_len).collect();
    let atts: Vec<Option<Text<&str>>> = revs.iter().map(|r| r.atts.as_deref().map(Text)).collect();
    let answer = conn.query(
        INSERT_REVS,
        &[&db_id, &keys, &ids, &bodies, &snappy, &lens, &atts],
    )?;
    let mut written = 0;
    for row in &answer {
        let key: i64 = get(row, 0)?;
        let rev = row.text(1)?;
        let id: i64 = get(row, 2)?;
        if let Some(&i) = rev_at.get(&(key, rev)) {
            sent.insert(revs[i].placeholder, id);
            written += 1;
        }
    }
    if written != revs.len() {
        return Err(StoreError::Corrupt {
            db: String::new(),
            detail: format!("{} revision rows sent, {written} written", revs.len()),
        });
    }
    Ok(())
}

/// A revision known until now without its body gets it.
const INSERT_REVS: &str = "INSERT INTO recliner_revs (db_id, doc_key, rev, body, snappy, body_len, atts)
     SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bytea[], $5::boolean[], $6::bigint[], $7::text[])
     ON CONFLICT (db_id, doc_key, rev) DO UPDATE
     SET body = EXCLUDED.body, snappy = EXCLUDED.snappy,
         body_len = EXCLUDED.body_len, atts = EXCLUDED.atts
     RETURNING doc_key, rev, row";

const INSERT_DOCS: &str = "INSERT INTO recliner_docs (db_id, doc_key, id, seq, winner, deleted, winner_row, tree)
     SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::boolean[], $7::bigint[], $8::bytea[])";

/// The ids are passed too (unused) so both statements take the same arrays.
const UPDATE_DOCS: &str = "UPDATE recliner_docs d
     SET seq = u.seq, winner = u.winner, deleted = u.deleted, winner_row = u.winner_row, tree = u.tree
     FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::boolean[], $7::bigint[], $8::bytea[])
          AS u(doc_key, id, seq, winner, deleted, winner_row, tree)
     WHERE d.db_id = $1 AND d.doc_key = u.doc_key";
