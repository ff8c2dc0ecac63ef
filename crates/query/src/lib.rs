//! Queries over JSON documents, pure code shared by the HTTP API, the
//! replicator, views and Mango: CouchDB's collation and Mango selectors.

pub mod collation;
pub mod mango;
pub mod raw_collation;
pub mod selector;
