//! A non-cascading hierarchical timer wheel: the data structure under every tempora base.
//!
//! The wheel owns a set of entries, each with an exact expiry in *ticks* (a `u64` whose unit the
//! caller chooses) and a payload `T`. It answers three questions without a walk over its
//! entries: where does a new entry go (O(1)), when is the next one due ([`Wheel::next_expiry`],
//! O(1) while cached), and which entries are due now ([`Wheel::poll`] / [`Wheel::advance`], O(1)
//! per entry plus O(levels) per bucket visited; see "Complexity"). It has no threads, no locks
//! and no clock: the caller says what time it is.
//!
//! The design is the Linux timer wheel since 4.8 (non-cascading, `kernel/time/timer.c`), with
//! the exact expiry kept per entry so that tempora can offer a precise mode besides the
//! kernel's coarse one.
//!
//! # Levels
//!
//! The wheel has `L` levels ([`Builder::levels`], default 9, at most 20) of 64 buckets. Level `n` has a granularity of `8^n` ticks
//! (`granularity`) and holds entries whose distance `delta = expiry - now` satisfies
//! `level_start(n) <= delta < level_start(n + 1)`, where `level_start(0) = 0` and
//! `level_start(n) = 63 * 8^(n-1)` (`level_start`). With the default 9 levels and a 1 ms
//! tick (the `range` column is the largest delta the level holds):
//!
//! ```text
//! level  granularity (ticks)  delta range (ticks)            1 ms tick: granularity / range
//!   0                  1         0 ..            62           1 ms     /  62 ms
//!   1                  8        63 ..           503           8 ms     / 503 ms
//!   2                 64       504 ..         4_031          64 ms     /   4 s
//!   3                512     4_032 ..        32_255         512 ms     /  32 s
//!   4              4_096    32_256 ..       258_047           4 s     /   4.3 min
//!   5             32_768   258_048 ..     2_064_383          33 s     /  34 min
//!   6            262_144 2_064_384 ..    16_515_071         4.4 min   /   4.6 h
//!   7          2_097_152 16_515_072 ..  132_120_575          35 min   /  36.7 h
//!   8         16_777_216 132_120_576 .. 1_056_964_607        4.7 h    /  12.2 days
//! ```
//!
//! The unit test `level_table_matches_doc` derives this table from the constants, so it
//! cannot drift from the code.
//!
//! # Placement: never early, bounded late
//!
//! A *coarse* entry (the kernel's rule, [`Mode::COARSE`]) is placed in the bucket whose tick is
//! its expiry rounded **up** to the level's granularity (`round_up_bucket`). It fires when the
//! wheel reaches that tick: never before its expiry, and late by less than one granule. At level
//! `n >= 1` the delta is at least `63 * 8^(n-1)`, so the lateness is below `8/63` (about 1/8) of
//! the timeout it was armed with; at level 0 it fires at its exact tick. Coarse entries are never
//! moved after they are placed (no cascading), except far-out ones (below).
//!
//! A *precise* entry ([`Mode::PRECISE`]) is placed in the bucket whose tick is its expiry rounded
//! **down**, which the wheel reaches at or before the expiry. If the entry's expiry has not come
//! yet when its bucket is visited, it is re-placed relative to the tick before the bucket's (the
//! wheel clock while the bucket is drained); the remaining delta is at most one granule of its
//! old level, below that level's smallest delta, so the new level is strictly finer. At level 0
//! the bucket tick is the expiry itself, so a precise entry fires at exactly its expiry tick.
//! (A poll whose `now` has already passed the expiry fires it at its first visit instead.) An
//! entry that lives `8^n` ticks pays at most `n` re-placements, and only if it is still armed by
//! then; most timers are cancelled first and never pay anything. A precise entry moved
//! later ([`Wheel::reschedule`]) stays where it is, in a bucket visited before its new expiry,
//! and is re-placed by that visit like any other.
//!
//! A *far-out* entry, whose delta is beyond the last level's range, waits in the last level's
//! furthest bucket (64 buckets ahead) and is re-placed when that bucket is visited. It is never
//! fired early, never dropped, and never clamped to the wheel's capacity (unlike the kernel,
//! which clamps and so fires such timers early). So that a clock jump of any length does not
//! visit it once per wheel range, an entry still far-out when visited during an advance to
//! `T` is *parked*: moved to its lane's parked list (lanes below), visited at `T`, where it
//! fires if due or is re-placed relative to `T - 1`. A far-out entry thus costs at most two
//! visits per advance. (While an advance stopped by its `max` leaves the parked list non-empty,
//! later advances park entries at that earlier target, which can cost them two visits more.)
//!
//! A *deferrable* entry ([`Mode::DEFERRABLE`]) lives in the second of the wheel's two *lanes*,
//! each an independent set of buckets (64 per level), ready list and parked list; the first
//! lane holds every other entry. A deferrable entry fires when the wheel passes it but never
//! makes [`Wheel::next_expiry`] earlier, so it never causes a wake-up of its own (the kernel's
//! `BASE_DEF`).
//!
//! An entry inserted with an expiry at or before the wheel's clock is *ready*: it goes to a
//! ready list that the next [`Wheel::poll`] drains first.
//!
//! # Finding the next expiry
//!
//! Each lane has, per level, a 64-bit bitmap of non-empty buckets. The next bucket of a level is
//! one rotate and one trailing-zero count away; the levels are scanned from the finest up and
//! the scan stops as soon as no coarser level can hold an earlier bucket, as the kernel's
//! `timer_recalc_next_expiry` does. The result is cached, and [`Wheel::next_expiry`] is O(1)
//! while the cache holds: an insert can only move the next expiry earlier and updates the cache
//! in place; a remove or reschedule invalidates it only when it empties a bucket or list whose
//! visit tick is the cached one; a [`Wheel::poll`] or [`Wheel::advance`] that reaches its `now`
//! with nothing left due leaves it valid, one that stops early leaves it invalid, and so does
//! [`Wheel::rebase`]. Deferrable entries never touch it. No list is ever walked to find the
//! next expiry.
//!
//! # Advancing
//!
//! [`Wheel::poll`] and [`Wheel::advance`] jump straight from one non-empty bucket to the next,
//! so skipping an idle gap of any length costs O(levels), not O(ticks), and draining costs O(1)
//! per entry. While a bucket with visit tick `V` is being drained, the wheel clock reads
//! `V - 1`: every tick before `V` is fully processed and `V` is not.
//!
//! A call can stop inside a bucket: [`Wheel::poll`] returns after one entry, [`Wheel::advance`]
//! after `max` entries fired or re-placed. The wheel then keeps a *cursor*: the lane, the bucket
//! (a wheel bucket or a parked list) and the visit tick `V` of the bucket it was draining. The
//! next call drains the ready lists, then the rest of the cursor's bucket if `V` is not after
//! its `now`, and only then scans the levels for the next bucket. The cursor is cleared when its
//! bucket has been drained, when a call's `now` lies before `V`, and by [`Wheel::rebase`]. It
//! spares a resumed call the level scan, which is what keeps a bucket drained one
//! [`Wheel::poll`] at a time at O(1) per entry. It is not what records progress, the clock is: a
//! level scan from `V - 1` would find a bucket with visit tick `V` again.
//!
//! # Storage
//!
//! The logic above is written once, over a storage of entries (`core.rs`, the `Links`
//! trait): each entry has list links, an expiry tick and a mode, and the wheel itself holds
//! only list heads, bitmaps, per-bucket bounds and cursors. Buckets are doubly-linked lists
//! threaded through the entries; the first entry of a list keeps, in place of a predecessor, a
//! marker naming its lane and bucket, so no entry stores its bucket. Insert, remove and
//! reschedule are O(1). Two storages implement it: this type's slab, and an intrusive one
//! (`intrusive.rs`) for objects that carry their links themselves, built for the timer
//! service's timer objects and, until the service moves to it, used by the tests alone.
//!
//! [`Wheel`]'s entries live in a slab (`Vec`) addressed by `u32` index. A [`Key`] packs the
//! index with a 32-bit generation that is bumped when the entry is freed, so a stale key
//! (removed, fired, or its entry reused since) is rejected and never acts on another entry.
//! Nothing is allocated once the slab has grown to the peak population. Each bucket also
//! keeps a lower bound of its entries' firing ticks (`min_fire`) for [`Wheel::next_fire`].
//!
//! ```text
//!  lanes[0] (normal)                lanes[1] (deferrable)     slab: Vec<Entry<T>>
//!  ┌───────────────────────────┐    ┌──────────────────┐      ┌──────┬──────┬──────┬─────┐
//!  │ bitmap: [u64; MAX_LEVELS] │    │ same shape       │      │  0   │  1   │  2   │ ... │
//!  │ heads: [u32; 64*L + 2]   ─┼────┼──────────────────┼──▶   │ next │ prev │ gen  │     │
//!  │   64 buckets per level    │    │                  │      │ expiry   mode     T  │
//!  │   + ready list            │    │                  │      └──────┴──────┴──────┴─────┘
//!  │   + parked list           │    │                  │       free entries: a list by `next`
//!  │ min_fire: [u64; 64*L + 2] │    │                  │       32 B per entry for T = u64
//!  │ park_tick: u64            │    │                  │       prev of a list's first entry:
//!  └───────────────────────────┘    └──────────────────┘       a marker (lane, bucket)
//! ```
//!
//! # Limits
//!
//! The wheel clock never passes its last tick, 2^62: [`Wheel::advance`] clamps its argument
//! there, so bucket arithmetic cannot overflow. An entry whose expiry is beyond it is accepted
//! and simply never fires. At a 1 ns tick, 2^62 ticks are 146 years.
//!
//! # Complexity
//!
//! | operation | cost |
//! |---|---|
//! | insert, remove, reschedule | O(1) |
//! | next_expiry | O(1) cached, O(levels) after the cache was invalidated |
//! | poll / advance | O(levels) per non-empty bucket visited + O(1) per entry fired or re-placed |
//! | advance with `max` | at most `max` entries fired or re-placed per call |

