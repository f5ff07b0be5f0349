//! The POSIX interval-timer rules, as Linux 6.15+ applies them, on one timer's state.
//!
//! [`ItimerState`] is what the service keeps of a timer under its lock (the registry hands it
//! out as a locked timer's state: `object.rs`), and the rules are its methods. Each is given
//! the current time; none touches a wheel, a queue or a clock itself. It returns what the caller
//! (the service) must do: arm the timer at an expiry on some clock, drop it from its wheel,
//! queue an event, re-arm. That keeps the rules testable on their own, with any time.
//!
//! ```text
//!  settime(v != 0) ──► Armed ──(expiry passes; the base calls expire)──┐
//!        ▲              │                                              │
//!        │              │ settime / delete: signal_seq++ (a queued     ▼
//!        │              │ event becomes stale, dropped at consume)   one-shot: Disarmed
//!        │              ▼                                            periodic: RequeuePending
//!  settime(v == 0) ─► Disarmed ◄── consume(one-shot event)                  │
//!                                                                           │ consume(event):
//!            Armed ◄── forward past now, overrun_last := periods missed ◄──┘
//! ```
//!
//! The rules, with the kernel's names (Linux 6.15+'s `kernel/time/posix-timers.c` and its
//! signal delivery; each rule is checked against the running kernel by the differential tests
//! below and in `tests/timers_kernel.rs`):
//! * `settime` computes the old setting exactly as `gettime` would, then: `signal_seq += 1`
//!   (an event still queued from the previous arming is dropped when it is consumed), status
//!   := Disarmed, overrun := -1, `overrun_last` := 0, interval := the new interval only if the
//!   new value is non-zero (zero disarms and zeroes both the interval and the stored expiry).
//!   A relative `CLOCK_REALTIME` arming runs on the monotonic clock; an absolute one on the
//!   realtime clock; a relative value is added to now with saturation (an overflow never
//!   fires). A `SIGEV_NONE` timer keeps its expiry for `gettime` but is never queued (status
//!   stays Disarmed).
//! * **Where tempora follows POSIX rather than Linux:** a disarmed `SIGEV_NONE` timer reads
//!   zero ("`it_value` shall contain ... zero if the timer is disarmed"). Linux 6.18 leaves the
//!   old hrtimer expiry in place and its `SIGEV_NONE` gettime goes on counting down to it.
//!   This is the one place where tempora's answers differ from the kernel's; the kernel
//!   differential tests name it where they compare.
//! * `gettime`: a periodic timer that is not Armed (its event is pending, or it is `SIGEV_NONE`)
//!   is first *forwarded* by whole intervals past now, the skipped intervals added to the
//!   internal overrun (not visible until an event is consumed), so its remaining time is in
//!   `(0, interval]`. A one-shot timer that is Disarmed reads zero (never armed, disarmed, or
//!   fired, even with its event still pending); a one-shot `SIGEV_NONE` timer reads its
//!   remaining time, zero once passed. An armed timer whose expiry has passed but that the base
//!   has not fired yet reads 1 ns, so an armed timer never reads as disarmed.
//! * `expire` (the base found the timer due): periodic → RequeuePending, one-shot → Disarmed;
//!   the event carries the current `signal_seq`. Nothing re-arms here: a periodic timer whose
//!   events nobody consumes costs nothing after its first expiry.
//! * `consume` (the owner takes the event): stale (`signal_seq` moved) → dropped. One-shot →
//!   delivered with overrun 0. Periodic → forwarded past now (the skipped intervals added to
//!   the overrun, which started at -1, so the expiry that queued the event does not count),
//!   re-armed, `overrun_last` := min(overrun, `i32::MAX`), overrun := -1, `signal_seq += 1`.

use super::types::{ItimerSpec, NotifyKind, Status};
use crate::clock::{ClockId, ALL_CLOCKS};
use crate::clock::{LazyNow, TimeSpec};
use crate::registry::Zeroable;
use crate::sync::{AtomicI32, Ordering};

/// Written under the timer's lock, read without it.
#[derive(Debug, Default)]
pub(crate) struct ItimerPublished {
    /// What `getoverrun` returns.
    pub(crate) overrun_last: AtomicI32,
}

