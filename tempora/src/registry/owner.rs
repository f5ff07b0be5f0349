//! Owners: ID namespaces, their per-thread shards, and their timers' life (create, lookup,
//! delete, teardown).
//!
//! ```text
//!  Owner<S> ── OwnerInner ── key          unique per registry, never 0
//!                         ├─ ids          the ID counter and exact-ID mode (`ids.rs`)
//!                         ├─ slots        the owner's slot pages (`slots.rs`)
//!                         ├─ shards[N] ─┬─ Locked (SHARD) ── free list of slots, bump block,
//!                         │             │                    ID block, slots in use (`live`)
//!                         │             └─ one per (thread index & (N-1)), cache-line padded
//!                         ├─ exclusive    set while a restore's section runs (`Owner::exclusive`)
//!                         └─ service      the service's per-owner part (`Service::OwnerPart`)
//! ```
//!
//! A create takes the shard of the calling thread, pops a slot from its free list (or its bump
//! block, or a fresh slot block), and draws the next ID candidate from its ID block. Two
//! threads creating in one owner therefore write different cache lines except once per block.
//!
//! A create's path (the slot, the ID, the hash chain) is `owner/create.rs`; the exclusive
//! section, which holds an owner's other creates off while a restore creates, is
//! `owner/exclusive.rs`; the owner's end (destroy, teardown, drop) is `owner/teardown.rs`.

mod create;
mod exclusive;
mod teardown;

use super::count::Count;
use super::ids::TimerId;
use super::ids::{IdBlock, Ids};
use super::slots::{PagePool, Slots, NONE, SLOT_BLOCK};
use super::table;
use super::table::growth::Tables;
use super::timer::{visible, Locked, Service, Timer};
use crate::alloc::{probe_arc, try_box, try_boxed_slice};
use crate::error::Error;
use crate::sync::{
    self, fence, rank, AtomicBool, AtomicPtr, Ordering, Poisoned, Unreadable, WaitQueue,
};
use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::sync::Arc;

/// What `Error::Poisoned` names for a poisoned timer lock (the service reports it too).
pub(crate) const TIMER_POISONED: &str = "a timer";
/// What `Error::Poisoned` names for a poisoned ID shard.
const SHARD_POISONED: &str = "an owner's ID shard";

