//! tempora's C ABI: the calls of `include/tempora.h`, shaped and failing like the POSIX timer
//! calls they mirror, so that porting a C program is a rename (`include/tempora_posix.h` does
//! the rename for a program written against `timer_create` & co.).
//!
//! # Conventions every function keeps
//! - **Errors**: a call returns 0 (or the value it documents) on success and -1 with `errno`
//!   set on failure, to what Linux sets for the POSIX call it mirrors ([`tempora::Error::errno`]
//!   for tempora's own errors). A call that returns a pointer returns NULL with `errno` set.
//!   `tempora_last_error()` gives the failure's message, per thread.
//! - **NULL pointers**: a NULL handle (`tempora_t *`, `tempora_owner_t *`) is `EINVAL`; a NULL
//!   pointer Linux would fault on (an out-parameter it must write, a path) is `EFAULT`; a NULL
//!   `new` in `tempora_timer_settime` is `EINVAL`, as in Linux.
//! - **Out-parameters** are written only on success (an exact-ID create reads `*timerid` first,
//!   as Linux's restore mode does).
//! - **No panic crosses the boundary**: every entry runs inside `catch_unwind`; a panic inside
//!   tempora fails the call with `ENOTRECOVERABLE`, never aborts the host program.
//! - **Threads**: a `tempora_t` and a `tempora_owner_t` may be used from any number of threads
//!   at once, as the Rust `Timers` and `Owner` are; only the `_free` calls need every other
//!   call on that handle to have returned.
//! - **Callbacks** (`TEMPORA_SIGEV_THREAD`) run on the thread that fires the timer (a driver
//!   thread, or the caller of `tempora_poll`) with no tempora lock held: they may call any
//!   function here, delete their own timer included, but should be short, as a signal handler
//!   or a `SIGEV_THREAD` function should. They, and `tempora_owner_restore`'s resolver, must
//!   return normally: their types are `C-unwind`, so a C++ exception that escapes one unwinds
//!   to the `catch_unwind` around it, which aborts the process (Rust catches no foreign
//!   exception); `longjmp`, `pthread_exit` or a cancellation out of one is undefined behaviour.
//!
//! The header is generated from this crate by cbindgen (`tests/header.rs` checks it is
//! current; `TEMPORA_BLESS=1 cargo test -p tempora-capi --test header` rewrites it), so the doc
//! comments of the items its modules declare are the header's comments.
//!
//! cbindgen reads the modules in the order of their `mod` lines here and emits the constants,
//! and the functions, in the order it reads them: the modules are declared in the header's
//! order, each on a line of its own (rustfmt sorts `mod` lines only within a group), and a new
//! call goes where it belongs in the header.

#![allow(non_camel_case_types)]

// The handles, structs, function-pointer types and constants of the header.
mod types;

// The arguments' checks and conversions between their C and Rust forms (no call of its own).
mod convert;

// Failure, errno and the message; `entry`, the boundary each call runs inside; and
// tempora_last_error, the header's last function.
mod failure;

pub use failure::tempora_last_error;
pub use types::*;

use crate::convert::{
    clock_of, itimerspec_of, not_null, notify_of, owner_of, path_of, spec_of, timer_id, timers_of,
    timespec_of,
};
use crate::failure::{entry, Failure};
use libc::{c_char, c_int, c_void, clockid_t, itimerspec, timespec};
use std::cell::RefCell;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::OnceLock;
use std::time::Duration;
use tempora::checkpoint::Snapshot;
use tempora::clock::TimeSpec;
use tempora::{Notify, Owner, Precision, SetFlags, Timers};

// ---------------------------------------------------------------------------------------
// The service and its owners.

/// Fills `*config` with the defaults: a base per CPU, one driver thread with 4 spares, a 1 µs
/// tick, 31-bit IDs, a 1 s `max_deferral_ns`.
/// Returns 0, or -1 with `errno` `EFAULT` if `config` is NULL.
///
/// # Safety
/// `config` is NULL or points to writable memory for a `tempora_config`.
#[no_mangle]
pub unsafe extern "C" fn tempora_config_init(config: *mut tempora_config) -> c_int {
    entry(-1, || {
        not_null(config, "NULL config")?;
        // SAFETY: non-NULL, and the caller's contract makes it writable.
        unsafe {
            config.write(tempora_config {
                bases: 0,
                drivers: -1,
                tick_ns: 0,
                id_bits: 0,
                spare_drivers: -1,
                max_deferral_ns: 0,
            })
        };
        Ok(0)
    })
}

