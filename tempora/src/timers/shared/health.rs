//! The service's life: whether it still runs, why it failed, and telling every owner's
//! receivers when it stops.
//!
//! A service stops when its last `Timers` handle and sleep are dropped (`shutdown`), and fails
//! for good at the first poisoned lock or dead driver (`fail`). Either way arming calls fail
//! from then on, and every owner's queue is closed, so that no receiver waits for an event
//! that can no longer come (ARCHITECTURE.md invariant "Nothing hangs"). The closing wakes
//! tasks, which is user code, so a failure met under a lock only marks the halt pending;
//! every public call runs it once it holds no lock (`flush_halt`).

use crate::error::Error;
use crate::sync::{rank, AtomicBool, MutexGuard, Ordering, RankedMutex};
use crate::timers::object::notify;
use crate::timers::object::EventQueue;
use std::sync::{Arc, OnceLock, Weak};

/// `Error::Poisoned` texts of the service's locks.
pub(crate) const BASE_POISONED: &str = "a timer base";
pub(crate) const QUEUE_POISONED: &str = "an owner's event queue";
pub(crate) const DRIVER_DIED: &str = "a driver thread";

/// A service's running state and its owners' queues.
pub(crate) struct Health {
    /// The last `Timers` handle and sleep were dropped: drivers end, owners are told (`halt`).
    pub(crate) shutdown: AtomicBool,
    /// The first `Error::Poisoned` text the service met (a poisoned lock, a dead driver);
    /// set once, never cleared (`fail`).
    pub(crate) failure: OnceLock<&'static str>,
    /// `shutdown || failure.is_some()`, in one byte for the arming calls' check.
    halted: AtomicBool,
    /// A failure's `halt` has not run yet (`fail`, `flush_halt`).
    halt_pending: AtomicBool,
    /// The event queue of every owner made by this service, for `halt` to wake their
    /// receivers. A `Weak<EventQueue>`, not the owner: upgrading it can never make this thread run
    /// an owner's teardown (which takes timer locks) from wherever the service failed. Dead
    /// entries are pruned as the list grows.
    owners: RankedMutex<Vec<Weak<EventQueue>>, { rank::OWNERS }>,
    /// The process's fork generation when the service was built (`sync::fork`): another
    /// generation means the caller is a forked child, where the service's threads do not
    /// exist and its locks may be held for ever (`forked`).
    born: u32,
}

impl Health {
    /// A running service's.
    pub(crate) fn new() -> Health {
        Health {
            shutdown: AtomicBool::new(false),
            failure: OnceLock::new(),
            halted: AtomicBool::new(false),
            halt_pending: AtomicBool::new(false),
            owners: RankedMutex::new(Vec::new()),
            born: {
                crate::sync::fork::watch();
                crate::sync::watch_forks();
                crate::sync::fork::generation()
            },
        }
    }

    /// Whether the caller runs in a child forked after the service was built: every public
    /// call asks this before it takes any lock, and fails with [`Error::Forked`] (or returns
    /// nothing) if so; drops then leak instead of joining threads or taking locks
    /// (`timers/mod.rs`, "Fork").
    #[inline]
    pub(crate) fn forked(&self) -> bool {
        self.born != crate::sync::fork::generation()
    }

    /// `Err(Error::Forked)` in a child forked after the service was built.
    #[inline]
    pub(crate) fn check_fork(&self) -> Result<(), Error> {
        if self.forked() {
            return Err(Error::Forked);
        }
        Ok(())
    }

    /// Marks the service failed for good (the first `what` is kept) and returns the error to
    /// report. Its receivers are told (`halt`: queues closed, waiting threads and tasks woken)
    /// by [`Health::flush_halt`], which the public calls run once they hold no lock: `fail` is
    /// called under timer, cell and delivery locks, and a task's waker is user code.
    #[cold]
    pub(crate) fn fail(&self, what: &'static str) -> Error {
        if self.failure.set(what).is_ok() {
            self.halted.store(true, Ordering::Relaxed);
            // Release: pairs with the Acquire in `flush_halt_now`.
            self.halt_pending.store(true, Ordering::Release);
        }
        Error::Poisoned(self.failure.get().copied().unwrap_or(what))
    }

    /// Runs the `halt` a failure left pending; called with no tempora lock held, by every
    /// public call that can meet a failure (a poll, settime, delete, a receive, a restore, an
    /// owner's teardown, a sleep's poll, reset and drop, a dying driver).
    #[inline]
    pub(crate) fn flush_halt(&self) {
        // Relaxed: a hint; the swap decides who halts.
        if self.halt_pending.load(Ordering::Relaxed) && !self.forked() {
            self.flush_halt_now();
        }
    }

    #[cold]
    fn flush_halt_now(&self) {
        if self.halt_pending.swap(false, Ordering::AcqRel) {
            self.halt();
        }
    }

    /// The service stopped or failed: arming calls fail from now on, and every owner's queue
    /// is closed to waiting (`CLOSED_SERVICE`), since nothing will queue an event again.
    #[cold]
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        // Closed once the list's lock is released: closing wakes tasks, and a task woken here
        // may make an owner of this service, which joins the list (`register`).
        let sinks: Vec<Arc<EventQueue>> = self.owners().iter().filter_map(Weak::upgrade).collect();
        for sink in sinks {
            sink.close(notify::CLOSED_SERVICE);
        }
    }

    /// Adds a new owner's queue to those a halt closes; closes it at once if the service has
    /// already failed.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if the list cannot grow (nothing registered).
    pub(crate) fn register(&self, sink: &Arc<EventQueue>) -> Result<(), crate::error::Error> {
        let mut owners = self.owners();
        if owners.len() == owners.capacity() {
            owners.retain(|o| o.strong_count() > 0);
            owners
                .try_reserve(1)
                .map_err(|_| crate::error::Error::OutOfMemory)?;
        }
        owners.push(Arc::downgrade(sink));
        drop(owners);
        if self.failure.get().is_some() {
            sink.close(notify::CLOSED_SERVICE);
        }
        Ok(())
    }

    /// The queues of the owners still alive, for an inspection to walk (`inspect/`).
    pub(crate) fn queues(&self) -> Vec<Arc<EventQueue>> {
        self.owners().iter().filter_map(Weak::upgrade).collect()
    }

    /// The owners' queues. A panic never happens under this mutex (a push, a prune), but it
    /// could only have left the list intact, so a poisoned one is used as it is.
    fn owners(&self) -> MutexGuard<'_, Vec<Weak<EventQueue>>, { rank::OWNERS }> {
        self.owners.lock_or_recover()
    }

    /// Why arming must fail now: the service failed or stopped.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), Error> {
        // Relaxed: one byte on the arming path; what it reports needs no ordering with the
        // caller's own accesses (an arm racing the stop is answered by `recv` instead).
        if self.halted.load(Ordering::Relaxed) {
            return Err(self.halted_why());
        }
        self.check_fork()
    }

    /// The error for a halted service: its failure, or its stop.
    #[cold]
    pub(crate) fn halted_why(&self) -> Error {
        if self.forked() {
            return Error::Forked;
        }
        match self.failure.get() {
            Some(&what) => Error::Poisoned(what),
            None => Error::ServiceStopped,
        }
    }
}
