//! Checkpoint and restore of an owner: the snapshot, its binary format, and its files.
//!
//! [`crate::Owner::checkpoint`] takes a [`Snapshot`] of an owner's logical state;
//! [`crate::Owner::restore`] recreates it in a fresh owner through exact-ID mode, with the same
//! IDs, all or nothing. Derived state (wheel placement, hash chains) is rebuilt, never copied.
//!
//! # What a snapshot holds, and the time rule
//!
//! Per owner: the ID counter (the next ID a normal create would try) and whether exact-ID mode
//! is on. Per timer: ID, clock, notification (by name, below), status, expiry, interval, the
//! internal overrun (periods counted since the pending event was queued, -1 when none) and the
//! latched overrun `getoverrun` returns, and whether its event is pending on the owner's queue.
//!
//! Expiries follow the clocks' own rules across a restore, possibly on another machine or after
//! a reboot:
//! * an expiry measured on `CLOCK_MONOTONIC` or `CLOCK_BOOTTIME` (monotonic and boot-time
//!   timers, and relative `CLOCK_REALTIME` timers, which run on the monotonic clock) is stored
//!   as the **time remaining** at checkpoint (negative if it has passed, as for a periodic timer
//!   whose event is pending), and restored relative to the new owner's clock: a timer with
//!   3 s left has 3 s left after the restore, however long the snapshot sat on disk;
//! * an **absolute `CLOCK_REALTIME`** expiry is stored as is (ns since the epoch) and restored
//!   as is: a timer set for 12:00 wall time still fires at 12:00, earlier if the snapshot was
//!   restored late (at once if 12:00 has passed, counting the missed periods as overrun).
//!
//! # Notification names
//!
//! A snapshot names each timer's notification: `none`, `queue` (the owner's event queue), or
//! the name the application gave its callback ([`crate::Notify::callback_named`]; an unnamed
//! callback is `callback`). At restore the application maps names other than `none` and
//! `queue` to [`crate::Notify`] values; a name it does not map is an error and nothing is
//! restored.
//!
//! # Binary format (version 1.2)
//!
//! All integers little-endian.
//!
//! ```text
//! offset  size  field
//!      0     8  magic       "TEMPORA\x1a"
//!      8     2  major       1: a reader refuses a greater major version
//!     10     2  minor       2: a greater minor version may append fields to records
//!     12     8  length      bytes of payload that follow the header, at most MAX_PAYLOAD
//!     20     4  crc32c      CRC-32C (Castagnoli) of the payload
//!     24        payload     one owner record, then `count` timer records
//!
//! owner record:  len u16 | counter u32 | restore_ids u8 | count u32
//!                | default_slack u64 (ns, 0 none; minor 2; absent before, read as none)
//! timer record:  len u16 | id i32 | clock i32 (clockid_t) | status u8 | pending u8
//!                | expiry_kind u8 (0 none, 1 remaining on expiry_clock, 2 realtime absolute)
//!                | expiry_clock i32 | expiry i64 (ns) | interval i64 (ns) | overrun i64
//!                | overrun_last i32 | name_len u16 | name (UTF-8)
//!                | precision u64 (minor 1; absent in 1.0 records, read as Default)
//!
//! clock, expiry_clock  clockid_t: 0 CLOCK_REALTIME, 1 CLOCK_MONOTONIC, 7 CLOCK_BOOTTIME
//!                      (expiry_kind 0 writes expiry_clock and expiry as 0, kind 2 writes
//!                      expiry_clock as 0; a reader ignores the fields its kind does not use)
//! status               0 Disarmed, 1 Armed, 2 RequeuePending
//! restore_ids, pending 0 no, 1 yes
//! precision            bits 63-62: 0 Default, 1 Precise, 2 Slack (bits 61-0: the slack
//!                      in ns), 3 Deferrable
//! ```
//!
//! Each record starts with its own length (the bytes after the `len` field), so a reader skips
//! fields a newer minor version appended. A timer record's length is a `u16`, so a name holds
//! at most [`MAX_NAME`] bytes; a payload at most [`MAX_PAYLOAD`] bytes.
//!
//! A reader checks everything before it allocates or creates anything: magic, version, that
//! the length is within [`MAX_PAYLOAD`] and matches the file (a file is read only up to the
//! length its header declares, so any input, `/dev/zero` included, costs bounded memory), the
//! checksum, every record's length against what is left, counts against the bytes that could
//! hold them, clock ids, status and kind values, then [`Snapshot::validate`]: what a snapshot
//! must satisfy whoever built it. [`Snapshot::try_encode`] and [`crate::Owner::restore`] apply
//! the same [`Snapshot::validate`], so what one refuses the others refuse too, and no bytes are
//! written that a reader refuses.

mod capture;
mod format;
mod restore;
#[cfg(all(test, not(loom)))]
mod tests;

