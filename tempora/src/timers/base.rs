//! A base: one lock, one wheel per clock, and the next expiry of each wheel readable without
//! the lock.
//!
//! ```text
//!  Base (cache-line padded)
//!   ├─ lock: ByteLock                covers the three wheels
//!   ├─ wheels[REALTIME, MONOTONIC, BOOTTIME]: Wheel<Slot>   ticks of `tick` ns on that clock
//!   └─ sleep[3] (under the lock)     the tick on each wheel's clock before which the driver
//!                                    serving this base must be woken (0: it is awake)
//! ```
//!
//! # Waking a sleeping driver
//!
//! A driver that goes to sleep until monotonic time `D` first publishes, under each of its
//! bases' locks, `sleep[w]` = the tick of `D` on wheel `w`'s clock (and re-reads that base's
//! wheels in the same critical section, lowering `D` if something earlier arrived, so every
//! published value is at or after the `D` it finally sleeps until). Whoever changes a wheel
//! compares, under the same lock, the wheel's new next expiry with `sleep[w]`; if it is
//! earlier, it clears `sleep` (one ring per sleep is enough) and rings the driver's doorbell
//! after unlocking. Both sides hold the base lock, so "the driver did not see the new timer
//! and the armer did not see the driver's deadline" is impossible. The ring itself cannot be
//! lost either (see `Doorbell`). Arming later than `D` rings nobody.
//!
//! A wheel entry's payload is the address of the timer object (a [`Slot`]); the timer in turn
//! records where it waits (`TimerState::{base, wheel, wheel_key}`), written under the timer's
//! lock. An entry is *current* only while the timer, under its lock, still names that base,
//! wheel and key: expiry pops entries under the base lock and checks them under each timer's
//! lock afterwards, so an entry that a settime or delete replaced in between is ignored.
//!
//! Lock order: **timer → base**. settime, delete and consume hold the timer's lock and take a
//! base lock to insert or remove; expiry takes the base lock alone (to collect), releases it,
//! and only then takes timer locks. Nothing takes a timer lock while holding a base lock, and
//! no path holds two base locks. Debug builds assert both at every lock (`sync::lock_order`;
//! the test `lock_order_violation_is_caught_in_debug_builds`).

use crate::clock::ClockId;
use crate::registry::timer::Timer;
use crate::sync::{lock_order, ByteLock, UnsafeCell};
use crate::wheel::Wheel;
use std::ptr::NonNull;

/// Wheels per base: one per clock a timer can expire on.
pub(crate) const CLOCKS: usize = 3;

/// The wheel index of an expiry clock.
#[inline]
pub(crate) fn wheel_of(clock: ClockId) -> usize {
    match clock {
        ClockId::Realtime => 0,
        ClockId::Monotonic => 1,
        ClockId::Boottime => 2,
    }
}

/// The clock of wheel `i`.
pub(crate) const WHEEL_CLOCKS: [ClockId; CLOCKS] =
    [ClockId::Realtime, ClockId::Monotonic, ClockId::Boottime];

/// A wheel payload: the timer object's address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot(pub(crate) NonNull<Timer>);

// SAFETY: a `Slot` is an address; it is dereferenced only by expiry, under the rules in
// `Core::deliver` (pinned epoch, entry popped while current).
unsafe impl Send for Slot {}

/// "No expiry" in `Base::next`.
pub(crate) const NO_EXPIRY: u64 = u64::MAX;

pub(crate) struct Base {
    lock: ByteLock,
    state: UnsafeCell<BaseState>,
}

/// What the base lock covers.
pub(crate) struct BaseState {
    pub(crate) wheels: [Wheel<Slot>; CLOCKS],
    /// See "Waking a sleeping driver" in the module doc.
    pub(crate) sleep: [u64; CLOCKS],
}

// SAFETY: `state` is only accessed with `lock` held (`Base::locked`); the payloads are `Send`.
unsafe impl Sync for Base {}
// SAFETY: as above.
unsafe impl Send for Base {}

impl Base {
    /// A base whose wheels start at the given ticks.
    pub(crate) fn new(start: [u64; CLOCKS]) -> Base {
        let wheel = |t: u64| {
            Wheel::builder()
                .start(t)
                .build()
                .expect("the default wheel levels are valid")
        };
        Base {
            lock: ByteLock::new(),
            state: UnsafeCell::new(BaseState {
                wheels: start.map(wheel),
                sleep: [0; CLOCKS],
            }),
        }
    }

    /// Runs `f` on the base's state with the lock held.
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut BaseState) -> R) -> R {
        lock_order::base_enter();
        self.lock.lock();
        // SAFETY: the lock is held until the unlock below, so this is the only reference.
        let r = self.state.with_mut(|p| f(unsafe { &mut *p }));
        self.lock.unlock();
        lock_order::base_exit();
        r
    }

    /// Runs `f` on wheel `i` with the lock held. Also returns whether the change must wake the
    /// driver serving this base: `fires_at` (the tick at which the entry `f` inserted or moved
    /// fires; `NO_EXPIRY` for a removal) is before the driver's published sleep (see the module
    /// doc).
    #[inline]
    pub(crate) fn locked_wheel<R>(
        &self,
        i: usize,
        fires_at: u64,
        f: impl FnOnce(&mut Wheel<Slot>) -> R,
    ) -> (R, bool) {
        self.locked(|st| {
            let r = f(&mut st.wheels[i]);
            let ring = fires_at < st.sleep[i];
            if ring {
                st.sleep = [0; CLOCKS];
            }
            (r, ring)
        })
    }
}
