//! The timer object: two cache lines, read-mostly first (as Linux's `k_itimer` since
//! commit 5fa75a432f1a).
//!
//! ```text
//!  offset  line 1: read-mostly (what a concurrent hash walker touches)
//!       0  hash_next     AtomicUsize  next timer in the bucket chain, or a nulls marker
//!       8  owner         AtomicU64    owner key << 1 | PENDING; 0 = free slot
//!      16  id            AtomicI32    the timer ID (timer_t)
//!      20  clock         AtomicU8     ClockId as its clockid_t value
//!      21  notify        AtomicU8     NotifyKind
//!      22  home          AtomicU16    the owner shard whose free list takes the slot back
//!      24  index         AtomicU32    this slot's index in its owner's slot pages
//!      28  free_next     AtomicU32    next free slot while on a shard's free list
//!      32  generation    AtomicU32    bumped by every create in this slot
//!      40  ext           [AtomicUsize; 2]  two words the service layer sets at create (its
//!                                     owner's notification sink, the timer's callback)
//!      56  (reserved up to 64)
//!          line 2: written while the timer is in use
//!      64  lock          ByteLock     the timer's own lock: covers every write below
//!      65  status        AtomicU8     Status (written under the lock, read lock-free)
//!      68  overrun_last  AtomicI32    what getoverrun returns (written under the lock)
//!      72  state         TimerState   base, expiry_clock, wheel, signal_seq, expiry,
//!                                     interval, overrun, wheel_key, sigqueue_seq, queued,
//!                                     wheel_tick (56 bytes, under the lock)
//!     128  (end; the object is 64-byte aligned)
//! ```
//!
//! Walkers of a bucket chain read `hash_next`, `owner` and `id` of every timer they pass;
//! locking a timer, arming it and counting overruns write only line 2, so they do not
//! invalidate line 1 in the caches of CPUs walking the same chain. `owner` is written at
//! create and delete only; `clock`, `notify` and `generation` at create only.
//!
//! `status` and `overrun_last` are atomics so that getoverrun and listings read them without
//! the lock: a reader checks (generation, owner, id) before and after the read, and the value
//! is the timer's at an instant when it was live (`Timer::read_current`). The unit test
//! `timer_layout_matches_doc` asserts every offset above.
//!
//! # Type-stable memory
//!
//! Timer objects live in their owner's slot pages (see `owner.rs`) and are never freed while the
//! owner exists: a deleted timer's slot goes back to a free list and is reused by the same owner,
//! possibly at once (the kernel's `SLAB_TYPESAFE_BY_RCU` idea). A lock-free walker may therefore
//! hold a reference to a timer that is deleted and re-created under its feet; every field it
//! reads without the lock is atomic, and it trusts a match only after re-checking `owner` and
//! `id` under the timer's lock (see the registry's module doc). The all-zero bit pattern is a
//! valid free timer, which lets pages come from zeroed memory.

use super::NotifyKind;
use crate::clock::ClockId;
use crate::sync::{
    fence, AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, ByteLock, Ordering,
    Poisoned, UnsafeCell,
};

/// `owner` bit 0: the slot is hashed (its ID is taken) but not visible to lookups, because it
/// is being created or being deleted (the kernel's `it_signal | 1`).
pub(crate) const PENDING: u64 = 1;

/// The owner word of a visible timer of the owner with this key.
#[inline]
pub(crate) fn visible(owner_key: u64) -> u64 {
    owner_key << 1
}

/// The timer's status, as the kernel's `it_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Status {
    /// Not armed (zero `it_value`), or a one-shot that has fired.
    #[default]
    Disarmed = 0,
    /// Armed: queued in a base's wheel.
    Armed = 1,
    /// A periodic timer whose event is pending; re-armed when the event is consumed.
    RequeuePending = 2,
}

