//! The async suite: async sleep timers (the futures an async program awaits for a timeout or a
//! delay), driven from inside a real tokio runtime, every implementation the same way.
//!
//! This module owns the workloads over [`AsyncSleeps`] (the trait every implementation
//! provides, in `peers::async_sleeps`) and the suite's plan. Each step builds its own current-thread runtime with the time
//! driver (`Builder::new_current_thread().enable_time()`) and drops it at the end, so no step
//! inherits another's timers.
//!
//! - `sleep-create-drop`: with n sleeps pending (each boxed, due [`TIMEOUT`] after its
//!   creation, polled once with a no-op waker so that it is registered: tokio registers a sleep
//!   on its first poll, async-io too), the time to create a sleep due [`TIMEOUT`] from now, poll
//!   it once and drop it: the timeout that never fires. It lives on the stack (`pin!`), as a
//!   `tokio::time::timeout`'s sleep does. Its rows carry `bytes_per_timer`: heap bytes of the n
//!   pending sleeps (the boxes and whatever the implementation allocates for them, on any
//!   thread), after minus before, over n; the harness's own vector of boxes is allocated
//!   beforehand and not counted.
//! - `sleep-reset`: with the same n sleeps pending, moves one to a later deadline ([`TIMEOUT`]
//!   from now, later than its current one), cycling over the n sleeps: the per-connection
//!   timeout refresh.
//! - `fire`: n sleeps due at one instant, each awaited by a task of its own (`tokio::spawn`, the
//!   same for every implementation); the deadline is far enough ahead that every task has been
//!   polled (its sleep registered) first, else the row fails. Each task reads the clock when it
//!   resumes after its sleep: `p50_us` and `p99_us` are those wake latencies after the
//!   deadline, `total_ms` the time from the deadline until the last task woke, `ns_per_op` that
//!   over n, `early` the tasks that woke before the deadline (must be 0), `lost` those that had
//!   not woken 30 s later.
//!
//! The pending cases poll their sleeps by hand inside `block_on`. tokio's cooperative budget
//! does not get in the way: a poll that returns `Pending` gives its unit of budget back.
//!
//! `async-io` keeps its deadlines in a `BTreeMap` that its own thread ("async-io") owns: creating,
//! resetting and dropping a timer queue an operation (a bounded queue of 1000), which that thread
//! applies, or the caller when the queue is full. Its `ns_per_op` is the caller's share; the
//! rest ran on the machine's other core. Its bytes include the map, which that thread
//! allocates.

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use crate::peers::async_sleeps::{AsyncIo, AsyncSleeps, TemporaTime, TokioTime};
use crate::{allocated_bytes, median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

/// The cases of a pending step (one setup of n pending sleeps serves both).
const PENDING_CASES: [&str; 2] = ["sleep-create-drop", "sleep-reset"];
/// How far ahead every sleep of the pending cases is due: none fires during a run, and a new
/// sleep is due after the pending ones, as in a server whose requests share one timeout.
const TIMEOUT: Duration = Duration::from_secs(3600);
/// How long `fire` waits past the deadline for the last task before counting the rest lost.
const FIRE_PATIENCE: Duration = Duration::from_secs(30);

/// The step's runtime, or why there is none.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// Lets the runtime park once (tokio's driver then knows its next expiry and stops waking
/// itself on every insert) and async-io's thread apply its queued operations.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// Appends n boxed sleeps due at `due()` to `sleeps`, each polled once with a no-op waker so
/// that it is registered; an error if one completed at once.
fn make_pending<S: AsyncSleeps>(
    imp: &S,
    n: usize,
    sleeps: &mut Vec<Pin<Box<S::Sleep>>>,
    due: impl Fn() -> Instant,
) -> Result<(), String> {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        let mut s = Box::pin(imp.sleep_until(due()));
        if s.as_mut().poll(&mut cx).is_ready() {
            return Err("a sleep completed before its deadline".into());
        }
        sleeps.push(s);
    }
    Ok(())
}

