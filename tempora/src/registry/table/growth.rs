//! The table's growth: [`Tables`], the registry's current table and, during a resize, the
//! future one it is being split into; when a resize starts ([`Tables::maybe_grow`]), how
//! creates and deletes share its work ([`Tables::help_resize`]), and the split of one bucket
//! ([`Table::split_bucket`]), whose stores the lock-free walks of `table.rs` rely on.
//!
//! # Growth
//!
//! Bucket index = `hash & mask`. When the table grows, a table of twice the size is attached as
//! `future`, and each old bucket `i` is split into future buckets `i` and `i + old_len` by
//! [`Table::split_bucket`], under the old bucket's lock and the two new buckets' locks (lock
//! order: old table before future table). Entries are moved tail first: the tail is linked at
//! the head of its new chain (Release) before its predecessor's link is cut (Release), so a
//! walker of the old chain either follows it into the new chain (and restarts on the foreign
//! nulls marker) or finds the old chain ended; a walker that finds nothing in a table with a
//! `future` looks there next, and the Release/Acquire pair on the cut link guarantees it sees
//! the `future` pointer. The split bucket's head becomes `MOVED`, which sends walkers and
//! writers to the future table. Splitting is incremental: creates and deletes each split a few
//! buckets ([`MIGRATE_BATCH`]) while a resize is in progress, so no call pays for the whole
//! table.

use super::{drop_deferred, find, hash, nulls, tag, Bucket, BucketGuard, Table};
use super::{LOCKED, MAX_BITS, MOVED, NULLS};
use crate::alloc::try_box;
use crate::registry::timer::{Service, Timer};
use crate::sync::Ordering;
use crossbeam_epoch::{self as epoch, Atomic, Guard};

/// Old buckets a create or delete splits while a resize is in progress.
pub(crate) const MIGRATE_BATCH: usize = 8;
/// A create sums the registry's count (to decide on growth) once in this many creates of its
/// thread.
const GROW_CHECK: usize = 16;
/// Chain members a split collects without allocating under its lock, at least: it reserves
/// `max(SPLIT_CHAIN, 4 * max_load)`.
pub(super) const SPLIT_CHAIN: usize = 16;

