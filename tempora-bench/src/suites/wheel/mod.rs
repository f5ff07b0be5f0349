//! `--suite wheel`: tempora's wheel against tokio's DelayQueue, nexus-timer, bitwheel, a lazy
//! binary heap and a BTreeMap, on the same workloads in the same process.
//!
//! Every structure is measured in steady state: insert-cancel and expire first run one untimed
//! insert-all/cancel-all round on the same instance.
//!
//! Workloads (JSON `case`), each at every `n` and both deadline distributions (`dist`):
//! - `insert-cancel`: insert n, cancel all in random order; ns per insert+cancel pair.
//! - `insert-cancel90-expire`: insert n, cancel a random 90%, then drive the queue as a timer
//!   thread would (sleep to `next_expiry`, poll) until all fired; ns per inserted timer. Every
//!   fire is checked against its deadline: `early` counts fires before it (must be 0), `lost`
//!   timers that never fired, `max_late_ms` the worst lateness, `wakeups` the polls needed.
//! - `rearm`: reschedule every timer `rounds` times (10, or fewer outside `--full` so that a
//!   run does at most about 2M reschedules), each to a later time; ns per reschedule.
//! - `next-expiry`: 1M random inserts/removes on n live timers, next_expiry after each; ns per
//!   next_expiry = (time with it - time without it) / ops, both runs in one measurement.
//! - `burst`: n timers on one deadline, drained with at most 1024 fires per poll; ns per fire
//!   and `worst_call_us`, the longest poll (bitwheel cannot bound a poll).
//!
//! Distributions: `uniform` (1 ms .. 1 h) and `server` (90% on one of 4 fixed timeouts —
//! 200 ms, 5 s, 30 s, 120 s — the rest uniform), ticks of 1 ms.

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;

use crate::peers::timer_queue::{
    BTree, Bitwheel, LazyHeap, Nexus, Tempora, TimerQueue, TokioDelayQueue,
};
use crate::{allocated_bytes, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

const HOUR_MS: u64 = 3_600_000;
const SERVER_TIMEOUTS: [u64; 4] = [200, 5_000, 30_000, 120_000];
const BURST_MAX: usize = 1024;
const NEXT_EXPIRY_OPS: usize = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dist {
    Uniform,
    Server,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Server => "server",
        }
    }

    fn sample(self, rng: &mut SmallRng) -> u64 {
        match self {
            Dist::Server if rng.gen_ratio(9, 10) => SERVER_TIMEOUTS[rng.gen_range(0..4)],
            _ => rng.gen_range(1..=HOUR_MS),
        }
    }
}

/// Inputs shared by every implementation for one (n, dist): generated once, outside timing.
struct Input {
    n: usize,
    dist: Dist,
    deadlines: Vec<u64>,
    /// A random permutation of 0..n.
    order: Vec<u32>,
    /// Per-timer later-offsets for `rearm`.
    rearm_deltas: Vec<u64>,
    /// (insert?, value) for `next-expiry`.
    churn: Vec<(bool, u64)>,
    /// Rounds of `rearm` (each reschedules every timer once).
    rounds: usize,
}

impl Input {
    fn new(n: usize, dist: Dist, stream: u64, rounds: usize) -> Input {
        let mut rng = crate::workload::rng(stream);
        let deadlines = (0..n).map(|_| dist.sample(&mut rng)).collect();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.shuffle(&mut rng);
        let rearm_deltas = (0..n).map(|_| rng.gen_range(1..=1_000)).collect();
        let churn = (0..NEXT_EXPIRY_OPS)
            .map(|_| {
                (
                    rng.gen_bool(0.5),
                    dist.sample(&mut rng) ^ (rng.gen::<u64>() << 32),
                )
            })
            .collect();
        Input {
            n,
            dist,
            deadlines,
            order,
            rearm_deltas,
            churn,
            rounds,
        }
    }
}

