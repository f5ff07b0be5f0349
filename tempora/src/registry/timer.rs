//! The timer object: two cache lines, read-mostly first (seed 001, Linux 5fa75a432f1a).
//!
//! ```text
//!  offset  line 1: read-mostly (what a concurrent hash walker touches)
//!       0  hash_next  AtomicUsize   next timer in the bucket chain, or a nulls marker
//!       8  owner      AtomicU64     owner key << 1 | PENDING; 0 = free slot
//!      16  id         AtomicI32     the timer ID (timer_t)
//!      20  clock      AtomicU8      ClockId as its clockid_t value
//!      21  notify     AtomicU8      NotifyKind
//!      22  home       AtomicU16     the owner shard whose free list takes the slot back
//!      24  index      AtomicU32     this slot's index in its owner's slot pages
//!      28  free_next  AtomicU32     next free slot while on a shard's free list
//!      32  (reserved up to 64)
//!          line 2: written while the timer is in use
//!      64  lock       ByteLock      the timer's own lock: covers everything below
//!      72  state      TimerState    status, base, signal_seq, expiry, interval,
//!                                   overrun, overrun_last, wheel_key (48 bytes)
//!     128  (end; the object is 64-byte aligned)
//! ```
//!
//! Walkers of a bucket chain read `hash_next`, `owner` and `id` of every timer they pass;
//! locking a timer, arming it and counting overruns write only line 2, so they do not
//! invalidate line 1 in the caches of CPUs walking the same chain. `owner` is written at
//! create and delete only; `clock` and `notify` at create only. The unit test
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
    AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, ByteLock, UnsafeCell,
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

/// Line 2's fields, all covered by the timer's lock.
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
pub(crate) struct TimerState {
    pub(crate) status: Status,
    pub(crate) _reserved: u8,
    /// The base whose wheel holds the timer while armed.
    pub(crate) base: u16,
    /// Bumped by settime, delete and re-arm; an event carrying an older value is stale.
    pub(crate) signal_seq: u32,
    /// Absolute expiry, ns on the timer's clock.
    pub(crate) expiry: u64,
    /// Period in ns; 0 for a one-shot timer.
    pub(crate) interval: u64,
    /// Periods missed since the pending event was queued.
    pub(crate) overrun: i64,
    /// The overrun latched when the last event was consumed: what getoverrun returns.
    pub(crate) overrun_last: i32,
    pub(crate) _reserved2: u32,
    /// The wheel key while armed.
    pub(crate) wheel_key: u64,
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
}

/// Line 2: written while the timer is in use.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Written {
    pub(crate) lock: ByteLock,
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
// `written.lock` held (`Timer::locked`), so sharing a `Timer` between threads is sound.
unsafe impl Sync for Timer {}
// SAFETY: as above; a `Timer` holds no thread-bound data.
unsafe impl Send for Timer {}

impl Timer {
    /// Runs `f` with the timer's lock held and its state borrowed mutably.
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut TimerState) -> R) -> R {
        self.written.lock.lock();
        // SAFETY: `written.state` is only ever accessed here, with `written.lock` held, so this
        // is the only reference to it until the unlock below.
        let r = self.written.state.with_mut(|p| f(unsafe { &mut *p }));
        self.written.lock.unlock();
        r
    }

    /// The clock recorded at create.
    pub(crate) fn clock(&self) -> ClockId {
        ClockId::from_raw(i32::from(
            self.hot.clock.load(crate::sync::Ordering::Relaxed),
        ))
        .unwrap_or(ClockId::Monotonic)
    }

    /// The notification kind recorded at create.
    pub(crate) fn notify(&self) -> NotifyKind {
        NotifyKind::from_u8(self.hot.notify.load(crate::sync::Ordering::Relaxed))
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
        assert_eq!(offset_of!(Timer, written), 64);
        assert_eq!(64 + offset_of!(Written, lock), 64);
        assert_eq!(64 + offset_of!(Written, state), 72);
        assert_eq!(size_of::<TimerState>(), 48);
        assert_eq!(offset_of!(TimerState, expiry), 8);
        assert_eq!(offset_of!(TimerState, wheel_key), 40);
    }

    #[test]
    fn zeroed_timer_is_a_free_slot() {
        let t = Timer::default();
        assert_eq!(t.hot.owner.load(crate::sync::Ordering::Relaxed), 0);
        assert_eq!(t.locked(|s| s.status), Status::Disarmed);
    }
}
