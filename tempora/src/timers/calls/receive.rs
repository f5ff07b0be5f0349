//! Receiving an owner's events: the reading side of its event queue (`object/notify.rs`).
//!
//! `Queue` timers' events wait on their owner's queue until a receive takes them: at once
//! ([`Owner::try_recv`], [`Owner::try_recv_many`]), blocking ([`Owner::recv`],
//! [`Owner::recv_timeout`]: a waiting receiver may fire what is due itself, `firing/driver.rs`,
//! `wait_leading`), in a task ([`Owner::recv_async`], [`Owner::events`]), or from an epoll
//! loop ([`Owner::event_fd`]). Taking an event consumes it: a periodic timer is re-armed and
//! its overrun latched (`consume`). The owner's other calls are `owner.rs`.

use super::owner::Owner;
use crate::clock::LazyNow;
use crate::error::Error;
use crate::registry;
use crate::stats::Counter;
use crate::sync::{Ordering, Poisoned};
use crate::timers::object::itimer::{self, Consumed};
use crate::timers::object::notify::{self, Event, Registered};
use crate::timers::object::types::NotifyKind;
use crate::timers::object::Itimer;
use crate::timers::shared::health::QUEUE_POISONED;
use std::future::Future;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

impl Owner {
    /// The next event on the owner's queue, if one is pending. Consuming an event of a
    /// periodic timer re-arms it (on the calling thread's base) and latches its overrun.
    /// Events made stale by settime or delete are dropped here, never returned.
    pub fn try_recv(&self) -> Option<Event> {
        let core = self.core();
        if core.health.forked() {
            return None;
        }
        let now = core.lazy_now();
        let tally = &self.sink().tally;
        // Pinned once an entry is taken: an empty queue costs no pin.
        let mut guard = None;
        while let Ok(Some(entry)) = self.sink().pop() {
            let guard = guard.get_or_insert_with(crate::sync::pin);
            if let Some(event) = self.consume(self.reg.slot(entry.slot, guard), &now) {
                core.health.flush_halt();
                tally.delivered(event.overrun);
                return Some(event);
            }
            tally.add(Counter::StaleDropped, 1);
        }
        core.health.flush_halt();
        None
    }

    /// Takes up to `max` pending events at once, appending them to `events` in the order
    /// [`Owner::try_recv`] would return them; how many (0 if none is pending). Each is consumed
    /// as `try_recv` consumes it; the queue's lock is taken once per run of entries rather than
    /// once per event, and the statistics are counted once per call: an event loop that
    /// drains its events when woken pays less per event than with `try_recv` in a loop.
    /// Stale entries are dropped as they are met, and do not count towards `max`. The clocks
    /// are read once per call (a periodic timer's overrun is counted against that reading),
    /// and the statistics count the call's events when it returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tempora::clock::{ClockId, ManualClock};
    /// use tempora::{Notify, SetFlags, Timers};
    ///
    /// let clock = ManualClock::new();
    /// let timers = Timers::builder().clock(clock.clone()).build().unwrap();
    /// let owner = timers.owner();
    /// for ms in 1..=3 {
    ///     let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    ///     let at = Duration::from_millis(ms);
    ///     owner.settime(id, SetFlags::RELATIVE, at, Duration::ZERO).unwrap();
    /// }
    /// clock.advance(Duration::from_millis(5));
    /// timers.poll();
    /// let mut events = Vec::new();
    /// assert_eq!(owner.try_recv_many(&mut events, 2), 2);
    /// assert_eq!(owner.try_recv_many(&mut events, 2), 1);
    /// assert_eq!(owner.try_recv_many(&mut events, 2), 0);
    /// assert_eq!(events.len(), 3);
    /// ```
    #[doc(alias = "recv_many")]
    pub fn try_recv_many(&self, events: &mut Vec<Event>, max: usize) -> usize {
        /// Entries taken from the queue per lock of it.
        const RUN: usize = 32;
        let core = self.core();
        if core.health.forked() {
            return 0;
        }
        let now = core.lazy_now();
        let (mut got, mut overruns, mut stale) = (0, 0u64, 0);
        let mut guard = None;
        while got < max {
            let mut entries = [None; RUN];
            // At most as many entries as events are still wanted: each entry taken is returned
            // or dropped as stale, none is left aside.
            let want = (max - got).min(RUN);
            let Ok(taken) = self.sink().pop_many(&mut entries[..want]) else {
                break;
            };
            if taken == 0 {
                break;
            }
            let guard = guard.get_or_insert_with(crate::sync::pin);
            // The run's timers found first, apart from their locks: each lookup is a few
            // dependent loads, which overlap here and would wait for each lock taken between.
            let mut timers = [None; RUN];
            for (timer, entry) in timers.iter_mut().zip(&entries[..taken]) {
                *timer = entry.map(|e| self.reg.slot(e.slot, guard));
            }
            for timer in timers[..taken].iter_mut().filter_map(Option::take) {
                match self.consume(timer, &now) {
                    Some(event) => {
                        overruns += u64::try_from(event.overrun).unwrap_or(0);
                        events.push(event);
                        got += 1;
                    }
                    None => stale += 1,
                }
            }
            if taken < want {
                break;
            }
        }
        core.health.flush_halt();
        let tally = &self.sink().tally;
        if got != 0 {
            tally.add(Counter::Delivered, got as u64);
        }
        if overruns != 0 {
            tally.add(Counter::Overruns, overruns);
        }
        if stale != 0 {
            tally.add(Counter::StaleDropped, stale);
        }
        got
    }

