//! An owner's event queue: the user-space `sigqueue` of its `Queue` timers.
//!
//! Each timer has one preallocated event, as each kernel POSIX timer has one preallocated
//! `sigqueue`: the timer's `queued` flag says whether it is on the queue, and `sigqueue_seq`
//! which arming it belongs to. A base that fires a timer whose event is already queued only
//! updates `sigqueue_seq` (the kernel's "already pending: nothing"), so the queue holds at most
//! one entry per timer incarnation, and the periods that pass meanwhile become the overrun
//! computed when the event is consumed. At consume time the timer's lock is taken and the
//! entry is dropped, never delivered, if the timer was deleted or re-set (`signal_seq` moved).
//!
//! # Entries
//!
//! An entry is the timer's slot index in its owner's pages, 4 bytes ([`EventRef`]): it names
//! no incarnation, so that the room every `Queue` timer keeps on the queue (below) costs 4
//! bytes, not the 16 of an address, ID and generation. What tells a stale entry from the
//! slot's timer's own is a count: a timer deleted with its event queued (or held for the
//! queue by a poll) adds one to its slot's carried word (`registry::Timer::lock_slot`), which
//! the slot's later timers do not reset. So the entries naming a slot are, at every moment
//! under its timer's lock, the carried count's stale ones plus one if the slot's timer (a
//! `Queue` timer) has its event queued; they are alike, and a consume that meets one delivers
//! the timer's event if it is queued and otherwise drops a stale one (giving back its room).
//! A stale entry that comes first thus delivers the new timer's event, and the new timer's
//! own entry, met later, is dropped as the stale one: the same events, each once. A poll
//! that held an entry and could not push it takes back a stale one first, else clears the
//! timer's `queued` flag (`poll.rs`, `unqueue`). An owner zeroes the count as it first takes
//! a slot, so a page from another owner carries nothing over.
//!
//! [`EventRef`]: super::EventRef
//!
//! # Memory
//!
//! A firing timer's push never allocates: the queue has room reserved for every entry it can
//! hold. Every `Queue` timer's create makes room for one entry ([`Sink::reserve`], fallible:
//! the create fails with `Error::OutOfMemory` if it cannot). The room is given back
//! ([`Sink::unreserve`]; the capacity itself stays, as the queue keeps its peak) when no entry
//! can use it any more: by the timer's delete if its event is not queued, otherwise by the
//! consume that meets the entry, stale now, and drops it (`Owner::consume`; a poll that held
//! the entry and could not push it gives it back too). So the reservation counts the owner's
//! live `Queue` timers plus the entries of deleted ones still on the queue, and since the
//! queue holds at most one entry per timer incarnation, it never holds more entries than its
//! reservation: a stale entry never takes a live timer's room, and no event, a one-shot
//! timer's included, is lost for want of memory. A push past the reservation (none happens
//! while the counts above hold) would grow the queue fallibly and queue nothing if that
//! failed (`Ok(false)`).
//!
//! # The queue and its waiters
//!
//! The queue is a `VecDeque` under a one-byte lock (a [`Locked`] of rank `QUEUE`): an event
//! costs its sender one atomic read-modify-write (the lock; the unlock is a plain store),
//! against three for a lock-free segment queue plus a fence to check for waiters
//! (BENCHMARKS.md, "Design measurements", compares the two), and a run of events pushed
//! together ([`Sink::push_many`], a poll's batch: `poll.rs`) or taken together
//! ([`Sink::pop_many`], `Owner::try_recv_many`) shares one. The queue keeps its peak
//! capacity: 4 bytes per event that was pending at once.
//!
//! Receivers that find it empty sleep on the sink's [`WaitQueue`] (a futex: the receiver takes
//! the queue's token, then a check decides whether to sleep, and it sleeps only while the
//! token is current). The waiter count lives under the queue lock, so the usual lost-wake-up
//! argument is a lock argument:
//!
//! ```text
//!   receiver: wait(validate)                      sender
//!     token = the wait queue's word                 lock q; push; w = waiters; unlock q
//!     validate: lock q; empty?                      if w > 0: wake_all
//!       waiters += 1; unlock q                        (moves the word, wakes sleepers)
//!     sleeps only if validate said "empty" and the word is still the token
//! ```
//!
//! If the push takes `q` first, validate sees the entry and the receiver does not sleep. If
//! validate takes `q` first, the sender sees `waiters > 0` and calls `wake_all`, which moves
//! the word after the receiver took its token (the lock orders them), so the receiver either
//! finds the word moved and does not sleep, or is asleep when the wake-up comes. A sender that sees no waiter skips `wake_all`: the check
//! costs nothing, as it rides on the queue lock the push takes anyway (an atomic count read
//! outside that lock would need a SeqCst fence on both sides instead). The loom test
//! `loom_receiver_never_misses_a_push` checks it; reading the count before the push, or
//! counting the waiter outside `q`, makes it deadlock.
//!
//! # Async receivers
//!
//! A task that finds the queue empty registers its waker in the queue's state, under the same
//! lock and the same check as a sleeping thread's `validate` (`Sink::register`): a push either
//! comes first (the check sees the entry and the task does not wait) or finds the waker and
//! hands it to its caller to wake once no tempora lock is held. A push wakes every registered
//! task, as it wakes every sleeping thread; a task polled again re-registers. The loom test
//! `loom_task_never_misses_a_push` checks it.
//!
//! # The readiness fd
//!
//! An owner may ask for an eventfd (`Sink::ready_fd`) that is readable exactly while the queue
//! holds entries, or once the sink is closed. It is made on first request; a sink without one
//! pays a branch on a transition. The fd's state follows the queue's transitions: a push onto
//! an empty queue, and a pop that empties it, reconcile it (`Sink::sync_fd`) under the fd's own
//! lock, reading the queue's emptiness under that lock and writing or draining the eventfd only
//! if it differs from what the fd shows. Every transition's reconciliation runs after the
//! transition, serialized with the others, so the last one leaves the fd matching the queue:
//! it is never readable-less with entries queued, and it is written at most once per empty to
//! non-empty transition, never per event. Lock order (`sync::rank`): the fd lock (a
//! [`RankedMutex`] of rank `READY_FD`) is taken under a timer lock (a delivery's push) and
//! takes the queue lock (rank `QUEUE`, above it: `MutexGuard::then_with` checks that at
//! compile time).

