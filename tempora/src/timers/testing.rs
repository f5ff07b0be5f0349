//! The service's test fixtures, for the unit tests of `timers` and the layers above it, each
//! written once (what every layer's tests share is `crate::testing`):
//!
//! - [`TestClock`], the one test clock: a [`ClockSource`] over a [`ManualClock`] or the OS
//!   clocks, whose coarse readings are absent, exact, or lagging by a pseudo-random amount.
//! - [`drain`], the one way to take every event an owner has queued.
//! - [`TestSignals`], a signal port that plays the kernel's queue.
//! - One builder per kind of service:
//!
//!   | kind        | clocks        | who polls                      | builder                |
//!   |-------------|---------------|--------------------------------|------------------------|
//!   | manual      | manual (test) | the test, after moving time    | [`manual`], [`Manual`] |
//!   | deadline fd | OS            | the test, when the fd is ready | [`deadline_fd`]        |
//!   | driven      | OS            | background driver threads      | [`driven`]             |

use crate::clock::{ClockId, ClockSource, ManualClock, OsClock};
use crate::testing::TestRng;
use crate::timers::{Builder, Event, ItimerSpec, Notify, Owner, SetFlags, TimerId, Timers};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---- the test clock --------------------------------------------------------------------------

/// The test clock: the times of a [`ManualClock`] (or of the OS clocks), with coarse readings
/// chosen by the test.
///
/// - [`TestClock::os`]: the OS clocks behind a source that is not [`OsClock`]'s type (a
///   wrapper, as a user's logging or counting source would be); no coarse readings.
/// - [`TestClock::over`]: a manual clock's times; no coarse readings until one of:
/// - [`TestClock::coarse_exact`]: coarse readings equal to the time, against a declared lag
///   (the contract allows that): every coarse-armed expiry lands the whole lag late.
/// - [`TestClock::coarse_lagging`]: coarse readings that lag the time by a pseudo-random
///   amount in `0..=lag`, as an OS coarse clock does.
#[derive(Clone)]
pub(crate) struct TestClock {
    /// `None`: the OS clocks.
    manual: Option<ManualClock>,
    coarse: Coarse,
}

#[derive(Clone)]
enum Coarse {
    None,
    Exact { lag: u64 },
    Lagging { lag: u64, rng: Arc<TestRng> },
}

impl TestClock {
    /// The OS clocks, wrapped.
    pub(crate) fn os() -> TestClock {
        TestClock {
            manual: None,
            coarse: Coarse::None,
        }
    }

    /// The times of `clock` (a handle to the same clock: moving either moves both).
    pub(crate) fn over(clock: &ManualClock) -> TestClock {
        TestClock {
            manual: Some(clock.clone()),
            coarse: Coarse::None,
        }
    }

    /// Coarse readings equal to the time, declared to lag by up to `lag` ns.
    pub(crate) fn coarse_exact(self, lag: u64) -> TestClock {
        TestClock {
            coarse: Coarse::Exact { lag },
            ..self
        }
    }

    /// Coarse readings that lag the time by a pseudo-random amount in `0..=lag` (drawn from a
    /// [`TestRng`] seeded with `seed`), declared to lag by up to `lag` ns.
    pub(crate) fn coarse_lagging(self, lag: u64, seed: u64) -> TestClock {
        TestClock {
            coarse: Coarse::Lagging {
                lag,
                rng: Arc::new(TestRng::new(seed)),
            },
            ..self
        }
    }
}

impl ClockSource for TestClock {
    fn now(&self, clock: ClockId) -> u64 {
        match &self.manual {
            Some(m) => m.now(clock),
            None => OsClock.now(clock),
        }
    }
    fn is_os_time(&self) -> bool {
        match &self.manual {
            Some(m) => m.is_os_time(),
            None => OsClock.is_os_time(),
        }
    }
    fn now_coarse(&self, clock: ClockId) -> Option<u64> {
        match &self.coarse {
            Coarse::None => None,
            Coarse::Exact { .. } => Some(self.now(clock)),
            Coarse::Lagging { lag, rng } => {
                Some(self.now(clock).saturating_sub(rng.below(lag + 1)))
            }
        }
    }
    fn coarse_lag(&self, _: ClockId) -> u64 {
        match &self.coarse {
            Coarse::None => 0,
            Coarse::Exact { lag } | Coarse::Lagging { lag, .. } => *lag,
        }
    }
}
// ---- events ----------------------------------------------------------------------------------

