//! A driver's standby while it runs callbacks ("Callbacks that block" in `driver.rs`, which
//! runs the protocol): who leads (`Handover`), the spares' timerfd, and the callbacks not run
//! yet. Kept apart from `driver.rs` so that `Core`, which holds a standby per driver and kicks
//! it on a ring, does not depend on the drivers' loop.

use super::base::Doorbell;
#[cfg(not(loom))]
use super::fd;
#[cfg(not(loom))]
use super::serial::Call;
use crate::sync::{fence, AtomicU64, Ordering};
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

/// Driver `k`'s standby ("Callbacks that block" in the module doc): the spares following it,
/// the timerfd they wait on, and the callbacks it has not run yet.
#[cfg(not(loom))]
pub(crate) struct Standby {
    /// Who leads: `Handover`.
    pub(super) state: Handover,
    /// Threads following (blocked on `fd`, or about to be).
    pub(super) following: std::sync::atomic::AtomicUsize,
    /// Spares started for this driver (at most `Core::spare_limit`).
    pub(super) started: std::sync::atomic::AtomicUsize,
    /// Callbacks collected and not yet run: whoever leads or led runs them, one at a time.
    pending: std::sync::Mutex<std::collections::VecDeque<Call>>,
    /// A blocking timerfd on `CLOCK_MONOTONIC`, armed at the leader's deadline while it runs
    /// callbacks; a follower blocked reading it takes over when it fires.
    pub(super) fd: OwnedFd,
    /// Set by `stop`: every arm of `fd` is made under this lock, and none after it is set,
    /// so a leader finishing its callbacks cannot disarm the fd the stop left firing.
    stopped: std::sync::Mutex<bool>,
}

#[cfg(not(loom))]
impl Standby {
    pub(crate) fn new() -> std::io::Result<Standby> {
        Ok(Standby {
            state: Default::default(),
            following: Default::default(),
            started: Default::default(),
            pending: Default::default(),
            fd: fd::timerfd(libc::CLOCK_MONOTONIC, false)?,
            stopped: std::sync::Mutex::new(false),
        })
    }

    /// Arms (or with `ns == 0` disarms) the fd, unless the service stopped.
    pub(super) fn arm(&self, flags: libc::c_int, ns: u64) {
        // Nothing panics under this lock (a system call): a poisoned one is intact.
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*stopped {
            fd::arm(&self.fd, flags, ns);
        }
    }

    /// An arm rang the driver: if it is running callbacks, a follower takes over now.
    pub(crate) fn kick(&self) {
        // After the ring's SeqCst increment: either this sees the flag or the leader sees
        // the ring (`Handover::enter`).
        if self.state.in_callbacks() {
            self.arm(0, 1);
        }
    }

    /// The service stops: every follower wakes (the fd fires every millisecond until closed).
    pub(crate) fn stop(&self) {
        let mut stopped = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *stopped = true;
        fd::arm_every(&self.fd, 1_000_000);
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<Call>> {
        // Nothing panics under this lock (a push, a pop): a poisoned one is intact.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use loom::sync::Arc;

    /// A leader about to run callbacks races an arm that rings its doorbell (after the
    /// leader's token): the leader sees the ring or the ringer sees the leader in callbacks,
    /// so the spare's timerfd is fired by one of them. Removing either SeqCst fence fails
    /// it. (The first version used SeqCst loads and stores instead of fences, which the
    /// memory model also allows; loom models SeqCst accesses as acquire/release only, so it
    /// could not check that one.)
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
}
