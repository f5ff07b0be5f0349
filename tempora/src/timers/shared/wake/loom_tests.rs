//! Loom models of `wake.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use crate::wheel::Mode;
use loom::sync::Arc;
use std::ptr::NonNull;

fn entry(base: &Base, alarm: &Alarm, tick: u64) {
    // A sleep's entry (never followed: nothing pops it).
    let sleep = NonNull::dangling();
    let (_, ring) = base
        .locked_sleeps(tick, |w| w.insert_with(tick, Mode::PRECISE, sleep))
        .unwrap();
    if ring {
        alarm.lower(tick, 0);
    }
}

fn refresh(base: &CachePadded<Base>, alarm: &Alarm, holder: Option<u64>) -> u64 {
    refresh_at(base, alarm, holder, 0)
}

/// A refresh with every clock at `now`.
fn refresh_at(base: &CachePadded<Base>, alarm: &Alarm, holder: Option<u64>, now: u64) -> u64 {
    let res = Resolution::new(1).unwrap();
    alarm.refresh(
        std::iter::once(base),
        res,
        0,
        &[now; CLOCKS],
        Refresh {
            holder,
            ..Refresh::default()
        },
    )
}

/// A sleeper's refresh races an arm earlier than anything it saw (the entry at 10, with
/// one at 100 already armed): whatever the interleaving, the fd ends up firing by 10, so
/// the entry is never missed. Publishing the deadline outside the base lock, or moving
/// the fd outside the alarm's lock, fails this model.
#[test]
fn loom_a_refresh_never_misses_an_earlier_arm() {
    loom::model(|| {
        let base = Arc::new(CachePadded::new(Base::new([0; CLOCKS], true)));
        let alarm = Arc::new(Alarm::new(true, true).unwrap());
        entry(&base, &alarm, 100);
        refresh(&base, &alarm, None);
        let (b2, a2) = (base.clone(), alarm.clone());
        let armer = loom::thread::spawn(move || entry(&b2, &a2, 10));
        refresh(&base, &alarm, None);
        armer.join().unwrap();
        let plan = alarm.lock();
        assert!(plan.armed <= 10, "the fd fires at {}", plan.armed);
    });
}

/// A receiver holds the alarm (covering 100) while an arm at 10 rings and the driver
/// refreshes: the fd fires by 10 or the holder covers it, and once the receiver
/// releases, the fd fires by 10 whatever it covered. Letting a refresh disarm the fd
/// for a time the holder does not cover, or a release that forgets its cover, fails
/// this model.
#[test]
fn loom_a_holder_and_a_driver_never_miss_an_arm() {
    loom::model(|| {
        let base = Arc::new(CachePadded::new(Base::new([0; CLOCKS], true)));
        let alarm = Arc::new(Alarm::new(true, true).unwrap());
        entry(&base, &alarm, 100);
        refresh(&base, &alarm, None);
        let (covered, ticket) = alarm.hold().unwrap();
        assert_eq!(covered, 100);
        assert_eq!(alarm.lock().armed, 100 + HOLD_BACKSTOP_NS, "the backstop");
        let (b2, a2) = (base.clone(), alarm.clone());
        let armer = loom::thread::spawn(move || entry(&b2, &a2, 10));
        let (b3, a3) = (base.clone(), alarm.clone());
        let driver = loom::thread::spawn(move || refresh(&b3, &a3, None));
        armer.join().unwrap();
        driver.join().unwrap();
        {
            let plan = alarm.lock();
            assert!(plan.armed <= 10 || plan.covered <= 10, "{:?}", *plan);
        }
        alarm.release(ticket, 0);
        let armed = alarm.lock().armed;
        assert!(armed <= 10, "the fd fires at {armed}");
    });
}

