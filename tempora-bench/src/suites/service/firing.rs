//! The service suite's firing cases: when timers fire (precision per timer) and what a callback
//! that blocks costs the others. Real drivers on the OS clocks, real time.
//!
//! - `server-timeouts`: n connections (100k; `--quick` 10k), each with an idle timeout of 30 s.
//!   At the start 99% of them are mid-connection, their timeouts due 20-30 s ahead, and one
//!   request thread re-arms random ones to 30 s from now at 50k requests per second (paced in
//!   batches of 500); 1% are idle, their timeouts due at random instants over the run (5 s;
//!   `--quick` 1 s, `--full` 10 s), and fire a callback that checks it is not early.
//!   Implementations: `tempora` (precise), `tempora-slack` (a slack of 10% of the timeout, 3 s,
//!   the owner's default slack), `tempora-slack-1ms`, `tempora-deferrable` (each timer
//!   `Precision::Deferrable`, the default `max_deferral` of 1 s), `tempora-no-spare` (precise,
//!   `Builder::spare_drivers(0)`: no standby while callbacks run, so the difference is what
//!   the standby costs a wake-up), `kernel` (POSIX timers signalling one thread that sleeps
//!   in `sigtimedwait` and drains what is pending on each wake-up, at most 90k connections
//!   under `RLIMIT_SIGPENDING`), and `floor` (one thread sleeping until each idle
//!   connection's expiry and doing nothing else, without the request thread: a wake-up's
//!   cost before any timer work). Fields: `wakeups_per_s` (tempora: its driver's threads'
//!   wake-ups, a take-over by a spare among them; kernel: returns from `sigtimedwait`), `cpu_ms_per_s` (CPU time of the
//!   timer threads per second of the run, from `/proc/self/task/*/schedstat`, the per-thread
//!   figure `getrusage(RUSAGE_THREAD)` gives only to the thread itself; for the kernel its
//!   waiting thread's, without the expiry work the kernel does in interrupt context),
//!   `cpu_ns_per_wakeup` (the two over each other: the figure rows of different sizes share,
//!   the kernel's holding fewer connections), `early` (fires before the expiry: must be 0),
//!   `fired` and `due` (idle timeouts fired and due within the run: slack and deferrable ones
//!   due near its end fire after it), `lost` (due in the run and not fired by the end of their
//!   bound after it: the slack, `max_deferral`, or 100 ms), and `ns_per_op`: the mean cost of
//!   one re-arm on the request thread (random connections: mostly cache misses; none for
//!   `floor`).
//! - `settime-arm-precision`: re-arm each of n armed timers with its same relative timeout
//!   (1-2 s ahead, as `settime-arm`), for `tempora` (precise: the fine clock), `tempora-slack`
//!   (3 s: the coarse clock, `CLOCK_MONOTONIC_COARSE`, plus its lag) and `tempora-slack-1ms`
//!   (too little slack for the coarse clock's lag: the fine clock, then slack placement),
//!   interleaved pass by pass in one step; whether the coarse clock pays.
//! - `idle`: n timers (1M; `--quick` 10k) armed an hour ahead, then the driver's wake-ups
//!   (`wakeups`) and CPU (`cpu_ms`) over the run (5 s; `--quick` 1 s, `--full` 10 s), for
//!   `tempora` and `tempora-deferrable`.
//! - `slow-callback`: one callback sleeps 200 ms while 1000 other callback timers fall due in
//!   that window; their lateness (`p99_ns`, `max_ns`, delivery − expiry on the thread running
//!   the callback), for `tempora` (spare drivers, the default) and `tempora-no-spare`
//!   (`Builder::spare_drivers(0)`: the driver's other callbacks wait for the one that blocks).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::{Notify, Precision, SetFlags, TimerId, Timers};

use crate::peers::service::{arm_lateness_probe, arm_once_at, monotonic_now, wait_for_samples};
use crate::stats::quantile;
use crate::workload::{rng, spread};
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};
use rand::Rng;

const SEC: u64 = 1_000_000_000;
const TIMEOUT: u64 = 30 * SEC;
/// Requests per second of the request thread, in batches of `BATCH`.
const REQUESTS_PER_S: u64 = 50_000;
const BATCH: u64 = 500;
/// The kernel's rows hold at most this many connections (`RLIMIT_SIGPENDING` is ~96k here).
const KERNEL_MAX: usize = 90_000;
/// How long the blocking callback of `slow-callback` sleeps.
const BLOCK: Duration = Duration::from_millis(200);

