//! `POST /_nouveau_analyze` and `GET|POST /_search_analyze`: the tokens an
//! analyzer makes of a text, as CouchDB's two search services answer them
//! (for server admins: every `/_name` route not listed as open is theirs).

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::params::Query;
use crate::base::response::json_response;

fn tokens(analyzer: &str, text: &str) -> Result<Response, ApiError> {
    let tokens =
        search::analyze(analyzer, text).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &json!({ "tokens": tokens })))
}

/// # POST /_nouveau_analyze
/// `{"analyzer": NAME, "text": TEXT}` → `{"tokens": [...]}`.
pub(crate) async fn nouveau(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match (field("analyzer"), field("text")) {
        (Some(analyzer), Some(text)) => tokens(analyzer, text),
        _ => Err(ApiError::bad_request(
            "'text' and 'analyzer' fields must be non-empty strings",
        )),
    }
}

/// # GET|POST /_search_analyze
/// `analyzer` and `text` from the query string (GET) or a JSON body
/// (POST); an analyzer given as an object (`{"name": "perfield", "default":
/// ...}`) analyzes with its default.
pub(crate) async fn search(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let params: Map<String, Value> = if request.method() == Method::POST {
        require_json_content_type(request.headers())?;
        read_json_object(request.into_body(), &state.config).await?
    } else {
        let query = Query::parse(request.uri());
        ["analyzer", "text"]
            .iter()
            .filter_map(|k| {
                query
                    .get(k)
                    .map(|v| (k.to_string(), Value::String(v.into())))
            })
            .collect()
    };
    let analyzer = match params.get("analyzer") {
        None => return Err(ApiError::bad_request("analyzer parameter is mandatory")),
        Some(Value::String(name)) => name.clone(),
        Some(Value::Object(spec)) => match spec.get("default").or_else(|| spec.get("name")) {
            Some(Value::String(name)) => name.clone(),
            _ => "standard".to_string(),
        },
        Some(_) => {
            return Err(ApiError::bad_request(
                "analyzer parameter must be a string or an object",
            ));
        }
    };
    let text = match params.get("text") {
        None => return Err(ApiError::bad_request("text parameter is mandatory")),
        Some(Value::String(text)) => text.clone(),
        Some(_) => return Err(ApiError::bad_request("text parameter must be a string")),
    };
    tokens(&analyzer, &text)
}
