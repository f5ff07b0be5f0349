//! One callback that blocks: a spare takes over and nothing else waits for it, hand-overs
//! between threads of a crew, a timer's calls one at a time, every spare joined.

use super::*;

/// Which side of a blocking call's return the other timers fired on.
#[derive(Default)]
struct Sides {
    /// When the blocking call began (monotonic ns; 0 before).
    entered: AtomicU64,
    returned: AtomicBool,
    /// Timers that fired before the blocking call returned.
    before: AtomicU64,
    /// Of them, those due after it began: held by nothing but a thread to run them.
    due_inside: AtomicU64,
    /// Of those, the callbacks (the rest are queue events a waiting receiver took).
    calls_inside: AtomicU64,
    /// Timers that fired, either side.
    fired: AtomicU64,
}

impl Sides {
    /// A timer due at `at` fired now (`call`: a callback, not a queue event).
    fn fired(&self, at: u64, call: bool) {
        if !self.returned.load(O::SeqCst) {
            self.before.fetch_add(1, O::Relaxed);
            let entered = self.entered.load(O::SeqCst);
            if entered != 0 && at > entered {
                self.due_inside.fetch_add(1, O::Relaxed);
                self.calls_inside.fetch_add(u64::from(call), O::Relaxed);
            }
        }
        self.fired.fetch_add(1, O::SeqCst);
    }
}

/// One callback blocks while 1000 callback timers and 200 queue timers fall due over the
/// next 190 ms. Each of them notes whether the blocking call had returned yet when it fired,
/// and how late it was. With spares the blocking call waits (up to 10 s) until all 1200 have
/// fired: a spare took over, so every one fires before it returns, none early. With
/// `spare_drivers(0)` the call sleeps 200 ms and no callback due after it began fires before
/// it returns (those due before it, collected with it by a late driver, may); queue events
/// may, fired by the test's thread waiting for them in `recv_timeout`, which leads while it
/// waits until it hands a callback to the blocked driver (`Owner::recv`, "Who fires while a
/// receiver waits"). What is judged
/// is which side of the blocked call's return a timer fired on, which no scheduling delay can
/// change; the lateness is only reported.
fn run(spares: usize) -> Run {
    let timers = testing::driven(|b| {
        b.spare_drivers(spares);
    });
    let owner = timers.owner();
    let t0 = mono() + 100 * MS;
    let sides = Arc::new(Sides::default());
    let s = sides.clone();
    let blocker = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_| {
                s.entered.store(mono(), O::SeqCst);
                if spares == 0 {
                    std::thread::sleep(Duration::from_millis(200));
                } else {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while s.fired.load(O::SeqCst) < 1200 && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                s.returned.store(true, O::SeqCst);
            }),
        )
        .unwrap();
    arm_at(&owner, blocker, t0);
    let late = Arc::new(Mutex::new(Vec::new()));
    let early = Arc::new(AtomicU64::new(0));
    for i in 0..1000u64 {
        let at = t0 + MS + i * 190 * MS / 1000;
        let (late, early, sides) = (late.clone(), early.clone(), sides.clone());
        let id = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |_| {
                    let now = mono();
                    if now < at {
                        early.fetch_add(1, O::Relaxed);
                    }
                    late.lock().unwrap().push(now.saturating_sub(at));
                    sides.fired(at, true);
                }),
            )
            .unwrap();
        arm_at(&owner, id, at);
    }
    let mut queued = std::collections::HashMap::new();
    for i in 0..200u64 {
        let at = t0 + 2 * MS + i * 190 * MS / 200;
        let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
        arm_at(&owner, id, at);
        queued.insert(id, at);
    }
    let mut qlate = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while qlate.len() < queued.len() && Instant::now() < deadline {
        if let Some(ev) = owner.recv_timeout(Duration::from_millis(50)).unwrap() {
            let now = mono();
            let at = queued[&ev.id];
            if now < at {
                early.fetch_add(1, O::Relaxed);
            }
            qlate.push(now.saturating_sub(at));
            sides.fired(at, false);
        }
    }
    while late.lock().unwrap().len() < 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let late = late.lock().unwrap();
    assert_eq!(early.load(O::Relaxed), 0, "fired early");
    Run {
        fired: late.len() + qlate.len(),
        before: sides.before.load(O::Relaxed),
        due_inside: sides.due_inside.load(O::Relaxed),
        calls_inside: sides.calls_inside.load(O::Relaxed),
        max_late: late.iter().chain(&qlate).copied().max().unwrap_or(0),
        takeovers: timers.stats().drivers.spare_takeovers,
    }
}