// SAFETY: an atomic integer; zero is its default (see `Zeroable` for loom).
unsafe impl Zeroable for ItimerPublished {}

// SAFETY: integers only; all-zero is `ItimerState::default()` (status Disarmed, not queued,
// both clocks Realtime, notify None, in no wheel).
unsafe impl Zeroable for ItimerState {}

/// A timer's state under its lock (line 2 of its object; `object.rs` checks the layout).
///
/// The small fields are packed into two bytes (the kernel packs `k_itimer`'s flags alike):
///
/// ```text
///  waits  bits 0-1  expiry_clock   the clock the armed expiry is measured on (index into
///                                  ALL_CLOCKS): the timer's own clock, except that a relative
///                                  CLOCK_REALTIME arming runs on the monotonic clock
///         bits 2-3  wheel          0 while the timer is in no wheel; otherwise 1 + the index
///                                  of the base's wheel (one per clock) that holds it
///         bit  4    coarse         the expiry came from a coarse clock reading (`coarse`)
///  flags  bits 0-1  status         Status (the kernel's it_status)
///         bit  2    queued         the timer's one preallocated event is on its owner's queue
///         bits 3-4  clock          the clock the timer was created on (index into ALL_CLOCKS)
///         bits 5-6  notify         NotifyKind
/// ```
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
pub(crate) struct ItimerState {
    /// The base whose wheel holds the timer while `wheel() != 0`.
    pub(crate) base: u16,
    waits: u8,
    flags: u8,
    /// Bumped by settime, delete and re-arm; an event carrying an older value is stale.
    pub(crate) signal_seq: u32,
    /// Absolute expiry, ns on the timer's clock.
    pub(crate) expiry: u64,
    /// Period in ns; 0 for a one-shot timer.
    pub(crate) interval: u64,
    /// Periods missed since the pending event was queued, saturating at `i32::MAX` (all
    /// `getoverrun` can report; the kernel clamps its 64-bit count there when it reports).
    pub(crate) overrun: i32,
    /// The `signal_seq` the queued event carries (the kernel's `it_sigqueue_seq`).
    pub(crate) sigqueue_seq: u32,
}

const EXPIRY_CLOCK: (u32, u8) = (0, 0b11);
const WHEEL: (u32, u8) = (2, 0b11);
const COARSE: (u32, u8) = (4, 0b1);
const STATUS: (u32, u8) = (0, 0b11);
const QUEUED: (u32, u8) = (2, 0b1);
const CLOCK: (u32, u8) = (3, 0b11);
const NOTIFY: (u32, u8) = (5, 0b11);

/// The bits `field` (shift, mask) of `byte`.
#[inline]
fn get(byte: u8, (shift, mask): (u32, u8)) -> u8 {
    byte >> shift & mask
}

/// `byte` with the bits `field` (shift, mask) set to `v`.
#[inline]
fn set(byte: &mut u8, (shift, mask): (u32, u8), v: u8) {
    debug_assert!(v <= mask);
    *byte = *byte & !(mask << shift) | v << shift;
}

/// `overrun` plus `n` periods, saturating at `i32::MAX` (the sum is taken in 64 bits, so a
/// saturated count stays what clamping the exact count would give).
#[inline]
fn add_periods(overrun: i32, n: u64) -> i32 {
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    i64::from(overrun)
        .saturating_add(n)
        .min(i64::from(i32::MAX)) as i32
}

/// A timer setting as `timer_gettime` reports it: remaining time and interval, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Setting {
    pub(crate) value: u64,
    pub(crate) interval: u64,
}

impl From<Setting> for ItimerSpec {
    fn from(s: Setting) -> ItimerSpec {
        ItimerSpec {
            value: TimeSpec::from_nanos(s.value),
            interval: TimeSpec::from_nanos(s.interval),
        }
    }
}

/// What the caller must do with the timer's wheel entry after `settime` or `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arm {
    /// Not queued on any wheel (remove it if it was).
    Off,
    /// Queue it to fire once `clock` reads `expiry` (at once if that has passed).
    At { clock: ClockId, expiry: u64 },
}

