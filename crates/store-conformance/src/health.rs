//! The store's health (`GET /_up`): the backend and the node's data folder.

use store::Health;

use crate::Backend;
use crate::common::TempStore;

pub async fn a_writable_data_folder_is_healthy_and_a_missing_one_is_not(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let store = &t.store;
    assert_eq!(
        store.health().await,
        Health {
            read: Ok(()),
            write: Ok(())
        }
    );
    std::fs::remove_dir_all(&t.dir).unwrap();
    let health = store.health().await;
    assert!(health.read.is_err() && health.write.is_err(), "{health:?}");
}
