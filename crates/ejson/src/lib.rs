//! JSON as CouchDB reads and writes it, decided once for the whole server.
//!
//! Every document, every peer's answer and every value a design function
//! hands back is read by [`from_slice`]/[`from_str`], and every JSON text
//! the server sends or stores is written by [`to_vec`]/[`to_vec_of`] (or
//! pieces of it by [`push_string`]), so that a value comes back exactly as
//! CouchDB 3.5 would return it and hashes to CouchDB's revision id:
//!
//! - numbers: [`number`] (integers of any size kept exactly, doubles as
//!   jiffy reads and double-conversion writes them);
//! - strings: jiffy's escapes; lone surrogates refused;
//! - objects: members in their order; a key given twice keeps its last
//!   value at its last place;
//! - depth: up to [`MAX_DEPTH`] levels, read, written and dropped without
//!   recursion.
//!
//! Values are `serde_json::Value`s built with serde_json's
//! `arbitrary_precision`: a number holds its text, which is CouchDB's.

// The one JSON writer itself: it may use serde_json's (its tests compare
// with it), which the workspace's clippy.toml refuses everywhere else.
#![allow(clippy::disallowed_methods)]

pub mod number;
mod read;
mod write;

pub use read::{JsonError, MAX_DEPTH, THREAD_STACK, from_slice, from_stored, from_str, value};
pub use write::{
    Formatter, drop_deep, push_escaped, push_string, to_string, to_string_of, to_vec, to_vec_of,
    write_value,
};
