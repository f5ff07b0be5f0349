//! The service's rules under the manual clock: each test fails if its rule is broken.

use super::*;
use crate::clock::{ClockSource, ManualClock, OsClock, TimeSpec, NANOS_PER_SEC};
use crate::sync::Poisoned;
use proptest::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Mutex;
use std::time::Instant;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Fx {
    clock: ManualClock,
    timers: Timers,
    owner: Owner,
}

impl Fx {
    fn new() -> Fx {
        Fx::with(|_| ())
    }
    fn with(configure: impl FnOnce(&mut Builder)) -> Fx {
        let clock = ManualClock::new();
        let mut b = Timers::builder();
        b.clock(clock.clone()).bases(2);
        configure(&mut b);
        let timers = b.build().unwrap();
        let owner = timers.owner();
        Fx {
            clock,
            timers,
            owner,
        }
    }
    fn queue(&self, clock: ClockId) -> TimerId {
        self.owner.create(clock, Notify::Queue).unwrap()
    }
    fn arm(&self, id: TimerId, value: Duration, interval: Duration) -> ItimerSpec {
        self.owner
            .settime(id, SetFlags::RELATIVE, value, interval)
            .unwrap()
    }
    fn advance(&self, d: Duration) -> usize {
        self.clock.advance(d);
        self.timers.poll()
    }
    fn value(&self, id: TimerId) -> u64 {
        self.owner.gettime(id).unwrap().as_nanos().0
    }
    fn drain(&self) -> Vec<Event> {
        self.owner.try_iter().collect()
    }
}

/// Runs `f` with panic messages silenced (the panics it provokes are expected). The hook is
/// process-wide, so the swap is serialised across tests.
fn quiet_panics<R>(f: impl FnOnce() -> R) -> R {
    static HOOK: Mutex<()> = Mutex::new(());
    let _serial = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = f();
    std::panic::set_hook(hook);
    r
}

fn spec(value: u64, interval: u64) -> ItimerSpec {
    ItimerSpec {
        value: TimeSpec::from_nanos(value),
        interval: TimeSpec::from_nanos(interval),
    }
}

#[test]
fn builder_rejects_bad_configurations() {
    assert!(matches!(
        Timers::builder().bases(0).build(),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Timers::builder().tick(Duration::ZERO).build(),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Timers::builder().batch(0).build(),
        Err(Error::InvalidConfig(_))
    ));
    let t = Timers::builder().bases(3).build().unwrap();
    assert_eq!(t.bases(), 3);
    assert_eq!(t.tick_nanos(), 1_000);
}

/// A clock source that wraps the OS clocks (here: counting reads) still gets its driver; the
/// manual clock gets none.
#[test]
fn default_drivers_follow_the_clock_source_not_its_type() {
    struct Counted(AtomicUsize);
    impl ClockSource for Counted {
        fn now(&self, clock: ClockId) -> u64 {
            self.0.fetch_add(1, Ordering::Relaxed);
            OsClock.now(clock)
        }
        fn is_os_time(&self) -> bool {
            OsClock.is_os_time()
        }
    }
    let wrapped = Timers::builder()
        .clock(Counted(AtomicUsize::new(0)))
        .build()
        .unwrap();
    assert_eq!(wrapped.drivers(), 1);
    let manual = Timers::builder().clock(ManualClock::new()).build().unwrap();
    assert_eq!(manual.drivers(), 0);
}

#[test]
fn one_shot_fires_once_at_its_expiry_never_before() {
    let f = Fx::with(|b| {
        b.tick(Duration::from_nanos(1));
    });
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(10), Duration::ZERO);
    assert_eq!(f.advance(Duration::from_nanos(10 * MS - 1)), 0);
    assert!(f.drain().is_empty(), "1 ns before its expiry nothing fires");
    assert_eq!(f.advance(Duration::from_nanos(1)), 1);
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
    assert_eq!(f.advance(ms(100)), 0, "a one-shot fires once");
    assert!(f.drain().is_empty());
    assert_eq!(f.owner.gettime(t).unwrap(), ItimerSpec::default());
}

#[test]
fn fires_within_one_tick_after_its_expiry_when_polled_on_time() {
    let f = Fx::with(|b| {
        b.tick(Duration::from_millis(1));
    });
    let t = f.queue(ClockId::Monotonic);
    // Expiry at 10.5 ms from now (now = 1 s, a tick boundary).
    f.arm(t, Duration::from_micros(10_500), Duration::ZERO);
    assert_eq!(f.advance(Duration::from_micros(10_499)), 0);
    assert_eq!(
        f.advance(Duration::from_micros(1)),
        0,
        "due, but its tick (11 ms) is not reached: within one tick after is allowed"
    );
    assert_eq!(f.advance(Duration::from_micros(499)), 0);
    assert_eq!(
        f.advance(Duration::from_micros(1)),
        1,
        "fires once the tick after its expiry starts"
    );
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
}

#[test]
fn next_deadline_leads_a_loop_to_each_expiry_exactly_once() {
    let f = Fx::new();
    assert_eq!(f.timers.next_deadline(), None);
    let a = f.queue(ClockId::Monotonic);
    let b = f.queue(ClockId::Boottime);
    let start = f.clock.now(ClockId::Monotonic);
    f.arm(a, Duration::from_nanos(5 * MS + 1), Duration::ZERO);
    f.arm(b, ms(3), Duration::ZERO);
    // A loop that sleeps until next_deadline and polls wakes once per expiry instant (the
    // re-placements of precise timers as their buckets come due happen inside those polls)
    // and reaches each expiry's tick exactly.
    let mut fired_at = Vec::new();
    let mut wakeups = 0;
    while let Some(at) = f.timers.next_deadline() {
        let now = f.clock.now(ClockId::Monotonic);
        assert!(at >= now);
        f.clock.advance(Duration::from_nanos(at - now));
        wakeups += 1;
        if f.timers.poll() > 0 {
            fired_at.push(at - start);
        }
    }
    assert_eq!(
        fired_at,
        vec![3 * MS, 5 * MS + US],
        "the 1 µs tick rounds 5 ms + 1 ns up"
    );
    assert_eq!(wakeups, 2, "one wake-up per expiry instant");
    assert_eq!(f.drain().len(), 2);
    f.arm(a, ms(7), Duration::ZERO);
    assert!(f.timers.next_timeout().unwrap() <= ms(7));
    f.owner
        .settime(a, SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO)
        .unwrap();
    assert_eq!(f.timers.next_deadline(), None, "disarming removes it");
}

/// A timer re-armed a little earlier (same wheel bucket) moves the deadline with it: a loop
/// that sleeps until `next_deadline` reaches the new expiry, not the old one.
#[test]
fn a_timer_shortened_within_its_bucket_fires_at_its_new_expiry() {
    for (first, second) in [(300 * MS, 295 * MS), (40_000 * MS, 39_990 * MS), (80, 79)] {
        let f = Fx::new();
        let t = f.queue(ClockId::Monotonic);
        let start = f.clock.now(ClockId::Monotonic);
        f.arm(t, Duration::from_nanos(first), Duration::ZERO);
        f.arm(t, Duration::from_nanos(second), Duration::ZERO);
        let due = start + second.div_ceil(US) * US;
        assert_eq!(
            f.timers.next_deadline(),
            Some(due),
            "re-armed {first} -> {second} ns"
        );
        f.clock.advance(Duration::from_nanos(due - start));
        assert_eq!(f.timers.poll(), 1, "fires at {second} ns, not {first} ns");
        assert_eq!(f.drain().len(), 1);
    }
}

