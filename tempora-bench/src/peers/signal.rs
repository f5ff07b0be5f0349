//! Timers that notify with a real signal to the process (`SIGEV_SIGNAL`), as the
//! `deliver-signal` cases drive them ([`SignalTimers`]: tempora's `Notify::Signal`, the kernel's
//! `timer_create` with `SIGEV_SIGNAL`), and what receiving and costing their signals takes: the
//! signal numbers the bench reserves for them and their blocking, `sigtimedwait`, the CPU
//! clocks, pinning the measuring thread, and [`spin_until`], which finds the interrupt time
//! that lands on the measuring thread's CPU.
//!
//! # Blocking
//!
//! A process-directed signal goes to any thread that does not block it, and the default action
//! of a real-time signal ends the process. So the runner blocks both numbers ([`signals`]) in
//! its first thread before any thread starts, and every later thread inherits the mask
//! (tempora's own threads block every signal anyway). A case checks that every thread still
//! blocks them ([`unblocked_thread`]) before it arms anything, and fails its rows otherwise.
//!
//! # Costing interrupt work
//!
//! The kernel queues a timer's signal from the hrtimer interrupt. This kernel has no
//! `IRQ_TIME_ACCOUNTING`: interrupt time is charged to the thread it interrupts, or to nobody
//! when the CPU was idle. So a case pins the measuring thread to one CPU before the kernel's
//! timers are armed (an hrtimer is queued on the CPU that arms it, when that CPU is busy), and
//! the thread spins across the expiry reading the clock: every gap in its readings is time the
//! CPU spent elsewhere, either in an interrupt or on another task. The scheduler's `run_delay`
//! (`/proc/thread-self/schedstat`) is the time spent on other tasks, so the gaps minus its
//! growth are the interrupts' time ([`Spin::irq_ns`]).

use std::mem::MaybeUninit;
use std::time::Duration;

use tempora::clock::ClockId;
use tempora::{Notify, Owner, SetFlags, TimerId, Timers};

/// The signal of tempora's timers in the `deliver-signal` cases.
pub(crate) fn tempora_signo() -> i32 {
    libc::SIGRTMIN() + 8
}

/// The signal of the kernel's timers in the `deliver-signal` cases.
pub(crate) fn kernel_signo() -> i32 {
    libc::SIGRTMIN() + 9
}

/// Both, as the runner blocks them.
pub(crate) fn signals() -> [i32; 2] {
    [tempora_signo(), kernel_signo()]
}

/// [`signals`], as messages name them.
pub(crate) const SIGNAL_NAMES: &str = "SIGRTMIN+8 (tempora) and SIGRTMIN+9 (kernel)";

/// A set holding `signals`.
fn sigset(signals: &[i32]) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initialises the set, `sigaddset` adds valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// Blocks the `deliver-signal` cases' signals in the calling thread, which every thread it
/// starts afterwards inherits. The runner calls it first, before any thread exists.
pub(crate) fn block_in_this_thread() -> Result<(), i32> {
    let set = sigset(&signals());
    // SAFETY: a valid set; only the calling thread's mask changes.
    match unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } {
        0 => Ok(()),
        e => Err(e),
    }
}

/// A thread of this process that does not block `signo` (its ID and name), if any: one that
/// started before the runner blocked it, or unblocked it since.
pub(crate) fn unblocked_thread(signo: i32) -> Option<String> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue; // the thread exited meanwhile
        };
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(str::trim)
        };
        let blocked = field("SigBlk:")
            .and_then(|m| u64::from_str_radix(m, 16).ok())
            .is_some_and(|m| m & (1u64 << (signo - 1)) != 0);
        if !blocked {
            let name = field("Name:").unwrap_or("?");
            return Some(format!("{} ({name})", task.file_name().to_string_lossy()));
        }
    }
    None
}

/// Why a `deliver-signal` case cannot run here, if it cannot: a thread that does not block
/// one of its signals (a process-directed signal could end the process there).
pub(crate) fn cannot_run() -> Option<String> {
    signals().into_iter().find_map(|s| {
        unblocked_thread(s).map(|t| {
            format!(
                "signal {s} is not blocked in thread {t}: the bench blocks {SIGNAL_NAMES} before \
                 starting any thread"
            )
        })
    })
}

