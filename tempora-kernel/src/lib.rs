//! The running kernel's POSIX timers, called through raw syscalls (not glibc's wrappers, which
//! add a thread for `SIGEV_THREAD` and map `timer_t` to a pointer): the reference that
//! tempora's differential tests and the `kernel` benchmark peer compare against.
//!
//! Every call returns the kernel's result or its errno.

/// errno of a failed call.
pub type Errno = i32;

/// `PR_TIMER_CREATE_RESTORE_IDS` (Linux 6.15+).
pub const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;

fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(r: libc::c_long) -> Result<libc::c_long, Errno> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// `timer_create(CLOCK_MONOTONIC, {SIGEV_NONE}, &id)`. In restore mode the kernel reads the
/// requested ID from `id`'s initial value, `requested`.
pub fn timer_create_none(requested: i32) -> Result<i32, Errno> {
    create_none(libc::CLOCK_MONOTONIC, requested)
}

fn create_none(clock: libc::clockid_t, requested: i32) -> Result<i32, Errno> {
    // SAFETY: a zeroed sigevent is a valid argument once `sigev_notify` is set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_NONE;
    create(clock, &mut sev, requested)
}

/// Raw `timer_create(clock, sev, &id)`, `id` starting as `requested` (read in restore mode).
fn create(clock: libc::clockid_t, sev: &mut libc::sigevent, requested: i32) -> Result<i32, Errno> {
    let mut id: libc::c_int = requested;
    // SAFETY: raw timer_create(2): the kernel reads `sev` and reads/writes the kernel timer_t
    // (an int) through the third pointer; both outlive the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            clock,
            sev as *mut libc::sigevent,
            &mut id as *mut libc::c_int,
        )
    })
    .map(|_| id)
}

/// `timer_getoverrun(id)`.
pub fn timer_getoverrun(id: i32) -> Result<i32, Errno> {
    // SAFETY: timer_getoverrun(2) takes the kernel timer_t by value.
    check(unsafe { libc::syscall(libc::SYS_timer_getoverrun, id as libc::c_long) })
        .map(|r| r as i32)
}

/// `timer_delete(id)`.
pub fn timer_delete(id: i32) -> Result<(), Errno> {
    // SAFETY: timer_delete(2) takes the kernel timer_t by value.
    check(unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) }).map(drop)
}

/// `prctl(PR_TIMER_CREATE_RESTORE_IDS, arg, 0, 0, 0)`: arg 0 = off, 1 = on, 2 = query.
pub fn restore_ids(arg: libc::c_ulong) -> Result<i32, Errno> {
    // SAFETY: prctl(2) with integer arguments only.
    let r = unsafe {
        libc::prctl(
            PR_TIMER_CREATE_RESTORE_IDS,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check(r as libc::c_long).map(|r| r as i32)
}

/// The soft `RLIMIT_SIGPENDING`: how many POSIX timers (and queued signals) this user may hold.
pub fn rlimit_sigpending() -> Option<u64> {
    // SAFETY: getrlimit(2) writes the struct it is given.
    let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `l` is a valid, writable rlimit.
    (unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut l) } == 0).then_some(l.rlim_cur)
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

fn nanos(ts: &libc::timespec) -> u64 {
    (ts.tv_sec.max(0) as u64) * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// `timer_create(clock, {SIGEV_NONE}, &id)` on any clock (`clockid_t` value).
pub fn timer_create_none_on(clock: libc::clockid_t) -> Result<i32, Errno> {
    create_none(clock, 0)
}

/// `timer_settime(id, flags, {value, interval}, &old)`, times in ns; returns the old
/// (value, interval).
pub fn timer_settime(id: i32, flags: i32, value: u64, interval: u64) -> Result<(u64, u64), Errno> {
    let new = libc::itimerspec {
        it_interval: timespec(interval),
        it_value: timespec(value),
    };
    // SAFETY: zeroed itimerspec is valid; the kernel writes it.
    let mut old: libc::itimerspec = unsafe { std::mem::zeroed() };
    // SAFETY: raw timer_settime(2): both structs live for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id as libc::c_long,
            flags as libc::c_long,
            &new as *const libc::itimerspec,
            &mut old as *mut libc::itimerspec,
        )
    })
    .map(|_| (nanos(&old.it_value), nanos(&old.it_interval)))
}

