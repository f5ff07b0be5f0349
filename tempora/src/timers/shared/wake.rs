//! Wake-ups: the one kernel timer each sleeper of a service waits on, and who moves it.
//!
//! Every sleeper waits on an [`Alarm`]: a timerfd on the monotonic clock armed at the earliest
//! firing of the bases it watches. A service with drivers has one per driver (driver `k`
//! watches the bases `b % drivers == k`), and its threads wait on it in `epoll_wait`, which
//! wakes one of them per expiry (`driver.rs`, "Who wakes"); a service without drivers has one
//! for all bases, made on first request, which an application's event loop waits on
//! (`Timers::deadline_fd`). [`Wakeups`] holds them.
//!
//! # The protocol
//!
//! A refresh (a driver's, after its poll; or after every `Timers::poll`) runs under the
//! alarm's lock: base by base, under each base's lock, it reads the base's earliest firing and
//! publishes it in the base's `sleep` and `due` (`base.rs`, "Waking a sleeping driver"; a base
//! whose `due` is still ahead is passed over, "Polling only what is due"); then it arms the fd
//! at the minimum. An arm earlier than a base's published `sleep` rings: it lowers that
//! `sleep` to its own entry and clears `due` (under the base lock) and, under the alarm's
//! lock, moves the fd to the entry if that is earlier than where the fd is armed.
//!
//! So the fd is never later than the earliest entry: a ring that waited for a refresh's lock
//! compares with that refresh's arm, which either saw its entry (the refresh read the base
//! after the arm) or is at most the `sleep` the arm compared with (each published value is at
//! or after the deadline the refresh arms). A ring never wakes anyone at once: the fd fires
//! when the entry falls due. An arm at or after its base's published earliest firing costs
//! nothing.
//!
//! # A receiver that holds the alarm
//!
//! A thread about to block in `Owner::recv` on a service with one driver may take the
//! driver's place for the wait ([`Alarm::hold`]): it sleeps until the alarm's time itself,
//! polls, and so is woken once for its own timer instead of the driver and then itself
//! (`owner.rs`, "Who fires while a receiver waits"). While a thread holds it, the alarm
//! `covers` that time: the fd is needed for what falls due earlier (a ring, or a driver's
//! refresh, arms it then), and [`Alarm::release`] gives the covered time back to the fd.
//! One thread at a time holds an alarm.
//!
//! **The backstop.** A holder may not come back when it should: a signal handler runs in its
//! wait, the thread is cancelled inside it, or a handler leaves it by `longjmp` (a C
//! program's `sigwait`, `tempora-posix`). So while a hold covers a time, the fd stays armed
//! at most [`HOLD_BACKSTOP_NS`] after it, and at least half that after it, so that a holder
//! on time is never raced by the driver: it moves the fd on once per half backstop of
//! progress, not at every wake-up. A driver's thread woken by the backstop finds the cover
//! overdue by half a backstop or more, and the hold **lapses**: the cover is dropped and the
//! fd armed at the deadline, as with no holder. A lapsed hold may be taken by another
//! receiver; each hold has a ticket, so the refresh or release of a hold that was taken over
//! acts as a non-holder's (a refresh) or not at all (a release). So a timer is late by at
//! most the backstop whatever a holder does, and a holder that never returns costs the
//! service nothing but its one hold.

use super::base::Base;
use crate::clock::{ClockId, Resolution, ALL_CLOCKS, CLOCKS};
use crate::sync::{rank, RankedMutex};
#[cfg(test)]
use crate::sync::{AtomicU64, Ordering};
#[cfg(not(loom))]
use crate::timers::object::fd;
use crossbeam_utils::CachePadded;
#[cfg(not(loom))]
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// "No expiry": a wheel or a sleeper with nothing armed.
pub(crate) const NO_EXPIRY: u64 = u64::MAX;

/// Where an alarm fired on purpose rests (a clock step, callbacks handed to the driver): no
/// refresh or hold moves it until a driver's thread has woken (`Alarm::woke`).
const FIRED: u64 = 0;

/// The monotonic wheel's index: alarms are on that clock.
const MONOTONIC: usize = ClockId::Monotonic.index();

/// How long after the time it covers a holder may be gone before a driver's thread fires in
/// its place (the module doc, "The backstop"): the bound on lateness a holder can cause.
pub(crate) const HOLD_BACKSTOP_NS: u64 = 10_000_000;

