//! Owners, timer IDs and the registry that maps (owner, ID) to a timer object.
//!
//! An [`Owner`] is the user-space analogue of a process: a namespace of [`TimerId`]s. The
//! [`Registry`] holds one hash table for the timers of **all** its owners, as Linux does since
//! 6.15, and each owner keeps its timer objects in slot pages of its own (`slots.rs`).
//!
//! The registry knows nothing of clocks, expiries or notification: it is generic over the
//! [`Service`] it serves, which keeps its own per-timer parts inside each timer object and
//! gets one call back, its delete hook (`timer.rs`). The POSIX timer service (`crate::timers`)
//! is the one the crate ships; the registry's own tests use services of their own.
//!
//! ```text
//!  Registry<S> ── Shared ─┬─ tables ──► Table { buckets[2^k], future } (table.rs)
//!                         │     Bucket (32 B): head|LOCK, near[3] (tag|pointer)
//!                         │       └─► Timer<S> ─► Timer<S> ─► nulls(k, i)
//!                         ├─ count (striped per thread index, count.rs)
//!                         ├─ pool (slot pages of deleted owners, for reuse, slots.rs)
//!                         └─ salt (per-registry hash salt)
//!  Owner<S> ── key, ids (ids.rs), slots (slots.rs), shards[N], the service's part (owner.rs)
//! ```
//!
//! # Cost of the calls
//!
//! * lookup (getoverrun): the thread's walk mark instead of an epoch pin (`sync::pin_walk`),
//!   the hash (finished from the owner's seed, `table::owner_seed`), one bucket (its `near`
//!   shortcuts usually name the timer), the timer's two lines; no lock, no shared store
//!   (but for a thread without a walk mark, which counts its walk in a shared counter).
//! * create: a pin, the thread's owner shard lock, one bucket lock; the chain is walked only
//!   if IDs may repeat (below), and not by a restore into an empty owner, whose section holds
//!   other creates off (`Owner::exclusive`).
//! * delete: a pin, the timer lock, one bucket lock, the slot's home shard lock.
//! * Nothing of these writes a cache line that another thread writes in the common case:
//!   shards and count stripes are per thread index, buckets per ID run (two neighbouring
//!   buckets share a line). Every 16th create of a thread also reads every count stripe
//!   (the growth check, `table/growth.rs`).
//!
//! BENCHMARKS.md has the measured figures.
//!
//! # Sizing: scaled by CPUs, then grown
//!
//! The table starts, as Linux 6.15's does, at `roundup_pow_of_two(512 * CPUs)` buckets (1024
//! on a 2-CPU machine; [`Builder::initial_buckets`] overrides it), but unlike Linux's, which is
//! fixed at boot and so has chains of ~100 at 100k timers and ~10k at 10M, it doubles whenever
//! the registry holds more than [`Builder::max_load`] (default 2) timers per bucket. Growth is
//! incremental (see `table/growth.rs`): while a resize is in progress every create and delete
//! splits `MIGRATE_BATCH` (8) old buckets, lookups never wait for it, and a writer waits for at
//! most one bucket's split.
//!
//! # Hash
//!
//! Keyed by (owner key, ID) with the *run-linear keyed hash* (`table::hash`): runs of 256
//! consecutive IDs of an owner fill 256 consecutive buckets, runs and owners scatter by two
//! folded multiplies with a random per-registry salt.
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
//!   walk is a cache miss per create). The ordering argument is at the check in
//!   `create_locked`.
//! * Exact-ID (restore) mode ([`Owner::set_restore_ids`], Linux's
//!   `PR_TIMER_CREATE_RESTORE_IDS`): [`Owner::create`] with a requested ID takes it; in use
//!   → [`Error::IdInUse`] (`EBUSY`), negative or beyond the limit → [`Error::InvalidId`]
//!   (`EINVAL`), mode off → [`Error::NotRestoring`]. On success the counter is **set** to
//!   `id + 1` (a restore into an empty owner sets it once, to the snapshot's), so after restoring, normal creates continue after the last restored ID (Linux
//!   6.18 on the development machine: restore 200 then 100, switch off, the next ID is 101;
//!   restoring in ascending order, as checkpoint tools do, means after the highest).
//!
//! # Locking
//!
//! Locks, all short: no callback, no blocking call, and allocation only where named here, with
//! what bounds it:
//! * shard lock (`sync::Locked`, rank SHARD): an owner shard's free list and ID/slot blocks.
//!   A create that needs a fresh slot block may allocate a slot page (64 timers, 8 KiB) and
//!   double the page directory under it (`Slots::add_page`): once per 64 slots, bounded by the
//!   owner's peak timer count;
//! * timer lock (a `sync::RankedLock` of rank TIMER in the timer's second cache line): the
//!   timer's state. What the service does under it is the service's to bound (the POSIX
//!   service's module doc says);
//! * bucket lock (bit 0 of the bucket head, held as a `table::BucketGuard`, rank BUCKET): the
//!   chain's links and the `near` shortcuts. A split collects the old chain under the old
//!   bucket's lock into a vector reserved before (four times the allowed average chain, at
//!   least 16; it grows under the lock only for a longer chain: bounded by the chain), then
//!   takes the two future buckets' locks.
//!
//! A panic inside a shard's or a timer's critical section poisons that lock
//! (`sync::Locked::with`); the calls that need it then fail with [`Error::Poisoned`]. The
//! bucket lock has no poisoned state: its critical sections are pointer updates that do not
//! panic short of a broken invariant of the chain (a `debug_assert`), and one that did would
//! leave the bucket locked. That is the one lock to which the poisoning rule does not reach.
//!
//! The crate's whole lock order is in one place, `sync::rank` (and ARCHITECTURE.md); the
//! registry's part: **restore section → shard → timer → bucket (old table → future table);
//! page directory (`grow`, once per 64 fresh slots) only under a shard lock, taking nothing
//! else.** A create holds its shard lock while it hashes the new timer (so an owner teardown,
//! which takes every shard lock first, never races a half-made timer); delete takes the timer
//! lock, drops it, then the bucket lock, then the home shard's lock with nothing else held; a
//! split takes the old bucket then the two future buckets. No path takes a lock that comes
//! earlier in the order while holding a later one; debug builds check it at every lock.
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
//! [`Owner::for_each_locked`] scans the owner's own slot pages, taking each live timer's lock
//! for a few nanoseconds; it takes no shard or bucket lock, so creators and deleters never wait for it
//! (as Linux 6.15's RCU-safe `/proc/PID/timers`). A timer that exists for the whole listing is in
//! one slot for the whole listing and is reported exactly once; timers created or deleted
//! meanwhile may or may not appear. Deleting an owner ([`Owner::destroy`], or dropping its last
//! handle) deletes all its timers.

