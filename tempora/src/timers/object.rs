//! What the service keeps in each timer object and in each owner: the [`Itimer`] service the
//! registry serves.
//!
//! ```text
//!  timer object (registry/timer.rs)          the service's parts
//!   line 1 ... fixed      ItimerFixed         sink (the owner's event queue), callback
//!   line 2  lock, published ItimerPublished   overrun_last (getoverrun reads it lock-free)
//!           state         ItimerState         the itimer rules' state (`itimer.rs`), where
//!                                             the timer waits (base, wheel, key, tick), its
//!                                             queue flags, clock and notification kind
//!  owner (registry/owner.rs)
//!           service       OwnerPart           the service's core, the owner's event queue
//! ```
//!
//! The delete hook ([`Service::on_delete`]) takes the timer out of its wheel and hands back its
//! callback, which the registry drops once it holds no lock; destroying an owner closes its
//! event queue ([`Service::on_destroy`]).

use super::core::Core;
use super::itimer::ItimerState;
use super::notify::{Sink, CLOSED_OWNER};
use super::types::{Callback, NotifyKind};
use crate::clock::ClockId;
use crate::registry::{Locked, Service};
use crate::sync::{AtomicI32, AtomicPtr, Ordering};
use std::sync::Arc;

/// The POSIX interval-timer service, as the registry sees it.
pub(crate) struct Itimer;

/// A timer of this service, locked.
pub(crate) type LockedTimer<'a> = Locked<'a, Itimer>;

/// Set at create, read by whoever holds the timer's lock.
#[derive(Debug, Default)]
pub(crate) struct ItimerFixed {
    /// The owner's event queue (every timer of an owner points at the same one).
    sink: AtomicPtr<Sink>,
    /// The callback of a `Callback` timer (a leaked `Box`), null otherwise. Cleared, and the
    /// box taken back, only by the delete hook under the timer's lock.
    callback: AtomicPtr<CallbackCell>,
}

/// Written under the timer's lock, read without it.
#[derive(Debug, Default)]
pub(crate) struct ItimerPublished {
    /// What `getoverrun` returns.
    pub(crate) overrun_last: AtomicI32,
}

/// A callback timer's closure and the name a checkpoint records.
pub(crate) struct CallbackCell {
    pub(crate) f: Callback,
    pub(crate) name: Option<Arc<str>>,
}

/// What a create is given.
pub(crate) struct ItimerInit {
    pub(crate) clock: ClockId,
    pub(crate) notify: NotifyKind,
    pub(crate) callback: Option<Box<CallbackCell>>,
    /// The owner's event queue.
    pub(crate) sink: *const Sink,
}

/// The service's part of each owner.
pub(crate) struct OwnerPart {
    pub(crate) core: Arc<Core>,
    /// Shared with `Core::owners` (weakly); timers' `sink` points at it.
    pub(crate) sink: Arc<Sink>,
}

impl Service for Itimer {
    type Fixed = ItimerFixed;
    type Published = ItimerPublished;
    type State = ItimerState;
    type Init = ItimerInit;
    type Owner = OwnerPart;
    type Released = Option<Box<CallbackCell>>;

    fn init(
        fixed: &ItimerFixed,
        published: &ItimerPublished,
        state: &mut ItimerState,
        init: ItimerInit,
    ) {
        // Relaxed (all): published with the timer by the create (`Service::init`).
        fixed.sink.store(init.sink.cast_mut(), Ordering::Relaxed);
        let callback = init.callback.map_or(std::ptr::null_mut(), Box::into_raw);
        fixed.callback.store(callback, Ordering::Relaxed);
        published.overrun_last.store(0, Ordering::Relaxed);
        *state = ItimerState::new(init.clock, init.notify);
    }

    fn on_delete(owner: &OwnerPart, l: &mut LockedTimer<'_>) -> Option<Box<CallbackCell>> {
        owner.core.disarm(l);
        l.state.status = super::types::Status::Disarmed;
        l.state.signal_seq = l.state.signal_seq.wrapping_add(1);
        // Relaxed: under the timer's lock, which every reader of `callback` holds.
        let cb = l
            .fixed()
            .callback
            .swap(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `callback` is null or a `Box<CallbackCell>` leaked at create (`init`), taken
        // out exactly once, here, under the lock.
        (!cb.is_null()).then(|| unsafe { Box::from_raw(cb) })
    }

    fn on_destroy(owner: &OwnerPart) {
        owner.sink.close(CLOSED_OWNER);
    }
}

/// The owner's event queue of a locked timer.
pub(crate) fn sink_of<'l>(l: &'l LockedTimer<'_>) -> &'l Sink {
    // Relaxed: written at create, before the timer became visible.
    let sink = l.fixed().sink.load(Ordering::Relaxed);
    // SAFETY: `sink` points at the owner's `Sink`, which the owner keeps (`OwnerPart`) until
    // its teardown has marked every timer deleted under its lock; this timer is visible and
    // its lock is held.
    unsafe { &*sink }
}

/// The callback cell of a locked callback timer, if any.
pub(crate) fn callback_of<'l>(l: &'l LockedTimer<'_>) -> Option<&'l CallbackCell> {
    // Relaxed: written at create; cleared only under this lock.
    let cb = l.fixed().callback.load(Ordering::Relaxed);
    // SAFETY: null or the timer's live `Box<CallbackCell>`, freed only by the delete hook under
    // the lock `l` holds; the reference does not outlive `l`.
    unsafe { cb.as_ref() }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::registry::Timer;
    use std::mem::{offset_of, size_of};

    /// The parts fill the object's two cache lines exactly (`registry/timer.rs` has the
    /// layout; `itimer.rs` the state's fields).
    #[test]
    fn the_service_parts_fit_the_two_lines() {
        assert_eq!(size_of::<Timer<Itimer>>(), 128);
        assert_eq!(size_of::<ItimerFixed>(), 16);
        assert_eq!(size_of::<ItimerPublished>(), 4);
        assert_eq!(size_of::<ItimerState>(), 56);
        assert_eq!(offset_of!(ItimerState, expiry), 8);
        assert_eq!(offset_of!(ItimerState, wheel_key), 32);
        assert_eq!(offset_of!(ItimerState, sigqueue_seq), 40);
        assert_eq!(offset_of!(ItimerState, queued), 44);
        assert_eq!(offset_of!(ItimerState, status), 45);
        assert_eq!(offset_of!(ItimerState, clock), 46);
        assert_eq!(offset_of!(ItimerState, notify), 47);
        assert_eq!(offset_of!(ItimerState, wheel_tick), 48);
    }
}
