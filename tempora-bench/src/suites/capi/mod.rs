//! The capi suite: tempora's C ABI (`tempora.h`) called from C, beside the same calls made
//! from Rust on [`tempora::Owner`] and the kernel's POSIX timers called from C, in one process
//! and run, one thread. The difference between the first two is what the ABI costs a C
//! program per call: `catch_unwind`, the handle and pointer checks, the `int` ID's check, the
//! `itimerspec` conversions and validation, the old setting written out, the errno plumbing
//! (on failure only) and a call that cannot be inlined.
//!
//! This module owns the Rust side of the harness (the C loops are in `capi.c`, which
//! `build.rs` compiles at `-O2` and the binary links with the `tempora_capi` rlib, so their
//! `tempora_*` calls are the functions `libtempora.so` exports) and the suite's plan.
//!
//! - `settime`: re-arm each of n armed timers with a relative one-shot of 1 s plus a spread
//!   below 1 s (the service suite's `spread` at pass 0), reading the old setting back. Every
//!   pass moves each expiry later by the time the previous pass took; nothing fires.
//! - `gettime`: read each of n armed timers (re-armed, untimed, before every run, so every
//!   timer read is armed).
//! - `create-delete`: create a timer (`CLOCK_MONOTONIC`, queued events; the kernel's as below)
//!   and delete it, n times, with the n others live. `ns_per_op` is per create+delete pair.
//! - `deliver-signal`: the service suite's case of that name (`service/signals.rs`) written in
//!   C: a burst of n one-shot timers whose expiries queue a real-time signal to the process,
//!   taken with `sigtimedwait`, and one periodic timer's signals (n = 1), for `kernel-c`
//!   (`timer_create` with `SIGEV_SIGNAL`) and `tempora-c` (`tempora_timer_create` with
//!   `TEMPORA_SIGEV_SIGNAL`, on a service from `tempora_config_init`'s settings: one driver
//!   thread). `capi.c` compiles tempora's loop only when `tempora.h` defines
//!   `TEMPORA_SIGEV_SIGNAL`; without it the case has no `tempora-c` row. Its own step and
//!   sides ([`SignalLoop`]): the services of the other cases have no driver.
//! - `sigwait-latency` (`sigwait.rs`): a latency tool's loop, `kernel-c` against
//!   `tempora-posix-c` only: one thread at 1 ns timer slack takes n signals (n = 1000 per
//!   run) of its 1 kHz `SIGEV_THREAD_ID` timer with `sigwait`; `p50_ns` (the headline),
//!   `p99_ns`, `max_ns` of the time from each expiry to `sigwait`'s return, and how often the
//!   drop-in's driver woke per expiry. The kernel's expiry is an hrtimer interrupt that wakes
//!   the waiter; the drop-in's `sigwait` leads its service while it waits, so its own thread
//!   sleeps until the expiry, fires the timer (queues the signal to itself) and takes the
//!   signal in a second wait that returns at once: more work on the waiter's path than the
//!   kernel's, with no other thread's wake-up between. The kernel's interrupt
//!   work is counted by nobody, which favours the kernel; the drop-in's calls go through
//!   dlsym's pointers, the kernel's through the same kind of pointer to the C library's.
//!
//! Implementations (JSON `impl`):
//! - `tempora-c`: the C loop on `tempora_timer_settime`, `tempora_timer_gettime`,
//!   `tempora_timer_create` + `tempora_timer_delete` of a service made with
//!   `tempora_new` (every `tempora_config` field 0: a base per CPU, the default tick and IDs,
//!   no driver thread) and an owner of it.
//! - `tempora`: the same loop written in Rust on an [`Owner`] of a service built the same way
//!   (`Timers::builder().drivers(0)`), the same arithmetic, the same times, the old setting
//!   read the same way.
//! - `tempora-posix-c`: the C loop on `timer_settime`, `timer_gettime`, `timer_create` +
//!   `timer_delete` of the drop-in, `libtempora-posix.so` (loaded with `dlopen`, called
//!   through the pointers `dlsym` gives, as a program calls it through the PLT), on
//!   `SIGEV_NONE` timers of its default owner: the default service of its own copy of
//!   tempora, whose one driver thread sleeps, as nothing comes due. Against `tempora-c`, it
//!   shows what the drop-in adds: the `timer_t` check, the default owner, a call more.
//!   The library is found beside the binary (cargo builds it as a dependency of this crate)
//!   or at `TEMPORA_POSIX_SO`; without it the rows fail with the reason.
//! - `kernel-c`: the C loop on `timer_settime`, `timer_gettime`, `timer_create` +
//!   `timer_delete` through libc, on kernel timers that signal this thread only
//!   (`SIGEV_THREAD_ID`) with a real-time signal it keeps blocked, as the service suite's, so
//!   that arming really queues an hrtimer.
//!
//! No driver thread on either tempora side (as in the service suite's POSIX calls): a driver
//! would only sleep here, since nothing comes due, and with none neither side can be slowed by
//! another thread's wake-up. Each loop times itself with `clock_gettime(CLOCK_MONOTONIC)` (the
//! Rust loop with `Instant`, the same clock) around `passes` passes over its n timers, so a run
//! is about 200k calls (`--quick` 100k, `--full` 1M), long enough for a clock read at each
//! end to vanish. `tempora-c` and `tempora` are one step: each run times one pass set of each, in
//! alternating order, so both see the same stretch of a shared machine, and `ns_per_op` is
//! each one's median run. The two services have their own timers of the same settings; both
//! fit in the cache at these sizes.
//!
//! What favours whom: the Rust loop may inline parts of `Owner`'s calls into itself (the C
//! loop cannot see into the ABI's functions), which is part of what the ABI costs. The loop
//! bodies themselves do not tilt it: the ABI's functions called from a Rust loop like
//! `tempora`'s cost what they cost from the C loop, within half a nanosecond (measured when the
//! suite was written). `kernel-c` goes through glibc's thin wrappers, one syscall per call.

