//! The timer object and the contract between the registry and the service it serves.
//!
//! The registry keeps timer objects, IDs and owners; what a timer *is* beyond that (its clock,
//! its expiry, where it waits, how it notifies) belongs to the layer above, the [`Service`],
//! which keeps it in four typed parts of the same object (`fixed`, `published`, `links` and
//! `state` below):
//!
//! ```text
//!  offset  line 1: read-mostly (what a concurrent hash walker touches)
//!       0  hash_next     AtomicUsize  next timer in the bucket chain, or a nulls marker
//!       8  owner         AtomicU64    owner key << 1 | PENDING; 0 = free slot
//!      16  id            AtomicI32    the timer ID (timer_t)
//!      20  home          AtomicU16    the owner shard whose free list takes the slot back
//!      24  index         AtomicU32    this slot's index in its owner's slot pages
//!      28  free_next     AtomicU32    next free slot while on a shard's free list
//!      32  generation    AtomicU32    bumped by every create in this slot
//!      36  carried       AtomicU32    the service's word that outlives the slot's timers,
//!                                     under the timer's lock (zeroed as its owner first
//!                                     takes the slot)
//!      40  fixed         S::Fixed     the service's fields set at create (atomics)
//!          line 2: written while the timer is in use
//!      64  lock          VersionedLock the timer's own lock (rank TIMER), with a version that
//!                                     lets `Timer::read_unlocked` read the state without it
//!      68  published     S::Published the service's fields written under the lock and read
//!                                     without it (`Timer::read_current`)
//!      72  links         S::Links     the service's wheel links (24 bytes for the POSIX
//!                                     service: a `wheel::intrusive::Node`)
//!      96  state         S::State     the service's fields used only under the lock
//!     128  (end, for the POSIX service's parts; the object is 64-byte aligned)
//! ```
//!
//! Walkers of a bucket chain read `hash_next`, `owner` and `id` of every timer they pass;
//! locking a timer and changing its state write only line 2, so they do not invalidate line 1
//! in the caches of CPUs walking the same chain. `owner` is written at create and delete only,
//! `generation` and `fixed` at create only. The unit tests `timer_layout_matches_doc` (here)
//! and the service's own check its parts' offsets.
//!
//! # Type-stable memory
//!
//! Timer objects live in their owner's slot pages (see `slots.rs`) and are never freed while
//! the owner exists: a deleted timer's slot goes back to a free list and is reused by the same
//! owner, possibly at once (the kernel's `SLAB_TYPESAFE_BY_RCU` idea). A lock-free walker may
//! therefore hold a reference to a timer that is deleted and re-created under its feet; every
//! field it reads without the lock is atomic, and it trusts a match only after re-checking
//! `owner` and `id` under the timer's lock (see the registry's module doc). A slot's parts are
//! reset at create, never dropped: whatever a service's part owns, its delete hook releases.

use super::ids::TimerId;
use crate::sync::{
    fence, rank, AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, Poisoned,
    Unreadable, UnsafeCell, VersionedLock,
};

/// `owner` bit 0: the slot is hashed (its ID is taken) but not visible to lookups, because it
/// is being created or being deleted (the kernel's `it_signal | 1`).
pub(crate) const PENDING: u64 = 1;

/// The owner word of a visible timer of the owner with this key.
#[inline]
pub(crate) fn visible(owner_key: u64) -> u64 {
    owner_key << 1
}

