//! Callback timers: the arguments a callback gets, the calls it may make on its own timer,
//! its panics (caught and counted), its name and its closure's lifetime.

use super::*;

#[test]
fn callbacks_run_with_id_and_overrun_and_may_settime_or_delete_their_own_timer() {
    let f = Manual::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let rearm = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                log.lock().unwrap().push((fired.id(), fired.overrun()));
                // Re-arm itself from inside the callback: no lock is held.
                fired
                    .settime(SetFlags::RELATIVE, ms(5), Duration::ZERO)
                    .unwrap();
                assert_eq!(fired.gettime().unwrap().value.to_nanos(), Ok(5 * MS));
            }),
        )
        .unwrap();
    let deleted = Arc::new(AtomicUsize::new(0));
    let d = deleted.clone();
    let selfdel = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                assert_eq!(fired.overrun(), 2, "periods the poll was late by");
                fired.delete().unwrap();
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

/// Sets a flag when dropped: what a callback's closure owns, to see when it is released.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn drop_flag() -> (DropFlag, Arc<std::sync::atomic::AtomicBool>) {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    (DropFlag(flag.clone()), flag)
}

/// Issue 42 item 7, the capture cycle: a self-re-arming callback that captures its `Owner`
/// (the natural pattern with `Notify::callback`) keeps the owner, its timers and the closure
/// alive after every other handle of the owner is dropped: the timer goes on firing and the
/// closure's state is never dropped. Only `destroy` (or a delete) ends it; here the test
/// keeps a way back to the owner to do so, which a real program has lost.
#[test]
fn a_callback_that_captures_its_owner_keeps_it_alive_after_its_handles_are_dropped() {
    let f = Manual::new();
    let owner = f.timers.owner();
    let (flag, dropped) = drop_flag();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    // The test's way back to the owner, which the natural pattern does not have.
    let back = Arc::new(Mutex::new(None::<Owner>));
    let captured = owner.clone();
    *back.lock().unwrap() = Some(owner.clone());
    let weak = owner.downgrade();
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                let id = fired.id();
                let _ = &flag;
                c.fetch_add(1, Ordering::Relaxed);
                let _ = captured.settime(id, SetFlags::RELATIVE, ms(1), Duration::ZERO);
            }),
        )
        .unwrap();
    owner
        .settime(id, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    drop(owner);
    let leaked = back.lock().unwrap().take().unwrap();
    drop(leaked);
    // Every handle outside the closure is gone.
    for _ in 0..3 {
        assert_eq!(f.advance(ms(1)), 1, "still firing");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert!(
        !dropped.load(Ordering::Relaxed),
        "the closure is never released"
    );
    let alive = weak.upgrade().expect("the owner is still alive");
    // What a program could only do while it still had a handle: end it by hand.
    alive.destroy();
    drop(alive);
    assert!(dropped.load(Ordering::Relaxed));
    assert!(weak.upgrade().is_none(), "gone once the cycle is broken");
}

/// Issue 42 item 7, without the cycle: the same self-re-arming callback written with
/// `Notify::on_fire` acts on its timer through the `Fired` it is handed and captures no
/// owner, so dropping the owner's last handle ends the owner, deletes the timer and drops the
/// closure at once (its memory comes back: the closure's state is dropped, the owner cannot
/// be upgraded, and the leak check of `.ci/rust-asan.sh` finds nothing).
#[test]
fn an_on_fire_callback_that_re_arms_itself_ends_with_its_owners_last_handle() {
    let f = Manual::new();
    let owner = f.timers.owner();
    let (flag, dropped) = drop_flag();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let weak = owner.downgrade();
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                let _ = &flag;
                c.fetch_add(1, Ordering::Relaxed);
                assert!(fired.owner().is_some());
                fired
                    .settime(SetFlags::RELATIVE, ms(1), Duration::ZERO)
                    .unwrap();
            }),
        )
        .unwrap();
    owner
        .settime(id, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(f.advance(ms(1)), 1, "it re-arms itself");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert!(!dropped.load(Ordering::Relaxed));
    drop(owner);
    assert!(dropped.load(Ordering::Relaxed), "the closure was released");
    assert!(weak.upgrade().is_none(), "the owner ended");
    assert_eq!(f.advance(ms(1)), 0, "and its timer with it");
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

/// A call may drop its owner's last handle: the owner ends there, on the call's thread (the
/// teardown takes no lock the poll holds: none is held during a call), and the call's own
/// `Fired` calls then fail with `OwnerDeleted`; the closure is released once the call
/// returns.
#[test]
fn a_call_that_drops_its_owners_last_handle_ends_it_and_its_calls_then_fail() {
    let f = Manual::new();
    let slot = Arc::new(Mutex::new(Some(f.timers.owner())));
    let (flag, dropped) = drop_flag();
    let s = slot.clone();
    let results = Arc::new(Mutex::new(Vec::new()));
    let r = results.clone();
    let owner = slot.lock().unwrap().clone().unwrap();
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                let _ = &flag;
                drop(s.lock().unwrap().take());
                let mut r = r.lock().unwrap();
                r.push(fired.owner().is_none());
                r.push(
                    fired.settime(SetFlags::RELATIVE, ms(1), Duration::ZERO)
                        == Err(Error::OwnerDeleted),
                );
                r.push(fired.gettime() == Err(Error::OwnerDeleted));
                r.push(fired.getoverrun() == Err(Error::OwnerDeleted));
                r.push(fired.delete() == Err(Error::OwnerDeleted));
                r.push(fired.weak_owner().upgrade().is_none());
            }),
        )
        .unwrap();
    owner.settime(id, SetFlags::RELATIVE, ms(1), ms(1)).unwrap();
    drop(owner);
    assert_eq!(f.advance(ms(1)), 1);
    assert_eq!(*results.lock().unwrap(), vec![true; 6]);
    assert!(dropped.load(Ordering::Relaxed), "released after the call");
    assert_eq!(f.advance(ms(5)), 0, "the timer went with its owner");
}

