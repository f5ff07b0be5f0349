//! [`TimerHandle`]: a timer that deletes itself when dropped, for callers who want RAII beside
//! the POSIX-style IDs.

use super::owner::Owner;
use super::types::{ItimerSpec, Notify, SetFlags};
use crate::clock::{ClockId, TimeSpec};
use crate::error::Error;
use crate::registry::TimerId;

/// A timer of an [`Owner`] that is deleted when the handle is dropped (or by
/// [`TimerHandle::delete`], which reports the error a drop cannot). The timer is an ordinary
/// one: its ID works with the owner's calls, appears in listings and checkpoints, and its
/// events arrive on the owner's queue. [`TimerHandle::into_id`] gives the timer up to the
/// owner, undeleted.
///
/// ```
/// use std::time::Duration;
/// use tempora::clock::{ClockId, ManualClock};
/// use tempora::{Notify, SetFlags, Timers};
///
/// let timers = Timers::builder().clock(ManualClock::new()).build().unwrap();
/// let owner = timers.owner();
/// {
///     let timer = owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
///     timer.settime(SetFlags::RELATIVE, Duration::from_secs(5), Duration::ZERO).unwrap();
///     assert_eq!(owner.timers().len(), 1);
/// } // dropped: deleted, disarmed, its pending event dropped unseen
/// assert!(owner.timers().is_empty());
/// ```
#[derive(Debug)]
#[must_use = "dropping the handle deletes the timer"]
pub struct TimerHandle {
    owner: Owner,
    id: TimerId,
    /// Whether the drop still deletes the timer (`delete` and `into_id` clear it).
    owns: bool,
}

impl Owner {
    /// Creates a disarmed timer on `clock`, as [`Owner::create`], and returns a handle that
    /// deletes it when dropped.
    ///
    /// # Errors
    /// As [`Owner::create`].
    pub fn timer(&self, clock: ClockId, notify: Notify) -> Result<TimerHandle, Error> {
        let id = self.create(clock, notify)?;
        Ok(TimerHandle {
            owner: self.clone(),
            id,
            owns: true,
        })
    }
}

impl TimerHandle {
    /// The timer's ID in its owner.
    pub fn id(&self) -> TimerId {
        self.id
    }

    /// The owner the timer belongs to.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// [`Owner::settime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::settime`].
    pub fn settime(
        &self,
        flags: SetFlags,
        value: impl Into<TimeSpec>,
        interval: impl Into<TimeSpec>,
    ) -> Result<ItimerSpec, Error> {
        self.owner.settime(self.id, flags, value, interval)
    }

    /// [`Owner::gettime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::gettime`].
    pub fn gettime(&self) -> Result<ItimerSpec, Error> {
        self.owner.gettime(self.id)
    }

    /// [`Owner::getoverrun`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::getoverrun`].
    pub fn getoverrun(&self) -> Result<i32, Error> {
        self.owner.getoverrun(self.id)
    }

    /// Deletes the timer now and reports how that went (a drop ignores the error: an owner
    /// already destroyed deleted the timer with it).
    ///
    /// # Errors
    /// As [`Owner::delete`].
    pub fn delete(mut self) -> Result<(), Error> {
        self.owns = false;
        self.owner.delete(self.id)
    }

    /// Gives the timer up to its owner: it is no longer deleted on drop, and lives until
    /// [`Owner::delete`] or the owner's end.
    pub fn into_id(mut self) -> TimerId {
        self.owns = false;
        self.id
    }
}

impl Drop for TimerHandle {
    fn drop(&mut self) {
        if self.owns {
            // Unknown timer (deleted by ID meanwhile) or owner destroyed: already gone.
            let _ = self.owner.delete(self.id);
        }
    }
}
