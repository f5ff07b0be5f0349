//! The service's rules, one file per topic; each test fails if its rule is broken. Most run
//! on a manual clock ([`crate::timers::testing::Manual`]); `service` also runs real drivers and the
//! deadline fd on the OS clocks, asserting no timing.
//!
//! - `firing`: when a timer fires (never early, within a tick), on which clock, and what a
//!   poll delivers.
//! - `calls`: what `settime`, `gettime`, `getoverrun` and `delete` return and change, and
//!   their errors.
//! - `callbacks`: callback timers: their arguments, their panics, their closures' lifetimes.
//! - `owners`: owners, timer handles and sleeps: queues, lifetimes, and churn across threads.
//! - `service`: the builder, background drivers and the deadline fd.
//! - `failures`: panics under locks, dead drivers and orphaned owners: calls fail clearly
//!   and never hang.
//! - `stats`: statistics, groups and limits through the service.
//! - `signals`: signal timers through a port playing the kernel's queue; `lookouts`: those
//!   that share a look.

use super::*;
use crate::clock::ClockId;
use crate::clock::{ClockSource, ManualClock, TimeSpec, NANOS_PER_SEC};
use crate::error::Error;
use crate::sync::Ordering;
use crate::sync::Poisoned;
use crate::testing::{quiet_panics, TestRng};
use crate::timers::testing::{self, Manual, TestClock};
use proptest::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

mod blocking;
mod callbacks;
mod calls;
mod failures;
mod firing;
mod lookouts;
mod owners;
mod precision;
mod service;
mod signals;
mod stats;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn spec(value: u64, interval: u64) -> ItimerSpec {
    ItimerSpec {
        value: TimeSpec::from_nanos(value),
        interval: TimeSpec::from_nanos(interval),
    }
}
