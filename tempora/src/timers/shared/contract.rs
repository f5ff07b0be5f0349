//! The registry's contract with the service (`registry::Service`): what a create writes into
//! a timer object, what deleting a timer and destroying an owner do, and the service's part of
//! each owner.
//!
//! The delete hook runs under the timer's lock with the timer already invisible: it counts the
//! delete, gives back the group charge, takes the timer out of its wheel and hands back its
//! callback, which the registry drops once it holds no lock (a callback's `Drop` is user
//! code). Destroying an owner closes its event queue, so its receivers stop waiting.

use super::lookout::{Key, Member};
use super::Core;
use crate::registry::Service;
use crate::stats::Counter;
use crate::sync::Ordering;
use crate::timers::object::itimer::{ItimerPublished, ItimerState};
use crate::timers::object::notify::CLOSED_OWNER;
use crate::timers::object::types::NotifyKind;
use crate::timers::object::{
    callback_of, signal_of, Attached, EventQueue, Itimer, ItimerFixed, ItimerInit, LockedTimer,
};
use crate::wheel::intrusive::Node;
use std::sync::Arc;

/// What the delete hook hands back, dropped by the registry once it holds no lock: the
/// timer's callback or signal cell (a callback's `Drop` is user code), and for a signal timer
/// that looked for others of its lookout, the hand-over of their looks (`lookout.rs`).
pub(crate) struct Released {
    attached: Option<Box<Attached>>,
    hand_over: Option<(Arc<Core>, Key)>,
}

impl Drop for Released {
    fn drop(&mut self) {
        drop(self.attached.take());
        if let Some((core, key)) = self.hand_over.take() {
            core.hand_over(key);
        }
    }
}

/// The service's part of each owner.
pub(crate) struct OwnerPart {
    pub(crate) core: Arc<Core>,
    /// Shared with the service's list of owners' queues (`Health`, weakly); timers' `sink` points at it.
    pub(crate) sink: Arc<EventQueue>,
}

impl Service for Itimer {
    type Fixed = ItimerFixed;
    type Published = ItimerPublished;
    type Links = Node;
    type State = ItimerState;
    type Init = ItimerInit;
    type OwnerPart = OwnerPart;
    type Released = Released;

    fn init(
        fixed: &ItimerFixed,
        published: &ItimerPublished,
        state: &mut ItimerState,
        init: ItimerInit,
    ) {
        // Relaxed (all): published with the timer by the create (`Service::init`).
        fixed.sink.store(init.sink.cast_mut(), Ordering::Relaxed);
        let attached = init.attached.map_or(std::ptr::null_mut(), Box::into_raw);
        fixed.attached.store(attached, Ordering::Relaxed);
        fixed.precision.store(0, Ordering::Relaxed);
        state.create(published, init.clock, init.notify);
    }

    fn on_delete(owner: &OwnerPart, l: &mut LockedTimer<'_>) -> Released {
        let tally = &owner.sink.tally;
        tally.add(Counter::Deleted, 1);
        tally.group.uncharge();
        // A `Queue` timer's room on the queue is given back here, unless its entry is on the
        // queue (or held for it by a poll): the entry, stale now, keeps the room until its
        // consume drops it and gives it back (`notify.rs`, "Memory"), and is counted in the
        // slot's carried word, which the slot's next timers do not reset (`notify.rs`,
        // "Entries").
        if l.state.notify() == NotifyKind::Queue {
            if l.state.queued() {
                let stale = l.carried();
                // Relaxed: under the timer's lock, as every access but the owner's first.
                stale.store(stale.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            } else {
                owner.sink.unreserve();
            }
        }
        // A poisoned base fails the service; the timer is deleted all the same (its node, if
        // still linked there, is never reached again).
        let _ = owner.core.disarm(l);
        let mut hand_over = None;
        if let Some(cell) = signal_of(l) {
            // Out of its lookout before its cell is freed (`lookout.rs`).
            let key = Key::slot_of(cell);
            if owner
                .core
                .lookouts
                .leave(key, Member::new(l.timer, cell), cell)
            {
                hand_over = Some((owner.core.clone(), key));
            }
        }
        l.state.delete();
        if let Some(cell) = callback_of(l) {
            // Expiries folded into a running call are stale now (`serial.rs`).
            cell.serial.drop_folded();
        }
        // Relaxed: under the timer's lock, which every reader of `callback` holds.
        let cb = l
            .fixed()
            .attached
            .swap(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `attached` is null or a `Box<Attached>` leaked at create (`init`), taken
        // out exactly once, here, under the lock.
        let attached = (!cb.is_null()).then(|| unsafe { Box::from_raw(cb) });
        Released {
            attached,
            hand_over,
        }
    }

    fn on_destroy(owner: &OwnerPart) {
        owner.sink.close(CLOSED_OWNER);
        // The teardown's delete hooks may have met a failure; no lock is held now.
        owner.core.health.flush_halt();
    }
}
