//! The types and constants of `include/tempora.h`: the opaque handles (`tempora_t`,
//! `tempora_owner_t`), the `#[repr(C)]` structs a C program fills or reads, the function-pointer
//! types it passes, and the constants of each `int` argument. Their layouts are the ABI: a field
//! moved or resized here breaks every compiled C program, and so does one added anywhere but
//! at the end of a struct that says how it grows: `tempora_sigevent` (a field is read only for
//! the `notify` values that came with it) and `tempora_config` (read only as far as its `size`
//! covers). `tempora_event`, which the library writes into the caller's memory, never grows: a
//! new field would be a new call. `layout_tests` checks the offsets.
//!
//! Items stay in the header's order (cbindgen emits the constants in the order it reads them).

use libc::{c_char, c_int, c_void, sigval};
use tempora::{Owner, Timers};

/// A timer's ID within its owner (POSIX's `timer_t`): non-negative, unique per owner.
pub type tempora_timer_t = i32;

/// A timer service (bases, drivers, clocks): made by `tempora_new`, freed by `tempora_free`.
pub struct tempora_t {
    pub(crate) timers: Timers,
}

/// An owner: a namespace of timer IDs with its event queue (the analogue of a process). Made
/// by `tempora_owner_new`, freed (with all its timers) by `tempora_owner_free`.
pub struct tempora_owner_t {
    pub(crate) owner: Owner,
    /// A process-wide default owner (`tempora_default_owner`), which is never freed.
    pub(crate) default: bool,
}

/// The crate's version, `MAJOR.MINOR.PATCH` (a test holds these equal to the crate's): what
/// the header a program is compiled with says; `tempora_version()` says what the library it
/// runs with is.
pub const TEMPORA_VERSION_MAJOR: c_int = 0;
/// See `TEMPORA_VERSION_MAJOR`.
pub const TEMPORA_VERSION_MINOR: c_int = 1;
/// See `TEMPORA_VERSION_MAJOR`.
pub const TEMPORA_VERSION_PATCH: c_int = 0;
/// The header's version as one number, `MAJOR * 10000 + MINOR * 100 + PATCH`, what
/// `tempora_version()` returns for the library: `tempora_version() >= TEMPORA_VERSION_NUMBER`
/// holds when the library is at least as new as the header.
pub const TEMPORA_VERSION_NUMBER: c_int =
    TEMPORA_VERSION_MAJOR * 10000 + TEMPORA_VERSION_MINOR * 100 + TEMPORA_VERSION_PATCH;

