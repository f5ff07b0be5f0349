//! The capi suite's `sigwait-latency` case: a latency tool's measuring loop, on the kernel's
//! POSIX timers and on the drop-in's. One thread, started for the run, sets its timer slack
//! to 1 ns, blocks [`signo`], creates a `CLOCK_MONOTONIC` timer that signals it alone
//! (`SIGEV_THREAD_ID`), arms it at now + 10 ms with a period of 1 ms and takes n of its
//! signals with `sigwait` (`capi.c`'s loop). Each wake-up's lateness is the `CLOCK_MONOTONIC`
//! time read right after `sigwait` returns minus the expiry that signal stands for,
//! `start + k × period`, `k` moving on by 1 plus `timer_getoverrun` after each signal
//! ([`lateness`]).
//!
//! `kernel-c` calls the C library's `timer_create`, `timer_settime`, `timer_getoverrun`,
//! `timer_delete` and `sigwait`; `tempora-posix-c` the same five of `libtempora-posix.so`
//! (the suite's `dropin`: dlopen'd, called through dlsym's pointers, as a preloaded program
//! calls them), whose `sigwait` leads the drop-in's service while it waits
//! (`tempora_capi::waits`). Runs alternate between the two (the order reversed every other
//! run), each run on a thread of its own, so both see the same stretch of the machine.
//!
//! A row: `p50_ns` (the headline), `p99_ns`, `p999_ns` and `max_ns` of every wake-up of its
//! runs, `fired`, `overruns` (their sum: periods without a signal of their own), `early`
//! (wake-ups before their expiry: the row fails), and `driver_wakeups_per_expiry`: how often
//! the process's tempora driver threads (named `tempora-driver-K`) woke during the runs, per
//! signal taken (their voluntary context switches, from `/proc/self/task`). On the drop-in,
//! about 0 means the waiting thread fired its timer itself; about 1 means the driver did and
//! then woke it. On `kernel-c`, whose timers wake no driver, it is the background: the other
//! services of the process, idle, should show none. `ns_per_op` is not measured (0).
//!
//! A run whose signals stop coming would block `sigwait` for ever: past twice the run's
//! expected length plus 3 s, the step sets the loop's stop flag and signals the waiting thread
//! itself, and the row fails with how many signals came.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use super::dropin::{dropin, CDropin};
use crate::stats::quantile;
use crate::suites::service::signals::alternate;
use crate::{Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

pub(super) const CASE: &str = "sigwait-latency";

/// The first expiry, this long after the timer is armed.
const LEAD_NS: u64 = 10_000_000;

/// The timer's period: 1 kHz, a latency tool's default.
const PERIOD_NS: u64 = 1_000_000;

/// The signal of the case's timers (to the waiting thread only, which blocks it).
fn signo() -> c_int {
    libc::SIGRTMIN() + 1
}

/// `capi.c`'s `struct capi_wait_run`.
#[repr(C)]
struct CWaitRun {
    start_ns: u64,
    got: usize,
    failed: *const c_char,
}

extern "C" {
    fn capi_sigwait_kernel(
        signo: c_int,
        lead_ns: u64,
        period_ns: u64,
        n: usize,
        wake: *mut u64,
        overrun: *mut c_int,
        stop: *const c_int,
        out: *mut CWaitRun,
    ) -> c_int;
    fn capi_sigwait_dropin(
        f: *const CDropin,
        signo: c_int,
        lead_ns: u64,
        period_ns: u64,
        n: usize,
        wake: *mut u64,
        overrun: *mut c_int,
        stop: *const c_int,
        out: *mut CWaitRun,
    ) -> c_int;
}

/// Whose calls the loop makes.
#[derive(Clone, Copy)]
enum Calls {
    /// The C library's.
    Kernel,
    /// `libtempora-posix.so`'s.
    Dropin(&'static CDropin),
}

/// One implementation of the case.
struct Side {
    name: &'static str,
    calls: Calls,
}

/// What one run took: its first expiry, each wake-up's time and overrun, and the driver
/// threads' wake-ups meanwhile (`None` when they could not be counted).
struct Run {
    start: u64,
    wake: Vec<u64>,
    overrun: Vec<c_int>,
    driver_wakeups: Option<u64>,
}

/// The lateness of each wake-up, ns: `wake[i]` minus the expiry signal `i` stands for,
/// `start + k_i × period`, where `k_0 = 0` and `k_{i+1} = k_i + 1 + overrun[i]` (a signal
/// stands for its own expiry and the `overrun` ones after it that had none); and the sum of
/// the overruns.
fn lateness(start: u64, period: u64, wake: &[u64], overrun: &[c_int]) -> (Vec<f64>, u64) {
    let (mut k, mut sum) = (0u64, 0u64);
    let late = wake
        .iter()
        .zip(overrun)
        .map(|(&w, &o)| {
            let expiry = start + k * period;
            let o = o.max(0) as u64;
            k += 1 + o;
            sum += o;
            w as f64 - expiry as f64
        })
        .collect();
    (late, sum)
}

/// `voluntary_ctxt_switches` of a `/proc/.../status` text.
fn voluntary_switches(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The wake-ups between two readings of [`driver_switches`]: each thread's growth (a thread
/// that is new counts from 0; one that is gone counts nothing).
fn wakeups_between(before: &BTreeMap<i32, u64>, after: &BTreeMap<i32, u64>) -> u64 {
    after
        .iter()
        .map(|(tid, &a)| a.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// The voluntary context switches of each of the process's driver threads, by thread ID:
/// every thread whose name starts with `tempora-driver` (the kernel keeps 15 bytes of
/// `tempora-driver-K`), the drop-in's and those of the binary's own services. Each switch is
/// the thread going to sleep, so a wake-up. `None` without `/proc/self/task`.
///
/// A listing of `/proc/self/task` can miss threads when another thread of the process ends
/// while it is read; a driver missed before a run and seen after it would count its whole
/// life. So the listing is read three times, and a thread seen in any of them counts (with
/// the highest count read: the reads are microseconds apart).
fn driver_switches() -> Option<BTreeMap<i32, u64>> {
    let mut out = BTreeMap::new();
    for _ in 0..3 {
        for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let path = entry.path();
            // A thread that ended meanwhile has no files left: it is skipped.
            let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
                continue;
            };
            if !comm.starts_with("tempora-driver") {
                continue;
            }
            if let Some(n) = std::fs::read_to_string(path.join("status"))
                .ok()
                .as_deref()
                .and_then(voluntary_switches)
            {
                let seen = out.entry(tid).or_insert(n);
                *seen = n.max(*seen);
            }
        }
    }
    Some(out)
}

/// What the waiting thread hands back: the loop's outcome and its samples.
type Taken = Result<(u64, Vec<u64>, Vec<c_int>), String>;

/// One run: the loop on `calls`, on a thread of its own (its mask and timer slack are the
/// loop's to set), until `n` signals came; the driver threads' wake-ups counted around it.
fn run_once(calls: Calls, n: usize) -> Result<Run, String> {
    let signo = signo();
    let before = driver_switches();
    let stop = Arc::new(AtomicI32::new(0));
    let tid = Arc::new(AtomicI32::new(0));
    let (tx, rx) = mpsc::channel::<Taken>();
    let thread = {
        let (stop, tid) = (Arc::clone(&stop), Arc::clone(&tid));
        std::thread::Builder::new()
            .name("capi-sigwait".into())
            .spawn(move || {
                tid.store(tempora_kernel::gettid(), Ordering::Release);
                let mut wake = vec![0u64; n];
                let mut overrun: Vec<c_int> = vec![0; n];
                let mut out = CWaitRun {
                    start_ns: 0,
                    got: 0,
                    failed: std::ptr::null(),
                };
                let (w, o, s) = (wake.as_mut_ptr(), overrun.as_mut_ptr(), stop.as_ptr());
                // SAFETY: `wake` and `overrun` have room for the n samples the loop writes;
                // `stop` (an `AtomicI32`, an `int` to C, which reads it atomically) and `out`
                // live until the call returns; `f` holds the drop-in's calls.
                let r = unsafe {
                    match calls {
                        Calls::Kernel => {
                            capi_sigwait_kernel(signo, LEAD_NS, PERIOD_NS, n, w, o, s, &mut out)
                        }
                        Calls::Dropin(f) => {
                            capi_sigwait_dropin(f, signo, LEAD_NS, PERIOD_NS, n, w, o, s, &mut out)
                        }
                    }
                };
                let taken = if r == 0 {
                    wake.truncate(out.got);
                    overrun.truncate(out.got);
                    Ok((out.start_ns, wake, overrun))
                } else {
                    // SAFETY: on failure `failed` names the call, a static C string.
                    let what = unsafe { CStr::from_ptr(out.failed) }.to_string_lossy();
                    let e = std::io::Error::from_raw_os_error(-r);
                    Err(format!("{what}: errno {} ({e})", -r))
                };
                let _ = tx.send(taken);
            })
            .map_err(|e| format!("spawning the waiting thread: {e}"))?
    };
    let expected = LEAD_NS + 2 * n as u64 * PERIOD_NS;
    let limit = Duration::from_nanos(expected) + Duration::from_secs(3);
    let taken = match rx.recv_timeout(limit) {
        Ok(t) => t,
        Err(_) => {
            // The signals stopped coming: end the loop with a signal of our own, sent until
            // the thread answers (its first, if the timer's expiry was lost with a signal
            // already taken), for at most a second.
            stop.store(1, Ordering::Relaxed);
            let tid = tid.load(Ordering::Acquire);
            let mut answer = None;
            for _ in 0..100 {
                // SAFETY: tgkill(2) with plain values; the thread blocks the signal, so it
                // only ends its sigwait.
                unsafe {
                    libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signo);
                }
                if let Ok(t) = rx.recv_timeout(Duration::from_millis(10)) {
                    answer = Some(t);
                    break;
                }
            }
            match answer {
                Some(t) => t,
                // Left behind, blocked: it owns everything it writes to.
                None => return Err("the waiting thread does not return from sigwait".into()),
            }
        }
    };
    let _ = thread.join();
    let after = driver_switches();
    let (start, wake, overrun) = taken?;
    if wake.len() < n {
        return Err(format!(
            "{} of {n} signals within {:.1} s",
            wake.len(),
            limit.as_secs_f64()
        ));
    }
    // No driver thread after a drop-in run: they are named otherwise, nothing to count.
    let driver_wakeups = match (before, after) {
        (Some(b), Some(a)) if !a.is_empty() || matches!(calls, Calls::Kernel) => {
            Some(wakeups_between(&b, &a))
        }
        _ => None,
    };
    Ok(Run {
        start,
        wake,
        overrun,
        driver_wakeups,
    })
}

/// A side's row from its runs (module doc).
fn measured(runs: Result<Vec<Run>, String>) -> Measured {
    let runs = match runs {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return Measured::failed("no run"),
        Err(e) => return Measured::failed(e),
    };
    let (mut late, mut overruns) = (Vec::new(), 0);
    for r in &runs {
        let (l, o) = lateness(r.start, PERIOD_NS, &r.wake, &r.overrun);
        late.extend(l);
        overruns += o;
    }
    late.sort_by(f64::total_cmp);
    let at = |q: f64| quantile(&late, q).unwrap_or(0.0);
    let early = late.iter().filter(|&&l| l < 0.0).count();
    let driver: Option<u64> = runs.iter().map(|r| r.driver_wakeups).sum();
    let fields = Fields::default()
        .with(Field::P50Ns, at(0.5))
        .with(Field::P99Ns, at(0.99))
        .with(Field::P999Ns, at(0.999))
        .with(Field::MaxNs, at(1.0))
        .with(Field::Early, early)
        .with(Field::Fired, late.len())
        .with(Field::Overruns, overruns)
        .with(Field::Runs, runs.len())
        .with_opt(
            Field::DriverWakeupsPerExpiry,
            driver.map(|d| d as f64 / late.len().max(1) as f64),
        );
    if early > 0 {
        let mut m = Measured::failed(format!("{early} wake-ups before their expiry"));
        m.fields = fields;
        return m;
    }
    Measured::fields_only(fields)
}

/// The step's rows: `kernel-c` and `tempora-posix-c` at n signals per run, `reps` runs each,
/// in turn.
fn step(n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let row = |imp: &str, m: Measured| Row::new(CASE, imp, n, 1, m);
    let (mut sides, mut rows) = (Vec::new(), Vec::new());
    if settings.wants_impl("kernel-c") {
        sides.push(Box::new(Side {
            name: "kernel-c",
            calls: Calls::Kernel,
        }));
    }
    if settings.wants_impl("tempora-posix-c") {
        match dropin() {
            Ok(f) => sides.push(Box::new(Side {
                name: "tempora-posix-c",
                calls: Calls::Dropin(f),
            })),
            Err(e) => rows.push(row("tempora-posix-c", Measured::failed(e))),
        }
    }
    let results = alternate(&mut sides, 0..reps, |s| run_once(s.calls, n));
    for (side, runs) in sides.iter().zip(results) {
        rows.push(row(side.name, measured(runs)));
    }
    rows
}

/// The case's step: both sides in one, at n signals per run (500, `--quick`; 1000), 4 runs
/// each (2, `--quick`; 10, `--full`).
pub(super) fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let reps = settings.reps(2, settings.pick(2, 4, 10));
    for n in settings.sizes(&[500], &[1_000], &[1_000]) {
        let run_ms = (LEAD_NS + n as u64 * PERIOD_NS) as f64 / 1e6;
        let cost = 2.0 * reps as f64 * run_ms;
        let step = Step::new(Suite::Capi, &[CASE], "kernel-c", n, 1, cost, move || {
            step(n, reps, settings)
        });
        plan.add(step.also("tempora-posix-c"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wake_up_is_held_against_the_first_expiry_its_signal_stands_for() {
        // Period 1000 from 10_000: the second signal had 2 overruns, so the third stands for
        // expiry 4 (14_000), the fourth for expiry 5.
        let wake = [10_050, 11_020, 14_300, 15_001];
        let overrun = [0, 2, 0, 0];
        let (late, sum) = lateness(10_000, 1_000, &wake, &overrun);
        assert_eq!(late, [50.0, 20.0, 300.0, 1.0]);
        assert_eq!(sum, 2);
        // A wake-up before its expiry is negative (the row then fails as early).
        let (late, _) = lateness(10_000, 1_000, &[9_990], &[0]);
        assert_eq!(late, [-10.0]);
    }

    #[test]
    fn the_row_has_the_percentiles_of_every_run_and_driver_wakeups_per_expiry() {
        let run = |start: u64, lates: &[u64], driver: Option<u64>| Run {
            start,
            wake: lates
                .iter()
                .enumerate()
                .map(|(k, l)| start + k as u64 * PERIOD_NS + l)
                .collect(),
            overrun: vec![0; lates.len()],
            driver_wakeups: driver,
        };
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (101..=200).collect();
        let m = measured(Ok(vec![run(5_000, &a, Some(3)), run(9_000, &b, Some(1))]));
        assert!(m.error.is_none());
        let f = &m.fields;
        assert_eq!(f.num(Field::P50Ns), Some(101.0));
        assert_eq!(f.num(Field::P99Ns), Some(199.0));
        assert_eq!(f.num(Field::MaxNs), Some(200.0));
        assert_eq!(f.num(Field::Fired), Some(200.0));
        assert_eq!(f.num(Field::Runs), Some(2.0));
        assert_eq!(f.num(Field::DriverWakeupsPerExpiry), Some(0.02));
        // One run without a count: no figure rather than a partial one.
        let m = measured(Ok(vec![run(5_000, &a, Some(3)), run(9_000, &b, None)]));
        assert_eq!(m.fields.num(Field::DriverWakeupsPerExpiry), None);
        // An early wake-up fails the row, its figures kept.
        let mut early = run(5_000, &a, Some(0));
        early.wake[0] = 4_999;
        let m = measured(Ok(vec![early]));
        assert!(m.error.is_some());
        assert_eq!(m.fields.num(Field::Early), Some(1.0));
        assert!(measured(Err("dlopen: no such file".into())).error.is_some());
    }

    #[test]
    fn driver_wakeups_are_each_threads_growth_in_voluntary_switches() {
        let status = "Name:\ttempora-driver-\nState:\tS (sleeping)\n\
                      voluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(voluntary_switches(status), Some(1234));
        assert_eq!(voluntary_switches("Name:\tx\n"), None);
        let before = BTreeMap::from([(10, 100), (11, 5), (12, 9)]);
        // 10 grew by 3, 11 by none, 12 ended, 13 is new with 2.
        let after = BTreeMap::from([(10, 103), (11, 5), (13, 2)]);
        assert_eq!(wakeups_between(&before, &after), 5);
    }

    #[test]
    fn the_driver_threads_are_found_by_name_in_proc() {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (end_tx, end_rx) = mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("tempora-driver-test".into())
            .spawn(move || {
                ready_tx.send(tempora_kernel::gettid()).unwrap();
                let _ = end_rx.recv();
            })
            .unwrap();
        // Named before it runs, so named by now.
        let tid = ready_rx.recv().unwrap();
        let seen = driver_switches().expect("/proc/self/task");
        drop(end_tx);
        t.join().unwrap();
        assert!(seen.contains_key(&tid), "{tid} not in {seen:?}");
        let me = tempora_kernel::gettid();
        assert!(
            !seen.contains_key(&me),
            "the test's own thread is no driver"
        );
    }
}
