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
/// - Only the leader of the current session moves the fd (`cover`, checked against the
///   hand-over word under the lock): a leader replaced meanwhile cannot move the fd its
///   successor armed.
/// - A kick (a ring while the leader runs callbacks) lowers `floor`, and no arm of the
///   session goes later than `floor`: re-arming a timerfd discards a firing nobody has read
///   yet, so the leader's own arms must never undo a kick.
/// - `begin` resets `floor` before the leader sets its "in callbacks" flag, so a kick that
///   sees the flag is recorded after the reset (the lock orders them).
pub(crate) struct FdPlan {
    /// Set by `stop`: no arm after it.
    stopped: bool,
    /// Where the fd fires (monotonic ns; `NO_EXPIRY`: disarmed).
    armed: u64,
    /// The earliest kick of this session.
    floor: u64,
}

impl Default for FdPlan {
    fn default() -> Self {
        FdPlan {
            stopped: false,
            armed: NO_EXPIRY,
            floor: NO_EXPIRY,
        }
    }
}

impl FdPlan {
    /// A leader starts a session (before `Handover::enter`).
    pub(crate) fn begin(&mut self) {
        self.floor = NO_EXPIRY;
    }

    /// A ring at `at` (monotonic ns; 1 for "now") while the leader runs callbacks. Where to
    /// move the fd, if anywhere.
    pub(crate) fn kick(&mut self, at: u64) -> Option<u64> {
        self.floor = self.floor.min(at);
        self.set(at.min(self.armed))
    }

    /// The leader (holding `held` as read under the lock: `current`) wants a follower woken
    /// by `want`, and not before `soon` unless something needs it: where to move the fd.
    /// It moves earlier whenever it must, and later only if it would otherwise fire before
    /// `soon` (a hand-over nobody needs), never past a kick.
    pub(crate) fn cover(&mut self, held: u64, current: u64, want: u64, soon: u64) -> Option<u64> {
        if held != current {
            return None;
        }
        let target = want.min(self.floor);
        if self.armed > target || (self.armed < soon && self.armed < target) {
            self.set(target)
        } else {
            None
        }
    }

