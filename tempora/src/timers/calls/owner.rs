//! An owner's calls: the POSIX timer calls on its timers, and receiving their events.

use crate::alloc::{probe_arc, try_box};
use crate::clock::{ClockId, LazyNow, TimeSpec};
use crate::error::Error;
use crate::registry::{self, TimerId};
use crate::stats::{Counter, OwnerStats};
use crate::sync::{self, Ordering, Poisoned};
use crate::timers::object::itimer::{self, Consumed};
use crate::timers::object::notify::{self, Event, Registered};
use crate::timers::object::placement_of;
use crate::timers::object::serial::{CallFn, Serial};
use crate::timers::object::signal::SignalCell;
use crate::timers::object::types::{
    self, ItimerSpec, Notify, NotifyKind, Placement, Precision, SetFlags, TimerInfo,
};
use crate::timers::object::{
    callback_of, Attached, CallbackCell, EventQueue, Itimer, ItimerInit, LockedTimer,
};
use crate::timers::shared::health::QUEUE_POISONED;
use crate::timers::shared::Core;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// An ID namespace of [`Timers`](crate::timers::Timers), with its event queue. Cloning shares it; it is deleted, with
/// all its timers, by [`Owner::destroy`] or when its last handle is dropped.
#[derive(Clone)]
pub struct Owner {
    /// Dropped by `Drop` unless the process forked since the service was built: then leaked
    /// (its teardown would take locks a parent's thread may hold for ever).
    pub(crate) reg: ManuallyDrop<registry::Owner<Itimer>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if self.core().health.forked() {
            return; // leaked: see the `timers` module doc, "Fork"
        }
        // SAFETY: dropped once, here; `reg` is not used after.
        unsafe { ManuallyDrop::drop(&mut self.reg) };
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owner")
            .field("ids", &self.reg)
            .field("queued", &self.sink().len())
            .finish()
    }
}

impl Owner {
    /// Creates a disarmed timer on `clock` with the next free ID. While a
    /// [`restore`](Owner::restore) of this owner makes its timers, a create waits (parked)
    /// until it is done.
    ///
    /// # Errors
    /// [`Error::NoFreeId`] (`EAGAIN`) when every ID is in use; [`Error::LimitReached`]
    /// (`EAGAIN`) when a group the owner is in is at its
    /// [`max_timers`](crate::timers::Group::set_max_timers); [`Error::OutOfMemory`] (`EAGAIN`) when
    /// the timer's memory cannot be allocated (the `timers` module doc, "Memory");
    /// [`Error::OwnerDeleted`].
    #[doc(alias = "timer_create")]
    pub fn create(&self, clock: ClockId, notify: Notify) -> Result<TimerId, Error> {
        self.create_then(None, clock, notify, None)
    }

    /// Creates a timer with exactly the ID `id` (restore mode, [`Owner::set_restore_ids`]).
    /// Waits for a running [`restore`](Owner::restore) of this owner as [`Owner::create`] does.
    ///
    /// # Errors
    /// [`Error::NotRestoring`] if restore mode is off; [`Error::InvalidId`] for a negative ID
    /// or one beyond the ID limit ([`Builder::id_bits`](crate::timers::Builder::id_bits));
    /// [`Error::IdInUse`] if this owner has a timer `id`; [`Error::LimitReached`];
    /// [`Error::OutOfMemory`]; [`Error::OwnerDeleted`]. Nothing is allocated or changed on
    /// error.
    #[doc(alias = "timer_create")]
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn create_with_id(
        &self,
        id: i32,
        clock: ClockId,
        notify: Notify,
    ) -> Result<TimerId, Error> {
        self.create_then(Some(id), clock, notify, None)
    }

