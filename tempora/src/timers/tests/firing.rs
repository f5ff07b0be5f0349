//! When a timer fires: never before its expiry, within a tick after it, once per
//! expiry instant, on the clock it was armed on; and what a poll delivers.

use super::*;

#[test]
fn one_shot_fires_once_at_its_expiry_never_before() {
    let f = Manual::with(|b| {
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
    let f = Manual::with(|b| {
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
    let f = Manual::new();
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
    while let Some(at) = f
        .timers
        .next_deadline()
        .map(crate::instant::Instant::as_nanos)
    {
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
        let f = Manual::new();
        let t = f.queue(ClockId::Monotonic);
        let start = f.clock.now(ClockId::Monotonic);
        f.arm(t, Duration::from_nanos(first), Duration::ZERO);
        f.arm(t, Duration::from_nanos(second), Duration::ZERO);
        let due = start + second.div_ceil(US) * US;
        assert_eq!(
            f.timers.next_deadline(),
            Some(crate::instant::Instant::from_nanos(due)),
            "re-armed {first} -> {second} ns"
        );
        f.clock.advance(Duration::from_nanos(due - start));
        assert_eq!(f.timers.poll(), 1, "fires at {second} ns, not {first} ns");
        assert_eq!(f.drain().len(), 1);
    }
}

#[test]
fn a_refreshed_timer_fires_at_its_new_expiry_not_the_old_one() {
    // A re-arm to a later time leaves the wheel entry in place (no base lock); the poll that
    // meets the old entry must place the timer again instead of firing it.
    let f = Manual::new();
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

#[test]
fn zero_value_disarms_zeroes_the_interval_and_returns_the_old_setting() {
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
fn an_unconsumed_periodic_timer_costs_nothing_after_its_first_expiry() {
    let f = Manual::new();
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
    let f = Manual::new();
    let t = f.owner.create(ClockId::Monotonic, Notify::None).unwrap();
    f.arm(t, ms(1), Duration::ZERO);
    assert_eq!(f.timers.next_deadline(), None);
    assert_eq!(f.advance(ms(5)), 0);
    assert!(f.drain().is_empty());
    assert_eq!(f.value(t), 0, "a passed one-shot SIGEV_NONE reads zero");
}

#[test]
fn a_poll_delivers_everything_due_in_bounded_batches() {
    let f = Manual::with(|b| {
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

/// A poll that starts while another poller delivers a batch it popped waits for that
/// delivery: when it returns, every timer due by its clock reading has fired, as a settime or
/// gettime right after it sees. Here the first poller stalls inside its batch (the owner's
/// queue lock is held) after popping two timers, and a second poll runs meanwhile.
#[test]
fn poll_waits_for_deliveries_another_poller_has_begun() {
    let f = Manual::with(|b| {
        b.bases(1);
    });
    let stalled = f.queue(ClockId::Monotonic);
    let other = f
        .owner
        .create(ClockId::Monotonic, Notify::callback(|_| ()))
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
