//! The POSIX rules of `itimer.rs`, tested on bare timer states under the manual clock, and
//! against the running kernel where a rule is the kernel's.

use super::*;
use crate::clock::{ClockSource, ManualClock};
use crate::registry::TimerId;
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
        Ok(self.with(id, |_, p, _| super::overrun_last(p)))
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
    assert_eq!(forward(KTIME_MAX - 5, 10, KTIME_MAX), (KTIME_MAX, 1));
    assert_eq!(
        forward(100, KTIME_MAX, 100),
        (KTIME_MAX, 1),
        "clamped, as the kernel's"
    );
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
            expiry: KTIME_MAX
        }
    );
}

/// Linux clamps a time past `KTIME_MAX` (`i64::MAX` ns) to it: an absolute `LLONG_MAX` s, a
/// relative value whose sum with now passes it, and an interval, each read back by gettime as
/// the time left to `KTIME_MAX` (about 9.2e9 s) and the clamped interval. Before the clamp an
/// absolute `LLONG_MAX` s read back as 1.8e10 s (`u64::MAX` ns less now).
#[test]
fn times_past_ktime_max_are_clamped_to_it_as_the_kernel_does() {
    let f = Fixture::new();
    f.advance(5_000 * MS);
    let now = f.mono();
    let huge = TimeSpec::new(i64::MAX, 999_999_999).to_nanos().unwrap();
    assert_eq!(
        huge,
        u64::MAX,
        "what the C ABI hands settime for LLONG_MAX s"
    );
    for notify in [NotifyKind::Queue, NotifyKind::None] {
        let t = f.timer(ClockId::Monotonic, notify);
        for abs in [true, false] {
            let (_, arm) = f.settime(t, abs, huge, huge);
            if notify == NotifyKind::Queue {
                assert_eq!(
                    arm,
                    Arm::At {
                        clock: ClockId::Monotonic,
                        expiry: KTIME_MAX
                    },
                    "abs={abs}"
                );
            }
            let cur = f.gettime(t);
            assert_eq!(
                cur,
                Setting {
                    value: KTIME_MAX - now,
                    interval: KTIME_MAX
                },
                "{notify:?} abs={abs}"
            );
            // A value just under the bound is kept as it is.
            f.settime(t, true, KTIME_MAX - 1, 0);
            assert_eq!(f.gettime(t).value, KTIME_MAX - 1 - now);
        }
    }
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
/// more. `TEMPORA_SOAK=<steps>` runs longer. Needs the workspace's `tempora-kernel` (the
/// `kernel-tests` feature; tempora/Cargo.toml says why).
#[cfg(feature = "kernel-tests")]
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
        // How far apart the pair may have been armed: a relative settime arms the kernel's
        // timer, then tempora's, so a preemption between the two stays in every later
        // reading of that arming (up to that step's gap); an absolute one arms both alike.
        let mut skew = 0;
        for step in 0..steps {
            let op = next(3);
            let before = OsClock.now(ClockId::Monotonic);
            let mut rearmed = None;
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
                rearmed = Some(!abs && value != 0);
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
                    circular <= gap + skew,
                    "{clock:?} step {step} {what}: kernel {kernel:?}, tempora {ours:?}, gap {gap}, armed {skew} apart at most"
                );
            }
            if let Some(relative) = rearmed {
                skew = if relative { gap } else { 0 };
            }
            if next(4) == 0 {
                std::thread::sleep(Duration::from_nanos(next(8 * MS)));
            }
        }
        tempora_kernel::timer_delete(k).unwrap();
    }
}

/// The `KTIME_MAX` clamp against the running kernel: a `SIGEV_NONE` kernel timer and a bare
/// tempora state, each set to an absolute and a relative `LLONG_MAX` s (and just under the
/// bound) with a `LLONG_MAX` s interval, read back alike, up to the time between the calls.
#[cfg(feature = "kernel-tests")]
#[test]
fn kernel_differential_times_past_ktime_max() {
    use crate::clock::OsClock;
    let huge = u64::MAX; // LLONG_MAX s and 999999999 ns, as `TimeSpec::to_nanos` gives it
    for clock in [ClockId::Monotonic, ClockId::Realtime] {
        let k = tempora_kernel::timer_create_none_on(clock.as_raw()).unwrap();
        let mut timer = ItimerState::new(clock, NotifyKind::None);
        let published = ItimerPublished::default();
        for (abs, value, interval) in [
            (true, huge, huge),
            (false, huge, huge),
            (true, KTIME_MAX - 1, 0),
            (false, KTIME_MAX - 1, KTIME_MAX),
        ] {
            let before = OsClock.now(ClockId::Monotonic);
            tempora_kernel::timer_settime(k, i32::from(abs), value, interval).unwrap();
            let kernel = tempora_kernel::timer_gettime(k).unwrap();
            let now = LazyNow::new(&OsClock);
            timer.settime(&published, &now, abs, value, interval);
            let ours = timer.gettime(&LazyNow::new(&OsClock));
            let gap = OsClock.now(ClockId::Monotonic) - before + 100_000;
            let what = format!("{clock:?} abs={abs} {value} {interval}");
            assert_eq!(kernel.1, ours.interval, "{what}: interval");
            assert!(
                kernel.0.abs_diff(ours.value) <= gap,
                "{what}: kernel {kernel:?}, tempora {ours:?}, gap {gap}"
            );
            assert!(ours.value <= KTIME_MAX, "{what}: {ours:?}");
        }
        tempora_kernel::timer_delete(k).unwrap();
    }
}
