//! tempora's signal timers side by side with the running kernel's, both received as a program
//! receives them: `sigtimedwait`.
//!
//! The sequences of `timers_kernel.rs` (create / settime relative and absolute, one-shot and
//! periodic, zero values, absolute times in the past / gettime / getoverrun / delete) run on
//! pairs of timers: a kernel timer (raw `timer_create`, `SIGEV_SIGNAL` to the process or
//! `SIGEV_THREAD_ID` to the main thread) and a tempora timer (`Notify::Signal`, `ThreadSignal`
//! to the main thread, or `SignalWithId`), on the same clock, each kind drawn at random. Its
//! own `main` (no test harness): every signal used is blocked before any thread starts, so
//! process-directed signals wait for the main thread to take them.
//!
//! # Time
//!
//! Time runs in steps of `Q`. Mutations happen at phase 0 and observations at phase `Q/2`.
//! Every arming's first expiry is placed on the step grid at phase `-Q/8` (relative values
//! are computed from the instant of the call), so that every expiry falls at phase `7Q/8`
//! (and, for the `Q/2` interval, also at `3Q/8`): never during a mutation, whether a timer
//! had fired when it was set is never a race, on either side. The test keeps each pair's
//! expiry grid (`Arming`) and counts the expiries due at any instant from it.
//!
//! A step in which an expiry fell within either phase's calls, or the kernel or tempora's
//! driver had not yet fired a timer that was due, or that began too late, was disturbed by the scheduler: its
//! findings are dropped, every pair is disarmed and drained, and the run goes on from a new
//! grid after a back-off that doubles with each disturbed step in a row. A run fails only on a
//! comparison that differs; it reports how many steps were disturbed.
//!
//! # What must agree, and what is checked where tempora cannot agree
//!
//! User space cannot see a signal leave the queue, nor take one back (`timers/signals/mod.rs`),
//! which forces four divergences from the kernel's timers:
//!
//! * (a) a signal's `si_overrun` is fixed when it is queued: the periods that pass while it
//!   waits are what `getoverrun` reports once it is seen delivered (the kernel's value), and
//!   are carried into the next signal's `si_overrun`;
//! * (b) a signal queued before a settime or delete is still delivered (the kernel discards it
//!   at the dequeue);
//! * (c) tempora sees a delivery only when it probes (at a period, or in `getoverrun`), and
//!   below `PROBE_CAP` a pending signal is probed every other period or so: a period may be
//!   counted for the next signal rather than the delivered one, and the next signal after a
//!   late dequeue may come one probe later than the kernel's;
//! * (d) timers sharing a signal number look pending while any of them is.
//!
//! Signal numbers are distinct per side and per pair, and alternate between two per pair at
//! each delete, so a pending signal number tells exactly whose signal is pending (and (d)
//! never applies). At each observation, per pair, the signals are taken on both sides (5
//! times in 8) or left pending for a later one.
//!
//! * Fields, exactly: `si_code` is `SI_TIMER`, `si_timerid` the side's timer, `si_value` the
//!   pair's value (the timer ID for `SignalWithId`).
//! * Pending, exactly: at every observation and before every mutation, the kernel's signal of
//!   a pair is pending exactly when tempora's is (the one-pending-signal rule).
//! * Deliveries, exactly: taken together, both sides deliver the same number of signals of
//!   the current arming (0 or 1). Where (b) applies instead: a settime found tempora's signal
//!   pending, and tempora delivers that signal, then the new arming's own if it has fired,
//!   while the kernel delivers none if the new arming has not fired yet, one (its queued
//!   signal stands for the new arming's first expiry) if it has: the new arming's deliveries
//!   agree; a signal pending at a delete is delivered once by tempora, with the deleted
//!   timer's ID and value, and never by the kernel.
//! * Counts, (a): per arming, the kernel's sum of `1 + si_overrun` equals the expiries due at
//!   the take (counted from the grid), exactly. tempora's equals the expiries due when its
//!   latest signal was queued: more than at the last observation that found nothing pending,
//!   at most as many as at the first that found it pending (for periods of `Q` and more, that
//!   is one number). Per signal, the two `si_overrun`s are not compared.
//! * `getoverrun`, (a) and (c): the kernel's equals its last signal's `si_overrun`; tempora's
//!   equals the kernel's exactly for periods of at least `PROBE_CAP` (a probe at every
//!   period), within `ceil(PROBE_CAP / interval) - 1` periods otherwise. The one-probe-later
//!   signal of (c) never shows: observations are a step apart, longer than a probe's wait.
//! * `gettime` and settime's old value: as in `timers_kernel.rs`, equal within the time
//!   between the calls (and, after a relative settime, between its two clock readings), one
//!   tick and 50 µs.
//!
//! `TEMPORA_SOAK=<steps>` compares a longer sequence (default 200 steps, about 3 s);
//! `TEMPORA_STREAM=<n>` replays a stream (exactly, if the same steps are disturbed).

