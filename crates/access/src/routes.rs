//! What each route of a database needs beyond membership: one table for
//! the HTTP API and the replicator (a replication source reads as
//! `_changes` does).
//!
//! The routes themselves are listed here too ([`Endpoint`],
//! [`DesignFunction`]): the HTTP router dispatches on these lists and this
//! table judges them, each with a `match` that names every entry, so a new
//! route cannot be served without a rule here (the compiler says so).

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

/// Every endpoint of a database (`/db/_name`): the one list the router
/// and [`route_need`] share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    AllDocs,
    LocalDocs,
    DesignDocs,
    Changes,
    BulkDocs,
    BulkGet,
    RevsDiff,
    MissingRevs,
    EnsureFullCommit,
    Compact,
    RevsLimit,
    Security,
    ViewCleanup,
    NouveauCleanup,
    SearchCleanup,
    Partition,
    TempView,
    Purge,
    PurgedInfosLimit,
    PurgedInfos,
    TimeSeq,
    AutoPurge,
    Find,
    Explain,
    Index,
    SyncShards,
}

impl Endpoint {
    /// Every endpoint, for tests that walk the list.
    pub const ALL: [Endpoint; 26] = [
        Endpoint::AllDocs,
        Endpoint::LocalDocs,
        Endpoint::DesignDocs,
        Endpoint::Changes,
        Endpoint::BulkDocs,
        Endpoint::BulkGet,
        Endpoint::RevsDiff,
        Endpoint::MissingRevs,
        Endpoint::EnsureFullCommit,
        Endpoint::Compact,
        Endpoint::RevsLimit,
        Endpoint::Security,
        Endpoint::ViewCleanup,
        Endpoint::NouveauCleanup,
        Endpoint::SearchCleanup,
        Endpoint::Partition,
        Endpoint::TempView,
        Endpoint::Purge,
        Endpoint::PurgedInfosLimit,
        Endpoint::PurgedInfos,
        Endpoint::TimeSeq,
        Endpoint::AutoPurge,
        Endpoint::Find,
        Endpoint::Explain,
        Endpoint::Index,
        Endpoint::SyncShards,
    ];

    /// The endpoint a path segment names, if any.
    pub fn of(name: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The endpoint's name in paths.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::AllDocs => "_all_docs",
            Endpoint::LocalDocs => "_local_docs",
            Endpoint::DesignDocs => "_design_docs",
            Endpoint::Changes => "_changes",
            Endpoint::BulkDocs => "_bulk_docs",
            Endpoint::BulkGet => "_bulk_get",
            Endpoint::RevsDiff => "_revs_diff",
            Endpoint::MissingRevs => "_missing_revs",
            Endpoint::EnsureFullCommit => "_ensure_full_commit",
            Endpoint::Compact => "_compact",
            Endpoint::RevsLimit => "_revs_limit",
            Endpoint::Security => "_security",
            Endpoint::ViewCleanup => "_view_cleanup",
            Endpoint::NouveauCleanup => "_nouveau_cleanup",
            Endpoint::SearchCleanup => "_search_cleanup",
            Endpoint::Partition => "_partition",
            Endpoint::TempView => "_temp_view",
            Endpoint::Purge => "_purge",
            Endpoint::PurgedInfosLimit => "_purged_infos_limit",
            Endpoint::PurgedInfos => "_purged_infos",
            Endpoint::TimeSeq => "_time_seq",
            Endpoint::AutoPurge => "_auto_purge",
            Endpoint::Find => "_find",
            Endpoint::Explain => "_explain",
            Endpoint::Index => "_index",
            Endpoint::SyncShards => "_sync_shards",
        }
    }
}

/// Every function of a design document (`/db/_design/ddoc/_kind/...`):
/// the one list the router and [`route_need`] share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesignFunction {
    View,
    Nouveau,
    NouveauInfo,
    Search,
    SearchInfo,
    SearchDiskSize,
    Show,
    List,
    Update,
    Rewrite,
    Info,
}

impl DesignFunction {
    /// Every design function, for tests that walk the list.
    pub const ALL: [DesignFunction; 11] = [
        DesignFunction::View,
        DesignFunction::Nouveau,
        DesignFunction::NouveauInfo,
        DesignFunction::Search,
        DesignFunction::SearchInfo,
        DesignFunction::SearchDiskSize,
        DesignFunction::Show,
        DesignFunction::List,
        DesignFunction::Update,
        DesignFunction::Rewrite,
        DesignFunction::Info,
    ];

