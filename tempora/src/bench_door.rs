//! Not part of tempora's API: the timer-ID registry on its own, for the benchmark suite that
//! compares ID registries (`tempora bench`, the seed suite). It drives the registry the
//! service uses, with the service's timer objects, through the registry's own calls: no clock
//! is read, nothing is armed.

use crate::clock::ClockId;
use crate::timers::object::ItimerInit;
use crate::timers::{NotifyKind, TimerId, Timers};
use crate::Error;

/// A registry (inside a service with no drivers).
#[derive(Debug)]
pub struct Registry(Timers);

/// An owner of a [`Registry`].
#[derive(Debug)]
pub struct Owner(crate::timers::Owner);

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry with the default configuration.
    pub fn new() -> Registry {
        let timers = Timers::builder()
            .drivers(0)
            .build()
            .expect("the default configuration is valid");
        Registry(timers)
    }

    /// A new owner.
    pub fn owner(&self) -> Owner {
        Owner(self.0.owner())
    }
}

impl Owner {
    fn init(&self) -> ItimerInit {
        ItimerInit {
            clock: ClockId::Monotonic,
            notify: NotifyKind::None,
            callback: None,
            sink: std::sync::Arc::as_ptr(self.0.sink()),
        }
    }

    /// Creates a `SIGEV_NONE` timer with the next free ID.
    ///
    /// # Errors
    /// As `Owner::create`.
    pub fn create(&self) -> Result<TimerId, Error> {
        self.0.reg.create(None, self.init(), None)
    }

    /// Creates a `SIGEV_NONE` timer with the ID `id` (restore mode must be on).
    ///
    /// # Errors
    /// As `Owner::create_with_id`.
    pub fn create_with_id(&self, id: i32) -> Result<TimerId, Error> {
        self.0.reg.create(Some(id), self.init(), None)
    }

    /// Turns exact-ID (restore) mode on or off.
    pub fn set_restore_ids(&self, on: bool) {
        self.0.set_restore_ids(on);
    }

    /// `getoverrun`: the lock-free lookup.
    ///
    /// # Errors
    /// As `Owner::getoverrun`.
    pub fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.0.getoverrun(id)
    }

    /// Deletes timer `id`.
    ///
    /// # Errors
    /// As `Owner::delete`.
    pub fn delete(&self, id: TimerId) -> Result<(), Error> {
        self.0.reg.delete(id)
    }
}
