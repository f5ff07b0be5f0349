//! Lookouts: one look at a signal number's pending state, shared by every timer whose signal
//! waits on it.
//!
//! A periodic signal timer whose signal stays pending (its target blocks it) looks whether it
//! is still pending every `PROBE_CAP` at most (`signals/mod.rs`). One look answers for every
//! timer of the same target and signal number: a number is pending for its target while any
//! of their signals is (the `timers` module's table). So the timers of one (target, number)
//! share a [`Lookout`]: one of them, the *looker*, keeps looking on its own schedule; the others,
//! *followers*, leave their looks to it and wait far out in their wheel (`BACKSTOP`). When the
//! looker finds the number gone, it takes the followers' list (their signals were all taken)
//! and the poll that found it has each of them look at once (their periods counted then, the
//! rule of `signals/mod.rs`), so that 100k blocked timers cost one look every 10 ms, not 100k.
//!
//! Signals refused for want of room (`EAGAIN`: the user's `RLIMIT_SIGPENDING` is held) share
//! the service's retry lookout (`Key::RETRY`) the same way: one owed timer retries on its
//! backoff, the others follow, and when its signal goes (room came back) it releases them and
//! each sends; once one of them is refused again, the rest follow again without trying. A
//! timer's cell says which lookout its slot is in (`SignalCell::in_retry`).
//!
//! Only timers whose period is at most `PROBE_CAP` join a lookout: theirs are the looks at the
//! capped spacing, which the looker's match; a slower timer looks at its own periods, each at
//! most once a period (and `LOOK_LEAD` before it).
//!
//! # Who may touch a follower
//!
//! A lookout holds its followers' addresses (`Member`): the timer object and its signal cell.
//! A member's cell names where it is (`SignalCell::slot`): `NONE` (in no list), its index in
//! the list, or `DETACHED` (taken by a release). Under the lookout's lock, a member in the list
//! is alive: it leaves the list (under its own lock, then the lookout's) before it is deleted
//! and its cell freed (the delete hook), so a removal may move the last member into the
//! freed index and write that member's cell. A released member is touched only under its own
//! lock, within the epoch pin of the poll or call that released it (timer objects are
//! type-stable while pinned: `registry/timer.rs`), and only if its current cell says
//! `DETACHED`: a member deleted meanwhile has another cell or none.
//!
//! A looker that leaves (deleted, re-armed) hands its role over once it has let go of its
//! lock (`Core::hand_over`: through the delete hook's released value, dropped with no lock
//! held, or by `settime` itself): its last follower looks at once and becomes the looker if
//! it finds the number pending, or releases the others if it finds it gone. A looker settled
//! by `getoverrun` found the number gone and releases them all. Should a looker go quiet
//! anyway (a stalled driver), each follower looks on its own at its backstop, and the first
//! to find the number pending becomes the looker. Lock order: a timer, then the lookouts
//! (`sync::rank`).

use crate::registry::Timer;
use crate::sync::{rank, RankedMutex};
use crate::timers::object::signal::SignalCell;
use crate::timers::object::Itimer;
use std::collections::HashMap;
use std::ptr::NonNull;

/// How far out a follower waits in its wheel: its own look, should its looker have gone quiet.
pub(crate) const BACKSTOP: u64 = 10_000_000_000;
/// A backstop's slack: it falls due up to this much after `BACKSTOP`, with others.
pub(crate) const BACKSTOP_GRAIN: u64 = 100_000_000;

/// A looker that has not looked for this long has left: three of its longest spacing
/// (`signals/mod.rs`'s `PROBE_CAP`, which asserts this), for a late driver.
pub(crate) const STALE: u64 = 30_000_000;

pub(crate) use crate::timers::object::signal::{
    SLOT_DETACHED as DETACHED, SLOT_LOOKER as LOOKER, SLOT_NONE as NONE,
};
/// The most followers a lookout lists; past it, a timer looks on its own.
const MAX_FOLLOWERS: usize = LOOKER as usize;

/// What a lookout is for: a signal number's pending state for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The target thread; 0 for the process.
    tid: i32,
    signo: i32,
}

impl Key {
    /// The service's retry lookout: signals refused for want of room (`EAGAIN`), which one
    /// timer retries for all. Room is the user's `RLIMIT_SIGPENDING`, whatever the target.
    pub(crate) const RETRY: Key = Key {
        tid: i32::MIN,
        signo: 0,
    };

    pub(crate) fn of(cell: &SignalCell) -> Key {
        Key {
            tid: cell.tid,
            signo: cell.signo(),
        }
    }

    /// The lookout `cell`'s slot is in: the retry lookout, or its target's and number's.
    pub(crate) fn slot_of(cell: &SignalCell) -> Key {
        if cell.in_retry() {
            Key::RETRY
        } else {
            Key::of(cell)
        }
    }
}