    /// Consumes a queue entry taken off the queue: its event, or `None` if it is stale (its
    /// timer re-set or deleted since it was queued, or its lock poisoned). An entry names its
    /// slot alone, and the entries naming a slot are its timer's one if that timer has its
    /// event queued, and as many stale ones as the slot's carried word counts (`notify.rs`,
    /// "Entries"): the timer's event is delivered first, a stale entry dropped otherwise.
    /// `timer` is the object in the entry's slot (`registry::Owner::slot`: queued entries name
    /// slots this owner has taken, and `self` holds the owner, so their pages exist).
    #[inline]
    fn consume(&self, timer: &registry::Timer<Itimer>, now: &LazyNow<'_>) -> Option<Event> {
        let core = self.core();
        let got = timer.lock_slot(|stale, l| {
            let queued = l.filter(|l| l.state.notify() == NotifyKind::Queue && l.state.queued());
            let Some(mut l) = queued else {
                // Relaxed (both): under the timer's lock.
                let n = stale.load(Ordering::Relaxed);
                stale.store(n.saturating_sub(1), Ordering::Relaxed);
                // The entry's timer was deleted with it on the queue: the entry kept the
                // timer's room (`contract.rs`, `on_delete`), given back now that it is gone.
                return Err(n > 0);
            };
            l.state.set_queued(false);
            let event = itimer::Event::with_seq(l.state.sigqueue_seq);
            let id = l.id();
            let (state, published) = l.state_and_published();
            match state.consume(published, event, now) {
                Consumed::Stale => Ok(None),
                Consumed::Deliver { overrun, rearm } => {
                    // A failed re-arm (a poisoned base) is the service's failure, which
                    // receivers see; this event is still delivered.
                    let _ = core.apply(&mut l, rearm);
                    Ok(Some(Event::new(id, overrun)))
                }
            }
        });
        match got {
            Ok(Ok(event)) => event,
            Ok(Err(counted)) => {
                if counted {
                    self.sink().unreserve();
                }
                None
            }
            Err(_) => None,
        }
    }

    /// Waits for the next event. Something else must poll meanwhile (a background driver, or
    /// another thread calling [`Timers::poll`](crate::timers::Timers::poll)).
    ///
    /// # Who fires while a receiver waits
    ///
    /// On a service with one driver (the default), the waiting thread takes the driver's
    /// place for the wait: it sleeps until the service's next expiry itself and fires what
    /// is due then, so an event of its own timer wakes one thread (this one), not the driver
    /// and then this thread. Callbacks it finds due go to the driver's threads, which run
    /// them. One receiver at a time does this; the others wait on their queues
    /// (`driver.rs`, `wait_leading`).
    ///
    /// # Errors
    /// Once the queue is empty: [`Error::OwnerDeleted`] if the owner is destroyed,
    /// [`Error::ServiceStopped`] if its service stopped (its last [`Timers`](crate::timers::Timers)
    /// handle and [`Sleep`](crate::time::Sleep) dropped), [`Error::Poisoned`] if the service failed
    /// (see [`Timers::health`](crate::timers::Timers::health)). Never waits for an event that
    /// cannot come.
    pub fn recv(&self) -> Result<Event, Error> {
        loop {
            if let Some(e) = self.recv_until(None)? {
                return Ok(e);
            }
        }
    }