use super::fd;
use crate::registry::TimerId;
use crate::sync::{rank, AtomicU8, Locked, Ordering, Poisoned, RankedMutex, WaitQueue};
use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::task::Waker;
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
    state: Locked<SinkState<E>, { rank::QUEUE }>,
    /// Why receivers stop waiting: [`CLOSED_OWNER`], [`CLOSED_SERVICE`] (bits), 0 while open.
    closed: AtomicU8,
    sleepers: WaitQueue,
    /// The readiness fd, made on first request (module doc).
    fd: OnceLock<ReadyFd>,
}

/// An eventfd and whether it is readable now (a write not yet drained), under its lock.
#[derive(Debug)]
struct ReadyFd {
    fd: OwnedFd,
    /// No panic happens under this lock (two system calls and a queue read): a poisoned one
    /// is intact.
    readable: RankedMutex<bool, { rank::READY_FD }>,
}

/// The owner was destroyed.
pub(crate) const CLOSED_OWNER: u8 = 1;
/// The service stopped (its last `Timers` handle and sleep were dropped) or failed (a poisoned lock, a
/// dead driver): nothing will queue an event again.
pub(crate) const CLOSED_SERVICE: u8 = 2;

#[derive(Debug)]
pub(crate) struct SinkState<E> {
    queue: VecDeque<E>,
    /// Entries the queue has room for without growing, at least: one per `Queue` timer of
    /// the owner (`Sink::reserve`, `Sink::unreserve`; module doc, "Memory").
    reserved: usize,
    waiters: usize,
    /// Tasks waiting for an entry, each with the token of its registration.
    tasks: Vec<(u64, Waker)>,
    /// The next registration token.
    next_token: u64,
}