    /// The leader's session ended and it still leads: disarm.
    #[cfg_attr(loom, allow(dead_code))] // `Standby` is not modelled, its plan is
    pub(crate) fn end(&mut self) -> Option<u64> {
        self.set(NO_EXPIRY)
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
///
/// A follower idle for a while retires (`Crew::retire`) only if another thread still
/// follows, deciding under the same lock: a leader that saw a follower still has one when
/// the fd fires, and a leader that sees none counts in `started` only threads in callbacks,
/// which will come back to the list.
pub(crate) struct Crew<C> {
    /// Threads following (blocked on the fd, or about to be).
    pub(crate) following: AtomicUsize,
    /// Spares started and not retired (at most `DriverCounts::spare_limit`): the threads of
    /// the standby other than one. Raised only by the leader of the moment; lowered by a
    /// retiring follower, under the list's lock (`Crew::retire`).
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
    /// go on polling (after running the quick ones: `Crew::next`).
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

    /// A follower that waited `SPARE_IDLE` with no hand-over (`driver.rs`) asks to end: `true`
    /// (it no longer counts as following or started, and ends) if another thread follows
    /// still, `false` (it follows on) if it is the only one. Decided under the list's lock,
    /// which orders it with the leader's `next` (the struct's doc).
    pub(crate) fn retire(&self) -> bool {
        // Relaxed: as in `next`, under the list's lock.
        let _list = self.pending();
        if self.following.load(Ordering::Relaxed) < 2 {
            return false;
        }
        self.following.fetch_sub(1, Ordering::Relaxed);
        self.started.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// What the leader (`held`: the hand-over word it runs callbacks under, `None` while
    /// nobody stands by for it) or a replaced leader does next. A leader about to leave the
    /// list to the threads in callbacks first runs the calls that are `quick` (wake-ups: a
    /// waker must not block, and it is how an async task learns of a queue event or a sleep's
    /// end, which no callback may delay), unguarded.
    pub(crate) fn next(
        &self,
        held: Option<u64>,
        handover: &Handover,
        quick: impl Fn(&C) -> bool,
    ) -> Next<C> {
        // Relaxed: `following` is read, and written by a returning thread, under the list's
        // lock, which orders them; `started` is changed only by the leader of the moment.
        let mut pending = self.pending();
        if held.is_none() {
            if self.following.load(Ordering::Relaxed) > 0 {
                return Next::StandBy;
            }
            if self.started.load(Ordering::Relaxed) > 0 {
                let Some(call) = pending
                    .iter()
                    .position(quick)
                    .and_then(|i| pending.remove(i))
                else {
                    return Next::Leave;
                };
                return Next::Run(call, !pending.is_empty());
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
    /// A non-blocking timerfd on `CLOCK_MONOTONIC`, armed while the leader runs callbacks; the
    /// follower that reads its expiry takes over (`fd::wait_for`).
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
            fd: fd::timerfd(libc::CLOCK_MONOTONIC, true)?,
            plan: Default::default(),
        })
    }

    /// The leader's callbacks returned and it still leads (`Handover::leave`): disarms the fd.
    pub(crate) fn end(&self) {
        self.plan(&mut FdPlan::end);
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
                    match crew2.next(Some(held), &h2, |_| false) {
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
                match crew.next(None, &h, |_| false) {
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

    /// Two followers grow idle and both ask to retire while the leader, with a call in the
    /// list, decides what to do: one follower at most retires, so the leader always finds one
    /// to stand by (a retirement that left none after the leader counted one would leave its
    /// blocked call with nobody to take over), and `started` falls with each retirement.
    /// Checking the count outside the list's lock, or letting the last follower retire, fails
    /// this model.
    #[test]
    fn loom_crew_a_retiring_follower_never_leaves_the_leader_unguarded() {
        loom::model(|| {
            let crew = Arc::new(Crew::<u32>::default());
            crew.started.store(2, Ordering::Relaxed);
            crew.following.store(2, Ordering::Relaxed);
            let h = Handover::default();
            let retiring: Vec<_> = (0..2)
                .map(|_| {
                    let crew = crew.clone();
                    loom::thread::spawn(move || crew.retire())
                })
                .collect();
            crew.pending().push_back(7);
            let next = crew.next(None, &h, |_| false);
            assert!(matches!(next, Next::StandBy), "the leader told {next:?}");
            let retired = retiring
                .into_iter()
                .map(|t| usize::from(t.join().unwrap()))
                .sum::<usize>();
            assert_eq!(retired, 1, "{retired} of two followers retired");
            assert_eq!(crew.following.load(Ordering::Relaxed), 1);
            assert_eq!(crew.started.load(Ordering::Relaxed), 1);
        });
    }

    /// A follower that grows idle while the one other spare of the standby runs a callback
    /// does not retire: the leader, seeing it follow, stands it by, and a retirement there
    /// would leave nobody to take over.
    #[test]
    fn loom_crew_the_last_follower_does_not_retire() {
        loom::model(|| {
            let crew = Arc::new(Crew::<u32>::default());
            crew.started.store(2, Ordering::Relaxed);
            crew.following.store(1, Ordering::Relaxed);
            let h = Handover::default();
            let crew2 = crew.clone();
            let retiring = loom::thread::spawn(move || crew2.retire());
            crew.pending().push_back(7);
            let next = crew.next(None, &h, |_| false);
            assert!(matches!(next, Next::StandBy), "the leader told {next:?}");
            assert!(!retiring.join().unwrap(), "the last follower retired");
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
    /// with its next call and asks for the fd at 200: it must not move the fd its successor
    /// armed. (A replaced leader that disarmed the fd made a timer wait for a blocked call;
    /// dropping the check of who leads fails this model.)
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
            let took = spare.join().unwrap();
            if took {
                assert_eq!(m.armed(), 50, "the replaced leader moved the fd");
            } else {
                assert_eq!(m.armed(), 200);
            }
        });
    }
}
