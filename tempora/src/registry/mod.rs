//! Owners, timer IDs and the registry that maps (owner, ID) to a timer object.
//!
//! An [`Owner`] is the user-space analogue of a process: a namespace of [`TimerId`]s (and, in
//! later layers, a node for statistics and the unit of checkpoint). The [`Registry`] holds one
//! hash table for the timers of **all** its owners, as Linux does since 6.15, and each owner
//! keeps its timer objects in slot pages of its own (`owner.rs`).
//!
//! ```text
//!  Registry ── table ──► Table { buckets[2^k], future } ─ Bucket (64 B): head|LOCK, len, near[3]
//!     │                                                    └─► Timer ─► Timer ─► nulls(k, i)
//!     ├─ count stripes[64+] (timer count, one single-writer stripe per live thread index)
//!     ├─ page pool (slot pages of deleted owners, for reuse)
//!     └─ seed (per-registry hash key)
//!  Owner ── key, ID counter, restore flag, slot pages (64 timers each), shards[S]
//! ```
//!
//! # Cost of the calls (measured on the 2-CPU development machine, warm registry)
//!
//! * lookup (getoverrun): an epoch pin, the hash, one bucket line (its `near` shortcuts
//!   usually name the timer), the timer's two lines; no lock, no store. 13-18 ns up to 100k
//!   timers.
//! * create: a pin, the thread's owner shard lock, one bucket lock; the chain is walked only
//!   if IDs may repeat (below). 29-33 ns.
//! * delete: a pin, the timer lock, one bucket lock, the slot's home shard lock.
//! * Nothing of these touches a cache line that another thread writes in the common case:
//!   shards and count stripes are per thread index, buckets per ID run.
//!
//! # Sizing: scaled by CPUs, then grown
//!
//! The table starts, as Linux 6.15's does, at `roundup_pow_of_two(512 * CPUs)` buckets (1024
//! on a 2-CPU machine; [`Builder::initial_buckets`] overrides it), but unlike Linux's, which is
//! fixed at boot and so has chains of ~100 at 100k timers and ~10k at 10M, it doubles whenever
//! the registry holds more than [`Builder::max_load`] (default 2) timers per bucket. Growth is
//! incremental (see `table.rs`): while a resize is in progress every create and delete splits
//! `MIGRATE_BATCH` (8) old buckets, lookups never wait for it, and a writer
//! waits for at most one bucket's split.
//!
//! # Hash
//!
//! Keyed by (owner key, ID) with the *run-linear keyed hash* (`table::hash`): runs of 16
//! consecutive IDs of an owner fill 16 consecutive buckets, runs and owners scatter by two
//! folded multiplies with a random per-registry seed.
//!
//! # IDs
//!
//! * Normal mode: each owner has a counter (the kernel's `next_posix_timer_id`) that wraps from
//!   `i32::MAX` (or the configured [`Builder::id_bits`] limit) to 0; a candidate already in use
//!   is skipped. A thread claims 64 IDs of the counter at a time for its shard, so on one thread
//!   IDs come out as 0, 1, 2, … exactly as from Linux; across threads they are unique but only
//!   increasing per thread. When every ID is in use, create fails with [`Error::NoFreeId`]
//!   (`EAGAIN`) after trying each candidate once: at most `2^id_bits` probes.
//! * Until an owner's counter wraps or it makes an exact-ID create, a candidate from its
//!   counter cannot be in use, and create does not walk the chain to check (at 1M timers that
//!   walk was a cache miss per create: 74 → 45 ns). The ordering argument is at the check in
//!   `create_locked`.
//! * Exact-ID (restore) mode ([`Owner::set_restore_ids`], Linux's
//!   `PR_TIMER_CREATE_RESTORE_IDS`): [`Owner::create_with_id`] takes the requested ID; in use
//!   → [`Error::IdInUse`] (`EBUSY`), negative or beyond the limit → [`Error::InvalidId`]
//!   (`EINVAL`), mode off → [`Error::NotRestoring`]. On success the counter is **set** to
//!   `id + 1`, so after restoring, normal creates continue after the last restored ID (Linux
//!   6.18 on the development machine: restore 200 then 100, switch off, the next ID is 101;
//!   restoring in ascending order, as checkpoint tools do, means after the highest).
//!
//! # Locking
//!
//! Locks, all short: no callback, no blocking call, and allocation only where named here, with
//! what bounds it:
//! * shard lock (`ByteLock`): an owner shard's free list and ID/slot blocks. A create that
//!   needs a fresh slot block may allocate a slot page (64 timers, 8 KiB) and double the page
//!   directory under it (`Slots::add_page`): once per 64 slots, bounded by the owner's peak
//!   timer count;
//! * timer lock (`ByteLock` in the timer's second cache line): the timer's state. The service
//!   takes a base lock and an event queue's lock under it, and may grow that queue (at most
//!   one entry per timer of the owner) and issue a futex wake-up (only when a receiver or a
//!   driver sleeps) while holding it;
//! * bucket lock (bit 0 of the bucket head): the chain's links and `len`. A split takes the
//!   old bucket's and two future buckets' locks and collects the old chain into a vector sized
//!   before the lock is taken (it grows under the lock only if creates lengthened the chain
//!   in between: bounded by the chain).
//!
//! A panic inside a shard's or a timer's critical section poisons that lock
//! (`sync::ByteLock::with`); the calls that need it then fail with [`Error::Poisoned`]. The
//! bucket lock has no poisoned state: its critical sections are pointer updates that do not
//! panic short of a broken invariant of the chain (a `debug_assert`), and one that did would
//! leave the bucket locked. That is the one lock to which the poisoning rule does not reach.
//!
//! **Lock order: shard → timer → bucket (old table → future table); page directory (`grow`,
//! once per 64 fresh slots) only under a shard lock, taking nothing else.** A create holds its
//! shard lock while it hashes the new timer (so an owner teardown, which takes every shard lock
//! first, never races a half-made timer); delete takes the timer lock, drops it, then the
//! bucket lock, then the home shard's lock with nothing else held; a split takes the old bucket
//! then the two future buckets. No path takes a lock that comes earlier in the order while
//! holding a later one.
//!
//! # Lock-free lookups, and what they may observe
//!
//! A lookup pins the epoch, walks the chain without any lock (Acquire loads), and takes the
//! lock of the first timer whose `owner` word is exactly "visible, this owner" and whose ID
//! matches. Under that lock it checks both again; only then is the timer the caller's. During a
//! concurrent delete of the same ID a lookup observes exactly one of:
//! 1. the timer before the delete took its lock: the operation applies to the live timer and
//!    is ordered before the delete;
//! 2. `Error::UnknownTimer`: the delete had already marked it pending (under the timer lock) or
//!    unhashed it.
//!
//! It never observes a freed timer (slots are type-stable and pages outlive every pinned
//! walker), and never another owner's or another ID's timer: if the slot was deleted and
//! re-created meanwhile the re-check fails and the lookup starts over. A walk carried into
//! another chain by such a reuse, or by a resize, ends at a foreign nulls marker and restarts.
//!
//! # Listing
//!
//! [`Owner::timers`] scans the owner's own slot pages, taking each live timer's lock for a few
//! nanoseconds; it takes no shard or bucket lock, so creators and deleters never wait for it
//! (as Linux 6.15's RCU-safe `/proc/PID/timers`). A timer that exists for the whole listing is in
//! one slot for the whole listing and is reported exactly once; timers created or deleted
//! meanwhile may or may not appear. Deleting an owner ([`Owner::destroy`], or dropping its last
//! handle) deletes all its timers.

