//! A create's path in an owner: the calling thread's shard, a slot from its free list (or its
//! bump block, or a fresh slot block), an ID from its ID block (or exactly the one a restore
//! asks for), and the timer linked into its hash chain, visible to lookups only once whole.

use super::{OwnerInner, Shard, ShardState, Then, SHARD_POISONED, TIMER_POISONED};
use crate::error::Error;
use crate::registry::ids::TimerId;
use crate::registry::slots::{NONE, SLOT_BLOCK_MAX};
use crate::registry::table::Table;
use crate::registry::timer::{visible, Service, Timer, PENDING};
use crate::sync::{thread_index, Ordering};
use crossbeam_epoch::Guard;

impl<S: Service> OwnerInner<S> {
    pub(super) fn create(
        &self,
        requested: Option<i32>,
        init: S::Init,
        mut then: Option<Then<'_, S>>,
    ) -> Result<TimerId, Error> {
        // Validate before allocating anything (Linux e0fd4d42e27f fixed a leak here).
        if let Some(id) = requested {
            self.check_requested(id)?;
        }
        let thread = thread_index();
        let (home, shard) = self.shard(thread)?;
        let mut init = Some(init);
        loop {
            // Parked, holding nothing (no pin, no lock), while an exclusive section runs.
            self.wait_open();
            if let Some(id) =
                self.try_create(thread, home, shard, requested, &mut init, &mut then)?
            {
                return Ok(id);
            }
        }
    }

    /// One attempt of `create`: `Ok(None)`, with `init` and `then` untouched, if an exclusive
    /// section began since `wait_open` returned.
    #[inline]
    pub(super) fn try_create(
        &self,
        thread: usize,
        home: u16,
        shard: &Shard,
        requested: Option<i32>,
        init: &mut Option<S::Init>,
        then: &mut Option<Then<'_, S>>,
    ) -> Result<Option<TimerId>, Error> {
        let guard = crate::sync::pin();
        let made = shard
            .locked(|st| {
                // SeqCst: (D') in `Owner::exclusive`'s argument.
                if self.exclusive.load(Ordering::SeqCst) {
                    return None;
                }
                let init = init.take().expect("taken once");
                Some(self.create_locked(st, home, requested, init, true, &guard))
            })
            .map_err(|_| Error::Poisoned(SHARD_POISONED))?;
        let Some(made) = made else {
            return Ok(None);
        };
        let (id, table, timer) = made?;
        self.after_create(thread, table, &guard);
        if let Some(then) = then.take() {
            // The slot stays a timer object while the owner lives; `lock_if` checks it still
            // holds this timer.
            timer
                .lock_if(visible(self.key), Some(id.0), then)
                .map_err(|_| Error::Poisoned(TIMER_POISONED))?;
        }
        Ok(Some(id))
    }

    /// Returns once no exclusive section runs in the owner (at once if none does), parked
    /// meanwhile.
    #[inline]
    pub(super) fn wait_open(&self) {
        // Acquire: a waiter that reads false sees what the section made.
        while self.exclusive.load(Ordering::Acquire) {
            self.opened
                .wait(|| self.exclusive.load(Ordering::SeqCst), None);
        }
    }

    /// What follows every insert: the growth check and a share of a resize in progress.
    #[inline]
    pub(super) fn after_create(&self, thread: usize, table: &Table, guard: &Guard) {
        let shared = &*self.shared;
        let created = shared.count.created(thread);
        shared
            .tables
            .maybe_grow(table, created, || shared.count.sum(), guard);
        shared.tables.help_resize::<S>(guard);
    }

    /// Whether an exact-ID create of `id` may go ahead (before anything is allocated).
    #[inline]
    pub(super) fn check_requested(&self, id: i32) -> Result<(), Error> {
        if !self.ids.restoring() {
            return Err(Error::NotRestoring);
        }
        if id < 0 || id as u32 > self.shared.id_mask {
            return Err(Error::InvalidId);
        }
        Ok(())
    }

