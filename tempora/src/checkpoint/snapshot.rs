//! The snapshot of an owner as data: its timers' records, the format's constants, and the
//! error a snapshot that breaks a rule gives. Encoding, decoding and the rules themselves are
//! `format.rs`'s.

use crate::clock::ClockId;
use crate::error::Error;
use crate::timers::{Notify, Status, TimerId};
use std::borrow::Cow;

/// The magic at the start of every snapshot.
pub const MAGIC: [u8; 8] = *b"TEMPORA\x1a";
/// The format version this build writes.
pub const VERSION: (u16, u16) = (1, 3);

/// The largest payload (the bytes after the 24-byte header) a snapshot may declare: 4 GiB,
/// about 80 million timers with short names, more than an owner holds in memory (each timer
/// costs more than 64 bytes of its own). A reader refuses a greater length before reading
/// further, and [`Snapshot::try_encode`] refuses a snapshot that would exceed it.
pub const MAX_PAYLOAD: u64 = 1 << 32;
/// The longest notification name, in bytes, that fits in a timer record (whose length is a
/// `u16` that also counts the record's other fields). A create refuses longer callback names,
/// so every timer can be checkpointed.
pub const MAX_NAME: usize = crate::timers::object::types::MAX_NAME;
pub(crate) use crate::timers::object::types::{NOTIFY_NONE, NOTIFY_QUEUE, NOTIFY_SIGNAL};

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
///
/// `#[non_exhaustive]`, as a newer format may add fields: outside this crate a record is made
/// with [`TimerRecord::new`] (a disarmed timer), then its fields are set.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerRecord {
    /// Its ID, restored exactly.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// Its notification's name: `none`, `queue`, `signal` (a signal timer: see
    /// [`TimerRecord::signal`]), or a callback's name. A `Cow` so that the common names cost
    /// no allocation per timer in a checkpoint or a decode: `none`, `queue` and `signal` are
    /// borrowed, a callback's name owned.
    pub notify: Cow<'static, str>,
    /// Armed, disarmed, or waiting to be re-armed: for its event to be consumed, or a signal
    /// timer for its signal to be seen delivered (or sent, if it is owed).
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
    /// A signal timer's target and signal state; `None` for every other timer, and for every
    /// record of a format before 1.3. Set only with `notify` `signal` (a record named
    /// `signal` without it is a callback of that name, as before 1.3).
    pub signal: Option<SignalRecord>,
}

/// Where a signal timer's signal goes and what it carries: the signal [`Notify`] it was
/// created with (`Notify::from` gives it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalTarget {
    /// [`Notify::Signal`]: signal `signo` to the process, `value` in `si_value`.
    Process {
        /// The signal number, `1..=64`.
        signo: i32,
        /// `si_value` (`sival_ptr`'s bits).
        value: usize,
    },
    /// [`Notify::ThreadSignal`]: signal `signo` to thread `tid`. The thread ID is the
    /// checkpointed process's: a restore into another process rewrites it first (see
    /// [`crate::checkpoint`], "Signal timers"), or fails.
    Thread {
        /// The thread's ID (`gettid()`), greater than 0.
        tid: i32,
        /// The signal number, `1..=64`.
        signo: i32,
        /// `si_value`.
        value: usize,
    },
    /// [`Notify::SignalWithId`]: signal `signo` to the process, the timer's ID in `si_value`.
    ProcessWithId {
        /// The signal number, `1..=64`.
        signo: i32,
    },
}

impl SignalTarget {
    /// The signal number.
    pub fn signo(self) -> i32 {
        match self {
            SignalTarget::Process { signo, .. }
            | SignalTarget::Thread { signo, .. }
            | SignalTarget::ProcessWithId { signo } => signo,
        }
    }
}

impl From<SignalTarget> for Notify {
    fn from(target: SignalTarget) -> Notify {
        match target {
            SignalTarget::Process { signo, value } => Notify::Signal { signo, value },
            SignalTarget::Thread { tid, signo, value } => {
                Notify::ThreadSignal { tid, signo, value }
            }
            SignalTarget::ProcessWithId { signo } => Notify::SignalWithId { signo },
        }
    }
}

