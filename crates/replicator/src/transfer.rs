//! Revisions whose attachment bytes must travel. They do not go through
//! `_bulk_docs` as base64: each is copied on its own, its attachments
//! streamed part by part from the source into the target (each peer reads
//! and writes them its own way: see `peer`), so an attachment of any size
//! never sits whole in memory.

use revtree::RevId;
use serde_json::Value;
use wire::doc::DocMeta;

use crate::peer::retry::with_retries;
use crate::peer::{Endpoint, EndpointError, WriteFailure};

/// Which attachments of a fetched revision the target lacks: those attached
/// after the newest of the target's possible ancestors that lies in the
/// revision's history (CouchDB's `atts_since` rule). With no such ancestor,
/// all of them.
pub fn attachments_to_send(meta: &DocMeta<'_>, possible_ancestors: &[RevId]) -> Vec<String> {
    if meta.attachments.0.is_empty() {
        return Vec::new();
    }
    let since = common_ancestor_pos(meta, possible_ancestors);
    meta.attachments
        .0
        .iter()
        .filter(|(_, att)| att.revpos.is_none_or(|pos| pos > since))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The position of the newest possible ancestor found in the revision's
/// `_revisions` history; 0 when none is.
fn common_ancestor_pos(meta: &DocMeta<'_>, possible_ancestors: &[RevId]) -> u64 {
    let Some(revisions) = &meta.revisions else {
        return 0;
    };
    possible_ancestors
        .iter()
        .filter(|rev| revisions.contains(rev))
        .map(RevId::pos)
        .max()
        .unwrap_or(0)
}

/// Copies one revision whose attachments `names` the target lacks, retrying
/// the whole copy after transient failures. A refusal by the target is
/// returned as a write failure, not an error.
pub async fn copy(
    source: &Endpoint,
    target: &Endpoint,
    doc: Value,
    names: &[String],
    possible_ancestors: &[RevId],
    retries: u64,
) -> Result<Option<WriteFailure>, EndpointError> {
    with_retries(retries, "a document with attachments", || async {
        let prepared = source
            .read_with_attachments(doc.clone(), names, possible_ancestors)
            .await?;
        target.write_with_attachments(prepared).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc() -> Value {
        json!({
            "_id": "d", "_rev": "4-d",
            "_revisions": {"start": 4, "ids": ["d", "c", "b", "a"]},
            "_attachments": {
                "old": {"stub": true, "revpos": 1, "length": 3, "digest": "md5-x"},
                "mid": {"stub": true, "revpos": 3, "length": 3, "digest": "md5-y"},
                "new": {"stub": true, "revpos": 4, "length": 3, "digest": "md5-z"},
            }
        })
    }

    #[test]
    fn attachments_newer_than_the_common_ancestor_travel() {
        let doc = doc();
        let meta = DocMeta::of(&doc).unwrap();
        let names = |ancestors: &[&str]| {
            let a: Vec<RevId> = ancestors.iter().map(|s| RevId::parse(s).unwrap()).collect();
            let mut n = attachments_to_send(&meta, &a);
            n.sort();
            n
        };
        assert_eq!(names(&[]), ["mid", "new", "old"]);
        assert_eq!(names(&["2-b"]), ["mid", "new"]);
        assert_eq!(names(&["3-c", "1-a"]), ["new"]);
        // Not in this revision's history: no help.
        assert_eq!(names(&["3-zz"]), ["mid", "new", "old"]);
        let bare = json!({"_id": "x", "_rev": "1-a"});
        assert!(attachments_to_send(&DocMeta::of(&bare).unwrap(), &[]).is_empty());
    }
}
