//! The file descriptors an event loop waits on: an eventfd (an owner's readiness fd) and a
//! timerfd (the service's deadline fd, the realtime-clock watch), as thin calls on `OwnedFd`.
//! Every call but `wait_for` is non-blocking and none allocates.

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

/// Arms a timerfd to fire 1 ns from now and then every `interval_ns` (relative), until
/// re-armed: what wakes every thread blocked reading it, one expiry each.
#[cfg_attr(loom, allow(dead_code))] // the spares' (`driver.rs`)
pub(crate) fn arm_every(fd: &OwnedFd, interval_ns: u64) -> bool {
    const NS: u64 = 1_000_000_000;
    let ts = |ns: u64| libc::timespec {
        tv_sec: (ns / NS) as libc::time_t,
        tv_nsec: (ns % NS) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: ts(interval_ns),
        it_value: ts(1),
    };
    // SAFETY: a valid fd we own and a valid itimerspec; the old value is not asked for.
    unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) == 0 }
}

/// What [`wait_for`] saw.
#[cfg_attr(loom, allow(dead_code))] // the spares' (`driver.rs`)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// This thread read an expiry.
    Fired,
    /// `idle` passed with no expiry for this thread.
    Idle,
    /// An error other than `EINTR`.
    Failed,
}

/// Waits until this thread reads an expiry of a non-blocking timerfd, or `idle` passes
/// (`None`: no limit). Threads waiting on the same fd all wake at an expiry and one reads it;
/// the others wait again (retrying on `EINTR`, and for the rest of `idle`).
#[cfg_attr(loom, allow(dead_code))] // the spares' (`driver.rs`)
pub(crate) fn wait_for(fd: &OwnedFd, idle: Option<std::time::Duration>) -> Waited {
    let until = idle.map(|d| std::time::Instant::now() + d);
    let mut buf = [0u8; 8];
    loop {
        // SAFETY: reads at most 8 bytes into `buf`, which lives for the call; the fd is
        // non-blocking, so one with no expiry returns EAGAIN at once.
        let r = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Waited::Fired;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN | libc::EINTR) => {}
            _ => return Waited::Failed,
        }
        let ms = match until {
            None => -1,
            Some(until) => {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Waited::Idle;
                }
                // Rounded up: a poll that returns before `until` would spin.
                left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int
            }
        };
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd that lives for the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Waited::Failed;
        }
    }
}