    /// The body of `create`, with the shard lock held. `check` false: a requested ID is known
    /// to be free (an [`Exclusive`](super::exclusive::Exclusive) section of an owner that had no
    /// timer), so its chain is not walked, and the counter is left for the section's caller to
    /// set.
    pub(super) fn create_locked<'s, 'g>(
        &'s self,
        st: &mut ShardState,
        home: u16,
        requested: Option<i32>,
        init: S::Init,
        check: bool,
        guard: &'g Guard,
    ) -> Result<(TimerId, &'g Table, &'s Timer<S>), Error> {
        let shared = &*self.shared;
        // SeqCst: (D) in `teardown`'s argument.
        if self.dead.load(Ordering::SeqCst) {
            return Err(Error::OwnerDeleted);
        }
        let (index, timer) = self.alloc_slot(st, home, guard)?;
        // SAFETY: the slot came off this shard's free list or bump block: it is free (owner
        // word 0) and the shard lock is held.
        unsafe { timer.reset_for_create(visible(self.key) | PENDING) };
        let mut attempts: u64 = 0;
        let limit = u64::from(shared.id_mask) + 1;
        let (id, table) = loop {
            let id = match requested {
                Some(id) => id,
                None => {
                    if attempts == limit {
                        self.free_slot_locked(st, index, timer);
                        return Err(Error::NoFreeId);
                    }
                    attempts += 1;
                    self.ids.next_candidate(&mut st.ids)
                }
            };
            timer.hot.id.store(id, Ordering::Relaxed);
            let hash = self.hash(TimerId(id));
            if requested.is_some() {
                // (B): set before the bucket lock is taken below.
                self.ids.note_reused();
            }
            let (t, idx, locked) = shared.tables.lock_bucket(hash, guard);
            // Is the candidate in use? A candidate from the counter's first pass cannot be,
            // unless an exact-ID create or a wrapped counter made IDs repeat, so the chain (one
            // random memory access per other timer in it) is only walked then.
            //
            // (A) Relaxed load, after the bucket lock's Acquire. Whoever inserts an ID that
            // could repeat a first-pass candidate (an exact-ID create, or a create with a
            // candidate past the wrap) sets `reused` at (B) before taking the lock of that
            // ID's bucket, and releases the lock after inserting; a later creator of the same
            // ID takes the same lock (or, after a split, the lock of the bucket the split moved
            // the timer to, under both locks) and so sees the flag at (A) and walks the chain.
            // A creator that takes the lock first inserts first, and the exact-ID create or
            // wrapped candidate that comes later always walks the chain and finds it. So
            // "two timers with one ID" is impossible. The one exact-ID create that does not
            // walk (`check` false) runs in an exclusive section of an owner that had no slot
            // in use, with every other create held off (`Owner::exclusive`).
            let maybe_taken = match requested {
                Some(_) => check,
                None => self.ids.maybe_reused(),
            };
            if maybe_taken && t.taken::<S>(locked.head(), self.key, id) {
                let head = locked.head();
                locked.unlock(head);
                if requested.is_some() {
                    self.free_slot_locked(st, index, timer);
                    return Err(Error::IdInUse);
                }
                continue;
            }
            t.link_and_unlock(idx, locked, timer, hash);
            break (id, t);
        };
        if requested.is_some() && check {
            // Linux sets (not maxes) the counter at hash-insert time.
            self.ids.set_counter((id as u32).wrapping_add(1));
        }
        // SAFETY: `reset_for_create` made the slot pending, and the shard lock is still held.
        unsafe { timer.init_pending(init) };
        // Release: a walker that reads the visible owner word (Acquire) sees the timer's
        // fields and its chain link.
        timer.hot.owner.store(visible(self.key), Ordering::Release);
        Ok((TimerId(id), table, timer))
    }

    /// A free slot from shard `home` (its index and the slot): its free list, its bump block,
    /// or a new block. A slot's `home` is written once, when the slot leaves a bump block: a
    /// free list only ever holds slots of its own shard (delete and a failed create return a
    /// slot to its `home`).
    ///
    /// # Errors
    /// [`Error::NoFreeId`] when the owner's slot space is exhausted; [`Error::OutOfMemory`]
    /// when the slot's page cannot be allocated (the shard keeps its bump block, and a later
    /// create tries the page again); [`Error::Poisoned`] if the page lock is.
    #[inline]
    pub(super) fn alloc_slot<'g>(
        &'g self,
        st: &mut ShardState,
        home: u16,
        guard: &Guard,
    ) -> Result<(u32, &'g Timer<S>), Error> {
        if st.free_head != NONE {
            let index = st.free_head;
            let timer = self.slots.get(index, guard);
            st.free_head = timer.hot.free_next.load(Ordering::Relaxed);
            st.live += 1;
            return Ok((index, timer));
        }
        if st.bump_left == 0 {
            st.bump_next = self.slots.claim(st.bump_block).ok_or(Error::NoFreeId)?;
            st.bump_left = st.bump_block;
            st.bump_block = (st.bump_block * 2).min(SLOT_BLOCK_MAX);
        }
        let index = st.bump_next;
        // Before the block moves on: a slot whose page could not be made stays the next one.
        let timer = self.slots.fresh(index, &self.shared.pool, guard)?;
        st.bump_next += 1;
        st.bump_left -= 1;
        // Relaxed: published with the timer by its create, as every field of the slot.
        timer.hot.index.store(index, Ordering::Relaxed);
        timer.hot.home.store(home, Ordering::Relaxed);
        // The slot's first timer in this owner: a pooled page's slot carries nothing of the
        // owner it served (`Timer::lock_slot`). Nothing of this owner names the slot yet.
        timer.hot.carried.store(0, Ordering::Relaxed);
        st.live += 1;
        Ok((index, timer))
    }

    /// Returns an unhashed slot to a shard whose lock the caller holds.
    #[inline]
    pub(super) fn free_slot_locked(&self, st: &mut ShardState, index: u32, timer: &Timer<S>) {
        // Release: a walker that still stands on this slot and reads 0 no longer matches it.
        timer.hot.owner.store(0, Ordering::Release);
        timer.hot.free_next.store(st.free_head, Ordering::Relaxed);
        st.free_head = index;
        st.live -= 1;
    }
}