mod core;
pub(crate) mod intrusive;
mod layout;
mod slab;

pub(crate) use self::core::Core;
pub use self::core::{Advance, Mode};
pub(crate) use layout::{DEFAULT_LEVELS, MAX_LEVELS, MAX_TICK};
use slab::{Entry, Slab, NIL};
pub use slab::{Expired, Key};

use std::fmt;

/// The key passed to [`Wheel::remove`] or [`Wheel::reschedule`] names no live entry: it was
/// removed or fired, or its entry was reused since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StaleKey;

impl fmt::Display for StaleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stale wheel key: removed, fired, or its entry reused")
    }
}

impl std::error::Error for StaleKey {}

/// A wheel configuration the builder refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(&'static str);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid wheel configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Configures and builds a [`Wheel`].
#[derive(Debug, Clone)]
pub struct Builder {
    levels: usize,
    start: u64,
    capacity: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            levels: DEFAULT_LEVELS,
            start: 0,
            capacity: 0,
        }
    }
}

impl Builder {
    /// Number of levels, 1 ..= 20 (default 9). Each level multiplies the range by 8; entries
    /// beyond the range are parked and re-placed (see the module doc). Default 9.
    pub fn levels(&mut self, levels: usize) -> &mut Self {
        self.levels = levels;
        self
    }

