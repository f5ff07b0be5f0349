//! The file descriptors an event loop waits on: an eventfd (an owner's readiness fd) and a
//! timerfd (an alarm's, the realtime-clock watch) and a driver's `epoll` instance, as thin
//! calls on `OwnedFd`. None blocks and none allocates.

// Loom models make no fd: the alarm's system calls are compiled out there.
#![cfg_attr(loom, allow(dead_code))]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A non-blocking, close-on-exec eventfd with its counter at 0 (not readable).
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with constant flags; it returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    owned(fd)
}

/// A non-blocking, close-on-exec timerfd on `clock`, disarmed.
pub(crate) fn timerfd(clock: libc::clockid_t, nonblock: bool) -> io::Result<OwnedFd> {
    let flags = libc::TFD_CLOEXEC | if nonblock { libc::TFD_NONBLOCK } else { 0 };
    // SAFETY: timerfd_create(2) with a clock id and flags; it returns a new fd or -1.
    let fd = unsafe { libc::timerfd_create(clock, flags) };
    owned(fd)
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A close-on-exec `epoll` instance watching `timerfd` for input, edge-triggered: each expiry
/// wakes one thread blocked in `epoll_wait` on it (the last to wait), and an expiry nobody
/// waited for is returned to the next wait.
pub(crate) fn epoll_edge(timerfd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1(2) with a constant flag; it returns a new fd or -1.
    let ep = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLET) as u32,
        u64: 0,
    };
    // SAFETY: adds a valid fd we own to our epoll instance; `ev` lives for the call.
    if unsafe {
        libc::epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            timerfd.as_raw_fd(),
            &mut ev,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(ep)
}

/// Makes an eventfd readable (adds 1 to its counter).
pub(crate) fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from `one`, which lives for the call, to an fd we own. It fails
    // only if the counter would overflow (2^64 - 2 signals without a drain): it is readable
    // then anyway.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Reads an eventfd's or timerfd's counter to zero: it is no longer readable (until the next
/// signal or expiry).
pub(crate) fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into `buf`, which lives for the call; the fd is
    // non-blocking, so an fd that is not readable returns EAGAIN at once.
    unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
}

/// Arms a timerfd at `ns` (absolute, on its clock) with `flags` (`TFD_TIMER_*`); `ns == 0`
/// disarms it. Returns whether the kernel accepted it.
pub(crate) fn arm(fd: &OwnedFd, flags: libc::c_int, ns: u64) -> bool {
    const NS: u64 = 1_000_000_000;
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (ns / NS).min(i64::MAX as u64) as libc::time_t,
            tv_nsec: (ns % NS) as libc::c_long,
        },
    };
    // SAFETY: a valid fd we own and a valid itimerspec; the old value is not asked for.
    unsafe { libc::timerfd_settime(fd.as_raw_fd(), flags, &spec, std::ptr::null_mut()) == 0 }
}
