//! [`TimeoutLayer`]: a deadline for every request of a tower service, on tempora's sleeps, in
//! the shape of tower's `TimeoutLayer` (`new(Duration)`, a [`Timeout`] service whose error is
//! a [`BoxError`], [`Elapsed`] when the deadline passed), so a service stack swaps one line.
//!
//! ```
//! use std::time::Duration;
//! use tempora::compat::tower::TimeoutLayer;
//! use tower_layer::Layer;
//! use tower_service::Service;
//!
//! #[derive(Clone)]
//! struct Echo;
//!
//! impl Service<u32> for Echo {
//!     type Response = u32;
//!     type Error = std::convert::Infallible;
//!     type Future = std::future::Ready<Result<u32, Self::Error>>;
//!     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
//!         std::task::Poll::Ready(Ok(()))
//!     }
//!     fn call(&mut self, req: u32) -> Self::Future {
//!         std::future::ready(Ok(req))
//!     }
//! }
//!
//! let mut svc = TimeoutLayer::new(Duration::from_secs(30)).layer(Echo);
//! # let _ = svc.call(7);
//! ```
//!
//! Each call makes one [`Sleep`](crate::time::Sleep) with the request's future, as a
//! [`crate::time::Timeout`] does: the future is polled first, so a response ready at its first
//! poll costs the sleep no wheel entry, and one that completes in time drops its sleep before
//! it fires.

use crate::time::{self, Elapsed};
use crate::Timers;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// The error a [`Timeout`] service returns: the inner service's error, boxed, or [`Elapsed`].
/// tower's own type of the same name.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Wraps a service in [`Timeout`]: each request's response must come within the duration.
#[derive(Clone)]
pub struct TimeoutLayer {
    timeout: Duration,
    /// The service the deadlines' sleeps are made on; `None`: the calling thread's current one,
    /// at each call.
    timers: Option<Timers>,
}

impl fmt::Debug for TimeoutLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeoutLayer")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TimeoutLayer {
    /// A layer whose services give each request `timeout`, timed on the calling thread's
    /// current service when the request is made ([`crate::time::timeout`]'s).
    pub fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timers: None,
        }
    }

    /// A layer whose services give each request `timeout`, timed on `timers`.
    pub fn with_timers(timeout: Duration, timers: Timers) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timers: Some(timers),
        }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            timers: self.timers.clone(),
        }
    }
}

/// A service whose every response must come within a duration, else it fails with
/// [`Elapsed`] (boxed): what [`TimeoutLayer`] makes.
#[derive(Clone)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    timers: Option<Timers>,
}

impl<S: fmt::Debug> fmt::Debug for Timeout<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("inner", &self.inner)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<S> Timeout<S> {
    /// `inner` with `timeout` per request, timed on the calling thread's current service.
    pub fn new(inner: S, timeout: Duration) -> Timeout<S> {
        TimeoutLayer::new(timeout).layer(inner)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, this one consumed.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    /// The inner service's readiness: the deadline covers the response, not the wait for room.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let response = self.inner.call(request);
        ResponseFuture {
            inner: match &self.timers {
                Some(t) => t.timeout(self.timeout, response),
                None => time::timeout(self.timeout, response),
            },
        }
    }
}

/// A [`Timeout`] service's response: the inner one's, or [`Elapsed`] (boxed) once the deadline
/// passed first. Dropping it drops the inner future and its deadline's sleep.
#[must_use = "a response future does nothing unless polled (`.await`)"]
pub struct ResponseFuture<F> {
    inner: time::Timeout<F>,
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning: `inner` is never moved out of a pinned `ResponseFuture`,
        // which has no `Drop` and no `Unpin` impl of its own.
        let inner = unsafe { self.map_unchecked_mut(|r| &mut r.inner) };
        inner.poll(cx).map(|r| match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.into()),
            Err(Elapsed) => Err(Elapsed.into()),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::task::Waker;

    const MS: Duration = Duration::from_millis(1);

    use crate::testing::WakeCount as Count;

