//! Nouveau full-text search over HTTP, as CouchDB 3.5 answers it:
//! `GET|POST /db/_design/D/_nouveau/I` (relevance and field sorts,
//! bookmarks, stored fields, counts, ranges, `include_docs`), the partition
//! route `/db/_partition/P/_design/D/_nouveau/I`, `GET .../_nouveau_info/I`,
//! `POST /db/_nouveau_cleanup`, how the index follows deletions and purges
//! (conflicts included), CouchDB's errors for bad parameters and bad index
//! definitions, and who may search.
//!
//! A port of CouchDB's `test/elixir/test/nouveau_test.exs` with the same
//! documents and design document, except its Mango tests (`_index`/`_find`
//! on nouveau indexes, not covered here) and the `locale: "de"` assertion
//! (Recliner does not parse numbers the German way). The parameter checks
//! follow `src/nouveau/src/nouveau_httpd.erl`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod corpus;
mod health;
mod index_life;
mod queries;
