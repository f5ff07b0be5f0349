//! [`Timers`], the service a user holds, and [`Group`], a handle on a statistics group of its
//! owners: making owners, polling without drivers, the deadline fd, statistics. The calls on
//! timers are [`Owner`]'s (`owner.rs`); this file holds what spans every owner.

use crate::clock::ClockId;
use crate::error::Error;
use crate::instant::Instant;
use crate::stats::group::GroupNode;
use crate::stats::tally::Tally;
use crate::stats::{DriverStats, GroupStats, RegistryStats, Stats};
use crate::sync::Ordering;
use crate::timers::calls::owner::Owner;
use crate::timers::firing::driver::Drivers;
use crate::timers::object::EventQueue;
use crate::timers::shared::contract::OwnerPart;
use crate::timers::shared::wake;
use crate::timers::shared::wake::NO_EXPIRY;
use crate::timers::shared::Core;
use std::fmt;
#[cfg(not(loom))]
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

/// The timer service: bases, clock, registry. Cloning shares it. See the [module doc](super).
#[derive(Clone)]
pub struct Timers {
    pub(crate) core: Arc<Core>,
    /// Stops and joins the drivers when the last `Timers` handle and the last
    /// [`Sleep`](crate::time::Sleep) go (owners keep only the core, so their events stay
    /// readable).
    pub(crate) drivers: Arc<Drivers>,
}

impl fmt::Debug for Timers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timers")
            .field("bases", &self.core.bases.len())
            .field("tick_ns", &self.core.res.nanos())
            .field("timers", &self.core.registry.len())
            .finish()
    }
}

impl Timers {
    /// A new owner: a namespace of timer IDs with its own event queue, directly under the
    /// service (in no group).
    pub fn owner(&self) -> Owner {
        new_owner(&self.core, &self.core.stats.root)
    }

    /// [`Timers::owner`], or [`Error::OutOfMemory`] if the owner's memory (a KiB or two,
    /// fixed: its queue, statistics and ID namespace) cannot be allocated, where `owner`
    /// aborts the process as a failed allocation does. Nothing is left half-made. One
    /// allocation is checked by a probe only (the `timers` module doc, "Memory", says which
    /// and when it can still abort).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (`EAGAIN`).
    pub fn try_owner(&self) -> Result<Owner, Error> {
        try_new_owner(&self.core, &self.core.stats.root)
    }

    /// The top-level group named `name`, made if it does not exist ([`crate::stats`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a name that is empty, longer than 64 bytes, or holds a
    /// `/`, a `"`, a `\` or a control character.
    pub fn group(&self, name: &str) -> Result<Group, Error> {
        self.core.health.check_fork()?;
        Group::child_of(&self.core, &self.core.stats.root, name)
    }

    /// The service's statistics: every owner's and group's counts and lateness, and the
    /// bases', flushed first (every update made before the call is in them). Reading never
    /// makes a thread that arms or fires timers wait ([`crate::stats`]).
    ///
    /// In a child forked after the service was built: empty (`timers` module doc, "Fork").
    pub fn stats(&self) -> Stats {
        stats_of(&self.core)
    }