/// The pending cases of `S` at n: `sleep-create-drop` (with `bytes_per_timer`) and
/// `sleep-reset`.
fn pending<S: AsyncSleeps>(n: usize, ops: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            return PENDING_CASES
                .iter()
                .map(|c| Row::new(c, S::NAME, n, 1, Measured::failed(e.clone())))
                .collect()
        }
    };
    let rows = rt.block_on(async move {
        let imp = S::new();
        let mut cx = Context::from_waker(Waker::noop());
        // One sleep through its whole life first, so that nothing the implementation sets up
        // once lands in the bytes.
        {
            let mut s = pin!(imp.sleep_until(Instant::now() + TIMEOUT));
            let _ = s.as_mut().poll(&mut cx);
        }
        let mut sleeps = Vec::with_capacity(n);
        settle().await;
        let before = allocated_bytes();
        if let Err(e) = make_pending(&imp, n, &mut sleeps, || Instant::now() + TIMEOUT) {
            return PENDING_CASES
                .iter()
                .map(|c| Row::new(c, S::NAME, n, 1, Measured::failed(e.clone())))
                .collect();
        }
        settle().await;
        let bytes = allocated_bytes().saturating_sub(before) as f64 / n as f64;
        let mut rows = Vec::new();
        if settings.wants_case("sleep-create-drop") {
            let mut v = settings.repeat(reps, || {
                let t = Instant::now();
                for _ in 0..ops {
                    let s = pin!(imp.sleep_until(Instant::now() + TIMEOUT));
                    black_box(s.poll(&mut cx).is_ready());
                }
                t.elapsed().as_nanos() as f64 / ops as f64
            });
            let fields = Fields::default()
                .with(Field::BytesPerTimer, bytes)
                .with(Field::Ops, ops)
                .with(Field::Runs, v.len());
            let m = Measured::per_op(median(&mut v), ops, fields);
            rows.push(Row::new("sleep-create-drop", S::NAME, n, 1, m));
        }
        if settings.wants_case("sleep-reset") {
            let mut next = 0;
            let mut v = settings.repeat(reps, || {
                let t = Instant::now();
                for _ in 0..ops {
                    imp.reset(sleeps[next].as_mut(), Instant::now() + TIMEOUT);
                    next += 1;
                    if next == n {
                        next = 0;
                    }
                }
                t.elapsed().as_nanos() as f64 / ops as f64
            });
            let fields = Fields::default()
                .with(Field::Ops, ops)
                .with(Field::Runs, v.len());
            let m = Measured::per_op(median(&mut v), ops, fields);
            rows.push(Row::new("sleep-reset", S::NAME, n, 1, m));
        }
        // Still pending: none may have completed.
        let mut done = 0;
        for s in &mut sleeps {
            done += usize::from(s.as_mut().poll(&mut cx).is_ready());
        }
        if done > 0 {
            let e = format!("{done} sleeps due in {TIMEOUT:?} completed during the run");
            for r in &mut rows {
                r.measured.error = Some(e.clone());
            }
        }
        drop(sleeps);
        rows
    });
    drop(rt);
    rows
}

/// One `fire` run: what the tasks saw.
struct FireRun {
    /// Wake latency after the deadline of every task that woke, ns (negative: early), sorted.
    late_ns: Vec<i64>,
    lost: usize,
}

impl FireRun {
    fn total_ns(&self) -> f64 {
        self.late_ns.last().map_or(0.0, |&l| l.max(0) as f64)
    }

    fn percentile_us(&self, q: f64) -> f64 {
        crate::stats::quantile(&self.late_ns, q).expect("a task woke") as f64 / 1e3
    }
}

/// What the `fire` tasks share.
struct FireShared {
    n: usize,
    polled: AtomicUsize,
    woken: AtomicUsize,
    /// When each task woke, ns after the run's start (0: not yet).
    woke_at: Box<[AtomicU64]>,
    all_polled: tokio::sync::Notify,
    all_woken: tokio::sync::Notify,
}

/// n tasks, each awaiting a sleep due at one deadline; every task is polled (its sleep
/// registered) `margin` before the deadline at the latest, else the run fails.
async fn fire_once<S: AsyncSleeps>(imp: &S, n: usize, margin: Duration) -> Result<FireRun, String> {
    let start = Instant::now();
    let deadline = start + margin;
    let shared = Arc::new(FireShared {
        n,
        polled: AtomicUsize::new(0),
        woken: AtomicUsize::new(0),
        woke_at: (0..n).map(|_| AtomicU64::new(0)).collect(),
        all_polled: tokio::sync::Notify::new(),
        all_woken: tokio::sync::Notify::new(),
    });
    for i in 0..n {
        let sleep = imp.sleep_until(deadline);
        let sh = shared.clone();
        tokio::spawn(async move {
            // Relaxed throughout: one thread runs every task; the Notify orders the rest.
            if sh.polled.fetch_add(1, Ordering::Relaxed) + 1 == sh.n {
                sh.all_polled.notify_one();
            }
            sleep.await;
            let at = start.elapsed().as_nanos() as u64;
            sh.woke_at[i].store(at.max(1), Ordering::Relaxed);
            if sh.woken.fetch_add(1, Ordering::Relaxed) + 1 == sh.n {
                sh.all_woken.notify_one();
            }
        });
    }
    shared.all_polled.notified().await;
    let polled = start.elapsed();
    let patience = margin + FIRE_PATIENCE;
    let _ = tokio::time::timeout(patience, shared.all_woken.notified()).await;
    if polled >= margin {
        return Err(format!(
            "setting up {n} tasks took {polled:?}, past the deadline {margin:?} after the start"
        ));
    }
    let margin_ns = margin.as_nanos() as i64;
    let mut late_ns: Vec<i64> = shared
        .woke_at
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .filter(|&a| a > 0)
        .map(|a| a as i64 - margin_ns)
        .collect();
    late_ns.sort_unstable();
    let lost = n - late_ns.len();
    if late_ns.is_empty() {
        return Err(format!("no task of {n} woke within {patience:?}"));
    }
    Ok(FireRun { late_ns, lost })
}

