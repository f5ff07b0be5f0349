//! A driver's standby while it runs callbacks ("Callbacks that block" in `driver.rs`, which
//! runs the protocol): who leads (`Handover`), the spares' timerfd, and the callbacks not run
//! yet. Kept apart from `driver.rs` so that the wake-ups (`wake.rs`), which hold a standby per
//! driver and kick it on a ring, do not depend on the drivers' loop.

use super::doorbell::{Doorbell, NO_EXPIRY};
#[cfg(not(loom))]
use super::fd;
#[cfg(not(loom))]
use super::serial::Call;
use crate::sync::{fence, rank, AtomicU64, AtomicUsize, MutexGuard, Ordering, RankedMutex};
use std::collections::VecDeque;
#[cfg(not(loom))]
use std::os::fd::OwnedFd;

/// The hand-over word of a driver's standby: `generation << 1 | IN_CALLBACKS`. The leader
/// sets `IN_CALLBACKS` before it runs callbacks and clears it after (a compare-exchange that
/// fails if a spare took over); a spare takes over with a compare-exchange that clears it and
/// bumps the generation, so a leader's clear can never succeed after a take-over, even once
/// the new leader has set the flag again. Loom: `loom_handover_*` below.
#[derive(Default)]
pub(crate) struct Handover {
    state: AtomicU64,
}

const IN_CALLBACKS: u64 = 1;

