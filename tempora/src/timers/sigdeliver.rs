//! Signal timers (`Notify::Signal`, `ThreadSignal`, `SignalWithId`): the kernel's rules for a
//! timer's one signal, kept from user space, where a queued signal cannot be seen leaving the
//! queue.
//!
//! # The kernel's rules, and what stands in for the dequeue
//!
//! A kernel timer has one preallocated signal. An expiry queues it unless it is already
//! queued; a periodic timer is then not re-armed until the signal is *dequeued* (delivered to
//! a handler, taken by `sigwaitinfo`, read from a `signalfd`), and the periods that passed
//! meanwhile are computed at the dequeue: they are the signal's `si_overrun` and what
//! `timer_getoverrun` returns from then on. A blocked signal therefore costs nothing while it
//! waits, and an ignored one parks its timer until the signal is handled again.
//!
//! User space sees neither the dequeue nor the queue. tempora *probes* instead: a timer whose
//! signal is outstanding asks the port (`signal.rs`) whether its signal number is still
//! pending for its target, at the periods when the kernel's timer would fire if it had been
//! re-armed, and from `getoverrun`. While it is pending, each period counts as an overrun of
//! the outstanding signal; once it is not, the signal was delivered: `getoverrun` reports the
//! periods it missed (the kernel's value), and the next signal goes out at the next period.
//! The state, under the timer's lock:
//!
//! ```text
//!  queued   a signal is outstanding (sent, not yet seen gone)
//!  owed     an expiry's signal is not sent yet (no room: EAGAIN; or the signal is ignored)
//!  overrun  while queued: the periods counted while it is pending; otherwise the periods
//!           no si_overrun has reported yet, added to the next signal's (so that the
//!           si_overruns of all signals sum to every expiry that queued none)
//!  lateness (the cell) the periods the queued or owed signal's own expiry was late by
//!  expiry   a periodic timer's first period not counted yet
//! ```
//!
//! A periodic timer whose signal stays pending is probed at periods spaced as long as it has
//! been pending (doubling), up to [`PROBE_CAP`], so a blocked 1 µs timer costs at most
//! `1 / PROBE_CAP` probes a second (BENCHMARKS.md measures it). A signal refused for want of
//! room is retried, doubling from [`RETRY_BASE`] up to [`RETRY_CAP`], until it goes: it is
//! never dropped, and the periods meanwhile are its `si_overrun`.
//!
//! What a program can observe differently from the kernel's timers is the divergence table of
//! ARCHITECTURE.md ("Signals: where tempora differs from the kernel").

use super::core::Core;
use super::itimer::{forward, set_overrun_last, Arm};
use super::object::{signal_of, LockedTimer};
use super::signal::{Sent, SignalCell, TimerSignal};
use super::types::Status;
use crate::clock::{ClockId, LazyNow};

/// The longest a periodic timer waits between two probes of a signal that stays pending
/// (or the period, if longer).
pub(crate) const PROBE_CAP: u64 = 10_000_000;
/// The first retry of a signal refused for want of room (or the period, if longer).
pub(crate) const RETRY_BASE: u64 = 100_000;
/// The longest wait between two retries of a refused signal.
pub(crate) const RETRY_CAP: u64 = 100_000_000;

/// `a + n`, saturating at `i32::MAX` (negative `a`, settime's mark, counts as 0).
fn add(a: i32, n: u64) -> i32 {
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    i64::from(a.max(0))
        .saturating_add(n)
        .min(i64::from(i32::MAX)) as i32
}

impl Core {
    /// A signal timer popped from base `b`'s wheel for `clock`, under its lock: an expiry
    /// (status Armed), a probe of an outstanding signal (RequeuePending), or a retry of an
    /// owed one. Whether it counted as a firing (a period passed).
    pub(crate) fn signal_pop(
        &self,
        l: &mut LockedTimer<'_>,
        b: usize,
        clock: ClockId,
        now: &LazyNow<'_>,
    ) -> bool {
        let t = now.get(clock);
        let fresh = match l.state.status() {
            Status::Armed => {
                if l.state.expire().is_none() {
                    return false;
                }
                if l.state.interval == 0 {
                    1
                } else {
                    self.count_periods(l, t)
                }
            }
            Status::RequeuePending => self.count_periods(l, t),
            Status::Disarmed => 0,
        };
        let Some(cell) = signal_of(l) else {
            return false;
        };
        let mut fresh = fresh;
        if l.state.queued() {
            if self.signals.pending(cell.tid, cell.signo) {
                if fresh > 0 && l.state.sigqueue_seq != l.state.signal_seq {
                    // The arming's first expiry finds an earlier arming's signal still
                    // queued: that signal now stands for this expiry, as the kernel's one
                    // preallocated signal does.
                    l.state.sigqueue_seq = l.state.signal_seq;
                    l.state.overrun = 0;
                    cell.set_lateness(0);
                    fresh -= 1;
                }
                l.state.overrun = add(l.state.overrun, fresh);
                self.signal_park(l, cell, b, clock, t);
                return fresh > 0;
            }
            settle(l, cell);
        }
        if !l.state.owed() {
            if fresh == 0 {
                // A probe that found the signal gone and no period due: wait for the next.
                if l.state.interval != 0 && l.state.status() == Status::RequeuePending {
                    l.state.set_status(Status::Armed);
                    let expiry = l.state.expiry;
                    let _ = self.apply_on(l, Arm::At { clock, expiry }, b);
                }
                return false;
            }
            l.state.set_owed(true);
            cell.set_lateness(add(0, fresh - 1));
        } else {
            cell.set_lateness(add(cell.lateness(), fresh));
        }
        self.signal_send(l, cell, b, clock, t);
        fresh > 0
    }