/// Line 2's plain fields, read and written only under the timer's lock.
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
pub(crate) struct TimerState {
    /// The base whose wheel holds the timer while `wheel != 0`.
    pub(crate) base: u16,
    /// The clock the armed expiry is measured on (`ClockId` as u8): the timer's own clock,
    /// except that a relative `CLOCK_REALTIME` arming runs on the monotonic clock.
    pub(crate) expiry_clock: u8,
    /// 0 while the timer is in no wheel; otherwise 1 + the index of the base's wheel (one
    /// per clock) that holds it under `wheel_key`.
    pub(crate) wheel: u8,
    /// Bumped by settime, delete and re-arm; an event carrying an older value is stale.
    pub(crate) signal_seq: u32,
    /// Absolute expiry, ns on the timer's clock.
    pub(crate) expiry: u64,
    /// Period in ns; 0 for a one-shot timer.
    pub(crate) interval: u64,
    /// Periods missed since the pending event was queued.
    pub(crate) overrun: i64,
    /// The wheel key while `wheel != 0`.
    pub(crate) wheel_key: u64,
    /// The `signal_seq` the queued event carries (the kernel's `it_sigqueue_seq`).
    pub(crate) sigqueue_seq: u32,
    /// Whether the timer's one preallocated event is on its owner's queue.
    pub(crate) queued: bool,
    /// The tick the wheel entry `wheel_key` waits for while `wheel != 0` (at or before the
    /// tick of `expiry`: a later re-arm may leave the entry where it is).
    pub(crate) wheel_tick: u64,
}

/// Line 1: read by lock-free chain walkers.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct ReadMostly {
    pub(crate) hash_next: AtomicUsize,
    pub(crate) owner: AtomicU64,
    pub(crate) id: AtomicI32,
    pub(crate) clock: AtomicU8,
    pub(crate) notify: AtomicU8,
    pub(crate) home: AtomicU16,
    pub(crate) index: AtomicU32,
    pub(crate) free_next: AtomicU32,
    pub(crate) generation: AtomicU32,
    /// Opaque words for the service layer, written by `reset_for_create` (and `ext[1]` by the
    /// service under the timer's lock at delete).
    pub(crate) ext: [AtomicUsize; 2],
}

/// Line 2: written while the timer is in use.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Written {
    pub(crate) lock: ByteLock,
    pub(crate) status: AtomicU8,
    pub(crate) overrun_last: AtomicI32,
    pub(crate) state: UnsafeCell<TimerState>,
}

/// One timer object (see the module doc for the layout).
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Timer {
    pub(crate) hot: ReadMostly,
    pub(crate) written: Written,
}

// SAFETY: every field is an atomic except `written.state`, which is only accessed with
// `written.lock` held (`Timer::lock_if`) or on a free slot by its creator
// (`Timer::reset_for_create`), so sharing a `Timer` between threads is sound.
unsafe impl Sync for Timer {}
// SAFETY: as above; a `Timer` holds no thread-bound data.
unsafe impl Send for Timer {}

/// The timer's fields as a locked caller sees them.
pub(crate) struct Locked<'a> {
    pub(crate) timer: &'a Timer,
    pub(crate) state: &'a mut TimerState,
}

impl Locked<'_> {
    pub(crate) fn set_status(&mut self, status: Status) {
        // Relaxed: lock-free readers validate with the generation check in `read_current`.
        self.timer
            .written
            .status
            .store(status as u8, Ordering::Relaxed);
    }
    pub(crate) fn set_overrun_last(&mut self, v: i32) {
        // Relaxed: as in `set_status`.
        self.timer.written.overrun_last.store(v, Ordering::Relaxed);
    }
}

