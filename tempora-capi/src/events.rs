//! Events and the application's own event loop: taking a `TEMPORA_SIGEV_QUEUE` timer's events
//! (`tempora_event_wait`, `tempora_event_try`), the owner's readiness fd, and, for a service
//! with no driver thread, firing its timers (`tempora_poll`) and knowing when to
//! (`tempora_deadline_fd`, `tempora_next_deadline`, `tempora_next_timeout`).

use crate::convert::{not_null, owner_of, spec_of, timers_of, timespec_of};
use crate::failure::{entry, Failure};
use crate::types::{tempora_event, tempora_owner_t, tempora_t};
use libc::{c_int, timespec};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use tempora::clock::TimeSpec;
use tempora::Owner;

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
/// As `sigtimedwait`, a wait that a signal handler interrupts fails with `EINTR`, whether or
/// not the handler was installed with `SA_RESTART`, so a loop whose handler sets a quit flag
/// can look at it (an event already queued is taken first). The wait sleeps on the owner's
/// readiness fd (`tempora_owner_event_fd`, made by the first wait that sleeps); if that fd
/// cannot be made (the process is out of fds) it sleeps on the owner's queue instead,
/// which a handler does not end.
///
/// Returns 0, or -1 with `errno`: `EAGAIN` (the timeout passed first), `EINTR` (a signal
/// handler ran during the wait), `EINVAL` (NULL owner, an invalid timeout, the owner
/// deleted), `EFAULT` (NULL `event`), `ESHUTDOWN` (the service was freed and the queue is
/// empty), `ENOTRECOVERABLE` (the service failed).
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
        let deadline = match unsafe { timeout.as_ref() } {
            // A timeout too long to represent waits without a deadline, as `recv_timeout`.
            Some(t) => Instant::now().checked_add(Duration::from_nanos(spec_of(t).to_nanos()?)),
            None => None,
        };
        let e = wait_interruptibly(owner, deadline)?.ok_or(Failure::new(
            libc::EAGAIN,
            "no event came before the timeout",
        ))?;
        write_event(event, e);
        Ok(0)
    })
}

/// `tempora_event_wait`'s wait: the next event, or `None` once `deadline` has passed. It
/// sleeps in `ppoll` on the owner's readiness fd, which is readable while the queue holds an
/// event or the owner is closed, rather than in `Owner::recv_timeout`: that one sleeps on a
/// futex and waits again after a signal (as std's blocking calls retry `EINTR`), while `ppoll` returns `EINTR` once a handler has run, `SA_RESTART` or not
/// (signal(7)), which is what `sigtimedwait` does. Each round takes an event first, then
/// looks whether the owner is closed, then sleeps: the fd is readable again by then if
/// anything was pushed after the take (`Sink::sync_fd` runs after every transition).
fn wait_interruptibly(
    owner: &Owner,
    deadline: Option<Instant>,
) -> Result<Option<tempora::Event>, Failure> {
    let mut fd = None;
    loop {
        if let Some(e) = owner.try_recv() {
            return Ok(Some(e));
        }
        if let Some(e) = owner.closed() {
            return Err(e.into());
        }
        let left = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                Some(timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                })
            }
            None => None,
        };
        // Made only once a wait sleeps: a zero timeout, or an event already queued, costs
        // no fd.
        let raw = match fd {
            Some(raw) => raw,
            None => match owner.event_fd() {
                Ok(f) => *fd.insert(f.as_raw_fd()),
                // No fd to be had: the uninterruptible wait, rather than a failure
                // `sigtimedwait` never has.
                Err(_) => {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    return Ok(match left {
                        Some(left) => owner.recv_timeout(left)?,
                        None => Some(owner.recv()?),
                    });
                }
            },
        };
        let mut pfd = libc::pollfd {
            fd: raw,
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = left
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const timespec);
        // SAFETY: one valid `pollfd`; `ts` is NULL or a timespec that outlives the call; a
        // NULL signal mask leaves the thread's mask as it is.
        let r = unsafe { libc::ppoll(&mut pfd, 1, ts, std::ptr::null()) };
        if r < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EINTR) => Failure::new(
                    libc::EINTR,
                    "a signal handler ran while the wait for an event slept",
                ),
                _ => tempora::Error::from(err).into(),
            });
        }
        if r == 0 {
            // The timeout passed: one last look, as `recv_timeout` takes.
            return Ok(owner.try_recv());
        }
    }
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
                unsafe { deadline.write(timespec_of(TimeSpec::from_nanos(ns.as_nanos()))) };
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
