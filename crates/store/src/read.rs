//! Reading documents: `get` with CouchDB's options, `open_revs`, `bulk_get`
//! and `revs_diff`. Document JSON is built by splicing the stored body text
//! rather than re-parsing it, so reads stay cheap.

use std::collections::HashSet;

use revtree::{RevId, RevTree, RevsDiff};
use serde_json::Value;
use wire::rows::BulkGetError;

use crate::attachments::{self, Attachments};
use crate::backend::{DocRow, ReadRows};
use crate::doc_access::{Visibility, revocation_tombstone, visibility_in};
use crate::{Database, StoreError};

/// A document as JSON text, ready to be sent or embedded in a response.
///
/// Built by the store from bodies it serialized itself, so it is valid JSON
/// by construction and is never parsed again on the way out.
#[derive(Clone, PartialEq, Eq)]
pub struct DocJson(String);

impl DocJson {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// Parses the document, for callers that need to look inside.
    pub fn to_value(&self) -> Result<Value, StoreError> {
        ejson::from_stored(&self.0).map_err(|e| StoreError::Corrupt {
            db: String::new(),
            detail: format!("document JSON: {e}"),
        })
    }
}

impl std::fmt::Debug for DocJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for DocJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Options of a single-document read (`GET /db/doc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// A specific revision instead of the winner.
    pub rev: Option<RevId>,
    /// Add `_revisions`.
    pub revs: bool,
    /// Add `_revs_info`.
    pub revs_info: bool,
    /// Add `_conflicts`.
    pub conflicts: bool,
    /// Add `_deleted_conflicts`.
    pub deleted_conflicts: bool,
    /// Add `_local_seq`.
    pub local_seq: bool,
    /// Attachment bytes inline (base64) instead of stubs.
    pub attachments: bool,
    /// Only bytes of attachments newer than these revisions (implies `attachments`).
    pub atts_since: Vec<RevId>,
    /// With `rev`: the leaf that descends from it instead.
    pub latest: bool,
    /// Stubs show `encoding` and `encoded_length` of compressed attachments
    /// (CouchDB shows them only when asked).
    pub att_encoding_info: bool,
}

/// Which revisions `open_revs` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenRevs {
    /// Every leaf.
    All,
    /// These revisions (or, with `latest`, their leaves).
    List(Vec<RevId>),
}

/// One answer of `open_revs`: a document, or a revision the database lacks.
#[derive(Debug)]
pub enum OpenRev {
    Ok(DocJson),
    Missing(RevId),
}

/// One document's revisions to read: `rev`, or every leaf without one
/// (an entry of `_bulk_get`, or the replicator's read of what a target lacks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionsRequest {
    pub id: String,
    pub rev: Option<RevId>,
    pub atts_since: Vec<RevId>,
}

/// What was read for one [`RevisionsRequest`]: each revision's stored
/// text, or why it could not be read, in the wire's terms.
#[derive(Debug)]
pub struct RevisionsRead {
    pub id: String,
    pub docs: Vec<Result<DocJson, BulkGetError>>,
}

/// The stored body text and attachments of one revision, if kept: the
/// winner's from the row when the page brought it along.
fn load_body(
    rows: &dyn ReadRows,
    row: &DocRow,
    rev: &RevId,
) -> Result<Option<(String, Attachments)>, StoreError> {
    if let Some((body, atts)) = &row.winner_body
        && rev.to_string() == row.winner
    {
        return Ok(Some((
            body.clone(),
            attachments::decode_atts(atts.as_deref())?,
        )));
    }
    match rows.revision_body(row, rev)? {
        Some((body, atts)) => Ok(Some((body, attachments::decode_atts(atts.as_deref())?))),
        None => Ok(None),
    }
}

/// Builds a document's JSON in CouchDB's field order: `_id`, `_rev`, the
/// body, `_deleted`, `_revisions`, meta fields, `_attachments`.
pub(crate) struct DocBuilder<'a> {
    pub id: &'a str,
    pub rev: &'a RevId,
    pub deleted: bool,
    pub body: &'a str,
    pub extra: Vec<(&'static str, Value)>,
}

impl DocBuilder<'_> {
    pub(crate) fn finish(self) -> Result<DocJson, StoreError> {
        let mut out = String::with_capacity(self.body.len() + 96);
        out.push_str("{\"_id\":");
        wire::json::push_string(&mut out, self.id);
        out.push_str(",\"_rev\":");
        wire::json::push_display(&mut out, self.rev);
        let inner = self.body.trim();
        let inner = inner
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .unwrap_or("")
            .trim();
        if !inner.is_empty() {
            out.push(',');
            out.push_str(inner);
        }
        if self.deleted {
            out.push_str(",\"_deleted\":true");
        }
        for (name, value) in self.extra {
            out.push_str(",\"");
            out.push_str(name);
            out.push_str("\":");
            out.push_str(&ejson::to_string(&value));
        }
        out.push('}');
        Ok(DocJson(out))
    }
}

/// The newest position among `since` revisions that are `rev` or its
/// ancestors: attachments at or below it are assumed present at the reader.
fn since_pos(tree: &RevTree, rev: &RevId, since: &[RevId]) -> u64 {
    let Some(history) = tree.history(rev) else {
        return 0;
    };
    let ancestry: HashSet<RevId> = history.revs().collect();
    since
        .iter()
        .filter(|r| ancestry.contains(r))
        .map(|r| r.pos())
        .max()
        .unwrap_or(0)
}

/// Everything needed to answer for one revision.
pub(crate) struct RevRequest<'a> {
    pub id: &'a str,
    pub row: &'a DocRow,
    pub rev: &'a RevId,
    pub opts: &'a GetOptions,
    pub follows: bool,
}

/// One revision as JSON, or `None` when its body is not kept.
pub(crate) fn rev_json(
    rows: &dyn ReadRows,
    req: RevRequest<'_>,
) -> Result<Option<DocJson>, StoreError> {
    let RevRequest {
        id,
        row,
        rev,
        opts,
        follows,
    } = req;
    let tree = &row.tree;
    let Some((body, atts)) = load_body(rows, row, rev)? else {
        return Ok(None);
    };
    let deleted = tree.is_deleted_rev(rev).unwrap_or(false);
    let mut extra: Vec<(&'static str, Value)> = Vec::new();
    if opts.revs
        && let Some(path) = tree.history(rev)
    {
        // At most `_revs_limit` generations, as CouchDB answers them, also
        // before compaction has stemmed the tree.
        let limit = revs_limit_of(rows)?;
        let path = path.truncated(usize::try_from(limit).unwrap_or(usize::MAX));
        extra.push((
            "_revisions",
            serde_json::to_value(&path).unwrap_or(Value::Null),
        ));
    }
    if opts.revs_info
        && let Some(info) = tree.revs_info(rev)
    {
        let list: Vec<Value> = info
            .into_iter()
            .map(|(r, status)| serde_json::json!({"rev": r.to_string(), "status": status.as_str()}))
            .collect();
        extra.push(("_revs_info", Value::Array(list)));
    }
    // A tree of one revision has no conflicts: the common case costs no
    // walk of its leaves (a view reads every document this way).
    let branched = tree.len() > 1;
    if opts.conflicts && branched {
        let conflicts = tree.conflicts();
        if !conflicts.is_empty() {
            extra.push(("_conflicts", rev_list(&conflicts)));
        }
    }
    if opts.deleted_conflicts && branched {
        let deleted = tree.deleted_conflicts();
        if !deleted.is_empty() {
            extra.push(("_deleted_conflicts", rev_list(&deleted)));
        }
    }
    if opts.local_seq {
        extra.push(("_local_seq", Value::from(row.seq)));
    }
    if !atts.is_empty() {
        let with_bytes = opts.attachments || !opts.atts_since.is_empty() || follows;
        let since = since_pos(tree, rev, &opts.atts_since);
        let mut map = serde_json::Map::with_capacity(atts.len());
        for (name, meta) in &atts {
            let value = if with_bytes && meta.revpos > since {
                if follows {
                    meta.follows_json()
                } else {
                    meta.inline_json(
                        &attachments::identity_bytes(rows.blob(&meta.digest)?, meta)?,
                        opts.att_encoding_info,
                    )
                }
            } else {
                meta.stub_json(opts.att_encoding_info)
            };
            map.insert(name.clone(), value);
        }
        extra.push(("_attachments", Value::Object(map)));
    }
    DocBuilder {
        id,
        rev,
        deleted,
        body: &body,
        extra,
    }
    .finish()
    .map(Some)
}

/// One revision of a document in a plain JSON answer (no `follows`).
pub(crate) fn doc_at(
    rows: &dyn ReadRows,
    id: &str,
    row: &DocRow,
    rev: &RevId,
    opts: &GetOptions,
) -> Result<Option<DocJson>, StoreError> {
    rev_json(
        rows,
        RevRequest {
            id,
            row,
            rev,
            opts,
            follows: false,
        },
    )
}

/// The winning leaf of a stored document; a document row always has one.
pub(crate) fn winner_of(id: &str, row: &DocRow) -> Result<revtree::Leaf, StoreError> {
    row.tree.winner().ok_or_else(|| StoreError::Corrupt {
        db: String::new(),
        detail: format!("document {id} has an empty revision tree"),
    })
}

fn rev_list(revs: &[RevId]) -> Value {
    Value::Array(revs.iter().map(|r| Value::String(r.to_string())).collect())
}

/// CouchDB's single-document read.
pub(crate) fn get_in(
    rows: &dyn ReadRows,
    id: &str,
    opts: &GetOptions,
) -> Result<DocJson, StoreError> {
    let row = rows
        .doc_row(id)?
        .ok_or(StoreError::DocNotFound("missing"))?;
    let rev = match &opts.rev {
        Some(rev) if opts.latest => row
            .tree
            .latest(rev)
            .into_iter()
            .next()
            .map(|l| l.rev)
            .ok_or(StoreError::DocNotFound("missing"))?,
        Some(rev) => rev.clone(),
        None => {
            let winner = row
                .tree
                .winner()
                .ok_or(StoreError::DocNotFound("missing"))?;
            if winner.deleted {
                return Err(StoreError::DocNotFound("deleted"));
            }
            winner.rev
        }
    };
    if !row.tree.contains(&rev) {
        return Err(StoreError::DocNotFound("missing"));
    }
    rev_json(
        rows,
        RevRequest {
            id,
            row: &row,
            rev: &rev,
            opts,
            follows: false,
        },
    )?
    .ok_or(StoreError::DocNotFound("missing"))
}

/// The revisions `open_revs` answers with, without duplicates: every leaf
/// (`all`), or those asked for. `sorted` gives `GET ?open_revs=`'s order, as
/// CouchDB's: the revisions found by position and hash, then those missing
/// as asked; otherwise (`_bulk_get`) the winner comes first.
fn open_revs_targets(
    tree: &RevTree,
    which: &OpenRevs,
    latest: bool,
    sorted: bool,
) -> Vec<Result<RevId, RevId>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    match which {
        OpenRevs::All => {
            for leaf in tree.leaves() {
                if seen.insert(leaf.rev.clone()) {
                    out.push(Ok(leaf.rev));
                }
            }
        }
        OpenRevs::List(revs) => {
            for rev in revs {
                if latest && tree.contains(rev) {
                    for leaf in tree.latest(rev) {
                        if seen.insert(leaf.rev.clone()) {
                            out.push(Ok(leaf.rev));
                        }
                    }
                } else if tree.contains(rev) {
                    if seen.insert(rev.clone()) {
                        out.push(Ok(rev.clone()));
                    }
                } else if seen.insert(rev.clone()) {
                    out.push(Err(rev.clone()));
                }
            }
        }
    }
    if sorted {
        // Found ones by revision, then the missing ones as asked (stable).
        out.sort_by(|a, b| match (a, b) {
            (Ok(a), Ok(b)) => a.cmp(b),
            _ => a.is_err().cmp(&b.is_err()),
        });
    }
    out
}

pub(crate) fn open_revs_in(
    rows: &dyn ReadRows,
    id: &str,
    which: &OpenRevs,
    opts: &GetOptions,
    follows: bool,
    sorted: bool,
) -> Result<Vec<OpenRev>, StoreError> {
    let Some(row) = rows.doc_row(id)? else {
        return match which {
            OpenRevs::All => Err(StoreError::DocNotFound("missing")),
            OpenRevs::List(revs) => Ok(revs.iter().cloned().map(OpenRev::Missing).collect()),
        };
    };
    let mut out = Vec::new();
    for target in open_revs_targets(&row.tree, which, opts.latest, sorted) {
        match target {
            Ok(rev) => match rev_json(
                rows,
                RevRequest {
                    id,
                    row: &row,
                    rev: &rev,
                    opts,
                    follows,
                },
            )? {
                Some(doc) => out.push(OpenRev::Ok(doc)),
                None => out.push(OpenRev::Missing(rev)),
            },
            Err(rev) => out.push(OpenRev::Missing(rev)),
        }
    }
    Ok(out)
}

/// The database's `_revs_limit`.
pub(crate) fn revs_limit_of(rows: &dyn ReadRows) -> Result<u32, StoreError> {
    Ok(rows
        .meta("revs_limit")?
        .and_then(|v| v.parse().ok())
        .unwrap_or(revtree::DEFAULT_REVS_LIMIT))
}

/// The revocation tombstone of `leaf` as a document, with its two-step
/// history when `revs` asks for it.
pub(crate) fn tombstone_doc(id: &str, leaf: &RevId, revs: bool) -> Result<DocJson, StoreError> {
    let tombstone = revocation_tombstone(id, leaf).ok_or(StoreError::DocNotFound("missing"))?;
    let mut extra = Vec::new();
    if revs {
        let ids = [tombstone.hash(), leaf.hash()]
            .iter()
            .map(|hash| Value::String(hash.to_string()))
            .collect();
        extra.push((
            "_revisions",
            serde_json::json!({"start": tombstone.pos(), "ids": Value::Array(ids)}),
        ));
    }
    DocBuilder {
        id,
        rev: &tombstone,
        deleted: true,
        body: "{}",
        extra,
    }
    .finish()
}

/// [`open_revs_in`] for a user of a database with per-document access:
/// a document they may not read is one that does not exist, and one they
/// lost has only its revocation tombstones.
fn open_revs_for(
    rows: &dyn ReadRows,
    principals: &[String],
    id: &str,
    which: &OpenRevs,
    opts: &GetOptions,
    follows: bool,
    sorted: bool,
) -> Result<Vec<OpenRev>, StoreError> {
    let visibility = visibility_in(rows, id, principals)?.1;
    if visibility == Visibility::Readable {
        return open_revs_in(rows, id, which, opts, follows, sorted);
    }
    let leaves = visibility.leaves();
    let tombstone_of = |rev: &RevId| {
        leaves
            .iter()
            .find(|leaf| revocation_tombstone(id, leaf).as_ref() == Some(rev))
    };
    match which {
        OpenRevs::All if leaves.is_empty() => Err(StoreError::DocNotFound("missing")),
        OpenRevs::All => leaves
            .iter()
            .map(|leaf| tombstone_doc(id, leaf, opts.revs).map(OpenRev::Ok))
            .collect(),
        OpenRevs::List(revs) => revs
            .iter()
            .map(|rev| match tombstone_of(rev) {
                Some(leaf) => tombstone_doc(id, leaf, opts.revs).map(OpenRev::Ok),
                None => Ok(OpenRev::Missing(rev.clone())),
            })
            .collect(),
    }
}

/// `_revs_diff` for a user of a database with per-document access: of a
/// document they may not read, every revision is missing and nothing is
/// offered as an ancestor (as for a document that does not exist), but
/// the revocation tombstones they were given are held.
fn revs_diff_for(
    rows: &dyn ReadRows,
    principals: &[String],
    id: &str,
    revs: &[RevId],
) -> Result<RevsDiff, StoreError> {
    let (row, visibility) = visibility_in(rows, id, principals)?;
    if let (Some(row), Visibility::Readable) = (&row, &visibility) {
        return Ok(row.tree.revs_diff(revs));
    }
    let tombstones = visibility.tombstones(id);
    Ok(RevsDiff {
        missing: revs
            .iter()
            .filter(|rev| !tombstones.contains(rev))
            .cloned()
            .collect(),
        possible_ancestors: Vec::new(),
    })
}

impl Database {
    /// A document: the winner, or `opts.rev`; 404 `missing` or `deleted`
    /// as CouchDB answers. `_local/` ids read local documents.
    pub async fn get(&self, id: &str, opts: GetOptions) -> Result<DocJson, StoreError> {
        if id.starts_with("_local/") {
            // As CouchDB: a local document has no revisions to pick from,
            // and `revs` shows its one revision number.
            if opts.rev.is_some() {
                return Err(StoreError::DocNotFound("missing"));
            }
            let mut doc = self.get_local(id).await?;
            if opts.revs
                && let Some(number) = doc["_rev"]
                    .as_str()
                    .and_then(|rev| rev.strip_prefix("0-"))
                    .map(str::to_string)
                && let Value::Object(map) = &mut doc
            {
                map.insert(
                    "_revisions".into(),
                    serde_json::json!({"start": 0, "ids": [number]}),
                );
            }
            return Ok(DocJson(ejson::to_string(&doc)));
        }
        let id = id.to_string();
        match self.reader.clone() {
            None => self.read(move |conn| get_in(conn, &id, &opts)).await,
            Some(principals) => {
                self.read(move |conn| match visibility_in(conn, &id, &principals)?.1 {
                    Visibility::Readable => get_in(conn, &id, &opts),
                    revoked => {
                        let leaf = opts.rev.as_ref().and_then(|rev| {
                            revoked
                                .leaves()
                                .iter()
                                .find(|leaf| revocation_tombstone(&id, leaf).as_ref() == Some(rev))
                        });
                        match leaf {
                            Some(leaf) => tombstone_doc(&id, leaf, opts.revs),
                            None => Err(StoreError::DocNotFound("missing")),
                        }
                    }
                })
                .await
            }
        }
    }

    /// Several revisions of a document (`open_revs`). With `follows`,
    /// attachments that would carry bytes are marked `follows: true` for a
    /// multipart answer (read them with `attachment_chunks`).
    pub async fn open_revs(
        &self,
        id: &str,
        which: OpenRevs,
        opts: GetOptions,
        follows: bool,
    ) -> Result<Vec<OpenRev>, StoreError> {
        let id = id.to_string();
        let reader = self.reader.clone();
        self.read(move |conn| match &reader {
            None => open_revs_in(conn, &id, &which, &opts, follows, true),
            Some(principals) => open_revs_for(conn, principals, &id, &which, &opts, follows, true),
        })
        .await
    }

    /// `_bulk_get`: each request answered in order, with `revs`, `latest`
    /// and `attachments` applied to all.
    pub async fn bulk_get(
        &self,
        requests: Vec<RevisionsRequest>,
        revs: bool,
        latest: bool,
        attachments: bool,
    ) -> Result<Vec<RevisionsRead>, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| {
            let mut results = Vec::with_capacity(requests.len());
            for req in requests {
                let opts = GetOptions {
                    revs,
                    latest,
                    attachments,
                    atts_since: req.atts_since.clone(),
                    ..GetOptions::default()
                };
                let not_found = |rev: Option<RevId>, reason: &str| BulkGetError {
                    id: req.id.clone(),
                    rev,
                    error: "not_found".to_string(),
                    reason: reason.to_string(),
                };
                // Without a revision, every leaf, deleted ones too, as
                // CouchDB answers.
                let which = match &req.rev {
                    Some(rev) => OpenRevs::List(vec![rev.clone()]),
                    None => OpenRevs::All,
                };
                let asked = req.rev.clone();
                let opened = match &reader {
                    None => open_revs_in(conn, &req.id, &which, &opts, false, false),
                    Some(principals) => {
                        open_revs_for(conn, principals, &req.id, &which, &opts, false, false)
                    }
                };
                let docs = match opened {
                    Err(StoreError::DocNotFound(_)) => vec![Err(not_found(asked, "missing"))],
                    Err(e) => return Err(e),
                    Ok(list) if list.is_empty() => vec![Err(not_found(asked, "missing"))],
                    Ok(list) => list
                        .into_iter()
                        .map(|r| match r {
                            OpenRev::Ok(doc) => Ok(doc),
                            OpenRev::Missing(rev) => Err(not_found(Some(rev), "missing")),
                        })
                        .collect(),
                };
                results.push(RevisionsRead { id: req.id, docs });
            }
            Ok(results)
        })
        .await
    }

    /// `_revs_diff`: for each document, the given revisions this database
    /// lacks and its possible ancestors; documents lacking nothing are left out.
    pub async fn revs_diff(
        &self,
        request: Vec<(String, Vec<RevId>)>,
    ) -> Result<Vec<(String, RevsDiff)>, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| {
            let mut out = Vec::new();
            for (id, revs) in request {
                let diff = match &reader {
                    None => match ReadRows::doc_row(conn, &id)? {
                        Some(row) => row.tree.revs_diff(&revs),
                        None => RevTree::new().revs_diff(&revs),
                    },
                    Some(principals) => revs_diff_for(conn, principals, &id, &revs)?,
                };
                if !diff.missing.is_empty() {
                    out.push((id, diff));
                }
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_documents_are_valid_json_whatever_the_id() {
        let rev = RevId::parse("1-abc").unwrap();
        for id in [
            "plain",
            "quote\"d",
            "back\\slash",
            "new\nline",
            "ünïcødé",
            "tab\t",
        ] {
            for body in ["{}", "{\"a\":1}", " { \"a\" : [1,2] } "] {
                let doc = DocBuilder {
                    id,
                    rev: &rev,
                    deleted: true,
                    body,
                    extra: vec![(
                        "_revisions",
                        serde_json::json!({"start": 1, "ids": ["abc"]}),
                    )],
                }
                .finish()
                .unwrap();
                let value = doc.to_value().unwrap();
                assert_eq!(value["_id"], id);
                assert_eq!(value["_rev"], "1-abc");
                assert_eq!(value["_deleted"], true);
                assert_eq!(value["_revisions"]["start"], 1);
            }
        }
    }
}