#[test]
fn zero_value_disarms_zeroes_the_interval_and_returns_the_old_setting() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    assert_eq!(f.arm(t, ms(50), ms(20)), ItimerSpec::default());
    f.advance(ms(10));
    assert_eq!(f.arm(t, Duration::ZERO, ms(7)), spec(40 * MS, 20 * MS));
    assert_eq!(f.owner.gettime(t).unwrap(), ItimerSpec::default());
    assert_eq!(f.timers.next_deadline(), None);
    assert_eq!(f.advance(ms(100)), 0);
    assert!(f.drain().is_empty());
}

#[test]
fn absolute_time_in_the_past_fires_at_once_and_counts_the_missed_periods() {
    let f = Fx::new();
    let one = f.queue(ClockId::Monotonic);
    let per = f.queue(ClockId::Monotonic);
    let now = f.clock.now(ClockId::Monotonic);
    f.owner
        .settime(
            one,
            SetFlags::ABSTIME,
            Duration::from_nanos(now - 5 * MS),
            Duration::ZERO,
        )
        .unwrap();
    // Started 35 ms ago with a 10 ms period: expiries at -35, -25, -15, -5.
    f.owner
        .settime(
            per,
            SetFlags::ABSTIME,
            Duration::from_nanos(now - 35 * MS),
            ms(10),
        )
        .unwrap();
    assert_eq!(
        f.owner.gettime(one).unwrap().as_nanos(),
        (1, 0),
        "overdue: 1 ns"
    );
    assert_eq!(f.timers.poll(), 2, "both fire at the first poll");
    let mut ev = f.drain();
    ev.sort_by_key(|e| e.id);
    assert_eq!(ev, vec![Event::new(one, 0), Event::new(per, 3)]);
    assert_eq!(f.owner.getoverrun(per), Ok(3));
    assert_eq!(f.value(per), 5 * MS, "next period at +5 ms");
}

#[test]
fn relative_realtime_runs_on_the_monotonic_clock_absolute_follows_the_wall_clock() {
    let f = Fx::new();
    let rel = f.queue(ClockId::Realtime);
    let abs = f.queue(ClockId::Realtime);
    let wall = f.clock.now(ClockId::Realtime);
    f.arm(rel, ms(100), Duration::ZERO);
    f.owner
        .settime(
            abs,
            SetFlags::ABSTIME,
            Duration::from_nanos(wall + 100 * MS),
            Duration::ZERO,
        )
        .unwrap();
    // The wall clock is set 1 h ahead: only the absolute timer is now due.
    f.clock.set_realtime(wall + 3600 * NANOS_PER_SEC);
    assert_eq!(f.timers.poll(), 1);
    assert_eq!(f.drain(), vec![Event::new(abs, 0)]);
    assert_eq!(f.value(rel), 100 * MS, "the relative one did not move");
    // A suspend moves realtime too, but not the monotonic clock the relative one runs on.
    f.clock.suspend(ms(500));
    assert_eq!(f.timers.poll(), 0);
    assert_eq!(f.advance(ms(100)), 1);
    assert_eq!(f.drain(), vec![Event::new(rel, 0)]);
}

#[test]
fn absolute_realtime_waits_again_when_the_wall_clock_is_set_back() {
    let f = Fx::new();
    let t = f.queue(ClockId::Realtime);
    let wall = f.clock.now(ClockId::Realtime);
    f.advance(ms(10)); // the realtime wheel has reached wall + 10 ms
    f.owner
        .settime(
            t,
            SetFlags::ABSTIME,
            Duration::from_nanos(wall + 20 * MS),
            Duration::ZERO,
        )
        .unwrap();
    f.clock.set_realtime(wall); // set back 10 ms
    assert_eq!(f.advance(ms(15)), 0, "wall + 15 ms: not yet");
    assert_eq!(f.value(t), 5 * MS);
    assert_eq!(f.advance(ms(5)), 1, "wall + 20 ms");
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
}

#[test]
fn boottime_timers_count_suspend_monotonic_ones_do_not() {
    let f = Fx::new();
    let boot = f.queue(ClockId::Boottime);
    let mono = f.queue(ClockId::Monotonic);
    f.arm(boot, ms(100), Duration::ZERO);
    f.arm(mono, ms(100), Duration::ZERO);
    f.clock.suspend(ms(200));
    assert_eq!(f.timers.poll(), 1);
    assert_eq!(f.drain(), vec![Event::new(boot, 0)]);
    assert_eq!(f.value(mono), 100 * MS);
}

#[test]
fn invalid_times_are_einval_before_the_lookup() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    let unknown = TimerId::new(12345).unwrap();
    for bad in [
        TimeSpec::new(0, 1_000_000_000),
        TimeSpec::new(0, -1),
        TimeSpec::new(-1, 0),
    ] {
        for id in [t, unknown] {
            assert_eq!(
                f.owner.settime(id, SetFlags::RELATIVE, bad, Duration::ZERO),
                Err(Error::InvalidTime)
            );
            assert_eq!(
                f.owner.settime(id, SetFlags::ABSTIME, ms(1), bad),
                Err(Error::InvalidTime),
                "the interval is checked too, even when the lookup would fail"
            );
        }
    }
    assert_eq!(Error::InvalidTime.errno(), libc::EINVAL);
    assert_eq!(
        f.owner.gettime(t).unwrap(),
        ItimerSpec::default(),
        "unchanged"
    );
}

#[test]
fn unknown_deleted_and_other_owners_ids_are_einval() {
    let f = Fx::new();
    let other = f.timers.owner();
    let t = f.queue(ClockId::Monotonic);
    let gone = f.queue(ClockId::Monotonic);
    f.owner.delete(gone).unwrap();
    let theirs = other.create(ClockId::Monotonic, Notify::Queue).unwrap();
    other.delete(theirs).unwrap();
    let theirs = other.create(ClockId::Monotonic, Notify::Queue).unwrap();
    assert_ne!(theirs, t, "another owner's only ID is not one of ours");
    for id in [gone, theirs, TimerId::new(i32::MAX).unwrap()] {
        let e = Error::UnknownTimer;
        assert_eq!(
            f.owner.settime(id, SetFlags::RELATIVE, ms(1), ms(0)),
            Err(e.clone())
        );
        assert_eq!(f.owner.gettime(id), Err(e.clone()));
        assert_eq!(f.owner.getoverrun(id), Err(e.clone()));
        assert_eq!(f.owner.delete(id), Err(e.clone()));
    }
    assert_eq!(Error::UnknownTimer.errno(), libc::EINVAL);
    assert!(other.gettime(theirs).is_ok());
}

#[test]
fn settime_resets_the_overrun_and_voids_the_pending_event() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(10), ms(10));
    f.advance(ms(35));
    assert_eq!(f.drain(), vec![Event::new(t, 2)]);
    assert_eq!(f.owner.getoverrun(t), Ok(2));
    f.advance(ms(10)); // queues the next event
    assert_eq!(f.owner.queued(), 1);
    // The old setting is computed as gettime would: the event is pending, so the periodic
    // timer is forwarded to its next period (5 ms ahead).
    assert_eq!(f.arm(t, ms(100), Duration::ZERO), spec(5 * MS, 10 * MS));
    assert_eq!(f.owner.getoverrun(t), Ok(0), "settime resets the overrun");
    assert_eq!(
        f.owner.try_recv(),
        None,
        "the pending event is stale: dropped"
    );
    assert_eq!(f.owner.queued(), 0);
    assert_eq!(f.advance(ms(100)), 1);
    assert_eq!(f.drain(), vec![Event::new(t, 0)], "the new arming delivers");
}