/// Whether a signal timer's signal was waiting at checkpoint, and for what (the module doc's
/// "Signal timers" says what a restore makes of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SignalState {
    /// No signal waits: none sent and not yet seen delivered, none owed.
    #[default]
    Idle,
    /// An expiry's signal is not sent yet: the signal queue had no room (`EAGAIN`), or a
    /// periodic timer's signal is ignored (its timer waits until it is handled again).
    Owed,
    /// A signal of the timer's current arming was sent and not yet seen delivered.
    Outstanding,
    /// A signal of an earlier arming (a settime since) was sent and not yet seen delivered.
    /// Written by no build since settime forgets such a signal (its new arming sends its own
    /// signals); read from older 1.3 snapshots and restored as `Idle`.
    OutstandingStale,
}

/// A signal timer's part of its [`TimerRecord`]: where its signal goes, and the signal's
/// state.
///
/// `#[non_exhaustive]`: outside this crate it is made with [`SignalRecord::new`] (no signal
/// waiting), then its fields are set.
///
/// ```
/// use tempora::checkpoint::{SignalRecord, SignalTarget, TimerRecord};
/// use tempora::clock::ClockId;
/// use tempora::TimerId;
///
/// let mut timer = TimerRecord::new(TimerId::new(7).unwrap(), ClockId::Monotonic, "signal");
/// timer.signal = Some(SignalRecord::new(SignalTarget::Process { signo: 34, value: 0xfeed }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignalRecord {
    /// Where the signal goes and what it carries.
    pub target: SignalTarget,
    /// Whether a signal was owed or outstanding at checkpoint.
    pub state: SignalState,
    /// The periods the owed or outstanding signal's own expiry was late by (part of its
    /// `si_overrun`, and of `getoverrun` once it is delivered); 0 when none waits.
    pub lateness: i32,
}

impl SignalRecord {
    /// The record of a signal timer notifying `target`, with no signal waiting.
    pub fn new(target: SignalTarget) -> SignalRecord {
        SignalRecord {
            target,
            state: SignalState::Idle,
            lateness: 0,
        }
    }
}

/// The logical state of an owner (see the module doc).
///
/// `#[non_exhaustive]`, as a newer format may add fields: outside this crate a snapshot is
/// built from [`Snapshot::default`] (no timers, ID counter 0, restore mode off, no default
/// slack), then its fields are set. [`Snapshot::validate`] says whether the result is one a
/// reader and [`Owner::restore`](crate::Owner::restore) accept.
///
/// ```
/// use std::time::Duration;
/// use tempora::checkpoint::{Expiry, Snapshot, TimerRecord};
/// use tempora::clock::ClockId;
/// use tempora::timers::Status;
/// use tempora::TimerId;
///
/// let id = TimerId::new(3).unwrap();
/// let mut timer = TimerRecord::new(id, ClockId::Monotonic, "queue");
/// timer.status = Status::Armed;
/// timer.expiry = Expiry::Remaining { clock: ClockId::Monotonic, ns: 5_000_000 };
/// timer.interval = 1_000_000;
///
/// let mut snapshot = Snapshot::default();
/// snapshot.counter = 4;
/// snapshot.default_slack = Some(Duration::from_millis(1));
/// snapshot.timers.push(timer);
/// snapshot.validate().unwrap();
/// assert_eq!(Snapshot::decode(&snapshot.encode()).unwrap(), snapshot);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
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

impl TimerRecord {
    /// The record of timer `id` on `clock` whose notification is named `notify` (`none`,
    /// `queue`, `signal`, or a callback's name, as [`TimerRecord::notify`] says), disarmed: no
    /// expiry, one-shot, no pending event, no overruns (`overrun` -1, `overrun_last` 0),
    /// [`Precision::Default`](crate::Precision::Default), no signal target (set
    /// [`TimerRecord::signal`] for a signal timer). For an armed timer set `status`,
    /// `expiry` and `interval` after: the record is then the one a checkpoint takes of a timer
    /// armed so.
    pub fn new(id: TimerId, clock: ClockId, notify: impl Into<Cow<'static, str>>) -> TimerRecord {
        TimerRecord {
            id,
            clock,
            notify: notify.into(),
            status: Status::Disarmed,
            pending: false,
            expiry: Expiry::None,
            interval: 0,
            // As every `settime` leaves it, so a record armed by setting its fields counts
            // overruns as an armed timer does (a never-armed timer's 0 differs in nothing
            // that shows: its first arming sets -1).
            overrun: -1,
            overrun_last: 0,
            precision: crate::timers::Precision::Default,
            signal: None,
        }
    }
}

/// An [`Error::CorruptSnapshot`] saying `what` is wrong (and where).
pub(super) fn corrupt(what: impl Into<String>) -> Error {
    Error::CorruptSnapshot(what.into())
}
