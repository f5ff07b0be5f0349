//! [`Instant`], published as `tempora::time::Instant`: a point on a service's monotonic clock,
//! typed, as `tokio::time::Instant` is a point on tokio's clock.
//!
//! It is the nanoseconds [`ClockSource::now`]`(ClockId::Monotonic)` reads: on the OS clocks,
//! `CLOCK_MONOTONIC`, the clock `std::time::Instant` reads on Linux; on a
//! [`ManualClock`](crate::clock::ManualClock), the manual monotonic time (1 s at its start).
//! An instant does not know its service: it is a number that means something against the
//! clock it was read from, as a `u64` deadline did before it. `Instant::now` and
//! `Instant::elapsed`, which read a clock, are in `time/current.rs`, where the thread's current
//! service is known.
//!
//! # Conversions to `std::time::Instant`
//!
//! `std::time::Instant` has no public value to convert from, only differences. The
//! conversions go through one pair of readings taken once per process, a `std::time::Instant`
//! and then `CLOCK_MONOTONIC` (the anchor): [`Instant::from_std`] is the anchor's reading plus
//! the distance from the anchor's `std::time::Instant`, and [`Instant::into_std`] the reverse.
//! Both are exact inverses of each other. Since the clock is read second, its reading is at or
//! after the true time of the anchor's `std::time::Instant`, by the time one clock read takes
//! (tens of ns): `from_std` is never earlier than the `std::time::Instant` it converts, so a
//! sleep until it never completes before that instant. The anchor is the tightest of a few
//! readings (the one whose clock reads, before and after the `std` read, were closest), so a
//! thread preempted while taking it does not make every conversion late by the preemption.

use crate::clock::{ClockId, ClockSource, OsClock};
use std::fmt;
use std::ops;
use std::time::Duration;

/// A point on a service's monotonic clock, like `tokio::time::Instant`: `Copy`, ordered,
/// `Instant ± Duration`, `Instant - Instant`. [`Timers::now`](crate::Timers::now) reads one,
/// and so does `Instant::now` (the thread's current service's clock: see
/// [`Timers::enter`](crate::Timers::enter)); sleeps, timeouts and intervals take and return
/// them.
///
/// An instant belongs to the clock it was read from: one read from a service on a
/// [`ManualClock`](crate::clock::ManualClock) means nothing to a service on the OS clocks
/// (nor to [`Instant::into_std`]), as a tokio instant read under `time::pause` means nothing
/// to another runtime.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    /// Nanoseconds on the monotonic clock.
    ns: u64,
}

impl Instant {
    /// The instant `ns` nanoseconds into the monotonic clock (what
    /// [`ClockSource::now`]`(ClockId::Monotonic)` reads): for code that holds clock readings as
    /// numbers (an event loop's, the C ABI's).
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant { ns }
    }

    /// The instant's nanoseconds on the monotonic clock: the inverse of
    /// [`Instant::from_nanos`].
    pub const fn as_nanos(self) -> u64 {
        self.ns
    }

    /// The instant `std` is on the OS's monotonic clock (`CLOCK_MONOTONIC`, which
    /// `std::time::Instant` reads on Linux), for services on the OS clocks (the global one,
    /// [`Timers::new`](crate::Timers::new)'s). `std::time::Instant` shows no value, only
    /// differences: the conversion adds `std`'s distance from a `std::time::Instant` read once
    /// per process to the clock's reading taken just after it. The result is never earlier
    /// than `std` (a sleep until it never completes before `std`), and later by at most the
    /// time of one clock read (tens of ns).
    pub fn from_std(std: std::time::Instant) -> Instant {
        let (a, ns) = anchor();
        let ns = match std.checked_duration_since(a) {
            Some(d) => ns.saturating_add(nanos(d)),
            None => ns.saturating_sub(nanos(a - std)),
        };
        Instant { ns }
    }

    /// The `std::time::Instant` this instant is on the OS's monotonic clock: the exact inverse
    /// of [`Instant::from_std`] (`into_std(from_std(s)) == s`).
    pub fn into_std(self) -> std::time::Instant {
        let (a, ns) = anchor();
        if self.ns >= ns {
            a + Duration::from_nanos(self.ns - ns)
        } else {
            // Before the anchor: no earlier than boot, which a `std::time::Instant` can hold.
            let back = Duration::from_nanos(ns - self.ns);
            a.checked_sub(back).unwrap_or(a)
        }
    }

    /// The time from `earlier` to this instant, or zero if `earlier` is later (as tokio's:
    /// it saturates, it does not panic).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// The time from `earlier` to this instant, or `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.ns.checked_sub(earlier.ns).map(Duration::from_nanos)
    }

    /// The time from `earlier` to this instant, or zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.ns.saturating_sub(earlier.ns))
    }

    /// `self + duration`, or `None` past the clock's range (`u64::MAX` ns, 584 years).
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        let d = u64::try_from(duration.as_nanos()).ok()?;
        self.ns.checked_add(d).map(Instant::from_nanos)
    }

    /// `self - duration`, or `None` before the clock's zero.
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        let d = u64::try_from(duration.as_nanos()).ok()?;
        self.ns.checked_sub(d).map(Instant::from_nanos)
    }

    /// `self + duration`, or the last instant the clock holds: a deadline that never comes.
    pub(crate) fn saturating_add(self, duration: Duration) -> Instant {
        Instant::from_nanos(self.ns.saturating_add(nanos(duration)))
    }
}