#[test]
fn a_timer_re_armed_after_settime_delivers_its_one_event_even_if_the_stale_one_was_queued() {
    // The kernel's single sigqueue: a stale queued event that the new arming fires again
    // becomes that arming's event (one entry, delivered once).
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    f.advance(ms(1));
    f.arm(t, ms(1), Duration::ZERO);
    f.advance(ms(1));
    assert_eq!(f.owner.queued(), 1, "one preallocated event per timer");
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
}

#[test]
fn delete_drops_the_pending_event_unseen() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    let keep = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    f.arm(keep, ms(2), Duration::ZERO);
    f.advance(ms(2));
    f.owner.delete(t).unwrap();
    // The slot and even the ID come back at once; the old event must not reach the new timer.
    f.owner.set_restore_ids(true);
    let again = f
        .owner
        .create_with_id(t.get(), ClockId::Monotonic, Notify::Queue)
        .unwrap();
    assert_eq!(again, t);
    assert_eq!(f.drain(), vec![Event::new(keep, 0)]);
}

#[test]
fn gettime_rules() {
    let f = Fx::new();
    let never = f.queue(ClockId::Monotonic);
    assert_eq!(f.owner.gettime(never).unwrap(), ItimerSpec::default());
    let one = f.queue(ClockId::Monotonic);
    let per = f.queue(ClockId::Monotonic);
    let none = f.owner.create(ClockId::Monotonic, Notify::None).unwrap();
    f.arm(one, ms(10), Duration::ZERO);
    f.arm(per, ms(10), ms(4));
    f.arm(none, ms(10), ms(4));
    f.clock.advance(ms(12)); // not polled yet
    assert_eq!(f.value(one), 1, "armed and overdue: 1 ns");
    assert_eq!(f.value(per), 1);
    assert_eq!(
        f.value(none),
        2 * MS,
        "SIGEV_NONE never fires; it is forwarded"
    );
    f.timers.poll();
    assert_eq!(
        f.value(one),
        0,
        "a fired one-shot reads zero, its event pending"
    );
    assert_eq!(
        f.owner.gettime(per).unwrap(),
        spec(2 * MS, 4 * MS),
        "event pending: forwarded into (0, interval]"
    );
    f.clock.advance(ms(2));
    assert_eq!(
        f.value(per),
        4 * MS,
        "exactly at a period: the full interval, never 0"
    );
    assert_eq!(
        f.owner.getoverrun(per),
        Ok(0),
        "gettime's forwarding is not an overrun yet"
    );
    assert_eq!(f.drain().len(), 2);
    assert_eq!(
        f.owner.getoverrun(per),
        Ok(1),
        "expiries at 10, 14; consumed at 14"
    );
}

#[test]
fn overrun_counts_missed_periods_only_changes_on_consume_and_is_capped() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(10), ms(10));
    f.advance(ms(10));
    assert_eq!(f.drain(), vec![Event::new(t, 0)], "nothing missed: 0");
    f.advance(ms(95)); // expiries at 20 (queued), 30 .. 100
    assert_eq!(
        f.owner.getoverrun(t),
        Ok(0),
        "changes only when the event is consumed"
    );
    assert_eq!(f.drain(), vec![Event::new(t, 8)]);
    assert_eq!(f.owner.getoverrun(t), Ok(8));
    let fast = f.queue(ClockId::Monotonic);
    f.arm(fast, Duration::from_nanos(1), Duration::from_nanos(1));
    f.advance(Duration::from_secs(3)); // 3e9 periods
    let ev = f.drain();
    assert_eq!(ev.iter().find(|e| e.id == fast).unwrap().overrun, i32::MAX);
    assert_eq!(f.owner.getoverrun(fast), Ok(i32::MAX));
}

#[test]
fn an_unconsumed_periodic_timer_costs_nothing_after_its_first_expiry() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), ms(1));
    assert_eq!(f.advance(ms(1)), 1);
    for _ in 0..100 {
        assert_eq!(f.advance(ms(1)), 0, "not re-armed until consumed");
    }
    assert_eq!(f.timers.next_deadline(), None, "in no wheel");
    assert_eq!(f.owner.queued(), 1);
    assert_eq!(f.owner.timers()[0].status, Status::RequeuePending);
    assert_eq!(f.drain(), vec![Event::new(t, 100)]);
    assert!(
        f.timers.next_deadline().is_some(),
        "re-armed by the consume"
    );
}

#[test]
fn none_timers_deliver_nothing() {
    let f = Fx::new();
    let t = f.owner.create(ClockId::Monotonic, Notify::None).unwrap();
    f.arm(t, ms(1), Duration::ZERO);
    assert_eq!(f.timers.next_deadline(), None);
    assert_eq!(f.advance(ms(5)), 0);
    assert!(f.drain().is_empty());
    assert_eq!(f.value(t), 0, "a passed one-shot SIGEV_NONE reads zero");
}

#[test]
fn callbacks_run_with_id_and_overrun_and_may_settime_or_delete_their_own_timer() {
    let f = Fx::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let owner = f.owner.clone();
    let log = seen.clone();
    let rearm = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |id, overrun| {
                log.lock().unwrap().push((id, overrun));
                // Re-arm itself from inside the callback: no lock is held.
                owner
                    .settime(id, SetFlags::RELATIVE, ms(5), Duration::ZERO)
                    .unwrap();
            }),
        )
        .unwrap();
    let owner = f.owner.clone();
    let deleted = Arc::new(AtomicUsize::new(0));
    let d = deleted.clone();
    let selfdel = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |id, overrun| {
                assert_eq!(overrun, 2, "periods the poll was late by");
                owner.delete(id).unwrap();
                d.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
    f.arm(rearm, ms(5), Duration::ZERO);
    f.arm(selfdel, ms(1), ms(1));
    assert_eq!(f.advance(ms(3)), 1);
    assert_eq!(deleted.load(Ordering::Relaxed), 1);
    assert_eq!(f.owner.gettime(selfdel), Err(Error::UnknownTimer));
    assert_eq!(f.advance(ms(2)), 1);
    assert_eq!(f.advance(ms(5)), 1);
    assert_eq!(*seen.lock().unwrap(), vec![(rearm, 0), (rearm, 0)]);
    assert_eq!(f.value(rearm), 5 * MS);
    assert!(f.drain().is_empty(), "callbacks do not queue events");
}

#[test]
fn a_panicking_callback_is_caught_and_counted() {
    let f = Fx::new();
    let t = f
        .owner
        .create(ClockId::Monotonic, Notify::callback(|_, _| panic!("boom")))
        .unwrap();
    let q = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    f.arm(q, ms(1), Duration::ZERO);
    let fired = quiet_panics(|| f.advance(ms(1)));
    assert_eq!(fired, 2);
    assert_eq!(f.timers.callback_panics(), 1);
    assert_eq!(
        f.drain(),
        vec![Event::new(q, 0)],
        "the rest of the poll went on"
    );
}