/// A service's settings for `tempora_new`. Fill one with `tempora_config_init(&config, sizeof
/// config)` (the defaults, and `size`), then change what you need.
///
/// The struct grows, only at its end: `size` is how big the program's struct is (as the
/// header it was compiled with says), the library reads only what `size` covers and takes the
/// defaults for the rest, so a program built against an older header keeps working with a
/// newer library. A program built against a newer header than the library's works too while
/// it leaves the fields the library does not know at 0 (every field added later means "the
/// default" at 0); one it set fails `tempora_new` with `E2BIG`.
///
/// A program built against a header from before `size` cannot be helped: its
/// `tempora_config_init(&config)` passes whatever its second argument register holds as the
/// size (refused with `EINVAL` unless it is a multiple of 8 in 40 ..= 4096, when it writes
/// that many bytes), and `tempora_new` reads its `bases` and `drivers` as the size (refused
/// with `EINVAL` unless `drivers` is 0 and `bases` a multiple of 8 in 40 ..= 4096, on a
/// 64-bit little-endian target). Rebuild it.
#[repr(C)]
pub struct tempora_config {
    /// `sizeof(struct tempora_config)` in the program: set by `tempora_config_init`. Read
    /// first; `tempora_new` fails with `EINVAL` if it is smaller than the first struct that
    /// had it or larger than 4096 (0 or garbage: an uninitialised struct).
    pub size: usize,
    /// Bases (a lock and a wheel per clock each): 0 for one per CPU.
    pub bases: u32,
    /// Driver threads that fire timers: -1 for the default (one); 0 for none, where the
    /// application fires them itself with `tempora_poll` (at `tempora_next_timeout`, or when
    /// `tempora_deadline_fd` is readable).
    pub drivers: i32,
    /// The wheels' tick in nanoseconds (0 for the default, 1 µs; at most 1000000000, 1 s:
    /// `tempora_new` fails with `EINVAL` above it). Timers still fire at their exact
    /// nanosecond expiry or later, and less than one tick after it when a driver is awake.
    pub tick_ns: u64,
    /// Timer IDs are `0 .. 2^id_bits` in each owner (1 ..= 31; 0 for the default, 31: all
    /// of `tempora_timer_t`'s non-negative values). A smaller space caps each owner's timers:
    /// a create then fails with `EAGAIN` when every ID is in use.
    pub id_bits: u32,
    /// The most spare threads per driver, started on demand, that stand by to take its
    /// place while it runs `SIGEV_THREAD` functions: -1 for the default (64); 0 for none.
    /// A function that blocks delays no `TEMPORA_SIGEV_QUEUE`, `TEMPORA_SIGEV_NONE` or
    /// signal timer, however many block (a thread inside a function never polls); with
    /// `spare_drivers` functions of one driver blocked at once, other functions wait for the
    /// first of them to return.
    /// With 0, the driver runs the functions itself, and one that blocks stops every timer.
    pub spare_drivers: i32,
    /// How long after its expiry a `TEMPORA_PRECISION_DEFERRABLE` timer may wait for a driver
    /// that is awake anyway, in nanoseconds: 0 for the default (1 s), `UINT64_MAX` for no
    /// bound (it then waits for as long as nothing else wakes a driver).
    pub max_deferral_ns: u64,
}

/// `tempora_timer_set_precision`'s `kind`: the owner's default (`tempora_owner_set_default_slack`),
/// read at each arming; precise unless the owner has a default slack.
pub const TEMPORA_PRECISION_DEFAULT: c_int = 0;
/// `tempora_timer_set_precision`'s `kind`: fires within one tick of its expiry.
pub const TEMPORA_PRECISION_PRECISE: c_int = 1;
/// `tempora_timer_set_precision`'s `kind`: may fire up to `slack_ns` after its expiry, never
/// before (Linux's `PR_SET_TIMERSLACK`, per timer), sharing wake-ups with timers due near it.
pub const TEMPORA_PRECISION_SLACK: c_int = 2;
/// `tempora_timer_set_precision`'s `kind`: never causes a wake-up by itself; fires when a
/// driver is awake anyway, or `max_deferral_ns` after its expiry (the kernel's
/// `TIMER_DEFERRABLE`), never before its expiry.
pub const TEMPORA_PRECISION_DEFERRABLE: c_int = 3;

