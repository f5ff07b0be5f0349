//! Async sleeps, timeouts and intervals on tempora's bases and wheels, for any executor
//! (tokio, smol, a hand-written one): a program can hold its millions of timeouts here.
//!
//! ```no_run
//! # async fn example() {
//! use std::time::Duration;
//! use tempora::time;
//!
//! time::sleep(Duration::from_millis(10)).await;
//! let r = time::timeout(Duration::from_secs(1), async { 42 }).await;
//! assert_eq!(r, Ok(42));
//! # }
//! ```
//!
//! # What a sleep is
//!
//! A [`Sleep`] is an ID-less timer: a deadline, a waker and one entry in the monotonic wheel
//! of one base (the base of the thread that first polls it), fired by the same drivers or
//! [`Timers::poll`] as the service's interval timers and placed by the same never-early rule
//! (`ceil(deadline / tick)`). It has no ID, no slot and no hash-table entry: nobody addresses
//! it but the future that holds it. Its state lives inside the future, which is `!Unpin`: the
//! wheel entry points at it from the first poll until the future is dropped (`Box::pin` it, or
//! `pin!`, as for any such future). The service's timer wheels keep 32 bytes per entry.
//!
//! * It is registered on its first poll, not at creation: a sleep that is never polled costs
//!   no wheel entry.
//! * [`Sleep::reset`] moves its deadline. A later deadline (the per-request timeout refresh)
//!   only stores it: the entry fires at the old deadline, finds the new one not reached and
//!   waits again (at most one extra visit per refresh period). An earlier one moves the entry.
//! * Dropping it takes its entry out of the wheel. If a poll has just popped the entry and is
//!   delivering it, the drop waits for that delivery: the rest of that poll's batch (up to
//!   [`Builder::batch`](crate::Builder::batch) entries), and only then.
//! * It completes once the service's monotonic clock has reached its deadline, never before:
//!   a poll that pops the entry early (after a later reset) places it again.
//!
//! A sleep keeps its service running: the drivers of a [`Timers`] stop when its last handle
//! *and* its last sleep are gone (any sleep, pending or not: also an [`Interval`] or a
//! [`Timeout`] someone holds), so a pending sleep completes even if the `Timers` it came from
//! was dropped. What it does not survive is a failed service ([`Timers::health`]): a sleep on
//! a base whose driver died or that a panic poisoned does not complete; the failure is
//! reported there (and by every owner's receivers), and a poll that would arm a sleep on a
//! poisoned base panics with it.
//!
//! # The free functions
//!
//! [`sleep`], [`sleep_until`], [`timeout`] and [`interval`] use one process-wide service
//! ([`global`]): the OS clocks, the default configuration, built on first use. The methods of
//! the same names on [`Timers`] use that service instead (a manual clock in tests, an
//! application-driven service with no driver, its own bases).

use crate::clock::{duration_nanos, ClockId};
use crate::sync::{rank, RankedMutex};
use crate::timers::core::Core;
use crate::timers::driver::Drivers;
use crate::timers::sleep::{SleepCell, SleepState};
use crate::Timers;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A future that completes at a deadline on its service's monotonic clock. See the
/// [module doc](self).
#[must_use = "a sleep does nothing unless polled (`.await`)"]
pub struct Sleep {
    /// The service (its drivers keep running while this handle exists).
    drivers: Arc<Drivers>,
    cell: SleepCell,
    /// The wheel entry points at `cell` once polled. `!Unpin` is also what makes the
    /// holder's `Pin<&mut Sleep>` (and `&mut self` in `drop`) sound while a delivery on another
    /// thread holds `&SleepCell`: references to `!Unpin` types are not assumed unique
    /// (rustc emits no `noalias` for them, and Miri exempts them), as every intrusive future
    /// relies on.
    _pinned: PhantomPinned,
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}

impl Timers {
    /// A sleep of `d` from now on the service's monotonic clock.
    pub fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(after(&self.core, d))
    }

    /// A sleep until `deadline`: ns on the service's monotonic clock
    /// ([`Timers::now`]`(ClockId::Monotonic)`).
    pub fn sleep_until(&self, deadline: u64) -> Sleep {
        Sleep {
            drivers: self.drivers.clone(),
            cell: SleepCell::new(deadline),
            _pinned: PhantomPinned,
        }
    }

    /// `future`, or [`Elapsed`] if it has not completed `d` from now.
    pub fn timeout<F: Future>(&self, d: Duration, future: F) -> Timeout<F> {
        Timeout {
            future,
            sleep: self.sleep(d),
        }
    }

    /// An interval whose first tick completes at once and whose ticks then follow every
    /// `period`.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn interval(&self, period: Duration) -> Interval {
        assert!(
            !period.is_zero(),
            "tempora::time: an interval's period must be non-zero"
        );
        Interval {
            sleep: Box::pin(self.sleep(Duration::ZERO)),
            period: duration_nanos(period),
        }
    }
}

