//! What a write transaction changed in a structure counted beside the
//! documents (`id_blocks`, `seq_buckets`), in order, so that a savepoint
//! rolled back takes its own entries back; counted in once, at commit.

use std::cell::RefCell;

#[derive(Debug)]
pub(crate) struct ChangeLog<T> {
    entries: RefCell<Vec<T>>,
}

impl<T> Default for ChangeLog<T> {
    fn default() -> Self {
        ChangeLog {
            entries: RefCell::new(Vec::new()),
        }
    }
}

impl<T> ChangeLog<T> {
    pub(crate) fn record(&self, entry: T) {
        self.entries.borrow_mut().push(entry);
    }

    /// Where a savepoint starts.
    pub(crate) fn mark(&self) -> usize {
        self.entries.borrow().len()
    }

    /// Forgets what was recorded since `mark` (its savepoint rolled back).
    pub(crate) fn rollback_to(&self, mark: usize) {
        self.entries.borrow_mut().truncate(mark);
    }

    /// Every entry, leaving the log empty.
    pub(crate) fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.entries.borrow_mut())
    }
}
