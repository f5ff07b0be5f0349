//! [`Interval`]: ticks at a fixed period on one sleep, with tokio's [`MissedTickBehavior`]s.

use super::sleep::Sleep;
use crate::instant::Instant;
use crate::Timers;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How late a tick may be and still count as on time: tokio's 5 ms. A tick later than that
/// has missed its time, and the interval's [`MissedTickBehavior`] places the next one.
const MISSED_AFTER: Duration = Duration::from_millis(5);

impl Timers {
    /// An interval whose first tick completes at once and whose ticks then follow every
    /// `period` (`tokio::time::interval`): [`Timers::interval_at`] from [`Timers::now`].
    /// Missed ticks are [`MissedTickBehavior::Burst`] until
    /// [`Interval::set_missed_tick_behavior`] says otherwise.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn interval(&self, period: Duration) -> Interval {
        self.interval_at(self.now(), period)
    }

    /// An interval whose first tick completes at `start` and whose ticks then follow every
    /// `period` (`tokio::time::interval_at`), missed ticks [`MissedTickBehavior::Burst`].
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        assert!(
            !period.is_zero(),
            "tempora::time: an interval's period must be non-zero"
        );
        Interval {
            sleep: Box::pin(self.sleep_until(start)),
            period,
            missed_tick_behavior: MissedTickBehavior::default(),
        }
    }
}

/// What an [`Interval`] does when a tick is missed (`tokio::time::MissedTickBehavior`, with
/// its semantics): the task asked for the tick more than 5 ms after its time, by which the
/// next tick may also be due. The returned ticks are the scheduled instants, not the times
/// the task saw them.
///
/// With a period of 50 ms started at 0 and a task that comes back at 175 ms after taking the
/// tick of 0 (tick ↦ when it completes):
///
/// | behavior | ticks returned |
/// |---|---|
/// | `Burst` | 50, 100, 150 at 175 at once, then 200 at 200, 250 at 250 |
/// | `Delay` | 50 at 175, then 225 at 225, 275 at 275 |
/// | `Skip` | 50 at 175, then 200 at 200, 250 at 250 |
///
/// A tick late by 5 ms or less is on time whatever the behavior: the next one is a period
/// after it, as tokio does (its timer is in whole ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Ticks as fast as possible until caught up (the default, as tokio's): every tick keeps
    /// its place on the grid `start + k * period`, and the missed ones complete at once, one
    /// per call, until the next is in the future. Ticks are never skipped; periods between
    /// them shorten while catching up.
    #[default]
    Burst,
    /// Ticks a whole period after the late tick was taken, not on the old grid: after a
    /// tick taken at `now`, later than its time by more than 5 ms, the next is `now + period`
    /// and the grid starts again from there. No period is ever shorter than `period`.
    Delay,
    /// Skips the missed ticks and ticks at the next point of the grid `start + k * period`
    /// after now: the ticks stay on the grid, and one is returned per call, however many
    /// points the task missed.
    Skip,
}

impl MissedTickBehavior {
    /// The tick after `tick`, taken at `now` more than 5 ms after it.
    fn next(self, tick: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => tick.saturating_add(period),
            MissedTickBehavior::Delay => now.saturating_add(period),
            MissedTickBehavior::Skip => {
                // The next point of the grid after now: now + (period - (now - tick) % period).
                let late = (now - tick).as_nanos();
                let into = late % period.as_nanos();
                let to_next = period.as_nanos() - into;
                let to_next = Duration::from_nanos(u64::try_from(to_next).unwrap_or(u64::MAX));
                now.saturating_add(to_next)
            }
        }
    }
}

/// Ticks every period on its service's monotonic clock (`tokio::time::Interval`):
/// [`Timers::interval`], [`Timers::interval_at`], or the free [`interval`](super::interval())
/// and [`interval_at`](super::interval_at()). It holds one sleep; dropping it cancels it.
///
/// It is a [`Stream`](futures_core::Stream) of its ticks itself (it is `Unpin`): what
/// tokio-stream's `IntervalStream` wraps a tokio interval for, with the same items, is
/// `interval.next()` here (`futures::StreamExt`). tokio keeps `Stream` out of its stable API;
/// tempora already implements it for [`Owner::events`](crate::Owner::events).
///
/// # Cancel safety
/// [`Interval::tick`] and the stream's `next()` are cancel safe: a tick is consumed only when
/// it is returned.
#[derive(Debug)]
pub struct Interval {
    /// Completes at the next tick; its deadline is the next tick's instant.
    sleep: Pin<Box<Sleep>>,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled instant (`Interval::tick` of tokio):
    /// the first at once (or at `start`), then one per period; what follows a missed tick is
    /// the [`MissedTickBehavior`]'s.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it completes (a losing `select!` branch), it has consumed
    /// no tick; the next call returns the same one.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (see [`Interval::tick`]): `Ready` with its scheduled instant
    /// once it has come, `Pending` before, with the task woken when it comes (only the waker of
    /// the last poll is kept).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let tick = self.sleep.deadline();
        let now = self.sleep.now();
        // A tick already due completes without waiting for a poll of the service to fire the
        // sleep (the first one, and one the task comes late for): the clock says it is time.
        if now < tick && self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = if now > tick.saturating_add(MISSED_AFTER) {
            self.missed_tick_behavior.next(tick, now, self.period)
        } else {
            tick.saturating_add(self.period)
        };
        self.sleep.as_mut().reset(next);
        Poll::Ready(tick)
    }

    /// Makes the next tick complete a period from now (`reset_at(now + period)`), whatever
    /// the [`MissedTickBehavior`]; the ticks after it follow from there.
    pub fn reset(&mut self) {
        let at = self.sleep.now().saturating_add(self.period);
        self.reset_at(at);
    }

    /// Makes the next tick complete at once (`reset_at(now)`).
    pub fn reset_immediately(&mut self) {
        let now = self.sleep.now();
        self.reset_at(now);
    }

    /// Makes the next tick complete `after` from now (`reset_at(now + after)`).
    pub fn reset_after(&mut self, after: Duration) {
        let at = self.sleep.now().saturating_add(after);
        self.reset_at(at);
    }

    /// Makes the next tick complete at `deadline`, forgetting any ticks missed before: one
    /// later than a period away waits that long; one that has passed completes at the next
    /// call, and the [`MissedTickBehavior`] places the tick after it, as for any late tick.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
    }

    /// The behavior for missed ticks.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets the behavior for missed ticks; it applies from the next late tick on.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    /// [`Interval::poll_tick`]: every tick, for ever (the stream never ends). Cancel safe as
    /// [`Interval::tick`] is.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.poll_tick(cx).map(Some)
    }
}