mod common;

use common::{distance, Rng};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};
use tempora::clock::{ClockId, ClockSource, OsClock};
use tempora::{Notify, Owner, SetFlags, TimerId, Timers};
use tempora_kernel as k;

const Q: u64 = 16_000_000;
const PAIRS: usize = 6;
const CLOCKS: [ClockId; PAIRS] = [
    ClockId::Monotonic,
    ClockId::Realtime,
    ClockId::Boottime,
    ClockId::Monotonic,
    ClockId::Realtime,
    ClockId::Monotonic,
];
/// Every first expiry is this much short of a whole step: expiries fall at phase `-SHIFT`.
const SHIFT: u64 = Q / 8;
/// The phase of the observations: `Q/8` after the `3Q/8` expiries, `3Q/8` before `7Q/8`'s.
const WINDOW: u64 = Q / 2;
/// The intervals drawn: one-shots twice as often; `Q/2` is below `PROBE_CAP`.
const INTERVALS: [u64; 6] = [0, 0, Q / 2, Q, 2 * Q, 3 * Q];
/// tempora's longest wait between two probes of a pending signal (`timers/signals/mod.rs`).
const PROBE_CAP: u64 = 10_000_000;
/// How far an expiry must be from a phase's calls for both sides to agree on it, beyond the
/// uncertainty of the arming's instants.
const GUARD: Duration = Duration::from_micros(200);

/// A pair's kernel signal number; `parity` alternates at each delete.
fn ksig(i: usize, parity: usize) -> i32 {
    libc::SIGRTMIN() + 4 + (2 * i + parity) as i32
}

/// A pair's tempora signal number.
fn tsig(i: usize, parity: usize) -> i32 {
    ksig(i, parity) + 2 * PAIRS as i32
}

fn sigset(signals: impl IntoIterator<Item = i32>) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initialises the set, `sigaddset` adds valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// The signals pending for the calling thread (its own and the process's).
fn pending() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigpending` writes the set.
    unsafe {
        assert_eq!(libc::sigpending(set.as_mut_ptr()), 0);
        set.assume_init()
    }
}

fn member(set: &libc::sigset_t, signo: i32) -> bool {
    // SAFETY: an initialised set.
    unsafe { libc::sigismember(set, signo) == 1 }
}

/// A timer signal as taken: `si_code`, `si_timerid`, `si_overrun`, `si_value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Received {
    code: i32,
    timer: i32,
    overrun: i32,
    value: usize,
}

/// One pending `signo`, taken with `sigtimedwait` (no wait); `None` if none is pending.
fn take(signo: i32) -> Option<Received> {
    let set = sigset([signo]);
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: valid set, info and timeout for the call.
    let r = unsafe { libc::sigtimedwait(&set, info.as_mut_ptr(), &ts) };
    if r < 0 {
        let e = std::io::Error::last_os_error().raw_os_error();
        assert!(matches!(e, Some(libc::EAGAIN | libc::EINTR)), "{e:?}");
        return None;
    }
    assert_eq!(r, signo);
    // SAFETY: written by the call. The `_timer` member of the siginfo: `si_timerid` and
    // `si_overrun` (ints at 16 and 20), `si_value` (at 24), on 64-bit Linux.
    unsafe {
        let info = info.assume_init();
        let base = (&info as *const libc::siginfo_t).cast::<u8>();
        Some(Received {
            code: info.si_code,
            timer: base.add(16).cast::<i32>().read(),
            overrun: base.add(20).cast::<i32>().read(),
            value: base.add(24).cast::<usize>().read(),
        })
    }
}

