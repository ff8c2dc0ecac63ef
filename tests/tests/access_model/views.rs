//! The design document's view, as one reader asks it: rows, `_sum` and
//! `_count` for admins, refused to members.

use std::collections::BTreeSet;

use serde_json::json;

use crate::DB;
use crate::findings::{Asked, Findings, field_of, try_json};
use crate::model::{Model, Person};

pub(crate) async fn check_view(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let paths = [
        format!("/{DB}/_design/s/_view/by_id?reduce=false"),
        format!("/{DB}/_design/s/_view/by_id"),
        format!("/{DB}/_design/s/_view/count"),
    ];
    if !who.is_admin() {
        for path in paths {
            let reply = asked.get(&path).await;
            found.equal(
                name,
                &path,
                &json!([reply.status, try_json(&reply)]),
                &json!([403, {"error": "forbidden", "reason": "access denied"}]),
            );
        }
        return;
    }
    let rows = asked.get(&paths[0]).await;
    let rows = try_json(&rows);
    found.ids(
        name,
        "_view rows",
        &field_of(&rows["rows"], "id"),
        live,
        live,
    );
    found.equal(
        name,
        "_view total_rows",
        &rows["total_rows"],
        &json!(live.len()),
    );
    let sum: i64 = live.iter().map(|id| model.docs[id].n).sum();
    let summed = asked.get(&paths[1]).await;
    found.equal(
        name,
        "_view _sum",
        &try_json(&summed),
        &json!({"rows": [{"key": null, "value": sum}]}),
    );
    let counted = asked.get(&paths[2]).await;
    found.equal(
        name,
        "_view _count",
        &try_json(&counted),
        &json!({"rows": [{"key": null, "value": live.len()}]}),
    );
}