impl<E> Default for Sink<E> {
    fn default() -> Self {
        Sink {
            state: Locked::new(SinkState {
                queue: VecDeque::new(),
                reserved: 0,
                waiters: 0,
                tasks: Vec::new(),
                next_token: 1,
            }),
            closed: AtomicU8::new(0),
            sleepers: WaitQueue::default(),
            fd: OnceLock::new(),
        }
    }
}

impl<E> Sink<E> {
    /// Runs `f` on the queue with the lock held; [`Poisoned`] once a holder panicked.
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut SinkState<E>) -> R) -> Result<R, Poisoned> {
        self.state.with(f)
    }

    /// Makes room, ahead of time, for one more timer's entry (a `Queue` timer's create):
    /// afterwards the queue holds one entry per reserved timer without growing. `Ok(false)`
    /// if the room cannot be allocated (nothing changed); [`Poisoned`] if the queue is.
    pub(crate) fn reserve(&self) -> Result<bool, Poisoned> {
        self.locked(|s| {
            let want = s.reserved + 1;
            let room = s.queue.try_reserve(want.saturating_sub(s.queue.len()));
            if room.is_ok() {
                s.reserved = want;
            }
            room.is_ok()
        })
    }

    /// Gives back one timer's room (its delete with no entry queued, the consume of its
    /// entry after its delete, or a create that failed after `reserve`).
    /// The capacity stays: the queue keeps its peak.
    pub(crate) fn unreserve(&self) {
        let _ = self.locked(|s| s.reserved = s.reserved.saturating_sub(1));
    }

    /// Queues an event (called with the timer's lock held), wakes waiting threads, and hands
    /// the wakers of waiting tasks to `wake` (to be woken once the caller holds no lock).
    /// `Ok(false)`: no room for it, and none could be allocated; nothing changed (module
    /// doc, "Memory": with the reservation kept exact, this does not happen).
    ///
    /// Allocation: none while the queue holds no more entries than its reserved room (one
    /// per `Queue` timer, made at create); past that, the queue grows fallibly under its
    /// lock. The threads' wake-up (a futex call) is issued after the queue lock is released
    /// but under the caller's timer lock, and only when a thread sleeps; so is the readiness
    /// fd's write, and only on a transition from empty.
    #[inline]
    pub(crate) fn push(&self, event: E, wake: impl FnMut(Waker)) -> Result<bool, Poisoned> {
        self.push_many(std::iter::once(event), wake)
            .map(|pushed| pushed == 1)
    }

    /// Queues `events` in order under one lock of the queue, as many [`Sink::push`]es would,
    /// with one wake-up of the waiting threads and tasks and at most one write of the
    /// readiness fd for all of them; how many were queued: the first `k`. Fewer than all means
    /// no room for the next one and none could be allocated (as `push`'s `Ok(false)`): it and
    /// the ones after it are not queued.
    #[inline]
    pub(crate) fn push_many(
        &self,
        events: impl Iterator<Item = E>,
        wake: impl FnMut(Waker),
    ) -> Result<usize, Poisoned> {
        let (pushed, waiters, was_empty) = self.locked(|s| {
            let was_empty = s.queue.is_empty();
            let mut pushed = 0;
            for event in events {
                if s.queue.len() == s.queue.capacity() && s.queue.try_reserve(1).is_err() {
                    break;
                }
                s.queue.push_back(event);
                pushed += 1;
            }
            if pushed != 0 && !s.tasks.is_empty() {
                s.tasks.drain(..).map(|(_, w)| w).for_each(wake);
            }
            (pushed, s.waiters, was_empty)
        })?;
        if pushed == 0 {
            return Ok(0);
        }
        if waiters != 0 {
            self.wake();
        }
        if was_empty && self.fd.get().is_some() {
            self.sync_fd();
        }
        Ok(pushed)
    }

    #[inline]
    pub(crate) fn pop(&self) -> Result<Option<E>, Poisoned> {
        let mut one = [None];
        self.pop_many(&mut one)?;
        let [e] = one;
        Ok(e)
    }

    /// Takes up to `out.len()` entries, oldest first, under one lock of the queue, into the
    /// front of `out` (`Some` each); how many. The readiness fd is reconciled once if they
    /// emptied the queue, as after the last of as many [`Sink::pop`]s.
    #[inline]
    pub(crate) fn pop_many(&self, out: &mut [Option<E>]) -> Result<usize, Poisoned> {
        let (taken, emptied) = self.locked(|s| {
            let mut taken = 0;
            for slot in out.iter_mut() {
                let Some(e) = s.queue.pop_front() else {
                    break;
                };
                *slot = Some(e);
                taken += 1;
            }
            (taken, s.queue.is_empty())
        })?;
        if emptied && taken != 0 && self.fd.get().is_some() {
            self.sync_fd();
        }
        Ok(taken)
    }

    /// Registers a task's waker to be woken by the next push or close (linear in the tasks
    /// waiting on this owner: meant for a few per owner, as a push wakes them all), if the queue is empty
    /// and open now (`Ok(false)` otherwise: the caller looks again instead of waiting).
    /// `token` names the task's registration (0: none yet); a registration with the same
    /// token is replaced. A waker to clone is asked for only when the registered one would not
    /// wake the same task (`waker` runs no user code under the lock: it is cloned, and the
    /// one it replaces dropped, by the caller).
    pub(crate) fn register(
        &self,
        token: &mut u64,
        waker: &Waker,
        fresh: &mut Option<Waker>,
        replaced: &mut Option<Waker>,
    ) -> Result<Registered, Poisoned> {
        self.locked(|s| {
            if !s.queue.is_empty() || self.closed() != 0 {
                return Registered::NotEmpty;
            }
            if let Some(slot) = s.tasks.iter_mut().find(|(t, _)| *t == *token) {
                if slot.1.will_wake(waker) {
                    return Registered::Waiting;
                }
                let Some(w) = fresh.take() else {
                    return Registered::NeedWaker;
                };
                *replaced = Some(std::mem::replace(&mut slot.1, w));
                return Registered::Waiting;
            }
            let Some(w) = fresh.take() else {
                return Registered::NeedWaker;
            };
            *token = s.next_token;
            s.next_token += 1;
            s.tasks.push((*token, w));
            Registered::Waiting
        })
    }

    /// Removes a task's registration (a receive future dropped while waiting) and returns its
    /// waker, for the caller to drop with no lock held.
    pub(crate) fn deregister(&self, token: u64) -> Option<Waker> {
        self.locked(|s| {
            let i = s.tasks.iter().position(|(t, _)| *t == token)?;
            Some(s.tasks.swap_remove(i).1)
        })
        .ok()
        .flatten()
    }

    /// The readiness fd (module doc), made on the first call.
    ///
    /// # Errors
    /// The `eventfd(2)` error if it cannot be made (the fd limit).
    pub(crate) fn ready_fd(&self) -> io::Result<&OwnedFd> {
        if self.fd.get().is_none() {
            let made = ReadyFd {
                fd: fd::eventfd()?,
                readable: RankedMutex::new(false),
            };
            // A racing first call's fd wins; ours is closed.
            let _ = self.fd.set(made);
            // The queue may hold entries already.
            self.sync_fd();
        }
        Ok(&self.fd.get().expect("set above").fd)
    }

    /// Makes the readiness fd, if there is one, readable iff the queue holds entries or the
    /// sink is closed (module doc, "The readiness fd").
    #[cold]
    fn sync_fd(&self) {
        let Some(ready) = self.fd.get() else {
            return;
        };
        let mut readable = ready.readable.lock_or_recover();
        // A poisoned queue reads as "ready": its receivers must come and learn of it.
        let want = self.closed() != 0
            || readable
                .then_with(&self.state, |s| !s.queue.is_empty())
                .unwrap_or(true);
        if want != *readable {
            if want {
                fd::signal(&ready.fd);
            } else {
                fd::drain(&ready.fd);
            }
            *readable = want;
        }
    }

    /// Entries the queue has room reserved for (0 once the queue is poisoned).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn reserved(&self) -> usize {
        self.locked(|s| s.reserved).unwrap_or(0)
    }

    /// Entries the queue holds without growing (0 once the queue is poisoned).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn capacity(&self) -> usize {
        self.locked(|s| s.queue.capacity()).unwrap_or(0)
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
        let mut tasks = Vec::new();
        let waiters = self.locked(|s| {
            tasks = std::mem::take(&mut s.tasks);
            s.waiters
        });
        if waiters != Ok(0) {
            self.wake();
        }
        tasks.into_iter().for_each(|(_, w)| w.wake());
        self.sync_fd();
    }

    /// Why receivers stop waiting (bits of `CLOSED_*`), 0 while the sink is open.
    pub(crate) fn closed(&self) -> u8 {
        // Acquire: pairs with the Release in `close`.
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a panic under the queue's lock poisoned it.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.state.is_poisoned()
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

/// What [`Sink::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registered {
    /// The task's waker is registered: it will be woken by the next push or close.
    Waiting,
    /// The queue has an entry or is closed: look again instead of waiting.
    NotEmpty,
    /// Call again with a clone of the waker in `fresh`.
    NeedWaker,
}

