//! The seed suite: the benchmark of Linux commit 1535cb80286e ("posix-timers: Improve hash
//! table performance"), Tests 1-5, run in one process against every registry in
//! `registries.rs`, the live kernel included.
//!
//! - `t1-create` / `t1-getoverrun`: one owner creates N timers, then looks each up and reads its
//!   overrun count (Tests 1-3 are N = 20k, 50k, 100k; 1M and 10M show whether it stays flat).
//!   `worst_call_us` is the slowest single create in a separate timed-per-call pass: what a
//!   table resize costs the unlucky caller.
//! - `t4-*`: T threads, after a barrier, each create 20k timers then getoverrun each, all in one
//!   shared owner (the seed's thread case). `t5-*`: the same with an owner per thread (the
//!   seed's fork case; for the kernel, real forked processes). `ns_per_op` is the mean
//!   per-thread time per timer; `vs_one_thread` divides it by the time of the same work on one
//!   thread alone, measured in the same run (the target is <= 1.5 at T = 2).
//! - `loop`: T threads in one owner each create and delete a timer 100k times; ns per pair.
//! - `mem-dense` / `mem-sparse`: bytes per timer for 2048 timers with IDs 0..2048 and with IDs
//!   512 apart (the seed's sparse restore case), counted by the process's allocator.
//!
//! With T > CPUs the threads figures measure contention (time slicing and lock hand-offs), not
//! parallel scaling.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::registries::{Dash, Errno, GlobalLock, Kernel, Registry, SparseArray, Tempora};
use super::{
    allocated_bytes, median, on_threads, settle_reclamation, Extras, Opts, Record, Reporter,
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

/// One result row of this suite (`total_ms` is `ns_per_op * n`).
struct Row<'a> {
    case: &'a str,
    imp: &'a str,
    n: usize,
    threads: usize,
    ns_per_op: f64,
    error: Option<String>,
    extras: Extras,
}