/// An event queued by `expire`, to be handed back to `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event {
    seq: u32,
}

impl Event {
    /// The event of the arming whose `signal_seq` was `seq` (a timer's `sigqueue_seq`).
    pub(crate) fn with_seq(seq: u32) -> Event {
        Event { seq }
    }

    /// The `signal_seq` it was queued with.
    pub(crate) fn seq(self) -> u32 {
        self.seq
    }
}

/// What consuming an event means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumed {
    /// settime or delete since it was queued: drop it, deliver nothing.
    Stale,
    /// Deliver it with this overrun; `rearm` is where a periodic timer now waits.
    Deliver { overrun: i32, rearm: Arm },
}

/// Moves `expiry` forward by whole `interval`s until it is after `now`; returns the new expiry
/// and the number of intervals added (0 if `expiry` is already after `now`). Saturates: an
/// expiry that would pass `u64::MAX` stays there (never fires).
pub(crate) fn forward(expiry: u64, interval: u64, now: u64) -> (u64, u64) {
    if now < expiry || interval == 0 {
        return (expiry, 0);
    }
    let n = (now - expiry) / interval + 1;
    (expiry.saturating_add(n.saturating_mul(interval)), n)
}

impl ItimerState {
    /// A new timer's state: disarmed, on `clock`, notifying by `notify`.
    pub(crate) fn new(clock: ClockId, notify: NotifyKind) -> ItimerState {
        let mut s = ItimerState::default();
        set(&mut s.flags, CLOCK, clock.index() as u8);
        set(&mut s.flags, NOTIFY, notify as u8);
        s
    }

    pub(crate) fn status(&self) -> Status {
        match get(self.flags, STATUS) {
            0 => Status::Disarmed,
            1 => Status::Armed,
            _ => Status::RequeuePending,
        }
    }

    pub(crate) fn set_status(&mut self, status: Status) {
        set(&mut self.flags, STATUS, status as u8);
    }

    pub(crate) fn queued(&self) -> bool {
        get(self.flags, QUEUED) != 0
    }

    pub(crate) fn set_queued(&mut self, queued: bool) {
        set(&mut self.flags, QUEUED, u8::from(queued));
    }

    pub(crate) fn notify(&self) -> NotifyKind {
        match get(self.flags, NOTIFY) {
            0 => NotifyKind::None,
            1 => NotifyKind::Queue,
            _ => NotifyKind::Callback,
        }
    }

    /// 0 while the timer is in no wheel; otherwise 1 + the index of the wheel holding it.
    pub(crate) fn wheel(&self) -> u8 {
        get(self.waits, WHEEL)
    }

    pub(crate) fn set_wheel(&mut self, wheel: u8) {
        set(&mut self.waits, WHEEL, wheel);
    }

    /// Whether `expiry` came from a coarse clock reading (`Owner::settime`): up to the
    /// source's coarse lag after the time, which the timer's slack had to absorb. Every later
    /// placement of the same expiry (a re-arm to a later time left in place and met early, a
    /// precision change) takes the lag out of the slack again, as the arming did.
    pub(crate) fn coarse(&self) -> bool {
        get(self.waits, COARSE) != 0
    }

    pub(crate) fn set_coarse(&mut self, coarse: bool) {
        set(&mut self.waits, COARSE, u8::from(coarse));
    }

    fn set_expiry_clock(&mut self, clock: ClockId) {
        set(&mut self.waits, EXPIRY_CLOCK, clock.index() as u8);
    }

    /// `timer_create`: a disarmed timer on `clock`, notifying by `notify`, overrun 0.
    pub(crate) fn create(
        &mut self,
        published: &ItimerPublished,
        clock: ClockId,
        notify: NotifyKind,
    ) {
        *self = ItimerState::new(clock, notify);
        set_overrun_last(published, 0);
    }

    /// `timer_delete`, as far as the rules go: disarmed, and a queued event is stale.
    pub(crate) fn delete(&mut self) {
        self.set_status(Status::Disarmed);
        self.signal_seq = self.signal_seq.wrapping_add(1);
    }

