//! Logging in to a remote peer as CouchDB's replicator does: with
//! credentials, the first request to the peer is `POST /_session`; when the
//! peer answers with an `AuthSession` cookie, every request carries the
//! cookie instead of the password (no password hashing on the peer per
//! request), the peer's renewed cookies are kept, and a 401 on a cookie
//! logs in again. A peer without cookie auth gets basic auth throughout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use md5::Digest as _;

use reqwest::Url;
use reqwest::header::{HeaderMap, SET_COOKIE};

use crate::spec::BasicAuth;

/// How requests to one peer authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Not logged in yet (or the cookie was refused): log in first.
    LoggedOut,
    /// The current `AuthSession` value.
    Cookie(String),
    /// The peer offers no cookie login: basic auth on every request.
    Basic,
}

/// One peer's login, shared by every request of a job.
#[derive(Debug)]
pub struct Session {
    state: Mutex<State>,
    /// One login at a time; the others wait for its cookie.
    login: tokio::sync::Mutex<()>,
}

/// How one request authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Cookie(String),
    Basic,
}

/// Logins kept for the whole process by peer server and credentials, so
/// that a job that stops and starts again (a parked job does at every
/// change) keeps its cookie instead of logging in again: a login costs the
/// peer a password hash. Never more than this many are kept.
const MAX_SHARED: usize = 10_000;

type SessionKey = (String, String, [u8; 16]);

/// The login shared by every job that reaches `db_url`'s server with
/// `auth` (the password is kept as a digest in the key, not as text).
pub(crate) fn shared(db_url: &Url, auth: Option<&BasicAuth>) -> Arc<Session> {
    static SESSIONS: OnceLock<Mutex<HashMap<SessionKey, Arc<Session>>>> = OnceLock::new();
    let Some(auth) = auth else {
        return Arc::new(Session::new());
    };
    let digest: [u8; 16] = md5::Md5::digest(auth.password.as_bytes()).into();
    let key = (
        db_url.origin().ascii_serialization(),
        auth.username.clone(),
        digest,
    );
    let mut sessions = SESSIONS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if sessions.len() >= MAX_SHARED && !sessions.contains_key(&key) {
        sessions.clear();
    }
    sessions
        .entry(key)
        .or_insert_with(|| Arc::new(Session::new()))
        .clone()
}

impl Session {
    pub(crate) fn new() -> Session {
        Session {
            state: Mutex::new(State::LoggedOut),
            login: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> State {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
    }

    /// The credential for the next request, logging in first if needed.
    pub(crate) async fn credential(
        &self,
        client: &reqwest::Client,
        db_url: &Url,
        auth: &BasicAuth,
        timeout: std::time::Duration,
    ) -> Credential {
        if let Some(ready) = self.ready() {
            return ready;
        }
        let _one = self.login.lock().await;
        if let Some(ready) = self.ready() {
            return ready;
        }
        let state = match login(client, db_url, auth, timeout).await {
            Some(cookie) => State::Cookie(cookie),
            None => State::Basic,
        };
        self.set(state);
        self.ready().unwrap_or(Credential::Basic)
    }

    fn ready(&self) -> Option<Credential> {
        match self.state() {
            State::LoggedOut => None,
            State::Cookie(c) => Some(Credential::Cookie(c)),
            State::Basic => Some(Credential::Basic),
        }
    }

    /// After an answer: keeps a renewed cookie, and forgets a refused one
    /// (a 401 to a request that carried it) so the next request logs in.
    pub(crate) fn observe(&self, used: &Credential, status: u16, headers: &HeaderMap) {
        if let Some(renewed) = auth_session(headers) {
            if matches!(self.state(), State::Cookie(_)) {
                self.set(State::Cookie(renewed));
            }
            return;
        }
        if status == 401
            && let Credential::Cookie(sent) = used
            && self.state() == State::Cookie(sent.clone())
        {
            self.set(State::LoggedOut);
        }
    }
}

/// The `AuthSession` value a `Set-Cookie` header gives, if non-empty.
fn auth_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .filter_map(|pair| pair.trim().strip_prefix("AuthSession="))
        .find(|value| !value.is_empty())
        .map(str::to_string)
}

/// `POST /_session` beside the database (`http://h/prefix/db/` →
/// `http://h/prefix/_session`): the cookie, or `None` when the peer has no
/// cookie login (404, 405...) or refuses it (basic auth then says why).
async fn login(
    client: &reqwest::Client,
    db_url: &Url,
    auth: &BasicAuth,
    timeout: std::time::Duration,
) -> Option<String> {
    let url = db_url.join("../_session").ok()?;
    let body = serde_json::json!({"name": auth.username, "password": auth.password});
    let response = client
        .post(url)
        .timeout(timeout)
        .header("accept", "application/json")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        tracing::debug!(
            status = response.status().as_u16(),
            "no cookie login at the peer; basic auth"
        );
        return None;
    }
    auth_session(response.headers())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(SET_COOKIE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn renewed_cookies_are_kept_and_a_refused_one_logs_in_again() {
        let session = Session::new();
        session.set(State::Cookie("one".into()));
        session.observe(
            &Credential::Cookie("one".into()),
            200,
            &with_cookie("AuthSession=two; Version=1; Path=/; HttpOnly"),
        );
        assert_eq!(session.ready(), Some(Credential::Cookie("two".into())));
        // A 401 to an older cookie does not throw away the newer one.
        session.observe(&Credential::Cookie("one".into()), 401, &HeaderMap::new());
        assert_eq!(session.ready(), Some(Credential::Cookie("two".into())));
        session.observe(&Credential::Cookie("two".into()), 401, &HeaderMap::new());
        assert_eq!(session.ready(), None);
        // A logout's empty cookie is not a session.
        assert_eq!(auth_session(&with_cookie("AuthSession=; Path=/")), None);
    }

    #[test]
    fn the_session_url_sits_beside_the_database() {
        let db = Url::parse("http://h:5984/prefix/db%2Fx/").unwrap();
        assert_eq!(
            db.join("../_session").unwrap().as_str(),
            "http://h:5984/prefix/_session"
        );
        let db = Url::parse("http://h:5984/db/").unwrap();
        assert_eq!(
            db.join("../_session").unwrap().as_str(),
            "http://h:5984/_session"
        );
    }
}
