//! The POSIX interval-timer rules, as Linux 6.15+ applies them, on one timer's state.
//!
//! [`ItimerState`] is what the service keeps of a timer under its lock (the registry hands it
//! out as a locked timer's state: `object/mod.rs`), and the rules are its methods. Each is given
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
//!   realtime clock; a relative value is added to now with saturation. The value, the
//!   interval and the expiry are clamped at `KTIME_MAX` (`i64::MAX` ns), as the kernel
//!   clamps them: such a timer never fires, and `gettime` reads the time left to `KTIME_MAX`. A `SIGEV_NONE` timer keeps its expiry for `gettime` but is never queued (status
//!   stays Disarmed).
//! * **Where tempora follows POSIX rather than Linux:** a disarmed `SIGEV_NONE` timer reads
//!   zero ("`it_value` shall contain ... zero if the timer is disarmed"). Linux 6.18 leaves the
//!   old hrtimer expiry in place and its `SIGEV_NONE` gettime goes on counting down to it.
//!   This is the one place where tempora's answers differ from the kernel's; the kernel
//!   differential tests name it where they compare.
//! * `gettime`: a periodic timer that is not Armed (its event is pending, or it is `SIGEV_NONE`)
//!   reads as *forwarded* by whole intervals past now, so its remaining time is in
//!   `(0, interval]`. The kernel stores the forwarded expiry and adds the skipped intervals to
//!   the internal overrun; tempora leaves the state alone, and `consume` forwards from the
//!   stored expiry by the same intervals in total, so every value a program reads is the
//!   kernel's, and `gettime` needs no lock (`Timer::read_unlocked`). A one-shot timer that is Disarmed reads zero (never armed, disarmed, or
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
    /// What `getoverrun` returns (`0..=i32::MAX`: [`overrun_last`] reads it), and in the sign
    /// bit [`LOOK`]: a signal timer's signal is outstanding, so `getoverrun` must take the
    /// lock and look whether it was delivered (`signals/mod.rs`). Every other `getoverrun` is a
    /// lock-free read.
    overrun_last: AtomicI32,
}

/// The sign bit of `ItimerPublished::overrun_last`: `getoverrun` must look under the lock.
const LOOK: i32 = i32::MIN;

/// The published word as read without the lock: `Ok(getoverrun's value)`, or `Err(())` if
/// `getoverrun` must look under the lock.
pub(crate) fn overrun_last_lock_free(published: &ItimerPublished) -> Result<i32, ()> {
    // Relaxed: lock-free readers validate with the generation check in `read_current`.
    let v = published.overrun_last.load(Ordering::Relaxed);
    if v < 0 {
        Err(())
    } else {
        Ok(v)
    }
}

/// What `getoverrun` returns (under the timer's lock, or as a snapshot of it).
pub(crate) fn overrun_last(published: &ItimerPublished) -> i32 {
    // Relaxed: see `overrun_last_lock_free`.
    published.overrun_last.load(Ordering::Relaxed) & !LOOK
}

/// Sets or clears [`LOOK`], keeping the value (under the timer's lock).
pub(crate) fn set_look(published: &ItimerPublished, look: bool) {
    let v = overrun_last(published) | if look { LOOK } else { 0 };
    // Relaxed: see `overrun_last_lock_free`.
    published.overrun_last.store(v, Ordering::Relaxed);
}

// SAFETY: an atomic integer; zero is its default (see `Zeroable` for loom).
unsafe impl Zeroable for ItimerPublished {}

// SAFETY: integers only; all-zero is `ItimerState::default()` (status Disarmed, not queued,
// both clocks Realtime, notify None, in no wheel).
unsafe impl Zeroable for ItimerState {}

/// A timer's state under its lock (line 2 of its object; `object/mod.rs` checks the layout).
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
///         bit  5    owed           a signal timer's expiry whose signal is not sent yet
///                                  (`signals/mod.rs`)
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
const OWED: (u32, u8) = (5, 0b1);
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
pub(crate) fn add_periods(overrun: i32, n: u64) -> i32 {
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
/// expiry that would pass [`KTIME_MAX`] stays there (never fires), as the kernel's
/// `hrtimer_forward` adds with `ktime_add_safe`.
pub(crate) fn forward(expiry: u64, interval: u64, now: u64) -> (u64, u64) {
    if now < expiry || interval == 0 {
        return (expiry, 0);
    }
    let n = (now - expiry) / interval + 1;
    (
        expiry
            .saturating_add(n.saturating_mul(interval))
            .min(KTIME_MAX),
        n,
    )
}

/// The kernel's `KTIME_MAX` (`i64::MAX` ns, about 292 years): the latest expiry and the
/// longest interval a timer holds. Linux's `timer_settime` clamps a longer `it_value` or
/// `it_interval` to it (`timespec64_to_ktime`), and a relative value whose sum with now passes
/// it (`ktime_add_safe`); `timer_gettime` then reads the time left to it and the clamped
/// interval. `settime` clamps alike, so an absolute `LLONG_MAX` s reads back as about 9.2e9 s
/// less the clock's time, not 1.8e10 s.
pub(crate) const KTIME_MAX: u64 = i64::MAX as u64;

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
            2 => NotifyKind::Callback,
            _ => NotifyKind::Signal,
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

    /// A signal timer's expiry whose signal is not sent yet (`signals/mod.rs`).
    pub(crate) fn owed(&self) -> bool {
        get(self.waits, OWED) != 0
    }

    pub(crate) fn set_owed(&mut self, owed: bool) {
        set(&mut self.waits, OWED, u8::from(owed));
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

    /// `timer_gettime`. It only reads: a periodic timer that is not armed reads as forwarded
    /// past now, and the periods skipped are counted when its event is consumed (`consume`
    /// forwards from the same stored expiry), so the state needs no change here and a copy
    /// read without the lock (`Timer::read_unlocked`) answers as the state itself would.
    #[inline(always)]
    pub(crate) fn gettime(&self, now: &LazyNow<'_>) -> Setting {
        let interval = self.interval;
        let status = self.status();
        let none = self.notify() == NotifyKind::None;
        if status == Status::Disarmed && !none {
            return Setting { value: 0, interval };
        }
        let t = now.get(self.expiry_clock());
        let mut next = self.expiry;
        if interval != 0 && status != Status::Armed {
            next = forward(self.expiry, interval, t).0;
        }
        let remaining = next.saturating_sub(t);
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
        // A signal not sent yet belongs to the old arming: it is void, as a queued one is.
        self.set_owed(false);
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
        // Linux's clamps (`KTIME_MAX`).
        let (value, interval) = (value.min(KTIME_MAX), interval.min(KTIME_MAX));
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
            now.get(expiry_clock).saturating_add(value).min(KTIME_MAX)
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

/// What `getoverrun` returns from now on (written under the timer's lock; `v >= 0`). Clears
/// [`LOOK`]: the callers settle an outstanding signal or void it (settime).
pub(crate) fn set_overrun_last(published: &ItimerPublished, v: i32) {
    debug_assert!(v >= 0);
    // Relaxed: see `overrun_last_lock_free`.
    published.overrun_last.store(v & !LOOK, Ordering::Relaxed);
}

#[cfg(all(test, not(loom)))]
mod tests;