/// Where the fd rests while a hold covers `covered`: kept if it is already between half a
/// backstop and a backstop after it (`armed`), else moved a backstop after it.
fn backstop(covered: u64, armed: u64) -> u64 {
    if covered == NO_EXPIRY {
        return NO_EXPIRY;
    }
    let far = covered.saturating_add(HOLD_BACKSTOP_NS);
    if (covered.saturating_add(HOLD_BACKSTOP_NS / 2)..=far).contains(&armed) {
        armed
    } else {
        far
    }
}

/// A service's alarms.
pub(crate) struct Wakeups {
    /// One per driver; driver `k` watches the bases `b % drivers == k`.
    pub(crate) alarms: Box<[CachePadded<Alarm>]>,
    /// The alarm of a service without drivers, made on first request
    /// (`Timers::deadline_fd`).
    pub(crate) deadline: OnceLock<Alarm>,
    /// Test hook: rings (arms earlier than a published deadline, clock steps, shutdown).
    #[cfg(test)]
    pub(crate) rings: AtomicU64,
}

impl Wakeups {
    pub(crate) fn new(alarms: Box<[CachePadded<Alarm>]>) -> Wakeups {
        Wakeups {
            alarms,
            deadline: OnceLock::new(),
            #[cfg(test)]
            rings: AtomicU64::new(0),
        }
    }

    /// The alarm that watches base `b`, if any yet.
    fn of(&self, b: usize) -> Option<&Alarm> {
        match self.alarms.len() {
            0 => self.deadline.get(),
            n => Some(&self.alarms[b % n]),
        }
    }

    /// Fires every alarm at once (a clock step, `Timers::clock_was_set`): its sleeper polls,
    /// which re-evaluates every base.
    pub(crate) fn ring_all(&self) {
        #[cfg(test)]
        self.rings
            .fetch_add(self.alarms.len().max(1) as u64, Ordering::Relaxed);
        self.alarms.iter().for_each(|a| a.lower(FIRED, 0));
        if let Some(d) = self.deadline.get() {
            d.lower(FIRED, 0);
        }
    }

    /// An entry at tick `tick` of base `b`'s wheel `w` is earlier than what the base's sleeper
    /// published: moves its alarm to the entry (`now` reads every clock; it is read for a
    /// wheel other than the monotonic one, or a clock source other than the OS's).
    #[cold]
    pub(crate) fn ring(
        &self,
        res: Resolution,
        b: usize,
        w: usize,
        tick: u64,
        now: impl FnOnce() -> [u64; CLOCKS],
    ) {
        #[cfg(test)]
        self.rings.fetch_add(1, Ordering::Relaxed);
        let Some(alarm) = self.of(b) else { return };
        if w == MONOTONIC && alarm.os_time {
            alarm.lower(res.tick_start(tick), 0);
        } else {
            let now = now();
            alarm.lower(to_monotonic(res, w, tick, &now), now[MONOTONIC]);
        }
    }
}

/// Who refreshes an alarm, and how ([`Alarm::refresh`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Refresh {
    /// A receiver that holds the alarm, by its hold's ticket ([`Alarm::hold`]): it covers
    /// the deadline itself. A ticket whose hold was taken over refreshes as a non-holder.
    pub(crate) holder: Option<u64>,
    /// Re-arm a past deadline that is unchanged (a deadline fd must become readable; a
    /// driver that finds one polls again instead).
    pub(crate) rearm_past: bool,
}

/// Where an alarm's fd fires, and what a receiver holding it covers.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Where the fd fires (monotonic ns; `NO_EXPIRY`: disarmed).
    pub(crate) armed: u64,
    /// The time a holding receiver wakes at (`NO_EXPIRY` while none holds).
    pub(crate) covered: u64,
    /// A receiver holds the alarm.
    pub(crate) held: bool,
    /// The ticket of the latest hold (the module doc, "The backstop").
    pub(crate) ticket: u64,
    /// The hold lapsed: its holder was overdue, and another receiver may take it over.
    pub(crate) lapsed: bool,
    /// Where a driver's thread running calls wants a follower woken if a call outlives it
    /// ([`Alarm::grace`]; `NO_EXPIRY`: none): a holder never arms the fd later. Cleared by a
    /// driver's thread's refresh (its batch is done) or wake-up.
    pub(crate) grace: u64,
    /// The service stops: the fd fires every millisecond, and nothing moves it again.
    pub(crate) stopped: bool,
    /// The last refresh's deadline: no timer falls due before it but those that rang since.
    pub(crate) deadline: u64,
}