/// What a layer above the registry keeps in each timer object, and what it does when one is
/// deleted (the registry's only call into that layer). The POSIX timer service
/// (`timers::Itimer`) is the one the crate ships; the registry's tests use their own, and
/// `()`, a service with nothing in the object.
pub(crate) trait Service: Sized + Send + Sync + 'static {
    /// Set when the timer is created and read without the lock afterwards (line 1). Atomics,
    /// because a lock-free reader may read them while a re-create in the same slot writes
    /// them (it then drops what it read: `Timer::read_current`).
    type Fixed: Zeroable + Send + Sync;
    /// Written under the timer's lock and read without it through `Timer::read_current`
    /// (line 2, beside the lock). Atomics.
    type Published: Zeroable + Send + Sync;
    /// Read and written under the timer's lock, and by whatever the service lets hold the
    /// timer (its wheels, under their own locks): the wheel links (line 2). Atomics.
    type Links: Zeroable + Send + Sync;
    /// Read and written only under the timer's lock (line 2).
    type State: Zeroable + Send;
    /// What a create is given to fill the four parts.
    type Init;
    /// Kept by each owner for the delete hook (the service's handle on its own state).
    type OwnerPart: Send + Sync;
    /// What the delete hook hands back, dropped by the registry once it holds no lock (so a
    /// user's closure inside it never runs under one).
    type Released;

    /// Fills every part of a free slot for a new timer (without the lock: nobody else can
    /// reach a slot being created). Whatever the slot's last timer left in them is
    /// overwritten.
    fn init(
        fixed: &Self::Fixed,
        published: &Self::Published,
        state: &mut Self::State,
        init: Self::Init,
    );

    /// The delete hook: runs under the timer's lock just after the timer stopped being
    /// visible to lookups, on delete and on each timer of an owner being destroyed. It takes
    /// the timer out of whatever the service keeps it in, so nothing of the service refers to
    /// it afterwards. It must not take the lock of a timer or of an owner's ID shard.
    fn on_delete(owner: &Self::OwnerPart, l: &mut Locked<'_, Self>) -> Self::Released;

    /// Runs once when an owner is destroyed, after the delete hook ran on its last timer,
    /// with no registry lock held.
    fn on_destroy(owner: &Self::OwnerPart);
}

/// A type whose all-zero bit pattern is a valid value, equal to its `Default` (outside loom:
/// the crate's atomics are the standard library's then, for which zero is a valid value; under
/// loom slot pages are built with `Default` instead). Slot pages come from zeroed memory, so
/// a fresh page costs no writes (`slots.rs`).
///
/// # Safety
/// Outside `cfg(loom)`, zeroed memory of the type's size and alignment is a valid value of it,
/// the one its `Default` gives.
pub(crate) unsafe trait Zeroable: Default {}

// SAFETY: a zero-sized type has no bytes.
#[cfg(test)]
unsafe impl Zeroable for () {}

/// The service with nothing in the object: the registry alone (its tests).
#[cfg(test)]
impl Service for () {
    type Fixed = ();
    type Published = ();
    type Links = ();
    type State = ();
    type Init = ();
    type OwnerPart = ();
    type Released = ();
    fn init(_: &(), _: &(), _: &mut (), _: ()) {}
    fn on_delete(_: &(), _: &mut Locked<'_, ()>) {}
    fn on_destroy(_: &()) {}
}

/// Line 1: read by lock-free chain walkers.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct ReadMostly<F> {
    pub(crate) hash_next: AtomicUsize,
    pub(crate) owner: AtomicU64,
    pub(crate) id: AtomicI32,
    pub(crate) home: AtomicU16,
    pub(crate) index: AtomicU32,
    pub(crate) free_next: AtomicU32,
    pub(crate) generation: AtomicU32,
    /// The service's word that outlives the slot's timers (see [`Timer::lock_slot`]).
    pub(crate) carried: AtomicU32,
    pub(crate) fixed: F,
}

/// Line 2: written while the timer is in use.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Written<P, N, T> {
    pub(crate) lock: VersionedLock<{ rank::TIMER }>,
    pub(crate) published: P,
    pub(crate) links: N,
    pub(crate) state: UnsafeCell<T>,
}

/// One timer object (see the module doc for the layout).
#[repr(C)]
pub(crate) struct Timer<S: Service> {
    pub(crate) hot: ReadMostly<S::Fixed>,
    pub(crate) written: Written<S::Published, S::Links, S::State>,
}