/// How a tempora implementation places its timers.
#[derive(Debug, Clone, Copy)]
enum Placing {
    Precise,
    Slack(u64),
    Deferrable,
}

const TEMPORA_IMPLS: [(&str, Placing); 4] = [
    ("tempora", Placing::Precise),
    ("tempora-slack", Placing::Slack(TIMEOUT / 10)),
    ("tempora-slack-1ms", Placing::Slack(1_000_000)),
    ("tempora-deferrable", Placing::Deferrable),
];

/// CPU time (ns) of this process's threads whose name starts with one of `prefixes`, or of
/// the thread `tid`.
fn cpu_ns(prefixes: &[&str], tid: Option<i32>) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut sum = 0;
    for task in dir.flatten() {
        let path = task.path();
        let wanted = match tid {
            Some(t) => task.file_name().to_str() == Some(&t.to_string()),
            None => std::fs::read_to_string(path.join("comm"))
                .is_ok_and(|c| prefixes.iter().any(|p| c.starts_with(p))),
        };
        if !wanted {
            continue;
        }
        // schedstat: time on CPU (ns), time waiting to run, timeslices.
        if let Ok(s) = std::fs::read_to_string(path.join("schedstat")) {
            sum += s
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    sum
}

/// tempora's timer threads: its drivers and their spares, those that ended too (a spare that
/// retires takes its time with it from `/proc`): the process's CPU time less that of every
/// other thread alive.
fn tempora_cpu_ns() -> u64 {
    let others = || cpu_ns(&[""], None) - cpu_ns(&["tempora-driver", "tempora-spare"], None);
    // The other threads read on both sides of the process's clock: they run meanwhile.
    let before = others();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) into a timespec that lives for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    let process = ts.tv_sec as u64 * SEC + ts.tv_nsec as u64;
    let after = others();
    process.saturating_sub(before / 2 + after / 2)
}

/// The connections' first expiries, from `t0`: idle ones (every 100th) within `[start,
/// start + run)`, the rest 20-30 s ahead.
fn schedule(n: usize, t0: u64, start: u64, run: u64) -> Vec<u64> {
    let mut rng = rng(0x2545_F491_4F6C_DD1D);
    (0..n)
        .map(|i| {
            if i % 100 == 0 {
                rng.gen_range(start..start + run)
            } else {
                t0 + rng.gen_range(20 * SEC..TIMEOUT)
            }
        })
        .collect()
}

/// The request thread: re-arms random busy connections with `arm` at `REQUESTS_PER_S` until
/// `end`; the mean ns of one re-arm.
fn requests(n: usize, end: u64, mut arm: impl FnMut(usize)) -> f64 {
    let mut rng = rng(0x9E37_79B9_7F4A_7C15);
    let (mut spent, mut done) = (0u64, 0u64);
    let start = monotonic_now();
    while monotonic_now() < end {
        let t = Instant::now();
        for _ in 0..BATCH {
            // A busy connection: idle ones (every 100th) get no requests.
            let i = rng.gen_range(0..n);
            arm(if i % 100 == 0 { i + 1 } else { i }.min(n - 1));
        }
        spent += t.elapsed().as_nanos() as u64;
        done += BATCH;
        let next = start + done * SEC / REQUESTS_PER_S;
        std::thread::sleep(Duration::from_nanos(next.saturating_sub(monotonic_now())));
    }
    spent as f64 / done.max(1) as f64
}

/// What one `server-timeouts` run measured.
struct RunFigures {
    wakeups: u64,
    cpu_ns: u64,
    span_s: f64,
    arm_ns: f64,
    fired: u64,
    due: usize,
    /// Due within the run and not fired once their bound after it had passed.
    lost: usize,
    early: u64,
}

impl RunFigures {
    fn measured(&self) -> Measured {
        let fields = Fields::default()
            .with(Field::WakeupsPerS, self.wakeups as f64 / self.span_s)
            .with(Field::CpuMsPerS, self.cpu_ns as f64 / 1e6 / self.span_s)
            .with_opt(
                Field::CpuNsPerWakeup,
                (self.wakeups > 0).then(|| self.cpu_ns as f64 / self.wakeups as f64),
            )
            .with(Field::Early, self.early)
            .with(Field::Fired, self.fired)
            .with(Field::Due, self.due)
            .with(Field::Lost, self.lost);
        Measured::per_op(self.arm_ns, 1, fields)
    }
}

