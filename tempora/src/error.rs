//! The one error type of the `tempora` crate.

use std::fmt;
use std::sync::Arc;

/// Why a tempora call failed. Every variant maps to the errno a POSIX caller expects
/// ([`Error::errno`]); a failed call changes nothing.
///
/// Permanent errors (retrying the same call cannot succeed): [`Error::UnknownTimer`],
/// [`Error::InvalidId`], [`Error::NotRestoring`], [`Error::OwnerDeleted`],
/// [`Error::ServiceStopped`], [`Error::Forked`], [`Error::Poisoned`], [`Error::InvalidTime`],
/// [`Error::InvalidConfig`], [`Error::InvalidSignal`], [`Error::IdInUse`] (until that timer is deleted), and the
/// snapshot errors ([`Error::CorruptSnapshot`], [`Error::UnsupportedSnapshot`],
/// [`Error::UnknownNotify`]). Transient: [`Error::NoFreeId`] (succeeds once a timer of the
/// owner is deleted), [`Error::OutOfMemory`] (succeeds once memory is freed) and
/// [`Error::WouldDeadlock`] (succeeds once the interrupted call returns); see
/// [`Error::is_transient`]. [`Error::Io`] carries the `io::Error`, as
/// its [`source`](std::error::Error::source), and the OS's errno.
///
/// `Display` is this error's own text, never its source's, so a reporter that walks
/// [`source`](std::error::Error::source) (anyhow's `{:#}` and `{:?}`, for one) prints each
/// once. Printing `Display` alone leaves out an [`Error::Io`]'s OS text: print the chain.
///
/// An `Error` converts into an `io::Error` (`?` in a function returning `io::Result`): the
/// `io::Error` inside an [`Error::Io`] as it is, any other error as the inner error of an
/// `io::Error` whose kind is its errno's.
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
    /// The memory a create, an arming or a restore needs could not be allocated (the
    /// allocator returned null: `RLIMIT_AS`, a cgroup's limit, no overcommit). Nothing was
    /// changed: no timer half-made, counts and statistics as before, the owner and its other
    /// timers usable; the same call succeeds once memory is freed. `EAGAIN`, as the kernel's
    /// `timer_create` returns when it cannot allocate a timer. Which paths can still abort
    /// on a failed allocation, and why each is bounded: the [`crate::timers`] module doc,
    /// "Memory".
    OutOfMemory,
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
    /// It is a bug in tempora; the service does not recover from it.
    /// `ENOTRECOVERABLE`, as a robust mutex whose owner died.
    Poisoned(&'static str),
    /// A time with negative seconds or nanoseconds outside `0 .. 1_000_000_000`. `EINVAL`, as
    /// `timer_settime` returns (checked before the timer is looked up).
    InvalidTime,
    /// A builder was given an invalid setting; the text says which. `EINVAL`.
    InvalidConfig(&'static str),
    /// A signal notification the kernel's `timer_create` would refuse: a signal number
    /// outside `1..=64`, or a target thread that is not one of this process's; the text says
    /// which. `EINVAL`.
    InvalidSignal(&'static str),
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
    /// The object belongs to a service built before this process was forked: a child of
    /// `fork(2)` has none of its parent's threads, and tempora's locks may have been held by
    /// one of them, so every call on it fails with this at once, before touching any lock,
    /// and receives return it instead of waiting. Build a new service in the child (the
    /// global service, [`crate::time::global`], is rebuilt there by itself). `ECHILD`.
    Forked,
    /// A call made from a signal handler that interrupted, on the same thread, a tempora call
    /// holding a lock this call would need (or a `settime` of the timer this `gettime` reads):
    /// waiting would wait for the interrupted code, which cannot run until the handler
    /// returns. Nothing changed; the same call succeeds once the interrupted one has returned.
    /// The timers module's "Signal handlers" says which calls can meet it. `EDEADLK`, as a
    /// mutex that checks for errors returns to a thread locking it twice.
    WouldDeadlock,
    /// An operating-system call failed: reading or writing a snapshot file, or starting a
    /// driver thread. Holds the `io::Error` (its errno is [`Error::errno`], `EIO` if it has
    /// none; it is the [`source`](std::error::Error::source), and its text is not part of
    /// this error's `Display`, "I/O error").
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
            | Error::InvalidSignal(_)
            | Error::CorruptSnapshot(_)
            | Error::UnsupportedSnapshot { .. }
            | Error::UnknownNotify(_) => libc::EINVAL,
            Error::ServiceStopped => libc::ESHUTDOWN,
            Error::Forked => libc::ECHILD,
            Error::WouldDeadlock => libc::EDEADLK,
            Error::Poisoned(_) => libc::ENOTRECOVERABLE,
            Error::IdInUse => libc::EBUSY,
            Error::NoFreeId | Error::LimitReached(_) | Error::OutOfMemory => libc::EAGAIN,
            Error::Io(e) => e.errno(),
        }
    }

    /// Whether the same call may succeed later without the caller changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::NoFreeId | Error::OutOfMemory | Error::WouldDeadlock
        )
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
            Error::OutOfMemory => f.write_str("out of memory (EAGAIN)"),
            Error::NotRestoring => {
                f.write_str("exact-ID create needs the owner's restore mode on (EINVAL)")
            }
            Error::OwnerDeleted => f.write_str("the owner has been deleted (EINVAL)"),
            Error::ServiceStopped => f.write_str(
                "the owner's Timers service was dropped: nothing fires any more (ESHUTDOWN)",
            ),
            Error::Forked => f.write_str(
                "the service was built before this process forked: it works only in the parent (ECHILD)",
            ),
            Error::WouldDeadlock => f.write_str(
                "called from a signal handler that interrupted a tempora call holding what this call needs (EDEADLK)",
            ),
            Error::Poisoned(what) => write!(
                f,
                "a panic inside tempora left {what} unusable (ENOTRECOVERABLE)"
            ),
            Error::InvalidTime => {
                f.write_str("time out of range: negative seconds or tv_nsec not in 0..1e9 (EINVAL)")
            }
            Error::InvalidConfig(what) => write!(f, "invalid configuration: {what} (EINVAL)"),
            Error::InvalidSignal(what) => write!(f, "invalid signal notification: {what} (EINVAL)"),
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
            // Not the io::Error's text: it is the `source`, and a reporter that walks the
            // chain (anyhow, `tempora_last_error`) prints each link once.
            Error::Io(_) => f.write_str("I/O error"),
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

