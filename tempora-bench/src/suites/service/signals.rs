//! The service suite's `deliver-signal` case: what a timer's real signal costs, from its expiry
//! to a `sigtimedwait` that returns it, for tempora's `Notify::Signal` timers (its driver
//! thread queues each with `rt_sigqueueinfo`) and the kernel's `SIGEV_SIGNAL` POSIX timers (the
//! hrtimer interrupt queues each), in one step, run by run in turn. Both signal the process,
//! on real-time signals every thread blocks (`peers/signal.rs`), taken by the measuring thread.
//!
//! - n > 1, a burst: n one-shot timers created for the run, all due at one instant. The
//!   measuring thread, pinned to its CPU from before the kernel's timers are armed, spins
//!   across the expiry for `1 ms + 4 µs × n`, then takes the n signals with `sigtimedwait`.
//!   `ns_per_op` is per delivered signal: `expire_ns`, the CPU time of the process's other
//!   threads (tempora's driver) during the spin plus the interrupt time on the measuring
//!   thread's CPU (the kernel's hrtimer interrupt), then `dequeue_ns`, the process's CPU time
//!   while the signals are taken (any driver work still going included); `irq_ns` is the
//!   interrupt part of `expire_ns`. The median run's figures.
//! - n = 1: one periodic timer (1 ms), its signals taken by the measuring thread blocked in
//!   `sigtimedwait`, as a program waits for them: `p50_ns`, `p99_ns`, `p999_ns` of the time
//!   from each expiry to `sigtimedwait`'s return (the signal's first expiry, which its
//!   `si_overrun` counts on from); `ns_per_op` is the process's CPU time per signal (the
//!   driver's wake-ups and the receiver's). `overruns` sums the signals' `si_overrun`: the
//!   periods that had no signal of their own (0 when every period has one). The kernel's
//!   interrupt work lands on an idle CPU here and is counted by nobody, which favours the
//!   kernel. Chunks of signals alternate between the implementations.
//!
//! The burst's timers are created for each run, on both sides alike.
//!
//! `blocked-signal` (n = 1): a 1 µs periodic timer whose signal stays blocked, never taken, for
//! a window (2 s; `--quick` 1 s, `--full` 10 s): `ns_per_op` is the process's CPU time per
//! second of the window while the measuring thread sleeps, what such a timer costs. The
//! kernel's parks (no re-arm until the dequeue); tempora's probes whether its signal is still
//! pending at periods spaced as long as it has been pending, up to `PROBE_CAP` (10 ms) apart
//! (`timers/signals/mod.rs`). `fired` is the signals taken after the window (1 on both sides).
//!
//! `parked-signals` (n = 100k; `--quick` 10k): n periodic timers (1 ms) whose signals wait
//! for a window (2 s; `--quick` 1 s, `--full` 5 s), never taken: `ns_per_op` is the process's
//! CPU time per second of the window. `tempora`: `SIGEV_THREAD_ID` timers to the measuring
//! thread, which blocks the signal; `tempora-owed`: process-directed timers whose signals find
//! no room (the soft `RLIMIT_SIGPENDING` lowered to what the user holds for the window);
//! `kernel`: process-directed timers, the signal blocked, which the kernel parks at no cost
//! (it refuses past `RLIMIT_SIGPENDING`, about 96k here: an `ok:false` row at 100k).

use std::mem::MaybeUninit;
use std::time::Duration;

use tempora::clock::ClockId;
use tempora::timers::{Notify, SetFlags, Timers};

use crate::peers::signal::{
    self, cannot_run, drain, now_ns, process_cpu_ns, spin_until, KernelSignals, Pinned,
    SignalTimers, TemporaSignals,
};
use crate::stats::quantile;
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

pub(crate) const CASE: &str = "deliver-signal";

/// The case of a fast periodic timer whose signal stays blocked.
pub(crate) const CASE_BLOCKED: &str = "blocked-signal";

/// The case of many periodic timers whose signals wait (blocked, or refused for want of
/// room).
pub(crate) const CASE_PARKED: &str = "parked-signals";

/// The blocked timer's period.
const BLOCKED_PERIOD_NS: u64 = 1_000;