/// Every pending `signo`.
fn take_all(signo: i32) -> Vec<Received> {
    std::iter::from_fn(|| take(signo)).collect()
}

#[derive(Debug, Clone, Copy)]
enum KernelKind {
    Process,
    Thread,
}

#[derive(Debug, Clone, Copy)]
enum TemporaKind {
    Signal,
    Thread,
    WithId,
}

impl TemporaKind {
    /// The `si_value` of pair `i`'s timer `id`.
    fn value(self, i: usize, id: TimerId) -> usize {
        match self {
            TemporaKind::WithId => id.get() as u32 as usize,
            _ => i,
        }
    }
}

/// An arming's expiry grid, on this process's `Instant`s: its first expiry (`None`: disarmed)
/// and its interval. Each side's grid is this one delayed by at most `spread` (a relative
/// value counts from when each call read its clock).
#[derive(Debug, Clone, Copy, Default)]
struct Arming {
    first: Option<Instant>,
    interval: u64,
    spread: Duration,
}

impl Arming {
    /// The expiries due at `at`.
    fn expiries(&self, at: Instant) -> u64 {
        match self.first {
            Some(first) if at >= first => match self.interval {
                0 => 1,
                i => (at - first).as_nanos() as u64 / i + 1,
            },
            _ => 0,
        }
    }

    /// Whether an expiry of either side falls within `from..=to`, or too near it to tell on
    /// which side.
    fn falls_within(&self, from: Instant, to: Instant) -> bool {
        let from = from.checked_sub(GUARD + self.spread).unwrap();
        self.expiries(from) != self.expiries(to + GUARD)
    }

    /// How far tempora's `getoverrun` may be from the kernel's: the periods a probe may skip.
    fn probe_slack(&self) -> i32 {
        if self.interval == 0 || self.interval >= PROBE_CAP {
            0
        } else {
            (PROBE_CAP.div_ceil(self.interval) - 1) as i32
        }
    }
}

struct Pair {
    kernel: i32,
    kkind: KernelKind,
    tempora: TimerId,
    tkind: TemporaKind,
    /// Which of the pair's two signal numbers (per side) the current timers use.
    parity: usize,
    arming: Arming,
    /// How much later tempora's last relative arming may have read its clock than the
    /// kernel's (the time the two calls took).
    skew: u64,
    /// Per arming: the kernel's sum of `1 + si_overrun` and its last `si_overrun`.
    k_sum: u64,
    k_last: i32,
    /// Per arming: tempora's sum of `1 + si_overrun` (a signal that stands for the arming's
    /// first expiry counts 1), and the bracket of the expiries due when its latest signal was
    /// queued: more than `t_lo`, at most `t_hi` (the first observation that found it pending).
    t_sum: u64,
    t_lo: u64,
    t_hi: Option<u64>,
    /// The last settime found tempora's signal pending: it belongs to an earlier arming.
    stale: bool,
    /// An observation left the kernel's signal pending: it waited, its si_overrun grew.
    waited: bool,
    /// The pair's last events, for a failure's report.
    log: Vec<String>,
    /// A deleted tempora timer whose signal was pending at the delete (on the other parity's
    /// signal number), with its kind.
    gone: Option<(TimerId, TemporaKind)>,
}

impl Pair {
    /// Forgets the arming: a new one starts.
    fn note(&mut self, what: String) {
        if self.log.len() == 16 {
            self.log.remove(0);
        }
        self.log.push(what);
    }

    fn rearmed(&mut self, arming: Arming, skew: u64, stale: bool, waited: bool) {
        self.arming = arming;
        self.skew = skew;
        (self.k_sum, self.k_last) = (0, 0);
        (self.t_sum, self.t_lo, self.t_hi) = (0, 0, None);
        (self.stale, self.waited) = (stale, waited);
    }
}