    /// Forwards a periodic timer's expiry past `t`: the periods that passed (not counted
    /// before).
    fn count_periods(&self, l: &mut LockedTimer<'_>, t: u64) -> u64 {
        let (expiry, n) = forward(l.state.expiry, l.state.interval, t);
        l.state.expiry = expiry;
        n
    }

    /// Sends the owed signal, unless it would be ignored; parks the timer as the outcome says.
    fn signal_send(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
    ) {
        let periodic = l.state.interval != 0;
        if self.signals.ignored(cell.tid, cell.signo) {
            if periodic {
                // Parked until the signal is handled again; the periods meanwhile are the
                // owed signal's lateness (the kernel's ignored-timer list).
                self.signal_park(l, cell, b, clock, t);
            } else {
                // The kernel drops an ignored one-shot signal.
                l.state.set_owed(false);
            }
            return;
        }
        let id = l.id().get();
        let sig = TimerSignal {
            tid: cell.tid,
            signo: cell.signo,
            timer: id,
            overrun: add(cell.lateness(), l.state.overrun.max(0) as u64),
            value: if cell.value_is_id {
                id as u32 as usize
            } else {
                cell.value
            },
        };
        match self.signals.send(&sig) {
            Sent::Queued => {
                l.state.set_queued(true);
                l.state.set_owed(false);
                l.state.sigqueue_seq = l.state.signal_seq;
                l.state.overrun = 0;
                cell.set_tries(0);
                if periodic {
                    self.signal_park(l, cell, b, clock, t);
                }
            }
            Sent::Full => {
                cell.set_tries(cell.tries().saturating_add(1));
                self.signal_park(l, cell, b, clock, t);
            }
            Sent::Gone => {
                // The target thread exited: nothing can be delivered again. The kernel's
                // timer stays requeue-pending for ever; so does this one (in no wheel).
                l.state.set_owed(false);
            }
        }
    }

    /// Places a timer whose signal is outstanding (a probe) or owed (a retry) in base `b`'s
    /// wheel, on its period grid if it is periodic, without moving its expiry.
    fn signal_park(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
    ) {
        let interval = l.state.interval;
        let delay = if l.state.owed() {
            let shift = cell.tries().clamp(0, 20) as u32;
            (RETRY_BASE.max(interval) << shift).min(RETRY_CAP.max(interval))
        } else {
            // As long again as it has been pending, from one period up to the cap.
            (interval.saturating_mul(l.state.overrun.max(0) as u64))
                .clamp(interval, PROBE_CAP.max(interval))
        };
        // A probe counts from the period just counted (the expiry less one period), not from
        // `t`, which a late pop puts after it: from `t`, the first probe skipped a period.
        let from = if l.state.owed() || interval == 0 {
            t
        } else {
            l.state.expiry.saturating_sub(interval)
        };
        let target = from.saturating_add(delay);
        let at = if interval == 0 {
            target
        } else {
            let first = l.state.expiry;
            if target <= first {
                first
            } else {
                first.saturating_add((target - first).div_ceil(interval).saturating_mul(interval))
            }
        };
        if interval != 0 {
            l.state.set_status(Status::RequeuePending);
        }
        // A poisoned base fails the service.
        let _ = self.apply_on(l, Arm::At { clock, expiry: at }, b);
    }

    /// `getoverrun`'s look at a signal timer whose signal is outstanding: if it is no longer
    /// pending it was delivered, and its overrun is settled now (the kernel settles it at the
    /// dequeue); a periodic timer then waits for its next period, as the kernel re-arms it.
    pub(crate) fn signal_check(&self, l: &mut LockedTimer<'_>, now: &LazyNow<'_>) {
        if !l.state.queued() {
            return;
        }
        let Some(cell) = signal_of(l) else {
            return;
        };
        let clock = l.state.expiry_clock();
        let parked = l.state.interval != 0 && l.state.status() == Status::RequeuePending;
        if parked {
            let n = self.count_periods(l, now.get(clock));
            l.state.overrun = add(l.state.overrun, n);
        }
        if self.signals.pending(cell.tid, cell.signo) {
            return;
        }
        settle(l, cell);
        if parked && !l.state.owed() {
            l.state.set_status(Status::Armed);
            let expiry = l.state.expiry;
            let _ = self.apply(l, Arm::At { clock, expiry });
        }
    }
}

/// The outstanding signal was delivered: `getoverrun` reports the periods it missed (its own
/// lateness and those counted while it was pending), unless a settime or delete since made it
/// stale. The counted periods stay in `overrun`, for the next signal's `si_overrun`.
fn settle(l: &mut LockedTimer<'_>, cell: &SignalCell) {
    l.state.set_queued(false);
    if l.state.sigqueue_seq == l.state.signal_seq {
        let (state, published) = l.state_and_published();
        set_overrun_last(published, add(cell.lateness(), state.overrun.max(0) as u64));
    }
    cell.set_lateness(0);
}
