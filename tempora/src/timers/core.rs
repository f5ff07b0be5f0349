//! The service's engine: arming and disarming timers on bases, polling the bases, delivering
//! what expired (events, callbacks), and the service's life (stop, failure).

use super::base::{
    earliest_fire, from_monotonic, to_monotonic, Base, BaseWheel, DeadlineFd, Doorbell, Target,
    Waiting, NO_EXPIRY,
};
use super::itimer::{Arm, Consumed};
use super::itimer::{ItimerPublished, ItimerState};
use super::notify;
use super::notify::CLOSED_OWNER;
use super::object::{
    callback_of, sink_of, CallbackCell, EventQueue, EventRef, Itimer, ItimerFixed, ItimerInit,
    LockedTimer,
};
use super::serial::Call;
use super::sleep::{SleepCell, SleepState};
#[cfg(not(loom))]
use super::standby::Steps as _;
use super::types::{NotifyKind, Placement};
use crate::clock::{ClockId, ClockSource, LazyNow, Resolution, ALL_CLOCKS, CLOCKS};
use crate::error::Error;
use crate::registry::Service;
use crate::registry::{Registry, Timer, TIMER_POISONED};
use crate::stats::tally::Hub;
use crate::stats::Counter;
use crate::sync::{thread_index, AtomicBool, AtomicU64, Ordering, Poisoned};
use crate::wheel::intrusive::Node;
use crate::wheel::{Key, Mode};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock, PoisonError, Weak};
use std::task::Waker;
use strength_reduce::StrengthReducedUsize;

/// `Error::Poisoned` texts of the service's locks.
pub(crate) const BASE_POISONED: &str = "a timer base";
pub(crate) const QUEUE_POISONED: &str = "an owner's event queue";
pub(crate) const DRIVER_DIED: &str = "a driver thread";

pub(crate) struct Core {
    pub(crate) registry: Registry<Itimer>,
    pub(crate) clock: Arc<dyn ClockSource>,
    pub(crate) res: Resolution,
    pub(crate) batch: usize,
    pub(crate) bases: Box<[CachePadded<Base>]>,
    /// `bases.len()` as a multiply-and-shift divisor: the calling thread's base is picked on
    /// every arm.
    pub(crate) base_count: StrengthReducedUsize,
    pub(crate) callback_panics: AtomicU64,
    /// One per driver; driver `k` serves the bases `b % drivers == k`.
    pub(crate) bells: Box<[CachePadded<Doorbell>]>,
    /// The deadline fd of a service without drivers, made on first request
    /// (`Timers::deadline_fd`).
    pub(crate) deadline: OnceLock<DeadlineFd>,
    /// The last `Timers` handle and sleep were dropped: drivers end, owners are told (`Core::halt`).
    pub(crate) shutdown: AtomicBool,
    /// The first `Error::Poisoned` text the service met (a poisoned lock, a dead driver);
    /// set once, never cleared (`Core::fail`).
    pub(crate) failure: OnceLock<&'static str>,
    /// `shutdown || failure.is_some()`, in one byte for the arming calls' check.
    pub(crate) halted: AtomicBool,
    /// A failure's `halt` has not run yet (`Core::fail`, `Core::flush_halt`).
    pub(crate) halt_pending: AtomicBool,
    /// The event queue of every owner made by this service, for `halt` to wake their
    /// receivers. A `Weak<EventQueue>`, not the owner: upgrading it can never make this thread run
    /// an owner's teardown (which takes timer locks) from wherever the service failed. Dead
    /// entries are pruned as the list grows.
    pub(crate) owners: std::sync::Mutex<Vec<Weak<EventQueue>>>,
    pub(crate) driver_wakeups: AtomicU64,
    /// One per driver: the spares standing by while it runs callbacks (`driver.rs`,
    /// "Callbacks that block"); empty without spares.
    #[cfg(not(loom))]
    pub(crate) standby: Box<[CachePadded<super::standby::Standby>]>,
    /// `Builder::spare_drivers`: spares each driver may start.
    #[cfg_attr(loom, allow(dead_code))] // spares are not modelled
    pub(crate) spare_limit: usize,
    /// The spares' threads, joined when the service stops.
    pub(crate) spares: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Times a spare took over from a driver busy in a callback.
    pub(crate) takeovers: AtomicU64,
    /// `Builder::max_deferral`, in ns: how long after its expiry a deferrable timer may wait.
    pub(crate) max_deferral: u64,
    /// How far each of the clock source's coarse clocks may lag (`ClockSource::coarse_lag`,
    /// by clock index). A slack timer arms from them when its slack is at least twice the
    /// monotonic one's, and a placement of an expiry from a coarse reading keeps its clock's
    /// lag out of the slack.
    pub(crate) coarse_lags: [u64; CLOCKS],
    /// Statistics: updated lists, flush, the group tree (`stats/`).
    pub(crate) stats: Arc<Hub>,
    /// Test hook: the next driver loop iteration panics (a driver dying outside a callback).
    #[cfg(test)]
    pub(crate) crash_driver: AtomicBool,
    /// Test hook: doorbell rings (arms earlier than a driver's sleep, clock steps, shutdown).
    #[cfg(test)]
    pub(crate) rings: AtomicU64,
}

