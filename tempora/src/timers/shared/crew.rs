//! A driver's crew: its threads (the driver and the spares it started), the callbacks none has
//! run yet, and the rule that decides who runs them ("Callbacks that block" in `driver.rs`,
//! which runs it). Written once over any call type, so that the loom models below check the
//! rule the driver uses (`C`: a `Call` there, numbers here).
//!
//! **The rule: a callback starts only while another thread of the crew follows** (waits on
//! the alarm, or is about to), so that thread wakes when the next timer falls due however long
//! the callback blocks. With nobody following, the thread about to run a call starts a spare
//! (up to the cap) and asks again; if none may start and spares exist (every one in a
//! callback), it leaves the calls in the list and follows: a thread back from its callback
//! runs the list before it follows again. Only a crew that has no other thread at all (a cap
//! of 0, or the OS refused every spare) runs its calls unguarded.
//!
//! A call is never left in the list while every thread follows: the thread that leaves calls,
//! and a thread back from its callback that finds the list empty, each decide and count
//! themselves as following under the list's lock, so one of them sees the other (the other
//! following, or its calls in the list).
//!
//! A follower idle for a while retires ([`Crew::retire`]) only if another thread still
//! follows, deciding under the same lock: a thread that saw a follower still has one when the
//! alarm fires.

use crate::sync::{rank, AtomicU64, AtomicUsize, MutexGuard, Ordering, RankedMutex};
use std::collections::VecDeque;

/// A driver's threads and the calls not run yet (the module doc).
pub(crate) struct Crew<C> {
    /// Threads following: waiting on the alarm, or about to.
    pub(crate) following: AtomicUsize,
    /// Spares started and not retired: the crew's threads other than one.
    pub(crate) started: AtomicUsize,
    /// Threads inside a callback (a thread woken meanwhile counts as a take-over).
    pub(crate) in_calls: AtomicUsize,
    /// Times a thread left its calls in the list for the threads in callbacks.
    pub(crate) deferred: AtomicU64,
    /// Calls collected and not yet run.
    pending: RankedMutex<VecDeque<C>, { rank::PENDING }>,
}

impl<C> Default for Crew<C> {
    fn default() -> Self {
        Crew {
            following: Default::default(),
            started: Default::default(),
            in_calls: Default::default(),
            deferred: Default::default(),
            pending: Default::default(),
        }
    }
}

/// What a thread of the crew does next ([`Crew::next`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next<C> {
    /// Run this call (counted in `in_calls` until [`Crew::ran`]); `true`: more wait behind it.
    Run(C, bool),
    /// Nobody follows and a spare may start: start one (counted as following), then ask again.
    Spare,
    /// The thread now counts as following: the list is empty, or left to the threads in
    /// callbacks.
    Follow,
}

impl<C> Crew<C> {
    /// The list, poisoned or not: nothing panics under its lock (a push, a pop).
    pub(crate) fn pending(&self) -> MutexGuard<'_, VecDeque<C>, { rank::PENDING }> {
        self.pending.lock_or_recover()
    }

    /// What this thread does next, with `spares` more threads it may still start (the module
    /// doc's rule).
    pub(crate) fn next(&self, spares: usize) -> Next<C> {
        // Relaxed: `following` and `started` are changed under the list's lock, except a
        // woken follower's decrement, which only makes a thread see nobody following where
        // one has left (it then starts a spare or leaves the calls: the safe side).
        let mut list = self.pending();
        if list.is_empty() {
            self.following.fetch_add(1, Ordering::Relaxed);
            return Next::Follow;
        }
        let started = self.started.load(Ordering::Relaxed);
        if self.following.load(Ordering::Relaxed) == 0 {
            if spares > 0 {
                return Next::Spare;
            }
            if started > 0 {
                self.following.fetch_add(1, Ordering::Relaxed);
                self.deferred.fetch_add(1, Ordering::Relaxed);
                return Next::Follow;
            }
        }
        let call = list.pop_front().expect("not empty");
        self.in_calls.fetch_add(1, Ordering::Relaxed);
        Next::Run(call, !list.is_empty())
    }

    /// A call [`Crew::next`] handed out returned.
    pub(crate) fn ran(&self) {
        self.in_calls.fetch_sub(1, Ordering::Relaxed);
    }

    /// A spare is about to start: counted as started and following (`false`: none may).
    pub(crate) fn starting(&self, limit: usize) -> bool {
        let _list = self.pending();
        if self.started.load(Ordering::Relaxed) >= limit {
            return false;
        }
        self.started.fetch_add(1, Ordering::Relaxed);
        self.following.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// A spare counted by [`Crew::starting`] did not start (the OS refused the thread).
    pub(crate) fn not_started(&self) {
        let _list = self.pending();
        self.started.fetch_sub(1, Ordering::Relaxed);
        self.following.fetch_sub(1, Ordering::Relaxed);
    }

    /// A follower woke to lead.
    pub(crate) fn woke(&self) {
        self.following.fetch_sub(1, Ordering::Relaxed);
    }

    /// A follower that waited long with nothing to do asks to end: `true` (it no longer
    /// counts as following or started) if another thread follows still, `false` (it follows
    /// on) if it is the only one.
    pub(crate) fn retire(&self) -> bool {
        let _list = self.pending();
        if self.following.load(Ordering::Relaxed) < 2 {
            return false;
        }
        self.following.fetch_sub(1, Ordering::Relaxed);
        self.started.fetch_sub(1, Ordering::Relaxed);
        true
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
