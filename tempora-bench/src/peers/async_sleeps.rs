//! Async sleeps, the kind of work of the async suite: the futures an async program awaits for a
//! timeout or a delay. [`AsyncSleeps`] is what every implementation provides; the suite
//! (`suites::async`) drives them all the same way inside a tokio runtime.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// One async sleep implementation, as the suite drives it. A new implementation is an impl of
/// this trait and a line in the async suite's `PEERS`.
pub trait AsyncSleeps: Sized + 'static {
    /// The JSON `impl` name.
    const NAME: &'static str;
    /// A sleep: completes at its deadline; registered with its timer at the latest when first
    /// polled; dropping it pending cancels it.
    type Sleep: Future + Send + 'static;
    /// Called inside the step's runtime (`Handle::current()` works), once per step.
    fn new() -> Self;
    /// A sleep due at `at`.
    fn sleep_until(&self, at: Instant) -> Self::Sleep;
    /// Moves a pending (registered) sleep's deadline to `at`, keeping its waker.
    fn reset(&self, sleep: Pin<&mut Self::Sleep>, at: Instant);
}

/// `tempora::time::Sleep` on a service of its own per step (OS clocks, one driver thread, as
/// `Timers::new()` builds it): an ID-less timer whose 40-byte cell lives in the future, with one
/// entry in the monotonic wheel of the polling thread's base. Its driver runs on its own
/// thread, so `fire`'s wake-ups cross threads into the runtime (as async-io's do). Deadlines
/// convert with `tempora::time::Instant::from_std`: no clock read, never earlier than the
/// `std::time::Instant` (the conversion's anchor reads the clock second).
pub struct TemporaTime {
    timers: tempora::Timers,
}

impl AsyncSleeps for TemporaTime {
    const NAME: &'static str = "tempora";
    type Sleep = tempora::time::Sleep;
    fn new() -> Self {
        TemporaTime {
            timers: tempora::Timers::new(),
        }
    }
    #[inline]
    fn sleep_until(&self, at: Instant) -> tempora::time::Sleep {
        self.timers.sleep_until(at.into())
    }
    #[inline]
    fn reset(&self, sleep: Pin<&mut tempora::time::Sleep>, at: Instant) {
        sleep.reset(at.into());
    }
}

/// `tokio::time::Sleep` on the step's runtime: a hierarchical wheel (6 levels of 64 slots,
/// 1 ms ticks) of intrusive entries, behind the driver's mutex.
pub struct TokioTime;

impl AsyncSleeps for TokioTime {
    const NAME: &'static str = "tokio-time";
    type Sleep = tokio::time::Sleep;
    fn new() -> Self {
        TokioTime
    }
    #[inline]
    fn sleep_until(&self, at: Instant) -> tokio::time::Sleep {
        tokio::time::sleep_until(at.into())
    }
    #[inline]
    fn reset(&self, sleep: Pin<&mut tokio::time::Sleep>, at: Instant) {
        sleep.reset(at.into());
    }
}

/// smol's `async_io::Timer`: deadlines in a `BTreeMap` owned by the process-wide reactor,
/// which its own thread drives; timers queue their inserts and removes for it.
pub struct AsyncIo;

impl AsyncSleeps for AsyncIo {
    const NAME: &'static str = "async-io";
    type Sleep = async_io::Timer;
    fn new() -> Self {
        // The reactor (and its thread) starts on first use: once here, so that it does not
        // land in a measurement.
        let mut t = async_io::Timer::after(Duration::from_secs(3600));
        let _ = Pin::new(&mut t).poll(&mut Context::from_waker(Waker::noop()));
        AsyncIo
    }
    #[inline]
    fn sleep_until(&self, at: Instant) -> async_io::Timer {
        async_io::Timer::at(at)
    }
    #[inline]
    fn reset(&self, sleep: Pin<&mut async_io::Timer>, at: Instant) {
        sleep.get_mut().set_at(at);
    }
}
