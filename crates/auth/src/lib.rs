//! CouchDB 3's authentication and authorization rules, free of HTTP and
//! storage so they can be tested alone and shared: password hashes in
//! CouchDB's formats, `AuthSession` cookies, security objects, and the
//! `_users` database's rules. The HTTP API applies them to requests.

pub mod cookie;
pub mod jwt;
mod jwt_ec;
pub mod lockout;
pub mod password;
pub mod password_rules;
pub mod security;
pub mod users;

pub use password::{Credentials, DEFAULT_ITERATIONS};
pub use security::{Denial, SecurityObject, UserCtx};