/// `now + d` on the service's monotonic clock, saturating.
fn after(core: &Core, d: Duration) -> u64 {
    core.clock
        .now(ClockId::Monotonic)
        .saturating_add(duration_nanos(d))
}

impl Sleep {
    fn core(&self) -> &Core {
        &self.drivers.core
    }

    /// The deadline: ns on the service's monotonic clock.
    pub fn deadline(&self) -> u64 {
        self.cell.read(|_, body| body.deadline)
    }

    /// Whether the deadline has passed and a poll of the service saw it (the next poll of
    /// this future returns `Ready`).
    pub fn is_elapsed(&self) -> bool {
        self.cell.read(|at, _| at.fired)
    }

    /// Moves the deadline to `deadline` (ns on the service's monotonic clock), also after the
    /// sleep completed (it then waits again). The task is woken at the new deadline if it
    /// polled the sleep since it last completed; otherwise its next poll (`.await`) registers
    /// it, as any poll registers the task that polls.
    pub fn reset(self: Pin<&mut Self>, deadline: u64) {
        let this = self.into_ref().get_ref();
        let core = this.core();
        // SAFETY: `Pin<&mut Self>`: the holder, alone.
        unsafe {
            this.cell.holder(|s| {
                let later = deadline >= s.body.deadline;
                s.body.deadline = deadline;
                if s.at.armed && later {
                    // The entry fires early and its delivery places it again (module doc).
                    return;
                }
                let polled = s.at.armed || s.at.fired;
                s.at.fired = false;
                if polled {
                    place(core, &this.cell, s);
                }
            })
        };
        core.health.flush_halt();
    }

    /// [`Sleep::reset`] to `d` from now.
    pub fn reset_after(self: Pin<&mut Self>, d: Duration) {
        let deadline = after(self.core(), d);
        self.reset(deadline);
    }
}

/// Places a sleep's entry (on the calling thread's base if it has none).
///
/// # Panics
/// If the base is poisoned: the service has failed (`Timers::health`), and the sleep could
/// never complete.
fn place(core: &Core, cell: &SleepCell, s: &mut SleepState<'_>) {
    if let Err(e) = core.sleep_place(cell, s, core.my_base()) {
        panic!("tempora::time: cannot arm a sleep: {e}");
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.into_ref().get_ref();
        let core = this.core();
        let waker = cx.waker();
        // SAFETY: `Pin<&mut Self>`: the holder, alone.
        let first = unsafe { !this.cell.polled(true) };
        // A first poll has no waker stored: clone it before taking the lock, which is then
        // taken once.
        let mut fresh = first.then(|| waker.clone());
        let mut old = None;
        loop {
            // SAFETY: `Pin<&mut Self>`: the holder, alone.
            let r = unsafe {
                this.cell.holder(|s| {
                    if s.at.fired {
                        return Some(true);
                    }
                    if !s.body.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        // A waker is cloned, and the one it replaces dropped, outside the
                        // lock: both run the executor's code.
                        old = s.body.waker.replace(fresh.take()?);
                    }
                    if !s.at.armed {
                        place(core, &this.cell, s);
                    }
                    Some(false)
                })
            };
            drop(old.take());
            core.health.flush_halt();
            match r {
                Some(true) => return Poll::Ready(()),
                Some(false) => return Poll::Pending,
                None => fresh = Some(waker.clone()),
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: the holder, alone.
        if unsafe { !self.cell.polled(false) } {
            // Never polled: no waker, no entry (a reset before the first poll only moved the
            // deadline). A timeout whose future was ready at once costs its sleep nothing.
            return;
        }
        let core = self.core();
        // SAFETY: `&mut self`: the holder, alone.
        let (in_flight, waker) = unsafe {
            self.cell
                .holder(|s| (core.sleep_remove(s), s.body.waker.take()))
        };
        drop(waker);
        if let Some(b) = in_flight {
            // A poll of base `b` popped the entry and delivers it under this lock: once we
            // hold it, that delivery is over (`timers/sleep.rs`). Poisoned: it ended too.
            drop(core.bases[b].delivery());
        }
        core.health.flush_halt();
    }
}

/// [`Timers::timeout`]: a future with a deadline.
#[derive(Debug)]
#[must_use = "a timeout does nothing unless polled (`.await`)"]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

/// The error of a [`Timeout`] whose deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl<F> Timeout<F> {
    /// The wrapped future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The sleep that bounds it (to [`Sleep::reset`] the deadline).
    pub fn sleep(self: Pin<&mut Self>) -> Pin<&mut Sleep> {
        // SAFETY: structural pinning: `sleep` is never moved out of a pinned `Timeout`.
        unsafe { self.map_unchecked_mut(|t| &mut t.sleep) }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of both fields: neither is moved out of a pinned
        // `Timeout`, and `Timeout` has no `Drop` that could move them (nor `Unpin` impl that
        // would let them move).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        // SAFETY: as above.
        let sleep = unsafe { Pin::new_unchecked(&mut this.sleep) };
        sleep.poll(cx).map(|()| Err(Elapsed))
    }
}