    /// Waits up to `timeout` (real time, whatever the clock source) for the next event;
    /// `Ok(None)` on timeout.
    ///
    /// # Errors
    /// As [`Owner::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Event>, Error> {
        // A timeout too long to represent waits without a deadline.
        self.recv_until(Instant::now().checked_add(timeout))
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<Option<Event>, Error> {
        loop {
            if let Some(e) = self.try_recv() {
                return Ok(Some(e));
            }
            if let Some(e) = self.closed() {
                return Err(e);
            }
            let sink = self.sink();
            let woke = crate::timers::firing::driver::wait_leading(self.core(), deadline, |t| {
                sink.wait(t)
            })
            .unwrap_or_else(|| sink.wait(deadline));
            if !woke {
                return Ok(self.try_recv());
            }
        }
    }

    /// Why no event can come any more, if none can: [`Error::OwnerDeleted`] once the owner
    /// is destroyed, [`Error::ServiceStopped`] or [`Error::Poisoned`] once its service stopped
    /// or failed. `None` while events may still come. An event loop that finds the
    /// [readiness fd](Owner::event_fd) readable and [`Owner::try_iter`] empty asks this: the
    /// fd stays readable for good once the owner is closed.
    pub fn closed(&self) -> Option<Error> {
        if self.core().health.forked() {
            return Some(Error::Forked);
        }
        let closed = self.sink().closed();
        if closed & notify::CLOSED_OWNER != 0 {
            return Some(Error::OwnerDeleted);
        }
        if closed != 0 {
            return Some(self.core().health.halted_why());
        }
        if self.sink().is_poisoned() {
            return Some(Error::Poisoned(QUEUE_POISONED));
        }
        None
    }

    /// Waits for the next event without blocking a thread: a future for any executor. Its
    /// task's waker is registered in the owner's queue (no polling, no thread of its own)
    /// and woken by the push of the next event, with no tempora lock held.
    ///
    /// # Cancel safety
    /// Cancel safe: a future dropped before it completes has taken no event, so none is
    /// lost; the next receive gets it.
    ///
    /// # Errors
    /// As [`Owner::recv`].
    pub fn recv_async(&self) -> Recv<'_> {
        Recv {
            owner: self,
            token: 0,
        }
    }

    /// The owner's events as a [`Stream`](futures_core::Stream): each item as
    /// [`Owner::recv_async`] would return it; the stream ends when no event can come any more
    /// (the owner is destroyed, or its service stopped or failed). It holds a handle to the
    /// owner, so it can move into a task of its own; a task that must not keep the owner
    /// alive (one that the owner's own callbacks reach, or that should end with the owner)
    /// takes [`WeakOwner::events`](crate::timers::WeakOwner::events) instead, which ends once the
    /// owner's last strong handle is dropped (`handle.rs`, "No capture cycles").
    ///
    /// # Cancel safety
    /// Cancel safe: `events.next()` dropped before it completes has taken no event; the next
    /// one gets it.
    pub fn events(&self) -> Events {
        Events {
            owner: Held::Strong(self.clone()),
            token: 0,
        }
    }

    /// One poll of an async receive; `token` is the task's registration in the queue.
    fn poll_recv(&self, cx: &mut Context<'_>, token: &mut u64) -> Poll<Result<Event, Error>> {
        let mut fresh = None;
        loop {
            if let Some(e) = self.try_recv() {
                return Poll::Ready(Ok(e));
            }
            if let Some(e) = self.closed() {
                return Poll::Ready(Err(e));
            }
            let mut replaced = None;
            let r = self
                .sink()
                .register(token, cx.waker(), &mut fresh, &mut replaced);
            drop(replaced);
            match r {
                Ok(Registered::Waiting) => return Poll::Pending,
                Ok(Registered::NotEmpty) => {}
                Ok(Registered::NeedWaker) => fresh = Some(cx.waker().clone()),
                Err(Poisoned) => return Poll::Ready(Err(Error::Poisoned(QUEUE_POISONED))),
            }
        }
    }

    /// A file descriptor that is readable exactly while the owner's queue holds events, for
    /// an event loop (epoll, mio, libuv) to wait on beside its sockets, as a signalfd is
    /// readable while signals are pending. It is made on the first call (an owner that never
    /// asks pays nothing) and closed when the owner's last handle is dropped.
    ///
    /// It is *level-like*: readable while events are queued, whatever the loop did with the
    /// last readiness; the loop drains the queue when it sees it readable ([`Owner::try_iter`]
    /// to the end). With level-triggered epoll that is all. Edge-triggered epoll also works
    /// when the loop is the queue's only consumer; if other threads or tasks receive from the
    /// same owner, one of them may empty the queue between a push and the fd's update, the fd
    /// then shows no new edge for an event another push queued meanwhile, and only a
    /// level-triggered wait sees it. Do not
    /// `read(2)` it: tempora drains it when the queue empties. tempora writes it at most once
    /// per transition of the queue from empty to non-empty, never once per event. Stale
    /// entries (of a timer re-set or deleted since) count as queued until a receive drops
    /// them, so a wake-up may find no event.
    ///
    /// It also becomes readable, for good, when no event can come any more (the owner is
    /// destroyed, the service stopped or failed): [`Owner::closed`] then says why.
    ///
    /// # Errors
    /// [`Error::Io`] if the eventfd cannot be made (the process's fd limit).
    pub fn event_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        self.core().health.check_fork()?;
        Ok(self.sink().ready_fd()?.as_fd())
    }

    /// The events pending now, without waiting.
    pub fn try_iter(&self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(|| self.try_recv())
    }

    /// Events as they come, waiting for each; ends when the owner is destroyed.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }

    /// Entries on the queue, including stale ones that a receive will drop.
    pub fn queued(&self) -> usize {
        if self.core().health.forked() {
            return 0;
        }
        self.sink().len()
    }
}
/// The future of [`Owner::recv_async`].
///
/// # Cancel safety
/// Cancel safe: dropped before it completes, it has taken no event, and it deregisters its
/// task, which the next push then does not wake.
#[derive(Debug)]
#[must_use = "a receive does nothing unless polled (`.await`)"]
pub struct Recv<'a> {
    owner: &'a Owner,
    /// The task's registration in the queue (0: none).
    token: u64,
}

