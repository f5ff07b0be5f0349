//! The seed suite: the benchmark of Linux commit 1535cb80286e ("posix-timers: Improve hash
//! table performance"), Tests 1-5, run in one process against every registry in
//! `peers/registry.rs`, the live kernel included.
//!
//! - `t1-create` / `t1-getoverrun`: one owner creates N timers, then looks each up and reads its
//!   overrun count (Tests 1-3 are N = 20k, 50k, 100k; 1M and 10M show whether it stays flat).
//!   `worst_call_us` is the slowest single create in a separate timed-per-call pass: what a
//!   table resize costs the unlucky caller.
//! - `t4-*`: T threads, after a barrier, each create 20k timers then, after a second barrier
//!   (so each phase runs side by side), getoverrun each, all in one shared owner (the
//!   benchmark's threaded case). `t5-*`: the same with an owner per thread (the benchmark's
//!   forked case; for the kernel, real forked processes, with the barriers in shared memory). `ns_per_op` is the mean
//!   per-thread time per timer; `vs_one_thread` divides it by the time of the same work on one
//!   thread, measured in the same run beside `min(T, CPUs) - 1` threads that only spin on
//!   registers, so that both sides run on a machine equally busy and the ratio is what the
//!   threads cost each other (the target is <= 1.5 at T = 2): a host whose CPUs run slower
//!   side by side than alone slows both sides alike. A round in which
//!   the scheduler took a thread off its CPU (an involuntary context switch), or whose
//!   threads' phases overlapped for less than 90% of the longest, measured the machine's other
//!   load, not the threads side by side: it is measured again, up to 10 times, and
//!   `disturbed` counts the rounds measured again.
//! - `loop`: T threads in one owner each create and delete a timer 100k times; ns per pair.
//! - `mem-dense` / `mem-sparse`: bytes per timer for 2048 timers with IDs 0..2048 and with IDs
//!   512 apart (a checkpoint restore's scattered IDs), counted by the process's allocator.
//!
//! With T > CPUs the threads figures measure contention (time slicing and lock hand-offs), not
//! parallel scaling.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::peers::registry::{Dash, Errno, GlobalLock, Kernel, Registry, SparseArray, Tempora};
use crate::runner::fork::{in_children, ChildrenBarrier};
use crate::{
    allocated_bytes, median, on_threads, settle_reclamation, Field, Fields, Measured, Plan, Row,
    Settings, Step, Suite,
};

const PER_THREAD: usize = 20_000;
const LOOP_PAIRS: usize = 100_000;
const SPARSE_TIMERS: usize = 2048;
const SPARSE_STRIDE: i32 = 512;

fn errno_text(e: Errno) -> String {
    let name = match e {
        libc::EAGAIN => "EAGAIN",
        libc::EINVAL => "EINVAL",
        libc::EBUSY => "EBUSY",
        libc::ENOMEM => "ENOMEM",
        libc::ENOTSUP => "ENOTSUP",
        _ => "errno",
    };
    format!("{name} ({e})")
}

fn rlimit_sigpending() -> String {
    tempora_kernel::rlimit_sigpending().map_or_else(
        || "RLIMIT_SIGPENDING unknown".into(),
        |l| format!("RLIMIT_SIGPENDING {l}"),
    )
}

fn create_failed(e: Errno, made: usize) -> String {
    format!(
        "{} after {made} timers ({})",
        errno_text(e),
        rlimit_sigpending()
    )
}

/// One row of this suite (`total_ms` is `ns_per_op * n`); failed rows have no figures.
fn row(
    case: &str,
    imp: &str,
    n: usize,
    threads: usize,
    ns_per_op: f64,
    error: Option<String>,
    fields: Fields,
) -> Row {
    let measured = match error {
        None => Measured::per_op(ns_per_op, n, fields),
        Some(e) => Measured::failed(e),
    };
    Row::new(case, imp, n, threads, measured)
}

/// Creates up to `n` timers into `ids`; the errno and count on failure.
#[inline(never)]
fn create_n<R: Registry>(reg: &R, o: &R::Owner, n: usize, ids: &mut Vec<i32>) -> Result<(), Errno> {
    for _ in 0..n {
        ids.push(reg.create(o)?);
    }
    Ok(())
}