impl Table {
    /// Splits old bucket `i` into `future` buckets `i` and `i + len` (see the module doc).
    /// The caller claimed `i`; nobody else splits it, and nobody writes the two future buckets
    /// until this bucket reads `MOVED`.
    pub(crate) fn split_bucket<S: Service>(&self, i: usize, future: &Table, reserve: usize) {
        let old = &self.buckets[i];
        // Sized before the lock is taken, so the collection below allocates under the old
        // bucket's lock only for a chain more than `reserve` long (four times the allowed
        // average, at least `SPLIT_CHAIN`: at the default maximum load of 2 a chain of 16 is
        // a one-in-ten-million event; the allocation is bounded by the chain). Every
        // allocation is fallible: a split that cannot collect the chain walks to each member
        // instead (`nth` below, quadratic in the chain, allocating nothing), since a claimed
        // bucket must be split for the resize to end.
        let mut chain: Vec<&Timer<S>> = Vec::new();
        let _ = chain.try_reserve(reserve);
        let Some(old_locked) = old.lock() else {
            debug_assert!(false, "bucket {i} split twice");
            return;
        };
        let first = old_locked.head();
        let mut collected = true;
        let mut len = 0;
        let mut p = first;
        while p != 0 && p & NULLS == 0 {
            // SAFETY: the old bucket's lock is held; its chain holds live timers only.
            let t = unsafe { &*(p as *const Timer<S>) };
            collected = collected && chain.try_reserve(1).is_ok();
            if collected {
                chain.push(t);
            }
            len += 1;
            p = t.hot.hash_next.load(Ordering::Relaxed);
        }
        // The chain's `pos`-th member. Walking from the head follows only the links before
        // `pos`, which the loop below has not changed yet (it works from the tail).
        let nth = |pos: usize| -> &Timer<S> {
            if collected {
                return chain[pos];
            }
            let mut p = first;
            for _ in 0..pos {
                // SAFETY: as above; the links before `pos` are still the old chain's.
                p = unsafe { &*(p as *const Timer<S>) }
                    .hot
                    .hash_next
                    .load(Ordering::Relaxed);
            }
            // SAFETY: as above.
            unsafe { &*(p as *const Timer<S>) }
        };
        let lo = i;
        let hi = i + self.buckets.len();
        let future_locked = [lo, hi].map(|j| {
            future.buckets[j]
                .lock_nested(&old_locked)
                .expect("a future bucket is never MOVED")
        });
        let mut heads = [future_locked[0].head(), future_locked[1].head()];
        let end_of_old = nulls(self.bits, i);
        for pos in (0..len).rev() {
            let t = nth(pos);
            let owner_key = t.hot.owner.load(Ordering::Relaxed) >> 1;
            debug_assert_ne!(owner_key, 0);
            let id = t.hot.id.load(Ordering::Relaxed);
            let h = hash(self.salt, owner_key, id);
            let j = future.index(h);
            let k = usize::from(j != lo);
            let next = if heads[k] == 0 {
                nulls(future.bits, j)
            } else {
                heads[k]
            };
            // Release (both stores): link the timer into its new chain before anyone can
            // reach that chain through it.
            t.hot.hash_next.store(next, Ordering::Release);
            let ptr = t as *const Timer<S> as usize;
            future.buckets[j]
                .head
                .store(ptr | LOCKED, Ordering::Release);
            heads[k] = ptr;
            let nb = &future.buckets[j];
            // Moved oldest first, so the near entries end up naming the newest three, as if
            // the timers had been created into this bucket.
            nb.near_push(tag(h), ptr);
            // Cut the old chain before this timer. Release: a walker that reads the cut sees
            // the timer already in the future table (and the `future` pointer).
            if pos > 0 {
                nth(pos - 1)
                    .hot
                    .hash_next
                    .store(end_of_old, Ordering::Release);
            }
        }
        old.near_clear();
        // Release (in `unlock`): pairs with the Acquire of walkers and lockers that read MOVED
        // and then use the future table's chains. This also unlocks the old bucket.
        old_locked.unlock(MOVED);
        for (locked, head) in future_locked.into_iter().zip(heads) {
            locked.unlock(head);
        }
    }
}

/// The registry's tables: the current one, and during a resize the future one it is being
/// split into (see "Growth" in the module doc).
pub(crate) struct Tables {
    current: Atomic<Table>,
    /// The table doubles when it holds more than this many timers per bucket.
    max_load: usize,
}

impl Tables {
    /// A current table of `2^bits` buckets hashing with `salt`; `None` if its buckets cannot
    /// be allocated (a large configured first table).
    pub(crate) fn try_new(bits: u32, salt: [u64; 2], max_load: usize) -> Option<Tables> {
        Some(Tables {
            current: Atomic::new(Table::try_new(bits, salt)?),
            max_load,
        })
    }

