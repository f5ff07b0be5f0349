//! The wheel's logic, over any storage of its entries: levels, lanes, bitmaps, placement,
//! the next-expiry cache and the advance loop, written once.
//!
//! An entry is named by a [`Links::Ref`] and has four fields the core reads and writes through
//! its [`Links`]: `next` and `prev` (the bucket list), its expiry `tick` and its [`Mode`]. Two
//! storages implement it:
//!
//! - the slab of the public [`Wheel`](super::Wheel) (`Ref` = slab index), which owns its
//!   payloads and hands out [`Key`](super::Key)s;
//! - the intrusive storage (`intrusive.rs`): objects that carry the four fields themselves
//!   (the kernel's `timer_list` in `k_itimer`), so an armed object costs no memory beyond
//!   itself. It is built for the timer service's timer objects; until `timers/shared/base.rs` moves
//!   to it (it still uses the slab `Wheel`), only the tests use it.
//!
//! # Lists without a bucket field
//!
//! Bucket lists are doubly linked through `next` and `prev`. The first entry of a list has no
//! predecessor; its `prev` holds instead a *head marker* ([`Links::marker`]) that names the
//! list's lane and bucket. So an entry taken out of the middle of a list updates its two
//! neighbours, and an entry taken from the front learns from its marker which head to update
//! and which bitmap bit to clear when the list empties. No entry needs to store its bucket, and
//! the next entry inherits the marker when the first one leaves. An entry is linked exactly
//! when its `prev` is not `NIL`. (A storage with room may keep the bucket anyway,
//! [`Links::bucket`]: the slab does, in what would be padding, so that a reschedule within
//! the same bucket never touches the list, as the kernel's `mod_timer` shortcut.)

use super::layout::{self, LVL_CLK_SHIFT, LVL_SIZE, MAX_LEVELS, MAX_TICK};
use std::cell::Cell;

/// How an entry is placed and whether it can wake anyone. Combine with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mode(pub(super) u8);

impl Mode {
    /// Expiry rounded up to the level's granularity (the kernel's rule): late by less than
    /// about 1/8 of the timeout, never moved after insert.
    pub const COARSE: Mode = Mode(0);
    /// Fires at exactly its expiry tick; re-placed at finer levels as its bucket comes due.
    pub const PRECISE: Mode = Mode(1);
    /// Fires when the wheel passes it, but never makes [`Wheel::next_expiry`](super::Wheel::next_expiry) earlier.
    pub const DEFERRABLE: Mode = Mode(2);

    /// Whether [`Mode::PRECISE`] is set.
    #[inline]
    pub const fn is_precise(self) -> bool {
        self.0 & Mode::PRECISE.0 != 0
    }

    /// Whether [`Mode::DEFERRABLE`] is set.
    #[inline]
    pub const fn is_deferrable(self) -> bool {
        self.0 & Mode::DEFERRABLE.0 != 0
    }

    /// The lane an entry of this mode lives in: 0 (normal) or 1 (deferrable).
    #[inline]
    const fn lane(self) -> usize {
        self.is_deferrable() as usize
    }
}

impl std::ops::BitOr for Mode {
    type Output = Mode;
    fn bitor(self, rhs: Mode) -> Mode {
        Mode(self.0 | rhs.0)
    }
}

/// What one [`Wheel::advance`](super::Wheel::advance) call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Advance {
    /// Entries fired (handed to the callback).
    pub fired: usize,
    /// Whether the wheel clock reached the requested time with nothing left due.
    pub complete: bool,
}

/// Cached-next-expiry sentinel: "nothing armed".
const NONE: u64 = u64::MAX;

/// A list of a core (its lane and bucket) as 12 bits, `lane << 11 | bucket`: the form the
/// storages keep it in, in head markers and (the slab) in entries.
#[inline]
pub(crate) fn list_id(lane: usize, bucket: u16) -> u16 {
    (lane as u16) << 11 | bucket
}

