//! The stats suite: what statistics cost the threads that arm timers, and how long a flush
//! holds the lock those threads may need: a flush that walks and aggregates under it (the
//! before) against one that takes it only to detach a list (the after).
//!
//! Cases:
//! - `arm-cancel`: re-arm each of n timers with a relative one-shot of 1 s plus a spread below
//!   1 s, then disarm it; `ns_per_op` is per arm+cancel pair, one thread, no driver. Impls
//!   `tempora` (a service built with `stats(false)`) and `tempora-stats` (`stats(true)`: two
//!   counter updates per pair), measured in one step with interleaved runs.
//! - `flush`: 10k owners (n) in 3-level groups (10 × 10 × 10 leaves, 10 owners each), a timer
//!   each; 2 threads arm and cancel random owners' timers at full speed while this thread
//!   flushes without pause for a fixed time. Fields `max_hold_ns` and `p99_hold_ns` over every
//!   list-lock hold of every flush that detached something, `flushes`, and `ns_per_op`: the
//!   updaters' mean ns per arm+cancel meanwhile (what a long hold costs them). Impls `tempora`
//!   (the flush detaches each list with one swap and aggregates with nothing held; its holds
//!   are those swaps, timed through `tempora::bench_door`) and `naive-flush` (the same
//!   statistics kept beside a service built with `stats(false)`, flushed while holding each
//!   list's lock, which pushes take, so an updater pushing onto that list waits for the whole
//!   walk: `naive.rs`). On 2 CPUs the 3 threads contend: this shows hold times under
//!   contention, not scaling.

mod naive;

use crate::stats::quantile;
use crate::workload::{rng, spread_nsec};
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};
use naive::NaiveStats;
use rand::Rng;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tempora::clock::{ClockId, TimeSpec};
use tempora::{Notify, Owner, SetFlags, TimerId, Timers};

const CASES: [&str; 2] = ["arm-cancel", "flush"];

/// One side of `arm-cancel`: n timers of one owner on a service with stats on or off.
struct ArmCancel {
    name: &'static str,
    owner: Owner,
    ids: Vec<TimerId>,
    _timers: Timers,
}