/// `timer_gettime(id)`: (remaining, interval) in ns.
pub fn timer_gettime(id: i32) -> Result<(u64, u64), Errno> {
    // SAFETY: zeroed itimerspec is valid; the kernel writes it.
    let mut cur: libc::itimerspec = unsafe { std::mem::zeroed() };
    // SAFETY: raw timer_gettime(2): `cur` lives for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_timer_gettime,
            id as libc::c_long,
            &mut cur as *mut libc::itimerspec,
        )
    })
    .map(|_| (nanos(&cur.it_value), nanos(&cur.it_interval)))
}

/// The calling thread's kernel thread ID.
pub fn gettid() -> i32 {
    // SAFETY: gettid(2) takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// `timer_create(clock, {SIGEV_THREAD_ID, signo, sival_int = value, tid}, &id)`: a timer whose
/// expiries queue `signo` to thread `tid` only (so a test process's other threads never see
/// it), carrying `value`.
pub fn timer_create_signal(
    clock: libc::clockid_t,
    signo: i32,
    value: i32,
    tid: i32,
) -> Result<i32, Errno> {
    // SAFETY: a zeroed sigevent is a valid argument once its fields are set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = signo;
    sev.sigev_value = libc::sigval {
        sival_ptr: value as usize as *mut libc::c_void,
    };
    sev.sigev_notify_thread_id = tid;
    create(clock, &mut sev, 0)
}

/// `timer_create(clock, {SIGEV_SIGNAL, signo, sival_int = value}, &id)`: a timer whose
/// expiries queue `signo` to the process (any thread that does not block it may take it),
/// carrying `value`.
pub fn timer_create_process_signal(
    clock: libc::clockid_t,
    signo: i32,
    value: i32,
) -> Result<i32, Errno> {
    // SAFETY: a zeroed sigevent is a valid argument once its fields are set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_SIGNAL;
    sev.sigev_signo = signo;
    sev.sigev_value = libc::sigval {
        sival_ptr: value as usize as *mut libc::c_void,
    };
    create(clock, &mut sev, 0)
}

/// Blocks `signo` in the calling thread, so its timer signals stay pending for
/// [`take_signal`].
pub fn block_signal(signo: i32) -> Result<(), Errno> {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set pointers; pthread_sigmask only changes this thread's mask.
    let r = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    if r == 0 {
        Ok(())
    } else {
        Err(r)
    }
}

/// A dequeued timer signal: the `sival_int` it carries and its `si_overrun`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerSignal {
    /// The timer's `sigev_value.sival_int`.
    pub value: i32,
    /// `si_overrun`: the periods the timer missed before this signal was dequeued.
    pub overrun: i32,
}

/// `sigtimedwait({signo}, &info, {0, 0})`: one pending `signo` of the calling thread, or
/// `None` when none is pending. Dequeuing a periodic timer's signal re-arms the timer and
/// latches its overrun, as delivery does.
pub fn take_signal(signo: i32) -> Result<Option<TimerSignal>, Errno> {
    wait_signal(signo, std::time::Duration::ZERO)
}

/// `sigtimedwait({signo}, &info, timeout)`: waits up to `timeout` for `signo` (see
/// [`take_signal`]); `None` on timeout.
pub fn wait_signal(signo: i32, timeout: std::time::Duration) -> Result<Option<TimerSignal>, Errno> {
    // SAFETY: plain data, initialised before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the kernel fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let ts = timespec(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
    // SAFETY: valid pointers for the duration of the calls.
    let r = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::sigtimedwait(&set, &mut info, &ts)
    };
    if r < 0 {
        let e = errno();
        return if e == libc::EAGAIN || e == libc::EINTR {
            Ok(None)
        } else {
            Err(e)
        };
    }
    // SAFETY: siginfo_t for an SI_TIMER signal: after si_signo, si_errno, si_code (and padding
    // to 8 bytes) come si_tid (int), si_overrun (int), si_sigval, as in the kernel's
    // `struct siginfo` `_timer` member.
    let (overrun, value) = unsafe {
        let base = (&info as *const libc::siginfo_t).cast::<u8>();
        let fields = base.add(16).cast::<i32>();
        (fields.add(1).read(), base.add(24).cast::<i32>().read())
    };
    Ok(Some(TimerSignal { value, overrun }))
}
