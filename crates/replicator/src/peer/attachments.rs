//! A revision whose attachment bytes travel, between the peer that reads
//! it and the peer that writes it: its document with `follows` on the
//! attachments sent, their lengths, and where their bytes come from (the
//! store's chunks, a `multipart/related` answer, or base64 data already
//! in memory), read part by part so no attachment sits whole in memory.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::Value;
use store::AttachmentReader;
use tokio::sync::OwnedSemaphorePermit;
use wire::doc::DocMeta;

use super::EndpointError;

/// A fetched document's metadata, or the protocol error of a source that
/// sent a document without it (`shown` names the source).
pub(crate) fn meta_of<'a>(doc: &'a Value, shown: &str) -> Result<DocMeta<'a>, EndpointError> {
    DocMeta::of(doc).map_err(|e| EndpointError::Protocol {
        url: shown.to_string(),
        detail: format!("fetched document: {e}"),
    })
}

/// One attachment about to travel: its name and the bytes on the wire
/// (stored bytes: encoded when `encoding` is set).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub name: String,
    pub content_type: String,
    pub wire_length: u64,
    /// The bytes come gzip-encoded but go out as their content: the target
    /// does not take encoded attachments (PouchDB Server).
    pub inflate: bool,
}

/// Where the bytes of a document's attachments come from, in order.
pub(crate) enum Parts {
    /// A local source's stored attachments.
    Store {
        readers: VecDeque<AttachmentReader>,
        current: Option<AttachmentReader>,
    },
    /// A `multipart/related` answer, read as it arrives.
    Multipart {
        multipart: Box<multer::Multipart<'static>>,
        current: Option<Box<multer::Field<'static>>>,
        url: String,
        /// The source connection the answer is read from, busy until done.
        _permit: Option<OwnedSemaphorePermit>,
    },
    /// A peer that answered JSON with base64 data (PouchDB Server): already
    /// in memory. `ended` marks the end of the attachment just handed out.
    Inline {
        datas: VecDeque<Vec<u8>>,
        ended: bool,
    },
}

impl Parts {
    /// The next piece of the current attachment; `None` at its end (the
    /// next call starts the following attachment).
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, EndpointError> {
        match self {
            Parts::Store { readers, current } => {
                if current.is_none() {
                    *current = readers.pop_front();
                }
                let Some(reader) = current.as_mut() else {
                    return Ok(None);
                };
                match reader.next_chunk().await? {
                    Some(chunk) => Ok(Some(Bytes::from(chunk))),
                    None => {
                        *current = None;
                        Ok(None)
                    }
                }
            }
            Parts::Multipart {
                multipart,
                current,
                url,
                ..
            } => {
                let transport = |e: multer::Error| EndpointError::Transport {
                    url: url.clone(),
                    detail: format!("reading attachments: {e}"),
                };
                if current.is_none() {
                    *current = multipart
                        .next_field()
                        .await
                        .map_err(transport)?
                        .map(Box::new);
                    if current.is_none() {
                        return Err(EndpointError::Transport {
                            url: url.clone(),
                            detail: "the answer ended before every attachment arrived".into(),
                        });
                    }
                }
                let Some(field) = current.as_mut() else {
                    return Ok(None);
                };
                match field.chunk().await.map_err(transport)? {
                    Some(chunk) => Ok(Some(chunk)),
                    None => {
                        *current = None;
                        Ok(None)
                    }
                }
            }
            Parts::Inline { datas, ended } => {
                if *ended {
                    *ended = false;
                    return Ok(None);
                }
                *ended = true;
                Ok(Some(Bytes::from(datas.pop_front().unwrap_or_default())))
            }
        }
    }
}

/// A revision with its attachments' metadata, ready to be sent.
pub(crate) struct Prepared {
    pub(crate) id: String,
    /// The document with `follows: true` on the attachments that travel.
    pub(crate) doc: Value,
    pub(crate) outgoing: Vec<Outgoing>,
    pub(crate) parts: Parts,
}

/// The attachments marked `follows`, in the document's order (the order
/// their parts come in), with the length each announces.
pub(crate) fn outgoing_of(doc: &Value, shown: &str) -> Result<Vec<Outgoing>, EndpointError> {
    meta_of(doc, shown)?
        .attachments
        .0
        .iter()
        .filter(|(_, att)| att.follows)
        .map(|(name, att)| {
            Ok(Outgoing {
                name: name.to_string(),
                content_type: att
                    .content_type
                    .unwrap_or("application/octet-stream")
                    .to_string(),
                wire_length: att.wire_length().ok_or_else(|| EndpointError::Protocol {
                    url: shown.to_string(),
                    detail: format!("attachment {name} follows without a length"),
                })?,
                inflate: false,
            })
        })
        .collect()
}

/// Fails when an attachment's bytes were not as many as announced
/// (`shown` names the target).
pub(crate) fn check_length(shown: &str, out: &Outgoing, got: u64) -> Result<(), EndpointError> {
    if got == out.wire_length {
        return Ok(());
    }
    Err(EndpointError::Transport {
        url: shown.to_string(),
        detail: format!(
            "attachment {} announced {} bytes but {got} arrived",
            out.name, out.wire_length
        ),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn attachments_that_follow_announce_their_length_or_the_document_is_refused() {
        let peer = "http://127.0.0.1:1/db/";
        let doc = json!({"_id": "d", "_rev": "1-a", "_attachments": {
            "b": {"follows": true, "length": 9, "encoding": "gzip", "encoded_length": 4},
            "a": {"follows": true, "length": 3, "content_type": "text/plain"},
            "s": {"stub": true, "length": 3},
        }});
        let out = outgoing_of(&doc, peer).unwrap();
        let shown: Vec<(&str, &str, u64)> = out
            .iter()
            .map(|o| (o.name.as_str(), o.content_type.as_str(), o.wire_length))
            .collect();
        assert_eq!(
            shown,
            [("b", "application/octet-stream", 4), ("a", "text/plain", 3)]
        );
        let doc = json!({"_id": "d", "_rev": "1-a", "_attachments": {"a": {"follows": true}}});
        let err = outgoing_of(&doc, peer).unwrap_err().to_string();
        assert!(
            err.contains("attachment a follows without a length"),
            "{err}"
        );
        let err = outgoing_of(&json!({"_id": "d"}), peer)
            .unwrap_err()
            .to_string();
        assert!(err.contains("_rev"), "{err}");
    }
}