/// Starts a timer service with `config` (NULL for the defaults). Returns it, to be freed with
/// `tempora_free`, or NULL with `errno`: `EINVAL` for an invalid setting (`drivers` below -1
/// or more than the bases, more than 65536 bases, `id_bits` above 31, `spare_drivers` below
/// -1), `EAGAIN` or another OS errno if a driver thread cannot start.
///
/// # Safety
/// `config` is NULL or points to a readable `tempora_config`.
#[no_mangle]
pub unsafe extern "C" fn tempora_new(config: *const tempora_config) -> *mut tempora_t {
    entry(ptr::null_mut(), || {
        let mut b = Timers::builder();
        // SAFETY: the caller's contract.
        if let Some(c) = unsafe { config.as_ref() } {
            if c.bases != 0 {
                b.bases(c.bases as usize);
            }
            match c.drivers {
                -1 => {}
                n if n >= 0 => {
                    b.drivers(n as usize);
                }
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "drivers must be -1 or at least 0",
                    ))
                }
            }
            if c.tick_ns != 0 {
                b.tick(Duration::from_nanos(c.tick_ns));
            }
            if c.id_bits != 0 {
                b.id_bits(c.id_bits);
            }
            match c.spare_drivers {
                -1 => {}
                n if n >= 0 => {
                    b.spare_drivers(n as usize);
                }
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "spare_drivers must be -1 or at least 0",
                    ))
                }
            }
            match c.max_deferral_ns {
                0 => {}
                u64::MAX => {
                    b.max_deferral(Duration::MAX);
                }
                ns => {
                    b.max_deferral(Duration::from_nanos(ns));
                }
            }
        }
        let timers = b.build()?;
        Ok(Box::into_raw(Box::new(tempora_t { timers })))
    })
}

/// Stops a service and frees its handle (NULL is ignored). Its driver threads stop now, and
/// are joined before this returns: the callback calls they have already taken run first (one
/// that blocks holds this up), and nothing fires the service's timers after. Called from one
/// of its callbacks, it joins every driver thread but the caller's, which ends once that call
/// and the rest of its batch have returned.
///
/// Owners that outlive their service keep their timers readable (gettime, getoverrun, delete,
/// checkpoint, queued events), but no timer of theirs fires again: an armed one reads its
/// remaining time, then 1 ns left for good once its expiry has passed. Arming fails with
/// `ESHUTDOWN`, and so does waiting for an event once the queue is empty.
///
/// # Safety
/// `t` is NULL or a live handle from `tempora_new`, freed once, with no other call on it
/// running or to come.
#[no_mangle]
pub unsafe extern "C" fn tempora_free(t: *mut tempora_t) {
    entry((), || {
        if !t.is_null() {
            // SAFETY: a live handle from `tempora_new`, freed once (the caller's contract).
            drop(unsafe { Box::from_raw(t) });
        }
        Ok(())
    })
}

/// A new owner of `t`: an empty namespace of timer IDs, with its event queue. Returns it, to
/// be freed with `tempora_owner_free`, or NULL with `errno` `EINVAL` if `t` is NULL.
///
/// # Safety
/// `t` is NULL or a live service handle.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_new(t: *const tempora_t) -> *mut tempora_owner_t {
    entry(ptr::null_mut(), || {
        let owner = timers_of(t)?.owner();
        Ok(Box::into_raw(Box::new(tempora_owner_t { owner })))
    })
}

/// Deletes an owner with all its timers and frees its handle (NULL is ignored). Pending
/// events are dropped. Callback calls already taken by a firing thread are not waited for and
/// may run after this returns (see `tempora_timer_delete`).
///
/// # Safety
/// `owner` is NULL or a live handle from `tempora_owner_new`, freed once, with no other call
/// on it running or to come.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_free(owner: *mut tempora_owner_t) {
    entry((), || {
        if !owner.is_null() {
            // SAFETY: a live handle from `tempora_owner_new`, freed once (the contract).
            let owner = unsafe { Box::from_raw(owner) };
            owner.owner.destroy();
        }
        Ok(())
    })
}

