//! Polling and delivery: popping what is due from each base, and delivering it (an event
//! queued, a callback or a waker collected) under each timer's or sleep cell's lock once the
//! base lock is released; callbacks and wakers then run with no tempora lock held.
//!
//! A poll holds a base's delivery lock from the pop of a batch until the batch is delivered
//! (the poll barrier, `base.rs`), and pins the epoch over the same span, so that a popped
//! timer's address stays a timer object ("Safety of the timer addresses", `timers/mod.rs`).
//! Whether a popped timer is still due is decided under its lock (`object::popped_here`).
//!
//! # Events pushed per batch
//!
//! A `Queue` timer's event is pushed onto its owner's queue under the queue's lock. A batch
//! whose timers share an owner pushes their events under one lock of that queue, once the
//! batch is delivered and before the delivery lock is let go ([`Pushes`]), instead of one
//! lock per event: the timer's `queued` flag is set under its lock as its event is held, and
//! the event joins the queue, in pop order, before the poll lets anything else see the batch
//! delivered (the poll barrier), so a receiver after the poll finds it there. Meanwhile
//! nothing can tell the difference: a receiver does not look at a timer's flag without an
//! entry, a re-set or delete makes the held event stale exactly as a queued one, and another
//! expiry of the timer finds it `queued` and only moves its `sigqueue_seq`. An event the
//! queue has no room for (`notify.rs`, "Memory") has its timer's flag cleared again under
//! its lock, as a refused push does at once. Holding a queue costs a reference taken and
//! dropped (the owner may go while the batch runs): an owner's first event of a run is pushed
//! at once, and its queue is held from its second event on.

use crate::clock::{ClockId, LazyNow, ALL_CLOCKS, CLOCKS};
use crate::registry::{Timer, TIMER_POISONED};
use crate::stats::Counter;
use crate::sync::{Ordering, Poisoned};
use crate::timers::object::itimer::{Arm, Consumed};
use crate::timers::object::serial::Call;
use crate::timers::object::sleep_cell::SleepCell;
use crate::timers::object::types::{NotifyKind, Status};
use crate::timers::object::{
    callback_of, popped_here, sink_of, EventQueue, EventRef, Itimer, LockedTimer,
};
use crate::timers::shared::base::timer_at;
use crate::timers::shared::health::{BASE_POISONED, QUEUE_POISONED};
use crate::timers::shared::Core;
use crate::wheel::Key;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::Waker;

/// What a poll popped from a base, delivered once the base lock is released.
#[derive(Clone, Copy)]
enum Popped {
    /// A timer object, from the wheel of clock index `w` (its wheels link the objects).
    Timer {
        w: usize,
        timer: NonNull<Timer<Itimer>>,
    },
    /// A sleep's cell, with its entry's key: the entry is current only while the cell still
    /// holds that key (`object/sleep_cell.rs`).
    Sleep { key: Key, cell: NonNull<SleepCell> },
}

thread_local! {
    /// Each thread's buffer of popped entries (`Core::poll`).
    static BATCH: Cell<Vec<Popped>> = const { Cell::new(Vec::new()) };
    /// Each thread's buffer of the calls a batch collected (`Core::poll_then`).
    static CALLS: Cell<Vec<Call>> = const { Cell::new(Vec::new()) };
    /// Each thread's buffer of the events a batch holds for their queues (`Pushes`).
    static HELD: Cell<Vec<(u8, HeldEvent)>> = const { Cell::new(Vec::new()) };
}

/// An event held for its queue by a batch: its timer's address, for the batch's push (the
/// entry is its slot) and for undoing the mark if the push finds no room ([`unqueue`]).
#[derive(Clone, Copy)]
struct HeldEvent(NonNull<Timer<Itimer>>);

impl HeldEvent {
    /// The queue entry.
    fn entry(self) -> EventRef {
        // SAFETY: held only while the batch's epoch pin is (`Pushes::flush`), so the address
        // is still a timer object of the owner (`timers/mod.rs`, "Safety of the timer
        // addresses"); its slot index is constant.
        let timer = unsafe { self.0.as_ref() };
        EventRef {
            slot: timer.slot_index(),
        }
    }
}

