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
//! # Waiting
//!
//! Receivers that find the queue empty wait on a condition variable. Senders skip it entirely
//! unless a receiver waits, by checking an atomic waiter count:
//!
//! ```text
//!   receiver (wait)                         sender (wake)
//!   lock m; waiters += 1   (W)              push the entry         (P)
//!   fence(SeqCst)                           fence(SeqCst)
//!   queue empty?           (R)              waiters == 0 ? skip    (L)
//!   yes: cond.wait(m)                       else: lock m; unlock; notify_all
//! ```
//!
//! The two SeqCst fences order W before R and P before L, so "R misses P and L misses W" is
//! impossible: either the receiver sees the entry and does not sleep, or the sender sees the
//! waiter and notifies; it takes `m` first, so the notify cannot fall between the receiver's
//! check and its sleep (the receiver holds `m` from W until `cond.wait` releases it).

use crate::registry::timer::Timer;
use crate::registry::TimerId;
use crossbeam_queue::SegQueue;
use parking_lot::{Condvar, Mutex};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
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

/// A queued event: the timer's slot and the incarnation it was queued for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventRef {
    pub(crate) timer: NonNull<Timer>,
    pub(crate) id: TimerId,
    pub(crate) generation: u32,
}

// SAFETY: an `EventRef` is an address plus plain data; it is dereferenced only by the owner's
// receivers, which hold the owner and so keep its slot pages alive (see `Owner::try_recv`).
unsafe impl Send for EventRef {}

/// The receiving side of an owner: its queue and its waiting receivers.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    queue: SegQueue<EventRef>,
    waiters: AtomicUsize,
    dead: AtomicBool,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Sink {
    /// Queues an event (called with the timer's lock held) and wakes a waiting receiver.
    pub(crate) fn push(&self, event: EventRef) {
        self.queue.push(event); // (P)
        self.wake();
    }

    pub(crate) fn pop(&self) -> Option<EventRef> {
        self.queue.pop()
    }

    /// Entries on the queue, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Marks the owner deleted and wakes every receiver.
    pub(crate) fn close(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.wake();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    fn wake(&self) {
        // SeqCst fence: the sender's half of the argument in the module doc.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence above. (L)
        if self.waiters.load(Ordering::Relaxed) != 0 {
            drop(self.lock.lock());
            self.cond.notify_all();
        }
    }

    /// Sleeps until the queue may have an entry, the owner is closed, or `deadline` passes.
    /// Returns `false` only on timeout. Spurious returns are allowed: callers loop.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut guard = self.lock.lock();
        // Relaxed RMW + SeqCst fence: the receiver's half of the argument. (W)
        self.waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut in_time = true;
        if self.queue.is_empty() && !self.is_closed() {
            // (R) saw nothing: sleep, releasing `m` atomically.
            match deadline {
                Some(d) => in_time = !self.cond.wait_until(&mut guard, d).timed_out(),
                None => self.cond.wait(&mut guard),
            }
        }
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        in_time
    }
}
