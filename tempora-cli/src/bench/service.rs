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
//! armed timers (objects, hash table, wheel entries), divided by n.
//!
//! Timers are `Queue` (tempora) and `SIGEV_THREAD_ID` with a blocked real-time signal (kernel),
//! so that arming really queues them (a `SIGEV_NONE` kernel timer is never put in a timer
//! queue). Creating kernel timers fails beyond `RLIMIT_SIGPENDING`; those rows are `ok:false`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::registry::TimerId;
use tempora::{Notify, Owner, SetFlags, Timers};

use super::{allocated_bytes, median, settle_reclamation, Extras, Opts, Record, Reporter};

const CASES: [&str; 5] = [
    "settime-arm",
    "settime-move",
    "settime-disarm",
    "gettime",
    "deliver",
];

/// The value of the `i`th timer's arming: 1 s plus up to 1 s, spread.
fn spread(i: usize, pass: usize) -> u64 {
    1_000_000_000 + ((i * 7919 + pass * 104_729) % 1_000_000) as u64 * 1_000
}

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
        let r = self.owner.settime(
            id,
            SetFlags::ABSTIME,
            Duration::from_nanos(at),
            Duration::ZERO,
        );
        r.expect("live timer");
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

/// Runs every case at one n for one service.
fn cases<S: Service>(svc: &mut S, n: usize, reps: usize, rep: &mut Reporter) {
    if !rep.wants_impl(S::NAME) {
        return;
    }
    rep.set_message(format!("service {} n={n}", S::NAME));
    // Earlier runs' memory is freed through the epoch and, for large tables, on a thread of
    // its own: let that finish so it does not land in this measurement as a negative.
    settle_reclamation();
    std::thread::sleep(Duration::from_millis(50));
    let before = allocated_bytes();
    let ids = match svc.create(n) {
        Ok(ids) => ids,
        Err(e) => {
            for case in CASES {
                if rep.wants_case(case) {
                    record(rep, case, S::NAME, n, 1, Err(e.clone()));
                }
            }
            return;
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
    // Everything the process allocated for n armed timers: timer objects, the hash table, the
    // wheel entries (nothing for the kernel, whose memory is its own).
    let bytes =
        (S::NAME != "kernel").then(|| allocated_bytes().saturating_sub(before) as f64 / n as f64);
    if rep.wants_case("settime-arm") {
        let mut v: Vec<f64> = (0..reps)
            .map(|_| {
                timed(&mut || {
                    for (i, &id) in ids.iter().enumerate() {
                        svc.arm(id, spread(i, 0));
                    }
                })
            })
            .collect();
        let extras = Extras {
            bytes_per_timer: bytes,
            ..Extras::default()
        };
        record(
            rep,
            "settime-arm",
            S::NAME,
            n,
            1,
            Ok((median(&mut v), extras)),
        );
    }
    if rep.wants_case("settime-move") {
        let mut v: Vec<f64> = (1..=reps)
            .map(|pass| {
                timed(&mut || {
                    for (i, &id) in ids.iter().enumerate() {
                        svc.arm(id, spread(i, pass));
                    }
                })
            })
            .collect();
        let ns = median(&mut v);
        record(
            rep,
            "settime-move",
            S::NAME,
            n,
            1,
            Ok((ns, Extras::default())),
        );
    }
    if rep.wants_case("gettime") {
        let mut v: Vec<f64> = (0..reps)
            .map(|_| {
                let mut sum = 0u64;
                let ns = timed(&mut || {
                    for &id in &ids {
                        sum = sum.wrapping_add(svc.gettime(id));
                    }
                });
                black_box(sum);
                ns
            })
            .collect();
        let ns = median(&mut v);
        record(rep, "gettime", S::NAME, n, 1, Ok((ns, Extras::default())));
    }
    if rep.wants_case("settime-disarm") {
        let mut v: Vec<f64> = (1..=reps)
            .map(|pass| {
                for (i, &id) in ids.iter().enumerate() {
                    svc.arm(id, spread(i, pass));
                }
                timed(&mut || {
                    for &id in &ids {
                        svc.disarm(id);
                    }
                })
            })
            .collect();
        let ns = median(&mut v);
        record(
            rep,
            "settime-disarm",
            S::NAME,
            n,
            1,
            Ok((ns, Extras::default())),
        );
    }
    if rep.wants_case("deliver") {
        let mut v = Vec::new();
        let mut lost = 0;
        for _ in 0..reps {
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
            v.push(timed(&mut || got = svc.drain(n)));
            lost += n - got;
        }
        let extras = Extras {
            fired: Some(n as u64),
            lost: Some(lost as u64),
            ..Extras::default()
        };
        let result = if lost == 0 {
            Ok((median(&mut v), extras))
        } else {
            Err(format!("{lost} events not delivered within 10 s"))
        };
        record(rep, "deliver", S::NAME, n, 1, result);
    }
    for &id in &ids {
        svc.disarm(id);
    }
    svc.delete(&ids);
}

/// Records one result row of the service suite (see `record_in`).
pub(super) fn record(
    rep: &mut Reporter,
    case: &str,
    imp: &str,
    n: usize,
    threads: usize,
    result: Result<(f64, Extras), String>,
) {
    record_in(rep, "service", case, imp, n, threads, result);
}

/// Records one result row of `suite` (`total_ms` is `ns_per_op * n`); an error becomes an
/// `ok:false` row.
pub(super) fn record_in(
    rep: &mut Reporter,
    suite: &'static str,
    case: &str,
    imp: &str,
    n: usize,
    threads: usize,
    result: Result<(f64, Extras), String>,
) {
    let (ns, extras, error) = match result {
        Ok((ns, e)) => (ns, e, None),
        Err(e) => (0.0, Extras::default(), Some(e)),
    };
    rep.record(Record {
        suite,
        case: case.to_string(),
        imp: imp.to_string(),
        n: n as u64,
        threads: threads as u32,
        ns_per_op: ns,
        total_ms: ns * n as f64 / 1e6,
        ok: error.is_none(),
        error,
        dist: None,
        extras,
    });
    rep.tick();
}

pub fn run(opts: &Opts, rep: &mut Reporter) {
    let sizes: Vec<usize> = if let Some(n) = &opts.n {
        n.clone()
    } else if opts.quick {
        vec![10_000]
    } else {
        vec![1_000, 10_000, 50_000, 100_000, 1_000_000]
    };
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    let wanted = CASES.iter().filter(|c| rep.wants_case(c)).count();
    rep.add_steps((sizes.len() * 2 * wanted) as u64);
    let signo = libc::SIGRTMIN() + 4;
    if let Err(e) = tempora_kernel::block_signal(signo) {
        eprintln!("service: cannot block signal {signo}: errno {e}");
    }
    for &n in &sizes {
        // App-driven (no driver thread): the bench's own thread polls, as an event loop does.
        let timers = Timers::builder()
            .drivers(0)
            .build()
            .expect("valid configuration");
        let mut t = TemporaSvc {
            owner: timers.owner(),
            timers,
        };
        cases(&mut t, n, reps, rep);
        drop(t);
        let mut k = KernelSvc {
            signo,
            tid: tempora_kernel::gettid(),
        };
        cases(&mut k, n, reps, rep);
    }
}
