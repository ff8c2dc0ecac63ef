//! Attachments: inline bytes, stubs, missing stubs, content addressing,
//! chunked uploads and reads, `atts_since`.

use crate::Backend;

use crate::common::{TempStore, doc, get, get_with, put, replicate, rev};
use base64::Engine;
use serde_json::json;
use store::{AttachmentInput, GetOptions, StoreError};

pub async fn inline_attachments_are_stored_and_kept_by_stubs(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("atts").await;
    let r1 = put(&db, json!({"_id": "a", "_attachments": {"hello.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}})).await;
    let stub = &get(&db, "a").await["_attachments"]["hello.txt"];
    assert_eq!(stub["stub"], true);
    assert_eq!(stub["length"], 5);
    assert_eq!(stub["revpos"], 1);
    // Text is stored gzip-compressed, with the digest CouchDB 3.5 gives
    // the same attachment (and so the same revision).
    assert_eq!(stub["digest"], "md5-iMaiC8wqiFlD2NjLTemvCQ==");
    assert_eq!(r1, "1-cc8f24d15370e2b5bdde8079698301d2");
    let with_encoding = get_with(
        &db,
        "a",
        GetOptions {
            att_encoding_info: true,
            ..Default::default()
        },
    )
    .await;
    let stub = &with_encoding["_attachments"]["hello.txt"];
    assert_eq!(stub["encoding"], "gzip");
    assert_eq!(stub["encoded_length"], 25);

    let r2 = put(
        &db,
        json!({"_id": "a", "_rev": r1, "v": 2, "_attachments": {"hello.txt": {"stub": true}}}),
    )
    .await;
    let full = get_with(
        &db,
        "a",
        GetOptions {
            attachments: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(full["_rev"], r2.as_str());
    assert_eq!(full["_attachments"]["hello.txt"]["data"], "aGVsbG8=");
    assert_eq!(
        full["_attachments"]["hello.txt"]["revpos"], 1,
        "a kept attachment keeps its revpos"
    );

    // Without `_attachments` the new revision has none.
    put(&db, json!({"_id": "a", "_rev": r2})).await;
    assert!(get(&db, "a").await.get("_attachments").is_none());
}

pub async fn a_stub_with_nothing_to_keep_fails_the_whole_request(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("stubs").await;
    let result = db
        .bulk_docs(
            vec![
                doc(json!({"_id": "fine"})),
                doc(json!({"_id": "bad", "_attachments": {"x": {"stub": true}}})),
            ],
            true,
        )
        .await;
    match result {
        Err(StoreError::MissingStub(reason)) => {
            assert_eq!(reason, "Invalid attachment stub in bad for x")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        db.info().await.unwrap().doc_count,
        0,
        "nothing of the batch is written"
    );
    assert_eq!(db.update_seq(), 0);
}

pub async fn identical_bytes_are_stored_once(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("dedupe").await;
    let data = json!({"content_type": "application/octet-stream", "data": "AAECAw=="});
    put(&db, json!({"_id": "a", "_attachments": {"f": data}})).await;
    put(&db, json!({"_id": "b", "_attachments": {"g": data}})).await;
    let a = get(&db, "a").await;
    let b = get(&db, "b").await;
    assert_eq!(
        a["_attachments"]["f"]["digest"],
        b["_attachments"]["g"]["digest"]
    );
    let (_, mut reader) = db.attachment("b", "g", None).await.unwrap();
    assert_eq!(
        reader.next_chunk().await.unwrap().unwrap(),
        vec![0, 1, 2, 3]
    );
    assert!(reader.next_chunk().await.unwrap().is_none());
}

pub async fn a_large_upload_is_chunked_and_read_back_chunk_by_chunk(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("big").await;
    let size = store::CHUNK_SIZE * 2 + 1234;
    let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let mut upload = db.begin_attachment("a");
    for piece in bytes.chunks(10_000) {
        upload.write(piece).await.unwrap();
    }
    let staged = upload.finish().await.unwrap();
    assert_eq!(staged.length, size as u64);
    assert_eq!(staged.digest, store::digest_of(&bytes));

    let mut input = doc(json!({"_id": "big"}));
    input.attachments.push((
        "blob.bin".into(),
        AttachmentInput::Staged {
            content_type: "application/octet-stream".into(),
            digest: staged.digest.clone(),
            length: staged.length,
            revpos: None,
            encoding: None,
            encoded_length: None,
            length_counted: false,
            pin: staged.pin.clone(),
        },
    ));
    db.bulk_docs(vec![input], true).await.unwrap()[0]
        .result
        .clone()
        .unwrap();
    let (meta, mut reader) = db.attachment("big", "blob.bin", None).await.unwrap();
    assert_eq!(meta.length, size as u64);
    let mut back = Vec::new();
    let mut chunks = 0;
    while let Some(chunk) = reader.next_chunk().await.unwrap() {
        assert!(chunk.len() <= store::CHUNK_SIZE);
        back.extend(chunk);
        chunks += 1;
    }
    assert_eq!(chunks, 3);
    assert_eq!(back, bytes);
    assert!(matches!(
        db.attachment("big", "nope", None).await,
        Err(StoreError::DocNotFound(_))
    ));
}

pub async fn replicated_stubs_resolve_by_digest_and_atts_since_skips_known_bytes(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = t.db("replatts").await;
    let digest = store::digest_of(b"hello");
    replicate(
        &db,
        vec![json!({"_id": "d", "_revisions": {"start": 1, "ids": ["a"]},
            "_attachments": {"t": {"content_type": "text/plain", "data": "aGVsbG8=", "revpos": 1}}})],
    )
    .await;
    let results = replicate(
        &db,
        vec![json!({"_id": "d", "_revisions": {"start": 2, "ids": ["b", "a"]},
            "_attachments": {"t": {"stub": true, "digest": digest, "revpos": 1},
                             "u": {"content_type": "text/plain", "data": "d29ybGQ=", "revpos": 2}}})],
    )
    .await;
    assert!(results[0].result.is_ok());
    let since = get_with(
        &db,
        "d",
        GetOptions {
            atts_since: vec![rev("1-a")],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        since["_attachments"]["t"]["stub"], true,
        "revpos 1 is known to the reader"
    );
    assert_eq!(since["_attachments"]["u"]["data"], "d29ybGQ=");

    let bad = db
        .bulk_docs(
            vec![doc(
                json!({"_id": "e", "_revisions": {"start": 1, "ids": ["x"]},
                "_attachments": {"t": {"stub": true, "digest": "md5-unknown", "revpos": 1}}}),
            )],
            false,
        )
        .await;
    assert!(matches!(bad, Err(StoreError::MissingStub(_))));
}

pub async fn gzip_encoded_attachments_are_kept_encoded_and_inflated_for_inline_json(
    backend: &dyn Backend,
) {
    use std::io::Write;
    let t = TempStore::new(backend);
    let db = t.db("gzip").await;
    let text = b"hello hello hello hello, compressible text".to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&text).unwrap();
    let gz = gz.finish().unwrap();
    let mut upload = db.begin_attachment("a");
    upload.write(&gz).await.unwrap();
    let staged = upload.finish().await.unwrap();
    let mut input = doc(json!({"_id": "z", "_revisions": {"start": 1, "ids": ["a"]}}));
    input.attachments.push((
        "t.txt".into(),
        AttachmentInput::Staged {
            content_type: "text/plain".into(),
            digest: staged.digest.clone(),
            length: text.len() as u64,
            revpos: Some(1),
            encoding: Some("gzip".into()),
            encoded_length: Some(gz.len() as u64),
            length_counted: false,
            pin: staged.pin.clone(),
        },
    ));
    db.bulk_docs(vec![input], false).await.unwrap();
    // As CouchDB: the encoding shows on stubs only when asked.
    let stub = &get(&db, "z").await["_attachments"]["t.txt"];
    assert_eq!(
        (stub.get("encoding"), stub["length"].as_u64()),
        (None, Some(text.len() as u64))
    );
    let asked = get_with(
        &db,
        "z",
        GetOptions {
            att_encoding_info: true,
            ..Default::default()
        },
    )
    .await;
    let asked = &asked["_attachments"]["t.txt"];
    assert_eq!(
        (asked["encoding"].as_str(), asked["encoded_length"].as_u64()),
        (Some("gzip"), Some(gz.len() as u64))
    );
    assert_eq!(
        stub["digest"],
        store::digest_of(&gz).as_str(),
        "CouchDB's digest of the stored (encoded) bytes"
    );
    let inline = get_with(
        &db,
        "z",
        GetOptions {
            attachments: true,
            ..Default::default()
        },
    )
    .await;
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(inline["_attachments"]["t.txt"]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(data, text);
}

/// Uploads `bytes` and returns the staged blob.
async fn stage(db: &store::Database, bytes: &[u8]) -> store::StagedBlob {
    let mut upload = db.begin_attachment("a");
    upload.write(bytes).await.unwrap();
    upload.finish().await.unwrap()
}

fn staged_input(staged: &store::StagedBlob, length: u64, gzip: bool) -> AttachmentInput {
    AttachmentInput::Staged {
        content_type: "text/plain".into(),
        digest: staged.digest.clone(),
        length,
        revpos: Some(1),
        encoding: gzip.then(|| "gzip".into()),
        encoded_length: gzip.then_some(staged.length),
        length_counted: false,
        pin: staged.pin.clone(),
    }
}

pub async fn compaction_never_takes_bytes_uploaded_for_a_write_still_to_come(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = t.db("pinned").await;
    let staged = stage(&db, b"uploaded, not yet referenced").await;
    // Compaction between the upload and the document write used to drop
    // the finished but unreferenced blob, and the write then failed.
    db.compact().await.unwrap();
    let mut input = doc(json!({"_id": "d"}));
    input
        .attachments
        .push(("a.txt".into(), staged_input(&staged, staged.length, false)));
    drop(staged);
    db.put_doc(input, true).await.unwrap();
    db.compact().await.unwrap();
    let got = get_with(
        &db,
        "d",
        GetOptions {
            attachments: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        got["_attachments"]["a.txt"]["digest"],
        store::digest_of(b"uploaded, not yet referenced")
    );

    // Once its holders are gone, an unused upload is dropped as before.
    let orphan = stage(&db, b"never used").await;
    let digest = orphan.digest.clone();
    drop(orphan);
    db.compact().await.unwrap();
    let mut input = doc(json!({"_id": "e"}));
    let gone = store::StagedBlob {
        digest,
        length: 10,
        gzipped: None,
        pin: Default::default(),
    };
    input
        .attachments
        .push(("b.txt".into(), staged_input(&gone, 10, false)));
    assert!(db.put_doc(input, true).await.is_err());
}

pub async fn a_declared_length_is_checked_against_the_bytes_never_trusted(backend: &dyn Backend) {
    use std::io::Write;
    let t = TempStore::new(backend);
    let db = t.db("lies").await;
    let text = b"some text that compresses, some text that compresses".to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&text).unwrap();
    let gz = gz.finish().unwrap();
    let staged = stage(&db, &gz).await;
    for (length, expected) in [
        (1_000_000_000_000_000_000u64, "attachment_too_large"),
        (text.len() as u64 + 1, "bad_request"),
        (3, "bad_request"),
    ] {
        let mut input = doc(json!({"_id": "g"}));
        input
            .attachments
            .push(("t.txt".into(), staged_input(&staged, length, true)));
        let err = db.put_doc(input, true).await.unwrap_err();
        let kind = match err {
            StoreError::AttachmentTooLarge(_) => "attachment_too_large",
            StoreError::Invalid { error, .. } => error.as_str(),
            other => panic!("{other:?}"),
        };
        assert_eq!(kind, expected, "declared {length}");
    }
    // No bytes at all are no gzip stream, whatever length is declared
    // (they used to pass as an attachment of length 0).
    let empty = stage(&db, b"").await;
    let mut input = doc(json!({"_id": "g"}));
    input
        .attachments
        .push(("t.txt".into(), staged_input(&empty, 0, true)));
    match db.put_doc(input, true).await {
        Err(StoreError::Invalid { error, .. }) => assert_eq!(error.as_str(), "bad_request"),
        other => panic!("empty gzip accepted: {other:?}"),
    }
    let mut input = doc(json!({"_id": "g"}));
    input.attachments.push((
        "t.txt".into(),
        staged_input(&staged, text.len() as u64, true),
    ));
    db.put_doc(input, true).await.unwrap();
    let got = get_with(
        &db,
        "g",
        GetOptions {
            attachments: true,
            ..Default::default()
        },
    )
    .await;
    let inline = &got["_attachments"]["t.txt"];
    assert_eq!(
        inline["data"],
        base64::engine::general_purpose::STANDARD.encode(&text)
    );
    assert!(
        inline.get("length").is_none(),
        "inline data carries no length: {inline}"
    );
}