/// What a run saw: the divergences by kind, with counts.
#[derive(Debug, Default)]
struct Tally {
    compared_steps: u64,
    disturbed_steps: u64,
    kernel_signals: u64,
    tempora_signals: u64,
    /// Takes of a signal an earlier observation left pending.
    late: u64,
    /// (a) Both delivered, and tempora's si_overrun was larger (it carried periods an earlier
    /// signal waited) or smaller (the kernel counted the periods its signal waited).
    overrun_carried: u64,
    overrun_waited: u64,
    /// (c) `getoverrun`s compared, and those that differed (within the probe slack).
    getoverruns: u64,
    getoverrun_off: u64,
    /// (b) tempora's signals of an earlier arming delivered after a settime, and after a
    /// delete (the kernel discarded both).
    stale_settime: u64,
    stale_delete: u64,
    /// Signals queued before a settime, delivered by tempora beside the new arming's first
    /// (the kernel's stood for it).
    takeovers: u64,
}

/// Why a step was disturbed (its findings are dropped), or `Ok`.
type Step = Result<(), String>;

struct Run {
    stream: u64,
    timers: Timers,
    owner: Owner,
    /// The main thread, target of the thread-directed signals.
    tid: i32,
    /// The tolerance of remaining times beyond the calls' own duration.
    tol: u64,
    rng: Rng,
    pairs: Vec<Pair>,
    tally: Tally,
    /// What differed in the current step: reported unless the step was disturbed.
    failures: Vec<String>,
}

impl Run {
    fn new(stream: u64) -> Run {
        let timers = Timers::builder().bases(2).build().unwrap();
        let mut run = Run {
            stream,
            owner: timers.owner(),
            tid: k::gettid(),
            tol: timers.tick_nanos() + 50_000,
            timers,
            rng: Rng::new(stream),
            pairs: Vec::new(),
            tally: Tally::default(),
            failures: Vec::new(),
        };
        run.pairs = (0..PAIRS).map(|i| run.create(i, 0)).collect();
        run
    }

    /// A new pair of timers for pair `i`, disarmed, of kinds drawn at random.
    fn create(&mut self, i: usize, parity: usize) -> Pair {
        let clock = CLOCKS[i];
        let kkind = [KernelKind::Process, KernelKind::Thread][self.rng.below(2) as usize];
        let tkind = [
            TemporaKind::Signal,
            TemporaKind::Thread,
            TemporaKind::WithId,
        ][self.rng.below(3) as usize];
        let (kn, tn, tid) = (ksig(i, parity), tsig(i, parity), self.tid);
        let kernel = match kkind {
            KernelKind::Process => k::timer_create_process_signal(clock as i32, kn, i as i32),
            KernelKind::Thread => k::timer_create_signal(clock as i32, kn, i as i32, tid),
        }
        .unwrap();
        let notify = match tkind {
            TemporaKind::Signal => Notify::Signal {
                signo: tn,
                value: i,
            },
            TemporaKind::Thread => Notify::ThreadSignal {
                tid,
                signo: tn,
                value: i,
            },
            TemporaKind::WithId => Notify::SignalWithId { signo: tn },
        };
        Pair {
            kernel,
            kkind,
            tempora: self.owner.create(clock, notify).unwrap(),
            tkind,
            parity,
            arming: Arming::default(),
            skew: 0,
            k_sum: 0,
            k_last: 0,
            t_sum: 0,
            t_lo: 0,
            t_hi: None,
            stale: false,
            waited: false,
            gone: None,
            log: Vec::new(),
        }
    }

    fn fail(&mut self, what: String) {
        self.failures.push(what);
    }

