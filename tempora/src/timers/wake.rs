//! Wake-ups: who must be told when an arming is earlier than a sleeper's deadline, and how.
//!
//! A service's sleepers are its drivers (each on its [`Doorbell`], with a [`Standby`] whose
//! timerfd a spare waits on while the driver runs callbacks) or, for a service without
//! drivers, the [`DeadlineFd`] an application's event loop waits on. [`Wakeups`] holds them
//! and rings the right one; the deadline a sleeper publishes, and the ring test an armer runs
//! against it under the base lock, are "Waking a sleeping driver" in `base.rs`.

use super::base::{Base, BaseState};
use super::doorbell::{Doorbell, NO_EXPIRY};
use super::fd;
#[cfg(not(loom))]
use super::standby::{Standby, Steps as _};
use crate::clock::{ClockId, Resolution, ALL_CLOCKS, CLOCKS};
use crate::sync::{rank, MutexGuard, RankedMutex};
#[cfg(test)]
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;

/// The monotonic wheel's index: the deadline fd and the standby fds are on that clock.
const MONOTONIC: usize = ClockId::Monotonic.index();

/// A service's sleepers and the rings that wake them.
pub(crate) struct Wakeups {
    /// One per driver; driver `k` serves the bases `b % drivers == k`.
    pub(crate) bells: Box<[CachePadded<Doorbell>]>,
    /// One per driver: the spares standing by while it runs callbacks (`driver.rs`,
    /// "Callbacks that block"); empty without spares.
    #[cfg(not(loom))]
    pub(crate) standby: Box<[CachePadded<Standby>]>,
    /// The deadline fd of a service without drivers, made on first request
    /// (`Timers::deadline_fd`).
    pub(crate) deadline: OnceLock<DeadlineFd>,
    /// Test hook: doorbell rings (arms earlier than a driver's sleep, clock steps, shutdown).
    #[cfg(test)]
    pub(crate) rings: AtomicU64,
}

impl Wakeups {
    /// `drivers` doorbells, and the given standbys (one per driver, or none).
    pub(crate) fn new(
        drivers: usize,
        #[cfg(not(loom))] standby: Box<[CachePadded<Standby>]>,
    ) -> Wakeups {
        Wakeups {
            bells: (0..drivers).map(|_| CachePadded::default()).collect(),
            #[cfg(not(loom))]
            standby,
            deadline: OnceLock::new(),
            #[cfg(test)]
            rings: AtomicU64::new(0),
        }
    }

    /// Rings every driver (a clock step, shutdown), or makes the deadline fd readable at once
    /// (its loop polls, which re-evaluates every base).
    pub(crate) fn ring_all(&self) {
        #[cfg(test)]
        self.rings
            .fetch_add(self.bells.len() as u64, Ordering::Relaxed);
        self.bells.iter().for_each(|b| b.ring());
        #[cfg(not(loom))]
        self.standby.iter().for_each(|s| s.kick(1));
        if let Some(d) = self.deadline.get() {
            d.lower(0);
        }
    }

    /// An entry at tick `tick` of base `b`'s wheel `w` is earlier than what the base's
    /// sleeper (its driver, or the deadline fd) published: rings the driver serving base `b`,
    /// or moves the deadline fd to it (`now` reads every clock, for a wheel other than the
    /// monotonic one).
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
        if !self.bells.is_empty() {
            let k = b % self.bells.len();
            self.bells[k].ring();
            #[cfg(not(loom))]
            if let Some(s) = self.standby.get(k) {
                // Where the entry fires on the standby's monotonic fd: at once for the
                // other clocks (a rare ring; converting would read every clock).
                s.kick(if w == MONOTONIC {
                    res.tick_start(tick)
                } else {
                    1
                });
            }
        } else if let Some(d) = self.deadline.get() {
            let at = if w == MONOTONIC {
                res.tick_start(tick)
            } else {
                to_monotonic(res, w, tick, &now())
            };
            d.lower(at);
        }
    }

    /// Re-arms the deadline fd, if there is one, at the earliest firing of `bases` (after a
    /// poll), publishing it in every base as a driver publishes its sleep (`DeadlineFd`).
    pub(crate) fn refresh_deadline(
        &self,
        bases: &[CachePadded<Base>],
        res: Resolution,
        max_deferral: u64,
        now: impl FnOnce() -> [u64; CLOCKS],
    ) {
        let Some(d) = self.deadline.get() else {
            return;
        };
        let mut g = d.lock();
        let now = now();
        let mut deadline = NO_EXPIRY;
        for base in bases {
            // A poisoned base fires nothing again: it has no deadline.
            let _ = base.locked(|st| {
                st.ring_lowers = true;
                deadline = deadline.min(earliest_fire(res, max_deferral, st, &now));
                for w in 0..CLOCKS {
                    st.sleep[w] = from_monotonic(res, w, deadline, &now);
                }
            });
        }
        // Unchanged and still ahead: the fd is armed right and not readable.
        let mono = now[MONOTONIC];
        if deadline != *g || deadline <= mono {
            d.set(&mut g, deadline);
        }
    }
}

