//! [`Interval`]: ticks at a fixed period on a sleep.

use super::sleep::Sleep;
use crate::clock::duration_nanos;
use crate::instant::Instant;
use crate::Timers;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

impl Timers {
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

/// Ticks at a fixed period ([`Timers::interval`]). A tick that is late by more than a period
/// skips the periods it missed: the next tick is the first period boundary after now.
#[derive(Debug)]
pub struct Interval {
    sleep: Pin<Box<Sleep>>,
    period: u64,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled time.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (see [`Interval::tick`]).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let at = self.sleep.deadline().as_nanos();
        let now = self.sleep.now().as_nanos();
        // A tick already due completes without waiting for a poll of the service (the first
        // one, and one the task comes late for).
        if now < at && self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let missed = now.saturating_sub(at) / self.period;
        let next = at.saturating_add(missed.saturating_add(1).saturating_mul(self.period));
        self.sleep.as_mut().reset(Instant::from_nanos(next));
        Poll::Ready(Instant::from_nanos(at))
    }

    /// The period, in ns.
    pub fn period(&self) -> u64 {
        self.period
    }
}
