//! The floor every handler stands on: errors, JSON responses and ETags,
//! request bodies and URL parameters, document input and its limits,
//! listing helpers, who may do what (authentication and the access gates'
//! HTTP face), and the request middleware. Nothing here imports a handler,
//! so a handler may use any of it and the crate has no import circle.

pub(crate) mod access;
pub mod auth;
pub(crate) mod body;
pub(crate) mod cancel;
pub(crate) mod content_policy;
pub(crate) mod db_info;
pub(crate) mod doc_input;
pub(crate) mod door;
pub mod error;
pub(crate) mod gzip_body;
pub(crate) mod http_rules;
pub(crate) mod json_body;
pub(crate) mod listing;
pub(crate) mod params;
pub mod response;
pub(crate) mod stats;
pub(crate) mod streamed;
pub(crate) mod target;
