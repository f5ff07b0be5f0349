//! What the owner's calls do to a signal timer's signal: settime forgets an outstanding one
//! and hands its lookout's followers over, `getoverrun` looks at it, and a restore puts a
//! snapshot's signal back. The expiry side is `signals/mod.rs`'s.

use super::*;

impl Core {
    /// `settime` of a signal timer (after the rules' `settime`): a signal still outstanding
    /// belongs to the old arming. It cannot be taken back; it is forgotten, so that the new
    /// arming's expiries send their own signals (a pending number is no proof that this
    /// timer's signal is the one pending: treating it as one lost signals of timers sharing a
    /// number). An owed one is void.
    ///
    /// `Some(key)`: it looked for other timers of its lookout, which [`Core::hand_over`] must
    /// give a new looker once the caller has let go of the lock.
    #[must_use = "a looker that leaves hands its followers over"]
    pub(crate) fn signal_settime(&self, l: &mut LockedTimer<'_>) -> Option<Key> {
        let cell = signal_of(l)?;
        let key = Key::slot_of(cell);
        let orphans = self.lookouts.leave(key, Member::new(l.timer, cell), cell);
        l.state.set_queued(false);
        set_look(l.published(), false);
        cell.set_lateness(0);
        cell.set_carried(0);
        cell.reset_tries();
        orphans.then_some(key)
    }

    /// Gives `key`'s lookout a new looker after its looker left (`lookout.rs`): its followers, last
    /// first, each looked at under its own lock until one looks for the others or finds the
    /// number gone (and releases them). With no lock held.
    pub(crate) fn hand_over(&self, key: Key) {
        // Pinned before each candidate is taken out of the list (`Lookouts::successor`).
        let _pin = crate::sync::pin();
        let b = self.my_base();
        let now = self.lazy_now();
        while let Some(m) = self.lookouts.successor(key) {
            // SAFETY: a timer object is type-stable while pinned, and this thread pinned
            // before `successor` took it out of its list (`lookout.rs`); its identity is checked
            // under its lock below.
            let timer = unsafe { m.timer.as_ref() };
            let looked = timer.lock_visible(|mut l| {
                let Some(cell) = signal_of(&l) else {
                    return false;
                };
                if cell.slot() != DETACHED {
                    return false;
                }
                cell.set_slot(lookout::NONE);
                let parked = l.state.queued() && l.state.status() == Status::RequeuePending;
                if !parked && !l.state.owed() {
                    return false;
                }
                let clock = l.state.expiry_clock();
                self.signal_pop(&mut l, b, clock, &now);
                if signal_of(&l).is_some_and(|c| c.slot() != lookout::LOOKER) {
                    // Found gone: the others' signals were taken too.
                    RELEASED.with(|r| self.lookouts.release_orphans(key, &mut r.borrow_mut()));
                }
                true
            });
            self.release_followers(b, &now);
            match looked {
                Ok(Some(true)) => return,
                Ok(_) => {}
                Err(_) => {
                    self.health.fail(TIMER_POISONED);
                }
            }
        }
    }

    /// `getoverrun`'s look at a signal timer whose signal is outstanding: if it is no longer
    /// pending it was delivered, and its overrun is settled now (the kernel settles it at the
    /// dequeue); a periodic timer then waits for its next period, as the kernel re-arms it.
    pub(crate) fn signal_check(&self, l: &mut LockedTimer<'_>, now: &LazyNow<'_>) {
        if !l.state.queued() {
            return;
        }
        let Some(cell) = signal_of(l) else {
            return;
        };
        let clock = l.state.expiry_clock();
        let parked = l.state.interval != 0 && l.state.status() == Status::RequeuePending;
        if parked {
            let n = self.count_periods(l, now.get(clock));
            l.state.overrun = add(l.state.overrun, n);
        }
        if self.still_pending(cell) {
            return;
        }
        if cell.slot() != lookout::NONE {
            let m = Member::new(l.timer, cell);
            RELEASED.with(|r| {
                self.lookouts
                    .found_gone(Key::slot_of(cell), m, cell, &mut r.borrow_mut())
            });
        }
        self.settle_or_flush(l, cell);
        if parked && !l.state.owed() {
            l.state.set_status(Status::Armed);
            let expiry = l.state.expiry;
            let _ = self.apply(l, Arm::At { clock, expiry });
        }
    }
}

impl Core {
    /// Puts back a restored signal timer's signal (under its lock, just created, its setting
    /// already restored): `signal`, whose own expiry was `lateness` periods late. An
    /// outstanding signal is probed as a probe would: still pending for its target, it stays
    /// outstanding; gone, it was delivered, and is settled now. Returns where the timer waits:
    /// an armed timer at its expiry (as settime arms it), one with a signal outstanding or
    /// owed at its expiry too (the next period, or at once for a one-shot's owed signal, whose
    /// pop probes or sends), a periodic timer whose signal was just settled at its next
    /// period, Armed again (as `signal_check` re-arms it); any other nowhere (a disarmed
    /// timer, or one whose target thread was gone, which waits for ever).
    pub(crate) fn signal_restore(
        &self,
        l: &mut LockedTimer<'_>,
        signal: Restored,
        lateness: i32,
    ) -> Arm {
        let Some(cell) = signal_of(l) else {
            return Arm::Off;
        };
        cell.set_lateness(lateness);
        let mut settled = false;
        match signal {
            Restored::Idle => {}
            Restored::Owed => l.state.set_owed(true),
            // A stale signal is forgotten, as settime forgets it (`signal_settime`); a
            // periodic timer parked for it waits for its next period instead.
            Restored::Outstanding { stale: true } => settled = true,
            Restored::Outstanding { stale } => {
                l.state.set_queued(true);
                let seq = l.state.signal_seq;
                l.state.sigqueue_seq = if stale { seq.wrapping_sub(1) } else { seq };
                if !self.still_pending(cell) {
                    settle(l, cell);
                    settled = true;
                } else if !stale {
                    set_look(l.published(), true);
                }
            }
        }
        let at = Arm::At {
            clock: l.state.expiry_clock(),
            expiry: l.state.expiry,
        };
        let waits = l.state.queued() || l.state.owed();
        match l.state.status() {
            Status::Armed => at,
            Status::RequeuePending if waits => at,
            Status::RequeuePending if settled => {
                l.state.set_status(Status::Armed);
                at
            }
            Status::Disarmed if l.state.owed() => at,
            Status::RequeuePending | Status::Disarmed => Arm::Off,
        }
    }
}