/// A member of a lookout: a timer object and its signal cell.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    pub(crate) timer: NonNull<Timer<Itimer>>,
    cell: NonNull<SignalCell>,
}

// SAFETY: a `Member` is two addresses, dereferenced only under the rules of the module doc
// ("Who may touch a follower"), from whichever thread holds the locks they name.
unsafe impl Send for Member {}

impl Member {
    pub(crate) fn new(timer: &Timer<Itimer>, cell: &SignalCell) -> Member {
        Member {
            timer: NonNull::from(timer),
            cell: NonNull::from(cell),
        }
    }

    fn addr(&self) -> usize {
        self.timer.as_ptr() as usize
    }

    /// The member's cell.
    ///
    /// # Safety
    /// The member is in the list of the lookout whose lock the caller holds (so not deleted:
    /// module doc).
    unsafe fn cell(&self) -> &SignalCell {
        // SAFETY: the caller's contract.
        unsafe { self.cell.as_ref() }
    }
}

/// One (target, signal number)'s lookout.
#[derive(Debug, Default)]
struct Lookout {
    /// The looker's address; 0: none.
    looker: usize,
    /// When it last looked (monotonic ns).
    last_look: u64,
    followers: Vec<Member>,
}

impl Lookout {
    /// Takes the member at `i` out of the list, moving the last member to `i`.
    fn remove(&mut self, i: usize) {
        self.followers.swap_remove(i);
        if let Some(moved) = self.followers.get(i) {
            // SAFETY: `moved` is in the list, whose lookout's lock the caller holds.
            unsafe { moved.cell() }.set_slot(i as u32);
        }
    }

    fn idle(&self) -> bool {
        self.looker == 0 && self.followers.is_empty()
    }
}

/// What a look that found its signal pending makes of its timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It looks for the lookout: on its own schedule.
    Look,
    /// Its looker looks for it: it waits at its backstop.
    Follow,
}

/// The service's lookouts.
#[derive(Debug, Default)]
pub(crate) struct Lookouts {
    map: RankedMutex<HashMap<Key, Lookout>, { rank::LOOKOUT }>,
}

impl Lookouts {
    /// `me`'s look found its signal pending at `t` (monotonic ns), under its lock: whether it
    /// looks for the lookout (there was no looker, or one that went quiet, or it is the looker)
    /// or follows. `None`: no room to record either (memory exhaustion): it looks on its own.
    pub(crate) fn found_pending(
        &self,
        key: Key,
        me: Member,
        cell: &SignalCell,
        t: u64,
    ) -> Option<Role> {
        let slot = cell.slot();
        if slot < DETACHED && Key::slot_of(cell) != key {
            // In the other lookout (a cell's slot is in one at a time): it looks on its own.
            return None;
        }
        let mut map = self.map.lock_or_recover();
        if !map.contains_key(&key) {
            map.try_reserve(1).ok()?;
        }
        let w = map.entry(key).or_default();
        let slot = cell.slot();
        let listed = (slot as usize) < w.followers.len();
        if w.looker == me.addr() || w.looker == 0 || t.saturating_sub(w.last_look) > STALE {
            if listed {
                w.remove(slot as usize);
            }
            cell.set_slot(LOOKER);
            if key == Key::RETRY {
                cell.set_in_retry();
            }
            w.looker = me.addr();
            w.last_look = t;
            return Some(Role::Look);
        }
        if !listed {
            if w.followers.len() >= MAX_FOLLOWERS || w.followers.try_reserve(1).is_err() {
                cell.set_slot(NONE);
                return None;
            }
            cell.set_slot(w.followers.len() as u32);
            if key == Key::RETRY {
                cell.set_in_retry();
            }
            w.followers.push(me);
        }
        Some(Role::Follow)
    }

    /// Whether the lookout answers `me`'s look at `t` (monotonic ns) without a look of its own:
    /// another timer looks for it, and found the number pending at or after `since` (for a
    /// follower's backstop: within [`STALE`]; for a first look: since `me`'s signal was
    /// sent). Then `me` follows (listed now if it was not), as if it had found its signal
    /// pending. `false` if `me` is the looker, memory is short, or nobody looked since.
    pub(crate) fn answers(
        &self,
        key: Key,
        me: Member,
        cell: &SignalCell,
        since: u64,
        t: u64,
    ) -> bool {
        let slot = cell.slot();
        if slot == LOOKER || slot < DETACHED && Key::slot_of(cell) != key {
            return false;
        }
        let mut map = self.map.lock_or_recover();
        let Some(w) = map.get_mut(&key) else {
            return false;
        };
        let live = w.looker != 0 && w.looker != me.addr() && t.saturating_sub(w.last_look) <= STALE;
        if !live || w.last_look < since {
            return false;
        }
        // Read under the lock: a removal may have moved it in the list since.
        let slot = cell.slot();
        if (slot as usize) < w.followers.len() {
            return true;
        }
        if w.followers.len() >= MAX_FOLLOWERS || w.followers.try_reserve(1).is_err() {
            return false;
        }
        cell.set_slot(w.followers.len() as u32);
        if key == Key::RETRY {
            cell.set_in_retry();
        }
        w.followers.push(me);
        true
    }