/// A dequeued timer signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// `si_code` (`SI_TIMER` for a timer's signal, from the kernel or from tempora).
    pub(crate) code: i32,
    /// `si_value.sival_int`: the timer's index in the case.
    pub(crate) value: i32,
    /// `si_overrun`.
    pub(crate) overrun: i32,
}

/// `sigtimedwait({signo}, &info, timeout)`: the next pending `signo`, waiting up to `timeout`;
/// `None` on timeout.
pub(crate) fn wait(signo: i32, timeout: Duration) -> Option<Received> {
    let set = sigset(&[signo]);
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    loop {
        // SAFETY: valid set and timespec; the kernel writes `info` when it returns a signal.
        let r = unsafe { libc::sigtimedwait(&set, info.as_mut_ptr(), &ts) };
        if r > 0 {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    // SAFETY: written by the successful call. A timer's siginfo: si_signo, si_errno, si_code,
    // then (at offset 16 on 64-bit Linux) si_timerid, si_overrun and the sigval, whose
    // sival_int is its first 4 bytes on little-endian x86-64 and aarch64.
    unsafe {
        let info = info.assume_init();
        let base = (&info as *const libc::siginfo_t).cast::<u8>();
        Some(Received {
            code: info.si_code,
            overrun: base.add(20).cast::<i32>().read(),
            value: base.add(24).cast::<i32>().read(),
        })
    }
}

/// Takes every pending `signo`; how many.
pub(crate) fn drain(signo: i32) -> usize {
    std::iter::from_fn(|| wait(signo, Duration::ZERO)).count()
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: a valid clock ID; the kernel writes `ts`.
    unsafe {
        libc::clock_gettime(clock, ts.as_mut_ptr());
        let ts = ts.assume_init();
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// CPU time of every thread of the process so far, ns (`CLOCK_PROCESS_CPUTIME_ID`): what
/// `getrusage(RUSAGE_SELF)` sums, to the nanosecond.
pub(crate) fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread so far, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `CLOCK_MONOTONIC` now, ns.
pub(crate) fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The calling thread's time spent runnable but waiting for a CPU, ns (`run_delay` of
/// `/proc/thread-self/schedstat`).
pub(crate) fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The calling thread pinned to the CPU it runs on, until dropped (its former affinity is
/// restored then).
pub(crate) struct Pinned {
    old: libc::cpu_set_t,
}

impl Pinned {
    pub(crate) fn here() -> Result<Pinned, String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        let mut old = MaybeUninit::<libc::cpu_set_t>::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: pid 0 is the calling thread; `old` has `size` writable bytes.
        if unsafe { libc::sched_getaffinity(0, size, old.as_mut_ptr()) } != 0 {
            return Err(err("sched_getaffinity"));
        }
        // SAFETY: written above (and zeroed before).
        let old = unsafe { old.assume_init() };
        // SAFETY: no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return Err(err("sched_getcpu"));
        }
        // SAFETY: a zeroed set is empty; CPU_SET writes within it (cpu < CPU_SETSIZE).
        let one = unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            one
        };
        // SAFETY: pid 0 is the calling thread; `one` is a valid set.
        if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
            return Err(err("sched_setaffinity"));
        }
        Ok(Pinned { old })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: as in `here`; `old` is the affinity read there.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old);
        }
    }
}

/// What a spin across an expiry saw, ns.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spin {
    /// CPU time of the process's other threads during the spin (tempora's driver).
    pub(crate) others_ns: u64,
    /// Interrupt time on the spinning thread's CPU: its clock readings' gaps minus the time
    /// it waited for the CPU (the kernel's hrtimer interrupt queueing its timers' signals).
    pub(crate) irq_ns: u64,
}

/// A gap between two clock readings of [`spin_until`] longer than this is time the CPU spent
/// elsewhere (a reading takes ~25 ns).
const GAP_NS: u64 = 500;

/// Spins on the calling thread until `CLOCK_MONOTONIC` reaches `end`: the other threads' CPU
/// time and the interrupt time on this CPU meanwhile (module doc).
pub(crate) fn spin_until(end: u64) -> Spin {
    let (p0, m0, r0) = (process_cpu_ns(), thread_cpu_ns(), run_delay_ns());
    let mut prev = now_ns();
    let mut gaps = 0;
    while prev < end {
        let t = now_ns();
        if t - prev > GAP_NS {
            gaps += t - prev;
        }
        prev = t;
    }
    let (r1, m1, p1) = (run_delay_ns(), thread_cpu_ns(), process_cpu_ns());
    Spin {
        others_ns: (p1 - p0).saturating_sub(m1 - m0),
        irq_ns: gaps.saturating_sub(r1 - r0),
    }
}

