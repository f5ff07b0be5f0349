//! An owner's timer storage: slot pages and per-thread shards.
//!
//! ```text
//!  Owner ── pages[0..30] ── page p: 4·2^p Timer slots (128 B each), allocated on demand,
//!        │                  zeroed, never moved; slot index i lives in page p, offset o with
//!        │                  i + 4 = 4·2^p + o
//!        ├─ claimed         slots handed to shards so far (bump counter)
//!        ├─ counter         next timer ID (the kernel's next_posix_timer_id), claimed in blocks
//!        └─ shards[S] ─┬─ lock (ByteLock) ─ free list of slots, bump block, ID block
//!                      └─ one per (thread index & (S-1)), cache-line padded
//! ```
//!
//! A create takes the shard of the calling thread, pops a slot from its free list (or its bump
//! block, or claims a fresh block of [`SLOT_BLOCK`] slots), and draws the next ID candidate from
//! its ID block (or claims [`ID_BLOCK`] IDs from the owner's counter). Two threads creating in
//! one owner therefore write different cache lines except once per block. A deleted timer's slot
//! goes back to the shard that allocated it (its `home`), so memory stays bounded when timers
//! are created on one thread and deleted on another.
//!
//! Slots are never freed while the owner exists (type-stable memory; see `timer.rs`). The pages
//! are freed after the owner is torn down, through epoch reclamation.

use super::timer::Timer;
use crate::sync::{AtomicPtr, AtomicU32, ByteLock, Ordering, UnsafeCell};
use std::alloc::Layout;

/// Slot pages per owner: page `p` holds `4 << p` slots, 2^32 - 4 in all.
pub(crate) const PAGES: usize = 30;
/// Slots a shard claims from its owner at a time.
pub(crate) const SLOT_BLOCK: u32 = 8;
/// Timer IDs a shard claims from its owner's counter at a time.
pub(crate) const ID_BLOCK: u32 = 16;
/// "No slot" in a free list.
pub(crate) const NONE: u32 = u32::MAX;

/// (page, offset) of slot `index`.
#[inline]
pub(crate) fn locate(index: u32) -> (usize, usize) {
    let s = u64::from(index) + 4;
    let p = (63 - s.leading_zeros()) as usize - 2;
    (p, (s - (4u64 << p)) as usize)
}

fn page_layout(p: usize) -> Layout {
    Layout::array::<Timer>(4usize << p).expect("page layout")
}

