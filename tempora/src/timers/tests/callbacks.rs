//! Callback timers: the arguments a callback gets, the calls it may make on its own timer,
//! its panics (caught and counted), its name and its closure's lifetime.

use super::*;

#[test]
fn callbacks_run_with_id_and_overrun_and_may_settime_or_delete_their_own_timer() {
    let f = Manual::new();
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
    let f = Manual::new();
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

/// A callback panics with a payload whose own `Drop` panics, after polling itself so that
/// its next expiry was folded into the call. The bug class: a payload dropped after the
/// fold's re-run was decided unwinds with the call still marked running, and the callback
/// never runs again (1 call in 11 periods). Payloads are dropped under a catch, and an unwind
/// out of a call resets its state.
#[test]
fn a_panic_payload_that_panics_on_drop_does_not_stop_its_timer() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a payload's drop panics");
        }
    }
    let f = Manual::new();
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

#[test]
fn callback_names_a_snapshot_cannot_restore_are_refused_at_create() {
    let f = Manual::new();
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
    let f = Manual::new();
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
fn a_failed_create_drops_its_callback() {
    let f = Manual::with(|b| {
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