/// Timers whose expiries queue a signal to the process (`SIGEV_SIGNAL`) carrying the timer's
/// index, as the `deliver-signal` cases create, arm and delete them.
pub(crate) trait SignalTimers {
    /// The JSON `impl`.
    fn name(&self) -> &'static str;
    /// The signal number its timers queue.
    fn signo(&self) -> i32;
    /// Creates `n` disarmed timers on `CLOCK_MONOTONIC`, the `i`th's signal carrying `i`. On
    /// failure every timer is deleted at once (those made before this call too).
    fn create(&mut self, n: usize) -> Result<(), String>;
    /// Arms every timer to expire at `at` (monotonic ns), then every `period` ns (0: once).
    fn arm_all(&mut self, at: u64, period: u64) -> Result<(), String>;
    /// Deletes every timer (a signal already queued stays queued).
    fn delete_all(&mut self);
    /// Waits up to `timeout`, blocked, for the next expiry: its overrun (`si_overrun`).
    fn wait_one(&mut self, timeout: Duration) -> Option<i32> {
        wait(self.signo(), timeout).map(|r| r.overrun)
    }
}

/// tempora: `Notify::Signal` timers of an owner on a service with one driver thread, which
/// fires them and queues their signals (`rt_sigqueueinfo`).
pub(crate) struct TemporaSignals {
    owner: Owner,
    ids: Vec<TimerId>,
    /// `tempora-recv`: `Notify::Queue` timers whose events a thread blocked in
    /// `Owner::recv_timeout` takes, in place of signals taken with `sigtimedwait`.
    recv: bool,
    _timers: Timers,
}

impl TemporaSignals {
    /// The `tempora-recv` side (`recv`).
    pub(crate) fn receiving() -> Result<TemporaSignals, String> {
        let mut s = TemporaSignals::new()?;
        s.recv = true;
        Ok(s)
    }

    pub(crate) fn new() -> Result<TemporaSignals, String> {
        let timers = Timers::builder()
            .drivers(1)
            .build()
            .map_err(|e| format!("Timers::build: {e}"))?;
        Ok(TemporaSignals {
            owner: timers.owner(),
            ids: Vec::new(),
            recv: false,
            _timers: timers,
        })
    }
}

impl SignalTimers for TemporaSignals {
    fn name(&self) -> &'static str {
        if self.recv {
            "tempora-recv"
        } else {
            "tempora"
        }
    }
    fn signo(&self) -> i32 {
        tempora_signo()
    }
    fn create(&mut self, n: usize) -> Result<(), String> {
        for i in 0..n {
            let notify = if self.recv {
                Notify::Queue
            } else {
                Notify::Signal {
                    signo: self.signo(),
                    value: i,
                }
            };
            let id = match self.owner.create(ClockId::Monotonic, notify) {
                Ok(id) => id,
                Err(e) => {
                    self.delete_all();
                    return Err(format!("Owner::create: {e}"));
                }
            };
            self.ids.push(id);
        }
        Ok(())
    }
    fn arm_all(&mut self, at: u64, period: u64) -> Result<(), String> {
        for &id in &self.ids {
            self.owner
                .settime(
                    id,
                    SetFlags::ABSTIME,
                    Duration::from_nanos(at),
                    Duration::from_nanos(period),
                )
                .map_err(|e| format!("Owner::settime: {e}"))?;
        }
        Ok(())
    }
    fn delete_all(&mut self) {
        for id in self.ids.drain(..) {
            let _ = self.owner.delete(id);
        }
    }
    fn wait_one(&mut self, timeout: Duration) -> Option<i32> {
        if !self.recv {
            return wait(self.signo(), timeout).map(|r| r.overrun);
        }
        self.owner
            .recv_timeout(timeout)
            .ok()
            .flatten()
            .map(|e| e.overrun)
    }
}

impl Drop for TemporaSignals {
    fn drop(&mut self) {
        self.delete_all();
    }
}