impl Handover {
    /// The leader is about to run callbacks: sets the flag, then re-reads the doorbell, with
    /// a SeqCst fence between, as the ringer has between its ring and `in_callbacks` (store
    /// buffering: with the two fences, one of the two sees the other). The word to `leave`
    /// with, and whether the doorbell rang since `token` (an arm earlier than the deadline
    /// the leader published).
    pub(crate) fn enter(&self, bell: &Doorbell, token: u64) -> (u64, bool) {
        let held = self.state.load(Ordering::Relaxed) | IN_CALLBACKS;
        self.state.store(held, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        (held, bell.seq_after_fence() != token)
    }

    /// The leader's callbacks returned: `true` if it still leads.
    pub(crate) fn leave(&self, held: u64) -> bool {
        self.state
            .compare_exchange(
                held,
                held & !IN_CALLBACKS,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// A ringer's check, after its ring: is the leader running callbacks? (The fence: see
    /// `enter`.)
    pub(crate) fn in_callbacks(&self) -> bool {
        fence(Ordering::SeqCst);
        self.state.load(Ordering::Relaxed) & IN_CALLBACKS != 0
    }

    /// The word as it is now (read under the standby's plan lock, to check who leads).
    pub(crate) fn word(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// A spare woken by the fd: takes over if the leader is still running callbacks.
    pub(crate) fn take_over(&self) -> bool {
        let cur = self.state.load(Ordering::SeqCst);
        cur & IN_CALLBACKS != 0
            && self
                .state
                .compare_exchange(
                    cur,
                    (cur + 2) & !IN_CALLBACKS,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

/// Where the spares' timerfd fires, kept under one lock with the fd's arms so that what the
/// fd does is what this says. Its rules are apart from the system call so that loom can
/// check them (`loom_fd_*` below).
///
/// A session (the leader's callbacks of one wake-up, `begin` to `end`) wants the fd at its
/// next deadline plus a lag (`driver.rs`, "Callbacks that block"), and the fd stays there
/// after the session: the leader wakes by that deadline, before the fd fires, and its next
/// session moves the fd once, from the old rest to the new one. A session therefore costs
/// one arm, not an arm and a disarm. A firing nobody needs (a leader that woke later than
/// the lag) finds nobody in callbacks: the spare waits again.
///
/// - Only the leader moves the fd: in a session, checked against the hand-over word under
///   the lock (`cover`), so a leader replaced meanwhile cannot move the fd its successor
///   armed; outside one (`end`, `idle`), only the thread that still leads calls it.
/// - A kick (a ring while the leader runs callbacks) lowers `floor`, and no arm of the
///   session goes later than `floor`: re-arming a timerfd discards a firing nobody has read
///   yet, so the leader's own arms must never undo a kick. Once the leader is out of its
///   callbacks (`end`), its own sleep answers the ring, and the fd may move past the kick.
/// - `begin` resets `floor` before the leader sets its "in callbacks" flag, so a kick that
///   sees the flag is recorded after the reset (the lock orders them).
pub(crate) struct FdPlan {
    /// Set by `stop`: no arm after it.
    stopped: bool,
    /// Where the fd fires (monotonic ns; `NO_EXPIRY`: disarmed).
    armed: u64,
    /// The earliest kick of this session.
    floor: u64,
    /// `armed` was set before this session (the rest an earlier one left): the session's
    /// first `cover` moves it to what this one wants, later as well as earlier.
    stale: bool,
}

impl Default for FdPlan {
    fn default() -> Self {
        FdPlan {
            stopped: false,
            armed: NO_EXPIRY,
            floor: NO_EXPIRY,
            stale: false,
        }
    }
}

impl FdPlan {
    /// A leader starts a session (before `Handover::enter`).
    pub(crate) fn begin(&mut self) {
        self.floor = NO_EXPIRY;
        self.stale = true;
    }

    /// A ring at `at` (monotonic ns; 1 for "now") while the leader runs callbacks. Where to
    /// move the fd, if anywhere.
    pub(crate) fn kick(&mut self, at: u64) -> Option<u64> {
        self.floor = self.floor.min(at);
        self.set(at.min(self.armed))
    }

    /// The leader (holding `held` as read under the lock: `current`) wants a follower woken
    /// by `want`, and not before `soon` unless something needs it: where to move the fd.
    /// It moves earlier whenever it must, and later only if its place is an earlier
    /// session's rest or it would otherwise fire before `soon` (a hand-over nobody needs),
    /// never past a kick.
    pub(crate) fn cover(&mut self, held: u64, current: u64, want: u64, soon: u64) -> Option<u64> {
        if held != current {
            return None;
        }
        let stale = std::mem::take(&mut self.stale);
        let target = want.min(self.floor);
        if self.armed > target || (self.armed < target && (stale || self.armed < soon)) {
            self.set(target)
        } else {
            None
        }
    }

    /// The leader's session ended and it still leads; it sleeps until a deadline, and `rest`
    /// is that deadline plus the lag: the fd stays where it is unless it would fire before
    /// `rest` (a kick's place, a grace), where it moves to `rest`.
    pub(crate) fn end(&mut self, rest: u64) -> Option<u64> {
        if self.armed < rest {
            self.set(rest)
        } else {
            None
        }
    }

    /// The leader, outside any session, woke and runs no callbacks (`rest`: as for `end`):
    /// a fd that would fire before `rest` is disarmed, so that a run of wake-ups without
    /// callbacks moves it once, not once each.
    #[cfg_attr(loom, allow(dead_code))] // the driver's (`lead_calls`), which loom does not build
    pub(crate) fn idle(&mut self, rest: u64) -> Option<u64> {
        if self.armed < rest {
            self.set(NO_EXPIRY)
        } else {
            None
        }
    }

    fn set(&mut self, at: u64) -> Option<u64> {
        if self.stopped || at == self.armed {
            return None;
        }
        self.armed = at;
        Some(at)
    }
}

/// The steps that move a standby's fd, written once for [`Standby`] and for the loom model of
/// it (`tests`), so that the model checks the order `Standby` takes them in: an implementation
/// gives the hand-over word and runs a closure on its plan under the plan's lock, moving the
/// fd where the closure says (the model only records it).
pub(crate) trait Steps {
    /// Who leads.
    fn handover(&self) -> &Handover;

    /// Runs `f` on the plan under its lock and moves the fd where `f` says, if anywhere.
    fn plan(&self, f: &mut dyn FnMut(&mut FdPlan) -> Option<u64>);

    /// The leader is about to run callbacks (with the doorbell's `token` from before its
    /// poll): the word to `leave` with. A ring since the token fires the fd at once.
    fn begin(&self, bell: &Doorbell, token: u64) -> u64 {
        self.plan(&mut |p| {
            p.begin();
            None
        });
        let (held, rung) = self.handover().enter(bell, token);
        if rung {
            // An arm from another thread, earlier than the deadline published.
            self.plan(&mut |p| p.kick(1));
        }
        held
    }

    /// The leader holding `held` wants the fd to fire by `want` (monotonic ns), and not
    /// before `soon` unless a kick asks for it (`FdPlan::cover`).
    fn cover(&self, held: u64, want: u64, soon: u64) {
        let h = self.handover();
        self.plan(&mut |p| p.cover(held, h.word(), want, soon));
    }

    /// The leader's session ended and it still leads (`Handover::leave`): the fd rests, by
    /// `rest` (monotonic ns: the deadline it sleeps until plus the lag) at the earliest
    /// (`FdPlan::end`).
    fn end(&self, rest: u64) {
        self.plan(&mut |p| p.end(rest));
    }

    /// The leader woke and runs no callbacks, and sleeps next until `rest` less the lag
    /// (`FdPlan::idle`).
    #[cfg_attr(loom, allow(dead_code))] // the driver's (`lead_calls`), which loom does not build
    fn idle(&self, rest: u64) {
        self.plan(&mut |p| p.idle(rest));
    }

    /// An arm at `at` (monotonic ns; 1: at once) rang the driver: if it is running
    /// callbacks, the fd fires by then, so a follower takes over if they still run.
    fn kick(&self, at: u64) {
        // After the ring's SeqCst increment: either this sees the flag or the leader sees
        // the ring (`Handover::enter`).
        if self.handover().in_callbacks() {
            self.plan(&mut |p| p.kick(at));
        }
    }
}

/// How far past the leader's next deadline its standby's fd rests (`FdPlan`), fitted to how
/// late the leader wakes: the fd firing while nobody runs callbacks (the leader woke later
/// than the lag) wakes a spare for nothing, so each such firing doubles the lag, up to a
/// cap; `QUIET_WAKE_UPS` wake-ups without one halve it, down to its least.
///
/// Only the leader of the moment calls `next` (once per wake-up, before its callbacks if
/// any; a replaced leader never again), spares `stale`. Relaxed throughout: the lag is a tuning,
/// and a stale count read late only changes it a wake-up later.
#[cfg(not(loom))]
#[derive(Default)]
pub(crate) struct Lag {
    /// The lag of the last wake-up (ns; 0: not set yet).
    lag: AtomicU64,
    /// Firings a spare found nobody in callbacks for (`stale`).
    stale: AtomicU64,
    /// `stale` as the leader last read it.
    seen: AtomicU64,
    /// Wake-ups since the lag last changed or a stale firing.
    quiet: AtomicU64,
}

/// Wake-ups without a stale firing that halve a raised lag.
#[cfg(not(loom))]
const QUIET_WAKE_UPS: u64 = 256;

#[cfg(not(loom))]
impl Lag {
    /// A spare's fd fired and nobody ran callbacks.
    pub(crate) fn stale(&self) {
        self.stale.fetch_add(1, Ordering::Relaxed);
    }

    /// The lag for this wake-up, between `least` and `cap` (ns).
    pub(crate) fn next(&self, least: u64, cap: u64) -> u64 {
        let mut lag = self.lag.load(Ordering::Relaxed).clamp(least, cap);
        let stale = self.stale.load(Ordering::Relaxed);
        let mut quiet = self.quiet.load(Ordering::Relaxed) + 1;
        if stale != self.seen.load(Ordering::Relaxed) {
            self.seen.store(stale, Ordering::Relaxed);
            lag = lag.saturating_mul(2).min(cap);
            quiet = 0;
        } else if quiet >= QUIET_WAKE_UPS {
            lag = (lag / 2).max(least);
            quiet = 0;
        }
        self.quiet.store(quiet, Ordering::Relaxed);
        self.lag.store(lag, Ordering::Relaxed);
        lag
    }
}

/// The threads of a driver's standby other than its leader, and the calls none has run yet
/// (`C`: a `Call`; the loom models use numbers). Who runs a call, and when a thread follows,
/// is decided here under the list's lock, written once for the driver and its loom model
/// (`loom_crew_*` below).
///
/// The rule it keeps ("Callbacks that block" in `driver.rs`): a call is never left in the
/// list while every thread of the standby but the leader waits on the fd. The leader, with
/// nobody following as it looks (under the lock), leaves the calls only if a spare exists,
/// all of them then in callbacks; a thread back from its callbacks finds the list empty and
/// counts itself as following under the same lock. So the leader sees it following (and
/// stands it by), or it sees the leader's calls (and runs them).
pub(crate) struct Crew<C> {
    /// Threads following (blocked on the fd, or about to be).
    pub(crate) following: AtomicUsize,
    /// Spares started (at most `DriverCounts::spare_limit`); they stay until the service
    /// stops. Changed only by the leader of the moment.
    pub(crate) started: AtomicUsize,
    /// Calls collected and not yet run.
    pending: RankedMutex<VecDeque<C>, { rank::PENDING }>,
}

impl<C> Default for Crew<C> {
    fn default() -> Self {
        Crew {
            following: Default::default(),
            started: Default::default(),
            pending: Default::default(),
        }
    }
}

/// What a thread of the standby does next (`Crew::next`).
#[derive(Debug)]
pub(crate) enum Next<C> {
    /// Run this call; `true`: more wait behind it.
    Run(C, bool),
    /// (The leader, unguarded.) A thread follows now: stand it by, then ask again.
    StandBy,
    /// (The leader, unguarded.) Every spare is in a callback: leave the calls to them and
    /// go on polling.
    Leave,
    /// The list is empty: `true` if the thread (still) leads, `false` if it was replaced and
    /// now counts as following.
    Done(bool),
}

impl<C> Crew<C> {
    /// The list, poisoned or not: nothing panics under its lock (a push, a pop).
    pub(crate) fn pending(&self) -> MutexGuard<'_, VecDeque<C>, { rank::PENDING }> {
        self.pending.lock_or_recover()
    }

    /// What the leader (`held`: the hand-over word it runs callbacks under, `None` while
    /// nobody stands by for it) or a replaced leader does next. (The list holds callbacks
    /// only: a poll runs the wake-ups of async tasks itself, `Core::poll_collect`.)
    pub(crate) fn next(&self, held: Option<u64>, handover: &Handover) -> Next<C> {
        // Relaxed: `following` is read, and written by a returning thread, under the list's
        // lock, which orders them; `started` is changed only by the leader of the moment.
        let mut pending = self.pending();
        if held.is_none() {
            if self.following.load(Ordering::Relaxed) > 0 {
                return Next::StandBy;
            }
            if self.started.load(Ordering::Relaxed) > 0 {
                return Next::Leave;
            }
            // No other thread (the OS refused every spare): the leader runs it, unguarded.
        }
        match pending.pop_front() {
            Some(call) => Next::Run(call, !pending.is_empty()),
            None => Next::Done(match held {
                None => true,
                Some(held) => {
                    let kept = handover.leave(held);
                    if !kept {
                        self.following.fetch_add(1, Ordering::Relaxed);
                    }
                    kept
                }
            }),
        }
    }
}

/// Driver `k`'s standby ("Callbacks that block" in the module doc): the spares following it,
/// the timerfd they wait on, and the callbacks it has not run yet.
#[cfg(not(loom))]
pub(crate) struct Standby {
    /// Who leads: `Handover`.
    pub(super) state: Handover,
    /// The threads following or in callbacks, and the callbacks collected and not yet run:
    /// whoever leads or led runs them, one at a time each.
    pub(super) crew: Crew<Call>,
    /// Times a leader with no follower to stand by left its callbacks in the list for the
    /// threads in callbacks to run as they return (`driver.rs`, "Callbacks that block").
    pub(crate) deferred: std::sync::atomic::AtomicU64,
    /// How far past the leader's next deadline `fd` rests.
    pub(super) lag: Lag,
    /// A blocking timerfd on `CLOCK_MONOTONIC`, armed while the leader runs callbacks and
    /// left at the leader's next deadline plus the lag after (`FdPlan`); a follower blocked
    /// reading it takes over when it fires while the leader still runs callbacks.
    pub(super) fd: OwnedFd,
    /// Where `fd` fires; every arm of it is made under this lock.
    plan: RankedMutex<FdPlan, { rank::PLAN }>,
}

#[cfg(not(loom))]
impl Steps for Standby {
    fn handover(&self) -> &Handover {
        &self.state
    }

    fn plan(&self, f: &mut dyn FnMut(&mut FdPlan) -> Option<u64>) {
        // Nothing panics under this lock (arithmetic and a system call): a poisoned one is
        // intact.
        let mut plan = self.plan.lock_or_recover();
        match f(&mut plan) {
            Some(NO_EXPIRY) => fd::arm(&self.fd, 0, 0),
            Some(at) => fd::arm(&self.fd, libc::TFD_TIMER_ABSTIME, at.max(1)),
            None => true,
        };
    }
}

#[cfg(not(loom))]
impl Standby {
    pub(crate) fn new() -> std::io::Result<Standby> {
        Ok(Standby {
            state: Default::default(),
            crew: Crew::default(),
            deferred: Default::default(),
            lag: Lag::default(),
            fd: fd::timerfd(libc::CLOCK_MONOTONIC, false)?,
            plan: Default::default(),
        })
    }

    /// The service stops: every follower wakes (the fd fires every millisecond until closed).
    pub(crate) fn stop(&self) {
        let mut plan = self.plan.lock_or_recover();
        plan.stopped = true;
        fd::arm_every(&self.fd, 1_000_000);
    }

    pub(super) fn pending(&self) -> MutexGuard<'_, VecDeque<Call>, { rank::PENDING }> {
        self.crew.pending()
    }
}

/// The fd's moves over a driver's wake-ups, in the order `lead_calls` (`driver.rs`) takes
/// the steps, one thread: what each wake-up costs in `timerfd_settime`, and where the fd
/// rests while the leader sleeps.
#[cfg(all(test, not(loom)))]
mod plan_tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    const LAG: u64 = 500;

    #[derive(Default)]
    struct Counted {
        bell: Doorbell,
        h: Handover,
        plan: RefCell<FdPlan>,
        moves: Cell<u32>,
    }

    impl Steps for Counted {
        fn handover(&self) -> &Handover {
            &self.h
        }
        fn plan(&self, f: &mut dyn FnMut(&mut FdPlan) -> Option<u64>) {
            if f(&mut self.plan.borrow_mut()).is_some() {
                self.moves.set(self.moves.get() + 1);
            }
        }
    }

    impl Counted {
        /// A wake-up at `now` whose poll published `next` and collected `calls` callbacks
        /// (each run at once): the fd's moves, and asserts it rests no earlier than `next`
        /// plus the lag.
        fn wake_up(&self, now: u64, next: u64, calls: usize) -> u32 {
            let before = self.moves.get();
            let rest = next + LAG;
            if calls == 0 {
                self.idle(rest);
            } else {
                let held = self.begin(&self.bell, self.bell.token());
                for i in 0..calls {
                    let more = i + 1 < calls;
                    let want = if more { rest.min(now + 2 * LAG) } else { rest };
                    self.cover(held, want, now + LAG);
                }
                assert!(self.h.leave(held));
                self.end(rest);
            }
            let armed = self.plan.borrow().armed;
            assert!(
                armed >= rest,
                "the fd fires at {armed} before the leader wakes at {next}"
            );
            self.moves.get() - before
        }
    }

    /// Every wake-up runs one callback: one move each (the session's first `cover`, from
    /// the last rest to the next), none at the end of the session.
    #[test]
    fn a_wake_up_with_a_callback_moves_the_standby_fd_once() {
        let c = Counted::default();
        for i in 1..=100 {
            assert_eq!(c.wake_up(i * 5_000, (i + 1) * 5_000, 1), 1, "wake-up {i}");
        }
        // Deadlines closer together than the lag: still one.
        for i in 0..100 {
            let now = 600_000 + i * 100;
            assert_eq!(c.wake_up(now, now + 100, 1), 1, "close wake-up {i}");
        }
    }

    /// A stale firing doubles the lag at the next wake-up, up to the cap; quiet wake-ups
    /// bring it back down to its least.
    #[test]
    fn the_standby_lag_grows_with_stale_firings_and_shrinks_without() {
        let lag = Lag::default();
        assert_eq!(lag.next(1_000, 16_000), 1_000);
        lag.stale();
        assert_eq!(lag.next(1_000, 16_000), 2_000);
        assert_eq!(lag.next(1_000, 16_000), 2_000);
        for _ in 0..10 {
            lag.stale();
            lag.next(1_000, 16_000);
        }
        assert_eq!(lag.next(1_000, 16_000), 16_000);
        let mut at = 16_000;
        for _ in 0..5 * QUIET_WAKE_UPS {
            at = lag.next(1_000, 16_000);
        }
        assert_eq!(at, 1_000);
    }

    /// Wake-ups with and without callbacks in turn, and batches: at most one move per
    /// wake-up with at most one call, none for a run of wake-ups without callbacks after
    /// the first.
    #[test]
    fn wake_ups_without_callbacks_leave_the_standby_fd_alone() {
        let c = Counted::default();
        let mut now = 5_000;
        for calls in [1, 0, 1, 0, 0, 0, 1, 1, 0] {
            let moved = c.wake_up(now, now + 5_000, calls);
            assert!(moved <= 1, "{moved} moves for a wake-up with {calls} calls");
            now += 5_000;
        }
        for _ in 0..10 {
            assert_eq!(c.wake_up(now, now + 5_000, 0), 0);
            now += 5_000;
        }
        // A batch of three quick calls: the grace once, then the rest.
        assert_eq!(c.wake_up(now, now + 5_000, 3), 2);
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use loom::sync::Arc;

    /// A leader about to run callbacks races an arm that rings its doorbell (after the
    /// leader's token): the leader sees the ring or the ringer sees the leader in callbacks,
    /// so the spare's timerfd is fired by one of them. Removing either SeqCst fence fails
    /// it. (SeqCst loads and stores in place of the fences would be correct too, but loom
    /// models SeqCst accesses as acquire/release only, so it could not check that form.)
    #[test]
    fn loom_handover_a_ring_is_never_missed() {
        loom::model(|| {
            let bell = Arc::new(Doorbell::default());
            let h = Arc::new(Handover::default());
            let token = bell.token();
            let (bell2, h2) = (bell.clone(), h.clone());
            let ringer = loom::thread::spawn(move || {
                bell2.ring();
                h2.in_callbacks()
            });
            let (held, rung) = h.enter(&bell, token);
            let saw = ringer.join().unwrap();
            assert!(rung || saw, "the ring was missed by both");
            assert!(h.leave(held));
        });
    }

    /// A spare woken by the timerfd races the leader returning from its callbacks: exactly
    /// one leads afterwards, and a leader replaced once cannot clear the flag of the new
    /// leader's own callbacks.
    #[test]
    fn loom_handover_exactly_one_leads() {
        loom::model(|| {
            let bell = Doorbell::default();
            let h = Arc::new(Handover::default());
            let (held, _) = h.enter(&bell, bell.token());
            let h2 = h.clone();
            let spare = loom::thread::spawn(move || {
                let took = h2.take_over();
                if took {
                    // The new leader runs callbacks of its own.
                    let bell = Doorbell::default();
                    let (held2, _) = h2.enter(&bell, bell.token());
                    (true, Some(held2))
                } else {
                    (false, None)
                }
            });
            let kept = h.leave(held);
            let (took, held2) = spare.join().unwrap();
            assert!(kept != took, "kept {kept}, took {took}");
            if let Some(held2) = held2 {
                assert!(h.leave(held2), "the new leader lost its own flag");
            }
        });
    }

    /// A leader replaced while in a callback comes back to an empty list, while the new
    /// leader, with nobody standing by for it and the one spare cap reached, puts a call in
    /// the list and decides what to do. The call is run by the returning thread, or the
    /// leader sees that thread following and stands it by (then runs the call itself):
    /// never left in the list with both threads idle. Counting the returning thread as
    /// following after the list's lock instead of under it fails this model.
    #[test]
    fn loom_crew_a_call_is_never_left_with_every_thread_idle() {
        loom::model(|| {
            let crew = Arc::new(Crew::<u32>::default());
            crew.started.store(1, Ordering::Relaxed);
            let h = Arc::new(Handover::default());
            let bell = Doorbell::default();
            // The old leader ran a callback under `held` and was replaced.
            let (held, _) = h.enter(&bell, bell.token());
            assert!(h.take_over());
            let (crew2, h2) = (crew.clone(), h.clone());
            let returning = loom::thread::spawn(move || {
                let mut ran = 0;
                loop {
                    match crew2.next(Some(held), &h2) {
                        Next::Run(_, _) => ran += 1,
                        Next::Done(kept) => {
                            assert!(!kept, "a replaced leader kept the lead");
                            return ran;
                        }
                        other => panic!("a replaced leader told {other:?}"),
                    }
                }
            });
            crew.pending().push_back(7);
            let stood_by = loop {
                match crew.next(None, &h) {
                    Next::StandBy => break true,
                    Next::Leave => break false,
                    other => panic!("the leader told {other:?} with a spare in a callback"),
                }
            };
            let ran = returning.join().unwrap();
            let left = crew.pending().len();
            assert!(
                ran == 1 || (stood_by && left == 1),
                "ran {ran}, stood by {stood_by}, {left} left in the list"
            );
            if !stood_by {
                assert_eq!(left, 0, "a call left with every thread idle");
            }
        });
    }

    /// The standby's fd as `Standby` moves it (the same `Steps`), with its plan under a loom
    /// lock and the fd's moves only recorded.
    struct Model {
        bell: Doorbell,
        h: Handover,
        plan: RankedMutex<FdPlan, { rank::PLAN }>,
    }

    impl Model {
        fn new() -> Arc<Model> {
            Arc::new(Model {
                bell: Doorbell::default(),
                h: Handover::default(),
                plan: RankedMutex::new(FdPlan::default()),
            })
        }
        fn armed(&self) -> u64 {
            self.plan.lock().unwrap().armed
        }
    }

    impl Steps for Model {
        fn handover(&self) -> &Handover {
            &self.h
        }
        fn plan(&self, f: &mut dyn FnMut(&mut FdPlan) -> Option<u64>) {
            f(&mut self.plan.lock().unwrap());
        }
    }

    /// A leader starting its callbacks races an arm due at 10 that rings its doorbell; the
    /// leader then arms the fd for its own deadline (100). Whatever the order, the fd ends
    /// up firing by 10: the leader saw the ring, or the kick lowered the session's floor,
    /// which the leader's later arm does not go past. (A kick overwritten by the leader's
    /// arm made a timer wait for the deadline; removing the floor fails this model.)
    #[test]
    fn loom_fd_a_kick_is_never_undone_by_the_leader() {
        loom::model(|| {
            let m = Model::new();
            let token = m.bell.token();
            let m2 = m.clone();
            let ringer = loom::thread::spawn(move || {
                m2.bell.ring();
                m2.kick(10);
            });
            let held = m.begin(&m.bell, token);
            // Its call starts at 0 with nothing queued behind it: a fire before 20 would be
            // a hand-over nobody needs, unless a kick asked for it.
            m.cover(held, 100, 20);
            ringer.join().unwrap();
            assert!(m.armed() <= 10, "the fd fires at {}", m.armed());
        });
    }

    /// A leader replaced by a spare (which arms the fd at 50 for its own callbacks) goes on
    /// with its next call and asks for the fd at 200, then ends its session, resting the fd
    /// at 300 if it still leads: it must not move the fd its successor armed. (A replaced
    /// leader that disarmed the fd made a timer wait for a blocked call; dropping the check
    /// of who leads, or resting the fd after a failed `leave`, fails this model.)
    #[test]
    fn loom_fd_a_replaced_leader_does_not_move_the_fd() {
        loom::model(|| {
            let m = Model::new();
            let held = m.begin(&m.bell, m.bell.token());
            m.cover(held, 100, 0);
            let m2 = m.clone();
            let spare = loom::thread::spawn(move || {
                if m2.h.take_over() {
                    let held2 = m2.begin(&m2.bell, m2.bell.token());
                    m2.cover(held2, 50, 0);
                    true
                } else {
                    false
                }
            });
            // Its next call starts at 150 with nothing queued behind it.
            m.cover(held, 200, 175);
            let kept = m.h.leave(held);
            if kept {
                m.end(300);
            }
            let took = spare.join().unwrap();
            assert!(kept != took, "kept {kept}, took {took}");
            if took {
                assert_eq!(m.armed(), 50, "the replaced leader moved the fd");
            } else {
                assert_eq!(m.armed(), 300, "the fd does not rest at the next deadline");
            }
        });
    }

    /// The fd left armed by the leader's last wake-up (resting at 60) while its next
    /// session, due to end by 100, starts and races an arm due at 10 that rings it. The
    /// session's first `cover` moves the fd later, from the old rest to 100, but never past
    /// the kick: while the leader is in callbacks the fd fires by 10. Once it is out (its
    /// sleep answers the ring), the fd rests at its next deadline plus the lag (150).
    /// Removing the kick's floor from that first move fails this model: the timer due at 10
    /// would wait for the callbacks.
    #[test]
    fn loom_fd_a_rest_moved_later_never_undoes_a_kick() {
        loom::model(|| {
            let m = Model::new();
            m.plan(&mut |p| p.end(60));
            let token = m.bell.token();
            let m2 = m.clone();
            let ringer = loom::thread::spawn(move || {
                m2.bell.ring();
                m2.kick(10);
            });
            let held = m.begin(&m.bell, token);
            // Its call starts at 0 with nothing queued behind it.
            m.cover(held, 100, 20);
            ringer.join().unwrap();
            assert!(m.armed() <= 10, "the fd fires at {}", m.armed());
            assert!(m.h.leave(held));
            m.end(150);
            assert_eq!(m.armed(), 150, "the fd does not rest at the next deadline");
            assert_ne!(m.bell.token(), token, "the leader's sleep misses the ring");
        });
    }
}