/// `spares`: the default standby while callbacks run, or none (`Builder::spare_drivers(0)`).
fn server_timeouts_tempora(
    n: usize,
    run: u64,
    placing: Placing,
    spares: bool,
) -> Result<Measured, String> {
    let mut builder = Timers::builder();
    builder.drivers(1);
    if !spares {
        builder.spare_drivers(0);
    }
    let timers = builder.build().map_err(|e| e.to_string())?;
    let owner = timers.owner();
    if let Placing::Slack(s) = placing {
        owner.set_default_slack(Some(Duration::from_nanos(s)));
    }
    let t0 = monotonic_now();
    let start = t0 + 300_000_000 + n as u64 * 2_000;
    let at = schedule(n, t0, start, run);
    let (fired, early) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut ids: Vec<TimerId> = Vec::with_capacity(n);
    for &when in &at {
        let (f, e) = (fired.clone(), early.clone());
        // Only idle connections' timeouts fire within the run; their expiry never moves.
        let cb = move |_: &tempora::Fired<'_>| {
            if monotonic_now() < when {
                e.fetch_add(1, Ordering::Relaxed);
            }
            f.fetch_add(1, Ordering::Relaxed);
        };
        let id = owner
            .create(ClockId::Monotonic, Notify::callback(cb))
            .map_err(|e| e.to_string())?;
        if let Placing::Deferrable = placing {
            owner
                .set_precision(id, Precision::Deferrable)
                .map_err(|e| e.to_string())?;
        }
        arm_once_at(&owner, id, when)?;
        ids.push(id);
    }
    std::thread::sleep(Duration::from_nanos(start.saturating_sub(monotonic_now())));
    let (w0, c0, a) = (
        timers.stats().drivers.wakeups,
        tempora_cpu_ns(),
        monotonic_now(),
    );
    let arm_ns = requests(n, start + run, |i| {
        let r = owner.settime(
            ids[i],
            SetFlags::RELATIVE,
            Duration::from_nanos(TIMEOUT),
            Duration::ZERO,
        );
        std::hint::black_box(r.expect("live timer"));
    });
    let (w1, c1, b) = (
        timers.stats().drivers.wakeups,
        tempora_cpu_ns(),
        monotonic_now(),
    );
    let fired_in_run = fired.load(Ordering::Relaxed);
    // Those due in the run and not fired yet may be as late as their bound allows.
    let due = at.iter().step_by(100).filter(|&&t| t < b).count();
    let bound = match placing {
        Placing::Precise => 0,
        Placing::Slack(s) => s,
        Placing::Deferrable => SEC,
    };
    let until = b + bound + 100_000_000;
    while (fired.load(Ordering::Relaxed) as usize) < due && monotonic_now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let figures = RunFigures {
        wakeups: w1 - w0,
        cpu_ns: c1.saturating_sub(c0),
        span_s: (b - a) as f64 / 1e9,
        arm_ns,
        fired: fired_in_run,
        due,
        lost: due.saturating_sub(fired.load(Ordering::Relaxed) as usize),
        early: early.load(Ordering::Relaxed),
    };
    Ok(figures.measured())
}

