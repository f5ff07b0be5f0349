//! Why a call failed, and the boundary every call runs inside: a [`Failure`] (an errno and a
//! message), [`entry`] (runs a call's body, sets `errno` and the thread's message on failure,
//! turns a panic into `ENOTRECOVERABLE`), and `tempora_last_error`, which reads the message.
//!
//! # Invariants
//! - `errno` and the message are written only by a failed call (`report`); a call that
//!   succeeds leaves both alone.
//! - Nothing unwinds out of [`entry`]: a panic in a body is caught there.

use libc::{c_char, c_int};
use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use tempora::Error;

/// Why a call failed: the errno it sets and the message `tempora_last_error` returns.
pub(crate) struct Failure {
    errno: c_int,
    message: Cow<'static, str>,
}

impl Failure {
    pub(crate) fn new(errno: c_int, message: &'static str) -> Failure {
        Failure {
            errno,
            message: Cow::Borrowed(message),
        }
    }
}

impl From<Error> for Failure {
    /// The message is the error's chain, each link's `Display` joined by ": " ("I/O error:
    /// No such file or directory (os error 2)"): an error's `Display` leaves its source's
    /// text to its source, and a C caller has only this string to read.
    fn from(e: Error) -> Failure {
        if e == Error::OutOfMemory {
            // No allocation on the way out of a call that found no memory.
            return Failure::new(e.errno(), "out of memory (EAGAIN)");
        }
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Failure {
            errno: e.errno(),
            message: Cow::Owned(message),
        }
    }
}

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<Cow<'static, CStr>> = const { RefCell::new(Cow::Borrowed(c"")) };
}

/// The message as a C string (a NUL inside becomes a space), allocated fallibly: `None` if the
/// allocator has no memory for it.
fn c_message(message: &str) -> Option<CString> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(message.len() + 1).ok()?;
    bytes.extend(message.bytes().map(|b| if b == 0 { b' ' } else { b }));
    // No NUL is left, and the capacity holds the terminator: no reallocation.
    CString::new(bytes).ok()
}

/// Sets `errno` and the thread's last message. Cold: only failed calls get here.
#[cold]
#[inline(never)]
fn report(f: Failure) {
    let message = match c_message(&f.message) {
        Some(owned) => Cow::Owned(owned),
        None => Cow::Borrowed(c"out of memory: the message of this failure could not be kept"),
    };
    // The thread-local is gone only while the thread exits, and borrowed only by a call that
    // panicked while reading it: the message is lost then, the errno is still set.
    let _ = LAST_ERROR.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = message;
        }
    });
    // SAFETY: `__errno_location` returns the calling thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = f.errno };
}

/// Runs an entry point's body: its value on success; -1 (`fail`) with errno and the message
/// set on failure; a panic is caught and fails the call with `ENOTRECOVERABLE`.
///
/// The body's `Result` is taken apart inside the unwinding boundary, so what crosses it is
/// `()`: `catch_unwind` passes its closure's result through a union in memory, and a 32-byte
/// `Result<T, Failure>` written there in pieces and read back whole stalled store-to-load
/// forwarding on every call (a few ns of the ABI's cost, measured by `bench --suite capi`).
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
        Ok(LAST_ERROR
            .try_with(|last| last.borrow().as_ptr())
            .unwrap_or(c"".as_ptr()))
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

    #[test]
    fn out_of_memory_is_eagain_with_a_message_that_allocates_nothing() {
        set_errno(0);
        let f = Failure::from(Error::OutOfMemory);
        assert!(matches!(f.message, Cow::Borrowed(_)));
        assert_eq!(entry(-1, || Err(f)), -1);
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(last_error(), "out of memory (EAGAIN)");
        // A message with a NUL inside is kept, the NUL a space.
        assert_eq!(c_message("a\0b").unwrap().to_bytes(), b"a b");
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