    /// Phase 0 of the step starting at `start`: one or two mutations.
    fn mutate(&mut self, step: u64, start: Instant) -> Step {
        let os = OsClock;
        for _ in 0..1 + self.rng.below(2) {
            let i = self.rng.below(PAIRS as u64) as usize;
            // Whatever tempora had due has fired when `poll` returns, and the kernel fires on
            // time (settime's old value reads "1 ns, not fired" otherwise): a signal pending
            // now was queued before the settime.
            self.timers.poll();
            let pre_at = Instant::now();
            let pre = pending();
            let p = &self.pairs[i];
            let (kp, tp) = (
                member(&pre, ksig(i, p.parity)),
                member(&pre, tsig(i, p.parity)),
            );
            if kp != tp {
                self.failures.push(format!(
                    "step {step}: before mutating pair {i}, pending: kernel {kp}, tempora {tp}"
                ));
            }
            let other = 1 - p.parity;
            let other_busy = member(&pre, ksig(i, other)) || member(&pre, tsig(i, other));
            // A delete, unless the other signal numbers still hold a deleted timer's signal.
            if self.rng.below(8) == 0 && !other_busy {
                let (old, kernel, tempora) = (p.arming, p.kernel, p.tempora);
                let gone = tp.then_some((p.tempora, p.tkind));
                k::timer_delete(kernel).unwrap();
                self.owner.delete(tempora).unwrap();
                let after = Instant::now();
                if k::timer_gettime(kernel) != Err(libc::EINVAL)
                    || self.owner.gettime(tempora).map_err(|e| e.errno()) != Err(libc::EINVAL)
                {
                    self.failures
                        .push(format!("step {step}: a deleted timer of pair {i} answers"));
                }
                let fresh = self.create(i, other);
                self.pairs[i] = fresh;
                self.pairs[i].gone = gone;
                if gone.is_some_and(|(id, _)| id == self.pairs[i].tempora) {
                    self.failures
                        .push(format!("step {step}: a deleted ID came back at once"));
                }
                if old.falls_within(pre_at, after) {
                    return Err(format!("step {step}: an expiry during a delete"));
                }
                continue;
            }
            let abs = self.rng.below(3) == 0;
            let interval = INTERVALS[self.rng.below(INTERVALS.len() as u64) as usize];
            let m = self.rng.below(5);
            let back = self.rng.below(4);
            // The first expiry, on the grid: `m` steps on (absolute: `m - 1`) less SHIFT, or
            // (absolute, `m` 1) in the past by `back` steps and SHIFT.
            let first = match (abs, m) {
                (_, 0) => None,
                (false, m) => Some(start + Duration::from_nanos(m * Q - SHIFT)),
                (true, 1) => start.checked_sub(Duration::from_nanos(back * Q + SHIFT)),
                (true, m) => Some(start + Duration::from_nanos((m - 1) * Q - SHIFT)),
            };
            let now = os.now(CLOCKS[i]);
            let before = Instant::now();
            let value = match first {
                None => 0,
                Some(f) if !abs => match f.checked_duration_since(before) {
                    Some(d) if d > Duration::ZERO => d.as_nanos() as u64,
                    _ => return Err(format!("step {step}: mutations ran past the expiries")),
                },
                Some(f) if f >= before => now + (f - before).as_nanos() as u64,
                Some(f) => now - (before - f).as_nanos() as u64,
            };
            let flags = if abs { libc::TIMER_ABSTIME } else { 0 };
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
            let after = Instant::now();
            let dt = (after - before).as_nanos() as u64;
            if kold.0 == 1 && told.0 != 1 {
                return Err(format!("step {step}: the kernel had not fired timer {i}"));
            }
            if told.0 == 1 && kold.0 != 1 {
                return Err(format!(
                    "step {step}: tempora's driver had not fired timer {i}"
                ));
            }
            if p.arming.falls_within(pre_at, after) {
                return Err(format!("step {step}: an expiry during a settime"));
            }
            if !(distance(kold, told) <= dt + p.skew + self.tol && kold.1 == told.1) {
                self.failures.push(format!(
                    "step {step}: settime({i}, abs {abs}, {value}, {interval}) old: kernel \
                     {kold:?}, tempora {told:?}"
                ));
            }
            let arming = Arming {
                first,
                interval: if first.is_some() { interval } else { 0 },
                spread: after - before,
            };
            let skew = if abs { 0 } else { dt };
            self.pairs[i].note(format!(
                "step {step}: settime(abs {abs}, {value}, {interval}), pending {tp}, old \
                 {kold:?}/{told:?}"
            ));
            self.pairs[i].rearmed(arming, skew, tp, kp);
        }
        Ok(())
    }