impl From<Error> for std::io::Error {
    fn from(err: Error) -> Self {
        let err = match err {
            // The OS's own error when nothing else holds it: errno, kind and text as they were.
            Error::Io(IoError(shared)) => match Arc::try_unwrap(shared) {
                Ok(io) => return io,
                // Shared by a clone: an OS error is its errno (its text is the errno's), so
                // `from_raw_os_error` remakes it whole.
                Err(shared) => match shared.raw_os_error() {
                    Some(code) => return std::io::Error::from_raw_os_error(code),
                    None => Error::Io(IoError(shared)),
                },
            },
            other => other,
        };
        // Every other error (and an `Error::Io` without an OS errno): `io::Error::new(kind,
        // err)`, not `io::Error::from_raw_os_error(errno)`. The latter keeps the errno as
        // `raw_os_error()` but swaps tempora's text for the errno's ("Invalid argument": not
        // which ID, which rule, which file). The former keeps both: the text, and the errno
        // through the inner error (`get_ref()` downcasts to `Error`, whose `errno()` it is);
        // its kind is the errno's (`from_raw_os_error(errno).kind()`), for code that matches
        // on kinds.
        let kind = match &err {
            Error::Io(io) => io.get().kind(),
            other => std::io::Error::from_raw_os_error(other.errno()).kind(),
        };
        std::io::Error::new(kind, err)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Error;
    use std::error::Error as _;
    use std::io;

    /// Every link of `e`'s chain, as a reporter that walks `source` prints it.
    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |&e| e.source())
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn io_display_leaves_the_source_to_the_chain() {
        let e = Error::from(io::Error::from_raw_os_error(libc::ENOENT));
        let os = io::Error::from_raw_os_error(libc::ENOENT).to_string();
        assert!(!e.to_string().contains(&os), "{e}");
        assert_eq!(e.to_string(), "I/O error");
        let source = e.source().expect("the io::Error is the source");
        let source = source.downcast_ref::<io::Error>().expect("an io::Error");
        assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
        // A reporter that walks the chain prints the OS's text once.
        let links = chain(&e);
        assert_eq!(links, ["I/O error".to_string(), os.clone()]);
        assert_eq!(links.join(": ").matches(&os).count(), 1);
        assert_eq!(e.errno(), libc::ENOENT);
    }

    #[test]
    fn errors_without_a_source_display_all_they_know() {
        for e in [
            Error::UnknownTimer,
            Error::LimitReached("web/api".into()),
            Error::Poisoned("a base"),
            Error::InvalidConfig("the batch must be at least 1"),
            Error::CorruptSnapshot("wrong magic".into()),
            Error::UnknownNotify("audit".into()),
        ] {
            assert!(e.source().is_none(), "{e:?}");
        }
        assert!(Error::LimitReached("web/api".into())
            .to_string()
            .contains("web/api"));
        assert!(Error::CorruptSnapshot("wrong magic".into())
            .to_string()
            .contains("wrong magic"));
    }

    #[test]
    fn out_of_memory_is_eagain_and_transient() {
        let e = Error::OutOfMemory;
        assert_eq!(e.errno(), libc::EAGAIN);
        assert!(e.is_transient());
        assert!(e.source().is_none());
        assert_eq!(e.to_string(), "out of memory (EAGAIN)");
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn into_io_error_keeps_an_os_error_whole() {
        let e = Error::from(io::Error::from_raw_os_error(libc::EACCES));
        let io: io::Error = e.into();
        assert_eq!(io.raw_os_error(), Some(libc::EACCES));
        assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
        // Shared by a clone: remade from its errno.
        let e = Error::from(io::Error::from_raw_os_error(libc::ENOSPC));
        let kept = e.clone();
        let io: io::Error = e.into();
        assert_eq!(io.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(io.to_string(), kept.source().unwrap().to_string());
    }

    #[test]
    fn into_io_error_keeps_errno_and_text_of_tempora_errors() {
        fn settime() -> io::Result<()> {
            Err(Error::UnknownTimer)?
        }
        let io = settime().unwrap_err();
        assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(io.to_string(), Error::UnknownTimer.to_string());
        let inner = io.get_ref().and_then(|i| i.downcast_ref::<Error>());
        assert_eq!(inner, Some(&Error::UnknownTimer));
        assert_eq!(inner.map(Error::errno), Some(libc::EINVAL));
        // An I/O error that did not come from the OS keeps its kind and, down the chain, its
        // text.
        let e = Error::from(io::Error::new(io::ErrorKind::InvalidInput, "no file name"));
        let kept = e.clone();
        let io: io::Error = kept.into();
        assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
        assert!(chain(&io).iter().any(|l| l == "no file name"), "{io:?}");
        assert_eq!(e.errno(), libc::EIO);
    }
}