/// The lane and bucket of a [`list_id`].
#[inline]
pub(crate) fn list_of(id: u16) -> (usize, u16) {
    (usize::from(id >> 11 & 1), id & 0x7ff)
}

// A lane has `64 * levels + 2` lists, which must fit the 11 bucket bits of a `list_id`.
const _: () = assert!(LVL_SIZE * MAX_LEVELS + 2 <= 1 << 11);

/// When an entry expiring at `tick` and visited at `visit` fires: a precise one at its tick
/// (never before the visit), any other at the visit.
#[inline]
fn fire_tick(tick: u64, visit: u64, mode: Mode) -> u64 {
    if mode.is_precise() {
        tick.max(visit)
    } else {
        visit
    }
}

/// Where a [`Core`]'s entries keep their list links, expiry and mode.
///
/// The core calls these only for entries it was given ([`Core::link`]) and has not let go of
/// since, and for the values it stored in their links (entries and markers); an
/// implementation may rely on that (the service's storage dereferences `Ref`s as addresses).
pub(crate) trait Links {
    /// Names an entry, a head marker or `NIL`.
    type Ref: Copy + Eq + std::fmt::Debug;
    /// "No entry": the end of a list, the `prev` of an unlinked entry, an empty head.
    const NIL: Self::Ref;

    /// The head marker of `bucket` of `lane`: never `NIL`, never an entry's `Ref`.
    fn marker(lane: usize, bucket: u16) -> Self::Ref;
    /// The lane and bucket of a head marker, `None` for an entry or `NIL`.
    fn unmark(r: Self::Ref) -> Option<(usize, u16)>;

    fn next(&self, r: Self::Ref) -> Self::Ref;
    fn set_next(&mut self, r: Self::Ref, next: Self::Ref);
    fn prev(&self, r: Self::Ref) -> Self::Ref;
    fn set_prev(&mut self, r: Self::Ref, prev: Self::Ref);
    /// The exact expiry in ticks, as [`Links::kept`] made it.
    fn tick(&self, r: Self::Ref) -> u64;
    /// Stores `tick`, already [`Links::kept`]; the mode stays.
    fn set_tick(&mut self, r: Self::Ref, tick: u64);
    fn mode(&self, r: Self::Ref) -> Mode;
    /// Stores `tick` (already [`Links::kept`]) and `mode` together.
    fn set_tick_mode(&mut self, r: Self::Ref, tick: u64, mode: Mode);

    /// The lane and bucket whose list holds the linked entry `r`, if known. A storage that
    /// keeps them ([`Links::set_bucket`]) always knows; the default reads the head marker,
    /// so it knows only for the first entry of a list.
    #[inline]
    fn bucket(&self, r: Self::Ref) -> Option<(usize, u16)> {
        Self::unmark(self.prev(r))
    }

    /// Records that `r` was pushed on the list of `bucket` of `lane` (for a storage with room
    /// to keep it; the default keeps nothing).
    #[inline]
    fn set_bucket(&mut self, r: Self::Ref, lane: usize, bucket: u16) {
        let _ = (r, lane, bucket);
    }

    /// The tick the storage keeps for `tick`, which [`Links::tick`] reads back: the core
    /// places an entry by this one, so that where it sits and what it reads agree.
    #[inline]
    fn kept(tick: u64) -> u64 {
        tick
    }
}

/// A lane: the buckets, ready list and parked list of one kind of entry (normal or
/// deferrable), independent of the other lane's.
pub(crate) struct Lane<R> {
    /// One bit per bucket of each level: set iff the bucket's list is non-empty.
    bitmap: [u64; MAX_LEVELS],
    /// List heads: `64 * levels` buckets, then the ready list, then the parked list.
    heads: Box<[R]>,
    /// Per bucket, at or before the earliest tick at which one of its entries fires: a
    /// precise entry's expiry, a coarse entry's visit tick. Set when an entry is linked into
    /// an empty bucket, lowered by later links, never raised while the bucket is non-empty
    /// (so a removal may leave it early, never late). See [`Core::next_fire`].
    min_fire: Box<[u64]>,
    /// Visit tick of the parked list while it is non-empty.
    park_tick: u64,
}

