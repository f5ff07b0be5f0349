//! [`TimerHandle`]: a timer that deletes itself when dropped, for callers who want RAII beside
//! the POSIX-style IDs; and the handles that reach an owner without keeping it alive: a
//! [`WeakOwner`], a [`WeakTimer`], and the [`Fired`] a callback is handed, whose calls act on
//! its own timer.
//!
//! # No capture cycles
//! A timer holds its callback, and an owner its timers and the wakers of the tasks waiting
//! for its events. A callback that holds a strong handle of its own owner ([`Owner`], or a
//! [`TimerHandle`] or an [`Events`] stream, which hold one), or a task waiting on the
//! owner's events that holds one, closes a circle: the owner's other handles can all be
//! dropped and nothing ends. So each strong handle has a weak one to capture instead, with
//! the same calls:
//! * a callback's own timer: [`Notify::callback`] hands it a [`Fired`] (its timer's calls,
//!   through a weak handle the timer keeps); any other timer: [`TimerHandle::downgrade`]
//!   gives a [`WeakTimer`];
//! * an owner: [`Owner::downgrade`] gives a [`WeakOwner`];
//! * an owner's events: [`WeakOwner::events`] gives an [`Events`] stream that ends when the
//!   owner does, instead of keeping it ([`Owner::events`]).
//!
//! Each call upgrades for its own length only, so the owner ends when its last user handle
//! is dropped, even while a call runs (that call's calls then fail with
//! [`Error::OwnerDeleted`]; the teardown runs on the thread that drops the last handle,
//! which may be the call's).

use super::owner::Owner;
use super::receive::Events;
use crate::clock::{ClockId, TimeSpec};
use crate::error::Error;
use crate::registry::TimerId;
use crate::timers::object::types::{Fired, ItimerSpec, Notify, SetFlags, WeakOwner};
use crate::timers::object::Itimer;
use std::mem::ManuallyDrop;

/// A timer of an [`Owner`] that is deleted when the handle is dropped (or by
/// [`TimerHandle::delete`], which reports the error a drop cannot). The timer is an ordinary
/// one: its ID works with the owner's calls, appears in listings and checkpoints, and its
/// events arrive on the owner's queue. [`TimerHandle::into_id`] gives the timer up to the
/// owner, undeleted.
///
/// A strong handle: it keeps the owner alive. What a closure of the owner's own timers (or a
/// task waiting on its events) captures is the [`WeakTimer`] of [`TimerHandle::downgrade`]
/// (the module doc, "No capture cycles").
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

impl TimerHandle {
    /// A handle to this timer that does not keep its owner alive, nor delete the timer when
    /// dropped: what a closure the owner's timers hold, or a task waiting on the owner's
    /// events, captures to act on this timer (a captured `TimerHandle` would keep the owner,
    /// its timers and the closure alive for good: the module doc, "No capture cycles").
    ///
    /// ```
    /// use std::time::Duration;
    /// use tempora::clock::{ClockId, ManualClock};
    /// use tempora::{Notify, SetFlags, Timers};
    ///
    /// let clock = ManualClock::new();
    /// let timers = Timers::builder().clock(clock.clone()).build().unwrap();
    /// let owner = timers.owner();
    /// let tick = owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    /// let weak = tick.downgrade();
    /// // Another timer's callback re-arms `tick`, holding no owner.
    /// let kick = owner
    ///     .timer(
    ///         ClockId::Monotonic,
    ///         Notify::callback(move |_| {
    ///             let _ = weak.settime(SetFlags::RELATIVE, Duration::from_millis(1), Duration::ZERO);
    ///         }),
    ///     )
    ///     .unwrap();
    /// kick.settime(SetFlags::RELATIVE, Duration::from_millis(1), Duration::ZERO).unwrap();
    /// clock.advance(Duration::from_millis(1));
    /// timers.poll();
    /// clock.advance(Duration::from_millis(1));
    /// timers.poll();
    /// assert_eq!(owner.try_recv().map(|e| e.id), Some(tick.id()));
    /// ```
    pub fn downgrade(&self) -> WeakTimer {
        WeakTimer {
            owner: self.owner.downgrade(),
            id: self.id,
        }
    }
}

/// A timer reached through its owner held weakly ([`TimerHandle::downgrade`]): its calls
/// act on the timer while a strong handle of the owner is alive, and fail with
/// [`Error::OwnerDeleted`] once the last one was dropped (which deleted the timer). Dropping
/// it does nothing: the [`TimerHandle`] decides when the timer is deleted.
#[derive(Debug, Clone)]
pub struct WeakTimer {
    owner: WeakOwner,
    id: TimerId,
}

impl WeakTimer {
    /// The timer's ID in its owner.
    pub fn id(&self) -> TimerId {
        self.id
    }

    /// The timer's owner, while a strong handle of it is alive ([`WeakOwner::upgrade`]).
    /// Drop it before the closure that holds this handle returns: kept in the closure's
    /// state, it closes the circle this handle avoids.
    pub fn owner(&self) -> Option<Owner> {
        self.owner.upgrade()
    }

