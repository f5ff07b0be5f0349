//! The intrusive storage: entries are objects that carry their own [`Node`] (the kernel's
//! `timer_list` inside `k_itimer`), named by their address. A wheel over it holds only list
//! heads, bitmaps and cursors; an armed object costs nothing beyond itself.
//!
//! A `Ref` is an address with bit 1 clear (every object is at least 4-byte aligned; bit 0 is
//! the owner's to use: the timer service is to tag sleep cells with it). `NIL` is 0, and a head
//! marker is its list's `core::list_id << 2 | 2`: bit 1 set, so never an object's address.
//!
//! # The node's fields and who may touch them
//!
//! The wheel reads and writes a node only under the lock that guards the wheel (the
//! service's base lock), and only while the node is linked or being linked or popped by that
//! wheel. Its fields are atomics (`Relaxed`) so that the object's owner may also *read* two
//! facts without that lock, as long as it holds a lock that every linker of the node holds
//! (the service's timer lock):
//!
//! - whether the node is linked ([`Node::is_linked`]): only a linker (holding the owner's
//!   lock) links it, and only the wheel's `run` unlinks it without that lock: a pop, or a
//!   re-placement of an entry visited before its expiry, which unlinks it and links it again
//!   within one critical section. So under the owner's lock "unlinked" stays unlinked, while
//!   "linked" may read as unlinked during a `run` of its wheel; a reader without the wheel's
//!   lock must also exclude `run` (the service's delivery lock does: `timers/shared/base.rs`);
//! - its tick ([`Node::tick`]): written only by linking and rescheduling, both under the
//!   owner's lock.
//!
//! The tick keeps 62 bits; the top two hold the [`Mode`]. A tick at or beyond `2^62 - 1` is
//! stored as `2^62 - 1` and read back as `u64::MAX`: it never fires, where the slab wheel
//! fires ticks `2^62 - 1` and `2^62` when its clock reaches its end ([`MAX_TICK`]). Only those
//! two ticks differ (every later one never fires in either); at the service's default tick
//! they are hundreds of millennia away, at a 1 ns tick in the year 2116.

use super::core::{list_id, list_of, Core, Links};
use super::{Advance, Mode, DEFAULT_LEVELS, MAX_TICK};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use std::marker::PhantomData;

/// Tick bits of `Node::tick_mode`.
const TICK_MASK: u64 = (1 << 62) - 1;
const _: () = assert!(TICK_MASK == MAX_TICK - 1);

/// An entry's list links, expiry tick and mode, inside the object it belongs to (24 bytes).
#[derive(Debug, Default)]
pub(crate) struct Node {
    next: AtomicUsize,
    prev: AtomicUsize,
    tick_mode: AtomicU64,
}

impl Node {
    /// Whether the node is in a wheel's list (see the module doc for when this is stable).
    #[inline]
    pub(crate) fn is_linked(&self) -> bool {
        self.prev.load(Ordering::Relaxed) != 0
    }

    /// The tick it was last linked or rescheduled at (see the module doc), `u64::MAX` for
    /// one at or beyond `2^62 - 1`.
    #[inline]
    pub(crate) fn tick(&self) -> u64 {
        match self.tick_mode.load(Ordering::Relaxed) & TICK_MASK {
            TICK_MASK => u64::MAX,
            tick => tick,
        }
    }
}

/// How an intrusive storage finds the node of an entry.
///
/// # Safety
/// `node` must return the node of the live object at address `r` (bit 0 may be a tag the
/// implementation strips), for every `r` a wheel over `Intrusive<Self>` was given and still
/// holds. What keeps those objects alive is the implementation's contract with the wheel's
/// users (the service's: `timers/mod.rs`, "Safety of the timer addresses").
pub(crate) unsafe trait Locate {
    /// # Safety
    /// `r` names an object that a wheel over this storage holds (linked), or one being linked
    /// or just popped by the holder of the wheel's lock.
    unsafe fn node<'a>(r: usize) -> &'a Node;
}

/// The storage of a wheel whose entries carry their own [`Node`]s, found by `L`.
pub(crate) struct Intrusive<L>(PhantomData<fn() -> L>);

impl<L> Default for Intrusive<L> {
    fn default() -> Self {
        Intrusive(PhantomData)
    }
}

impl<L: Locate> Intrusive<L> {
    #[inline]
    fn node<'a>(r: usize) -> &'a Node {
        debug_assert!(r != 0 && r & 2 == 0, "not an entry: {r:#x}");
        // SAFETY: the core passes only refs it was given and still holds, or that the holder
        // of its lock is linking or popping (`Links`), which is what `Locate::node` requires.
        unsafe { L::node(r) }
    }
}

impl<L: Locate> Links for Intrusive<L> {
    type Ref = usize;
    const NIL: usize = 0;

    #[inline]
    fn marker(lane: usize, bucket: u16) -> usize {
        usize::from(list_id(lane, bucket)) << 2 | 2
    }