mod dropin;
mod sigwait;

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::ptr;
use std::time::Instant;

use tempora::clock::{ClockId, TimeSpec};
use tempora::{Notify, Owner, SetFlags, TimerId, Timers};
use tempora_capi::{tempora_config, tempora_owner_t, tempora_t};

use crate::peers::signal::{cannot_run, kernel_signo, tempora_signo};
use crate::suites::service::signals::{
    self, lead_ns, window_ns, BurstCost, Chunk, LATE_BACK_OFF, LATE_TRIES, PERIOD_NS, SPIN_AHEAD_NS,
};
use crate::workload::spread_nsec;
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};
use dropin::{dropin, CDropin};

const CASES: [&str; 3] = ["settime", "gettime", "create-delete"];

// The loops of `capi.c` (compiled by build.rs). Each returns ns per call, or minus the errno
// of the first call that failed. Owners are passed as `*const c_void`: the C side sees them as
// `const tempora_owner_t *`, an opaque handle.
extern "C" {
    fn capi_settime_tempora(owner: *const c_void, ids: *const i32, n: usize, passes: c_int) -> f64;
    fn capi_gettime_tempora(owner: *const c_void, ids: *const i32, n: usize, passes: c_int) -> f64;
    fn capi_create_delete_tempora(owner: *const c_void, n: usize, passes: c_int) -> f64;
    fn capi_kernel_create(out: *mut libc::timer_t, n: usize, signo: c_int, tid: c_int) -> usize;
    fn capi_kernel_delete(timers: *const libc::timer_t, n: usize);
    fn capi_settime_kernel(timers: *const libc::timer_t, n: usize, passes: c_int) -> f64;
    fn capi_gettime_kernel(timers: *const libc::timer_t, n: usize, passes: c_int) -> f64;
    fn capi_create_delete_kernel(n: usize, passes: c_int, signo: c_int, tid: c_int) -> f64;
    fn capi_dropin_create(f: *const CDropin, out: *mut libc::timer_t, n: usize) -> usize;
    fn capi_dropin_delete(f: *const CDropin, timers: *const libc::timer_t, n: usize);
    fn capi_settime_dropin(
        f: *const CDropin,
        timers: *const libc::timer_t,
        n: usize,
        passes: c_int,
    ) -> f64;
    fn capi_gettime_dropin(
        f: *const CDropin,
        timers: *const libc::timer_t,
        n: usize,
        passes: c_int,
    ) -> f64;
    fn capi_create_delete_dropin(f: *const CDropin, n: usize, passes: c_int) -> f64;
    fn capi_tempora_signals() -> c_int;
    fn capi_burst_kernel(
        n: usize,
        signo: c_int,
        lead_ns: u64,
        ahead_ns: u64,
        window_ns: u64,
        out: *mut CBurst,
    ) -> c_int;
    fn capi_burst_tempora(
        owner: *const c_void,
        n: usize,
        signo: c_int,
        lead_ns: u64,
        ahead_ns: u64,
        window_ns: u64,
        out: *mut CBurst,
    ) -> c_int;
    fn capi_periodic_kernel(
        signo: c_int,
        period_ns: u64,
        count: usize,
        late: *mut f64,
        cpu_per_signal: *mut f64,
        overruns: *mut u64,
        got: *mut usize,
    ) -> c_int;
    fn capi_periodic_tempora(
        owner: *const c_void,
        signo: c_int,
        period_ns: u64,
        count: usize,
        late: *mut f64,
        cpu_per_signal: *mut f64,
        overruns: *mut u64,
        got: *mut usize,
    ) -> c_int;
}

