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

/// The rows held, each once: a row written twice keeps its last values
/// (as two statements in a row would have left it).
#[derive(Default)]
pub(crate) struct Pending {
    revs: Vec<PendingRev>,
    rev_at: HashMap<(i64, String), usize>,
    docs: Vec<PendingDoc>,
    doc_at: HashMap<i64, usize>,
    /// Placeholders given out so far in this transaction.
    given: i64,
    /// Each sent revision's placeholder and real row id: a document row may
    /// name one sent by an earlier statement of the transaction.
    sent: HashMap<i64, i64>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.revs.is_empty() && self.docs.is_empty()
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
        if let Some(&i) = self.rev_at.get(&(key, rev.clone())) {
            let held = &mut self.revs[i];
            held.body = body.to_vec();
            held.snappy = snappy;
            held.body_len = body_len;
            held.atts = atts;
            return held.placeholder;
        }
        self.given += 1;
        let placeholder = -self.given;
        self.rev_at.insert((key, rev.clone()), self.revs.len());
        self.revs.push(PendingRev {
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
    pub fn doc(&mut self, doc: PendingDoc) {
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

    /// Forgets the held rows unsent (their savepoint is rolled back).
    pub fn discard(&mut self) {
        self.revs.clear();
        self.rev_at.clear();
        self.docs.clear();
        self.doc_at.clear();
    }

    /// Sends every held row (revisions first, for their ids) and forgets
    /// them, sent or not: after a failure, the caller rolls back.
    pub fn send(&mut self, conn: &mut PgConn, db_id: i64) -> Result<(), StoreError> {
        let revs = std::mem::take(&mut self.revs);
        let rev_at = std::mem::take(&mut self.rev_at);
        let docs = std::mem::take(&mut self.docs);
        self.doc_at.clear();
        send_revisions(conn, db_id, revs, &rev_at, &mut self.sent)?;
        let rows = &self.sent;
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
                            detail: format!(
                                "document {} names a revision row never written",
                                doc.id
                            ),
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
