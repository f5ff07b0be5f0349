//! tempora's timers side by side with the running kernel's POSIX timers, with real signals.
//!
//! Random sequences of create / settime (relative and absolute, one-shot and periodic, zero
//! values, absolute times in the past) / gettime / getoverrun / delete run on pairs of timers:
//! a kernel timer (raw `timer_create` with `SIGEV_THREAD_ID` to this thread, its signal blocked
//! and dequeued with `sigtimedwait`) and a tempora `Queue` timer on the same clock, with tempora
//! on the OS clocks. Every result is compared.
//!
//! Time runs in steps of `Q`: all mutations happen at the start of a step (phase 0) and all
//! values are multiples of `Q`, so every expiry falls near phase 0 of some step; events are
//! drained and timers observed at phase `Q/2`, far from any expiry, where both sides must
//! agree exactly on which timers delivered and with which overrun. Remaining times may differ
//! by the time that passed between the two calls (measured, with a tempora poll just before
//! them, standing in for the kernel's immediate firing), plus the same for the two settime
//! calls that armed them, plus one tempora tick and 50 µs. A step
//! whose phases the scheduler disturbed by more than `Q/4` (or whose kernel timer fired late)
//! would make the comparison meaningless: its findings are dropped, every pair is deleted and
//! created afresh on both sides, and the grid restarts after a back-off that doubles with each
//! disturbed step in a row. A run fails only on a comparison that differs; it ends when the
//! asked number of steps were compared, and reports how many were disturbed.
//!
//! `TEMPORA_SOAK=<steps>` compares a longer sequence (default 300 steps, about 6 s: long enough,
//! with the service's background driver running, to catch a `poll` that returns while the
//! driver still holds a popped timer undelivered, which 40 steps can miss).
//! `TEMPORA_STREAM=<n>` replays a stream (exactly, if the same steps are disturbed).

mod common;

use common::{distance, Rng};
use std::time::{Duration, Instant};
use tempora::clock::{ClockId, ClockSource, OsClock};
use tempora::{Notify, SetFlags, Timers};
use tempora_kernel as k;

const Q: u64 = 20_000_000;
const PAIRS: usize = 6;
const CLOCKS: [ClockId; PAIRS] = [
    ClockId::Monotonic,
    ClockId::Realtime,
    ClockId::Boottime,
    ClockId::Monotonic,
    ClockId::Realtime,
    ClockId::Monotonic,
];

struct Pair {
    kernel: i32,
    tempora: tempora::TimerId,
    clock: ClockId,
}

/// One comparison sequence: the pairs, the generator that drives them and what was counted.
struct Soak {
    stream: u64,
    rng: Rng,
    timers: Timers,
    owner: tempora::Owner,
    tid: i32,
    signo: i32,
    /// One tempora tick and 50 µs: what the two sides may differ by beyond the measured time.
    tol: u64,
    pairs: Vec<Pair>,
    /// Per pair, how much later tempora's last relative arming read its clock than the
    /// kernel's (at most the measured time around the two settime calls).
    skew: [u64; PAIRS],
    compared_steps: u64,
    disturbed_steps: u64,
    events: usize,
}

impl Soak {
    fn new(stream: u64, signo: i32) -> Soak {
        let timers = Timers::builder().bases(2).build().unwrap();
        let owner = timers.owner();
        let mut soak = Soak {
            stream,
            rng: Rng::new(stream),
            tol: timers.tick_nanos() + 50_000,
            timers,
            owner,
            tid: k::gettid(),
            signo,
            pairs: Vec::new(),
            skew: [0; PAIRS],
            compared_steps: 0,
            disturbed_steps: 0,
            events: 0,
        };
        soak.pairs = (0..PAIRS).map(|i| soak.create(i)).collect();
        soak
    }

    fn create(&self, i: usize) -> Pair {
        // EAGAIN: the user's queued signals are at RLIMIT_SIGPENDING, which every process of
        // the same user shares (another test's signal timers): wait for room, up to 60 s.
        let deadline = Instant::now() + Duration::from_secs(60);
        let kernel = loop {
            match k::timer_create_signal(CLOCKS[i] as i32, self.signo, i as i32, self.tid) {
                Err(libc::EAGAIN) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                r => break r.expect("timer_create"),
            }
        };
        Pair {
            kernel,
            tempora: self.owner.create(CLOCKS[i], Notify::Queue).unwrap(),
            clock: CLOCKS[i],
        }
    }