    /// The service's monotonic clock, now: the clock of its sleeps, timeouts and intervals
    /// ([`crate::time`]) and of [`Timers::next_deadline`] (`CLOCK_MONOTONIC` on the OS
    /// clocks; the manual time on a [`ManualClock`](crate::clock::ManualClock)).
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.core.clock.now(ClockId::Monotonic))
    }

    /// The wheels' tick in nanoseconds.
    pub fn tick_nanos(&self) -> u64 {
        self.core.res.nanos()
    }

    /// Number of bases.
    pub fn bases(&self) -> usize {
        self.core.bases.len()
    }

    /// Timers of all owners of this service (exact when no create or delete is in flight).
    pub fn timer_count(&self) -> usize {
        self.core.registry.len()
    }

    /// Number of background driver threads.
    pub fn drivers(&self) -> usize {
        self.core.wake.alarms.len()
    }

    /// Callbacks that panicked (each panic is caught; the poll goes on).
    pub fn callback_panics(&self) -> u64 {
        self.core.callback_panics.load(Ordering::Relaxed)
    }

    /// `Ok` while the service works; [`Error::Poisoned`] (naming what) once a panic inside one
    /// of its critical sections, or a driver thread that died, left part of it unusable. From
    /// then on arming calls fail with that error and receivers return it once their queues are
    /// empty; polls go on serving what is intact.
    ///
    /// [`Error::Forked`] in a child forked after the service was built: every call of the
    /// service fails there (`timers` module doc, "Fork").
    pub fn health(&self) -> Result<(), Error> {
        self.core.health.check_fork()?;
        match self.core.health.failure.get() {
            Some(&what) => Err(Error::Poisoned(what)),
            None => Ok(()),
        }
    }

    /// Fires every timer due by now (each clock read once, at the start): queues events, runs
    /// callbacks. Returns the number of expiries this call handled (events queued or refreshed,
    /// callbacks run).
    ///
    /// It is a barrier, also while drivers or other threads poll: when it returns, every timer
    /// due by its clock reading has expired, whoever popped it. Its event is queued (a
    /// `try_recv` after it finds it), and a settime or gettime after it sees the fired state.
    /// Callbacks that another poller fired may still be running on that poller's thread.
    ///
    /// Callbacks run on the calling thread with no tempora lock held. A panicking callback is
    /// caught and counted ([`Timers::callback_panics`]). A base poisoned by a panic inside
    /// tempora is skipped and reported by [`Timers::health`].
    ///
    /// A service without drivers also serves its inspection endpoint here
    /// ([`inspect`](crate::inspect): `tempora ls PID`), after firing and without ever waiting
    /// on a client: when nobody is connected a poll pays one comparison, and one
    /// non-blocking `accept` every 5 ms at most; while a client is answered, a poll spends
    /// at most a few milliseconds on it, and the [`Timers::deadline_fd`] is made readable
    /// again so that a loop waiting on it goes on polling until the answer is out.
    pub fn poll(&self) -> usize {
        if self.core.health.forked() {
            return 0;
        }
        self.core.poll_app()
    }

    /// A file descriptor (a timerfd on the monotonic clock) that becomes readable when a timer is
    /// due, for an application-driven service
    /// ([`Builder::drivers`](crate::timers::Builder::drivers)`(0)`) whose event loop waits on it
    /// beside its sockets and calls [`Timers::poll`] when it is readable: `poll` re-arms it at the
    /// next deadline, which also makes it not readable again (there is no need to `read(2)` it). An
    /// arm that moves the next deadline earlier re-arms it at once; an arm later than it costs no
    /// system call (the drivers' rule, `base.rs`). Like [`Timers::next_deadline`], it may fire
    /// early after timers were cancelled (a poll then fires nothing and re-arms it), never late.
    ///
    /// Made on the first call (a service that never asks pays nothing); closed when the last
    /// thing that holds the service's core is gone: its `Timers` handles, sleeps and owners.
    ///
    /// Without drivers there is no watch on the realtime clock: after the wall clock is set,
    /// call [`Timers::clock_was_set`] (it makes the fd readable at once), or absolute
    /// `CLOCK_REALTIME` timers fire when the monotonic time they were converted to comes.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if the service has driver threads (they fire the timers) or
    /// runs on a clock source other than the OS's (a timerfd cannot follow it);
    /// [`Error::Io`] if the timerfd cannot be made.
    pub fn deadline_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        let core = &*self.core;
        core.health.check_fork()?;
        if !core.wake.alarms.is_empty() {
            return Err(Error::InvalidConfig(
                "a deadline fd is for a service without drivers (drivers(0))",
            ));
        }
        if !core.clock.is_os_time() {
            return Err(Error::InvalidConfig(
                "a deadline fd needs the OS clocks: a timerfd cannot follow another clock source",
            ));
        }
        if core.wake.deadline.get().is_none() {
            // A racing first call's fd wins; ours is closed. The fd is visible before any
            // base publishes a deadline, so every ring finds it.
            let _ = core.wake.deadline.set(wake::Alarm::new(false, true)?);
            core.refresh_deadline();
        }
        #[cfg(not(loom))]
        return Ok(core.wake.deadline.get().expect("set above").fd().as_fd());
        #[cfg(loom)]
        unreachable!("loom models make no fd")
    }

    /// Tells the service that the realtime clock was set: drivers wake and re-evaluate
    /// absolute `CLOCK_REALTIME` timers at once (with drivers on the OS clocks this is
    /// detected by itself, through `timerfd`'s `TFD_TIMER_CANCEL_ON_SET`).
    pub fn clock_was_set(&self) {
        if self.core.health.forked() {
            return;
        }
        self.core.wake.ring_all();
    }

    /// The instant (on the service's monotonic clock, [`Timers::now`]) at which [`Timers::poll`] next
    /// fires a timer, or `None` if no timer is armed: each wheel's `next_fire`, so a loop that
    /// sleeps until it wakes once per expiry instant (it may be early after timers were
    /// cancelled, never late). Deadlines of realtime and boot-time timers are converted with
    /// the clocks' current offsets. May be in the past: poll at once. Takes each base's lock
    /// briefly.
    pub fn next_deadline(&self) -> Option<Instant> {
        let core = &*self.core;
        if core.health.forked() {
            return None;
        }
        let now = core.now_all();
        let best = core
            .bases
            .iter()
            // A poisoned base fires nothing again: it has no deadline.
            .filter_map(|base| {
                base.locked(|st| wake::earliest_fire(core.res, core.max_deferral, st, &now))
                    .ok()
            })
            .min()
            .unwrap_or(NO_EXPIRY);
        (best != NO_EXPIRY).then_some(Instant::from_nanos(best))
    }

    /// Lets the calling thread fire the service's timers while it blocks in a wait of its
    /// own: for a thread that waits for what one of its timers sends it (a signal it takes
    /// with `sigtimedwait`, a message on its own channel), so that the expiry wakes one
    /// thread, this one, instead of the driver and then this one. [`Owner::recv`] waits so
    /// (its doc, "Who fires while a receiver waits"); the drop-in's `sigwait` does too.
    ///
    /// `wait(t)` blocks until the thread's own reason comes (it returns `true`) or until the
    /// instant `t` (`None`: no limit; it returns `false`, early too if it likes). The thread
    /// takes the driver's place: `wait` is given the service's next deadline (or `until` if
    /// that is sooner) and, when it returns `false` before `until`, the thread fires what is
    /// due, as the driver would have (the callbacks it finds go to the driver's threads),
    /// and waits again. Returns what the last `wait` returned (`Some(false)` once `until`
    /// passed), or `None` at once, without calling `wait`, when the thread cannot lead:
    /// the service has more drivers than one or none, runs on another clock source than the
    /// OS's, another thread leads, the thread is inside tempora (a signal handler that
    /// interrupted a call), or the memory a first poll needs cannot be had. The caller then
    /// waits as usual.
    ///
    /// A thread that leads and does not come back (a signal handler runs long in its wait,
    /// or `wait` panics, or never returns) delays the other timers by at most 10 ms: then a
    /// driver's thread fires in its place (`wake.rs`, "The backstop").
    pub fn wait_leading(
        &self,
        until: Option<std::time::Instant>,
        wait: impl FnMut(Option<std::time::Instant>) -> bool,
    ) -> Option<bool> {
        if self.core.health.forked() {
            return None;
        }
        crate::timers::firing::driver::wait_leading(&self.core, until, wait)
    }

    /// Time from now until [`Timers::next_deadline`] (zero if it has passed), for a loop's
    /// `epoll_wait`/`poll` timeout; `None` if no timer is armed.
    pub fn next_timeout(&self) -> Option<Duration> {
        let at = self.next_deadline()?;
        Some(at.saturating_duration_since(self.now()))
    }
}

