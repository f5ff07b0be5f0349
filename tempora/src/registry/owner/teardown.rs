//! An owner's end: [`Owner::destroy`] deletes all its timers ([`OwnerInner::teardown`]), and
//! dropping its last handle then gives its slot pages back to the registry's pool, after an
//! epoch grace period, unless a panic left a timer's state unknown (`OwnerInner::poisoned`).

use super::{Owner, OwnerInner};
use crate::registry::ids::TimerId;
use crate::registry::table::drop_large;
use crate::registry::timer::{visible, Service, Timer};
use crate::sync::{fence, Ordering, Poisoned};
use std::sync::Arc;

impl<S: Service> Owner<S> {
    /// Deletes the owner and all its timers (the delete hook runs on each, then the service's
    /// `on_destroy`). Later calls on any handle of it fail with
    /// [`Error::OwnerDeleted`](crate::error::Error::OwnerDeleted). Idempotent.
    pub(crate) fn destroy(&self) {
        self.inner.teardown();
    }
}

impl<S: Service> OwnerInner<S> {
    fn teardown(&self) {
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
        // See `new_shard`.
        fence(Ordering::SeqCst);
        for p in self.shards.iter() {
            // SeqCst: (B).
            let p = p.load(Ordering::SeqCst);
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
        let guard = crate::sync::pin();
        let word = visible(self.key);
        let mut deleted = 0;
        let mut released = Vec::new();
        self.slots.for_each(&guard, |timer| {
            if timer.hot.owner.load(Ordering::Acquire) >> 1 != self.key {
                return;
            }
            let id = timer.hot.id.load(Ordering::Relaxed);
            let marked = timer.lock_if(word, None, |l| Timer::mark_deleted(l, &self.service));
            match marked {
                Ok(Some(r)) => {
                    // Dropped with no lock held either way: kept for after the walk if there
                    // is room (no allocation that can fail aborts a teardown), else now.
                    if released.try_reserve(1).is_ok() {
                        released.push(r);
                    } else {
                        drop(r);
                    }
                    self.unhash(timer, self.hash(TimerId(id)), &guard);
                    // Release: as in `free_slot_locked`; the slot is not reused (the owner is
                    // dead).
                    timer.hot.owner.store(0, Ordering::Release);
                    deleted += 1;
                }
                // A panic under its lock: its state (and whether the service still names it)
                // is unknown. It stays hashed and its memory is never reused (`poisoned`).
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
        self.shared.count.add(-deleted);
        drop(released);
        S::on_destroy(&self.service);
    }
}

impl<S: Service> Drop for OwnerInner<S> {
    fn drop(&mut self) {
        self.teardown();
        if self.poisoned.load(Ordering::Relaxed) {
            // See `poisoned`: the pages and shards stay allocated for the process's life.
            return;
        }
        for p in self.shards.iter() {
            let p = p.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: installed by `new_shard` from `Box::into_raw`; no handle is left, so
                // nothing uses it; swapped out once.
                drop(unsafe { Box::from_raw(p) });
            }
        }
        let Some(pages) = self.slots.take_pages() else {
            // No memory for the list of pages: they stay with this owner's directory, which
            // never frees them (leaked rather than abort; `timers` module doc, "Memory").
            return;
        };
        let shared = self.shared.clone();
        let guard = crate::sync::pin();
        // SAFETY: every timer of this owner was unhashed and freed (owner word 0) by
        // `teardown`, and no handle is left, so after the threads pinned now have unpinned
        // nothing of this owner's uses the pages. A by-ID walk of another owner (which takes no
        // pin, `sync/pin.rs`) may still stand on one of these timers, as it may on any slot
        // freed and reused within an owner: the pages stay timer memory in the pool, which
        // lives as long as `shared`, and that walk checks the slot's identity. They were taken
        // out exactly once. `recycle`'s contract holds when the deferred call runs, after the
        // grace period.
        unsafe {
            guard.defer_unchecked(move || {
                shared.pool.recycle(pages);
                // The last reference (registry and owners gone) frees the table and the pool.
                // No walk can stand on them: a walk runs on an owner, which holds a reference.
                if let Some(shared) = Arc::into_inner(shared) {
                    let bytes = shared.pool.bytes();
                    drop_large(shared, bytes);
                }
            })
        };
        // Start the grace period now, so the next owner is likely to find the pages pooled.
        guard.flush();
    }
}