fn record(rep: &mut Reporter, row: Row<'_>) {
    let ok = row.error.is_none();
    let ns = if ok { row.ns_per_op } else { 0.0 };
    rep.record(Record {
        suite: "seed",
        case: row.case.to_string(),
        imp: row.imp.to_string(),
        n: row.n as u64,
        threads: row.threads as u32,
        ns_per_op: ns,
        total_ms: ns * row.n as f64 / 1e6,
        ok,
        error: row.error,
        dist: None,
        extras: row.extras,
    });
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
fn t1<R: Registry>(n: usize, reps: usize, rep: &mut Reporter) {
    if !rep.wants_impl(R::NAME) || !(rep.wants_case("t1-create") || rep.wants_case("t1-getoverrun"))
    {
        return;
    }
    rep.set_message(format!("seed t1 {} n={n}", R::NAME));
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
    for run in 0..reps {
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
    record(
        rep,
        Row {
            case: "t1-create",
            imp: R::NAME,
            n,
            threads: 1,
            ns_per_op: c,
            error: failed.clone(),
            extras: Extras {
                bytes_per_timer: b,
                worst_call_us: worst,
                cold_ns_per_op: cold.filter(|_| failed.is_none()),
                ..Extras::default()
            },
        },
    );
    record(
        rep,
        Row {
            case: "t1-getoverrun",
            imp: R::NAME,
            n,
            threads: 1,
            ns_per_op: g,
            error: failed,
            extras: Extras::default(),
        },
    );
    rep.tick();
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

/// Per-thread (create, getoverrun) durations of one T4/T5 round, or the first failure.
type Round = Result<Vec<(Duration, Duration)>, String>;

fn threads_round<R: Registry>(reg: &R, threads: usize, shared_owner: bool) -> Round {
    let owners: Vec<R::Owner> = (0..if shared_owner { 1 } else { threads })
        .map(|_| reg.owner())
        .collect();
    type ThreadResult = Result<(Duration, Duration, Vec<i32>), (Errno, usize, Vec<i32>)>;
    let results: Vec<ThreadResult> = on_threads(threads, |i| {
        let o = &owners[if shared_owner { 0 } else { i }];
        let mut ids = Vec::with_capacity(PER_THREAD);
        let t0 = Instant::now();
        if let Err(e) = create_n(reg, o, PER_THREAD, &mut ids) {
            let made = ids.len();
            return Err((e, made, ids));
        }
        let c = t0.elapsed();
        let t1 = Instant::now();
        black_box(getoverrun_all(reg, o, &ids));
        Ok((c, t1.elapsed(), ids))
    });
    let mut out = Vec::new();
    let mut failure = None;
    for (i, r) in results.into_iter().enumerate() {
        let o = &owners[if shared_owner { 0 } else { i }];
        match r {
            Ok((c, g, ids)) => {
                delete_all(reg, o, &ids);
                out.push((c, g));
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
    match failure {
        Some(f) => Err(f),
        None => Ok(out),
    }
}

fn mean(v: &[(Duration, Duration)], pick: impl Fn(&(Duration, Duration)) -> Duration) -> f64 {
    v.iter().map(|x| pick(x).as_nanos() as f64).sum::<f64>() / v.len() as f64
}

/// Tests 4 (shared owner) and 5 (owner per thread) at T threads.
fn t45<R: Registry>(threads: usize, shared_owner: bool, reps: usize, rep: &mut Reporter) {
    let case = if shared_owner { "t4" } else { "t5" };
    let cases = [format!("{case}-create"), format!("{case}-getoverrun")];
    if !rep.wants_impl(R::NAME) || !cases.iter().any(|c| rep.wants_case(c)) {
        return;
    }
    rep.set_message(format!("seed {case} {} threads={threads}", R::NAME));
    let reg = R::new();
    let per_op = |round: Round| {
        round.map(|r| {
            let n = PER_THREAD as f64;
            vec![mean(&r, |x| x.0) / n, mean(&r, |x| x.1) / n]
        })
    };
    let cases = [cases[0].as_str(), cases[1].as_str()];
    record_vs_one_thread::<R>(rep, &cases, PER_THREAD, threads, reps, |t| {
        settle_reclamation();
        per_op(if t == 1 {
            threads_round(&reg, 1, true)
        } else if R::NAME == Kernel::NAME && !shared_owner {
            kernel_forks(threads)
        } else {
            threads_round(&reg, threads, shared_owner)
        })
    });
}

/// Runs `reps` pairs of rounds, `round(1)` (one thread alone) then `round(threads)`, each
/// returning the per-thread ns per op of every case in `cases`, and records per case the
/// median of the threaded rounds with `vs_one_thread`, the median ratio to the one-thread
/// round of the same pair. The first failure is recorded for every case.
fn record_vs_one_thread<R: Registry>(
    rep: &mut Reporter,
    cases: &[&str],
    n: usize,
    threads: usize,
    reps: usize,
    mut round: impl FnMut(usize) -> Result<Vec<f64>, String>,
) {
    let mut ns = vec![Vec::new(); cases.len()];
    let mut ratio = vec![Vec::new(); cases.len()];
    let mut failed = None;
    for _ in 0..reps {
        match round(1).and_then(|one| Ok((one, round(threads)?))) {
            Ok((one, many)) => {
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
    for (k, case) in cases.iter().enumerate() {
        record(
            rep,
            Row {
                case,
                imp: R::NAME,
                n,
                threads,
                ns_per_op: if ok { median(&mut ns[k]) } else { 0.0 },
                error: failed.clone(),
                extras: Extras {
                    vs_one_thread: ok.then(|| median(&mut ratio[k])),
                    ..Extras::default()
                },
            },
        );
    }
    rep.tick();
}

/// T5 for the kernel: `threads` forked processes, each its own owner of POSIX timers.
fn kernel_forks(threads: usize) -> Round {
    #[repr(C)]
    struct Slot {
        create_ns: u64,
        get_ns: u64,
        errno: i32,
        made: u32,
    }
    use std::sync::atomic::{AtomicU32, Ordering};
    let size = 64 + threads * std::mem::size_of::<Slot>();
    // SAFETY: an anonymous shared mapping; checked for failure below.
    let mem = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mem == libc::MAP_FAILED {
        return Err("mmap failed".into());
    }
    // SAFETY: the mapping is at least 64 bytes, page aligned and zeroed; the two counters are
    // at offsets 0 and 4 and only ever accessed atomically.
    let (ready, go) = unsafe {
        (
            &*(mem as *const AtomicU32),
            &*((mem as *const AtomicU32).add(1)),
        )
    };
    // SAFETY: the slots follow the 64-byte header inside the mapping.
    let slot = |i: usize| unsafe { &mut *((mem as *mut u8).add(64) as *mut Slot).add(i) };
    // Allocated before forking: the children must not allocate.
    let mut bufs: Vec<Vec<i32>> = (0..threads)
        .map(|_| Vec::with_capacity(PER_THREAD))
        .collect();
    let mut pids = Vec::new();
    for (i, buf) in bufs.iter_mut().enumerate() {
        // SAFETY: the child only makes syscalls, reads clocks, touches the shared mapping and
        // its pre-allocated buffer, then `_exit`s: nothing that needs another thread's locks.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            ready.fetch_add(1, Ordering::AcqRel);
            while go.load(Ordering::Acquire) == 0 {
                // SAFETY: sched_yield(2) has no preconditions.
                unsafe { libc::sched_yield() };
            }
            let s = slot(i);
            let t0 = Instant::now();
            let mut err = 0;
            for _ in 0..PER_THREAD {
                match tempora_kernel::timer_create_none(0) {
                    Ok(id) => buf.push(id),
                    Err(e) => {
                        err = e;
                        break;
                    }
                }
            }
            s.create_ns = t0.elapsed().as_nanos() as u64;
            let t1 = Instant::now();
            let mut sum = 0i64;
            for &id in buf.iter() {
                sum += i64::from(tempora_kernel::timer_getoverrun(id).unwrap_or(-1));
            }
            black_box(sum);
            s.get_ns = t1.elapsed().as_nanos() as u64;
            s.errno = err;
            s.made = buf.len() as u32;
            for &id in buf.iter() {
                let _ = tempora_kernel::timer_delete(id);
            }
            // SAFETY: ends the child without running the parent's destructors or atexit hooks.
            unsafe { libc::_exit(0) };
        }
        if pid < 0 {
            break;
        }
        pids.push(pid);
    }
    while (ready.load(Ordering::Acquire) as usize) < pids.len() {
        std::thread::sleep(Duration::from_millis(1));
    }
    go.store(1, Ordering::Release);
    for &pid in &pids {
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    let mut out = Vec::new();
    let mut failure = None;
    for i in 0..pids.len() {
        let s = slot(i);
        if s.errno != 0 {
            failure.get_or_insert(format!(
                "{} in a process after {} of its timers ({}, {threads} x {PER_THREAD} wanted)",
                errno_text(s.errno),
                s.made,
                rlimit_sigpending()
            ));
        }
        out.push((
            Duration::from_nanos(s.create_ns),
            Duration::from_nanos(s.get_ns),
        ));
    }
    // SAFETY: unmaps the mapping created above; the children are gone.
    unsafe { libc::munmap(mem, size) };
    if pids.len() < threads {
        return Err(format!("fork failed after {} processes", pids.len()));
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(out),
    }
}

/// The create+delete loop at T threads in one owner.
fn create_delete_loop<R: Registry>(threads: usize, reps: usize, rep: &mut Reporter) {
    if !rep.wants_impl(R::NAME) || !rep.wants_case("loop") {
        return;
    }
    rep.set_message(format!("seed loop {} threads={threads}", R::NAME));
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
    record_vs_one_thread::<R>(rep, &["loop"], LOOP_PAIRS, threads, reps, |t| {
        round(t).map(|v| vec![v])
    });
}

/// Bytes per timer for 2048 dense or sparse (512 apart) IDs.
fn memory<R: Registry>(sparse: bool, rep: &mut Reporter) {
    let case = if sparse { "mem-sparse" } else { "mem-dense" };
    if !rep.wants_impl(R::NAME) || !rep.wants_case(case) {
        return;
    }
    let (ns, bytes, error) = if R::NAME == Kernel::NAME {
        let why = "kernel memory is not visible to the process's allocator";
        (0.0, None, Some(why.to_string()))
    } else {
        memory_run::<R>(sparse)
    };
    record(
        rep,
        Row {
            case,
            imp: R::NAME,
            n: SPARSE_TIMERS,
            threads: 1,
            ns_per_op: ns,
            error,
            extras: Extras {
                bytes_per_timer: bytes,
                ..Extras::default()
            },
        },
    );
    rep.tick();
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

const IMPLS: usize = 5;

macro_rules! each_impl {
    ($f:ident ( $($arg:expr),* )) => {
        $f::<Tempora>($($arg),*);
        $f::<Kernel>($($arg),*);
        $f::<GlobalLock>($($arg),*);
        $f::<SparseArray>($($arg),*);
        $f::<Dash>($($arg),*);
    };
}

/// The suite's entry point.
pub fn run(opts: &Opts, rep: &mut Reporter) {
    let sizes: Vec<usize> = if let Some(n) = &opts.n {
        n.clone()
    } else if opts.quick {
        vec![20_000, 50_000, 100_000]
    } else {
        vec![20_000, 50_000, 100_000, 1_000_000, 10_000_000]
    };
    let threads: Vec<usize> = if opts.quick { vec![2] } else { vec![2, 64] };
    let steps = IMPLS * (sizes.len() + threads.len() * 3 + 2);
    rep.add_steps(steps as u64);
    for &n in &sizes {
        let reps = opts.reps.unwrap_or(if n >= 1_000_000 { 3 } else { 5 });
        each_impl!(t1(n, reps, rep));
    }
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    for &t in &threads {
        each_impl!(t45(t, true, reps, rep));
        each_impl!(t45(t, false, reps, rep));
        each_impl!(create_delete_loop(t, reps, rep));
    }
    for sparse in [false, true] {
        each_impl!(memory(sparse, rep));
    }
}