mod owner;
pub(crate) mod table;
pub(crate) mod timer;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

pub use timer::Status;

use crate::clock::ClockId;
use crate::error::Error;
use crate::sync::Poisoned;
use crate::sync::{
    thread_index, AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, Ordering,
};
use crossbeam_epoch::{self as epoch, Atomic, Guard};
use crossbeam_utils::CachePadded;
use owner::{PagePool, Shard, Slots, ID_BLOCK, NONE, SLOT_BLOCK_MAX};
use std::sync::Arc;
use table::{Table, MIGRATE_BATCH};
use timer::{visible, Locked, Timer, PENDING};

/// What `Error::Poisoned` names for a poisoned timer lock (the service reports it too).
pub(crate) const TIMER_POISONED: &str = "a timer";
/// What `Error::Poisoned` names for a poisoned ID shard.
const SHARD_POISONED: &str = "an owner's ID shard";

/// A timer ID: a non-negative `i32`, like Linux's `timer_t`. IDs are per [`Owner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct TimerId(i32);

impl TimerId {
    /// The ID `raw`, if it is non-negative.
    pub fn new(raw: i32) -> Option<TimerId> {
        (raw >= 0).then_some(TimerId(raw))
    }

    /// The raw value.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for TimerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How a timer reports its expiry, chosen at create (the service layer implements them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum NotifyKind {
    /// Nothing is delivered (`SIGEV_NONE`); gettime shows the state.
    #[default]
    None = 0,
    /// An event on the owner's queue, with POSIX overrun semantics (`SIGEV_SIGNAL`).
    Queue = 1,
    /// A callback on the driver (`SIGEV_THREAD`).
    Callback = 2,
}

impl NotifyKind {
    fn from_u8(v: u8) -> NotifyKind {
        match v {
            1 => NotifyKind::Queue,
            2 => NotifyKind::Callback,
            _ => NotifyKind::None,
        }
    }
}

/// One line of an owner's timer listing ([`Owner::timers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerInfo {
    /// The timer's ID.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// How it notifies.
    pub notify: NotifyKind,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
}

/// Configures a [`Registry`].
#[derive(Debug, Clone)]
pub struct Builder {
    id_bits: u32,
    initial_buckets: Option<usize>,
    max_load: usize,
    shards: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            id_bits: 31,
            initial_buckets: None,
            max_load: 2,
            shards: None,
        }
    }
}

impl Builder {
    /// Timer IDs are `0 .. 2^bits` (1 ..= 31; default 31, Linux's whole `timer_t` range). A
    /// small limit makes ID exhaustion testable.
    pub fn id_bits(&mut self, bits: u32) -> &mut Self {
        self.id_bits = bits;
        self
    }

    /// Initial bucket count, a power of two (default `roundup_pow_of_two(512 * CPUs)`).
    pub fn initial_buckets(&mut self, buckets: usize) -> &mut Self {
        self.initial_buckets = Some(buckets);
        self
    }

    /// The table doubles when it holds more than `load` timers per bucket (1 ..= 64; default 2).
    pub fn max_load(&mut self, load: usize) -> &mut Self {
        self.max_load = load;
        self
    }

    /// Shards per owner, a power of two (default 64). Threads share an owner's shard only when
    /// more than this many use the owner at once; a shard (128 bytes) is allocated when a thread
    /// first creates in the owner.
    pub fn shards(&mut self, shards: usize) -> &mut Self {
        self.shards = Some(shards);
        self
    }

    /// Builds the registry.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a setting out of the documented range.
    pub fn build(&self) -> Result<Registry, Error> {
        if !(1..=31).contains(&self.id_bits) {
            return Err(Error::InvalidConfig("id_bits must be 1..=31"));
        }
        if !(1..=64).contains(&self.max_load) {
            return Err(Error::InvalidConfig("max_load must be 1..=64"));
        }
        let cpus = crate::sync::cpus();
        let buckets = self
            .initial_buckets
            .unwrap_or_else(|| (512 * cpus).next_power_of_two());
        if !buckets.is_power_of_two() || !(16..=1 << table::MAX_BITS).contains(&buckets) {
            return Err(Error::InvalidConfig(
                "initial_buckets must be a power of two, 16 ..= 2^40",
            ));
        }
        let shards = self.shards.unwrap_or(64);
        if !shards.is_power_of_two() || shards > 1 << 15 {
            return Err(Error::InvalidConfig(
                "shards must be a power of two, at most 2^15",
            ));
        }
        let seed = random_seed();
        let stripes = (cpus.next_power_of_two() * 4).max(64);
        Ok(Registry {
            shared: Arc::new(Shared {
                table: Atomic::new(Table::new(buckets.trailing_zeros(), seed)),
                seed,
                pool: PagePool::new(),
                count: (0..stripes).map(|_| Default::default()).collect(),
                count_overflow: Default::default(),
                next_owner: AtomicU64::new(1),
                id_mask: (1u32 << self.id_bits) - 1,
                max_load: self.max_load,
                shards,
            }),
        })
    }
}