/// The periodic timer's period.
pub(crate) const PERIOD_NS: u64 = 1_000_000;

/// One burst's cost per delivered signal, ns.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BurstCost {
    /// Expiry to queued: the other threads' CPU and the interrupt time during the spin.
    pub(crate) expire: f64,
    /// The interrupt part of `expire`.
    pub(crate) irq: f64,
    /// Taking the signals.
    pub(crate) dequeue: f64,
}

impl BurstCost {
    pub(crate) fn total(&self) -> f64 {
        self.expire + self.dequeue
    }
}

/// How long the measuring thread spins after a burst of n falls due.
pub(crate) fn window_ns(n: usize) -> u64 {
    1_000_000 + 4_000 * n as u64
}

/// How far ahead of now a burst of n is armed: far enough that arming all n (the kernel's
/// settime takes ~1 µs) is over before the spin starts, [`SPIN_AHEAD_NS`] before the expiry.
pub(crate) fn lead_ns(n: usize) -> u64 {
    5_000_000 + 3_000 * n as u64
}

/// The spin starts this long before the burst's expiry.
pub(crate) const SPIN_AHEAD_NS: u64 = 2_000_000;

/// The signals of a burst, taken with `sigtimedwait`: how many of the n values came, and how
/// many signals were not one of them (a duplicate, a foreign code). Waits at most 1 s for each.
pub(crate) fn take_burst(signo: i32, seen: &mut [bool]) -> (usize, usize) {
    let (mut got, mut bad) = (0, 0);
    while got < seen.len() {
        let Some(r) = signal::wait(signo, Duration::from_secs(1)) else {
            break;
        };
        match usize::try_from(r.value).ok().filter(|&v| v < seen.len()) {
            Some(v) if r.code == libc::SI_TIMER && !seen[v] => {
                seen[v] = true;
                got += 1;
            }
            _ => bad += 1,
        }
    }
    (got, bad)
}

/// One burst of n (module doc), its spin starting `ahead` ns before the expiry (normally
/// [`SPIN_AHEAD_NS`]); the calling thread must be pinned.
fn burst(side: &mut dyn SignalTimers, n: usize, ahead: u64) -> Result<BurstCost, String> {
    let signo = side.signo();
    let mut seen = vec![false; n];
    side.create(n)?;
    let at = now_ns() + lead_ns(n) + ahead.saturating_sub(SPIN_AHEAD_NS);
    side.arm_all(at, 0)?;
    let start = at - ahead;
    std::thread::sleep(Duration::from_nanos(start.saturating_sub(now_ns())));
    if now_ns() + ahead / 2 > at {
        side.delete_all();
        drain(signo);
        return Err(format!(
            "late: the spin would have started less than {} ms before the expiry",
            ahead / 2_000_000
        ));
    }
    let spin = spin_until(at + window_ns(n));
    let p0 = process_cpu_ns();
    let (got, mut bad) = take_burst(signo, &mut seen);
    let p1 = process_cpu_ns();
    side.delete_all();
    bad += drain(signo);
    if got < n || bad > 0 {
        return Err(format!(
            "{got} of {n} signals delivered, {bad} unexpected ones"
        ));
    }
    Ok(BurstCost {
        expire: (spin.others_ns + spin.irq_ns) as f64 / n as f64,
        irq: spin.irq_ns as f64 / n as f64,
        dequeue: (p1 - p0) as f64 / n as f64,
    })
}

/// How many times a burst that would have started late is tried before the row fails: a
/// sleep that overshoots by 1 ms is common on a loaded machine, ten in a row (each after a
/// longer pause, `LATE_BACK_OFF` times its number) are not. On the Rust side each try also
/// starts its spin twice as far ahead (up to 32 x [`SPIN_AHEAD_NS`]): a longer spin before
/// the expiry has nothing taken from it on a quiet machine, so it adds nothing there.
pub(crate) const LATE_TRIES: u32 = 10;
/// The pause before try k + 1 is k times this.
pub(crate) const LATE_BACK_OFF: Duration = Duration::from_millis(20);