/// What [`run`] saw.
struct Run {
    /// Timers that fired (of 1200).
    fired: usize,
    /// Of them, those that fired before the blocking callback returned.
    before: u64,
    /// Of those, the ones due after it began.
    due_inside: u64,
    /// Of those, the callbacks.
    calls_inside: u64,
    /// The latest one's lateness (reported, not judged).
    max_late: u64,
    takeovers: u64,
}

#[test]
fn a_blocked_callback_delays_no_other_timer_beyond_the_bound() {
    let r = run(4);
    eprintln!(
        "with spares: max lateness {} µs, {} takeovers",
        r.max_late / 1000,
        r.takeovers
    );
    assert_eq!(r.fired, 1200, "timers lost");
    assert!(r.takeovers >= 1, "no spare took over");
    assert_eq!(
        r.before, 1200,
        "timers fired only once the blocked callback returned"
    );
}

#[test]
fn without_spares_a_blocked_callback_delays_the_others() {
    let r = run(0);
    eprintln!(
        "without spares: max lateness {} µs, {} queue events fired meanwhile by the receiver",
        r.max_late / 1000,
        r.due_inside - r.calls_inside
    );
    assert_eq!(r.fired, 1200, "timers lost");
    assert_eq!(r.takeovers, 0);
    assert_eq!(
        r.calls_inside, 0,
        "callbacks due while the only driver was blocked ran before it returned ({} timers \
         fired before it returned in all)",
        r.before
    );
}