#[test]
fn callback_names_a_snapshot_cannot_restore_are_refused_at_create() {
    let f = Fx::new();
    let long = "x".repeat(crate::checkpoint::MAX_NAME + 1);
    for name in ["none", "queue", long.as_str()] {
        let r = f
            .owner
            .create(ClockId::Monotonic, Notify::callback_named(name, |_, _| ()));
        assert!(
            matches!(r, Err(Error::InvalidConfig(_))),
            "{name:.8}: {r:?}"
        );
    }
    let fits = "é".repeat(crate::checkpoint::MAX_NAME / 2);
    assert!(f
        .owner
        .create(ClockId::Monotonic, Notify::callback_named(&fits, |_, _| ()))
        .is_ok());
    assert!(f.owner.checkpoint().try_encode().is_ok());
}

#[test]
fn a_callback_closure_is_released_on_delete() {
    let f = Fx::new();
    let token = Arc::new(());
    let held = token.clone();
    let t = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_, _| assert!(Arc::strong_count(&held) > 0)),
        )
        .unwrap();
    assert_eq!(Arc::strong_count(&token), 2);
    f.owner.delete(t).unwrap();
    assert_eq!(Arc::strong_count(&token), 1);
    let held = token.clone();
    f.owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_, _| assert!(Arc::strong_count(&held) > 0)),
        )
        .unwrap();
    drop(f);
    assert_eq!(Arc::strong_count(&token), 1, "and when the owner goes");
}

#[test]
fn a_poll_delivers_everything_due_in_bounded_batches() {
    let f = Fx::with(|b| {
        b.batch(4).bases(3);
    });
    let ids: Vec<_> = (0..1000).map(|_| f.queue(ClockId::Monotonic)).collect();
    for (i, &id) in ids.iter().enumerate() {
        f.arm(
            id,
            Duration::from_micros(1 + (i as u64 % 7)),
            Duration::ZERO,
        );
    }
    assert_eq!(f.advance(ms(1)), 1000);
    let mut got: Vec<_> = f.drain().into_iter().map(|e| e.id).collect();
    got.sort();
    assert_eq!(got, ids);
}

#[test]
fn dropping_an_owner_takes_its_timers_out_of_the_wheels() {
    let f = Fx::new();
    let other = f.timers.owner();
    for _ in 0..500 {
        let id = other.create(ClockId::Monotonic, Notify::Queue).unwrap();
        other
            .settime(id, SetFlags::RELATIVE, ms(10), ms(10))
            .unwrap();
    }
    assert!(f.timers.next_deadline().is_some());
    drop(other);
    assert_eq!(f.timers.next_deadline(), None);
    assert_eq!(f.advance(ms(100)), 0);
    assert_eq!(f.timers.timer_count(), 0);
}

#[test]
fn destroy_wakes_a_blocked_receiver_and_fails_later_calls() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    let owner = f.owner.clone();
    let waiter = std::thread::spawn(move || owner.recv());
    f.owner.destroy();
    assert_eq!(waiter.join().unwrap(), Err(Error::OwnerDeleted));
    assert_eq!(f.owner.gettime(t), Err(Error::OwnerDeleted));
    assert_eq!(
        f.owner.create(ClockId::Monotonic, Notify::Queue),
        Err(Error::OwnerDeleted)
    );
}

#[test]
fn recv_waits_for_an_event_fired_by_another_thread() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    assert_eq!(f.owner.recv_timeout(Duration::ZERO), Ok(None));
    let owner = f.owner.clone();
    let waiter = std::thread::spawn(move || owner.recv());
    f.clock.advance(ms(1));
    let poller = f.timers.clone();
    std::thread::spawn(move || poller.poll()).join().unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(Event::new(t, 0)));
}

#[test]
fn owners_have_separate_queues_and_id_spaces() {
    let f = Fx::new();
    let b = f.timers.owner();
    let ta = f.queue(ClockId::Monotonic);
    let tb = b.create(ClockId::Monotonic, Notify::Queue).unwrap();
    assert_eq!(ta, tb, "both start at ID 0");
    f.arm(ta, ms(1), Duration::ZERO);
    b.settime(tb, SetFlags::RELATIVE, ms(2), Duration::ZERO)
        .unwrap();
    assert_eq!(f.advance(ms(2)), 2);
    assert_eq!(f.drain(), vec![Event::new(ta, 0)]);
    assert_eq!(b.try_recv(), Some(Event::new(tb, 0)));
}

#[test]
fn settime_flags_ignore_unknown_bits_as_linux_does() {
    assert!(SetFlags::from_raw(1).is_abstime());
    assert!(SetFlags::from_raw(0x7fff_fff1).is_abstime());
    assert!(!SetFlags::from_raw(2).is_abstime());
}

/// One step of the property test's schedule.
#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Poll,
    Consume(usize),
    Rearm(usize, u64, u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..40_000).prop_map(Step::Advance),
        3 => Just(Step::Poll),
        3 => (0usize..64).prop_map(Step::Consume),
        1 => (0usize..6, 1u64..20_000, 1u64..9_000).prop_map(|(i, v, p)| Step::Rearm(i, v, p)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// For every periodic timer: deliveries + latched overruns = periods elapsed since its
    /// last settime, whatever the order of advances, polls and consumes.
    #[test]
    fn deliveries_plus_overruns_equal_periods(
        timers in proptest::collection::vec((1u64..20_000, 1u64..9_000), 1..6),
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        let f = Fx::with(|b| { b.tick(Duration::from_micros(1)); });
        // (id, first expiry, interval, deliveries + overruns since the last settime)
        let mut t: Vec<(TimerId, u64, u64, u64)> = Vec::new();
        let arm = |f: &Fx, id, v: u64, p: u64| {
            f.owner.settime(id, SetFlags::RELATIVE, Duration::from_nanos(v * US),
                Duration::from_nanos(p * US)).unwrap();
            f.clock.now(ClockId::Monotonic) + v * US
        };
        for &(v, p) in &timers {
            let id = f.queue(ClockId::Monotonic);
            let first = arm(&f, id, v, p);
            t.push((id, first, p * US, 0));
        }
        let account = |t: &mut Vec<(TimerId, u64, u64, u64)>, e: Event| {
            let entry = t.iter_mut().find(|x| x.0 == e.id).unwrap();
            entry.3 += 1 + e.overrun as u64;
        };
        for s in steps {
            match s {
                Step::Advance(us) => f.clock.advance(Duration::from_nanos(us * US)),
                Step::Poll => { f.timers.poll(); }
                Step::Consume(n) => {
                    for _ in 0..n {
                        match f.owner.try_recv() { Some(e) => account(&mut t, e), None => break }
                    }
                }
                Step::Rearm(i, v, p) => {
                    if let Some(i) = (i < t.len()).then_some(i) {
                        let first = arm(&f, t[i].0, v, p);
                        t[i] = (t[i].0, first, p * US, 0);
                    }
                }
            }
        }
        // Settle: poll and consume until nothing is pending (time stands still; the clock
        // is on a tick boundary, so every expiry up to now is due).
        f.timers.poll();
        while let Some(e) = f.owner.try_recv() {
            account(&mut t, e);
        }
        let now = f.clock.now(ClockId::Monotonic);
        for &(id, first, interval, counted) in &t {
            let periods = if now >= first { (now - first) / interval + 1 } else { 0 };
            prop_assert_eq!(counted, periods, "timer {} (first {}, interval {})", id, first, interval);
        }
    }
}

