//! Routing below the server routes: CouchDB's paths are decoded by hand,
//! because document ids and attachment names may contain encoded slashes
//! (`/db/a%2Fb` is document `a/b`, `/db/doc/dir/file.txt` is attachment
//! `dir/file.txt`) that a generic router would mangle.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::base::error::ApiError;
use crate::base::json_body::require_json_content_type;
use crate::base::params::Query;
use crate::base::stats::{self, DocAccess};
use crate::base::target::{Target, parse_target};
use crate::database::{all_docs, bulk_docs, bulk_get, maintenance, revs_diff};
use crate::document::attachments;
use crate::{AppState, changes, database, design, document};

/// Entry point for every path the server routes do not claim.
pub(crate) async fn dispatch(State(state): State<AppState>, request: Request<Body>) -> Response {
    match route(state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn route(state: AppState, request: Request<Body>) -> Result<Response, ApiError> {
    let path = request.uri().path().to_string();
    let target = parse_target(&path)?;
    let db_name = match &target {
        Target::Db(db)
        | Target::Endpoint { db, .. }
        | Target::Doc { db, .. }
        | Target::Attachment { db, .. }
        | Target::DesignFunction { db, .. } => db,
    };
    if db_name.starts_with('_') && !store::name::SYSTEM_DATABASES.contains(&db_name.as_str()) {
        return top_level_underscore(db_name, request.method());
    }
    let access = if stats::counts_documents(db_name) {
        doc_access(&target, request.method())
    } else {
        DocAccess::default()
    };
    if matches!(&target, Target::Endpoint { name, .. } if name == "_bulk_docs" || name == "_bulk_get")
        && request.method() == Method::POST
    {
        state.stats.count_bulk_request();
    }
    let db_info = matches!(target, Target::Db(_)) && request.method() == Method::GET;
    let counters = state.stats.clone();
    let started = std::time::Instant::now();
    let result = serve(state, target, request).await;
    if let Ok(response) = &result {
        counters.count_documents(access, response.status());
        if db_info && response.status() == StatusCode::OK {
            counters.record_db_info(started.elapsed());
        }
    }
    result
}

/// What a request does to documents, for `_node/{node}/_stats`
/// (`database_reads`, `database_writes`): a document or attachment read,
/// or a write of one document, a new document or a `_bulk_docs` batch (one
/// change of the database, as CouchDB counts). Documents that `_bulk_get`,
/// `_all_docs` and `_changes` include are not counted here.
fn doc_access(target: &Target, method: &Method) -> DocAccess {
    let reads = *method == Method::GET || *method == Method::HEAD;
    let writes = *method == Method::PUT || *method == Method::DELETE || *method == Method::POST;
    match target {
        // COPY reads its source and writes its destination.
        Target::Doc { .. } if method.as_str() == "COPY" => DocAccess {
            read: true,
            write: true,
        },
        Target::Doc { .. } | Target::Attachment { .. } => DocAccess {
            read: reads,
            write: writes,
        },
        Target::Db(_) if *method == Method::POST => DocAccess {
            read: false,
            write: true,
        },
        Target::Endpoint { name, .. } if name == "_bulk_docs" && *method == Method::POST => {
            DocAccess {
                read: false,
                write: true,
            }
        }
        _ => DocAccess::default(),
    }
}

async fn serve(
    state: AppState,
    target: Target,
    request: Request<Body>,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let query = Query::parse(request.uri());
    match target {
        Target::Db(db) => database::database(state, db, query, request).await,
        Target::Endpoint { db, name } => endpoint(state, db, name, query, request).await,
        Target::Doc { db, id } => document::document(state, db, id, query, request).await,
        // `_compact/{ddoc}` compacts a design document's views.
        Target::Attachment { db, id, name } if id == "_compact" => {
            if request.method() != Method::POST {
                return Err(ApiError::MethodNotAllowed("POST"));
            }
            require_json_content_type(request.headers())?;
            let database = state.open(&db, &user).await?;
            crate::design::views::compact(state, database, name).await
        }
        // `/{db}/_all_docs/queries` and its kin: several listings at once.
        Target::Attachment { db, id, name }
            if name == "queries"
                && crate::database::listing_queries::Listing::of(&id).is_some() =>
        {
            let listing = crate::database::listing_queries::Listing::of(&id)
                .unwrap_or(crate::database::listing_queries::Listing::All);
            crate::database::listing_queries::queries(state, db, listing, request).await
        }
        Target::Attachment { db, id, name } if id == "_partition" && name.is_empty() => {
            state.open(&db, &user).await?;
            Err(ApiError::bad_request("invalid_partition_req"))
        }
        Target::Attachment { db, id, name } if id == "_partition" => {
            crate::database::partition::partition(state, db, name, query, request).await
        }
        // `_index/{ddoc}/json/{name}` and `_index/_bulk_delete`: Mango's indexes.
        Target::Attachment { db, id, name } if id == "_index" => {
            let database = state.open(&db, &user).await?;
            crate::find::index_path(state, database, name, request).await
        }
        Target::Attachment { db, id, name } => {
            attachments::attachment(state, db, id, name, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } => {
            let database = state.open(&db, &user).await?;
            design_function(state, database, ddoc, kind, rest, query, request).await
        }
    }
}

/// `/db/_design/ddoc/_kind/...`: dispatched on the list the access rules
/// judge (`access::DesignFunction`), every entry named.
async fn design_function(
    state: AppState,
    database: store::Database,
    ddoc: String,
    kind: String,
    rest: Vec<String>,
    query: Query,
    request: Request<Body>,
) -> Result<Response, ApiError> {
    use access::DesignFunction as F;
    let function = F::of(&kind);
    let one_name = (rest.len() == 1).then(|| rest[0].clone());
    match (function, one_name) {
        (Some(F::View), Some(name)) => {
            crate::design::views::view(state, database, ddoc, name, query, request).await
        }
        (Some(F::View), None) if rest.len() == 2 && rest[1] == "queries" => {
            let name = rest.into_iter().next().unwrap_or_default();
            crate::design::views::queries(state, database, ddoc, name, query, request).await
        }
        (Some(F::Nouveau), Some(name)) => {
            crate::design::search::nouveau(state, database, ddoc, name, query, request, None).await
        }
        (Some(F::NouveauInfo), Some(name)) => {
            crate::design::search::nouveau_info(state, database, ddoc, name, request).await
        }
        (Some(F::Search), Some(name)) => {
            crate::design::clouseau::search(state, database, ddoc, name, query, request, None).await
        }
        (Some(F::SearchInfo), Some(name)) => {
            crate::design::clouseau::search_info(state, database, ddoc, name, request).await
        }
        (Some(F::SearchDiskSize), Some(name)) => {
            crate::design::clouseau::search_disk_size(state, database, ddoc, name, request).await
        }
        (Some(F::Show), _) => {
            crate::design::render::show(state, database, ddoc, rest, query, request).await
        }
        (Some(F::List), _) => {
            crate::design::render::list(state, database, ddoc, rest, query, request).await
        }
        (Some(F::Update), _) => {
            crate::design::render::update(state, database, ddoc, rest, query, request).await
        }
        (Some(F::Rewrite), _) => {
            crate::design::rewrite::rewrite(state, database, ddoc, rest, query, request).await
        }
        (Some(F::Info), _) if rest.is_empty() => {
            crate::design::views::info(state, database, ddoc, request).await
        }
        (
            Some(
                F::View
                | F::Nouveau
                | F::NouveauInfo
                | F::Search
                | F::SearchInfo
                | F::SearchDiskSize
                | F::Info,
            )
            | None,
            _,
        ) => Err(match (design::Section::of_path(&kind), rest.first()) {
            (Some(section), Some(name)) => {
                design::function_not_runnable(&database, &ddoc, section, name).await
            }
            _ => match design::load(&database, &ddoc).await {
                Err(missing) => missing,
                Ok(_) => ApiError::NotImplemented(format!(
                    "{kind} of design documents is not supported yet"
                )),
            },
        }),
    }
}

/// `/_something` that is not a system database or a server route: CouchDB
/// looks for the database before it judges the name, so only a creation
/// hears that the name is illegal.
fn top_level_underscore(name: &str, method: &Method) -> Result<Response, ApiError> {
    match name {
        _ if *method == Method::PUT => Err(ApiError::IllegalDbName(name.to_string())),
        _ => Err(ApiError::not_found("Database does not exist.")),
    }
}

async fn endpoint(
    state: AppState,
    db: String,
    name: String,
    query: Query,
    request: Request<Body>,
) -> Result<Response, ApiError> {
    use access::Endpoint as E;
    let user = crate::base::auth::user_of(&request);
    let method = request.method().clone();
    let is = |allowed: &[&str]| allowed.contains(&method.as_str());
    let Some(endpoint) = E::of(&name) else {
        return unknown_endpoint(state, db, &name, &method, &user).await;
    };
    match endpoint {
        E::AllDocs if is(&["GET", "HEAD", "POST"]) => {
            all_docs::all_docs(state, db, query, request).await
        }
        E::LocalDocs if is(&["GET", "HEAD", "POST"]) => {
            crate::database::local_docs::local_docs(state, db, query, request).await
        }
        E::DesignDocs if is(&["GET", "HEAD", "POST"]) => {
            crate::database::design_docs::design_docs(state, db, query, request).await
        }
        E::AllDocs | E::LocalDocs | E::DesignDocs => {
            Err(ApiError::MethodNotAllowed("GET,HEAD,POST"))
        }
        E::Changes if is(&["GET", "HEAD", "POST"]) => {
            changes::changes(state, db, query, request).await
        }
        E::Changes => Err(ApiError::MethodNotAllowed("GET,POST,HEAD")),
        E::BulkDocs if is(&["POST"]) => bulk_docs::bulk_docs(state, db, request).await,
        E::BulkGet if is(&["POST"]) => bulk_get::bulk_get(state, db, query, request).await,
        E::RevsDiff | E::MissingRevs if is(&["POST"]) => {
            require_json_content_type(request.headers())?;
            revs_diff::revs_diff(state, db, request, endpoint == E::MissingRevs).await
        }
        E::EnsureFullCommit if is(&["POST"]) => {
            require_json_content_type(request.headers())?;
            maintenance::ensure_full_commit(state, db, &user).await
        }
        E::Compact if is(&["POST"]) => maintenance::compact(state, db, request).await,
        E::BulkDocs
        | E::BulkGet
        | E::RevsDiff
        | E::MissingRevs
        | E::EnsureFullCommit
        | E::Compact => Err(ApiError::MethodNotAllowed("POST")),
        E::RevsLimit if is(&["GET", "PUT"]) => maintenance::revs_limit(state, db, request).await,
        E::Security if is(&["GET", "PUT"]) => maintenance::security(state, db, request).await,
        E::RevsLimit | E::Security => Err(ApiError::MethodNotAllowed("GET,PUT")),
        E::ViewCleanup if is(&["POST"]) => {
            require_json_content_type(request.headers())?;
            let database = state.open(&db, &user).await?;
            crate::design::views::cleanup(state, database).await
        }
        E::ViewCleanup => Err(ApiError::MethodNotAllowed("POST")),
        E::NouveauCleanup | E::SearchCleanup => {
            let database = state.open(&db, &user).await?;
            crate::design::search::cleanup(state, database, request).await
        }
        // A partition path without the partition's name.
        E::Partition => {
            state.open(&db, &user).await?;
            Err(ApiError::bad_request("invalid_partition_req"))
        }
        // CouchDB 2 dropped temporary views; it still says so, any method.
        E::TempView => {
            state.open(&db, &user).await?;
            Err(ApiError::Status {
                status: axum::http::StatusCode::GONE,
                error: "gone",
                reason: "Temporary views are not supported in CouchDB".into(),
            })
        }
        E::Purge if is(&["POST"]) => crate::database::purge::purge(state, db, request).await,
        // CouchDB looks for the database before it judges the method.
        E::Purge => {
            state.open(&db, &user).await?;
            Err(ApiError::MethodNotAllowed("POST"))
        }
        E::PurgedInfosLimit if is(&["GET", "HEAD", "PUT"]) => {
            crate::database::purge::purged_infos_limit(state, db, request).await
        }
        E::PurgedInfosLimit => {
            state.open(&db, &user).await?;
            Err(ApiError::MethodNotAllowed("GET,PUT"))
        }
        E::PurgedInfos if is(&["GET", "HEAD"]) => {
            crate::database::purge::purged_infos(state, db, &user).await
        }
        E::PurgedInfos => Err(ApiError::MethodNotAllowed("GET")),
        E::TimeSeq if is(&["GET", "HEAD", "DELETE"]) => {
            crate::database::time_seq::time_seq(state, db, &method, &user).await
        }
        E::TimeSeq => Err(ApiError::MethodNotAllowed("GET,DELETE")),
        E::AutoPurge if is(&["GET", "HEAD", "PUT"]) => {
            crate::database::auto_purge::auto_purge(state, db, request).await
        }
        E::AutoPurge => Err(ApiError::MethodNotAllowed("GET,PUT,HEAD")),
        E::Find | E::Explain => {
            let database = state.open(&db, &user).await?;
            crate::find::find(state, database, request, endpoint == E::Explain).await
        }
        E::Index => {
            let database = state.open(&db, &user).await?;
            crate::find::indexes(state, database, query, request).await
        }
        // A cluster's endpoint: a single node has no shards to sync.
        E::SyncShards => unknown_endpoint(state, db, &name, &method, &user).await,
    }
}

/// `/db/_name` that is no endpoint of a database.
async fn unknown_endpoint(
    state: AppState,
    db: String,
    name: &str,
    method: &Method,
    user: &auth::UserCtx,
) -> Result<Response, ApiError> {
    let illegal_id = || ApiError::Invalid {
        error: "illegal_docid",
        reason: "Only reserved document ids may start with underscore.".into(),
    };
    if name == "_local" || name == "_design" {
        return Err(illegal_id());
    }
    // Like CouchDB: an unknown `_name` is a document it cannot find, or a
    // document id it refuses to write.
    state.open(&db, user).await?;
    if [Method::GET, Method::HEAD, Method::DELETE].contains(method) {
        Err(ApiError::not_found("missing"))
    } else {
        Err(illegal_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(path: &str) -> Target {
        parse_target(path).unwrap()
    }

    #[test]
    fn paths_name_databases_endpoints_documents_and_attachments() {
        assert_eq!(t("/db"), Target::Db("db".into()));
        assert_eq!(t("/db/"), Target::Db("db".into()));
        assert_eq!(t("/a%2Fb"), Target::Db("a/b".into()));
        assert_eq!(
            t("/db/_all_docs"),
            Target::Endpoint {
                db: "db".into(),
                name: "_all_docs".into()
            }
        );
        assert_eq!(
            t("/db/doc"),
            Target::Doc {
                db: "db".into(),
                id: "doc".into()
            }
        );
        assert_eq!(
            t("/db/a%2Fb"),
            Target::Doc {
                db: "db".into(),
                id: "a/b".into()
            }
        );
        assert_eq!(
            t("/db/_design/x"),
            Target::Doc {
                db: "db".into(),
                id: "_design/x".into()
            }
        );
        assert_eq!(
            t("/db/_design%2Fx"),
            Target::Doc {
                db: "db".into(),
                id: "_design/x".into()
            }
        );
        assert_eq!(
            t("/db/_local/cp"),
            Target::Doc {
                db: "db".into(),
                id: "_local/cp".into()
            }
        );
        assert_eq!(
            t("/db/doc/dir/file%20name.txt"),
            Target::Attachment {
                db: "db".into(),
                id: "doc".into(),
                name: "dir/file name.txt".into()
            }
        );
        assert_eq!(
            t("/db/_design/x/att"),
            Target::Attachment {
                db: "db".into(),
                id: "_design/x".into(),
                name: "att".into()
            }
        );
        assert!(matches!(
            parse_target("/db/_local/x/att"),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse_target("/db/%FF"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