/// The service's part of each owner.
pub(crate) struct OwnerPart {
    pub(crate) core: Arc<Core>,
    /// Shared with `Core::owners` (weakly); timers' `sink` points at it.
    pub(crate) sink: Arc<EventQueue>,
}

impl Service for Itimer {
    type Fixed = ItimerFixed;
    type Published = ItimerPublished;
    type Links = Node;
    type State = ItimerState;
    type Init = ItimerInit;
    type Owner = OwnerPart;
    type Released = Option<Box<CallbackCell>>;

    fn init(
        fixed: &ItimerFixed,
        published: &ItimerPublished,
        state: &mut ItimerState,
        init: ItimerInit,
    ) {
        // Relaxed (all): published with the timer by the create (`Service::init`).
        fixed.sink.store(init.sink.cast_mut(), Ordering::Relaxed);
        let callback = init.callback.map_or(std::ptr::null_mut(), Box::into_raw);
        fixed.callback.store(callback, Ordering::Relaxed);
        fixed.precision.store(0, Ordering::Relaxed);
        state.create(published, init.clock, init.notify);
    }

    fn on_delete(owner: &OwnerPart, l: &mut LockedTimer<'_>) -> Option<Box<CallbackCell>> {
        let tally = &owner.sink.tally;
        tally.add(Counter::Deleted, 1);
        tally.group.uncharge();
        // A poisoned base fails the service; the timer is deleted all the same (its node, if
        // still linked there, is never reached again).
        let _ = owner.core.disarm(l);
        l.state.delete();
        if let Some(cell) = callback_of(l) {
            // Expiries folded into a running call are stale now (`serial.rs`).
            cell.serial.drop_folded();
        }
        // Relaxed: under the timer's lock, which every reader of `callback` holds.
        let cb = l
            .fixed()
            .callback
            .swap(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `callback` is null or a `Box<CallbackCell>` leaked at create (`init`), taken
        // out exactly once, here, under the lock.
        (!cb.is_null()).then(|| unsafe { Box::from_raw(cb) })
    }

    fn on_destroy(owner: &OwnerPart) {
        owner.sink.close(CLOSED_OWNER);
        // The teardown's delete hooks may have met a failure; no lock is held now.
        owner.core.flush_halt();
    }
}

/// What a poll popped: its wheel, its entry's key (a sleep's; none for a timer, which
/// its wheel links directly) and its target.
type Popped = (usize, Key, Target);

thread_local! {
    /// Each thread's buffer of popped entries (`Core::poll`).
    static BATCH: Cell<Vec<Popped>> = const { Cell::new(Vec::new()) };
    /// Each thread's buffer of the calls a batch collected (`Core::poll_then`).
    static CALLS: Cell<Vec<Call>> = const { Cell::new(Vec::new()) };
}

/// The monotonic wheel's index: sleeps wait there.
const MONOTONIC: usize = ClockId::Monotonic.index();

impl Core {
    /// Marks the service failed for good (the first `what` is kept) and returns the error to
    /// report. Its receivers are told (`halt`: queues closed, waiting threads and tasks woken)
    /// by [`Core::flush_halt`], which the public calls run once they hold no lock: `fail` is
    /// called under timer, cell and delivery locks, and a task's waker is user code.
    #[cold]
    pub(crate) fn fail(&self, what: &'static str) -> Error {
        if self.failure.set(what).is_ok() {
            self.halted.store(true, Ordering::Relaxed);
            // Release: pairs with the Acquire in `flush_halt_now`.
            self.halt_pending.store(true, Ordering::Release);
        }
        Error::Poisoned(self.failure.get().copied().unwrap_or(what))
    }

