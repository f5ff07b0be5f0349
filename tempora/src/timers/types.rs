//! The service's value types: what callers pass to and get back from its calls.

use crate::clock::{ClockId, TimeSpec};
use crate::registry::TimerId;
use std::fmt;
use std::sync::Arc;

/// A callback timer's closure: called with the timer's ID and the event's overrun.
pub type Callback = Arc<dyn Fn(TimerId, i32) + Send + Sync>;

/// How a timer reports its expiry, chosen at [`Owner::create`](super::Owner::create).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Notify {
    /// Nothing is delivered (`SIGEV_NONE`); [`Owner::gettime`](super::Owner::gettime) shows the state.
    #[default]
    None,
    /// An [`Event`](super::Event) on the owner's queue (`SIGEV_SIGNAL`), at most one pending per timer.
    Queue,
    /// A closure run by the poll that fires the timer (`SIGEV_THREAD`).
    Callback(Callback),
    /// A callback with a name, under which a checkpoint records it (see [`crate::checkpoint`]).
    NamedCallback(Arc<str>, Callback),
}

impl Notify {
    /// `Notify::Callback` with `f`.
    pub fn callback(f: impl Fn(TimerId, i32) + Send + Sync + 'static) -> Notify {
        Notify::Callback(Arc::new(f))
    }

    /// `Notify::NamedCallback`: a callback a checkpoint records as `name`, for a restore to
    /// map back to a closure. A create refuses the names a snapshot reserves for the other
    /// kinds (`none`, `queue`: a restore would turn the timer into one of those) and names
    /// longer than [`crate::checkpoint::MAX_NAME`] bytes (no snapshot can hold them).
    pub fn callback_named(name: &str, f: impl Fn(TimerId, i32) + Send + Sync + 'static) -> Notify {
        Notify::NamedCallback(name.into(), Arc::new(f))
    }

    pub(crate) fn kind(&self) -> NotifyKind {
        match self {
            Notify::None => NotifyKind::None,
            Notify::Queue => NotifyKind::Queue,
            Notify::Callback(_) | Notify::NamedCallback(..) => NotifyKind::Callback,
        }
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Notify::None => "None",
            Notify::Queue => "Queue",
            Notify::Callback(_) => "Callback(..)",
            Notify::NamedCallback(..) => "NamedCallback(..)",
        })
    }
}

/// Flags of [`Owner::settime`](super::Owner::settime): the `flags` argument of `timer_settime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetFlags(u32);

impl SetFlags {
    /// `it_value` is relative to now.
    pub const RELATIVE: SetFlags = SetFlags(0);
    /// `TIMER_ABSTIME`: `it_value` is an absolute time on the timer's clock.
    #[doc(alias = "TIMER_ABSTIME")]
    pub const ABSTIME: SetFlags = SetFlags(1);

    /// The flags from `timer_settime`'s raw value. Like Linux, bits other than
    /// `TIMER_ABSTIME` (1) are ignored, not refused.
    pub fn from_raw(raw: i32) -> SetFlags {
        SetFlags(raw as u32 & 1)
    }

    /// Whether `TIMER_ABSTIME` is set.
    pub fn is_abstime(self) -> bool {
        self.0 & 1 != 0
    }
}

/// A timer setting (`struct itimerspec`): remaining time until the next expiry, and period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItimerSpec {
    /// Time until the next expiry (`it_value`); zero when disarmed.
    pub value: TimeSpec,
    /// The period (`it_interval`); zero for a one-shot timer.
    pub interval: TimeSpec,
}

impl ItimerSpec {
    /// Both fields in nanoseconds: `(value, interval)`.
    pub fn as_nanos(&self) -> (u64, u64) {
        // A spec tempora produced is always valid.
        (
            self.value.to_nanos().unwrap_or(0),
            self.interval.to_nanos().unwrap_or(0),
        )
    }
}

/// How a timer notifies, without its closure: what a listing ([`Owner::timers`](super::Owner::timers)) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
#[non_exhaustive]
pub enum NotifyKind {
    /// Nothing is delivered (`SIGEV_NONE`); gettime shows the state.
    #[default]
    None = 0,
    /// An event on the owner's queue, with POSIX overrun semantics (`SIGEV_SIGNAL`).
    Queue = 1,
    /// A callback run by the poll that fires the timer (`SIGEV_THREAD`).
    Callback = 2,
}

/// A timer's status, as the kernel's `it_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
#[non_exhaustive]
pub enum Status {
    /// Not armed (zero `it_value`), or a one-shot that has fired.
    #[default]
    Disarmed = 0,
    /// Armed: queued in a base's wheel.
    Armed = 1,
    /// A periodic timer whose event is pending; re-armed when the event is consumed.
    RequeuePending = 2,
}

/// One line of an owner's timer listing ([`Owner::timers`](super::Owner::timers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerInfo {
    /// The timer's ID.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// How it notifies.
    pub notify: NotifyKind,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
}

/// The longest callback name, in bytes, a create accepts: what a checkpoint's timer record
/// holds (its length is a `u16` that also counts the record's 45 bytes of other fields;
/// `crate::checkpoint` asserts the two agree). Public as `checkpoint::MAX_NAME`.
pub(crate) const MAX_NAME: usize = u16::MAX as usize - 45;
/// The notification name a checkpoint gives a `SIGEV_NONE` timer (`Notify::None`); no
/// callback may take it.
pub(crate) const NOTIFY_NONE: &str = "none";
/// The notification name a checkpoint gives a queue timer (`Notify::Queue`); no callback may
/// take it.
pub(crate) const NOTIFY_QUEUE: &str = "queue";

/// Why a callback cannot be recorded under `name`, if it cannot: a reserved name (a restore
/// would make the timer that kind) or one longer than a snapshot's record holds. Checked at
/// create, so that every timer an owner holds can be checkpointed and restored as it is.
pub(crate) fn callback_name_error(name: &str) -> Option<&'static str> {
    if name == NOTIFY_NONE || name == NOTIFY_QUEUE {
        Some("a callback named `none` or `queue` would restore as that kind")
    } else if name.len() > MAX_NAME {
        Some("a callback name longer than a snapshot can hold")
    } else {
        None
    }
}
