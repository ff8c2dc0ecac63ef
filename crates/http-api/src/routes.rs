//! Routing below the server routes: CouchDB's paths are decoded by hand,
//! because document ids and attachment names may contain encoded slashes
//! (`/db/a%2Fb` is document `a/b`, `/db/doc/dir/file.txt` is attachment
//! `dir/file.txt`) that a generic router would mangle.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use crate::error::ApiError;
use crate::json::require_json_content_type;
use crate::query::Query;
use crate::stats::{self, DocAccess};
use crate::{AppState, attachments, changes, db, design, docs};

/// What a path names below the server level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `/db`
    Db(String),
    /// `/db/_name...`: a database endpoint such as `_all_docs`.
    Endpoint { db: String, name: String },
    /// `/db/docid`, `/db/_design/name`, `/db/_local/name`
    Doc { db: String, id: String },
    /// `/db/docid/attachment/name`
    Attachment {
        db: String,
        id: String,
        name: String,
    },
    /// `/db/_design/ddoc/_kind/rest`: a design document function (`_view`,
    /// `_show`, ...). Attachment names cannot start with `_`, so such a
    /// path is never an attachment.
    DesignFunction {
        db: String,
        ddoc: String,
        kind: String,
        rest: Vec<String>,
    },
}

fn decode(segment: &str) -> Result<String, ApiError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::bad_request("URL path is not valid UTF-8"))
}