    /// Whether the stored expiry means anything: a disarmed timer's only matters to a
    /// `SIGEV_NONE` timer (whose status is Disarmed while it counts down too), and disarming
    /// one clears it (what `gettime` reads).
    pub(crate) fn has_expiry(&self) -> bool {
        let disarmed = self.status() == Status::Disarmed;
        !(disarmed && self.notify() != NotifyKind::None
            || disarmed && self.expiry == 0 && self.interval == 0)
    }

    /// Whether the timer's queued event belongs to its current arming (`consume` would deliver
    /// it, not drop it as stale).
    pub(crate) fn event_pending(&self) -> bool {
        self.notify() == NotifyKind::Queue && self.queued() && self.sigqueue_seq == self.signal_seq
    }

    /// Puts back a checkpointed setting on a just-created timer: its expiry (on
    /// `expiry_clock`), interval, status and both overrun counts. Returns where it must wait:
    /// an Armed timer that notifies is armed again, as settime would arm it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore(
        &mut self,
        published: &ItimerPublished,
        expiry_clock: ClockId,
        expiry: u64,
        interval: u64,
        status: Status,
        overrun: i64,
        overrun_last: i32,
    ) -> Arm {
        self.set_expiry_clock(expiry_clock);
        self.expiry = expiry;
        self.interval = interval;
        self.set_status(status);
        self.overrun = overrun.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
        set_overrun_last(published, overrun_last);
        if status == Status::Armed && self.notify() != NotifyKind::None {
            Arm::At {
                clock: expiry_clock,
                expiry,
            }
        } else {
            Arm::Off
        }
    }

    /// The clock the stored expiry is measured on.
    pub(crate) fn expiry_clock(&self) -> ClockId {
        ALL_CLOCKS[usize::from(get(self.waits, EXPIRY_CLOCK))]
    }

    /// The clock the timer was created on.
    pub(crate) fn clock(&self) -> ClockId {
        ALL_CLOCKS[usize::from(get(self.flags, CLOCK))]
    }

    /// `timer_gettime`. May forward a periodic timer that is not armed (see the module doc),
    /// which is why it needs the lock and `&mut`.
    pub(crate) fn gettime(&mut self, now: &LazyNow<'_>) -> Setting {
        let interval = self.interval;
        let status = self.status();
        let none = self.notify() == NotifyKind::None;
        if status == Status::Disarmed && !none {
            return Setting { value: 0, interval };
        }
        let t = now.get(self.expiry_clock());
        if interval != 0 && status != Status::Armed {
            let (expiry, n) = forward(self.expiry, interval, t);
            self.expiry = expiry;
            self.overrun = add_periods(self.overrun, n);
        }
        let remaining = self.expiry.saturating_sub(t);
        let value = match (remaining, none) {
            (0, true) => 0,
            (0, false) => 1,
            (r, _) => r,
        };
        Setting { value, interval }
    }

    /// `timer_settime`: returns the old setting and what to do with the wheel entry.
    /// `value` and `interval` are validated nanoseconds; `abs` is `TIMER_ABSTIME`.
    pub(crate) fn settime(
        &mut self,
        published: &ItimerPublished,
        now: &LazyNow<'_>,
        abs: bool,
        value: u64,
        interval: u64,
    ) -> (Setting, Arm) {
        let old = self.gettime(now);
        self.signal_seq = self.signal_seq.wrapping_add(1);
        self.set_status(Status::Disarmed);
        self.overrun = -1;
        set_overrun_last(published, 0);
        if value == 0 {
            // The expiry is cleared too, so a disarmed SIGEV_NONE timer (whose status is
            // Disarmed while armed as well) reads zero, as POSIX says. Linux leaves its
            // hrtimer's expiry and goes on counting down to it; tempora follows POSIX here
            // (`sigev_none_disarmed_reads_zero_as_posix_says`).
            self.interval = 0;
            self.expiry = 0;
            return (old, Arm::Off);
        }
        self.interval = interval;
        let clock = self.clock();
        let expiry_clock = if clock == ClockId::Realtime && !abs {
            ClockId::Monotonic
        } else {
            clock
        };
        self.set_expiry_clock(expiry_clock);
        self.expiry = if abs {
            value
        } else {
            now.get(expiry_clock).saturating_add(value)
        };
        if self.notify() == NotifyKind::None {
            return (old, Arm::Off);
        }
        self.set_status(Status::Armed);
        (
            old,
            Arm::At {
                clock: expiry_clock,
                expiry: self.expiry,
            },
        )
    }

    /// The base found the timer due: its event, or `None` if it is no longer armed.
    pub(crate) fn expire(&mut self) -> Option<Event> {
        if self.status() != Status::Armed {
            return None;
        }
        let next = if self.interval != 0 {
            Status::RequeuePending
        } else {
            Status::Disarmed
        };
        self.set_status(next);
        Some(Event {
            seq: self.signal_seq,
        })
    }

    /// The owner consumes `event` at time `now`.
    pub(crate) fn consume(
        &mut self,
        published: &ItimerPublished,
        event: Event,
        now: &LazyNow<'_>,
    ) -> Consumed {
        if event.seq != self.signal_seq {
            return Consumed::Stale;
        }
        if self.status() != Status::RequeuePending {
            return Consumed::Deliver {
                overrun: 0,
                rearm: Arm::Off,
            };
        }
        let clock = self.expiry_clock();
        let (expiry, n) = forward(self.expiry, self.interval, now.get(clock));
        self.expiry = expiry;
        let latched = add_periods(self.overrun, n).max(0);
        set_overrun_last(published, latched);
        self.overrun = -1;
        self.signal_seq = self.signal_seq.wrapping_add(1);
        self.set_status(Status::Armed);
        Consumed::Deliver {
            overrun: latched,
            rearm: Arm::At { clock, expiry },
        }
    }
}