/// A new owner of `core` in `group`.
///
/// In a child forked after the service was built, an owner every call of which fails with
/// [`Error::Forked`]: it joins none of the service's lists (their locks may be held for ever).
/// `Timers::owner`, `Group::owner`: aborts, as an allocation failure does, if the owner's
/// memory cannot be had.
fn new_owner(core: &Arc<Core>, group: &Arc<GroupNode>) -> Owner {
    try_new_owner(core, group)
        .unwrap_or_else(|_| std::alloc::handle_alloc_error(std::alloc::Layout::new::<EventQueue>()))
}

/// `Timers::try_owner`, `Group::try_owner`: each of the owner's allocations fallible (its
/// `Arc`s after `alloc::probe_arc`), and nothing left behind on failure but dead weak
/// entries in the service's lists, pruned as they grow.
fn try_new_owner(core: &Arc<Core>, group: &Arc<GroupNode>) -> Result<Owner, Error> {
    let forked = core.health.forked();
    let tally = if forked {
        Tally::try_unlisted(&core.stats, group, core.stats.next_owner_id())?
    } else {
        Tally::try_new(&core.stats, group, core.stats.next_owner_id())?
    };
    crate::alloc::probe_arc::<EventQueue>()?;
    let sink = Arc::new(EventQueue::new(tally));
    if !forked {
        core.health.register(&sink)?;
    }
    let part = OwnerPart {
        core: core.clone(),
        sink: sink.clone(),
    };
    let reg = core.registry.try_owner(part)?;
    let _ = sink.owner.set(reg.downgrade());
    Ok(Owner {
        reg: std::mem::ManuallyDrop::new(reg),
    })
}