impl Future for Recv<'_> {
    type Output = Result<Event, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.owner.poll_recv(cx, &mut this.token)
    }
}

impl Drop for Recv<'_> {
    fn drop(&mut self) {
        if self.token != 0 && !self.owner.core().health.forked() {
            drop(self.owner.sink().deregister(self.token));
        }
    }
}

/// The stream of [`Owner::events`].
///
/// # Cancel safety
/// Cancel safe: a poll that returns `Pending` has taken no event, so a `next()` future
/// dropped before it completes loses none.
#[derive(Debug)]
#[must_use = "a stream does nothing unless polled"]
pub struct Events {
    owner: Held,
    /// The task's registration in the queue (0: none).
    token: u64,
}

/// How an [`Events`] holds its owner.
#[derive(Debug)]
enum Held {
    /// [`Owner::events`]: the stream keeps the owner alive.
    Strong(Owner),
    /// [`WeakOwner::events`](crate::timers::WeakOwner::events): upgraded for each poll; the stream
    /// ends once the owner has.
    Weak(crate::timers::object::types::WeakOwner),
}

impl Held {
    /// The owner for one call: `None` once a weakly held one has ended.
    fn get(&self) -> Option<std::borrow::Cow<'_, Owner>> {
        match self {
            Held::Strong(owner) => Some(std::borrow::Cow::Borrowed(owner)),
            Held::Weak(weak) => weak.upgrade().map(std::borrow::Cow::Owned),
        }
    }
}

impl Events {
    pub(super) fn weak(owner: crate::timers::object::types::WeakOwner) -> Events {
        Events {
            owner: Held::Weak(owner),
            token: 0,
        }
    }
}

impl futures_core::Stream for Events {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = &mut *self;
        let Some(owner) = this.owner.get() else {
            // The owner ended: its teardown closed the queue and dropped every waker
            // registered there, this task's too.
            return Poll::Ready(None);
        };
        owner.poll_recv(cx, &mut this.token).map(Result::ok)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        if self.token == 0 {
            return;
        }
        if let Some(owner) = self.owner.get() {
            if !owner.core().health.forked() {
                drop(owner.sink().deregister(self.token));
            }
        }
    }
}