fn server_timeouts_kernel(n: usize, run: u64) -> Result<Measured, String> {
    let signo = libc::SIGRTMIN() + 7;
    let t0 = monotonic_now();
    let start = t0 + 300_000_000 + n as u64 * 3_000;
    let at = Arc::new(schedule(n, t0, start, run));
    let ready = Arc::new(Barrier::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let (wakeups, fired, early) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let (ready, stop, wakeups, fired, early, at) = (
            ready.clone(),
            stop.clone(),
            wakeups.clone(),
            fired.clone(),
            early.clone(),
            at.clone(),
        );
        std::thread::spawn(move || {
            tempora_kernel::block_signal(signo).expect("block");
            tx.send(tempora_kernel::gettid()).expect("send");
            ready.wait();
            let check = |v: i32| {
                if monotonic_now() < at[v as usize] {
                    early.fetch_add(1, Ordering::Relaxed);
                }
                fired.fetch_add(1, Ordering::Relaxed);
            };
            while !stop.load(Ordering::Relaxed) {
                if let Ok(Some(s)) = tempora_kernel::wait_signal(signo, Duration::from_millis(50)) {
                    wakeups.fetch_add(1, Ordering::Relaxed);
                    check(s.value);
                    while let Ok(Some(s)) = tempora_kernel::take_signal(signo) {
                        check(s.value);
                    }
                }
            }
            while let Ok(Some(_)) = tempora_kernel::take_signal(signo) {}
        })
    };
    let tid = rx.recv().expect("tid");
    ready.wait();
    let mut ids = Vec::with_capacity(n);
    let mut result = Ok(());
    for i in 0..n {
        match tempora_kernel::timer_create_signal(libc::CLOCK_MONOTONIC, signo, i as i32, tid) {
            Ok(id) => ids.push(id),
            Err(e) => {
                let limit = tempora_kernel::rlimit_sigpending()
                    .map_or_else(|| "unknown".into(), |l| l.to_string());
                result = Err(format!(
                    "timer_create: errno {e} after {i} timers (RLIMIT_SIGPENDING {limit})"
                ));
                break;
            }
        }
    }
    let out = result.map(|()| {
        for (&id, &when) in ids.iter().zip(at.iter()) {
            tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, when, 0).expect("settime");
        }
        std::thread::sleep(Duration::from_nanos(start.saturating_sub(monotonic_now())));
        let (w0, c0, a) = (
            wakeups.load(Ordering::Relaxed),
            cpu_ns(&[], Some(tid)),
            monotonic_now(),
        );
        let arm_ns = requests(n, start + run, |i| {
            let r = tempora_kernel::timer_settime(ids[i], 0, TIMEOUT, 0);
            std::hint::black_box(r.expect("settime"));
        });
        let (w1, c1, b) = (
            wakeups.load(Ordering::Relaxed),
            cpu_ns(&[], Some(tid)),
            monotonic_now(),
        );
        let fired_in_run = fired.load(Ordering::Relaxed);
        let due = at.iter().step_by(100).filter(|&&t| t < b).count();
        let until = b + 100_000_000;
        while (fired.load(Ordering::Relaxed) as usize) < due && monotonic_now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        RunFigures {
            wakeups: w1 - w0,
            cpu_ns: c1 - c0,
            span_s: (b - a) as f64 / 1e9,
            arm_ns,
            fired: fired_in_run,
            due,
            lost: due.saturating_sub(fired.load(Ordering::Relaxed) as usize),
            early: early.load(Ordering::Relaxed),
        }
        .measured()
    });
    for id in ids {
        let _ = tempora_kernel::timer_delete(id);
    }
    stop.store(true, Ordering::Relaxed);
    waiter.join().expect("waiter");
    out
}

/// `server-timeouts`' `floor`: one thread that sleeps until each idle connection's expiry
/// (`clock_nanosleep` on `CLOCK_MONOTONIC`, absolute, 1 ns of timer slack, as tempora's
/// drivers ask) and does nothing else: what a wake-up costs its thread on this machine
/// before any timer work.
fn server_timeouts_floor(n: usize, run: u64) -> Result<Measured, String> {
    let t0 = monotonic_now();
    let start = t0 + 300_000_000;
    let mut idle: Vec<u64> = schedule(n, t0, start, run)
        .into_iter()
        .step_by(100)
        .collect();
    idle.sort_unstable();
    let sleeper = std::thread::Builder::new()
        .name("floor-sleeper".into())
        .spawn(move || {
            // SAFETY: prctl(2) with integer arguments only; it affects the calling thread.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            let tid = tempora_kernel::gettid();
            let sleep_until = |at: u64| {
                let ts = libc::timespec {
                    tv_sec: (at / SEC) as libc::time_t,
                    tv_nsec: (at % SEC) as libc::c_long,
                };
                // SAFETY: an absolute sleep on CLOCK_MONOTONIC with a timespec that lives
                // across the call and no remainder asked for.
                while unsafe {
                    libc::clock_nanosleep(
                        libc::CLOCK_MONOTONIC,
                        libc::TIMER_ABSTIME,
                        &ts,
                        std::ptr::null_mut(),
                    )
                } == libc::EINTR
                {}
            };
            sleep_until(start);
            let (c0, a) = (cpu_ns(&[], Some(tid)), monotonic_now());
            let mut wakeups = 0u64;
            for &at in idle.iter().filter(|&&at| at >= start) {
                sleep_until(at);
                wakeups += 1;
            }
            let (c1, b) = (cpu_ns(&[], Some(tid)), monotonic_now());
            (wakeups, c1 - c0, (b - a) as f64 / 1e9)
        })
        .map_err(|e| e.to_string())?;
    let (wakeups, cpu, span_s) = sleeper.join().map_err(|_| "the sleeper panicked")?;
    Ok(Measured::fields_only(
        Fields::default()
            .with(Field::WakeupsPerS, wakeups as f64 / span_s)
            .with(Field::CpuMsPerS, cpu as f64 / 1e6 / span_s)
            .with_opt(
                Field::CpuNsPerWakeup,
                (wakeups > 0).then(|| cpu as f64 / wakeups as f64),
            ),
    ))
}

