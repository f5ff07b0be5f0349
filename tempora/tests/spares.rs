//! Idle spare drivers retire: after a burst of blocked callbacks returns, the process's thread
//! count (`/proc/self/task`) comes back to what it was before the burst (the driver and one
//! spare standing by, besides the test's own threads) within `BOUND`, polled, and a second
//! burst starts spares again and ends the same way. The spares retire after 1 s idle (the
//! `driver` module doc, "Idle spares retire"); `BOUND` leaves a loaded machine ample room.
//!
//! One test in this file: the thread count is the whole process's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

/// Callbacks blocked at once in a burst.
const BURST: usize = 8;
/// How long the thread count may take to come back (and the burst to start).
const BOUND: Duration = Duration::from_secs(30);

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Polls `cond` every 20 ms until it holds or `BOUND` passes: how long it took, if it held.
fn within_bound(mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > BOUND {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(start.elapsed())
}

/// A gate the burst's callbacks wait at until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

#[test]
fn spares_retire_after_a_burst_of_blocked_callbacks() {
    let timers = Timers::new();
    let owner = timers.owner();
    let soon = Duration::from_millis(2);
    // One quick callback first: the driver starts the spare that stands by while it runs
    // callbacks, which stays. That is the baseline.
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let quick = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
    owner
        .settime(quick, SetFlags::RELATIVE, soon, Duration::ZERO)
        .unwrap();
    assert!(within_bound(|| ran.load(Ordering::SeqCst) == 1).is_some());
    let baseline = threads();
    let spares = || timers.stats().drivers.spare_threads;
    let spares_before = spares();
    for round in 0..2 {
        let gate = Arc::new(Gate::default());
        let entered = Arc::new(AtomicUsize::new(0));
        let ids: Vec<_> = (0..BURST)
            .map(|_| {
                let (g, e) = (gate.clone(), entered.clone());
                let cb = Notify::callback(move |_| {
                    e.fetch_add(1, Ordering::SeqCst);
                    let mut open = g.open.lock().unwrap();
                    while !*open {
                        open = g.cv.wait(open).unwrap();
                    }
                });
                let id = owner.create(ClockId::Monotonic, cb).unwrap();
                owner
                    .settime(id, SetFlags::RELATIVE, soon, Duration::ZERO)
                    .unwrap();
                id
            })
            .collect();
        assert!(
            within_bound(|| entered.load(Ordering::SeqCst) == BURST).is_some(),
            "round {round}: {} of {BURST} callbacks started",
            entered.load(Ordering::SeqCst)
        );
        // Each blocked callback holds a thread, and one more polls.
        let peak = threads();
        assert!(
            peak > baseline + BURST - 2,
            "round {round}: {peak} threads in the burst, {baseline} before"
        );
        *gate.open.lock().unwrap() = true;
        gate.cv.notify_all();
        assert!(
            spares() >= spares_before + BURST - 2,
            "round {round}: the statistics count {} spares in the burst",
            spares()
        );
        let back = within_bound(|| threads() <= baseline);
        eprintln!(
            "round {round}: {baseline} threads before, {peak} in the burst, back in {back:?}"
        );
        assert!(
            back.is_some(),
            "round {round}: {} threads {BOUND:?} after the burst, {baseline} before it",
            threads()
        );
        // The statistics count the spares running, not those that retired.
        assert!(
            spares() <= spares_before,
            "round {round}: the statistics count {} spares after the burst, {spares_before} before",
            spares()
        );
        for id in ids {
            owner.delete(id).unwrap();
        }
    }
    // The service still runs callbacks with what is left.
    owner
        .settime(quick, SetFlags::RELATIVE, soon, Duration::ZERO)
        .unwrap();
    assert!(within_bound(|| ran.load(Ordering::SeqCst) == 2).is_some());
}
