//! Round trips: checkpoint → bytes → restore keeps every timer, setting and future delivery
//! (the property test), the precision defaults, and remaining times at the extremes.

use super::*;

/// One timer as an observer sees it: ID, clock, status, gettime (ns), getoverrun.
type Observed = (TimerId, ClockId, Status, (u64, u64), i32);

/// Everything observable of an owner now: listing, settings, overruns.
fn observe(o: &Owner) -> Vec<Observed> {
    let mut v: Vec<_> = o
        .timers()
        .into_iter()
        .map(|t| {
            (
                t.id,
                t.clock,
                t.status,
                o.gettime(t.id).unwrap().as_nanos(),
                o.getoverrun(t.id).unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// checkpoint → bytes → restore under the manual clock gives the same listing, settings
    /// and overruns, the same next ID, and the same deliveries from then on.
    #[test]
    fn round_trip_restores_the_same_timers_and_future(
        specs in proptest::collection::vec(spec(), 0..40),
        dense in any::<bool>(),
        run_ms in 0u64..200,
        steps in proptest::collection::vec(1u64..60, 1..12),
    ) {
        let ca = ManualClock::new();
        let ta = testing::manual(ca.clone(), |_| ());
        let log_a: Log = Arc::default();
        let a = build(&ca, &ta, &log_a, &specs, dense, run_ms);
        let bytes = a.checkpoint().encode();
        let before = log_a.lock().unwrap().len(); // callbacks run before the checkpoint
        let snap = Snapshot::decode(&bytes).unwrap();
        prop_assert_eq!(&snap, &a.checkpoint(), "encode/decode is lossless");

        // Another process: its own clock, at another monotonic time, the same wall clock.
        let cb = ManualClock::new();
        cb.advance(Duration::from_secs(3600));
        cb.set_realtime(ca.now(ClockId::Realtime));
        let tb = testing::manual(cb.clone(), |_| ());
        let log_b: Log = Arc::default();
        let b = tb.owner();
        b.restore(&snap, |name| (name == "tick").then(|| tick(&log_b))).unwrap();

        prop_assert_eq!(observe(&a), observe(&b));
        prop_assert_eq!(a.restore_ids(), b.restore_ids());
        for step in steps {
            for c in [&ca, &cb] {
                c.advance(Duration::from_millis(step));
            }
            ta.poll();
            tb.poll();
            prop_assert_eq!(drain(&a), drain(&b));
            prop_assert_eq!(observe(&a), observe(&b));
        }
        let (la, lb) = (log_a.lock().unwrap().clone(), log_b.lock().unwrap().clone());
        let mut la = la[before..].to_vec();
        let mut lb = lb;
        la.sort();
        lb.sort();
        prop_assert_eq!(la, lb, "the same callbacks with the same overruns");
        a.set_restore_ids(false);
        b.set_restore_ids(false);
        prop_assert_eq!(
            a.create(ClockId::Monotonic, Notify::None).ok(),
            b.create(ClockId::Monotonic, Notify::None).ok(),
            "the counter continues where it was"
        );
    }

}

/// The owner's default slack goes into the snapshot and comes back with a restore, before
/// its timers are armed (those of `Default` precision are placed with it); a failed restore
/// puts the old one back.
#[test]
fn restore_puts_back_the_default_slack() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let a = timers.owner();
    a.set_default_slack(Some(Duration::from_millis(20)));
    let id = a.create(ClockId::Monotonic, Notify::Queue).unwrap();
    a.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_millis(100),
        Duration::ZERO,
    )
    .unwrap();
    let snap = a.checkpoint();
    assert_eq!(snap.default_slack, Some(Duration::from_millis(20)));
    let snap = Snapshot::decode(&snap.encode()).unwrap();
    let b = timers.owner();
    b.restore(&snap, |_| None).unwrap();
    assert_eq!(b.default_slack(), Some(Duration::from_millis(20)));
    // The restored timer is placed with the slack: not due at its expiry's tick, due by the
    // end of its slack.
    clock.advance(Duration::from_millis(100));
    timers.poll();
    let fired_at_expiry = b.try_recv().is_some();
    clock.advance(Duration::from_millis(20));
    timers.poll();
    assert!(
        fired_at_expiry || b.try_recv().is_some(),
        "fired within its slack"
    );
    // A restore that fails (the owner has timers) keeps the owner's own default slack.
    let c = timers.owner();
    c.set_default_slack(Some(Duration::from_millis(1)));
    c.create(ClockId::Monotonic, Notify::Queue).unwrap();
    assert!(c.restore(&snap, |_| None).is_err());
    assert_eq!(c.default_slack(), Some(Duration::from_millis(1)));
}

/// A checkpoint records each timer's precision and a restore sets it again.
#[test]
fn checkpoint_keeps_the_precision() {
    let timers = testing::manual(ManualClock::new(), |_| ());
    let owner = timers.owner();
    let ps = [
        Precision::Default,
        Precision::Precise,
        Precision::Slack(Duration::from_millis(7)),
        Precision::Deferrable,
    ];
    let cb = Notify::callback(|_| ());
    let ids: Vec<_> = ps
        .iter()
        .map(|&p| {
            let id = owner.create(ClockId::Monotonic, cb.clone()).unwrap();
            owner.set_precision(id, p).unwrap();
            id
        })
        .collect();
    let back = Snapshot::decode(&owner.checkpoint().encode()).unwrap();
    let fresh = timers.owner();
    fresh.restore(&back, |_| Some(cb.clone())).unwrap();
    for (id, p) in ids.iter().zip(ps) {
        assert_eq!(fresh.precision(*id).unwrap(), p);
    }
}

/// Remaining times at the ends of `i64` are valid (long passed, far away): restored without
/// overflow, the first due at once, the second never.
#[test]
fn extreme_remaining_times_restore_without_overflow() {
    let mut snap = sample();
    let q = snap
        .timers
        .iter()
        .position(|t| t.notify == "queue")
        .expect("a queue timer");
    let id = snap.timers[q].id;
    snap.timers[q].clock = ClockId::Monotonic;
    snap.timers[q].status = Status::Armed;
    snap.timers[q].pending = false;
    snap.timers[q].interval = 0;
    snap.timers[q].expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: i64::MIN,
    };
    let mut far = snap.clone();
    far.timers[q].expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: i64::MAX,
    };
    for s in [&snap, &far] {
        assert_eq!(&Snapshot::decode(&encoded(s).unwrap()).unwrap(), s);
    }
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let timers = testing::manual(clock.clone(), |_| ());
    let past = timers.owner();
    past.restore(&snap, |_| Some(Notify::None)).unwrap();
    timers.poll();
    assert!(drain(&past).iter().any(|e| e.id == id), "due at once");
    let later = timers.owner();
    later.restore(&far, |_| Some(Notify::None)).unwrap();
    clock.advance(Duration::from_secs(3600));
    timers.poll();
    assert!(!drain(&later).iter().any(|e| e.id == id), "never due");
    let (value, _) = later.gettime(id).unwrap().as_nanos();
    assert!(value > i64::MAX as u64 / 2, "{value}");
}

