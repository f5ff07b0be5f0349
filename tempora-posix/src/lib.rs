//! `libtempora-posix`: `timer_create`, `timer_settime`, `timer_gettime`, `timer_getoverrun`
//! and `timer_delete` with the C library's ABI (glibc's `timer_t`, a `void *`, and its
//! `struct sigevent`), served by tempora. A program built against the C library runs on
//! tempora unchanged with `LD_PRELOAD=libtempora-posix.so`, or when linked with
//! `-ltempora-posix` (before the C library, as `-l` options are): every translation unit's
//! calls, and those of the libraries it loads, come here.
//!
//! # Which timers go where
//! A timer on a clock tempora times (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`, `CLOCK_BOOTTIME`) is
//! a timer of tempora's process-wide default owner (`tempora_default_owner`, the one
//! `tempora_posix.h` maps onto), created with `tempora_posix.h`'s own sigevent mapping
//! (`src/create.c`). Every other clock ID (the CPU-time clocks, `pthread_getcpuclockid`'s and
//! `clock_getcpuclockid`'s included, `CLOCK_TAI`, the alarm clocks, and IDs no kernel knows)
//! goes to the C library's own `timer_create` ([`kernel`]), so the program keeps its kernel
//! timers and the kernel's errno for the clocks it refuses. The other four calls tell the two
//! kinds apart by the `timer_t` alone:
//!
//! ```text
//!  timer_t (64 bits)                      made by
//!  0x00000000_00000000 ..= 0x00000000_7fffffff   the C library: a kernel timer's ID
//!  0x74706f73_00000000 ..= 0x74706f73_7fffffff   here: "tpos" << 32 | tempora's ID
//!  0x80000000_00000000 ..= 0xffffffff_ffffffff   glibc >= 2.34: a SIGEV_THREAD timer
//!                                                (the sign bit and its helper thread)
//! ```
//!
//! [`TAG`] in the high half makes a tempora `timer_t` one that neither the kernel nor glibc
//! hands out, and one that reaches the C library's path only if this library is bypassed;
//! every other value (a kernel timer's, glibc's, a glibc before 2.34's heap pointer, or a
//! value no one made) goes to the C library, which answers as it would without this library. The low half is tempora's ID, so
//! `(int)(intptr_t)t` is the `si_timerid` of the timer's signals and a NULL sigevent's
//! `sival_int`, as with glibc's kernel timers. `tempora_posix.h` tags its `timer_t`s with
//! another tag ("temp"): a program that mixed the two (two copies of tempora, two default
//! owners) gets `EINVAL` for a timer of the other, never another timer.
//!
//! # What differs from the kernel's timers
//! `tempora_posix.h`'s comment holds the table, for this library and the header alike.
//!
//! # Fork, signals, threads
//! The library keeps no state of its own beyond the default owner it keeps for its calls and
//! [`kernel`]'s resolved function addresses (atomics, no lock). A `pthread_atfork` child
//! handler forgets the owner, so a child's first call takes the child's own default owner (a
//! new one, as `tempora_default_owner` makes in a child): the parent's timers are `EINVAL`
//! there, as the kernel's are. tempora's threads block every signal, so the signals of the
//! program's timers go to the program's threads.
//!
//! # The shared library's exports
//! Only the five calls: the link makes every symbol of the archives it links (the rlibs,
//! `src/create.c`'s) local (`--exclude-libs`, `build.rs`), tempora's C ABI (`tempora_*`)
//! included, so a program that also links `libtempora` keeps two apart copies and never has
//! one's calls bound into the other. The five are unversioned, which
//! lets them stand in for glibc's versioned `timer_create@GLIBC_2.34` & co. at run time (the
//! dynamic loader takes an unversioned definition for a versioned reference); a version
//! script that named them would make the preload miss them.

#[cfg(not(target_pointer_width = "64"))]
compile_error!("tempora-posix tags tempora IDs in a timer_t's high 32 bits: 64-bit targets only");