#[test]
fn a_refreshed_timer_fires_at_its_new_expiry_not_the_old_one() {
    // A re-arm to a later time leaves the wheel entry in place (no base lock); the poll that
    // meets the old entry must place the timer again instead of firing it.
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(10), Duration::ZERO);
    for _ in 0..4 {
        assert_eq!(f.advance(ms(5)), 0, "not due: refreshed 5 ms ago to 10 ms");
        f.arm(t, ms(10), Duration::ZERO); // refreshed every 5 ms
    }
    assert!(f.drain().is_empty(), "never fired while refreshed");
    assert_eq!(f.advance(ms(9)), 0);
    assert!(f.drain().is_empty());
    assert_eq!(f.advance(ms(1)), 1);
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
    // And a re-arm to an earlier time moves the entry.
    f.arm(t, ms(50), Duration::ZERO);
    f.arm(t, ms(2), Duration::ZERO);
    assert_eq!(f.advance(ms(2)), 1);
    assert_eq!(f.drain(), vec![Event::new(t, 0)]);
}

/// Threads churn create / settime / gettime / delete / receive on their own owners and on a
/// shared one, owners are dropped and replaced, while another thread advances the manual clock
/// and polls. Runs under the tests' poisoning allocator (freed memory is overwritten), so a
/// wheel or queue entry that outlived its timer's memory would crash or misdeliver here.
/// Checks: no crash, every event well-formed, and after all owners are gone no timer and no
/// wheel entry is left (deleted and torn-down timers leave their wheels at once).
#[test]
fn churn_across_threads_leaves_nothing_behind() {
    let clock = ManualClock::new();
    let timers = Timers::builder()
        .clock(clock.clone())
        .bases(3)
        .batch(8)
        .build()
        .unwrap();
    let shared = timers.owner();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Polls so far: the workers wait for the poller now and then, so that on a loaded machine
    // their churn still meets deliveries (without it, the workers could all finish before the
    // poller first ran, and the test check nothing).
    let done = Arc::new(AtomicU64::new(0));
    let poller = {
        let (timers, clock, stop, done) =
            (timers.clone(), clock.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || {
            let mut polls = 0u64;
            while !stop.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(1 + polls % 700));
                timers.poll();
                polls += 1;
                done.store(polls, Ordering::Relaxed);
            }
            polls
        })
    };
    let workers: Vec<_> = (0..3u64)
        .map(|w| {
            let (timers, shared, done) = (timers.clone(), shared.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut received = 0u64;
                for round in 0..40 {
                    let own = timers.owner();
                    let mut ids: Vec<(Owner, TimerId)> = Vec::new();
                    for i in 0..300 {
                        if i % 50 == 0 {
                            let seen = done.load(Ordering::Relaxed);
                            while done.load(Ordering::Relaxed) == seen {
                                std::thread::yield_now();
                            }
                        }
                        let o = if i % 4 == 0 { &shared } else { &own };
                        let notify = match next() % 5 {
                            0 => Notify::None,
                            1 => Notify::callback(|_, _| {}),
                            _ => Notify::Queue,
                        };
                        let id = o.create(ClockId::Monotonic, notify).unwrap();
                        ids.push((o.clone(), id));
                        let (o, id) = &ids[next() as usize % ids.len()];
                        let value = Duration::from_micros(1 + next() % 2000);
                        let interval = Duration::from_micros(next() % 3 * 500);
                        match next() % 6 {
                            0 => {
                                let _ = o.delete(*id);
                            }
                            1 => {
                                let _ = o.gettime(*id);
                            }
                            _ => {
                                let _ = o.settime(*id, SetFlags::RELATIVE, value, interval);
                            }
                        }
                        for o in [&own, &shared] {
                            while let Some(e) = o.try_recv() {
                                assert!(e.overrun >= 0);
                                received += 1;
                            }
                        }
                    }
                    if round % 3 == 0 {
                        own.destroy();
                    }
                    // `own` (and its timers, armed or with events pending) goes here.
                }
                received
            })
        })
        .collect();
    let received: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let polls = poller.join().unwrap();
    assert!(
        polls > 0 && received > 0,
        "polls {polls}, events {received}"
    );
    drop(shared);
    assert_eq!(timers.timer_count(), 0, "every owner's timers deleted");
    assert_eq!(
        timers.next_deadline(),
        None,
        "no wheel entry outlived its timer"
    );
}

// ---- background drivers (OS clocks, real threads; no timing is asserted) -------------------

/// Waits (yielding, never sleeping) until a driver has published a finite sleep deadline on
/// the monotonic wheels: it has seen an armed timer and is about to sleep until it.
fn until_driver_sleeps(timers: &Timers) {
    let mono = ClockId::Monotonic.index();
    while !timers.core.bases.iter().any(|b| {
        let t = b.locked(|st| st.sleep[mono]).unwrap();
        t != 0 && t != base::NO_EXPIRY
    }) {
        std::thread::yield_now();
    }
}

#[test]
fn a_driver_fires_timers_with_nobody_polling() {
    let timers = Timers::builder().bases(2).drivers(1).build().unwrap();
    assert_eq!(timers.drivers(), 1);
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(1), ms(1)).unwrap();
    for _ in 0..3 {
        let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(e.map(|e| e.id), Some(t));
    }
    assert!(timers.driver_wakeups() > 0);
}

#[test]
fn an_earlier_arm_rings_the_sleeping_driver_a_later_one_does_not() {
    let timers = Timers::builder().bases(2).drivers(1).build().unwrap();
    let owner = timers.owner();
    let far = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let near = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(
            far,
            SetFlags::RELATIVE,
            Duration::from_secs(3600),
            Duration::ZERO,
        )
        .unwrap();
    // Once the driver publishes a finite deadline it sleeps until the 1 h timer; arming
    // later does not wake it.
    until_driver_sleeps(&timers);
    let rings = timers.core.rings.load(Ordering::Relaxed);
    owner
        .settime(
            near,
            SetFlags::RELATIVE,
            Duration::from_secs(7200),
            Duration::ZERO,
        )
        .unwrap();
    assert_eq!(
        timers.core.rings.load(Ordering::Relaxed),
        rings,
        "later: no ring"
    );
    // Arming earlier than its sleep wakes it, and the timer fires (without the ring the
    // driver would sleep for an hour and this would time out).
    owner
        .settime(near, SetFlags::RELATIVE, ms(2), Duration::ZERO)
        .unwrap();
    assert_eq!(
        timers.core.rings.load(Ordering::Relaxed),
        rings + 1,
        "earlier: one ring"
    );
    let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(e.map(|e| e.id), Some(near));
}

#[test]
fn dropping_timers_joins_its_drivers_and_pending_events_stay_readable() {
    let timers = Timers::builder().bases(2).drivers(2).build().unwrap();
    let owner = timers.owner();
    // The core is held by this handle and its driver set, the owner, each driver and the
    // clock watcher.
    assert_eq!(Arc::strong_count(&owner.reg.service().core), 6);
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let rearmed = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_nanos(1),
            Duration::ZERO,
        )
        .unwrap();
    // Wait until it fired: its event is then pending on the owner's queue.
    while owner.queued() == 0 {
        std::thread::yield_now();
    }
    owner
        .settime(rearmed, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    drop(timers);
    assert_eq!(
        Arc::strong_count(&owner.reg.service().core),
        1,
        "every driver thread (and the watcher) ended before drop returned"
    );
    assert_eq!(owner.try_recv().map(|e| e.id), Some(t), "still readable");
    assert!(owner.gettime(rearmed).is_ok(), "the owner still works");
}

