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