/// The process-wide owner `tempora_posix.h` maps the POSIX calls onto: an owner of the
/// process-wide service (`tempora::time::try_global`: the default configuration, one driver
/// thread, shared with Rust code of the same process), made on first call and never freed (do
/// not pass it to `tempora_owner_free`). Returns NULL with `errno` only if it cannot be made:
/// `EAGAIN` (or another OS errno) when the service's driver thread cannot start, as
/// `pthread_create` and `timer_create` say it; the next call tries again.
#[no_mangle]
pub extern "C" fn tempora_default_owner() -> *mut tempora_owner_t {
    /// The owner's handle, kept for the process's life.
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    entry(ptr::null_mut(), || {
        let timers = tempora::time::try_global()?;
        let owner = *DEFAULT.get_or_init(|| {
            Box::into_raw(Box::new(tempora_owner_t {
                owner: timers.owner(),
            })) as usize
        });
        Ok(owner as *mut tempora_owner_t)
    })
}

// ---------------------------------------------------------------------------------------
// The POSIX calls.

/// `timer_create`: a disarmed timer on `clock` (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`,
/// `CLOCK_BOOTTIME`) that notifies as `sev` says (NULL: `TEMPORA_SIGEV_QUEUE`). Its ID is
/// written to `*timerid`. With exact-ID mode on (`tempora_owner_restore_ids`), the ID to
/// create is read from `*timerid` first.
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, a clock ID the kernel does not know,
/// invalid sigevent, a deleted owner, an exact ID that is negative or beyond the ID range),
/// `EOPNOTSUPP` (a clock tempora does not time: CPU-time, raw, coarse, alarm, TAI; for such a
/// clock the errno is the kernel's own, which tempora asks it for), `EFAULT` (NULL
/// `timerid`), `EAGAIN` (every ID in use), `EBUSY` (the exact ID is in use), `ESHUTDOWN`
/// (the service was freed). The arguments are checked in Linux's order: the clock, the
/// sigevent, then `timerid`; a failed call creates nothing.
///
/// # Safety
/// `owner` is NULL or live; `sev` is NULL or a readable sigevent whose `name` is NULL or a
/// string; `timerid` is NULL or readable and writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_create(
    owner: *const tempora_owner_t,
    clock: clockid_t,
    sev: *const tempora_sigevent,
    timerid: *mut tempora_timer_t,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        // Linux's order: the clock, the sigevent, then the ID's address.
        let clock = clock_of(clock)?;
        // SAFETY: the caller's contract on `sev`.
        let notify = unsafe { notify_of(sev, None) }?;
        not_null(timerid, "NULL timerid")?;
        let id = if owner.restore_ids() {
            // SAFETY: non-NULL and readable (the contract).
            owner.create_with_id(unsafe { timerid.read() }, clock, notify)?
        } else {
            owner.create(clock, notify)?
        };
        // SAFETY: non-NULL and writable (the contract).
        unsafe { timerid.write(id.get()) };
        Ok(0)
    })
}

/// `timer_settime`: arms timer `timer` to expire after `new->it_value` (at it on the timer's
/// clock with `TEMPORA_TIMER_ABSTIME`, at once if that has passed), then every
/// `new->it_interval` if it is not zero; a zero `it_value` disarms. Writes the previous
/// setting to `*old` unless it is NULL. Voids an event still pending from the last arming and
/// resets the overrun.
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner or `new`, negative seconds or
/// `tv_nsec` outside 0..999999999, an unknown timer), `ESHUTDOWN` (the service was freed).
///
/// # Safety
/// `owner` is NULL or live; `new` is NULL or readable; `old` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_settime(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
    flags: c_int,
    new: *const itimerspec,
    old: *mut itimerspec,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        // SAFETY: NULL or readable (the contract).
        let new = unsafe { new.as_ref() }.ok_or(Failure::new(libc::EINVAL, "NULL new setting"))?;
        let (value, interval) = (spec_of(&new.it_value), spec_of(&new.it_interval));
        // Linux checks the times before the ID.
        value.to_nanos()?;
        interval.to_nanos()?;
        let prev = owner.settime(timer_id(timer)?, SetFlags::from_raw(flags), value, interval)?;
        if !old.is_null() {
            // SAFETY: non-NULL and writable (the contract).
            unsafe { old.write(itimerspec_of(prev)) };
        }
        Ok(0)
    })
}

