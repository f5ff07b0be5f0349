//! The timer calls' contracts: what `settime`, `gettime`, `getoverrun` and `delete` return
//! and change, the errors they give, and the property that ties deliveries and overruns to
//! the periods elapsed.

use super::*;

#[test]
fn invalid_times_are_einval_before_the_lookup() {
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
    let f = Manual::new();
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
fn settime_flags_ignore_unknown_bits_as_linux_does() {
    assert!(SetFlags::from_raw(1).is_abstime());
    assert!(SetFlags::from_raw(0x7fff_fff1).is_abstime());
    assert!(!SetFlags::from_raw(2).is_abstime());
}

/// What a signal handler meets when it interrupts its own thread inside tempora (the module
/// doc's "Signal handlers"), played without signals: the calls are made while the thread
/// holds the lock the interrupted call would hold. Without the refusal each would spin for
/// ever on a lock its own thread holds.
#[test]
fn calls_made_while_the_thread_holds_a_lock_refuse_instead_of_waiting() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    f.owner
        .settime(t, SetFlags::RELATIVE, ms(10), ms(10))
        .unwrap();
    let before = f.owner.gettime(t).unwrap();
    // Inside the timer's own lock (an interrupted `settime` of this timer).
    let inside = f
        .owner
        .reg
        .with_timer(t, |_| {
            (
                f.owner.gettime(t),
                f.owner.getoverrun(t),
                f.owner.settime(t, SetFlags::RELATIVE, ms(5), ms(0)),
            )
        })
        .unwrap();
    assert_eq!(
        inside,
        (
            Err(Error::WouldDeadlock),
            Err(Error::WouldDeadlock),
            Err(Error::WouldDeadlock)
        )
    );
    // Inside a base's lock (an interrupted poll or arm of any timer).
    let inside = f.timers.core.bases[0]
        .locked(|_| f.owner.settime(t, SetFlags::RELATIVE, ms(5), ms(0)))
        .unwrap();
    assert_eq!(inside, Err(Error::WouldDeadlock));
    assert_eq!(Error::WouldDeadlock.errno(), libc::EDEADLK);
    assert!(Error::WouldDeadlock.is_transient());
    assert_eq!(f.owner.gettime(t).unwrap(), before, "nothing changed");
    // Once the lock is released, the same calls complete.
    assert!(f.owner.settime(t, SetFlags::RELATIVE, ms(5), ms(0)).is_ok());
    assert_eq!(f.owner.getoverrun(t), Ok(0));
}

/// `gettime` reads without the timer's lock: a copy checked by the lock's version. While
/// another thread holds the lock, it waits; it never returns a state the timer did not have.
#[test]
fn gettime_waits_for_another_threads_holder_and_reads_one_state() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    f.owner
        .settime(t, SetFlags::RELATIVE, ms(10), ms(10))
        .unwrap();
    let (held, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            f.owner
                .reg
                .with_timer(t, |_| {
                    held.wait();
                    release.wait();
                })
                .unwrap();
        });
        held.wait();
        let reader = s.spawn(|| f.owner.gettime(t));
        release.wait();
        assert_eq!(
            reader.join().unwrap().unwrap().interval,
            ms(10).into(),
            "the read completes once the holder is gone"
        );
    });
    // Readers racing writers: every read is one of the settings written, never a mix.
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..2000u64 {
                let v = Duration::from_millis(i % 7 + 1);
                f.owner.settime(t, SetFlags::RELATIVE, v * 1000, v).unwrap();
            }
        });
        for _ in 0..2000 {
            let g = f.owner.gettime(t).unwrap();
            let interval = g.interval.to_nanos().unwrap();
            let value = g.value.to_nanos().unwrap();
            assert!(
                g.interval == ms(10).into() || value == interval * 1000,
                "a torn read: {g:?}"
            );
        }
    });
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
        let f = Manual::with(|b| { b.tick(Duration::from_micros(1)); });
        // (id, first expiry, interval, deliveries + overruns since the last settime)
        let mut t: Vec<(TimerId, u64, u64, u64)> = Vec::new();
        let arm = |f: &Manual, id, v: u64, p: u64| {
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
