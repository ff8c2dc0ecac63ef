//! Revisions with attachments over HTTP: read as a `multipart/related`
//! answer (or JSON with base64 data, from peers without multipart
//! answers), written as a `multipart/related` `PUT ?new_edits=false`
//! streamed from the source's parts.

use std::collections::VecDeque;

use bytes::Bytes;
use reqwest::Method;
use revtree::RevId;
use serde_json::Value;

use super::HttpPeer;
use super::paths::{encode_doc_id, form_encode};
use super::request::{Streamed, decode_doc, read_bounded};
use crate::peer::attachments::{Outgoing, Parts, Prepared, check_length, meta_of, outgoing_of};
use crate::peer::{EndpointError, WriteFailure};

impl HttpPeer {
    /// Reads a revision with its attachments newer than the target's
    /// `possible_ancestors` (`atts_since`: the peer decides which, so
    /// `_names` is not sent), ready to be streamed.
    pub(crate) async fn read_with_attachments(
        &self,
        doc: Value,
        _names: &[String],
        possible_ancestors: &[RevId],
    ) -> Result<Prepared, EndpointError> {
        let url = self.display();
        let (id, rev) = {
            let meta = meta_of(&doc, &url)?;
            (meta.id.to_string(), meta.rev)
        };
        let mut path = format!(
            "{}?rev={}&revs=true&attachments=true",
            encode_doc_id(&id),
            form_encode(&rev.to_string())
        );
        if !possible_ancestors.is_empty() {
            let since = ejson::to_string_of(possible_ancestors)
                .map_err(|e| self.malformed(e.to_string()))?;
            path.push_str(&format!("&atts_since={}", form_encode(&since)));
        }
        let Streamed { response, permit } = self
            .send_with_retries(Method::GET, &path, "multipart/related, application/json")
            .await?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if let Some(boundary) = wire::multipart::boundary_of(&content_type, "multipart/related") {
            let stream = response.bytes_stream();
            let mut multipart = multer::Multipart::new(stream, boundary);
            let transport = |e: multer::Error| EndpointError::Transport {
                url: url.clone(),
                detail: format!("reading the document part: {e}"),
            };
            let first = multipart
                .next_field()
                .await
                .map_err(transport)?
                .ok_or_else(|| EndpointError::Protocol {
                    url: url.clone(),
                    detail: "multipart answer without a document part".into(),
                })?;
            let mut first = first;
            let mut json = Vec::new();
            while let Some(chunk) = first.chunk().await.map_err(transport)? {
                if json.len() + chunk.len() > self.max_answer {
                    return Err(EndpointError::TooLarge {
                        url: url.clone(),
                        limit: self.max_answer,
                    });
                }
                json.extend_from_slice(&chunk);
            }
            let doc = decode_doc(&url, &json)?;
            let outgoing = outgoing_of(&doc, &url)?;
            Ok(Prepared {
                id,
                doc,
                outgoing,
                parts: Parts::Multipart {
                    multipart: Box::new(multipart),
                    current: None,
                    url,
                    _permit: permit,
                },
            })
        } else {
            // JSON with the bytes inline (peers without multipart answers).
            let bytes = read_bounded(response, self.max_answer, &url).await?;
            drop(permit);
            let mut doc = decode_doc(&url, &bytes)?;
            let mut datas = VecDeque::new();
            if let Some(Value::Object(atts)) = doc.get_mut("_attachments") {
                for (_, att) in atts.iter_mut() {
                    let Value::Object(att) = att else { continue };
                    let Some(Value::String(data)) = att.remove("data") else {
                        continue;
                    };
                    let bytes = base64_decode(&data).map_err(|detail| EndpointError::Protocol {
                        url: url.clone(),
                        detail,
                    })?;
                    // Inline data is always the identity bytes.
                    att.remove("encoding");
                    att.remove("encoded_length");
                    att.insert("length".into(), Value::from(bytes.len() as u64));
                    att.insert("follows".into(), Value::Bool(true));
                    datas.push_back(bytes);
                }
            }
            let outgoing = outgoing_of(&doc, &url)?;
            Ok(Prepared {
                id,
                doc,
                outgoing,
                parts: Parts::Inline {
                    datas,
                    ended: false,
                },
            })
        }
    }