impl<R: Copy> Lane<R> {
    fn new(levels: usize, nil: R) -> Lane<R> {
        Lane {
            bitmap: [0; MAX_LEVELS],
            heads: vec![nil; LVL_SIZE * levels + 2].into_boxed_slice(),
            min_fire: vec![NONE; LVL_SIZE * levels + 2].into_boxed_slice(),
            park_tick: NONE,
        }
    }

    #[inline]
    fn ready_bucket(&self) -> u16 {
        (self.heads.len() - 2) as u16
    }

    #[inline]
    fn parked_bucket(&self) -> u16 {
        (self.heads.len() - 1) as u16
    }

    #[inline]
    fn ready_head(&self) -> R {
        self.heads[self.heads.len() - 2]
    }

    #[inline]
    fn parked_head(&self) -> R {
        self.heads[self.heads.len() - 1]
    }

    /// Whether `bucket` is a wheel bucket (with a bitmap bit) rather than a list.
    #[inline]
    fn is_wheel_bucket(&self, bucket: u16) -> bool {
        (bucket as usize) < self.heads.len() - 2
    }
}

/// A list being drained by `run`: its lane, its bucket (a wheel bucket, the parked list or
/// the ready list) and its visit tick. `Core::cursor` holds the one a call stopped in (see
/// "Advancing" in the module doc); `run` also makes one for each ready list it drains.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    lane: usize,
    bucket: u16,
    visit: u64,
}

/// The wheel's logic over the storage `S` (see the module doc of `wheel` for the design).
pub(crate) struct Core<S: Links> {
    pub(crate) links: S,
    /// Linked entries.
    len: usize,
    /// Every tick `<= clk` has been processed (see "Advancing" in the module doc).
    clk: u64,
    levels: usize,
    lanes: [Lane<S::Ref>; 2],
    /// The bucket a call stopped in before draining it, resumed first by the next call; `None`
    /// when no call stopped inside a bucket (see "Advancing" in the module doc).
    cursor: Option<Cursor>,
    /// Visit tick of the earliest non-deferrable bucket (or `clk` if a ready entry exists), or
    /// `NONE`; meaningful only while `cached_valid`.
    cached_next: Cell<u64>,
    cached_valid: Cell<bool>,
}