    /// After a disturbed step: every pair deleted on both sides (which drops a queued tempora
    /// event), every kernel signal taken, and the pairs created afresh, so the next step
    /// starts from a state both sides agree on.
    fn resync(&mut self) {
        for p in &self.pairs {
            k::timer_delete(p.kernel).unwrap();
            self.owner.delete(p.tempora).unwrap();
        }
        while let Ok(Some(_)) = k::take_signal(self.signo) {}
        self.timers.poll();
        assert_eq!(
            self.owner.try_iter().count(),
            0,
            "stream {}: an event of a deleted timer after the resync",
            self.stream
        );
        self.pairs = (0..PAIRS).map(|i| self.create(i)).collect();
        self.skew = [0; PAIRS];
    }

    /// Phase 0 of the step that starts at `start`: one or two random mutations, each compared.
    /// `Err` if the step was disturbed (its findings are then dropped, not judged).
    fn mutate(&mut self, step: u64, start: Instant) -> Result<Vec<String>, String> {
        let os = OsClock;
        let mut failures = Vec::new();
        for _ in 0..1 + self.rng.below(2) {
            let i = self.rng.below(PAIRS as u64) as usize;
            if self.rng.below(8) == 0 {
                // Delete, check both forget the ID, create again.
                let p = &self.pairs[i];
                k::timer_delete(p.kernel).unwrap();
                self.owner.delete(p.tempora).unwrap();
                assert_eq!(k::timer_gettime(p.kernel), Err(libc::EINVAL));
                assert_eq!(
                    self.owner.gettime(p.tempora).map_err(|e| e.errno()),
                    Err(libc::EINVAL)
                );
                self.pairs[i] = self.create(i);
                self.skew[i] = 0;
                continue;
            }
            let p = &self.pairs[i];
            let abs = self.rng.below(3) == 0;
            let interval = [0, 0, Q, 2 * Q, 3 * Q][self.rng.below(5) as usize];
            let k_mult = self.rng.below(5);
            let now = os.now(p.clock);
            let value = match (abs, k_mult) {
                (false, m) => m * Q,
                // Absolute: 0 (disarm), in the past by up to 3 periods, or ahead.
                (true, 0) => 0,
                (true, 1) => now - self.rng.below(4) * Q - Q / 100,
                (true, m) => now + (m - 1) * Q,
            };
            let flags = if abs { libc::TIMER_ABSTIME } else { 0 };
            // The kernel fires a timer the moment it is due; tempora when polled. Polling right
            // before the pair of calls leaves a window of `dt` at most in which one side has
            // fired and the other reads "1 ns, overdue".
            let before = Instant::now();
            self.timers.poll();
            let kold = k::timer_settime(p.kernel, flags, value, interval).unwrap();
            let told = self
                .owner
                .settime(
                    p.tempora,
                    SetFlags::from_raw(flags),
                    Duration::from_nanos(value),
                    Duration::from_nanos(interval),
                )
                .unwrap()
                .as_nanos();
            let dt = before.elapsed().as_nanos() as u64;
            let slack = dt + self.skew[i] + self.tol;
            if kold.0 == 1 && told.0 != 1 && distance(kold, told) > slack {
                // The kernel's timer is due and not yet fired (it reads 1 ns) while tempora's,
                // polled just before, has fired: the kernel's own expiry ran late by more than
                // the tolerance (its timer interrupt was held up). Not tempora's to judge.
                return Err(format!(
                    "step {step}: the kernel had not fired timer {i}, due {} ns ago",
                    distance(kold, told)
                ));
            }
            if distance(kold, told) > slack || kold.1 != told.1 {
                failures.push(format!(
                    "step {step}: settime({i}, abs {abs}, {value}, {interval}) old: \
                     kernel {kold:?}, tempora {told:?}"
                ));
            }
            self.skew[i] = dt;
        }
        let end = phase(start);
        if end > Q / 4 {
            return Err(format!("step {step}: mutations ran until phase {end} ns"));
        }
        Ok(failures)
    }