/// A C loop's result: ns per call, or the errno it failed with.
fn from_c(what: &str, ns: f64) -> Result<f64, String> {
    if ns >= 0.0 {
        Ok(ns)
    } else {
        let errno = -ns as i32;
        let e = std::io::Error::from_raw_os_error(errno);
        Err(format!("{what}: errno {errno} ({e})"))
    }
}

/// One implementation's n live timers and the suite's loops over them.
trait Side {
    fn name(&self) -> &'static str;
    /// Re-arms each timer, `passes` times over; ns per call.
    fn settime(&mut self, passes: usize) -> Result<f64, String>;
    /// Reads each timer, `passes` times over; ns per call.
    fn gettime(&mut self, passes: usize) -> Result<f64, String>;
    /// Creates and deletes a timer n times per pass; ns per pair.
    fn create_delete(&mut self, passes: usize) -> Result<f64, String>;
}

/// `tempora-c`: a service and owner made through the C ABI, driven by `capi.c`'s loops.
struct TemporaC {
    service: *mut tempora_t,
    owner: *mut tempora_owner_t,
    ids: Vec<i32>,
}

impl TemporaC {
    fn new(n: usize) -> Result<TemporaC, String> {
        let last = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // All zero but `size`: a base per CPU, no driver thread (so no spares), the default
        // tick, ID space and deferral bound.
        let config = tempora_config {
            size: std::mem::size_of::<tempora_config>(),
            bases: 0,
            drivers: 0,
            tick_ns: 0,
            id_bits: 0,
            spare_drivers: 0,
            max_deferral_ns: 0,
        };
        // SAFETY: `config` is a readable `tempora_config` for the call.
        let service = unsafe { tempora_capi::tempora_new(&config) };
        if service.is_null() {
            return Err(last("tempora_new"));
        }
        let mut side = TemporaC {
            service,
            owner: ptr::null_mut(),
            ids: Vec::with_capacity(n),
        };
        // SAFETY: `service` is the live handle just made; `Drop` frees both handles.
        side.owner = unsafe { tempora_capi::tempora_owner_new(side.service) };
        if side.owner.is_null() {
            return Err(last("tempora_owner_new"));
        }
        for _ in 0..n {
            let mut id = 0;
            // SAFETY: `owner` is live; a NULL sigevent asks for queued events; `id` is
            // writable for the call.
            let r = unsafe {
                tempora_capi::tempora_timer_create(
                    side.owner,
                    libc::CLOCK_MONOTONIC,
                    ptr::null(),
                    &mut id,
                )
            };
            if r != 0 {
                return Err(last("tempora_timer_create"));
            }
            side.ids.push(id);
        }
        Ok(side)
    }

    fn owner(&self) -> *const c_void {
        self.owner.cast_const().cast()
    }
}

impl Drop for TemporaC {
    fn drop(&mut self) {
        // SAFETY: each handle is NULL or live, made by `new`, freed once here with no other
        // call on it running; the owner (and its timers) before its service.
        unsafe {
            tempora_capi::tempora_owner_free(self.owner);
            tempora_capi::tempora_free(self.service);
        }
    }
}

impl Side for TemporaC {
    fn name(&self) -> &'static str {
        "tempora-c"
    }
    fn settime(&mut self, passes: usize) -> Result<f64, String> {
        let (ids, n) = (self.ids.as_ptr(), self.ids.len());
        // SAFETY: the owner is live and `ids` holds n of its timers for the call.
        let ns = unsafe { capi_settime_tempora(self.owner(), ids, n, passes as c_int) };
        from_c("tempora_timer_settime", ns)
    }
    fn gettime(&mut self, passes: usize) -> Result<f64, String> {
        let (ids, n) = (self.ids.as_ptr(), self.ids.len());
        // SAFETY: as for `settime`.
        let ns = unsafe { capi_gettime_tempora(self.owner(), ids, n, passes as c_int) };
        from_c("tempora_timer_gettime", ns)
    }
    fn create_delete(&mut self, passes: usize) -> Result<f64, String> {
        let n = self.ids.len();
        // SAFETY: the owner is live.
        let ns = unsafe { capi_create_delete_tempora(self.owner(), n, passes as c_int) };
        from_c("tempora_timer_create/delete", ns)
    }
}

