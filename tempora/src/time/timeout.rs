//! [`Timeout`]: a future with a deadline, and its error [`Elapsed`].

use super::sleep::Sleep;
use crate::instant::Instant;
use crate::Timers;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

impl Timers {
    /// `future`'s output, or [`Elapsed`] if it has not completed `d` from now
    /// (`tokio::time::timeout`). The future is polled first: one ready at its first poll
    /// completes with `Ok` whatever `d`, even zero.
    pub fn timeout<F: IntoFuture>(&self, d: Duration, future: F) -> Timeout<F::IntoFuture> {
        Timeout {
            future: future.into_future(),
            sleep: self.sleep(d),
        }
    }

    /// `future`'s output, or [`Elapsed`] if it has not completed by `deadline` on the
    /// service's monotonic clock (`tokio::time::timeout_at`). The future is polled first, as
    /// by [`Timers::timeout`].
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout {
            future: future.into_future(),
            sleep: self.sleep_until(deadline),
        }
    }
}

/// A future with a deadline (`tokio::time::Timeout`): [`Timers::timeout`],
/// [`Timers::timeout_at`], or the free [`timeout`](super::timeout()) and
/// [`timeout_at`](super::timeout_at()). Its output is the future's, `Ok`, or
/// `Err(`[`Elapsed`]`)` once the deadline has passed with the future still pending.
///
/// # Cancel safety
/// As cancel safe as the future it wraps, no more: dropping a pending timeout drops that
/// future (with whatever it had in flight) and takes the deadline's sleep out of its wheel.
/// A timeout that completed with [`Elapsed`] still holds the future until it is dropped.
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

    /// The wrapped future, mutably (a timeout not yet pinned: one that is polled is `!Unpin`
    /// and gives no `&mut`).
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.future
    }

    /// The wrapped future, the timeout consumed (its sleep dropped): for a timeout not yet
    /// pinned, as [`Timeout::get_mut`].
    pub fn into_inner(self) -> F {
        self.future
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