impl<S: Service> Default for Timer<S> {
    fn default() -> Self {
        Timer {
            hot: ReadMostly::default(),
            written: Written::default(),
        }
    }
}

// SAFETY: every field is `Sync` except `written.state`, which is only accessed with
// `written.lock` held (`Timer::lock_if`) or on a free slot by its creator
// (`Timer::reset_for_create`), and is `Send`; so sharing a `Timer` between threads is sound.
unsafe impl<S: Service> Sync for Timer<S> {}
// SAFETY: as above; a `Timer` holds no thread-bound data.
unsafe impl<S: Service> Send for Timer<S> {}

/// A timer as the holder of its lock sees it: its identity and fixed part through `timer`, its
/// state to change.
pub(crate) struct Locked<'a, S: Service> {
    pub(crate) timer: &'a Timer<S>,
    pub(crate) state: &'a mut S::State,
}

impl<S: Service> Locked<'_, S> {
    /// The timer's ID.
    #[inline]
    pub(crate) fn id(&self) -> TimerId {
        self.timer.id()
    }

    /// The service's fields set at create.
    #[inline]
    pub(crate) fn fixed(&self) -> &S::Fixed {
        &self.timer.hot.fixed
    }

    /// The service's published fields, to write (they are atomics; the lock orders writers).
    #[inline]
    pub(crate) fn published(&self) -> &S::Published {
        &self.timer.written.published
    }

    /// The timer's wheel links.
    #[inline]
    pub(crate) fn links(&self) -> &S::Links {
        &self.timer.written.links
    }

    /// The state to change and the published parts to write, at once (the rules that change
    /// one write the other).
    #[inline]
    pub(crate) fn state_and_published(&mut self) -> (&mut S::State, &S::Published) {
        (self.state, &self.timer.written.published)
    }

    /// The slot's carried word (see [`Timer::lock_slot`]), under this lock.
    #[inline]
    pub(crate) fn carried(&self) -> &AtomicU32 {
        &self.timer.hot.carried
    }
}

/// Runs `f` in a timer lock's critical section (the rank check, then the lock itself).
#[inline]
fn with_timer_lock<S: Service, R>(timer: &Timer<S>, f: impl FnOnce() -> R) -> Result<R, Poisoned> {
    timer.written.lock.with(f)
}

impl<S: Service> Timer<S> {
    /// Whether this slot holds the visible timer `(owner_word, id)` right now.
    #[inline]
    pub(crate) fn is(&self, owner_word: u64, id: i32) -> bool {
        // Acquire: pairs with the Release store that made the timer visible at create.
        self.hot.owner.load(Ordering::Acquire) == owner_word
            && self.hot.id.load(Ordering::Relaxed) == id
    }

