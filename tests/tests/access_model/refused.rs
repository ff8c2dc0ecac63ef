//! A caller who may not read the database: refused on every route.

use serde_json::{Value, json};

use crate::DB;
use crate::findings::Findings;
use crate::model::{MISSING, Person, Standing, token};
use crate::world::World;

/// Everything a caller who is not a member (or not logged in) may try:
/// refused, with nothing of any document in the answer.
pub(crate) async fn check_refused(world: &World, who: &'static Person, found: &mut Findings) {
    let client = world.client(who.name);
    let status = if who.standing == Standing::Anonymous {
        401
    } else {
        403
    };
    let some: Vec<&String> = world.model.docs.keys().take(5).collect();
    let mut routes: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/{DB}"), None),
        ("GET", format!("/{DB}/_all_docs"), None),
        (
            "POST",
            format!("/{DB}/_all_docs"),
            Some(json!({"keys": some})),
        ),
        ("GET", format!("/{DB}/_changes"), None),
        ("GET", format!("/{DB}/_changes?include_docs=true"), None),
        (
            "POST",
            format!("/{DB}/_bulk_get"),
            Some(json!({"docs": some.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()})),
        ),
        (
            "POST",
            format!("/{DB}/_revs_diff"),
            Some(json!({"d000": ["1-0123456789abcdef0123456789abcdef"]})),
        ),
        (
            "POST",
            format!("/{DB}/_find"),
            Some(json!({"selector": {"$text": "apple"}})),
        ),
        (
            "POST",
            format!("/{DB}/_find"),
            Some(json!({"selector": {"n": {"$gte": 0}}})),
        ),
        ("GET", format!("/{DB}/_design/s/_view/by_id"), None),
        ("GET", format!("/{DB}/_design/s/_nouveau/all?q=*:*"), None),
        (
            "GET",
            format!("/{DB}/_design/s/_nouveau/all?q=*:*&update=false"),
            None,
        ),
        ("GET", format!("/{DB}/_design/s/_search/all?q=*:*"), None),
        (
            "GET",
            format!("/{DB}/_design/s/_search/all?q=*:*&stale=ok"),
            None,
        ),
    ];
    for id in world.model.docs.keys() {
        routes.push(("GET", format!("/{DB}/{id}"), None));
    }
    let missing = client.get(&format!("/{DB}/{}", MISSING[0])).await.text;
    for (method, path, body) in routes {
        let reply = client.send(method, &path, body, &[]).await;
        let route = format!("{method} {path}");
        if reply.status != status {
            found.mismatch(
                who.name,
                &route,
                format!("{} (expected {status}): {}", reply.status, reply.text),
            );
        }
        // A document's refusal is a missing one's, whoever it names.
        let one_doc = !path.contains("/_") && path.len() > DB.len() + 2;
        if one_doc && reply.text != missing {
            found.leak(
                who.name,
                &route,
                format!("{}, where a missing id's refusal is {missing}", reply.text),
            );
        }
        for (id, _) in world.model.docs.iter() {
            if reply.text.contains(&format!("\"{id}\"")) || reply.text.contains(&token(id)) {
                found.leak(who.name, &route, format!("{id} shows: {}", reply.text));
            }
        }
    }
}