impl ArmCancel {
    fn new(name: &'static str, stats: bool, n: usize) -> Result<ArmCancel, String> {
        let timers = Timers::builder()
            .drivers(0)
            .stats(stats)
            .build()
            .map_err(|e| format!("Timers::build: {e}"))?;
        let owner = timers.owner();
        let ids = (0..n)
            .map(|_| owner.create(ClockId::Monotonic, Notify::Queue))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("Owner::create: {e}"))?;
        Ok(ArmCancel {
            name,
            owner,
            ids,
            _timers: timers,
        })
    }

    /// `passes` passes over the timers; ns per arm+cancel pair.
    fn pass(&self, passes: usize) -> Result<f64, String> {
        let mut sum = 0u64;
        let start = Instant::now();
        for _ in 0..passes {
            for (i, &id) in self.ids.iter().enumerate() {
                let arm = TimeSpec::new(1, spread_nsec(i, 0));
                let old = self
                    .owner
                    .settime(id, SetFlags::RELATIVE, arm, TimeSpec::new(0, 0))
                    .map_err(|e| format!("Owner::settime: {e}"))?;
                self.owner
                    .settime(
                        id,
                        SetFlags::RELATIVE,
                        TimeSpec::new(0, 0),
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
}

/// `arm-cancel` rows of the selected sides, runs interleaved (order reversed every other run).
fn arm_cancel(n: usize, passes: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let mut sides = Vec::new();
    let mut rows = Vec::new();
    for (name, on) in [("tempora", false), ("tempora-stats", true)] {
        if settings.wants_impl(name) {
            match ArmCancel::new(name, on, n) {
                Ok(s) => sides.push(s),
                Err(e) => rows.push(Row::new(CASES[0], name, n, 1, Measured::failed(e))),
            }
        }
    }
    let mut runs: Vec<Result<Vec<f64>, String>> = sides
        .iter()
        .map(|s| s.pass(1).map(|_| Vec::new()))
        .collect();
    for run in settings.runs(reps, 1) {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for i in order {
            if let Ok(v) = &mut runs[i] {
                match sides[i].pass(passes) {
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
        rows.push(Row::new(CASES[0], side.name, n, 1, m));
    }
    rows
}

/// The updater threads of `flush`.
const UPDATERS: usize = 2;

/// A service with `owners` owners in 3-level groups, a timer each; with `naive`, the service
/// counts nothing and the harness's naive statistics count the same updates.
struct Tree {
    timers: Timers,
    timers_of: Vec<(Owner, TimerId)>,
    naive: Option<NaiveStats>,
}

impl Tree {
    fn new(owners: usize, naive: bool) -> Result<Tree, String> {
        let timers = Timers::builder()
            .drivers(0)
            .stats(!naive)
            .build()
            .map_err(|e| format!("Timers::build: {e}"))?;
        let err = |e: tempora::Error| format!("groups: {e}");
        // Groups numbered as made: 0 the root, then each group before its subgroups; each
        // leaf with the path of numbers from it up to the root.
        let mut leaves = Vec::new();
        let mut groups = 1;
        for a in 0..10 {
            let ga = timers.group(&format!("g{a}")).map_err(err)?;
            let na = groups;
            groups += 1;
            for b in 0..10 {
                let gb = ga.subgroup(&format!("g{b}")).map_err(err)?;
                let nb = groups;
                groups += 1;
                for c in 0..10 {
                    leaves.push((
                        gb.subgroup(&format!("g{c}")).map_err(err)?,
                        vec![groups, nb, na, 0],
                    ));
                    groups += 1;
                }
            }
        }
        let naive = naive.then(|| {
            let path = |i: usize| leaves[i % leaves.len()].1.clone();
            NaiveStats::new(UPDATERS, groups, (0..owners).map(path).collect())
        });
        let timers_of = (0..owners)
            .map(|i| {
                let o = leaves[i % leaves.len()].0.owner();
                let id = o
                    .create(ClockId::Monotonic, Notify::Queue)
                    .map_err(|e| format!("Owner::create: {e}"))?;
                Ok((o, id))
            })
            .collect::<Result<_, String>>()?;
        Ok(Tree {
            timers,
            timers_of,
            naive,
        })
    }

    /// Two updaters arm and cancel while this thread flushes for `time`: every hold (ns),
    /// the flushes, and the updaters' mean ns per arm+cancel.
    fn run(&self, time: Duration) -> (Vec<u64>, usize, f64) {
        let stop = AtomicBool::new(false);
        let (ops, busy_ns) = (AtomicU64::new(0), AtomicU64::new(0));
        let mut holds = Vec::new();
        let mut flushes = 0;
        std::thread::scope(|s| {
            for t in 0..UPDATERS {
                let (stop, ops, busy_ns, owners) = (&stop, &ops, &busy_ns, &self.timers_of);
                let naive = self.naive.as_ref();
                s.spawn(move || {
                    let mut rng = rng(0x9e37_79b9_7f4a_7c15_u64 ^ (t as u64 + 1));
                    let mut done = 0u64;
                    let start = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            let k = rng.gen_range(0..owners.len());
                            let (o, id) = &owners[k];
                            let arm = TimeSpec::new(1, spread_nsec(done as usize, 0));
                            let zero = TimeSpec::new(0, 0);
                            let _ = o.settime(*id, SetFlags::RELATIVE, arm, zero);
                            if let Some(n) = naive {
                                n.count(t, k, naive::ARMED);
                            }
                            let _ = o.settime(*id, SetFlags::RELATIVE, zero, zero);
                            if let Some(n) = naive {
                                n.count(t, k, naive::DISARMED);
                            }
                            done += 1;
                        }
                    }
                    ops.fetch_add(done, Ordering::Relaxed);
                    busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                });
            }
            let start = Instant::now();
            while start.elapsed() < time {
                match &self.naive {
                    Some(n) => n.flush(&mut holds),
                    None => holds.extend(tempora::bench_door::stats_flush_holds(&self.timers)),
                }
                flushes += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        let ops = ops.load(Ordering::Relaxed).max(1);
        (
            holds,
            flushes,
            busy_ns.load(Ordering::Relaxed) as f64 / ops as f64,
        )
    }
}

/// `flush` rows of the selected impls: runs alternate between them; holds are pooled over
/// the runs, `ns_per_op` is the median run's.
fn flush(owners: usize, time: Duration, reps: usize, settings: &Settings) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut sides = Vec::new();
    for (name, naive) in [("tempora", false), ("naive-flush", true)] {
        if settings.wants_impl(name) {
            match Tree::new(owners, naive) {
                Ok(t) => sides.push((name, t, Vec::new(), 0usize, Vec::new())),
                Err(e) => rows.push(Row::new(CASES[1], name, owners, 2, Measured::failed(e))),
            }
        }
    }
    for run in 0..reps.max(1) {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (_, tree, holds, flushes, ns) = &mut sides[i];
            let (h, f, per) = tree.run(time);
            holds.extend(h);
            *flushes += f;
            ns.push(per);
        }
    }
    for (name, _, mut holds, flushes, mut ns) in sides {
        let max = holds.iter().copied().max().unwrap_or(0);
        holds.sort_unstable();
        let p99 = quantile(&holds, 0.99).unwrap_or(0);
        let fields = Fields::default()
            .with(Field::MaxHoldNs, max)
            .with(Field::P99HoldNs, p99)
            .with(Field::Flushes, flushes)
            .with(Field::Runs, ns.len());
        let m = Measured::per_op(median(&mut ns), 1, fields);
        rows.push(Row::new(CASES[1], name, owners, 2, m));
    }
    rows
}

/// The suite's steps: `arm-cancel` at each n (both impls in one step), then `flush`.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let reps = settings.reps(5, 9);
    let calls: usize = settings.pick(100_000, 200_000, 1_000_000);
    if settings.wants_case(CASES[0]) {
        for n in settings.sizes(&[10_000], &[10_000, 100_000], &[10_000, 100_000, 1_000_000]) {
            let passes = calls.div_ceil(n).max(1);
            let cost = 2.0 * reps as f64 * (n * passes) as f64 * 120e-6 + n as f64 * 2e-3;
            plan.add(
                Step::new(
                    Suite::Stats,
                    &CASES[..1],
                    "tempora",
                    n,
                    1,
                    cost,
                    move || arm_cancel(n, passes, reps, settings),
                )
                .also("tempora-stats"),
            );
        }
    }
    if settings.wants_case(CASES[1]) {
        // `--n` sets the owners here (the first value).
        let owners = settings.sizes(&[2_000], &[10_000], &[10_000])[0];
        let time = settings.pick(
            Duration::from_millis(150),
            Duration::from_millis(700),
            Duration::from_secs(3),
        );
        let runs = settings.reps(2, 3);
        let cost = 2.0 * runs as f64 * time.as_millis() as f64 + owners as f64 * 0.05;
        plan.add(
            Step::new(
                Suite::Stats,
                &CASES[1..],
                "tempora",
                owners,
                2,
                cost,
                move || flush(owners, time, runs, settings),
            )
            .also("naive-flush"),
        );
    }
}
