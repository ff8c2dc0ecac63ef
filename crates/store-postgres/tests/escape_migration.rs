//! The migration that began storing strings escaped (U+0000 as U+0001
//! U+0001, U+0001 as U+0001 U+0002): rows written before it, whose strings
//! held U+0001 as it is, read back the same after it, and ids that would
//! clash on the way (`x` U+0001, `x` U+0001 U+0002) are both kept. Run when
//! `RECLINER_TEST_POSTGRES` holds a server's URL; skipped otherwise.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

use serde_json::json;
use store::{AllDocsQuery, DocInput, Store, StoreOptions};
use store_postgres::PostgresStore;

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

fn open(url: &str, schema: &str, dir: &std::path::Path) -> Store {
    PostgresStore::connect_in_schema(url, schema, dir.to_path_buf(), Default::default())
        .expect("connect to the test server")
        .into_store(dir.to_path_buf(), StoreOptions::default())
}

/// Runs `sql` in `schema` on a thread of its own (the client blocks on a
/// runtime of its own).
fn run_sql(url: &str, schema: &str, sql: &str) {
    let (url, sql) = (url.to_string(), sql.to_string());
    let schema = schema.to_string();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("SET search_path = \"{schema}\"; {sql}"))
            .unwrap();
    })
    .join()
    .unwrap();
}

/// Undoes the escape of every escaped column (shortest strings first, so
/// that no unique key clashes), as rows written before it were: no string
/// held U+0000 then, so U+0001 U+0002 stands for U+0001 everywhere.
const UNESCAPE_AS_BEFORE: &str = r#"
DO $$
DECLARE
    target record;
    found record;
BEGIN
    FOR target IN SELECT * FROM (VALUES
        ('recliner_docs', 'id'), ('recliner_docs', 'winner'),
        ('recliner_revs', 'rev'), ('recliner_local', 'id'),
        ('recliner_purges', 'doc_id'), ('recliner_access', 'principal')) AS t(tab, col)
    LOOP
        FOR found IN EXECUTE format(
            'SELECT ctid FROM %I WHERE strpos(%I, chr(1)) > 0 ORDER BY octet_length(%I)',
            target.tab, target.col, target.col)
        LOOP
            EXECUTE format(
                'UPDATE %I SET %I = replace(%I, chr(1) || chr(2), chr(1)) WHERE ctid = $1',
                target.tab, target.col, target.col)
            USING found.ctid;
        END LOOP;
    END LOOP;
END
$$;
UPDATE recliner_schema SET version = 3;
"#;

#[tokio::test(flavor = "multi_thread")]
async fn rows_holding_u0001_before_the_escape_read_back_after_it() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty()) else {
        eprintln!("{URL_VAR} is not set: the escape's migration test is skipped");
        return;
    };
    let schema = format!("t_escape_{}", std::process::id());
    let dir = std::env::temp_dir().join(&schema);
    std::fs::create_dir_all(&dir).unwrap();
    let ids = ["x\u{1}", "x\u{1}\u{2}", "\u{1}", "a\u{1}b", "plain"];

    let store = open(&url, &schema, &dir);
    let db = store
        .create_db_with(
            "old",
            store::CreateDb {
                access: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let docs = ids
        .iter()
        .map(|id| DocInput::from_json(json!({"_id": id, "_access": [id]})).unwrap())
        .collect();
    assert!(
        db.bulk_docs(docs, true)
            .await
            .unwrap()
            .iter()
            .all(|r| r.result.is_ok())
    );
    let replicated = DocInput::from_json(json!({"_id": "r", "_rev": "1-h\u{1}"})).unwrap();
    assert!(
        db.bulk_docs(vec![replicated], false).await.unwrap()[0]
            .result
            .is_ok()
    );
    db.put_local("_local/l\u{1}", json!({"v": 1}))
        .await
        .unwrap();
    store.close_all().await;
    drop((db, store));

    // The rows as a recliner before the escape left them.
    run_sql(&url, &schema, UNESCAPE_AS_BEFORE);

    let store = open(&url, &schema, &dir);
    let db = store.db("old").await.unwrap();
    let listed: Vec<String> = db
        .all_docs(AllDocsQuery::default())
        .await
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut expected: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    expected.push("r".into());
    expected.sort();
    assert_eq!(listed, expected);
    for id in ids {
        assert!(db.get(id, Default::default()).await.is_ok(), "{id:?}");
        let reader = db.for_reader(vec![id.to_string()]);
        let seen: Vec<String> = reader
            .all_docs(AllDocsQuery::default())
            .await
            .unwrap()
            .rows
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(seen, [id], "{id:?}'s access");
    }
    let r = db
        .get("r", Default::default())
        .await
        .unwrap()
        .to_value()
        .unwrap();
    assert_eq!(r["_rev"], json!("1-h\u{1}"));
    assert_eq!(db.get_local("_local/l\u{1}").await.unwrap()["v"], json!(1));
    store.close_all().await;
    drop((db, store));
    let _ = store_postgres::drop_schema(&url, &schema);
    let _ = std::fs::remove_dir_all(&dir);
}