/// The kernel: POSIX timers made with `timer_create(CLOCK_MONOTONIC, {SIGEV_SIGNAL})`, whose
/// hrtimer interrupt queues their signals.
#[derive(Default)]
pub(crate) struct KernelSignals {
    ids: Vec<i32>,
}

impl SignalTimers for KernelSignals {
    fn name(&self) -> &'static str {
        "kernel"
    }
    fn signo(&self) -> i32 {
        kernel_signo()
    }
    fn create(&mut self, n: usize) -> Result<(), String> {
        for i in 0..n {
            // SAFETY: a zeroed sigevent is valid once its fields are set.
            let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
            sev.sigev_notify = libc::SIGEV_SIGNAL;
            sev.sigev_signo = self.signo();
            sev.sigev_value = libc::sigval {
                sival_ptr: i as *mut libc::c_void,
            };
            let mut id: i32 = -1;
            // SAFETY: timer_create(2) with a valid sigevent and an int for the kernel's ID.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_timer_create,
                    libc::CLOCK_MONOTONIC,
                    &mut sev as *mut libc::sigevent,
                    &mut id as *mut i32,
                )
            };
            if r != 0 {
                let e = std::io::Error::last_os_error();
                let limit = tempora_kernel::rlimit_sigpending()
                    .map_or_else(|| "unknown".into(), |l| l.to_string());
                // Each of the timers made holds a unit of RLIMIT_SIGPENDING until deleted: kept
                // until the step ends, they would leave the other side no room to queue one
                // signal.
                self.delete_all();
                return Err(format!(
                    "timer_create: {e} after {i} timers (RLIMIT_SIGPENDING {limit})"
                ));
            }
            self.ids.push(id);
        }
        Ok(())
    }
    fn arm_all(&mut self, at: u64, period: u64) -> Result<(), String> {
        for &id in &self.ids {
            tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, at, period)
                .map_err(|e| format!("timer_settime: errno {e}"))?;
        }
        Ok(())
    }
    fn delete_all(&mut self) {
        for id in self.ids.drain(..) {
            let _ = tempora_kernel::timer_delete(id);
        }
    }
}

impl Drop for KernelSignals {
    fn drop(&mut self) {
        self.delete_all();
    }
}

#[cfg(test)]
mod tests {
    use super::{KernelSignals, SignalTimers};

    /// The kernel side at a size past `RLIMIT_SIGPENDING` (the service suite's
    /// `deliver-signal` at 100k): its create fails part-way, and the timers it made are
    /// deleted at once. Kept until the step ended, each held a unit of the limit, and
    /// tempora's side, measured next, found no room to queue a single signal ("0 of 100000
    /// signals delivered"). Run in a child whose limit is lowered to 64 above what the user
    /// holds now (`SigQ` of `/proc/self/status`), so that no other process or test loses its
    /// room.
    #[test]
    fn a_kernel_create_that_fails_part_way_leaves_no_timer() {
        let held: u64 = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("SigQ:"))?.to_owned();
                line[5..].trim().split('/').next()?.parse().ok()
            })
            .expect("SigQ in /proc/self/status");
        let limit = held + 64;
        // SAFETY: fork(2). The child makes system calls and allocates (glibc's allocator is
        // usable in a forked child), then `_exit`s without running the parent's destructors.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = (|| {
                let low = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                // SAFETY: setrlimit(2) with a valid struct; this child's limit alone.
                if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &low) } != 0 {
                    return 10;
                }
                let mut side = KernelSignals::default();
                if side.create(limit as usize + 1).is_ok() {
                    return 11; // the limit did not hold: nothing tested
                }
                if !side.ids.is_empty() {
                    return 12;
                }
                // The room came back: another user of the limit can make a timer (retried:
                // other processes of this user may hold some of it for a moment).
                for _ in 0..100 {
                    let mut other = KernelSignals::default();
                    if other.create(1).is_ok() {
                        return 0;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                13
            })();
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: our own child; `status` is writable.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                // SAFETY: our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the child did not finish in 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(libc::WIFEXITED(status), "child status {status}");
        let code = libc::WEXITSTATUS(status);
        assert_ne!(
            code,
            11,
            "RLIMIT_SIGPENDING = {limit} let {} timers be made",
            limit + 1
        );
        assert_eq!(code, 0, "10: setrlimit, 12: timers left, 13: no room after");
    }
}