/// `settime-arm-precision`: the three placings' re-arm cost, pass by pass; (name, ns) each.
fn arm_precision(n: usize, reps: usize, settings: &Settings) -> Vec<(&'static str, f64)> {
    let timers = Timers::builder()
        .drivers(0)
        .build()
        .expect("valid configuration");
    let impls = &TEMPORA_IMPLS[..3];
    let sides: Vec<_> = impls
        .iter()
        .map(|&(name, placing)| {
            let owner = timers.owner();
            if let Placing::Slack(s) = placing {
                owner.set_default_slack(Some(Duration::from_nanos(s)));
            }
            let ids: Vec<TimerId> = (0..n)
                .map(|_| {
                    owner
                        .create(ClockId::Monotonic, Notify::Queue)
                        .expect("create")
                })
                .collect();
            (name, owner, ids)
        })
        .collect();
    let arm_all = |owner: &tempora::Owner, ids: &[TimerId]| {
        let t = Instant::now();
        for (i, &id) in ids.iter().enumerate() {
            let r = owner.settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_nanos(spread(i, 0)),
                Duration::ZERO,
            );
            std::hint::black_box(r.expect("live timer"));
        }
        t.elapsed().as_nanos() as f64 / ids.len() as f64
    };
    for (_, owner, ids) in &sides {
        arm_all(owner, ids);
    }
    let passes = settings.repeat(reps, || {
        sides
            .iter()
            .map(|(_, owner, ids)| arm_all(owner, ids))
            .collect::<Vec<_>>()
    });
    sides
        .iter()
        .enumerate()
        .map(|(k, (name, _, _))| {
            let mut v: Vec<f64> = passes.iter().map(|p| p[k]).collect();
            (*name, median(&mut v))
        })
        .collect()
}

fn idle(n: usize, run: u64, deferrable: bool) -> Result<Measured, String> {
    let timers = Timers::builder()
        .drivers(1)
        .build()
        .map_err(|e| e.to_string())?;
    let owner = timers.owner();
    for i in 0..n {
        let id = owner
            .create(ClockId::Monotonic, Notify::Queue)
            .map_err(|e| e.to_string())?;
        if deferrable {
            owner
                .set_precision(id, Precision::Deferrable)
                .map_err(|e| e.to_string())?;
        }
        owner
            .settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_nanos(3600 * SEC + i as u64 * 1_000),
                Duration::ZERO,
            )
            .map_err(|e| e.to_string())?;
    }
    // Let the driver see the last arm and go to sleep.
    std::thread::sleep(Duration::from_millis(100));
    let (w0, c0) = (timers.stats().drivers.wakeups, tempora_cpu_ns());
    std::thread::sleep(Duration::from_nanos(run));
    let (w1, c1) = (timers.stats().drivers.wakeups, tempora_cpu_ns());
    Ok(Measured::fields_only(
        Fields::default()
            .with(Field::Wakeups, w1 - w0)
            .with(Field::CpuMs, c1.saturating_sub(c0) as f64 / 1e6),
    ))
}