/// A burst run, tried again (up to `LATE_TRIES` times in all) when the spin would have
/// started late.
fn burst_retrying(side: &mut (dyn SignalTimers + 'static), n: usize) -> Result<BurstCost, String> {
    let mut r = burst(side, n, SPIN_AHEAD_NS);
    for k in 1..LATE_TRIES {
        match &r {
            Err(e) if e.starts_with("late") => {
                std::thread::sleep(LATE_BACK_OFF * k);
                r = burst(side, n, SPIN_AHEAD_NS << k.min(5));
            }
            _ => break,
        }
    }
    r.map_err(|e| match e.starts_with("late") {
        true => format!("{e}, {LATE_TRIES} times"),
        false => e,
    })
}

/// The row of a burst's runs: the median run's cost.
pub(crate) fn burst_measured(runs: Result<Vec<BurstCost>, String>, n: usize) -> Measured {
    let mut runs = match runs {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return Measured::failed("no run"),
        Err(e) => return Measured::failed(e),
    };
    runs.sort_by(|a, b| a.total().total_cmp(&b.total()));
    let mid = runs[crate::stats::rank(runs.len(), 0.5)];
    let fields = Fields::default()
        .with(Field::ExpireNs, mid.expire)
        .with(Field::IrqNs, mid.irq)
        .with(Field::DequeueNs, mid.dequeue)
        .with(Field::Fired, n)
        .with(Field::Lost, 0)
        .with(Field::Runs, runs.len());
    Measured::per_op(mid.total(), n, fields)
}

/// One chunk of the periodic timer's signals: each one's lateness (ns after its expiry) and
/// the process's CPU time per signal.
pub(crate) struct Chunk {
    pub(crate) late: Vec<f64>,
    pub(crate) cpu_per_signal: f64,
    /// The sum of the signals' `si_overrun`: periods that had no signal of their own.
    pub(crate) overruns: u64,
}

/// `count` signals of one periodic timer, taken blocked in `sigtimedwait`.
fn periodic(side: &mut (dyn SignalTimers + 'static), count: usize) -> Result<Chunk, String> {
    let signo = side.signo();
    let mut late = Vec::with_capacity(count);
    side.create(1)?;
    let at = now_ns() + 2_000_000;
    side.arm_all(at, PERIOD_NS)?;
    let p0 = process_cpu_ns();
    let (mut expiry, mut overruns) = (0u64, 0u64);
    while late.len() < count {
        let Some(overrun) = side.wait_one(Duration::from_secs(1)) else {
            break;
        };
        let now = now_ns();
        late.push(now as f64 - (at + expiry * PERIOD_NS) as f64);
        expiry += 1 + overrun.max(0) as u64;
        overruns += overrun.max(0) as u64;
    }
    let p1 = process_cpu_ns();
    side.delete_all();
    drain(signo);
    if late.len() < count {
        return Err(format!(
            "{} of {count} periodic signals within 1 s each",
            late.len()
        ));
    }
    Ok(Chunk {
        late,
        cpu_per_signal: (p1 - p0) as f64 / count as f64,
        overruns,
    })
}

/// The row of the periodic timer's chunks: lateness percentiles over every signal, the median
/// chunk's CPU per signal.
pub(crate) fn periodic_measured(chunks: Result<Vec<Chunk>, String>) -> Measured {
    let chunks = match chunks {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => return Measured::failed("no run"),
        Err(e) => return Measured::failed(e),
    };
    let mut late: Vec<f64> = chunks.iter().flat_map(|c| c.late.iter().copied()).collect();
    late.sort_by(f64::total_cmp);
    let early = late.iter().filter(|&&l| l < 0.0).count();
    let at = |q: f64| quantile(&late, q).unwrap_or(0.0);
    let mut cpu: Vec<f64> = chunks.iter().map(|c| c.cpu_per_signal).collect();
    let fields = Fields::default()
        .with(Field::P50Ns, at(0.5))
        .with(Field::P99Ns, at(0.99))
        .with(Field::P999Ns, at(0.999))
        .with(Field::Early, early)
        .with(Field::Fired, late.len())
        .with(Field::Lost, 0)
        .with(
            Field::Overruns,
            chunks.iter().map(|c| c.overruns).sum::<u64>(),
        )
        .with(Field::Runs, chunks.len());
    if early > 0 {
        let mut m = Measured::failed(format!("{early} signals before their expiry"));
        m.fields = fields;
        return m;
    }
    Measured::per_op(median(&mut cpu), late.len(), fields)
}

/// Runs `f` on every side `runs` times, the sides in turn (the order reversed every other
/// run); each side's results, or its first error.
pub(crate) fn alternate<S: ?Sized, T>(
    sides: &mut [Box<S>],
    runs: impl Iterator<Item = usize>,
    mut f: impl FnMut(&mut S) -> Result<T, String>,
) -> Vec<Result<Vec<T>, String>> {
    let mut out: Vec<Result<Vec<T>, String>> = sides.iter().map(|_| Ok(Vec::new())).collect();
    for run in runs {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for i in order {
            if let Ok(v) = &mut out[i] {
                match f(sides[i].as_mut()) {
                    Ok(x) => v.push(x),
                    Err(e) => out[i] = Err(e),
                }
            }
        }
    }
    out
}

/// How many periodic chunks each implementation runs, of how many signals.
pub(crate) fn periodic_plan(settings: &Settings) -> (usize, usize) {
    settings.pick((2, 200), (4, 250), (10, 500))
}

/// The sizes: 1 (the periodic timer) and the bursts.
pub(crate) fn sizes(settings: &Settings) -> Vec<usize> {
    settings.sizes(&[1, 10_000], &[1, 10_000], &[1, 1_000, 10_000, 50_000])
}

/// The step's rows: both sides at n, in turn.
fn step(n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let wanted = ["tempora", "kernel", "tempora-recv"]
        .map(|i| settings.wants_impl(i) && (n == 1 || i != "tempora-recv"));
    let names: Vec<&str> = ["tempora", "kernel", "tempora-recv"]
        .into_iter()
        .zip(wanted)
        .filter_map(|(i, w)| w.then_some(i))
        .collect();
    let row = |imp: &str, m: Measured| Row::new(CASE, imp, n, 1, m);
    if let Some(why) = cannot_run() {
        return names
            .iter()
            .map(|i| row(i, Measured::failed(why.clone())))
            .collect();
    }
    let mut rows = Vec::new();
    let mut sides: Vec<Box<dyn SignalTimers>> = Vec::new();
    if wanted[0] {
        match TemporaSignals::new() {
            Ok(s) => sides.push(Box::new(s)),
            Err(e) => rows.push(row("tempora", Measured::failed(e))),
        }
    }
    if wanted[1] {
        sides.push(Box::new(KernelSignals::default()));
    }
    if wanted[2] {
        match TemporaSignals::receiving() {
            Ok(s) => sides.push(Box::new(s)),
            Err(e) => rows.push(row("tempora-recv", Measured::failed(e))),
        }
    }
    let results = measure_sides(&mut sides, n, reps, settings, periodic, burst_retrying);
    for (side, m) in sides.iter().zip(results) {
        rows.push(row(side.name(), m));
    }
    rows
}

/// A 1 µs periodic timer whose signal nobody takes for `window`: the process's CPU ns per
/// second of it, and the signals taken after it.
fn blocked(side: &mut dyn SignalTimers, window: Duration) -> Result<(f64, usize), String> {
    let signo = side.signo();
    side.create(1)?;
    side.arm_all(now_ns() + 1_000_000, BLOCKED_PERIOD_NS)?;
    // The first signal is queued and the probes' spacing has grown before the window opens.
    std::thread::sleep(Duration::from_millis(50));
    let c0 = process_cpu_ns();
    std::thread::sleep(window);
    let c1 = process_cpu_ns();
    // One signal taken before the delete, which makes the kernel discard its pending one.
    // One only: each take re-arms the kernel's timer, whose next signal comes a microsecond
    // later (draining would never end).
    let taken = usize::from(signal::wait(signo, Duration::from_secs(1)).is_some());
    side.delete_all();
    drain(signo);
    Ok(((c1 - c0) as f64 / window.as_secs_f64(), taken))
}

/// The `blocked-signal` step: both sides, one after the other, `runs` times each.
fn blocked_step(settings: &Settings) -> Vec<Row> {
    let window = Duration::from_secs(settings.pick(1, 2, 10));
    let row = |imp: &str, m: Measured| Row::new(CASE_BLOCKED, imp, 1, 1, m);
    if let Some(why) = cannot_run() {
        return ["tempora", "kernel"]
            .iter()
            .map(|i| row(i, Measured::failed(why.clone())))
            .collect();
    }
    let mut rows = Vec::new();
    let mut sides: Vec<Box<dyn SignalTimers>> = Vec::new();
    match TemporaSignals::new() {
        Ok(s) => sides.push(Box::new(s)),
        Err(e) => rows.push(row("tempora", Measured::failed(e))),
    }
    sides.push(Box::new(KernelSignals::default()));
    let results = alternate(&mut sides, 0..1, |s| blocked(s, window));
    for (side, r) in sides.iter().zip(results) {
        let m = match r {
            Ok(runs) if !runs.is_empty() => {
                let (cpu, taken) = runs[0];
                Measured::per_op(
                    cpu,
                    1,
                    Fields::default()
                        .with(Field::Fired, taken)
                        .with(Field::Runs, runs.len()),
                )
            }
            Ok(_) => Measured::failed("no run"),
            Err(e) => Measured::failed(e),
        };
        rows.push(row(side.name(), m));
    }
    rows
}

/// The parked timers' period.
const PARKED_PERIOD_NS: u64 = 1_000_000;

/// How a `parked-signals` row's timers wait.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Parked {
    /// tempora: `SIGEV_THREAD_ID` timers to the measuring thread, which blocks the signal.
    Thread,
    /// tempora: process-directed timers whose signals find no room: the soft
    /// `RLIMIT_SIGPENDING` is lowered to what the user holds for the window.
    Owed,
    /// The kernel: process-directed `SIGEV_SIGNAL` timers, the signal blocked.
    Kernel,
}

/// The user's signals queued now (`SigQ` of `/proc/self/status`).
fn signals_queued() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("SigQ:"))?;
    line[5..].trim().split('/').next()?.parse().ok()
}

