//! [`Timeout`]: a future with a deadline, and its error [`Elapsed`].

use super::sleep::Sleep;
use crate::Timers;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

impl Timers {
    /// `future`, or [`Elapsed`] if it has not completed `d` from now.
    pub fn timeout<F: Future>(&self, d: Duration, future: F) -> Timeout<F> {
        Timeout {
            future,
            sleep: self.sleep(d),
        }
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