/// `timer_gettime`: writes timer `timer`'s remaining time and period to `*curr` (zero
/// `it_value` when disarmed). Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, an unknown
/// timer), `EFAULT` (NULL `curr`).
///
/// # Safety
/// `owner` is NULL or live; `curr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_gettime(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
    curr: *mut itimerspec,
) -> c_int {
    entry(-1, || {
        let spec = owner_of(owner)?.gettime(timer_id(timer)?)?;
        // Linux finds the timer before it copies out.
        not_null(curr, "NULL curr")?;
        // SAFETY: non-NULL and writable (the contract).
        unsafe { curr.write(itimerspec_of(spec)) };
        Ok(0)
    })
}

/// `timer_getoverrun`: the overrun of timer `timer`'s last delivered event (periods missed
/// before it was taken, capped at INT_MAX); for a `TEMPORA_SIGEV_THREAD` timer, the periods
/// its last expiry was late by, which leaves out expiries folded into one call
/// (`tempora_callback_fn` says when they differ). Returns it, or -1 with `errno` `EINVAL`
/// (NULL owner, an unknown timer).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_getoverrun(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
) -> c_int {
    entry(-1, || Ok(owner_of(owner)?.getoverrun(timer_id(timer)?)?))
}

/// `timer_delete`: disarms and deletes timer `timer`; its pending event is dropped unseen.
/// A call of its `TEMPORA_SIGEV_THREAD` function that a firing thread has already taken is
/// not waited for: it may run, or still be running, after this returns, as with
/// `SIGEV_THREAD`. Free what that function uses only once it has said that it is done.
/// Returns 0, or -1 with `errno` `EINVAL` (NULL owner, an unknown timer).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_delete(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
) -> c_int {
    entry(-1, || {
        owner_of(owner)?.delete(timer_id(timer)?)?;
        Ok(0)
    })
}

/// Sets when `timer` may fire after its expiry: `kind` is `TEMPORA_PRECISION_DEFAULT`,
/// `_PRECISE`, `_SLACK` (with `slack_ns` > 0: any time in [expiry, expiry + slack_ns]) or
/// `_DEFERRABLE`; `slack_ns` is 0 for the others. An armed timer is placed again at once; no
/// kind ever fires a timer early. Returns 0, or -1 with `errno` `EINVAL` (NULL owner, an
/// unknown timer, another `kind`, a `slack_ns` that is negative, 0 for `_SLACK` or not 0 for
/// another kind).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_set_precision(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
    kind: c_int,
    slack_ns: i64,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        let id = timer_id(timer)?;
        let precision = match (kind, slack_ns) {
            (TEMPORA_PRECISION_SLACK, ns) if ns > 0 => {
                Precision::Slack(Duration::from_nanos(ns as u64))
            }
            (TEMPORA_PRECISION_SLACK, _) => {
                return Err(Failure::new(libc::EINVAL, "a slack must be above 0 ns"))
            }
            (_, ns) if ns != 0 => {
                return Err(Failure::new(
                    libc::EINVAL,
                    "slack_ns is 0 unless kind is TEMPORA_PRECISION_SLACK",
                ))
            }
            (TEMPORA_PRECISION_DEFAULT, _) => Precision::Default,
            (TEMPORA_PRECISION_PRECISE, _) => Precision::Precise,
            (TEMPORA_PRECISION_DEFERRABLE, _) => Precision::Deferrable,
            _ => {
                return Err(Failure::new(
                    libc::EINVAL,
                    "kind must be TEMPORA_PRECISION_DEFAULT, _PRECISE, _SLACK or _DEFERRABLE",
                ))
            }
        };
        owner.set_precision(id, precision)?;
        Ok(0)
    })
}

