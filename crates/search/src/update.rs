//! Keeping search indexes up to date: the open indexes of the node, one
//! update per index at a time, each fed the database's purges and then
//! its changes since the last commit through the design document's index
//! function, as views are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use design_functions::Engine;
use design_functions::search::{FieldKind, IndexedField};
use mango::text::TextKind;
use store::{ChangesQuery, Database};

use crate::SearchError;
use crate::definition::IndexDefinition;
use crate::index::{Entry, SearchIndex, Writer};

/// Documents given to the index function per call.
const BATCH: usize = 500;
/// How often an index catching up commits (Nouveau's and Clouseau's
/// commit interval is 30 s): a crash loses at most this much work, and a
/// commit, which waits for the engine to write out everything it was given,
/// stalls the build only this often.
const COMMIT_INTERVAL: Duration = Duration::from_secs(10);

/// The node's open search indexes, keyed by (database uuid, signature),
/// and the updates running now.
#[derive(Debug, Clone, Default)]
pub struct Searches {
    open: Arc<Mutex<HashMap<(String, String), Slot>>>,
    running: Arc<Mutex<HashMap<(String, String), IndexingTask>>>,
}

/// An index update in progress, as `_active_tasks` shows it
/// (`search_indexer`).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexingTask {
    pub database: String,
    pub design_document: String,
    pub index: String,
    pub changes_done: u64,
    pub total_changes: u64,
    /// Seconds since the Unix epoch.
    pub started_on: u64,
    pub updated_on: u64,
}

