//! Content shared by the replication tests: a database filled with every
//! kind of document (updates, deletions, conflicts of several branches,
//! design documents, attachments of 0 B, 1 B, 1 MiB and 20 MiB, a local
//! document), later edits of it, and the checks that a copy has it all.

#![allow(clippy::unwrap_used)] // test helpers: a failed unwrap is a failed test

use serde_json::{Value, json};

use crate::{Client, Reply};

/// An attachment written by a test, with the bytes it must have everywhere.
#[derive(Debug)]
pub struct Blob {
    pub doc: &'static str,
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// `len` pseudo-random bytes (xorshift from a random seed): incompressible,
/// and different in every run.
pub fn random_bytes(len: usize) -> Vec<u8> {
    seeded_bytes(uuid::Uuid::new_v4().as_u64_pair().0, len)
}

/// `len` pseudo-random bytes (xorshift), the same for the same `seed`.
pub fn seeded_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

pub async fn rev_of(c: &Client, db: &str, id: &str) -> String {
    let reply = c.get(&format!("/{db}/{id}")).await;
    assert_eq!(reply.status, 200, "GET /{db}/{id}: {}", reply.text);
    reply.json()["_rev"].as_str().unwrap().to_string()
}

/// Checks a write was accepted (201, or 202 for deferred commits).
pub fn created(reply: &Reply, what: &str) -> Value {
    assert!(
        reply.status == 201 || reply.status == 202,
        "{what}: {} {}",
        reply.status,
        reply.text
    );
    reply.json()
}

/// Attaches `bytes` to `doc` (creating it when missing) as a new revision.
pub async fn attach(c: &Client, db: &str, doc: &str, name: &str, bytes: Vec<u8>) {
    let path = match c.get(&format!("/{db}/{doc}")).await {
        r if r.status == 200 => format!(
            "/{db}/{doc}/{name}?rev={}",
            r.json()["_rev"].as_str().unwrap()
        ),
        _ => format!("/{db}/{doc}/{name}"),
    };
    let reply = c
        .send_bytes("PUT", &path, bytes, "application/octet-stream")
        .await;
    created(&reply, &format!("PUT {path}"));
}

/// Fills `db` (created here) with every kind of content; returns the
/// attachments written.
pub async fn fill(c: &Client, db: &str) -> Vec<Blob> {
    created(&c.put(&format!("/{db}"), json!({})).await, "create the db");
    let mut docs: Vec<Value> = (0..30)
        .map(|i| json!({"_id": format!("doc{i:02}"), "n": i, "nested": {"list": [i, "x"]}}))
        .collect();
    docs.push(json!({"_id": "ünïcode id", "v": "ok"}));
    docs.push(json!({"_id": "_design/app", "views": {"all": {"map": "function(d){emit(d._id)}"}}}));
    docs.push(json!({"_id": "_design/gone", "views": {}}));
    let reply = c
        .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    created(&reply, "_bulk_docs");

    // Updates: doc00 twice, the design document once.
    for round in 1..=2 {
        let rev = rev_of(c, db, "doc00").await;
        let reply = c
            .put(
                &format!("/{db}/doc00?rev={rev}"),
                json!({"n": 0, "edited": round}),
            )
            .await;
        created(&reply, "update doc00");
    }
    let rev = rev_of(c, db, "_design/app").await;
    let reply = c
        .put(
            &format!("/{db}/_design/app?rev={rev}"),
            json!({"views": {"all": {"map": "function(d){emit(d._id, 1)}"}, "n": {"map": "function(d){emit(d.n)}"}}}),
        )
        .await;
    created(&reply, "update the design document");

    // Deletions: a document, a design document, and one deleted then
    // created again on top of its tombstone.
    for id in ["doc01", "_design/gone", "doc02"] {
        let rev = rev_of(c, db, id).await;
        let reply = c.delete(&format!("/{db}/{id}?rev={rev}")).await;
        assert_eq!(reply.status, 200, "delete {id}: {}", reply.text);
    }
    created(
        &c.put(&format!("/{db}/doc02"), json!({"reborn": true}))
            .await,
        "recreate doc02",
    );

    // Conflicts written as a replicator would: three branches from one
    // root (one of them deleted), and a document whose every leaf is deleted.
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"new_edits": false, "docs": [
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"},
                {"_id": "conflicted", "_revisions": {"start": 3, "ids": ["c3", "c", "a"]}, "side": "c"},
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["d", "a"]}, "_deleted": true},
                {"_id": "all-gone", "_revisions": {"start": 2, "ids": ["x2", "x1"]}, "_deleted": true},
                {"_id": "all-gone", "_revisions": {"start": 3, "ids": ["y3", "y2", "x1"]}, "_deleted": true},
            ]}),
        )
        .await;
    created(&reply, "_bulk_docs new_edits=false");
    let leaves = c.get(&format!("/{db}/conflicted?open_revs=all")).await;
    assert_eq!(
        leaves.json().as_array().unwrap().len(),
        3,
        "the source has three leaves: {}",
        leaves.text
    );

    // Attachments: 0 B, 1 B and 1 MiB added one revision at a time to one
    // document, then a body edit that keeps them; 20 MiB on its own.
    let blobs = vec![
        Blob {
            doc: "files",
            name: "empty.bin",
            bytes: Vec::new(),
        },
        Blob {
            doc: "files",
            name: "one.bin",
            bytes: random_bytes(1),
        },
        Blob {
            doc: "files",
            name: "mib.bin",
            bytes: random_bytes(1 << 20),
        },
        Blob {
            doc: "big",
            name: "big.bin",
            bytes: random_bytes(20 << 20),
        },
    ];
    for blob in &blobs {
        attach(c, db, blob.doc, blob.name, blob.bytes.clone()).await;
    }
    for id in ["files", "big"] {
        let mut doc = c.get(&format!("/{db}/{id}")).await.json();
        doc["title"] = json!(format!("{id} edited after its attachments"));
        let reply = c.put(&format!("/{db}/{id}"), doc).await;
        created(&reply, &format!("edit {id} keeping its attachment stubs"));
    }

    // A local document, which must not replicate.
    created(
        &c.put(&format!("/{db}/_local/x"), json!({"secret": 1}))
            .await,
        "_local/x",
    );
    blobs
}