/// `d` in ns, saturating at `u64::MAX`.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The conversions' anchor: a `std::time::Instant` and then `CLOCK_MONOTONIC`'s reading, taken
/// once (module doc).
fn anchor() -> (std::time::Instant, u64) {
    // Two racing first readers may each take an anchor; the first published is everyone's.
    static ANCHOR: crate::sync::RaceOnce<(std::time::Instant, u64)> = crate::sync::RaceOnce::new();
    *ANCHOR.get_or_init(|| {
        tightest(ANCHOR_TRIES, || {
            let before = OsClock.now(ClockId::Monotonic);
            let std = std::time::Instant::now();
            (before, std, OsClock.now(ClockId::Monotonic))
        })
    })
}

/// Attempts at the anchor ([`tightest`]).
const ANCHOR_TRIES: usize = 8;

/// Of `tries` readings `(clock before, std, clock after)`, the `std` and clock-after pair of the
/// one whose two clock reads are closest: every conversion is later than its `std` instant by
/// the gap between `std` and the clock read after it, which a thread preempted there would
/// otherwise keep for the life of the process.
fn tightest<S: Copy>(tries: usize, mut read: impl FnMut() -> (u64, S, u64)) -> (S, u64) {
    let (mut best_gap, mut best) = (u64::MAX, None);
    for _ in 0..tries.max(1) {
        let (before, std, after) = read();
        let gap = after.saturating_sub(before);
        if best.is_none() || gap < best_gap {
            (best_gap, best) = (gap, Some((std, after)));
        }
    }
    best.expect("at least one reading")
}

impl From<std::time::Instant> for Instant {
    /// [`Instant::from_std`].
    fn from(std: std::time::Instant) -> Instant {
        Instant::from_std(std)
    }
}

impl From<Instant> for std::time::Instant {
    /// [`Instant::into_std`].
    fn from(i: Instant) -> std::time::Instant {
        i.into_std()
    }
}

impl ops::Add<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// Past the clock's range (as `std::time::Instant` panics past its own): see
    /// [`Instant::checked_add`].
    fn add(self, rhs: Duration) -> Instant {
        self.checked_add(rhs)
            .expect("overflow when adding duration to instant")
    }
}

impl ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl ops::Sub<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// Before the clock's zero: see [`Instant::checked_sub`].
    fn sub(self, rhs: Duration) -> Instant {
        self.checked_sub(rhs)
            .expect("overflow when subtracting duration from instant")
    }
}

impl ops::SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl ops::Sub for Instant {
    type Output = Duration;

    /// The time from `rhs` to `self`, zero if `rhs` is later ([`Instant::duration_since`]).
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    /// The time since the clock's zero: `Instant(1.5s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Instant")
            .field(&Duration::from_nanos(self.ns))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn arithmetic_is_tokios() {
        let a = Instant::from_nanos(1_000_000_000);
        let b = a + 5 * MS;
        assert!(b > a);
        assert_eq!(b - a, 5 * MS);
        assert_eq!(a - b, Duration::ZERO, "Instant - Instant saturates");
        assert_eq!(a.duration_since(b), Duration::ZERO);
        assert_eq!(a.checked_duration_since(b), None);
        assert_eq!(b.checked_duration_since(a), Some(5 * MS));
        assert_eq!(b - 5 * MS, a);
        let mut c = a;
        c += MS;
        c -= MS;
        assert_eq!(c, a);
        assert_eq!(Instant::from_nanos(u64::MAX).checked_add(MS), None);
        assert_eq!(Instant::from_nanos(0).checked_sub(MS), None);
        assert_eq!(a.checked_add(Duration::MAX), None);
        assert_eq!(a.saturating_add(Duration::MAX).as_nanos(), u64::MAX);
        assert_eq!(format!("{a:?}"), "Instant(1s)");
    }

    #[test]
    #[should_panic(expected = "overflow when adding duration to instant")]
    fn adding_past_the_range_panics_as_std_does() {
        let _ = Instant::from_nanos(u64::MAX) + MS;
    }

    /// The anchor is the reading whose clock reads were closest: one preempted between its
    /// `std` read and the clock read after it (here the first, 5 ms apart) is passed over.
    #[test]
    fn the_anchor_is_the_tightest_of_its_readings() {
        let readings = [
            (1_000, 'a', 5_001_000),
            (6_000_000, 'b', 6_000_050),
            (7_000_000, 'c', 7_000_080),
        ];
        let mut it = readings.into_iter();
        assert_eq!(tightest(3, || it.next().unwrap()), ('b', 6_000_050));
        assert_eq!(
            tightest(0, || (0, 'z', 5)),
            ('z', 5),
            "one reading at least"
        );
    }

    #[test]
    fn std_conversions_are_inverse_and_never_early() {
        for _ in 0..1000 {
            // `before` is at or before the true time of `s`, `after` at or after it.
            let before = OsClock.now(ClockId::Monotonic);
            let s = std::time::Instant::now();
            let after = OsClock.now(ClockId::Monotonic);
            let i = Instant::from_std(s);
            assert!(i.as_nanos() >= before, "never earlier than the std instant");
            // Later by the anchor's read gap at most (generous: a preempted read).
            assert!(i.as_nanos() <= after + 10_000_000, "{i:?} vs {after}");
            assert_eq!(i.into_std(), s, "exact inverses");
            assert_eq!(Instant::from_std(i.into_std()), i);
        }
        let s = std::time::Instant::now();
        let i = Instant::from_std(s);
        // Before the anchor too, and distances are kept exactly.
        if let Some(earlier) = s.checked_sub(MS) {
            assert_eq!(Instant::from_std(earlier).into_std(), earlier);
            assert_eq!(i - Instant::from_std(earlier), MS);
        }
        assert_eq!(Instant::from_std(s + 7 * MS) - i, 7 * MS);
        assert_eq!(std::time::Instant::from(Instant::from(s)), s);
    }
}