/// n periodic timers (1 ms) whose signals wait for `window`, never taken: the process's CPU
/// ns per second of it.
fn parked(kind: Parked, n: usize, window: Duration) -> Result<f64, String> {
    let mut old = MaybeUninit::<libc::rlimit>::uninit();
    let mut lowered = false;
    let mut kernel = KernelSignals::default();
    let mut tempora = None;
    let signo = match kind {
        Parked::Kernel => {
            kernel.create(n)?;
            kernel.arm_all(now_ns() + 1_000_000, PARKED_PERIOD_NS)?;
            kernel.signo()
        }
        Parked::Thread | Parked::Owed => {
            let timers = Timers::builder()
                .drivers(1)
                .build()
                .map_err(|e| format!("Timers::build: {e}"))?;
            let owner = timers.owner();
            let signo = signal::tempora_signo();
            if kind == Parked::Owed {
                let held = signals_queued().ok_or("no SigQ in /proc/self/status")?;
                // SAFETY: reads the limit, then lowers this process's soft limit to what the
                // user holds: no room for one more signal until it is put back below.
                unsafe {
                    if libc::getrlimit(libc::RLIMIT_SIGPENDING, old.as_mut_ptr()) != 0 {
                        return Err("getrlimit".into());
                    }
                    let l = libc::rlimit {
                        rlim_cur: held,
                        rlim_max: old.assume_init().rlim_max,
                    };
                    if libc::setrlimit(libc::RLIMIT_SIGPENDING, &l) != 0 {
                        return Err("setrlimit".into());
                    }
                }
                lowered = true;
            }
            // SAFETY: gettid(2) has no preconditions.
            let tid = unsafe { libc::gettid() };
            let every = Duration::from_nanos(PARKED_PERIOD_NS);
            for i in 0..n {
                let notify = match kind {
                    Parked::Thread => Notify::ThreadSignal {
                        tid,
                        signo,
                        value: i,
                    },
                    _ => Notify::Signal { signo, value: i },
                };
                let id = owner
                    .create(ClockId::Monotonic, notify)
                    .map_err(|e| format!("Owner::create: {e}"))?;
                owner
                    .settime(id, SetFlags::RELATIVE, every, every)
                    .map_err(|e| format!("Owner::settime: {e}"))?;
            }
            tempora = Some((timers, owner));
            signo
        }
    };
    // Every first signal queued (or refused) and the looks' spacing grown before the window.
    std::thread::sleep(Duration::from_millis(100));
    let c0 = process_cpu_ns();
    std::thread::sleep(window);
    let c1 = process_cpu_ns();
    if let Some((_timers, owner)) = tempora {
        owner.destroy();
    }
    kernel.delete_all();
    if lowered {
        // SAFETY: puts back the limit read above.
        unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, old.as_ptr()) };
    }
    drain(signo);
    Ok((c1 - c0) as f64 / window.as_secs_f64())
}

