//! How hard each commit works to reach the disk: a setting of the store
//! (CouchDB's fsync-before-answer), which each backend carries out its way.

/// How hard each commit works to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives process crashes; the last commits may be lost on power loss
    /// until `ensure_full_commit`. An opt-in for speed.
    Normal,
    /// Every group commit is fsynced before it is acknowledged: survives
    /// power loss, as CouchDB 3 does by default.
    #[default]
    Full,
}
