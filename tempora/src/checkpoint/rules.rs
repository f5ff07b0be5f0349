//! The rules every snapshot must satisfy, however it was built ([`Snapshot::validate`]): the
//! encoder applies them before writing, the decoder after reading, and a restore before
//! creating anything, so what one refuses the others refuse too.

use super::format::{timer_record_len, OWNER_RECORD};
use super::snapshot::{
    corrupt, Expiry, SignalRecord, SignalState, SignalTarget, Snapshot, TimerRecord, MAX_NAME,
    MAX_PAYLOAD, NOTIFY_NONE, NOTIFY_SIGNAL,
};
use crate::clock::ClockId;
use crate::error::Error;
use crate::timers::{Status, TimerId};
use std::collections::HashSet;

impl Snapshot {
    /// Checks what every snapshot must satisfy, however it was built (its fields are public):
    /// the rules [`Snapshot::decode`] applies to a file, [`Snapshot::try_encode`] before
    /// writing one, and [`crate::Owner::restore`] before creating anything. Per timer: an
    /// interval and an absolute realtime expiry not negative, a remaining time on the clock its
    /// timer runs on (monotonic or boot time; monotonic for a realtime timer armed relative),
    /// an absolute expiry only on a realtime timer, overruns in range, an armed or waiting timer
    /// with an expiry, a timer waiting to be re-armed periodic and, unless it is a signal timer,
    /// with its event pending, a pending event only on a fired one-shot or a waiting periodic
    /// timer and never on a `none` or signal timer, a name of at most [`MAX_NAME`] bytes; a
    /// signal target only on a timer named `signal`, with a signal number in `1..=64`, a
    /// thread ID above 0, and a lateness not negative, 0 when no signal waits. Per snapshot:
    /// unique IDs, at most `u32::MAX` timers and [`MAX_PAYLOAD`] bytes encoded. Remaining
    /// times may be anything: negative is passed, and a restore saturates at the clock's ends.
    ///
    /// # Errors
    /// [`Error::CorruptSnapshot`], saying which timer breaks which rule.
    pub fn validate(&self) -> Result<(), Error> {
        if u32::try_from(self.timers.len()).is_err() {
            return Err(corrupt(format!(
                "{} timers, more than a snapshot counts",
                self.timers.len()
            )));
        }
        let mut payload = OWNER_RECORD;
        for (i, t) in self.timers.iter().enumerate() {
            check_timer(t).map_err(|w| corrupt(format!("timer {i} (ID {}): {w}", t.id)))?;
            payload += timer_record_len(t);
        }
        if payload > MAX_PAYLOAD {
            return Err(corrupt(format!(
                "{payload} bytes encoded, more than the format's {MAX_PAYLOAD}"
            )));
        }
        if let Some(id) = first_duplicate(&self.timers) {
            return Err(corrupt(format!("duplicate ID {id}")));
        }
        Ok(())
    }
}

/// The rules of [`Snapshot::validate`] for one timer; the text says which one it breaks.
fn check_timer(t: &TimerRecord) -> Result<(), String> {
    if t.interval < 0 {
        return Err(format!("negative interval {}", t.interval));
    }
    match t.expiry {
        Expiry::None => {}
        Expiry::Remaining { clock, .. } => {
            let runs_on =
                clock == t.clock || (t.clock == ClockId::Realtime && clock == ClockId::Monotonic);
            if clock == ClockId::Realtime || !runs_on {
                return Err(format!(
                    "remaining time on the {clock:?} clock for a {:?} timer",
                    t.clock
                ));
            }
        }
        Expiry::Realtime(ns) => {
            if ns < 0 || t.clock != ClockId::Realtime {
                return Err("absolute realtime expiry out of range or on another clock".into());
            }
        }
    }
    if t.overrun < -1 {
        return Err(format!("overrun {}", t.overrun));
    }
    if t.overrun_last < 0 {
        return Err(format!("latched overrun {}", t.overrun_last));
    }
    if t.status != Status::Disarmed && t.expiry == Expiry::None {
        return Err("an armed or pending timer without an expiry".into());
    }
    let waiting = t.status == Status::RequeuePending;
    if waiting && t.interval == 0 {
        return Err("a one-shot timer waiting to be re-armed".into());
    }
    if let Some(signal) = &t.signal {
        // A signal timer waits for its signal, never for an event on the owner's queue.
        check_signal(t, signal)?;
    } else if waiting && !t.pending {
        return Err("a periodic timer waiting to be re-armed without its pending event".into());
    }
    if t.pending && !waiting && !(t.status == Status::Disarmed && t.interval == 0) {
        return Err(format!(
            "a pending event on a {:?} timer with interval {}",
            t.status, t.interval
        ));
    }
    if t.pending && t.notify == NOTIFY_NONE {
        return Err("a pending event on a `none` timer".into());
    }
    if t.pending && t.signal.is_some() {
        return Err("a pending event on a signal timer".into());
    }
    if t.notify.len() > MAX_NAME {
        return Err(format!(
            "notification name is {} bytes, at most {MAX_NAME} fit in a record",
            t.notify.len()
        ));
    }
    Ok(())
}

/// The rules of [`Snapshot::validate`] for a signal timer's part of its record.
fn check_signal(t: &TimerRecord, signal: &SignalRecord) -> Result<(), String> {
    if t.notify != NOTIFY_SIGNAL {
        return Err(format!("a signal target on a timer named {:?}", t.notify));
    }
    let signo = signal.target.signo();
    if !(1..=crate::timers::object::signal::SIGNO_MAX).contains(&signo) {
        return Err(format!("signal number {signo} outside 1..=64"));
    }
    if let SignalTarget::Thread { tid, .. } = signal.target {
        if tid <= 0 {
            return Err(format!("signal to thread ID {tid}"));
        }
    }
    if signal.lateness < 0 {
        return Err(format!("signal lateness {}", signal.lateness));
    }
    if signal.state == SignalState::Idle && signal.lateness != 0 {
        return Err(format!(
            "signal lateness {} with no signal waiting",
            signal.lateness
        ));
    }
    Ok(())
}

/// The first ID that occurs twice in `timers`, if any. Snapshots list IDs in ascending order
/// (`Owner::checkpoint` sorts them), which one pass confirms; only other orders pay for a set.
fn first_duplicate(timers: &[TimerRecord]) -> Option<TimerId> {
    if timers.windows(2).all(|w| w[0].id < w[1].id) {
        return None;
    }
    let mut seen = HashSet::with_capacity(timers.len());
    timers.iter().map(|t| t.id).find(|&id| !seen.insert(id))
}