    /// The function a path segment names, if any.
    pub fn of(name: &str) -> Option<DesignFunction> {
        DesignFunction::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The function's name in paths.
    pub fn name(self) -> &'static str {
        match self {
            DesignFunction::View => "_view",
            DesignFunction::Nouveau => "_nouveau",
            DesignFunction::NouveauInfo => "_nouveau_info",
            DesignFunction::Search => "_search",
            DesignFunction::SearchInfo => "_search_info",
            DesignFunction::SearchDiskSize => "_search_disk_size",
            DesignFunction::Show => "_show",
            DesignFunction::List => "_list",
            DesignFunction::Update => "_update",
            DesignFunction::Rewrite => "_rewrite",
            DesignFunction::Info => "_info",
        }
    }
}

/// What the first segment after a database's name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The database itself.
    Database,
    Endpoint(Endpoint),
    /// `_design/...`: a design document, its attachments and functions.
    Design,
    /// `_local/...`
    Local,
    /// `_something` that is no endpoint (answered as a missing document,
    /// or an illegal id).
    Unknown,
    /// A document and its attachments.
    Document,
}

impl Place {
    fn of(route: &Route<'_>) -> Place {
        match route.segments.first().copied() {
            None => Place::Database,
            Some("_design") => Place::Design,
            Some("_local") => Place::Local,
            Some(name) if name.starts_with('_') => {
                Endpoint::of(name).map_or(Place::Unknown, Place::Endpoint)
            }
            Some(_) => Place::Document,
        }
    }
}

const USERS_DESIGN: &str = "Only administrators can view design docs in the users database.";
const REPLICATOR_FUNCTIONS: &str =
    "Only administrators can run design functions in the replicator database.";
const INDEX_ADMIN: &str = "You are not a server or db admin.";

/// CouchDB's refusal of a user in a database with per-document access.
pub const ACCESS_DENIED: &str = "access denied";

/// What `route` needs in a database of `kind`.
pub fn route_need(kind: Kind, route: &Route<'_>) -> Need {
    let place = Place::of(route);
    if place == Place::Database && matches!(route.method, "PUT" | "DELETE") {
        return Need::ServerAdmin;
    }
    if let Place::Endpoint(endpoint) = place
        && let Some(need) = every_kind_need(endpoint, route)
    {
        return need;
    }
    match kind {
        Kind::Plain => Need::Member,
        Kind::Users | Kind::Replicator => special_need(kind, place, route),
        Kind::PerDoc => per_doc_need(place, route),
    }
}

/// What an endpoint needs in every kind of database, when that does not
/// depend on the kind.
fn every_kind_need(endpoint: Endpoint, route: &Route<'_>) -> Option<Need> {
    let index_admin = Need::DbAdmin {
        reason: INDEX_ADMIN,
        status: Status::Unauthorized,
    };
    let db_admin = Need::DbAdmin {
        reason: NOT_DB_ADMIN,
        status: Status::ByCaller,
    };
    match endpoint {
        Endpoint::Purge | Endpoint::PurgedInfosLimit | Endpoint::SyncShards => {
            Some(Need::ServerAdmin)
        }
        // Mango's indexes are design documents: written by database admins.
        Endpoint::Index if !route.reads() => Some(index_admin),
        Endpoint::Compact | Endpoint::ViewCleanup => Some(index_admin),
        // Forgetting the time bins is a database admin's (CouchDB's
        // `check_is_admin`); reading them a member's. Changing when
        // deleted documents are purged is a database admin's, as
        // `_revs_limit` (CouchDB checks only membership there).
        Endpoint::TimeSeq | Endpoint::AutoPurge | Endpoint::RevsLimit if !route.reads() => {
            Some(db_admin)
        }
        Endpoint::Index
        | Endpoint::TimeSeq
        | Endpoint::AutoPurge
        | Endpoint::RevsLimit
        | Endpoint::AllDocs
        | Endpoint::LocalDocs
        | Endpoint::DesignDocs
        | Endpoint::Changes
        | Endpoint::BulkDocs
        | Endpoint::BulkGet
        | Endpoint::RevsDiff
        | Endpoint::MissingRevs
        | Endpoint::EnsureFullCommit
        | Endpoint::Security
        | Endpoint::NouveauCleanup
        | Endpoint::SearchCleanup
        | Endpoint::Partition
        | Endpoint::TempView
        | Endpoint::PurgedInfos
        | Endpoint::Find
        | Endpoint::Explain => None,
    }
}

