//! The POSIX calls with the C library's types (`timer_t`, `struct sigevent`): the one
//! implementation behind both ways of switching a program, `tempora_posix.h`'s calls
//! (`tempora_posix_timer_create` & co., exported by `libtempora`) and the drop-in's exports
//! (crate tempora-posix, which calls [`create`] & co. with [`Maker::DropIn`]).
//!
//! # Which timers go where
//! A timer on a clock tempora times (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`, `CLOCK_BOOTTIME`) is
//! a timer of the process-wide default owner (`tempora_default_owner`), its sigevent mapped
//! by `convert.rs` (`notify_of_sigevent`). Every other clock ID (the CPU-time clocks,
//! `pthread_getcpuclockid`'s and `clock_getcpuclockid`'s included, `CLOCK_TAI`, the alarm
//! clocks, and IDs no kernel knows) goes to the C library's own `timer_create`
//! (`kernel.rs`), so the program keeps its kernel timers and the kernel's errno for the
//! clocks it refuses. The other four calls tell the two kinds apart by the `timer_t` alone:
//!
//! ```text
//!  timer_t (64 bits)                             made by
//!  0x00000000_00000000 ..= 0x00000000_7fffffff   the C library: a kernel timer's ID
//!  0x74656d70_00000000 ..= 0x74656d70_7fffffff   tempora_posix.h: "temp" << 32 | ID
//!  0x74706f73_00000000 ..= 0x74706f73_7fffffff   the drop-in: "tpos" << 32 | tempora's ID
//!  0x80000000_00000000 ..= 0xffffffff_ffffffff   glibc >= 2.34: a SIGEV_THREAD timer
//!                                                (the sign bit and its helper thread)
//! ```
//!
//! [`timer_tag`] is the high half: a value that neither the kernel nor glibc hands out, so
//! every other `timer_t` (a kernel timer's, glibc's, a glibc before 2.34's heap pointer, or a
//! value no one made) goes to the C library, which answers as it would without tempora. The
//! low half is tempora's ID, so `(int)(intptr_t)t` is the `si_timerid` of the timer's signals
//! and a NULL sigevent's `sival_int`, as with glibc's kernel timers. The tag says which copy
//! of tempora made the timer: a program that includes `tempora_posix.h` and is also run with
//! the drop-in preloaded holds two copies (the drop-in's is linked in privately), each with
//! its own default owner, and a `timer_t` of one is the C library's to the other (`EINVAL`),
//! never another timer.
//!
//! # The default owner, fork and signal handlers
//! A create takes `tempora_default_owner`, whose fork rule is the process-wide service's
//! (`tempora::time::try_global`: a forked child's first call makes its own, so the parent's
//! timers are `EINVAL` there, as the kernel's are). `timer_settime`, `_gettime`,
//! `_getoverrun` and `_delete` take only an owner a create of this process made
//! (`made_owner`): they never make a service, which a signal handler's call must not (it
//! allocates and starts threads).

use crate::convert::notify_of_sigevent;
use crate::kernel;
use crate::service::{made_default_owner, tempora_default_owner};
use crate::timers::{
    create_on, tempora_timer_delete, tempora_timer_getoverrun, tempora_timer_gettime,
    tempora_timer_settime,
};
use crate::types::{tempora_owner_t, tempora_timer_t};
use libc::{c_int, clockid_t, itimerspec, sigevent, timer_t};
use std::ptr;
use tempora::clock::ClockId;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("tempora tags its IDs in a timer_t's high 32 bits: 64-bit targets only");

/// Which way of switching a program made a `timer_t`: its [`timer_tag`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maker {
    /// `tempora_posix.h`'s calls (`libtempora`).
    Header,
    /// The drop-in's exports (`libtempora-posix`).
    DropIn,
}

/// The high 32 bits of the `timer_t`s `maker` makes: ASCII "temp" for the header's, "tpos"
/// for the drop-in's, both between the kernel's IDs (`0..=INT_MAX`) and glibc's `SIGEV_THREAD`
/// timers (sign bit set). `%p` shows them as `0x74656d70000000NN` and `0x74706f73000000NN`.
pub const fn timer_tag(maker: Maker) -> u32 {
    u32::from_be_bytes(match maker {
        Maker::Header => *b"temp",
        Maker::DropIn => *b"tpos",
    })
}

/// The `timer_t` `maker` gives tempora timer `id` (`0..=INT_MAX`).
pub fn timer_of(maker: Maker, id: tempora_timer_t) -> timer_t {
    ((u64::from(timer_tag(maker)) << 32) | u64::from(id as u32)) as usize as timer_t
}