    /// Writes a prepared revision (`new_edits=false`) as one streamed
    /// `multipart/related` `PUT`. A refusal (a 4xx other than 408 and 429)
    /// is a write failure, not an error.
    pub(crate) async fn write_with_attachments(
        &self,
        prepared: Prepared,
    ) -> Result<Option<WriteFailure>, EndpointError> {
        let Prepared {
            id,
            doc,
            outgoing,
            mut parts,
        } = prepared;
        let shown = self.display();
        let boundary = wire::multipart::new_boundary();
        let mut doc = doc;
        let mut outgoing = outgoing;
        if !self.takes_encoded_attachments().await {
            send_as_content(&mut doc, &mut outgoing);
        }
        let json = ejson::to_vec(&doc);
        let heads: Vec<Vec<u8>> = std::iter::once(
            format!("--{boundary}\r\nContent-Type: application/json\r\n\r\n").into_bytes(),
        )
        .chain(outgoing.iter().map(|out| {
            // The encoding, when there is one, is in the JSON part.
            let head = wire::multipart::attachment_part_headers(
                &out.name,
                &out.content_type,
                out.wire_length,
                None,
            );
            format!("\r\n--{boundary}\r\n{head}\r\n\r\n").into_bytes()
        }))
        .collect();
        let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
        let total = heads.iter().map(|h| h.len() as u64).sum::<u64>()
            + json.len() as u64
            + outgoing.iter().map(|o| o.wire_length).sum::<u64>()
            + tail.len() as u64;
        // A small channel: the source is read only as fast as the target takes it.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = reqwest::Body::wrap_stream(futures_util::stream::unfold(rx, |mut rx| async {
            rx.recv().await.map(|item| (item, rx))
        }));
        let produce = async {
            let mut heads = heads.into_iter();
            let send = |b: Bytes| {
                let tx = tx.clone();
                async move { tx.send(Ok(b)).await.is_ok() }
            };
            if let Some(h) = heads.next() {
                send(Bytes::from(h)).await;
            }
            send(Bytes::from(json)).await;
            for out in &outgoing {
                if let Some(h) = heads.next() {
                    send(Bytes::from(h)).await;
                }
                let mut sent = 0u64;
                let mut inflater = out.inflate.then(|| Inflater::new(shown.clone()));
                loop {
                    let (pieces, end) = match parts.next_chunk().await {
                        Ok(Some(chunk)) => match inflater.as_mut() {
                            Some(inflater) => (inflater.feed(&chunk), false),
                            None => (Ok(vec![chunk]), false),
                        },
                        // The decoder's last bytes close the attachment.
                        Ok(None) => match inflater.take() {
                            Some(inflater) => (inflater.finish().map(|rest| vec![rest]), true),
                            None => (Ok(Vec::new()), true),
                        },
                        Err(e) => (Err(e), true),
                    };
                    let pieces = match pieces {
                        Ok(pieces) => pieces,
                        Err(e) => {
                            let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                            return Err(e);
                        }
                    };
                    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
                        sent += piece.len() as u64;
                        if !send(piece).await {
                            return Ok(());
                        }
                    }
                    if end {
                        break;
                    }
                }
                if let Err(e) = check_length(&shown, out, sent) {
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return Err(e);
                }
            }
            send(Bytes::from(tail)).await;
            drop(tx);
            Ok(())
        };
        let path = format!("{}?new_edits=false", encode_doc_id(&id));
        let content_type = format!("multipart/related; boundary=\"{boundary}\"");
        let upload = self.send_streaming(Method::PUT, &path, &content_type, body, total);
        let (produced, answer) = tokio::join!(produce, upload);
        produced?;
        match answer {
            Ok(_) => Ok(None),
            Err(EndpointError::Http {
                error,
                reason,
                status,
                ..
            }) if (400..500).contains(&status) && status != 408 && status != 429 => {
                Ok(Some(WriteFailure { id, error, reason }))
            }
            Err(e) => Err(e),
        }
    }
}

