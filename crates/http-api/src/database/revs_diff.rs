//! `POST /{db}/_revs_diff` and `POST /{db}/_missing_revs`: which of the
//! revisions a peer names this database lacks.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use wire::rows::{Entries, MissingRevsAnswer, RevsDiffAnswer, RevsDiffEntry};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::read_json_object;
use crate::base::params::rev_list;
use crate::base::response::json_response;

/// # POST /{db}/_revs_diff and POST /{db}/_missing_revs
pub(crate) async fn revs_diff(
    state: AppState,
    db: String,
    request: Request,
    missing_revs_shape: bool,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let mut asked = Vec::with_capacity(body.len());
    let mut revisions = 0;
    for (id, revs) in body {
        let revs = rev_list(&revs, "Each document's revisions")?;
        revisions += revs.len();
        state.config.limits.check_items(revisions, "revisions")?;
        asked.push((id, revs));
    }
    let diffs = database.revs_diff(asked).await?;
    if missing_revs_shape {
        let missing_revs = diffs
            .into_iter()
            .map(|(id, diff)| (id, diff.missing))
            .collect();
        let answer = MissingRevsAnswer {
            missing_revs: Entries(missing_revs),
        };
        return Ok(json_response(StatusCode::OK, &answer));
    }
    let answer: RevsDiffAnswer = Entries(
        diffs
            .into_iter()
            .map(|(id, diff)| {
                let entry = RevsDiffEntry {
                    missing: diff.missing,
                    possible_ancestors: diff.possible_ancestors,
                };
                (id, entry)
            })
            .collect(),
    );
    Ok(json_response(StatusCode::OK, &answer))
}
