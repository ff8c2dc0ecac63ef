//! CouchDB's database information object (`GET /db`, `_dbs_info`, a
//! design function's `req.info`).

use serde_json::{Value, json};
use store::Database;

use crate::base::error::ApiError;

/// CouchDB's `GET /db` object.
pub(crate) async fn info_json(db: &Database) -> Result<Value, ApiError> {
    let info = db.info().await?;
    Ok(json!({
        "instance_start_time": info.instance_start_time,
        "db_name": info.db_name,
        "purge_seq": db.seq_string(info.purge_seq),
        "update_seq": db.seq_string(info.update_seq),
        "sizes": {"file": info.file_size, "external": info.external_size, "active": info.active_size},
        "props": if db.is_partitioned() { json!({"partitioned": true}) } else { json!({}) },
        "doc_del_count": info.doc_del_count,
        "doc_count": info.doc_count,
        "disk_format_version": 8,
        "compact_running": db.compact_running(),
        "cluster": {"q": 1, "n": 1, "w": 1, "r": 1},
    }))
}
