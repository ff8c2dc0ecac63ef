//! One open database: its backend (rows for readers and the writer), the
//! writer (a thread while writes come, none when idle), and the
//! update-sequence channel that wakes changes-feed listeners.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::backend::{DbBackend, ReadRows, RemoteChange};
use crate::writer::{TypedJob, WriteCtx, WriterConfig, WriterHandle};
use crate::{StoreError, StoreOptions};

/// An open database. Cheap to clone; every clone talks to the same writer.
#[derive(Clone)]
pub struct Database {
    inner: Arc<DbInner>,
    /// Set on a handle for one user of a database with per-document
    /// access: their name and roles. Every read through such a handle
    /// shows only what they may read (see [`crate::doc_access`]).
    pub(crate) reader: Option<Arc<[String]>>,
}

struct DbInner {
    name: String,
    backend: Arc<dyn DbBackend>,
    uuid: String,
    /// The uuid as it ends every sequence given out (`crate::seq`).
    seq_token: String,
    instance_start_time: String,
    live: Arc<crate::LiveSettings>,
    writer: WriterHandle,
    deleted: AtomicBool,
    /// Closed (deleted, evicted or at shutdown): writes are refused.
    closed: AtomicBool,
    compacting: AtomicBool,
    /// Revision rows beyond one per document right after the last
    /// compaction (conflicts' leaves): what compaction cannot drop, left
    /// out of the garbage estimate.
    kept_extra_revs: AtomicU64,
    uploads: AtomicU64,
    pins: Arc<crate::attachments::Pins>,
    /// The `_security` object, read once: every request checks it.
    security: Mutex<Option<Arc<Value>>>,
    /// Created with `?partitioned=true`: ids are `partition:id`.
    partitioned: bool,
    /// The `q` it was created with (see [`Database::q`]).
    q: u32,
    /// Created with `?access=true` (see [`crate::doc_access`]).
    access: bool,
    /// Set once its access index is known to be whole (rebuilt if it was
    /// missing when the database was opened).
    pub(crate) access_index: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

/// The counters and sizes behind `GET /db`, in store terms (the answer
/// itself is `wire::rows::DbInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSummary {
    pub db_name: String,
    pub update_seq: u64,
    pub purge_seq: u64,
    pub doc_count: u64,
    pub doc_del_count: u64,
    /// Bytes on disk (database file plus its write-ahead log).
    pub file_size: u64,
    /// Bytes of live data in the file.
    pub active_size: u64,
    /// Uncompressed size of the live documents' bodies.
    pub external_size: u64,
    pub instance_start_time: String,
    pub uuid: String,
}

impl Database {
    /// Wraps a database its backend opened: reads what is fixed for its
    /// life (uuid, creation time, partitioning) and the latest sequence.
    pub(crate) fn start(
        name: &str,
        backend: Arc<dyn DbBackend>,
        options: StoreOptions,
        live: Arc<crate::LiveSettings>,
    ) -> Result<Database, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt {
            db: name.to_string(),
            detail: format!("no {what}"),
        };
        let (uuid, instance_start_time, partitioned, q, access, update_seq) =
            read_with(backend.as_ref(), |rows| {
                Ok((
                    rows.meta("uuid")?,
                    rows.meta("instance_start_time")?,
                    rows.meta("partitioned")?.as_deref() == Some("true"),
                    rows.meta("q")?.and_then(|q| q.parse().ok()).unwrap_or(1),
                    rows.meta("access")?.as_deref() == Some("true"),
                    rows.counts()?.update_seq,
                ))
            })?;
        let uuid = uuid.ok_or_else(|| corrupt("uuid"))?;
        let instance_start_time =
            instance_start_time.ok_or_else(|| corrupt("instance_start_time"))?;
        let writer = WriterHandle::new(
            WriterConfig {
                db_name: name.to_string(),
                backend: backend.clone(),
                live: live.clone(),
                idle_timeout: options.writer_idle_timeout,
                partitioned,
                access,
            },
            update_seq,
        );
        let db = Database {
            inner: Arc::new(DbInner {
                name: name.to_string(),
                backend,
                seq_token: crate::seq::token_of(&uuid),
                uuid,
                instance_start_time,
                live,
                writer,
                deleted: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                compacting: AtomicBool::new(false),
                kept_extra_revs: AtomicU64::new(0),
                uploads: AtomicU64::new(0),
                pins: Arc::default(),
                security: Mutex::new(None),
                partitioned,
                q,
                access,
                access_index: tokio::sync::OnceCell::new(),
            }),
            reader: None,
        };
        // Weak: the backend holding the listener must not keep the
        // database alive (nor count as a holder of it).
        let weak = Arc::downgrade(&db.inner);
        db.inner.backend.listen(Arc::new(move |change| {
            if let Some(inner) = weak.upgrade() {
                match change {
                    RemoteChange::Committed {
                        update_seq,
                        design_changed,
                    } => inner.writer.remote_commit(update_seq, design_changed),
                    RemoteChange::Security => {
                        if let Ok(mut cache) = inner.security.lock() {
                            *cache = None;
                        }
                    }
                }
            }
        }));
        Ok(db)
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The shard count it was created with (`?q=`), as CouchDB reports it
    /// in `cluster.q`. The data is one shard whatever it says: `q` only
    /// tells clients what they asked for.
    pub fn q(&self) -> u32 {
        self.inner.q
    }