pub mod kernel;

use libc::{c_int, c_void, clockid_t, itimerspec, sigevent, timer_t};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use tempora::clock::ClockId;
use tempora_capi::{
    tempora_default_owner, tempora_owner_t, tempora_timer_delete, tempora_timer_getoverrun,
    tempora_timer_gettime, tempora_timer_settime, tempora_timer_t,
};

/// The high 32 bits of a tempora `timer_t`: "tpos" in ASCII, between the kernel's IDs
/// (`0..=INT_MAX`) and glibc's `SIGEV_THREAD` timers (sign bit set). `%p` shows it as
/// `0x74706f73000000NN`.
pub const TAG: u32 = 0x7470_6f73;

/// The `timer_t` of tempora timer `id` (`0..=INT_MAX`).
pub fn timer_of(id: tempora_timer_t) -> timer_t {
    (((TAG as u64) << 32) | u64::from(id as u32)) as usize as timer_t
}

/// The tempora ID `t` carries, or `None` for a `timer_t` this library did not make.
#[inline]
pub fn tempora_id(t: timer_t) -> Option<tempora_timer_t> {
    let v = t as usize as u64;
    let low = v as u32;
    ((v >> 32) as u32 == TAG && low <= i32::MAX as u32).then_some(low as tempora_timer_t)
}

/// The default owner (`tempora_default_owner`), kept for the calls: that call's own checks
/// (the process-wide service, its fork generation, its `catch_unwind`) cost each call as much
/// as the rest of the drop-in's work. NULL until the first call, and again in a forked child
/// ([`forked`]), whose first call then takes the child's own default owner.
static OWNER: AtomicPtr<tempora_owner_t> = AtomicPtr::new(ptr::null_mut());

/// Whether [`forked`] is registered (here or in a parent: `pthread_atfork`'s handlers are
/// inherited). Not a `Once`: a fork while another thread ran one would leave it running for
/// ever in the child.
static WATCHED: AtomicBool = AtomicBool::new(false);

/// `pthread_atfork`'s child handler: the parent's owner is no owner of the child's.
extern "C" fn forked() {
    // Relaxed: the child has one thread when this runs, before `fork` returns in it.
    OWNER.store(ptr::null_mut(), Ordering::Relaxed);
}

/// The default owner, or NULL (with `errno`) if it cannot be made.
#[inline]
fn owner() -> *mut tempora_owner_t {
    // Acquire: pairs with the Release in `owner_slow`, so the owner's fields are seen.
    let o = OWNER.load(Ordering::Acquire);
    if o.is_null() {
        owner_slow()
    } else {
        o
    }
}

/// The default owner as `timer_settime`, `_gettime`, `_getoverrun` and `_delete` need it:
/// only one a `timer_create` of this process made. None made yet (or a forked child's first
/// call) is NULL, which those calls fail with `EINVAL` as the kernel does for a timer it does
/// not have; so they never make a service, which a signal handler's call must not (it
/// allocates and starts threads). Only if forks cannot be watched is the owner asked for.
#[inline]
fn made_owner() -> *mut tempora_owner_t {
    // Acquire: as in `owner`.
    let o = OWNER.load(Ordering::Acquire);
    if o.is_null() && !WATCHED.load(Ordering::Relaxed) {
        return owner_slow();
    }
    o
}

#[cold]
#[inline(never)]
fn owner_slow() -> *mut tempora_owner_t {
    if !WATCHED.load(Ordering::Relaxed) {
        // SAFETY: registers a child handler that only stores to an atomic.
        if unsafe { libc::pthread_atfork(None, None, Some(forked)) } != 0 {
            // No memory to watch forks with: not kept, asked each call.
            return tempora_default_owner();
        }
        WATCHED.store(true, Ordering::Relaxed);
    }
    // The handler is registered before the owner is kept: a fork after this store clears it.
    let o = tempora_default_owner();
    if !o.is_null() {
        // Release: pairs with the Acquire in `owner`.
        OWNER.store(o, Ordering::Release);
    }
    o
}

