//! Clocks: which clock a timer runs on, where "now" comes from, and the conversions between
//! the nanoseconds of the API and the ticks of the wheel.
//!
//! Every time at tempora's API is an unsigned count of nanoseconds on one of three clocks
//! ([`ClockId`]), exactly as `clock_gettime` reports it: `CLOCK_REALTIME` since the Unix epoch,
//! `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME` since boot. A timer keeps its exact expiry in
//! nanoseconds; ticks ([`Resolution`]) only decide which wheel bucket it waits in, and the
//! conversion rounds **up** so that a bucket is never visited before the expiry it holds.
//!
//! A [`ClockSource`] answers "what time is it on clock C". [`OsClock`] asks the kernel
//! (`clock_gettime`, served by the vDSO without a system call); [`ManualClock`] is set by hand,
//! so tests of timer semantics are deterministic and never sleep.

use crate::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strength_reduce::StrengthReducedU64;

/// The clocks a timer can be created on, with Linux's `clockid_t` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum ClockId {
    /// `CLOCK_REALTIME` (0): wall-clock time; absolute timers follow changes to it.
    Realtime = 0,
    /// `CLOCK_MONOTONIC` (1): never jumps, stops while the system is suspended.
    Monotonic = 1,
    /// `CLOCK_BOOTTIME` (7): monotonic, and counts time spent suspended.
    Boottime = 7,
}

impl ClockId {
    /// The Linux `clockid_t` value.
    pub fn as_raw(self) -> i32 {
        self as i32
    }

    /// The clock with this Linux `clockid_t` value, if tempora supports it.
    pub fn from_raw(raw: i32) -> Option<ClockId> {
        match raw {
            0 => Some(ClockId::Realtime),
            1 => Some(ClockId::Monotonic),
            7 => Some(ClockId::Boottime),
            _ => None,
        }
    }
}

/// The number of clocks: per-clock arrays (a base's wheels, a poll's readings) have this many
/// entries, indexed by [`ClockId::index`].
pub(crate) const CLOCKS: usize = 3;

/// Every clock, in index order: `ALL_CLOCKS[c.index()] == c`.
pub(crate) const ALL_CLOCKS: [ClockId; CLOCKS] =
    [ClockId::Realtime, ClockId::Monotonic, ClockId::Boottime];

impl ClockId {
    /// The clock's index in per-clock arrays (0 ..= 2).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        match self {
            ClockId::Realtime => 0,
            ClockId::Monotonic => 1,
            ClockId::Boottime => 2,
        }
    }
}

/// Clock readings taken at most once per clock per operation, from a [`ClockSource`]: what
/// the interval-timer rules are given as "now".
pub(crate) struct LazyNow<'a> {
    src: &'a dyn ClockSource,
    /// `src` is [`OsClock`] itself: read `clock_gettime` here, without the virtual call.
    os: bool,
    cache: [std::cell::Cell<u64>; CLOCKS],
    /// Read the coarse clocks (`LazyNow::coarse`): the readings are `now_coarse + lag`.
    coarse: std::cell::Cell<bool>,
    /// The largest `coarse_lag` added to a reading so far: how far after the time a reading
    /// may be.
    spent: std::cell::Cell<u64>,
}

