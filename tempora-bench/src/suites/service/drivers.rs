//! The service suite's driver cases: tempora running by itself (background drivers) against
//! the kernel's POSIX timers, on the OS clocks.
//!
//! - `wakeups`: n periodic timers armed from one thread per base (so every base holds some)
//!   with 4 periods (400, 800, 1000, 1600 ms) from one aligned start; counted over 2 s (1 s
//!   with `--quick`) are the OS wake-ups of the timer threads (`wakeups_per_s`), the distinct
//!   expiry instants in the window (`instants_per_s`, the floor) and the callbacks run in it
//!   (`fired`). Peers: `tempora` (one driver
//!   serving all bases), `tempora-per-base` (one driver per base), `kernel` (POSIX timers with
//!   `SIGEV_THREAD_ID` to one thread that sleeps in `sigtimedwait` and drains what is pending
//!   on each wake-up; at most 50k timers, under `RLIMIT_SIGPENDING`, its `n` says how many).
//!   Callbacks and signals do no work.
//! - `lateness`: n live timers armed an hour ahead (the load), plus 2000 probe timers expiring
//!   at random instants over the next second; lateness = delivery time − exact expiry, read
//!   with `CLOCK_MONOTONIC` on the delivering thread (tempora: the driver running the probe's
//!   callback; kernel: the thread returning from `sigtimedwait`). `p50_ns`, `p99_ns`, `p999_ns`.
//! - `contention-own` / `contention-shared`: T threads (2; `--full`: 2 and 64) each arm and disarm 1000
//!   timers of their own 20 times, with an owner each or all in one shared owner; `ns_per_op`
//!   is the mean per-thread time per settime, `vs_one_thread` divides it by one thread's time
//!   for the same work in the same run. On 2 CPUs, T = 64 measures contention and time
//!   slicing, not scaling.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

use crate::peers::service::{arm_lateness_probe, monotonic_now, wait_for_samples};
use crate::stats::quantile;
use crate::workload::rng;
use crate::{
    median, on_threads, settle_reclamation, Field, Fields, Measured, Plan, Row, Settings, Step,
    Suite,
};
use rand::Rng;

/// The wakeups case's periods: at 1M timers 1.34M callbacks a second, which one driver runs
/// with CPU to spare on a loaded 2-vCPU machine. With periods a quarter of these (5.4M a
/// second) it could not: it ran behind, rarely slept, and the wake-up count measured how
/// much CPU the host left it, not one wake-up per expiry instant.
const PERIODS_MS: [u64; 4] = [400, 800, 1000, 1600];
const PROBES: usize = 2000;
/// The kernel's `wakeups` row uses at most this many timers (`RLIMIT_SIGPENDING` is 96k here).
const KERNEL_WAKEUP_TIMERS: usize = 50_000;

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Distinct expiry instants of the wakeups schedule (start `t0`, `PERIODS_MS`) in `[a, b)`.
fn instants(t0: u64, a: u64, b: u64) -> usize {
    let mut set = std::collections::BTreeSet::new();
    for p in PERIODS_MS {
        let p = p * 1_000_000;
        let mut t = t0 + p;
        while t < b {
            if t >= a {
                set.insert(t);
            }
            t += p;
        }
    }
    set.len()
}

fn kernel_create_failed(e: i32, made: usize) -> String {
    let limit =
        tempora_kernel::rlimit_sigpending().map_or_else(|| "unknown".into(), |l| l.to_string());
    format!("timer_create: errno {e} after {made} timers (RLIMIT_SIGPENDING {limit})")
}