/// The `parked-signals` step: each way of waiting, one after the other.
fn parked_step(n: usize, settings: &Settings) -> Vec<Row> {
    let window = Duration::from_secs(settings.pick(1, 2, 5));
    let ways = [
        ("tempora", Parked::Thread),
        ("tempora-owed", Parked::Owed),
        ("kernel", Parked::Kernel),
    ];
    let row = |imp: &str, m: Measured| Row::new(CASE_PARKED, imp, n, 1, m);
    if let Some(why) = cannot_run() {
        return ways
            .iter()
            .map(|(i, _)| row(i, Measured::failed(why.clone())))
            .collect();
    }
    ways.iter()
        .filter(|(imp, _)| settings.wants_impl(imp))
        .map(|&(imp, kind)| {
            let m = match parked(kind, n, window) {
                Ok(cpu) => Measured::per_op(cpu, 1, Fields::default().with(Field::Runs, 1)),
                Err(e) => Measured::failed(e),
            };
            row(imp, m)
        })
        .collect()
}

/// Each side's row at n, the sides in turn: the periodic timer's chunks at n = 1, bursts
/// otherwise (the measuring thread pinned). Shared with the capi suite's C loops.
pub(crate) fn measure_sides<S: ?Sized>(
    sides: &mut [Box<S>],
    n: usize,
    reps: usize,
    settings: &Settings,
    mut periodic: impl FnMut(&mut S, usize) -> Result<Chunk, String>,
    mut burst: impl FnMut(&mut S, usize) -> Result<BurstCost, String>,
) -> Vec<Measured> {
    if n == 1 {
        let (chunks, count) = periodic_plan(settings);
        alternate(sides, 0..chunks, |s| periodic(s, count))
            .into_iter()
            .map(periodic_measured)
            .collect()
    } else {
        // Pinned after tempora's service started its driver, which may run anywhere.
        match Pinned::here() {
            Ok(_pinned) => alternate(sides, settings.runs(reps, 1), |s| burst(s, n))
                .into_iter()
                .map(|r| burst_measured(r, n))
                .collect(),
            Err(e) => sides.iter().map(|_| Measured::failed(e.clone())).collect(),
        }
    }
}