/// How many owners' queues a batch holds events for at once ([`Pushes`]); an event of
/// another owner is pushed at once.
const HELD_QUEUES: usize = 4;

/// The events a batch queues, held to be pushed onto each owner's queue under one lock of it
/// ([`Pushes::flush`]; the module doc, "Events pushed per batch").
struct Pushes {
    /// The queues held for, each with a reference of its own: the owner may be destroyed,
    /// and its queue dropped, between its timer's lock and the flush.
    queues: [Option<Arc<EventQueue>>; HELD_QUEUES],
    /// The events held, in pop order, each with its queue's index in `queues`.
    events: Vec<(u8, HeldEvent)>,
    /// The queue the last event pushed at once went to (compared, never dereferenced).
    last: *const EventQueue,
}

impl Pushes {
    /// Puts a locked `Queue` timer's event for the arming `seq` on its owner's queue, or
    /// holds it for the batch's push onto that queue; as [`enqueue`].
    fn enqueue(&mut self, core: &Core, l: &mut LockedTimer<'_>, seq: u32, calls: &mut Vec<Call>) {
        let Some(event) = mark_queued(l, seq) else {
            return;
        };
        let queue: *const EventQueue = sink_of(l);
        let held = self
            .queues
            .iter()
            .position(|q| q.as_ref().is_some_and(|q| Arc::as_ptr(q) == queue));
        let held = match held {
            Some(i) => Some(i),
            None if queue == self.last => {
                self.queues.iter().position(Option::is_none).inspect(|&i| {
                    // SAFETY: `queue` is the owner's `Arc<EventQueue>`'s pointer (`Arc::as_ptr`,
                    // at create), alive while this timer is visible and locked (`sink_of`); the
                    // count taken here is given back when `queues[i]` is dropped.
                    self.queues[i] = Some(unsafe {
                        Arc::increment_strong_count(queue);
                        Arc::from_raw(queue)
                    });
                })
            }
            None => None,
        };
        match held {
            Some(i) => self
                .events
                .push((i as u8, HeldEvent(NonNull::from(l.timer)))),
            None => {
                self.last = queue;
                push_marked(core, l, event, |w| calls.push(Call::Wake(w)));
            }
        }
    }

    /// Pushes the held events onto their queues, one lock of each queue; the wakers of tasks
    /// waiting on them go to `calls`. An event that finds no room has its timer's `queued`
    /// flag cleared again (its next expiry tries again, as after a refused `enqueue`).
    /// Called with the batch's epoch pin held (the events' timer addresses).
    fn flush(&mut self, core: &Core, calls: &mut Vec<Call>) {
        if self.events.is_empty() {
            return;
        }
        for (i, queue) in self.queues.iter().enumerate() {
            let Some(queue) = queue else {
                continue;
            };
            let mine = || {
                self.events
                    .iter()
                    .filter(move |(q, _)| usize::from(*q) == i)
                    .map(|&(_, e)| e)
            };
            match queue.push_many(mine().map(HeldEvent::entry), |w| calls.push(Call::Wake(w))) {
                Ok(pushed) => mine().skip(pushed).for_each(|e| unqueue(core, queue, e)),
                Err(Poisoned) => {
                    core.health.fail(QUEUE_POISONED);
                }
            }
        }
        self.events.clear();
    }

    /// Lets go of the queues held (after the flush, once no lock is held: a reference
    /// dropped here may be an owner's queue's last).
    fn release(&mut self) {
        self.queues = Default::default();
    }
}

/// Takes back an event its queue had no room for: one entry naming the slot less than its
/// mark counted. A stale entry's count goes first (its room, which its deleted timer left to
/// it, is given back: `contract.rs`, `on_delete`); else the slot's timer's `queued` flag is
/// cleared (its next expiry tries again). Entries of one slot are alike (`notify.rs`,
/// "Entries"), so which one this was does not matter.
#[cold]
fn unqueue(core: &Core, queue: &EventQueue, event: HeldEvent) {
    // SAFETY: the caller holds the epoch pin it held when the timer was popped (`flush`), so
    // the address is still a timer object of the owner (`timers/mod.rs`, "Safety of the
    // timer addresses").
    let timer = unsafe { event.0.as_ref() };
    let r = timer.lock_slot(|stale, l| {
        // Relaxed (both): under the timer's lock.
        let n = stale.load(Ordering::Relaxed);
        if n > 0 {
            stale.store(n - 1, Ordering::Relaxed);
            return true;
        }
        if let Some(l) = l.filter(|l| l.state.notify() == NotifyKind::Queue) {
            l.state.set_queued(false);
        }
        false
    });
    match r {
        Ok(true) => queue.unreserve(),
        Ok(false) => {}
        Err(_) => {
            core.health.fail(TIMER_POISONED);
        }
    }
}

