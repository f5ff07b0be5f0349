//! One call at a time per callback timer.
//!
//! Several threads may take a callback timer's expiries: the drivers, a spare that took a
//! blocked driver's place (`driver.rs`, "Callbacks that block"), and any thread calling
//! `Timers::poll`. Whoever takes one while a call of the same timer still runs does not run
//! the callback beside it: it **folds** the expiry into that call, and the thread running the
//! call runs the callback once more when it returns, with the folded expiries as the overrun
//! (`1 + overrun` each, less the one delivered). That is the kernel's rule for a timer
//! signal still pending (one pending notification, the rest counted as overrun), and what a
//! callback may assume whatever polls: it never races itself, and the end of one call
//! happens before the start of the next (Release/Acquire on the state word).
//!
//! A settime or a delete during the call drops the folded expiries (`drop_folded`, under the
//! timer's lock), as they make a queued event stale: so a callback that deletes its own timer
//! is not called again for expiries taken before its delete. A call already running, or
//! taken before them, is not stopped (`Owner::delete`).
//!
//! The state word: bit 0 a call is running (or taken and about to run), bit 1 expiries were
//! folded into it, bits 32.. how many periods they count (saturating).
//!
//! ```text
//!   idle ──take──▶ running ──finish──▶ idle
//!                  │   ▲ ▲
//!       take (fold)│   │ └── settime / delete (drop the fold)
//!                  ▼   │
//!             running+folded ──finish──▶ run again (overrun = folded − 1) ──▶ running
//! ```

use super::types::{Callback, Fired, WeakOwner};
use crate::registry::TimerId;
use crate::stats::tally::Tally;
use crate::sync::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

/// What a poll runs once it holds no lock: a callback, or a wake-up of a sleep's or a
/// receiver's task (a waker is user code too). `Core::run_call` runs one.
pub(crate) enum Call {
    /// A callback's call, its timer and overrun, and its owner's tally (a panic and the
    /// deliveries of folded expiries are counted there).
    Callback(Running, TimerId, i32, Arc<Tally>),
    Wake(Waker),
}

const RUNNING: u64 = 1;
const FOLDED: u64 = 2;
const COUNT_SHIFT: u32 = 32;

/// A callback timer's closure, and the timer's owner it reaches through the [`Fired`] it is
/// handed: held weakly (a strong handle would keep the owner alive as long as its timer: a
/// cycle).
pub(crate) struct CallFn(pub(crate) Callback, pub(crate) WeakOwner);

impl CallFn {
    fn call(&self, id: TimerId, overrun: i32) {
        (self.0)(&Fired::new(id, overrun, &self.1))
    }
}

/// A callback timer's closure and its call state, shared by the timer and its calls in
/// flight (the timer's copy is dropped by its delete; a call in flight keeps the closure).
pub(crate) struct Serial {
    f: CallFn,
    state: AtomicU64,
}

impl Serial {
    pub(crate) fn new(f: CallFn) -> Arc<Serial> {
        Arc::new(Serial {
            f,
            state: AtomicU64::new(0),
        })
    }

    /// An expiry with `overrun` was taken (under the timer's lock): the call to run, or `None`
    /// if one is running and the expiry was folded into it.
    pub(crate) fn take(self: &Arc<Self>, overrun: i32) -> Option<Running> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let (next, call) = if s & RUNNING == 0 {
                (RUNNING, true)
            } else {
                // 1 for the expiry itself, `overrun` for the periods it was late by.
                let periods = u64::from(overrun.max(0).unsigned_abs()) + 1;
                let count = ((s >> COUNT_SHIFT) + periods).min(u64::from(u32::MAX));
                (RUNNING | FOLDED | count << COUNT_SHIFT, false)
            };
            // Acquire: the previous call's end (its Release in `finish`) happens before this
            // call starts.
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return call.then(|| Running(Some(self.clone()))),
                Err(now) => s = now,
            }
        }
    }

    /// A settime or delete (under the timer's lock): expiries folded into a running call are
    /// stale.
    pub(crate) fn drop_folded(&self) {
        if self.state.load(Ordering::Relaxed) & FOLDED != 0 {
            self.state.fetch_and(RUNNING, Ordering::Relaxed);
        }
    }
}

/// A call taken by `Serial::take`: run it with `run`; dropped unrun (a service stopping with
/// calls pending), it lets the timer's next expiry be called.
pub(crate) struct Running(Option<Arc<Serial>>);

impl Running {
    /// Runs the callback with `overrun`, then once more for each fold made meanwhile (`ran`
    /// is told each run's overrun and whether it panicked; panics are caught, and their
    /// payloads dropped under a catch too, as a payload's `Drop` may panic). The token stays
    /// held until the last run returns, so an unwind out of here (a panicking `ran`) still
    /// lets the timer's next expiry make a call (`Drop`).
    pub(crate) fn run(mut self, id: TimerId, overrun: i32, ran: &mut dyn FnMut(i32, bool)) {
        let Some(serial) = self.0.as_ref() else {
            return;
        };
        let mut overrun = overrun;
        loop {
            let f = &serial.f;
            let panicked = catch(|| f.call(id, overrun)).is_none();
            ran(overrun, panicked);
            match serial.finish() {
                Some(again) => overrun = again,
                None => {
                    // Idle again: nothing for `Drop` to reset.
                    self.0 = None;
                    return;
                }
            }
        }
    }
}

/// Runs `f`, catching a panic: `None` if it panicked. The payload is dropped under a catch
/// too, as its `Drop` may panic (a payload whose `Drop` panics is leaked), so nothing
/// unwinds out of here. Every place the service runs what may panic (callbacks, wakers, a
/// driver's loop) goes through it.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                drop(payload);
            }));
            if let Err(again) = dropped {
                std::mem::forget(again);
            }
            None
        }
    }
}

impl Serial {
    /// A call returned: idle again (`None`), or the overrun of the call to run for the
    /// expiries folded meanwhile.
    fn finish(&self) -> Option<i32> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let next = if s & FOLDED == 0 { 0 } else { RUNNING };
            // Release: this call's effects happen before the next call, on whatever thread.
            // Acquire: and the folds' expiries before the call they make.
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if next == 0 => return None,
                Ok(_) => {
                    let periods = s >> COUNT_SHIFT;
                    return Some(i32::try_from(periods.saturating_sub(1)).unwrap_or(i32::MAX));
                }
                Err(now) => s = now,
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(serial) = self.0.take() {
            // Never run: the folds go with it (nobody would run them), and the timer's next
            // expiry makes a call again.
            serial.state.store(0, Ordering::Release);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