/// More changes made on the other side before replicating back: a new
/// document, a conflict on an edited document, a deletion, the losing
/// branch of `conflicted` deleted, a new 1 MiB attachment next to the old
/// ones, a body edit of the document with the 20 MiB attachment, and a
/// local document `_local/y` (which must not travel).
pub async fn edit_more(c: &Client, db: &str, blobs: &mut Vec<Blob>) {
    created(
        &c.put(&format!("/{db}/_local/y"), json!({"here": "only"}))
            .await,
        "_local/y",
    );
    created(
        &c.put(&format!("/{db}/from-the-other-side"), json!({"v": 1}))
            .await,
        "new document",
    );
    let doc00 = c.get(&format!("/{db}/doc00?revs=true")).await.json();
    let mut ids = doc00["_revisions"]["ids"].as_array().unwrap().clone();
    ids[0] = json!("0123456789abcdef0123456789abcdef");
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"new_edits": false, "docs": [
                {"_id": "doc00", "_revisions": {"start": doc00["_revisions"]["start"], "ids": ids}, "branch": "sibling"},
            ]}),
        )
        .await;
    created(&reply, "a sibling branch of doc00");
    let rev = rev_of(c, db, "doc03").await;
    assert_eq!(
        c.delete(&format!("/{db}/doc03?rev={rev}")).await.status,
        200
    );
    let reply = c.delete(&format!("/{db}/conflicted?rev=2-b")).await;
    assert_eq!(reply.status, 200, "delete a losing branch: {}", reply.text);
    let bytes = random_bytes(1 << 20);
    attach(c, db, "files", "second.bin", bytes.clone()).await;
    blobs.push(Blob {
        doc: "files",
        name: "second.bin",
        bytes,
    });
    let mut big = c.get(&format!("/{db}/big")).await.json();
    big["title"] = json!("edited on the other side");
    created(&c.put(&format!("/{db}/big"), big).await, "edit big");
}

/// The raw bytes of `path`.
pub async fn get_bytes(c: &Client, path: &str) -> (u16, Vec<u8>) {
    let response = c.http().get(c.url(path)).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// The copy lacks the source's `_local` document `local`, and has every
/// attachment with the source's digest and the bytes first written.
pub async fn check_copy(
    src: &Client,
    src_db: &str,
    dst: &Client,
    dst_db: &str,
    local: &str,
    blobs: &[Blob],
) {
    assert_eq!(
        src.get(&format!("/{src_db}/{local}")).await.status,
        200,
        "the source has {local}"
    );
    let copied = dst.get(&format!("/{dst_db}/{local}")).await;
    assert_eq!(
        copied.status, 404,
        "{local} must stay home: {}",
        copied.text
    );
    for blob in blobs {
        let stub = |c: &Client, db: &str| {
            let path = format!("/{db}/{}", blob.doc);
            let c = c.clone();
            async move { c.get(&path).await.json()["_attachments"][blob.name].clone() }
        };
        let (want, got) = (stub(src, src_db).await, stub(dst, dst_db).await);
        assert!(
            want["digest"].as_str().unwrap().starts_with("md5-"),
            "{want}"
        );
        assert_eq!(got["digest"], want["digest"], "digest of {}", blob.name);
        assert_eq!(got["length"], json!(blob.bytes.len()), "{}", blob.name);
        let (status, bytes) =
            get_bytes(dst, &format!("/{dst_db}/{}/{}", blob.doc, blob.name)).await;
        assert_eq!(status, 200, "{}/{}", blob.doc, blob.name);
        assert!(
            bytes == blob.bytes,
            "{}/{}: {} bytes arrived, {} expected (or different bytes)",
            blob.doc,
            blob.name,
            bytes.len(),
            blob.bytes.len()
        );
    }
    if blobs.iter().any(|b| b.name == "empty.bin") {
        let stub = dst.get(&format!("/{dst_db}/files")).await.json();
        assert_eq!(
            stub["_attachments"]["empty.bin"]["digest"], "md5-1B2M2Y8AsgTpgAmY7PhCfg==",
            "the md5 of no bytes"
        );
    }
}

/// Runs a one-shot replication on `runner`; returns its answer.
pub async fn replicate(runner: &Client, spec: Value) -> Value {
    let reply = runner.post("/_replicate", spec.clone()).await;
    assert_eq!(reply.status, 200, "{spec}: {}", reply.text);
    let log = reply.json();
    assert_eq!(log["ok"], true, "{log}");
    log
}

/// A second run of the same replication finds nothing to do.
pub async fn assert_nothing_new(runner: &Client, spec: Value) {
    let again = replicate(runner, spec).await;
    let written = again["history"][0]["docs_written"].as_u64();
    let first_written = again["history"]
        .as_array()
        .and_then(|h| h.get(1))
        .map(|h| h["docs_written"].as_u64());
    assert!(
        again["no_changes"] == true || first_written == Some(written),
        "a second run finds nothing new: {again}"
    );
}