    #[inline]
    pub(crate) fn current<'g>(&self, guard: &'g Guard) -> &'g Table {
        // Acquire: pairs with the Release store that published the table (build or the end of
        // a resize), so its buckets are visible.
        let t = self.current.load(Ordering::Acquire, guard);
        // SAFETY: the current table is never null, and a retired table is freed by a deferred
        // function (`split_some`) only after every thread pinned when it was retired has
        // unpinned and every walk open then has closed (`drop_deferred`); `guard` is such a
        // pin, or the unprotected guard of such a walk (`sync::pin_walk`).
        unsafe { t.deref() }
    }

    /// The timer (owner, id) as a lock-free walk finds it; re-check under its lock.
    #[inline]
    pub(crate) fn find<'g, S: Service>(
        &self,
        hash: u64,
        owner_word: u64,
        id: i32,
        guard: &'g Guard,
    ) -> Option<&'g Timer<S>> {
        find(|| self.current(guard), hash, owner_word, id)
    }

    /// Locks the bucket of `hash` in the table that holds it now; returns (table, index, lock).
    #[inline]
    pub(crate) fn lock_bucket<'g>(
        &self,
        hash: u64,
        guard: &'g Guard,
    ) -> (&'g Table, usize, BucketGuard<'g>) {
        let mut t = self.current(guard);
        loop {
            let idx = t.index(hash);
            match t.buckets[idx].lock() {
                Some(locked) => return (t, idx, locked),
                None => t = t.future().expect("a MOVED bucket has a future table"),
            }
        }
    }

    /// After an insert into `t`, the inserting thread's `created`-th (`Count::created`):
    /// start a resize if the registry holds more than `max_load` timers per bucket (`count`
    /// sums the registry's timers).
    pub(crate) fn maybe_grow(
        &self,
        t: &Table,
        created: usize,
        count: impl FnOnce() -> isize,
        guard: &Guard,
    ) {
        // Summing the stripes is the expensive part: it is done at each of a thread's first
        // `GROW_CHECK` creates and at every `GROW_CHECK`-th after, so a resize starts at most
        // `GROW_CHECK` creates per thread late, and threads that each create only a few timers
        // still check every one.
        if (created >= GROW_CHECK && created % GROW_CHECK != 0) || t.bits >= MAX_BITS {
            return;
        }
        if t.future().is_some() || !std::ptr::eq(t, self.current(guard)) {
            return;
        }
        if count() <= (t.buckets.len() * self.max_load) as isize {
            return;
        }
        // A table that cannot be allocated is not grown: it keeps working at a higher load
        // (longer chains), and the next check tries again.
        let Some(f) = Table::try_new(t.bits + 1, t.salt).and_then(|f| try_box(f).ok()) else {
            return;
        };
        let f = Box::into_raw(f);
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
    pub(crate) fn help_resize<S: Service>(&self, guard: &Guard) {
        let cur = self.current.load(Ordering::Acquire, guard);
        // SAFETY: as in `current`.
        let t = unsafe { cur.deref() };
        let Some(f) = t.future() else {
            return;
        };
        self.split_some::<S>(cur, t, f, guard);
    }

    #[cold]
    fn split_some<S: Service>(
        &self,
        cur: epoch::Shared<'_, Table>,
        t: &Table,
        f: &Table,
        guard: &Guard,
    ) {
        let n = t.buckets.len();
        let start = t.claimed.fetch_add(MIGRATE_BATCH, Ordering::Relaxed);
        if start >= n {
            return;
        }
        let end = (start + MIGRATE_BATCH).min(n);
        for i in start..end {
            t.split_bucket::<S>(i, f, SPLIT_CHAIN.max(4 * self.max_load));
        }
        // AcqRel: the last splitter sees every other splitter's work before publishing.
        let done = t.split.fetch_add(end - start, Ordering::AcqRel) + (end - start);
        if done == n {
            // Release: the new table and everything split into it are visible to whoever
            // loads it as current.
            self.current
                .store(epoch::Shared::from(f as *const Table), Ordering::Release);
            // SAFETY: `cur` is no longer reachable from `self.current` (replaced just above,
            // and only the last splitter does this, once per table). Pinned threads may still
            // use it; the deferred function runs after they unpin, and owns the table from
            // then on.
            let retired = unsafe { cur.into_owned() }.into_box();
            // SAFETY: the deferred function frees the table after the grace period (above).
            unsafe {
                guard.defer_unchecked(move || {
                    let bytes = std::mem::size_of_val::<[Bucket]>(&retired.buckets);
                    drop_deferred(retired, bytes);
                })
            };
            // Hand the retired table to the global queue now: a resize is rare, so this
            // thread's bag would otherwise hold it until 64 other deferred frees came along.
            guard.flush();
        }
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: the registry is gone (owners hold it too), so no thread can
        // reach the tables any more.
        unsafe {
            let guard = epoch::unprotected();
            let t = self.current.load(Ordering::Acquire, guard);
            let f = t.deref().future.load(Ordering::Acquire);
            if !f.is_null() {
                drop(Box::from_raw(f));
            }
            drop(t.into_owned());
        }
    }
}