impl IndexingTask {
    /// Percent done.
    pub fn progress(&self) -> u64 {
        (self.changes_done * 100)
            .checked_div(self.total_changes)
            .unwrap_or(0)
            .min(100)
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Keeps a running update's task listed while it lives.
struct TaskGuard {
    running: Arc<Mutex<HashMap<(String, String), IndexingTask>>>,
    key: (String, String),
}

impl TaskGuard {
    fn advance(&self, done: u64) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = running.get_mut(&self.key) {
            task.changes_done += done;
            task.updated_on = now();
        }
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

type Slot = Arc<SlotState>;

/// An index once opened, and the turn its updates take.
#[derive(Debug, Default)]
struct SlotState {
    /// The database's name, to forget the index when it is deleted.
    database: String,
    /// Searches that need no update take it without waiting for one.
    index: Mutex<Option<SearchIndex>>,
    /// Held while the index is opened or brought up to date.
    turn: tokio::sync::Mutex<()>,
    /// Why its last update failed, until one succeeds.
    failure: Mutex<Option<String>>,
}

/// The node's search indexes at a glance, for `/_up`: no names, which a
/// caller of `/_up` (anyone) may not see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SearchHealth {
    /// Indexes open on this node.
    pub open: usize,
    /// Updates running now.
    pub updating: usize,
    /// Indexes whose last update failed (the reason is logged).
    pub failing: usize,
}

impl SlotState {
    fn index(&self) -> Option<SearchIndex> {
        self.index.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// An index ready to search (as the database handle it was asked through
/// may read it), and what bringing it up to date cost.
#[derive(Debug, Clone)]
pub struct Ready {
    pub index: SearchIndex,
    pub update_latency: Duration,
}

impl Searches {
    /// The index of `def`, brought up to the database's sequence unless
    /// `update` is false; with `update` false an index never built is
    /// CouchDB's 404.
    pub async fn index(
        &self,
        engine: &Engine,
        database: &Database,
        def: &IndexDefinition,
        update: bool,
    ) -> Result<Ready, SearchError> {
        // Searched as the handle asking may read; updated as a whole.
        let readers: Option<Vec<String>> = database.reader().map(<[String]>::to_vec);
        // A reader limited by `_access` always searches an index brought
        // up to date: what a stale index holds of who may read a document
        // is stale too (a revoked reader would still find it).
        let update = update || readers.is_some();
        let database = database.unscoped();
        let unscoped = self.index_unscoped(engine, &database, def, update).await;
        // Every answer leaves here scoped: no return path can forget it.
        unscoped.map(|ready| Ready {
            index: ready.index.scoped(readers.as_deref()),
            ..ready
        })
    }

    /// The index as a whole (every reader's documents): only for
    /// [`Searches::index`], which scopes it before anyone searches it.
    async fn index_unscoped(
        &self,
        engine: &Engine,
        database: &Database,
        def: &IndexDefinition,
        update: bool,
    ) -> Result<Ready, SearchError> {
        let slot = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            open.entry((database.uuid().to_string(), def.signature.clone()))
                .or_insert_with(|| {
                    Arc::new(SlotState {
                        database: database.name().to_string(),
                        ..SlotState::default()
                    })
                })
                .clone()
        };
        // `update=false` answers from what is committed, even while an
        // update runs.
        if !update && let Some(index) = slot.index() {
            return Ok(Ready {
                index,
                update_latency: Duration::ZERO,
            });
        }
        let _turn = slot.turn.lock().await;
        let updated = self
            .open_and_update(engine, database, def, &slot, update)
            .await;
        let failure = match &updated {
            Err(SearchError::NotFound(_)) | Ok(_) => None,
            Err(e) => {
                tracing::error!(db = %database.name(), ddoc = %def.ddoc.id, index = %def.name, error = %e, "a search index cannot be updated");
                Some(e.to_string())
            }
        };
        *slot.failure.lock().unwrap_or_else(|p| p.into_inner()) = failure;
        updated
    }

    async fn open_and_update(
        &self,
        engine: &Engine,
        database: &Database,
        def: &IndexDefinition,
        slot: &SlotState,
        update: bool,
    ) -> Result<Ready, SearchError> {
        let index = match slot.index() {
            Some(index) => index,
            None => {
                let dir = database.search_index_dir(&def.signature)?;
                if !update && !dir.join("meta.json").exists() {
                    return Err(SearchError::NotFound("not found".into()));
                }
                let (def, uuid) = (def.clone(), database.uuid().to_string());
                let index = blocking(move || SearchIndex::open(Some(&dir), &def, &uuid)).await?;
                *slot.index.lock().unwrap_or_else(|p| p.into_inner()) = Some(index.clone());
                index
            }
        };
        let started = Instant::now();
        let updated = update && catch_up(engine, database, &index, self).await?;
        Ok(Ready {
            index,
            update_latency: if updated {
                started.elapsed()
            } else {
                Duration::ZERO
            },
        })
    }

    /// How many indexes are open, updating, failing.
    pub fn health(&self) -> SearchHealth {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        SearchHealth {
            open: open.values().filter(|slot| slot.index().is_some()).count(),
            updating: self.running.lock().unwrap_or_else(|p| p.into_inner()).len(),
            failing: open
                .values()
                .filter(|slot| {
                    slot.failure
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_some()
                })
                .count(),
        }
    }

    /// Closes the indexes of a deleted database (its files went with it).
    /// An update still running ends on its own and drops what it holds.
    pub fn forget_database(&self, name: &str) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, slot| slot.database != name);
    }

    /// Follows the store's database deletions, forgetting their indexes,
    /// until `stop` changes (or the store's events end).
    pub async fn forget_deleted_databases(
        &self,
        store: &store::Store,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        use tokio::sync::broadcast::error::RecvError;
        let mut events = store.subscribe_db_updates();
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(update) if update.kind == store::db_events::DbEventType::Deleted => {
                        self.forget_database(&update.db);
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.forget_missing(store).await,
                    Err(RecvError::Closed) => break,
                },
                _ = stop.changed() => break,
            }
        }
    }

    /// After missed events: forgets the indexes of databases gone.
    async fn forget_missing(&self, store: &store::Store) {
        let Ok(names) = store.all_dbs().await else {
            return;
        };
        let names: std::collections::HashSet<String> = names.into_iter().collect();
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, slot| names.contains(&slot.database));
    }

    /// The updates running now.
    pub fn tasks(&self) -> Vec<IndexingTask> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut tasks: Vec<IndexingTask> = running.values().cloned().collect();
        tasks.sort_by(|a, b| (&a.database, &a.index).cmp(&(&b.database, &b.index)));
        tasks
    }

    fn start_task(&self, database: &Database, def: &IndexDefinition, total: u64) -> TaskGuard {
        let key = (database.uuid().to_string(), def.signature.clone());
        let started = now();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key.clone(),
                IndexingTask {
                    database: database.name().to_string(),
                    design_document: def.ddoc.id.clone(),
                    index: def.name.clone(),
                    changes_done: 0,
                    total_changes: total,
                    started_on: started,
                    updated_on: started,
                },
            );
        TaskGuard {
            running: self.running.clone(),
            key,
        }
    }

    /// `_nouveau_cleanup`/`_search_cleanup`: deletes the database's search
    /// indexes no design document defines (`keep` holds those in use).
    pub async fn cleanup(&self, database: &Database, keep: &[String]) -> Result<(), SearchError> {
        for signature in database.search_index_signatures().await? {
            if keep.contains(&signature) {
                continue;
            }
            let slot = self
                .open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&(database.uuid().to_string(), signature.clone()));
            // Wait for an update in progress to end before the files go.
            let _quiet = match &slot {
                Some(slot) => Some(slot.turn.lock().await),
                None => None,
            };
            database.drop_search_index(&signature).await?;
        }
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| SearchError::Engine(format!("a search task failed: {e}")))?
}