#[inline(never)]
fn getoverrun_all<R: Registry>(reg: &R, o: &R::Owner, ids: &[i32]) -> i64 {
    let mut sum = 0i64;
    for &id in ids {
        sum += i64::from(reg.getoverrun(o, id).unwrap_or(-1));
    }
    sum
}

fn delete_all<R: Registry>(reg: &R, o: &R::Owner, ids: &[i32]) {
    for &id in ids {
        let _ = reg.delete(o, id);
    }
}

/// Tests 1-3 at one N.
fn t1<R: Registry>(n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let mut create_ns = Vec::new();
    let mut get_ns = Vec::new();
    let mut bytes = None;
    let mut failed = None;
    let mut ids = Vec::with_capacity(n);
    // One registry for all runs, a fresh owner per run: the first run is cold (the table grows,
    // memory is faulted in), the others are the steady state of a long-lived registry.
    settle_reclamation();
    let before = allocated_bytes();
    let reg = R::new();
    // The first run is cold; at least two more make the warm median.
    for run in settings.runs(reps.max(2), 3) {
        ids.clear();
        settle_reclamation();
        let o = reg.owner();
        let t0 = Instant::now();
        let made = create_n(&reg, &o, n, &mut ids);
        let c = t0.elapsed();
        if let Err(e) = made {
            failed = Some(create_failed(e, ids.len()));
            reg.release(o, &ids);
            break;
        }
        if run == 0 {
            bytes = Some(allocated_bytes().saturating_sub(before) as f64 / n as f64);
        }
        let t1 = Instant::now();
        black_box(getoverrun_all(&reg, &o, &ids));
        let g = t1.elapsed();
        reg.release(o, &ids);
        create_ns.push(c.as_nanos() as f64 / n as f64);
        get_ns.push(g.as_nanos() as f64 / n as f64);
    }
    drop(reg);
    let cold = create_ns.first().copied();
    if create_ns.len() > 1 {
        create_ns.remove(0);
    }
    let worst = if failed.is_none() {
        Some(worst_create::<R>(n, &mut ids))
    } else {
        None
    };
    let (c, g) = if failed.is_none() {
        (median(&mut create_ns), median(&mut get_ns))
    } else {
        (0.0, 0.0)
    };
    let b = bytes.filter(|_| R::NAME != Kernel::NAME && failed.is_none());
    let runs = Fields::default().with(Field::Runs, get_ns.len());
    let create = runs
        .clone()
        .with_opt(Field::BytesPerTimer, b)
        .with_opt(Field::WorstCallUs, worst)
        .with_opt(Field::ColdNsPerOp, cold.filter(|_| failed.is_none()));
    vec![
        row("t1-create", R::NAME, n, 1, c, failed.clone(), create),
        row("t1-getoverrun", R::NAME, n, 1, g, failed, runs),
    ]
}

/// The slowest single create while creating `n` timers (each call timed on its own).
fn worst_create<R: Registry>(n: usize, ids: &mut Vec<i32>) -> f64 {
    ids.clear();
    settle_reclamation();
    let reg = R::new();
    let o = reg.owner();
    let mut worst = Duration::ZERO;
    for _ in 0..n {
        let t = Instant::now();
        let r = reg.create(&o);
        let d = t.elapsed();
        match r {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        worst = worst.max(d);
    }
    reg.release(o, ids);
    worst.as_secs_f64() * 1e6
}

/// One T4/T5 round: per-thread (create, getoverrun) durations, and whether it ran as the case
/// says (no thread taken off its CPU by the scheduler, each phase side by side); or the first
/// failure.
type Round = Result<(Vec<(Duration, Duration)>, bool), String>;

/// Rounds measured again, at most, when the scheduler disturbed them (then the last is kept,
/// and the row's `disturbed` says so).
const MAX_DISTURBED: usize = 10;

/// Involuntary context switches of the calling thread so far: times the scheduler took it
/// off its CPU (0 if unknown).
fn preemptions() -> i64 {
    // SAFETY: `rusage` is plain integers, for which zero is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `rusage`; RUSAGE_THREAD reads the calling thread's.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } == 0 {
        u.ru_nivcsw
    } else {
        0
    }
}