/// Every event queued on `owner` now, taken off its queue, in ID order (the order in which
/// bases deliver is not part of any contract).
pub(crate) fn drain(owner: &Owner) -> Vec<Event> {
    let mut v: Vec<_> = owner.try_iter().collect();
    v.sort_by_key(|e| e.id);
    v
}
// ---- services --------------------------------------------------------------------------------

/// A service on `clock` (a [`ManualClock`] or a [`TestClock`] over one): two bases, no
/// driver (no thread can sleep on a manual clock), then `configure`. Time moves only when the
/// test moves it, and timers fire only when it polls.
pub(crate) fn manual(clock: impl ClockSource, configure: impl FnOnce(&mut Builder)) -> Timers {
    let mut b = Timers::builder();
    b.clock(clock).bases(2);
    configure(&mut b);
    b.build().unwrap()
}

/// A service on the OS clocks with no driver, then `configure`: the test polls it, when its
/// deadline fd ([`Timers::deadline_fd`]) is readable.
pub(crate) fn deadline_fd(configure: impl FnOnce(&mut Builder)) -> Timers {
    let mut b = Timers::builder();
    b.drivers(0);
    configure(&mut b);
    b.build().unwrap()
}

/// A service on the OS clocks that background drivers poll (one by default; `configure` sets
/// the bases, drivers and spares).
pub(crate) fn driven(configure: impl FnOnce(&mut Builder)) -> Timers {
    let mut b = Timers::builder();
    configure(&mut b);
    b.build().unwrap()
}

/// A [`manual`] service with one owner, and the steps most tests take on it.
pub(crate) struct Manual {
    pub(crate) clock: ManualClock,
    pub(crate) timers: Timers,
    pub(crate) owner: Owner,
}

impl Manual {
    /// On a fresh manual clock, with the [`manual`] defaults.
    pub(crate) fn new() -> Manual {
        Manual::with(|_| ())
    }

    /// On a fresh manual clock, with the [`manual`] defaults and then `configure`.
    pub(crate) fn with(configure: impl FnOnce(&mut Builder)) -> Manual {
        let clock = ManualClock::new();
        Manual::on(&clock, clock.clone(), configure)
    }

    /// On `source` (`clock`, or a [`TestClock`] over it), then `configure`.
    pub(crate) fn on(
        clock: &ManualClock,
        source: impl ClockSource,
        configure: impl FnOnce(&mut Builder),
    ) -> Manual {
        let timers = manual(source, configure);
        let owner = timers.owner();
        Manual {
            clock: clock.clone(),
            timers,
            owner,
        }
    }

    /// A new `Queue` timer of the owner on `clock`.
    pub(crate) fn queue(&self, clock: ClockId) -> TimerId {
        self.owner.create(clock, Notify::Queue).unwrap()
    }

    /// Arms `id` relative to now; returns the old setting.
    pub(crate) fn arm(&self, id: TimerId, value: Duration, interval: Duration) -> ItimerSpec {
        self.owner
            .settime(id, SetFlags::RELATIVE, value, interval)
            .unwrap()
    }

    /// Moves the clock by `d` and polls: the number of timers fired.
    pub(crate) fn advance(&self, d: Duration) -> usize {
        self.clock.advance(d);
        self.timers.poll()
    }

    /// The time left until `id` expires (ns).
    pub(crate) fn value(&self, id: TimerId) -> u64 {
        self.owner.gettime(id).unwrap().as_nanos().0
    }

    /// [`drain`] of the owner.
    pub(crate) fn drain(&self) -> Vec<Event> {
        drain(&self.owner)
    }
}
// ---- signals --------------------------------------------------------------------------------

/// A signal port (`timers/object/signal.rs`) that plays the kernel's signal queue for the manual
/// clock: signals the service sends are queued until the test takes them ([`TestSignals::take`],
/// a handler or `sigwaitinfo` dequeuing one), and the test decides whether they are ignored
/// and how much room the queue has (`RLIMIT_SIGPENDING`). It records every send and every
/// pending-query, so that a test can count what a blocked signal costs.
#[derive(Default)]
pub(crate) struct TestSignals {
    state: Mutex<SignalQueue>,
}

