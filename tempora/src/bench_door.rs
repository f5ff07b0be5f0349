//! Not part of tempora's API: the two things the benchmark harness (`tempora bench`) measures
//! that the public API cannot reach. The timer-ID registry on its own, for the seed suite
//! that compares ID registries: driven with the POSIX service's timer objects (the same four
//! parts, filled at create as the service fills them), but with no service around it, so no
//! clock is read, nothing is armed, and nothing but the registry is allocated. The statistics'
//! flush with each list's detach timed, for the stats suite's `flush` case. And an owner's
//! slot pages, for memory figures.
//!
//! Compiled in every build (hidden from the docs), so that the library the workspace builds
//! and tests is the one users build; nothing else in the library knows it is here.

use crate::clock::ClockId;
use crate::registry::{self, Locked, Service};
use crate::timers::object::itimer::{ItimerPublished, ItimerState};
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
    type OwnerPart = ();
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
pub struct BareOwner(registry::Owner<Bare>);

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
    pub fn owner(&self) -> BareOwner {
        BareOwner(self.0.owner(()))
    }
}

impl BareOwner {
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
            crate::timers::object::itimer::overrun_last(published)
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

/// Flushes `timers`' statistics: how long each list that had slots to detach was held, in
/// ns (the one swap that detaches it: a flush holds no lock that an updater takes).
pub fn stats_flush_holds(timers: &crate::Timers) -> Vec<u64> {
    let mut holds = Vec::new();
    timers.core.stats.flush_with(|detach| {
        let start = std::time::Instant::now();
        let got = detach();
        let held = start.elapsed().as_nanos() as u64;
        if got {
            holds.push(held);
        }
    });
    holds
}

/// Bytes of timer slot pages (and their directory) `owner` has allocated: its peak timer
/// count, rounded up per shard to pages of 64 timers.
pub fn owner_slot_bytes(owner: &crate::Owner) -> usize {
    owner.reg.slot_bytes()
}

/// Runs the frees that tempora's epoch collector deferred and that are due (a dropped
/// service's tables and slot pages among them), so that a memory measurement starts from what
/// is live, not from what earlier runs left for the epoch to free.
pub fn collect_deferred() {
    crate::sync::collect_deferred();
}
