//! Capture: the snapshot of an owner ([`Owner::checkpoint`]), read timer by timer under each
//! timer's lock.

use super::snapshot::{
    Expiry, SignalRecord, SignalState, SignalTarget, Snapshot, TimerRecord, NOTIFY_NONE,
    NOTIFY_QUEUE, NOTIFY_SIGNAL,
};
use crate::clock::ClockId;
use crate::sync::Ordering;
use crate::timers::object::{callback_of, signal_of, CallbackCell, LockedTimer};
use crate::timers::{NotifyKind, Owner, Precision};
use std::borrow::Cow;

impl Owner {
    /// A snapshot of the owner's logical state (see [`crate::checkpoint`] for what it holds and
    /// the time rule). Taken timer by timer, each under its own lock, without stopping anyone:
    /// checkpoint a quiescent owner to get one instant's state. It works after the owner's
    /// service was dropped too (stop the service, then checkpoint its owners).
    ///
    /// # Panics
    /// If a timer's lock was poisoned by a panic inside tempora ([`Error::Poisoned`](crate::Error::Poisoned)): its
    /// state cannot be read, and a snapshot without it would restore something else.
    /// [`Owner::try_checkpoint`] reports that as an error instead.
    pub fn checkpoint(&self) -> Snapshot {
        self.try_checkpoint()
            .unwrap_or_else(|e| panic!("tempora: cannot checkpoint the owner: {e}"))
    }

    /// [`Owner::checkpoint`], failing instead of panicking when a timer cannot be read.
    ///
    /// # Errors
    /// [`Error::Poisoned`](crate::Error::Poisoned) (`ENOTRECOVERABLE`) if a timer's lock was
    /// poisoned by a panic inside tempora: no snapshot is made, as one without that timer
    /// would restore something else.
    /// [`Error::Forked`](crate::Error::Forked) (`ECHILD`) in a child forked after the
    /// owner's service was built.
    pub fn try_checkpoint(&self) -> Result<Snapshot, crate::Error> {
        self.core().health.check_fork()?;
        let now = self.core().now_all();
        let mut timers = Vec::new();
        let walked = self.reg.for_each_locked(|l| {
            let st = &*l.state;
            let kind = st.notify();
            let name = match (kind, callback_of(&l)) {
                (NotifyKind::None, _) => Cow::Borrowed(NOTIFY_NONE),
                (NotifyKind::Queue, _) => Cow::Borrowed(NOTIFY_QUEUE),
                (NotifyKind::Callback, Some(CallbackCell { name: Some(n), .. })) => {
                    Cow::Owned(n.to_string())
                }
                (NotifyKind::Callback, _) => Cow::Borrowed("callback"),
                (NotifyKind::Signal, _) => Cow::Borrowed(NOTIFY_SIGNAL),
            };
            let status = st.status();
            let expiry_clock = st.expiry_clock();
            let expiry = if !st.has_expiry() {
                Expiry::None
            } else if expiry_clock == ClockId::Realtime {
                Expiry::Realtime(st.expiry.min(i64::MAX as u64) as i64)
            } else {
                let left = i128::from(st.expiry) - i128::from(now[expiry_clock.index()]);
                Expiry::Remaining {
                    clock: expiry_clock,
                    ns: left.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
                }
            };
            timers.push(TimerRecord {
                id: l.id(),
                clock: st.clock(),
                notify: name,
                status,
                pending: st.event_pending(),
                expiry,
                interval: st.interval.min(i64::MAX as u64) as i64,
                overrun: i64::from(st.overrun.max(-1)),
                overrun_last: crate::timers::object::itimer::overrun_last(l.published()),
                precision: Precision::unpack(l.fixed().precision.load(Ordering::Relaxed)),
                signal: signal_record(&l),
            });
        });
        walked?;
        timers.sort_by_key(|t| t.id);
        Ok(Snapshot {
            counter: self.reg.counter(),
            restore_ids: self.restore_ids(),
            default_slack: self.default_slack(),
            timers,
        })
    }
}

/// A locked signal timer's target and signal state (`timers/signals/mod.rs` has the bits);
/// `None` for any other timer.
fn signal_record(l: &LockedTimer<'_>) -> Option<SignalRecord> {
    let cell = signal_of(l)?;
    let target = match (cell.value_is_id, cell.tid) {
        (true, _) => SignalTarget::ProcessWithId {
            signo: cell.signo(),
        },
        (false, 0) => SignalTarget::Process {
            signo: cell.signo(),
            value: cell.value(),
        },
        (false, tid) => SignalTarget::Thread {
            tid,
            signo: cell.signo(),
            value: cell.value(),
        },
    };
    let st = &*l.state;
    // `owed` and `queued` are never both set: a signal is owed only until it is queued, and
    // an outstanding one is settled before the next is owed.
    let state = if st.owed() {
        SignalState::Owed
    } else if !st.queued() {
        SignalState::Idle
    } else if st.sigqueue_seq == st.signal_seq {
        SignalState::Outstanding
    } else {
        SignalState::OutstandingStale
    };
    // The cell's lateness means something only while a signal waits (the next one sets it).
    let lateness = if state == SignalState::Idle {
        0
    } else {
        cell.lateness().max(0)
    };
    Some(SignalRecord {
        target,
        state,
        lateness,
    })
}