/// Ticks at a fixed period ([`Timers::interval`]). A tick that is late by more than a period
/// skips the periods it missed: the next tick is the first period boundary after now.
#[derive(Debug)]
pub struct Interval {
    sleep: Pin<Box<Sleep>>,
    period: u64,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled time (ns on the service's monotonic
    /// clock).
    pub async fn tick(&mut self) -> u64 {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (see [`Interval::tick`]).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<u64> {
        let at = self.sleep.deadline();
        let now = self.sleep.core().clock.now(ClockId::Monotonic);
        // A tick already due completes without waiting for a poll of the service (the first
        // one, and one the task comes late for).
        if now < at && self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let missed = now.saturating_sub(at) / self.period;
        let next = at.saturating_add(missed.saturating_add(1).saturating_mul(self.period));
        self.sleep.as_mut().reset(next);
        Poll::Ready(at)
    }

    /// The period, in ns.
    pub fn period(&self) -> u64 {
        self.period
    }
}

/// The process-wide service of the free functions: OS clocks, the default configuration
/// (one driver), built on first use and never stopped.
///
/// # Panics
/// If it cannot be built: its driver thread cannot start ([`try_global`] reports that).
pub fn global() -> &'static Timers {
    try_global().expect("tempora: the global service cannot start")
}

/// [`global`], or the error building it met (the OS refused its driver thread: `EAGAIN` and
/// the like); the next call tries again. One service is built however many threads ask at
/// once, and the C ABI's default owner is an owner of this same service.
pub fn try_global() -> Result<&'static Timers, crate::Error> {
    static GLOBAL: OnceLock<Timers> = OnceLock::new();
    // Held while the service is built, so that one is built; a failed attempt leaves
    // `GLOBAL` empty for the next call.
    #[cfg(not(loom))]
    static BUILDING: RankedMutex<(), { rank::BUILDING }> = RankedMutex::new(());
    // Loom's mutex has no `const` constructor (and no loom model builds the global service).
    #[cfg(loom)]
    static BUILDING: std::sync::LazyLock<RankedMutex<(), { rank::BUILDING }>> =
        std::sync::LazyLock::new(|| RankedMutex::new(()));
    if let Some(t) = GLOBAL.get() {
        return Ok(t);
    }
    // Nothing is changed under it but `GLOBAL`, which a panic leaves empty or set.
    let _building = BUILDING.lock_or_recover();
    if let Some(t) = GLOBAL.get() {
        return Ok(t);
    }
    let timers = Timers::builder().build()?;
    Ok(GLOBAL.get_or_init(|| timers))
}

/// [`Timers::sleep`] on the [`global`] service.
pub fn sleep(d: Duration) -> Sleep {
    global().sleep(d)
}

/// A sleep until `deadline` on the [`global`] service (whose monotonic clock is the OS's, as
/// `Instant`'s is). Never earlier: the conversion rounds up.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let g = global();
    // `Instant::now` is read before the service's clock, so the converted deadline is at or
    // after the instant's.
    let now = Instant::now();
    let left = deadline.saturating_duration_since(now);
    g.sleep_until(after(&g.core, left))
}

/// [`Timers::timeout`] on the [`global`] service.
pub fn timeout<F: Future>(d: Duration, future: F) -> Timeout<F> {
    global().timeout(d, future)
}

/// [`Timers::interval`] on the [`global`] service.
pub fn interval(period: Duration) -> Interval {
    global().interval(period)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A sleep is its service handle and a 40-byte cell: with the wheel's 32-byte entry, what a
    /// pending sleep costs.
    #[test]
    fn a_sleep_is_48_bytes() {
        assert_eq!(std::mem::size_of::<SleepCell>(), 40);
        assert_eq!(std::mem::size_of::<Sleep>(), 48);
    }
}