/// A per-registry hash key from the standard library's randomly keyed hasher.
fn random_seed() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut out = [0u64; 2];
    for (i, v) in out.iter_mut().enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        *v = h.finish();
    }
    out
}

/// The registry of timer IDs of all its owners. Cloning shares it.
#[derive(Clone)]
pub struct Registry {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("buckets", &self.buckets())
            .field("timers", &self.len())
            .finish()
    }
}

struct Shared {
    table: Atomic<Table>,
    /// The hash key (every table generation uses the same).
    seed: [u64; 2],
    /// Slot pages of torn-down owners, for new owners to reuse.
    pool: PagePool,
    /// Timer count, striped by thread index (summed when deciding to grow; see `count_add`).
    count: Box<[CachePadded<AtomicIsize>]>,
    count_overflow: CachePadded<AtomicIsize>,
    next_owner: AtomicU64,
    id_mask: u32,
    max_load: usize,
    shards: usize,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry with the default configuration.
    pub fn new() -> Registry {
        Builder::default().build().expect("default configuration")
    }

    /// A builder to configure a registry.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A new owner (an empty ID namespace, restore mode off, next ID 0).
    pub fn owner(&self) -> Owner {
        let s = &self.shared;
        Owner {
            inner: Arc::new(OwnerInner {
                key: s.next_owner.fetch_add(1, Ordering::Relaxed),
                shared: self.shared.clone(),
                counter: CachePadded::new(AtomicU32::new(0)),
                epoch: AtomicU32::new(0),
                restore: AtomicBool::new(false),
                reused_ids: AtomicBool::new(false),
                dead: AtomicBool::new(false),
                poisoned: AtomicBool::new(false),
                slots: Slots::new(),
                shards: (0..s.shards)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect(),
            }),
        }
    }

    /// Buckets in the current table.
    pub fn buckets(&self) -> usize {
        let guard = epoch::pin();
        self.shared.current(&guard).buckets.len()
    }

    /// Whether a resize is in progress.
    pub fn resizing(&self) -> bool {
        let guard = epoch::pin();
        self.shared.current(&guard).future().is_some()
    }

    /// Timers in the registry (exact when no create or delete is in flight).
    pub fn len(&self) -> usize {
        self.shared.count().max(0) as usize
    }

    /// Whether the registry holds no timer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of slot pages kept for reuse after their owners were deleted.
    pub fn pooled_bytes(&self) -> usize {
        self.shared.pool.bytes()
    }

    /// Bytes of hash table (current table and, during a resize, the future one).
    pub fn table_bytes(&self) -> usize {
        let guard = epoch::pin();
        let t = self.shared.current(&guard);
        std::iter::once(t)
            .chain(t.future())
            .map(|t| std::mem::size_of_val::<[table::Bucket]>(&t.buckets))
            .sum()
    }
}