    /// A service answering each request with the future `make` returns for it.
    #[derive(Clone)]
    struct Fn<M>(M);

    impl<M, F> Service<u32> for Fn<M>
    where
        M: FnMut(u32) -> F,
        F: Future<Output = Result<u32, std::io::Error>>,
    {
        type Response = u32;
        type Error = std::io::Error;
        type Future = F;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: u32) -> F {
            (self.0)(req)
        }
    }

    fn fixture() -> (ManualClock, Timers, Waker) {
        let clock = ManualClock::new();
        let timers = Timers::builder()
            .clock(clock.clone())
            .drivers(0)
            .build()
            .unwrap();
        let waker = Waker::from(Arc::new(Count::default()));
        (clock, timers, waker)
    }

    fn poll<F: Future>(f: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(waker))
    }

    /// A response ready in time passes through unchanged, an error too (boxed), and neither
    /// leaves a wheel entry.
    #[test]
    fn responses_in_time_pass_through() {
        let (_clock, timers, waker) = fixture();
        let layer = TimeoutLayer::with_timers(10 * MS, timers.clone());
        let mut svc = layer.layer(Fn(|r: u32| {
            std::future::ready(if r == 0 {
                Err(std::io::Error::other("zero"))
            } else {
                Ok(r + 1)
            })
        }));
        let mut ok = std::pin::pin!(svc.call(1));
        assert!(matches!(poll(ok.as_mut(), &waker), Poll::Ready(Ok(2))));
        let mut err = std::pin::pin!(svc.call(0));
        match poll(err.as_mut(), &waker) {
            Poll::Ready(Err(e)) => {
                assert_eq!(e.to_string(), "zero");
                assert!(e.downcast_ref::<Elapsed>().is_none());
            }
            other => panic!(
                "expected the service's error, got {:?}",
                other.map(|r| r.ok())
            ),
        }
        assert_eq!(timers.next_deadline(), None);
    }

    /// A response slower than the timeout fails with `Elapsed` at the deadline, not before;
    /// one that comes before it is returned and its sleep leaves the wheel.
    #[test]
    fn a_slow_response_times_out_at_the_deadline() {
        let (clock, timers, waker) = fixture();
        let _entered = timers.enter();
        // `new`: the current service, read at the call.
        let mut svc = TimeoutLayer::new(10 * MS).layer(Fn(|_| async {
            std::future::pending::<()>().await;
            Ok(0)
        }));
        let mut slow = std::pin::pin!(svc.call(1));
        assert!(poll(slow.as_mut(), &waker).is_pending());
        clock.advance(10 * MS - Duration::from_nanos(1));
        timers.poll();
        assert!(poll(slow.as_mut(), &waker).is_pending(), "timed out early");
        clock.advance(Duration::from_nanos(1));
        timers.poll();
        match poll(slow.as_mut(), &waker) {
            Poll::Ready(Err(e)) => assert!(e.downcast_ref::<Elapsed>().is_some(), "{e}"),
            other => panic!("expected Elapsed, got {:?}", other.map(|r| r.ok())),
        }

        // A response that is pending at first and comes before the deadline.
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = answered.clone();
        let mut svc = TimeoutLayer::new(10 * MS).layer(Fn(move |r| {
            let flag = flag.clone();
            std::future::poll_fn(move |_| match flag.load(Ordering::SeqCst) {
                true => Poll::Ready(Ok(r)),
                false => Poll::Pending,
            })
        }));
        {
            let mut quick = std::pin::pin!(svc.call(7));
            assert!(poll(quick.as_mut(), &waker).is_pending());
            assert!(
                timers.next_deadline().is_some(),
                "the pending request has no deadline"
            );
            clock.advance(5 * MS);
            answered.store(true, Ordering::SeqCst);
            assert!(matches!(poll(quick.as_mut(), &waker), Poll::Ready(Ok(7))));
        }
        assert_eq!(
            timers.next_deadline(),
            None,
            "an answered request left its sleep"
        );
    }
}