/// The tempora ID `t` carries, or `None` for a `timer_t` `maker` did not make.
#[inline]
pub fn tempora_id(maker: Maker, t: timer_t) -> Option<tempora_timer_t> {
    let v = t as usize as u64;
    let low = v as u32;
    ((v >> 32) as u32 == timer_tag(maker) && low <= i32::MAX as u32)
        .then_some(low as tempora_timer_t)
}

/// The default owner, or NULL (with `errno`) if it cannot be made.
#[inline]
fn owner() -> *mut tempora_owner_t {
    tempora_default_owner()
}

/// The default owner as the calls after create need it: only one a create of this process
/// made (`service.rs`'s `made_default_owner`), NULL otherwise, which those calls fail with
/// `EINVAL` as the kernel does for a timer it does not have.
#[inline]
fn made_owner() -> *mut tempora_owner_t {
    made_default_owner()
}

/// `timer_create(2)`: a tempora timer on `CLOCK_REALTIME`, `CLOCK_MONOTONIC` or
/// `CLOCK_BOOTTIME`, tagged for `maker`; the C library's on any other clock ID. Returns 0,
/// or -1 with `errno` as the kernel's, checked in its order: the clock, the sigevent (the
/// kind, then the thread, then the signal number), then `timerid`.
///
/// # Safety
/// The C library's contract: `sev` is NULL or a readable sigevent, `timerid` NULL or writable.
#[inline]
pub unsafe fn create(
    maker: Maker,
    clock: clockid_t,
    sev: *mut sigevent,
    timerid: *mut timer_t,
) -> c_int {
    if ClockId::from_raw(clock).is_none() {
        // SAFETY: the caller's contract, passed on.
        return unsafe { kernel::timer_create(clock, sev, timerid) };
    }
    let owner = owner();
    if owner.is_null() {
        // errno says why (EAGAIN: its driver thread cannot start).
        return -1;
    }
    let mut id: tempora_timer_t = 0;
    // A NULL timerid stays NULL, for the create to fail with EFAULT in Linux's order.
    let out = if timerid.is_null() {
        ptr::null_mut()
    } else {
        &raw mut id
    };
    // SAFETY: `sev` is the caller's (NULL or readable).
    let notify = || unsafe { notify_of_sigevent(sev) };
    // SAFETY: the default owner lives for the process; `out` is NULL or a local.
    let r = unsafe { create_on(owner, clock, notify, out) };
    if r == -1 {
        return -1;
    }
    // SAFETY: `sev` is the caller's (NULL or readable).
    unsafe { crate::waits::note_timer_signal(sev) };
    // SAFETY: non-NULL (the create succeeded) and writable (the caller's contract).
    unsafe { timerid.write(timer_of(maker, id)) };
    0
}

/// `timer_settime(2)` on the timer `timerid` names (tempora's, or the C library's).
///
/// # Safety
/// The C library's contract: `new` NULL or readable, `old` NULL or writable.
#[inline]
pub unsafe fn settime(
    maker: Maker,
    timerid: timer_t,
    flags: c_int,
    new: *const itimerspec,
    old: *mut itimerspec,
) -> c_int {
    match tempora_id(maker, timerid) {
        // SAFETY: the default owner is NULL (EINVAL) or lives for the process; the pointers
        // are the caller's, as tempora_timer_settime's contract asks.
        Some(id) => unsafe { tempora_timer_settime(made_owner(), id, flags, new, old) },
        // SAFETY: the caller's contract, passed on.
        None => unsafe { kernel::timer_settime(timerid, flags, new, old) },
    }
}

/// `timer_gettime(2)` on the timer `timerid` names.
///
/// # Safety
/// The C library's contract: `curr` NULL or writable.
#[inline]
pub unsafe fn gettime(maker: Maker, timerid: timer_t, curr: *mut itimerspec) -> c_int {
    match tempora_id(maker, timerid) {
        // SAFETY: as in `settime`.
        Some(id) => unsafe { tempora_timer_gettime(made_owner(), id, curr) },
        // SAFETY: the caller's contract, passed on.
        None => unsafe { kernel::timer_gettime(timerid, curr) },
    }
}

