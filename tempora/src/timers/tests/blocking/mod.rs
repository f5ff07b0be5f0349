//! Callbacks that block (`firing/driver.rs`, "Callbacks that block"): real drivers on the OS
//! clocks. Where they can, the tests judge order, not time: a blocking callback waits (with a
//! deadline of seconds) until the timers it must not hold up have fired, and the test checks that
//! they fired before it returned, which no scheduling delay on a loaded machine can change.
//! Lateness is asserted only against `BLOCKED_BOUND` (500 ms).
//!
//! - `one.rs`: one callback that blocks: a spare takes over, hand-overs, a timer's calls
//!   one at a time, spares joined at the drop.
//! - `ten.rs`: ten callbacks blocked at once: timers of other kinds on time, the spare cap.

use crate::clock::ClockId;
use crate::clock::{ClockSource, OsClock};
use crate::timers::testing;
use crate::timers::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as O};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

const MS: u64 = 1_000_000;

fn mono() -> u64 {
    OsClock.now(ClockId::Monotonic)
}

/// Arms `id` of `owner` at `at` on the monotonic clock.
fn arm_at(owner: &Owner, id: TimerId, at: u64) {
    owner
        .settime(
            id,
            SetFlags::ABSTIME,
            Duration::from_nanos(at),
            Duration::ZERO,
        )
        .unwrap();
}

mod one;
mod ten;
