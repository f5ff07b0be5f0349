//! [`Sleep`]: an ID-less timer in a base's sleeps' wheel, and the [`Timers`] methods that make
//! one. The module doc of [`crate::time`] says what a sleep is.

use crate::clock::ClockId;
use crate::instant::Instant;
use crate::timers::firing::driver::Drivers;
use crate::timers::object::sleep_cell::{Phase, SleepCell, SleepState};
use crate::timers::shared::Core;
use crate::Timers;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// A future that completes at a deadline on its service's monotonic clock
/// (`tokio::time::Sleep`). See the [module doc](crate::time).
///
/// # Cancel safety
/// Cancel safe: a sleep has nothing to lose but its deadline. Dropped before it completes, it
/// leaves its wheel; awaited by reference (`&mut sleep` in a `select!` loop, pinned), a
/// losing branch leaves it as it was, deadline and registration kept, and the next poll goes
/// on waiting for the same deadline.
#[must_use = "a sleep does nothing unless polled (`.await`)"]
pub struct Sleep {
    /// The service (its drivers keep running while this handle exists).
    drivers: Arc<Drivers>,
    cell: SleepCell,
    /// The wheel entry points at `cell` once polled. `!Unpin` is also what makes the
    /// holder's `Pin<&mut Sleep>` (and `&mut self` in `drop`) sound while a delivery on another
    /// thread holds `&SleepCell`: references to `!Unpin` types are not assumed unique
    /// (rustc emits no `noalias` for them, and Miri exempts them), as every intrusive future
    /// relies on.
    _pinned: PhantomPinned,
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}

impl Timers {
    /// A sleep of `d` from now on the service's monotonic clock (`tokio::time::sleep`).
    pub fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now().saturating_add(d))
    }

    /// A sleep until `deadline` on the service's monotonic clock ([`Timers::now`];
    /// `tokio::time::sleep_until`). A deadline that has passed completes at the first poll
    /// after a poll of the service (or a driver) saw it.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep {
            drivers: self.drivers.clone(),
            cell: SleepCell::new(deadline.as_nanos()),
            _pinned: PhantomPinned,
        }
    }
}

impl Sleep {
    pub(super) fn core(&self) -> &Core {
        &self.drivers.core
    }

    /// The service's monotonic clock, now.
    pub(super) fn now(&self) -> Instant {
        Instant::from_nanos(self.core().clock.now(ClockId::Monotonic))
    }

    /// The deadline, on the service's monotonic clock.
    pub fn deadline(&self) -> Instant {
        Instant::from_nanos(self.cell.read(|_, body| body.deadline))
    }

    /// Whether the deadline has passed and a poll of the service saw it (the next poll of
    /// this future returns `Ready`).
    pub fn is_elapsed(&self) -> bool {
        self.cell.read(|at, _| at.fired)
    }

    /// Moves the deadline to `deadline`, also after the sleep completed (it then waits again),
    /// as tokio's `Sleep::reset`. The task is woken at the new deadline if it polled the sleep
    /// since it last completed; otherwise its next poll (`.await`) registers it, as any poll
    /// registers the task that polls.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let deadline = deadline.as_nanos();
        let this = self.into_ref().get_ref();
        let core = this.core();
        forked_panic(core);
        // SAFETY: `Pin<&mut Self>`: the holder, alone.
        unsafe {
            if this.cell.phase() == Phase::Done {
                // Completed: placed again below, so an entry and a waker may exist again.
                this.cell.set_phase(Phase::Polled);
            }
            this.cell.holder(|s| {
                let later = deadline >= s.body.deadline;
                s.body.deadline = deadline;
                if s.at.armed && later {
                    // The entry fires early and its delivery places it again (module doc).
                    return;
                }
                let polled = s.at.armed || s.at.fired;
                s.at.fired = false;
                if polled {
                    place(core, &this.cell, s);
                }
            })
        };
        core.health.flush_halt();
    }

    /// [`Sleep::reset`] to `d` from now.
    pub fn reset_after(self: Pin<&mut Self>, d: Duration) {
        let deadline = self.now().saturating_add(d);
        self.reset(deadline);
    }
}