/// `Timers::stats`.
pub(crate) fn stats_of(core: &Core) -> Stats {
    if core.health.forked() {
        return Stats::default();
    }
    core.stats.flush();
    let bases = core
        .bases
        .iter()
        .enumerate()
        .map(|(i, b)| b.counters.read(i))
        .collect();
    let mut drivers = DriverStats::default();
    // Relaxed: counters, read alone.
    drivers.wakeups = core.drivers.wakeups.load(Ordering::Relaxed);
    drivers.spare_takeovers = core.drivers.takeovers.load(Ordering::Relaxed);
    // The spares started and not retired (the handles' list also holds spares that ended
    // since the last start).
    drivers.spare_threads = core
        .drivers
        .crews
        .iter()
        .map(|c| c.started.load(Ordering::Relaxed))
        .sum();
    let mut registry = RegistryStats::default();
    registry.id_table_buckets = core.registry.buckets();
    registry.id_table_bytes = core.registry.table_bytes();
    registry.pooled_bytes = core.registry.pooled_bytes();
    Stats::of(&core.stats, bases, drivers, registry)
}

/// A group of owners ([`crate::stats`]): its statistics are the sums over its subtree, and it
/// may cap the timers living in it. Cloning shares it; a group lives as long as its service's
/// core (the tree keeps it), whether or not a handle does.
#[derive(Clone)]
pub struct Group {
    core: Arc<Core>,
    node: Arc<GroupNode>,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("path", &self.node.path)
            .field("max_timers", &self.node.max_timers())
            .field("live", &self.node.live())
            .finish()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // In a forked child the service's core is never dropped (its drop could free what
        // the parent's threads were using under their locks): leaked with one count more.
        if self.core.health.forked() {
            std::mem::forget(self.core.clone());
        }
    }
}

impl Group {
    fn child_of(core: &Arc<Core>, parent: &Arc<GroupNode>, name: &str) -> Result<Group, Error> {
        let bad = name.is_empty()
            || name.len() > 64
            || name
                .chars()
                .any(|c| c == '/' || c == '"' || c == '\\' || c.is_control());
        if bad {
            return Err(Error::InvalidConfig(
                "a group name is 1 to 64 bytes with no '/', '\"', '\\' or control character",
            ));
        }
        Ok(Group {
            core: core.clone(),
            node: parent.child(name),
        })
    }

    /// The subgroup named `name`, made if it does not exist.
    ///
    /// # Errors
    /// As [`Timers::group`].
    pub fn subgroup(&self, name: &str) -> Result<Group, Error> {
        self.core.health.check_fork()?;
        Group::child_of(&self.core, &self.node, name)
    }

    /// A new owner in this group.
    pub fn owner(&self) -> Owner {
        new_owner(&self.core, &self.node)
    }

    /// [`Group::owner`], or [`Error::OutOfMemory`] as [`Timers::try_owner`].
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (`EAGAIN`).
    pub fn try_owner(&self) -> Result<Owner, Error> {
        try_new_owner(&self.core, &self.node)
    }

    /// The names from the top-level group down to this one, joined by `/`.
    pub fn path(&self) -> &str {
        &self.node.path
    }

    /// Caps the timers living in this group's subtree (`None`: no cap, the default). A
    /// create that would pass the cap of this group or of any group above it fails with
    /// [`Error::LimitReached`] (`EAGAIN`) and changes nothing; concurrent creates never pass
    /// it. Lowering it below [`Group::live_timers`] deletes nothing: creates fail until
    /// deletes bring the subtree under it.
    pub fn set_max_timers(&self, max: Option<u64>) {
        self.node.set_max_timers(max);
    }

    /// The cap set by [`Group::set_max_timers`].
    pub fn max_timers(&self) -> Option<u64> {
        self.node.max_timers()
    }

    /// The timers living in the subtree now: exact, kept by every create and delete for the
    /// cap, with no flush.
    pub fn live_timers(&self) -> u64 {
        self.node.live().unwrap_or(0)
    }

    /// The group's statistics, flushed first: sums over its subtree, and its members.
    pub fn stats(&self) -> GroupStats {
        if self.core.health.forked() {
            return GroupStats::default();
        }
        self.core.stats.flush();
        GroupStats::of(&self.core.stats, &self.node)
    }
}
