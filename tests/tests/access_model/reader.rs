//! One reader's check: what they see of the model, worked out once, then
//! every read route asked as them, route family by route family.

use std::collections::BTreeSet;

use recliner_tests::SplitMix;
use serde_json::Value;

use crate::changes::{check_changes, check_pending};
use crate::documents::{
    check_all_docs, check_all_docs_keys, check_all_docs_page, check_db_info, sample_ids,
};
use crate::findings::{Asked, Findings, scan_for_leaks};
use crate::mango::check_find;
use crate::model::{Model, Person, Sight, sight};
use crate::revisions::{check_bulk_get, check_by_id, check_revs_diff};
use crate::search::check_searches;
use crate::views::check_view;
use crate::world::World;

/// What one reader (a member or an admin of either kind) sees of the
/// model, as every route family's check needs it.
pub(crate) struct Reader<'a> {
    pub(crate) world: &'a World,
    pub(crate) model: &'a Model,
    pub(crate) who: &'static Person,
    /// The live documents they read.
    pub(crate) live: BTreeSet<String>,
    /// What their listings hold: [`Reader::live`], and the design
    /// documents for admins.
    pub(crate) listed: BTreeSet<String>,
    /// The documents [`Sight::Faded`] for them.
    pub(crate) faded: BTreeSet<String>,
    /// What their feed holds, each once.
    pub(crate) in_feed: BTreeSet<String>,
    /// How many deletions they see.
    pub(crate) deleted_count: usize,
}

/// Every read route as one reader (a member or an admin of either kind);
/// answers the `last_seq` of their feed.
pub(crate) async fn check_reader(
    world: &World,
    who: &'static Person,
    found: &mut Findings,
) -> Value {
    let model = &world.model;
    let client = world.client(who.name);
    let mut asked = Asked {
        who,
        client,
        texts: Vec::new(),
    };
    let name = who.name;
    let live = model.live_for(who);
    let mut listed = live.clone();
    if who.is_admin() {
        listed.extend(model.design.iter().cloned());
    }
    let faded: BTreeSet<String> = model
        .docs
        .iter()
        .filter(|(_, d)| sight(who, d) == Sight::Faded)
        .map(|(id, _)| id.clone())
        .collect();
    let in_feed: BTreeSet<String> = model
        .docs
        .iter()
        .filter(|(_, d)| !matches!(sight(who, d), Sight::Never | Sight::Faded))
        .map(|(id, _)| id.clone())
        .chain(
            who.is_admin()
                .then(|| model.design.clone())
                .into_iter()
                .flatten(),
        )
        .collect();
    let deleted_count = model
        .docs
        .values()
        .filter(|d| sight(who, d) == Sight::Deleted)
        .count();
    let salt = (name.len() as u64) << 32 | model.next_id as u64;
    let mut rng = SplitMix(world.seed ^ salt);
    let reader = Reader {
        world,
        model,
        who,
        live,
        listed,
        faded,
        in_feed,
        deleted_count,
    };
    let live = &reader.live;

    // Searches first: after a round of writes, a member's stale search
    // must still be of what they read now (admins may see a stale index).
    check_searches(model, who, live, &mut asked, found).await;

    check_db_info(&reader, &mut asked, found).await;
    check_all_docs(&reader, &mut asked, found).await;
    check_all_docs_page(&reader, &mut asked, found, &mut rng).await;
    let sample = sample_ids(model, &mut rng);
    check_all_docs_keys(&reader, &sample, &mut asked, found).await;
    let tombstones = check_by_id(&reader, &mut asked, found, &mut rng).await;
    check_bulk_get(&reader, &sample, &tombstones, &mut asked, found).await;
    check_revs_diff(&reader, &sample, &tombstones, &mut asked, found).await;
    let (last_seq, feed_len) =
        check_changes(&reader, &sample, &tombstones, &mut asked, found, &mut rng).await;
    check_pending(&reader, feed_len, &mut asked, found, &mut rng).await;

    // The view: design functions are for admins.
    check_view(model, who, live, &mut asked, found).await;

    // `_find`: a JSON index, a scan and `$text`, every page.
    check_find(model, who, live, &mut asked, found, &mut rng).await;

    scan_for_leaks(model, &asked, found);
    last_seq
}