/// `tempora`: the same loops in Rust on an [`Owner`] of a service built as `TemporaC`'s.
struct TemporaRust {
    owner: Owner,
    ids: Vec<TimerId>,
    _timers: Timers,
}

impl TemporaRust {
    fn new(n: usize) -> Result<TemporaRust, String> {
        let timers = Timers::builder()
            .drivers(0)
            .build()
            .map_err(|e| format!("Timers::build: {e}"))?;
        let owner = timers.owner();
        let ids = (0..n)
            .map(|_| owner.create(ClockId::Monotonic, Notify::Queue))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("Owner::create: {e}"))?;
        Ok(TemporaRust {
            owner,
            ids,
            _timers: timers,
        })
    }
}

impl Drop for TemporaRust {
    fn drop(&mut self) {
        for &id in &self.ids {
            let _ = self.owner.delete(id);
        }
    }
}

impl Side for TemporaRust {
    fn name(&self) -> &'static str {
        "tempora"
    }
    fn settime(&mut self, passes: usize) -> Result<f64, String> {
        let mut sum = 0u64;
        let start = Instant::now();
        for _ in 0..passes {
            for (i, &id) in self.ids.iter().enumerate() {
                let old = self
                    .owner
                    .settime(
                        id,
                        SetFlags::RELATIVE,
                        TimeSpec::new(1, spread_nsec(i, 0)),
                        TimeSpec::new(0, 0),
                    )
                    .map_err(|e| format!("Owner::settime: {e}"))?;
                sum = sum.wrapping_add(old.value.nsec as u64);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (self.ids.len() * passes) as f64;
        black_box(sum);
        Ok(ns)
    }
    fn gettime(&mut self, passes: usize) -> Result<f64, String> {
        let mut sum = 0u64;
        let start = Instant::now();
        for _ in 0..passes {
            for &id in &self.ids {
                let cur = self
                    .owner
                    .gettime(id)
                    .map_err(|e| format!("Owner::gettime: {e}"))?;
                sum = sum.wrapping_add(cur.value.nsec as u64);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (self.ids.len() * passes) as f64;
        black_box(sum);
        Ok(ns)
    }
    fn create_delete(&mut self, passes: usize) -> Result<f64, String> {
        let mut sum = 0u64;
        let n = self.ids.len();
        let start = Instant::now();
        for _ in 0..passes {
            for _ in 0..n {
                let id = self
                    .owner
                    .create(ClockId::Monotonic, Notify::Queue)
                    .map_err(|e| format!("Owner::create: {e}"))?;
                self.owner
                    .delete(id)
                    .map_err(|e| format!("Owner::delete: {e}"))?;
                sum = sum.wrapping_add(id.get() as u64);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (n * passes) as f64;
        black_box(sum);
        Ok(ns)
    }
}

/// `kernel-c`: n kernel POSIX timers made through libc, driven by `capi.c`'s loops.
struct KernelC {
    timers: Vec<libc::timer_t>,
    signo: c_int,
    tid: c_int,
}

impl KernelC {
    /// n timers signalling `signo` to this thread, which must keep `signo` blocked.
    fn new(n: usize, signo: c_int) -> Result<KernelC, String> {
        let tid = tempora_kernel::gettid();
        let mut timers = vec![ptr::null_mut(); n];
        // SAFETY: `timers` has room for the n timers the call writes.
        let made = unsafe { capi_kernel_create(timers.as_mut_ptr(), n, signo, tid) };
        let err = std::io::Error::last_os_error();
        timers.truncate(made);
        let side = KernelC { timers, signo, tid };
        if made < n {
            let limit = tempora_kernel::rlimit_sigpending()
                .map_or_else(|| "unknown".into(), |l| l.to_string());
            return Err(format!(
                "timer_create: errno {} after {made} timers (RLIMIT_SIGPENDING {limit})",
                err.raw_os_error().unwrap_or(0)
            ));
        }
        Ok(side)
    }
}

impl Drop for KernelC {
    fn drop(&mut self) {
        // SAFETY: `timers` holds live timers made by `new`, deleted once here.
        unsafe { capi_kernel_delete(self.timers.as_ptr(), self.timers.len()) };
        // Whatever fired anyway (a run slower than a second) is pending on this thread.
        while let Ok(Some(_)) = tempora_kernel::take_signal(self.signo) {}
    }
}

impl Side for KernelC {
    fn name(&self) -> &'static str {
        "kernel-c"
    }
    fn settime(&mut self, passes: usize) -> Result<f64, String> {
        let (t, n) = (self.timers.as_ptr(), self.timers.len());
        // SAFETY: `t` holds n live kernel timers for the call.
        from_c("timer_settime", unsafe {
            capi_settime_kernel(t, n, passes as c_int)
        })
    }
    fn gettime(&mut self, passes: usize) -> Result<f64, String> {
        let (t, n) = (self.timers.as_ptr(), self.timers.len());
        // SAFETY: as for `settime`.
        from_c("timer_gettime", unsafe {
            capi_gettime_kernel(t, n, passes as c_int)
        })
    }
    fn create_delete(&mut self, passes: usize) -> Result<f64, String> {
        let n = self.timers.len();
        // SAFETY: plain values; the timers it makes are deleted before it returns.
        from_c("timer_create/delete", unsafe {
            capi_create_delete_kernel(n, passes as c_int, self.signo, self.tid)
        })
    }
}

/// `tempora-posix-c`: n timers of the drop-in (`libtempora-posix.so`'s default owner), driven by
/// `capi.c`'s loops through the library's exported calls.
struct DropinC {
    f: &'static CDropin,
    timers: Vec<libc::timer_t>,
}

impl DropinC {
    fn new(n: usize) -> Result<DropinC, String> {
        let f = dropin()?;
        let mut timers = vec![ptr::null_mut(); n];
        // SAFETY: `f` holds the drop-in's calls; `timers` has room for the n it writes.
        let made = unsafe { capi_dropin_create(f, timers.as_mut_ptr(), n) };
        let err = std::io::Error::last_os_error();
        timers.truncate(made);
        let side = DropinC { f, timers };
        if made < n {
            return Err(format!("timer_create (drop-in): {err} after {made} timers"));
        }
        Ok(side)
    }
}

impl Drop for DropinC {
    fn drop(&mut self) {
        // SAFETY: `timers` holds live drop-in timers made by `new`, deleted once here.
        unsafe { capi_dropin_delete(self.f, self.timers.as_ptr(), self.timers.len()) };
    }
}

impl Side for DropinC {
    fn name(&self) -> &'static str {
        "tempora-posix-c"
    }
    fn settime(&mut self, passes: usize) -> Result<f64, String> {
        let (t, n) = (self.timers.as_ptr(), self.timers.len());
        // SAFETY: `t` holds n live drop-in timers for the call.
        from_c("timer_settime (drop-in)", unsafe {
            capi_settime_dropin(self.f, t, n, passes as c_int)
        })
    }
    fn gettime(&mut self, passes: usize) -> Result<f64, String> {
        let (t, n) = (self.timers.as_ptr(), self.timers.len());
        // SAFETY: as for `settime`.
        from_c("timer_gettime (drop-in)", unsafe {
            capi_gettime_dropin(self.f, t, n, passes as c_int)
        })
    }
    fn create_delete(&mut self, passes: usize) -> Result<f64, String> {
        let n = self.timers.len();
        // SAFETY: `f` holds the drop-in's calls; the timers it makes are deleted.
        from_c("timer_create/delete (drop-in)", unsafe {
            capi_create_delete_dropin(self.f, n, passes as c_int)
        })
    }
}

/// `capi.c`'s `struct capi_burst`: one burst's cost per signal and what was taken.
#[repr(C)]
#[derive(Debug, Default)]
struct CBurst {
    expire_ns: f64,
    irq_ns: f64,
    dequeue_ns: f64,
    got: i64,
    bad: i64,
}

/// Whether `capi.c` was compiled with tempora's signal timers (`TEMPORA_SIGEV_SIGNAL` in
/// `tempora.h`): without, the `deliver-signal` case has no `tempora-c` row.
fn tempora_c_signals() -> bool {
    // SAFETY: a constant function of how capi.c was compiled.
    unsafe { capi_tempora_signals() != 0 }
}

/// A `capi.c` signal loop's status: 0 done, 1 started late (try again), minus an errno.
fn signal_status(what: &str, r: c_int) -> Result<bool, String> {
    match r {
        0 => Ok(true),
        1 => Ok(false),
        e => {
            let err = std::io::Error::from_raw_os_error(-e);
            Err(format!("{what}: errno {} ({err})", -e))
        }
    }
}

/// The `deliver-signal` case from C (`capi.c`'s signal loops; the service suite's
/// `signals.rs` says what they measure).
trait SignalLoop {
    fn name(&self) -> &'static str;
    /// One burst of n; `Ok(None)` when it started late and measured nothing.
    fn burst_once(&mut self, n: usize) -> Result<Option<BurstCost>, String>;
    /// `count` signals of one periodic timer.
    fn periodic(&mut self, count: usize) -> Result<Chunk, String>;
}

/// One burst of n on `side`, tried again (up to `LATE_TRIES` times in all, with the service
/// suite's back-off) when it started late.
fn c_burst(side: &mut (dyn SignalLoop + 'static), n: usize) -> Result<BurstCost, String> {
    for k in 0..LATE_TRIES {
        std::thread::sleep(LATE_BACK_OFF * k);
        if let Some(cost) = side.burst_once(n)? {
            return Ok(cost);
        }
    }
    Err(format!(
        "late: the spin would have started less than 1 ms before the expiry, {LATE_TRIES} times"
    ))
}

/// A burst's figures from `capi.c`, checked: every signal came once.
fn burst_cost(n: usize, out: &CBurst) -> Result<BurstCost, String> {
    if out.got < n as i64 || out.bad > 0 {
        return Err(format!(
            "{} of {n} signals delivered, {} unexpected ones",
            out.got, out.bad
        ));
    }
    Ok(BurstCost {
        expire: out.expire_ns,
        irq: out.irq_ns,
        dequeue: out.dequeue_ns,
    })
}

/// A periodic chunk from `capi.c`'s figures, checked: every signal came.
fn chunk(
    late: Vec<f64>,
    count: usize,
    got: usize,
    cpu: f64,
    overruns: u64,
) -> Result<Chunk, String> {
    if got < count {
        return Err(format!("{got} of {count} periodic signals within 1 s each"));
    }
    Ok(Chunk {
        late,
        cpu_per_signal: cpu,
        overruns,
    })
}

/// `kernel-c`: `timer_create(CLOCK_MONOTONIC, {SIGEV_SIGNAL})` timers, made for each run.
struct KernelCSignals;

impl SignalLoop for KernelCSignals {
    fn name(&self) -> &'static str {
        "kernel-c"
    }
    fn burst_once(&mut self, n: usize) -> Result<Option<BurstCost>, String> {
        let mut out = CBurst::default();
        // SAFETY: plain values and a writable `out`; the loop deletes its timers.
        let r = unsafe {
            capi_burst_kernel(
                n,
                kernel_signo(),
                lead_ns(n),
                SPIN_AHEAD_NS,
                window_ns(n),
                &mut out,
            )
        };
        if !signal_status("capi_burst_kernel", r)? {
            return Ok(None);
        }
        burst_cost(n, &out).map(Some)
    }
    fn periodic(&mut self, count: usize) -> Result<Chunk, String> {
        let mut late = vec![0.0; count];
        let (mut cpu, mut overruns, mut got) = (0.0, 0, 0);
        // SAFETY: `late` has room for `count` values; the rest are writable locals.
        let r = unsafe {
            capi_periodic_kernel(
                kernel_signo(),
                PERIOD_NS,
                count,
                late.as_mut_ptr(),
                &mut cpu,
                &mut overruns,
                &mut got,
            )
        };
        signal_status("capi_periodic_kernel", r)?;
        late.truncate(got);
        chunk(late, count, got, cpu, overruns)
    }
}

/// `tempora-c`: `TEMPORA_SIGEV_SIGNAL` timers made through `tempora.h`, on a service from
/// `tempora_new` with `tempora_config_init`'s settings (one driver thread, which queues the
/// signals).
struct TemporaCSignals {
    service: *mut tempora_t,
    owner: *mut tempora_owner_t,
}

impl TemporaCSignals {
    fn new() -> Result<TemporaCSignals, String> {
        let last = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        let mut config = std::mem::MaybeUninit::<tempora_config>::uninit();
        let size = std::mem::size_of::<tempora_config>();
        // SAFETY: `config` is `size` writable bytes; the call fills every field.
        if unsafe { tempora_capi::tempora_config_init(config.as_mut_ptr(), size) } != 0 {
            return Err(last("tempora_config_init"));
        }
        // SAFETY: filled by the successful call above, and readable for this one.
        let service = unsafe { tempora_capi::tempora_new(config.as_ptr()) };
        if service.is_null() {
            return Err(last("tempora_new"));
        }
        let mut side = TemporaCSignals {
            service,
            owner: ptr::null_mut(),
        };
        // SAFETY: `service` is the live handle just made; `Drop` frees both handles.
        side.owner = unsafe { tempora_capi::tempora_owner_new(side.service) };
        if side.owner.is_null() {
            return Err(last("tempora_owner_new"));
        }
        Ok(side)
    }

    fn owner(&self) -> *const c_void {
        self.owner.cast_const().cast()
    }
}

impl Drop for TemporaCSignals {
    fn drop(&mut self) {
        // SAFETY: each handle is NULL or live, made by `new`, freed once here with no other
        // call on it running; the owner before its service.
        unsafe {
            tempora_capi::tempora_owner_free(self.owner);
            tempora_capi::tempora_free(self.service);
        }
    }
}

impl SignalLoop for TemporaCSignals {
    fn name(&self) -> &'static str {
        "tempora-c"
    }
    fn burst_once(&mut self, n: usize) -> Result<Option<BurstCost>, String> {
        let mut out = CBurst::default();
        // SAFETY: the owner is live; plain values and a writable `out`; the loop deletes the
        // timers it makes.
        let r = unsafe {
            capi_burst_tempora(
                self.owner(),
                n,
                tempora_signo(),
                lead_ns(n),
                SPIN_AHEAD_NS,
                window_ns(n),
                &mut out,
            )
        };
        if !signal_status("capi_burst_tempora", r)? {
            return Ok(None);
        }
        burst_cost(n, &out).map(Some)
    }
    fn periodic(&mut self, count: usize) -> Result<Chunk, String> {
        let mut late = vec![0.0; count];
        let (mut cpu, mut overruns, mut got) = (0.0, 0, 0);
        // SAFETY: the owner is live; `late` has room for `count` values; the rest are
        // writable locals.
        let r = unsafe {
            capi_periodic_tempora(
                self.owner(),
                tempora_signo(),
                PERIOD_NS,
                count,
                late.as_mut_ptr(),
                &mut cpu,
                &mut overruns,
                &mut got,
            )
        };
        signal_status("capi_periodic_tempora", r)?;
        late.truncate(got);
        chunk(late, count, got, cpu, overruns)
    }
}

/// The `deliver-signal` step's rows at n: `kernel-c`, and `tempora-c` when `capi.c` has its
/// loop, in turn.
fn deliver_signal(n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let mut names = vec!["kernel-c"];
    if tempora_c_signals() {
        names.push("tempora-c");
    }
    names.retain(|i| settings.wants_impl(i));
    let row = |imp: &str, m: Measured| Row::new(signals::CASE, imp, n, 1, m);
    if let Some(why) = cannot_run() {
        return names
            .iter()
            .map(|i| row(i, Measured::failed(why.clone())))
            .collect();
    }
    let mut rows = Vec::new();
    let mut sides: Vec<Box<dyn SignalLoop>> = Vec::new();
    for name in names {
        match name {
            "kernel-c" => sides.push(Box::new(KernelCSignals)),
            _ => match TemporaCSignals::new() {
                Ok(s) => sides.push(Box::new(s)),
                Err(e) => rows.push(row(name, Measured::failed(e))),
            },
        }
    }
    let results = signals::measure_sides(
        &mut sides,
        n,
        reps,
        settings,
        |s, count| s.periodic(count),
        c_burst,
    );
    for (side, m) in sides.iter().zip(results) {
        rows.push(row(side.name(), m));
    }
    rows
}

/// One untimed or timed set of `passes` passes of `case` on `side`.
fn pass_set(side: &mut dyn Side, case: &str, passes: usize) -> Result<f64, String> {
    match case {
        "settime" => side.settime(passes),
        "gettime" => {
            // Every timer read is armed, whatever the previous runs took.
            side.settime(1)?;
            side.gettime(passes)
        }
        "create-delete" => side.create_delete(passes),
        _ => unreachable!("unknown capi case {case}"),
    }
}

/// The rows of every selected case for `sides` (each with the same n live timers): one
/// untimed pass, then runs of `passes` passes each, every run timing each side in turn (the
/// order reversed every other run); `ns_per_op` is each side's median run.
fn measure(
    sides: &mut [Box<dyn Side>],
    n: usize,
    passes: usize,
    reps: usize,
    settings: &Settings,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for case in CASES {
        if !settings.wants_case(case) {
            continue;
        }
        let mut runs: Vec<Result<Vec<f64>, String>> = sides
            .iter_mut()
            .map(|s| pass_set(s.as_mut(), case, 1).map(|_| Vec::new()))
            .collect();
        for run in settings.runs(reps, 1) {
            let mut order: Vec<usize> = (0..sides.len()).collect();
            if run % 2 == 1 {
                order.reverse();
            }
            for i in order {
                if let Ok(v) = &mut runs[i] {
                    match pass_set(sides[i].as_mut(), case, passes) {
                        Ok(ns) => v.push(ns),
                        Err(e) => runs[i] = Err(e),
                    }
                }
            }
        }
        for (side, r) in sides.iter().zip(runs) {
            let m = match r {
                Ok(mut v) => {
                    let fields = Fields::default()
                        .with(Field::Ops, n * passes)
                        .with(Field::Runs, v.len());
                    Measured::per_op(median(&mut v), n * passes, fields)
                }
                Err(e) => Measured::failed(e),
            };
            rows.push(Row::new(case, side.name(), n, 1, m));
        }
    }
    rows
}

/// Failed rows of every case for `imp`.
fn failed(imp: &str, n: usize, why: &str) -> Vec<Row> {
    CASES
        .iter()
        .map(|c| Row::new(c, imp, n, 1, Measured::failed(why)))
        .collect()
}

/// The suite's steps: at each n, `tempora-c`, `tempora` and `tempora-posix-c` in one step
/// (interleaved runs), then `kernel-c`.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let sizes = settings.sizes(&[1_000, 10_000], &[1_000, 10_000], &[1_000, 10_000]);
    let reps = settings.reps(5, 9);
    // Calls per run: ~15 ms of tempora's calls.
    let calls: usize = settings.pick(100_000, 200_000, 1_000_000);
    // The service suite's signal for its kernel timers (they are all gone by now).
    let signo = libc::SIGRTMIN() + 4;
    for n in sizes {
        let passes = calls.div_ceil(n).max(1);
        let ops = (n * passes) as f64;
        let cost = 3.0 * 3.0 * reps as f64 * ops * 80e-6 + n as f64 * 1e-3;
        let step = Step::new(Suite::Capi, &CASES, "tempora-c", n, 1, cost, move || {
            let (mut sides, mut rows): (Vec<Box<dyn Side>>, _) = (Vec::new(), Vec::new());
            if settings.wants_impl("tempora-c") {
                match TemporaC::new(n) {
                    Ok(s) => sides.push(Box::new(s)),
                    Err(e) => rows.extend(failed("tempora-c", n, &e)),
                }
            }
            if settings.wants_impl("tempora") {
                match TemporaRust::new(n) {
                    Ok(s) => sides.push(Box::new(s)),
                    Err(e) => rows.extend(failed("tempora", n, &e)),
                }
            }
            if settings.wants_impl("tempora-posix-c") {
                match DropinC::new(n) {
                    Ok(s) => sides.push(Box::new(s)),
                    Err(e) => rows.extend(failed("tempora-posix-c", n, &e)),
                }
            }
            rows.extend(measure(&mut sides, n, passes, reps, settings));
            rows
        })
        .also("tempora")
        .also("tempora-posix-c");
        plan.add(step);
        // The kernel's calls are ~20x slower: a run takes long enough that the time budget,
        // not the repetitions, usually ends the measurement.
        let kernel_cost = 3.0 * (reps as f64 * ops * 1.5e-3).min(1500.0);
        plan.add(Step::new(
            Suite::Capi,
            &CASES,
            "kernel-c",
            n,
            1,
            kernel_cost,
            move || {
                if let Err(e) = tempora_kernel::block_signal(signo) {
                    return failed(
                        "kernel-c",
                        n,
                        &format!("cannot block signal {signo}: errno {e}"),
                    );
                }
                match KernelC::new(n, signo) {
                    Ok(k) => measure(
                        &mut [Box::new(k) as Box<dyn Side>],
                        n,
                        passes,
                        reps,
                        settings,
                    ),
                    Err(e) => failed("kernel-c", n, &e),
                }
            },
        ));
    }
    // deliver-signal: the service suite's case from C, kernel-c and (once tempora.h has
    // TEMPORA_SIGEV_SIGNAL) tempora-c in one step.
    let signal_reps = settings.reps(3, 5);
    for n in signals::sizes(settings) {
        let cost = signals::cost(n, signal_reps, settings);
        let mut step = Step::new(
            Suite::Capi,
            &[signals::CASE],
            "kernel-c",
            n,
            1,
            cost,
            move || deliver_signal(n, signal_reps, settings),
        );
        if tempora_c_signals() {
            step = step.also("tempora-c");
        }
        plan.add(step);
    }
    sigwait::plan(plan);
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        /// `capi.c`'s `capi_spread_nsec`, the `tv_nsec` its settime loops arm timer `i` with.
        fn capi_spread_nsec_at(i: usize) -> libc::c_long;
    }

    #[test]
    fn the_c_loops_arm_the_same_spread_as_the_rust_loops() {
        let large = [usize::MAX / 7919 - 1, usize::MAX / 7919 + 1, usize::MAX];
        for i in (0..300_000).chain(large) {
            // SAFETY: a pure function of its argument (`capi.c`).
            let c = unsafe { capi_spread_nsec_at(i) };
            assert_eq!(c as i64, spread_nsec(i, 0), "timer {i}");
        }
    }
}