    /// `me`'s look found its number gone, under its lock: `me` leaves the lookout, and if it was
    /// the looker, its followers are detached into `released` (their signals were taken too),
    /// for the caller to look at once it has let go of `me`'s lock.
    pub(crate) fn found_gone(
        &self,
        key: Key,
        me: Member,
        cell: &SignalCell,
        released: &mut Vec<Member>,
    ) {
        if cell.slot() != LOOKER {
            // A follower, or in no lookout: no looker leaves.
            let _ = self.leave(key, me, cell);
            return;
        }
        cell.set_slot(NONE);
        let mut map = self.map.lock_or_recover();
        let Some(w) = map.get_mut(&key) else {
            return;
        };
        if w.looker == me.addr() {
            w.looker = 0;
            if released.try_reserve(w.followers.len()).is_ok() {
                for m in w.followers.drain(..) {
                    // SAFETY: `m` was in the list until now, under this lock.
                    unsafe { m.cell() }.set_slot(DETACHED);
                    released.push(m);
                }
            }
            // No room for the list: the followers stay, and find the looker gone at their
            // backstop.
        }
        if w.idle() {
            map.remove(&key);
        }
    }

    /// `me` leaves its lookout, if it is in one (settime, delete, a settle by `getoverrun`),
    /// under its lock; a looker gives up its role. Whether its followers need a new looker
    /// (`Core::hand_over`, once the caller has let go of `me`'s lock).
    #[must_use = "a looker that leaves hands its followers over"]
    pub(crate) fn leave(&self, key: Key, me: Member, cell: &SignalCell) -> bool {
        // NONE and DETACHED are written for this member under its own lock, or before the
        // list it was in let go of it: no lookout writes them again.
        let slot = cell.slot();
        if slot == NONE || slot == DETACHED {
            cell.set_slot(NONE);
            return false;
        }
        let mut map = self.map.lock_or_recover();
        // Read again: a removal may have moved it in the list since.
        let slot = cell.slot();
        cell.set_slot(NONE);
        let Some(w) = map.get_mut(&key) else {
            return false;
        };
        let mut orphans = false;
        if slot == LOOKER {
            if w.looker == me.addr() {
                w.looker = 0;
                orphans = !w.followers.is_empty();
            }
        } else if (slot as usize) < w.followers.len() {
            w.remove(slot as usize);
        }
        if w.idle() {
            map.remove(&key);
        }
        orphans
    }

    /// A candidate for `key`'s looker found the number gone: every follower's signal was
    /// taken too. They are detached into `released`, as a looker's release does, unless
    /// another took the role meanwhile.
    pub(crate) fn release_orphans(&self, key: Key, released: &mut Vec<Member>) {
        let mut map = self.map.lock_or_recover();
        let Some(w) = map.get_mut(&key) else {
            return;
        };
        if w.looker != 0 || released.try_reserve(w.followers.len()).is_err() {
            return;
        }
        for m in w.followers.drain(..) {
            // SAFETY: `m` was in the list until now, under this lock.
            unsafe { m.cell() }.set_slot(DETACHED);
            released.push(m);
        }
        map.remove(&key);
    }

    /// The next candidate to look for `key`'s followers, its looker gone: the last follower,
    /// taken out of the list (`DETACHED`), for the caller to look at under its own lock within
    /// a pin taken before this call. `None` if another took the role meanwhile, or nobody is
    /// left.
    pub(crate) fn successor(&self, key: Key) -> Option<Member> {
        let mut map = self.map.lock_or_recover();
        let w = map.get_mut(&key)?;
        if w.looker != 0 {
            return None;
        }
        let m = w.followers.pop()?;
        // SAFETY: `m` was in the list until now, under this lock.
        unsafe { m.cell() }.set_slot(DETACHED);
        if w.idle() {
            map.remove(&key);
        }
        Some(m)
    }

    /// The lookouts with a looker (tests).
    #[cfg(test)]
    pub(crate) fn lookers(&self) -> usize {
        self.map
            .lock_or_recover()
            .values()
            .filter(|w| w.looker != 0)
            .count()
    }

    /// The followers of every lookout (tests).
    #[cfg(test)]
    pub(crate) fn followers(&self) -> usize {
        self.map
            .lock_or_recover()
            .values()
            .map(|w| w.followers.len())
            .sum()
    }
}