    /// The wheel clock at creation (ticks). Default 0.
    pub fn start(&mut self, now: u64) -> &mut Self {
        self.start = now;
        self
    }

    /// Slab entries to allocate up front, so the first `capacity` inserts never allocate.
    pub fn capacity(&mut self, capacity: usize) -> &mut Self {
        self.capacity = capacity;
        self
    }

    /// Builds the wheel.
    ///
    /// # Errors
    /// [`ConfigError`] when `levels` is 0 or above 20, or `start` is above the wheel's last
    /// tick, 2^62.
    pub fn build<T>(&self) -> Result<Wheel<T>, ConfigError> {
        if self.levels == 0 || self.levels > MAX_LEVELS {
            return Err(ConfigError("levels must be between 1 and 20"));
        }
        if self.start > MAX_TICK {
            return Err(ConfigError("start must not exceed 2^62"));
        }
        Ok(Wheel {
            core: Core::new(
                Slab {
                    entries: Vec::with_capacity(self.capacity),
                    free_head: NIL,
                },
                self.levels,
                self.start,
            ),
        })
    }
}

/// A non-cascading hierarchical timer wheel over payloads `T`. See the [module docs](self).
pub struct Wheel<T> {
    core: Core<Slab<T>>,
}

impl<T> Drop for Wheel<T> {
    fn drop(&mut self) {
        if std::mem::needs_drop::<T>() {
            for entry in &mut self.core.links.entries {
                if entry.prev != NIL {
                    // SAFETY: a live entry's value is initialized and, the wheel being dropped,
                    // never read again.
                    unsafe { entry.value.assume_init_drop() };
                }
            }
        }
    }
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Wheel::new()
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("len", &self.len())
            .field("now", &self.now())
            .field("levels", &self.levels())
            .field("next_expiry", &self.next_expiry())
            .finish()
    }
}