/// A timerfd on the monotonic clock, armed at the earliest firing of the bases it watches
/// (the module doc), and for a driver the `epoll` instance its threads wait in.
pub(crate) struct Alarm {
    #[cfg(not(loom))]
    fd: OwnedFd,
    /// A driver's: the timerfd, edge-triggered. Threads blocked in one `epoll_wait` are
    /// woken one per event, the last to wait first.
    #[cfg(not(loom))]
    epoll: Option<OwnedFd>,
    /// The service's clock is the OS's: arms are absolute on the fd's clock. Otherwise they
    /// are made relative from the service's own reading.
    os_time: bool,
    /// A driver's (its threads wait in `epoll`), not a deadline fd.
    driver: bool,
    pub(crate) plan: RankedMutex<Plan, { rank::ALARM }>,
}

impl Alarm {
    /// A disarmed alarm: a driver's (with an `epoll` instance its threads wait in) or a
    /// deadline fd.
    pub(crate) fn new(driver: bool, os_time: bool) -> std::io::Result<Alarm> {
        #[cfg(not(loom))]
        let fd = fd::timerfd(libc::CLOCK_MONOTONIC, true)?;
        #[cfg(not(loom))]
        let epoll = if driver {
            Some(fd::epoll_edge(&fd)?)
        } else {
            None
        };
        Ok(Alarm {
            #[cfg(not(loom))]
            fd,
            #[cfg(not(loom))]
            epoll,
            os_time,
            driver,
            plan: RankedMutex::new(Plan {
                armed: NO_EXPIRY,
                covered: NO_EXPIRY,
                held: false,
                ticket: 0,
                lapsed: false,
                grace: NO_EXPIRY,
                stopped: false,
                deadline: NO_EXPIRY,
            }),
        })
    }