fn wakeups_tempora(n: usize, per_base: bool, secs: f64) -> Result<Measured, String> {
    // What earlier cases left to free is freed first, not on a thread beside the driver.
    settle_reclamation();
    let bases = cpus();
    let timers = Timers::builder()
        .bases(bases)
        .drivers(if per_base { bases } else { 1 })
        .build()
        .map_err(|e| e.to_string())?;
    let owner = timers.owner();
    let fired = Arc::new(AtomicU64::new(0));
    let f2 = fired.clone();
    let cb: tempora::timers::Callback = Arc::new(move |f: &tempora::Fired<'_>| {
        f2.fetch_add(1 + f.overrun() as u64, Ordering::Relaxed);
    });
    // Aligned start, far enough for the arming of n timers to finish first.
    let t0 = (monotonic_now() / 10_000_000 + 1) * 10_000_000 + 500_000_000 + n as u64 * 400;
    on_threads(bases, |k| {
        for i in (k..n).step_by(bases) {
            let p = PERIODS_MS[i % 4] * 1_000_000;
            let id = owner
                .create(
                    ClockId::Monotonic,
                    Notify::Callback {
                        name: None,
                        f: cb.clone(),
                    },
                )
                .expect("create");
            owner
                .settime(
                    id,
                    SetFlags::ABSTIME,
                    Duration::from_nanos(t0 + p),
                    Duration::from_nanos(p),
                )
                .expect("settime");
        }
    });
    let start = t0 + 50_000_000;
    std::thread::sleep(Duration::from_nanos(start.saturating_sub(monotonic_now())));
    let (w0, f0, a) = (
        timers.stats().drivers.wakeups,
        fired.load(Ordering::Relaxed),
        monotonic_now(),
    );
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (w1, f1, b) = (
        timers.stats().drivers.wakeups,
        fired.load(Ordering::Relaxed),
        monotonic_now(),
    );
    let span = (b - a) as f64 / 1e9;
    drop(owner);
    let wakeups = (w1 - w0) as f64 / span;
    Ok(Measured::fields_only(
        Fields::default()
            .with(Field::WakeupsPerS, wakeups)
            .with(Field::InstantsPerS, instants(t0, a, b) as f64 / span)
            .with(Field::Fired, f1 - f0),
    ))
}

fn wakeups_kernel(n: usize, secs: f64) -> Result<Measured, String> {
    settle_reclamation();
    let signo = libc::SIGRTMIN() + 5;
    // The kernel's timers signal a thread of their own that only waits and drains.
    let ready = Arc::new(std::sync::Barrier::new(2));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let wakeups = Arc::new(AtomicU64::new(0));
    let tid = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (ready, stop, wakeups, tid) =
            (ready.clone(), stop.clone(), wakeups.clone(), tid.clone());
        std::thread::spawn(move || {
            tempora_kernel::block_signal(signo).expect("block");
            tid.store(tempora_kernel::gettid() as u64, Ordering::Relaxed);
            ready.wait();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(Some(_)) = tempora_kernel::wait_signal(signo, Duration::from_millis(50)) {
                    wakeups.fetch_add(1, Ordering::Relaxed);
                    while let Ok(Some(_)) = tempora_kernel::take_signal(signo) {}
                }
            }
            while let Ok(Some(_)) = tempora_kernel::take_signal(signo) {}
        })
    };
    ready.wait();
    let tid = tid.load(Ordering::Relaxed) as i32;
    let mut ids = Vec::with_capacity(n);
    let mut result = Ok(());
    for i in 0..n {
        match tempora_kernel::timer_create_signal(libc::CLOCK_MONOTONIC, signo, i as i32, tid) {
            Ok(id) => ids.push(id),
            Err(e) => {
                result = Err(kernel_create_failed(e, i));
                break;
            }
        }
    }
    let out = result.map(|()| {
        let t0 = (monotonic_now() / 10_000_000 + 1) * 10_000_000 + 500_000_000 + n as u64 * 1_000;
        for (i, &id) in ids.iter().enumerate() {
            let p = PERIODS_MS[i % 4] * 1_000_000;
            tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, t0 + p, p).expect("settime");
        }
        let start = t0 + 50_000_000;
        std::thread::sleep(Duration::from_nanos(start.saturating_sub(monotonic_now())));
        let (w0, a) = (wakeups.load(Ordering::Relaxed), monotonic_now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (w1, b) = (wakeups.load(Ordering::Relaxed), monotonic_now());
        let span = (b - a) as f64 / 1e9;
        Measured::fields_only(
            Fields::default()
                .with(Field::WakeupsPerS, (w1 - w0) as f64 / span)
                .with(Field::InstantsPerS, instants(t0, a, b) as f64 / span),
        )
    });
    for id in ids {
        let _ = tempora_kernel::timer_delete(id);
    }
    stop.store(true, Ordering::Relaxed);
    waiter.join().expect("waiter");
    out
}

fn percentiles(mut late: Vec<f64>) -> Measured {
    late.sort_by(f64::total_cmp);
    let at = |q: f64| quantile(&late, q).expect("a probe fired");
    Measured::fields_only(
        Fields::default()
            .with(Field::P50Ns, at(0.5))
            .with(Field::P99Ns, at(0.99))
            .with(Field::P999Ns, at(0.999))
            .with(Field::Fired, late.len())
            .with(Field::Early, late.iter().filter(|&&l| l < 0.0).count()),
    )
}