extern "C" {
    /// `src/create.c`: `tempora_posix.h`'s `tempora_posix_create_on` (`owner` a
    /// `tempora_owner_t *`, opaque to C).
    fn tempora_posix_dropin_create(
        owner: *mut c_void,
        clock: clockid_t,
        sev: *mut sigevent,
        timerid: *mut tempora_timer_t,
    ) -> c_int;
}

/// `timer_create(2)`: a tempora timer on `CLOCK_REALTIME`, `CLOCK_MONOTONIC` or
/// `CLOCK_BOOTTIME`, the C library's on any other clock ID (see the crate doc). Returns 0, or
/// -1 with `errno` as the kernel's (`tempora_posix.h`'s table lists the few differences).
///
/// # Safety
/// The C library's contract: `sev` is NULL or a readable sigevent, `timerid` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn timer_create(
    clock: clockid_t,
    sev: *mut sigevent,
    timerid: *mut timer_t,
) -> c_int {
    if ClockId::from_raw(clock).is_none() {
        // SAFETY: the caller's contract, passed on.
        return unsafe { kernel::timer_create(clock, sev, timerid) };
    }
    let mut id: tempora_timer_t = 0;
    // A NULL timerid stays NULL, for the create to fail with EFAULT in Linux's order.
    let out = if timerid.is_null() {
        ptr::null_mut()
    } else {
        &raw mut id
    };
    // SAFETY: `sev` is the caller's (NULL or readable), `out` NULL or a local.
    if unsafe { tempora_posix_dropin_create(owner().cast(), clock, sev, out) } == -1 {
        return -1;
    }
    // SAFETY: non-NULL (the create succeeded) and writable (the caller's contract).
    unsafe { timerid.write(timer_of(id)) };
    0
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
    match tempora_id(timerid) {
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
#[no_mangle]
pub unsafe extern "C" fn timer_gettime(timerid: timer_t, curr: *mut itimerspec) -> c_int {
    match tempora_id(timerid) {
        // SAFETY: as in timer_settime.
        Some(id) => unsafe { tempora_timer_gettime(made_owner(), id, curr) },
        // SAFETY: the caller's contract, passed on.
        None => unsafe { kernel::timer_gettime(timerid, curr) },
    }
}

/// `timer_getoverrun(2)` of the timer `timerid` names.
///
/// # Safety
/// None beyond the C library's: any value may be passed.
#[no_mangle]
pub unsafe extern "C" fn timer_getoverrun(timerid: timer_t) -> c_int {
    match tempora_id(timerid) {
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
#[no_mangle]
pub unsafe extern "C" fn timer_delete(timerid: timer_t) -> c_int {
    match tempora_id(timerid) {
        // SAFETY: the default owner is NULL (EINVAL) or lives for the process.
        Some(id) => unsafe { tempora_timer_delete(made_owner(), id) },
        // SAFETY: any value may be passed to the C library's call.
        None => unsafe { kernel::timer_delete(timerid) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tempora_timer_t_round_trips_and_no_other_is_one() {
        for id in [0, 1, 77, i32::MAX] {
            let t = timer_of(id);
            assert_eq!(tempora_id(t), Some(id));
            assert_eq!(t as usize >> 32, TAG as usize);
        }
        // The kernel's IDs, glibc's SIGEV_THREAD timers, tempora_posix.h's tag, NULL.
        for v in [
            0usize,
            5,
            i32::MAX as usize,
            0x8000_0000_0000_1234,
            usize::MAX,
            0x7465_6d70_0000_0003,
            (TAG as usize) << 32 | 0x8000_0000,
        ] {
            assert_eq!(tempora_id(v as timer_t), None, "{v:#x}");
        }
    }
}
