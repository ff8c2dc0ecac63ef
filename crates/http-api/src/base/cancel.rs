//! Work a handler hands to another thread stops when its client leaves.
//!
//! A handler's future is dropped when its client disconnects; a blocking
//! task it started is not. [`CancelOnDrop`] lives in the handler's future
//! and raises the task's flag when dropped, and the task stops at its next
//! look (a search opens no further segment and judges no further match).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Raises its flag when dropped: with the handler, or once its work is done.
#[derive(Debug, Default)]
pub(crate) struct CancelOnDrop(Arc<AtomicBool>);

impl CancelOnDrop {
    pub(crate) fn new() -> CancelOnDrop {
        CancelOnDrop::default()
    }

    /// The flag, for the task to look at.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_raised_when_the_guard_goes() {
        let guard = CancelOnDrop::new();
        let flag = guard.flag();
        assert!(!flag.load(Ordering::Relaxed));
        drop(guard);
        assert!(flag.load(Ordering::Relaxed));
    }
}
