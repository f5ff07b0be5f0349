//! An owner's exclusive section: [`Owner::exclusive`] runs a closure with every other create
//! in the owner held off, and the closure creates through the [`Exclusive`] it is given. A
//! restore runs in one: into an owner that held no timer when the section began, its exact-ID
//! creates skip the walk of their chain.
//!
//! The section is the owner's `exclusive` flag and the `opened` queue on which held-off
//! creates park (`OwnerInner` in `owner.rs`). The section sets the flag and then reads every
//! shard; a create checks the flag under its shard lock ((D') in `try_create`) and parks in
//! `wait_open`. Why no create goes ahead unseen is argued at [`Owner::exclusive`]. The section
//! is a lock of the crate's order (rank SECTION of `sync::rank`).

use super::{Owner, OwnerInner, Then, SHARD_POISONED, TIMER_POISONED};
use crate::error::Error;
use crate::registry::ids::TimerId;
use crate::registry::timer::{visible, Service};
use crate::sync::{
    fence, rank, thread_index, AtomicBool, Ordering, Poisoned, RankToken, WaitQueue,
};

impl<S: Service> Owner<S> {
    /// Runs `f` with every other create in this owner held off: creates by other threads wait
    /// (parked, holding nothing) until `f` returns, and `f` creates through the [`Exclusive`]
    /// it is given. Deletes, lookups and teardown are not held off. A restore runs in one: if
    /// the owner holds no timer when the section starts (none hashed, in any state), no ID
    /// can be taken but by the section's own creates, so its exact-ID creates skip the walk of
    /// their chain (at a million timers, a cache miss per chain member).
    ///
    /// Sections of one owner run one after the other. `f` must not create through the owner
    /// itself, which would wait for its own section.
    ///
    /// [`Owner::wait_open`] lets a caller wait before it takes something a waiting create
    /// would hold on to (a group charge); a section that begins right after it returned can
    /// still make the create wait holding it.
    pub(crate) fn exclusive<R>(&self, f: impl FnOnce(&mut Exclusive<'_, S>) -> R) -> R {
        let inner = &*self.inner;
        // The section is a lock of the crate's order (`sync::rank::SECTION`): held from here
        // to the end of `f`, released (the mark cleared) after `Open` reopened the owner.
        let _section = RankToken::<{ rank::SECTION }>::enter();
        // Why no create of another thread can run while `alone` holds, by store buffering as
        // in `teardown`:
        //
        //   the section                           a create in this owner
        //   (A') exclusive: false -> true         (C) shards[i]: null -> new shard
        //   (B') shards[i].load(): null? else     (D') lock it; exclusive.load()?
        //        lock it, read `live`, unlock
        //
        // If (B') reads null, the creator's (D') comes later in the SeqCst order and reads
        // true. Otherwise (B') takes shard i's lock: a create holding it has finished (its
        // slot is counted in `live`), and a later holder reads true at (D') and waits. So
        // once every shard was read, no slot of the owner is taken but by the section; deletes
        // only lower the counts. A sum of 0 means no timer of the owner is hashed.
        // SeqCst: (A').
        while inner
            .exclusive
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            inner
                .opened
                .wait(|| inner.exclusive.load(Ordering::SeqCst), None);
        }
        // See `new_shard`.
        fence(Ordering::SeqCst);
        // Clears the flag and wakes the waiters however `f` ends, unwinding included.
        struct Open<'a>(&'a AtomicBool, &'a WaitQueue);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                // Release: a waiting creator that reads false sees the section's timers. A
                // waiter checks the flag after taking the queue's token, and `wake_all`
                // moves the token after this store, so none sleeps through it.
                self.0.store(false, Ordering::Release);
                self.1.wake_all();
            }
        }
        let _open = Open(&inner.exclusive, &inner.opened);
        let mut live = 0u64;
        let mut readable = true;
        for p in inner.shards.iter() {
            // SeqCst: (B').
            let p = p.load(Ordering::SeqCst);
            if p.is_null() {
                continue;
            }
            // SAFETY: installed shards live as long as the owner.
            let shard = unsafe { &*p };
            match shard.locked(|st| st.live) {
                Ok(n) => live += u64::from(n),
                // A create panicked in it: what it left is unknown, so walk as usual.
                Err(Poisoned) => readable = false,
            }
        }
        let mut ex = Exclusive {
            owner: inner,
            alone: readable && live == 0,
            guard: crate::sync::pin(),
            thread: thread_index(),
            creates: 0,
        };
        f(&mut ex)
    }

    /// Returns once no [`Owner::exclusive`] section runs in the owner (at once if none does),
    /// parked meanwhile. A create waits so by itself; this is for a caller that would
    /// otherwise hold something while its create waits.
    #[inline]
    pub(crate) fn wait_open(&self) {
        self.inner.wait_open();
    }
}

/// Creates inside [`Owner::exclusive`]: no other create runs in the owner meanwhile.
pub(crate) struct Exclusive<'a, S: Service> {
    owner: &'a OwnerInner<S>,
    /// The owner held no timer when the section started (see `Owner::exclusive`).
    alone: bool,
    /// One pin for the section (renewed every `REPIN` creates, so that reclamation goes on),
    /// instead of a pin, with its full fence, per create and per prefetch.
    guard: crate::sync::Pinned,
    thread: usize,
    creates: u32,
}

impl<S: Service> Exclusive<'_, S> {
    /// Creates between two renewals of the section's pin.
    const REPIN: u32 = 1024;

    /// Whether the owner held no timer when the section started: then exact-ID creates do
    /// not walk their chain, and do not set the ID counter either (the section's caller sets
    /// it, as a restore does).
    pub(crate) fn alone(&self) -> bool {
        self.alone
    }

    /// `Owner::create` of exactly `id` (restore mode must be on), with its errors; if
    /// [`Exclusive::alone`], the ID is not looked for (the caller knows it was not created in
    /// the section already) and the counter is not set.
    pub(crate) fn create(
        &mut self,
        id: i32,
        init: S::Init,
        then: Option<Then<'_, S>>,
    ) -> Result<TimerId, Error> {
        let owner = self.owner;
        owner.check_requested(id)?;
        self.creates = self.creates.wrapping_add(1);
        if self.creates % Self::REPIN == 0 {
            self.guard.repin();
            // And let the epoch advance and deferred frees run: with one pin per 1024 creates,
            // collection (which crossbeam tries every 128 pins) would rarely run, so the slot
            // pages of an owner torn down just before would reach the pool late and the
            // section would fault in fresh ones.
            self.guard.flush();
        }
        let guard = &self.guard;
        let (home, shard) = owner.shard(self.thread)?;
        let check = !self.alone;
        let (id, table, timer) = shard
            .locked(|st| owner.create_locked(st, home, Some(id), init, check, guard))
            .map_err(|_| Error::Poisoned(SHARD_POISONED))??;
        owner.after_create(self.thread, table, guard);
        if let Some(then) = then {
            // As in `OwnerInner::create`.
            timer
                .lock_if(visible(owner.key), Some(id.0), then)
                .map_err(|_| Error::Poisoned(TIMER_POISONED))?;
        }
        Ok(id)
    }

    /// Starts loading the hash bucket a create of `id` will lock, for a caller that knows its
    /// IDs well ahead (a restore). A hint: it changes nothing.
    pub(crate) fn prefetch(&self, id: i32) {
        let hash = self.owner.hash(TimerId(id));
        let table = self.owner.shared.tables.current(&self.guard);
        table.prefetch(hash);
    }
}