/// A refresh that passes over a base with nothing due (its `due`, 100, after the clock at
/// 50: `base.rs`, "Polling only what is due") races an arm at 60 that rings: whatever the
/// interleaving, the fd fires by 60. Either the ring's move comes after the refresh's arm,
/// under the alarm's lock, or the refresh took that lock after the move and so sees the
/// ring's 0 and reads the base. A ring that leaves `due` alone, or clears it only after the
/// move, fails this model.
#[test]
fn loom_a_refresh_that_passes_over_a_base_never_misses_its_arm() {
    loom::model(|| {
        let base = Arc::new(CachePadded::new(Base::new([0; CLOCKS], true)));
        let alarm = Arc::new(Alarm::new(true, true).unwrap());
        let res = Resolution::new(1).unwrap();
        let at_50 = |base: &CachePadded<Base>, alarm: &Alarm| {
            alarm.refresh(
                std::iter::once(base),
                res,
                0,
                &[50; CLOCKS],
                Refresh::default(),
            )
        };
        entry(&base, &alarm, 100);
        assert_eq!(at_50(&base, &alarm), 100);
        assert_eq!(base.due(), 100);
        let (b2, a2) = (base.clone(), alarm.clone());
        let armer = loom::thread::spawn(move || entry(&b2, &a2, 60));
        at_50(&base, &alarm);
        armer.join().unwrap();
        let armed = alarm.lock().armed;
        assert!(armed <= 60, "the fd fires at {armed}");
    });
}

/// A holder that never comes back (cancelled, or gone by `longjmp`, in its wait): the
/// driver's thread, woken by the backstop, finds the hold overdue while a second receiver
/// tries to take the alarm and the first one's late release races both. Whatever the
/// interleaving, the fd fires by the entry at 300 or a live hold covers it, and the stale
/// holder's release never drops the second one's cover. A release without its ticket, or a
/// hold that never lapses, fails this model.
#[test]
fn loom_a_holder_that_never_returns_is_overtaken() {
    loom::model(|| {
        let base = Arc::new(CachePadded::new(Base::new([0; CLOCKS], true)));
        let alarm = Arc::new(Alarm::new(true, true).unwrap());
        entry(&base, &alarm, 100);
        refresh(&base, &alarm, None);
        let (covered, stale) = alarm.hold().unwrap();
        assert_eq!(covered, 100);
        // The backstop fired: the driver's thread pops the entry at 100 (not modelled: the
        // base holds the next one, at 300) and refreshes, the holder overdue.
        entry(&base, &alarm, 300);
        let woke = 100 + HOLD_BACKSTOP_NS;
        let (b2, a2) = (base.clone(), alarm.clone());
        let driver = loom::thread::spawn(move || refresh_at(&b2, &a2, None, woke));
        let a3 = alarm.clone();
        let late = loom::thread::spawn(move || a3.release(stale, woke));
        let second = alarm.hold();
        driver.join().unwrap();
        late.join().unwrap();
        let plan = alarm.lock();
        if let Some((_, ticket)) = second {
            assert!(
                plan.held && plan.ticket == ticket,
                "the second hold was dropped"
            );
        }
        if plan.held && !plan.lapsed {
            assert!(plan.covered <= 300 || plan.armed <= 300, "{:?}", *plan);
        } else {
            assert!(
                plan.armed <= 300,
                "the fd fires at {}: {:?}",
                plan.armed,
                *plan
            );
        }
    });
}

/// A driver's thread about to run a call with others behind it moves the fd to its grace
/// (50) while a receiver takes the alarm and refreshes as its holder: whatever the
/// interleaving, the fd fires by the grace, so a follower takes the calls over if the call
/// outlives it (`driver.rs`, "Callbacks that block"). A hold or a holder's refresh that
/// moves the fd to its backstop past the grace fails this model.
#[test]
fn loom_a_holder_never_moves_the_fd_past_a_grace() {
    loom::model(|| {
        let base = Arc::new(CachePadded::new(Base::new([0; CLOCKS], true)));
        let alarm = Arc::new(Alarm::new(true, true).unwrap());
        entry(&base, &alarm, 100);
        refresh(&base, &alarm, None);
        let (b2, a2) = (base.clone(), alarm.clone());
        let holder = loom::thread::spawn(move || {
            if let Some((_, ticket)) = a2.hold() {
                refresh(&b2, &a2, Some(ticket));
            }
        });
        alarm.grace(50, 100, 0);
        holder.join().unwrap();
        let armed = alarm.lock().armed;
        assert!(armed <= 50, "the fd fires at {armed}, past the grace");
    });
}
