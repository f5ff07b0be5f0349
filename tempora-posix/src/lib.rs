//! `libtempora-posix`: `timer_create`, `timer_settime`, `timer_gettime`, `timer_getoverrun`
//! and `timer_delete` with the C library's ABI (glibc's `timer_t`, a `void *`, and its
//! `struct sigevent`), served by tempora. A program built against the C library runs on
//! tempora unchanged with `LD_PRELOAD=libtempora-posix.so`, or when linked with
//! `-ltempora-posix` (before the C library, as `-l` options are): every translation unit's
//! calls, and those of the libraries it loads, come here.
//!
//! # Which timers go where
//! As for `tempora_posix.h`: both are `tempora_capi::posix` (its doc has the routing by clock
//! and by `timer_t`, the tag, the default owner and its fork rule), called here with
//! [`Maker::DropIn`], whose tag ("tpos", `0x74706f73000000NN`) `tempora_capi::posix::timer_tag`
//! gives. What differs from the kernel's timers is the `timers` module doc's table, the one
//! table of differences.
//!
//! # The signal waits
//! `sigwait`, `sigwaitinfo` and `sigtimedwait` are the C library's, but a thread that waits
//! for the signal of one of tempora's timers takes the driver's place while it waits, so its
//! timer's expiry wakes it alone, as a kernel timer's does (`tempora_capi::waits`).
//!
//! # The shared library's exports
//! Only the five timer calls and the three waits: the link makes every symbol of the
//! archives it links (the rlibs) local (`--exclude-libs`, `build.rs`), tempora's C ABI
//! (`tempora_*`) included, so a program that also links `libtempora` keeps two apart copies
//! and never has one's calls bound into the other. The eight are unversioned, which lets
//! them stand in for glibc's versioned `timer_create@GLIBC_2.34`, `sigwait@GLIBC_2.2.5` & co.
//! at run time (the dynamic loader takes an unversioned definition for a versioned
//! reference); a version script that named them would make the preload miss them.

use libc::{c_int, clockid_t, itimerspec, sigevent, siginfo_t, sigset_t, timer_t, timespec};
use tempora_capi::posix::{self, Maker};

/// `timer_create(2)`: a tempora timer on `CLOCK_REALTIME`, `CLOCK_MONOTONIC` or
/// `CLOCK_BOOTTIME`, the C library's on any other clock ID (see the crate doc). Returns 0, or
/// -1 with `errno` as the kernel's (the `timers` module doc's table lists the few differences).
///
/// # Safety
/// The C library's contract: `sev` is NULL or a readable sigevent, `timerid` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn timer_create(
    clock: clockid_t,
    sev: *mut sigevent,
    timerid: *mut timer_t,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { posix::create(Maker::DropIn, clock, sev, timerid) }
}

/// `timer_settime(2)` on the timer `timerid` names (tempora's, or the C library's).
///
/// # Safety
/// The C library's contract: `new` NULL or readable, `old` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn timer_settime(
    timerid: timer_t,
    flags: c_int,
    new: *const itimerspec,
    old: *mut itimerspec,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { posix::settime(Maker::DropIn, timerid, flags, new, old) }
}

/// `timer_gettime(2)` on the timer `timerid` names.
///
/// # Safety
/// The C library's contract: `curr` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn timer_gettime(timerid: timer_t, curr: *mut itimerspec) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { posix::gettime(Maker::DropIn, timerid, curr) }
}

/// `timer_getoverrun(2)` of the timer `timerid` names.
///
/// # Safety
/// None beyond the C library's: any value may be passed.
#[no_mangle]
pub unsafe extern "C" fn timer_getoverrun(timerid: timer_t) -> c_int {
    // SAFETY: any value may be passed.
    unsafe { posix::getoverrun(Maker::DropIn, timerid) }
}

/// `timer_delete(2)` of the timer `timerid` names.
///
/// # Safety
/// None beyond the C library's: any value may be passed.
#[no_mangle]
pub unsafe extern "C" fn timer_delete(timerid: timer_t) -> c_int {
    // SAFETY: any value may be passed.
    unsafe { posix::delete(Maker::DropIn, timerid) }
}

/// `sigtimedwait(2)`: the C library's, led while it waits for a tempora timer's signal (see
/// the crate doc). `C-unwind`: a cancellation point, as the C library's is.
///
/// # Safety
/// The C library's contract: `set` readable, `info` NULL or writable, `timeout` NULL or
/// readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigtimedwait(
    set: *const sigset_t,
    info: *mut siginfo_t,
    timeout: *const timespec,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { tempora_capi::waits::sigtimedwait(set, info, timeout) }
}

/// `sigwaitinfo(2)`, as [`sigtimedwait`] without a timeout.
///
/// # Safety
/// The C library's contract: `set` readable, `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigwaitinfo(set: *const sigset_t, info: *mut siginfo_t) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { tempora_capi::waits::sigwaitinfo(set, info) }
}

/// `sigwait(3)`, as [`sigwaitinfo`] until a signal comes.
///
/// # Safety
/// The C library's contract: `set` readable, `sig` writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { tempora_capi::waits::sigwait(set, sig) }
}