/// What `getoverrun` returns from now on (written under the timer's lock).
pub(crate) fn set_overrun_last(published: &ItimerPublished, v: i32) {
    // Relaxed: lock-free readers validate with the generation check in `read_current`.
    published.overrun_last.store(v, Ordering::Relaxed);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::{ClockSource, ManualClock};
    use crate::timers::TimerId;
    use std::cell::RefCell;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    /// Timers as the rules see them: a state and a published part each, indexed by ID.
    struct Fixture {
        clock: ManualClock,
        timers: RefCell<Vec<(ItimerState, ItimerPublished)>>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                clock: ManualClock::new(),
                timers: RefCell::new(Vec::new()),
            }
        }
        fn timer(&self, clock: ClockId, notify: NotifyKind) -> TimerId {
            let mut timers = self.timers.borrow_mut();
            timers.push((ItimerState::new(clock, notify), ItimerPublished::default()));
            TimerId::new(timers.len() as i32 - 1).unwrap()
        }
        fn with<R>(
            &self,
            id: TimerId,
            f: impl FnOnce(&mut ItimerState, &ItimerPublished, &LazyNow<'_>) -> R,
        ) -> R {
            let now = LazyNow::new(&self.clock);
            let mut timers = self.timers.borrow_mut();
            let (state, published) = &mut timers[id.get() as usize];
            f(state, published, &now)
        }
        fn settime(&self, id: TimerId, abs: bool, value: u64, interval: u64) -> (Setting, Arm) {
            self.with(id, |l, p, now| l.settime(p, now, abs, value, interval))
        }
        fn gettime(&self, id: TimerId) -> Setting {
            self.with(id, |l, _, now| l.gettime(now))
        }
        fn getoverrun(&self, id: TimerId) -> Result<i32, ()> {
            Ok(self.with(id, |_, p, _| p.overrun_last.load(Ordering::Relaxed)))
        }
        fn advance(&self, ns: u64) {
            self.clock.advance(Duration::from_nanos(ns));
        }
        fn mono(&self) -> u64 {
            self.clock.now(ClockId::Monotonic)
        }
    }

    #[test]
    fn forward_counts_whole_intervals_past_now() {
        assert_eq!(forward(100, 100, 99), (100, 0));
        assert_eq!(forward(100, 100, 100), (200, 1));
        assert_eq!(forward(100, 100, 1050), (1100, 10));
        assert_eq!(forward(u64::MAX - 5, 10, u64::MAX), (u64::MAX, 1));
    }

    #[test]
    fn relative_one_shot_counts_down_reads_1ns_when_overdue_then_zero_once_fired() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        let (old, arm) = f.settime(t, false, 10 * MS, 0);
        assert_eq!(old, Setting::default(), "a new timer is disarmed");
        assert_eq!(
            arm,
            Arm::At {
                clock: ClockId::Monotonic,
                expiry: f.mono() + 10 * MS
            }
        );
        f.advance(4 * MS);
        assert_eq!(
            f.gettime(t),
            Setting {
                value: 6 * MS,
                interval: 0
            }
        );
        f.advance(20 * MS);
        assert_eq!(
            f.gettime(t).value,
            1,
            "armed and overdue, not yet fired: 1 ns"
        );
        let ev = f.with(t, |l, _, _| l.expire()).unwrap();
        assert_eq!(
            f.gettime(t),
            Setting::default(),
            "a fired one-shot reads zero"
        );
        assert_eq!(
            f.with(t, |l, p, now| l.consume(p, ev, now)),
            Consumed::Deliver {
                overrun: 0,
                rearm: Arm::Off
            }
        );
        assert_eq!(f.getoverrun(t), Ok(0));
    }

    #[test]
    fn zero_value_disarms_and_zeroes_the_interval_and_returns_the_old_setting() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        f.settime(t, false, 50 * MS, 20 * MS);
        f.advance(10 * MS);
        let (old, arm) = f.settime(t, false, 0, 7 * MS);
        assert_eq!(
            old,
            Setting {
                value: 40 * MS,
                interval: 20 * MS
            }
        );
        assert_eq!(arm, Arm::Off);
        assert_eq!(
            f.gettime(t),
            Setting::default(),
            "interval zeroed with the value"
        );
    }

    #[test]
    fn periodic_event_pending_is_forwarded_and_overrun_counts_missed_periods_on_consume() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        f.settime(t, false, 100 * MS, 100 * MS);
        f.advance(100 * MS);
        let ev = f.with(t, |l, _, _| l.expire()).unwrap();
        f.advance(150 * MS); // 250 ms after arming: event pending
        assert_eq!(
            f.gettime(t),
            Setting {
                value: 50 * MS,
                interval: 100 * MS
            },
            "forwarded into (0, interval]"
        );
        assert_eq!(
            f.getoverrun(t),
            Ok(0),
            "unchanged until the event is consumed"
        );
        f.advance(800 * MS); // 1050 ms: ~1 s of periods missed, as the kernel selftest
        let start = f.mono() - 1050 * MS;
        assert_eq!(
            f.with(t, |l, p, now| l.consume(p, ev, now)),
            Consumed::Deliver {
                overrun: 9,
                rearm: Arm::At {
                    clock: ClockId::Monotonic,
                    expiry: start + 1100 * MS
                }
            }
        );
        assert_eq!(f.getoverrun(t), Ok(9));
        assert_eq!(f.gettime(t).value, 50 * MS, "re-armed for the next period");
    }

    #[test]
    fn consuming_on_time_reports_no_overrun() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        f.settime(t, false, 10 * MS, 10 * MS);
        f.advance(10 * MS);
        let ev = f.with(t, |l, _, _| l.expire()).unwrap();
        let c = f.with(t, |l, p, now| l.consume(p, ev, now));
        assert!(matches!(c, Consumed::Deliver { overrun: 0, .. }), "{c:?}");
    }

    #[test]
    fn settime_makes_a_queued_event_stale_and_resets_the_overrun() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        f.settime(t, false, MS, MS);
        f.advance(MS);
        let e1 = f.with(t, |l, _, _| l.expire()).unwrap();
        f.advance(10 * MS); // periods at 2..=11 ms missed while the event waited
        let _ = f.with(t, |l, p, now| l.consume(p, e1, now));
        assert_eq!(f.getoverrun(t), Ok(10));
        f.advance(MS);
        let e2 = f.with(t, |l, _, _| l.expire()).unwrap();
        f.settime(t, false, 5 * MS, 0);
        assert_eq!(f.getoverrun(t), Ok(0), "settime resets the overrun");
        assert_eq!(
            f.with(t, |l, p, now| l.consume(p, e2, now)),
            Consumed::Stale
        );
    }

    #[test]
    fn overrun_is_capped_at_i32_max() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        f.settime(t, false, 1, 1);
        f.advance(1);
        let ev = f.with(t, |l, _, _| l.expire()).unwrap();
        f.advance(1 << 40);
        let c = f.with(t, |l, p, now| l.consume(p, ev, now));
        assert!(
            matches!(
                c,
                Consumed::Deliver {
                    overrun: i32::MAX,
                    ..
                }
            ),
            "{c:?}"
        );
        assert_eq!(f.getoverrun(t), Ok(i32::MAX));
    }

    #[test]
    fn realtime_relative_runs_on_monotonic_absolute_on_realtime() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Realtime, NotifyKind::Queue);
        let (_, rel) = f.settime(t, false, 5 * MS, 0);
        assert_eq!(
            rel,
            Arm::At {
                clock: ClockId::Monotonic,
                expiry: f.mono() + 5 * MS
            }
        );
        let wall = f.clock.now(ClockId::Realtime);
        let (_, abs) = f.settime(t, true, wall + 7 * MS, 0);
        assert_eq!(
            abs,
            Arm::At {
                clock: ClockId::Realtime,
                expiry: wall + 7 * MS
            }
        );
        // A wall-clock step moves what gettime reports for the absolute timer.
        f.clock.set_realtime(wall + 2 * MS);
        assert_eq!(f.gettime(t).value, 5 * MS);
    }

    #[test]
    fn past_absolute_time_arms_for_immediate_firing_and_huge_relative_never_fires() {
        let f = Fixture::new();
        let t = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        let (_, arm) = f.settime(t, true, 5, 0);
        assert_eq!(
            arm,
            Arm::At {
                clock: ClockId::Monotonic,
                expiry: 5
            }
        );
        assert_eq!(f.gettime(t).value, 1, "overdue until the base fires it");
        let (_, arm) = f.settime(t, false, u64::MAX, 0);
        assert_eq!(
            arm,
            Arm::At {
                clock: ClockId::Monotonic,
                expiry: u64::MAX
            }
        );
    }

    #[test]
    fn sigev_none_is_never_queued_but_gettime_shows_its_state() {
        let f = Fixture::new();
        let one = f.timer(ClockId::Monotonic, NotifyKind::None);
        let per = f.timer(ClockId::Monotonic, NotifyKind::None);
        assert_eq!(f.settime(one, false, 10 * MS, 0).1, Arm::Off);
        assert_eq!(f.settime(per, false, 10 * MS, 4 * MS).1, Arm::Off);
        f.advance(3 * MS);
        assert_eq!(f.gettime(one).value, 7 * MS);
        f.advance(10 * MS);
        assert_eq!(f.gettime(one), Setting::default(), "passed: zero");
        // 13 ms after arming: first expiry at 10 ms, forwarded to 14 ms.
        assert_eq!(
            f.gettime(per),
            Setting {
                value: MS,
                interval: 4 * MS
            },
            "periodic: forwarded into (0, interval]"
        );
        assert_eq!(f.getoverrun(per), Ok(0));
        assert_eq!(f.with(per, |l, _, _| l.expire()), None, "never armed");
    }

    /// A disarmed `SIGEV_NONE` timer reads zero, as POSIX says of `it_value` ("zero if the
    /// timer is disarmed"). Linux 6.18 differs, measured: `timer_settime(SIGEV_NONE periodic
    /// 10 ms / 4 ms)`, 13.27 ms later `timer_settime(0, interval 7 ms)` returned old (0.721 ms,
    /// 4 ms), and the next `timer_gettime` returned (0.720 ms, 0): disarmed, yet still counting
    /// down to the old expiry, which the kernel leaves in its hrtimer. tempora follows POSIX.
    #[test]
    fn sigev_none_disarmed_reads_zero_as_posix_says() {
        let f = Fixture::new();
        let none = f.timer(ClockId::Monotonic, NotifyKind::None);
        let queued = f.timer(ClockId::Monotonic, NotifyKind::Queue);
        for t in [none, queued] {
            f.settime(t, false, 10 * MS, 4 * MS);
        }
        f.advance(13 * MS);
        let (old, _) = f.settime(none, false, 0, 7 * MS);
        assert_eq!(
            old,
            Setting {
                value: MS,
                interval: 4 * MS
            },
            "the old setting is still the armed one's"
        );
        f.advance(MS / 2);
        assert_eq!(f.gettime(none), Setting::default(), "disarmed: zero");
        assert_eq!(
            f.settime(none, false, 0, 0).0,
            Setting::default(),
            "and so is the old value of the next settime"
        );
        f.settime(queued, false, 0, 7 * MS);
        assert_eq!(f.gettime(queued), Setting::default());
    }

    /// The rules against the running kernel, for what needs no signal: random sequences of
    /// settime (relative and absolute, with and without an interval, zero values) and gettime
    /// on a `SIGEV_NONE` kernel timer and a `SIGEV_NONE` tempora timer on the OS clocks,
    /// CLOCK_MONOTONIC and CLOCK_REALTIME. Each pair of calls is timed; the two answers may
    /// differ by the time between them (and, for a periodic timer, modulo its interval), never
    /// more. `TEMPORA_SOAK=<steps>` runs longer.
    #[test]
    fn kernel_differential_sigev_none_settime_gettime() {
        use crate::clock::OsClock;
        let steps: usize = std::env::var("TEMPORA_SOAK")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(150);
        let now = |k: ClockId| OsClock.now(k);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        for clock in [ClockId::Monotonic, ClockId::Realtime] {
            let k = tempora_kernel::timer_create_none_on(clock.as_raw()).unwrap();
            let mut timer = ItimerState::new(clock, NotifyKind::None);
            let published = ItimerPublished::default();
            // Whether the last settime disarmed the pair: there the answers differ by design
            // (tempora reads zero, as POSIX says; Linux counts down to the old expiry).
            let mut disarmed = false;
            for step in 0..steps {
                let op = next(3);
                let before = OsClock.now(ClockId::Monotonic);
                let (kernel, ours, what, was_disarmed) = if op < 2 {
                    let abs = next(2) == 1;
                    let value = if next(5) == 0 { 0 } else { 1 + next(60 * MS) };
                    let interval = if next(2) == 0 {
                        0
                    } else {
                        20 * MS + next(20 * MS)
                    };
                    let value = if abs && value != 0 {
                        now(clock) + value
                    } else {
                        value
                    };
                    let kernel =
                        tempora_kernel::timer_settime(k, i32::from(abs), value, interval).unwrap();
                    let (old, _) =
                        timer.settime(&published, &LazyNow::new(&OsClock), abs, value, interval);
                    let was_disarmed = std::mem::replace(&mut disarmed, value == 0);
                    (
                        kernel,
                        (old.value, old.interval),
                        format!("settime abs={abs} {value} {interval}"),
                        was_disarmed,
                    )
                } else {
                    let kernel = tempora_kernel::timer_gettime(k).unwrap();
                    let cur = timer.gettime(&LazyNow::new(&OsClock));
                    let what = "gettime".to_string();
                    (kernel, (cur.value, cur.interval), what, disarmed)
                };
                let gap = OsClock.now(ClockId::Monotonic) - before + 100_000;
                assert_eq!(kernel.1, ours.1, "{clock:?} step {step} {what}: interval");
                if was_disarmed {
                    // The one divergence from Linux (module doc): a disarmed SIGEV_NONE timer
                    // reads zero here, the old expiry's countdown there.
                    assert_eq!(
                        ours,
                        (0, 0),
                        "{clock:?} step {step} {what}: disarmed reads 0"
                    );
                } else {
                    let diff = kernel.0.abs_diff(ours.0);
                    let circular = match kernel.1 {
                        0 => diff,
                        i => diff.min(i.saturating_sub(diff)),
                    };
                    assert!(
                        circular <= gap,
                        "{clock:?} step {step} {what}: kernel {kernel:?}, tempora {ours:?}, gap {gap}"
                    );
                }
                if next(4) == 0 {
                    std::thread::sleep(Duration::from_nanos(next(8 * MS)));
                }
            }
            tempora_kernel::timer_delete(k).unwrap();
        }
    }
}