/// The `fire` case of `S` at n: the median run by total time.
fn fire<S: AsyncSleeps>(n: usize, reps: usize, settings: &Settings) -> Row {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return Row::new("fire", S::NAME, n, 1, Measured::failed(e)),
    };
    // Spawning and first polls take about 1 µs per task here; three times that, plus room.
    let margin = Duration::from_millis(50) + Duration::from_nanos(3_000 * n as u64);
    let measured = rt.block_on(async move {
        let imp = S::new();
        let mut runs = Vec::new();
        for _ in settings.runs(reps, 1) {
            match fire_once(&imp, n, margin).await {
                Ok(run) => runs.push(run),
                Err(e) => return Measured::failed(e),
            }
        }
        let early: usize = runs
            .iter()
            .map(|r| r.late_ns.iter().take_while(|&&l| l < 0).count())
            .sum();
        let lost: usize = runs.iter().map(|r| r.lost).sum();
        let count = runs.len();
        runs.sort_by(|a, b| a.total_ns().total_cmp(&b.total_ns()));
        let mid = &runs[crate::stats::rank(runs.len(), 0.5)];
        let fields = Fields::default()
            .with(Field::P50Us, mid.percentile_us(0.5))
            .with(Field::P99Us, mid.percentile_us(0.99))
            .with(Field::Fired, mid.late_ns.len())
            .with(Field::Early, early)
            .with(Field::Lost, lost)
            .with(Field::Runs, count);
        let total = mid.total_ns();
        let mut m = Measured {
            ns_per_op: total / n as f64,
            total_ms: total / 1e6,
            error: None,
            fields,
        };
        if early > 0 || lost > 0 {
            m.error = Some(format!(
                "{early} tasks woke before the deadline, {lost} not within {FIRE_PATIENCE:?} \
                 after it (over {count} runs)"
            ));
        }
        m
    });
    // Tasks of a failed run may still be pending: dropping the runtime cancels them.
    drop(rt);
    Row::new("fire", S::NAME, n, 1, measured)
}

/// An implementation as the plan runs it: its name, its two steps, and how much slower than
/// tokio it roughly is (for the ETA only).
struct Peer {
    name: &'static str,
    pending: fn(usize, usize, usize, &Settings) -> Vec<Row>,
    fire: fn(usize, usize, &Settings) -> Row,
    slowness: f64,
}

const fn peer<S: AsyncSleeps>(slowness: f64) -> Peer {
    Peer {
        name: S::NAME,
        pending: pending::<S>,
        fire: fire::<S>,
        slowness,
    }
}

/// The implementations, in the order they run at each n.
const PEERS: [Peer; 3] = [
    peer::<TemporaTime>(1.0),
    peer::<TokioTime>(1.0),
    peer::<AsyncIo>(3.0),
];

/// The suite's steps: at each n, every implementation's pending cases, then every
/// implementation's `fire`.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let sizes = settings.sizes(
        &[10_000],
        &[10_000, 100_000, 1_000_000],
        &[10_000, 100_000, 1_000_000],
    );
    let reps = settings.reps(3, 5);
    let ops = settings.pick(50_000, 200_000, 1_000_000);
    for n in sizes {
        for p in &PEERS {
            let cost = p.slowness * (n as f64 * 1e-3 + ops as f64 * 4e-4 * reps as f64);
            plan.add(Step::new(
                Suite::Async,
                &PENDING_CASES,
                p.name,
                n,
                1,
                cost,
                move || (p.pending)(n, ops, reps, settings),
            ));
        }
        for p in &PEERS {
            let cost = (50.0 + n as f64 * 4e-3) * if n >= 1_000_000 { 1.0 } else { 3.0 };
            plan.add(Step::new(
                Suite::Async,
                &["fire"],
                p.name,
                n,
                1,
                cost * p.slowness,
                move || vec![(p.fire)(n, reps, settings)],
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pending cases measure registered sleeps: each of many sleeps polled once in one go
    /// is in tokio's wheel (it fires when the paused clock passes its deadline; a tokio sleep
    /// never polled does not, and the cooperative budget could have stopped the polls).
    #[test]
    fn every_pending_sleep_is_registered_by_its_one_poll() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let imp = TokioTime::new();
            let at = Instant::now() + Duration::from_millis(10);
            let mut sleeps = Vec::new();
            make_pending(&imp, 1000, &mut sleeps, || at).unwrap();
            assert!(sleeps.iter().all(|s| !s.is_elapsed()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let fired = sleeps.iter().filter(|s| s.is_elapsed()).count();
            assert_eq!(fired, 1000);
        });
    }
}
