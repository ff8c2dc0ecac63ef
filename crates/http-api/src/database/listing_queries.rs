//! `POST /{db}/_all_docs/queries` (and `_local_docs`, `_design_docs`):
//! several listings in one request, `{"results": [...]}`, each answered as
//! its own request would be. Every query's parameters are checked before
//! the answer starts (a bad one is the request's error, as in CouchDB);
//! then each runs through the single listing's handler, its body streamed
//! into the results as it is read.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Map, Value};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::listing::all_docs_options;
use crate::base::params::Query;
use crate::base::streamed::{BodyWriter, Stop};

/// Which listing the queries are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    All,
    Local,
    Design,
}

impl Listing {
    pub(crate) fn of(name: &str) -> Option<Listing> {
        match name {
            "_all_docs" => Some(Listing::All),
            "_local_docs" => Some(Listing::Local),
            "_design_docs" => Some(Listing::Design),
            _ => None,
        }
    }

    async fn answer(
        self,
        state: AppState,
        db: String,
        request: Request,
    ) -> Result<Response, ApiError> {
        let query = Query::default();
        match self {
            Listing::All => crate::database::all_docs::all_docs(state, db, query, request).await,
            Listing::Local => {
                crate::database::local_docs::local_docs(state, db, query, request).await
            }
            Listing::Design => {
                crate::database::design_docs::design_docs(state, db, query, request).await
            }
        }
    }
}

/// # POST /{db}/_all_docs/queries
pub(crate) async fn queries(
    state: AppState,
    db: String,
    listing: Listing,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed("POST"));
    }
    require_json_content_type(request.headers())?;
    let user = crate::base::auth::user_of(&request);
    // The database first: a missing one is a 404, not a body's error.
    state.open(&db, &user).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let queries = match body.get("queries") {
        Some(Value::Array(queries)) => queries.clone(),
        Some(_) => {
            return Err(ApiError::bad_request("`queries` member must be an array."));
        }
        None => {
            return Err(ApiError::bad_request(
                "POST body must include `queries` parameter.",
            ));
        }
    };
    state.config.limits.check_items(queries.len(), "queries")?;
    let mut checked: Vec<Map<String, Value>> = Vec::with_capacity(queries.len());
    for query in queries {
        let Value::Object(query) = query else {
            return Err(ApiError::bad_request("Each query must be an object."));
        };
        all_docs_options(&Query::default(), &query)?;
        checked.push(query);
    }
    let (mut writer, answer) = BodyWriter::channel();
    tokio::spawn(async move {
        let written = async {
            writer.write(b"{\"results\":[\n").await?;
            for (i, query) in checked.into_iter().enumerate() {
                if i > 0 {
                    writer.write(b",\n").await?;
                }
                let one = Request::builder()
                    .method(Method::POST)
                    .header(header::CONTENT_TYPE, "application/json")
                    .extension(user.clone())
                    .body(Body::from(ejson::to_vec(&Value::Object(query))))
                    .map_err(|e| Stop::Failed(e.to_string()))?;
                let response = listing.answer(state.clone(), db.clone(), one).await?;
                let mut frames = response.into_body().into_data_stream();
                let mut tail = Vec::new();
                while let Some(chunk) = frames.next().await {
                    let chunk = chunk.map_err(|e| Stop::Failed(e.to_string()))?;
                    // Each answer's closing newline is the separator's job.
                    writer.write(&tail).await?;
                    tail = chunk.to_vec();
                }
                while tail.last() == Some(&b'\n') {
                    tail.pop();
                }
                writer.write(&tail).await?;
            }
            writer.write(b"\n]}\n").await?;
            Ok::<(), Stop>(())
        }
        .await;
        writer.close(written).await;
    });
    let mut response = Response::new(answer);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
