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
//! # The free functions, and the current service
//!
//! [`sleep()`], [`sleep_until()`], [`timeout()`], [`timeout_at()`], [`interval()`] and
//! [`interval_at()`] make their futures on the calling thread's current service: the one the
//! innermost live [`Timers::enter`] guard of the thread entered, else the process-wide one
//! ([`global`]: the OS clocks, the default configuration, built on first use).
//! [`Instant::now`] reads the same service's monotonic clock. The methods of the same names
//! on [`Timers`] use their own service, whichever thread calls them.
//!
//! # Instants
//!
//! Deadlines are [`Instant`]s: points on a service's monotonic clock, as tokio's are points
//! on its clock. On the OS clocks that is `CLOCK_MONOTONIC`, `std::time::Instant`'s clock
//! ([`Instant::from_std`] and [`Instant::into_std`] convert); on a
//! [`ManualClock`](crate::clock::ManualClock) it is the manual time, which only the test
//! moves, so a test enters its service and every instant, sleep and tick follows that clock.
//!
//! # Porting from `tokio::time`
//!
//! The names, defaults and semantics are tokio's, so code ported from `tokio::time` keeps its
//! meaning with its `use` line changed:
//!
//! | `tokio::time` | here |
//! |---|---|
//! | `sleep`, `sleep_until`, `timeout`, `timeout_at`, `interval`, `interval_at` | the same free functions, on the thread's current service; the same methods on [`Timers`] |
//! | `Instant` (`now`, `elapsed`, `duration_since`, `checked_*`, `±`, `from_std`, `into_std`) | [`Instant`], the same; also [`Timers::now`] |
//! | `Sleep` (`deadline`, `is_elapsed`, `reset`) | [`Sleep`], the same, and [`Sleep::reset_after`] |
//! | `Timeout` (`get_ref`, `get_mut`, `into_inner`), `error::Elapsed` | [`Timeout`], the same; [`Elapsed`] |
//! | `Interval` (`tick`, `poll_tick`, `reset*`, `period`), `MissedTickBehavior` (default `Burst`, the 5 ms rule) | [`Interval`], [`MissedTickBehavior`], the same |
//! | tokio-stream's `IntervalStream` | [`Interval`] is a `Stream` itself |
//! | `pause`, `advance`, `#[tokio::test(start_paused = true)]` | a service on a [`ManualClock`](crate::clock::ManualClock) with no driver, entered: the test moves the clock (`ManualClock::advance`) and fires what is due ([`Timers::poll`]); nothing advances it by itself |
//! | a runtime with `enable_time` (the free functions panic without one) | any executor; the [`global`] service when none is entered |
//!
//! What differs is the timer underneath: tokio's wheel counts whole milliseconds, tempora's
//! ticks are 1 µs by default ([`Builder::tick`](crate::Builder::tick)), never early.
//!
//! # Cancel safety
//!
//! Each future says in its doc what dropping it before it completes (a losing `select!`
//! branch) loses: nothing for a [`Sleep`] and for [`Interval::tick`] (no tick consumed), and
//! for an owner's [`Recv`](crate::timers::Recv) and [`Events`](crate::timers::Events) (no event taken); a
//! [`Timeout`] is as cancel safe as the future it wraps.
//!
//! [`Timers`]: crate::Timers
//! [`Timers::poll`]: crate::Timers::poll
//! [`Timers::health`]: crate::Timers::health
//! [`Timers::enter`]: crate::Timers::enter
//! [`Timers::now`]: crate::Timers::now

mod current;
mod interval;
mod sleep;
mod timeout;

pub use crate::instant::Instant;
pub use current::{built_global, global, try_global, EnterGuard};
pub use interval::{Interval, MissedTickBehavior};
pub use sleep::Sleep;
pub use timeout::{Elapsed, Timeout};

use std::future::IntoFuture;
use std::time::Duration;

/// [`Timers::sleep`](crate::Timers::sleep) on the thread's current service
/// (`tokio::time::sleep`).
pub fn sleep(d: Duration) -> Sleep {
    current::with_current(|t| t.sleep(d))
}

/// [`Timers::sleep_until`](crate::Timers::sleep_until) on the thread's current service
/// (`tokio::time::sleep_until`).
pub fn sleep_until(deadline: Instant) -> Sleep {
    current::with_current(|t| t.sleep_until(deadline))
}

/// [`Timers::timeout`](crate::Timers::timeout) on the thread's current service
/// (`tokio::time::timeout`).
pub fn timeout<F: IntoFuture>(d: Duration, future: F) -> Timeout<F::IntoFuture> {
    // Converted first: user code, which runs with no service borrowed.
    let future = future.into_future();
    current::with_current(|t| t.timeout(d, future))
}

/// [`Timers::timeout_at`](crate::Timers::timeout_at) on the thread's current service
/// (`tokio::time::timeout_at`).
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let future = future.into_future();
    current::with_current(|t| t.timeout_at(deadline, future))
}

/// [`Timers::interval`](crate::Timers::interval) on the thread's current service
/// (`tokio::time::interval`).
///
/// # Panics
/// If `period` is zero.
pub fn interval(period: Duration) -> Interval {
    current::with_current(|t| t.interval(period))
}

/// [`Timers::interval_at`](crate::Timers::interval_at) on the thread's current service
/// (`tokio::time::interval_at`).
///
/// # Panics
/// If `period` is zero.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    current::with_current(|t| t.interval_at(start, period))
}
