//! CouchDB's wire shapes, defined once and shared by the server (which
//! renders them) and the replicator (which decodes them), as an API-types
//! crate is shared by a server and its clients.
//!
//! - [`json`]: the one way to write a JSON string by hand. Every streamed
//!   fast path that splices JSON text goes through it, so no id, revision,
//!   attachment name or content type can ever break the JSON around it.
//! - [`rows`]: the rows and answers of `_changes`, `_all_docs`, `_revs_diff`,
//!   `_bulk_docs`, `_bulk_get`/`open_revs`, database info and errors, as serde
//!   types (revisions travel as `RevId`, never as strings), plus writers for
//!   the streamed rows.
//! - [`doc`]: a document's `_id`/`_rev`/`_revisions`/`_attachments`, read
//!   typed from the otherwise opaque document.
//! - [`multipart`]: attachment part headers, which must never carry a line
//!   break a client could use to inject a header.
//! - [`scan`]: a streaming JSON reader for bodies too large to hold whole,
//!   which takes large inline attachment data out of a document as it
//!   passes.
//! - [`time`]: the date formats CouchDB writes.

pub mod doc;
pub mod json;
pub mod multipart;
pub mod rows;
pub mod scan;
pub mod time;