impl<'a> LazyNow<'a> {
    /// Nothing read yet (tests: the service's calls take [`LazyNow::of`]).
    #[cfg(test)]
    pub(crate) fn new(src: &'a dyn ClockSource) -> LazyNow<'a> {
        Self::of(src, false)
    }

    /// Nothing read yet; `os` says that `src` is [`OsClock`] itself (the service's
    /// `Core::os_clock`), whose readings are then taken without the virtual call.
    #[inline]
    pub(crate) fn of(src: &'a dyn ClockSource, os: bool) -> LazyNow<'a> {
        LazyNow {
            src,
            os,
            cache: [const { std::cell::Cell::new(u64::MAX) }; CLOCKS],
            coarse: std::cell::Cell::new(false),
            spent: std::cell::Cell::new(0),
        }
    }

    /// Every clock already read, as `now` (by index).
    pub(crate) fn from(src: &'a dyn ClockSource, now: [u64; CLOCKS]) -> LazyNow<'a> {
        LazyNow {
            src,
            os: false,
            cache: now.map(std::cell::Cell::new),
            coarse: std::cell::Cell::new(false),
            spent: std::cell::Cell::new(0),
        }
    }

    /// `clock`'s reading, taken at the first call for it.
    #[inline]
    pub(crate) fn get(&self, clock: ClockId) -> u64 {
        let c = &self.cache[clock.index()];
        if c.get() == u64::MAX {
            c.set(self.read(clock));
        }
        c.get()
    }

    #[inline]
    fn read(&self, clock: ClockId) -> u64 {
        if self.os && !self.coarse.get() {
            return read_os(clock.as_raw() as libc::clockid_t);
        }
        if self.coarse.get() {
            if let Some(t) = self.src.now_coarse(clock) {
                let lag = self.src.coarse_lag(clock);
                self.spent.set(self.spent.get().max(lag));
                return t.saturating_add(lag);
            }
        }
        self.src.now(clock)
    }

    /// From now on, clocks not yet read are read coarsely: `now_coarse + coarse_lag`, an upper
    /// bound of the time that is cheaper to take (where the source has coarse clocks).
    pub(crate) fn coarse(&self) {
        self.coarse.set(true);
    }

    /// How far after the time a reading may be: the largest `coarse_lag` used, 0 if none.
    pub(crate) fn spent(&self) -> u64 {
        self.spent.get()
    }
}

/// Where "now" comes from.
///
/// Implementations must be monotonic for [`ClockId::Monotonic`] and [`ClockId::Boottime`]
/// (never go backwards), with boot time never behind monotonic time; the realtime clock may
/// jump either way.
pub trait ClockSource: Send + Sync + 'static {
    /// The current time on `clock`, in nanoseconds.
    fn now(&self, clock: ClockId) -> u64;

    /// Whether these times are the operating system's clocks (`clock_gettime`), so that a
    /// thread can sleep until one of them. Background drivers need that: a service on such a
    /// source starts one by default ([`crate::Builder::drivers`]), on any other none. A source
    /// that wraps [`OsClock`] (to log or count reads, say) returns what the wrapped one does.
    /// Required, not defaulted, so that no wrapper loses its drivers by forgetting it.
    fn is_os_time(&self) -> bool;

    /// A cheaper reading of `clock` that is never after the time and at most
    /// [`ClockSource::coarse_lag`] before it, or `None` if the source has none (the default).
    /// A one-shot arming of a slack timer whose slack has room for the lag reads it
    /// ([`Precision`](crate::Precision)); periodic armings read the precise clock.
    fn now_coarse(&self, clock: ClockId) -> Option<u64> {
        let _ = clock;
        None
    }

    /// How far [`ClockSource::now_coarse`] may lag the time, in ns (0 when it is `None`).
    fn coarse_lag(&self, clock: ClockId) -> u64 {
        let _ = clock;
        0
    }
}

/// The coarse clock `clock` reads through, if Linux has one.
fn coarse_id(clock: ClockId) -> Option<libc::clockid_t> {
    match clock {
        ClockId::Realtime => Some(libc::CLOCK_REALTIME_COARSE),
        ClockId::Monotonic => Some(libc::CLOCK_MONOTONIC_COARSE),
        ClockId::Boottime => None,
    }
}

/// `OsClock::coarse_lag`: six resolutions of the coarse clocks (`clock_getres`, one
/// scheduler tick), read once. A coarse clock is the time of the last tick's timekeeping
/// update, so while the CPU with that duty ticks it lags by at most about one tick (1.9 ticks
/// was the largest lag seen on a Linux 6.18 VM at HZ=250, over 10 s of reads with sleeps
/// between). When that CPU stalls (a long interrupts-off section, a vCPU descheduled), Linux
/// lets another CPU force the update once its own ticks have seen 5 in a row without one
/// (`MAX_STALLED_JIFFIES` in `tick-sched.c`): six ticks is that bound plus the tick in
/// progress. A pause of the whole machine longer than that (every vCPU descheduled) can
/// exceed it until the first tick after the pause. `u64::MAX` if the resolution is unknown
/// (then no timer uses the coarse clocks).
fn os_coarse_lag() -> u64 {
    static LAG: crate::sync::RaceOnce<u64> = crate::sync::RaceOnce::new();
    *LAG.get_or_init(|| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let r = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        if r != 0 || ts.tv_sec != 0 || ts.tv_nsec <= 0 {
            return u64::MAX;
        }
        ts.tv_nsec as u64 * 6
    })
}

/// The operating system's clocks, read with `clock_gettime` (the vDSO: no system call).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsClock;

impl ClockSource for OsClock {
    fn is_os_time(&self) -> bool {
        true
    }

