//! An owner's calls: the POSIX timer calls on its timers; receiving their events is
//! `receive.rs`.

use crate::alloc::{probe_arc, try_box};
use crate::clock::{ClockId, TimeSpec};
use crate::error::Error;
use crate::registry::{self, TimerId};
use crate::stats::{Counter, OwnerStats};
use crate::sync::{self, Ordering};
use crate::timers::object::itimer;
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
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

/// An ID namespace of [`Timers`](crate::timers::Timers), with its event queue. Cloning shares it;
/// it is deleted, with all its timers, by [`Owner::destroy`] or when its last handle is dropped.
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
        // (`signals/mod.rs`): under the lock.
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
