//! Registry tests, one file per topic, on a miniature service (`Test`) defined here:
//!
//! - `ids`: ID allocation: the counter, its wrap, exhaustion, exact-ID mode, isolation
//!   between owners.
//! - `owners`: what an owner holds: reads, listings, teardown and its hooks, page reuse,
//!   exclusive sections.
//! - `lookups`: the hash table lookups walk: growth, the hash, bucket layout, and stress
//!   tests of lookups racing deletes and growth.
//!
//! The test binary runs on the poisoning allocator (`Poison` in `crate::testing`), so a use after
//! free of a retired table or a torn-down owner's pages reads poison.

use super::table::{self, hash, nulls, Bucket, RUN_BITS};
use super::{Builder, Locked, Service, TimerId};
use crate::clock::ClockId;
use crate::error::Error;
use crate::sync::{AtomicI32, Ordering};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::AtomicBool as StdAtomicBool;
use std::sync::Barrier;

mod ids;
mod lookups;
mod owners;

/// How a test timer notifies: the POSIX service's kinds, in miniature (the registry knows
/// nothing of notification; these tests only store and list it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
enum NotifyKind {
    #[default]
    None,
    Queue,
    Callback,
}

/// Whether a test timer is armed (as `NotifyKind`: stored and listed only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    #[default]
    Disarmed,
    Armed,
}

/// A service for these tests: the clock, notification kind, status and an interval in the
/// state, a latched count published (what the POSIX service keeps, in miniature), and a count
/// of delete-hook runs.
struct Test;

#[derive(Debug, Default)]
struct TestState {
    clock: u8,
    notify: NotifyKind,
    status: Status,
    interval: u64,
}

/// The test service's part of an owner: how often its hooks ran.
#[derive(Debug, Default)]
struct Hooks {
    deletes: std::sync::atomic::AtomicUsize,
    destroys: std::sync::atomic::AtomicUsize,
}

// SAFETY: integers and two `repr(u8)` enums whose zero variants are their defaults.
unsafe impl super::Zeroable for TestState {}

// SAFETY: an atomic integer; zero is its default.
unsafe impl super::Zeroable for AtomicI32 {}

impl Service for Test {
    type Fixed = ();
    type Published = AtomicI32;
    type Links = ();
    type State = TestState;
    type Init = (ClockId, NotifyKind);
    type OwnerPart = Hooks;
    type Released = ();
    fn init(_: &(), published: &AtomicI32, state: &mut TestState, (clock, notify): Self::Init) {
        published.store(0, Ordering::Relaxed);
        *state = TestState {
            clock: clock.index() as u8,
            notify,
            ..TestState::default()
        };
    }
    fn on_delete(hooks: &Hooks, l: &mut Locked<'_, Test>) {
        assert!(
            l.timer.hot.owner.load(Ordering::Relaxed) & super::timer::PENDING != 0,
            "the hook runs once the timer is invisible to lookups"
        );
        l.state.status = Status::Disarmed;
        hooks
            .deletes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn on_destroy(hooks: &Hooks) {
        hooks
            .destroys
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

type Registry = super::Registry<Test>;

type Owner = super::Owner<Test>;

type Timer = super::Timer<Test>;

/// The registry's builder, building registries for `Test`.
struct TestBuilder(Builder);

impl TestBuilder {
    fn id_bits(mut self, bits: u32) -> Self {
        self.0.id_bits = bits;
        self
    }
    fn initial_buckets(mut self, buckets: usize) -> Self {
        self.0.initial_buckets = Some(buckets);
        self
    }
    fn max_load(mut self, load: usize) -> Self {
        self.0.max_load = load;
        self
    }
    fn shards(mut self, shards: usize) -> Self {
        self.0.shards = Some(shards);
        self
    }
    fn build(&self) -> Result<Registry, Error> {
        self.0.build()
    }
}

/// A registry that starts with 16 buckets and grows past `max_load` timers per bucket: small
/// enough for a test to make it grow.
fn small_registry(max_load: usize) -> Registry {
    Registry::builder()
        .initial_buckets(16)
        .max_load(max_load)
        .build()
        .unwrap()
}

impl Registry {
    fn builder() -> TestBuilder {
        TestBuilder(Builder::default())
    }
}

/// One line of a listing.
#[derive(Debug)]
struct Info {
    id: TimerId,
    clock: ClockId,
    notify: NotifyKind,
    status: Status,
}

/// The test's calls on an owner, in the shape of the service's.
trait Calls {
    fn create_as(&self, clock: ClockId, notify: NotifyKind) -> Result<TimerId, Error>;
    fn create_with_id(&self, id: i32, clock: ClockId, notify: NotifyKind)
        -> Result<TimerId, Error>;
    fn getoverrun(&self, id: TimerId) -> Result<i32, Error>;
    fn timers(&self) -> Vec<Info>;
}

impl Calls for Owner {
    fn create_as(&self, clock: ClockId, notify: NotifyKind) -> Result<TimerId, Error> {
        self.create(None, (clock, notify), None)
    }
    fn create_with_id(
        &self,
        id: i32,
        clock: ClockId,
        notify: NotifyKind,
    ) -> Result<TimerId, Error> {
        self.create(Some(id), (clock, notify), None)
    }
    fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.read(id, |_, published| published.load(Ordering::Relaxed))
    }
    fn timers(&self) -> Vec<Info> {
        let mut out = Vec::new();
        let _ = self.for_each_locked(|l| {
            out.push(Info {
                id: l.id(),
                clock: crate::clock::ALL_CLOCKS[usize::from(l.state.clock)],
                notify: l.state.notify,
                status: l.state.status,
            })
        });
        out
    }
}

fn id(raw: i32) -> TimerId {
    TimerId::new(raw).unwrap()
}

fn mono(o: &Owner) -> Result<TimerId, Error> {
    o.create_as(ClockId::Monotonic, NotifyKind::None)
}