/// The input of the (n, dist) being measured, made when a step first needs it and dropped
/// when a step needs another one (at 10M timers an input is hundreds of MB).
#[derive(Default)]
pub struct Inputs(RefCell<Option<Rc<Input>>>);

impl Inputs {
    fn get(&self, n: usize, dist: Dist, rounds: usize) -> Rc<Input> {
        let mut slot = self.0.borrow_mut();
        match &*slot {
            Some(i) if i.n == n && i.dist == dist && i.rounds == rounds => i.clone(),
            _ => {
                *slot = None;
                let input = Rc::new(Input::new(n, dist, 0x7e3a_5eed ^ n as u64, rounds));
                *slot = Some(input.clone());
                input
            }
        }
    }
}

/// One run's result.
struct Sample {
    total: Duration,
    ops: u64,
    /// When set, ns_per_op is this instead of total / ops.
    ns_override: Option<f64>,
    fields: Fields,
}

/// Inserts every timer of the input (id = index), pushing the handles onto `handles`.
fn insert_into<Q: TimerQueue>(q: &mut Q, input: &Input, handles: &mut Vec<Option<Q::Handle>>) {
    for (i, &d) in input.deadlines.iter().enumerate() {
        handles.push(Some(q.insert(d, i as u64)));
    }
}

fn insert_all<Q: TimerQueue>(q: &mut Q, input: &Input) -> Vec<Option<Q::Handle>> {
    let mut handles = Vec::with_capacity(input.n);
    insert_into(q, input, &mut handles);
    handles
}

/// Cancels every handle still held (untimed clean-up, and what peers that insist on getting
/// their handles back need).
fn cancel_all<Q: TimerQueue>(q: &mut Q, handles: impl IntoIterator<Item = Option<Q::Handle>>) {
    for h in handles.into_iter().flatten() {
        q.cancel(h);
    }
}

/// One untimed insert-all, cancel-all round, so the timed round measures a structure in steady
/// state (memory faulted in, free lists populated), as a long-lived server's is, rather than
/// page faults whose cost depends on which allocation the allocator happened to reuse.
fn warm_up<Q: TimerQueue>(q: &mut Q, input: &Input) {
    let handles = insert_all(q, input);
    cancel_all(q, handles);
}

fn insert_cancel<Q: TimerQueue>(input: &Input) -> Sample {
    let mut handles: Vec<Option<Q::Handle>> = Vec::with_capacity(input.n);
    let before = allocated_bytes();
    let mut q = Q::new(input.n);
    warm_up(&mut q, input);
    let start = Instant::now();
    insert_into(&mut q, input, &mut handles);
    let bytes = allocated_bytes().saturating_sub(before);
    for &i in &input.order {
        let h = handles[i as usize].take().expect("handle");
        black_box(q.cancel(h));
    }
    let total = start.elapsed();
    drop(q);
    Sample {
        total,
        ops: input.n as u64,
        ns_override: None,
        fields: Fields::default().with(Field::BytesPerTimer, bytes as f64 / input.n as f64),
    }
}

/// Checks of every fire against its deadline.
#[derive(Default)]
struct FireLog {
    fired_once: Vec<u8>,
    fired: u64,
    early: u64,
    dup: u64,
    max_late: u64,
    late_sum: u64,
}

impl FireLog {
    fn new(n: usize) -> FireLog {
        FireLog {
            fired_once: vec![0; n],
            ..FireLog::default()
        }
    }

    fn record(&mut self, id: u64, deadline: u64, now: u64) {
        let seen = &mut self.fired_once[id as usize];
        if *seen != 0 {
            self.dup += 1;
        }
        *seen = 1;
        self.fired += 1;
        if now < deadline {
            self.early += 1;
        } else {
            self.max_late = self.max_late.max(now - deadline);
            self.late_sum += now - deadline;
        }
    }
}