impl Shared {
    #[inline]
    fn current<'g>(&self, guard: &'g Guard) -> &'g Table {
        // Acquire: pairs with the Release store that published the table (build or the end of
        // a resize), so its buckets are visible.
        let t = self.table.load(Ordering::Acquire, guard);
        // SAFETY: the current table is never null, and a retired table is freed by a deferred
        // function (`split_some`) only after every thread pinned when it was retired has
        // unpinned; `guard` is such a pin.
        unsafe { t.deref() }
    }

    /// The timer (owner, id) as a lock-free walk finds it; re-check under its lock.
    #[inline]
    fn find<'g>(&self, hash: u64, owner_word: u64, id: i32, guard: &'g Guard) -> Option<&'g Timer> {
        table::find(|| self.current(guard), hash, owner_word, id)
    }

    /// Locks the bucket of `hash` in the table that holds it now; returns (table, index, head).
    #[inline]
    fn lock_bucket<'g>(&self, hash: u64, guard: &'g Guard) -> (&'g Table, usize, usize) {
        let mut t = self.current(guard);
        loop {
            let idx = t.index(hash);
            match t.buckets[idx].lock() {
                Some(head) => return (t, idx, head),
                None => t = t.future().expect("a MOVED bucket has a future table"),
            }
        }
    }

    /// Adds `delta` to the calling thread's count stripe.
    ///
    /// `thread_index()` is unique among live threads, so a thread whose index is below the
    /// stripe count is the only writer of its stripe (an index is handed to a new thread only
    /// after its previous holder exited, and the Release/Acquire pair on the index bitmap
    /// orders the two writers): it
    /// updates with a plain load and store instead of a read-modify-write. Threads beyond the
    /// stripe count share one overflow counter and add atomically.
    #[inline]
    fn count_add(&self, delta: isize) {
        self.count_add_as(thread_index(), delta);
    }

    /// `count_add` for a caller that already has its `thread_index()`.
    #[inline]
    fn count_add_as(&self, i: usize, delta: isize) {
        match self.count.get(i) {
            Some(stripe) => {
                // Relaxed: single writer (above); readers only need an eventually exact sum.
                stripe.store(stripe.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
            }
            // Relaxed: the count is a growth hint; nothing is ordered by it.
            None => _ = self.count_overflow.fetch_add(delta, Ordering::Relaxed),
        }
    }

    fn count(&self) -> isize {
        self.count
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<isize>()
            + self.count_overflow.load(Ordering::Relaxed)
    }

    /// After an insert made a chain of `len` in `t`: start a resize if the registry holds more
    /// than `max_load` timers per bucket.
    fn maybe_grow(&self, t: &Table, len: u32, guard: &Guard) {
        // Summing the stripes is the expensive part: only chains twice the allowed average
        // long ask (at the allowed load about 1 insert in 20 sees one; above it, most do).
        if (len as usize) <= 2 * self.max_load || t.bits >= table::MAX_BITS {
            return;
        }
        if t.future().is_some() || !std::ptr::eq(t, self.current(guard)) {
            return;
        }
        if self.count() <= (t.buckets.len() * self.max_load) as isize {
            return;
        }
        let f = Box::into_raw(Box::new(Table::new(t.bits + 1, t.seed)));
        // AcqRel: Release publishes the new (empty) table to walkers that load `future`.
        if t.future
            .compare_exchange(std::ptr::null_mut(), f, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `f` came from `Box::into_raw` above and was never shared.
            drop(unsafe { Box::from_raw(f) });
        }
    }

    /// If a resize is in progress, splits the next `MIGRATE_BATCH` buckets; the call that
    /// splits the last one makes the future table current and retires the old one.
    #[inline]
    fn help_resize(&self, guard: &Guard) {
        let cur = self.table.load(Ordering::Acquire, guard);
        // SAFETY: as in `current`.
        let t = unsafe { cur.deref() };
        let Some(f) = t.future() else {
            return;
        };
        self.split_some(cur, t, f, guard);
    }

    #[cold]
    fn split_some(&self, cur: epoch::Shared<'_, Table>, t: &Table, f: &Table, guard: &Guard) {
        let n = t.buckets.len();
        let start = t.claimed.fetch_add(MIGRATE_BATCH, Ordering::Relaxed);
        if start >= n {
            return;
        }
        let end = (start + MIGRATE_BATCH).min(n);
        for i in start..end {
            t.split_bucket(i, f);
        }
        // AcqRel: the last splitter sees every other splitter's work before publishing.
        let done = t.split.fetch_add(end - start, Ordering::AcqRel) + (end - start);
        if done == n {
            // Release: the new table and everything split into it are visible to whoever
            // loads it as current.
            self.table
                .store(epoch::Shared::from(f as *const Table), Ordering::Release);
            // SAFETY: `cur` is no longer reachable from `self.table` (replaced just above, and
            // only the last splitter does this, once per table). Pinned threads may still use
            // it; the deferred function runs after they unpin, and owns the table from then on.
            let retired = unsafe { cur.into_owned() }.into_box();
            // SAFETY: the deferred function frees the table after the grace period (above).
            unsafe {
                guard.defer_unchecked(move || {
                    let bytes = std::mem::size_of_val::<[table::Bucket]>(&retired.buckets);
                    drop_deferred(retired, bytes);
                })
            };
            // Hand the retired table to the global queue now: a resize is rare, so this
            // thread's bag would otherwise hold it until 64 other deferred frees came along.
            guard.flush();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone (owners hold an `Arc<Shared>`), so no thread can
        // reach the tables any more.
        unsafe {
            let guard = epoch::unprotected();
            let t = self.table.load(Ordering::Acquire, guard);
            let f = t.deref().future.load(Ordering::Acquire);
            if !f.is_null() {
                drop(Box::from_raw(f));
            }
            drop(t.into_owned());
        }
    }
}

/// An ID namespace: the user-space analogue of a process. Cloning shares it; it is deleted,
/// with all its timers, by [`Owner::destroy`] or when its last handle is dropped.
#[derive(Clone)]
pub struct Owner {
    inner: Arc<OwnerInner>,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("key", &self.inner.key)
            .field("restore_ids", &self.restore_ids())
            .field("destroyed", &self.inner.dead.load(Ordering::Relaxed))
            .finish()
    }
}

struct OwnerInner {
    /// Unique for the registry's life; never 0 (0 marks a free slot).
    key: u64,
    shared: Arc<Shared>,
    /// Next timer ID candidate (the kernel's `next_posix_timer_id`), claimed in blocks.
    counter: CachePadded<AtomicU32>,
    /// Bumped by an exact-ID create so shards drop their claimed ID blocks.
    epoch: AtomicU32,
    restore: AtomicBool,
    /// Set forever once an ID may be handed out twice by the counter (it wrapped) or was
    /// chosen by the caller (exact-ID create): from then on a create checks the chain for the
    /// candidate (see `create_locked`).
    reused_ids: AtomicBool,
    dead: AtomicBool,
    /// Set by a teardown that met a poisoned lock (a panic inside a shard's or a timer's
    /// critical section): a timer may still be hashed or named by a wheel entry, so the
    /// owner's slot pages are never recycled (they leak, rather than be reused under a
    /// reference that outlives them).
    poisoned: AtomicBool,
    slots: Slots,
    /// Allocated when a thread index first creates here (see `shard_at`).
    shards: Box<[AtomicPtr<CachePadded<Shard>>]>,
}

impl Owner {
    /// Creates a timer with the next free ID (disarmed).
    ///
    /// # Errors
    /// [`Error::NoFreeId`] when every ID is in use; [`Error::OwnerDeleted`].
    #[doc(alias = "timer_create")]
    pub fn create(&self, clock: ClockId, notify: NotifyKind) -> Result<TimerId, Error> {
        self.inner.create(None, clock, notify, [0; 2], None)
    }

    /// Creates a timer with exactly the ID `id` (restore mode must be on).
    ///
    /// # Errors
    /// [`Error::NotRestoring`] if restore mode is off; [`Error::InvalidId`] for a negative ID
    /// or one beyond the ID limit; [`Error::IdInUse`] if this owner has a timer `id`;
    /// [`Error::OwnerDeleted`]. Nothing is allocated or changed on error.
    #[doc(alias = "timer_create")]
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn create_with_id(
        &self,
        id: i32,
        clock: ClockId,
        notify: NotifyKind,
    ) -> Result<TimerId, Error> {
        self.inner.create(Some(id), clock, notify, [0; 2], None)
    }

    /// Deletes timer `id`; its ID becomes free once this returns.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] if this owner has no timer `id`; [`Error::OwnerDeleted`].
    #[doc(alias = "timer_delete")]
    pub fn delete(&self, id: TimerId) -> Result<(), Error> {
        self.inner.delete(id, |_| ())
    }

