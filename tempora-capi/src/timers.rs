//! The POSIX timer calls on an owner's timers (`tempora_timer_create`, `_settime`,
//! `_gettime`, `_getoverrun`, `_delete`), each timer's precision, and the owner's settings that
//! shape them: its default slack and the exact-ID mode of `tempora_timer_create`.
//!
//! The POSIX calls check their arguments in the order Linux does (a comment says so where the
//! order matters), so that the first bad one sets the errno Linux would.

use crate::convert::{clock_of, itimerspec_of, not_null, notify_of, owner_of, spec_of, timer_id};
use crate::failure::{entry, Failure};
use crate::types::{
    tempora_owner_t, tempora_sigevent, tempora_timer_t, TEMPORA_PRECISION_DEFAULT,
    TEMPORA_PRECISION_DEFERRABLE, TEMPORA_PRECISION_PRECISE, TEMPORA_PRECISION_SLACK,
    TEMPORA_RESTORE_IDS_GET, TEMPORA_RESTORE_IDS_OFF, TEMPORA_RESTORE_IDS_ON,
};
use libc::{c_int, clockid_t, itimerspec};
use std::time::Duration;
use tempora::{Notify, Precision, SetFlags};

/// `timer_create`: a disarmed timer on `clock` (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`,
/// `CLOCK_BOOTTIME`) that notifies as `sev` says (NULL: `TEMPORA_SIGEV_QUEUE`). Its ID is
/// written to `*timerid`. With exact-ID mode on (`tempora_owner_restore_ids`), the ID to
/// create is read from `*timerid` first.
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, a clock ID the kernel does not know,
/// invalid sigevent (a `notify_function` or `callback` set with a `notify` other than
/// `TEMPORA_SIGEV_THREAD`, among others), a signal sigevent whose `tid` is not a thread of this process
/// (`TEMPORA_SIGEV_THREAD_ID`) or whose `signo` is outside 1..=64, a deleted owner, an exact
/// ID that is negative or beyond the ID range),
/// `EOPNOTSUPP` (a clock tempora does not time: CPU-time, raw, coarse, alarm, TAI; for such a
/// clock the errno is the kernel's own, which tempora asks it for), `EFAULT` (NULL
/// `timerid`), `EAGAIN` (every ID in use, a group at its limit, or no memory for the timer), `EBUSY` (the exact ID is in use), `ESHUTDOWN`
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
    // SAFETY: the caller's contract on `sev`.
    let notify = || unsafe { notify_of(sev, None) };
    // SAFETY: the caller's contract on `owner` and `timerid`.
    unsafe { create_on(owner, clock, notify, timerid) }
}

/// `tempora_timer_create` with the sigevent read by `notify` (a `tempora_sigevent`, or the C
/// library's for `tempora_posix.h` and the drop-in): the clock, then `notify()`, then
/// `timerid` are checked, in Linux's order.
///
/// # Safety
/// `owner` is NULL or live; `timerid` is NULL or readable and writable.
pub(crate) unsafe fn create_on(
    owner: *const tempora_owner_t,
    clock: clockid_t,
    notify: impl FnOnce() -> Result<Notify, Failure>,
    timerid: *mut tempora_timer_t,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        // Linux's order: the clock, the sigevent, then the ID's address.
        let clock = clock_of(clock)?;
        let notify = notify()?;
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
/// setting to `*old` unless it is NULL. A time past `KTIME_MAX` (`INT64_MAX` ns, about 292
/// years) is clamped to it, as Linux clamps it: the value (absolute, or now plus a relative
/// one), and the interval; `tempora_timer_gettime` then reads the time left to it.
/// Voids an event still pending from the last arming and
/// resets the overrun (a signal already queued is delivered all the same:
/// `TEMPORA_SIGEV_SIGNAL`).
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner or `new`, negative seconds or
/// `tv_nsec` outside 0..999999999, an unknown timer), `ESHUTDOWN` (the service was freed),
/// `EDEADLK` (called from a signal handler that interrupted, on the same thread, a tempora
/// call holding a lock: nothing changed; see "Signal handlers" below).
///
/// # Signal handlers
/// `tempora_timer_settime`, `tempora_timer_gettime` and `tempora_timer_getoverrun` are
/// async-signal-safe, as POSIX makes `timer_settime` & co.: a handler may call them on any
/// thread, whatever that thread was doing inside tempora. They allocate nothing (a failure's
/// message included) and never wait for a lock their own thread holds. `gettime` holds no
/// lock, so a handler that interrupted it re-arms the same timer; a call that would need a lock
/// the interrupted call holds (a `settime`, `delete`, `create`, a poll or receive on that
/// thread) fails at once with `EDEADLK` and changes nothing. A thread's first tempora call
/// allocates its per-thread slot: make it outside a handler. The other calls are not
/// async-signal-safe.
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
/// `it_value` when disarmed). Takes no lock; async-signal-safe (`tempora_timer_settime`'s
/// "Signal handlers"). Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, an unknown
/// timer), `EFAULT` (NULL `curr`), `EDEADLK` (from a signal handler that interrupted a
/// tempora call holding a lock on the same thread).
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
/// (`tempora_callback_fn` says when they differ). Async-signal-safe
/// (`tempora_timer_settime`'s "Signal handlers"). Returns it, or -1 with `errno` `EINVAL`
/// (NULL owner, an unknown timer) or `EDEADLK` (from a signal handler that interrupted a
/// tempora call holding a lock on the same thread).
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

/// `timer_delete`: disarms and deletes timer `timer`; its pending event is dropped unseen (a
/// signal already queued is delivered all the same: `TEMPORA_SIGEV_SIGNAL`).
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