    /// Set once the access index is known to be whole (see
    /// `doc_access::with_access_index`).
    pub(crate) fn access_index_ready(&self) -> &tokio::sync::OnceCell<()> {
        &self.inner.access_index
    }

    /// Whether the database was created with per-document access
    /// (`?access=true`): fixed for its life.
    pub fn has_doc_access(&self) -> bool {
        self.inner.access
    }

    /// Whether the database was created partitioned (ids `partition:id`).
    pub fn is_partitioned(&self) -> bool {
        self.inner.partitioned
    }

    /// The largest attachment, in bytes as clients see them: inflating
    /// stored gzip bytes stops there.
    pub fn max_attachment_size(&self) -> u64 {
        self.inner.live.max_attachment_size()
    }

    /// The settings a running server may change.
    pub(crate) fn live_settings(&self) -> &crate::LiveSettings {
        &self.inner.live
    }

    /// The gzip level new attachments of this media type are stored at
    /// (`[attachments]`), or `None` when they are stored as sent.
    pub fn compression_level(&self, content_type: &str) -> Option<u32> {
        self.inner.live.compression_level(content_type)
    }

    /// Its backend, for what the rules do not cover (compaction's estimate).
    /// The writer thread's handle, for the writer checks.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn writer(&self) -> &WriterHandle {
        &self.inner.writer
    }

    pub(crate) fn backend(&self) -> &Arc<dyn DbBackend> {
        &self.inner.backend
    }

    /// Where the database's view and Mango indexes are kept.
    pub(crate) fn index_dir(&self) -> PathBuf {
        self.inner.backend.index_dir()
    }

    /// The database's persistent uuid.
    pub fn uuid(&self) -> &str {
        &self.inner.uuid
    }

    /// Fixed for the life of the database (replicators compare it).
    pub fn instance_start_time(&self) -> &str {
        &self.inner.instance_start_time
    }

    /// The latest committed update sequence.
    pub fn update_seq(&self) -> u64 {
        self.inner.writer.update_seq()
    }

    /// Sequence `n` as clients see it: `N-token`, opaque as CouchDB's.
    pub fn seq_string(&self, n: u64) -> String {
        crate::seq::format(n, &self.inner.seq_token)
    }

    /// [`Database::seq_string`] written into `out` (for feeds, which write
    /// one per row).
    pub fn write_seq(&self, out: &mut String, n: u64) {
        use std::fmt::Write;
        let _ = write!(out, "{n}-{}", self.inner.seq_token);
    }

    /// Reads a sequence a client or a checkpoint gives back (see
    /// [`crate::seq`]); `now` is the latest committed one.
    pub fn parse_seq(&self, text: &str) -> Result<u64, crate::MalformedSeq> {
        match crate::seq::parse(text, &self.inner.seq_token)? {
            crate::Since::Seq(n) => Ok(n),
            crate::Since::Now => Ok(self.update_seq()),
        }
    }

    /// A receiver that changes whenever a commit moves the update sequence:
    /// the wake-up for longpoll and continuous changes feeds. It reports an
    /// error once the database is closed or deleted.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.writer.subscribe()
    }

    fn not_found(&self) -> StoreError {
        StoreError::DbNotFound(self.inner.name.clone())
    }

    /// Why a write was refused or went unanswered: the database is gone,
    /// or (only at shutdown, as the store never closes a handle someone
    /// holds otherwise) this handle was closed.
    fn writer_gone(&self) -> StoreError {
        if self.inner.deleted.load(Ordering::Acquire) {
            self.not_found()
        } else if self.inner.closed.load(Ordering::Acquire) {
            StoreError::CommitFailed("the database was closed".into())
        } else {
            // A group failed in a way the writer survived but could not report.
            StoreError::CommitFailed("the writer stopped before answering".into())
        }
    }

    /// Whether nothing but the store's cache holds this database: no
    /// request, feed, upload, pinned blob or replication. Only such a
    /// database may be closed to make room for others; nobody can take a
    /// new clone of it but the cache, under the cache's lock.
    pub(crate) fn is_idle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1
            && Arc::strong_count(&self.inner.pins) == 1
            && !self.inner.writer.has_subscribers()
    }

    /// Whether a writer thread runs for this database now.
    pub fn writer_running(&self) -> bool {
        self.inner.writer.is_running()
    }

    /// Runs a write on the writer thread, grouped with any other pending
    /// writes into one transaction.
    pub(crate) async fn write<T, F>(&self, weight: usize, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit_write(weight, op).await?.await
    }

    /// [`Database::write`] of documents whose ids are known: a group of
    /// such writes loads them all at once (see `WriteJob::doc_ids`).
    pub(crate) async fn write_docs<T, F>(
        &self,
        weight: usize,
        doc_ids: Vec<String>,
        op: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, reply) = TypedJob::new(weight, op);
        self.submit_job(weight, (job.loading(doc_ids), reply))
            .await?
            .await
    }

    /// Hands a write to the writer thread, once its queue has room; the
    /// returned future is its outcome. (For callers that keep working while
    /// the writer runs it.)
    pub(crate) async fn submit_write<T, F>(
        &self,
        weight: usize,
        op: F,
    ) -> Result<WriteReply<T>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, reply) = TypedJob::new(weight, op);
        self.submit_job(weight, (job, reply)).await
    }

    async fn submit_job<T, F>(
        &self,
        weight: usize,
        (job, reply): (TypedJob<T, F>, oneshot::Receiver<Result<T, StoreError>>),
    ) -> Result<WriteReply<T>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        if self.inner.deleted.load(Ordering::Acquire) {
            return Err(self.not_found());
        }
        self.inner
            .writer
            .submit(weight, Box::new(job))
            .await
            .map_err(|_| self.writer_gone())?;
        Ok(WriteReply {
            reply,
            db: self.clone(),
        })
    }

    /// Runs a read on one consistent snapshot, off the async threads.
    pub(crate) async fn read<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn ReadRows) -> Result<T, StoreError> + Send + 'static,
    {
        let db = self.clone();
        tokio::task::spawn_blocking(move || db.read_blocking(op))
            .await
            .map_err(|e| StoreError::CommitFailed(format!("read task failed: {e}")))?
    }

    /// [`Database::read`] for callers already off the async threads.
    pub(crate) fn read_blocking<T>(
        &self,
        op: impl FnOnce(&dyn ReadRows) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.inner.deleted.load(Ordering::Acquire) {
            return Err(self.not_found());
        }
        read_with(self.inner.backend.as_ref(), op)
    }

    /// The update sequence as the store holds it now: the handle's own
    /// ([`Database::update_seq`]) may trail commits another node made.
    pub async fn stored_update_seq(&self) -> Result<u64, StoreError> {
        self.read(|rows| Ok(rows.counts()?.update_seq)).await
    }

    /// Everything `GET /db` reports.
    pub async fn info(&self) -> Result<DbSummary, StoreError> {
        let db = self.clone();
        self.read(move |rows| {
            let mut counts = rows.counts()?;
            if let Some(principals) = db.reader() {
                // A user of a database with per-document access counts
                // what they may read, never others' documents.
                counts.doc_count = rows.access_count_live(
                    principals,
                    &std::ops::Bound::Unbounded,
                    &std::ops::Bound::Unbounded,
                )?;
                counts.doc_del_count = rows.access_count_deleted(principals)?;
            }
            let sizes = rows.storage_sizes()?;
            Ok(DbSummary {
                db_name: db.inner.name.clone(),
                update_seq: counts.update_seq,
                purge_seq: counts.purge_seq,
                doc_count: counts.doc_count,
                doc_del_count: counts.doc_del_count,
                file_size: sizes.file,
                active_size: sizes.active,
                external_size: counts.external_size.max(0) as u64,
                instance_start_time: db.inner.instance_start_time.clone(),
                uuid: db.inner.uuid.clone(),
            })
        })
        .await
    }

    /// How many generations of history each document keeps.
    pub async fn revs_limit(&self) -> Result<u32, StoreError> {
        self.read(|rows| crate::read::revs_limit_of(rows)).await
    }

    /// Sets `_revs_limit` (at least 1); applies to documents as they are next written.
    pub async fn set_revs_limit(&self, limit: u32) -> Result<(), StoreError> {
        if limit == 0 {
            return Err(StoreError::bad_request(
                "revs_limit must be a positive integer",
            ));
        }
        self.write(1, move |ctx| {
            ctx.rows.set_meta("revs_limit", &limit.to_string())?;
            ctx.state.revs_limit = limit;
            Ok(())
        })
        .await
    }

    /// The `_security` object (kept in memory after the first read).
    pub async fn security(&self) -> Result<Arc<Value>, StoreError> {
        if let Some(cached) = self.cached_security() {
            return Ok(cached);
        }
        let name = self.inner.name.clone();
        let value: Value = self
            .read(move |rows| {
                let text = rows.meta("security")?.unwrap_or_else(|| "{}".into());
                ejson::from_stored(&text).map_err(|e| StoreError::Corrupt {
                    db: name,
                    detail: format!("_security: {e}"),
                })
            })
            .await?;
        let value = Arc::new(value);
        if let Ok(mut cache) = self.inner.security.lock() {
            cache.get_or_insert_with(|| value.clone());
        }
        Ok(value)
    }

    fn cached_security(&self) -> Option<Arc<Value>> {
        self.inner.security.lock().ok().and_then(|c| c.clone())
    }

    /// Replaces the `_security` object (which must be a JSON object).
    pub async fn set_security(&self, security: Value) -> Result<(), StoreError> {
        if !security.is_object() {
            return Err(StoreError::bad_request(
                "Security object must be a JSON object",
            ));
        }
        let text = ejson::to_string(&security);
        self.write(1, move |ctx| ctx.rows.set_meta("security", &text))
            .await?;
        if let Ok(mut cache) = self.inner.security.lock() {
            *cache = Some(Arc::new(security));
        }
        Ok(())
    }

    /// Makes every committed write durable against power loss too: the
    /// write-ahead log and the database file are fsynced. (Process crashes
    /// never lose a committed write, whatever the durability mode.)
    pub async fn ensure_full_commit(&self) -> Result<(), StoreError> {
        self.write(0, move |_ctx| Ok(())).await?;
        let backend = self.inner.backend.clone();
        tokio::task::spawn_blocking(move || backend.sync())
            .await
            .map_err(|e| StoreError::CommitFailed(format!("sync task failed: {e}")))?
    }

    /// Stops the writer after queued writes, ends the update-sequence
    /// channel and drops pooled readers. Later writes on any clone fail:
    /// `DbNotFound` when `deleted` (reads too). Blocks until no connection
    /// of the writer is left.
    pub(crate) fn close(&self, deleted: bool) {
        if deleted {
            self.inner.deleted.store(true, Ordering::Release);
        }
        self.inner.closed.store(true, Ordering::Release);
        self.inner.writer.close();
        self.inner.backend.close();
    }

    pub(crate) fn kept_extra_revs(&self) -> &AtomicU64 {
        &self.inner.kept_extra_revs
    }

    pub(crate) fn compaction_flag(&self) -> &AtomicBool {
        &self.inner.compacting
    }

    /// Attachment uploads in progress (their chunks are not yet referenced).
    pub(crate) fn active_uploads(&self) -> u64 {
        self.inner.uploads.load(Ordering::Acquire)
    }

    /// Uploaded blobs waiting for the write that references them.
    pub(crate) fn blob_pins(&self) -> &Arc<crate::attachments::Pins> {
        &self.inner.pins
    }

    pub(crate) fn upload_started(&self) {
        self.inner.uploads.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn upload_ended(&self) {
        self.inner.uploads.fetch_sub(1, Ordering::AcqRel);
    }

    /// A number that changes whenever a committed write (or purge) changed
    /// a design document, unique in the process: what is derived from the
    /// design documents (validation functions) can be cached under it.
    pub fn design_generation(&self) -> u64 {
        self.inner.writer.design_generation()
    }

    /// Transactions the writer has committed since the database was opened:
    /// with group commit, far fewer than the writes it served.
    pub fn commit_count(&self) -> u64 {
        self.inner.writer.commits()
    }
}

/// Runs `op` on one snapshot of `backend`, handing its result back.
fn read_with<T>(
    backend: &dyn DbBackend,
    op: impl FnOnce(&dyn ReadRows) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut op = Some(op);
    let mut out = None;
    backend.read(&mut |rows| {
        if let Some(op) = op.take() {
            out = Some(op(rows)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| StoreError::CommitFailed("the read did not run".into()))
}

/// The outcome of a write handed to the writer ([`Database::submit_write`]).
pub(crate) struct WriteReply<T> {
    reply: oneshot::Receiver<Result<T, StoreError>>,
    db: Database,
}

impl<T> Future for WriteReply<T> {
    type Output = Result<T, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The writer answers every job; a dropped reply means the database
        // closed under it.
        match Pin::new(&mut self.reply).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(result)) => Poll::Ready(result),
            Poll::Ready(Err(_)) => Poll::Ready(Err(self.db.writer_gone())),
        }
    }
}