/// Feeds the index what happened since its last commit: purges, then
/// changes, committing as it goes and at the end. False when it was up to
/// date.
async fn catch_up(
    engine: &Engine,
    database: &Database,
    index: &SearchIndex,
    searches: &Searches,
) -> Result<bool, SearchError> {
    let committed = index.committed();
    let purged = database.purged_since(committed.purge_seq).await?;
    let purges_new = purged.purge_seq > committed.purge_seq;
    if !purges_new && committed.update_seq >= database.update_seq() {
        return Ok(false);
    }
    let idx = index.clone();
    let mut writer = Some(blocking(move || idx.writer()).await?);
    let mut since = committed.update_seq;
    let purge_seq = purged.purge_seq.max(committed.purge_seq);
    let mut empty = index.num_docs() == 0 && index.num_deleted_docs() == 0;
    if purges_new {
        let mut w = take(&mut writer)?;
        writer = Some(
            blocking(move || {
                if purged.complete {
                    for id in purged.gone {
                        w.put(Entry::Remove(id))?;
                    }
                } else {
                    w.clear()?;
                }
                Ok(w)
            })
            .await?,
        );
        if !purged.complete {
            since = 0;
            empty = true;
        }
    }
    // Built from empty, every document changed up to here comes once and
    // is added without a delete; one changed again meanwhile comes again,
    // after this sequence, and replaces its first entry.
    let added_until = if empty { database.update_seq() } else { 0 };
    let task = searches.start_task(
        database,
        index.definition(),
        database.update_seq().saturating_sub(since),
    );
    // A pipeline of three stages run together, as the view updater's:
    // while the index function runs on one page, the next page is read
    // and the previous one's entries are written (each stage waits on a
    // different thread: the JavaScript pool's, the database's readers,
    // the index writer's), so the build uses every core.
    let mut last_commit = Instant::now();
    let mut page = Some(read_page(database, since).await?);
    // The previous page's entries (each with its change's sequence) and
    // the sequence they reach, to write.
    let mut mapped: Option<(Vec<(Entry, u64)>, u64)> = None;
    while page.is_some() || mapped.is_some() {
        let current = page.take();
        if let Some(current) = &current
            && current.rows.is_empty()
        {
            // Sequences with no change left (a purge's) are reached too.
            since = current.last_seq.max(since);
        }
        let current = current.filter(|p| !p.rows.is_empty());
        let next_since = current
            .as_ref()
            .filter(|p| p.rows.len() >= BATCH)
            .map(|p| p.last_seq);
        let map = async {
            match &current {
                Some(p) => entries_of(engine, database, index.definition(), &p.rows)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let read = async {
            match next_since {
                Some(since) => read_page(database, since).await.map(Some),
                None => Ok(None),
            }
        };
        let to_write = mapped.take();
        let w = take(&mut writer)?;
        let write = async {
            match to_write {
                Some((entries, reached)) => {
                    let commit = last_commit.elapsed() >= COMMIT_INTERVAL;
                    if commit {
                        last_commit = Instant::now();
                    }
                    blocking(move || {
                        let mut w = w;
                        for (entry, seq) in entries {
                            if seq <= added_until {
                                w.add(entry)?;
                            } else {
                                w.put(entry)?;
                            }
                        }
                        if commit {
                            w.commit(reached, purge_seq)?;
                        }
                        Ok(w)
                    })
                    .await
                }
                None => Ok(w),
            }
        };
        let (entries, next, written) = tokio::join!(map, read, write);
        writer = Some(written?);
        if let (Some(entries), Some(p)) = (entries?, &current) {
            task.advance(p.rows.len() as u64);
            since = p.last_seq.max(since);
            mapped = Some((entries, since));
        }
        page = next?;
    }
    let mut w = take(&mut writer)?;
    blocking(move || {
        w.commit(since, purge_seq)?;
        w.finish()
    })
    .await?;
    Ok(true)
}

/// One page of changes with the documents as the index function gets
/// them.
async fn read_page(database: &Database, since: u64) -> Result<store::FeedPage, SearchError> {
    Ok(database
        .changes(ChangesQuery {
            since,
            limit: BATCH,
            include_docs: true,
            ..Default::default()
        })
        .await?)
}

fn take(writer: &mut Option<Writer>) -> Result<Writer, SearchError> {
    writer
        .take()
        .ok_or_else(|| SearchError::Engine("the index writer is gone".into()))
}

/// Each changed document's entry: what the index function names, or its
/// removal (deleted documents, design documents, a function that threw or
/// named nothing).
async fn entries_of(
    engine: &Engine,
    database: &Database,
    def: &IndexDefinition,
    rows: &[store::ChangeRow],
) -> Result<Vec<(Entry, u64)>, SearchError> {
    let mut entries = Vec::with_capacity(rows.len());
    let mut texts = Vec::new();
    let mut at = Vec::new();
    let mut access = Vec::new();
    for row in rows {
        entries.push((Entry::Remove(row.id.clone()), row.seq));
        if row.deleted || row.id.starts_with("_design/") {
            continue;
        }
        let Some(doc) = &row.doc else { continue };
        if database.has_doc_access() {
            let principals = ejson::from_stored(doc.as_str())
                .ok()
                .and_then(|value| value.as_object().and_then(store::doc_access::access_list))
                .unwrap_or_default();
            access.push(principals);
        } else {
            access.push(Vec::new());
        }
        texts.push(doc.as_str().to_string());
        at.push(entries.len() - 1);
    }
    if texts.is_empty() {
        return Ok(entries);
    }
    let indexed = match &def.mango {
        Some(mango) => texts
            .iter()
            .map(|text| {
                vec![
                    ejson::from_stored(text)
                        .ok()
                        .map(|doc| mango_fields(mango, &doc)),
                ]
            })
            .collect(),
        None => {
            let names = vec![def.name.clone()];
            engine
                .index_fields(def.ddoc.clone(), def.api, &names, &texts)
                .await?
        }
    };
    for ((position, per_index), principals) in at.into_iter().zip(indexed).zip(access) {
        let Some(Some(fields)) = per_index.into_iter().next() else {
            continue;
        };
        if fields.is_empty() {
            continue;
        }
        if let Some((Entry::Remove(id), _)) = entries.get(position) {
            let id = id.clone();
            entries[position].0 = Entry::Put {
                id,
                access: principals,
                fields,
            };
        }
    }
    Ok(entries)
}

/// A Mango index's fields of a document, as the engine indexes fields.
fn mango_fields(index: &mango::text::TextIndex, doc: &serde_json::Value) -> Vec<IndexedField> {
    index
        .fields_of(doc)
        .into_iter()
        .map(|field| IndexedField {
            kind: match field.kind {
                TextKind::Text => FieldKind::Text,
                TextKind::String => FieldKind::String,
                TextKind::Number => FieldKind::Double,
            },
            name: field.name,
            value: field.value,
            store: false,
            facet: false,
            searchable: true,
        })
        .collect()
}
