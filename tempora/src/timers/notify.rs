//! An owner's event queue: the user-space `sigqueue` of its `Queue` timers.
//!
//! Each timer has one preallocated event, as each kernel POSIX timer has one preallocated
//! `sigqueue`: the timer's `queued` flag says whether it is on the queue, and `sigqueue_seq`
//! which arming it belongs to. A base that fires a timer whose event is already queued only
//! updates `sigqueue_seq` (the kernel's "already pending: nothing"), so the queue holds at most
//! one entry per timer incarnation, and the periods that pass meanwhile become the overrun
//! computed when the event is consumed. An entry names its timer by slot, ID and generation;
//! at consume time the timer's lock is taken and the entry is dropped, never delivered, if the
//! timer was deleted (generation or owner word changed) or re-set (`signal_seq` moved).
//!
//! # The queue and its waiters
//!
//! The queue is a `VecDeque` under a one-byte lock ([`ByteLock`]): an event costs its sender
//! one atomic read-modify-write (the lock; the unlock is a plain store), against three for a
//! lock-free segment queue plus a fence to check for waiters (BENCHMARKS.md, "Design
//! measurements", has what that saved). The queue keeps its peak capacity: 16 bytes per event that was pending at
//! once.
//!
//! Receivers that find it empty sleep on the sink's [`WaitQueue`] (futex-style: a check run
//! under the wait queue's lock decides whether to sleep). The waiter count lives under the queue lock, so the
//! usual lost-wake-up argument is a lock argument:
//!
//! ```text
//!   receiver: wait(validate)                      sender
//!     validate (under the wait queue's lock):       lock q; push; w = waiters; unlock q
//!       lock q; empty? waiters += 1; unlock q       if w > 0: wake_all
//!     sleeps only if validate said "empty"            (takes the wait queue's lock)
//! ```
//!
//! If the push takes `q` first, validate sees the entry and the receiver does not sleep. If
//! validate takes `q` first, the sender sees `waiters > 0` and calls `wake_all`, which needs
//! the wait queue's lock that the receiver holds from validate until it is queued as a
//! sleeper, so the wake-up finds it. A sender that sees no waiter skips `wake_all`: the check
//! costs nothing, as it rides on the queue lock the push takes anyway (an atomic count read
//! outside that lock would need a SeqCst fence on both sides instead). The loom test
//! `loom_receiver_never_misses_a_push` checks it; reading the count before the push, or
//! counting the waiter outside `q`, makes it deadlock.

use crate::registry::TimerId;
use crate::sync::{AtomicU8, ByteLock, Ordering, Poisoned, UnsafeCell, WaitQueue};
use std::collections::VecDeque;
use std::time::Instant;

/// An event a `Queue` timer delivered: which timer, and the periods it missed before this
/// event was consumed (what [`crate::Owner::getoverrun`] returns afterwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// The timer that fired.
    pub id: TimerId,
    /// Additional expirations before the event was consumed (`si_overrun`), capped at
    /// `i32::MAX`; 0 for a one-shot timer.
    pub overrun: i32,
}

impl Event {
    pub(crate) fn new(id: TimerId, overrun: i32) -> Event {
        Event { id, overrun }
    }
}

/// The receiving side of an owner: its queue of `E` entries and its waiting receivers.
#[derive(Debug)]
pub(crate) struct Sink<E> {
    lock: ByteLock,
    state: UnsafeCell<SinkState<E>>,
    /// Why receivers stop waiting: [`CLOSED_OWNER`], [`CLOSED_SERVICE`] (bits), 0 while open.
    closed: AtomicU8,
    sleepers: WaitQueue,
}

/// The owner was destroyed.
pub(crate) const CLOSED_OWNER: u8 = 1;
/// The service stopped (its last `Timers` handle was dropped) or failed (a poisoned lock, a
/// dead driver): nothing will queue an event again.
pub(crate) const CLOSED_SERVICE: u8 = 2;

#[derive(Debug)]
pub(super) struct SinkState<E> {
    queue: VecDeque<E>,
    waiters: usize,
}