mod count;
mod ids;
mod owner;
mod slots;
pub(crate) mod table;
pub(crate) mod timer;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

pub use ids::TimerId;
pub(crate) use owner::{Owner, WeakOwner, TIMER_POISONED};
pub(crate) use timer::{Locked, Service, Timer, Zeroable};

use crate::error::Error;
use crate::sync::AtomicU64;
use count::Count;
use owner::Shared;
use slots::PagePool;
use std::sync::Arc;
use table::growth::Tables;

/// Configures a [`Registry`].
#[derive(Debug, Clone)]
pub(crate) struct Builder {
    pub(crate) id_bits: u32,
    pub(crate) initial_buckets: Option<usize>,
    pub(crate) max_load: usize,
    pub(crate) shards: Option<usize>,
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
    /// Builds the registry.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a setting out of the documented range (the service's
    /// builder documents them: `id_bits` 1 ..= 31, `max_load` 1 ..= 64, `initial_buckets` a
    /// power of two in 16 ..= 2^40, `shards` a power of two at most 2^15);
    /// [`Error::OutOfMemory`] if the first table's buckets cannot be allocated.
    pub(crate) fn build<S: Service>(&self) -> Result<Registry<S>, Error> {
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
        let salt = random_salt();
        let stripes = (cpus.next_power_of_two() * 4).max(64);
        Ok(Registry {
            shared: Arc::new(Shared {
                tables: Tables::try_new(buckets.trailing_zeros(), salt, self.max_load)
                    .ok_or(Error::OutOfMemory)?,
                salt,
                pool: PagePool::new(),
                count: Count::new(stripes),
                next_owner: AtomicU64::new(1),
                id_mask: (1u32 << self.id_bits) - 1,
                shards,
            }),
        })
    }
}

/// A per-registry hash salt from the standard library's randomly keyed hasher.
fn random_salt() -> [u64; 2] {
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

/// The registry of timer IDs of all its owners, serving `S`. Cloning shares it.
pub(crate) struct Registry<S: Service> {
    shared: Arc<Shared<S>>,
}

impl<S: Service> Clone for Registry<S> {
    fn clone(&self) -> Self {
        Registry {
            shared: self.shared.clone(),
        }
    }
}

impl<S: Service> std::fmt::Debug for Registry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("buckets", &self.buckets())
            .field("timers", &self.len())
            .finish()
    }
}

impl<S: Service> Registry<S> {
    /// A registry with the default configuration.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn new() -> Registry<S> {
        Builder::default().build().expect("default configuration")
    }

    /// A new owner (an empty ID namespace, restore mode off, next ID 0) whose service part is
    /// `service`; aborts, as a failed allocation does, if its memory cannot be had (the
    /// tests' and the benchmark harness's door: the service's is [`Registry::try_owner`]).
    pub(crate) fn owner(&self, service: S::OwnerPart) -> Owner<S> {
        self.try_owner(service).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<Owner<S>>())
        })
    }

    /// A new owner (an empty ID namespace, restore mode off, next ID 0) whose service part is
    /// `service`, or [`Error::OutOfMemory`] if its memory cannot be allocated.
    pub(crate) fn try_owner(&self, service: S::OwnerPart) -> Result<Owner<S>, Error> {
        Owner::try_new(&self.shared, service)
    }

    /// Buckets in the current table.
    pub(crate) fn buckets(&self) -> usize {
        let guard = crate::sync::pin();
        self.shared.tables.current(&guard).buckets.len()
    }

    /// Timers in the registry (exact when no create or delete is in flight).
    pub(crate) fn len(&self) -> usize {
        self.shared.count.sum().max(0) as usize
    }

    /// Bytes of slot pages kept for reuse after their owners were deleted.
    pub(crate) fn pooled_bytes(&self) -> usize {
        self.shared.pool.bytes()
    }

    /// Bytes of hash table (current table and, during a resize, the future one).
    pub(crate) fn table_bytes(&self) -> usize {
        let guard = crate::sync::pin();
        let t = self.shared.tables.current(&guard);
        std::iter::once(t)
            .chain(t.future())
            .map(|t| std::mem::size_of_val::<[table::Bucket]>(&t.buckets))
            .sum()
    }
}