/// `timer_getoverrun(2)` of the timer `timerid` names.
///
/// # Safety
/// None beyond the C library's: any value may be passed.
#[inline]
pub unsafe fn getoverrun(maker: Maker, timerid: timer_t) -> c_int {
    match tempora_id(maker, timerid) {
        // SAFETY: the default owner is NULL (EINVAL) or lives for the process.
        Some(id) => unsafe { tempora_timer_getoverrun(made_owner(), id) },
        // SAFETY: any value may be passed to the C library's call.
        None => unsafe { kernel::timer_getoverrun(timerid) },
    }
}

/// `timer_delete(2)` of the timer `timerid` names.
///
/// # Safety
/// None beyond the C library's: any value may be passed.
#[inline]
pub unsafe fn delete(maker: Maker, timerid: timer_t) -> c_int {
    match tempora_id(maker, timerid) {
        // SAFETY: the default owner is NULL (EINVAL) or lives for the process.
        Some(id) => unsafe { tempora_timer_delete(made_owner(), id) },
        // SAFETY: any value may be passed to the C library's call.
        None => unsafe { kernel::timer_delete(timerid) },
    }
}

/// `tempora_posix.h`'s `timer_create`: [`create`] for [`Maker::Header`].
///
/// # Safety
/// As [`create`].
#[no_mangle]
pub unsafe extern "C" fn tempora_posix_timer_create(
    clock: clockid_t,
    sev: *mut sigevent,
    timerid: *mut timer_t,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { create(Maker::Header, clock, sev, timerid) }
}

/// `tempora_posix.h`'s `timer_settime`: [`settime`] for [`Maker::Header`].
///
/// # Safety
/// As [`settime`].
#[no_mangle]
pub unsafe extern "C" fn tempora_posix_timer_settime(
    timerid: timer_t,
    flags: c_int,
    new: *const itimerspec,
    old: *mut itimerspec,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { settime(Maker::Header, timerid, flags, new, old) }
}

/// `tempora_posix.h`'s `timer_gettime`: [`gettime`] for [`Maker::Header`].
///
/// # Safety
/// As [`gettime`].
#[no_mangle]
pub unsafe extern "C" fn tempora_posix_timer_gettime(
    timerid: timer_t,
    curr: *mut itimerspec,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { gettime(Maker::Header, timerid, curr) }
}

/// `tempora_posix.h`'s `timer_getoverrun`: [`getoverrun`] for [`Maker::Header`].
///
/// # Safety
/// As [`getoverrun`].
#[no_mangle]
pub unsafe extern "C" fn tempora_posix_timer_getoverrun(timerid: timer_t) -> c_int {
    // SAFETY: any value may be passed.
    unsafe { getoverrun(Maker::Header, timerid) }
}

/// `tempora_posix.h`'s `timer_delete`: [`delete`] for [`Maker::Header`].
///
/// # Safety
/// As [`delete`].
#[no_mangle]
pub unsafe extern "C" fn tempora_posix_timer_delete(timerid: timer_t) -> c_int {
    // SAFETY: any value may be passed.
    unsafe { delete(Maker::Header, timerid) }
}

/// `tempora_posix.h`'s `tempora_posix_timer_id`: the tempora ID of a `timer_t` the header's
/// `timer_create` made, or -1 for any other.
#[no_mangle]
pub extern "C" fn tempora_posix_timer_id(t: timer_t) -> tempora_timer_t {
    tempora_id(Maker::Header, t).unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tempora_timer_t_round_trips_and_no_other_is_one() {
        for maker in [Maker::Header, Maker::DropIn] {
            for id in [0, 1, 77, i32::MAX] {
                let t = timer_of(maker, id);
                assert_eq!(tempora_id(maker, t), Some(id));
                assert_eq!(t as usize >> 32, timer_tag(maker) as usize);
            }
        }
        let other = |m| match m {
            Maker::Header => Maker::DropIn,
            Maker::DropIn => Maker::Header,
        };
        for maker in [Maker::Header, Maker::DropIn] {
            // The kernel's IDs, glibc's SIGEV_THREAD timers, the other maker's, NULL.
            for v in [
                0usize,
                5,
                i32::MAX as usize,
                0x8000_0000_0000_1234,
                usize::MAX,
                timer_of(other(maker), 3) as usize,
                (timer_tag(maker) as usize) << 32 | 0x8000_0000,
            ] {
                assert_eq!(tempora_id(maker, v as timer_t), None, "{v:#x}");
            }
        }
        assert_eq!(timer_tag(Maker::Header), 0x7465_6d70);
        assert_eq!(timer_tag(Maker::DropIn), 0x7470_6f73);
    }
}
