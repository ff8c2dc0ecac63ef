//! A row of the table and its makers: the statuses each role gets, and
//! whether CouchDB answers the same.

use serde_json::Value;

/// One route: method, path (`{db}`, `{role}`, `{self}` and the users'
/// names are filled in), body, and the status each role gets (`N`
/// roles); `couchdb`: CouchDB gives the same answers.
pub(crate) struct Row<const N: usize = 5> {
    pub(crate) method: &'static str,
    pub(crate) path: String,
    pub(crate) body: Option<Value>,
    pub(crate) expect: [u16; N],
    pub(crate) couchdb: bool,
}

pub(crate) fn row(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    Row {
        method,
        path: path.into(),
        body,
        expect,
        couchdb: true,
    }
}

/// A row whose answers differ on CouchDB (which leaks, or answers 500).
pub(crate) fn stricter(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    Row {
        couchdb: false,
        ..row(method, path, body, expect)
    }
}

/// A row for a feature the reference CouchDB runs without (its Nouveau needs a
/// separate Java service, so its search routes answer 404 there).
pub(crate) fn beyond_reference(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    // Left out of the comparison as a stricter row is, for another reason.
    stricter(method, path, body, expect)
}

pub(crate) const OPEN: [u16; 5] = [401, 403, 200, 200, 200];
pub(crate) const CREATED: [u16; 5] = [401, 403, 201, 201, 201];
pub(crate) const SERVER_ADMIN: [u16; 5] = [401, 401, 401, 401, 200];
