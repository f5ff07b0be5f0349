//! Arming: where a timer's or a sleep's entry goes (which base, wheel, tick and lane), and
//! putting it there or taking it out, under the timer's (or the sleep cell's) lock and the
//! base's lock, in that order (`sync::rank`).
//!
//! A timer is armed on the base of the thread that arms it; a delivery re-arms on the base
//! it popped the timer from ("Delivery and the poll barrier" in `base.rs`). An arming whose
//! entry fires before the base's sleeper published it would wake rings it once the base lock
//! is released (`wake.rs`). The precision rules (`placed`) are ARCHITECTURE.md's invariant
//! "Never early, whatever the precision".

use super::base::{timer_addr, BaseWheel};
use super::health::BASE_POISONED;
use super::wake::NO_EXPIRY;
use super::Core;
use crate::clock::ClockId;
use crate::error::Error;
use crate::sync::{thread_index, Poisoned};
use crate::timers::object::itimer::Arm;
use crate::timers::object::sleep_cell::{SleepCell, SleepState};
use crate::timers::object::types::Placement;
use crate::timers::object::{placement_of, LockedTimer};
use crate::wheel::{Key, Mode};

use std::ptr::NonNull;

/// The monotonic wheel's index: sleeps wait there.
const MONOTONIC: usize = ClockId::Monotonic.index();

impl Core {
    /// The base of the calling thread.
    #[inline]
    pub(crate) fn my_base(&self) -> usize {
        thread_index() % self.base_count
    }

    /// Applies `itimer`'s decision to the timer's wheel entry (lock order: timer → base),
    /// arming it on the calling thread's base.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the base is (the service has then failed: `Health::fail`).
    #[inline]
    pub(crate) fn apply(&self, l: &mut LockedTimer<'_>, arm: Arm) -> Result<(), Error> {
        self.place(l, arm, 0, None, || self.my_base())
    }

    /// `apply` for an expiry computed from a clock reading up to `spent` ns after the time
    /// (the coarse clock: `Owner::settime`), which a slack timer takes out of its slack. The
    /// timer remembers it (`ItimerState::coarse`) for later placements of this expiry.
    #[inline]
    pub(crate) fn apply_spent(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        spent: u64,
    ) -> Result<(), Error> {
        l.state.set_coarse(spent != 0);
        self.place(l, arm, spent, None, || self.my_base())
    }

    /// `apply`, arming on base `b` (a delivery re-arms on the base it popped the timer from:
    /// see "Delivery and the poll barrier" in `base.rs`).
    #[inline]
    pub(crate) fn apply_on(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        b: usize,
    ) -> Result<(), Error> {
        self.place(l, arm, 0, Some(placement_of(l)), || b)
    }

    /// `apply_on` with `slack` whatever the timer's precision: for an entry that is no
    /// expiry of the timer's own (a signal timer's backstop, `lookout.rs`), placed where it
    /// is never moved again before it falls due.
    pub(crate) fn apply_on_slack(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        b: usize,
        slack: u64,
    ) -> Result<(), Error> {
        self.place(l, arm, 0, Some(Placement::Slack(slack)), || b)
    }

    /// Where an arming at `expiry` (ns) goes: the wheel tick, the entry's mode, and the tick
    /// by which a sleeper must wake for it (the ring test).
    ///
    /// - precise: the expiry's tick (`ticks_ceil`);
    /// - slack `s`: that tick rounded up to a multiple of `g`, the largest power of 8 with
    ///   `g` ticks at most `s - spent` ns (at least 1), so the entry fires less than `g` ticks
    ///   after its expiry, at an instant it shares with every slack timer of that `g` due
    ///   then; its level's granularity divides the tick once `g` does, so it is never moved
    ///   from a level of granularity `g` or finer;
    /// - deferrable: the expiry's tick in the deferrable lane; a sleeper must wake for it
    ///   only `max_deferral` later.
    #[inline]
    pub(crate) fn placed(&self, placement: Placement, expiry: u64, spent: u64) -> (u64, Mode, u64) {
        let tick = self.res.ticks_ceil(expiry);
        match placement {
            Placement::Precise => (tick, Mode::PRECISE, tick),
            Placement::Slack(slack) => {
                let room = slack.saturating_sub(spent) / self.res.nanos();
                let tick = if room >= 8 {
                    // 8^k <= room: k = floor(log2(room) / 3).
                    let g = 1u64 << (room.ilog2() / 3 * 3);
                    tick.div_ceil(g).saturating_mul(g)
                } else {
                    tick
                };
                (tick, Mode::PRECISE, tick)
            }
            Placement::Deferrable => {
                let bound = self.res.ticks_ceil(self.max_deferral);
                (
                    tick,
                    Mode::PRECISE | Mode::DEFERRABLE,
                    tick.saturating_add(bound),
                )
            }
        }
    }

