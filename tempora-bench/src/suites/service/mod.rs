//! The service suite: the POSIX calls on live timers, tempora against the kernel's POSIX timers
//! in the same run, both on the OS clocks, one thread.
//!
//! - `settime-arm`: re-arm each of n armed timers with its same relative timeout (one-shot,
//!   1-2 s, spread over a second, so nothing fires during the run): the per-connection timeout
//!   refresh, the commonest call of a server holding a timer per connection. Each pass moves
//!   every expiry later by the time the previous pass took.
//! - `settime-move`: re-arm each of n armed timers to a new random time 1-2 s ahead, earlier
//!   or later than its current one: every call moves the timer to another wheel bucket.
//! - `settime-disarm`: disarm each of n armed timers (a zero `it_value`).
//! - `gettime`: read each of n armed timers.
//! - `deliver`: n one-shot timers, armed to expire at 1000 distinct microseconds of one
//!   millisecond, are all due; measured is the time to get every event to the owner: for
//!   tempora `poll()` (expiry: pop from the wheels, queue the events) plus taking every event
//!   as an event loop drains its queue (`try_recv_many`, 256 at a time); for the kernel, dequeuing each timer's real-time signal with `sigtimedwait` (its
//!   expiry work already ran in interrupt context while the thread slept, and is not counted,
//!   which favours the kernel). `ns_per_op` is per delivered event.
//!
//! Beside them, `floor` runs the four call cases (not `deliver`) on what no implementation can
//! avoid: a `CLOCK_MONOTONIC` read through the vDSO (settime's relative arming and gettime
//! need now) and one load or store in a hashed, cache-resident table of n slots (the timer's
//! state, found by its ID). tempora's settime and gettime are held within 1.5x of it.
//!
//! `settime-arm` rows of tempora carry `bytes_per_timer`: what the process allocated for the n
//! armed timers (objects with their wheel links, hash table, wheel buckets, the event queue's
//! room), divided by n; not the benchmark's own list of their IDs. Each measurement starts
//! once what earlier runs left for tempora's epoch to free is freed (`settle_reclamation`).
//!
//! Timers are `Queue` (tempora) and `SIGEV_THREAD_ID` with a blocked real-time signal (kernel),
//! so that arming really queues them (a `SIGEV_NONE` kernel timer is never put in a timer
//! queue). Creating kernel timers fails beyond `RLIMIT_SIGPENDING`; those rows are `ok:false`.

pub(crate) mod drivers;
pub(crate) mod firing;
pub(crate) mod inspect;
pub(crate) mod signals;

use std::hint::black_box;
use std::time::{Duration, Instant};

use tempora::Timers;

use crate::peers::service::{monotonic_now, FloorSvc, KernelSvc, Service, TemporaSvc};
use crate::workload::spread;
use crate::{
    allocated_bytes, median, settle_reclamation, Field, Fields, Measured, Plan, Row, Settings,
    Step, Suite,
};

/// The floor's cases: the calls it has a floor for.
const FLOOR_CASES: [&str; 4] = ["settime-arm", "settime-move", "settime-disarm", "gettime"];

const CASES: [&str; 5] = [
    "settime-arm",
    "settime-move",
    "settime-disarm",
    "gettime",
    "deliver",
];

