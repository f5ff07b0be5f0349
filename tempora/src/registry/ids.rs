//! Timer ID allocation: an owner's ID counter, claimed by its shards in blocks, and exact-ID
//! (restore) mode.
//!
//! ```text
//!  Ids (per owner) ── counter   next candidate (the kernel's next_posix_timer_id)
//!                   ├─ version   bumped when the counter is set; voids older blocks
//!                   ├─ restore   exact-ID mode on
//!                   └─ reused    IDs may repeat: creates check the chain (see `create_locked`)
//!  IdBlock (per shard, under its lock) ── next, left, version
//! ```
//!
//! A thread claims [`ID_BLOCK`] IDs of the counter at a time for its shard, so on one thread
//! IDs come out as 0, 1, 2, … exactly as from Linux; across threads they are unique but only
//! increasing per thread. The counter wraps from the ID limit to 0; from then on (and after
//! any exact-ID create) an ID may repeat, and `reused` tells creates to check for it.

use crate::sync::{Apart, AtomicBool, AtomicU32, Ordering};

/// A timer ID: a non-negative `i32`, like Linux's `timer_t`. IDs are per owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct TimerId(pub(crate) i32);

impl TimerId {
    /// The ID `raw`, if it is non-negative.
    pub fn new(raw: i32) -> Option<TimerId> {
        (raw >= 0).then_some(TimerId(raw))
    }

    /// The raw value.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for TimerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Timer IDs a shard claims from its owner's counter at a time.
const ID_BLOCK: u32 = 64;

/// An owner's ID state.
pub(crate) struct Ids {
    /// Next timer ID candidate (the kernel's `next_posix_timer_id`), claimed in blocks. A line
    /// of its own: every shard's block claim writes it.
    counter: Apart<AtomicU32>,
    /// Bumped whenever the counter is set (an exact-ID create, a restore), so shards drop the
    /// ID blocks they claimed from the old counter.
    version: AtomicU32,
    restore: AtomicBool,
    /// Set forever once an ID may be handed out twice by the counter (it wrapped) or was
    /// chosen by the caller (exact-ID create): from then on a create checks the chain for the
    /// candidate (see `create_locked`).
    reused: AtomicBool,
    /// IDs are `0 ..= mask`.
    pub(crate) mask: u32,
}

/// A shard's claimed block of IDs (under the shard's lock).
#[derive(Debug, Default)]
pub(crate) struct IdBlock {
    next: u32,
    left: u32,
    /// The owner's `version` when the block was claimed; a newer version voids the block.
    version: u32,
}

impl Ids {
    pub(crate) fn new(mask: u32) -> Ids {
        Ids {
            counter: Apart::new(AtomicU32::new(0)),
            version: AtomicU32::new(0),
            restore: AtomicBool::new(false),
            reused: AtomicBool::new(false),
            mask,
        }
    }

    /// Whether exact-ID (restore) mode is on.
    #[inline]
    pub(crate) fn restoring(&self) -> bool {
        self.restore.load(Ordering::Acquire)
    }

    pub(crate) fn set_restoring(&self, on: bool) {
        self.restore.store(on, Ordering::Release);
    }

    /// Whether an ID may already be in use (the counter wrapped, or an ID was chosen).
    ///
    /// Relaxed: the caller reads it after taking the bucket lock of its candidate, and the
    /// creates that may repeat an ID (an exact-ID create, a candidate past the wrap) store it
    /// before they take the bucket lock of theirs; the argument is at the check in
    /// `create_locked`. `set_counter` stores it with the version bump as well, and a shard
    /// that claims from the new counter reads it after that bump. A restore's exact-ID
    /// creates set it at (B) like any other; other creates wait for the restore's end
    /// (`Owner::exclusive`).
    #[inline]
    pub(crate) fn maybe_reused(&self) -> bool {
        self.reused.load(Ordering::Relaxed)
    }

    /// From now on IDs may repeat ((B) in `create_locked`: set before the bucket lock of the
    /// ID that may repeat is taken).
    #[inline]
    pub(crate) fn note_reused(&self) {
        // Relaxed: as in `maybe_reused`. Read first: the flag lives on the line every create
        // reads (`version`), and once set it stays set, so it is written once, not per create.
        if !self.reused.load(Ordering::Relaxed) {
            self.reused.store(true, Ordering::Relaxed);
        }
    }

    /// The next ID candidate from the shard's block, claiming a new block when it is used up
    /// or voided by a newer counter version.
    #[inline]
    pub(crate) fn next_candidate(&self, block: &mut IdBlock) -> i32 {
        // Acquire: pairs with the Release version bump of `set_counter`, so a re-claim reads
        // the counter it set.
        let version = self.version.load(Ordering::Acquire);
        if block.left == 0 || block.version != version {
            // Relaxed: uniqueness of the claimed range comes from the atomic add itself.
            block.next = self.counter.fetch_add(ID_BLOCK, Ordering::Relaxed);
            block.left = ID_BLOCK;
            block.version = version;
            if u64::from(block.next) + u64::from(ID_BLOCK) > u64::from(self.mask) {
                // (B) in `create_locked`: set before this thread takes any bucket lock for a
                // candidate of this block.
                self.note_reused();
            }
        }
        let c = block.next;
        block.next = c.wrapping_add(1);
        block.left -= 1;
        (c & self.mask) as i32
    }

    /// Sets the counter (Linux sets, not maxes, it at an exact-ID create; a restore puts back
    /// the checkpointed one) and voids the ID blocks shards claimed from the old one.
    pub(crate) fn set_counter(&self, next: u32) {
        // Relaxed + Release bump: a shard that sees the new version (Acquire) re-claims from
        // the new counter.
        self.counter.store(next, Ordering::Relaxed);
        self.note_reused();
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The counter as a checkpoint records it: the lowest ID a normal create would hand out
    /// next. That is the owner's counter, or lower while a shard still holds unused IDs of a
    /// block it claimed (a thread that made one timer has claimed 64 IDs, and its next create
    /// gets the second of them). `blocks` visits the shards' blocks (under their locks).
    pub(crate) fn next_id(&self, blocks: impl FnOnce(&mut dyn FnMut(&IdBlock))) -> u32 {
        // Acquire: pairs with the Release version bump of `set_counter`, so the counter read
        // next is the one it set (or a later one). Relaxed: ordered by the version load.
        let version = self.version.load(Ordering::Acquire);
        let mut next = self.counter.load(Ordering::Relaxed);
        blocks(&mut |b: &IdBlock| {
            if b.left > 0 && b.version == version && b.next < next {
                next = b.next;
            }
        });
        next & self.mask
    }
}
