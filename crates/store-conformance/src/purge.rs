//! Purge through the public operations: the purge infos CouchDB keeps,
//! up to their limit, across a reopen. (Purge's effect on the stored rows
//! is checked beside each backend's rows.)

use store::{PurgeRequest, StoreOptions};

use crate::Backend;
use crate::common::TempStore;

fn request(id: &str, revs: &[&str]) -> PurgeRequest {
    PurgeRequest {
        id: id.into(),
        revs: revs.iter().map(|r| crate::common::rev(r)).collect(),
        recorded: revs.iter().map(|r| r.to_string()).collect(),
    }
}

pub async fn purge_infos_are_kept_up_to_the_limit_and_survive_a_reopen(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("t").await;
    assert_eq!(
        db.purged_infos_limit().await.unwrap(),
        store::DEFAULT_PURGED_INFOS_LIMIT
    );
    assert!(db.purge(Vec::new()).await.unwrap().is_empty());
    assert_eq!(db.info().await.unwrap().purge_seq, 0);
    for i in 0..5 {
        let mut req = request(&format!("d{i}"), &["1-a"]);
        req.recorded.push("0-x".into());
        db.purge(vec![req]).await.unwrap();
    }
    let infos = db.purge_infos().await.unwrap();
    assert_eq!(infos.len(), 5);
    assert_eq!((infos[0].purge_seq, infos[0].id.as_str()), (1, "d0"));
    assert_eq!(infos[0].revs, ["1-a", "0-x"]);
    assert_eq!(infos[0].uuid.len(), 32);
    assert!(db.set_purged_infos_limit(0).await.is_err());
    db.set_purged_infos_limit(2).await.unwrap();
    let seqs: Vec<u64> = db
        .purge_infos()
        .await
        .unwrap()
        .iter()
        .map(|i| i.purge_seq)
        .collect();
    assert_eq!(seqs, [4, 5]);
    db.purge(vec![request("d5", &["1-a"])]).await.unwrap();
    t.store.close_all().await;

    let db = t.reopen(StoreOptions::default()).db("t").await.unwrap();
    assert_eq!(db.purged_infos_limit().await.unwrap(), 2);
    let seqs: Vec<u64> = db
        .purge_infos()
        .await
        .unwrap()
        .iter()
        .map(|i| i.purge_seq)
        .collect();
    assert_eq!(seqs, [5, 6]);
    assert_eq!(db.info().await.unwrap().purge_seq, 6);
}