    /// The overrun count latched when the timer's last event was consumed. Lock-free: the
    /// value the timer had at one instant while it existed.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`]; [`Error::OwnerDeleted`].
    #[doc(alias = "timer_getoverrun")]
    pub fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.inner
            .read_timer(id, |t| t.written.overrun_last.load(Ordering::Relaxed))
    }

    /// Turns exact-ID (restore) mode on or off.
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn set_restore_ids(&self, on: bool) {
        self.inner.restore.store(on, Ordering::Release);
    }

    /// Whether exact-ID (restore) mode is on.
    pub fn restore_ids(&self) -> bool {
        self.inner.restore.load(Ordering::Acquire)
    }

    /// The owner's timers, without blocking creators or deleters (see the module doc for what a
    /// listing concurrent with them reports). Order: by slot, not by ID.
    pub fn timers(&self) -> Vec<TimerInfo> {
        self.inner.list()
    }

    /// Deletes the owner and all its timers. Later calls on any handle of it fail with
    /// [`Error::OwnerDeleted`]. Idempotent.
    pub fn destroy(&self) {
        self.inner.teardown(|_| ());
    }

    /// Whether [`Owner::destroy`] has been called.
    pub fn is_destroyed(&self) -> bool {
        self.inner.dead.load(Ordering::Acquire)
    }

    /// Bytes of timer slot pages this owner has allocated.
    pub fn slot_bytes(&self) -> usize {
        self.inner.slots.bytes()
    }

    /// Runs `f` on timer `id`'s state with its lock held (the service layer's entry point).
    pub(crate) fn with_timer<R>(
        &self,
        id: TimerId,
        f: impl FnOnce(Locked<'_>) -> R,
    ) -> Result<R, Error> {
        self.inner.with_timer(id, f)
    }

    /// `create` / `create_with_id` (`requested`) that also stores the service layer's two
    /// words in the timer (`Timer::hot.ext`) before it becomes visible.
    pub(crate) fn create_ext(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: NotifyKind,
        ext: [usize; 2],
    ) -> Result<TimerId, Error> {
        self.inner.create(requested, clock, notify, ext, None)
    }

    /// `create_ext`, then `then` on the new timer under its lock, reached through the slot the
    /// create filled rather than a second lookup (a restore sets each timer's state so).
    /// `then` does not run if the timer was deleted in between.
    pub(crate) fn create_ext_then(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: NotifyKind,
        ext: [usize; 2],
        then: &mut dyn FnMut(Locked<'_>),
    ) -> Result<TimerId, Error> {
        self.inner.create(requested, clock, notify, ext, Some(then))
    }

    /// `delete`, running `on_delete` under the timer's lock at the moment it stops being
    /// visible (the service disarms it there, so no base holds it afterwards).
    pub(crate) fn delete_with(
        &self,
        id: TimerId,
        on_delete: impl FnOnce(&mut Locked<'_>),
    ) -> Result<(), Error> {
        self.inner.delete(id, on_delete)
    }

    /// `destroy`, running `on_delete` on each timer as `delete_with` does.
    pub(crate) fn destroy_with(&self, on_delete: impl FnMut(&mut Locked<'_>)) {
        self.inner.teardown(on_delete);
    }

    /// Runs `f` on every visible timer of the owner, each under its own lock (a checkpoint's
    /// walk: creators and deleters are not blocked; timers created or deleted meanwhile may or
    /// may not be visited, as in [`Owner::timers`]).
    ///
    /// # Errors
    /// [`Error::Poisoned`] if a timer's lock is poisoned (the other timers are visited).
    pub(crate) fn for_each_locked(&self, mut f: impl FnMut(Locked<'_>)) -> Result<(), Error> {
        let word = visible(self.inner.key);
        let guard = epoch::pin();
        let mut result = Ok(());
        self.inner.slots.for_each(&guard, |timer| {
            // Relaxed: a filter; `lock_if` re-checks under the lock.
            if timer.hot.owner.load(Ordering::Relaxed) == word
                && timer.lock_if(word, None, &mut f).is_err()
            {
                result = Err(Error::Poisoned(TIMER_POISONED));
            }
        });
        result
    }

    /// The ID counter as a checkpoint records it: the lowest ID a normal create would hand
    /// out next. That is the owner's counter, or lower while a shard still holds unused IDs of
    /// a block it claimed (a thread that made one timer has claimed 64 IDs, and its next
    /// create gets the second of them).
    pub(crate) fn counter(&self) -> u32 {
        let inner = &*self.inner;
        // Acquire (both): pair with the Release epoch bump of `set_counter` / exact-ID creates.
        let epoch = inner.epoch.load(Ordering::Acquire);
        let mut next = inner.counter.load(Ordering::Acquire);
        for slot in inner.shards.iter() {
            // SeqCst: as in `shard_at`.
            let p = slot.load(Ordering::SeqCst);
            if p.is_null() {
                continue;
            }
            // SAFETY: installed shards live as long as the owner.
            let shard = unsafe { &*p };
            // A poisoned shard hands out no more IDs: its block does not lower the counter.
            let _ = shard.locked(|st| {
                if st.id_left > 0 && st.id_epoch == epoch && st.id_next < next {
                    next = st.id_next;
                }
            });
        }
        next & inner.shared.id_mask
    }

    /// Sets the ID counter (a restore puts back the checkpointed one); ID blocks that threads
    /// claimed from the old counter are voided.
    pub(crate) fn set_counter(&self, next: u32) {
        // Relaxed + Release bump: as an exact-ID create does (`create_locked`).
        self.inner.counter.store(next, Ordering::Relaxed);
        self.inner.reused_ids.store(true, Ordering::Relaxed);
        self.inner.epoch.fetch_add(1, Ordering::Release);
    }

    /// Runs `f` under the lock of `timer` if it is still this owner's visible timer `id` in
    /// incarnation `generation` (an event names its timer so): `Ok(None)` if it is not.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the timer's lock is.
    pub(crate) fn with_slot<R>(
        &self,
        timer: &Timer,
        id: TimerId,
        generation: u32,
        f: impl FnOnce(Locked<'_>) -> R,
    ) -> Result<Option<R>, Error> {
        let r = timer.lock_if(visible(self.inner.key), Some(id.0), |l| {
            // Relaxed: the generation changes only while the slot is free, and the lock
            // holder sees the slot visible, so it is stable.
            (l.timer.hot.generation.load(Ordering::Relaxed) == generation).then(|| f(l))
        });
        r.map(Option::flatten)
            .map_err(|_| Error::Poisoned(TIMER_POISONED))
    }
}

impl OwnerInner {
    /// The shard of the thread with index `thread`, and its number.
    #[inline]
    fn shard(&self, thread: usize) -> (u16, &Shard) {
        let i = thread & (self.shards.len() - 1);
        (i as u16, self.shard_at(i))
    }

    /// Shard `i`, allocated on first use.
    #[inline]
    fn shard_at(&self, i: usize) -> &Shard {
        // SeqCst: see `teardown` (store buffering with the `dead` flag).
        let p = self.shards[i].load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: installed shards are freed only when the owner is dropped.
            return unsafe { &*p };
        }
        self.new_shard(i)
    }

    #[cold]
    fn new_shard(&self, i: usize) -> &Shard {
        let fresh = Box::into_raw(Box::new(CachePadded::new(Shard::new())));
        // SeqCst: (C) in `teardown`'s argument.
        match self.shards[i].compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            // SAFETY: just installed; freed only when the owner is dropped.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` was never shared; `winner` is installed (as above).
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above.
                unsafe { &*winner }
            }
        }
    }

    fn create(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: NotifyKind,
        ext: [usize; 2],
        then: Option<&mut dyn FnMut(Locked<'_>)>,
    ) -> Result<TimerId, Error> {
        let shared = &*self.shared;
        // Validate before allocating anything (Linux e0fd4d42e27f fixed a leak here).
        if let Some(id) = requested {
            if !self.restore.load(Ordering::Acquire) {
                return Err(Error::NotRestoring);
            }
            if id < 0 || id as u32 > shared.id_mask {
                return Err(Error::InvalidId);
            }
        }
        let guard = epoch::pin();
        let thread = thread_index();
        let (home, shard) = self.shard(thread);
        let (id, table, len, timer) = shard
            .locked(|st| self.create_locked(st, home, requested, (clock, notify, ext), &guard))
            .map_err(|_| Error::Poisoned(SHARD_POISONED))??;
        shared.count_add_as(thread, 1);
        shared.maybe_grow(table, len, &guard);
        shared.help_resize(&guard);
        if let Some(then) = then {
            // The slot stays a timer object while the owner lives; `lock_if` checks it still
            // holds this timer.
            timer
                .lock_if(visible(self.key), Some(id.0), then)
                .map_err(|_| Error::Poisoned(TIMER_POISONED))?;
        }
        Ok(id)
    }

    /// The body of `create`, with the shard lock held.
    fn create_locked<'s, 'g>(
        &'s self,
        st: &mut owner::ShardState,
        home: u16,
        requested: Option<i32>,
        (clock, notify, ext): (ClockId, NotifyKind, [usize; 2]),
        guard: &'g Guard,
    ) -> Result<(TimerId, &'g Table, u32, &'s Timer), Error> {
        let shared = &*self.shared;
        // SeqCst: (D) in `teardown`'s argument.
        if self.dead.load(Ordering::SeqCst) {
            return Err(Error::OwnerDeleted);
        }
        let (index, timer) = self.alloc_slot(st, guard).ok_or(Error::NoFreeId)?;
        // SAFETY: the slot came off this shard's free list or bump block: it is free (owner
        // word 0) and the shard lock is held.
        unsafe { timer.reset_for_create(visible(self.key) | PENDING, clock, notify, home, ext) };
        let mut attempts: u64 = 0;
        let limit = u64::from(shared.id_mask) + 1;
        let (id, table, len) = loop {
            let id = match requested {
                Some(id) => id,
                None => {
                    if attempts == limit {
                        self.free_slot_locked(st, index, timer);
                        return Err(Error::NoFreeId);
                    }
                    attempts += 1;
                    self.next_candidate(st)
                }
            };
            timer.hot.id.store(id, Ordering::Relaxed);
            let hash = self.hash(TimerId(id));
            if requested.is_some() {
                // (B): set before the bucket lock is taken below.
                self.reused_ids.store(true, Ordering::Relaxed);
            }
            let (t, idx, head) = shared.lock_bucket(hash, guard);
            // Is the candidate in use? A candidate from the counter's first pass cannot be,
            // unless an exact-ID create or a wrapped counter made IDs repeat, so the chain (one
            // random memory access per other timer in it) is only walked then.
            //
            // (A) Relaxed load, after the bucket lock's Acquire. Whoever inserts an ID that
            // could repeat a first-pass candidate (an exact-ID create, or a create with a
            // candidate past the wrap) sets `reused_ids` at (B) before taking the lock of that
            // ID's bucket, and releases the lock after inserting; a later creator of the same
            // ID takes the same lock (or, after a split, the lock of the bucket the split moved
            // the timer to, under both locks) and so sees the flag at (A) and walks the chain.
            // A creator that takes the lock first inserts first, and the exact-ID create or
            // wrapped candidate that comes later always walks the chain and finds it. So
            // "two timers with one ID" is impossible.
            let maybe_taken = requested.is_some() || self.reused_ids.load(Ordering::Relaxed);
            if maybe_taken && t.taken(head, self.key, id) {
                t.buckets[idx].unlock(head);
                if requested.is_some() {
                    self.free_slot_locked(st, index, timer);
                    return Err(Error::IdInUse);
                }
                continue;
            }
            let len = t.link_and_unlock(idx, head, timer, hash);
            break (id, t, len);
        };
        if requested.is_some() {
            // Linux sets (not maxes) the counter at hash-insert time; the epoch bump voids the
            // ID blocks shards claimed before. Release: pairs with the Acquire in
            // `next_candidate`, which then reads the new counter when it re-claims.
            self.counter
                .store((id as u32).wrapping_add(1), Ordering::Relaxed);
            self.epoch.fetch_add(1, Ordering::Release);
        }
        // Release: a walker that reads the visible owner word (Acquire) sees the timer's
        // fields and its chain link.
        timer.hot.owner.store(visible(self.key), Ordering::Release);
        Ok((TimerId(id), table, len, timer))
    }

    /// The next ID candidate from the shard's block, claiming a new block when it is used up
    /// or voided by an exact-ID create.
    #[inline]
    fn next_candidate(&self, st: &mut owner::ShardState) -> i32 {
        // Acquire: pairs with the Release epoch bump of an exact-ID create.
        let epoch = self.epoch.load(Ordering::Acquire);
        if st.id_left == 0 || st.id_epoch != epoch {
            // Relaxed: uniqueness of the claimed range comes from the atomic add itself.
            st.id_next = self.counter.fetch_add(ID_BLOCK, Ordering::Relaxed);
            st.id_left = ID_BLOCK;
            st.id_epoch = epoch;
            if u64::from(st.id_next) + u64::from(ID_BLOCK) > u64::from(self.shared.id_mask) {
                // (B) in `create_locked`: set before this thread takes any bucket lock for a
                // candidate of this block.
                self.reused_ids.store(true, Ordering::Relaxed);
            }
        }
        let c = st.id_next;
        st.id_next = c.wrapping_add(1);
        st.id_left -= 1;
        (c & self.shared.id_mask) as i32
    }

    /// A free slot from the shard (its index and the slot): its free list, its bump block, or
    /// a new block.
    #[inline]
    fn alloc_slot<'g>(
        &'g self,
        st: &mut owner::ShardState,
        guard: &Guard,
    ) -> Option<(u32, &'g Timer)> {
        if st.free_head != NONE {
            let index = st.free_head;
            let timer = self.slots.get(index, guard);
            st.free_head = timer.hot.free_next.load(Ordering::Relaxed);
            return Some((index, timer));
        }
        if st.bump_left == 0 {
            st.bump_next = self.slots.claim(st.bump_block, &self.shared.pool, guard)?;
            st.bump_left = st.bump_block;
            st.bump_block = (st.bump_block * 2).min(SLOT_BLOCK_MAX);
        }
        let index = st.bump_next;
        st.bump_next += 1;
        st.bump_left -= 1;
        let timer = self.slots.get(index, guard);
        timer.hot.index.store(index, Ordering::Relaxed);
        Some((index, timer))
    }

    /// Returns an unhashed slot to a shard whose lock the caller holds.
    #[inline]
    fn free_slot_locked(&self, st: &mut owner::ShardState, index: u32, timer: &Timer) {
        // Release: a walker that still stands on this slot and reads 0 no longer matches it.
        timer.hot.owner.store(0, Ordering::Release);
        timer.hot.free_next.store(st.free_head, Ordering::Relaxed);
        st.free_head = index;
    }

    /// The hash of this owner's timer `id`.
    #[inline]
    fn hash(&self, id: TimerId) -> u64 {
        table::hash(self.shared.seed, self.key, id.0)
    }

    /// The lookup every by-ID call shares: fails if the owner is deleted, then finds the
    /// visible timer `id` (hash `hash`) and hands it to `attempt`, walking again whenever the
    /// attempt finds the slot reused under the walk (returns `Ok(None)`).
    #[inline]
    fn lookup<'g, R>(
        &self,
        id: TimerId,
        hash: u64,
        guard: &'g Guard,
        mut attempt: impl FnMut(&'g Timer) -> Result<Option<R>, Poisoned>,
    ) -> Result<R, Error> {
        if self.dead.load(Ordering::Acquire) {
            return Err(Error::OwnerDeleted);
        }
        let word = visible(self.key);
        loop {
            let timer = self
                .shared
                .find(hash, word, id.0, guard)
                .ok_or(Error::UnknownTimer)?;
            if let Some(r) = attempt(timer).map_err(|_| Error::Poisoned(TIMER_POISONED))? {
                return Ok(r);
            }
        }
    }

    /// Runs `f` on timer `id` under its lock, after re-checking it there.
    #[inline]
    fn with_timer<R>(&self, id: TimerId, f: impl FnOnce(Locked<'_>) -> R) -> Result<R, Error> {
        let guard = epoch::pin();
        let word = visible(self.key);
        let mut f = Some(f);
        self.lookup(id, self.hash(id), &guard, |timer| {
            timer.lock_if(word, Some(id.0), |l| (f.take().expect("runs once"))(l))
        })
    }

    /// Reads a field of timer `id` without its lock (see `Timer::read_current`).
    #[inline]
    fn read_timer<R>(&self, id: TimerId, read: impl Fn(&Timer) -> R) -> Result<R, Error> {
        let guard = epoch::pin();
        let word = visible(self.key);
        self.lookup(id, self.hash(id), &guard, |timer| {
            Ok(timer.read_current(word, id.0, &read))
        })
    }

    fn delete(&self, id: TimerId, on_delete: impl FnOnce(&mut Locked<'_>)) -> Result<(), Error> {
        let guard = epoch::pin();
        let word = visible(self.key);
        let hash = self.hash(id);
        let mut on_delete = Some(on_delete);
        let timer = self.lookup(id, hash, &guard, |timer| {
            let r = timer.lock_if(word, Some(id.0), |mut l| {
                (on_delete.take().expect("runs once"))(&mut l);
                Self::mark_deleted(l)
            });
            r.map(|marked| marked.map(|()| timer))
        })?;
        self.unhash(timer, hash, &guard);
        let home = self.shard_at(usize::from(timer.hot.home.load(Ordering::Relaxed)));
        let index = timer.hot.index.load(Ordering::Relaxed);
        // A poisoned home shard hands out no slot again: this one is simply not reused.
        let _ = home.locked(|st| self.free_slot_locked(st, index, timer));
        self.shared.count_add(-1);
        self.shared.help_resize(&guard);
        Ok(())
    }

    /// Under the lock of a visible timer: mark it pending (invisible to lookups, ID still
    /// taken), disarm it and void its pending event.
    fn mark_deleted(mut l: Locked<'_>) {
        let word = l.timer.hot.owner.load(Ordering::Relaxed);
        // Relaxed: ordered before the unhash by the bucket lock's Acquire/Release.
        l.timer.hot.owner.store(word | PENDING, Ordering::Relaxed);
        // Release: pairs with the Acquire fence in `Timer::read_current`: a lock-free reader
        // that sees the disarm below sees the pending word at its re-check and drops the read,
        // instead of reporting a status the timer never had while visible (loom:
        // `loom_listing_racing_delete_reads_a_status_the_timer_had`).
        crate::sync::fence(Ordering::Release);
        l.state.signal_seq = l.state.signal_seq.wrapping_add(1);
        l.set_status(Status::Disarmed);
    }

    /// Unlinks a pending timer from its chain (the ID becomes free).
    fn unhash(&self, timer: &Timer, hash: u64, guard: &Guard) {
        let (t, idx, head) = self.shared.lock_bucket(hash, guard);
        let found = t.unlink_and_unlock(idx, head, timer);
        debug_assert!(
            found,
            "a pending timer is hashed until its deleter unhashes it"
        );
    }

    fn list(&self) -> Vec<TimerInfo> {
        let mut out = Vec::new();
        let word = visible(self.key);
        let guard = epoch::pin();
        self.slots.for_each(&guard, |timer| {
            // Relaxed: a filter; `read_current` re-reads with Acquire.
            if timer.hot.owner.load(Ordering::Relaxed) != word {
                return;
            }
            let id = timer.hot.id.load(Ordering::Relaxed);
            out.extend(timer.read_current(word, id, |t| TimerInfo {
                id: TimerId(id),
                clock: t.clock(),
                notify: t.notify(),
                status: t.status(),
            }));
        });
        out
    }

    fn teardown(&self, mut on_delete: impl FnMut(&mut Locked<'_>)) {
        // Every create holds its shard lock from the dead check to the visible store, so once
        // every shard lock has been taken after `dead` is set, no create is half done and none
        // will start. A shard installed concurrently is covered by store buffering between
        // two SeqCst pairs:
        //
        //   teardown                          a thread's first create in this owner
        //   (A) dead.swap(true)               (C) shards[i]: null -> new shard
        //   (B) shards[i].load() == null?     (D) lock it; dead.load() == false?
        //
        // "B reads null and D reads false" is impossible: if teardown skips shard i, the
        // creator sees `dead` and gives up; otherwise teardown locks shard i after it.
        // SeqCst: (A).
        if self.dead.swap(true, Ordering::SeqCst) {
            return;
        }
        for slot in self.shards.iter() {
            // SeqCst: (B).
            let p = slot.load(Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: installed shards live as long as the owner.
                let shard = unsafe { &*p };
                if !shard.quiesce() {
                    // A create panicked with this shard locked: a half-made timer may be
                    // hashed and never become visible (see `poisoned`).
                    self.poisoned.store(true, Ordering::Relaxed);
                }
            }
        }
        let guard = epoch::pin();
        let word = visible(self.key);
        let mut deleted = 0;
        self.slots.for_each(&guard, |timer| {
            if timer.hot.owner.load(Ordering::Acquire) >> 1 != self.key {
                return;
            }
            let id = timer.hot.id.load(Ordering::Relaxed);
            let marked = timer.lock_if(word, None, |mut l| {
                on_delete(&mut l);
                Self::mark_deleted(l)
            });
            match marked {
                Ok(Some(())) => {
                    self.unhash(timer, self.hash(TimerId(id)), &guard);
                    // Release: as in `free_slot_locked`; the slot is not reused (the owner is
                    // dead).
                    timer.hot.owner.store(0, Ordering::Release);
                    deleted += 1;
                }
                // A panic under its lock: its state (and whether a wheel still names it) is
                // unknown. It stays hashed and its memory is never reused (`poisoned`).
                Err(Poisoned) => self.poisoned.store(true, Ordering::Relaxed),
                Ok(None) => {
                    // A concurrent `delete` marked it; wait until it has unhashed it, so that
                    // no timer of this owner is reachable once teardown returns. A delete
                    // that panicked, or a create that panicked (its shard is poisoned), never
                    // will: stop waiting then.
                    let mut spins = 0;
                    while timer.hot.owner.load(Ordering::Acquire) >> 1 == self.key {
                        if timer.is_poisoned() || self.poisoned.load(Ordering::Relaxed) {
                            self.poisoned.store(true, Ordering::Relaxed);
                            break;
                        }
                        crate::sync::backoff(&mut spins);
                    }
                }
            }
        });
        self.shared.count_add(-deleted);
    }
}

impl Drop for OwnerInner {
    fn drop(&mut self) {
        self.teardown(|_| ());
        if self.poisoned.load(Ordering::Relaxed) {
            // See `poisoned`: the pages and shards stay allocated for the process's life.
            return;
        }
        for slot in self.shards.iter() {
            let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: installed by `new_shard` from `Box::into_raw`; no handle is left, so
                // nothing uses it; swapped out once.
                drop(unsafe { Box::from_raw(p) });
            }
        }
        let pages = self.slots.take_pages();
        let shared = self.shared.clone();
        let guard = epoch::pin();
        // SAFETY: every timer of this owner was unhashed and freed (owner word 0) by
        // `teardown`, and no handle is left, so after the threads pinned now have unpinned
        // (walkers that may still stand on one of these timers), nothing uses the pages. They
        // were taken out exactly once.
        // `recycle`'s contract holds when the deferred call runs, after the grace period.
        unsafe {
            guard.defer_unchecked(move || {
                shared.pool.recycle(pages);
                // The last reference (registry and owners gone) frees the table and the pool.
                let bytes = if Arc::strong_count(&shared) == 1 {
                    shared.pool.bytes()
                } else {
                    0
                };
                drop_deferred(shared, bytes);
            })
        };
        // Start the grace period now, so the next owner is likely to find the pages pooled.
        guard.flush();
    }
}

/// Drops `value`, which owns about `bytes` of memory, from a deferred function. A large value
/// is dropped on a thread of its own: returning hundreds of MiB to the kernel takes
/// milliseconds (16 ms for a 256 MiB table, measured), which would otherwise land inside
/// whichever unrelated create or delete happened to run the epoch's deferred functions.
fn drop_deferred<T: Send + 'static>(value: T, bytes: usize) {
    if bytes >= table::LARGE_FREE_BYTES {
        // If no thread can be started, `spawn` drops the closure: the value is freed here.
        drop(
            std::thread::Builder::new()
                .name("tempora-free".into())
                .spawn(move || drop(value)),
        );
    }
}