    /// `create` (`requested: None`) or `create_with_id`, then `then` on the new timer under
    /// its lock (no second lookup; a restore sets each timer's state so).
    pub(crate) fn create_then(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: Notify,
        then: Option<&mut dyn FnMut(LockedTimer<'_>)>,
    ) -> Result<TimerId, Error> {
        self.core().health.check_fork()?;
        // Before the group charge, which a create waiting for a restore would otherwise hold.
        self.reg.wait_open();
        self.create_via(clock, notify, |init| self.reg.create(requested, init, then))
    }

    /// The service's side of every create (callback name, group limit, statistics) around
    /// `create`, the registry's insert of a timer built from the init it is handed.
    pub(crate) fn create_via(
        &self,
        clock: ClockId,
        notify: Notify,
        create: impl FnOnce(ItimerInit) -> Result<TimerId, Error>,
    ) -> Result<TimerId, Error> {
        self.core().health.check()?;
        if let Some(name) = notify.callback_name() {
            if let Some(why) = types::callback_name_error(name) {
                return Err(Error::InvalidConfig(why));
            }
        }
        let kind = notify.kind();
        // The service's own allocations on a create (the registry's are its slot pages and
        // shards): a callback's `Arc<Serial>`, probed first (std has no fallible `Arc::new`:
        // `probe_arc`), and the box of what the timer carries, fallible as the registry's are
        // (`Error::OutOfMemory`).
        let cell = |f, name| {
            probe_arc::<Serial>()?;
            let serial = Serial::new(f);
            try_box(Attached::Callback(CallbackCell { serial, name })).map(Some)
        };
        let attached = match notify {
            Notify::Callback { name, f } => cell(CallFn(f, self.downgrade()), name)?,
            Notify::Signal { .. } | Notify::ThreadSignal { .. } | Notify::SignalWithId { .. } => {
                Some(try_box(Attached::Signal(SignalCell::new(&notify)?))?)
            }
            Notify::None | Notify::Queue => None,
        };
        let init = ItimerInit {
            clock,
            notify: kind,
            attached,
            sink: Arc::as_ptr(self.sink()),
        };
        let tally = &self.sink().tally;
        // Charged before the create and given back if it fails, so that concurrent creates
        // never pass a limit (`stats/group.rs`, "Limits").
        if let Err(group) = tally.group.charge() {
            tally.add(Counter::Refused, 1);
            return Err(Error::LimitReached(group));
        }
        // A `Queue` timer's room on the owner's queue, so that its expiries never allocate
        // (`notify.rs`, "Memory"); given back by its delete (`on_delete`).
        let queued = kind == NotifyKind::Queue;
        if queued {
            let room = self.sink().reserve();
            if room != Ok(true) {
                tally.group.uncharge();
                return Err(match room {
                    Ok(_) => Error::OutOfMemory,
                    Err(_) => Error::Poisoned(QUEUE_POISONED),
                });
            }
        }
        let r = create(init);
        match r {
            Ok(_) => tally.add(Counter::Created, 1),
            Err(_) => {
                tally.group.uncharge();
                if queued {
                    self.sink().unreserve();
                }
            }
        }
        r
    }

    /// The owner's ID: unique among the owners its service ever made (the `owner` of its
    /// [`OwnerStats`] and of the `owner` label in [`Stats::to_prometheus`](crate::Stats::to_prometheus)).
    pub fn id(&self) -> u64 {
        self.sink().tally.key()
    }

    /// The owner's statistics, flushed first ([`crate::stats`]).
    /// In a child forked after the service was built, all zeros (`timers` module doc, "Fork").
    pub fn stats(&self) -> OwnerStats {
        let tally = &self.sink().tally;
        if self.core().health.forked() {
            return OwnerStats::default();
        }
        self.core().stats.flush();
        OwnerStats::of(tally)
    }

    /// The service's core.
    pub(crate) fn core(&self) -> &Core {
        &self.reg.service().core
    }

    /// The owner's event queue.
    pub(crate) fn sink(&self) -> &Arc<EventQueue> {
        &self.reg.service().sink
    }

    /// Arms or disarms timer `id` and returns its previous setting (computed as
    /// [`Owner::gettime`] would have just before). A zero `value` disarms (and zeroes the
    /// interval); otherwise the timer expires after `value` (or at `value` on its clock with
    /// [`SetFlags::ABSTIME`], at once if that has passed), then every `interval` if it is
    /// non-zero. Resets the overrun and voids an event still pending from the last arming (a
    /// signal timer's signal already queued cannot be taken back: it is delivered, and the new
    /// arming sends its own; the `timers` module's divergence table).
    ///
    /// Async-signal-safe (the `timers` module's "Signal handlers").
    ///
    /// # Errors
    /// [`Error::InvalidTime`] (`EINVAL`) for negative seconds or nanoseconds outside
    /// `0..1e9`, checked before the lookup; [`Error::UnknownTimer`] (`EINVAL`);
    /// [`Error::OwnerDeleted`]; [`Error::WouldDeadlock`] (`EDEADLK`) from a signal handler
    /// that interrupted a tempora call holding a lock on the same thread.
    #[doc(alias = "timer_settime")]
    pub fn settime(
        &self,
        id: TimerId,
        flags: SetFlags,
        value: impl Into<TimeSpec>,
        interval: impl Into<TimeSpec>,
    ) -> Result<ItimerSpec, Error> {
        let value = value.into().to_nanos()?;
        let interval = interval.into().to_nanos()?;
        let core = self.core();
        core.health.check()?;
        // From a signal handler that interrupted a call holding one of tempora's locks: this
        // one may need it (module doc, "Signal handlers").
        if sync::holds_a_lock() {
            return Err(Error::WouldDeadlock);
        }
        let now = core.lazy_now();
        let old = self.reg.with_timer(id, |mut l| {
            if let Placement::Slack(slack) = placement_of(&l) {
                // Room in the slack for the coarse clock's lag, with as much again to spare
                // for grouping (`Precision`): read the coarse clock, an upper bound. Only for
                // a one-shot arming: a periodic timer's expiry is the base of every later
                // period, whose re-arms have no reading to compensate, so an expiry moved
                // later by the bound would make each of them fire up to the lag past its
                // slack (and shift the whole schedule).
                if value != 0
                    && interval == 0
                    && slack / 2 >= core.coarse_lags[ClockId::Monotonic.index()]
                {
                    now.coarse();
                }
            }
            if l.state.notify() == NotifyKind::Callback {
                if let Some(cell) = callback_of(&l) {
                    cell.serial.drop_folded();
                }
            }
            let (state, published) = l.state_and_published();
            let (old, arm) = state.settime(published, &now, flags.is_abstime(), value, interval);
            let mut orphans = None;
            if l.state.notify() == NotifyKind::Signal {
                orphans = core.signal_settime(&mut l);
            }
            core.apply_spent(&mut l, arm, now.spent())
                .map(|()| (old, orphans))
        });
        core.health.flush_halt();
        let (old, orphans) = old??;
        if let Some(key) = orphans {
            core.hand_over(key);
        }
        let what = if value == 0 {
            Counter::Disarmed
        } else {
            Counter::Armed
        };
        // Without allocating: a signal handler may make this call (module doc, "Signal
        // handlers").
        self.sink().tally.add_without_allocating(what, 1);
        Ok(old.into())
    }

    /// Sets when timer `id` may fire after its expiry ([`Precision`]). An armed timer is
    /// placed again at once under the new precision; one whose expiry is being delivered
    /// takes it at its next arming.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`];
    /// [`Error::Poisoned`] if the service has failed.
    pub fn set_precision(&self, id: TimerId, precision: Precision) -> Result<(), Error> {
        let core = self.core();
        core.health.check()?;
        let r = self.reg.with_timer(id, |mut l| {
            // Relaxed: read under this lock (`placement_of`).
            l.fixed()
                .precision
                .store(precision.pack(), Ordering::Relaxed);
            if l.state.wheel() == 0 {
                return Ok(());
            }
            // In a wheel: take it out (the lane may change) and place it as it is now. A
            // signal timer retrying a signal it owes waits for no expiry: it retries at once,
            // and its retry places it again.
            core.disarm(&mut l)?;
            let clock = l.state.expiry_clock();
            let expiry = if l.state.owed() {
                core.lazy_now().get(clock)
            } else {
                l.state.expiry
            };
            let arm = itimer::Arm::At { clock, expiry };
            core.apply(&mut l, arm)
        });
        core.health.flush_halt();
        r?
    }

    /// Timer `id`'s precision, as last set ([`Precision::Default`] if never).
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`].
    pub fn precision(&self, id: TimerId) -> Result<Precision, Error> {
        self.core().health.check_fork()?;
        self.reg.with_timer(id, |l| {
            // Relaxed: written under this lock.
            Precision::unpack(l.fixed().precision.load(Ordering::Relaxed))
        })
    }

    /// The slack of this owner's timers whose precision is [`Precision::Default`] (`None` or
    /// zero: precise), applied at each of their armings from now on: a per-owner
    /// `PR_SET_TIMERSLACK`. Timers already armed keep their placement until re-armed.
    pub fn set_default_slack(&self, slack: Option<Duration>) {
        let ns = types::slack_ns(slack);
        // Relaxed: a setting read at each arming (`placement_of`).
        self.sink().default_slack.store(ns, Ordering::Relaxed);
    }

    /// The owner's default slack ([`Owner::set_default_slack`]); `None` if precise.
    pub fn default_slack(&self) -> Option<Duration> {
        // Relaxed: see `set_default_slack`.
        types::slack_of_ns(self.sink().default_slack.load(Ordering::Relaxed))
    }

    /// Timer `id`'s remaining time and interval. Zero for a disarmed or fired one-shot timer;
    /// 1 ns for an armed timer that is due but not yet fired; a periodic timer whose event is
    /// pending reads the time to its next period, in `(0, interval]`.
    ///
    /// Async-signal-safe, and takes no lock (the `timers` module's "Signal handlers").
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`]; [`Error::WouldDeadlock`]
    /// (`EDEADLK`) from a signal handler that interrupted a tempora call holding a lock on the
    /// same thread.
    #[doc(alias = "timer_gettime")]
    pub fn gettime(&self, id: TimerId) -> Result<ItimerSpec, Error> {
        let core = self.core();
        core.health.check_fork()?;
        // A handler that interrupted a lock holder or an epoch pin (module doc, "Signal
        // handlers").
        if sync::holds_a_lock() {
            return Err(Error::WouldDeadlock);
        }
        let now = core.lazy_now();
        // Without the lock (a copy of the state, checked by the lock's version): so a
        // `gettime` holds nothing a signal handler on this thread could need. While another
        // thread's holder changes the state, it waits (this thread holds no lock: checked above).
        let s = self.reg.read_state(id, |state| state.gettime(&now))?;
        Ok(s.into())
    }