/// Whether spans of the threads' same phase ran side by side: they overlap for at least 90%
/// of the longest (a barrier starts them together; a thread that waited for a CPU, or was
/// descheduled, starts or ends apart).
fn side_by_side(spans: &[(Instant, Instant)]) -> bool {
    let (Some(start), Some(end)) = (
        spans.iter().map(|s| s.0).max(),
        spans.iter().map(|s| s.1).min(),
    ) else {
        return true;
    };
    let longest = spans.iter().map(|s| s.1 - s.0).max().unwrap_or_default();
    end.saturating_duration_since(start).as_secs_f64() >= 0.9 * longest.as_secs_f64()
}

/// One thread's phases in a round: each phase's span, and whether the scheduler took the
/// thread off its CPU during them.
struct Phases {
    create: (Instant, Instant),
    get: (Instant, Instant),
    preempted: bool,
}

fn threads_round<R: Registry>(reg: &R, threads: usize, shared_owner: bool) -> Round {
    let owners: Vec<R::Owner> = (0..if shared_owner { 1 } else { threads })
        .map(|_| reg.owner())
        .collect();
    type ThreadResult = Result<(Phases, Vec<i32>), (Errno, usize, Vec<i32>)>;
    // The threads start each phase together (`on_threads` the creates, this barrier the
    // getoverruns), so a phase's figure is the threads' work side by side, not one thread's
    // creates beside another's lookups or alone after it. Whether they did is checked after:
    // on a shared machine the barrier cannot make the scheduler run both at once.
    let between = Barrier::new(threads);
    let results: Vec<ThreadResult> = on_threads(threads, |i| {
        let o = &owners[if shared_owner { 0 } else { i }];
        let mut ids = Vec::with_capacity(PER_THREAD);
        let p0 = preemptions();
        let t0 = Instant::now();
        let created = create_n(reg, o, PER_THREAD, &mut ids);
        let c = (t0, Instant::now());
        let p1 = preemptions();
        between.wait();
        if let Err(e) = created {
            let made = ids.len();
            return Err((e, made, ids));
        }
        let p2 = preemptions();
        let t1 = Instant::now();
        black_box(getoverrun_all(reg, o, &ids));
        let g = (t1, Instant::now());
        let preempted = p1 != p0 || preemptions() != p2;
        Ok((
            Phases {
                create: c,
                get: g,
                preempted,
            },
            ids,
        ))
    });
    let mut phases = Vec::new();
    let mut failure = None;
    for (i, r) in results.into_iter().enumerate() {
        let o = &owners[if shared_owner { 0 } else { i }];
        match r {
            Ok((p, ids)) => {
                delete_all(reg, o, &ids);
                phases.push(p);
            }
            Err((e, made, ids)) => {
                delete_all(reg, o, &ids);
                failure.get_or_insert(format!(
                    "{} in a thread after {made} of its timers ({}, {threads} x {PER_THREAD} wanted)",
                    errno_text(e),
                    rlimit_sigpending()
                ));
            }
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    let creates: Vec<_> = phases.iter().map(|p| p.create).collect();
    let gets: Vec<_> = phases.iter().map(|p| p.get).collect();
    let ran_as_said =
        !phases.iter().any(|p| p.preempted) && side_by_side(&creates) && side_by_side(&gets);
    let durations = phases
        .iter()
        .map(|p| (p.create.1 - p.create.0, p.get.1 - p.get.0))
        .collect();
    Ok((durations, ran_as_said))
}

/// Runs `f` (one thread's round) while `min(threads, CPUs) - 1` other threads only spin on
/// registers, and returns what it returned. The one-thread figure a T-thread round is divided
/// by is so measured on a machine as busy as the T threads make it: a host that runs its CPUs
/// slower side by side than alone (a shared core, a busy neighbour) slows both sides alike,
/// and `vs_one_thread` is left with what the threads cost each other through the registry.
fn beside_spinners<T>(threads: usize, f: impl FnOnce() -> T) -> T {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinners = threads.min(cpus).saturating_sub(1);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = Barrier::new(spinners + 1);
    std::thread::scope(|s| {
        for _ in 0..spinners {
            let spin = std::thread::Builder::new().name("seed-spinner".into());
            spin.spawn_scoped(s, || {
                started.wait();
                let mut x = 0x9e37_79b9_7f4a_7c15u64;
                // Relaxed: a stop flag; the spin touches no shared line but this one, read.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..1024 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                    }
                    black_box(x);
                }
            })
            .expect("a spinner thread");
        }
        started.wait();
        let r = f();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    })
}

fn mean(v: &[(Duration, Duration)], pick: impl Fn(&(Duration, Duration)) -> Duration) -> f64 {
    v.iter().map(|x| pick(x).as_nanos() as f64).sum::<f64>() / v.len() as f64
}

/// Tests 4 (shared owner) and 5 (owner per thread) at T threads.
fn t45<R: Registry>(
    threads: usize,
    shared_owner: bool,
    reps: usize,
    settings: &Settings,
) -> Vec<Row> {
    let cases = if shared_owner {
        ["t4-create", "t4-getoverrun"]
    } else {
        ["t5-create", "t5-getoverrun"]
    };
    let reg = R::new();
    let n = PER_THREAD as f64;
    record_vs_one_thread::<R>(settings, &cases, PER_THREAD, threads, reps, |t| {
        // A round the scheduler disturbed measures the machine's other load, not the case:
        // measured again (each try counted in `disturbed`), up to MAX_DISTURBED times.
        let mut disturbed = 0;
        loop {
            settle_reclamation();
            let (r, ran_as_said) = if t == 1 {
                beside_spinners(threads, || threads_round(&reg, 1, true))
            } else if R::NAME == Kernel::NAME && !shared_owner {
                kernel_forks(threads)
            } else {
                threads_round(&reg, threads, shared_owner)
            }?;
            if ran_as_said || disturbed == MAX_DISTURBED {
                let per_op = vec![mean(&r, |x| x.0) / n, mean(&r, |x| x.1) / n];
                return Ok((per_op, Some(disturbed)));
            }
            disturbed += 1;
        }
    })
}

/// Runs `reps` pairs of rounds, `round(1)` (one thread alone) then `round(threads)`, each
/// returning the per-thread ns per op of every case in `cases`, and records per case the
/// median of the threaded rounds with `vs_one_thread`, the median ratio to the one-thread
/// round of the same pair. The first failure is recorded for every case. Stops repeating once
/// the settings' time budget has passed.
fn record_vs_one_thread<R: Registry>(
    settings: &Settings,
    cases: &[&str],
    n: usize,
    threads: usize,
    reps: usize,
    mut round: impl FnMut(usize) -> Result<(Vec<f64>, Option<usize>), String>,
) -> Vec<Row> {
    let mut ns = vec![Vec::new(); cases.len()];
    let mut ratio = vec![Vec::new(); cases.len()];
    let mut failed = None;
    let mut disturbed = None;
    for _ in settings.runs(reps.max(1), 1) {
        match round(1).and_then(|one| Ok((one, round(threads)?))) {
            Ok(((one, d1), (many, d2))) => {
                for d in [d1, d2].into_iter().flatten() {
                    *disturbed.get_or_insert(0) += d;
                }
                for k in 0..cases.len() {
                    ns[k].push(many[k]);
                    ratio[k].push(many[k] / one[k]);
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let ok = failed.is_none();
    cases
        .iter()
        .enumerate()
        .map(|(k, case)| {
            let runs = ns[k].len();
            let fields = if ok {
                Fields::default()
                    .with(Field::VsOneThread, median(&mut ratio[k]))
                    .with(Field::Runs, runs)
                    .with_opt(Field::Disturbed, disturbed)
            } else {
                Fields::default()
            };
            let ns = if ok { median(&mut ns[k]) } else { 0.0 };
            row(case, R::NAME, n, threads, ns, failed.clone(), fields)
        })
        .collect()
}

/// What one forked T5 process reports.
#[derive(Clone, Copy, Default)]
struct ForkedT5 {
    create_ns: u64,
    get_ns: u64,
    errno: i32,
    made: usize,
    /// The scheduler took the process off its CPU during a phase.
    preempted: bool,
}

/// T5 for the kernel: `threads` forked processes, each its own owner of POSIX timers.
fn kernel_forks(threads: usize) -> Round {
    // As `threads_round`'s threads, the processes start each phase together.
    let between = ChildrenBarrier::new(threads).ok_or("mmap failed")?;
    let results = in_children(
        threads,
        |_| Vec::<i32>::with_capacity(PER_THREAD),
        |_, ids| {
            let p0 = preemptions();
            let t0 = Instant::now();
            let mut errno = 0;
            for _ in 0..PER_THREAD {
                match tempora_kernel::timer_create_none(0) {
                    Ok(id) => ids.push(id),
                    Err(e) => {
                        errno = e;
                        break;
                    }
                }
            }
            let create_ns = t0.elapsed().as_nanos() as u64;
            let p1 = preemptions();
            between.wait();
            let p2 = preemptions();
            let t1 = Instant::now();
            black_box(getoverrun_all(&Kernel, &(), ids));
            let get_ns = t1.elapsed().as_nanos() as u64;
            let preempted = p1 != p0 || preemptions() != p2;
            delete_all(&Kernel, &(), ids);
            ForkedT5 {
                create_ns,
                get_ns,
                errno,
                made: ids.len(),
                preempted,
            }
        },
    )?;
    if let Some(f) = results.iter().find(|r| r.errno != 0) {
        return Err(format!(
            "{} in a process after {} of its timers ({}, {threads} x {PER_THREAD} wanted)",
            errno_text(f.errno),
            f.made,
            rlimit_sigpending()
        ));
    }
    // The processes' phases are not checked for overlap (their clocks' readings stay in the
    // children): only for the scheduler's preemptions.
    let durations = results
        .iter()
        .map(|r| {
            (
                Duration::from_nanos(r.create_ns),
                Duration::from_nanos(r.get_ns),
            )
        })
        .collect();
    Ok((durations, !results.iter().any(|r| r.preempted)))
}

/// The create+delete loop at T threads in one owner.
fn create_delete_loop<R: Registry>(threads: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let round = |t: usize| -> Result<f64, String> {
        let reg = R::new();
        let o = reg.owner();
        let times: Vec<Result<Duration, Errno>> = on_threads(t, |_| {
            let t0 = Instant::now();
            for _ in 0..LOOP_PAIRS {
                let id = reg.create(&o)?;
                reg.delete(&o, id)?;
            }
            Ok(t0.elapsed())
        });
        let mut sum = 0.0;
        for r in &times {
            match r {
                Ok(d) => sum += d.as_nanos() as f64,
                Err(e) => return Err(errno_text(*e)),
            }
        }
        Ok(sum / t as f64 / LOOP_PAIRS as f64)
    };
    record_vs_one_thread::<R>(settings, &["loop"], LOOP_PAIRS, threads, reps, |t| {
        round(t).map(|v| (vec![v], None))
    })
}

/// Bytes per timer for 2048 dense or sparse (512 apart) IDs.
fn memory<R: Registry>(sparse: bool) -> Vec<Row> {
    let case = if sparse { "mem-sparse" } else { "mem-dense" };
    let (ns, bytes, error) = if R::NAME == Kernel::NAME {
        let why = "kernel memory is not visible to the process's allocator";
        (0.0, None, Some(why.to_string()))
    } else {
        memory_run::<R>(sparse)
    };
    let fields = Fields::default().with_opt(Field::BytesPerTimer, bytes);
    vec![row(case, R::NAME, SPARSE_TIMERS, 1, ns, error, fields)]
}

/// One memory run: (ns per create, bytes per timer, error).
fn memory_run<R: Registry>(sparse: bool) -> (f64, Option<f64>, Option<String>) {
    settle_reclamation();
    let before = allocated_bytes();
    let reg = R::new();
    let o = reg.owner();
    let t0 = Instant::now();
    let mut failed = None;
    for k in 0..SPARSE_TIMERS as i32 {
        let r = if sparse {
            reg.create_exact(&o, k * SPARSE_STRIDE)
        } else {
            reg.create(&o).map(drop)
        };
        if let Err(e) = r {
            failed = Some(errno_text(e));
            break;
        }
    }
    let d = t0.elapsed();
    let bytes = allocated_bytes().saturating_sub(before) as f64 / SPARSE_TIMERS as f64;
    drop(o);
    drop(reg);
    let ns = d.as_nanos() as f64 / SPARSE_TIMERS as f64;
    let bytes = failed.is_none().then_some(bytes);
    (ns, bytes, failed)
}

/// A registry of the suite: its JSON name and its cases.
struct Peer {
    name: &'static str,
    t1: fn(usize, usize, &Settings) -> Vec<Row>,
    t45: fn(usize, bool, usize, &Settings) -> Vec<Row>,
    create_delete_loop: fn(usize, usize, &Settings) -> Vec<Row>,
    memory: fn(bool) -> Vec<Row>,
    /// Rough cost of a create+lookup against tempora's (for the ETA only).
    slowness: f64,
}

const fn peer<R: Registry>(slowness: f64) -> Peer {
    Peer {
        name: R::NAME,
        t1: t1::<R>,
        t45: t45::<R>,
        create_delete_loop: create_delete_loop::<R>,
        memory: memory::<R>,
        slowness,
    }
}

/// tempora and its peers, in the order they run.
const PEERS: [Peer; 5] = [
    peer::<Tempora>(1.0),
    peer::<Kernel>(10.0),
    peer::<GlobalLock>(1.5),
    peer::<SparseArray>(1.0),
    peer::<Dash>(1.5),
];

/// The suite's steps.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings = plan.settings;
    let sizes = settings.sizes(
        &[20_000, 50_000, 100_000],
        &[20_000, 50_000, 100_000, 1_000_000],
        &[20_000, 50_000, 100_000, 1_000_000, 10_000_000],
    );
    // T = 64 measures time slicing on 2 CPUs, and costs as much as the rest: --full only.
    let threads: &[usize] = settings.pick(&[2], &[2], &[2, 64]);
    type Run<'a> = Box<dyn FnOnce() -> Vec<Row> + 'a>;
    let add = |plan: &mut Plan<'a>, cases: &[&'static str], p: &Peer, n, t, cost, run: Run<'a>| {
        plan.add(Step::new(Suite::Seed, cases, p.name, n, t, cost, run));
    };
    for &n in &sizes {
        let reps = settings.reps(5, if n >= 1_000_000 { 3 } else { 5 });
        for p in &PEERS {
            // The kernel stops at RLIMIT_SIGPENDING: its large sizes fail fast.
            let m = if p.name == Kernel::NAME {
                n.min(100_000)
            } else {
                n
            };
            let cost = m as f64 / 1e3 * 0.15 * p.slowness * reps as f64;
            add(
                plan,
                &["t1-create", "t1-getoverrun"],
                p,
                n,
                1,
                cost,
                Box::new(move || (p.t1)(n, reps, settings)),
            );
        }
    }
    let reps = settings.reps(3, 5);
    for &t in threads {
        for (shared, cases) in [
            (true, ["t4-create", "t4-getoverrun"]),
            (false, ["t5-create", "t5-getoverrun"]),
        ] {
            for p in &PEERS {
                let cost = 20.0 * t as f64 * p.slowness * reps as f64;
                add(
                    plan,
                    &cases,
                    p,
                    PER_THREAD,
                    t,
                    cost,
                    Box::new(move || (p.t45)(t, shared, reps, settings)),
                );
            }
        }
        for p in &PEERS {
            let cost = 40.0 * t as f64 * p.slowness * reps as f64;
            add(
                plan,
                &["loop"],
                p,
                LOOP_PAIRS,
                t,
                cost,
                Box::new(move || (p.create_delete_loop)(t, reps, settings)),
            );
        }
    }
    for sparse in [false, true] {
        let case = if sparse { "mem-sparse" } else { "mem-dense" };
        for p in &PEERS {
            add(
                plan,
                &[case],
                p,
                SPARSE_TIMERS,
                1,
                5.0,
                Box::new(move || (p.memory)(sparse)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans that ran together are side by side; a thread that ran after the other, or
    /// started late, is not (the round is measured again).
    #[test]
    fn phases_side_by_side_overlap_for_most_of_the_longest() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        assert!(side_by_side(&[(at(0), at(100)), (at(2), at(101))]));
        assert!(side_by_side(&[(at(0), at(100))]), "one thread alone");
        assert!(!side_by_side(&[(at(0), at(100)), (at(100), at(200))]));
        assert!(!side_by_side(&[(at(0), at(100)), (at(30), at(110))]));
    }

    /// The one-thread round of a two-thread case runs beside one more thread, spinning (on a
    /// machine with a CPU for it), and alone when there is no second thread to stand for.
    #[test]
    fn the_one_thread_round_runs_beside_a_spinner_for_each_other_thread() {
        let spinners = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "seed-spinner")
                })
                .count()
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(beside_spinners(1, spinners), 0);
        assert_eq!(beside_spinners(2, spinners), usize::from(cpus >= 2));
    }
}