#[test]
fn a_panicking_callback_does_not_stop_its_driver() {
    let timers = Timers::builder().bases(1).drivers(1).build().unwrap();
    let owner = timers.owner();
    let boom = owner
        .create(ClockId::Monotonic, Notify::callback(|_, _| panic!("boom")))
        .unwrap();
    let after = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    quiet_panics(|| {
        owner
            .settime(boom, SetFlags::RELATIVE, ms(1), Duration::ZERO)
            .unwrap();
        while timers.callback_panics() == 0 {
            std::thread::yield_now();
        }
    });
    // The same driver goes on firing timers armed after the panic.
    owner
        .settime(after, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(e.map(|e| e.id), Some(after));
    assert_eq!(timers.callback_panics(), 1);
}

#[test]
fn clock_was_set_rings_every_driver() {
    let timers = Timers::builder().bases(2).drivers(2).build().unwrap();
    let rings = timers.core.rings.load(Ordering::Relaxed);
    timers.clock_was_set();
    assert_eq!(timers.core.rings.load(Ordering::Relaxed), rings + 2);
    assert!(matches!(
        Timers::builder().bases(1).drivers(2).build(),
        Err(Error::InvalidConfig(_))
    ));
}

#[cfg(debug_assertions)]
#[test]
fn lock_order_violation_is_caught_in_debug_builds() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    // A timer lock taken under a base lock: the reverse of timer → base.
    let r = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.timers.core.bases[0].locked(|_| {
                let _ = f.owner.gettime(t);
            })
        }))
    });
    let msg = r.expect_err("the violation panics");
    let msg = (msg.downcast_ref::<String>().cloned())
        .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.starts_with("lock order: a rank-2 lock"), "{msg}");
    // A base lock under a base lock (two of one rank) is caught too.
    let r = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.timers.core.bases[1 % f.timers.bases()].locked(|_| {
                let _ = f.timers.next_deadline();
            })
        }))
    });
    assert!(r.is_err(), "two base locks at once panic");
    // The panic poisoned the base rather than leaving it held: the fixture still drops.
    assert_eq!(f.timers.core.bases[0].locked(|_| ()), Err(Poisoned));
}

// ---- never hang: orphaned owners, the poll barrier, poisoned locks, dead drivers ----------

/// Runs `f` on a thread of its own and returns its result, failing the test if it has not
/// returned within a minute: each check below would spin or sleep forever without its fix,
/// and a test that hangs reports nothing.
fn without_hanging<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the call hung instead of returning")
}

/// Panics inside `f` (which runs a critical section of the service) with the message hidden.
fn panic_inside(f: impl FnOnce(Box<dyn FnOnce()>)) {
    quiet_panics(|| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(Box::new(|| {
                panic!("tempora test: a panic inside a critical section")
            }))
        }));
        assert!(r.is_err());
    });
}

#[test]
fn an_owner_outliving_its_timers_fails_clearly_and_never_hangs() {
    let clock = ManualClock::new();
    let timers = Timers::builder().clock(clock.clone()).build().unwrap();
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let fired = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(t, SetFlags::RELATIVE, ms(100), ms(0))
        .unwrap();
    owner
        .settime(fired, SetFlags::RELATIVE, ms(1), ms(0))
        .unwrap();
    clock.advance(ms(1));
    timers.poll();
    // A receiver already waiting when the service goes is woken.
    let waiter = {
        let owner = owner.clone();
        std::thread::spawn(move || {
            let first = owner.recv();
            (first, owner.recv())
        })
    };
    drop(timers);
    let (first, then) = without_hanging(move || waiter.join().unwrap());
    assert_eq!(
        first.map(|e| e.id),
        Ok(fired),
        "a pending event is still delivered"
    );
    assert_eq!(then, Err(Error::ServiceStopped));
    assert_eq!(owner.recv(), Err(Error::ServiceStopped));
    assert_eq!(
        owner.settime(t, SetFlags::RELATIVE, ms(100), ms(0)),
        Err(Error::ServiceStopped),
        "arming would never fire"
    );
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue),
        Err(Error::ServiceStopped)
    );
    assert_eq!(Error::ServiceStopped.errno(), libc::ESHUTDOWN);
    // What needs no firing still works: read, checkpoint, delete.
    assert!(owner.gettime(t).is_ok());
    assert_eq!(owner.checkpoint().timers.len(), 2);
    assert_eq!(owner.delete(t), Ok(()));
}

/// A poll that starts while another poller delivers a batch it popped waits for that
/// delivery: when it returns, every timer due by its clock reading has fired, as a settime or
/// gettime right after it sees. Here the first poller stalls inside its batch (the owner's
/// queue lock is held) after popping two timers, and a second poll runs meanwhile.
#[test]
fn poll_waits_for_deliveries_another_poller_has_begun() {
    let f = Fx::with(|b| {
        b.bases(1);
    });
    let stalled = f.queue(ClockId::Monotonic);
    let other = f
        .owner
        .create(ClockId::Monotonic, Notify::callback(|_, _| ()))
        .unwrap();
    f.arm(stalled, ms(10), Duration::ZERO);
    f.arm(other, ms(11), Duration::ZERO);
    f.clock.advance(ms(12));
    let mono = ClockId::Monotonic.index();
    // Read on a thread of its own: the caller holds the queue lock, which ranks above a base's.
    let wheel_len = |timers: &Timers| {
        std::thread::scope(|s| {
            s.spawn(|| {
                timers.core.bases[0]
                    .locked(|st| st.wheels[mono].len())
                    .unwrap()
            })
            .join()
            .unwrap()
        })
    };
    let mut second = None;
    let mut returned_while_stalled = false;
    f.owner
        .sink()
        .locked(|_| {
            let first = {
                let timers = f.timers.clone();
                std::thread::spawn(move || timers.poll())
            };
            // The first poller has popped both (the wheel is empty) and is stuck delivering
            // `stalled`, before `other`.
            while wheel_len(&f.timers) != 0 {
                std::thread::yield_now();
            }
            let (timers, owner) = (f.timers.clone(), f.owner.clone());
            let s = std::thread::spawn(move || {
                timers.poll();
                owner.gettime(other).unwrap()
            });
            // It must not return while the first delivery is stalled. (Waiting a while is
            // only how a broken barrier is caught; a correct one never returns here.)
            let give_up = Instant::now() + Duration::from_millis(300);
            while !s.is_finished() && Instant::now() < give_up {
                std::thread::yield_now();
            }
            returned_while_stalled = s.is_finished();
            second = Some((first, s));
        })
        .unwrap();
    let (first, second) = second.unwrap();
    assert_eq!(first.join().unwrap(), 2);
    let seen = second.join().unwrap();
    assert!(
        !returned_while_stalled,
        "the second poll returned mid-delivery"
    );
    assert_eq!(seen, ItimerSpec::default(), "fired, not '1 ns, overdue'");
}