/// Splits a request path into what it names.
pub(crate) fn parse_target(path: &str) -> Result<Target, ApiError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let mut segments = trimmed.splitn(2, '/');
    let db = decode(segments.next().unwrap_or(""))?;
    let rest = segments.next().unwrap_or("");
    if rest.is_empty() {
        return Ok(Target::Db(db));
    }
    let mut parts = rest.splitn(2, '/');
    let first = decode(parts.next().unwrap_or(""))?;
    let after = parts.next();
    let (id, attachment) = if first == "_design" || first == "_local" {
        let mut inner = after.unwrap_or("").splitn(2, '/');
        let name = decode(inner.next().unwrap_or(""))?;
        let tail = inner.next();
        if first == "_design"
            && let Some(tail) = tail
            && tail.starts_with('_')
        {
            let mut pieces = tail.split('/').map(decode);
            let kind = pieces.next().transpose()?.unwrap_or_default();
            let rest = pieces.collect::<Result<Vec<_>, _>>()?;
            return Ok(Target::DesignFunction {
                db,
                ddoc: name,
                kind,
                rest,
            });
        }
        (format!("{first}/{name}"), tail)
    } else if first.starts_with('_')
        && !first.starts_with("_design/")
        && !first.starts_with("_local/")
    {
        if after.is_none_or(str::is_empty) {
            return Ok(Target::Endpoint { db, name: first });
        }
        // `/db/_name/x` is an attachment of a document CouchDB will refuse
        // by its id (405 for the methods attachments lack, 400 for a write).
        (first, after)
    } else {
        (first, after)
    };
    match attachment.filter(|a| !a.is_empty()) {
        None => Ok(Target::Doc { db, id }),
        Some(_) if id.starts_with("_local/") => Err(ApiError::bad_request(
            "_local documents do not accept attachments.",
        )),
        Some(raw) => {
            let name = raw
                .split('/')
                .map(decode)
                .collect::<Result<Vec<_>, _>>()?
                .join("/");
            Ok(Target::Attachment { db, id, name })
        }
    }
}

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
    let query = Query::parse(request.uri());
    match target {
        Target::Db(db) => db::database(state, db, query, request).await,
        Target::Endpoint { db, name } => endpoint(state, db, name, query, request).await,
        Target::Doc { db, id } => docs::document(state, db, id, query, request).await,
        // `_compact/{ddoc}` compacts a design document's views.
        Target::Attachment { db, id, name } if id == "_compact" => {
            if request.method() != Method::POST {
                return Err(ApiError::MethodNotAllowed("POST"));
            }
            require_json_content_type(request.headers())?;
            let database = state.store.db(&db).await?;
            crate::views::compact(state, database, name).await
        }
        Target::Attachment { db, id, name } if id == "_partition" => {
            crate::partition::partition(state, db, name, query, request).await
        }
        // `_index/{ddoc}/json/{name}` and `_index/_bulk_delete`: Mango's indexes.
        Target::Attachment { db, id, name } if id == "_index" => {
            let database = state.store.db(&db).await?;
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
        } if kind == "_view" && rest.len() == 1 => {
            let database = state.store.db(&db).await?;
            let name = rest.into_iter().next().unwrap_or_default();
            crate::views::view(state, database, ddoc, name, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } if kind == "_view" && rest.len() == 2 && rest[1] == "queries" => {
            let database = state.store.db(&db).await?;
            let name = rest.into_iter().next().unwrap_or_default();
            crate::views::queries(state, database, ddoc, name, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } if kind == "_show" && !rest.is_empty() => {
            let database = state.store.db(&db).await?;
            crate::render::show(state, database, ddoc, rest, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } if kind == "_list" && (rest.len() == 2 || rest.len() == 3) => {
            let database = state.store.db(&db).await?;
            crate::render::list(state, database, ddoc, rest, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } if kind == "_update" && !rest.is_empty() => {
            let database = state.store.db(&db).await?;
            crate::render::update(state, database, ddoc, rest, query, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } if kind == "_info" && rest.is_empty() => {
            let database = state.store.db(&db).await?;
            crate::views::info(state, database, ddoc, request).await
        }
        Target::DesignFunction {
            db,
            ddoc,
            kind,
            rest,
        } => {
            let database = state.store.db(&db).await?;
            Err(match (design::Section::of_path(&kind), rest.first()) {
                (Some(section), Some(name)) => {
                    design::function_not_runnable(&database, &ddoc, section, name).await
                }
                _ => match design::load(&database, &ddoc).await {
                    Err(missing) => missing,
                    Ok(_) => ApiError::NotImplemented(format!(
                        "{kind} of design documents is not supported yet"
                    )),
                },
            })
        }
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
    let method = request.method().clone();
    let is = |m: &Method| method == *m;
    match name.as_str() {
        "_all_docs" if is(&Method::GET) || is(&Method::HEAD) || is(&Method::POST) => {
            db::all_docs(state, db, query, request).await
        }
        "_all_docs" => Err(ApiError::MethodNotAllowed("GET,HEAD,POST")),
        "_local_docs" if is(&Method::GET) || is(&Method::HEAD) || is(&Method::POST) => {
            crate::local_docs::local_docs(state, db, query, request).await
        }
        "_local_docs" => Err(ApiError::MethodNotAllowed("GET,HEAD,POST")),
        "_design_docs" if is(&Method::GET) || is(&Method::HEAD) || is(&Method::POST) => {
            crate::design_docs::design_docs(state, db, query, request).await
        }
        "_design_docs" => Err(ApiError::MethodNotAllowed("GET,HEAD,POST")),
        "_changes" if is(&Method::GET) || is(&Method::HEAD) || is(&Method::POST) => {
            changes::changes(state, db, query, request).await
        }
        "_changes" => Err(ApiError::MethodNotAllowed("GET,POST,HEAD")),
        "_bulk_docs" if is(&Method::POST) => db::bulk_docs(state, db, request).await,
        "_bulk_get" if is(&Method::POST) => db::bulk_get(state, db, query, request).await,
        "_revs_diff" if is(&Method::POST) => {
            require_json_content_type(request.headers())?;
            db::revs_diff(state, db, request, false).await
        }
        "_missing_revs" if is(&Method::POST) => {
            require_json_content_type(request.headers())?;
            db::revs_diff(state, db, request, true).await
        }
        "_ensure_full_commit" if is(&Method::POST) => {
            require_json_content_type(request.headers())?;
            db::ensure_full_commit(state, db).await
        }
        "_compact" if is(&Method::POST) => db::compact(state, db, request).await,
        "_bulk_docs"
        | "_bulk_get"
        | "_revs_diff"
        | "_missing_revs"
        | "_ensure_full_commit"
        | "_compact" => Err(ApiError::MethodNotAllowed("POST")),
        "_revs_limit" if is(&Method::GET) || is(&Method::PUT) => {
            db::revs_limit(state, db, request).await
        }
        "_revs_limit" => Err(ApiError::MethodNotAllowed("GET,PUT")),
        "_security" if is(&Method::GET) || is(&Method::PUT) => {
            db::security(state, db, request).await
        }
        "_security" => Err(ApiError::MethodNotAllowed("GET,PUT")),
        "_view_cleanup" if is(&Method::POST) => {
            require_json_content_type(request.headers())?;
            let database = state.store.db(&db).await?;
            crate::views::cleanup(state, database).await
        }
        "_view_cleanup" => Err(ApiError::MethodNotAllowed("POST")),
        "_purge" if is(&Method::POST) => crate::purge::purge(state, db, request).await,
        // CouchDB looks for the database before it judges the method.
        "_purge" => {
            state.store.db(&db).await?;
            Err(ApiError::MethodNotAllowed("POST"))
        }
        "_purged_infos_limit" if is(&Method::GET) || is(&Method::HEAD) || is(&Method::PUT) => {
            crate::purge::purged_infos_limit(state, db, request).await
        }
        "_purged_infos_limit" => {
            state.store.db(&db).await?;
            Err(ApiError::MethodNotAllowed("GET,PUT"))
        }
        "_purged_infos" if is(&Method::GET) || is(&Method::HEAD) => {
            crate::purge::purged_infos(state, db).await
        }
        "_purged_infos" => Err(ApiError::MethodNotAllowed("GET")),
        "_find" | "_explain" => {
            let database = state.store.db(&db).await?;
            crate::find::find(state, database, request, name == "_explain").await
        }
        "_index" => {
            let database = state.store.db(&db).await?;
            crate::find::indexes(state, database, query, request).await
        }
        "_local" | "_design" => Err(ApiError::Invalid {
            error: "illegal_docid",
            reason: "Only reserved document ids may start with underscore.".into(),
        }),
        _ if is(&Method::GET) || is(&Method::HEAD) || is(&Method::DELETE) => {
            // Like CouchDB: an unknown `_name` is a document it cannot find...
            state.store.db(&db).await?;
            Err(ApiError::not_found("missing"))
        }
        _ => {
            // ...or a document id it refuses to write.
            state.store.db(&db).await?;
            Err(ApiError::Invalid {
                error: "illegal_docid",
                reason: "Only reserved document ids may start with underscore.".into(),
            })
        }
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
