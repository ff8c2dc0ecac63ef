//! Creating, listing, opening and deleting databases.

use crate::Backend;

use crate::common::{TempStore, put};
use serde_json::json;
use store::StoreError;

pub async fn a_database_is_created_once_listed_and_deleted(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    t.db("alpha").await;
    t.db("a/b$c").await;
    assert!(matches!(
        t.store.create_db("alpha").await,
        Err(StoreError::DbExists(_))
    ));
    assert_eq!(t.store.all_dbs().await.unwrap(), ["a/b$c", "alpha"]);
    t.store.delete_db("alpha").await.unwrap();
    assert!(matches!(
        t.store.db("alpha").await,
        Err(StoreError::DbNotFound(_))
    ));
    assert!(matches!(
        t.store.delete_db("alpha").await,
        Err(StoreError::DbNotFound(_))
    ));
    assert_eq!(t.store.all_dbs().await.unwrap(), ["a/b$c"]);
}

pub async fn illegal_names_are_refused_with_couchdbs_reason(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    for bad in ["Upper", "1abc", "_private", "", "has space"] {
        match t.store.create_db(bad).await {
            Err(e @ StoreError::IllegalDbName(_)) => {
                assert!(e.to_string().contains("Must begin with a letter."), "{e}")
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    t.store.create_db("_replicator").await.unwrap();
    t.store.create_db("_users").await.unwrap();
}

pub async fn a_deleted_database_comes_back_empty_when_recreated(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("cycle").await;
    put(&db, json!({"_id": "x"})).await;
    t.store.delete_db("cycle").await.unwrap();
    assert!(matches!(
        db.get("x", Default::default()).await,
        Err(StoreError::DbNotFound(_))
    ));
    assert!(
        db.bulk_docs(vec![crate::common::doc(json!({"_id": "y"}))], true)
            .await
            .is_err()
    );
    let again = t.db("cycle").await;
    assert_eq!(again.info().await.unwrap().doc_count, 0);
}

pub async fn identity_and_data_survive_reopening_the_store(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("keep").await;
    let rev = put(&db, json!({"_id": "x", "v": 1})).await;
    let (uuid, start) = (db.uuid().to_string(), db.instance_start_time().to_string());
    t.store.close_all().await;

    let reopened = t.reopen(Default::default());
    let db = reopened.db("keep").await.unwrap();
    assert_eq!(db.uuid(), uuid);
    assert_eq!(
        db.instance_start_time(),
        start,
        "instance_start_time never changes"
    );
    let doc = crate::common::get(&db, "x").await;
    assert_eq!(doc["_rev"], rev.as_str());
    assert_eq!(db.info().await.unwrap().update_seq, 1);
}

pub async fn info_reports_counts_and_sizes(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("info").await;
    let r = put(&db, json!({"_id": "a", "pad": "x".repeat(100)})).await;
    put(&db, json!({"_id": "b"})).await;
    put(&db, json!({"_id": "a", "_rev": r, "_deleted": true})).await;
    let info = db.info().await.unwrap();
    assert_eq!(info.db_name, "info");
    assert_eq!(
        (info.doc_count, info.doc_del_count, info.update_seq),
        (1, 1, 3)
    );
    assert!(info.file_size > 0 && info.active_size > 0);
    assert_eq!(
        info.external_size, 2,
        "only the live winner's body `{{}}` counts"
    );
}

pub async fn revs_limit_and_security_are_stored(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("meta").await;
    assert_eq!(db.revs_limit().await.unwrap(), 1000);
    db.set_revs_limit(3).await.unwrap();
    assert_eq!(db.revs_limit().await.unwrap(), 3);
    assert!(db.set_revs_limit(0).await.is_err());
    assert_eq!(*db.security().await.unwrap(), json!({}));
    let sec = json!({"admins": {"names": ["a"]}, "members": {"roles": []}});
    db.set_security(sec.clone()).await.unwrap();
    assert_eq!(*db.security().await.unwrap(), sec);
    assert!(db.set_security(json!([1])).await.is_err());
}

pub async fn full_durability_and_ensure_full_commit_work(backend: &dyn Backend) {
    let t = TempStore::with_options(
        backend,
        store::StoreOptions {
            durability: store::Durability::Full,
            ..Default::default()
        },
    );
    let store = &t.store;
    let db = store.create_db("sync").await.unwrap();
    put(&db, json!({"_id": "x"})).await;
    db.ensure_full_commit().await.unwrap();
    store.delete_db("sync").await.unwrap();
    assert!(matches!(
        db.ensure_full_commit().await,
        Err(StoreError::DbNotFound(_))
    ));
}