/// `TimerRecord::new` with the armed fields set (how a user outside the crate builds a
/// record) is the record a checkpoint takes of a timer armed so, and restores to a timer that
/// fires and counts overruns as the original does.
#[test]
// Built field by field on purpose: outside the crate, where the struct is
// `#[non_exhaustive]`, a literal with `..Default::default()` does not compile.
#[allow(clippy::field_reassign_with_default)]
fn a_new_timer_record_armed_by_its_fields_is_a_checkpointed_one() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let o = timers.owner();
    let id = o.create(ClockId::Boottime, Notify::Queue).unwrap();
    let (value, interval) = (Duration::from_millis(10), Duration::from_millis(4));
    o.settime(id, SetFlags::RELATIVE, value, interval).unwrap();
    let snap = o.checkpoint();

    let mut record = TimerRecord::new(id, ClockId::Boottime, "queue");
    record.status = Status::Armed;
    record.expiry = Expiry::Remaining {
        clock: ClockId::Boottime,
        ns: 10 * MS as i64,
    };
    record.interval = 4 * MS as i64;
    let mut built = Snapshot::default();
    built.counter = snap.counter;
    built.timers.push(record);
    assert_eq!(built, snap);

    let restored = timers.owner();
    restored.restore(&built, |_| None).unwrap();
    clock.advance(Duration::from_millis(19));
    timers.poll();
    for owner in [&o, &restored] {
        let ev = owner.try_recv().expect("the timer fired");
        assert_eq!((ev.id, ev.overrun), (id, 2)); // due at 10 ms; 14 and 18 ms missed
    }
}
