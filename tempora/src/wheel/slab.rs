//! The slab storage of [`Wheel`](super::Wheel): its entries (expiry, links, generation, the
//! payload), the [`Key`] that names one, the free list, and the [`Expired`] entry a poll hands
//! back. The wheel's logic (`core.rs`) links entries through the slab's [`Links`].

use super::core::{list_id, list_of, Links, Mode};
use std::fmt;
use std::mem::MaybeUninit;

/// Slab index sentinel: "no entry".
pub(super) const NIL: u32 = u32::MAX;
/// Slab refs with this bit set are head markers (their list's `core::list_id` below it);
/// entry indices stay below it.
const MARKER: u32 = 1 << 31;

/// A handle to an entry: slab index and generation. Stale keys are rejected, never misapplied.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(u64);

impl Key {
    #[inline]
    pub(super) fn new(index: u32, generation: u32) -> Key {
        Key((generation as u64) << 32 | index as u64)
    }

    #[inline]
    pub(super) fn index(self) -> u32 {
        self.0 as u32
    }

    #[inline]
    pub(super) fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The key as one `u64` (for storing it in an atomic or passing it through C).
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// The key back from [`Key::to_bits`]. Any value is safe to pass: a key that names no live
    /// entry is simply rejected by the wheel.
    pub fn from_bits(bits: u64) -> Key {
        Key(bits)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({}v{})", self.index(), self.generation())
    }
}

/// An entry handed back by [`Wheel::poll`](super::Wheel::poll) when it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expired<T> {
    /// The key it had; now stale.
    pub key: Key,
    /// Its exact expiry (the wheel clock when it was polled is at least this).
    pub expiry: u64,
    /// Its payload.
    pub value: T,
}

/// One slab entry: 23 bytes plus the payload, padded to a multiple of 8 (or of the payload's
/// alignment if larger): 32 bytes for a `u64` payload, so two entries share a cache line and
/// none straddles two.
pub(super) struct Entry<T> {
    /// Exact expiry in ticks.
    pub(super) expiry: u64,
    /// Next entry in the bucket list, or next free entry when vacant.
    pub(super) next: u32,
    /// Previous entry in the bucket list, a head marker at the front, `NIL` when vacant.
    pub(super) prev: u32,
    /// Bumped when the entry is freed; a [`Key`] must match it.
    pub(super) generation: u32,
    pub(super) mode: Mode,
    /// The list that holds the entry while it is linked (its `core::list_id`): in what would
    /// be padding, it lets a reschedule within the same bucket skip
    /// the list wherever the entry sits in it ([`Links::bucket`]).
    pub(super) bucket: u16,
    /// Initialized exactly when `prev != NIL` (established by `alloc` + link, ended by
    /// `free`). `MaybeUninit` rather than `Option` because `Option<u64>` would make the entry
    /// 40 bytes: 25% more memory per timer and 3 entries in 8 straddling two cache lines (a
    /// second cache miss for those).
    pub(super) value: MaybeUninit<T>,
}

/// The slab: [`Wheel`](super::Wheel)'s storage of entries, and its free list.
pub(super) struct Slab<T> {
    pub(super) entries: Vec<Entry<T>>,
    pub(super) free_head: u32,
}

impl<T> Links for Slab<T> {
    type Ref = u32;
    const NIL: u32 = NIL;

    #[inline]
    fn marker(lane: usize, bucket: u16) -> u32 {
        MARKER | u32::from(list_id(lane, bucket))
    }

    #[inline]
    fn unmark(r: u32) -> Option<(usize, u16)> {
        (r != NIL && r & MARKER != 0).then(|| list_of(r as u16))
    }

    #[inline]
    fn next(&self, r: u32) -> u32 {
        self.entries[r as usize].next
    }

    #[inline]
    fn set_next(&mut self, r: u32, next: u32) {
        self.entries[r as usize].next = next;
    }

    #[inline]
    fn prev(&self, r: u32) -> u32 {
        self.entries[r as usize].prev
    }

    #[inline]
    fn set_prev(&mut self, r: u32, prev: u32) {
        self.entries[r as usize].prev = prev;
    }

    #[inline]
    fn tick(&self, r: u32) -> u64 {
        self.entries[r as usize].expiry
    }

    #[inline]
    fn set_tick(&mut self, r: u32, tick: u64) {
        self.entries[r as usize].expiry = tick;
    }

    #[inline]
    fn mode(&self, r: u32) -> Mode {
        self.entries[r as usize].mode
    }

    #[inline]
    fn bucket(&self, r: u32) -> Option<(usize, u16)> {
        Some(list_of(self.entries[r as usize].bucket))
    }

    #[inline]
    fn set_bucket(&mut self, r: u32, lane: usize, bucket: u16) {
        self.entries[r as usize].bucket = list_id(lane, bucket);
    }

    #[inline]
    fn set_tick_mode(&mut self, r: u32, tick: u64, mode: Mode) {
        let entry = &mut self.entries[r as usize];
        entry.expiry = tick;
        entry.mode = mode;
    }
}

impl<T> Slab<T> {
    /// The slab index of a live entry named by `key`.
    #[inline]
    pub(super) fn live_index(&self, key: Key) -> Option<u32> {
        let entry = self.entries.get(key.index() as usize)?;
        (entry.generation == key.generation() && entry.prev != NIL).then_some(key.index())
    }

    /// Takes a free entry (or a new one) and stores the value; the caller links it at once
    /// (which sets `prev` and so makes the entry live).
    pub(super) fn alloc(&mut self, value: T) -> u32 {
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            self.free_head = entry.next;
            // The entry is vacant, so its value is uninitialized: overwriting drops nothing.
            entry.value = MaybeUninit::new(value);
            return index;
        }
        let index = u32::try_from(self.entries.len())
            .ok()
            .filter(|&i| i < MARKER)
            .expect("tempora wheel: more than 2^31 entries");
        if self.entries.len() == self.entries.capacity() {
            // Grow by half, not double: averaged over a growth cycle, 0.22 spare entries per
            // live one instead of `Vec` doubling's 0.39 (5 bytes less per timer), for about
            // twice the bytes copied by growth in total (amortised O(1) still).
            let cap = self.entries.capacity();
            self.entries.reserve_exact((cap / 2).max(16));
        }
        self.entries.push(Entry {
            expiry: 0,
            next: NIL,
            prev: NIL,
            generation: 0,
            mode: Mode::COARSE,
            bucket: 0,
            value: MaybeUninit::new(value),
        });
        index
    }

    /// Frees an unlinked entry and returns its payload. Bumping the generation is what makes
    /// every key to this entry stale.
    pub(super) fn free(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        debug_assert!(entry.prev == NIL);
        // SAFETY: the entry was live (its caller took it from a list, or it is being freed
        // right after being unlinked), so the value is initialized; `prev == NIL` and the
        // free list mark it vacant right after, so it is never read again.
        let value = unsafe { entry.value.assume_init_read() };
        entry.generation = entry.generation.wrapping_add(1);
        entry.next = self.free_head;
        self.free_head = index;
        value
    }

    /// The expired entry `index`, just unlinked, freed.
    pub(super) fn fire(&mut self, index: u32) -> Expired<T> {
        let entry = &self.entries[index as usize];
        let (key, expiry) = (Key::new(index, entry.generation), entry.expiry);
        Expired {
            key,
            expiry,
            value: self.free(index),
        }
    }
}