/// The monotonic time (ns) by which a sleeper must wake for a base's wheels, with the clocks
/// at `now`: their earliest firing (`Wheel::next_fire`, not the next re-placement visit), or
/// `max_deferral` ns after their earliest deferrable firing if that is sooner (a deferrable
/// timer never wakes anyone before its bound); `NO_EXPIRY` if none.
pub(crate) fn earliest_fire(
    res: Resolution,
    max_deferral: u64,
    st: &BaseState,
    now: &[u64; CLOCKS],
) -> u64 {
    st.wheels
        .iter()
        .enumerate()
        .flat_map(|(w, wheel)| {
            let fire = wheel.next_fire().map(|t| to_monotonic(res, w, t, now));
            let deferred = wheel
                .next_deferred_fire()
                .map(|t| to_monotonic(res, w, t, now).saturating_add(max_deferral));
            fire.into_iter().chain(deferred)
        })
        .chain(st.sleeps.next_fire().map(|t| res.tick_start(t)))
        .min()
        .unwrap_or(NO_EXPIRY)
}

/// Monotonic time (ns) at which wheel `w`'s tick `tick` starts, with the clocks at `now`.
pub(crate) fn to_monotonic(res: Resolution, w: usize, tick: u64, now: &[u64; CLOCKS]) -> u64 {
    let at = res.tick_start(tick);
    let mono = now[ClockId::Monotonic.index()];
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
    let mono = now[ClockId::Monotonic.index()];
    let at = if ALL_CLOCKS[w] == ClockId::Monotonic {
        mono_ns
    } else {
        now[w].saturating_add(mono_ns.saturating_sub(mono))
    };
    res.ticks_ceil(at)
}

/// The deadline fd of an application-driven service (`Timers::deadline_fd`): a timerfd on
/// the monotonic clock, armed at the earliest firing of all bases, so that an event loop
/// waits on it instead of a driver thread.
///
/// It follows the drivers' protocol ("Waking a sleeping driver" in `base.rs`), with the
/// fd in the driver's place: a refresh (after every `Timers::poll`) publishes its deadline
/// in every base's `sleep`, base by base under each base's lock, and arms the fd, all under
/// the fd's lock; an arm earlier than a base's published `sleep` rings, which lowers that
/// `sleep` to the new entry and, under the fd's lock, moves the fd earlier if the entry is
/// before what the fd is armed at. A ring that waited for a refresh's lock compares with
/// that refresh's deadline, which either saw its entry (it scanned the base after the arm) or
/// is at most the value the arm compared with; so the fd is never armed later than the
/// earliest entry, and an arm later than the published deadline costs no system call.
#[derive(Debug)]
pub(crate) struct DeadlineFd {
    pub(crate) fd: OwnedFd,
    /// The monotonic time (ns) the fd is armed at, `NO_EXPIRY` if disarmed.
    pub(crate) armed: RankedMutex<u64, { rank::DEADLINE_FD }>,
}

impl DeadlineFd {
    /// A disarmed timerfd on the monotonic clock.
    pub(crate) fn new() -> std::io::Result<DeadlineFd> {
        Ok(DeadlineFd {
            fd: fd::timerfd(libc::CLOCK_MONOTONIC, true)?,
            armed: RankedMutex::new(NO_EXPIRY),
        })
    }

    /// The fd's lock (no panic happens under it: a system call, stores, base sections that
    /// poison their own lock).
    pub(crate) fn lock(&self) -> MutexGuard<'_, u64, { rank::DEADLINE_FD }> {
        self.armed.lock_or_recover()
    }

    /// Arms the fd at monotonic time `at` (`NO_EXPIRY`: disarms it), with its lock held.
    /// Re-arming also resets its readability: it is readable only once `at` has passed.
    pub(crate) fn set(&self, armed: &mut u64, at: u64) {
        // 0 disarms a timerfd: a deadline at time 0 (in the past) fires at 1 ns instead.
        let ns = if at == NO_EXPIRY { 0 } else { at.max(1) };
        fd::arm(&self.fd, libc::TFD_TIMER_ABSTIME, ns);
        *armed = at;
    }

    /// A ring: moves the fd to `at` if that is earlier than where it is armed.
    pub(crate) fn lower(&self, at: u64) {
        let mut g = self.lock();
        if at < *g {
            self.set(&mut g, at);
        }
    }
}
