//! The C library's own timer calls, for the timers tempora does not serve, and its
//! `sigtimedwait`, which the drop-in's signal waits call (`waits.rs`): found with
//! `dlsym(RTLD_NEXT, name)` (the definitions the program would have called without this
//! library: glibc's, with its `SIGEV_THREAD` helper thread and its `timer_t` encoding), or,
//! where there are none to find (a fully static program), the system calls themselves.
//!
//! # The static case
//! Linked from an archive (`libtempora.a`, `libtempora-posix.a`) into a dynamically linked
//! program, `RTLD_NEXT` finds the C library's calls as it does from a shared library. In a `-static` program there is
//! no dynamic loader to ask: the calls go to the kernel directly, `timer_t` being the kernel's
//! ID, as glibc makes it for every sigevent but `SIGEV_THREAD`; a `SIGEV_THREAD` timer on a
//! clock tempora does not time, which only the C library's helper thread can serve, is then
//! refused with the kernel's `EINVAL`.
//!
//! # Fork, threads and signal handlers
//! The addresses are resolved by the first `timer_create` on a clock tempora does not time,
//! all five at once, and kept in atomics: no lock, so a fork at any moment leaves nothing
//! held, and two threads that resolve one at once store the same value. `timer_settime`,
//! `timer_gettime` and `timer_getoverrun` are async-signal-safe in POSIX; since a kernel
//! timer's `timer_t` comes from that create, their calls here (from a signal handler too)
//! only read the atomics, never `dlsym`, which is not.