/// The slot pages of one owner.
pub(crate) struct Slots {
    pages: [AtomicPtr<Timer>; PAGES],
    claimed: AtomicU32,
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            pages: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            claimed: AtomicU32::new(0),
        }
    }

    /// The slot at `index`, whose page must exist (it was claimed).
    #[inline]
    pub(crate) fn get(&self, index: u32) -> &Timer {
        let (p, o) = locate(index);
        // Acquire: pairs with the Release compare-exchange that installed the page.
        let page = self.pages[p].load(Ordering::Acquire);
        assert!(!page.is_null(), "slot {index} has no page");
        // SAFETY: the page holds `4 << p` initialised (zeroed) timers and `o < 4 << p` by
        // `locate`; pages are only freed by `free_pages`, after the owner is gone.
        unsafe { &*page.add(o) }
    }

    /// Claims `n` fresh slots and makes sure their pages exist. `None` when the 2^32-slot space
    /// is exhausted.
    pub(crate) fn claim(&self, n: u32) -> Option<u32> {
        let base = self.claimed.fetch_add(n, Ordering::Relaxed);
        if base > u32::MAX - 4 - n {
            return None;
        }
        let (first, _) = locate(base);
        let (last, _) = locate(base + n - 1);
        for p in first..=last {
            self.ensure_page(p);
        }
        Some(base)
    }

    fn ensure_page(&self, p: usize) {
        if !self.pages[p].load(Ordering::Acquire).is_null() {
            return;
        }
        let layout = page_layout(p);
        // SAFETY: the layout is non-zero-sized; zeroed memory is a valid array of free timers
        // (`Timer`: atomics, a byte lock and plain integers, all valid as zero).
        let page = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Timer>();
        if page.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // AcqRel: Release publishes the zeroed page; Acquire on failure sees the winner's.
        if self.pages[p]
            .compare_exchange(
                std::ptr::null_mut(),
                page,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `page` was allocated above with `layout` and never shared.
            unsafe { std::alloc::dealloc(page.cast(), layout) };
        }
    }

    /// Slots claimed so far (indices `0..claimed` may hold timers, if their page exists).
    pub(crate) fn claimed(&self) -> u32 {
        self.claimed.load(Ordering::Acquire).min(u32::MAX - 4)
    }

    /// The slot at `index` if its page exists.
    pub(crate) fn try_get(&self, index: u32) -> Option<&Timer> {
        let (p, o) = locate(index);
        let page = self.pages[p].load(Ordering::Acquire);
        // SAFETY: as in `get`.
        (!page.is_null()).then(|| unsafe { &*page.add(o) })
    }

    /// Bytes of slot pages allocated.
    pub(crate) fn bytes(&self) -> usize {
        (0..PAGES)
            .filter(|&p| !self.pages[p].load(Ordering::Relaxed).is_null())
            .map(|p| page_layout(p).size())
            .sum()
    }

    /// Takes the pages out, to be freed once no walker can reach them.
    pub(crate) fn take_pages(&self) -> Vec<(usize, *mut Timer)> {
        (0..PAGES)
            .filter_map(|p| {
                let page = self.pages[p].swap(std::ptr::null_mut(), Ordering::AcqRel);
                (!page.is_null()).then_some((p, page))
            })
            .collect()
    }
}

/// Frees pages taken by [`Slots::take_pages`].
///
/// # Safety
/// No thread may use any timer in these pages any more, and each page must have come from
/// `take_pages` exactly once.
pub(crate) unsafe fn free_pages(pages: Vec<(usize, *mut Timer)>) {
    for (p, page) in pages {
        // SAFETY: allocated by `ensure_page` with `page_layout(p)`; the caller promises it is
        // unreachable and freed once.
        unsafe { std::alloc::dealloc(page.cast(), page_layout(p)) };
    }
}

/// A shard's state, covered by its lock.
#[derive(Debug, Default)]
pub(crate) struct ShardState {
    pub(crate) free_head: u32,
    pub(crate) bump_next: u32,
    pub(crate) bump_left: u32,
    pub(crate) id_next: u32,
    pub(crate) id_left: u32,
    /// The owner's ID epoch when the ID block was claimed; a newer epoch voids the block.
    pub(crate) id_epoch: u32,
}

/// One shard of an owner.
#[derive(Debug)]
pub(crate) struct Shard {
    pub(crate) lock: ByteLock,
    state: UnsafeCell<ShardState>,
}

// SAFETY: `state` is only accessed through `Shard::locked`, with `lock` held.
unsafe impl Sync for Shard {}

impl Shard {
    pub(crate) fn new() -> Shard {
        Shard {
            lock: ByteLock::new(),
            state: UnsafeCell::new(ShardState {
                free_head: NONE,
                ..ShardState::default()
            }),
        }
    }

    /// Runs `f` with the shard locked.
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut ShardState) -> R) -> R {
        self.lock.lock();
        // SAFETY: the lock was taken just above.
        let r = unsafe { self.with_lock_held(f) };
        self.lock.unlock();
        r
    }

    /// Runs `f` on the state of a shard whose lock the caller already holds.
    ///
    /// # Safety
    /// The caller holds `self.lock` for the whole call.
    #[inline]
    pub(crate) unsafe fn with_lock_held<R>(&self, f: impl FnOnce(&mut ShardState) -> R) -> R {
        // SAFETY: the caller holds `self.lock`, so this is the only access to the state.
        self.state.with_mut(|p| f(unsafe { &mut *p }))
    }
}