    /// The timerfd (an application's event loop waits on the deadline fd's).
    #[cfg(not(loom))]
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The alarm's lock; nothing panics under it (a system call, stores, base sections that
    /// poison their own lock), so a poisoned one is intact.
    pub(crate) fn lock(&self) -> crate::sync::MutexGuard<'_, Plan, { rank::ALARM }> {
        self.plan.lock_or_recover()
    }

    /// Arms the fd at monotonic time `at` (`NO_EXPIRY`: disarms it), the service's monotonic
    /// clock reading `mono` (used only off the OS clocks), with the lock held.
    fn set(&self, plan: &mut Plan, at: u64, mono: u64) {
        if plan.stopped {
            return;
        }
        plan.armed = at;
        #[cfg(not(loom))]
        {
            // 0 disarms a timerfd: a deadline in the past fires at 1 ns instead.
            match (at, self.os_time) {
                (NO_EXPIRY, _) => fd::arm(&self.fd, 0, 0),
                (at, true) => fd::arm(&self.fd, libc::TFD_TIMER_ABSTIME, at.max(1)),
                (at, false) => fd::arm(&self.fd, 0, at.saturating_sub(mono).max(1)),
            };
        }
        #[cfg(loom)]
        let _ = mono;
    }

    /// A ring: moves the fd to `at` if that is earlier than where it fires and than what a
    /// holding receiver covers.
    pub(crate) fn lower(&self, at: u64, mono: u64) {
        let mut plan = self.lock();
        if at < plan.armed && at < plan.covered {
            self.set(&mut plan, at, mono);
        }
    }

    /// Publishes each of `bases`' earliest firing in it (a base with nothing due since its
    /// last one keeps it), and arms the fd at the earliest (a holder, or an earlier holder's
    /// cover, moves it only if it is sooner: the module doc). Returns the deadline
    /// (monotonic ns).
    pub(crate) fn refresh<'a>(
        &self,
        bases: impl Iterator<Item = &'a CachePadded<Base>>,
        res: Resolution,
        max_deferral: u64,
        now: &[u64; CLOCKS],
        how: Refresh,
    ) -> u64 {
        let Refresh { holder, rearm_past } = how;
        let mut plan = self.lock();
        let mono = now[MONOTONIC];
        let mut deadline = NO_EXPIRY;
        for base in bases {
            // Nothing of a base whose `due` is still ahead can fire before it, and what it
            // published stands (`base.rs`, "Polling only what is due").
            let due = base.due();
            if due > mono {
                deadline = deadline.min(due);
                continue;
            }
            // A poisoned base fires nothing again: it has no deadline.
            let _ = base.locked(|st| {
                let (earliest, by_time) = base_deadline(res, max_deferral, st, now);
                let sleep = std::array::from_fn(|w| from_monotonic(res, w, earliest, now));
                base.publish(st, earliest, by_time, sleep);
                deadline = deadline.min(earliest);
            });
        }
        plan.deadline = deadline;
        if plan.held && holder == Some(plan.ticket) {
            plan.covered = deadline;
            plan.lapsed = false;
        } else {
            // A driver's thread's refresh: its calls are done, or it polls anew.
            plan.grace = NO_EXPIRY;
            if plan.covered != NO_EXPIRY
                && mono >= plan.covered.saturating_add(HOLD_BACKSTOP_NS / 2)
            {
                // The holder is overdue: its hold lapses (the module doc, "The backstop").
                plan.covered = NO_EXPIRY;
                plan.lapsed = true;
            }
        }
        if plan.armed == FIRED && self.driver {
            // Fired on purpose for a driver's thread, which re-arms it once awake (`woke`).
            return deadline;
        }
        let want = if deadline < plan.covered {
            deadline
        } else {
            backstop(plan.covered, plan.armed).min(plan.grace)
        };
        if want != plan.armed || (rearm_past && want <= mono) {
            self.set(&mut plan, want, mono);
        }
        deadline
    }

    /// A thread about to run a call with others behind it wants a follower woken if the call
    /// outlives `at` (`driver.rs`, "Callbacks that block"): moves the fd to `at`, never past
    /// the last refresh's deadline; later only if it is still at `prev`, where this thread
    /// put it (a ring that lowered it since is kept). Returns where the fd now fires.
    pub(crate) fn grace(&self, at: u64, prev: u64, mono: u64) -> u64 {
        let mut plan = self.lock();
        let want = at.min(plan.deadline);
        plan.grace = want;
        // Fired on purpose: the wake-up it owes a driver's thread is not moved.
        if plan.armed != FIRED && (want < plan.armed || (plan.armed == prev && want > prev)) {
            self.set(&mut plan, want, mono);
        }
        plan.armed
    }

    /// A receiver takes the alarm for its wait: the time it must wake at (`NO_EXPIRY`:
    /// nothing is armed) and its hold's ticket, or `None` if another receiver holds it (a
    /// hold that lapsed may be taken over) or the service stops. The fd moves to the
    /// backstop; a ring or a refresh arms it again for what falls due sooner.
    pub(crate) fn hold(&self) -> Option<(u64, u64)> {
        let mut plan = self.lock();
        if (plan.held && !plan.lapsed) || plan.stopped || plan.armed == FIRED {
            return None;
        }
        plan.held = true;
        plan.lapsed = false;
        plan.ticket += 1;
        plan.covered = plan.armed;
        let at = backstop(plan.covered, NO_EXPIRY).min(plan.grace);
        self.set(&mut plan, at, 0);
        Some((plan.covered, plan.ticket))
    }

    /// The receiver of hold `ticket` gives the alarm back: what it covered goes to the fd
    /// (`mono`: the service's monotonic reading, off the OS clocks). Nothing, if its hold was
    /// taken over.
    pub(crate) fn release(&self, ticket: u64, mono: u64) {
        let mut plan = self.lock();
        if !plan.held || plan.ticket != ticket {
            return;
        }
        plan.held = false;
        plan.lapsed = false;
        let covered = std::mem::replace(&mut plan.covered, NO_EXPIRY);
        if covered < plan.armed {
            self.set(&mut plan, covered, mono);
        }
    }

    /// Fires the fd now for a driver's thread (callbacks handed to it), whatever a holder
    /// covers.
    pub(crate) fn fire(&self) {
        let mut plan = self.lock();
        self.set(&mut plan, FIRED, 0);
    }

    /// A driver's thread woke: an alarm fired on purpose (`FIRED`) may be armed again.
    pub(crate) fn woke(&self) {
        let mut plan = self.lock();
        plan.grace = NO_EXPIRY;
        if plan.armed == FIRED {
            plan.armed = NO_EXPIRY;
        }
    }

    /// The service stops: nothing moves the fd again but [`Alarm::pass_on`], and it fires
    /// now, waking one thread; each thread that ends passes the wake-up on.
    pub(crate) fn stop(&self) {
        let mut plan = self.lock();
        plan.stopped = true;
        self.pass_on();
    }

    /// Fires the fd now, once a stopped service's thread ends, for the next waiting thread
    /// (an expiry nobody waits for is kept for the next `epoll_wait`). A timerfd is never
    /// read here, so it fires once per arm: a periodic arm would not wake them all.
    pub(crate) fn pass_on(&self) {
        #[cfg(not(loom))]
        fd::arm(&self.fd, 0, 1);
    }

    /// Blocks a driver's thread until the alarm fires for it (`true`), or for at most `idle`
    /// (`false`). Of the threads waiting, the one that waited last is woken first.
    #[cfg(not(loom))]
    pub(crate) fn wait(&self, idle: Option<std::time::Duration>) -> bool {
        let epoll = self.epoll.as_ref().expect("a driver's alarm");
        let ms = idle.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as libc::c_int);
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        loop {
            // SAFETY: epoll_wait(2) on our epoll fd with room for one event, which lives for
            // the call.
            let r = unsafe { libc::epoll_wait(epoll.as_raw_fd(), &mut ev, 1, ms) };
            if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return r > 0;
        }
    }
}