    /// Phase `Q/2` of the step that starts at `start`: deliveries drained and every pair
    /// observed, each compared. `Err` if the step was disturbed.
    fn observe(&mut self, step: u64, start: Instant) -> Result<Vec<String>, String> {
        let mut failures = Vec::new();
        self.timers.poll();
        // Two signals (or events) of one timer in one drain are only possible if the drain
        // ran past the timer's next period: a disturbed step, judged by the phase check below
        // before the duplicates are.
        let mut twice = Vec::new();
        let mut kev = [None; PAIRS];
        while let Some(s) = k::take_signal(self.signo).unwrap() {
            let i = s.value as usize;
            if kev[i].replace(s.overrun).is_some() {
                twice.push(format!("kernel timer {i}"));
            }
        }
        let mut tev = [None; PAIRS];
        for e in self.owner.try_iter() {
            let i = self.pairs.iter().position(|p| p.tempora == e.id).unwrap();
            if tev[i].replace(e.overrun).is_some() {
                twice.push(format!("tempora timer {i}"));
            }
        }
        let drained = phase(start);
        if !(Q / 4..=3 * Q / 4).contains(&drained) {
            return Err(format!("step {step}: observations at phase {drained} ns"));
        }
        if !twice.is_empty() {
            failures.push(format!(
                "step {step}: two deliveries in one step of {twice:?}"
            ));
        }
        if kev != tev {
            failures.push(format!(
                "step {step}: deliveries (overrun per pair) differ: kernel {kev:?}, tempora {tev:?}"
            ));
        }
        self.events += kev.iter().flatten().count();
        for (i, p) in self.pairs.iter().enumerate() {
            let before = Instant::now();
            self.timers.poll();
            let kt = k::timer_gettime(p.kernel).unwrap();
            let tt = self.owner.gettime(p.tempora).unwrap().as_nanos();
            let dt = before.elapsed().as_nanos() as u64;
            if distance(kt, tt) > dt + self.skew[i] + self.tol || kt.1 != tt.1 {
                failures.push(format!(
                    "step {step}: gettime({i}): kernel {kt:?}, tempora {tt:?}"
                ));
            }
            let (ko, to) = (
                k::timer_getoverrun(p.kernel).unwrap(),
                self.owner.getoverrun(p.tempora).unwrap(),
            );
            if ko != to {
                failures.push(format!(
                    "step {step}: getoverrun({i}): kernel {ko}, tempora {to}"
                ));
            }
        }
        // An observation that ran into the next step's expiries (phase `Q`) compared two
        // sides that may each have seen a different side of them.
        let end = phase(start);
        if end > 3 * Q / 4 {
            return Err(format!(
                "step {step}: observations ran until phase {end} ns"
            ));
        }
        Ok(failures)
    }

    /// Compares `steps` undisturbed steps. A disturbed step is dropped, the pairs resynced and
    /// the grid restarted after a back-off that doubles with each disturbed step in a row
    /// (from `2Q` to 64 `Q`, 1.28 s), so a burst of load passes before the next try.
    fn run(mut self, steps: u64) -> Soak {
        let mut grid = Instant::now() + Duration::from_millis(5);
        let mut n = 0;
        let mut step = 0;
        let mut in_a_row = 0;
        while self.compared_steps < steps {
            let start = grid + Duration::from_nanos(n * Q);
            step += 1;
            n += 1;
            std::thread::sleep(start.saturating_duration_since(Instant::now()));
            let r = if phase(start) > Q / 4 {
                Err(format!("step {step}: began at phase {} ns", phase(start)))
            } else {
                self.mutate(step, start).and_then(|mut failures| {
                    let window = start + Duration::from_nanos(Q / 2);
                    std::thread::sleep(window.saturating_duration_since(Instant::now()));
                    failures.extend(self.observe(step, start)?);
                    Ok(failures)
                })
            };
            match r {
                Ok(failures) => {
                    assert!(
                        failures.is_empty(),
                        "stream {}: tempora and the kernel differ:\n{}",
                        self.stream,
                        failures.join("\n")
                    );
                    self.compared_steps += 1;
                    in_a_row = 0;
                }
                Err(why) => {
                    self.disturbed_steps += 1;
                    in_a_row += 1;
                    if self.disturbed_steps <= 5 {
                        eprintln!("stream {}: disturbed, {why}", self.stream);
                    }
                    self.resync();
                    let back_off = Duration::from_nanos(Q << in_a_row.min(6));
                    grid = Instant::now() + back_off;
                    n = 0;
                }
            }
        }
        for p in &self.pairs {
            k::timer_delete(p.kernel).unwrap();
            self.owner.delete(p.tempora).unwrap();
        }
        while let Ok(Some(_)) = k::take_signal(self.signo) {}
        self
    }
}

/// How far past `start` the clock is now, in nanoseconds (0 before it).
fn phase(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_nanos() as u64
}

#[test]
fn kernel_differential_signals_settime_gettime_getoverrun_delete() {
    let signo = libc::SIGRTMIN() + 3;
    k::block_signal(signo).unwrap();
    let steps = std::env::var("TEMPORA_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let stream = std::env::var("TEMPORA_STREAM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let soak = Soak::new(stream, signo).run(steps);
    eprintln!(
        "ok: stream {stream}: {} steps of timers agree with the kernel's, {} events \
         ({} steps disturbed and retried)",
        soak.compared_steps, soak.events, soak.disturbed_steps
    );
    assert!(
        soak.events > 0,
        "the sequence delivered nothing: it tested too little"
    );
}