#[derive(Default)]
struct SignalQueue {
    queued: Vec<crate::timers::object::signal::TimerSignal>,
    sent: usize,
    /// Sends asked for, queued or refused.
    attempts: usize,
    queries: usize,
    ignored: bool,
    blocked: bool,
    /// Room left; `None`: unlimited.
    room: Option<usize>,
    /// Threads that exited.
    gone: Vec<i32>,
}

impl TestSignals {
    pub(crate) fn new() -> Arc<TestSignals> {
        Arc::new(TestSignals::default())
    }

    /// Dequeues the oldest queued signal (a delivery).
    pub(crate) fn take(&self) -> Option<crate::timers::object::signal::TimerSignal> {
        let mut s = self.state.lock().unwrap();
        if s.queued.is_empty() {
            return None;
        }
        if let Some(r) = &mut s.room {
            *r += 1;
        }
        Some(s.queued.remove(0))
    }

    /// Dequeues every queued signal, oldest first.
    pub(crate) fn take_all(&self) -> Vec<crate::timers::object::signal::TimerSignal> {
        std::iter::from_fn(|| self.take()).collect()
    }

    /// Signals queued and not taken.
    pub(crate) fn queued(&self) -> usize {
        self.state.lock().unwrap().queued.len()
    }

    /// Signals the service queued, in all.
    pub(crate) fn sent(&self) -> usize {
        self.state.lock().unwrap().sent
    }

    /// Sends the service asked for, queued or not.
    pub(crate) fn attempts(&self) -> usize {
        self.state.lock().unwrap().attempts
    }

    /// Times the service asked whether a signal is pending.
    pub(crate) fn queries(&self) -> usize {
        self.state.lock().unwrap().queries
    }

    /// Sets the disposition: ignored (`SIG_IGN`: the queued signals are discarded, blocked or
    /// not, as the kernel does) or handled.
    pub(crate) fn set_ignored(&self, ignored: bool) {
        let mut s = self.state.lock().unwrap();
        s.ignored = ignored;
        if ignored {
            let n = s.queued.len();
            s.queued.clear();
            if let Some(r) = &mut s.room {
                *r += n;
            }
        }
    }

    /// Sets whether the (ignored) signal is blocked: a blocked signal is queued even while
    /// ignored.
    pub(crate) fn set_blocked(&self, blocked: bool) {
        self.state.lock().unwrap().blocked = blocked;
    }

    /// Sets the room left for queued signals (`None`: unlimited).
    pub(crate) fn set_room(&self, room: Option<usize>) {
        self.state.lock().unwrap().room = room;
    }

    /// Thread `tid` exits.
    pub(crate) fn thread_exits(&self, tid: i32) {
        self.state.lock().unwrap().gone.push(tid);
    }
}

impl crate::timers::object::signal::SignalPort for TestSignals {
    fn send(
        &self,
        sig: &crate::timers::object::signal::TimerSignal,
    ) -> crate::timers::object::signal::Sent {
        use crate::timers::object::signal::Sent;
        let mut s = self.state.lock().unwrap();
        s.attempts += 1;
        if s.gone.contains(&sig.tid) {
            return Sent::Gone;
        }
        if s.room == Some(0) {
            return Sent::Full;
        }
        if let Some(r) = &mut s.room {
            *r -= 1;
        }
        s.sent += 1;
        s.queued.push(*sig);
        Sent::Queued
    }

    fn pending(&self, tid: i32, signo: i32) -> crate::timers::object::signal::Pending {
        use crate::timers::object::signal::Pending;
        let mut s = self.state.lock().unwrap();
        s.queries += 1;
        if s.queued.iter().any(|q| q.tid == tid && q.signo == signo) {
            Pending::Yes
        } else {
            Pending::No
        }
    }

    fn confirm(&self, signo: i32) -> bool {
        let s = self.state.lock().unwrap();
        s.queued.iter().any(|q| q.tid == 0 && q.signo == signo)
    }

    fn ignored(&self, _tid: i32, _signo: i32) -> bool {
        let s = self.state.lock().unwrap();
        s.ignored && !s.blocked
    }

    fn disposition_ignores(&self, _signo: i32) -> bool {
        self.state.lock().unwrap().ignored
    }
}
