//! CouchDB's database information object (`GET /db`, `_dbs_info`, a
//! design function's `req.info`).

use serde_json::Value;
use store::Database;
use wire::rows::{ClusterInfo, DbInfo, DbProps, DbSizes};

use crate::base::error::ApiError;

/// CouchDB's `GET /db` object, in the wire's one shape.
pub(crate) async fn db_info(db: &Database) -> Result<DbInfo, ApiError> {
    let info = db.info().await?;
    Ok(DbInfo {
        instance_start_time: info.instance_start_time,
        db_name: info.db_name,
        purge_seq: Value::String(db.seq_string(info.purge_seq)),
        update_seq: Value::String(db.seq_string(info.update_seq)),
        sizes: DbSizes {
            file: info.file_size,
            external: info.external_size,
            active: info.active_size,
        },
        props: DbProps {
            partitioned: db.is_partitioned().then_some(true),
            access: db.has_doc_access().then_some(true),
        },
        doc_del_count: info.doc_del_count,
        doc_count: info.doc_count,
        disk_format_version: 8,
        compact_running: db.compact_running(),
        cluster: ClusterInfo {
            q: u64::from(db.q()),
            n: 1,
            w: 1,
            r: 1,
        },
    })
}

/// [`db_info`] as a JSON value, for answers that embed it.
pub(crate) async fn info_json(db: &Database) -> Result<Value, ApiError> {
    let info = db_info(db).await?;
    serde_json::to_value(info).map_err(|e| ApiError::Internal(e.to_string()))
}