/// `slow-callback`: the other timers' lateness while one callback blocks.
fn slow_callback(n: usize, spares: usize) -> Result<Measured, String> {
    let timers = Timers::builder()
        .spare_drivers(spares)
        .build()
        .map_err(|e| e.to_string())?;
    let owner = timers.owner();
    let t0 = monotonic_now() + 100_000_000;
    let blocker = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(|_| std::thread::sleep(BLOCK)),
        )
        .map_err(|e| e.to_string())?;
    arm_once_at(&owner, blocker, t0)?;
    let late = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let window = BLOCK.as_nanos() as u64 * 95 / 100;
    for i in 0..n as u64 {
        let at = t0 + 1_000_000 + i * window / n as u64;
        arm_lateness_probe(&owner, at, &late)?;
    }
    wait_for_samples(&late, n, Duration::from_millis(10));
    let mut late = std::mem::take(&mut *late.lock().unwrap());
    if late.len() < n {
        return Err(format!("{} of {n} timers fired within 5 s", late.len()));
    }
    late.sort_by(f64::total_cmp);
    let at = |q: f64| quantile(&late, q).expect("n > 0 timers fired");
    Ok(Measured::fields_only(
        Fields::default()
            .with(Field::P50Ns, at(0.5))
            .with(Field::P99Ns, at(0.99))
            .with(Field::MaxNs, late[late.len() - 1])
            .with(Field::Early, late.iter().filter(|&&l| l < 0.0).count())
            .with(Field::Fired, late.len()),
    ))
}

/// The suite's firing steps.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let run = settings.pick(SEC, 5 * SEC, 10 * SEC);
    let conns = settings.pick(10_000, 100_000, 100_000);
    let precise_no_spare = ("tempora-no-spare", Placing::Precise, false);
    let with_spares = TEMPORA_IMPLS.map(|(name, placing)| (name, placing, true));
    for (name, placing, spares) in with_spares.into_iter().chain([precise_no_spare]) {
        plan.add(Step::new(
            Suite::Service,
            &["server-timeouts"],
            name,
            conns,
            1,
            run as f64 / 1e6 + 500.0,
            move || {
                let m = Measured::from_result(server_timeouts_tempora(conns, run, placing, spares));
                vec![Row::new("server-timeouts", name, conns, 1, m)]
            },
        ));
    }
    let kn = conns.min(KERNEL_MAX);
    plan.add(Step::new(
        Suite::Service,
        &["server-timeouts"],
        "kernel",
        kn,
        1,
        run as f64 / 1e6 + 800.0,
        move || {
            let m = Measured::from_result(server_timeouts_kernel(kn, run));
            vec![Row::new("server-timeouts", "kernel", kn, 1, m)]
        },
    ));
    plan.add(Step::new(
        Suite::Service,
        &["server-timeouts"],
        "floor",
        conns,
        1,
        run as f64 / 1e6 + 300.0,
        move || {
            let m = Measured::from_result(server_timeouts_floor(conns, run));
            vec![Row::new("server-timeouts", "floor", conns, 1, m)]
        },
    ));
    let arm_n = settings.pick(10_000, 100_000, 100_000);
    let reps = settings.reps(3, 7);
    plan.add(Step::new(
        Suite::Service,
        &["settime-arm-precision"],
        "tempora",
        arm_n,
        1,
        arm_n as f64 / 1e3 * 0.3 * reps as f64,
        move || {
            arm_precision(arm_n, reps, settings)
                .into_iter()
                .map(|(name, ns)| {
                    let fields = Fields::default().with(Field::Runs, reps);
                    let m = Measured::per_op(ns, arm_n, fields);
                    Row::new("settime-arm-precision", name, arm_n, 1, m)
                })
                .collect()
        },
    ));
    let idle_n = settings.pick(10_000, 1_000_000, 1_000_000);
    for (name, deferrable) in [("tempora", false), ("tempora-deferrable", true)] {
        plan.add(Step::new(
            Suite::Service,
            &["idle"],
            name,
            idle_n,
            1,
            run as f64 / 1e6 + idle_n as f64 / 1e3,
            move || {
                let m = Measured::from_result(idle(idle_n, run, deferrable));
                vec![Row::new("idle", name, idle_n, 1, m)]
            },
        ));
    }
    for (name, spares) in [("tempora", 4), ("tempora-no-spare", 0)] {
        plan.add(Step::new(
            Suite::Service,
            &["slow-callback"],
            name,
            1000,
            1,
            600.0,
            move || {
                let m = Measured::from_result(slow_callback(1000, spares));
                vec![Row::new("slow-callback", name, 1000, 1, m)]
            },
        ));
    }
}