impl<S: Links> Core<S> {
    /// An empty core with `levels` levels (1 ..= `MAX_LEVELS`, checked by the caller) whose
    /// clock reads `start` (at most `MAX_TICK`).
    pub(crate) fn new(links: S, levels: usize, start: u64) -> Core<S> {
        debug_assert!((1..=MAX_LEVELS).contains(&levels) && start <= MAX_TICK);
        Core {
            links,
            len: 0,
            clk: start,
            levels,
            lanes: [Lane::new(levels, S::NIL), Lane::new(levels, S::NIL)],
            cursor: None,
            cached_next: Cell::new(NONE),
            cached_valid: Cell::new(true),
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clk
    }

    pub(crate) fn levels(&self) -> usize {
        self.levels
    }

    /// Linked entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes of the list heads (one `Ref` per bucket and list, per lane). The per-bucket
    /// firing bounds (8 bytes per bucket and list, per lane) are not counted.
    pub(crate) fn heads_bytes(&self) -> usize {
        self.lanes
            .iter()
            .map(|ln| ln.heads.len() * std::mem::size_of::<S::Ref>())
            .sum()
    }

    /// Links an unlinked entry at `tick`, placed as `mode` says.
    #[inline]
    pub(crate) fn link(&mut self, r: S::Ref, tick: u64, mode: Mode) {
        let tick = S::kept(tick);
        self.links.set_tick_mode(r, tick, mode);
        self.place_at(r, tick, mode);
    }

    /// Takes a linked entry out of its list; it keeps its tick and mode.
    #[inline]
    pub(crate) fn unlink(&mut self, r: S::Ref) {
        let (next, prev) = (self.links.next(r), self.links.prev(r));
        debug_assert!(prev != S::NIL, "unlink of an entry in no list");
        self.len -= 1;
        self.links.set_prev(r, S::NIL);
        if next != S::NIL {
            // The first entry's marker passes on to its successor.
            self.links.set_prev(next, prev);
        }
        let Some((lane, bucket)) = S::unmark(prev) else {
            self.links.set_next(prev, next);
            return;
        };
        let ln = &mut self.lanes[lane];
        ln.heads[bucket as usize] = next;
        if next != S::NIL {
            return;
        }
        // The bucket is now empty. The cached next expiry is lane 0's, and `run` leaves it
        // invalid while it drains: only then is the bucket's visit tick wanted.
        let cached = lane == 0 && self.cached_valid.get();
        let visit = if ln.is_wheel_bucket(bucket) {
            let (level, bucket_index) = (bucket as usize / LVL_SIZE, bucket as usize % LVL_SIZE);
            ln.bitmap[level] &= !(1 << bucket_index);
            if !cached {
                return;
            }
            layout::visit_of(self.clk, level, bucket_index as u64)
        } else if bucket == ln.ready_bucket() {
            self.clk
        } else {
            std::mem::replace(&mut ln.park_tick, NONE)
        };
        if cached && self.cached_next.get() == visit {
            self.cached_valid.set(false);
        }
    }

    /// Moves a linked entry to `tick`. Fires as unlink + link with the same mode would; an
    /// entry already in the bucket `tick` maps to stays linked where it is (wherever in the
    /// list when the storage keeps buckets, [`Links::bucket`]; at its front otherwise).
    ///
    /// A precise entry moved later stays in its bucket, whichever that is: the bucket is
    /// visited at or before the old tick, so before the new one, and the visit re-places the
    /// entry as it re-places every precise entry visited before its expiry (`drain_list`).
    /// The move then touches the entry alone, not its list neighbours; the price is one
    /// early visit (and `next_fire` may name the old tick: early, never late). Not for a
    /// ready entry (its list is drained at once, so it would be an immediate visit) nor a
    /// coarse one (its visit is its firing tick, the kernel's rule).
    pub(crate) fn reschedule(&mut self, r: S::Ref, tick: u64) {
        let tick = S::kept(tick);
        let mode = self.links.mode(r);
        if mode.is_precise() {
            let old = self.links.tick(r);
            // A linked precise entry with `old > clk` is in a wheel bucket or the parked
            // list, either visited at or before `old`; only ready entries have `old <= clk`.
            if tick >= old && old > self.clk {
                self.links.set_tick(r, tick);
                return;
            }
        }
        let lane = mode.lane();
        let (bucket, visit) = self.bucket_for(lane, tick, mode.is_precise());
        let fire = fire_tick(tick, visit, mode);
        if self.links.bucket(r) == Some((lane, bucket)) {
            // Same bucket, so the same visit tick: the entry stays linked (the kernel's
            // mod_timer shortcut) and the cached next expiry cannot change. Its firing tick
            // can: a precise entry moved earlier lowers the bucket's `min_fire`, or
            // `next_fire` would name the old expiry and a sleeper would wake late. Moved
            // later, `min_fire` stays (early, never late: its documented invariant).
            if mode.is_precise() {
                let min = &mut self.lanes[lane].min_fire[bucket as usize];
                *min = (*min).min(fire);
            }
            self.links.set_tick(r, tick);
            return;
        }
        self.unlink(r);
        self.links.set_tick(r, tick);
        self.push(r, lane, bucket, visit, fire);
    }

    /// See `Wheel::next_expiry`.
    #[inline]
    pub(crate) fn next_expiry(&self) -> Option<u64> {
        if !self.cached_valid.get() {
            self.cached_next.set(self.next_visit(0).0);
            self.cached_valid.set(true);
        }
        match self.cached_next.get() {
            NONE => None,
            tick => Some(tick),
        }
    }

    /// See `Wheel::next_fire` (lane 0) and `Wheel::next_deferred_fire` (lane 1).
    pub(crate) fn next_fire(&self, lane: usize) -> Option<u64> {
        let ln = &self.lanes[lane];
        // Precise entries of a level's first bucket expire in [visit, visit + gran) and every
        // later bucket of the level is visited after that: the level's earliest firing is in
        // its first bucket.
        let (best, _) = self.earliest(lane, |visit, bucket| visit.max(ln.min_fire[bucket]));
        (best != NONE).then_some(best)
    }

    /// Sets the clock to `now` (clamped to `MAX_TICK`) and re-places every linked entry
    /// relative to it. O(entries + buckets); allocates a list of the entries.
    pub(crate) fn rebase(&mut self, now: u64) {
        let mut all = Vec::with_capacity(self.len);
        for ln in &self.lanes {
            for &head in ln.heads.iter() {
                let mut r = head;
                while r != S::NIL {
                    all.push(r);
                    r = self.links.next(r);
                }
            }
        }
        for lane in &mut self.lanes {
            *lane = Lane::new(self.levels, S::NIL);
        }
        self.cursor = None;
        self.clk = now.min(MAX_TICK);
        self.cached_valid.set(false);
        debug_assert_eq!(all.len(), self.len);
        self.len = 0;
        for r in all {
            self.place(r);
        }
    }

    /// Bucket and visit tick for an entry of `lane` expiring at `tick`, placed relative to
    /// the clock.
    #[inline]
    fn bucket_for(&self, lane: usize, tick: u64, precise: bool) -> (u16, u64) {
        if tick <= self.clk {
            return (self.lanes[lane].ready_bucket(), self.clk);
        }
        let (level, abs_bucket) = layout::place(self.clk, tick, precise, self.levels);
        let bucket = (level * LVL_SIZE) as u16 | (abs_bucket as u16 & (LVL_SIZE as u16 - 1));
        (bucket, abs_bucket << (LVL_CLK_SHIFT * level as u32))
    }

    /// Places an unlinked entry according to its stored tick and mode.
    #[inline]
    fn place(&mut self, r: S::Ref) {
        self.place_at(r, self.links.tick(r), self.links.mode(r));
    }

    /// Places an unlinked entry whose stored tick and mode are `tick` and `mode`.
    #[inline]
    fn place_at(&mut self, r: S::Ref, tick: u64, mode: Mode) {
        let lane = mode.lane();
        let (bucket, visit) = self.bucket_for(lane, tick, mode.is_precise());
        self.push(r, lane, bucket, visit, fire_tick(tick, visit, mode));
    }

    /// Pushes the entry on the front of `bucket`'s list, visited at `visit` and firing at
    /// `fire` ([`fire_tick`]), and keeps bitmap, `min_fire` and cache in step.
    #[inline]
    fn push(&mut self, r: S::Ref, lane: usize, bucket: u16, visit: u64, fire: u64) {
        self.len += 1;
        let ln = &mut self.lanes[lane];
        let head = std::mem::replace(&mut ln.heads[bucket as usize], r);
        let min = &mut ln.min_fire[bucket as usize];
        if head == S::NIL {
            // A wheel bucket's bit is set exactly while its list is non-empty.
            *min = fire;
            if ln.is_wheel_bucket(bucket) {
                ln.bitmap[bucket as usize / LVL_SIZE] |= 1 << (bucket as usize % LVL_SIZE);
            }
        } else {
            *min = (*min).min(fire);
            self.links.set_prev(head, r);
        }
        self.links.set_next(r, head);
        self.links.set_prev(r, S::marker(lane, bucket));
        self.links.set_bucket(r, lane, bucket);
        // A new non-deferrable bucket can only move the next expiry earlier.
        if lane == 0 && self.cached_valid.get() && visit < self.cached_next.get() {
            self.cached_next.set(visit);
        }
    }

    /// Earliest visit tick among `lane`'s buckets (or `clk` if its ready list is non-empty),
    /// with the bucket, or `(NONE, 0)`.
    #[inline]
    fn next_visit(&self, lane: usize) -> (u64, u16) {
        self.earliest(lane, |visit, _| visit)
    }

    /// The smallest `key(visit tick, bucket)` of `lane` with its bucket: `clk` if its ready
    /// list is non-empty, else over the parked list (keyed by its visit tick alone) and the
    /// levels ([`Core::scan_levels`]); `(NONE, 0)` for an empty lane.
    #[inline]
    fn earliest(&self, lane: usize, key: impl Fn(u64, usize) -> u64) -> (u64, u16) {
        let ln = &self.lanes[lane];
        if ln.ready_head() != S::NIL {
            return (self.clk, ln.ready_bucket());
        }
        let mut best = (NONE, 0u16);
        if ln.parked_head() != S::NIL {
            best = (ln.park_tick, ln.parked_bucket());
        }
        self.scan_levels(lane, best, key)
    }

    /// Visits each level's first non-empty bucket after the clock, finest level first, and
    /// keeps the smallest `key(visit tick, bucket)` (starting from `best`), with its bucket.
    /// Stops as soon as no coarser level can hold a smaller key: `key` must be at or after
    /// the visit tick, and every pending bucket of a coarser level is visited at or after
    /// that level's next bucket boundary, `((clk >> shift) + 1) << shift`.
    #[inline]
    fn scan_levels(
        &self,
        lane: usize,
        mut best: (u64, u16),
        key: impl Fn(u64, usize) -> u64,
    ) -> (u64, u16) {
        let ln = &self.lanes[lane];
        for level in 0..self.levels {
            let shift = LVL_CLK_SHIFT * level as u32;
            let pos = self.clk >> shift;
            let bits = ln.bitmap[level];
            if bits != 0 {
                // The pending buckets' absolute numbers are pos+1 ..= pos+64; rotate so that
                // pos+1 is bit 0.
                let distance = bits
                    .rotate_right(((pos + 1) % LVL_SIZE as u64) as u32)
                    .trailing_zeros();
                let abs_bucket = pos + 1 + distance as u64;
                let bucket = level * LVL_SIZE + (abs_bucket % LVL_SIZE as u64) as usize;
                let k = key(abs_bucket << shift, bucket);
                if k < best.0 {
                    best = (k, bucket as u16);
                }
            }
            let next_shift = shift + LVL_CLK_SHIFT;
            if best.0 <= ((self.clk >> next_shift) + 1) << next_shift {
                break;
            }
        }
        best
    }

    /// Fires entries due by `now` (clamped as `Wheel::poll` says): each is unlinked and handed
    /// to `f` with the storage. Re-places precise and far-out entries whose bucket came before
    /// their expiry. Stops after `max_fires` fires or `budget` visited entries (fires plus
    /// re-placements), or when nothing is due.
    ///
    /// Nothing can join a ready list while this runs (`f` cannot reach the core, and a
    /// re-placed entry expires after its visit tick, so after `clk`), which is why the ready
    /// lists are checked once per bucket rather than once per entry.
    pub(crate) fn run(
        &mut self,
        now: u64,
        mut budget: usize,
        max_fires: usize,
        f: &mut impl FnMut(&mut S, S::Ref),
    ) -> Advance {
        let target = now.min(MAX_TICK).max(self.clk);
        self.cached_valid.set(false);
        let mut fired = 0;
        let incomplete = |fired| Advance {
            fired,
            complete: false,
        };
        loop {
            // Ready entries first (normal, then deferrable), then the bucket being visited.
            for lane in 0..2 {
                let ready = Cursor {
                    lane,
                    bucket: self.lanes[lane].ready_bucket(),
                    visit: self.clk,
                };
                if !self.drain_list(ready, target, &mut budget, &mut fired, max_fires, f) {
                    return incomplete(fired);
                }
            }
            if let Some(cursor) = self.cursor.filter(|c| c.visit <= target) {
                if !self.drain_list(cursor, target, &mut budget, &mut fired, max_fires, f) {
                    return incomplete(fired);
                }
            }
            self.cursor = None;
            let (n_visit, n_bucket) = self.next_visit(0);
            let (d_visit, d_bucket) = self.next_visit(1);
            let (visit, lane, bucket) = if d_visit < n_visit {
                (d_visit, 1, d_bucket)
            } else {
                (n_visit, 0, n_bucket)
            };
            if visit > target {
                // `n_visit` is the next expiry for the new clock too: visit ticks are absolute,
                // every bucket lies beyond `target`, and both ready lists are empty. Caching it
                // spares the driver's `next_expiry()` after every poll a second scan.
                self.clk = target;
                self.cached_next.set(n_visit);
                self.cached_valid.set(true);
                return Advance {
                    fired,
                    complete: true,
                };
            }
            // Everything before `visit` is processed; `visit` itself is being drained.
            self.clk = visit - 1;
            self.cursor = Some(Cursor {
                lane,
                bucket,
                visit,
            });
        }
    }

    /// Drains the list `list.bucket` of `list.lane` (the bucket being visited, or a ready list),
    /// firing what is due by `target` and re-placing the rest.
    /// Returns `false` when the budget or the fire limit stopped it before the list emptied.
    #[inline]
    fn drain_list(
        &mut self,
        list: Cursor,
        target: u64,
        budget: &mut usize,
        fired: &mut usize,
        max_fires: usize,
        f: &mut impl FnMut(&mut S, S::Ref),
    ) -> bool {
        loop {
            let head = self.lanes[list.lane].heads[list.bucket as usize];
            if head == S::NIL {
                return true;
            }
            if *budget == 0 || *fired == max_fires {
                return false;
            }
            *budget -= 1;
            self.unlink(head);
            // Due by the caller's `now`: fire it, even if its exact expiry lies after this
            // bucket's tick (a precise or far-out entry polled late). Never early.
            let tick = self.links.tick(head);
            if tick <= target {
                f(&mut self.links, head);
                *fired += 1;
            } else {
                self.replace(head, tick, list, target);
            }
        }
    }

    /// Re-places an unlinked entry (expiring at `tick`) visited before its expiry (and not due
    /// by `target`),
    /// relative to `clk = visit - 1`.
    /// A precise entry lands at a strictly finer level. A far-out one would come back one
    /// wheel range later, again and again across a long jump, so it is parked instead: visited
    /// at `target`, or at the earlier target an unfinished advance parked entries for (see
    /// "Placement" in the module doc). An entry drained from the parked list is placed, not
    /// parked again.
    fn replace(&mut self, r: S::Ref, tick: u64, cursor: Cursor, target: u64) {
        let mode = self.links.mode(r);
        let far_out = layout::level_for_delta(tick - self.clk) >= self.levels;
        let ln = &mut self.lanes[cursor.lane];
        if far_out && cursor.bucket != ln.parked_bucket() {
            ln.park_tick = ln.park_tick.min(target);
            let (bucket, visit) = (ln.parked_bucket(), ln.park_tick);
            self.push(r, cursor.lane, bucket, visit, fire_tick(tick, visit, mode));
        } else {
            self.place_at(r, tick, mode);
        }
    }
}