    /// Runs the `halt` a failure left pending; called with no tempora lock held, by every
    /// public call that can meet a failure (a poll, settime, delete, a receive, a restore, an
    /// owner's teardown, a sleep's poll, reset and drop, a dying driver).
    #[inline]
    pub(crate) fn flush_halt(&self) {
        // Relaxed: a hint; the swap decides who halts.
        if self.halt_pending.load(Ordering::Relaxed) {
            self.flush_halt_now();
        }
    }

    #[cold]
    fn flush_halt_now(&self) {
        if self.halt_pending.swap(false, Ordering::AcqRel) {
            self.halt();
        }
    }

    /// The service stopped or failed: arming calls fail from now on, and every owner's queue
    /// is closed to waiting (`CLOSED_SERVICE`), since nothing will queue an event again.
    #[cold]
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        for sink in self.owners().iter().filter_map(Weak::upgrade) {
            sink.close(notify::CLOSED_SERVICE);
        }
    }

    /// The owners' queues. A panic never happens under this mutex (a push, a prune), but it
    /// could only have left the list intact, so a poisoned one is used as it is.
    pub(crate) fn owners(&self) -> std::sync::MutexGuard<'_, Vec<Weak<EventQueue>>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why arming must fail now: the service failed or stopped.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), Error> {
        // Relaxed: one byte on the arming path; what it reports needs no ordering with the
        // caller's own accesses (an arm racing the stop is answered by `recv` instead).
        if self.halted.load(Ordering::Relaxed) {
            return Err(self.halted_why());
        }
        Ok(())
    }

    /// The error for a halted service: its failure, or its stop.
    #[cold]
    pub(crate) fn halted_why(&self) -> Error {
        match self.failure.get() {
            Some(&what) => Error::Poisoned(what),
            None => Error::ServiceStopped,
        }
    }

    /// Every clock, read once.
    pub(crate) fn now_all(&self) -> [u64; CLOCKS] {
        let src = &*self.clock;
        ALL_CLOCKS.map(|c| src.now(c))
    }

    pub(crate) fn poll_now(&self) -> usize {
        self.poll(self.now_all())
    }

    /// Rings every driver (a clock step, shutdown), or makes the deadline fd readable at once
    /// (its loop polls, which re-evaluates every base).
    pub(crate) fn ring_all(&self) {
        #[cfg(test)]
        self.rings
            .fetch_add(self.bells.len() as u64, Ordering::Relaxed);
        (0..self.bells.len()).for_each(|k| self.bells[k].ring());
        #[cfg(not(loom))]
        self.standby.iter().for_each(|s| s.kick(1));
        if let Some(d) = self.deadline.get() {
            d.lower(0);
        }
    }

    /// An entry at tick `tick` of base `b`'s wheel `w` is earlier than what the base's
    /// sleeper (its driver, or the deadline fd) published: rings the driver serving base `b`,
    /// or moves the deadline fd to it.
    #[cold]
    pub(crate) fn ring(&self, b: usize, w: usize, tick: u64) {
        #[cfg(test)]
        self.rings.fetch_add(1, Ordering::Relaxed);
        if !self.bells.is_empty() {
            let k = b % self.bells.len();
            self.bells[k].ring();
            #[cfg(not(loom))]
            if let Some(s) = self.standby.get(k) {
                // Where the entry fires on the standby's monotonic fd: at once for the
                // other clocks (a rare ring; converting would read every clock).
                s.kick(if w == MONOTONIC {
                    self.res.tick_start(tick)
                } else {
                    1
                });
            }
        } else if let Some(d) = self.deadline.get() {
            let at = if w == MONOTONIC {
                self.res.tick_start(tick)
            } else {
                to_monotonic(self.res, w, tick, &self.now_all())
            };
            d.lower(at);
        }
    }

    /// Re-arms the deadline fd, if there is one, at the earliest firing of all bases (after a
    /// poll), publishing it in every base as a driver publishes its sleep (`DeadlineFd`).
    pub(crate) fn refresh_deadline(&self) {
        let Some(d) = self.deadline.get() else {
            return;
        };
        let mut g = d.lock();
        let now = self.now_all();
        let mut deadline = NO_EXPIRY;
        for base in self.bases.iter() {
            // A poisoned base fires nothing again: it has no deadline.
            let _ = base.locked(|st| {
                st.ring_lowers = true;
                deadline = deadline.min(earliest_fire(self.res, self.max_deferral, st, &now));
                for w in 0..CLOCKS {
                    st.sleep[w] = from_monotonic(self.res, w, deadline, &now);
                }
            });
        }
        // Unchanged and still ahead: the fd is armed right and not readable.
        let mono = now[MONOTONIC];
        if deadline != *g.armed || deadline <= mono {
            d.set(&mut g.armed, deadline);
        }
    }

    /// The base of the calling thread.
    #[inline]
    pub(crate) fn my_base(&self) -> usize {
        thread_index() % self.base_count
    }

    /// Applies `itimer`'s decision to the timer's wheel entry (lock order: timer → base),
    /// arming it on the calling thread's base.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the base is (the service has then failed: `Core::fail`).
    #[inline]
    pub(crate) fn apply(&self, l: &mut LockedTimer<'_>, arm: Arm) -> Result<(), Error> {
        self.place(l, arm, 0, || self.my_base())
    }

    /// `apply` for an expiry computed from a clock reading up to `spent` ns after the time
    /// (the coarse clock: `Owner::settime`), which a slack timer takes out of its slack. The
    /// timer remembers it (`ItimerState::coarse`) for later placements of this expiry.
    #[inline]
    pub(crate) fn apply_spent(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        spent: u64,
    ) -> Result<(), Error> {
        l.state.set_coarse(spent != 0);
        self.place(l, arm, spent, || self.my_base())
    }

    /// `apply`, arming on base `b` (a delivery re-arms on the base it popped the timer from:
    /// see "Delivery and the poll barrier" in `base.rs`).
    #[inline]
    fn apply_on(&self, l: &mut LockedTimer<'_>, arm: Arm, b: usize) -> Result<(), Error> {
        self.place(l, arm, 0, || b)
    }

    /// Where an arming at `expiry` (ns) goes: the wheel tick, the entry's mode, and the tick
    /// by which a sleeper must wake for it (the ring test).
    ///
    /// - precise: the expiry's tick (`ticks_ceil`);
    /// - slack `s`: that tick rounded up to a multiple of `g`, the largest power of 8 with
    ///   `g` ticks at most `s - spent` ns (at least 1), so the entry fires less than `g` ticks
    ///   after its expiry, at an instant it shares with every slack timer of that `g` due
    ///   then; its level's granularity divides the tick once `g` does, so it is never moved
    ///   from a level of granularity `g` or finer;
    /// - deferrable: the expiry's tick in the deferrable lane; a sleeper must wake for it
    ///   only `max_deferral` later.
    #[inline]
    pub(crate) fn placed(&self, placement: Placement, expiry: u64, spent: u64) -> (u64, Mode, u64) {
        let tick = self.res.ticks_ceil(expiry);
        match placement {
            Placement::Precise => (tick, Mode::PRECISE, tick),
            Placement::Slack(slack) => {
                let room = slack.saturating_sub(spent) / self.res.nanos();
                let tick = if room >= 8 {
                    // 8^k <= room: k = floor(log2(room) / 3).
                    let g = 1u64 << (room.ilog2() / 3 * 3);
                    tick.div_ceil(g).saturating_mul(g)
                } else {
                    tick
                };
                (tick, Mode::PRECISE, tick)
            }
            Placement::Deferrable => {
                let bound = self.res.ticks_ceil(self.max_deferral);
                (
                    tick,
                    Mode::PRECISE | Mode::DEFERRABLE,
                    tick.saturating_add(bound),
                )
            }
        }
    }

    /// `apply` on the base `base` names, asked only if the timer must move (a disarm, and a
    /// re-arm to a later time that leaves the entry where it is, need no base).
    #[inline]
    fn place(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        spent: u64,
        base: impl FnOnce() -> usize,
    ) -> Result<(), Error> {
        let Arm::At { clock, expiry } = arm else {
            return self.disarm(l);
        };
        let w = clock.index();
        // An expiry from a coarse reading keeps its lag out of the slack wherever it is placed
        // again (before, a re-placement with the whole slack could fire it up to the lag past
        // its bound).
        let spent = if l.state.coarse() {
            spent.max(self.coarse_lags[w])
        } else {
            spent
        };
        let (tick, mode, fires_at) = self.placed(placement_of(l), expiry, spent);
        let node = l.links();
        // `node.tick()` is stable under the timer's lock while the timer names a wheel (the
        // base's node contract, `base.rs`), linked or popped.
        if usize::from(l.state.wheel()) == w + 1 && BaseWheel::kept(tick) >= node.tick() {
            // A re-arm to a later time (the timeout refresh): the entry stays where it is and
            // fires early, and the poll that finds the timer not yet due places it again
            // (`deliver`). One base-lock round trip per refresh saved, for at most one extra
            // visit per timeout period. (The entry's lane is right: a precision changes
            // lanes only through `Owner::set_precision`, which takes the entry out.)
            return Ok(());
        }
        let b = base();
        let r = Target::timer(NonNull::from(l.timer)).addr();
        // Already in this base's wheel for the clock: move the node, or link it again if a
        // poll has popped it meanwhile. Anywhere else: take it out there first.
        let here = usize::from(l.state.wheel()) == w + 1 && usize::from(l.state.base) == b;
        if !here {
            // A base that cannot be entered keeps the node linked: it must not be linked
            // anywhere else (its links are still that base's), and the service has failed.
            self.disarm(l)?;
        }
        debug_assert!(here || !l.links().is_linked(), "linked in another wheel");
        let placed = self.bases[b].locked_wheel(w, fires_at, |wheel| {
            // SAFETY: the node is in no wheel or in this one (`here`: the timer names it;
            // otherwise `disarm` took it out), and the object stays alive while linked
            // ("Safety of the timer addresses").
            unsafe { wheel.set(r, tick, mode) }
        });
        let Ok(((), ring)) = placed else {
            // In no wheel: `wheel` stays 0 (a linked node is in a base nobody walks again).
            l.state.set_wheel(0);
            return Err(self.fail(BASE_POISONED));
        };
        if ring {
            self.ring(b, w, fires_at);
        }
        l.state.base = b as u16;
        l.state.set_wheel(w as u8 + 1);
        Ok(())
    }

    /// Takes the timer out of the wheel it waits in, if any. [`Error::Poisoned`] (the service
    /// has failed) if that base cannot be entered: the timer then names no wheel, but its node
    /// may still be linked in that base, so it must not be linked anywhere else.
    #[inline]
    pub(crate) fn disarm(&self, l: &mut LockedTimer<'_>) -> Result<(), Error> {
        if l.state.wheel() == 0 {
            return Ok(());
        }
        let w = usize::from(l.state.wheel() - 1);
        let r = Target::timer(NonNull::from(l.timer)).addr();
        // A popped node (a poll has not delivered it yet) is fine: that poll will find
        // `wheel == 0` and leave the timer alone. A poisoned base keeps a linked node, but
        // nothing walks a poisoned base again, so its address is never followed.
        let base = &self.bases[usize::from(l.state.base)];
        // SAFETY: the timer names this base and wheel, so its node is in no wheel or here.
        let unlinked = base.locked_wheel(w, NO_EXPIRY, |wheel| unsafe { wheel.take(r) });
        l.state.set_wheel(0);
        unlinked
            .map(drop)
            .map_err(|Poisoned| self.fail(BASE_POISONED))
    }

    fn poll(&self, now: [u64; CLOCKS]) -> usize {
        self.poll_then(now, &mut |calls| self.run_calls(calls))
    }

    /// A poll that leaves what it would run (callbacks, wake-ups) in `out`, for the caller to
    /// run (a driver runs them after publishing its next deadline: `driver.rs`).
    pub(crate) fn poll_collect(&self, out: &mut Vec<Call>) -> usize {
        self.poll_then(self.now_all(), &mut |calls| out.append(calls))
    }

    /// Polls every base, handing each batch's calls to `after` once no lock is held.
    fn poll_then(&self, now: [u64; CLOCKS], after: &mut dyn FnMut(&mut Vec<Call>)) -> usize {
        let ticks = now.map(|n| self.res.ticks_floor(n));
        let lazy = LazyNow::from(&*self.clock, now);
        // The thread's batch and calls buffers, taken out for this poll (a callback that polls
        // again takes empty ones) and put back at the end: a poll allocates nothing once its
        // thread has polled before (`after` leaves `calls` empty).
        let mut batch = BATCH.with(Cell::take);
        batch.reserve(self.batch);
        let mut calls = CALLS.with(Cell::take);
        let mut fired = 0;
        let n = self.bases.len();
        let first = self.my_base();
        let timed = self.stats.enabled;
        for i in 0..n {
            let b = (first + i) % n;
            let base = &self.bases[b];
            let mut counted = false;
            loop {
                // Held from the pop until the batch is delivered: the poll barrier (`base.rs`).
                let Ok(delivering) = base.delivery() else {
                    self.fail(BASE_POISONED);
                    break;
                };
                // Pinned from before the pop until the entries are delivered (`timers/mod.rs`,
                // "Safety of the timer addresses").
                let guard = crossbeam_epoch::pin();
                if !counted {
                    base.counters.poll();
                    counted = true;
                }
                let popped = base.locked(|st| {
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
                            batch.push((w, Key::from_bits(u64::MAX), Target::from_addr(r)));
                        });
                        complete &= adv.complete;
                    }
                    let room = self.batch - batch.len();
                    if room == 0 {
                        complete = false;
                    } else {
                        let adv = st.sleeps.advance(ticks[MONOTONIC], room, |e| {
                            batch.push((MONOTONIC, e.key, e.value));
                        });
                        complete &= adv.complete;
                    }
                    (complete, start.map(|s| s.elapsed().as_nanos() as u64))
                });
                let Ok((complete, held)) = popped else {
                    self.fail(BASE_POISONED);
                    break;
                };
                let mut here = 0;
                for &(w, key, target) in &batch {
                    here += self.deliver(b, w, key, target, &lazy, &mut calls);
                }
                if !batch.is_empty() {
                    base.counters.batch(here as u64, held);
                }
                fired += here;
                batch.clear();
                drop(guard);
                drop(delivering);
                after(&mut calls);
                if complete {
                    break;
                }
            }
        }
        BATCH.with(|b| b.set(batch));
        debug_assert!(calls.is_empty(), "`after` takes every call");
        calls.clear();
        CALLS.with(|c| c.set(calls));
        self.flush_halt();
        fired
    }

    /// Handles one target popped from base `b`'s wheel `w` (a sleep's with its entry's key):
    /// 1 if it fired the timer.
    fn deliver(
        &self,
        b: usize,
        w: usize,
        key: Key,
        target: Target,
        now: &LazyNow<'_>,
        calls: &mut Vec<Call>,
    ) -> usize {
        let timer = match target.get() {
            Waiting::Timer(t) => t,
            Waiting::Sleep(cell) => {
                // SAFETY: the entry was in the wheel when popped, and this poll holds base
                // `b`'s delivery lock, which the sleep's holder waits for before freeing a
                // cell whose entry it could not remove (`sleep.rs`, "Why the memory stays
                // valid").
                let cell = unsafe { cell.as_ref() };
                return self.deliver_sleep(b, key, cell, now, calls);
            }
        };
        // SAFETY: the timer was linked when popped, after the caller pinned the epoch, so the
        // slot page is not recycled before the caller unpins (`timers/mod.rs`, "Safety of the
        // timer addresses"); it holds a `Timer` (slots are type-stable), whose identity is
        // checked under its lock below.
        let timer: &Timer<Itimer> = unsafe { timer.as_ref() };
        let delivered = timer.lock_visible(|mut l| {
            if !popped_here(&l, b, w) {
                return false;
            }
            l.state.set_wheel(0);
            let clock = ALL_CLOCKS[w];
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
                NotifyKind::Queue => {
                    enqueue(self, &mut l, event.seq(), |w| calls.push(Call::Wake(w)))
                }
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
                NotifyKind::None => {}
            }
            true
        });
        match delivered {
            Ok(fired) => usize::from(fired == Some(true)),
            Err(Poisoned) => {
                self.fail(TIMER_POISONED);
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

    /// Puts a sleep's entry at its deadline on base `b`'s monotonic wheel (or on the base it
    /// waits in, moving it there), under the cell's lock.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the base is (the service has then failed).
    pub(crate) fn sleep_place(
        &self,
        cell: &SleepCell,
        s: &mut SleepState<'_>,
        b: usize,
    ) -> Result<(), Error> {
        let tick = self.res.ticks_ceil(s.body.deadline);
        let here = s.at.armed;
        let b = if here { usize::from(s.at.base) } else { b };
        let old = Key::from_bits(s.body.key);
        let target = Target::sleep(NonNull::from(cell));
        // The state is written inside the base's critical section, before anyone can pop
        // the new entry.
        let placed = self.bases[b].locked_sleeps(tick, |wheel| {
            let key = if !here {
                wheel.insert_with(tick, Mode::PRECISE, target)
            } else if wheel.reschedule(old, tick).is_ok() {
                old
            } else {
                // Popped: the delivery in flight re-reads the deadline and places it.
                return;
            };
            s.body.key = key.to_bits();
            s.at.base = b as u16;
            s.at.armed = true;
        });
        let Ok(((), ring)) = placed else {
            return Err(self.fail(BASE_POISONED));
        };
        if ring {
            self.ring(b, MONOTONIC, tick);
        }
        Ok(())
    }

    /// Takes a sleep's entry out of its wheel, under the cell's lock, and clears `armed`.
    /// `Some(b)` if a poll of base `b` popped it and has not delivered it yet (it will find
    /// it not current): the caller must let that delivery finish (`Base::delivery`) before
    /// freeing the cell.
    pub(crate) fn sleep_remove(&self, s: &mut SleepState<'_>) -> Option<usize> {
        if !s.at.armed {
            return None;
        }
        s.at.armed = false;
        let b = usize::from(s.at.base);
        let key = Key::from_bits(s.body.key);
        let removed = self.bases[b].locked_sleeps(NO_EXPIRY, |w| w.remove(key));
        match removed {
            Ok((Some(_), _)) => None,
            Ok((None, _)) => Some(b),
            // Nobody pops a poisoned base again, but a poll may have popped the entry before
            // the panic: let the caller wait for its delivery all the same.
            Err(Poisoned) => {
                self.fail(BASE_POISONED);
                Some(b)
            }
        }
    }
}

/// Whether a timer popped from base `b`'s wheel `w` is still due there (under its lock, with
/// that base's delivery lock held): it still names that base and wheel, and was not linked
/// again since (`base.rs`). The order matters: `is_linked` is exact only for a node of base
/// `b`, whose delivery lock the caller holds.
#[inline]
pub(crate) fn popped_here(l: &LockedTimer<'_>, b: usize, w: usize) -> bool {
    usize::from(l.state.wheel()) == w + 1
        && usize::from(l.state.base) == b
        && !l.links().is_linked()
}

/// Puts a locked `Queue` timer's one event on its owner's queue for the arming `seq`, or,
/// if the event is already queued, makes that entry this arming's (the kernel's "already
/// pending: nothing" for its preallocated sigqueue). A poisoned queue fails the service.
/// Tasks waiting on the queue are handed to `wake`, for the caller to wake with no lock held.
pub(crate) fn enqueue(core: &Core, l: &mut LockedTimer<'_>, seq: u32, wake: impl FnMut(Waker)) {
    l.state.sigqueue_seq = seq;
    if l.state.queued() {
        return;
    }
    l.state.set_queued(true);
    let pushed = sink_of(l).push(
        EventRef {
            timer: NonNull::from(l.timer),
            id: l.id(),
            generation: l.generation(),
        },
        wake,
    );
    if pushed.is_err() {
        core.fail(QUEUE_POISONED);
    }
}

/// A locked timer's precision with its owner's default applied.
#[inline]
pub(crate) fn placement_of(l: &LockedTimer<'_>) -> Placement {
    // Relaxed (both): written under the timer's lock, which `l` holds (`set_precision`), or
    // at create; the owner's default is a setting read at each arming, with no other data.
    let p = l.fixed().precision.load(Ordering::Relaxed);
    let default = if p == 0 {
        sink_of(l).default_slack.load(Ordering::Relaxed)
    } else {
        0
    };
    Placement::of(p, default)
}
