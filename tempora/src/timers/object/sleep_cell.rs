//! What a base's wheel knows of a sleep ([`crate::time::Sleep`]): an ID-less timer that
//! lives only in a wheel, with a deadline and a waker.
//!
//! A sleep has no ID, no slot and no owner: it is not addressed by anyone but the future that
//! holds it, so it needs none of the registry. Its cell lives inside the pinned future, and a
//! wheel entry of the sleeps' wheel of one base (on the monotonic clock) holds its address while
//! it is armed, as an interval timer's wheel links its timer object.
//!
//! # Who touches a cell
//!
//! * The future's holder (poll, reset, drop), one at a time: it has `Pin<&mut Sleep>`.
//! * A poll that popped the cell's wheel entry and delivers it, holding the base's delivery
//!   lock (`base.rs`, "Delivery and the poll barrier").
//!
//! Both take the cell's lock (rank of a timer lock: it is held while taking a base lock to
//! place or remove the entry, and taken by a delivery with no base lock held). The state under
//! it says where the entry is: `armed` with `base` and `key` while an entry exists, in the
//! wheel or popped by a delivery still in flight. There is never more than one entry of a
//! cell: a reset moves the entry (`Wheel::reschedule`), and when the entry was popped
//! meanwhile, the reset only changes the deadline and leaves the re-placing to the delivery,
//! which re-reads the deadline under the cell lock.
//!
//! # Why the memory stays valid
//!
//! The future frees its cell only after no delivery can touch it: dropping takes the entry out
//! of its wheel under the base lock; if it is no longer there, a poll of that base popped it
//! and holds the base's delivery lock until it has delivered it, so the drop clears `armed`
//! (the delivery then finds the entry not current and lets go of it) and waits for that
//! delivery lock before returning. A delivery's last access to the cell is the release of the
//! cell lock, and nothing else holds a cell's address.
//!
//! A completed sleep needs none of that. The delivery that set `fired` consumed the cell's one
//! entry and took its waker, and no entry is made while `fired` stands: a poll of a fired
//! sleep returns before placing one, and only a reset clears it. So once the holder's poll has
//! seen `fired` under the lock (taken after that delivery released it), no delivery touches
//! the cell again until a reset: the holder records it in its own [`Phase`], and its later
//! polls and its drop take no lock. The loom models in `time/sleep.rs` race both drops, and
//! a reset, against the poll that fires the sleep.
//!
//! # Poisoning
//!
//! A panic under a cell's lock (a bug in tempora; no user code runs under it) poisons it. A
//! delivery then leaves the cell alone; the future's holder, the only other party, goes on
//! using the state without the lock (nobody else enters a poisoned lock again).

use crate::sync::{rank, Poisoned, RankedLock, UnsafeCell};
use std::task::Waker;

/// The part of a sleep that its wheel entry points at. See the module doc.
///
/// Two cells under one lock, so that the lock byte and the small fields share the word the
/// large ones leave (40 bytes, not 48: a sleep costs its future plus a wheel entry).
#[derive(Debug)]
pub(crate) struct SleepCell {
    lock: RankedLock<{ rank::TIMER }>,
    head: UnsafeCell<SleepHead>,
    /// How far the holder's polls got ([`Phase`]). The holder's alone, no lock (see
    /// [`SleepCell::phase`]).
    phase: UnsafeCell<Phase>,
    body: UnsafeCell<SleepBody>,
}

/// What the holder knows of its sleep without the lock: whether a waker or an entry can
/// exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Never polled: no waker, no entry.
    New,
    /// Polled: a waker and an entry may exist.
    Polled,
    /// A poll returned `Ready` and nothing placed it again since: no waker, no entry, and no
    /// delivery touches the cell (the one that fired it let go of the lock before that poll
    /// took it).
    Done,
}

/// Where a sleep's entry is, and whether it fired (under the cell's lock).
#[derive(Debug)]
pub(crate) struct SleepHead {
    /// The base whose monotonic wheel holds the entry while `armed`.
    pub(crate) base: u16,
    /// An entry exists (in the wheel, or popped by a delivery in flight). A drop that finds
    /// the entry in flight clears it: the delivery then lets go of the cell untouched.
    pub(crate) armed: bool,
    /// The deadline passed and a delivery saw it: the future is ready.
    pub(crate) fired: bool,
}

/// A sleep's deadline, entry and waker (under the cell's lock).
#[derive(Debug)]
pub(crate) struct SleepBody {
    /// When the sleep completes: ns on the service's monotonic clock.
    pub(crate) deadline: u64,
    /// The wheel entry's key while `armed`.
    pub(crate) key: u64,
    /// The task to wake when it fires.
    pub(crate) waker: Option<Waker>,
}