/// The monotonic wheel's index: sleeps wait there.
const MONOTONIC: usize = ClockId::Monotonic.index();

impl Core {
    /// `Timers::poll`: polls every base at the clocks' current time, running what fired,
    /// re-arms the deadline fd, and then serves what the service looks at beside its timers
    /// (`core::PollLook`: its inspection endpoint) when its time has come by the poll's
    /// clock reading; how many fired.
    pub(crate) fn poll_app(&self) -> usize {
        let now = self.now_all();
        let fired = self.poll(now);
        self.refresh_deadline();
        if let Some(look) = &self.look {
            // Relaxed: a time to compare with; racing polls are sorted out by `at_poll`.
            if now[MONOTONIC] >= look.next.load(Ordering::Relaxed) {
                if let Some(next) = look.with.at_poll(self, now[MONOTONIC]) {
                    look.next.store(next, Ordering::Relaxed);
                }
            }
        }
        fired
    }

    fn poll(&self, now: [u64; CLOCKS]) -> usize {
        self.poll_then(now, &mut |calls| {
            self.run_calls(calls);
            true
        })
    }

    /// A poll that leaves the callbacks it would run in `out`, for the caller to run (a
    /// driver runs them after publishing its next deadline: `driver.rs`). Wake-ups it runs
    /// itself, after each batch: a waker must not block, so it needs no spare standing by,
    /// and a task woken while later batches are still popped runs beside the poll instead of
    /// after the last of them.
    ///
    /// `out` grows only fallibly: before each batch it has room for a batch's callbacks (a
    /// batch makes at most one per entry), and when it cannot get that room the poll stops
    /// there, leaving what is due and not popped yet in the wheels, where the caller's next
    /// poll finds it (a driver that finds a timer due does not sleep). So a poll that finds
    /// several batches of callbacks due together collects them all while memory allows, and
    /// in as many polls as it takes otherwise; nothing is lost.
    pub(crate) fn poll_collect(&self, now: [u64; CLOCKS], out: &mut Vec<Call>) -> usize {
        let room = |out: &mut Vec<Call>| out.try_reserve(self.batch).is_ok();
        if !room(out) {
            return 0;
        }
        self.poll_then(now, &mut |calls| {
            for call in calls.drain(..) {
                match call {
                    Call::Wake(_) => self.run_call(call),
                    Call::Callback(..) => {
                        debug_assert!(out.len() < out.capacity(), "a batch's room");
                        out.push(call);
                    }
                }
            }
            room(out)
        })
    }

    /// Makes this thread's poll buffers, and registers their thread-exit hooks, as its first
    /// poll would: a thread that may poll later (a driver's spare) does it as it starts,
    /// while the memory is there (the `timers` module doc, "Memory").
    pub(crate) fn warm_poller(&self) {
        let mut batch = BATCH.with(Cell::take);
        batch.reserve(self.batch);
        BATCH.with(|c| c.set(batch));
        let mut calls = CALLS.with(Cell::take);
        calls.reserve(self.batch);
        CALLS.with(|c| c.set(calls));
        let mut held = HELD.with(Cell::take);
        held.reserve(self.batch);
        HELD.with(|c| c.set(held));
        drop(crate::sync::pin());
        // The thread's index, which its first delivery counts under: claimed now, since
        // claiming it registers a thread-exit hook with the C library, which aborts the
        // process if that cannot get memory (a spare that first leads after memory ran out).
        let _ = crate::sync::thread_index();
    }