/// Runs every selected case at one n for one service; its rows.
fn cases<S: Service>(svc: &mut S, n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut record = |case: &str, m: Measured| rows.push(Row::new(case, S::NAME, n, 1, m));
    // Earlier runs' memory is freed through the epoch and, for large tables, on a thread of
    // its own: let that finish so it does not land in this measurement as a negative.
    settle_reclamation();
    std::thread::sleep(Duration::from_millis(50));
    let before = allocated_bytes();
    let ids = match svc.create(n) {
        Ok(ids) => ids,
        Err(e) => {
            for case in CASES {
                record(case, Measured::failed(e.clone()));
            }
            return rows;
        }
    };
    let timed = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed().as_nanos() as f64 / n as f64
    };
    // Armed once, unmeasured: every case starts from armed timers.
    for (i, &id) in ids.iter().enumerate() {
        svc.arm(id, spread(i, 0));
    }
    // Everything the process allocated for n armed timers: timer objects (with their wheel
    // links), the hash table, the wheels, the event queue's room (nothing for the kernel,
    // whose memory is its own). Not the benchmark's own list of the n IDs, which a program
    // keeps in its connections, not in tempora.
    let own = ids.capacity() * std::mem::size_of::<S::Id>();
    let bytes = (S::NAME != "kernel")
        .then(|| allocated_bytes().saturating_sub(before).saturating_sub(own) as f64 / n as f64);
    if settings.wants_case("settime-arm") {
        let mut v = settings.repeat(reps, || {
            timed(&mut || {
                for (i, &id) in ids.iter().enumerate() {
                    svc.arm(id, spread(i, 0));
                }
            })
        });
        let fields = Fields::default()
            .with_opt(Field::BytesPerTimer, bytes)
            .with(Field::Runs, v.len());
        record("settime-arm", Measured::per_op(median(&mut v), n, fields));
    }
    if settings.wants_case("settime-move") {
        let mut pass = 0;
        let mut v = settings.repeat(reps, || {
            pass += 1;
            timed(&mut || {
                for (i, &id) in ids.iter().enumerate() {
                    svc.arm(id, spread(i, pass));
                }
            })
        });
        let fields = Fields::default().with(Field::Runs, v.len());
        record("settime-move", Measured::per_op(median(&mut v), n, fields));
    }
    if settings.wants_case("gettime") {
        let mut v = settings.repeat(reps, || {
            let mut sum = 0u64;
            let ns = timed(&mut || {
                for &id in &ids {
                    sum = sum.wrapping_add(svc.gettime(id));
                }
            });
            black_box(sum);
            ns
        });
        let fields = Fields::default().with(Field::Runs, v.len());
        record("gettime", Measured::per_op(median(&mut v), n, fields));
    }
    if settings.wants_case("settime-disarm") {
        let mut pass = 0;
        let mut v = settings.repeat(reps, || {
            pass += 1;
            for (i, &id) in ids.iter().enumerate() {
                svc.arm(id, spread(i, pass));
            }
            timed(&mut || {
                for &id in &ids {
                    svc.disarm(id);
                }
            })
        });
        let fields = Fields::default().with(Field::Runs, v.len());
        record(
            "settime-disarm",
            Measured::per_op(median(&mut v), n, fields),
        );
    }
    if S::DELIVERS && settings.wants_case("deliver") {
        let mut lost = 0;
        let mut v = settings.repeat(reps, || {
            for &id in &ids {
                svc.disarm(id);
            }
            // Far enough ahead that arming all n finishes first (the arming rate is >= 1M/s).
            let t0 = monotonic_now() + 5_000_000 + n as u64 * 1_000;
            for (i, &id) in ids.iter().enumerate() {
                svc.arm_at(id, t0 + (i % 1000) as u64 * 1_000);
            }
            let due = t0 + 2_000_000;
            std::thread::sleep(Duration::from_nanos(due.saturating_sub(monotonic_now())));
            let mut got = 0;
            let ns = timed(&mut || got = svc.drain(n));
            lost += n - got;
            ns
        });
        let fields = Fields::default()
            .with(Field::Fired, n)
            .with(Field::Lost, lost)
            .with(Field::Runs, v.len());
        record(
            "deliver",
            if lost == 0 {
                Measured::per_op(median(&mut v), n, fields)
            } else {
                Measured::failed(format!("{lost} events not delivered within 10 s"))
            },
        );
    }
    for &id in &ids {
        svc.disarm(id);
    }
    svc.delete(&ids);
    rows
}

/// The suite's POSIX-call steps: tempora then the kernel at each n.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings = plan.settings;
    let sizes = settings.sizes(
        &[10_000],
        &[1_000, 10_000, 100_000, 1_000_000],
        &[1_000, 10_000, 50_000, 100_000, 1_000_000],
    );
    let reps = settings.reps(3, 5);
    let signo = libc::SIGRTMIN() + 4;
    for n in sizes {
        let cost = n as f64 / 1e3 * 2.0 * reps as f64;
        plan.add(Step::new(
            Suite::Service,
            &CASES,
            "tempora",
            n,
            1,
            cost,
            move || {
                // App-driven (no driver thread): the bench's own thread polls, as an event loop
                // does.
                let timers = Timers::builder()
                    .drivers(0)
                    .build()
                    .expect("valid configuration");
                let mut t = TemporaSvc {
                    owner: timers.owner(),
                    timers,
                };
                cases(&mut t, n, reps, settings)
            },
        ));
        plan.add(Step::new(
            Suite::Service,
            &FLOOR_CASES,
            "floor",
            n,
            1,
            n as f64 / 1e3 * 0.2 * reps as f64,
            move || cases(&mut FloorSvc::new(), n, reps, settings),
        ));
        let kernel_cost = n.min(100_000) as f64 / 1e3 * 10.0 * reps as f64;
        plan.add(Step::new(
            Suite::Service,
            &CASES,
            "kernel",
            n,
            1,
            kernel_cost,
            move || {
                if let Err(e) = tempora_kernel::block_signal(signo) {
                    let why = format!("cannot block signal {signo}: errno {e}");
                    return CASES
                        .iter()
                        .map(|c| Row::new(c, "kernel", n, 1, Measured::failed(why.clone())))
                        .collect();
                }
                let mut k = KernelSvc {
                    signo,
                    tid: tempora_kernel::gettid(),
                };
                cases(&mut k, n, reps, settings)
            },
        ));
    }
}