    /// Phase Q/2 of the step starting at `start`: every pair's pending signals compared, some
    /// taken, some readings.
    fn observe(&mut self, step: u64, start: Instant) -> Step {
        let obs_start = Instant::now();
        self.timers.poll();
        for (i, p) in self.pairs.iter().enumerate() {
            if k::timer_gettime(p.kernel).unwrap().0 == 1 {
                return Err(format!("step {step}: the kernel had not fired timer {i}"));
            }
            // 1 ns: due and not yet fired, a driver the scheduler held back.
            if self.owner.gettime(p.tempora).unwrap().as_nanos().0 == 1 {
                return Err(format!(
                    "step {step}: tempora's driver had not fired timer {i}"
                ));
            }
        }
        let now = Instant::now();
        let pend = pending();
        for i in 0..PAIRS {
            self.deliveries(step, i, now, &pend);
        }
        for i in 0..PAIRS {
            self.readings(step, i);
        }
        let obs_end = Instant::now();
        // Between the `3Q/8` and the `7Q/8` expiries: a window on the other side of one would
        // see a probe that waits two periods (the `Q/2` interval's) one observation later.
        let (from, to) = (obs_start - start, obs_end - start);
        let phases =
            Duration::from_nanos(3 * Q / 8) + GUARD..Duration::from_nanos(7 * Q / 8) - GUARD;
        if !phases.contains(&from) || !phases.contains(&to) {
            return Err(format!(
                "step {step}: observations at phases {from:?}..{to:?}"
            ));
        }
        for (i, p) in self.pairs.iter().enumerate() {
            if p.arming.falls_within(obs_start, obs_end) {
                return Err(format!(
                    "step {step}: an expiry of pair {i} during the observations"
                ));
            }
        }
        Ok(())
    }