/// A named callback is recorded under its name, and restored by it; the names a snapshot
/// reserves are refused.
#[test]
fn a_named_callback_checkpoints_and_restores_by_its_name() {
    let f = Manual::new();
    assert!(matches!(
        f.owner
            .create(ClockId::Monotonic, Notify::callback_named("queue", |_| ())),
        Err(Error::InvalidConfig(_))
    ));
    let id = f
        .owner
        .create(ClockId::Monotonic, Notify::callback_named("tick", |_| ()))
        .unwrap();
    f.arm(id, ms(3), ms(3));
    let snap = f.owner.checkpoint();
    let other = f.timers.owner();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    other
        .restore(&snap, |name| {
            assert_eq!(name, "tick");
            let c = c.clone();
            Some(Notify::callback_named(name, move |fired| {
                assert_eq!(fired.id(), id, "the same ID");
                c.fetch_add(1, Ordering::Relaxed);
            }))
        })
        .unwrap();
    assert_eq!(
        format!("{:?}", Notify::callback_named("tick", |_| ())),
        "Callback(\"tick\", ..)"
    );
    f.owner.delete(id).unwrap();
    assert_eq!(f.advance(ms(3)), 1);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[test]
fn a_panicking_callback_is_caught_and_counted() {
    let f = Manual::new();
    let t = f
        .owner
        .create(ClockId::Monotonic, Notify::callback(|_| panic!("boom")))
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
            Notify::callback(move |_| {
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
    let long = "x".repeat(crate::timers::object::types::MAX_NAME + 1);
    for name in ["none", "queue", long.as_str()] {
        let r = f
            .owner
            .create(ClockId::Monotonic, Notify::callback_named(name, |_| ()));
        assert!(
            matches!(r, Err(Error::InvalidConfig(_))),
            "{name:.8}: {r:?}"
        );
    }
    let fits = "é".repeat(crate::timers::object::types::MAX_NAME / 2);
    assert!(f
        .owner
        .create(ClockId::Monotonic, Notify::callback_named(&fits, |_| ()))
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
            Notify::callback(move |_| assert!(Arc::strong_count(&held) > 0)),
        )
        .unwrap();
    assert_eq!(Arc::strong_count(&token), 2);
    f.owner.delete(t).unwrap();
    assert_eq!(Arc::strong_count(&token), 1);
    let held = token.clone();
    f.owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_| assert!(Arc::strong_count(&held) > 0)),
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
        Notify::callback(move |_| assert!(Arc::strong_count(&held) > 0))
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

/// Owners dropped while their `on_fire` callbacks fire on real drivers (two drivers, two
/// bases): each closure holds a strong handle for a moment in every call, so the last handle
/// is dropped sometimes by the test thread, sometimes by a driver inside a call (the owner's
/// teardown then runs there). Every owner ends and every closure is released, whichever
/// thread ends it, and nothing hangs. `TEMPORA_SOAK` rounds (20 by default).
#[test]
fn owners_dropped_while_their_on_fire_callbacks_run_on_drivers_all_end() {
    let rounds: usize = std::env::var("TEMPORA_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let timers = testing::driven(|b| {
        b.bases(2).drivers(2);
    });
    for _ in 0..rounds {
        let owner = timers.owner();
        let weak = owner.downgrade();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut flags = Vec::new();
        for _ in 0..4 {
            let (flag, dropped) = drop_flag();
            flags.push(dropped);
            let c = calls.clone();
            let id = owner
                .create(
                    ClockId::Monotonic,
                    Notify::callback(move |fired| {
                        let _ = &flag;
                        c.fetch_add(1, Ordering::Relaxed);
                        if let Some(o) = fired.owner() {
                            std::thread::yield_now();
                            let _ = o.gettime(fired.id());
                        }
                        let _ = fired.settime(
                            SetFlags::RELATIVE,
                            Duration::from_micros(50),
                            Duration::ZERO,
                        );
                    }),
                )
                .unwrap();
            owner
                .settime(
                    id,
                    SetFlags::RELATIVE,
                    Duration::from_micros(50),
                    Duration::ZERO,
                )
                .unwrap();
        }
        // Waits (not a timing assertion: a generous bound against a hang) for calls to run.
        let until = Instant::now() + Duration::from_secs(30);
        while calls.load(Ordering::Relaxed) < 8 {
            assert!(Instant::now() < until, "the callbacks do not run");
            std::thread::yield_now();
        }
        drop(owner);
        let until = Instant::now() + Duration::from_secs(30);
        while !flags.iter().all(|f| f.load(Ordering::Relaxed)) {
            assert!(Instant::now() < until, "a closure was never released");
            std::thread::yield_now();
        }
        assert!(weak.upgrade().is_none(), "the owner ended");
    }
}

/// A driver's poll collects callbacks into a buffer that grows only fallibly: with every
/// allocation refused, a poll that finds three batches of callbacks due collects one batch
/// (what its buffer has room for) and leaves the rest due in the wheel, and the next polls
/// collect them; none is lost or run twice, and the buffer never grew. With memory, one poll
/// collects all three batches. (It grew infallibly past a batch, aborting the process when
/// memory ran out: the `timers` module doc, "Memory".)
#[test]
fn collected_callbacks_grow_their_buffer_only_fallibly() {
    const BATCH: usize = 4;
    let f = Manual::with(|b| {
        b.batch(BATCH);
    });
    let core = &f.timers.core;
    let ran = Arc::new(AtomicUsize::new(0));
    let ids: Vec<_> = (0..3 * BATCH)
        .map(|_| {
            let r = ran.clone();
            let cb = Notify::callback(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
            });
            f.owner.create(ClockId::Monotonic, cb).unwrap()
        })
        .collect();
    let fire_all = || {
        for &id in &ids {
            f.arm(id, ms(1), Duration::ZERO);
        }
        f.clock.advance(ms(1));
    };
    // With memory: one poll collects every batch.
    fire_all();
    let mut out = Vec::new();
    assert_eq!(core.poll_collect(core.now_all(), &mut out), 3 * BATCH);
    assert_eq!(out.len(), 3 * BATCH);
    out.drain(..).for_each(|c| core.run_call(c));
    assert_eq!(ran.load(Ordering::SeqCst), 3 * BATCH);
    // With none: a batch per poll, into the room the buffer has.
    let mut out = Vec::with_capacity(BATCH);
    let capacity = out.capacity();
    fire_all();
    let mut polls = Vec::new();
    loop {
        let (fired, collected) = crate::alloc::refusing_allocations(0, || {
            let fired = core.poll_collect(core.now_all(), &mut out);
            (fired, out.len())
        });
        assert_eq!(out.capacity(), capacity, "the buffer grew");
        polls.push((fired, collected));
        out.drain(..).for_each(|c| core.run_call(c));
        if fired == 0 {
            break;
        }
    }
    assert_eq!(
        polls,
        [(BATCH, BATCH); 3]
            .into_iter()
            .chain([(0, 0)])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        6 * BATCH,
        "a callback lost or run twice"
    );
}