    #[inline]
    fn now_coarse(&self, clock: ClockId) -> Option<u64> {
        Some(read_os(coarse_id(clock)?))
    }

    fn coarse_lag(&self, clock: ClockId) -> u64 {
        coarse_id(clock).map_or(0, |_| os_coarse_lag())
    }

    #[inline]
    fn now(&self, clock: ClockId) -> u64 {
        read_os(clock.as_raw() as libc::clockid_t)
    }
}

/// `clock_gettime(id)` in ns.
#[inline]
fn read_os(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids are ones Linux supports.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    debug_assert_eq!(r, 0, "clock_gettime({id}) failed");
    // The kernel never reports negative times for these clocks (realtime before 1970 is
    // clamped to 0 here).
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(NANOS_PER_SEC)
        .saturating_add(ts.tv_nsec.max(0) as u64)
}

/// A clock set by hand, for deterministic tests: time moves only when the test says so.
/// Clones share the same time.
///
/// It starts at monotonic = boot time = 1 s and realtime = 2026-01-01T00:00:00Z.
/// [`ManualClock::advance`] moves all three clocks; [`ManualClock::suspend`] models a system
/// suspend (boot time and realtime move, monotonic time does not);
/// [`ManualClock::set_realtime`] steps the wall clock, as `settimeofday` does.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualTimes>,
}

#[derive(Debug)]
struct ManualTimes {
    monotonic: AtomicU64,
    boottime: AtomicU64,
    realtime: AtomicU64,
}

/// 2026-01-01T00:00:00Z in nanoseconds since the Unix epoch.
const MANUAL_REALTIME_START: u64 = 1_767_225_600 * NANOS_PER_SEC;

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl ManualClock {
    /// A manual clock at its starting times (see the type's doc).
    pub fn new() -> ManualClock {
        ManualClock {
            inner: Arc::new(ManualTimes {
                monotonic: AtomicU64::new(NANOS_PER_SEC),
                boottime: AtomicU64::new(NANOS_PER_SEC),
                realtime: AtomicU64::new(MANUAL_REALTIME_START),
            }),
        }
    }

    /// Moves every clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ns = duration_nanos(d);
        for c in [
            &self.inner.monotonic,
            &self.inner.boottime,
            &self.inner.realtime,
        ] {
            add_saturating(c, ns);
        }
    }

    /// Models a suspend of length `d`: boot time and realtime move, monotonic time does not.
    pub fn suspend(&self, d: Duration) {
        let ns = duration_nanos(d);
        add_saturating(&self.inner.boottime, ns);
        add_saturating(&self.inner.realtime, ns);
    }

    /// Steps the realtime clock to `ns` since the epoch (forwards or backwards).
    pub fn set_realtime(&self, ns: u64) {
        // Relaxed (all): a test's clock; ordering with the timers comes from their own locks.
        self.inner.realtime.store(ns, Ordering::Relaxed);
    }
}

impl ClockSource for ManualClock {
    /// A manual clock's time moves only when a test moves it: no thread can sleep on it.
    fn is_os_time(&self) -> bool {
        false
    }

    fn now(&self, clock: ClockId) -> u64 {
        let c = match clock {
            ClockId::Monotonic => &self.inner.monotonic,
            ClockId::Boottime => &self.inner.boottime,
            ClockId::Realtime => &self.inner.realtime,
        };
        c.load(Ordering::Relaxed)
    }
}