    /// A weak handle to the timer's owner.
    pub fn weak_owner(&self) -> &WeakOwner {
        &self.owner
    }

    /// [`Owner::settime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::settime`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    pub fn settime(
        &self,
        flags: SetFlags,
        value: impl Into<TimeSpec>,
        interval: impl Into<TimeSpec>,
    ) -> Result<ItimerSpec, Error> {
        self.alive()?.settime(self.id, flags, value, interval)
    }

    /// [`Owner::gettime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::gettime`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    pub fn gettime(&self) -> Result<ItimerSpec, Error> {
        self.alive()?.gettime(self.id)
    }

    /// [`Owner::getoverrun`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::getoverrun`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    pub fn getoverrun(&self) -> Result<i32, Error> {
        self.alive()?.getoverrun(self.id)
    }

    /// [`Owner::delete`] on this timer (its [`TimerHandle`]'s drop then finds it gone).
    ///
    /// # Errors
    /// As [`Owner::delete`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped (which deleted the timer).
    pub fn delete(&self) -> Result<(), Error> {
        self.alive()?.delete(self.id)
    }

    fn alive(&self) -> Result<Owner, Error> {
        self.owner.alive()
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

impl Owner {
    /// A handle to this owner that does not keep it alive: what a closure the owner's timers
    /// hold captures to reach it (a captured [`Owner`] would keep it, and them, alive for
    /// good; the module doc, "No capture cycles"). A callback acting on its own timer needs
    /// none: [`Notify::callback`] hands it a [`Fired`].
    pub fn downgrade(&self) -> WeakOwner {
        WeakOwner {
            reg: self.reg.downgrade(),
        }
    }
}

impl WeakOwner {
    /// The owner, while a strong handle ([`Owner`]) of it is alive; `None` once the last one
    /// was dropped (the owner then ended, with its timers). A [destroyed](Owner::destroy)
    /// owner whose handles are alive is returned: its calls fail with
    /// [`Error::OwnerDeleted`].
    pub fn upgrade(&self) -> Option<Owner> {
        Some(Owner {
            reg: ManuallyDrop::new(self.reg.upgrade::<Itimer>()?),
        })
    }

    /// [`upgrade`](Self::upgrade) for a call on one of its timers: [`Error::OwnerDeleted`]
    /// once the owner ended.
    fn alive(&self) -> Result<Owner, Error> {
        self.upgrade().ok_or(Error::OwnerDeleted)
    }
}

impl WeakOwner {
    /// The owner's events as a stream ([`Owner::events`]) that does not keep the owner
    /// alive: it ends (`None`) once the owner's last strong handle is dropped, as it ends when
    /// the owner is destroyed. What a task that the owner's callbacks or events wake holds,
    /// so that dropping the owner's other handles ends the owner, and with it the task's wait
    /// (the module doc, "No capture cycles").
    pub fn events(&self) -> Events {
        Events::weak(self.clone())
    }
}

impl Fired<'_> {
    /// The timer's owner, while a strong handle of it is alive ([`WeakOwner::upgrade`]).
    /// Drop it before the callback returns: kept past it (in the closure's state), it closes
    /// the circle [`Notify::callback`] avoids.
    pub fn owner(&self) -> Option<Owner> {
        self.owner.upgrade()
    }

    /// A weak handle to the timer's owner, to hand on.
    pub fn weak_owner(&self) -> &WeakOwner {
        self.owner
    }

    /// [`Owner::settime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::settime`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    #[doc(alias = "timer_settime")]
    pub fn settime(
        &self,
        flags: SetFlags,
        value: impl Into<TimeSpec>,
        interval: impl Into<TimeSpec>,
    ) -> Result<ItimerSpec, Error> {
        self.alive()?.settime(self.id(), flags, value, interval)
    }

    /// [`Owner::gettime`] on this timer.
    ///
    /// # Errors
    /// As [`Owner::gettime`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    #[doc(alias = "timer_gettime")]
    pub fn gettime(&self) -> Result<ItimerSpec, Error> {
        self.alive()?.gettime(self.id())
    }

    /// [`Owner::getoverrun`] on this timer: the overrun latched by its last event consumed
    /// (a callback's own event's is [`Fired::overrun`]).
    ///
    /// # Errors
    /// As [`Owner::getoverrun`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped.
    #[doc(alias = "timer_getoverrun")]
    pub fn getoverrun(&self) -> Result<i32, Error> {
        self.alive()?.getoverrun(self.id())
    }

    /// [`Owner::delete`] on this timer: it is not called again for expiries taken before.
    ///
    /// # Errors
    /// As [`Owner::delete`]; [`Error::OwnerDeleted`] once the owner's last handle was
    /// dropped (which deleted the timer).
    #[doc(alias = "timer_delete")]
    pub fn delete(&self) -> Result<(), Error> {
        self.alive()?.delete(self.id())
    }

    fn alive(&self) -> Result<Owner, Error> {
        self.owner.alive()
    }
}