/// Reads `timer`'s precision as `tempora_timer_set_precision` set it: its kind into `*kind`
/// and its slack (0 unless `TEMPORA_PRECISION_SLACK`) into `*slack_ns`. Returns 0, or -1 with
/// `errno` `EINVAL` (NULL owner, an unknown timer) or `EFAULT` (NULL `kind` or `slack_ns`).
///
/// # Safety
/// `owner` is NULL or live; `kind` and `slack_ns` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_timer_get_precision(
    owner: *const tempora_owner_t,
    timer: tempora_timer_t,
    kind: *mut c_int,
    slack_ns: *mut i64,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        let id = timer_id(timer)?;
        not_null(kind, "NULL kind")?;
        not_null(slack_ns, "NULL slack_ns")?;
        let (k, ns) = match owner.precision(id)? {
            Precision::Precise => (TEMPORA_PRECISION_PRECISE, 0),
            Precision::Slack(d) => (
                TEMPORA_PRECISION_SLACK,
                i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            ),
            Precision::Deferrable => (TEMPORA_PRECISION_DEFERRABLE, 0),
            _ => (TEMPORA_PRECISION_DEFAULT, 0),
        };
        // SAFETY: both non-NULL and writable (the contract).
        unsafe {
            kind.write(k);
            slack_ns.write(ns);
        }
        Ok(0)
    })
}

/// Sets the slack of `owner`'s timers whose precision is `TEMPORA_PRECISION_DEFAULT` (the
/// default for every timer), read at each arming: `slack_ns` > 0 makes them slack timers, 0
/// precise again. Returns 0, or -1 with `errno` `EINVAL` (NULL owner, a negative `slack_ns`).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_set_default_slack(
    owner: *const tempora_owner_t,
    slack_ns: i64,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        if slack_ns < 0 {
            return Err(Failure::new(libc::EINVAL, "a negative slack"));
        }
        owner.set_default_slack((slack_ns > 0).then(|| Duration::from_nanos(slack_ns as u64)));
        Ok(0)
    })
}

/// `prctl(PR_TIMER_CREATE_RESTORE_IDS, op)` for one owner: `TEMPORA_RESTORE_IDS_ON` makes
/// `tempora_timer_create` create the ID in `*timerid`, `_OFF` goes back to the next free ID
/// (the one after the last exact ID), `_GET` returns the mode. Returns 0 (the mode for
/// `_GET`), or -1 with `errno` `EINVAL` (NULL owner, another `op`).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_restore_ids(
    owner: *const tempora_owner_t,
    op: c_int,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        match op {
            TEMPORA_RESTORE_IDS_OFF | TEMPORA_RESTORE_IDS_ON => {
                owner.set_restore_ids(op == TEMPORA_RESTORE_IDS_ON);
                Ok(0)
            }
            TEMPORA_RESTORE_IDS_GET => Ok(c_int::from(owner.restore_ids())),
            _ => Err(Failure::new(
                libc::EINVAL,
                "op must be TEMPORA_RESTORE_IDS_OFF, _ON or _GET",
            )),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Events.

/// Why an empty queue will stay empty, if it will.
fn closed_failure(owner: &Owner) -> Failure {
    match owner.closed() {
        Some(e) => e.into(),
        None => Failure::new(libc::EAGAIN, "no event is queued"),
    }
}

fn write_event(out: *mut tempora_event, e: tempora::Event) {
    // SAFETY: the entries check `out` is non-NULL; the contract makes it writable.
    unsafe {
        out.write(tempora_event {
            timer: e.id.get(),
            overrun: e.overrun,
        })
    };
}

/// Takes the next event of the owner's `TEMPORA_SIGEV_QUEUE` timers into `*event`, waiting
/// for one up to `*timeout` (relative; NULL waits for as long as it takes), as `sigtimedwait`
/// waits for a signal. Something must fire the timers meanwhile: a driver thread, or another
/// thread's `tempora_poll`. Taking the event of a periodic timer re-arms it.
///
/// Returns 0, or -1 with `errno`: `EAGAIN` (the timeout passed first), `EINVAL` (NULL owner,
/// an invalid timeout, the owner deleted), `EFAULT` (NULL `event`), `ESHUTDOWN` (the service
/// was freed and the queue is empty), `ENOTRECOVERABLE` (the service failed).
///
/// # Safety
/// `owner` is NULL or live; `timeout` is NULL or readable; `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_event_wait(
    owner: *const tempora_owner_t,
    timeout: *const timespec,
    event: *mut tempora_event,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        not_null(event, "NULL event")?;
        // SAFETY: NULL or readable (the contract).
        let got = match unsafe { timeout.as_ref() } {
            None => Some(owner.recv()?),
            Some(t) => owner.recv_timeout(Duration::from_nanos(spec_of(t).to_nanos()?))?,
        };
        let e = got.ok_or(Failure::new(
            libc::EAGAIN,
            "no event came before the timeout",
        ))?;
        write_event(event, e);
        Ok(0)
    })
}

