//! The calls' arguments and results, checked and converted between their C and Rust forms:
//! handles (NULL is `EINVAL`), pointers Linux would fault on (NULL is `EFAULT`), timer IDs,
//! `timespec` and `itimerspec`, clock IDs, sigevents and paths. A bad argument becomes a
//! [`Failure`] with the errno Linux gives the POSIX call for it.

use crate::failure::Failure;
use crate::types::{
    tempora_notify_fn, tempora_owner_t, tempora_sigevent, tempora_t, tempora_timer_t,
    TEMPORA_SIGEV_NONE, TEMPORA_SIGEV_QUEUE, TEMPORA_SIGEV_SIGNAL, TEMPORA_SIGEV_SIGNAL_ID,
    TEMPORA_SIGEV_THREAD, TEMPORA_SIGEV_THREAD_ID,
};
use libc::{c_char, clockid_t, itimerspec, sigval, timespec};
use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::Arc;
use tempora::clock::{ClockId, TimeSpec};
use tempora::timers::Callback;
use tempora::{Error, Fired, Notify, Owner, TimerId, Timers};

/// A handle argument: NULL is `EINVAL` (an unknown timer or process, to Linux).
///
/// # Safety
/// `p` is NULL or a live handle made by this library.
unsafe fn handle<'a, T>(p: *const T, what: &'static str) -> Result<&'a T, Failure> {
    // SAFETY: the caller passes NULL or a live handle.
    unsafe { p.as_ref() }.ok_or(Failure::new(libc::EINVAL, what))
}

/// A pointer Linux would fault on: NULL is `EFAULT`.
pub(crate) fn not_null<T>(p: *const T, what: &'static str) -> Result<*const T, Failure> {
    if p.is_null() {
        Err(Failure::new(libc::EFAULT, what))
    } else {
        Ok(p)
    }
}

pub(crate) fn owner_of<'a>(owner: *const tempora_owner_t) -> Result<&'a Owner, Failure> {
    // SAFETY: every entry taking an owner documents that it is NULL or live.
    Ok(&unsafe { handle(owner, "NULL owner")? }.owner)
}

pub(crate) fn timers_of<'a>(t: *const tempora_t) -> Result<&'a Timers, Failure> {
    // SAFETY: every entry taking a service documents that it is NULL or live.
    Ok(&unsafe { handle(t, "NULL service")? }.timers)
}

pub(crate) fn timer_id(id: tempora_timer_t) -> Result<TimerId, Failure> {
    // A negative ID names no timer: what Linux says of an unknown one.
    TimerId::new(id).ok_or_else(|| Error::UnknownTimer.into())
}

pub(crate) fn spec_of(ts: &timespec) -> TimeSpec {
    TimeSpec::new(ts.tv_sec, ts.tv_nsec)
}

pub(crate) fn timespec_of(ts: TimeSpec) -> timespec {
    timespec {
        tv_sec: ts.sec,
        tv_nsec: ts.nsec,
    }
}

pub(crate) fn itimerspec_of(spec: tempora::ItimerSpec) -> itimerspec {
    itimerspec {
        it_interval: timespec_of(spec.interval),
        it_value: timespec_of(spec.value),
    }
}

/// The clock tempora times for `clock`. For any other clock ID the answer is the kernel's:
/// tempora asks it (a `SIGEV_NONE` timer created and deleted at once, on this error path only)
/// and fails with `EOPNOTSUPP` where the kernel would time the clock (CPU-time clocks, TAI),
/// with the kernel's own errno where it would not (`EOPNOTSUPP` for raw, coarse and alarm
/// clocks, `EINVAL` for IDs it does not know). A table could not be exact: which clocks exist
/// (auxiliary clocks, alarm clocks without an RTC, CPU clocks of other processes) depends on
/// the kernel's configuration and the machine.
pub(crate) fn clock_of(clock: clockid_t) -> Result<ClockId, Failure> {
    if let Some(c) = ClockId::from_raw(clock) {
        return Ok(c);
    }
    let unsupported = Failure::new(
        libc::EOPNOTSUPP,
        "tempora times CLOCK_REALTIME, CLOCK_MONOTONIC and CLOCK_BOOTTIME only",
    );
    // SAFETY: all-zero is a valid `sigevent`; SIGEV_NONE delivers nothing.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_NONE;
    let mut id: libc::timer_t = ptr::null_mut();
    // SAFETY: `sev` and `id` are valid for the call; a created timer is deleted at once.
    if unsafe { libc::timer_create(clock, &mut sev, &mut id) } == 0 {
        // SAFETY: `id` was just created by this thread and is deleted once.
        unsafe { libc::timer_delete(id) };
        return Err(unsupported);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        // The kernel knows the clock and is only out of timers.
        Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) | None => Err(unsupported),
        Some(e) => Err(Failure::new(
            e,
            "the kernel refuses timers on this clock ID (its errno)",
        )),
    }
}