/// A periodic timer whose callback blocks for longer than its period: while the callback
/// runs, a spare takes over and meets the timer due again. The callback must not run twice at
/// once (the next call waits, its overrun counting the periods it folds), and once the call
/// has deleted its own timer, no call of it follows (the folded expiry is dropped, as a
/// delete drops a queued event). Without calls serialized per timer, the spare runs the
/// callback beside itself and the second call's delete fails with `UnknownTimer`.
#[test]
fn a_timers_callback_never_runs_beside_itself() {
    let timers = testing::driven(|_| ());
    let owner = Arc::new(timers.owner());
    let inside = Arc::new(AtomicU64::new(0));
    let overlaps = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let folded = Arc::new(AtomicU64::new(0));
    let periodic = |o: &Arc<Owner>, delete_after: u64| {
        let (inside, overlaps, calls, failed, folded) = (
            inside.clone(),
            overlaps.clone(),
            calls.clone(),
            failed.clone(),
            folded.clone(),
        );
        let me = Arc::downgrade(o);
        let id = o
            .create(
                ClockId::Monotonic,
                Notify::callback(move |fired| {
                    let (id, overrun) = (fired.id(), fired.overrun());
                    if inside.fetch_add(1, O::SeqCst) != 0 {
                        overlaps.fetch_add(1, O::Relaxed);
                    }
                    folded.fetch_add(overrun as u64, O::Relaxed);
                    std::thread::sleep(Duration::from_millis(3));
                    let n = calls.fetch_add(1, O::Relaxed) + 1;
                    if n % delete_after == 0 {
                        if let Some(o) = me.upgrade() {
                            if o.delete(id).is_err() {
                                failed.fetch_add(1, O::Relaxed);
                            }
                        }
                    }
                    inside.fetch_sub(1, O::SeqCst);
                }),
            )
            .unwrap();
        // Due every 50 µs: due again many times over while a call sleeps.
        o.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_micros(50),
            Duration::from_micros(50),
        )
        .unwrap();
    };
    for round in 0..20 {
        periodic(&owner, 1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while calls.load(O::Relaxed) < round + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The call counted itself before deleting its timer and leaving: the next round's
        // timer must not start beside its end (one `inside` serves every round).
        while inside.load(O::SeqCst) != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Calls of a deleted timer still in flight would show here.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(overlaps.load(O::Relaxed), 0, "a callback ran beside itself");
    assert_eq!(
        failed.load(O::Relaxed),
        0,
        "a call followed its timer's delete"
    );
    assert_eq!(
        calls.load(O::Relaxed),
        20,
        "one call per timer, then its delete"
    );
    assert!(
        timers.stats().drivers.spare_takeovers >= 1,
        "no spare took over"
    );
    let _ = folded;
}

/// Polls `done` every few milliseconds for up to 20 s.
fn wait_for(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A blocks 100 ms; B falls due 20 ms later and blocks, on the spare that took over, until C
/// has fired (at most 10 s); C falls due at 300 ms and needs a second hand-over: a third
/// thread of the crew must follow on the alarm while A and B block, and fails if a replaced
/// leader disarms the alarm its successor armed for C (C then fires only once B returns).
/// Judged: C fired before B returned, which no scheduling delay can change.
#[test]
fn a_replaced_leader_leaves_its_successors_standby_armed() {
    for _ in 0..3 {
        let timers = testing::driven(|b| {
            b.spare_drivers(4);
        });
        let owner = timers.owner();
        let t0 = mono() + 50 * MS;
        let c_fired = Arc::new(AtomicBool::new(false));
        let b_returned = Arc::new(AtomicBool::new(false));
        let a = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(|_| std::thread::sleep(Duration::from_millis(100))),
            )
            .unwrap();
        let (fired, returned) = (c_fired.clone(), b_returned.clone());
        let b = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |_| {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while !fired.load(O::SeqCst) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    returned.store(true, O::SeqCst);
                }),
            )
            .unwrap();
        let before_b = Arc::new(AtomicU64::new(u64::MAX));
        let (fired, returned, before) = (c_fired.clone(), b_returned.clone(), before_b.clone());
        let c = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |_| {
                    before.store(u64::from(!returned.load(O::SeqCst)), O::SeqCst);
                    fired.store(true, O::SeqCst);
                }),
            )
            .unwrap();
        arm_at(&owner, a, t0);
        arm_at(&owner, b, t0 + 20 * MS);
        arm_at(&owner, c, t0 + 300 * MS);
        wait_for(|| before_b.load(O::SeqCst) != u64::MAX);
        assert_eq!(
            before_b.load(O::SeqCst),
            1,
            "C fired only once B returned (0) or not at all (u64::MAX)"
        );
    }
}