/// A database with per-document access: a user may use the routes that
/// read or write documents one user's way (the store's scoped handle
/// shows them only their own); everything else (design documents and
/// their functions, listings of design or local documents, partitions,
/// time bins) is for admins, as in CouchDB's design.
fn per_doc_need(place: Place, route: &Route<'_>) -> Need {
    let admins = Need::DbAdmin {
        reason: ACCESS_DENIED,
        status: Status::ByCaller,
    };
    match place {
        Place::Database | Place::Local | Place::Document => Need::Member,
        Place::Unknown => admins,
        Place::Design => match route.segments {
            // A search answers from the reader's own documents only (the
            // index keeps each document's `_access`).
            ["_design", _, function, _] if matches!(route.method, "GET" | "POST") => {
                match DesignFunction::of(function) {
                    Some(DesignFunction::Nouveau | DesignFunction::Search) => Need::Member,
                    Some(
                        DesignFunction::View
                        | DesignFunction::NouveauInfo
                        | DesignFunction::SearchInfo
                        | DesignFunction::SearchDiskSize
                        | DesignFunction::Show
                        | DesignFunction::List
                        | DesignFunction::Update
                        | DesignFunction::Rewrite
                        | DesignFunction::Info,
                    )
                    | None => admins,
                }
            }
            _ => admins,
        },
        Place::Endpoint(endpoint) => match endpoint {
            Endpoint::AllDocs
            | Endpoint::Changes
            | Endpoint::BulkGet
            | Endpoint::BulkDocs
            | Endpoint::RevsDiff
            | Endpoint::MissingRevs
            | Endpoint::Find
            | Endpoint::Explain
            | Endpoint::Index
            | Endpoint::EnsureFullCommit
            | Endpoint::Security
            | Endpoint::RevsLimit => Need::Member,
            Endpoint::LocalDocs
            | Endpoint::DesignDocs
            | Endpoint::Compact
            | Endpoint::ViewCleanup
            | Endpoint::NouveauCleanup
            | Endpoint::SearchCleanup
            | Endpoint::Partition
            | Endpoint::TempView
            | Endpoint::Purge
            | Endpoint::PurgedInfosLimit
            | Endpoint::PurgedInfos
            | Endpoint::TimeSeq
            | Endpoint::AutoPurge
            | Endpoint::SyncShards => admins,
        },
    }
}

/// `_users` and `_replicator`: only the routes that filter what a user
/// sees are open to members; every route that lists or copies documents,
/// or runs design functions over them, is for admins.
fn special_need(kind: Kind, place: Place, route: &Route<'_>) -> Need {
    let server_admins = Need::DbAdmin {
        reason: NOT_SERVER_ADMIN,
        status: Status::Unauthorized,
    };
    match place {
        Place::Database | Place::Local | Place::Document => Need::Member,
        Place::Unknown => server_admins,
        // Writing a design document itself is judged per document by the
        // write gate, as CouchDB does: a user is told it does not exist,
        // an anonymous caller that it is for admins.
        Place::Design
            if kind == Kind::Users && route.method == "PUT" && route.segments.len() == 2 =>
        {
            Need::Member
        }
        Place::Design if kind == Kind::Users => Need::DbAdmin {
            reason: USERS_DESIGN,
            status: Status::Forbidden,
        },
        Place::Design => match route.segments.get(2) {
            Some(function) if function.starts_with('_') => match DesignFunction::of(function) {
                Some(DesignFunction::Info) => Need::Member,
                Some(
                    DesignFunction::View
                    | DesignFunction::Nouveau
                    | DesignFunction::NouveauInfo
                    | DesignFunction::Search
                    | DesignFunction::SearchInfo
                    | DesignFunction::SearchDiskSize
                    | DesignFunction::Show
                    | DesignFunction::List
                    | DesignFunction::Update
                    | DesignFunction::Rewrite,
                )
                | None => Need::DbAdmin {
                    reason: REPLICATOR_FUNCTIONS,
                    status: Status::Forbidden,
                },
            },
            _ => Need::Member,
        },
        Place::Endpoint(endpoint) => match endpoint {
            Endpoint::AllDocs | Endpoint::Changes => Need::ServerAdmin,
            Endpoint::BulkDocs | Endpoint::Security => Need::Member,
            Endpoint::LocalDocs
            | Endpoint::DesignDocs
            | Endpoint::BulkGet
            | Endpoint::RevsDiff
            | Endpoint::MissingRevs
            | Endpoint::EnsureFullCommit
            | Endpoint::Compact
            | Endpoint::RevsLimit
            | Endpoint::ViewCleanup
            | Endpoint::NouveauCleanup
            | Endpoint::SearchCleanup
            | Endpoint::Partition
            | Endpoint::TempView
            | Endpoint::Purge
            | Endpoint::PurgedInfosLimit
            | Endpoint::PurgedInfos
            | Endpoint::TimeSeq
            | Endpoint::AutoPurge
            | Endpoint::Find
            | Endpoint::Explain
            | Endpoint::Index
            | Endpoint::SyncShards => server_admins,
        },
    }
}