/// What a create runs on its new timer under the timer's lock (`Owner::create`).
type Then<'a, S> = &'a mut dyn FnMut(Locked<'_, S>);

/// What every owner of a registry shares: the registry's tables, count and page pool.
pub(crate) struct Shared<S: Service> {
    pub(crate) tables: Tables,
    /// The hash salt (every table generation uses the same).
    pub(crate) salt: [u64; 2],
    /// Slot pages of torn-down owners, for new owners to reuse.
    pub(crate) pool: PagePool<S>,
    /// Timers in the registry.
    pub(crate) count: Count,
    /// IDs are `0 ..= id_mask`.
    pub(crate) id_mask: u32,
    /// Shards per owner.
    pub(crate) shards: usize,
    /// The next owner key.
    pub(crate) next_owner: crate::sync::AtomicU64,
}

/// An ID namespace: the user-space analogue of a process. Cloning shares it; it is deleted,
/// with all its timers, by [`Owner::destroy`] or when its last handle is dropped.
pub(crate) struct Owner<S: Service> {
    inner: Arc<OwnerInner<S>>,
}

impl<S: Service> Clone for Owner<S> {
    fn clone(&self) -> Self {
        Owner {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Service> std::fmt::Debug for Owner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("key", &self.inner.key)
            .field("restore_ids", &self.restore_ids())
            .field("destroyed", &self.is_destroyed())
            .finish()
    }
}

/// A handle to an owner that does not keep it alive ([`Owner::downgrade`]): what a callback
/// timer holds to reach its own owner, so that the owner's handles, not its timers, decide
/// when it ends. The service type is erased (the registry is generic over it, the handle's
/// users are not); [`WeakOwner::upgrade`] names it again.
#[derive(Clone)]
pub(crate) struct WeakOwner(std::sync::Weak<dyn std::any::Any + Send + Sync>);

impl<S: Service> Owner<S> {
    /// A weak handle to this owner.
    pub(crate) fn downgrade(&self) -> WeakOwner {
        WeakOwner(Arc::downgrade(&self.inner) as std::sync::Weak<_>)
    }
}

impl WeakOwner {
    /// The owner, if a handle of it is still alive: `None` once its last one was dropped
    /// (its teardown then runs or ran), or if it is an owner of another service type.
    pub(crate) fn upgrade<S: Service>(&self) -> Option<Owner<S>> {
        let inner = self.0.upgrade()?.downcast::<OwnerInner<S>>().ok()?;
        Some(Owner { inner })
    }

    /// A handle that never upgrades, as `Weak::new` (the loom models' callbacks, which have
    /// no owner).
    #[cfg(all(test, loom))]
    pub(crate) fn dangling() -> WeakOwner {
        WeakOwner(std::sync::Weak::<()>::new())
    }
}

struct OwnerInner<S: Service> {
    /// Unique for the registry's life; never 0 (0 marks a free slot).
    key: u64,
    /// The owner's part of its timers' hash (`table::owner_seed`).
    seed: [u64; 2],
    shared: Arc<Shared<S>>,
    ids: Ids,
    dead: AtomicBool,
    /// Set while an [`Exclusive`](exclusive::Exclusive) section runs: other creates in the
    /// owner wait until it ends, parked on `opened`.
    exclusive: AtomicBool,
    opened: WaitQueue,
    /// Set by a teardown that met a poisoned lock (a panic inside a shard's or a timer's
    /// critical section): a timer may still be hashed or named by the service, so the owner's
    /// slot pages are never recycled (they leak, rather than be reused under a reference that
    /// outlives them).
    poisoned: AtomicBool,
    slots: Slots<S>,
    /// Allocated when a thread index first creates here (see `shard_at`).
    shards: Box<[AtomicPtr<CachePadded<Shard>>]>,
    /// The service's part of the owner, handed to its delete hook.
    service: S::OwnerPart,
}

impl<S: Service> Owner<S> {
    /// A new owner of the registry `shared` (an empty ID namespace, restore mode off, next
    /// ID 0).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if its memory cannot be allocated (its directory and shard
    /// table fallibly; the `Arc` after [`probe_arc`] checked that its block can be had: the
    /// `timers` module doc, "Memory").
    pub(crate) fn try_new(
        shared: &Arc<Shared<S>>,
        service: S::OwnerPart,
    ) -> Result<Owner<S>, Error> {
        let slots = Slots::try_new()?;
        let shards = try_boxed_slice(shared.shards, || AtomicPtr::new(std::ptr::null_mut()))?;
        probe_arc::<OwnerInner<S>>()?;
        let key = shared.next_owner.fetch_add(1, Ordering::Relaxed);
        Ok(Owner {
            inner: Arc::new(OwnerInner {
                key,
                seed: table::owner_seed(shared.salt, key),
                shared: shared.clone(),
                ids: Ids::new(shared.id_mask),
                dead: AtomicBool::new(false),
                exclusive: AtomicBool::new(false),
                opened: WaitQueue::default(),
                poisoned: AtomicBool::new(false),
                slots,
                shards,
                service,
            }),
        })
    }

    /// The layout of an owner's block (what `try_new`'s `Arc` allocates, less its counts).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn block_layout() -> std::alloc::Layout {
        std::alloc::Layout::new::<OwnerInner<S>>()
    }

    /// The service's part of the owner.
    #[inline]
    pub(crate) fn service(&self) -> &S::OwnerPart {
        &self.inner.service
    }

    /// Creates a timer with the next free ID (`requested: None`) or exactly the ID `requested`
    /// (restore mode must be on), its service parts filled from `init`; then, if given, runs
    /// `then` on it under its lock, reached through the slot the create filled rather than a
    /// second lookup (a restore sets each timer's state so). `then` does not run if the timer
    /// was deleted in between.
    ///
    /// # Errors
    /// [`Error::NoFreeId`] when every ID is in use; [`Error::NotRestoring`] for a requested ID
    /// with restore mode off; [`Error::InvalidId`] for a negative ID or one beyond the ID
    /// limit; [`Error::IdInUse`] if this owner has a timer `requested`;
    /// [`Error::OwnerDeleted`]; [`Error::Poisoned`]. Nothing is allocated or changed on error,
    /// and `init` is dropped unused.
    pub(crate) fn create(
        &self,
        requested: Option<i32>,
        init: S::Init,
        then: Option<Then<'_, S>>,
    ) -> Result<TimerId, Error> {
        self.inner.create(requested, init, then)
    }

    /// Deletes timer `id` (running the service's delete hook under its lock); its ID becomes
    /// free once this returns.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] if this owner has no timer `id`; [`Error::OwnerDeleted`];
    /// [`Error::Poisoned`].
    pub(crate) fn delete(&self, id: TimerId) -> Result<(), Error> {
        self.inner.delete(id)
    }

    /// Runs `f` on timer `id` with its lock held.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`]; [`Error::OwnerDeleted`]; [`Error::Poisoned`].
    #[inline]
    pub(crate) fn with_timer<R>(
        &self,
        id: TimerId,
        f: impl FnOnce(Locked<'_, S>) -> R,
    ) -> Result<R, Error> {
        self.inner.with_timer(id, f)
    }

    /// Reads timer `id`'s fixed and published parts without its lock: the values the timer
    /// had at one instant while it existed (`Timer::read_current`).
    ///
    /// # Errors
    /// [`Error::UnknownTimer`]; [`Error::OwnerDeleted`].
    #[inline]
    pub(crate) fn read<R>(
        &self,
        id: TimerId,
        read: impl Fn(&S::Fixed, &S::Published) -> R,
    ) -> Result<R, Error> {
        self.inner.read_timer(id, read)
    }

    /// Reads timer `id`'s state without its lock: `read` runs on a copy of the state as it was
    /// at one instant while the timer existed (`Timer::read_unlocked`). While a holder of the
    /// timer's lock is changing the state it waits for it: the caller makes sure that holder is
    /// not its own thread (a call a signal handler may make checks `sync::holds_a_lock` first).
    ///
    /// # Errors
    /// [`Error::UnknownTimer`]; [`Error::OwnerDeleted`]; [`Error::Poisoned`].
    #[inline]
    pub(crate) fn read_state<R>(
        &self,
        id: TimerId,
        read: impl Fn(S::State) -> R,
    ) -> Result<R, Error>
    where
        S::State: Copy,
    {
        let inner = &*self.inner;
        let guard = crate::sync::pin_walk();
        let word = visible(inner.key);
        inner.lookup(id, inner.hash(id), &guard, |timer| {
            let mut spins = 0;
            loop {
                match timer.read_unlocked(word, id.0, &read) {
                    // `None`: the slot was reused under the walk, and `lookup` walks again.
                    Ok(r) => return Ok(r),
                    Err(Unreadable::Held) => sync::backoff(&mut spins),
                    Err(Unreadable::Poisoned) => return Err(Poisoned),
                }
            }
        })
    }

    /// Turns exact-ID (restore) mode on or off.
    pub(crate) fn set_restore_ids(&self, on: bool) {
        self.inner.ids.set_restoring(on);
    }

    /// Whether exact-ID (restore) mode is on.
    pub(crate) fn restore_ids(&self) -> bool {
        self.inner.ids.restoring()
    }

    /// Whether [`Owner::destroy`] has been called.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.inner.dead.load(Ordering::Acquire)
    }

    /// Bytes of timer slot pages this owner has allocated.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.inner.slots.bytes()
    }

    /// Runs `f` on every visible timer of the owner, each under its own lock, without blocking
    /// creators or deleters: a timer that exists for the whole walk is in one slot for the
    /// whole walk and is visited exactly once; timers created or deleted meanwhile may or may
    /// not be. Order: by slot, not by ID.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if a timer's lock is poisoned (the other timers are visited).
    pub(crate) fn for_each_locked(&self, mut f: impl FnMut(Locked<'_, S>)) -> Result<(), Error> {
        let word = visible(self.inner.key);
        let guard = crate::sync::pin();
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

    /// [`Owner::for_each_locked`] in pieces: the timers of slot pages `from .. from + pages`
    /// (64 slots a page) alone, under one epoch pin that ends with the call, so a caller can
    /// do slow work between pieces (an inspection writing to a socket) holding no pin and no
    /// lock. Returns the page to go on from (`None`: the walk is done) and whether a timer's
    /// lock was poisoned. A timer that exists for the whole walk is in one slot for the whole
    /// walk and is visited exactly once across the pieces.
    #[cfg(not(loom))]
    pub(crate) fn for_each_locked_pages(
        &self,
        from: usize,
        pages: usize,
        mut f: impl FnMut(Locked<'_, S>),
    ) -> (Option<usize>, Result<(), Error>) {
        let word = visible(self.inner.key);
        let guard = crate::sync::pin();
        let mut result = Ok(());
        let next = self.inner.slots.for_each_in(&guard, from, pages, |timer| {
            // Relaxed: a filter; `lock_if` re-checks under the lock.
            if timer.hot.owner.load(Ordering::Relaxed) == word
                && timer.lock_if(word, None, &mut f).is_err()
            {
                result = Err(Error::Poisoned(TIMER_POISONED));
            }
        });
        (next, result)
    }

    /// The ID counter as a checkpoint records it: the lowest ID a normal create would hand
    /// out next (see `Ids::next_id`).
    pub(crate) fn counter(&self) -> u32 {
        let inner = &*self.inner;
        inner.ids.next_id(|visit| {
            for p in inner.shards.iter() {
                // SeqCst: as in `shard_at`.
                let p = p.load(Ordering::SeqCst);
                if p.is_null() {
                    continue;
                }
                // SAFETY: installed shards live as long as the owner.
                let shard = unsafe { &*p };
                // A poisoned shard hands out no more IDs: its block does not lower the counter.
                let _ = shard.locked(|st| visit(&st.ids));
            }
        })
    }

    /// Sets the ID counter (a restore puts back the checkpointed one); ID blocks that threads
    /// claimed from the old counter are voided.
    pub(crate) fn set_counter(&self, next: u32) {
        self.inner.ids.set_counter(next);
    }

    /// The timer object in this owner's slot `index` (a queue entry names its timer so), to
    /// lock with [`Timer::lock_slot`]: a visible timer there is this owner's, the slot being
    /// in its pages. `index` must be a slot this owner has taken (its page exists); the
    /// object lives as long as the owner.
    #[inline]
    pub(crate) fn slot<'s>(&'s self, index: u32, guard: &Guard) -> &'s Timer<S> {
        self.inner.slots.get(index, guard)
    }
}

impl<S: Service> OwnerInner<S> {
    /// The shard of the thread with index `thread`, and its number.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if it does not exist yet and cannot be allocated.
    #[inline]
    fn shard(&self, thread: usize) -> Result<(u16, &Shard), Error> {
        let i = thread & (self.shards.len() - 1);
        Ok((i as u16, self.shard_at(i)?))
    }

    /// Shard `i`, allocated on first use ([`Error::OutOfMemory`] if that fails).
    #[inline]
    fn shard_at(&self, i: usize) -> Result<&Shard, Error> {
        // SeqCst: see `teardown` (store buffering with the `dead` flag).
        let p = self.shards[i].load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: installed shards are freed only when the owner is dropped.
            return Ok(unsafe { &*p });
        }
        self.new_shard(i)
    }

    /// Shard `i`, which exists: it handed out a slot (a timer's `home`).
    fn home_shard(&self, i: usize) -> &Shard {
        // SeqCst: as in `shard_at`.
        let p = self.shards[i].load(Ordering::SeqCst);
        assert!(!p.is_null(), "shard {i} handed out a slot, so it exists");
        // SAFETY: installed shards are freed only when the owner is dropped.
        unsafe { &*p }
    }

    #[cold]
    fn new_shard(&self, i: usize) -> Result<&Shard, Error> {
        let fresh = Box::into_raw(try_box(CachePadded::new(Shard::new()))?);
        // SeqCst: (C) in `teardown`'s and `Owner::exclusive`'s arguments.
        let installed = self.shards[i].compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        // The SeqCst accesses carry both arguments; the fences (one per thread's first create
        // in the owner, and one per teardown or section) state them in the form loom checks,
        // which models SeqCst fences but not SeqCst loads and stores
        // (`loom_exclusive_section_racing_a_first_create_...`).
        fence(Ordering::SeqCst);
        match installed {
            // SAFETY: just installed; freed only when the owner is dropped.
            Ok(_) => Ok(unsafe { &*fresh }),
            Err(winner) => {
                // SAFETY: `fresh` was never shared; `winner` is installed (as above).
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above.
                Ok(unsafe { &*winner })
            }
        }
    }

    /// The hash of this owner's timer `id`.
    #[inline]
    fn hash(&self, id: TimerId) -> u64 {
        table::hash_seeded(self.seed, id.0)
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
        mut attempt: impl FnMut(&'g Timer<S>) -> Result<Option<R>, Poisoned>,
    ) -> Result<R, Error> {
        if self.dead.load(Ordering::Acquire) {
            return Err(Error::OwnerDeleted);
        }
        let word = visible(self.key);
        loop {
            // `let else`, not `ok_or(..)?`: an `Error` made eagerly is dropped on the found
            // path too, a call to its destructor on every lookup.
            let Some(timer) = self.shared.tables.find(hash, word, id.0, guard) else {
                return Err(Error::UnknownTimer);
            };
            if let Some(r) = attempt(timer).map_err(|_| Error::Poisoned(TIMER_POISONED))? {
                return Ok(r);
            }
        }
    }

    /// Runs `f` on timer `id` under its lock, after re-checking it there.
    #[inline]
    fn with_timer<R>(&self, id: TimerId, f: impl FnOnce(Locked<'_, S>) -> R) -> Result<R, Error> {
        let guard = crate::sync::pin_walk();
        let word = visible(self.key);
        let mut f = Some(f);
        self.lookup(id, self.hash(id), &guard, |timer| {
            timer.lock_if(word, Some(id.0), |l| (f.take().expect("runs once"))(l))
        })
    }

    /// Reads timer `id` without its lock (see `Timer::read_current`).
    #[inline]
    fn read_timer<R>(
        &self,
        id: TimerId,
        read: impl Fn(&S::Fixed, &S::Published) -> R,
    ) -> Result<R, Error> {
        let guard = crate::sync::pin_walk();
        let word = visible(self.key);
        self.lookup(id, self.hash(id), &guard, |timer| {
            Ok(timer.read_current(word, id.0, &read))
        })
    }

    fn delete(&self, id: TimerId) -> Result<(), Error> {
        let guard = crate::sync::pin();
        let word = visible(self.key);
        let hash = self.hash(id);
        let (timer, released) = self.lookup(id, hash, &guard, |timer| {
            let r = timer.lock_if(word, Some(id.0), |l| Timer::mark_deleted(l, &self.service));
            r.map(|marked| marked.map(|released| (timer, released)))
        })?;
        self.unhash(timer, hash, &guard);
        let home = self.home_shard(usize::from(timer.hot.home.load(Ordering::Relaxed)));
        let index = timer.hot.index.load(Ordering::Relaxed);
        // A poisoned home shard hands out no slot again: this one is simply not reused.
        let _ = home.locked(|st| self.free_slot_locked(st, index, timer));
        self.shared.count.add(-1);
        self.shared.tables.help_resize::<S>(&guard);
        // With no lock held (the hook's contract).
        drop(released);
        Ok(())
    }

    /// Unlinks a pending timer from its chain (the ID becomes free).
    fn unhash(&self, timer: &Timer<S>, hash: u64, guard: &Guard) {
        let (t, idx, locked) = self.shared.tables.lock_bucket(hash, guard);
        let found = t.unlink_and_unlock(idx, locked, timer);
        debug_assert!(
            found,
            "a pending timer is hashed until its deleter unhashes it"
        );
    }
}

/// A shard's state, covered by its lock.
#[derive(Debug, Default)]
pub(crate) struct ShardState {
    pub(crate) free_head: u32,
    pub(crate) bump_next: u32,
    pub(crate) bump_left: u32,
    /// The size of the next slot claim (`SLOT_BLOCK` doubling to `SLOT_BLOCK_MAX`).
    pub(crate) bump_block: u32,
    /// The shard's claimed IDs.
    pub(crate) ids: IdBlock,
    /// Slots of this shard in use: taken off its free list or bump block and not yet given
    /// back (hashed timers of any state, and a create's slot before it is hashed).
    pub(crate) live: u32,
}

/// One shard of an owner: its state under its lock.
#[derive(Debug)]
pub(crate) struct Shard(sync::Locked<ShardState, { rank::SHARD }>);

impl Shard {
    pub(crate) fn new() -> Shard {
        Shard(sync::Locked::new(ShardState {
            free_head: NONE,
            bump_block: SLOT_BLOCK,
            ..ShardState::default()
        }))
    }

    /// Runs `f` with the shard locked; [`Poisoned`] once a holder panicked (a panic in `f`
    /// poisons it).
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut ShardState) -> R) -> Result<R, Poisoned> {
        self.0.with(f)
    }

    /// Waits until no create holds the shard (taking and releasing its lock); `false` if it
    /// is poisoned (a create panicked in it).
    pub(crate) fn quiesce(&self) -> bool {
        self.locked(|_| ()).is_ok()
    }
}
