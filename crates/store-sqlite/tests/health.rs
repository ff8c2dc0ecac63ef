//! The health of a data folder of SQLite files (`GET /_up`).

#![allow(clippy::unwrap_used)]

use store::Health;

#[tokio::test]
async fn a_writable_data_folder_is_healthy_and_a_missing_one_is_not() {
    let dir = std::env::temp_dir().join(format!("recliner-health-{}", uuid::Uuid::new_v4()));
    let store = store_sqlite::open(&dir).unwrap();
    assert_eq!(
        store.health().await,
        Health {
            read: Ok(()),
            write: Ok(())
        }
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let health = store.health().await;
    assert!(health.read.is_err() && health.write.is_err(), "{health:?}");
}