    /// `apply` on the base `base` names, asked only if the timer must move (a disarm, and a
    /// re-arm to a later time that leaves the entry where it is, need no base).
    #[inline]
    fn place(
        &self,
        l: &mut LockedTimer<'_>,
        arm: Arm,
        spent: u64,
        placement: Option<Placement>,
        base: impl FnOnce() -> usize,
    ) -> Result<(), Error> {
        let Arm::At { clock, expiry } = arm else {
            return self.disarm(l);
        };
        let w = clock.index();
        // An expiry from a coarse reading keeps its lag out of the slack wherever it is placed
        // again: a re-placement with the whole slack could fire it up to the lag past its
        // bound.
        let spent = if l.state.coarse() {
            spent.max(self.coarse_lags[w])
        } else {
            spent
        };
        let placement = placement.unwrap_or_else(|| placement_of(l));
        let (tick, mode, fires_at) = self.placed(placement, expiry, spent);
        let node = l.links();
        // `node.tick()` is stable under the timer's lock while the timer names a wheel (the
        // base's node contract, `base.rs`), linked or popped.
        if usize::from(l.state.wheel()) == w + 1 && BaseWheel::kept(tick) >= node.tick() {
            // A re-arm to a later time (the timeout refresh): the entry stays where it is and
            // fires early, and the poll that finds the timer not yet due places it again
            // (`deliver`). One base-lock round trip per refresh saved, for at most one extra
            // visit per timeout period. (The entry's lane is right: a precision changes
            // lanes only through `Owner::set_precision`, which takes the entry out.)
            return Ok(());
        }
        let b = base();
        let r = timer_addr(l.timer);
        // Already in this base's wheel for the clock: move the node, or link it again if a
        // poll has popped it meanwhile. Anywhere else: take it out there first.
        let here = usize::from(l.state.wheel()) == w + 1 && usize::from(l.state.base) == b;
        if !here {
            // A base that cannot be entered keeps the node linked: it must not be linked
            // anywhere else (its links are still that base's), and the service has failed.
            self.disarm(l)?;
        }
        debug_assert!(here || !l.links().is_linked(), "linked in another wheel");
        let by_time = w == ClockId::Monotonic.index() && !mode.is_deferrable();
        let placed = self.bases[b].locked_wheel(w, fires_at, by_time, |wheel| {
            // SAFETY: the node is in no wheel or in this one (`here`: the timer names it;
            // otherwise `disarm` took it out), and the object stays alive while linked
            // ("Safety of the timer addresses").
            unsafe { wheel.set(r, tick, mode) }
        });
        let Ok(((), ring)) = placed else {
            // In no wheel: `wheel` stays 0 (a linked node is in a base nobody walks again).
            l.state.set_wheel(0);
            return Err(self.health.fail(BASE_POISONED));
        };
        if ring {
            self.wake.ring(self.res, b, w, fires_at, || self.now_all());
        }
        l.state.base = b as u16;
        l.state.set_wheel(w as u8 + 1);
        Ok(())
    }

    /// Takes the timer out of the wheel it waits in, if any. [`Error::Poisoned`] (the service
    /// has failed) if that base cannot be entered: the timer then names no wheel, but its node
    /// may still be linked in that base, so it must not be linked anywhere else.
    #[inline]
    pub(crate) fn disarm(&self, l: &mut LockedTimer<'_>) -> Result<(), Error> {
        if l.state.wheel() == 0 {
            return Ok(());
        }
        let w = usize::from(l.state.wheel() - 1);
        let r = timer_addr(l.timer);
        // A popped node (a poll has not delivered it yet) is fine: that poll will find
        // `wheel == 0` and leave the timer alone. A poisoned base keeps a linked node, but
        // nothing walks a poisoned base again, so its address is never followed.
        let base = &self.bases[usize::from(l.state.base)];
        // SAFETY: the timer names this base and wheel, so its node is in no wheel or here.
        let unlinked = base.locked_wheel(w, NO_EXPIRY, true, |wheel| unsafe { wheel.take(r) });
        l.state.set_wheel(0);
        unlinked
            .map(drop)
            .map_err(|Poisoned| self.health.fail(BASE_POISONED))
    }

    /// Puts a sleep's entry at its deadline on base `b`'s monotonic wheel (or on the base it
    /// waits in, moving it there), under the cell's lock.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the base is (the service has then failed).
    pub(crate) fn sleep_place(
        &self,
        cell: &SleepCell,
        s: &mut SleepState<'_>,
        b: usize,
    ) -> Result<(), Error> {
        let tick = self.res.ticks_ceil(s.body.deadline);
        let here = s.at.armed;
        let b = if here { usize::from(s.at.base) } else { b };
        let old = Key::from_bits(s.body.key);
        let target = NonNull::from(cell);
        // The state is written inside the base's critical section, before anyone can pop
        // the new entry.
        let placed = self.bases[b].locked_sleeps(tick, |wheel| {
            let key = if !here {
                wheel.insert_with(tick, Mode::PRECISE, target)
            } else if wheel.reschedule(old, tick).is_ok() {
                old
            } else {
                // Popped: the delivery in flight re-reads the deadline and places it.
                return;
            };
            s.body.key = key.to_bits();
            s.at.base = b as u16;
            s.at.armed = true;
        });
        let Ok(((), ring)) = placed else {
            return Err(self.health.fail(BASE_POISONED));
        };
        if ring {
            self.wake
                .ring(self.res, b, MONOTONIC, tick, || self.now_all());
        }
        Ok(())
    }

    /// Takes a sleep's entry out of its wheel, under the cell's lock, and clears `armed`.
    /// `Some(b)` if a poll of base `b` popped it and has not delivered it yet (it will find
    /// it not current): the caller must let that delivery finish (`Base::delivery`) before
    /// freeing the cell.
    pub(crate) fn sleep_remove(&self, s: &mut SleepState<'_>) -> Option<usize> {
        if !s.at.armed {
            return None;
        }
        s.at.armed = false;
        let b = usize::from(s.at.base);
        let key = Key::from_bits(s.body.key);
        let removed = self.bases[b].locked_sleeps(NO_EXPIRY, |w| w.remove(key));
        match removed {
            Ok((Some(_), _)) => None,
            Ok((None, _)) => Some(b),
            // Nobody pops a poisoned base again, but a poll may have popped the entry before
            // the panic: let the caller wait for its delivery all the same.
            Err(Poisoned) => {
                self.health.fail(BASE_POISONED);
                Some(b)
            }
        }
    }
}