/// A step's rough cost for the ETA (ms, two implementations).
pub(crate) fn cost(n: usize, reps: usize, settings: &Settings) -> f64 {
    if n == 1 {
        let (chunks, count) = periodic_plan(settings);
        2.0 * (chunks * count) as f64 * PERIOD_NS as f64 / 1e6
    } else {
        let run = (lead_ns(n) + window_ns(n)) as f64 / 1e6 + n as f64 * 2e-3;
        2.0 * reps as f64 * run
    }
}

/// The cases' steps: at each size, tempora and the kernel in one step; then the blocked timer.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let window = settings.pick(1.0, 2.0, 10.0);
    plan.add(
        Step::new(
            Suite::Service,
            &[CASE_BLOCKED],
            "tempora",
            1,
            1,
            2.0 * 1e3 * (window + 0.06),
            move || blocked_step(settings),
        )
        .also("kernel"),
    );
    let parked_n = settings.pick(10_000, 100_000, 100_000);
    let parked_window = settings.pick(1.0, 2.0, 5.0);
    plan.add(
        Step::new(
            Suite::Service,
            &[CASE_PARKED],
            "tempora",
            parked_n,
            1,
            3.0 * 1e3 * (parked_window + 0.1) + parked_n as f64 * 2e-3,
            move || parked_step(parked_n, settings),
        )
        .also("tempora-owed")
        .also("kernel"),
    );
    let reps = settings.reps(3, 5);
    for n in sizes(settings) {
        let cost = cost(n, reps, settings);
        let step = Step::new(Suite::Service, &[CASE], "tempora", n, 1, cost, move || {
            step(n, reps, settings)
        })
        .also("kernel");
        // At n = 1 a thread blocked in `Owner::recv` on a queue timer, beside the signals.
        plan.add(if n == 1 {
            step.also("tempora-recv")
        } else {
            step
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queues `signo` with `value` and `si_code` to the calling thread only (the test
    /// harness's other threads do not block it, so a process-directed signal could end the
    /// test process).
    fn queue_to_self(signo: i32, code: i32, value: i32) {
        // SAFETY: a zeroed siginfo with its fields set; the kernel lets a process queue a
        // negative si_code to itself.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            info.si_signo = signo;
            info.si_code = code;
            let base = (&mut info as *mut libc::siginfo_t).cast::<u8>();
            base.add(24).cast::<i32>().write(value);
            let r = libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                libc::gettid(),
                signo,
                &info as *const libc::siginfo_t,
            );
            assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        }
    }

    #[test]
    fn a_burst_counts_each_value_once_and_anything_else_as_unexpected() {
        let signo = libc::SIGRTMIN() + 12;
        tempora_kernel::block_signal(signo).unwrap();
        for (code, value) in [
            (libc::SI_TIMER, 0),
            (libc::SI_TIMER, 2),
            (libc::SI_TIMER, 2),
        ] {
            queue_to_self(signo, code, value);
        }
        queue_to_self(signo, libc::SI_QUEUE, 1);
        queue_to_self(signo, libc::SI_TIMER, 7);
        queue_to_self(signo, libc::SI_TIMER, 1);
        let mut seen = [false; 3];
        // 0, 2, 1 came once each; the second 2, the SI_QUEUE one and the 7 are not the
        // burst's.
        assert_eq!(take_burst(signo, &mut seen), (3, 3));
        assert_eq!(seen, [true; 3]);
        assert_eq!(drain(signo), 0);
    }

    #[test]
    fn a_thread_that_does_not_block_the_signals_stops_the_case() {
        // The test harness starts its threads without blocking them: the case must refuse.
        let signo = libc::SIGRTMIN() + 13;
        let why = cannot_run().expect("the harness's threads do not block the signals");
        assert!(why.contains("is not blocked in thread"), "{why}");
        assert!(signal::unblocked_thread(signo).is_some());
    }

    #[test]
    fn a_burst_row_is_the_median_run_and_a_periodic_row_pools_its_chunks() {
        let cost = |expire: f64, dequeue: f64| BurstCost {
            expire,
            irq: expire / 2.0,
            dequeue,
        };
        let runs = vec![cost(900.0, 300.0), cost(100.0, 300.0), cost(500.0, 320.0)];
        let m = burst_measured(Ok(runs), 10);
        assert_eq!(m.ns_per_op, 820.0);
        assert_eq!(m.fields.num(Field::ExpireNs), Some(500.0));
        assert_eq!(m.fields.num(Field::IrqNs), Some(250.0));
        assert_eq!(m.fields.num(Field::DequeueNs), Some(320.0));
        assert!(burst_measured(Err("2 of 10 signals".into()), 10)
            .error
            .is_some());

        let chunk = |late: &[f64], cpu: f64| Chunk {
            late: late.to_vec(),
            cpu_per_signal: cpu,
            overruns: 1,
        };
        let m = periodic_measured(Ok(vec![
            chunk(&[10.0, 30.0], 5.0),
            chunk(&[20.0, 40.0], 7.0),
            chunk(&[50.0, 60.0], 6.0),
        ]));
        assert_eq!(m.error, None);
        assert_eq!(m.ns_per_op, 6.0);
        assert_eq!(m.fields.num(Field::P50Ns), Some(40.0));
        assert_eq!(m.fields.num(Field::Overruns), Some(3.0));
        let early = periodic_measured(Ok(vec![chunk(&[-1.0, 30.0], 5.0)]));
        assert!(early.error.unwrap().contains("before their expiry"));
    }
}