impl Wheel<()> {
    /// A [`Builder`] for other configurations; [`Builder::build`] picks the payload type.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<T> Wheel<T> {
    /// A wheel with the default 9 levels whose clock starts at 0.
    pub fn new() -> Wheel<T> {
        Builder::default()
            .build()
            .expect("the default configuration is valid")
    }

    /// The wheel clock: every tick up to and including it has been processed. During a
    /// bounded drain of a bucket with visit tick `V` it reads `V - 1`.
    #[inline]
    pub fn now(&self) -> u64 {
        self.core.now()
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.core.levels()
    }

    /// Number of live entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.core.len()
    }

    /// Whether no entry is live.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slab entries allocated (live entries plus free entries plus spare capacity).
    pub fn capacity(&self) -> usize {
        self.core.links.entries.capacity()
    }

    /// Reserves slab entries so the next `additional` inserts do not allocate.
    pub fn reserve(&mut self, additional: usize) {
        let free = self.core.links.entries.len() - self.core.len();
        let slab = &mut self.core.links.entries;
        slab.reserve(additional.saturating_sub(free));
    }

    /// Heap bytes of the slab's capacity and the bucket list heads (4 bytes per bucket and
    /// list, per lane), excluding anything the payloads own. The per-bucket firing bounds kept
    /// for [`Wheel::next_fire`] (8 bytes per bucket and list, per lane) are not counted.
    pub fn heap_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<Entry<T>>() + self.core.heads_bytes()
    }

    /// Size of one slab entry in bytes: 23 plus the payload, padded to a multiple of 8 (or of
    /// the payload's alignment if larger); 24 for a payload of at most one byte, 32 for a
    /// `u64`.
    pub const fn entry_size() -> usize {
        std::mem::size_of::<Entry<T>>()
    }

    /// Inserts a [`Mode::COARSE`] entry expiring at tick `expiry`.
    ///
    /// # Panics
    /// When the slab already holds 2^31 entries.
    #[inline]
    pub fn insert(&mut self, expiry: u64, value: T) -> Key {
        self.insert_with(expiry, Mode::COARSE, value)
    }

    /// Inserts an entry expiring at tick `expiry`, placed as `mode` says. An expiry at or
    /// before [`Wheel::now`] makes the entry ready: the next [`Wheel::poll`] returns it.
    ///
    /// # Panics
    /// When the slab already holds 2^31 entries.
    pub fn insert_with(&mut self, expiry: u64, mode: Mode, value: T) -> Key {
        let index = self.core.links.alloc(value);
        self.core.link(index, expiry, mode);
        Key::new(index, self.core.links.entries[index as usize].generation)
    }

    /// Removes the entry and returns its payload, or `None` for a stale key.
    #[inline]
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let index = self.core.links.live_index(key)?;
        self.core.unlink(index);
        Some(self.core.links.free(index))
    }

    /// Moves a live entry to a new expiry; its key stays valid. Fires as remove + insert with
    /// the same mode would, without touching the slab or the key.
    ///
    /// A precise entry moved later (and not ready) stays in the bucket it was placed in,
    /// which is visited before its new expiry: that visit re-places it, as it re-places any
    /// precise entry visited early, and it still fires at exactly its expiry. The move writes
    /// the entry alone, where taking it out of its list would write both its neighbours:
    /// timeouts pushed back again and again (a connection's idle timeout) cost one visit per
    /// placement instead of two list operations per push. The early visit is what it costs:
    /// [`Wheel::next_expiry`] and [`Wheel::next_fire`] may name it.
    ///
    /// # Errors
    /// [`StaleKey`] when the key names no live entry; nothing changes.
    pub fn reschedule(&mut self, key: Key, expiry: u64) -> Result<(), StaleKey> {
        let index = self.core.links.live_index(key).ok_or(StaleKey)?;
        self.core.reschedule(index, expiry);
        Ok(())
    }

    /// The payload of a live entry.
    pub fn get(&self, key: Key) -> Option<&T> {
        let index = self.core.links.live_index(key)?;
        let entry = &self.core.links.entries[index as usize];
        // SAFETY: `live_index` checked `prev != NIL`, so the value is initialized.
        Some(unsafe { entry.value.assume_init_ref() })
    }

    /// The payload of a live entry, mutably.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let index = self.core.links.live_index(key)?;
        let entry = &mut self.core.links.entries[index as usize];
        // SAFETY: `live_index` checked `prev != NIL`, so the value is initialized.
        Some(unsafe { entry.value.assume_init_mut() })
    }

    /// The exact expiry of a live entry.
    pub fn expiry(&self, key: Key) -> Option<u64> {
        let index = self.core.links.live_index(key)?;
        Some(self.core.links.entries[index as usize].expiry)
    }

    /// Whether the key names a live entry.
    pub fn contains(&self, key: Key) -> bool {
        self.core.links.live_index(key).is_some()
    }

    /// The tick at which the wheel next has work for a non-deferrable entry, or `None` when
    /// there is none.
    ///
    /// This is the visit tick of the earliest non-empty bucket: a coarse entry fires then; a
    /// precise entry fires then if it is at level 0, and is otherwise re-placed one level finer
    /// (a poll that fires nothing). It equals [`Wheel::now`] while a ready entry waits, and it is
    /// at or before `now` while a bounded poll has left due entries behind. Deferrable entries
    /// never make it earlier.
    ///
    /// Cost: O(1) when the cache is valid (nothing that could move it changed since the last
    /// call), otherwise O(levels) bitmap operations; no list is walked.
    #[inline]
    pub fn next_expiry(&self) -> Option<u64> {
        self.core.next_expiry()
    }

    /// The tick at which the wheel next **fires** a non-deferrable entry, or `None` when none is
    /// armed: at or after [`Wheel::next_expiry`], which also counts visits that only re-place
    /// precise entries one level finer. A poll at this tick does those re-placements and fires
    /// the entry in one go, so a thread that sleeps until `next_fire` wakes once per expiry
    /// instant, not once per level its timers pass through. Never later than the earliest
    /// firing (a removal, or a precise entry moved later, can leave it earlier: an early
    /// wake, never a late one).
    ///
    /// Cost: O(levels) bitmap operations (not cached).
    pub fn next_fire(&self) -> Option<u64> {
        self.core.next_fire(0)
    }

    /// The tick at which the wheel next fires a **deferrable** entry, if any would fire were
    /// the wheel advanced: what [`Wheel::next_fire`] is for the other entries (same bound, same
    /// cost). Deferrable entries never cause a wake-up on their own; a caller that bounds how
    /// long they may wait ("at most so long after their expiry") sleeps no later than this
    /// plus its bound.
    pub fn next_deferred_fire(&self) -> Option<u64> {
        self.core.next_fire(1)
    }

    /// Returns one entry whose time has come by tick `now`, or `None` when no more are due, in
    /// which case the wheel clock has reached `now`. Call it in a loop, or use
    /// [`Wheel::advance`], whose cost per call is bounded. Ready entries come first, then
    /// buckets in tick order; entries of one bucket come in no particular order, and an entry
    /// due by `now` whose bucket is visited before its exact expiry fires with that bucket.
    ///
    /// A `now` before [`Wheel::now`] is treated as `Wheel::now()` (a clock that went backwards
    /// must not re-run or skip ticks), and a `now` beyond 2^62 as 2^62.
    ///
    /// One call may re-place any number of precise entries before it finds one to fire; use
    /// [`Wheel::advance`] where a call must stay short.
    pub fn poll(&mut self, now: u64) -> Option<Expired<T>> {
        let mut out = None;
        self.core
            .run(now, usize::MAX, 1, &mut |slab, i| out = Some(slab.fire(i)));
        out
    }

    /// Fires the entries due by tick `now`, handing each to `f`, visiting at most `max` entries
    /// (each fire and each re-placement of a precise or far-out entry counts one), so a call
    /// costs O(max + levels) whatever lies in the buckets: a burst of a million timers on one
    /// tick is drained in slices. When the result says [`Advance::complete`], nothing is due by
    /// `now` any more and [`Wheel::now`] equals `now` (clamped as in [`Wheel::poll`]);
    /// otherwise call again.
    pub fn advance(&mut self, now: u64, max: usize, mut f: impl FnMut(Expired<T>)) -> Advance {
        self.core
            .run(now, max, usize::MAX, &mut |slab, i| f(slab.fire(i)))
    }

    /// Sets the wheel clock to `now` (earlier or later than [`Wheel::now`]) and re-places every
    /// entry relative to it; keys stay valid. O(entries). This is for a clock that was *set*
    /// (the realtime clock stepped backwards), where [`Wheel::poll`] would otherwise treat every
    /// entry up to the old wheel clock as due. Entries not due by `now` go back into buckets;
    /// entries due by `now` become ready. A `now` beyond 2^62 is clamped there.
    pub fn rebase(&mut self, now: u64) {
        self.core.rebase(now);
    }
}

#[cfg(test)]
mod tests;