impl<E> Default for Sink<E> {
    fn default() -> Self {
        Sink {
            lock: ByteLock::new(),
            state: UnsafeCell::new(SinkState {
                queue: VecDeque::new(),
                waiters: 0,
            }),
            closed: AtomicU8::new(0),
            sleepers: WaitQueue::default(),
        }
    }
}

// SAFETY: `state` is only accessed with `lock` held (`Sink::locked`), and the entries are
// `Send`, so sharing the sink shares only what may cross threads.
unsafe impl<E: Send> Sync for Sink<E> {}

impl<E> Sink<E> {
    /// Runs `f` on the queue with the lock held; [`Poisoned`] once a holder panicked.
    #[inline]
    pub(super) fn locked<R>(&self, f: impl FnOnce(&mut SinkState<E>) -> R) -> Result<R, Poisoned> {
        // SAFETY: `with` holds the lock for the whole closure: this is the only reference.
        self.lock
            .with(|| self.state.with_mut(|p| f(unsafe { &mut *p })))
    }

    /// Queues an event (called with the timer's lock held) and wakes waiting receivers.
    ///
    /// Allocation: the queue grows under its lock when it outgrows its peak (amortised
    /// doubling); it holds at most one entry per timer of the owner, so its size is bounded by
    /// the owner's timer count. The wake-up (a futex call) is issued after the queue lock is
    /// released but under the caller's timer lock, and only when a receiver sleeps.
    #[inline]
    pub(crate) fn push(&self, event: E) -> Result<(), Poisoned> {
        let waiters = self.locked(|s| {
            s.queue.push_back(event);
            s.waiters
        })?;
        if waiters != 0 {
            self.wake();
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn pop(&self) -> Result<Option<E>, Poisoned> {
        self.locked(|s| s.queue.pop_front())
    }

    /// Entries on the queue, stale ones included (0 once the queue is poisoned).
    pub(crate) fn len(&self) -> usize {
        self.locked(|s| s.queue.len()).unwrap_or(0)
    }

    /// Stops receivers from waiting (`why`: [`CLOSED_OWNER`] or [`CLOSED_SERVICE`]) and wakes
    /// every one of them.
    pub(crate) fn close(&self, why: u8) {
        // Release: pairs with the Acquire in `closed`.
        self.closed.fetch_or(why, Ordering::Release);
        // Under the lock, so a receiver's validate sees either the flag or this wake-up. A
        // poisoned queue has no reliable count: wake unconditionally.
        if self.locked(|s| s.waiters) != Ok(0) {
            self.wake();
        }
    }

    /// Why receivers stop waiting (bits of `CLOSED_*`), 0 while the sink is open.
    pub(crate) fn closed(&self) -> u8 {
        // Acquire: pairs with the Release in `close`.
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a panic under the queue's lock poisoned it.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.lock.is_poisoned()
    }

    #[cold]
    fn wake(&self) {
        self.sleepers.wake_all();
    }

    /// Sleeps until the queue may have an entry, the sink is closed or poisoned, or `deadline`
    /// passes. Returns `false` only on timeout. Spurious returns are allowed: callers loop.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let validate = || {
            self.locked(|s| {
                let sleep = s.queue.is_empty() && self.closed() == 0;
                s.waiters += usize::from(sleep);
                sleep
            })
            .unwrap_or(false)
        };
        let mut counted = false;
        let in_time = self.sleepers.wait(
            || {
                counted = validate();
                counted
            },
            deadline,
        );
        if !counted {
            return true;
        }
        // A queue poisoned while this receiver slept has no count to fix.
        let _ = self.locked(|s| s.waiters -= 1);
        in_time
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use loom::sync::Arc;

    /// A receiver that finds the queue empty and goes to sleep races a sender's push: it
    /// must wake with the event (loom reports a deadlock if the wake-up can be lost).
    #[test]
    fn loom_receiver_never_misses_a_push() {
        loom::model(|| {
            let sink = Arc::new(Sink::default());
            let sender = {
                let sink = sink.clone();
                loom::thread::spawn(move || {
                    sink.push(7u32).unwrap();
                })
            };
            let got = loop {
                if let Some(e) = sink.pop().unwrap() {
                    break e;
                }
                sink.wait(None);
            };
            assert_eq!(got, 7);
            sender.join().unwrap();
        });
    }
}