/// The `notify` of a `tempora_sigevent`: an event on the owner's queue
/// (`tempora_event_wait`, `tempora_event_try`, `tempora_owner_event_fd`), with the kernel's
/// signal rules (one pending event per timer, overruns counted). `SIGEV_SIGNAL`'s value.
pub const TEMPORA_SIGEV_QUEUE: c_int = 0;
/// The `notify` of a `tempora_sigevent`: nothing is delivered; `tempora_timer_gettime`
/// shows the timer's state. `SIGEV_NONE`'s value.
pub const TEMPORA_SIGEV_NONE: c_int = 1;
/// The `notify` of a `tempora_sigevent`: a function is called at each expiry, with the
/// sigevent's `value`. `SIGEV_THREAD`'s value.
pub const TEMPORA_SIGEV_THREAD: c_int = 2;
/// The `notify` of a `tempora_sigevent`: the signal `signo` is queued to the process at each
/// expiry, as a kernel timer's is (`SIGEV_SIGNAL`, whose value is `TEMPORA_SIGEV_QUEUE`'s):
/// `si_code` `SI_TIMER`, `si_timerid` the timer's ID, `si_value` the sigevent's `value`,
/// `si_overrun` the periods missed before it was queued; at most one pending per timer.
/// tempora's own threads block every signal, so a thread of the program takes it.
///
/// Where it differs from the kernel's: the periods that pass while the signal is pending are
/// what `tempora_timer_getoverrun` returns once it is delivered, and are carried into the next
/// signal's `si_overrun`, not into its own (user space cannot rewrite a queued siginfo); and a
/// signal queued before a `tempora_timer_settime` or `tempora_timer_delete` cannot be taken
/// back: it is delivered all the same (the kernel's timer discards it).
pub const TEMPORA_SIGEV_SIGNAL: c_int = 3;
/// The `notify` of a `tempora_sigevent`: as `TEMPORA_SIGEV_SIGNAL`, to the thread `tid` of
/// this process. `SIGEV_THREAD_ID`'s value.
pub const TEMPORA_SIGEV_THREAD_ID: c_int = 4;
/// The `notify` of a `tempora_sigevent`: as `TEMPORA_SIGEV_SIGNAL`, with the timer's ID as
/// `si_value` (`sival_int`; `value` is not read): what `timer_create` does with a NULL
/// sigevent, with `signo` `SIGALRM`.
pub const TEMPORA_SIGEV_SIGNAL_ID: c_int = 5;

/// `flags` of `tempora_timer_settime`: `it_value` is an absolute time on the timer's clock
/// (`TIMER_ABSTIME`'s value). Other bits are ignored, as Linux ignores them.
pub const TEMPORA_TIMER_ABSTIME: c_int = 1;

/// `tempora_owner_restore_ids`: turn exact-ID mode off (`PR_TIMER_CREATE_RESTORE_IDS_OFF`).
pub const TEMPORA_RESTORE_IDS_OFF: c_int = 0;
/// `tempora_owner_restore_ids`: turn exact-ID mode on (`PR_TIMER_CREATE_RESTORE_IDS_ON`):
/// `tempora_timer_create` then reads the ID it must create from `*timerid`.
pub const TEMPORA_RESTORE_IDS_ON: c_int = 1;
/// `tempora_owner_restore_ids`: return the mode, 0 or 1 (`PR_TIMER_CREATE_RESTORE_IDS_GET`).
pub const TEMPORA_RESTORE_IDS_GET: c_int = 2;

/// A `TEMPORA_SIGEV_THREAD` function with `SIGEV_THREAD`'s signature: the sigevent's `value`.
///
/// It must return normally. A C++ exception that escapes it aborts the process (`SIGABRT`):
/// catch every exception inside it. Leaving it by `longjmp` or `siglongjmp`, by
/// `pthread_exit`, or by a cancellation of the thread it runs on is undefined behaviour: it
/// skips the tempora frames that called it, whose bookkeeping of the call never finishes (the
/// timer may never be called again).
pub type tempora_notify_fn = Option<unsafe extern "C-unwind" fn(value: sigval)>;

/// A `TEMPORA_SIGEV_THREAD` function that is also told which timer fired and its `overrun`:
/// the periods since the previous call that get no call of their own. Those are the periods
/// the timer fired late by and, when it expired again while the previous call ran (a timer's
/// calls never overlap: such expiries make one more call, after it), every such expiry but
/// one. `tempora_timer_getoverrun` counts only the lateness of the last expiry the timer
/// took: inside a call made for one expiry it returns `overrun` (until the timer expires
/// again); inside a call made for expiries that came during the previous call it returns the
/// last one's lateness alone, less than `overrun`. Count missed periods from `overrun`.
///
/// It must return normally, as a `tempora_notify_fn` must: a C++ exception that escapes it
/// aborts the process (`SIGABRT`); `longjmp`, `siglongjmp`, `pthread_exit` or a cancellation
/// out of it is undefined behaviour.
pub type tempora_callback_fn =
    Option<unsafe extern "C-unwind" fn(timer: tempora_timer_t, overrun: c_int, value: sigval)>;