impl Status {
    /// The status with this `repr(u8)` value, if any.
    pub(crate) fn from_raw(v: u8) -> Option<Status> {
        match v {
            0 => Some(Status::Disarmed),
            1 => Some(Status::Armed),
            2 => Some(Status::RequeuePending),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> Status {
        Status::from_raw(v).unwrap_or_default()
    }
}

impl Timer {
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
        f: impl FnOnce(Locked<'_>) -> R,
    ) -> Result<Option<R>, Poisoned> {
        crate::sync::lock_order::timer_enter();
        self.written.lock.with(|| {
            let current = match id {
                Some(id) => self.is(owner_word, id),
                // Acquire: as in `is`.
                None => self.hot.owner.load(Ordering::Acquire) == owner_word,
            };
            current.then(|| {
                self.written.state.with_mut(|p| {
                    f(Locked {
                        timer: self,
                        // SAFETY: the lock is held and the slot holds a visible timer: its
                        // state is only accessed by holders of this lock (the create that
                        // resets it without the lock runs only while the slot is free or
                        // pending, and a visible slot is neither until a delete, which needs
                        // this lock, marks it pending).
                        state: unsafe { &mut *p },
                    })
                })
            })
        })
    }

    /// Takes the timer's lock and, if the slot holds a visible timer of any owner, runs `f` on
    /// its fields (the path of a base delivering an expiry: the wheel entry names the slot,
    /// and the caller then checks that the timer still waits on that entry). Poisoning as in
    /// [`Timer::lock_if`].
    #[inline]
    pub(crate) fn lock_visible<R>(
        &self,
        f: impl FnOnce(Locked<'_>) -> R,
    ) -> Result<Option<R>, Poisoned> {
        crate::sync::lock_order::timer_enter();
        self.written.lock.with(|| {
            // Acquire: as in `is`.
            let word = self.hot.owner.load(Ordering::Acquire);
            (word != 0 && word & PENDING == 0).then(|| {
                self.written.state.with_mut(|p| {
                    f(Locked {
                        timer: self,
                        // SAFETY: as in `lock_if`: the lock is held and the slot is visible.
                        state: unsafe { &mut *p },
                    })
                })
            })
        })
    }

    /// Whether a panic under this timer's lock poisoned it.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.written.lock.is_poisoned()
    }

    /// Reads a field of the visible timer `(owner_word, id)` without the lock: `Some` only if
    /// the slot held that timer, in the same incarnation, before and after the read.
    ///
    /// A seqlock read whose sequence is (generation, owner word): the generation is read
    /// first, so that it belongs to the incarnation whose owner word is checked after it.
    /// Read after the owner word, it could be a re-create's (same owner, and the same ID in
    /// exact-ID mode) while the owner word read was the deleted incarnation's; both re-checks
    /// would then pass with data read half from each incarnation (loom:
    /// `loom_listing_racing_recreate_with_the_same_id_reads_one_incarnation`).
    #[inline]
    pub(crate) fn read_current<R>(
        &self,
        owner_word: u64,
        id: i32,
        read: impl FnOnce(&Timer) -> R,
    ) -> Option<R> {
        // Acquire: pairs with the Release generation store in `reset_for_create`: if this is a
        // re-create's generation, the owner word checked next is that re-create's (pending, or
        // visible), not the word of the incarnation before it.
        let generation = self.hot.generation.load(Ordering::Acquire);
        // Acquire (in `is`): the fields of the visible incarnation are visible.
        if !self.is(owner_word, id) {
            return None;
        }
        let v = read(self);
        // Acquire: pairs with the Release fences of the writers that end an incarnation, each
        // after the owner word (and generation) it stores and before its data: in
        // `reset_for_create` and in the registry's `mark_deleted`. If `read` saw such data,
        // the re-check below sees that owner word or generation and fails. It also keeps the
        // re-check from being performed before the read.
        fence(Ordering::Acquire);
        (self.is(owner_word, id) && self.hot.generation.load(Ordering::Relaxed) == generation)
            .then_some(v)
    }

    /// Re-initialises a free slot for a new timer of `owner_word | PENDING`, without the lock.
    ///
    /// # Safety
    /// The slot is free (owner word 0) and the caller holds its owner shard's lock, so no
    /// other create touches it; lock holders leave the state alone because the slot is not
    /// visible (see `lock_if`).
    pub(crate) unsafe fn reset_for_create(
        &self,
        pending_word: u64,
        clock: ClockId,
        notify: NotifyKind,
        home: u16,
        ext: [usize; 2],
    ) {
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
        // store below (the new incarnation's clock, notify, status, overrun count) sees the
        // pending owner word and the new generation above at its re-check, and drops the read;
        // without the fence it may re-read the old owner word and generation and return the
        // new incarnation's value as the deleted timer's (loom:
        // `loom_getoverrun_racing_delete_and_recreate_reads_the_deleted_timer_or_nothing`).
        fence(Ordering::Release);
        self.hot.clock.store(clock as u8, Ordering::Relaxed);
        self.hot.notify.store(notify as u8, Ordering::Relaxed);
        self.hot.home.store(home, Ordering::Relaxed);
        self.hot.ext[0].store(ext[0], Ordering::Relaxed);
        self.hot.ext[1].store(ext[1], Ordering::Relaxed);
        self.written
            .status
            .store(Status::Disarmed as u8, Ordering::Relaxed);
        self.written.overrun_last.store(0, Ordering::Relaxed);
        // SAFETY: the caller's contract: nobody else accesses the state of a free slot.
        self.written
            .state
            .with_mut(|p| unsafe { *p = TimerState::default() });
    }

    /// The ID of the timer in this slot (meaningful while the caller holds its lock and the
    /// slot is visible).
    pub(crate) fn id(&self) -> super::TimerId {
        super::TimerId(self.hot.id.load(Ordering::Relaxed))
    }

    /// The clock recorded at create.
    pub(crate) fn clock(&self) -> ClockId {
        ClockId::from_stored(self.hot.clock.load(Ordering::Relaxed))
    }

    /// The notification kind recorded at create.
    pub(crate) fn notify(&self) -> NotifyKind {
        NotifyKind::from_u8(self.hot.notify.load(Ordering::Relaxed))
    }

    /// The status (validate with `read_current` when read without the lock).
    pub(crate) fn status(&self) -> Status {
        Status::from_u8(self.written.status.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn timer_layout_matches_doc() {
        assert_eq!(size_of::<Timer>(), 128);
        assert_eq!(align_of::<Timer>(), 64);
        assert_eq!(offset_of!(Timer, hot), 0);
        assert_eq!(offset_of!(ReadMostly, hash_next), 0);
        assert_eq!(offset_of!(ReadMostly, owner), 8);
        assert_eq!(offset_of!(ReadMostly, id), 16);
        assert_eq!(offset_of!(ReadMostly, clock), 20);
        assert_eq!(offset_of!(ReadMostly, notify), 21);
        assert_eq!(offset_of!(ReadMostly, home), 22);
        assert_eq!(offset_of!(ReadMostly, index), 24);
        assert_eq!(offset_of!(ReadMostly, free_next), 28);
        assert_eq!(offset_of!(ReadMostly, generation), 32);
        assert_eq!(offset_of!(ReadMostly, ext), 40);
        assert_eq!(offset_of!(Timer, written), 64);
        assert_eq!(64 + offset_of!(Written, lock), 64);
        assert_eq!(64 + offset_of!(Written, status), 65);
        assert_eq!(64 + offset_of!(Written, overrun_last), 68);
        assert_eq!(64 + offset_of!(Written, state), 72);
        assert_eq!(size_of::<TimerState>(), 56);
        assert_eq!(offset_of!(TimerState, expiry), 8);
        assert_eq!(offset_of!(TimerState, wheel_key), 32);
        assert_eq!(offset_of!(TimerState, sigqueue_seq), 40);
        assert_eq!(offset_of!(TimerState, queued), 44);
        assert_eq!(offset_of!(TimerState, wheel_tick), 48);
        assert!(64 + 8 + size_of::<TimerState>() <= 128);
    }

    #[test]
    fn zeroed_timer_is_a_free_slot() {
        let t = Timer::default();
        assert_eq!(t.hot.owner.load(Ordering::Relaxed), 0);
        assert_eq!(
            t.written.status.load(Ordering::Relaxed),
            Status::Disarmed as u8
        );
        assert!(
            t.lock_if(visible(1), None, |_| ()) == Ok(None),
            "a free slot is nobody's"
        );
    }
}