use libc::{
    c_int, c_long, c_void, clockid_t, itimerspec, sigevent, siginfo_t, sigset_t, timer_t, timespec,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One C library function: its name and its address once resolved.
struct Next {
    name: &'static CStr,
    /// 0: not resolved yet; [`ABSENT`]: there is none (the system call is made instead).
    addr: AtomicUsize,
}

/// The address of a function `dlsym` did not find.
const ABSENT: usize = 1;

impl Next {
    const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The function's address, or `None` when the program has no C library to ask.
    fn get(&self) -> Option<usize> {
        // Relaxed: the value is an address in a library mapped before this one asked for it;
        // nothing else is published with it.
        let mut a = self.addr.load(Ordering::Relaxed);
        if a == 0 {
            // SAFETY: a NUL-terminated name; RTLD_NEXT searches the objects loaded after the
            // caller's.
            let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
            a = if p.is_null() { ABSENT } else { p as usize };
            self.addr.store(a, Ordering::Relaxed);
        }
        (a != ABSENT).then_some(a)
    }
}

static CREATE: Next = Next::new(c"timer_create");
static SETTIME: Next = Next::new(c"timer_settime");
static GETTIME: Next = Next::new(c"timer_gettime");
static GETOVERRUN: Next = Next::new(c"timer_getoverrun");
static DELETE: Next = Next::new(c"timer_delete");
static SIGTIMEDWAIT: Next = Next::new(c"sigtimedwait");

/// A system call's result as the C library returns it: its value, or -1 with `errno` set
/// (`libc::syscall` sets it).
fn int(r: c_long) -> c_int {
    r as c_int
}

/// A `timer_t` as the kernel's ID, truncated as glibc truncates it.
fn kernel_id(t: timer_t) -> c_int {
    t as usize as c_int
}

/// The C library's `timer_create`.
///
/// # Safety
/// The C library's contract: `sev` is NULL or readable, `timerid` NULL or writable.
pub unsafe fn timer_create(clock: clockid_t, sev: *mut sigevent, timerid: *mut timer_t) -> c_int {
    type F = unsafe extern "C" fn(clockid_t, *mut sigevent, *mut timer_t) -> c_int;
    // The other four now, for the calls on this timer to find them resolved.
    for next in [&SETTIME, &GETTIME, &GETOVERRUN, &DELETE] {
        next.get();
    }
    if let Some(a) = CREATE.get() {
        // SAFETY: `a` is the C library's timer_create, of this type; the caller's contract.
        return unsafe { std::mem::transmute::<usize, F>(a)(clock, sev, timerid) };
    }
    let mut id: c_int = 0;
    let out: *mut c_int = if timerid.is_null() {
        std::ptr::null_mut()
    } else {
        &raw mut id
    };
    // SAFETY: the kernel reads `sev` (NULL or readable) and writes `out` (NULL or a local);
    // the kernel's sigevent is the C library's, but for SIGEV_THREAD, which it refuses.
    let r = int(unsafe { libc::syscall(libc::SYS_timer_create, clock, sev, out) });
    if r == 0 {
        // SAFETY: non-NULL (the kernel wrote `id` through it) and writable (the contract).
        unsafe { timerid.write(id as isize as usize as *mut c_void) };
    }
    r
}

/// The C library's `timer_settime`.
///
/// # Safety
/// The C library's contract: `new` NULL or readable, `old` NULL or writable.
pub unsafe fn timer_settime(
    t: timer_t,
    flags: c_int,
    new: *const itimerspec,
    old: *mut itimerspec,
) -> c_int {
    type F = unsafe extern "C" fn(timer_t, c_int, *const itimerspec, *mut itimerspec) -> c_int;
    match SETTIME.get() {
        // SAFETY: the C library's timer_settime, of this type; the caller's contract.
        Some(a) => unsafe { std::mem::transmute::<usize, F>(a)(t, flags, new, old) },
        None => {
            // SAFETY: the kernel checks the ID and the pointers (EFAULT).
            let r =
                unsafe { libc::syscall(libc::SYS_timer_settime, kernel_id(t), flags, new, old) };
            int(r)
        }
    }
}

/// The C library's `timer_gettime`.
///
/// # Safety
/// The C library's contract: `curr` NULL or writable.
pub unsafe fn timer_gettime(t: timer_t, curr: *mut itimerspec) -> c_int {
    type F = unsafe extern "C" fn(timer_t, *mut itimerspec) -> c_int;
    match GETTIME.get() {
        // SAFETY: the C library's timer_gettime, of this type; the caller's contract.
        Some(a) => unsafe { std::mem::transmute::<usize, F>(a)(t, curr) },
        // SAFETY: the kernel checks the ID and the pointer (EFAULT).
        None => int(unsafe { libc::syscall(libc::SYS_timer_gettime, kernel_id(t), curr) }),
    }
}

/// The C library's `timer_getoverrun`.
///
/// # Safety
/// None beyond the C library's (glibc follows a `timer_t` with the sign bit set to its
/// helper thread's, as it would without this library).
pub unsafe fn timer_getoverrun(t: timer_t) -> c_int {
    type F = unsafe extern "C" fn(timer_t) -> c_int;
    match GETOVERRUN.get() {
        // SAFETY: the C library's timer_getoverrun, of this type.
        Some(a) => unsafe { std::mem::transmute::<usize, F>(a)(t) },
        // SAFETY: the kernel checks the ID.
        None => int(unsafe { libc::syscall(libc::SYS_timer_getoverrun, kernel_id(t)) }),
    }
}

/// The C library's `timer_delete`.
///
/// # Safety
/// As [`timer_getoverrun`].
pub unsafe fn timer_delete(t: timer_t) -> c_int {
    type F = unsafe extern "C" fn(timer_t) -> c_int;
    match DELETE.get() {
        // SAFETY: the C library's timer_delete, of this type.
        Some(a) => unsafe { std::mem::transmute::<usize, F>(a)(t) },
        // SAFETY: the kernel checks the ID.
        None => int(unsafe { libc::syscall(libc::SYS_timer_delete, kernel_id(t)) }),
    }
}

/// The C library's `sigtimedwait` (for the drop-in's signal waits, `waits.rs`): a
/// cancellation point there, and its `siginfo_t` as the program would have read it. In a
/// program with no C library to ask, the system call (not a cancellation point).
///
/// Declared `C-unwind`: a thread cancelled inside it unwinds through its Rust callers, which
/// hold nothing that needs dropping there (`waits.rs`, "Cancellation").
///
/// # Safety
/// The C library's contract: `set` readable, `info` NULL or writable, `timeout` NULL or
/// readable.
pub unsafe fn sigtimedwait(
    set: *const sigset_t,
    info: *mut siginfo_t,
    timeout: *const timespec,
) -> c_int {
    type F = unsafe extern "C-unwind" fn(*const sigset_t, *mut siginfo_t, *const timespec) -> c_int;
    match SIGTIMEDWAIT.get() {
        // SAFETY: the C library's sigtimedwait, of this type; the caller's contract.
        Some(a) => unsafe { std::mem::transmute::<usize, F>(a)(set, info, timeout) },
        None => {
            // The kernel's sigset is 64 bits (`_NSIG / 8` bytes), the C library's first word.
            const KERNEL_SIGSET: usize = 8;
            // SAFETY: the kernel checks the pointers (EFAULT) and the timeout (EINVAL).
            int(unsafe {
                libc::syscall(libc::SYS_rt_sigtimedwait, set, info, timeout, KERNEL_SIGSET)
            })
        }
    }
}
