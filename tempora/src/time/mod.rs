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
//! [`sleep()`], [`sleep_until`], [`timeout()`] and [`interval()`] use one process-wide service
//! ([`global`]): the OS clocks, the default configuration, built on first use. The methods of
//! the same names on [`Timers`] use that service instead (a manual clock in tests, an
//! application-driven service with no driver, its own bases).
//!
//! [`Timers`]: crate::Timers
//! [`Timers::poll`]: crate::Timers::poll
//! [`Timers::health`]: crate::Timers::health

mod current;
mod interval;
mod sleep;
mod timeout;

pub use current::{global, try_global};
pub use interval::Interval;
pub use sleep::Sleep;
pub use timeout::{Elapsed, Timeout};

use std::future::Future;
use std::time::{Duration, Instant};

/// [`Timers::sleep`](crate::Timers::sleep) on the [`global`] service.
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
    g.sleep_until(sleep::after(&g.core, left))
}

/// [`Timers::timeout`](crate::Timers::timeout) on the [`global`] service.
pub fn timeout<F: Future>(d: Duration, future: F) -> Timeout<F> {
    global().timeout(d, future)
}

/// [`Timers::interval`](crate::Timers::interval) on the [`global`] service.
pub fn interval(period: Duration) -> Interval {
    global().interval(period)
}