/// The user's pointer-sized `sigval`, handed to the thread that runs a callback.
#[derive(Clone, Copy)]
struct SendValue(sigval);

// SAFETY: a `sigval` is an integer or a pointer the C program chose to pass to its callback on
// whatever thread fires the timer (as `SIGEV_THREAD` passes it to a thread of its own); tempora
// never dereferences it.
unsafe impl Send for SendValue {}
// SAFETY: as for `Send`: tempora only copies the value.
unsafe impl Sync for SendValue {}

/// The Rust notification for a C sigevent, validated before anything is created (Linux checks
/// the sigevent after allocating; a failed create here changes nothing at all). `keep_name`
/// names a callback that has no name of its own (a restore keeps the snapshot's).
///
/// The struct is read field by field, never as a whole: a program built against an older
/// header passes a shorter one, and the fields added since (`signo`, `tid`) are read only for
/// the `notify` values that came with them, which such a program never passes.
///
/// # Safety
/// `sev` is NULL or points to a readable `tempora_sigevent` up to `name` (and whole if its
/// `notify` is `TEMPORA_SIGEV_SIGNAL`, `_THREAD_ID` or `_SIGNAL_ID`) whose `name` is NULL or a
/// NUL-terminated string when its `notify` is `TEMPORA_SIGEV_THREAD`.
pub(crate) unsafe fn notify_of(
    sev: *const tempora_sigevent,
    keep_name: Option<&str>,
) -> Result<Notify, Failure> {
    if sev.is_null() {
        return Ok(Notify::Queue);
    }
    // SAFETY: the caller's contract: every header's struct begins with `notify`. Each field
    // below is read only where the contract makes it readable.
    let notify = unsafe { (&raw const (*sev).notify).read() };
    if notify != TEMPORA_SIGEV_THREAD {
        // A function with another kind is a sigevent filled for TEMPORA_SIGEV_THREAD whose
        // `notify` was left 0 (TEMPORA_SIGEV_QUEUE): refused rather than never called.
        // SAFETY: fields of every header's struct (the caller's contract).
        let (notify_function, callback) = unsafe {
            (
                (&raw const (*sev).notify_function).read(),
                (&raw const (*sev).callback).read(),
            )
        };
        if notify_function.is_some() || callback.is_some() {
            return Err(Failure::new(
                libc::EINVAL,
                "notify_function or callback is set but notify is not TEMPORA_SIGEV_THREAD: set notify to TEMPORA_SIGEV_THREAD, or clear the function",
            ));
        }
    }
    match notify {
        TEMPORA_SIGEV_QUEUE => Ok(Notify::Queue),
        TEMPORA_SIGEV_NONE => Ok(Notify::None),
        TEMPORA_SIGEV_THREAD => {
            // SAFETY: fields of every header's struct (the caller's contract).
            let (value, notify_function, callback, name) = unsafe {
                (
                    SendValue((&raw const (*sev).value).read()),
                    (&raw const (*sev).notify_function).read(),
                    (&raw const (*sev).callback).read(),
                    (&raw const (*sev).name).read(),
                )
            };
            let f: Callback = match (notify_function, callback) {
                (Some(f), None) => Arc::new(move |_: &Fired<'_>| {
                    let v = value;
                    // SAFETY: the C program gave this function for this timer's expiries, to
                    // return normally (the header's rule); a C++ exception out of it may
                    // unwind (`C-unwind`) to the `catch_unwind` around every call, which
                    // aborts the process.
                    unsafe { f(v.0) }
                }),
                (None, Some(f)) => Arc::new(move |fired: &Fired<'_>| {
                    let v = value;
                    // SAFETY: as above.
                    unsafe { f(fired.id().get(), fired.overrun(), v.0) }
                }),
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "a TEMPORA_SIGEV_THREAD sigevent sets exactly one of notify_function and callback",
                    ))
                }
            };
            let name = if name.is_null() {
                keep_name.map(str::to_owned)
            } else {
                // SAFETY: the caller's contract: a NUL-terminated string.
                let name = unsafe { CStr::from_ptr(name) };
                Some(
                    name.to_str()
                        .map_err(|_| Failure::new(libc::EINVAL, "a callback name must be UTF-8"))?
                        .to_owned(),
                )
            };
            Ok(Notify::Callback {
                name: name.map(Arc::from),
                f,
            })
        }
        TEMPORA_SIGEV_SIGNAL | TEMPORA_SIGEV_THREAD_ID | TEMPORA_SIGEV_SIGNAL_ID => {
            // SAFETY: these `notify` values came with `signo` and `tid`, so the struct is
            // whole (the caller's contract).
            let (signo, tid, value) = unsafe {
                (
                    (&raw const (*sev).signo).read(),
                    (&raw const (*sev).tid).read(),
                    (&raw const (*sev).value).read(),
                )
            };
            // `sigev_value`'s bits, whichever member the program set.
            let value = value.sival_ptr as usize;
            let notify = match notify {
                TEMPORA_SIGEV_SIGNAL => Notify::Signal { signo, value },
                TEMPORA_SIGEV_THREAD_ID => Notify::ThreadSignal { tid, signo, value },
                _ => Notify::SignalWithId { signo },
            };
            // Here, before the create, so that a bad one is EINVAL before a NULL `timerid` is
            // EFAULT, in Linux's order.
            notify.check_signal()?;
            Ok(notify)
        }
        _ => Err(Failure::new(
            libc::EINVAL,
            "sigevent notify must be TEMPORA_SIGEV_QUEUE, _NONE, _THREAD, _SIGNAL, _THREAD_ID or _SIGNAL_ID",
        )),
    }
}

