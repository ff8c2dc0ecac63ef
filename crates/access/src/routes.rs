//! What each route of a database needs beyond membership: one table for
//! the HTTP API and the replicator (a replication source reads as
//! `_changes` does).

use crate::{Kind, NOT_DB_ADMIN, NOT_SERVER_ADMIN};

/// A request on a database: its method and the decoded path segments
/// after the database name (`["_design", "app", "_view", "by"]`).
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    pub method: &'a str,
    pub segments: &'a [&'a str],
}

impl Route<'static> {
    /// Reading every document in order of change: what a replication
    /// source does.
    pub fn changes() -> Route<'static> {
        Route {
            method: "GET",
            segments: &["_changes"],
        }
    }
}

impl Route<'_> {
    fn reads(&self) -> bool {
        matches!(self.method, "GET" | "HEAD")
    }
}

/// Who may use a route, beyond being a member of the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    Member,
    /// An admin of the database (or of the server); others are refused
    /// with `reason` and the status CouchDB gives there.
    DbAdmin {
        reason: &'static str,
        status: Status,
    },
    /// A server admin: refused with CouchDB's 401 "You are not a server admin.".
    ServerAdmin,
}

/// The status of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 401 for an anonymous caller, 403 for a known one.
    ByCaller,
    Unauthorized,
    Forbidden,
}

const USERS_DESIGN: &str = "Only administrators can view design docs in the users database.";
const REPLICATOR_FUNCTIONS: &str =
    "Only administrators can run design functions in the replicator database.";
const INDEX_ADMIN: &str = "You are not a server or db admin.";

/// What `route` needs in a database of `kind`.
pub fn route_need(kind: Kind, route: &Route<'_>) -> Need {
    let first = route.segments.first().copied();
    if first.is_none() && matches!(route.method, "PUT" | "DELETE") {
        return Need::ServerAdmin;
    }
    let index_admin = Need::DbAdmin {
        reason: INDEX_ADMIN,
        status: Status::Unauthorized,
    };
    match first {
        Some("_purge" | "_purged_infos_limit" | "_sync_shards") => return Need::ServerAdmin,
        // Mango's indexes are design documents: written by database admins.
        Some("_index") if !route.reads() => return index_admin,
        Some("_compact" | "_view_cleanup") => return index_admin,
        // Forgetting the time bins is a database admin's (CouchDB's
        // `check_is_admin`); reading them a member's.
        // Changing when deleted documents are purged is a database
        // admin's, as `_revs_limit` (CouchDB checks only membership here).
        Some("_time_seq" | "_auto_purge") if !route.reads() => {
            return Need::DbAdmin {
                reason: NOT_DB_ADMIN,
                status: Status::ByCaller,
            };
        }
        Some("_revs_limit") if !route.reads() => {
            return Need::DbAdmin {
                reason: NOT_DB_ADMIN,
                status: Status::ByCaller,
            };
        }
        _ => {}
    }
    match kind {
        Kind::Plain => Need::Member,
        Kind::Users | Kind::Replicator => special_need(kind, route),
        Kind::PerDoc => per_doc_need(route),
    }
}

/// CouchDB's refusal of a user in a database with per-document access.
pub const ACCESS_DENIED: &str = "access denied";

/// A database with per-document access: a user may use the routes that
/// read or write documents one user's way (the store's scoped handle
/// shows them only their own); everything else (design documents and
/// their functions, listings of design or local documents, partitions,
/// time bins) is for admins, as in CouchDB's design.
fn per_doc_need(route: &Route<'_>) -> Need {
    match route.segments {
        // A search answers from the reader's own documents only (the
        // index keeps each document's `_access`).
        ["_design", _, "_nouveau" | "_search", _] if matches!(route.method, "GET" | "POST") => {
            return Need::Member;
        }
        _ => {}
    }
    match route.segments.first().copied() {
        None => Need::Member,
        Some(
            "_all_docs"
            | "_changes"
            | "_bulk_get"
            | "_bulk_docs"
            | "_revs_diff"
            | "_missing_revs"
            | "_find"
            | "_explain"
            | "_index"
            | "_ensure_full_commit"
            | "_local"
            | "_security"
            | "_revs_limit",
        ) => Need::Member,
        Some(other) if other.starts_with('_') => Need::DbAdmin {
            reason: ACCESS_DENIED,
            status: Status::ByCaller,
        },
        Some(_) => Need::Member,
    }
}

/// `_users` and `_replicator`: only the routes that filter what a user
/// sees are open to members; every route that lists or copies documents,
/// or runs design functions over them, is for admins.
fn special_need(kind: Kind, route: &Route<'_>) -> Need {
    match route.segments.first().copied() {
        None => Need::Member,
        Some("_all_docs" | "_changes") => Need::ServerAdmin,
        // Writing a design document itself is judged per document by the
        // write gate, as CouchDB does: a user is told it does not exist,
        // an anonymous caller that it is for admins.
        Some("_design")
            if kind == Kind::Users && route.method == "PUT" && route.segments.len() == 2 =>
        {
            Need::Member
        }
        Some("_design") if kind == Kind::Users => Need::DbAdmin {
            reason: USERS_DESIGN,
            status: Status::Forbidden,
        },
        Some("_design")
            if route
                .segments
                .get(2)
                .is_some_and(|s| s.starts_with('_') && *s != "_info") =>
        {
            Need::DbAdmin {
                reason: REPLICATOR_FUNCTIONS,
                status: Status::Forbidden,
            }
        }
        Some("_bulk_docs" | "_security" | "_local" | "_design") => Need::Member,
        Some(listing) if listing.starts_with('_') => Need::DbAdmin {
            reason: NOT_SERVER_ADMIN,
            status: Status::Unauthorized,
        },
        Some(_) => Need::Member,
    }
}
