//! Full-text search inside the server, for CouchDB's search APIs (Nouveau's
//! `_nouveau` and Clouseau's `_search`) without a JVM beside it, on
//! tantivy. So far: the analyzers both APIs name.

pub mod analyzers;

pub use analyzers::{UnknownAnalyzer, analyze, analyzer};