/// A locked cell's state.
pub(crate) struct SleepState<'a> {
    pub(crate) at: &'a mut SleepHead,
    pub(crate) body: &'a mut SleepBody,
}

// SAFETY: `head` and `body` are only accessed with `lock` held (`SleepCell::locked`), or by
// the future's holder alone once the lock is poisoned (`SleepCell::holder`, `read`); `Waker`
// is `Send + Sync`.
unsafe impl Sync for SleepCell {}
// SAFETY: as above.
unsafe impl Send for SleepCell {}

/// Under loom, a cell's end is a write of its state: a delivery that touches the cell beside
/// or after its end, not ordered before it, is a causality violation in the models
/// (`time/sleep.rs`), where the end does not free the memory.
#[cfg(loom)]
impl Drop for SleepCell {
    fn drop(&mut self) {
        self.head.with_mut(|_| ());
        self.body.with_mut(|_| ());
    }
}

impl SleepCell {
    /// A cell for a sleep until `deadline`, in no wheel.
    pub(crate) fn new(deadline: u64) -> SleepCell {
        SleepCell {
            lock: RankedLock::new(),
            head: UnsafeCell::new(SleepHead {
                base: 0,
                armed: false,
                fired: false,
            }),
            phase: UnsafeCell::new(Phase::New),
            body: UnsafeCell::new(SleepBody {
                deadline,
                key: 0,
                waker: None,
            }),
        }
    }

    /// The holder's [`Phase`].
    ///
    /// # Safety
    /// Only the future's holder calls it or [`SleepCell::set_phase`], one call at a time (it
    /// has `Pin<&mut Sleep>`); no delivery touches the phase.
    #[inline]
    pub(crate) unsafe fn phase(&self) -> Phase {
        // SAFETY: the caller's promise: the holder is the phase's one accessor.
        self.phase.with(|p| unsafe { *p })
    }

    /// Replaces the holder's [`Phase`].
    ///
    /// # Safety
    /// As [`SleepCell::phase`].
    #[inline]
    pub(crate) unsafe fn set_phase(&self, phase: Phase) {
        // SAFETY: as in `phase`.
        self.phase.with_mut(|p| unsafe { *p = phase })
    }

    /// Runs `f` on the state with the lock held (a delivery); [`Poisoned`] if a holder panicked.
    #[inline]
    pub(crate) fn locked<R>(
        &self,
        f: impl FnOnce(&mut SleepState<'_>) -> R,
    ) -> Result<R, Poisoned> {
        // SAFETY: `with` holds the lock for the whole closure: these are the only references.
        self.lock.with(|| unsafe { self.unlocked(f) })
    }

    /// Runs `f` on the state without the lock.
    ///
    /// # Safety
    /// No other reference to the state exists meanwhile: the lock is held, or it is poisoned
    /// and the caller is the future's holder.
    unsafe fn unlocked<R>(&self, f: impl FnOnce(&mut SleepState<'_>) -> R) -> R {
        self.head.with_mut(|h| {
            self.body.with_mut(|b| {
                // SAFETY: the caller's promise; the two cells are distinct.
                let (at, body) = unsafe { (&mut *h, &mut *b) };
                f(&mut SleepState { at, body })
            })
        })
    }

    /// Runs `f` on the state for a reader of the future (`&Sleep`): under the lock, or once
    /// the lock is poisoned without it (only shared references then exist: the holder's
    /// `&mut` access excludes readers).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&SleepHead, &SleepBody) -> R) -> R {
        let mut f = Some(f);
        match self.locked(|s| (f.take().expect("called once"))(s.at, s.body)) {
            Ok(r) => r,
            // SAFETY: a poisoned lock is entered by nobody again, so no delivery writes the
            // state; the holder writes it only with `Pin<&mut Sleep>`, which no reader has.
            Err(Poisoned) => self.head.with(|h| {
                self.body.with(|b| {
                    // SAFETY: as above: only shared references exist while poisoned readers
                    // run.
                    let (at, body) = unsafe { (&*h, &*b) };
                    (f.take().expect("not run"))(at, body)
                })
            }),
        }
    }

    /// Runs `f` on the state for the future's holder: under the lock, or without it once the
    /// lock is poisoned (module doc, "Poisoning").
    ///
    /// # Safety
    /// Only the future's holder calls it, one call at a time (it has `Pin<&mut Sleep>`).
    #[inline]
    pub(crate) unsafe fn holder<R>(&self, f: impl FnOnce(&mut SleepState<'_>) -> R) -> R {
        let mut f = Some(f);
        match self.locked(|s| (f.take().expect("called once"))(s)) {
            Ok(r) => r,
            // SAFETY: the lock is poisoned, so no delivery enters it again and none is inside
            // (a poisoned lock is never held); the caller is the only other party.
            Err(Poisoned) => unsafe { self.unlocked(f.take().expect("not run")) },
        }
    }
}
