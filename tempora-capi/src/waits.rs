//! The C library's signal waits, `sigwait`, `sigwaitinfo` and `sigtimedwait`, for the drop-in
//! (crate tempora-posix exports them): a thread that waits for a signal one of tempora's
//! timers may send takes the driver's place while it waits
//! ([`Timers::wait_leading`](tempora::timers::Timers::wait_leading)), so that its timer's
//! expiry wakes one thread, this one, which fires the timer and takes its signal, instead of
//! the driver and then this one. With the kernel's timers the expiry also wakes the waiter
//! alone: this is what makes a latency tool's loop (a `SIGEV_THREAD_ID` timer per thread,
//! waited for with `sigwait`) cost on the drop-in what it costs on the kernel.
//!
//! # When a wait leads
//! Only when all of these hold; otherwise it is the C library's call, unchanged:
//! * the wait blocks (no timeout, or a valid one above zero: a zero or invalid timeout goes to
//!   the C library, which answers at once, `EINVAL` included);
//! * the set holds a signal number some tempora timer of the process was created with
//!   (`note_timer_signal`: a set of `SIGINT` and `SIGTERM` alone never leads);
//! * the process-wide service exists (a timer was created), and it may be led
//!   (`Timers::wait_leading`: one driver, OS clocks, no other thread leading, the thread not
//!   inside tempora).
//!
//! A leading wait is a loop of waits cut at the service's next deadline; when that comes
//! first, the thread fires what is due (its own timer's signal is queued to it then, and the
//! next turn takes it at once) and waits again.
//! What the program sees is the C library's: the same return values and `errno`
//! (`EAGAIN` once its own timeout passed, `EINTR` when a handler ran, `sigwait` going on
//! after one as glibc's does), the same `siginfo_t`.
//!
//! # Cancellation, handlers, `longjmp`
//! A leading wait blocks every signal but inside its `ppoll` (`wait_leading`, "Handlers"), so
//! a handler runs only where the C library's wait would have been interrupted, and the wait
//! returns `EINTR` after it as that one does. The `ppoll` is its one cancellation point
//! (cancellation is disabled around the rest: a cancel that acted while the thread fires
//! timers would lose a timer it popped): a thread cancelled there unwinds through the frames
//! of this module and of `wait_leading`, which hold no value that needs dropping at that
//! call (plain frames: the unwind only passes), and runs its cleanup handlers with every
//! signal blocked.
//! The hold it had is never given back then, nor when a handler leaves the wait by
//! `longjmp`, or runs long inside it: the driver's backstop takes over within 10 ms
//! (`wake.rs`, "The backstop"), and another thread may lead after it. The wait's signalfd
//! is closed when the thread exits; a thread that left a wait by `longjmp` keeps it, and
//! does not lead again.

use crate::kernel;
use libc::{c_int, sigevent, siginfo_t, sigset_t, timespec};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The signal numbers tempora timers of this process were created with: bit `n - 1` for
/// signal `n`. Only grows (a deleted timer's number stays: a wait that leads for nothing
/// costs nothing but the lead).
static TIMER_SIGNALS: AtomicU64 = AtomicU64::new(0);

/// Notes the signal a timer created with `sev` sends (`SIGALRM` for a NULL sigevent), for
/// the waits to know which sets may take one.
///
/// # Safety
/// `sev` NULL or a readable sigevent.
pub(crate) unsafe fn note_timer_signal(sev: *const sigevent) {
    // SAFETY: the caller's contract.
    let signo = match unsafe { sev.as_ref() } {
        None => libc::SIGALRM,
        Some(sev) if matches!(sev.sigev_notify, libc::SIGEV_SIGNAL | libc::SIGEV_THREAD_ID) => {
            sev.sigev_signo
        }
        Some(_) => return,
    };
    if (1..=64).contains(&signo) {
        // Relaxed: a hint read by waits that start later; a wait that misses it is one that
        // started before the create, and waits as the C library's.
        TIMER_SIGNALS.fetch_or(1 << (signo - 1), Ordering::Relaxed);
    }
}

