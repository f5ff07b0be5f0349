//! Callbacks that block (`driver.rs`, "Callbacks that block"): real drivers on the OS clocks.
//! Timing is asserted only against a bound far above scheduling noise (150 ms, against the
//! 200 ms a blocked driver would add).

use super::*;
use crate::clock::{ClockSource, OsClock};
use std::sync::atomic::{AtomicU64, Ordering as O};
use std::sync::Mutex;
use std::time::Instant;

const MS: u64 = 1_000_000;
/// How late any other timer may fire while one callback blocks for 200 ms.
const BOUND: u64 = 150 * MS;

fn mono() -> u64 {
    OsClock.now(ClockId::Monotonic)
}

/// One callback sleeps 200 ms while 1000 callback timers and 200 queue timers fall due in
/// that window: a spare takes over, so every one fires, none early, none later than `BOUND`.
/// With `spare_drivers(0)` the same run waits for the sleeping callback (the last check).
fn run(spares: usize) -> (u64, usize, u64) {
    let timers = Timers::builder().spare_drivers(spares).build().unwrap();
    let owner = timers.owner();
    let t0 = mono() + 100 * MS;
    let arm = |id, at: u64| {
        owner
            .settime(
                id,
                SetFlags::ABSTIME,
                Duration::from_nanos(at),
                Duration::ZERO,
            )
            .unwrap();
    };
    let blocker = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(|_, _| std::thread::sleep(Duration::from_millis(200))),
        )
        .unwrap();
    arm(blocker, t0);
    let late = Arc::new(Mutex::new(Vec::new()));
    let early = Arc::new(AtomicU64::new(0));
    for i in 0..1000u64 {
        let at = t0 + MS + i * 190 * MS / 1000;
        let (late, early) = (late.clone(), early.clone());
        let id = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |_, _| {
                    let now = mono();
                    if now < at {
                        early.fetch_add(1, O::Relaxed);
                    }
                    late.lock().unwrap().push(now.saturating_sub(at));
                }),
            )
            .unwrap();
        arm(id, at);
    }
    let mut queued = std::collections::HashMap::new();
    for i in 0..200u64 {
        let at = t0 + 2 * MS + i * 190 * MS / 200;
        let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
        arm(id, at);
        queued.insert(id, at);
    }
    let mut qlate = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while qlate.len() < queued.len() && Instant::now() < deadline {
        if let Some(ev) = owner.recv_timeout(Duration::from_millis(50)).unwrap() {
            let now = mono();
            let at = queued[&ev.id];
            if now < at {
                early.fetch_add(1, O::Relaxed);
            }
            qlate.push(now.saturating_sub(at));
        }
    }
    while late.lock().unwrap().len() < 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let late = late.lock().unwrap();
    let fired = late.len() + qlate.len();
    let max = late.iter().chain(&qlate).copied().max().unwrap_or(0);
    assert_eq!(early.load(O::Relaxed), 0, "fired early");
    (max, fired, timers.spare_takeovers())
}

#[test]
fn a_blocked_callback_delays_no_other_timer_beyond_the_bound() {
    let (max, fired, takeovers) = run(4);
    eprintln!(
        "with spares: max lateness {} µs, {takeovers} takeovers",
        max / 1000
    );
    assert_eq!(fired, 1200, "timers lost");
    assert!(takeovers >= 1, "no spare took over");
    assert!(max < BOUND, "a timer fired {} ms late", max / MS);
}

#[test]
fn without_spares_a_blocked_callback_delays_the_others() {
    let (max, fired, takeovers) = run(0);
    eprintln!("without spares: max lateness {} µs", max / 1000);
    assert_eq!(fired, 1200, "timers lost");
    assert_eq!(takeovers, 0);
    assert!(max >= BOUND, "only {} ms late", max / MS);
}

/// A periodic timer whose callback blocks for longer than its period: while the callback
/// runs, a spare takes over and meets the timer due again. The callback must not run twice at
/// once (the next call waits, its overrun counting the periods it folds), and once the call
/// has deleted its own timer, no call of it follows (the folded expiry is dropped, as a
/// delete drops a queued event). Before calls were serialized per timer, the spare ran the
/// callback beside itself and the second call's delete failed with `UnknownTimer`.
#[test]
fn a_timers_callback_never_runs_beside_itself() {
    let timers = Timers::builder().build().unwrap();
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
                Notify::callback(move |id, overrun| {
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
    assert!(timers.spare_takeovers() >= 1, "no spare took over");
    let _ = folded;
}
