//! [`Timer`]: hyper 1's timer trait (`hyper::rt::Timer`) on tempora's sleeps.
//!
//! ```no_run
//! # async fn serve(io: impl hyper::rt::Read + hyper::rt::Write + Unpin + 'static) {
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use hyper::server::conn::http1;
//!
//! let service = hyper::service::service_fn(|_req: hyper::Request<hyper::body::Incoming>| async {
//!     Ok::<_, Infallible>(hyper::Response::new(String::from("hello")))
//! });
//! http1::Builder::new()
//!     .timer(tempora::compat::hyper::Timer::new())
//!     .header_read_timeout(Duration::from_secs(10))
//!     .serve_connection(io, service)
//!     .await
//!     .ok();
//! # }
//! ```
//!
//! # What hyper asks of it
//!
//! hyper boxes every sleep it asks for (`Pin<Box<dyn hyper::rt::Sleep>>`): one allocation per
//! sleep, whatever the timer. [`Timer`]'s `reset` moves a sleep this timer made in place
//! ([`Sleep::reset`]), with no new box and no new wheel entry when the deadline moves later;
//! a sleep another timer made is replaced. hyper's HTTP/1 server (1.12) starts the
//! header-read timeout when it begins reading a request head, idle keep-alive connections
//! included, and drops that sleep once the head is read: a keep-alive connection makes one
//! sleep per request and holds one while idle.
//!
//! hyper's instants are `std::time::Instant`s: they are converted with
//! [`Instant::from_std`] and [`Instant::into_std`], exact inverses, so hyper's deadlines,
//! which it computes from the timer's `now`, are points on the service's own clock, a
//! [`ManualClock`](crate::clock::ManualClock)'s included.

use crate::time::{self, Instant, Sleep};
use crate::Timers;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// hyper's timer (`hyper::rt::Timer`) on tempora's sleeps: pass it to a hyper builder's
/// `.timer(...)`. Cloning it is cheap (a service handle at most).
#[derive(Clone, Default)]
pub struct Timer {
    /// The service it makes sleeps on; `None`: the calling thread's current one, at each call.
    timers: Option<Timers>,
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field(
                "service",
                &if self.timers.is_some() {
                    "own"
                } else {
                    "current"
                },
            )
            .finish()
    }
}

impl Timer {
    /// A timer whose sleeps are made on the calling thread's current service when hyper asks
    /// for each ([`crate::time::sleep`]'s service: the entered one, else the global one), as
    /// the free functions of [`crate::time`] do.
    pub fn new() -> Timer {
        Timer { timers: None }
    }

    /// A timer whose sleeps are made on `timers`, whichever thread hyper asks from.
    pub fn with_timers(timers: Timers) -> Timer {
        Timer {
            timers: Some(timers),
        }
    }

    fn make(&self, deadline: Instant) -> TimerSleep {
        TimerSleep {
            sleep: match &self.timers {
                Some(t) => t.sleep_until(deadline),
                None => time::sleep_until(deadline),
            },
        }
    }

    fn now_instant(&self) -> Instant {
        match &self.timers {
            Some(t) => t.now(),
            None => Instant::now(),
        }
    }
}

impl From<Timers> for Timer {
    fn from(timers: Timers) -> Timer {
        Timer::with_timers(timers)
    }
}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let deadline = self
            .now_instant()
            .checked_add(duration)
            .unwrap_or(Instant::from_nanos(u64::MAX));
        Box::pin(self.make(deadline))
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(self.make(Instant::from_std(deadline)))
    }

    fn now(&self) -> std::time::Instant {
        self.now_instant().into_std()
    }

    /// Moves `sleep` to `new_deadline`: in place if this crate made it ([`Sleep::reset`]: no
    /// allocation, and no wheel work when the deadline moves later), else replaced by a new
    /// one.
    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        let deadline = Instant::from_std(new_deadline);
        match sleep.as_mut().downcast_mut_pin::<TimerSleep>() {
            Some(ours) => ours.sleep().reset(deadline),
            None => *sleep = Box::pin(self.make(deadline)),
        }
    }
}

/// The sleep [`Timer`] hands hyper: a [`Sleep`] under hyper's `Sleep` trait.
struct TimerSleep {
    sleep: Sleep,
}

impl TimerSleep {
    fn sleep(self: Pin<&mut Self>) -> Pin<&mut Sleep> {
        // SAFETY: structural pinning: `sleep` is never moved out of a pinned `TimerSleep`,
        // which has no `Drop` and no `Unpin` impl of its own (`Sleep` is `!Unpin`).
        unsafe { self.map_unchecked_mut(|s| &mut s.sleep) }
    }
}

impl Future for TimerSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.sleep().poll(cx)
    }
}

impl hyper::rt::Sleep for TimerSleep {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use hyper::rt::Timer as _;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::task::Waker;

    const MS: Duration = Duration::from_millis(1);