/// Whether `set` holds one of `signals` (a `TIMER_SIGNALS` reading).
///
/// # Safety
/// `set` readable.
unsafe fn holds_one_of(set: *const sigset_t, mut signals: u64) -> bool {
    while signals != 0 {
        let signo = signals.trailing_zeros() as c_int + 1;
        signals &= signals - 1;
        // SAFETY: `set` is readable (the caller's contract); sigismember only reads it.
        if unsafe { libc::sigismember(set, signo) } == 1 {
            return true;
        }
    }
    false
}

/// Takes a signal of `set` already pending, without waiting: the C library's `sigtimedwait`
/// with a zero timeout (`EAGAIN` if none is).
///
/// # Safety
/// As [`sigtimedwait`].
unsafe fn take(set: *const sigset_t, info: *mut siginfo_t) -> c_int {
    const ZERO: timespec = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the caller's contract; `ZERO` is a constant.
    unsafe { kernel::sigtimedwait(set, info, &ZERO) }
}

/// `errno` of the calling thread.
fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sets `errno` of the calling thread.
fn set_errno(e: c_int) {
    // SAFETY: the thread's errno location, valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// The signalfd of the thread's leading wait while it waits (-1 otherwise): closed by the
/// wait, or when the thread exits if it never returned (cancelled in the wait). A wait left
/// by `longjmp` leaves it set, and the thread never leads again (its waits are the C
/// library's); a wait in a handler that interrupted a leading one finds it set too, and
/// does not lead.
struct WaitFd(Cell<c_int>);

impl Drop for WaitFd {
    fn drop(&mut self) {
        let fd = self.0.replace(-1);
        if fd >= 0 {
            // SAFETY: our own signalfd, closed once (the cell is cleared first).
            unsafe { libc::close(fd) };
        }
    }
}

thread_local! {
    static WAIT_FD: WaitFd = const { WaitFd(Cell::new(-1)) };
}

/// glibc's `PTHREAD_CANCEL_DISABLE`.
const CANCEL_DISABLE: c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
}

extern "C-unwind" {
    /// The C library's `ppoll`, a cancellation point: declared as one that may unwind.
    #[link_name = "ppoll"]
    fn ppoll_unwinding(
        fds: *mut libc::pollfd,
        nfds: libc::nfds_t,
        timeout: *const timespec,
        sigmask: *const sigset_t,
    ) -> c_int;
}