#[cfg(loom)]
impl Alarm {
    /// Loom models run no driver thread.
    pub(crate) fn wait(&self, _idle: Option<std::time::Duration>) -> bool {
        unreachable!("loom models run no driver thread")
    }
}

/// The monotonic time (ns) by which a sleeper must wake for a base's wheels, with the clocks
/// at `now`: their earliest firing (`Wheel::next_fire`, not the next re-placement visit), or
/// `max_deferral` ns after their earliest deferrable firing if that is sooner (a deferrable
/// timer never wakes anyone before its bound); `NO_EXPIRY` if none.
pub(crate) fn earliest_fire(
    res: Resolution,
    max_deferral: u64,
    st: &super::base::BaseState,
    now: &[u64; CLOCKS],
) -> u64 {
    base_deadline(res, max_deferral, st, now).0
}

/// [`earliest_fire`], and whether every entry of the base fires by the monotonic clock alone
/// (none on another clock, none deferrable: `base.rs`, "Polling only what is due"), read in
/// the same pass over the wheels.
fn base_deadline(
    res: Resolution,
    max_deferral: u64,
    st: &super::base::BaseState,
    now: &[u64; CLOCKS],
) -> (u64, bool) {
    let mut earliest = st
        .sleeps
        .next_fire()
        .map_or(NO_EXPIRY, |t| res.tick_start(t));
    let mut by_time = true;
    for (w, wheel) in st.wheels.iter().enumerate() {
        let fire = wheel.next_fire();
        let deferred = wheel.next_deferred_fire();
        by_time &= deferred.is_none() && (w == MONOTONIC || fire.is_none());
        if let Some(t) = fire {
            earliest = earliest.min(to_monotonic(res, w, t, now));
        }
        if let Some(t) = deferred {
            earliest = earliest.min(to_monotonic(res, w, t, now).saturating_add(max_deferral));
        }
    }
    (earliest, by_time)
}

/// Monotonic time (ns) at which wheel `w`'s tick `tick` starts, with the clocks at `now`.
pub(crate) fn to_monotonic(res: Resolution, w: usize, tick: u64, now: &[u64; CLOCKS]) -> u64 {
    let at = res.tick_start(tick);
    let mono = now[MONOTONIC];
    if ALL_CLOCKS[w] == ClockId::Monotonic {
        at
    } else {
        mono.saturating_add(at.saturating_sub(now[w]))
    }
}

/// The tick on wheel `w`'s clock of monotonic time `mono_ns` (rounded up: a timer before it is
/// before the deadline).
pub(crate) fn from_monotonic(res: Resolution, w: usize, mono_ns: u64, now: &[u64; CLOCKS]) -> u64 {
    if mono_ns == NO_EXPIRY {
        return NO_EXPIRY;
    }
    let mono = now[MONOTONIC];
    let at = if ALL_CLOCKS[w] == ClockId::Monotonic {
        mono_ns
    } else {
        now[w].saturating_add(mono_ns.saturating_sub(mono))
    };
    res.ticks_ceil(at)
}

#[cfg(all(test, loom))]
mod loom_tests;