fn add_saturating(c: &AtomicU64, ns: u64) {
    // Relaxed: see `set_realtime`. The closure never returns `None`, so this cannot fail.
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(ns))
    });
}

/// `d` in ns, saturating at `u64::MAX` (585 years).
pub(crate) fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds per second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A POSIX `struct timespec` as callers pass it: signed seconds and nanoseconds, validated by
/// [`TimeSpec::to_nanos`] the way `timer_settime` validates its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeSpec {
    /// Seconds (`tv_sec`).
    pub sec: i64,
    /// Nanoseconds (`tv_nsec`), valid in `0 .. 1_000_000_000`.
    pub nsec: i64,
}

impl TimeSpec {
    /// A time span of `sec` seconds and `nsec` nanoseconds (not validated).
    pub const fn new(sec: i64, nsec: i64) -> TimeSpec {
        TimeSpec { sec, nsec }
    }

    /// The value in nanoseconds. Seconds beyond what 64 bits of nanoseconds hold saturate to
    /// `u64::MAX` (a timer that never fires), as the kernel's saturating conversion does.
    ///
    /// # Errors
    /// [`Error::InvalidTime`] (`EINVAL`) if `sec < 0` or `nsec` is outside
    /// `0 .. 1_000_000_000`: the kernel's `timespec64_valid` rule.
    #[inline]
    pub fn to_nanos(self) -> Result<u64, Error> {
        if self.sec < 0 || !(0..NANOS_PER_SEC as i64).contains(&self.nsec) {
            return Err(Error::InvalidTime);
        }
        Ok((self.sec as u64)
            .saturating_mul(NANOS_PER_SEC)
            .saturating_add(self.nsec as u64))
    }

    /// The timespec of `ns` nanoseconds.
    #[inline]
    pub fn from_nanos(ns: u64) -> TimeSpec {
        TimeSpec {
            sec: (ns / NANOS_PER_SEC) as i64,
            nsec: (ns % NANOS_PER_SEC) as i64,
        }
    }
}

impl From<Duration> for TimeSpec {
    fn from(d: Duration) -> TimeSpec {
        TimeSpec {
            sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsec: i64::from(d.subsec_nanos()),
        }
    }
}

/// The wheel's tick: the bucketing granularity of a base, in nanoseconds.
///
/// A timer keeps its exact expiry in nanoseconds; the tick only picks its bucket. The
/// conversion to ticks rounds **up** ([`Resolution::ticks_ceil`]): the wheel reaches tick `k`
/// only once `now >= k * tick`, so a timer placed at `ceil(expiry / tick)` is never visited
/// before its expiry, and is late by less than one tick when polled on time.
#[derive(Debug, Clone, Copy)]
pub struct Resolution {
    ns: u64,
    /// `ns` as a multiply-and-shift divisor (exact for every `u64`).
    div: StrengthReducedU64,
}

impl PartialEq for Resolution {
    fn eq(&self, other: &Resolution) -> bool {
        self.ns == other.ns
    }
}

impl Eq for Resolution {}

impl Resolution {
    /// A tick of `ns` nanoseconds.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a zero tick.
    pub fn new(ns: u64) -> Result<Resolution, Error> {
        if ns == 0 {
            return Err(Error::InvalidConfig("the tick must be at least 1 ns"));
        }
        Ok(Resolution {
            ns,
            div: StrengthReducedU64::new(ns),
        })
    }

    /// The tick in nanoseconds.
    pub fn nanos(self) -> u64 {
        self.ns
    }

    /// The first tick at or after `ns`: where a timer expiring at `ns` waits.
    #[inline]
    pub fn ticks_ceil(self, ns: u64) -> u64 {
        let (q, r) = StrengthReducedU64::div_rem(ns, self.div);
        q + u64::from(r != 0)
    }

    /// The last tick at or before `ns`: how far the wheel may advance at time `ns`.
    #[inline]
    pub fn ticks_floor(self, ns: u64) -> u64 {
        ns / self.div
    }

