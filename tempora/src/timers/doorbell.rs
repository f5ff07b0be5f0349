//! What a sleeper waits on: a driver's doorbell, and the "nothing armed" deadline.
//!
//! The protocol that makes a ring impossible to lose is argued at [`Doorbell`]; the bases'
//! side of it (publishing a sleep deadline under each base lock) is "Waking a sleeping driver"
//! in `base.rs`.

use crate::sync::{AtomicU64, Ordering, WaitQueue};
use std::time::Instant;

/// "No expiry": a wheel or a driver with nothing armed.
pub(crate) const NO_EXPIRY: u64 = u64::MAX;

/// A futex-style word a driver sleeps on.
///
/// ```text
///   driver                                   armer
///   t = seq            (T)                   (under the base lock: sees sleep[w] > tick)
///   publish sleep[w] under base locks        seq += 1                    (R)
///   park(validate: seq == t)  (V)            unpark_all
/// ```
///
/// The driver takes its token (T) before it publishes its deadline, and the armer increments
/// the word (R) only after it saw the published deadline under the base lock, so R happens
/// after T and the token never includes it. The wait queue (a futex, `sync/wait.rs`) lets the
/// driver sleep only while its own word has not moved since before V, and `wake_all` moves
/// that word after R: either V reads the new value and the driver does not sleep, or the
/// driver is asleep (or finds the word moved) when the wake-up comes. A ring is therefore never lost. The loom test
/// `loom_driver_sleep_races_an_earlier_arm` checks the protocol; taking the token after the
/// publish (so that a ring between the two is absorbed into it) makes it deadlock.
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    seq: AtomicU64,
    queue: WaitQueue,
}

impl Doorbell {
    /// The token to sleep on: taken before the deadline is published (T).
    pub(crate) fn token(&self) -> u64 {
        // Acquire: pairs with the Release in `ring`; a ring seen here is acted upon by the
        // poll that follows.
        self.seq.load(Ordering::Acquire)
    }

    /// Wakes the driver (R).
    pub(crate) fn ring(&self) {
        // Release: the wheel change that made the ring necessary is visible to the driver
        // (it also re-reads the wheels under the base lock). A driver running callbacks
        // re-reads `seq` after flagging it, and the ringer then checks the flag, each with a
        // SeqCst fence between (`standby::Handover`): one of the two sees the other.
        self.seq.fetch_add(1, Ordering::Release);
        self.queue.wake_all();
    }

    /// The ring count, read after a SeqCst fence (`standby::Handover::enter`).
    pub(crate) fn seq_after_fence(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Sleeps until rung (since `token` was taken) or until `deadline` (V).
    pub(crate) fn sleep(&self, token: u64, deadline: Option<Instant>) {
        // Relaxed: the wait queue's own word orders a ring after this check (`sync/wait.rs`).
        self.queue
            .wait(|| self.seq.load(Ordering::Relaxed) == token, deadline);
    }
}