use crate::clock::ClockId;
use crate::error::Error;
use crate::timers::{Status, TimerId};
use std::borrow::Cow;
use std::collections::HashSet;

/// The magic at the start of every snapshot.
pub const MAGIC: [u8; 8] = *b"TEMPORA\x1a";
/// The format version this build writes.
pub const VERSION: (u16, u16) = (1, 2);

/// The largest payload (the bytes after the 24-byte header) a snapshot may declare: 4 GiB,
/// about 80 million timers with short names, more than an owner holds in memory (each timer
/// costs more than 64 bytes of its own). A reader refuses a greater length before reading
/// further, and [`Snapshot::try_encode`] refuses a snapshot that would exceed it.
pub const MAX_PAYLOAD: u64 = 1 << 32;
/// The longest notification name, in bytes, that fits in a timer record (whose length is a
/// `u16` that also counts the record's other fields). A create refuses longer callback names,
/// so every timer can be checkpointed.
pub const MAX_NAME: usize = crate::timers::types::MAX_NAME;
const _: () = assert!(
    MAX_NAME == u16::MAX as usize - format::TIMER_FIELDS - format::TIMER_TAIL,
    "the service's longest callback name is exactly what a timer record holds"
);
pub(crate) use crate::timers::types::{NOTIFY_NONE, NOTIFY_QUEUE};

/// Where a timer's expiry is, by the rule in the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expiry {
    /// No expiry stored (never armed).
    None,
    /// `ns` remaining (negative: passed) at checkpoint on `clock` (monotonic or boot time).
    Remaining {
        /// The clock the expiry is measured on.
        clock: ClockId,
        /// Nanoseconds left; negative if the expiry had passed.
        ns: i64,
    },
    /// An absolute `CLOCK_REALTIME` expiry, ns since the epoch.
    Realtime(i64),
}

/// One timer of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerRecord {
    /// Its ID, restored exactly.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// Its notification's name: `none`, `queue`, or a callback's name. A `Cow` so that the
    /// common names cost no allocation per timer in a checkpoint or a decode: `none` and
    /// `queue` are borrowed, a callback's name owned.
    pub notify: Cow<'static, str>,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
    /// Whether its event is pending on the owner's queue.
    pub pending: bool,
    /// Its expiry (see the module doc for the rule).
    pub expiry: Expiry,
    /// Its period in ns (0: one-shot).
    pub interval: i64,
    /// Periods counted since its pending event was queued (-1: none).
    pub overrun: i64,
    /// What `getoverrun` returns.
    pub overrun_last: i32,
    /// When it may fire after its expiry ([`Owner::set_precision`](crate::Owner::set_precision));
    /// `Default` for a record of format 1.0.
    pub precision: crate::timers::Precision,
}

/// The logical state of an owner (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The next ID the owner's counter would try.
    pub counter: u32,
    /// Whether exact-ID (restore) mode was on.
    pub restore_ids: bool,
    /// The slack of its timers whose precision is `Default`
    /// ([`Owner::set_default_slack`](crate::Owner::set_default_slack)); `None` (precise) for
    /// a snapshot of format 1.0 or 1.1.
    pub default_slack: Option<std::time::Duration>,
    /// Its timers, by ID.
    pub timers: Vec<TimerRecord>,
}

/// An [`Error::CorruptSnapshot`] saying `what` is wrong (and where).
fn corrupt(what: impl Into<String>) -> Error {
    Error::CorruptSnapshot(what.into())
}

impl Snapshot {
    /// Checks what every snapshot must satisfy, however it was built (its fields are public):
    /// the rules [`Snapshot::decode`] applies to a file, [`Snapshot::try_encode`] before
    /// writing one, and [`crate::Owner::restore`] before creating anything. Per timer: an
    /// interval and an absolute realtime expiry not negative, a remaining time on the clock its
    /// timer runs on (monotonic or boot time; monotonic for a realtime timer armed relative),
    /// an absolute expiry only on a realtime timer, overruns in range, an armed or waiting timer
    /// with an expiry, a timer waiting to be re-armed periodic and with its event pending, a
    /// pending event only on a fired one-shot or a waiting periodic timer and never on a `none`
    /// timer, a name of at most [`MAX_NAME`] bytes. Per snapshot: unique IDs, at most
    /// `u32::MAX` timers and [`MAX_PAYLOAD`] bytes encoded. Remaining times may be anything:
    /// negative is passed, and a restore saturates at the clock's ends.
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
        let mut payload = format::OWNER_RECORD;
        for (i, t) in self.timers.iter().enumerate() {
            check_timer(t).map_err(|w| corrupt(format!("timer {i} (ID {}): {w}", t.id)))?;
            payload += format::timer_record_len(t);
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
    if waiting && !t.pending {
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
    if t.notify.len() > MAX_NAME {
        return Err(format!(
            "notification name is {} bytes, at most {MAX_NAME} fit in a record",
            t.notify.len()
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
