//! The one error type of the `tempora` crate.

use std::fmt;
use std::sync::Arc;

/// Why a tempora call failed. Every variant maps to the errno a POSIX caller expects
/// ([`Error::errno`]); a failed call changes nothing.
///
/// Permanent errors (retrying the same call cannot succeed): [`Error::UnknownTimer`],
/// [`Error::InvalidId`], [`Error::NotRestoring`], [`Error::OwnerDeleted`],
/// [`Error::ServiceStopped`], [`Error::Poisoned`], [`Error::InvalidTime`],
/// [`Error::InvalidConfig`], [`Error::IdInUse`] (until that timer is deleted), and the
/// snapshot errors ([`Error::CorruptSnapshot`], [`Error::UnsupportedSnapshot`],
/// [`Error::UnknownNotify`]). Transient: [`Error::NoFreeId`] (succeeds once a timer of the
/// owner is deleted); see [`Error::is_transient`]. [`Error::Io`] carries the `io::Error`, as
/// its [`source`](std::error::Error::source), and the OS's errno.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The timer ID is unknown to this owner: never created, already deleted, or another
    /// owner's (IDs are per owner). `EINVAL`, as `timer_settime` & co. return.
    UnknownTimer,
    /// A requested timer ID is negative or beyond the owner's ID range. `EINVAL`.
    InvalidId,
    /// A requested timer ID is in use by the same owner. `EBUSY`, as exact-ID
    /// `timer_create` returns.
    IdInUse,
    /// Every timer ID of the owner is in use. `EAGAIN`, as `timer_create` returns.
    NoFreeId,
    /// A group the owner is in has as many timers as its limit allows
    /// ([`Group::set_max_timers`](crate::timers::Group::set_max_timers)); the text is the
    /// group's path. `EAGAIN`, as `timer_create` returns when the kernel's per-user cap on
    /// pending signals (`RLIMIT_SIGPENDING`) is reached.
    LimitReached(String),
    /// An exact-ID create while the owner's restore mode is off. `EINVAL`.
    NotRestoring,
    /// The owner has been deleted. `EINVAL`.
    OwnerDeleted,
    /// The owner's service is gone: the last [`crate::Timers`] handle and the last [`crate::time::Sleep`] were dropped, so nothing
    /// fires any more. Arming calls and blocking receives fail with it; reading, deleting and
    /// checkpointing the owner's timers still work. `ESHUTDOWN`.
    ServiceStopped,
    /// A panic inside one of tempora's critical sections (the text names it: a base, an event
    /// queue, a timer, an ID shard, a driver thread) left the state it guards unusable: calls
    /// that need it fail with this instead of waiting forever, and blocking receives return it.
    /// It is a bug in tempora or a failed allocation; the service does not recover from it.
    /// `ENOTRECOVERABLE`, as a robust mutex whose owner died.
    Poisoned(&'static str),
    /// A time with negative seconds or nanoseconds outside `0 .. 1_000_000_000`. `EINVAL`, as
    /// `timer_settime` returns (checked before the timer is looked up).
    InvalidTime,
    /// A builder was given an invalid setting; the text says which. `EINVAL`.
    InvalidConfig(&'static str),
    /// The bytes are not a valid snapshot ([`crate::checkpoint`]); the text says what is wrong
    /// and where. `EINVAL`.
    CorruptSnapshot(String),
    /// A snapshot in a newer major format version than this build reads. `EINVAL`.
    UnsupportedSnapshot {
        /// The snapshot's format version, (major, minor).
        found: (u16, u16),
        /// The major format version this build reads.
        supported: u16,
    },
    /// A snapshot names a notification the restoring application did not supply. `EINVAL`.
    UnknownNotify(String),
    /// An operating-system call failed: reading or writing a snapshot file, or starting a
    /// driver thread. Holds the `io::Error` (its errno is [`Error::errno`], `EIO` if it has
    /// none; it is the [`source`](std::error::Error::source)).
    Io(IoError),
}

impl Error {
    /// The errno value a POSIX caller would see for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::UnknownTimer
            | Error::InvalidId
            | Error::NotRestoring
            | Error::OwnerDeleted
            | Error::InvalidTime
            | Error::InvalidConfig(_)
            | Error::CorruptSnapshot(_)
            | Error::UnsupportedSnapshot { .. }
            | Error::UnknownNotify(_) => libc::EINVAL,
            Error::ServiceStopped => libc::ESHUTDOWN,
            Error::Poisoned(_) => libc::ENOTRECOVERABLE,
            Error::IdInUse => libc::EBUSY,
            Error::NoFreeId | Error::LimitReached(_) => libc::EAGAIN,
            Error::Io(e) => e.errno(),
        }
    }

    /// Whether the same call may succeed later without the caller changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::NoFreeId)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownTimer => f.write_str("unknown timer ID for this owner (EINVAL)"),
            Error::InvalidId => f.write_str("timer ID out of range (EINVAL)"),
            Error::IdInUse => f.write_str("timer ID already in use (EBUSY)"),
            Error::NoFreeId => f.write_str("every timer ID of the owner is in use (EAGAIN)"),
            Error::LimitReached(group) => write!(
                f,
                "group {group:?} has as many timers as its max_timers allows (EAGAIN)"
            ),
            Error::NotRestoring => {
                f.write_str("exact-ID create needs the owner's restore mode on (EINVAL)")
            }
            Error::OwnerDeleted => f.write_str("the owner has been deleted (EINVAL)"),
            Error::ServiceStopped => f.write_str(
                "the owner's Timers service was dropped: nothing fires any more (ESHUTDOWN)",
            ),
            Error::Poisoned(what) => write!(
                f,
                "a panic inside tempora left {what} unusable (ENOTRECOVERABLE)"
            ),
            Error::InvalidTime => {
                f.write_str("time out of range: negative seconds or tv_nsec not in 0..1e9 (EINVAL)")
            }
            Error::InvalidConfig(what) => write!(f, "invalid configuration: {what} (EINVAL)"),
            Error::CorruptSnapshot(what) => write!(f, "corrupt snapshot: {what}"),
            Error::UnsupportedSnapshot {
                found: (major, minor),
                supported,
            } => write!(
                f,
                "snapshot format {major}.{minor} is newer than this build reads ({supported}.x)"
            ),
            Error::UnknownNotify(name) => write!(
                f,
                "the snapshot names notification {name:?}, which was not supplied"
            ),
            Error::Io(e) => write!(f, "I/O: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e.get()),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(IoError(Arc::new(e)))
    }
}

/// The `std::io::Error` inside [`Error::Io`], shared so that [`Error`] stays `Clone`. Two are
/// equal when their errno, kind and message are: `io::Error` itself has no equality.
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl IoError {
    /// The `io::Error`.
    pub fn get(&self) -> &std::io::Error {
        &self.0
    }

    /// Its OS errno, or `EIO` for an error that did not come from the OS.
    pub fn errno(&self) -> i32 {
        self.0.raw_os_error().unwrap_or(libc::EIO)
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        self.errno() == other.errno()
            && self.0.kind() == other.0.kind()
            && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for IoError {}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