/// The time from now until `t` (zero once it passed), as a wait's relative timeout.
fn until_then(t: Instant) -> timespec {
    let d = t.saturating_duration_since(Instant::now());
    timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// How a leading wait ended.
enum Woke {
    /// A signal of the set (its number).
    Signal(c_int),
    /// The wait failed with this `errno` (`EINTR`: a handler ran).
    Failed(c_int),
    /// `ppoll` failed for want of something the C library's wait never needs: wait as it
    /// does for the time left.
    Fallback,
}

/// A wait of `set` until `until` (`None`: no limit) that leads `timers` meanwhile: the C
/// library's `sigtimedwait` result and `errno`, or `None` when the thread may not lead. The
/// caller has just found nothing of `set` pending.
///
/// # Handlers
/// A handler that runs in the C library's wait makes it return `EINTR`; one that ran while
/// this thread fires timers between two turns must too, or a program that checks a flag on
/// `EINTR` would wait on. So the thread blocks every signal while it leads, and waits in
/// `ppoll` on a signalfd of `set` with the program's mask (and `set`) for the wait: a signal
/// the program lets through reaches its handler inside `ppoll` alone, which then returns
/// `EINTR`, however late it came. `set`'s signals are taken with a zero-timeout
/// `sigtimedwait`, the C library's, when the signalfd says one is pending (and after an
/// `EINTR`, as the kernel's wait returns a signal of the set that came with the handler's).
///
/// # Cancellation
/// Only the `ppoll` is a cancellation point, with the caller's cancel state: the thread
/// disables cancellation for the rest, so a cancel never acts while it fires timers (a
/// timer popped and not yet delivered would be lost) or after it took a signal.
///
/// # Safety
/// As [`sigtimedwait`].
unsafe fn wait_leading(
    timers: &tempora::timers::Timers,
    set: *const sigset_t,
    info: *mut siginfo_t,
    until: Option<Instant>,
) -> Option<c_int> {
    // A wait inside a handler that interrupted a leading one, or after one left by
    // `longjmp`, does not lead; nor does one while the thread exits.
    if WAIT_FD.try_with(|w| w.0.get()).map_or(true, |fd| fd >= 0) {
        return None;
    }
    let mut cancel: c_int = 0;
    // SAFETY: writes the caller's state to a local.
    unsafe { pthread_setcancelstate(CANCEL_DISABLE, &mut cancel) };
    // SAFETY: the caller's contract; `cancel` is the caller's state.
    let r = unsafe { lead(timers, set, info, until, cancel) };
    // SAFETY: the caller's state, as it was.
    unsafe { pthread_setcancelstate(cancel, std::ptr::null_mut()) };
    r
}

/// [`wait_leading`] with cancellation disabled (`cancel`: the caller's state, for `ppoll`).
///
/// # Safety
/// As [`sigtimedwait`].
unsafe fn lead(
    timers: &tempora::timers::Timers,
    set: *const sigset_t,
    info: *mut siginfo_t,
    until: Option<Instant>,
    cancel: c_int,
) -> Option<c_int> {
    // SAFETY: `set` is readable (the caller's contract).
    let fd = unsafe { libc::signalfd(-1, set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    WAIT_FD.with(|w| w.0.set(fd));
    // SAFETY: all-zero is a valid (empty) sigset_t.
    let (mut all, mut old) = unsafe {
        (
            std::mem::zeroed::<sigset_t>(),
            std::mem::zeroed::<sigset_t>(),
        )
    };
    // SAFETY: locals; `set` readable. pthread_sigmask leaves the C library's own signals
    // (cancellation) unblocked.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let mut during = old;
    // SAFETY: `set` readable, `during` a local.
    unsafe {
        for signo in 1..=64 {
            if libc::sigismember(set, signo) == 1 {
                libc::sigaddset(&mut during, signo);
            }
        }
    }
    // SAFETY: the caller's `set` and `info`.
    let take = || unsafe { take(set, info) };
    let mut woke = Woke::Failed(libc::EAGAIN);
    // The caller took what was pending just before: the first turn waits at once.
    let mut look = false;
    let led = timers.wait_leading(until, |t| loop {
        if look {
            let r = take();
            if r > 0 {
                woke = Woke::Signal(r);
                return true;
            }
        }
        look = true;
        let ts = t.map(until_then);
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |ts| ts as *const timespec);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: the caller's cancel state for the wait alone, then disabled again.
        unsafe { pthread_setcancelstate(cancel, std::ptr::null_mut()) };
        // SAFETY: one pollfd, `tsp` NULL or a local, `during` a local; a cancellation point,
        // reached with no value of these frames left to drop.
        let r = unsafe { ppoll_unwinding(&mut pfd, 1, tsp, &during) };
        let e = errno();
        // SAFETY: as above.
        unsafe { pthread_setcancelstate(CANCEL_DISABLE, std::ptr::null_mut()) };
        match r {
            // This turn's time came: the deadline (fire and wait again), or `until`.
            0 => return false,
            // One of `set` is pending: take it (another thread may take it first).
            r if r > 0 => continue,
            _ if e == libc::EINTR => {
                let r = take();
                woke = if r > 0 {
                    Woke::Signal(r)
                } else {
                    Woke::Failed(libc::EINTR)
                };
                return true;
            }
            _ => {
                woke = Woke::Fallback;
                return true;
            }
        }
    });
    // SAFETY: the mask the thread had.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    let fd = WAIT_FD.with(|w| w.0.replace(-1));
    // SAFETY: our signalfd, closed once (cancellation is disabled: `close` never unwinds).
    unsafe { libc::close(fd) };
    Some(match (led?, woke) {
        (true, Woke::Signal(r)) => r,
        (true, Woke::Failed(e)) => {
            set_errno(e);
            -1
        }
        (true, Woke::Fallback) => {
            let left = until.map(until_then);
            let tsp = left
                .as_ref()
                .map_or(std::ptr::null(), |ts| ts as *const timespec);
            // SAFETY: the caller's contract; `tsp` NULL or a local.
            unsafe { kernel::sigtimedwait(set, info, tsp) }
        }
        (false, _) => {
            set_errno(libc::EAGAIN);
            -1
        }
    })
}

/// A wait of `set` until `until` that leads, when it should (the module doc, "When a wait
/// leads"): its result, with `errno` as the C library's wait leaves it; `None` for the C
/// library's wait, unchanged.
///
/// # Safety
/// As [`sigtimedwait`].
unsafe fn led(set: *const sigset_t, info: *mut siginfo_t, until: Option<Instant>) -> Option<c_int> {
    let signals = TIMER_SIGNALS.load(Ordering::Relaxed);
    if signals == 0 {
        return None;
    }
    let timers = tempora::time::built_global()?;
    let saved = errno();
    // A signal already pending is taken without leading (a burst's next signals); an
    // unreadable `set` fails here, with the C library's EFAULT.
    // SAFETY: the caller's contract.
    let r = match unsafe { take(set, info) } {
        r if r > 0 || errno() != libc::EAGAIN => r,
        _ => {
            set_errno(saved);
            // SAFETY: `set` is readable (the take above read it).
            if !unsafe { holds_one_of(set, signals) } {
                return None;
            }
            // SAFETY: the caller's contract.
            unsafe { wait_leading(timers, set, info, until) }?
        }
    };
    if r > 0 {
        set_errno(saved);
    }
    Some(r)
}

/// `sigtimedwait(2)`: the C library's, led as the module doc says.
///
/// # Safety
/// The C library's contract: `set` readable, `info` NULL or writable, `timeout` NULL or
/// readable.
pub unsafe fn sigtimedwait(
    set: *const sigset_t,
    info: *mut siginfo_t,
    timeout: *const timespec,
) -> c_int {
    // SAFETY: the caller's contract (NULL or readable).
    let until = match unsafe { timeout.as_ref() } {
        None => None,
        Some(ts) if ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec) => {
            let d = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            if d.is_zero() {
                // SAFETY: the caller's contract, passed on.
                return unsafe { kernel::sigtimedwait(set, info, timeout) };
            }
            // A timeout too long to represent waits without a limit.
            Instant::now().checked_add(d)
        }
        // SAFETY: the caller's contract, passed on (the C library says EINVAL).
        Some(_) => return unsafe { kernel::sigtimedwait(set, info, timeout) },
    };
    // SAFETY: the caller's contract.
    if let Some(r) = unsafe { led(set, info, until) } {
        return r;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { kernel::sigtimedwait(set, info, timeout) }
}

/// `sigwaitinfo(2)`: `sigtimedwait` without a timeout, as the C library's is.
///
/// # Safety
/// The C library's contract: `set` readable, `info` NULL or writable.
pub unsafe fn sigwaitinfo(set: *const sigset_t, info: *mut siginfo_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { sigtimedwait(set, info, std::ptr::null()) }
}

/// `sigwait(3)`: `sigwaitinfo` until a signal comes (a handler's `EINTR` waits on, as the C
/// library's does); 0 with the number in `*sig`, or the error number.
///
/// # Safety
/// The C library's contract: `set` readable, `sig` writable.
pub unsafe fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    // SAFETY: all-zero is a valid siginfo_t.
    let mut info: siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: the caller's `set`; `info` is a local.
        let r = unsafe { sigwaitinfo(set, &mut info) };
        if r > 0 {
            // SAFETY: the caller's contract.
            unsafe { sig.write(r) };
            return 0;
        }
        match errno() {
            libc::EINTR => continue,
            e => return e,
        }
    }
}