/// Two callbacks fall due at once, and whichever runs first blocks until the other has run
/// (at most 10 s): the other was collected by the same poll, so an alarm armed at the next
/// timer's deadline (or none) does not cover it, and it waits for the blocking one to return
/// (or for a timer due at +300 ms). A call with others queued behind it moves the alarm
/// `CALL_GRACE_NS` ahead. Judged: the other ran before the blocking one returned.
#[test]
fn a_callback_queued_behind_a_blocking_one_is_taken_over() {
    for other in [None, Some(300), Some(10_000)] {
        let timers = testing::driven(|b| {
            b.spare_drivers(4);
        });
        let owner = timers.owner();
        let t0 = mono() + 50 * MS;
        let first = Arc::new(AtomicU64::new(0));
        let ran = Arc::new(AtomicBool::new(false));
        let returned = Arc::new(AtomicBool::new(false));
        let before = Arc::new(AtomicU64::new(u64::MAX));
        for _ in 0..2 {
            let (first, ran, returned, before) =
                (first.clone(), ran.clone(), returned.clone(), before.clone());
            let id = owner
                .create(
                    ClockId::Monotonic,
                    Notify::callback(move |_| {
                        if first.fetch_add(1, O::SeqCst) == 0 {
                            let deadline = Instant::now() + Duration::from_secs(10);
                            while !ran.load(O::SeqCst) && Instant::now() < deadline {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            returned.store(true, O::SeqCst);
                        } else {
                            before.store(u64::from(!returned.load(O::SeqCst)), O::SeqCst);
                            ran.store(true, O::SeqCst);
                        }
                    }),
                )
                .unwrap();
            arm_at(&owner, id, t0);
        }
        if let Some(ms) = other {
            let q = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
            arm_at(&owner, q, t0 + ms * MS);
        }
        wait_for(|| before.load(O::SeqCst) != u64::MAX);
        assert_eq!(
            before.load(O::SeqCst),
            1,
            "next timer {other:?} ms: the queued callback ran only once the blocking one \
             returned (0) or not at all (u64::MAX)"
        );
    }
}

/// A one-shot callback that re-arms itself 1 ms ahead, 200 times: nothing blocks, so no
/// spare should take over. Its arm is earlier than the deadline the driver published, so it
/// rings. A ring moves the alarm to the time the arm falls due, when the thread that ran the
/// call waits again; an alarm fired at once instead would have a spare take over the
/// calls.
#[test]
fn a_callback_rearming_itself_causes_no_hand_over() {
    let timers = testing::driven(|b| {
        b.spare_drivers(4);
    });
    let owner = Arc::new(timers.owner());
    let n = Arc::new(AtomicU64::new(0));
    let (n2, me) = (n.clone(), Arc::downgrade(&owner));
    let ms = Duration::from_millis(1);
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                let id = fired.id();
                if n2.fetch_add(1, O::SeqCst) < 199 {
                    if let Some(o) = me.upgrade() {
                        o.settime(id, SetFlags::RELATIVE, ms, Duration::ZERO)
                            .unwrap();
                    }
                }
            }),
        )
        .unwrap();
    owner
        .settime(id, SetFlags::RELATIVE, ms, Duration::ZERO)
        .unwrap();
    wait_for(|| n.load(O::SeqCst) >= 200);
    assert_eq!(n.load(O::SeqCst), 200);
    // A few could be real: a driver preempted for over 1 ms inside a call.
    assert!(
        timers.stats().drivers.spare_takeovers < 10,
        "{} hand-overs without a blocking callback",
        timers.stats().drivers.spare_takeovers
    );
}

/// The service drops while its driver runs a batch of 3000 callbacks: the driver, still
/// leading, may start a spare after `Drop` has taken the list of spares to join, and that
/// spare is never joined (364 of 400 runs when nothing refuses it). Spares are refused once
/// the service stops, under the lock `Drop` takes the list with.
#[test]
fn every_spare_is_joined_when_the_service_drops() {
    for i in 0..100u64 {
        let timers = testing::driven(|b| {
            b.spare_drivers(4);
        });
        let core = timers.core.clone();
        let owner = timers.owner();
        let at = mono() + 20 * MS;
        for _ in 0..3000 {
            let id = owner
                .create(ClockId::Monotonic, Notify::callback(|_| {}))
                .unwrap();
            arm_at(&owner, id, at);
        }
        // Drop while the driver collects or runs the 3000 calls.
        let drop_at = at + 50_000 + (i * 7919) % 1_000_000;
        while mono() < drop_at {
            std::hint::spin_loop();
        }
        drop(timers);
        // The drop joins every spare it takes from the list: one left there went unjoined.
        assert_eq!(
            core.drivers.spares.lock().unwrap().len(),
            0,
            "run {i}: a spare outlived the service's drop"
        );
    }
}