    /// Pair `i`'s pending signals (as `pend` found them at `now`): compared, and taken or left.
    fn deliveries(&mut self, step: u64, i: usize, now: Instant, pend: &libc::sigset_t) {
        let take_now = self.rng.below(8) < 5;
        let p = &mut self.pairs[i];
        let mut failures = Vec::new();
        let due = p.arming.expiries(now);
        for parity in 0..2 {
            let (kp, tp) = (member(pend, ksig(i, parity)), member(pend, tsig(i, parity)));
            if kp != tp {
                failures.push(format!(
                    "step {step}: pair {i} (parity {parity}) pending: kernel {kp}, tempora {tp}"
                ));
            }
        }
        let tp = member(pend, tsig(i, p.parity));
        // A signal of this arming is pending (a stale one stands for its first expiry once
        // that is due).
        if tp && due >= 1 && p.t_hi.is_none() {
            p.t_hi = Some(due);
        }
        p.note(format!(
            "step {step}: {due} due, pending {tp}, {}",
            if take_now { "taken" } else { "left" }
        ));
        if !take_now {
            if !tp {
                p.t_lo = due;
            }
            p.waited |= member(pend, ksig(i, p.parity));
            self.failures.append(&mut failures);
            return;
        }
        let ks = take_all(ksig(i, p.parity));
        let ts = take_all(tsig(i, p.parity));
        let k_other = take_all(ksig(i, 1 - p.parity));
        let t_other = take_all(tsig(i, 1 - p.parity));
        let here = format!("step {step} pair {i} ({:?}/{:?})", p.kkind, p.tkind);
        // Fields.
        for s in &ks {
            if (s.code, s.timer, s.value) != (libc::SI_TIMER, p.kernel, i) {
                failures.push(format!("{here}: kernel signal {s:?}"));
            }
        }
        let tvalue = p.tkind.value(i, p.tempora);
        for s in &ts {
            if (s.code, s.timer, s.value) != (libc::SI_TIMER, p.tempora.get(), tvalue) {
                failures.push(format!("{here}: tempora signal {s:?}"));
            }
        }
        // A deleted timer's signal: the kernel discards it, tempora delivers it, once.
        if !k_other.is_empty() {
            failures.push(format!(
                "{here}: the kernel delivered {k_other:?} after a delete"
            ));
        }
        match p.gone.take() {
            // One per arming whose signal was pending (a settime before the delete forgot
            // one as well), each with the deleted timer's ID and value.
            Some((id, kind)) => {
                let want = (libc::SI_TIMER, id.get(), kind.value(i, id));
                if t_other.is_empty() || t_other.iter().any(|s| (s.code, s.timer, s.value) != want)
                {
                    failures.push(format!(
                        "{here}: a signal pending at delete: want {want:?}, got {t_other:?}"
                    ));
                }
                self.tally.stale_delete += 1;
            }
            None if !t_other.is_empty() => {
                failures.push(format!("{here}: tempora delivered {t_other:?}"));
            }
            None => {}
        }
        // Deliveries of this arming. Signals pending at settimes since the last take come
        // first on tempora's side (one per arming forgotten: settime cannot take a queued
        // signal back, and a pending number is no proof that it is still the one pending),
        // then, if the new arming fired, that arming's own, the last; the kernel delivers
        // only the latter (its queued signal stands for the new arming's first expiry).
        let stale = std::mem::replace(&mut p.stale, false);
        if ks.len() > 1 {
            failures.push(format!("{here}: two kernel signals pending: {ks:?}"));
        }
        let cut = ts.len().saturating_sub(ks.len());
        let (old, ts_now) = ts.split_at(cut);
        match (stale, old.len()) {
            (false, 0) => {}
            (false, _) => failures.push(format!("{here}: two signals pending: {ks:?} {ts:?}")),
            (true, 0) => failures.push(format!("{here}: a signal pending at settime vanished")),
            (true, _) if due == 0 => self.tally.stale_settime += 1,
            (true, _) => self.tally.takeovers += 1,
        }
        let counts = ts_now.first().map(|s| 1 + s.overrun as u64);
        if ks.len() != ts_now.len() {
            failures.push(format!(
                "{here}: delivered: kernel {ks:?}, tempora {ts:?} (stale {stale}, {due} due)"
            ));
        }
        p.note(format!(
            "  kernel {ks:?} {k_other:?}, tempora {ts:?} {t_other:?}"
        ));
        if let Some(s) = ks.first() {
            self.tally.kernel_signals += 1;
            self.tally.late += u64::from(p.waited);
            p.k_sum += 1 + s.overrun as u64;
            p.k_last = s.overrun;
            if let Some(t) = ts_now.first() {
                self.tally.overrun_carried += u64::from(t.overrun > s.overrun);
                self.tally.overrun_waited += u64::from(t.overrun < s.overrun);
            }
        }
        self.tally.tempora_signals += (ts.len() + t_other.len()) as u64;
        if p.k_sum != due {
            failures.push(format!(
                "{here}: the kernel's signals count {} expiries, {due} due",
                p.k_sum
            ));
        }
        if let Some(n) = counts {
            p.t_sum += n;
            let hi = p.t_hi.unwrap_or(due);
            if !(p.t_lo < p.t_sum && p.t_sum <= hi) {
                failures.push(format!(
                    "{here}: tempora's signals count {} expiries, not in {}..={hi}",
                    p.t_sum,
                    p.t_lo + 1
                ));
            }
        }
        (p.t_lo, p.t_hi, p.waited) = (due, None, false);
        self.failures.append(&mut failures);
    }

    /// gettime and getoverrun of pair `i`, each half the time.
    fn readings(&mut self, step: u64, i: usize) {
        if self.rng.below(2) == 0 {
            let p = &self.pairs[i];
            let before = Instant::now();
            self.timers.poll();
            let kt = k::timer_gettime(p.kernel).unwrap();
            let tt = self.owner.gettime(p.tempora).unwrap().as_nanos();
            let dt = before.elapsed().as_nanos() as u64;
            let ok = distance(kt, tt) <= dt + p.skew + self.tol && kt.1 == tt.1;
            self.pairs[i].note(format!("  gettime: kernel {kt:?}, tempora {tt:?}"));
            if !ok {
                let what = format!("step {step}: gettime({i}): kernel {kt:?}, tempora {tt:?}");
                self.fail(what);
            }
        }
        if self.rng.below(2) == 0 {
            let p = &self.pairs[i];
            let kg = k::timer_getoverrun(p.kernel).unwrap();
            let tg = self.owner.getoverrun(p.tempora).unwrap();
            let (last, slack, interval) = (p.k_last, p.arming.probe_slack(), p.arming.interval);
            self.pairs[i].note(format!("  getoverrun: kernel {kg}, tempora {tg}"));
            self.tally.getoverruns += 1;
            self.tally.getoverrun_off += u64::from(tg != kg);
            if kg != last {
                self.fail(format!(
                    "step {step}: the kernel's getoverrun({i}) {kg}, its last si_overrun {last}"
                ));
            }
            if (tg - kg).abs() > slack {
                self.fail(format!(
                    "step {step}: getoverrun({i}) (interval {interval}): kernel {kg}, tempora {tg}"
                ));
            }
        }
    }