/// How a timer reports its expiry (POSIX's `struct sigevent`). NULL at `tempora_timer_create`
/// means `TEMPORA_SIGEV_QUEUE`.
///
/// Fields are only ever added at the end, and read only for the `notify` values that came
/// with them: `signo` and `tid` only for `TEMPORA_SIGEV_SIGNAL`, `_THREAD_ID` and
/// `_SIGNAL_ID`. A program built against an older header, whose struct ends at `name`, never
/// passes those values, so tempora reads nothing beyond its struct and it keeps working.
#[repr(C)]
pub struct tempora_sigevent {
    /// `TEMPORA_SIGEV_QUEUE`, `TEMPORA_SIGEV_NONE`, `TEMPORA_SIGEV_THREAD`,
    /// `TEMPORA_SIGEV_SIGNAL`, `TEMPORA_SIGEV_THREAD_ID` or `TEMPORA_SIGEV_SIGNAL_ID`.
    pub notify: c_int,
    /// Passed to the function of a `TEMPORA_SIGEV_THREAD` timer; the `si_value` of a
    /// `TEMPORA_SIGEV_SIGNAL` or `_THREAD_ID` timer's signal (`sigev_value`).
    pub value: sigval,
    /// `TEMPORA_SIGEV_THREAD`: the function to call, POSIX-shaped (`sigev_notify_function`).
    /// Exactly one of `notify_function` and `callback` is set for such a timer, and neither
    /// for any other `notify` (`EINVAL`: a function left with `notify` 0, which is
    /// `TEMPORA_SIGEV_QUEUE`, would never be called).
    pub notify_function: tempora_notify_fn,
    /// `TEMPORA_SIGEV_THREAD`: the function to call, with the timer's ID and overrun.
    pub callback: tempora_callback_fn,
    /// `TEMPORA_SIGEV_THREAD`, optional (NULL for none): the name a checkpoint records the
    /// callback under, for `tempora_owner_restore`'s resolver to map back to a function. At
    /// most 65490 bytes of UTF-8, not `none` or `queue`. Copied at create. A callback without
    /// a name is recorded as `callback`.
    pub name: *const c_char,
    /// `TEMPORA_SIGEV_SIGNAL`, `_THREAD_ID` and `_SIGNAL_ID`: the signal number, 1 ..= 64
    /// (`sigev_signo`). Not read for the other kinds.
    pub signo: c_int,
    /// `TEMPORA_SIGEV_THREAD_ID`: the thread the signal goes to (its `gettid()`), a thread of
    /// this process (`sigev_notify_thread_id`). Not read for the other kinds.
    pub tid: c_int,
}

/// An event from a `TEMPORA_SIGEV_QUEUE` timer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tempora_event {
    /// The timer that fired.
    pub timer: tempora_timer_t,
    /// The periods it missed before this event was taken (`si_overrun`), capped at INT_MAX.
    pub overrun: c_int,
}

/// `tempora_owner_restore`'s callback-name resolver: fill `*out` with the notification the
/// timers recorded under `name` get (usually a `TEMPORA_SIGEV_THREAD` with the function and
/// value of this process) and return 0, or return -1 if `name` is unknown (the restore then
/// fails with `EINVAL` and restores nothing). `ctx` is the pointer given to the restore. The
/// restored timers keep `name` for their next checkpoint; `out->name` is ignored.
///
/// It must return normally, as a `tempora_notify_fn` must: a C++ exception that escapes it
/// aborts the process (`SIGABRT`); `longjmp`, `siglongjmp`, `pthread_exit` or a cancellation
/// out of it is undefined behaviour.
pub type tempora_resolver_fn = Option<
    unsafe extern "C-unwind" fn(
        name: *const c_char,
        out: *mut tempora_sigevent,
        ctx: *mut c_void,
    ) -> c_int,