/// Attachments stored gzip-encoded go to a target that does not take
/// encoded ones as their content: the JSON part loses `encoding`,
/// `encoded_length` and the digest of the encoded bytes (the target
/// computes its own), and the bytes are inflated on the way.
fn send_as_content(doc: &mut Value, outgoing: &mut [Outgoing]) {
    let Some(Value::Object(atts)) = doc.get_mut("_attachments") else {
        return;
    };
    for out in outgoing.iter_mut() {
        let Some(Value::Object(att)) = atts.get_mut(&out.name) else {
            continue;
        };
        if att.get("encoding").and_then(Value::as_str) != Some("gzip") {
            continue;
        }
        let Some(length) = att.get("length").and_then(Value::as_u64) else {
            continue;
        };
        att.remove("encoding");
        att.remove("encoded_length");
        att.remove("digest");
        out.wire_length = length;
        out.inflate = true;
    }
}

/// Inflates gzip bytes arriving in pieces, a few KiB of input at a time so
/// that no output piece grows large (deflate inflates ~1000:1 at most).
struct Inflater {
    decoder: flate2::write::GzDecoder<Vec<u8>>,
    url: String,
}

/// Encoded bytes fed to the decoder at a time.
const INFLATE_FEED: usize = 4096;

impl Inflater {
    fn new(url: String) -> Inflater {
        Inflater {
            decoder: flate2::write::GzDecoder::new(Vec::new()),
            url,
        }
    }

    fn error(&self, e: std::io::Error) -> EndpointError {
        EndpointError::Protocol {
            url: self.url.clone(),
            detail: format!("a gzip attachment does not inflate: {e}"),
        }
    }

    /// The content of the next encoded piece, in bounded pieces.
    fn feed(&mut self, encoded: &[u8]) -> Result<Vec<Bytes>, EndpointError> {
        use std::io::Write;
        let mut out = Vec::new();
        for slice in encoded.chunks(INFLATE_FEED) {
            if let Err(e) = self.decoder.write_all(slice) {
                return Err(self.error(e));
            }
            out.push(Bytes::from(std::mem::take(self.decoder.get_mut())));
        }
        Ok(out)
    }

    /// The rest of the content, once the encoded bytes have ended.
    fn finish(self) -> Result<Bytes, EndpointError> {
        let url = self.url.clone();
        self.decoder
            .finish()
            .map(Bytes::from)
            .map_err(|e| EndpointError::Protocol {
                url,
                detail: format!("a gzip attachment does not inflate: {e}"),
            })
    }
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("invalid base64 attachment data: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A peer nobody listens at, as errors name it.
    const PEER: &str = "http://127.0.0.1:1/db/";

    #[test]
    fn encoded_attachments_go_as_their_content_to_peers_that_want_it() {
        let mut doc = json!({"_id": "g", "_rev": "1-a", "_attachments": {
            "z.txt": {"follows": true, "content_type": "text/plain", "length": 17,
                      "encoding": "gzip", "encoded_length": 28, "digest": "md5-gz"},
            "p.bin": {"follows": true, "content_type": "image/png", "length": 5, "digest": "md5-p"}
        }});
        let mut outgoing = outgoing_of(&doc, PEER).unwrap();
        assert_eq!(
            outgoing.iter().map(|o| o.wire_length).collect::<Vec<_>>(),
            [28, 5]
        );
        send_as_content(&mut doc, &mut outgoing);
        assert_eq!(
            doc["_attachments"]["z.txt"],
            json!({"follows": true, "content_type": "text/plain", "length": 17})
        );
        assert_eq!(doc["_attachments"]["p.bin"]["digest"], "md5-p");
        assert_eq!(
            outgoing
                .iter()
                .map(|o| (o.wire_length, o.inflate))
                .collect::<Vec<_>>(),
            [(17, true), (5, false)]
        );
    }

    #[test]
    fn the_inflater_gives_the_content_back_in_bounded_pieces() {
        use std::io::Write;
        let content = vec![b'a'; 3_000_000];
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&content).unwrap();
        let gz = encoder.finish().unwrap();
        let mut inflater = Inflater::new(PEER.into());
        let mut out = Vec::new();
        for chunk in gz.chunks(1000) {
            for piece in inflater.feed(chunk).unwrap() {
                // 4 KiB of input inflates to a few MiB at most.
                assert!(piece.len() <= 5_000_000);
                out.extend_from_slice(&piece);
            }
        }
        out.extend_from_slice(&inflater.finish().unwrap());
        assert_eq!(out, content);
        let mut broken = Inflater::new(PEER.into());
        assert!(broken.feed(b"not gzip at all").is_err() || broken.finish().is_err());
    }
}