    /// After a disturbed step: every pair disarmed, its signals taken, its record restarted.
    fn resync(&mut self) {
        self.failures.clear();
        for (i, p) in self.pairs.iter_mut().enumerate() {
            k::timer_settime(p.kernel, 0, 0, 0).unwrap();
            self.owner
                .settime(
                    p.tempora,
                    SetFlags::RELATIVE,
                    Duration::ZERO,
                    Duration::ZERO,
                )
                .unwrap();
            for parity in 0..2 {
                take_all(ksig(i, parity));
                take_all(tsig(i, parity));
            }
            p.rearmed(Arming::default(), 0, false, false);
            p.gone = None;
        }
        let left = pending();
        for i in 0..PAIRS {
            for parity in 0..2 {
                assert!(
                    !member(&left, ksig(i, parity)) && !member(&left, tsig(i, parity)),
                    "stream {}: pair {i}: a disarmed timer's signal after the drain",
                    self.stream
                );
            }
        }
    }

    /// Compares `steps` undisturbed steps. After a disturbed step the grid restarts after a
    /// back-off that doubles with each disturbed step in a row (2 ms to 1.28 s), so a burst of
    /// load passes before the next try; disturbed steps never fail the run.
    fn run(mut self, steps: u64) -> Tally {
        let mut grid = Instant::now() + Duration::from_millis(5);
        let mut n = 0;
        let mut step = 0;
        let mut in_a_row = 0u32;
        while self.tally.compared_steps < steps {
            let start = grid + Duration::from_nanos(n * Q);
            step += 1;
            n += 1;
            std::thread::sleep(start.saturating_duration_since(Instant::now()));
            let r = if Instant::now() - start > Duration::from_nanos(Q / 4) {
                Err(format!("step {step}: began late"))
            } else {
                self.mutate(step, start).and_then(|()| {
                    let window = start + Duration::from_nanos(WINDOW);
                    std::thread::sleep(window.saturating_duration_since(Instant::now()));
                    self.observe(step, start)
                })
            };
            match r {
                Ok(()) => {
                    if !self.failures.is_empty() {
                        for (i, p) in self.pairs.iter().enumerate() {
                            eprintln!("pair {i}: {:#?}", p.log);
                        }
                        panic!("stream {}: {:#?}", self.stream, self.failures);
                    }
                    self.tally.compared_steps += 1;
                    in_a_row = 0;
                }
                Err(why) => {
                    self.tally.disturbed_steps += 1;
                    if self.tally.disturbed_steps <= 5 {
                        eprintln!("stream {}: disturbed, {why}", self.stream);
                    }
                    self.resync();
                    grid = Instant::now() + Duration::from_millis(2 << in_a_row.min(9));
                    in_a_row += 1;
                    n = 0;
                }
            }
        }
        for p in &self.pairs {
            k::timer_delete(p.kernel).unwrap();
            self.owner.delete(p.tempora).unwrap();
        }
        self.tally
    }
}

fn main() {
    let signals: Vec<i32> = (0..PAIRS)
        .flat_map(|i| [ksig(i, 0), ksig(i, 1), tsig(i, 0), tsig(i, 1)])
        .collect();
    assert!(signals.iter().all(|&s| s <= libc::SIGRTMAX()));
    let set = sigset(signals);
    // SAFETY: a valid set; before any thread starts, so every thread inherits the mask.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    assert_eq!(r, 0);
    let steps = std::env::var("TEMPORA_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let stream = std::env::var("TEMPORA_STREAM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let t = Run::new(stream).run(steps);
    eprintln!("stream {stream}: {t:?}");
    assert!(
        t.kernel_signals > 0 && t.late > 0,
        "the sequence tested too little"
    );
    println!(
        "ok: {} steps of signal timers agree with the kernel's ({} disturbed)",
        t.compared_steps, t.disturbed_steps
    );
}