>;

/// The offsets of the structs' fields on this target: what a C program compiled against an
/// older header still assumes.
#[cfg(test)]
mod layout_tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn the_sigevent_only_grew_at_its_end() {
        let ptr = size_of::<*const c_char>();
        // The fields of every header, at their first offsets.
        assert_eq!(offset_of!(tempora_sigevent, notify), 0);
        assert_eq!(
            offset_of!(tempora_sigevent, value),
            align_of::<sigval>().max(4)
        );
        assert_eq!(
            offset_of!(tempora_sigevent, notify_function),
            offset_of!(tempora_sigevent, value) + ptr
        );
        assert_eq!(
            offset_of!(tempora_sigevent, callback),
            offset_of!(tempora_sigevent, notify_function) + ptr
        );
        assert_eq!(
            offset_of!(tempora_sigevent, name),
            offset_of!(tempora_sigevent, callback) + ptr
        );
        // Then the fields of TEMPORA_SIGEV_SIGNAL, _THREAD_ID and _SIGNAL_ID.
        let old_end = offset_of!(tempora_sigevent, name) + ptr;
        assert_eq!(offset_of!(tempora_sigevent, signo), old_end);
        assert_eq!(offset_of!(tempora_sigevent, tid), old_end + 4);
        if cfg!(target_pointer_width = "64") {
            assert_eq!((old_end, size_of::<tempora_sigevent>()), (40, 48));
        }
    }

    #[test]
    fn the_config_only_grew_at_its_end() {
        // `size` first, then the fields of the first struct that had it.
        assert_eq!(offset_of!(tempora_config, size), 0);
        let word = size_of::<usize>();
        assert_eq!(offset_of!(tempora_config, bases), word);
        assert_eq!(offset_of!(tempora_config, drivers), word + 4);
        let tick = offset_of!(tempora_config, tick_ns);
        assert_eq!(tick, (word + 8).next_multiple_of(align_of::<u64>()));
        assert_eq!(offset_of!(tempora_config, id_bits), tick + 8);
        assert_eq!(offset_of!(tempora_config, spare_drivers), tick + 12);
        assert_eq!(offset_of!(tempora_config, max_deferral_ns), tick + 16);
        if cfg!(target_pointer_width = "64") {
            assert_eq!(size_of::<tempora_config>(), 40);
        }
    }

    #[test]
    fn the_version_constants_are_the_crates() {
        let v = |s: &str| s.parse::<c_int>().expect("a number");
        assert_eq!(
            [
                TEMPORA_VERSION_MAJOR,
                TEMPORA_VERSION_MINOR,
                TEMPORA_VERSION_PATCH
            ],
            [
                v(env!("CARGO_PKG_VERSION_MAJOR")),
                v(env!("CARGO_PKG_VERSION_MINOR")),
                v(env!("CARGO_PKG_VERSION_PATCH"))
            ],
            "the crate's version changed: change TEMPORA_VERSION_* with it"
        );
        const { assert!(TEMPORA_VERSION_MINOR < 100 && TEMPORA_VERSION_PATCH < 100) };
    }

    #[test]
    fn the_notify_values_never_change() {
        assert_eq!(
            [
                TEMPORA_SIGEV_QUEUE,
                TEMPORA_SIGEV_NONE,
                TEMPORA_SIGEV_THREAD,
                TEMPORA_SIGEV_SIGNAL,
                TEMPORA_SIGEV_THREAD_ID,
                TEMPORA_SIGEV_SIGNAL_ID,
            ],
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(TEMPORA_SIGEV_THREAD_ID, libc::SIGEV_THREAD_ID);
    }
}