#[cfg(all(test, not(loom)))]
mod memory_tests {
    use super::*;
    use crate::alloc::refusing_allocations;

    /// Reserved room is pushed into without allocating; past it, a push that cannot grow the
    /// queue queues nothing and says so; a reserve that cannot allocate reserves nothing.
    #[test]
    fn pushes_into_reserved_room_allocate_nothing() {
        let sink = Sink::<u32>::default();
        for _ in 0..3 {
            assert_eq!(sink.reserve(), Ok(true));
        }
        let (pushed, spare, more) = refusing_allocations(0, || {
            let pushed = [0, 1, 2].map(|n| sink.push(n, |_| {}));
            // Room the queue's growth rounded up to is reserved without allocating; one past
            // its capacity is refused.
            let mut spare = true;
            while sink.locked(|s| s.reserved < s.queue.capacity()) == Ok(true) {
                spare &= sink.reserve() == Ok(true);
            }
            (pushed, spare, sink.reserve())
        });
        assert_eq!(pushed, [Ok(true); 3]);
        assert!(spare);
        assert_eq!(more, Ok(false), "room made from nothing");
        let reserved = sink.locked(|s| s.reserved).unwrap();
        while sink.locked(|s| s.reserved).unwrap() > 3 {
            sink.unreserve();
        }
        assert!(reserved >= 3);
        assert_eq!(sink.len(), 3);
        // Past the room (entries of deleted timers): refused, nothing queued.
        let (filled, refused) = refusing_allocations(0, || {
            let mut filled = true;
            while sink.locked(|s| s.queue.len() < s.queue.capacity()) == Ok(true) {
                filled &= sink.push(9, |_| {}) == Ok(true);
            }
            (filled, sink.push(10, |_| {}))
        });
        assert!(filled);
        assert_eq!(refused, Ok(false));
        let len = sink.len();
        assert_eq!(sink.push(10, |_| {}), Ok(true));
        assert_eq!(sink.len(), len + 1);
        // A reservation given back leaves the capacity: the next reserve needs nothing.
        sink.unreserve();
        assert_eq!(refusing_allocations(0, || sink.reserve()), Ok(true));
        let order: Vec<u32> = std::iter::from_fn(|| sink.pop().unwrap()).take(4).collect();
        assert_eq!(order, [0, 1, 2, 9]);
    }
}

#[cfg(all(test, not(loom), debug_assertions))]
mod order_tests {
    use super::*;
    use crate::sync::RankedLock;

    /// The queue lock is ranked (`sync::rank::QUEUE`): a timer lock taken under it panics in
    /// debug builds, and the unwinding leaves the queue poisoned, not held.
    #[test]
    fn a_timer_lock_under_a_queue_lock_panics() {
        let sink = Sink::<u32>::default();
        let timer = RankedLock::<{ rank::TIMER }>::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = sink.locked(|_| timer.with(|| ()));
        }));
        let msg = crate::sync::panic_message(r);
        assert!(msg.starts_with("lock order: a rank-2 lock"), "{msg}");
        assert!(sink.is_poisoned());
        assert_eq!(timer.with(|| 1), Ok(1));
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