fn lateness_tempora(n: usize) -> Result<Measured, String> {
    let timers = Timers::builder()
        .drivers(1)
        .build()
        .map_err(|e| e.to_string())?;
    let owner = timers.owner();
    for _ in 0..n {
        let id = owner
            .create(ClockId::Monotonic, Notify::Queue)
            .map_err(|e| e.to_string())?;
        owner
            .settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_secs(3600),
                Duration::ZERO,
            )
            .map_err(|e| e.to_string())?;
    }
    let late = Arc::new(Mutex::new(Vec::with_capacity(PROBES)));
    let t0 = monotonic_now() + 100_000_000;
    let mut rng = rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..PROBES {
        let at = t0 + rng.gen_range(0..1_000_000_000);
        arm_lateness_probe(&owner, at, &late)?;
    }
    wait_for_samples(&late, PROBES, Duration::from_millis(20));
    let late = std::mem::take(&mut *late.lock().unwrap());
    if late.len() < PROBES {
        return Err(format!("{} of {PROBES} probes delivered", late.len()));
    }
    Ok(percentiles(late))
}

fn lateness_kernel(n: usize) -> Result<Measured, String> {
    let signo = libc::SIGRTMIN() + 6;
    let mut load = Vec::with_capacity(n);
    let mut result = Ok(());
    for i in 0..n {
        match tempora_kernel::timer_create_none_on(libc::CLOCK_MONOTONIC) {
            Ok(id) => {
                let _ = tempora_kernel::timer_settime(id, 0, 3_600_000_000_000, 0);
                load.push(id);
            }
            Err(e) => {
                result = Err(kernel_create_failed(e, i));
                break;
            }
        }
    }
    let out = result.and_then(|()| {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tempora_kernel::block_signal(signo).expect("block");
            tx.send(tempora_kernel::gettid()).expect("send");
            let mut got = Vec::with_capacity(PROBES);
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.len() < PROBES && Instant::now() < deadline {
                if let Ok(Some(s)) = tempora_kernel::wait_signal(signo, Duration::from_millis(50)) {
                    got.push((monotonic_now(), s.value));
                }
            }
            got
        });
        let tid = rx.recv().expect("tid");
        let t0 = monotonic_now() + 100_000_000;
        let mut rng = rng(0x2545_F491_4F6C_DD1D);
        let mut probes = Vec::with_capacity(PROBES);
        let mut at = Vec::with_capacity(PROBES);
        for i in 0..PROBES {
            let t = t0 + rng.gen_range(0..1_000_000_000);
            match tempora_kernel::timer_create_signal(libc::CLOCK_MONOTONIC, signo, i as i32, tid) {
                Ok(id) => {
                    tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, t, 0).expect("settime");
                    probes.push(id);
                    at.push(t);
                }
                Err(e) => {
                    for id in probes.drain(..) {
                        let _ = tempora_kernel::timer_delete(id);
                    }
                    return Err(kernel_create_failed(e, n + i));
                }
            }
        }
        let got = waiter.join().expect("waiter");
        for id in probes {
            let _ = tempora_kernel::timer_delete(id);
        }
        if got.len() < PROBES {
            return Err(format!("{} of {PROBES} probes delivered", got.len()));
        }
        Ok(percentiles(
            got.iter()
                .map(|&(now, i)| now as f64 - at[i as usize] as f64)
                .collect(),
        ))
    });
    for id in load {
        let _ = tempora_kernel::timer_delete(id);
    }
    out
}

/// One contention round: `threads` threads each arm and disarm their own 1000 timers 20
/// times; mean per-thread ns per settime.
fn contention_round(threads: usize, shared: bool) -> f64 {
    const TIMERS: usize = 1000;
    const PASSES: usize = 20;
    let timers = Timers::builder().drivers(0).build().expect("valid");
    let one = timers.owner();
    let owners: Vec<_> = (0..threads)
        .map(|_| if shared { one.clone() } else { timers.owner() })
        .collect();
    let ids: Vec<Vec<_>> = owners
        .iter()
        .map(|o| {
            (0..TIMERS)
                .map(|_| o.create(ClockId::Monotonic, Notify::Queue).expect("create"))
                .collect()
        })
        .collect();
    let per_thread = on_threads(threads, |k| {
        let (o, ids) = (&owners[k], &ids[k]);
        let t = Instant::now();
        for pass in 0..PASSES {
            for (i, &id) in ids.iter().enumerate() {
                let v = 1_000_000_000 + ((i * 7919 + pass * 104_729) % 1_000_000) as u64 * 1_000;
                let _ = o.settime(
                    id,
                    SetFlags::RELATIVE,
                    Duration::from_nanos(v),
                    Duration::ZERO,
                );
            }
            for &id in ids {
                let _ = o.settime(id, SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO);
            }
        }
        t.elapsed().as_nanos() as f64 / (2 * PASSES * TIMERS) as f64
    });
    per_thread.iter().sum::<f64>() / threads as f64
}