/// The Rust notification for the C library's sigevent (`timer_create`'s, for
/// `tempora_posix.h` and the drop-in), mapped onto a `tempora_sigevent` and checked as
/// [`notify_of`] checks one: NULL is Linux's `SIGEV_SIGNAL` with `SIGALRM` and the timer's ID
/// as `sival_int`; `SIGEV_SIGNAL`, `SIGEV_THREAD_ID` (to `sigev_notify_thread_id`),
/// `SIGEV_THREAD` (`sigev_notify_function`; `sigev_notify_attributes` is not read) and
/// `SIGEV_NONE` map to their tempora kinds; any other `sigev_notify` is `EINVAL`.
///
/// # Safety
/// `sev` is NULL or points to a readable `struct sigevent`.
pub(crate) unsafe fn notify_of_sigevent(sev: *const libc::sigevent) -> Result<Notify, Failure> {
    // SAFETY: all-zero is a valid `tempora_sigevent` (NULL pointers and functions).
    let mut t: tempora_sigevent = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's contract.
    match unsafe { sev.as_ref() } {
        None => {
            t.notify = TEMPORA_SIGEV_SIGNAL_ID;
            t.signo = libc::SIGALRM;
        }
        Some(sev) => {
            t.value = sev.sigev_value;
            t.signo = sev.sigev_signo;
            t.notify = match sev.sigev_notify {
                libc::SIGEV_NONE => TEMPORA_SIGEV_NONE,
                libc::SIGEV_SIGNAL => TEMPORA_SIGEV_SIGNAL,
                libc::SIGEV_THREAD_ID => {
                    t.tid = sev.sigev_notify_thread_id;
                    TEMPORA_SIGEV_THREAD_ID
                }
                libc::SIGEV_THREAD => {
                    // `sigev_notify_function` shares its place with `sigev_notify_thread_id`
                    // (the start of the sigevent's union, pointer-aligned).
                    let function = (&raw const sev.sigev_notify_thread_id).cast::<tempora_notify_fn>();
                    // SAFETY: inside the caller's sigevent, whose union is a pointer wide at
                    // least; the C library's SIGEV_THREAD function has this signature.
                    t.notify_function = unsafe { function.read_unaligned() };
                    TEMPORA_SIGEV_THREAD
                }
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "sigev_notify must be SIGEV_NONE, SIGEV_SIGNAL, SIGEV_THREAD or SIGEV_THREAD_ID",
                    ))
                }
            };
        }
    }
    // A SIGEV_THREAD sigevent without a function is refused there (EINVAL).
    // SAFETY: a whole `tempora_sigevent` with a NULL name.
    unsafe { notify_of(&t, None) }
}

pub(crate) fn path_of<'a>(path: *const c_char) -> Result<&'a Path, Failure> {
    not_null(path, "NULL path")?;
    // SAFETY: a non-NULL path is a NUL-terminated string (the calls' contract).
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}
