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
//!   tempora `poll()` (expiry: pop from the wheels, queue the events) plus `try_recv` of each
//!   event; for the kernel, dequeuing each timer's real-time signal with `sigtimedwait` (its
//!   expiry work already ran in interrupt context while the thread slept, and is not counted,
//!   which favours the kernel). `ns_per_op` is per delivered event.
//!
//! `settime-arm` rows of tempora carry `bytes_per_timer`: what the process allocated for the n
//! armed timers (objects with their wheel links, hash table, wheel buckets), divided by n.
//!
//! Timers are `Queue` (tempora) and `SIGEV_THREAD_ID` with a blocked real-time signal (kernel),
//! so that arming really queues them (a `SIGEV_NONE` kernel timer is never put in a timer
//! queue). Creating kernel timers fails beyond `RLIMIT_SIGPENDING`; those rows are `ok:false`.

pub(crate) mod drivers;
pub(crate) mod firing;

use std::hint::black_box;
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::TimerId;
use tempora::{Notify, Owner, SetFlags, Timers};

use crate::workload::spread;
use crate::{
    allocated_bytes, median, settle_reclamation, Field, Fields, Measured, Plan, Row, Settings,
    Step, Suite,
};

const CASES: [&str; 5] = [
    "settime-arm",
    "settime-move",
    "settime-disarm",
    "gettime",
    "deliver",
];

/// One side of the comparison.
trait Service {
    const NAME: &'static str;
    type Id: Copy;
    fn create(&mut self, n: usize) -> Result<Vec<Self::Id>, String>;
    fn arm(&self, id: Self::Id, value: u64);
    fn arm_at(&self, id: Self::Id, monotonic_ns: u64);
    fn disarm(&self, id: Self::Id);
    fn gettime(&self, id: Self::Id) -> u64;
    /// Delivers every pending event; how many.
    fn drain(&self, expected: usize) -> usize;
    fn delete(&mut self, ids: &[Self::Id]);
}

struct TemporaSvc {
    timers: Timers,
    owner: Owner,
}

impl Service for TemporaSvc {
    const NAME: &'static str = "tempora";
    type Id = TimerId;
    fn create(&mut self, n: usize) -> Result<Vec<TimerId>, String> {
        (0..n)
            .map(|_| {
                self.owner
                    .create(ClockId::Monotonic, Notify::Queue)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
    #[inline]
    fn arm(&self, id: TimerId, value: u64) {
        let r = self.owner.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_nanos(value),
            Duration::ZERO,
        );
        black_box(r.expect("live timer"));
    }
    fn arm_at(&self, id: TimerId, at: u64) {
        arm_once_at(&self.owner, id, at).expect("live timer");
    }
    #[inline]
    fn disarm(&self, id: TimerId) {
        let r = self
            .owner
            .settime(id, SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO);
        black_box(r.expect("live timer"));
    }
    #[inline]
    fn gettime(&self, id: TimerId) -> u64 {
        self.owner.gettime(id).expect("live timer").as_nanos().0
    }
    fn drain(&self, expected: usize) -> usize {
        let mut got = 0;
        let start = Instant::now();
        while got < expected && start.elapsed() < Duration::from_secs(10) {
            self.timers.poll();
            while self.owner.try_recv().is_some() {
                got += 1;
            }
        }
        got
    }
    fn delete(&mut self, ids: &[TimerId]) {
        for &id in ids {
            let _ = self.owner.delete(id);
        }
    }
}

struct KernelSvc {
    signo: i32,
    tid: i32,
}

impl Service for KernelSvc {
    const NAME: &'static str = "kernel";
    type Id = i32;
    fn create(&mut self, n: usize) -> Result<Vec<i32>, String> {
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            match tempora_kernel::timer_create_signal(
                libc::CLOCK_MONOTONIC,
                self.signo,
                i as i32,
                self.tid,
            ) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.delete(&ids);
                    let limit = tempora_kernel::rlimit_sigpending()
                        .map_or_else(|| "unknown".into(), |l| l.to_string());
                    return Err(format!(
                        "timer_create: errno {e} after {i} timers (RLIMIT_SIGPENDING {limit})"
                    ));
                }
            }
        }
        Ok(ids)
    }
    #[inline]
    fn arm(&self, id: i32, value: u64) {
        black_box(tempora_kernel::timer_settime(id, 0, value, 0).expect("live timer"));
    }
    fn arm_at(&self, id: i32, at: u64) {
        tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, at, 0).expect("live timer");
    }
    #[inline]
    fn disarm(&self, id: i32) {
        black_box(tempora_kernel::timer_settime(id, 0, 0, 0).expect("live timer"));
    }
    #[inline]
    fn gettime(&self, id: i32) -> u64 {
        tempora_kernel::timer_gettime(id).expect("live timer").0
    }
    fn drain(&self, expected: usize) -> usize {
        let mut got = 0;
        let start = Instant::now();
        while got < expected && start.elapsed() < Duration::from_secs(10) {
            while let Ok(Some(_)) = tempora_kernel::take_signal(self.signo) {
                got += 1;
            }
        }
        got
    }
    fn delete(&mut self, ids: &[i32]) {
        for &id in ids {
            let _ = tempora_kernel::timer_delete(id);
        }
        while let Ok(Some(_)) = tempora_kernel::take_signal(self.signo) {}
    }
}

/// `CLOCK_MONOTONIC` now, in ns (the clock the service cases arm on).
pub(super) fn monotonic_now() -> u64 {
    use tempora::clock::{ClockSource, OsClock};
    OsClock.now(ClockId::Monotonic)
}

/// Arms `id` of `owner` to fire once at `at` ns on `CLOCK_MONOTONIC` (the service cases' and
/// the firing cases' one-shot).
pub(super) fn arm_once_at(owner: &Owner, id: TimerId, at: u64) -> Result<(), String> {
    owner
        .settime(
            id,
            SetFlags::ABSTIME,
            Duration::from_nanos(at),
            Duration::ZERO,
        )
        .map(drop)
        .map_err(|e| e.to_string())
}

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
    // links), the hash table, the wheels (nothing for the kernel, whose memory is its own).
    let bytes =
        (S::NAME != "kernel").then(|| allocated_bytes().saturating_sub(before) as f64 / n as f64);
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
    if settings.wants_case("deliver") {
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