    #[inline]
    fn unmark(r: usize) -> Option<(usize, u16)> {
        (r & 2 != 0).then(|| list_of((r >> 2) as u16))
    }

    #[inline]
    fn next(&self, r: usize) -> usize {
        Self::node(r).next.load(Ordering::Relaxed)
    }

    #[inline]
    fn set_next(&mut self, r: usize, next: usize) {
        Self::node(r).next.store(next, Ordering::Relaxed);
    }

    #[inline]
    fn prev(&self, r: usize) -> usize {
        Self::node(r).prev.load(Ordering::Relaxed)
    }

    #[inline]
    fn set_prev(&mut self, r: usize, prev: usize) {
        Self::node(r).prev.store(prev, Ordering::Relaxed);
    }

    #[inline]
    fn tick(&self, r: usize) -> u64 {
        Self::node(r).tick()
    }

    #[inline]
    fn set_tick(&mut self, r: usize, tick: u64) {
        let n = &Self::node(r).tick_mode;
        let mode = n.load(Ordering::Relaxed) & !TICK_MASK;
        n.store(mode | tick.min(TICK_MASK), Ordering::Relaxed);
    }

    #[inline]
    fn mode(&self, r: usize) -> Mode {
        Mode((Self::node(r).tick_mode.load(Ordering::Relaxed) >> 62) as u8)
    }

    #[inline]
    fn set_tick_mode(&mut self, r: usize, tick: u64, mode: Mode) {
        let word = (mode.0 as u64) << 62 | tick.min(TICK_MASK);
        Self::node(r).tick_mode.store(word, Ordering::Relaxed);
    }

    #[inline]
    fn kept(tick: u64) -> u64 {
        if tick >= TICK_MASK {
            u64::MAX
        } else {
            tick
        }
    }
}

/// A wheel over the intrusive storage: the core's operations with their contract on the
/// objects spelled out (each one that takes a `Ref` is `unsafe`).
pub(crate) struct NodeWheel<L: Locate> {
    core: Core<Intrusive<L>>,
}

impl<L: Locate> NodeWheel<L> {
    /// An empty wheel of [`DEFAULT_LEVELS`] levels whose clock starts at `start`.
    pub(crate) fn new(start: u64) -> NodeWheel<L> {
        NodeWheel {
            core: Core::new(Intrusive::default(), DEFAULT_LEVELS, start),
        }
    }

    /// See [`Wheel::now`](super::Wheel::now).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.core.now()
    }

    /// Linked objects.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.core.len()
    }

    /// The tick a node keeps (and [`Node::tick`] reads back) for a link or move to `tick`.
    #[inline]
    pub(crate) fn kept(tick: u64) -> u64 {
        <Intrusive<L> as Links>::kept(tick)
    }

    /// Links the object `r` at `tick` as `mode` says, or, if its node is linked (here),
    /// moves it to `tick` keeping its mode: what an arming does.
    ///
    /// # Safety
    /// `r` names a live object (see [`Locate`]) whose node is in no wheel or in this one, and
    /// the object stays alive until it is unlinked or popped ([`NodeWheel::run`]).
    #[inline]
    pub(crate) unsafe fn set(&mut self, r: usize, tick: u64, mode: Mode) {
        // SAFETY: the caller's promise; under `&mut self` (the wheel's lock) `is_linked` is
        // exact for a node of this wheel.
        if unsafe { L::node(r) }.is_linked() {
            self.core.reschedule(r, tick);
        } else {
            self.core.link(r, tick, mode);
        }
    }

    /// Takes the object `r` out of this wheel if its node is linked (a popped node is not):
    /// what a disarm does.
    ///
    /// # Safety
    /// `r` names a live object whose node is in no wheel or in this one.
    #[inline]
    pub(crate) unsafe fn take(&mut self, r: usize) {
        // SAFETY: as in `set`.
        if unsafe { L::node(r) }.is_linked() {
            self.core.unlink(r);
        }
    }

    /// Pops the objects due by tick `now`, handing each (unlinked) to `f`, visiting at most
    /// `max` entries (see [`Wheel::advance`](super::Wheel::advance)).
    #[inline]
    pub(crate) fn run(&mut self, now: u64, max: usize, mut f: impl FnMut(usize)) -> Advance {
        self.core.run(now, max, usize::MAX, &mut |_, r| f(r))
    }

    /// See [`Wheel::next_fire`](super::Wheel::next_fire).
    #[inline]
    pub(crate) fn next_fire(&self) -> Option<u64> {
        self.core.next_fire(0)
    }

    /// See [`Wheel::next_deferred_fire`](super::Wheel::next_deferred_fire).
    #[inline]
    pub(crate) fn next_deferred_fire(&self) -> Option<u64> {
        self.core.next_fire(1)
    }

    /// See [`Wheel::rebase`](super::Wheel::rebase).
    pub(crate) fn rebase(&mut self, now: u64) {
        self.core.rebase(now);
    }
}