/// A timer poisoned by a panic under its lock cannot be read: `try_checkpoint` says so (and
/// `checkpoint` panics, as documented) instead of making a snapshot without it.
#[test]
fn a_poisoned_timer_fails_try_checkpoint() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(5), Duration::ZERO);
    assert_eq!(f.owner.try_checkpoint().map(|s| s.timers.len()), Ok(1));
    panic_inside(|boom| {
        let _ = f.owner.reg.with_timer(t, |_| boom());
    });
    assert_eq!(
        f.owner.try_checkpoint().map(|_| ()),
        Err(Error::Poisoned("a timer"))
    );
    quiet_panics(|| {
        let owner = &f.owner;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| owner.checkpoint()));
        assert!(r.is_err(), "checkpoint panics, as documented");
    });
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_inside_a_base_poisons_it_and_calls_fail_instead_of_hanging() {
    let f = Fx::with(|b| {
        b.bases(1);
    });
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(5), ms(5));
    panic_inside(|boom| {
        let _ = f.timers.core.bases[0].locked(|_| boom());
    });
    assert_eq!(
        f.timers.core.bases[0].locked(|_| ()),
        Err(Poisoned),
        "poisoned, not held"
    );
    let (timers, owner) = (f.timers.clone(), f.owner.clone());
    let (armed, deadline, polled, health, recv) = without_hanging(move || {
        let armed = owner.settime(t, SetFlags::RELATIVE, ms(1), Duration::ZERO);
        let deadline = timers.next_deadline();
        let polled = timers.poll();
        (armed, deadline, polled, timers.health(), owner.recv())
    });
    let poisoned = Err(Error::Poisoned("a timer base"));
    assert_eq!(armed.map(|_| ()), poisoned);
    assert_eq!((deadline, polled), (None, 0));
    assert_eq!(health, poisoned, "the service reports it");
    assert_eq!(
        recv.map(|_| ()),
        poisoned,
        "a receiver is told, not left waiting"
    );
    assert_eq!(
        Error::Poisoned("a timer base").errno(),
        libc::ENOTRECOVERABLE
    );
    // Deleting and dropping still complete.
    assert_eq!(f.owner.delete(t), Ok(()));
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_inside_an_event_queue_fails_its_receivers_instead_of_hanging() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    let later = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), ms(1));
    f.arm(later, ms(3), Duration::ZERO);
    f.advance(ms(1));
    panic_inside(|boom| {
        let _ = f.owner.sink().locked(|_| boom());
    });
    let owner = f.owner.clone();
    let (received, recv) = without_hanging(move || (owner.try_recv(), owner.recv()));
    assert_eq!(received, None);
    assert_eq!(recv, Err(Error::Poisoned("an owner's event queue")));
    // The next delivery (`later`) meets the poisoned queue: the service reports it.
    assert_eq!(f.timers.health(), Ok(()));
    f.advance(ms(2));
    assert_eq!(
        f.timers.health(),
        Err(Error::Poisoned("an owner's event queue"))
    );
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_under_a_timer_lock_fails_that_timer_and_the_owner_still_drops() {
    let f = Fx::new();
    let t = f.queue(ClockId::Monotonic);
    let other = f.queue(ClockId::Monotonic);
    panic_inside(|boom| {
        let _ = f.owner.reg.with_timer(t, |_| boom());
    });
    let owner = f.owner.clone();
    let (get, set, del, fine) = without_hanging(move || {
        (
            owner.gettime(t),
            owner.settime(t, SetFlags::RELATIVE, ms(1), Duration::ZERO),
            owner.delete(t),
            owner.gettime(other),
        )
    });
    let poisoned = Err(Error::Poisoned("a timer"));
    assert_eq!(get.map(|_| ()), poisoned);
    assert_eq!(set.map(|_| ()), poisoned);
    assert_eq!(del, poisoned);
    assert!(fine.is_ok(), "other timers are unaffected");
    // The owner's teardown skips the poisoned timer (and keeps its memory) without waiting.
    without_hanging(move || drop(f));
}

#[test]
fn a_driver_that_dies_is_reported_and_its_receivers_are_told() {
    let timers = Timers::builder().bases(1).drivers(1).build().unwrap();
    let owner = timers.owner();
    let waiter = {
        let owner = owner.clone();
        std::thread::spawn(move || owner.recv())
    };
    quiet_panics(|| {
        timers.core.crash_driver.store(true, Ordering::Relaxed);
        timers.clock_was_set(); // wakes the driver, which then panics
        while timers.health().is_ok() {
            std::thread::yield_now();
        }
    });
    let died = Err(Error::Poisoned("a driver thread"));
    assert_eq!(timers.health(), died);
    assert_eq!(
        without_hanging(move || waiter.join().unwrap()).map(|_| ()),
        died
    );
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue).map(|_| ()),
        died
    );
}

#[test]
fn a_timer_handle_deletes_its_timer_when_dropped_and_its_event_goes_with_it() {
    let f = Fx::new();
    let h = f.owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    let id = h.id();
    h.settime(SetFlags::RELATIVE, Duration::from_millis(5), Duration::ZERO)
        .unwrap();
    assert_eq!(h.gettime().unwrap().as_nanos().0, 5 * MS);
    f.clock.advance(Duration::from_millis(5));
    f.timers.poll();
    assert_eq!(f.owner.queued(), 1, "the event is queued");
    drop(h);
    assert_eq!(
        f.owner.gettime(id),
        Err(Error::UnknownTimer),
        "deleted on drop"
    );
    assert_eq!(f.owner.try_recv(), None, "its pending event dropped unseen");
    assert!(f.owner.timers().is_empty());
}

#[test]
fn a_timer_handle_can_be_given_up_or_deleted_with_its_error() {
    let f = Fx::new();
    let kept = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    let id = kept.into_id();
    assert_eq!(f.owner.getoverrun(id), Ok(0), "into_id keeps the timer");
    let h = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    assert_eq!(h.owner().timers().len(), 2);
    let h2 = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    let id2 = h2.id();
    assert_eq!(h.delete(), Ok(()));
    f.owner.delete(id2).unwrap();
    assert_eq!(
        h2.delete(),
        Err(Error::UnknownTimer),
        "deleted by ID meanwhile"
    );
    let h3 = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    f.owner.destroy();
    assert_eq!(h3.delete(), Err(Error::OwnerDeleted));
    drop(f.owner.timer(ClockId::Monotonic, Notify::None)); // fails: owner destroyed
}

#[test]
fn a_failed_create_drops_its_callback() {
    let f = Fx::with(|b| {
        b.id_bits(1);
    });
    let held = Arc::new(());
    let callback = |held: &Arc<()>| {
        let held = held.clone();
        Notify::callback(move |_, _| assert!(Arc::strong_count(&held) > 0))
    };
    f.owner.set_restore_ids(true);
    let taken = f
        .owner
        .create_with_id(0, ClockId::Monotonic, Notify::None)
        .unwrap();
    let e = f
        .owner
        .create_with_id(taken.get(), ClockId::Monotonic, callback(&held));
    assert_eq!(e, Err(Error::IdInUse));
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "an ID in use: the callback is dropped"
    );
    f.owner.set_restore_ids(false);
    f.owner.create(ClockId::Monotonic, Notify::None).unwrap();
    let e = f.owner.create(ClockId::Monotonic, callback(&held));
    assert_eq!(e, Err(Error::NoFreeId));
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "no free ID: the callback is dropped"
    );
}

/// poll(2) on one fd: readable within `timeout_ms` (0: now)?
fn fd_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd that lives for the call.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents & libc::POLLIN != 0
}

#[test]
fn a_deadline_fd_needs_os_clocks_and_no_drivers() {
    let fx = Fx::with(|b| {
        b.drivers(0);
    });
    assert!(matches!(
        fx.timers.deadline_fd(),
        Err(Error::InvalidConfig(_))
    ));
    let driven = Timers::builder().drivers(1).build().unwrap();
    assert!(matches!(driven.deadline_fd(), Err(Error::InvalidConfig(_))));
}