/// Drives `q` like a timer thread: sleep until next_expiry, poll. Returns wake-ups. A queue
/// whose next_expiry does not move after a fruitless poll is stepped one tick (so a
/// lower-bound next_expiry cannot loop), and driving stops one hour past the last deadline.
fn drive<Q: TimerQueue>(
    q: &mut Q,
    handles: &mut [Option<Q::Handle>],
    deadlines: &[u64],
    log: &mut FireLog,
    mut now: u64,
) -> u64 {
    let horizon = deadlines.iter().copied().max().unwrap_or(0) + HOUR_MS;
    let mut wakeups = 0;
    let mut buf = Vec::with_capacity(1024);
    while let Some(next) = q.next_expiry() {
        now = if next > now { next } else { now + 1 };
        if now > horizon {
            break;
        }
        wakeups += 1;
        buf.clear();
        q.poll(now, usize::MAX, &mut |id| buf.push(id));
        settle(q, handles, log, &buf, |id| deadlines[id as usize], now);
    }
    wakeups
}

/// After a poll at `now`: checks each fired id against its deadline and hands its handle back.
fn settle<Q: TimerQueue>(
    q: &mut Q,
    handles: &mut [Option<Q::Handle>],
    log: &mut FireLog,
    fired: &[u64],
    deadline: impl Fn(u64) -> u64,
    now: u64,
) {
    for &id in fired {
        log.record(id, deadline(id), now);
        if let Some(h) = handles[id as usize].take() {
            q.release(h);
        }
    }
}

fn expire90<Q: TimerQueue>(input: &Input) -> Sample {
    let mut q = Q::new(input.n);
    let mut log = FireLog::new(input.n);
    warm_up(&mut q, input);
    let start = Instant::now();
    let mut handles = insert_all(&mut q, input);
    let cancelled = input.n - input.n / 10;
    for &i in &input.order[..cancelled] {
        let h = handles[i as usize].take().expect("handle");
        black_box(q.cancel(h));
    }
    let wakeups = drive(&mut q, &mut handles, &input.deadlines, &mut log, 0);
    let total = start.elapsed();
    let expected = (input.n - cancelled) as u64;
    // Anything left is lost; hand leftover handles back so peers that insist are satisfied.
    cancel_all(&mut q, handles);
    Sample {
        total,
        ops: input.n as u64,
        ns_override: None,
        fields: Fields::default()
            .with(Field::Fired, log.fired)
            .with(Field::Early, log.early)
            .with(Field::Lost, expected.saturating_sub(log.fired - log.dup))
            .with(Field::Duplicate, log.dup)
            .with(Field::MaxLateMs, log.max_late)
            .with(
                Field::MeanLateMs,
                log.late_sum as f64 / log.fired.max(1) as f64,
            )
            .with(Field::Wakeups, wakeups),
    }
}

fn rearm<Q: TimerQueue>(input: &Input) -> Sample {
    let mut q = Q::new(input.n);
    let mut handles = insert_all(&mut q, input);
    let mut deadlines = input.deadlines.clone();
    let start = Instant::now();
    for round in 0..input.rounds {
        for &i in &input.order {
            let i = i as usize;
            deadlines[i] += input.rearm_deltas[(i + round) % input.n];
            let h = handles[i].take().expect("handle");
            handles[i] = Some(q.reschedule(h, deadlines[i]));
        }
    }
    let total = start.elapsed();
    cancel_all(&mut q, handles);
    Sample {
        total,
        ops: (input.rounds * input.n) as u64,
        ns_override: None,
        fields: Fields::default().with(Field::Rounds, input.rounds),
    }
}

