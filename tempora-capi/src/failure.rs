//! Why a call failed, and the boundary every call runs inside: a [`Failure`] (an errno and a
//! message), [`entry`] (runs a call's body, sets `errno` and the thread's message on failure,
//! turns a panic into `ENOTRECOVERABLE`), and `tempora_last_error`, which reads the message.
//!
//! # Invariants
//! - `errno` and the message are written only by a failed call (`report`); a call that
//!   succeeds leaves both alone.
//! - Nothing unwinds out of [`entry`]: a panic in a body is caught there.

use libc::{c_char, c_int};
use std::cell::RefCell;
use std::ffi::CString;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tempora::Error;

/// Why a call failed: the errno it sets and the message `tempora_last_error` returns.
pub(crate) struct Failure {
    errno: c_int,
    message: Message,
}

/// A failure's message, made into text only when reported (so that a failure allocates
/// nothing unless its text is long: [`report`]).
enum Message {
    Static(&'static str),
    Error(Error),
}

impl Failure {
    pub(crate) fn new(errno: c_int, message: &'static str) -> Failure {
        Failure {
            errno,
            message: Message::Static(message),
        }
    }
}

impl From<Error> for Failure {
    /// The message is the error's chain, each link's `Display` joined by ": " ("I/O error:
    /// No such file or directory (os error 2)"): an error's `Display` leaves its source's
    /// text to its source, and a C caller has only this string to read.
    fn from(e: Error) -> Failure {
        Failure {
            errno: e.errno(),
            message: Message::Error(e),
        }
    }
}

impl Message {
    /// Writes the text: a static message, or an error's chain.
    fn write_to(&self, w: &mut impl fmt::Write) -> fmt::Result {
        match self {
            Message::Static(s) => w.write_str(s),
            Message::Error(e) => {
                write!(w, "{e}")?;
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    write!(w, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
        }
    }
}

/// Room for a message written without allocating (with its NUL).
const SHORT: usize = 512;

/// A message in a fixed buffer, NUL-terminated, NULs inside it made spaces.
struct Short {
    text: [u8; SHORT],
    len: usize,
    /// Whether this, not `LAST_ERROR`, holds the thread's last message.
    newest: bool,
}

impl fmt::Write for Short {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end >= SHORT {
            return Err(fmt::Error);
        }
        for (to, &b) in self.text[self.len..end].iter_mut().zip(s.as_bytes()) {
            *to = if b == 0 { b' ' } else { b };
        }
        self.text[end] = 0;
        self.len = end;
        Ok(())
    }
}

thread_local! {
    /// The message of this thread's last failed call, when it fits: written without
    /// allocating, and a thread-local without a destructor, whose first use allocates nothing
    /// either. A call made from a signal handler (`tempora_timer_settime`, `_gettime`,
    /// `_getoverrun` are async-signal-safe) may fail there, and must not allocate.
    static SHORT_ERROR: RefCell<Short> = const {
        RefCell::new(Short { text: [0; SHORT], len: 0, newest: false })
    };
    /// The message of this thread's last failed call, when it did not fit in `SHORT_ERROR`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Sets `errno` and the thread's last message. Cold: only failed calls get here.
#[cold]
#[inline(never)]
fn report(f: Failure) {
    // The thread-locals are gone only while the thread exits, and borrowed only by a call that
    // panicked while reading them, or by the failure of a call that a signal handler
    // interrupted inside `report`: the message is lost then, the errno is still set.
    let fitted = SHORT_ERROR
        .try_with(|short| {
            let Ok(mut short) = short.try_borrow_mut() else {
                return true;
            };
            short.len = 0;
            short.text[0] = 0;
            short.newest = f.message.write_to(&mut *short).is_ok();
            short.newest
        })
        .unwrap_or(true);
    if !fitted {
        let mut text = String::new();
        let _ = f.message.write_to(&mut text);
        let message = CString::new(text.replace('\0', " ")).unwrap_or_default();
        let _ = LAST_ERROR.try_with(|last| {
            if let Ok(mut last) = last.try_borrow_mut() {
                *last = message;
            }
        });
    }
    // SAFETY: `__errno_location` returns the calling thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = f.errno };
}

/// Runs an entry point's body: its value on success; -1 (`fail`) with errno and the message
/// set on failure; a panic is caught and fails the call with `ENOTRECOVERABLE`.
///
/// The body's `Result` is taken apart inside the unwinding boundary, so what crosses it is
/// `()`: `catch_unwind` passes its closure's result through a union in memory, and a
/// `Result<T, Failure>` written there in pieces and read back whole stalls store-to-load
/// forwarding (BENCHMARKS.md, the capi suite, has what that cost).
pub(crate) fn entry<T>(fail: T, body: impl FnOnce() -> Result<T, Failure>) -> T {
    let mut out = None;
    let caught = catch_unwind(AssertUnwindSafe(|| match body() {
        Ok(v) => out = Some(v),
        Err(f) => report(f),
    }));
    if caught.is_err() {
        report(Failure::new(
            libc::ENOTRECOVERABLE,
            "a panic inside tempora (a bug)",
        ));
    }
    out.unwrap_or(fail)
}

/// The message of the calling thread's last failed call (what `errno` alone does not say:
/// which argument, which rule); "" before any. Never NULL. Valid until that thread's next
/// failed call or its exit, so copy it before handing it to another thread. Per thread, as
/// `errno` is: a callback reads the message of the thread that runs it, not of the thread
/// that armed its timer.
#[no_mangle]
pub extern "C" fn tempora_last_error() -> *const c_char {
    entry(c"".as_ptr(), || {
        let short = SHORT_ERROR
            .try_with(|short| {
                let short = short.borrow();
                short.newest.then(|| short.text.as_ptr().cast::<c_char>())
            })
            .ok()
            .flatten();
        Ok(short.unwrap_or_else(|| {
            LAST_ERROR
                .try_with(|last| last.borrow().as_ptr())
                .unwrap_or(c"".as_ptr())
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::c_void;
    use std::ffi::CStr;
    use std::ptr;

    fn errno() -> c_int {
        // SAFETY: the calling thread's errno.
        unsafe { *libc::__errno_location() }
    }

    fn set_errno(e: c_int) {
        // SAFETY: the calling thread's errno.
        unsafe { *libc::__errno_location() = e };
    }

    fn last_error() -> String {
        // SAFETY: tempora_last_error returns this thread's NUL-terminated message.
        unsafe { CStr::from_ptr(tempora_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn entry_returns_the_value_and_leaves_errno_alone() {
        set_errno(libc::EINTR);
        assert_eq!(entry(-1, || Ok(7)), 7);
        assert_eq!(errno(), libc::EINTR);
    }

    #[test]
    fn entry_reports_a_failure_as_errno_and_message() {
        set_errno(0);
        assert_eq!(
            entry(-1, || -> Result<c_int, Failure> {
                Err(Failure::new(libc::EBUSY, "busy here"))
            }),
            -1
        );
        assert_eq!(errno(), libc::EBUSY);
        assert_eq!(last_error(), "busy here");
        assert_eq!(
            entry(ptr::null_mut::<c_void>(), || Err(Error::NoFreeId.into())),
            ptr::null_mut()
        );
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(last_error(), Error::NoFreeId.to_string());
    }

    /// A message that fits is written without allocating (the short buffer); a longer one
    /// goes to the allocated one; whichever came last is what `tempora_last_error` reads.
    #[test]
    fn short_messages_fit_without_allocating_and_long_ones_still_read_whole() {
        let long = "x".repeat(2 * SHORT);
        assert_eq!(
            entry(-1, || -> Result<c_int, Failure> {
                Err(Error::CorruptSnapshot(long.clone()).into())
            }),
            -1
        );
        assert_eq!(last_error(), Error::CorruptSnapshot(long).to_string());
        assert!(!SHORT_ERROR.with(|s| s.borrow().newest));
        assert_eq!(entry(-1, || Err(Error::WouldDeadlock.into())), -1);
        assert!(SHORT_ERROR.with(|s| s.borrow().newest));
        assert_eq!(last_error(), Error::WouldDeadlock.to_string());
        assert_eq!(errno(), libc::EDEADLK);
    }

    #[test]
    fn out_of_memory_is_eagain_with_a_message_that_allocates_nothing() {
        set_errno(0);
        assert_eq!(entry(-1, || Err(Error::OutOfMemory.into())), -1);
        assert_eq!(errno(), libc::EAGAIN);
        // Written into the thread's fixed buffer, not an allocated string.
        assert!(SHORT_ERROR.with(|s| s.borrow().newest));
        assert_eq!(last_error(), Error::OutOfMemory.to_string());
        // A message with a NUL inside is kept, the NUL a space.
        assert_eq!(
            entry(-1, || -> Result<c_int, Failure> {
                Err(Failure::new(libc::EINVAL, "a\0b"))
            }),
            -1
        );
        assert_eq!(last_error(), "a b");
    }

    #[test]
    fn an_os_error_reports_the_chain_with_the_os_text() {
        set_errno(0);
        let os = std::io::Error::from_raw_os_error(libc::ENOENT);
        let text = os.to_string();
        assert_eq!(entry(-1, || Err(Error::from(os).into())), -1);
        assert_eq!(errno(), libc::ENOENT);
        assert_eq!(last_error(), format!("I/O error: {text}"));
    }

    #[test]
    fn a_panic_in_last_error_fails_it_without_aborting() {
        // Forced: the message is borrowed mutably, so reading it panics.
        set_errno(0);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let p = LAST_ERROR.with(|last| {
            let _held = last.borrow_mut();
            tempora_last_error()
        });
        std::panic::set_hook(hook);
        // SAFETY: tempora_last_error returns a NUL-terminated string, here a static one.
        assert_eq!(unsafe { CStr::from_ptr(p) }.to_bytes(), b"");
        assert_eq!(errno(), libc::ENOTRECOVERABLE);
    }

    #[test]
    fn entry_turns_a_panic_into_enotrecoverable() {
        set_errno(0);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = entry(-1, || -> Result<c_int, Failure> { panic!("inside") });
        std::panic::set_hook(hook);
        assert_eq!(r, -1);
        assert_eq!(errno(), libc::ENOTRECOVERABLE);
        assert!(last_error().contains("panic"), "{}", last_error());
    }
}