    use crate::testing::WakeCount as Count;

    /// A manual clock, a service without drivers, a hyper timer on it, a counting waker.
    fn fixture() -> (ManualClock, Timers, Timer, Arc<Count>, Waker) {
        let clock = ManualClock::new();
        let timers = Timers::builder()
            .clock(clock.clone())
            .drivers(0)
            .build()
            .unwrap();
        let timer = Timer::with_timers(timers.clone());
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        (clock, timers, timer, count, waker)
    }

    fn ready(s: &mut Pin<Box<dyn hyper::rt::Sleep>>, waker: &Waker) -> bool {
        s.as_mut().poll(&mut Context::from_waker(waker)).is_ready()
    }

    /// hyper's deadlines come from the timer's `now`: on a manual clock they are the clock's
    /// points, and a sleep completes once the clock reaches its deadline, not a tick before.
    #[test]
    fn a_sleep_completes_at_its_deadline_never_before() {
        let (clock, timers, timer, count, waker) = fixture();
        let mut s = timer.sleep_until(timer.now() + 10 * MS);
        let mut by = timer.sleep(20 * MS);
        assert!(!ready(&mut s, &waker) && !ready(&mut by, &waker));
        clock.advance(10 * MS - Duration::from_nanos(1));
        timers.poll();
        assert!(!ready(&mut s, &waker), "completed before its deadline");
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        clock.advance(Duration::from_nanos(1));
        timers.poll();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "its task was not woken");
        assert!(ready(&mut s, &waker));
        assert!(!ready(&mut by, &waker));
        clock.advance(10 * MS);
        timers.poll();
        assert!(
            ready(&mut by, &waker),
            "`sleep(d)` is `d` from the timer's now"
        );
    }

    /// `reset` moves one of its own sleeps in place (the same box), later and earlier, also
    /// after it completed.
    #[test]
    fn reset_moves_the_sleep_in_place() {
        let (clock, timers, timer, _count, waker) = fixture();
        let mut s = timer.sleep_until(timer.now() + 10 * MS);
        assert!(!ready(&mut s, &waker));
        let boxed = &*s as *const dyn hyper::rt::Sleep as *const ();
        timer.reset(&mut s, timer.now() + 30 * MS);
        assert_eq!(
            &*s as *const dyn hyper::rt::Sleep as *const (), boxed,
            "reallocated"
        );
        clock.advance(10 * MS);
        timers.poll();
        assert!(
            !ready(&mut s, &waker),
            "completed at the deadline it was moved from"
        );
        timer.reset(&mut s, timer.now() + 5 * MS);
        clock.advance(5 * MS);
        timers.poll();
        assert!(
            ready(&mut s, &waker),
            "not completed at its earlier deadline"
        );
        timer.reset(&mut s, timer.now() + 5 * MS);
        assert!(
            !ready(&mut s, &waker),
            "a completed sleep reset did not wait again"
        );
        clock.advance(5 * MS);
        timers.poll();
        assert!(ready(&mut s, &waker));
    }

    /// A sleep another timer made is replaced by one of this timer's, at the new deadline.
    #[test]
    fn reset_replaces_a_foreign_sleep() {
        struct Never;
        impl Future for Never {
            type Output = ();
            fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
                Poll::Pending
            }
        }
        impl hyper::rt::Sleep for Never {}
        let (clock, timers, timer, _count, waker) = fixture();
        let mut s: Pin<Box<dyn hyper::rt::Sleep>> = Box::pin(Never);
        timer.reset(&mut s, timer.now() + MS);
        assert!(s.as_mut().downcast_mut_pin::<TimerSleep>().is_some());
        assert!(!ready(&mut s, &waker));
        clock.advance(MS);
        timers.poll();
        assert!(ready(&mut s, &waker));
    }

    /// A dropped sleep leaves no entry behind and never wakes its task.
    #[test]
    fn a_dropped_sleep_never_fires() {
        let (clock, timers, timer, count, waker) = fixture();
        let mut s = timer.sleep(MS);
        assert!(!ready(&mut s, &waker));
        assert!(timers.next_deadline().is_some());
        drop(s);
        assert_eq!(
            timers.next_deadline(),
            None,
            "the dropped sleep left an entry"
        );
        clock.advance(10 * MS);
        timers.poll();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "a dropped sleep woke its task"
        );
    }

    /// `Timer::new` makes its sleeps on the calling thread's current service, and reads its
    /// clock.
    #[test]
    fn new_uses_the_current_service() {
        let (clock, timers, _, _count, waker) = fixture();
        let _entered = timers.enter();
        let timer = Timer::new();
        assert_eq!(Instant::from_std(timer.now()), timers.now());
        let mut s = timer.sleep(MS);
        assert!(!ready(&mut s, &waker));
        clock.advance(MS);
        timers.poll();
        assert!(ready(&mut s, &waker));
    }
}