    /// The overrun latched when timer `id`'s last event was consumed: the periods it missed
    /// before that, capped at `i32::MAX`; 0 after create or settime and for one-shot timers.
    ///
    /// Async-signal-safe (the `timers` module's "Signal handlers").
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`]; [`Error::WouldDeadlock`]
    /// (`EDEADLK`) from a signal handler that interrupted a tempora call holding a lock on the
    /// same thread.
    #[doc(alias = "timer_getoverrun")]
    pub fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.core().health.check_fork()?;
        // A handler that interrupted a lock holder or an epoch pin (module doc, "Signal
        // handlers").
        if sync::holds_a_lock() {
            return Err(Error::WouldDeadlock);
        }
        if let Ok(overrun) = self
            .reg
            .read(id, |_, p| itimer::overrun_last_lock_free(p))?
        {
            return Ok(overrun);
        }
        // A signal timer whose signal is outstanding learns here whether it was delivered
        // (`sigdeliver.rs`): under the lock.
        let core = self.core();
        let now = core.lazy_now();
        // Pinned across the look and the release of the followers it may find gone
        // (`lookout.rs`).
        let _pin = sync::pin();
        let r = self.reg.with_timer(id, |mut l| {
            if l.state.notify() == NotifyKind::Signal {
                core.signal_check(&mut l, &now);
            }
            itimer::overrun_last(l.published())
        });
        core.release_followers(core.my_base(), &now);
        core.health.flush_halt();
        r
    }

    /// Deletes timer `id`: it is disarmed, an event of it still queued is dropped unseen (a
    /// signal already queued is delivered: it cannot be taken back), its
    /// callback is released, and its ID becomes free. A call of its callback that a poll has
    /// already taken (a driver thread's, or another thread's `poll`) is not waited for: it may
    /// run, or still be running, after `delete` returns; the closure is dropped after it.
    /// Expiries taken while a call runs, and folded into it, are dropped: a callback that
    /// deletes its own timer is not called again.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`].
    #[doc(alias = "timer_delete")]
    pub fn delete(&self, id: TimerId) -> Result<(), Error> {
        self.core().health.check_fork()?;
        let r = self.reg.delete(id);
        self.core().health.flush_halt();
        r
    }

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
    /// [`Error::ServiceStopped`] if its service stopped (its last [`Timers`](crate::timers::Timers) handle and [`Sleep`](crate::time::Sleep) dropped), [`Error::Poisoned`] if
    /// the service failed (see [`Timers::health`](crate::timers::Timers::health)). Never waits for an event that cannot come.
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

    /// Turns exact-ID (restore) mode on or off.
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn set_restore_ids(&self, on: bool) {
        if self.core().health.forked() {
            return;
        }
        self.reg.set_restore_ids(on);
    }

    /// Whether exact-ID (restore) mode is on.
    pub fn restore_ids(&self) -> bool {
        self.reg.restore_ids()
    }

    /// The owner's timers, without blocking creators or deleters: each live timer's lock is
    /// taken for a moment, no other. A timer that exists for the whole listing is reported
    /// exactly once; timers created or deleted meanwhile may or may not appear. Order: by
    /// slot, not by ID. A timer whose lock a panic poisoned is left out.
    pub fn timers(&self) -> Vec<TimerInfo> {
        let mut out = Vec::new();
        if self.core().health.forked() {
            return out;
        }
        let _ = self.reg.for_each_locked(|l| {
            out.push(TimerInfo {
                id: l.id(),
                clock: l.state.clock(),
                notify: l.state.notify(),
                status: l.state.status(),
            })
        });
        out
    }

    /// Deletes the owner and all its timers; receivers waiting on it return
    /// [`Error::OwnerDeleted`]. Idempotent.
    pub fn destroy(&self) {
        if self.core().health.forked() {
            return;
        }
        self.reg.destroy();
    }

    /// Whether the owner has been destroyed.
    pub fn is_destroyed(&self) -> bool {
        self.reg.is_destroyed()
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
