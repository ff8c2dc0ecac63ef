//! `/_session`: cookie login and logout, and who the caller is. CouchDB's
//! replicator and PouchDB log in here and then send the `AuthSession`
//! cookie instead of a password on every request.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;

/// # GET|HEAD|POST|DELETE /_session
pub(crate) async fn session(State(state): State<AppState>, request: Request<Body>) -> Response {
    let result = match *request.method() {
        axum::http::Method::GET | axum::http::Method::HEAD => whoami(&state, &request),
        axum::http::Method::POST => login(&state, request).await,
        axum::http::Method::DELETE => Ok(logout(&state, &request)),
        _ => Err(ApiError::MethodNotAllowed("GET,HEAD,POST,DELETE")),
    };
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

fn whoami(state: &AppState, request: &Request<Body>) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(request);
    let query = Query::parse(request.uri());
    if user.name.is_none() && query.get("basic") == Some("true") && !user.is_server_admin() {
        return Err(ApiError::Unauthorized("Please login.".into()));
    }
    let mut info = json!({"authentication_handlers": state.auth.handler_names()});
    if let Some(handler) = user.handler {
        info["authenticated"] = Value::from(handler);
    }
    if let Some(db) = access::configured_authentication_db() {
        info["authentication_db"] = Value::from(&*db);
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"ok": true, "userCtx": user.to_json(), "info": info}),
    ))
}

/// The name and password of a login form or JSON body.
fn credentials(content_type: &str, body: &[u8]) -> Result<(String, String), ApiError> {
    let fields: Vec<(String, String)> = if content_type
        .starts_with("application/x-www-form-urlencoded")
    {
        form_urlencoded::parse(body).into_owned().collect()
    } else if content_type.starts_with("application/json") {
        match crate::base::json_body::parse_json(body)? {
            Value::Object(map) => map
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k, s)),
                    Value::Null => None,
                    other => Some((k, other.to_string())),
                })
                .collect(),
            _ => return Err(ApiError::bad_request("Request body must be a JSON object")),
        }
    } else {
        return Err(ApiError::BadContentType(
            "Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'".into(),
        ));
    };
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let name = match (get("name"), get("username")) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::bad_request(
                "request body contains different usernames",
            ));
        }
        (Some(name), _) | (None, Some(name)) => name,
        (None, None) => {
            return Err(ApiError::bad_request(
                "request body must contain a username",
            ));
        }
    };
    Ok((name, get("password").unwrap_or_default()))
}

/// A login body is small: anything larger is not one.
const MAX_LOGIN_BODY: usize = 64 << 10;

async fn login(state: &AppState, request: Request<Body>) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let peer = crate::base::auth::peer_of(&request);
    let secure = request.extensions().get::<crate::Https>().is_some();
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = axum::body::to_bytes(request.into_body(), MAX_LOGIN_BODY)
        .await
        .map_err(|_| ApiError::RequestTooLarge)?;
    let (name, password) = credentials(&content_type, &body)?;
    match state
        .auth
        .login(state.databases.for_logins(), &name, &password, peer)
        .await?
    {
        Some((roles, salt)) => {
            let cookie = state.auth.session_cookie(&name, &salt, secure);
            let body = json!({"ok": true, "name": name, "roles": roles});
            Ok(with_cookie(
                redirect_or(StatusCode::OK, query.get("next"), &body),
                &cookie,
            ))
        }
        None => {
            let cookie = state.auth.cleared_cookie(secure);
            let body = json!({"error": "unauthorized", "reason": "Name or password is incorrect."});
            Ok(with_cookie(
                redirect_or(StatusCode::UNAUTHORIZED, query.get("fail"), &body),
                &cookie,
            ))
        }
    }
}

fn logout(state: &AppState, request: &Request<Body>) -> Response {
    let query = Query::parse(request.uri());
    let secure = request.extensions().get::<crate::Https>().is_some();
    let cookie = state.auth.cleared_cookie(secure);
    with_cookie(
        redirect_or(StatusCode::OK, query.get("next"), &json!({"ok": true})),
        &cookie,
    )
}

/// The JSON answer, or a 302 to `next`/`fail` when the form asked for one.
fn redirect_or(status: StatusCode, location: Option<&str>, body: &Value) -> Response {
    // Only a path on this server: never an open redirect to another site.
    match location.filter(|l| l.starts_with('/') && !l.starts_with("//")) {
        Some(location) => {
            let mut response = json_response(StatusCode::FOUND, body);
            if let Ok(value) = HeaderValue::from_str(location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        None => json_response(status, body),
    }
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_come_as_json_or_forms_with_name_or_username() {
        assert_eq!(
            credentials("application/json", br#"{"name":"a","password":"p"}"#).unwrap(),
            ("a".into(), "p".into())
        );
        assert_eq!(
            credentials(
                "application/x-www-form-urlencoded",
                b"username=a&password=p%26q"
            )
            .unwrap(),
            ("a".into(), "p&q".into())
        );
        assert!(credentials("application/json", br#"{"name":"a","username":"b"}"#).is_err());
        assert!(credentials("application/json", br#"{"password":"p"}"#).is_err());
        assert!(matches!(
            credentials("text/plain", b"x"),
            Err(ApiError::BadContentType(_))
        ));
    }
}