/// Takes the next event into `*event` without waiting. Returns 0, or -1 with `errno`:
/// `EAGAIN` (no event is queued), `EFAULT` (NULL `event`), or, once no event can come any
/// more, why: `EINVAL` (the owner was deleted), `ESHUTDOWN` (the service was freed),
/// `ENOTRECOVERABLE` (it failed). An event loop drains the owner's event fd with it until
/// `EAGAIN`.
///
/// # Safety
/// `owner` is NULL or live; `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_event_try(
    owner: *const tempora_owner_t,
    event: *mut tempora_event,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        not_null(event, "NULL event")?;
        let e = owner.try_recv().ok_or_else(|| closed_failure(owner))?;
        write_event(event, e);
        Ok(0)
    })
}

/// The owner's readiness fd (an eventfd): readable exactly while its queue holds events (and
/// for good once the owner is closed), as a signalfd is while signals are pending. It is
/// level-like: wait for `EPOLLIN` (edge-triggered works for one consumer that drains), then
/// call `tempora_event_try` until it fails with `EAGAIN`; never `read(2)` it. Made on the
/// first call; the same fd after. The owner owns it: do not close it; it is closed with the
/// owner. Returns the fd, or -1 with `errno` (`EINVAL` for NULL, or the OS's if it cannot be
/// made).
///
/// # Safety
/// `owner` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_event_fd(owner: *const tempora_owner_t) -> c_int {
    entry(-1, || Ok(owner_of(owner)?.event_fd()?.as_raw_fd()))
}

/// Fires every timer that is due: callbacks run on the calling thread, events are queued.
/// Returns how many timers fired (capped at INT_MAX), or -1 with `errno` `EINVAL` for NULL.
/// A service with drivers fires timers by itself; one made with `drivers = 0` needs this,
/// at `tempora_next_timeout` or when `tempora_deadline_fd` is readable.
///
/// # Safety
/// `t` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_poll(t: *const tempora_t) -> c_int {
    entry(-1, || {
        Ok(c_int::try_from(timers_of(t)?.poll()).unwrap_or(c_int::MAX))
    })
}

/// For a service made with `drivers = 0`: a timerfd that is readable when a timer is due.
/// Wait for it beside your sockets and call `tempora_poll` when it is readable, which re-arms
/// it (do not `read(2)` it). The service owns it: do not close it. Returns the fd, or -1 with
/// `errno`: `EINVAL` (NULL, or a service with driver threads), or the OS's if it cannot be
/// made.
///
/// # Safety
/// `t` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_deadline_fd(t: *const tempora_t) -> c_int {
    entry(-1, || Ok(timers_of(t)?.deadline_fd()?.as_raw_fd()))
}

/// When `tempora_poll` next fires a timer, as a `CLOCK_MONOTONIC` time in `*deadline` (it
/// may have passed: poll at once). Returns 1 with `*deadline` written; 0 if no timer needs a
/// wake-up: none is armed, or only `TEMPORA_PRECISION_DEFERRABLE` ones with no deferral
/// bound (`max_deferral_ns` = `UINT64_MAX`), which fire at a poll made for something else;
/// or -1 with `errno` (`EINVAL` for a NULL service, `EFAULT` for a NULL `deadline`).
///
/// # Safety
/// `t` is NULL or live; `deadline` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tempora_next_deadline(
    t: *const tempora_t,
    deadline: *mut timespec,
) -> c_int {
    entry(-1, || {
        let timers = timers_of(t)?;
        not_null(deadline, "NULL deadline")?;
        Ok(match timers.next_deadline() {
            Some(ns) => {
                // SAFETY: non-NULL and writable (the contract).
                unsafe { deadline.write(timespec_of(TimeSpec::from_nanos(ns))) };
                1
            }
            None => 0,
        })
    })
}