/// Panics if the caller is a child forked after the sleep's service was built: the sleep
/// could never complete there (`timers` module doc, "Fork").
fn forked_panic(core: &Core) {
    if core.health.forked() {
        panic!(
            "tempora::time: a sleep made before fork() is polled or reset in the child: {}",
            crate::Error::Forked
        );
    }
}

/// Places a sleep's entry (on the calling thread's base if it has none).
///
/// # Panics
/// If the base is poisoned: the service has failed (`Timers::health`), and the sleep could
/// never complete.
fn place(core: &Core, cell: &SleepCell, s: &mut SleepState<'_>) {
    if let Err(e) = core.sleep_place(cell, s, core.my_base()) {
        panic!("tempora::time: cannot arm a sleep: {e}");
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.into_ref().get_ref();
        let core = this.core();
        forked_panic(core);
        let waker = cx.waker();
        // SAFETY: `Pin<&mut Self>`: the holder, alone.
        let phase = unsafe { this.cell.phase() };
        if phase == Phase::Done {
            // Completed, not reset since: `fired` stands and nothing else touches the cell.
            return Poll::Ready(());
        }
        let first = phase == Phase::New;
        if first {
            // SAFETY: as above.
            unsafe { this.cell.set_phase(Phase::Polled) };
        }
        // A first poll has no waker stored: clone it before taking the lock, which is then
        // taken once.
        let mut fresh = first.then(|| waker.clone());
        let mut old = None;
        loop {
            // SAFETY: `Pin<&mut Self>`: the holder, alone.
            let r = unsafe {
                this.cell.holder(|s| {
                    if s.at.fired {
                        return Some(true);
                    }
                    if !s.body.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        // A waker is cloned, and the one it replaces dropped, outside the
                        // lock: both run the executor's code.
                        old = s.body.waker.replace(fresh.take()?);
                    }
                    if !s.at.armed {
                        place(core, &this.cell, s);
                    }
                    Some(false)
                })
            };
            drop(old.take());
            core.health.flush_halt();
            match r {
                Some(true) => {
                    // Fired: the delivery took the waker and cleared `armed`, and let go of
                    // the cell when it released the lock this poll then took. The drop that
                    // usually follows needs no lock.
                    // SAFETY: `Pin<&mut Self>`: the holder, alone.
                    unsafe { this.cell.set_phase(Phase::Done) };
                    return Poll::Ready(());
                }
                Some(false) => return Poll::Pending,
                None => fresh = Some(waker.clone()),
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.core().health.forked() {
            // A forked child: its wheel entry is left where it is, with the service's memory
            // (its `Drivers` leak the core; `timers` module doc, "Fork").
            return;
        }
        // SAFETY: `&mut self`: the holder, alone.
        if unsafe { self.cell.phase() } != Phase::Polled {
            // Never polled: no waker, no entry (a reset before the first poll only moved the
            // deadline). A timeout whose future was ready at once costs its sleep nothing.
            // Completed and not reset since: no waker, no entry, no delivery in flight.
            return;
        }
        let core = self.core();
        // SAFETY: `&mut self`: the holder, alone.
        let (in_flight, waker) = unsafe {
            self.cell
                .holder(|s| (core.sleep_remove(s), s.body.waker.take()))
        };
        drop(waker);
        if let Some(b) = in_flight {
            // A poll of base `b` popped the entry and delivers it under this lock: once we hold it,
            // that delivery is over (`timers/object/sleep_cell.rs`). Poisoned: it ended too.
            drop(core.bases[b].delivery());
        }
        core.health.flush_halt();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A sleep is its service handle and a 40-byte cell: with the wheel's 32-byte entry, what a
    /// pending sleep costs.
    #[test]
    fn a_sleep_is_48_bytes() {
        assert_eq!(std::mem::size_of::<SleepCell>(), 40);
        assert_eq!(std::mem::size_of::<Sleep>(), 48);
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
