//! A futex-style wait queue keyed by address.

/// A futex-style wait queue for one object: threads sleep on it only if a check run under
/// the queue's internal lock (`validate`) still says so, and [`WaitQueue::wake_all`] takes
/// that lock, so a wake-up issued after the condition changed cannot fall between a waiter's
/// check and its sleep. Outside loom it is `parking_lot_core`'s park/unpark keyed by the
/// queue's address (no memory of its own beyond the one byte that gives it an address);
/// under loom, a mutex and condition variable with the same contract.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    #[cfg(not(loom))]
    _addr: u8,
    #[cfg(loom)]
    wait: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl WaitQueue {
    /// Sleeps if `validate` (run under the queue's lock) returns true, until woken or until
    /// `deadline` (ignored under loom, which has no time). Returns false if it timed out.
    pub(crate) fn wait(
        &self,
        validate: impl FnOnce() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        #[cfg(not(loom))]
        {
            // SAFETY: the key is this queue's address, used only for this queue; `validate`
            // and the callbacks neither panic nor call into parking_lot_core.
            let r = unsafe {
                parking_lot_core::park(
                    self as *const WaitQueue as usize,
                    validate,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    deadline,
                )
            };
            r != parking_lot_core::ParkResult::TimedOut
        }
        #[cfg(loom)]
        {
            let _ = deadline;
            let guard = self.wait.0.lock().unwrap();
            if validate() {
                drop(self.wait.1.wait(guard).unwrap());
            }
            true
        }
    }

    /// Wakes every sleeper.
    pub(crate) fn wake_all(&self) {
        #[cfg(not(loom))]
        // SAFETY: the key is this queue's address (see `wait`).
        unsafe {
            parking_lot_core::unpark_all(
                self as *const WaitQueue as usize,
                parking_lot_core::DEFAULT_UNPARK_TOKEN,
            );
        }
        #[cfg(loom)]
        {
            drop(self.wait.0.lock().unwrap());
            self.wait.1.notify_all();
        }
    }
}