/// Milliseconds until `tempora_poll` next fires a timer, rounded up (never early), for
/// `epoll_wait`'s and `poll`'s timeout: -1 if no timer needs a wake-up (wait for other events
/// only; as for `tempora_next_deadline`, an armed deferrable timer with no deferral bound
/// needs none), 0 if one is due, at most INT_MAX. Also -1, with `errno` `EINVAL`, for a NULL
/// service: a success leaves `errno` alone, so set it to 0 before the call to tell the two
/// apart, lest a bad handle turn into a wait for ever.
///
/// # Safety
/// `t` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tempora_next_timeout(t: *const tempora_t) -> c_int {
    entry(-1, || {
        Ok(match timers_of(t)?.next_timeout() {
            Some(d) => {
                let ms = d.as_nanos().div_ceil(1_000_000);
                c_int::try_from(ms).unwrap_or(c_int::MAX)
            }
            None => -1,
        })
    })
}

// ---------------------------------------------------------------------------------------
// Checkpoint and restore.

/// Writes a snapshot of the owner's timers to `path` (atomically: a temporary file renamed
/// over it): IDs, clocks, settings, remaining times, overruns, pending events, the ID counter
/// and the exact-ID mode, the default slack. Returns 0, or -1 with `errno`: `EINVAL` (NULL
/// owner), `EFAULT` (NULL path), `ENOTRECOVERABLE` (a timer's lock was poisoned by a panic
/// inside tempora: nothing is written), or the OS's (`EACCES`, `ENOENT`, `ENOSPC`...).
///
/// # Safety
/// `owner` is NULL or live; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_checkpoint(
    owner: *const tempora_owner_t,
    path: *const c_char,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        owner.try_checkpoint()?.save_to(path_of(path)?)?;
        Ok(0)
    })
}

/// Recreates the snapshot at `path` in `owner`, which must have no timers: the same IDs,
/// settings, remaining times, overruns and pending events. Callback timers are recorded by
/// name; `resolver` (NULL if the snapshot has none) maps each name to this process's function.
/// All or nothing: on failure the owner is as it was.
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, a corrupt or newer snapshot, a name
/// the resolver does not know), `EBUSY` (the owner has timers), `EFAULT` (NULL path), or the
/// OS's for the file (`ENOENT`...).
///
/// # Safety
/// `owner` is NULL or live; `path` is NULL or a NUL-terminated string; `resolver` is NULL or a
/// function that keeps its contract (`tempora_resolver_fn`) for `ctx`.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_restore(
    owner: *const tempora_owner_t,
    path: *const c_char,
    resolver: tempora_resolver_fn,
    ctx: *mut c_void,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        let snapshot = Snapshot::load_from(path_of(path)?)?;
        // The resolver's first invalid answer, reported instead of "unknown name".
        let refused: RefCell<Option<Failure>> = RefCell::new(None);
        let resolve = |name: &str| -> Option<Notify> {
            let resolver = resolver?;
            let cname = CString::new(name).ok()?;
            // SAFETY: all-zero is a valid `tempora_sigevent` (integers, NULL pointers, `None`
            // function pointers).
            let mut sev: tempora_sigevent = unsafe { std::mem::zeroed() };
            // SAFETY: the resolver's contract (it returns normally; an exception out of it
            // unwinds to `entry`'s `catch_unwind`, which aborts); `cname` and `sev` outlive
            // the call.
            if unsafe { resolver(cname.as_ptr(), &mut sev, ctx) } != 0 {
                return None;
            }
            sev.name = ptr::null();
            // The snapshot's name for a callback recorded without one stays unnamed.
            let keep = (name != "callback").then_some(name);
            // SAFETY: `sev` is a readable sigevent with a NULL name.
            match unsafe { notify_of(&sev, keep) } {
                Ok(n) => Some(n),
                Err(f) => {
                    refused.borrow_mut().get_or_insert(f);
                    None
                }
            }
        };
        let r = owner.restore(&snapshot, resolve);
        match (r, refused.into_inner()) {
            (Ok(()), _) => Ok(0),
            (Err(_), Some(f)) => Err(f),
            (Err(e), None) => Err(e.into()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempora::clock::ClockId;

    #[test]
    fn the_default_owner_is_an_owner_of_the_global_service() {
        let o = tempora_default_owner();
        assert!(!o.is_null());
        assert_eq!(tempora_default_owner(), o, "one default owner");
        // SAFETY: the default owner lives for the process.
        let owner = unsafe { &(*o).owner };
        let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
        let stats = tempora::time::global().stats();
        let mine = stats.root.owners.iter().find(|s| s.owner == owner.id());
        assert_eq!(mine.map(|s| s.counts.created), Some(1), "{stats:?}");
        owner.delete(id).unwrap();
    }
}
