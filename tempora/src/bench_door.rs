//! Not part of tempora's API: the timer-ID registry on its own, for the benchmark suite that
//! compares ID registries (`tempora bench`, the seed suite). It drives the registry with the
//! POSIX service's timer objects (the same three parts, filled at create as the service fills
//! them), but no service around it: no clock is read, nothing is armed, and nothing but the
//! registry is allocated.

use crate::clock::ClockId;
use crate::registry::{self, Locked, Service};
use crate::timers::itimer::{ItimerPublished, ItimerState};
use crate::timers::object::{Itimer, ItimerFixed, ItimerInit};
use crate::timers::{NotifyKind, TimerId};
use crate::wheel::intrusive::Node;
use crate::Error;

/// The registry's service here: the POSIX service's parts, with a delete hook that has no
/// wheel to take the timer out of.
struct Bare;

impl Service for Bare {
    type Fixed = ItimerFixed;
    type Published = ItimerPublished;
    type Links = Node;
    type State = ItimerState;
    type Init = ();
    type Owner = ();
    type Released = ();

    fn init(fixed: &ItimerFixed, published: &ItimerPublished, state: &mut ItimerState, _: ()) {
        let init = ItimerInit {
            clock: ClockId::Monotonic,
            notify: NotifyKind::None,
            attached: None,
            sink: std::ptr::null(),
        };
        <Itimer as Service>::init(fixed, published, state, init);
    }

    fn on_delete(_: &(), l: &mut Locked<'_, Bare>) {
        l.state.delete();
    }

    fn on_destroy(_: &()) {}
}

/// A registry.
#[derive(Debug)]
pub struct Registry(registry::Registry<Bare>);

/// An owner of a [`Registry`].
#[derive(Debug)]
pub struct Owner(registry::Owner<Bare>);

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry with the default configuration.
    pub fn new() -> Registry {
        let registry = registry::Builder::default()
            .build()
            .expect("the default configuration is valid");
        Registry(registry)
    }

    /// A new owner.
    pub fn owner(&self) -> Owner {
        Owner(self.0.owner(()))
    }
}

impl Owner {
    /// Creates a timer with the next free ID.
    ///
    /// # Errors
    /// As `Owner::create`.
    pub fn create(&self) -> Result<TimerId, Error> {
        self.0.create(None, (), None)
    }

    /// Creates a timer with the ID `id` (restore mode must be on).
    ///
    /// # Errors
    /// As `Owner::create_with_id`.
    pub fn create_with_id(&self, id: i32) -> Result<TimerId, Error> {
        self.0.create(Some(id), (), None)
    }

    /// Turns exact-ID (restore) mode on or off.
    pub fn set_restore_ids(&self, on: bool) {
        self.0.set_restore_ids(on);
    }

    /// `getoverrun`: the lock-free lookup.
    ///
    /// # Errors
    /// As `Owner::getoverrun`.
    pub fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.0.read(id, |_, published| {
            crate::timers::itimer::overrun_last(published)
        })
    }

    /// Deletes timer `id`.
    ///
    /// # Errors
    /// As `Owner::delete`.
    pub fn delete(&self, id: TimerId) -> Result<(), Error> {
        self.0.delete(id)
    }
}

/// The statistics flush, for the benchmark's `flush` case: the slots it aggregated and the
/// hold, in ns, of each list it detached slots from (the detaching swap; under the naive flush,
/// the list lock's hold).
pub fn stats_flush(timers: &crate::Timers) -> (usize, Vec<u64>) {
    let r = timers.core.stats.flush();
    (r.slots, r.holds_ns)
}

/// Makes the service's flushes aggregate under the list locks, so that pushing updaters wait
/// for the whole walk (the benchmark's `naive-flush`).
pub fn stats_naive_flush(timers: &crate::Timers, on: bool) {
    timers.core.stats.set_naive(on);
}

/// Runs the frees that tempora's epoch collector deferred and that are due (a dropped
/// service's tables and slot pages among them), so that a memory measurement starts from what
/// is live, not from what earlier runs left for the epoch to free.
pub fn collect_deferred() {
    crate::sync::collect_deferred();
}
