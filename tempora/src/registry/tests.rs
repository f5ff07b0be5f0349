//! Registry tests: ID allocation, exact-ID mode, isolation, listing, growth, teardown, and a
//! stress test of deletes racing lookups under a poisoning allocator.

use super::table::{self, hash, nulls, Bucket, RUN_BITS};
use super::{Builder, Locked, Service, TimerId};
use crate::clock::ClockId;
use crate::error::Error;
use crate::sync::{AtomicI32, Ordering};
use crate::timers::{NotifyKind, Status};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::AtomicBool as StdAtomicBool;
use std::sync::Barrier;

/// Frees memory only after overwriting it with 0xA5, so a use after free of a retired table or
/// of a torn-down owner's pages reads poison: pointers that crash or compare unequal, instead
/// of stale data that happens to look right.
struct Poison;

// SAFETY: forwards to the system allocator; `dealloc` writes only the block being freed, which
// the caller owns until the call returns.
unsafe impl std::alloc::GlobalAlloc for Poison {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` is a live block of `layout.size()` bytes owned by the caller.
        unsafe {
            std::ptr::write_bytes(ptr, 0xA5, layout.size());
            std::alloc::System.dealloc(ptr, layout)
        }
    }
}

#[global_allocator]
static ALLOC: Poison = Poison;

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
    type Owner = Hooks;
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

#[test]
fn ids_start_at_zero_and_count_up_on_one_thread() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let got: Vec<i32> = (0..40).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    assert_eq!(r.len(), 40);
}

#[test]
fn ids_are_not_reused_until_the_counter_wraps() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let a = mono(&o).unwrap();
    o.delete(a).unwrap();
    assert_eq!(
        mono(&o).unwrap().get(),
        1,
        "a freed ID is not handed out again at once"
    );
}

#[test]
fn counter_wraps_from_i32_max_to_zero_and_skips_ids_in_use() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    assert_eq!(mono(&o).unwrap().get(), 0);
    o.set_restore_ids(true);
    o.create_with_id(i32::MAX - 1, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), i32::MAX);
    // 0 is in use: skipped, as on Linux 6.18 (restore INT_MAX, next normal ID is 1).
    assert_eq!(mono(&o).unwrap().get(), 1);
    assert_eq!(mono(&o).unwrap().get(), 2);
}

#[test]
fn small_id_space_wraps_skips_and_exhausts_with_eagain() {
    let r = Registry::builder().id_bits(3).build().unwrap();
    let o = r.owner(Hooks::default());
    let ids: Vec<i32> = (0..8).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
    let err = mono(&o).unwrap_err();
    assert_eq!(err, Error::NoFreeId);
    assert_eq!(err.errno(), libc::EAGAIN);
    assert!(err.is_transient());
    // Free 5 and 2: the wrapped counter skips the IDs in use and finds them in counter order.
    o.delete(id(5)).unwrap();
    o.delete(id(2)).unwrap();
    let a = mono(&o).unwrap().get();
    let b = mono(&o).unwrap().get();
    assert_eq!(BTreeSet::from([a, b]), BTreeSet::from([2, 5]));
    assert_eq!(mono(&o).unwrap_err(), Error::NoFreeId);
    assert_eq!(o.timers().len(), 8);
}

#[test]
fn exhaustion_is_per_owner() {
    let r = Registry::builder().id_bits(2).build().unwrap();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    for _ in 0..4 {
        mono(&a).unwrap();
    }
    assert_eq!(mono(&a).unwrap_err(), Error::NoFreeId);
    assert_eq!(mono(&b).unwrap().get(), 0);
}

#[test]
fn exact_id_mode_errors_and_counter() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    assert!(!o.restore_ids());
    assert_eq!(
        o.create_with_id(7, ClockId::Monotonic, NotifyKind::None),
        Err(Error::NotRestoring)
    );
    o.set_restore_ids(true);
    assert!(o.restore_ids());
    let t = o
        .create_with_id(123_456, ClockId::Realtime, NotifyKind::Queue)
        .unwrap();
    assert_eq!(t.get(), 123_456);
    let busy = o
        .create_with_id(123_456, ClockId::Monotonic, NotifyKind::None)
        .unwrap_err();
    assert_eq!((busy.clone(), busy.errno()), (Error::IdInUse, libc::EBUSY));
    let neg = o
        .create_with_id(-1, ClockId::Monotonic, NotifyKind::None)
        .unwrap_err();
    assert_eq!((neg.clone(), neg.errno()), (Error::InvalidId, libc::EINVAL));
    assert_eq!(o.timers().len(), 1, "failed creates leave nothing behind");
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), 123_457);
    // The last restored ID decides, not the highest (as Linux: 200 then 100 -> 101).
    o.set_restore_ids(true);
    o.create_with_id(200, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(100, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), 101);
}

#[test]
fn exact_id_beyond_the_limit_is_einval() {
    let r = Registry::builder().id_bits(4).build().unwrap();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    assert_eq!(
        o.create_with_id(16, ClockId::Monotonic, NotifyKind::None),
        Err(Error::InvalidId)
    );
    assert_eq!(
        o.create_with_id(15, ClockId::Monotonic, NotifyKind::None)
            .map(TimerId::get),
        Ok(15)
    );
}

#[test]
fn restored_id_voids_blocks_claimed_by_other_threads() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    // Another thread claims an ID block first.
    std::thread::scope(|s| {
        s.spawn(|| mono(&o).unwrap());
    });
    o.set_restore_ids(true);
    o.create_with_id(5000, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(mono(&o).unwrap().get(), 5001));
    });
}

#[test]
fn ids_are_isolated_between_owners() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    let ta = mono(&a).unwrap();
    let tb = mono(&b).unwrap();
    assert_eq!(ta, tb, "both owners start at ID 0");
    let only_b = mono(&b).unwrap();
    assert_eq!(a.getoverrun(only_b), Err(Error::UnknownTimer));
    assert_eq!(a.delete(only_b), Err(Error::UnknownTimer));
    assert_eq!(Error::UnknownTimer.errno(), libc::EINVAL);
    a.delete(ta).unwrap();
    assert_eq!(b.getoverrun(tb), Ok(0), "deleting a's 0 left b's 0 alone");
    assert_eq!(a.getoverrun(ta), Err(Error::UnknownTimer));
    assert_eq!(a.delete(ta), Err(Error::UnknownTimer), "double delete");
}

#[test]
fn getoverrun_reads_the_latched_count() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let t = mono(&o).unwrap();
    o.with_timer(t, |l| l.published().store(42, Ordering::Relaxed))
        .unwrap();
    assert_eq!(o.getoverrun(t), Ok(42));
}

#[test]
fn listing_reports_every_timer_with_clock_notify_and_status() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let a = o.create_as(ClockId::Realtime, NotifyKind::Queue).unwrap();
    let b = o
        .create_as(ClockId::Boottime, NotifyKind::Callback)
        .unwrap();
    let c = mono(&o).unwrap();
    o.with_timer(b, |l| l.state.status = Status::Armed).unwrap();
    o.delete(c).unwrap();
    let mut list = o.timers();
    list.sort_by_key(|i| i.id);
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[0].id, list[0].clock, list[0].notify, list[0].status),
        (a, ClockId::Realtime, NotifyKind::Queue, Status::Disarmed)
    );
    assert_eq!(
        (list[1].id, list[1].clock, list[1].notify, list[1].status),
        (b, ClockId::Boottime, NotifyKind::Callback, Status::Armed)
    );
}

#[test]
fn listing_during_concurrent_create_and_delete() {
    let r = Registry::builder().initial_buckets(16).build().unwrap();
    let o = r.owner(Hooks::default());
    let stable: BTreeSet<i32> = (0..2000).map(|_| mono(&o).unwrap().get()).collect();
    let stop = StdAtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        mine.push(mono(&o).unwrap());
                    }
                    for t in mine.drain(..) {
                        o.delete(t).unwrap();
                    }
                }
            });
        }
        for _ in 0..200 {
            let list = o.timers();
            let ids: Vec<i32> = list.iter().map(|i| i.id.get()).collect();
            let set: HashSet<i32> = ids.iter().copied().collect();
            assert_eq!(set.len(), ids.len(), "a timer listed twice");
            for s in &stable {
                assert!(set.contains(s), "stable timer {s} missing from a listing");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(o.timers().len(), stable.len());
}

#[test]
fn table_grows_incrementally_and_lookups_stay_exact() {
    let r = small_registry(2);
    let o = r.owner(Hooks::default());
    let mut live = BTreeSet::new();
    let mut dead = BTreeSet::new();
    for i in 0..20_000 {
        let t = mono(&o).unwrap();
        live.insert(t);
        if i % 3 == 0 {
            let victim = *live.iter().nth(live.len() / 2).unwrap();
            o.delete(victim).unwrap();
            live.remove(&victim);
            dead.insert(victim);
        }
        if i % 997 == 0 {
            for t in &live {
                assert_eq!(o.getoverrun(*t), Ok(0), "live {t} lost at step {i}");
            }
            for t in &dead {
                assert_eq!(o.getoverrun(*t), Err(Error::UnknownTimer));
            }
        }
    }
    assert!(r.buckets() >= 4096, "grew to {} buckets", r.buckets());
    assert_eq!(r.len(), live.len());
    for t in &live {
        assert_eq!(o.getoverrun(*t), Ok(0));
    }
}

/// The growth check runs at every 16th create of a thread, and at each of a thread's first 16:
/// threads that each create fewer than 16 timers must still grow the table.
#[test]
fn the_table_grows_when_each_thread_creates_only_a_few_timers() {
    let r = small_registry(1);
    let o = r.owner(Hooks::default());
    let threads = 40;
    // All alive at once, so that each has a thread index (a count stripe) of its own.
    let start = std::sync::Barrier::new(threads);
    let ids: Vec<Vec<TimerId>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let ids: Vec<TimerId> = (0..15).map(|_| mono(&o).unwrap()).collect();
                    start.wait();
                    ids
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(r.len(), threads * 15);
    // Each create helps a resize in progress along (8 old buckets), so the table is at least
    // one doubling short of 600 buckets here (and stays at 16 if no thread ever checked).
    assert!(
        r.buckets() >= 256,
        "600 timers, max load 1: {} buckets",
        r.buckets()
    );
    for t in ids.iter().flatten() {
        assert_eq!(o.getoverrun(*t), Ok(0));
    }
}

#[test]
fn destroying_an_owner_deletes_its_timers_only() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    for _ in 0..100 {
        mono(&a).unwrap();
        mono(&b).unwrap();
    }
    assert_eq!(r.len(), 200);
    let a2 = a.clone();
    a.destroy();
    assert!(a2.is_destroyed());
    assert_eq!(r.len(), 100);
    assert_eq!(mono(&a2), Err(Error::OwnerDeleted));
    assert_eq!(a2.getoverrun(id(0)), Err(Error::OwnerDeleted));
    assert_eq!(b.getoverrun(id(0)), Ok(0));
    drop(b);
    assert_eq!(
        r.len(),
        0,
        "dropping the last handle deletes the owner's timers"
    );
}

#[test]
fn run_linear_hash_keeps_runs_adjacent_and_scatters_strides() {
    let salt = [0x1234_5678, 0x9abc_def1];
    let mask = (1u64 << 10) - 1;
    for run in 0..100i32 {
        let base = hash(salt, 7, run << RUN_BITS) & mask;
        for k in 1..(1 << RUN_BITS) {
            assert_eq!(
                hash(salt, 7, (run << RUN_BITS) + k) & mask,
                (base + k as u64) & mask
            );
        }
    }
    // The salt suite's sparse restore case (BENCHMARKS.md): 2048 IDs 512 apart.
    let mut per_bucket = vec![0u32; 1024];
    for k in 0..2048 {
        per_bucket[(hash(salt, 7, k * 512) & mask) as usize] += 1;
    }
    let max = *per_bucket.iter().max().unwrap();
    assert!(max <= 10, "stride-512 IDs crowd one bucket: {max}");
    // Owners with the same IDs land in different buckets.
    assert_ne!(hash(salt, 7, 0) & mask, hash(salt, 8, 0) & mask);
}

#[test]
fn bucket_is_half_a_cache_line_and_nulls_markers_are_distinct() {
    // Two buckets per line, never one across two.
    assert_eq!(std::mem::size_of::<Bucket>(), 32);
    assert_eq!(std::mem::align_of::<Bucket>(), 32);
    assert_ne!(nulls(10, 5), nulls(11, 5));
    assert_ne!(nulls(10, 5), nulls(10, 6));
    assert_ne!(nulls(40, (1 << 40) - 1), table::MOVED);
}

#[test]
fn builder_rejects_bad_settings() {
    assert!(Registry::builder().id_bits(0).build().is_err());
    assert!(Registry::builder().id_bits(32).build().is_err());
    assert!(Registry::builder().initial_buckets(1000).build().is_err());
    assert!(Registry::builder().max_load(0).build().is_err());
    assert!(Registry::builder().shards(3).build().is_err());
    let e = Registry::builder().shards(3).build().unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
}

/// Deletes race lookups, re-creates of the same IDs, table growth, and the teardown of other
/// owners (whose pages are freed, and poisoned by the allocator above). Each timer carries its
/// own ID in `interval`; a lookup that ever returned another timer's state, or read freed
/// memory, would see a wrong payload or crash.
#[test]
fn stress_delete_racing_lookup_never_returns_another_timer() {
    const IDS: i32 = 512;
    let r = small_registry(1);
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    for i in 0..IDS {
        o.create_with_id(i, ClockId::Monotonic, NotifyKind::None)
            .unwrap();
        o.with_timer(id(i), |l| l.state.interval = i as u64 + 1)
            .unwrap();
    }
    let stop = StdAtomicBool::new(false);
    let rounds = if cfg!(debug_assertions) { 300 } else { 3000 };
    let barrier = Barrier::new(4);
    std::thread::scope(|s| {
        // Deleter/re-creator: the same IDs, in fresh (or reused) slots.
        s.spawn(|| {
            barrier.wait();
            for round in 0..rounds {
                for i in (round % 7..IDS).step_by(7) {
                    o.delete(id(i)).unwrap();
                    o.create_with_id(i, ClockId::Monotonic, NotifyKind::None)
                        .unwrap();
                    o.with_timer(id(i), |l| l.state.interval = i as u64 + 1)
                        .unwrap();
                }
            }
            stop.store(true, Ordering::Release);
        });
        // Churn in other owners: grows the table and frees pages of dropped owners.
        s.spawn(|| {
            barrier.wait();
            while !stop.load(Ordering::Acquire) {
                let other = r.owner(Hooks::default());
                for _ in 0..200 {
                    mono(&other).unwrap();
                }
                drop(other);
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                barrier.wait();
                let mut found = 0u64;
                while !stop.load(Ordering::Acquire) {
                    for i in 0..IDS {
                        match o.with_timer(id(i), |l| l.state.interval) {
                            Ok(v) => {
                                assert!(v == 0 || v == i as u64 + 1, "ID {i} returned payload {v}");
                                found += 1;
                            }
                            Err(e) => assert_eq!(e, Error::UnknownTimer),
                        }
                    }
                }
                assert!(found > 0);
            });
        }
    });
    assert_eq!(o.timers().len(), IDS as usize);
}

#[test]
fn a_deleted_owners_pages_are_reused_by_the_next_owner() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    for _ in 0..1000 {
        mono(&a).unwrap();
    }
    let bytes = a.slot_bytes();
    drop(a);
    // The pages reach the pool after an epoch grace period; other tests' threads may hold
    // pins meanwhile (an exclusive section holds one for its length), so keep giving the epoch
    // chances to advance, for up to 10 s.
    let pages = 1000usize.div_ceil(64) * 64 * std::mem::size_of::<Timer>();
    assert!(
        bytes > pages && bytes < pages + 1024,
        "16 pages and a directory: {bytes}"
    );
    let start = std::time::Instant::now();
    while r.pooled_bytes() != pages && start.elapsed() < std::time::Duration::from_secs(10) {
        crossbeam_epoch::pin().flush();
        std::thread::yield_now();
    }
    assert_eq!(r.pooled_bytes(), pages, "torn-down owner's pages pooled");
    let b = r.owner(Hooks::default());
    for _ in 0..1000 {
        mono(&b).unwrap();
    }
    assert_eq!(r.pooled_bytes(), 0, "the next owner took them");
    assert_eq!(b.slot_bytes(), bytes);
    assert_eq!(b.timers().len(), 1000);
}

#[test]
fn counter_skips_ids_restored_ahead_of_it() {
    // Restored IDs ahead of the counter must be skipped when the counter reaches them, even
    // though the counter has not wrapped (the chain check is not skipped after an exact-ID
    // create).
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    o.create_with_id(10, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(12, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(5, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    let got: Vec<i32> = (0..6).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(got, vec![6, 7, 8, 9, 11, 13]);
}

#[test]
fn ids_stay_unique_when_a_wrapped_counter_meets_ids_in_use() {
    // A counter that wraps hands out every ID again; only the free ones may be taken.
    let r = Registry::builder().id_bits(6).build().unwrap();
    let o = r.owner(Hooks::default());
    let mut live = BTreeSet::new();
    for round in 0..20 {
        while let Ok(t) = mono(&o) {
            assert!(
                live.insert(t.get()),
                "ID {t} handed out twice (round {round})"
            );
        }
        assert_eq!(live.len(), 64);
        // Free every third ID.
        let victims: Vec<i32> = live
            .iter()
            .copied()
            .filter(|i| (i + round) % 3 == 0)
            .collect();
        for v in victims {
            o.delete(id(v)).unwrap();
            live.remove(&v);
        }
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn shareable<T: Send + Sync + Clone>() {}
    shareable::<Registry>();
    shareable::<Owner>();
}

/// Lookups racing the table's growth: every doubling retires a table that readers may still be
/// walking. Freed tables are poisoned by the allocator above, so a table freed before its
/// readers left would send a walker through 0xA5 pointers.
#[test]
fn stress_lookups_racing_table_growth_read_no_freed_table() {
    let iterations = if cfg!(debug_assertions) { 30 } else { 200 };
    for _ in 0..iterations {
        let r = small_registry(1);
        let watched = r.owner(Hooks::default());
        let ids: Vec<TimerId> = (0..64).map(|_| mono(&watched).unwrap()).collect();
        for t in &ids {
            watched
                .with_timer(*t, |l| l.state.interval = t.get() as u64 + 1)
                .unwrap();
        }
        let done = StdAtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let grower = r.owner(Hooks::default());
                for _ in 0..20_000 {
                    mono(&grower).unwrap();
                }
                done.store(true, Ordering::Release);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    while !done.load(Ordering::Acquire) {
                        for t in &ids {
                            let v = watched.with_timer(*t, |l| l.state.interval).unwrap();
                            assert_eq!(v, t.get() as u64 + 1);
                            assert_eq!(watched.getoverrun(*t), Ok(0));
                        }
                    }
                });
            }
        });
        assert!(r.buckets() >= 16 << 10, "grew to {}", r.buckets());
    }
}

#[test]
fn the_service_hooks_run_once_per_deleted_timer_and_once_per_destroyed_owner() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let ids: Vec<TimerId> = (0..5).map(|_| mono(&o).unwrap()).collect();
    o.delete(ids[0]).unwrap();
    assert_eq!(o.delete(ids[0]), Err(Error::UnknownTimer));
    let hooks = |o: &Owner| {
        let h = o.service();
        let n = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::Relaxed);
        (n(&h.deletes), n(&h.destroys))
    };
    assert_eq!(hooks(&o), (1, 0), "one delete, one hook run");
    o.destroy();
    assert_eq!(
        hooks(&o),
        (5, 1),
        "the other four timers, then the owner once"
    );
    o.destroy();
    assert_eq!(hooks(&o), (5, 1), "destroy is idempotent");
    assert_eq!(r.len(), 0);
}

#[test]
fn a_near_entry_keeps_tag_and_pointer_in_one_word_and_skips_what_does_not_fit() {
    let b = Bucket::default();
    let h = 0xABCD_0000_0000_0007u64;
    b.near_push(table::tag(h), 0x7f12_3456_7840);
    let w = b.near[0].load(Ordering::Relaxed);
    assert_eq!(table::near_match(w, table::tag(h)), 0x7f12_3456_7840);
    // Another tag does not match: the lookup goes to the chain.
    assert_eq!(table::near_match(w, table::tag(h ^ (1 << 63))), 0);
    // An address above 48 bits is not recorded (the chain still finds the timer).
    b.near_push(table::tag(h), 1 << 50);
    assert_eq!(b.near[0].load(Ordering::Relaxed), w);
    assert_eq!(b.near[1].load(Ordering::Relaxed), 0);
    b.near_remove(0x7f12_3456_7840);
    assert_eq!(b.near[0].load(Ordering::Relaxed), 0);
}

const NONE_INIT: (ClockId, NotifyKind) = (ClockId::Monotonic, NotifyKind::None);

#[test]
fn an_exclusive_section_knows_whether_the_owner_holds_a_timer() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let other = r.owner(Hooks::default());
    o.set_restore_ids(true);
    assert!(o.exclusive(|ex| ex.alone()), "a new owner");
    mono(&other).unwrap();
    assert!(
        o.exclusive(|ex| ex.alone()),
        "another owner's timers do not count"
    );
    let t = mono(&o).unwrap();
    assert!(!o.exclusive(|ex| ex.alone()), "a timer of its own");
    // Not alone: the section's exact-ID creates still look for their ID, and set the counter.
    assert_eq!(
        o.exclusive(|ex| ex.create(t.get(), NONE_INIT, None)),
        Err(Error::IdInUse)
    );
    o.exclusive(|ex| ex.create(500, NONE_INIT, None)).unwrap();
    o.delete(t).unwrap();
    o.delete(id(500)).unwrap();
    assert!(o.exclusive(|ex| ex.alone()), "its timers deleted");
    // Alone: the creates go in unchecked (their IDs distinct), each found by lookups after.
    let made: Vec<TimerId> = o
        .exclusive(|ex| {
            (0..40)
                .map(|i| ex.create(i * 3, NONE_INIT, None))
                .collect::<Result<_, _>>()
        })
        .unwrap();
    let listed: BTreeSet<i32> = o.timers().iter().map(|t| t.id.get()).collect();
    assert_eq!(listed, (0..40).map(|i| i * 3).collect());
    for t in made {
        assert_eq!(o.getoverrun(t), Ok(0));
    }
    // The errors of an exact-ID create come first.
    assert_eq!(
        o.exclusive(|ex| ex.create(-1, NONE_INIT, None)),
        Err(Error::InvalidId)
    );
    o.set_restore_ids(false);
    assert_eq!(
        o.exclusive(|ex| ex.create(1, NONE_INIT, None)),
        Err(Error::NotRestoring)
    );
}

/// Creates of other threads wait for an exclusive section to end; without the wait, the
/// other thread's create ends while the section is still open.
#[test]
fn creates_of_other_threads_wait_for_an_exclusive_section() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    let open = StdAtomicBool::new(false);
    let started = StdAtomicBool::new(false);
    std::thread::scope(|s| {
        let other = o.exclusive(|ex| {
            open.store(true, Ordering::SeqCst);
            let other = s.spawn(|| {
                started.store(true, Ordering::SeqCst);
                let t = mono(&o).unwrap();
                (t, open.load(Ordering::SeqCst))
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The section goes on for a while after the other create began.
            for i in 0..200 {
                ex.create(1000 + i, NONE_INIT, None).unwrap();
                std::thread::yield_now();
            }
            open.store(false, Ordering::SeqCst);
            other
        });
        let (t, during) = other.join().unwrap();
        assert!(
            !during,
            "a create ended inside another thread's exclusive section"
        );
        assert!(
            !(1000..1200).contains(&t.get()),
            "the other create took a section ID"
        );
    });
    assert_eq!(o.timers().len(), 201);
}

/// An exclusive section ends (its flag cleared) when its closure panics: later creates do
/// not wait forever.
#[test]
fn an_exclusive_section_that_panics_lets_creates_go_on() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        o.exclusive(|_| panic!("inside the section"));
    }));
    assert!(caught.is_err());
    let done = std::thread::scope(|s| s.spawn(|| mono(&o)).join().unwrap());
    assert!(done.is_ok());
}