    /// Takes the timer's lock and, if the slot still holds the visible timer
    /// `(owner_word, id)` (any ID if `id` is `None`), runs `f` on its fields. `Ok(None)` if the
    /// slot holds something else: the caller looks again. [`Poisoned`] if a panic inside an
    /// earlier holder's critical section poisoned the lock (a panic in `f` poisons it).
    ///
    /// The identity is checked before the state is borrowed, so a slot being re-created by
    /// another thread (which resets the state without the lock, see `reset_for_create`) is
    /// never borrowed here.
    #[inline]
    pub(crate) fn lock_if<R>(
        &self,
        owner_word: u64,
        id: Option<i32>,
        f: impl FnOnce(Locked<'_, S>) -> R,
    ) -> Result<Option<R>, Poisoned> {
        with_timer_lock(self, || {
            let current = match id {
                Some(id) => self.is(owner_word, id),
                // Acquire: as in `is`.
                None => self.hot.owner.load(Ordering::Acquire) == owner_word,
            };
            current.then(|| self.locked_state(f))
        })
    }

    /// Takes the timer's lock and, if the slot holds a visible timer of any owner, runs `f` on
    /// its fields (the path of a service that found the timer by its address, not by its ID:
    /// it then checks, in its own state, that the timer is still the one it meant). Poisoning
    /// as in [`Timer::lock_if`].
    #[inline]
    pub(crate) fn lock_visible<R>(
        &self,
        f: impl FnOnce(Locked<'_, S>) -> R,
    ) -> Result<Option<R>, Poisoned> {
        with_timer_lock(self, || {
            // Acquire: as in `is`.
            let word = self.hot.owner.load(Ordering::Acquire);
            (word != 0 && word & PENDING == 0).then(|| self.locked_state(f))
        })
    }

    /// Takes the timer's lock whatever the slot holds, and runs `f` on the slot's carried
    /// word and, if the slot holds a visible timer, on its fields. The carried word is the
    /// service's alone: the registry neither writes it at create nor at delete, so it
    /// outlives the slot's timers (the POSIX service counts in it the stale queue entries
    /// that name the slot), and only zeroes it when an owner first takes the slot (its page
    /// fresh or from the pool, `Owner::alloc_slot`). Read and written under the timer's lock
    /// only, but for that zeroing, which comes before anything of the owner names the slot. Poisoning as in
    /// [`Timer::lock_if`].
    #[inline]
    pub(crate) fn lock_slot<R>(
        &self,
        f: impl FnOnce(&AtomicU32, Option<Locked<'_, S>>) -> R,
    ) -> Result<R, Poisoned> {
        with_timer_lock(self, || {
            // Acquire: as in `is`.
            let word = self.hot.owner.load(Ordering::Acquire);
            if word != 0 && word & PENDING == 0 {
                self.locked_state(|l| f(&self.hot.carried, Some(l)))
            } else {
                f(&self.hot.carried, None)
            }
        })
    }

    /// This slot's index in its owner's slot pages (constant once the slot was first taken).
    #[inline]
    pub(crate) fn slot_index(&self) -> u32 {
        // Relaxed: written when the slot was first taken, before any event could name it.
        self.hot.index.load(Ordering::Relaxed)
    }

    /// `f` on the state of a visible timer whose lock the caller holds.
    #[inline]
    fn locked_state<R>(&self, f: impl FnOnce(Locked<'_, S>) -> R) -> R {
        self.written.state.with_mut(|p| {
            f(Locked {
                timer: self,
                // SAFETY: the caller holds the lock and saw the slot visible: its state is
                // only accessed by holders of this lock (the create that resets it without the
                // lock runs only while the slot is free or pending, and a visible slot is
                // neither until a delete, which needs this lock, marks it pending).
                state: unsafe { &mut *p },
            })
        })
    }

    /// Whether a panic under this timer's lock poisoned it.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.written.lock.is_poisoned()
    }

    /// Reads the visible timer `(owner_word, id)` without the lock: `Some` only if the slot
    /// held that timer, in the same incarnation, before and after the read.
    ///
    /// A seqlock read whose sequence is (generation, owner word): the generation is read
    /// first, so that it belongs to the incarnation whose owner word is checked after it.
    /// Read after the owner word, it could be a re-create's (same owner, and the same ID in
    /// exact-ID mode) while the owner word read was the deleted incarnation's; both re-checks
    /// would then pass with data read half from each incarnation (loom:
    /// `loom_reader_racing_recreate_with_the_same_id_reads_one_incarnation`).
    #[inline]
    pub(crate) fn read_current<R>(
        &self,
        owner_word: u64,
        id: i32,
        read: impl FnOnce(&S::Fixed, &S::Published) -> R,
    ) -> Option<R> {
        // Acquire: pairs with the Release generation store in `reset_for_create`: if this is a
        // re-create's generation, the owner word checked next is that re-create's (pending, or
        // visible), not the word of the incarnation before it.
        let generation = self.hot.generation.load(Ordering::Acquire);
        // Acquire (in `is`): the fields of the visible incarnation are visible.
        if !self.is(owner_word, id) {
            return None;
        }
        let v = read(&self.hot.fixed, &self.written.published);
        // Acquire: pairs with the Release fences of the writers that end an incarnation, each
        // after the owner word (and generation) it stores and before its data: in
        // `reset_for_create` and in `Timer::mark_deleted`. If `read` saw such data, the
        // re-check below sees that owner word or generation and fails. It also keeps the
        // re-check from being performed before the read.
        fence(Ordering::Acquire);
        (self.is(owner_word, id) && self.hot.generation.load(Ordering::Relaxed) == generation)
            .then_some(v)
    }

    /// Copies the state of the visible timer `(owner_word, id)` without taking its lock, and
    /// runs `read` on the copy: `Ok(Some)` only if the slot held that timer, in the same
    /// incarnation, and no holder of its lock wrote, between the first load and the last (the
    /// lock's version, `VersionedLock`); `Ok(None)` if the slot holds another timer.
    /// [`Unreadable::Held`] while a holder is changing the state: the caller waits and tries
    /// again, or gives up (a signal handler whose own thread holds it, `timers/calls/owner.rs`).
    ///
    /// `read` gets a copy: a copy taken while a holder wrote may be torn, and is dropped
    /// unused when the version moved; it never sees `read`.
    #[inline]
    pub(crate) fn read_unlocked<R>(
        &self,
        owner_word: u64,
        id: i32,
        read: impl FnOnce(S::State) -> R,
    ) -> Result<Option<R>, Unreadable>
    where
        S::State: Copy,
    {
        let version = self.written.lock.read_begin()?;
        // As in `read_current`: the generation first, then the identity.
        // Acquire: pairs with the Release generation store in `reset_for_create`.
        let generation = self.hot.generation.load(Ordering::Acquire);
        if !self.is(owner_word, id) {
            return Ok(None);
        }
        let copy = self.written.state.with(|p| {
            // SAFETY: `p` points to the initialized state of a visible slot (type-stable
            // memory: slots are never freed while the owner exists). A holder of the lock may
            // be writing it: the volatile copy is plain data read byte for byte, and it is used
            // only if the version check below shows that no holder wrote since `read_begin`
            // (the lock's doc: a writer's stores become visible only after its held word).
            unsafe { std::ptr::read_volatile(p) }
        });
        if !self.written.lock.read_valid(version) {
            return Err(Unreadable::Held);
        }
        // Acquire: as in `read_current` (a delete or re-create since the first identity check).
        fence(Ordering::Acquire);
        if !(self.is(owner_word, id) && self.hot.generation.load(Ordering::Relaxed) == generation) {
            return Ok(None);
        }
        Ok(Some(read(copy)))
    }

    /// Starts a new incarnation of a free slot, for a timer of `owner_word | PENDING`, without
    /// the lock: the owner word and generation, then the fence that orders every later store
    /// of the incarnation's fields ([`Timer::init_pending`]) after them.
    ///
    /// # Safety
    /// The slot is free (owner word 0) and the caller holds its owner shard's lock, so no
    /// other create touches it.
    pub(crate) unsafe fn reset_for_create(&self, pending_word: u64) {
        let generation = self.hot.generation.load(Ordering::Relaxed).wrapping_add(1);
        // Relaxed (every store here but the generation's): published to lookups by the bucket
        // unlock and the visible store (Release) in `create_locked`. A lock-free reader that
        // stood on the slot before it was freed is not among those: for it the slot is a
        // seqlock (`read_current`) whose sequence is the owner word and the generation, written
        // first, and whose data is every store after the fence.
        self.hot.owner.store(pending_word, Ordering::Relaxed);
        // Release: pairs with the Acquire generation load that opens `read_current`: a reader
        // that reads this generation then reads the pending owner word above (or a later one),
        // never the deleted incarnation's.
        self.hot.generation.store(generation, Ordering::Release);
        // Release: pairs with the Acquire fence in `read_current`. A reader that reads any
        // store below (the new incarnation's fixed or published fields) sees the pending owner
        // word and the new generation above at its re-check, and drops the read; without the
        // fence it may re-read the old owner word and generation and return the new
        // incarnation's value as the deleted timer's (loom:
        // `loom_getoverrun_racing_delete_and_recreate_reads_the_deleted_timer_or_nothing`).
        fence(Ordering::Release);
    }

    /// Fills the service's parts of a pending slot (after `reset_for_create`), once its create
    /// can no longer fail: a create that fails leaves `init` unused, and whatever it owns is
    /// dropped with it, not stranded in a slot the delete hook never sees.
    ///
    /// # Safety
    /// The slot is pending (`reset_for_create` ran) and the caller holds its owner shard's
    /// lock: no other create touches it, and lock holders and lock-free readers leave a slot
    /// that is not visible alone (see `lock_if` and `read_current`).
    pub(crate) unsafe fn init_pending(&self, init: S::Init) {
        self.written.state.with_mut(|p| {
            // SAFETY: the caller's contract: nobody else accesses the state of a pending slot.
            let state = unsafe { &mut *p };
            S::init(&self.hot.fixed, &self.written.published, state, init);
        });
    }

    /// Under the lock of a visible timer: marks it pending (invisible to lookups, its ID still
    /// taken) and runs the service's delete hook.
    pub(crate) fn mark_deleted(mut l: Locked<'_, S>, owner: &S::OwnerPart) -> S::Released {
        let word = l.timer.hot.owner.load(Ordering::Relaxed);
        // Relaxed: ordered before the unhash by the bucket lock's Acquire/Release.
        l.timer.hot.owner.store(word | PENDING, Ordering::Relaxed);
        // Release: pairs with the Acquire fence in `read_current`: a lock-free reader that
        // sees what the hook writes sees the pending word at its re-check and drops the read,
        // instead of reporting a state the timer never had while visible (loom:
        // `loom_reader_racing_delete_reads_a_state_the_timer_had`).
        fence(Ordering::Release);
        S::on_delete(owner, &mut l)
    }

    /// The ID of the timer in this slot (meaningful while the caller holds its lock and the
    /// slot is visible).
    pub(crate) fn id(&self) -> TimerId {
        TimerId(self.hot.id.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn timer_layout_matches_doc() {
        assert_eq!(size_of::<Timer<()>>(), 128);
        assert_eq!(align_of::<Timer<()>>(), 64);
        assert_eq!(offset_of!(Timer<()>, hot), 0);
        assert_eq!(offset_of!(ReadMostly<u64>, hash_next), 0);
        assert_eq!(offset_of!(ReadMostly<u64>, owner), 8);
        assert_eq!(offset_of!(ReadMostly<u64>, id), 16);
        assert_eq!(offset_of!(ReadMostly<u64>, home), 20);
        assert_eq!(offset_of!(ReadMostly<u64>, index), 24);
        assert_eq!(offset_of!(ReadMostly<u64>, free_next), 28);
        assert_eq!(offset_of!(ReadMostly<u64>, generation), 32);
        assert_eq!(offset_of!(ReadMostly<u64>, carried), 36);
        assert_eq!(offset_of!(ReadMostly<u64>, fixed), 40);
        assert_eq!(offset_of!(Timer<()>, written), 64);
        assert_eq!(offset_of!(Written<u32, [u64; 3], u64>, lock), 0);
        assert_eq!(offset_of!(Written<u32, [u64; 3], u64>, published), 4);
        assert_eq!(offset_of!(Written<u32, [u64; 3], u64>, links), 8);
        assert_eq!(offset_of!(Written<u32, [u64; 3], u64>, state), 32);
    }

    #[test]
    fn a_default_timer_is_a_free_slot() {
        let t = Timer::<()>::default();
        assert_eq!(t.hot.owner.load(Ordering::Relaxed), 0);
        assert!(
            t.lock_if(visible(1), None, |_| ()) == Ok(None),
            "a free slot is nobody's"
        );
    }
}