/// Runs the churn ops (at most `limit`, and with next_expiry, at most `budget` of time);
/// returns the time and how many ops ran.
fn churn_run<Q: TimerQueue>(
    input: &Input,
    with_next: bool,
    limit: usize,
    budget: Duration,
) -> (Duration, usize) {
    let mut q = Q::new(input.n * 2);
    let mut live: Vec<Q::Handle> = insert_all(&mut q, input).into_iter().flatten().collect();
    let mut id = input.n as u64;
    let mut sum = 0u64;
    let mut ops = 0;
    let start = Instant::now();
    for &(insert, value) in &input.churn[..limit] {
        // Check the clock only every 1024 ops so the check costs nothing measurable.
        if ops % 1024 == 0 && with_next && start.elapsed() > budget {
            break;
        }
        ops += 1;
        if insert || live.is_empty() {
            live.push(q.insert(value & 0xFFFF_FFFF, id));
            id += 1;
        } else {
            let h = live.swap_remove((value >> 32) as usize % live.len());
            q.cancel(h);
        }
        if with_next {
            sum = sum.wrapping_add(q.next_expiry().unwrap_or(0));
        }
    }
    let total = start.elapsed();
    black_box(sum);
    cancel_all(&mut q, live.into_iter().map(Some));
    (total, ops)
}

fn next_expiry<Q: TimerQueue>(input: &Input) -> Sample {
    // Slow peers (a next_expiry that walks a slot) get a time budget; the run without
    // next_expiry then does the same number of ops.
    let (with, ops) = churn_run::<Q>(input, true, input.churn.len(), Duration::from_secs(2));
    let (without, _) = churn_run::<Q>(input, false, ops, Duration::MAX);
    let ops = ops as u64;
    let marginal = with.saturating_sub(without).as_nanos() as f64 / ops as f64;
    Sample {
        total: with,
        ops,
        ns_override: Some(marginal),
        fields: Fields::default()
            .with(Field::PairNs, with.as_nanos() as f64 / ops as f64)
            .with(Field::Ops, ops),
    }
}

fn burst<Q: TimerQueue>(input: &Input) -> Sample {
    const AT: u64 = 1_000;
    let mut q = Q::new(input.n);
    let mut handles: Vec<Option<Q::Handle>> =
        (0..input.n).map(|i| Some(q.insert(AT, i as u64))).collect();
    let mut log = FireLog::new(input.n);
    let mut buf = Vec::with_capacity(BURST_MAX);
    let mut worst = Duration::ZERO;
    let start = Instant::now();
    let mut now = AT;
    let mut progress = true;
    // Poll at the deadline, or later if the queue says its next work is later (coarse
    // rounding, bitwheel's fail-over interval); a poll that did nothing moves on one tick.
    while let Some(next) = q.next_expiry() {
        now = if next > now || progress {
            next.max(now)
        } else {
            now + 1
        };
        if now > AT + HOUR_MS {
            break;
        }
        buf.clear();
        let call = Instant::now();
        let (n, complete) = q.poll(now, BURST_MAX, &mut |id| buf.push(id));
        settle(&mut q, &mut handles, &mut log, &buf, |_| AT, now);
        worst = worst.max(call.elapsed());
        progress = n > 0 || !complete;
    }
    let total = start.elapsed();
    Sample {
        total,
        ops: input.n as u64,
        ns_override: None,
        fields: Fields::default()
            .with(Field::WorstCallUs, worst.as_nanos() as f64 / 1e3)
            .with(Field::Fired, log.fired)
            .with(Field::Early, log.early)
            .with(
                Field::Lost,
                (input.n as u64).saturating_sub(log.fired - log.dup),
            )
            .with(Field::Bounded, Q::BOUNDED_POLL),
    }
}

type Workload = fn(&Input) -> Sample;

const CASES: [&str; 5] = [
    "insert-cancel",
    "insert-cancel90-expire",
    "rearm",
    "next-expiry",
    "burst",
];

fn workload<Q: TimerQueue>(case: &str) -> Workload {
    match case {
        "insert-cancel" => insert_cancel::<Q>,
        "insert-cancel90-expire" => expire90::<Q>,
        "rearm" => rearm::<Q>,
        "next-expiry" => next_expiry::<Q>,
        "burst" => burst::<Q>,
        _ => unreachable!("unknown case {case}"),
    }
}