/// A peer of the driver cases: its JSON name, its threads column, and how it runs each case
/// (`None`: it has no such row).
struct Peer {
    name: &'static str,
    threads: fn() -> usize,
    /// n timers, seconds counted; the timers it actually held (the kernel holds fewer).
    wakeups: fn(usize, f64) -> (usize, Result<Measured, String>),
    lateness: Option<fn(usize) -> Result<Measured, String>>,
}

/// tempora's drivers and the kernel, in the order they run.
const PEERS: [Peer; 3] = [
    Peer {
        name: "tempora",
        threads: || 1,
        wakeups: |n, secs| (n, wakeups_tempora(n, false, secs)),
        lateness: Some(lateness_tempora),
    },
    Peer {
        name: "tempora-per-base",
        threads: cpus,
        wakeups: |n, secs| (n, wakeups_tempora(n, true, secs)),
        lateness: None,
    },
    Peer {
        name: "kernel",
        threads: || 1,
        // As many as the kernel lets one user hold, with room for the rest of the run.
        wakeups: |n, secs| {
            let k = n.min(KERNEL_WAKEUP_TIMERS);
            (k, wakeups_kernel(k, secs))
        },
        lateness: Some(lateness_kernel),
    },
];

/// The suite's driver steps: wake-ups, lateness, contention.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let secs = settings.pick(1.0, 2.0, 2.0);
    let wake_n = settings.sizes(&[100_000], &[1_000_000], &[1_000_000]);
    let late_n = settings.sizes(
        &[1_000],
        &[1_000, 100_000, 1_000_000],
        &[1_000, 100_000, 1_000_000],
    );
    let threads: &[usize] = settings.pick(&[2], &[2], &[2, 64]);
    let reps = settings.reps(3, 5);
    for n in wake_n {
        for p in &PEERS {
            let cost = secs * 1e3 + n as f64 / 1e3 * 2.0;
            let t = (p.threads)();
            plan.add(Step::new(
                Suite::Service,
                &["wakeups"],
                p.name,
                n,
                t,
                cost,
                move || {
                    let (held, r) = (p.wakeups)(n, secs);
                    vec![Row::new(
                        "wakeups",
                        p.name,
                        held,
                        t,
                        Measured::from_result(r),
                    )]
                },
            ));
        }
    }
    for n in late_n {
        for p in &PEERS {
            let Some(lateness) = p.lateness else { continue };
            let cost = 1_200.0 + n as f64 / 1e3 * 2.0;
            plan.add(Step::new(
                Suite::Service,
                &["lateness"],
                p.name,
                n,
                1,
                cost,
                move || {
                    vec![Row::new(
                        "lateness",
                        p.name,
                        n,
                        1,
                        Measured::from_result(lateness(n)),
                    )]
                },
            ));
        }
    }
    for &t in threads {
        for (case, shared) in [("contention-own", false), ("contention-shared", true)] {
            let cost = 60.0 * t as f64 * reps as f64;
            plan.add(Step::new(
                Suite::Service,
                &[case],
                "tempora",
                1000 * t,
                t,
                cost,
                move || {
                    let (mut ns, mut ratio) = (Vec::new(), Vec::new());
                    for pair in settings.repeat(reps, || {
                        (contention_round(1, shared), contention_round(t, shared))
                    }) {
                        ns.push(pair.1);
                        ratio.push(pair.1 / pair.0);
                    }
                    let fields = Fields::default()
                        .with(Field::VsOneThread, median(&mut ratio))
                        .with(Field::Runs, ns.len());
                    vec![Row::new(
                        case,
                        "tempora",
                        1000 * t,
                        t,
                        Measured::per_op(median(&mut ns), 1000 * t, fields),
                    )]
                },
            ));
        }
    }
}
