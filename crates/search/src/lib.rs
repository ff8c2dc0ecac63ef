//! Full-text search inside the server, for CouchDB's search APIs (Nouveau's
//! `_nouveau` and Clouseau's `_search`) without a JVM beside it, on
//! tantivy: the analyzers both APIs name, Lucene's query syntax, indexes
//! built from a database's changes by design documents' index functions,
//! and searches with sorting, paging, counts and ranges in one pass.

pub mod analyzers;
pub mod clouseau;
mod collect;
pub mod definition;
pub mod index;
pub mod nouveau;
mod query;
pub mod query_syntax;
mod reader_stats;
pub mod request;
pub mod schema;
mod term_filter;
pub mod update;
mod wildcard;

pub use analyzers::{UnknownAnalyzer, analyze, analyzer};
pub use collect::{Cancel, RangeSpec, SortValue};
pub use definition::IndexDefinition;
pub use index::SearchIndex;
pub use request::{SearchRequest, SearchResults};
pub use update::{IndexingTask, Ready, SearchHealth, Searches};

/// Why a search or an index update gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// CouchDB's 404 `not_found` with this reason.
    #[error("{0}")]
    NotFound(String),
    /// 400 `query_parse_error`: a parameter CouchDB checks.
    #[error("{0}")]
    QueryParse(String),
    /// 400 `bad_request`: a query, sort or field the index cannot take.
    #[error("{0}")]
    BadRequest(String),
    /// A design document's index definition is malformed.
    #[error("{0}")]
    InvalidDesignDoc(String),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Script(#[from] design_functions::JsError),
    /// The engine failed (I/O, a corrupt index): a 500.
    #[error("search engine: {0}")]
    Engine(String),
}