/// A peer of the suite: its JSON name, its workloads, and how much slower than tempora it
/// roughly is at 1M timers (for the ETA only).
struct Peer {
    name: &'static str,
    workload: fn(&str) -> Workload,
    slowness: f64,
}

const fn peer<Q: TimerQueue>(slowness: f64) -> Peer {
    Peer {
        name: Q::NAME,
        workload: workload::<Q>,
        slowness,
    }
}

/// tempora and its peers, in the order they run.
const PEERS: [Peer; 7] = [
    peer::<Tempora<true>>(1.0),
    peer::<Tempora<false>>(1.0),
    peer::<LazyHeap>(1.2),
    peer::<BTree>(5.0),
    peer::<Nexus>(1.6),
    peer::<Bitwheel>(5.0),
    peer::<TokioDelayQueue>(3.0),
];

/// Runs `case` of `peer` on `input` (repeated as the settings allow); the median row.
fn measure(reps: usize, settings: &Settings, case: &str, peer: &Peer, input: &Input) -> Row {
    let run = (peer.workload)(case);
    let mut samples = settings.repeat(reps, || run(input));
    let runs = samples.len();
    let ns = |s: &Sample| {
        s.ns_override
            .unwrap_or(s.total.as_nanos() as f64 / s.ops.max(1) as f64)
    };
    samples.sort_by(|a, b| ns(a).total_cmp(&ns(b)));
    let median = &samples[crate::stats::rank(samples.len(), 0.5)];
    let count = |f: Field| median.fields.num(f).unwrap_or(0.0);
    let ok =
        count(Field::Early) == 0.0 && count(Field::Lost) == 0.0 && count(Field::Duplicate) == 0.0;
    let fields = median
        .fields
        .clone()
        .with(Field::Dist, input.dist.name())
        .with(Field::Runs, runs);
    Row::new(
        case,
        peer.name,
        input.n,
        1,
        Measured {
            ns_per_op: ns(median),
            total_ms: median.total.as_secs_f64() * 1e3,
            error: (!ok)
                .then(|| "fired early, lost or fired twice (see early/lost/duplicate)".into()),
            fields,
        },
    )
}

/// The suite's steps: every (n, dist, case, peer).
pub fn plan<'a>(plan: &mut Plan<'a>, inputs: &'a Inputs) {
    let settings = plan.settings;
    let sizes = settings.sizes(
        &[100_000],
        &[10_000, 100_000, 1_000_000],
        &[10_000, 100_000, 1_000_000, 10_000_000],
    );
    for n in sizes {
        for dist in [Dist::Uniform, Dist::Server] {
            let reps = settings.reps(3, if n >= 10_000_000 { 3 } else { 5 });
            // rearm reschedules every timer `rounds` times: 10 in --full; otherwise at most
            // about 2M reschedules, so the slowest peers at 1M take seconds, not minutes.
            let rounds = settings.pick(
                (2_000_000 / n).clamp(1, 10),
                (2_000_000 / n).clamp(1, 10),
                10,
            );
            // The burst stays at most 1M timers: 10M in one bucket measures nothing new.
            for case in CASES.iter().filter(|&&c| c != "burst" || n <= 1_000_000) {
                for peer in &PEERS {
                    let runs = reps.min(if settings.budget() == Duration::MAX {
                        reps
                    } else {
                        2
                    });
                    let cost = n as f64 / 1e3 * peer.slowness * runs as f64 * 0.4;
                    let run = move || {
                        let input = inputs.get(n, dist, rounds);
                        vec![measure(reps, settings, case, peer, &input)]
                    };
                    let step = Step::new(Suite::Wheel, &[case], peer.name, n, 1, cost, run);
                    plan.add(step.detail(dist.name()));
                }
            }
        }
    }
}