/// The deadline fd on the OS clocks: armed at the earliest timer, moved by an earlier arm (a
/// ring) and not by a later one, readable at the deadline and not before, re-armed by poll.
/// No timing assertion: "not before" is checked against the clock, and the far deadlines are
/// hours away.
#[test]
fn the_deadline_fd_follows_the_earliest_timer() {
    let timers = Timers::builder().drivers(0).bases(2).build().unwrap();
    let owner = timers.owner();
    let fd = timers.deadline_fd().unwrap();
    assert!(!fd_readable(fd, 0), "nothing armed");
    let far = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(far, SetFlags::RELATIVE, Duration::from_secs(3600), ms(0))
        .unwrap();
    let rings = timers.core.rings.load(Ordering::Relaxed);
    assert!(rings >= 1, "the first timer moved the fd from disarmed");
    let later = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(later, SetFlags::RELATIVE, Duration::from_secs(7200), ms(0))
        .unwrap();
    assert_eq!(
        timers.core.rings.load(Ordering::Relaxed),
        rings,
        "a later arm costs no system call"
    );
    assert!(!fd_readable(fd, 0));
    // An earlier one moves it (a realtime timer: converted to the monotonic clock).
    let soon = owner.create(ClockId::Realtime, Notify::Queue).unwrap();
    let before = timers.now(ClockId::Monotonic);
    owner
        .settime(soon, SetFlags::RELATIVE, ms(20), ms(0))
        .unwrap();
    assert_eq!(timers.core.rings.load(Ordering::Relaxed), rings + 1);
    assert!(fd_readable(fd, 60_000), "readable at the deadline");
    assert!(
        timers.now(ClockId::Monotonic) >= before + 20 * MS,
        "never before it"
    );
    assert_eq!(timers.poll(), 1);
    assert_eq!(owner.try_recv().map(|e| e.id), Some(soon));
    assert!(
        !fd_readable(fd, 0),
        "poll re-armed it at the next deadline, an hour away"
    );
    // A sleep moves it too.
    let sleep = timers.sleep(ms(5));
    let deadline = sleep.deadline();
    let mut sleep = std::pin::pin!(sleep);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    assert!(fd_readable(fd, 60_000));
    assert!(timers.now(ClockId::Monotonic) >= deadline);
    timers.poll();
    assert!(sleep.as_mut().poll(&mut cx).is_ready());
    // Everything cancelled: the fd may fire early (a poll then does nothing), never late;
    // after that poll it is disarmed.
    owner.delete(far).unwrap();
    owner.delete(later).unwrap();
    timers.poll();
    assert_eq!(timers.next_deadline(), None);
    assert!(!fd_readable(fd, 0));
}

/// `clock_was_set` makes the deadline fd readable at once: the loop polls and re-evaluates
/// absolute realtime timers.
#[test]
fn clock_was_set_makes_the_deadline_fd_readable() {
    let timers = Timers::builder().drivers(0).build().unwrap();
    let fd = timers.deadline_fd().unwrap();
    assert!(!fd_readable(fd, 0));
    timers.clock_was_set();
    assert!(fd_readable(fd, 60_000));
    timers.poll();
    assert!(!fd_readable(fd, 0));
}

/// A sleep keeps its service running after the last `Timers` handle is dropped (it would
/// otherwise never complete); once it goes too, the service stops.
#[test]
fn a_sleep_keeps_its_service_running() {
    let f = Fx::new();
    let sleep = f.timers.sleep(ms(1));
    let owner = f.owner.clone();
    drop(f);
    assert!(owner.create(ClockId::Monotonic, Notify::Queue).is_ok());
    drop(sleep);
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue).map(|_| ()),
        Err(Error::ServiceStopped)
    );
}

struct WakeProbe {
    timers: Timers,
    woken: AtomicUsize,
    violated: AtomicUsize,
}

impl std::task::Wake for WakeProbe {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        // A waker may call back into tempora: in debug builds the lock-order check panics if
        // it runs under a tempora lock (release builds would deadlock on the delivery lock).
        let t = self.timers.clone();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.poll())).is_err() {
            self.violated.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A failure met under locks (a poisoned event queue, during a delivery) closes the owners'
/// queues and wakes their tasks only once the poll holds no lock.
#[test]
fn a_failure_wakes_waiting_tasks_with_no_lock_held() {
    let f = Fx::new();
    let other = f.timers.owner();
    let probe = Arc::new(WakeProbe {
        timers: f.timers.clone(),
        woken: AtomicUsize::new(0),
        violated: AtomicUsize::new(0),
    });
    let waker = std::task::Waker::from(probe.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut recv = Box::pin(other.recv_async());
    assert!(recv.as_mut().poll(&mut cx).is_pending());
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    panic_inside(|boom| {
        let _ = f.owner.sink().locked(|_| boom());
    });
    quiet_panics(|| {
        f.clock.advance(ms(1));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.timers.poll()));
    });
    assert!(f.timers.health().is_err());
    assert_eq!(probe.woken.load(Ordering::SeqCst), 1);
    assert_eq!(
        probe.violated.load(Ordering::SeqCst),
        0,
        "woken under a lock"
    );
    assert!(matches!(
        recv.as_mut().poll(&mut cx),
        std::task::Poll::Ready(Err(Error::Poisoned(_)))
    ));
}

/// A callback panics with a payload whose own `Drop` panics, after polling itself so that
/// its next expiry was folded into the call: the payload was dropped after the fold's re-run
/// was decided, the unwind left the call marked running, and the callback never ran again
/// (1 call in 11 periods). Payloads are now dropped under a catch, and an unwind out of a
/// call resets its state.
#[test]
fn a_panic_payload_that_panics_on_drop_does_not_stop_its_timer() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a payload's drop panics");
        }
    }
    let f = Fx::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let (c2, clock, timers) = (calls.clone(), f.clock.clone(), f.timers.clone());
    let id = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_, _| {
                if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                    clock.advance(ms(1));
                    timers.poll(); // folds this timer's next expiry into this call
                    std::panic::panic_any(Bomb);
                }
            }),
        )
        .unwrap();
    f.arm(id, ms(1), ms(1));
    quiet_panics(|| {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.advance(ms(1))));
        for _ in 0..10 {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.advance(ms(1))));
        }
    });
    assert!(
        calls.load(Ordering::SeqCst) >= 10,
        "{} calls in 11 periods",
        calls.load(Ordering::SeqCst)
    );
}

/// A sleep's waker panics when woken, with a payload whose own `Drop` panics: the poll that
/// fired the sleep must return (the panic is counted), not unwind out of `poll` while
/// dropping the payload. Before payloads were dropped under a catch on this path too, the
/// second panic escaped the poll.
#[test]
fn a_waker_panic_payload_that_panics_on_drop_stays_inside_the_poll() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a payload's drop panics");
        }
    }
    struct Explodes;
    impl std::task::Wake for Explodes {
        fn wake(self: Arc<Self>) {
            std::panic::panic_any(Bomb);
        }
    }
    let f = Fx::new();
    let mut sleep = Box::pin(f.timers.sleep(ms(1)));
    let waker = std::task::Waker::from(Arc::new(Explodes));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    let polled = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.advance(ms(1))))
    });
    assert_eq!(
        polled.ok(),
        Some(1),
        "the poll returned, having fired the sleep"
    );
    assert!(sleep.as_mut().poll(&mut cx).is_ready());
}