    /// The start of tick `ticks`, in nanoseconds (saturating).
    pub fn tick_start(self, ticks: u64) -> u64 {
        ticks.saturating_mul(self.ns)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn os_clocks_are_sane() {
        let c = OsClock;
        let m1 = c.now(ClockId::Monotonic);
        let b1 = c.now(ClockId::Boottime);
        let m2 = c.now(ClockId::Monotonic);
        assert!(m2 >= m1, "monotonic went backwards");
        assert!(b1 >= m1, "boot time behind monotonic time");
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let rt = c.now(ClockId::Realtime);
        assert!(
            rt.abs_diff(wall) < 5 * NANOS_PER_SEC,
            "realtime {rt} vs {wall}"
        );
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        let shared = c.clone();
        let (m, b, r) = (
            c.now(ClockId::Monotonic),
            c.now(ClockId::Boottime),
            c.now(ClockId::Realtime),
        );
        assert_eq!((m, b), (NANOS_PER_SEC, NANOS_PER_SEC));
        assert_eq!(r, MANUAL_REALTIME_START);
        shared.advance(Duration::from_millis(5));
        assert_eq!(c.now(ClockId::Monotonic), m + 5_000_000);
        assert_eq!(c.now(ClockId::Boottime), b + 5_000_000);
        assert_eq!(c.now(ClockId::Realtime), r + 5_000_000);
        c.suspend(Duration::from_secs(10));
        assert_eq!(
            c.now(ClockId::Monotonic),
            m + 5_000_000,
            "suspend stops monotonic"
        );
        assert_eq!(c.now(ClockId::Boottime), b + 10_005_000_000);
        c.set_realtime(42);
        assert_eq!(c.now(ClockId::Realtime), 42, "the wall clock steps back");
        c.advance(Duration::MAX);
        assert_eq!(c.now(ClockId::Monotonic), u64::MAX, "saturates");
    }

    #[test]
    fn timespec_validation_is_the_kernels() {
        assert_eq!(TimeSpec::new(1, 500).to_nanos(), Ok(1_000_000_500));
        assert_eq!(TimeSpec::new(0, 999_999_999).to_nanos(), Ok(999_999_999));
        for bad in [
            TimeSpec::new(-1, 0),
            TimeSpec::new(0, -1),
            TimeSpec::new(0, 1_000_000_000),
            TimeSpec::new(i64::MIN, 0),
        ] {
            let e = bad.to_nanos().unwrap_err();
            assert_eq!(
                (e.clone(), e.errno()),
                (Error::InvalidTime, libc::EINVAL),
                "{bad:?}"
            );
        }
        assert_eq!(TimeSpec::new(i64::MAX, 0).to_nanos(), Ok(u64::MAX));
        assert_eq!(TimeSpec::from_nanos(3_000_000_007), TimeSpec::new(3, 7));
        assert_eq!(
            TimeSpec::from(Duration::from_millis(1500)),
            TimeSpec::new(1, 500_000_000)
        );
    }

    #[test]
    fn zero_tick_is_rejected() {
        assert!(Resolution::new(0).is_err());
    }

    proptest! {
        /// The wheel reaches tick k at `tick_start(k)`; a timer at `ticks_ceil(expiry)` is
        /// therefore never reached before its expiry and less than one tick after it.
        #[test]
        fn ceil_placement_is_never_early_and_less_than_a_tick_late(
            tick in 1u64..10_000_000,
            expiry in 0u64..(u64::MAX / 4),
        ) {
            let r = Resolution::new(tick).unwrap();
            let k = r.ticks_ceil(expiry);
            prop_assert!(r.tick_start(k) >= expiry);
            prop_assert!(r.tick_start(k) - expiry < tick);
            prop_assert!(r.ticks_floor(expiry) <= k);
            prop_assert!(r.ticks_floor(r.tick_start(k)) == k);
        }

        /// The multiply-and-shift division is the division, for any tick and any time.
        #[test]
        fn ticks_are_exact_divisions(tick in 1u64.., ns: u64) {
            let r = Resolution::new(tick).unwrap();
            prop_assert_eq!(r.ticks_floor(ns), ns / tick);
            prop_assert_eq!(r.ticks_ceil(ns), ns.div_ceil(tick));
        }
    }
}
