//! Snapshots, one file per topic, under the manual clock:
//!
//! - `round_trip`: checkpoint → bytes → restore keeps every timer, setting and future
//!   delivery (a property test), the precision defaults, and extreme remaining times.
//! - `corrupt`: corrupt input (a decoder fuzz, truncations, bit flips, absurd counts) is an
//!   error, for `decode` and `restore` alike.
//! - `files`: saving and loading files: atomic writes, I/O errors, bounded reads.
//! - `encoding`: the format pinned to the module doc's table: its bytes and every stored
//!   enum's values; names that fit or are refused.
//! - `restoring`: a restore is all or nothing, also when it races creates or another
//!   restore, or meets a destroyed owner.
//! - `signals`: signal timers of each kind through checkpoint and restore, under the manual
//!   clock and a test signal port: their signals afterwards, owed and outstanding signals,
//!   thread targets.

use super::format::{
    clock_from_disk, clock_to_disk, expiry_from_disk, expiry_to_disk, signal_state_from_disk,
    signal_state_to_disk, signal_target_from_disk, signal_target_to_disk, status_from_disk,
    status_to_disk, Reader, HEADER, OWNER_FIELDS, SIGNAL_SECTION, TIMER_FIELDS,
};
use super::*;
use crate::clock::ClockId;
use crate::clock::{ClockSource, ManualClock};
use crate::error::Error;
use crate::timers::testing::{self, drain, TestSignals};
use crate::timers::{Status, TimerId};
use crate::{Notify, Owner, Precision, SetFlags, Timers};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod corrupt;
mod encoding;
mod files;
mod restoring;
mod round_trip;
mod signals;

const MS: u64 = 1_000_000;

type Log = Arc<Mutex<Vec<(TimerId, i32)>>>;

fn tick(log: &Log) -> Notify {
    let log = log.clone();
    Notify::callback_named("tick", move |f| {
        log.lock().unwrap().push((f.id(), f.overrun()))
    })
}

/// One timer of a generated owner.
#[derive(Debug, Clone)]
struct Spec {
    id: i32,
    clock: u8,
    notify: u8,
    abs: bool,
    value_ms: u64,
    interval_ms: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0i32..5000,
        0u8..3,
        0u8..3,
        any::<bool>(),
        0u64..300,
        prop_oneof![Just(0u64), 1u64..50],
    )
        .prop_map(|(id, clock, notify, abs, value_ms, interval_ms)| Spec {
            id,
            clock,
            notify,
            abs,
            value_ms,
            interval_ms,
        })
}

/// Builds an owner from `specs` (IDs sparse or dense, every clock and notification, armed,
/// disarmed, periodic with overruns and pending events after `run_ms`).
fn build(
    clock: &ManualClock,
    timers: &Timers,
    log: &Log,
    specs: &[Spec],
    dense: bool,
    run_ms: u64,
) -> Owner {
    let o = timers.owner();
    o.set_restore_ids(!dense);
    for (i, s) in specs.iter().enumerate() {
        let c = [ClockId::Monotonic, ClockId::Realtime, ClockId::Boottime][s.clock as usize];
        let n = match s.notify {
            0 => Notify::None,
            1 => Notify::Queue,
            _ => tick(log),
        };
        let id = if dense {
            o.create(c, n)
        } else {
            o.create_with_id(s.id, c, n)
        };
        let Ok(id) = id else { continue }; // a duplicate sparse ID: skip it
        let value = Duration::from_millis(s.value_ms);
        let interval = Duration::from_millis(s.interval_ms);
        if s.abs {
            let at = clock.now(c) + s.value_ms * MS;
            o.settime(id, SetFlags::ABSTIME, Duration::from_nanos(at), interval)
                .unwrap();
        } else {
            o.settime(id, SetFlags::RELATIVE, value, interval).unwrap();
        }
        if i % 7 == 3 {
            clock.advance(Duration::from_millis(3));
        }
    }
    clock.advance(Duration::from_millis(run_ms));
    timers.poll();
    // Consume about half the events, leaving the rest pending.
    for _ in 0..o.queued() / 2 {
        o.try_recv();
    }
    o
}

/// A snapshot with a bit of everything.
fn sample() -> Snapshot {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log: Log = Arc::default();
    let specs: Vec<Spec> = (0..6)
        .map(|i| Spec {
            id: i * 100,
            clock: (i % 3) as u8,
            notify: (i % 3) as u8,
            abs: i % 2 == 0,
            value_ms: 10 + i as u64,
            interval_ms: if i % 2 == 0 { 5 } else { 0 },
        })
        .collect();
    let o = build(&clock, &timers, &log, &specs, false, 40);
    o.set_default_slack(Some(Duration::from_millis(3)));
    o.checkpoint()
}

fn encoded(s: &Snapshot) -> Result<Vec<u8>, Error> {
    s.try_encode()
}

/// The first real-time signal, as glibc numbers it.
const SIGRTMIN: i32 = 34;

/// A manual service on `clock` whose signal timers queue into a test port.
fn with_signals(clock: &ManualClock) -> (Timers, Arc<TestSignals>) {
    let port = TestSignals::new();
    let p = port.clone();
    let timers = testing::manual(clock.clone(), move |b| {
        b.signal_port(p);
    });
    (timers, port)
}

/// A snapshot of signal timers of each kind, in each signal state (idle, owed, outstanding,
/// outstanding from an earlier arming), beside a callback named `signal` and a queue timer.
fn signal_sample() -> Snapshot {
    let clock = ManualClock::new();
    let (timers, port) = with_signals(&clock);
    let o = timers.owner();
    o.set_restore_ids(true);
    let ms = Duration::from_millis;
    let arm = |id, value, interval| {
        o.settime(id, SetFlags::RELATIVE, value, interval).unwrap();
    };
    let create = |id, notify| o.create_with_id(id, ClockId::Monotonic, notify).unwrap();
    let signal = |signo, value| Notify::Signal { signo, value };
    // Outstanding, with periods counted while it is pending.
    let pending = create(2, signal(SIGRTMIN, 0xfeed));
    arm(pending, ms(10), ms(10));
    // A one-shot's signal, outstanding.
    let fired = create(3, signal(SIGRTMIN + 1, 1));
    arm(fired, ms(10), Duration::ZERO);
    // Set again after its signal went: settime forgets that signal, so the timer is idle.
    let stale = create(5, signal(SIGRTMIN + 2, 2));
    arm(stale, ms(10), Duration::ZERO);
    clock.advance(ms(10));
    timers.poll();
    arm(stale, ms(500), Duration::ZERO);
    // Idle, to a thread.
    let thread = Notify::ThreadSignal {
        tid: crate::timers::object::signal::gettid(),
        signo: SIGRTMIN + 3,
        value: 3,
    };
    let idle = create(7, thread);
    arm(idle, ms(300), ms(7));
    // Owed: no room when it expires.
    port.set_room(Some(0));
    let owed = o
        .create_with_id(9, ClockId::Realtime, Notify::SignalWithId { signo: 14 })
        .unwrap();
    let at = clock.now(ClockId::Realtime) + 5 * MS;
    o.settime(owed, SetFlags::ABSTIME, Duration::from_nanos(at), ms(20))
        .unwrap();
    // Long enough for a retry after the first refusal: the periods meanwhile are lateness.
    for _ in 0..7 {
        clock.advance(ms(10));
        timers.poll();
    }
    o.create_with_id(
        11,
        ClockId::Monotonic,
        Notify::callback_named("signal", |_| {}),
    )
    .unwrap();
    o.create_with_id(12, ClockId::Boottime, Notify::Queue)
        .unwrap();
    o.checkpoint()
}