    /// Polls every base with something due (`base.rs`, "Polling only what is due"), handing
    /// each batch's calls to `after` once no lock is held; stops early (after that batch) if
    /// `after` returns `false`.
    pub(crate) fn poll_then(
        &self,
        now: [u64; CLOCKS],
        after: &mut dyn FnMut(&mut Vec<Call>) -> bool,
    ) -> usize {
        let ticks = now.map(|n| self.res.ticks_floor(n));
        let lazy = LazyNow::from(&*self.clock, now);
        // The thread's batch and calls buffers, taken out for this poll (a callback that polls
        // again takes empty ones) and put back at the end: a poll allocates nothing once its
        // thread has polled before (`after` leaves `calls` empty).
        let mut batch = BATCH.with(Cell::take);
        batch.reserve(self.batch);
        let mut calls = CALLS.with(Cell::take);
        // A batch makes at most one call per entry (plus the wake-ups of waiting tasks): sized
        // with the batch, on the thread's first poll, so that a poll that fires callbacks
        // later allocates nothing (the `timers` module doc, "Memory").
        calls.reserve(self.batch);
        let mut pushes = Pushes {
            queues: Default::default(),
            events: HELD.with(Cell::take),
            last: std::ptr::null(),
        };
        pushes.events.reserve(self.batch);
        let mut fired = 0;
        let n = self.bases.len();
        let first = self.my_base();
        let timed = self.stats.enabled;
        'bases: for i in 0..n {
            let b = (first + i) % n;
            let base = &self.bases[b];
            if base.due() > now[MONOTONIC] {
                // Nothing of it is due yet (`base.rs`, "Polling only what is due").
                continue;
            }
            let mut counted = false;
            loop {
                // Held from the pop until the batch is delivered: the poll barrier (`base.rs`).
                let Ok(delivering) = base.delivery() else {
                    self.health.fail(BASE_POISONED);
                    break;
                };
                // Pinned from before the pop until the entries are delivered (`timers/mod.rs`,
                // "Safety of the timer addresses").
                let guard = crate::sync::pin();
                if !counted {
                    base.counters.poll();
                    counted = true;
                }
                let popped = base.locked_delivering(&delivering, |st| {
                    // The hold is timed inside the lock: from taking it to letting it go.
                    let start = timed.then(std::time::Instant::now);
                    let mut complete = true;
                    for (w, wheel) in st.wheels.iter_mut().enumerate() {
                        if ticks[w] < wheel.now() {
                            // Only the realtime clock can step back: re-base its wheel so that
                            // nothing fires before the wall clock reaches it again.
                            wheel.rebase(ticks[w]);
                        }
                        let room = self.batch - batch.len();
                        if room == 0 {
                            complete = false;
                            break;
                        }
                        let adv = wheel.run(ticks[w], room, |r| {
                            // The pop read the node (the object's second line); delivery
                            // reads the first line too: start loading it now, so that its
                            // miss overlaps the pop's walk to the next node.
                            crate::sync::prefetch(r);
                            batch.push(Popped::Timer {
                                w,
                                timer: timer_at(r),
                            });
                        });
                        complete &= adv.complete;
                    }
                    let room = self.batch - batch.len();
                    if room == 0 {
                        complete = false;
                    } else {
                        let adv = st.sleeps.advance(ticks[MONOTONIC], room, |e| {
                            batch.push(Popped::Sleep {
                                key: e.key,
                                cell: e.value,
                            });
                        });
                        complete &= adv.complete;
                    }
                    (complete, start.map(|s| s.elapsed().as_nanos() as u64))
                });
                let Ok((complete, held)) = popped else {
                    self.health.fail(BASE_POISONED);
                    break;
                };
                let mut here = 0;
                super::sigdeliver::batch_begins();
                for &popped in &batch {
                    here += self.deliver(b, popped, &lazy, &mut pushes, &mut calls);
                }
                pushes.flush(self, &mut calls);
                super::sigdeliver::batch_ends();
                if !batch.is_empty() {
                    base.counters.batch(here as u64, held);
                }
                fired += here;
                batch.clear();
                drop(guard);
                drop(delivering);
                pushes.release();
                if !after(&mut calls) {
                    break 'bases;
                }
                if complete {
                    break;
                }
            }
        }
        BATCH.with(|b| b.set(batch));
        HELD.with(|h| h.set(pushes.events));
        debug_assert!(calls.is_empty(), "`after` takes every call");
        calls.clear();
        CALLS.with(|c| c.set(calls));
        self.health.flush_halt();
        fired
    }

    /// Handles one entry popped from base `b`: 1 if it fired a timer or a sleep.
    fn deliver(
        &self,
        b: usize,
        popped: Popped,
        now: &LazyNow<'_>,
        pushes: &mut Pushes,
        calls: &mut Vec<Call>,
    ) -> usize {
        match popped {
            Popped::Timer { w, timer } => self.deliver_timer(b, w, timer, now, pushes, calls),
            Popped::Sleep { key, cell } => {
                // SAFETY: the entry was in the wheel when popped, and this poll holds base
                // `b`'s delivery lock, which the sleep's holder waits for before freeing a
                // cell whose entry it could not remove (`object/sleep_cell.rs`, "Why the memory stays
                // valid").
                let cell = unsafe { cell.as_ref() };
                self.deliver_sleep(b, key, cell, now, calls)
            }
        }
    }

    /// Handles a timer popped from base `b`'s wheel `w`: 1 if it fired.
    fn deliver_timer(
        &self,
        b: usize,
        w: usize,
        timer: NonNull<Timer<Itimer>>,
        now: &LazyNow<'_>,
        pushes: &mut Pushes,
        calls: &mut Vec<Call>,
    ) -> usize {
        // SAFETY: the timer was linked when popped, after the caller pinned the epoch, so the
        // slot page is not recycled before the caller unpins (`timers/mod.rs`, "Safety of the
        // timer addresses"); it holds a `Timer` (slots are type-stable), whose identity is
        // checked under its lock below.
        let timer: &Timer<Itimer> = unsafe { timer.as_ref() };
        let mut signal = false;
        let delivered = timer.lock_visible(|mut l| {
            if !popped_here(&l, b, w) {
                return false;
            }
            l.state.set_wheel(0);
            let clock = ALL_CLOCKS[w];
            // A signal timer's retry of an owed signal is due whenever it was placed, and so
            // is a look at an outstanding one (placed before the period it would count:
            // `signals/mod.rs`; a look counts only the periods already passed).
            if l.state.notify() == NotifyKind::Signal
                && (now.get(clock) >= l.state.expiry
                    || l.state.owed()
                    || l.state.queued() && l.state.status() == Status::RequeuePending)
            {
                let expiry = l.state.expiry;
                signal = true;
                let fired = self.signal_pop(&mut l, b, clock, now);
                if fired {
                    sink_of(&l)
                        .tally
                        .expired(now.get(clock).saturating_sub(expiry));
                }
                return fired;
            }
            if now.get(clock) < l.state.expiry {
                // Never early. The entry was left in place by a re-arm to a later time (see
                // `apply`), or a clock source broke its contract: the timer waits for its time
                // again. It goes to tick `ceil(expiry / tick)`, which is after `floor(now /
                // tick)`, so this poll does not meet it again.
                let expiry = l.state.expiry;
                let _ = self.apply_on(&mut l, Arm::At { clock, expiry }, b);
                return false;
            }
            let expiry = l.state.expiry;
            let Some(event) = l.state.expire() else {
                return false;
            };
            let tally = &sink_of(&l).tally;
            tally.expired(now.get(clock).saturating_sub(expiry));
            match l.state.notify() {
                NotifyKind::Queue => pushes.enqueue(self, &mut l, event.seq(), calls),
                NotifyKind::Callback => {
                    let (state, published) = l.state_and_published();
                    if let Consumed::Deliver { overrun, rearm } =
                        state.consume(published, event, now)
                    {
                        // Its next period, on the base it came from (the poll barrier).
                        let _ = self.apply_on(&mut l, rearm, b);
                        if let Some(cell) = callback_of(&l) {
                            // None: a call of this timer runs (another poller's); it runs the
                            // callback again for this expiry when it returns.
                            if let Some(call) = cell.serial.take(overrun) {
                                let tally = sink_of(&l).tally.clone();
                                tally.delivered(overrun);
                                calls.push(Call::Callback(call, l.id(), overrun, tally));
                            }
                        }
                    }
                }
                NotifyKind::None | NotifyKind::Signal => {}
            }
            true
        });
        if signal {
            // A looker that found its number gone released its followers (`lookout.rs`).
            self.release_followers(b, now);
        }
        match delivered {
            Ok(fired) => usize::from(fired == Some(true)),
            Err(Poisoned) => {
                self.health.fail(TIMER_POISONED);
                0
            }
        }
    }

    fn run_calls(&self, calls: &mut Vec<Call>) {
        calls.drain(..).for_each(|c| self.run_call(c));
    }

    /// Runs one callback or wake-up; a panic in it is caught and counted.
    pub(crate) fn run_call(&self, call: Call) {
        match call {
            Call::Callback(call, id, overrun, tally) => {
                let mut first = true;
                call.run(id, overrun, &mut |overrun, panicked| {
                    if !std::mem::take(&mut first) {
                        // A run for expiries folded while the call before it ran.
                        tally.delivered(overrun);
                    }
                    if panicked {
                        self.callback_panics.fetch_add(1, Ordering::Relaxed);
                        tally.add(Counter::CallbackPanics, 1);
                    }
                });
            }
            Call::Wake(w) => {
                if super::serial::catch(|| w.wake()).is_none() {
                    self.callback_panics.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Handles a sleep's entry popped from base `b`: fires it if its deadline passed (its
    /// waker goes to `calls`), places it again if a reset moved the deadline later, lets go
    /// of it if it is no longer current (its future is being dropped). 1 if it fired.
    fn deliver_sleep(
        &self,
        b: usize,
        key: Key,
        cell: &SleepCell,
        now: &LazyNow<'_>,
        calls: &mut Vec<Call>,
    ) -> usize {
        let fired = cell.locked(|s| {
            let current = s.at.armed && usize::from(s.at.base) == b && s.body.key == key.to_bits();
            if !current {
                return false;
            }
            s.at.armed = false;
            if now.get(ClockId::Monotonic) < s.body.deadline {
                // Reset to a later deadline while in the wheel (`Sleep::reset`): wait again,
                // on this base (the poll barrier). A poisoned base fails the service; the
                // task is woken then, so that its next poll meets the failure (`place`).
                if self.sleep_place(cell, s, b).is_err() {
                    if let Some(w) = s.body.waker.take() {
                        calls.push(Call::Wake(w));
                    }
                }
                return false;
            }
            s.at.fired = true;
            if let Some(w) = s.body.waker.take() {
                calls.push(Call::Wake(w));
            }
            true
        });
        // A poisoned cell (a bug) is left alone: its holder no longer expects deliveries.
        usize::from(fired == Ok(true))
    }
}

/// Puts a locked `Queue` timer's one event on its owner's queue for the arming `seq`, or,
/// if the event is already queued, makes that entry this arming's (the kernel's "already
/// pending: nothing" for its preallocated sigqueue). A poisoned queue fails the service.
/// Tasks waiting on the queue are handed to `wake`, for the caller to wake with no lock held.
pub(crate) fn enqueue(core: &Core, l: &mut LockedTimer<'_>, seq: u32, wake: impl FnMut(Waker)) {
    if let Some(event) = mark_queued(l, seq) {
        push_marked(core, l, event, wake);
    }
}

/// Records the arming `seq` of a locked `Queue` timer's expiry and marks its event queued: the
/// entry to push, or `None` when one is queued already (the receive reads the latest `seq`).
#[inline]
fn mark_queued(l: &mut LockedTimer<'_>, seq: u32) -> Option<EventRef> {
    l.state.sigqueue_seq = seq;
    if l.state.queued() {
        return None;
    }
    l.state.set_queued(true);
    Some(EventRef {
        slot: l.timer.slot_index(),
    })
}

/// Pushes the entry [`mark_queued`] made onto the locked timer's queue at once.
#[inline]
fn push_marked(core: &Core, l: &mut LockedTimer<'_>, event: EventRef, wake: impl FnMut(Waker)) {
    match sink_of(l).push(event, wake) {
        Ok(true) => {}
        // No room (the reservation makes room for every entry: `notify.rs`, "Memory"; kept
        // as a fallback): the event is not queued, and the timer's next expiry tries again.
        Ok(false) => l.state.set_queued(false),
        Err(_) => {
            core.health.fail(QUEUE_POISONED);
        }
    }
}
