//! An owner's slot pages: where its timer objects live, and the registry's pool of pages.
//!
//! A *slot* is the place of one timer object in its owner's pages, named by its index.
//!
//! ```text
//!  Slots ── dir ──► Dir { pages[cap] } ── page k: 64 Timer slots (8 KiB), slot index
//!        │          (doubles, old dirs      i = 64·k + offset; allocated on demand,
//!        │           retired via epoch)     never moved while the owner lives
//!        └─ claimed         slots handed to shards so far (bump counter)
//! ```
//!
//! A create takes a slot from its shard (`owner.rs`): the shard's free list, its bump block, or
//! a fresh block of [`SLOT_BLOCK`] slots claimed here. A deleted timer's slot goes back to the
//! shard that allocated it (its `home`), so memory stays bounded when timers are created on one
//! thread and deleted on another.
//!
//! Pages are small and fixed (64 slots) so an owner's slot memory is its peak timer count
//! rounded up to 64 per shard, not up to the next power of two; the page directory is the only
//! thing that doubles (8 bytes per 64 timers). The hot paths (lookup by ID) never touch the
//! directory: they reach timers through the hash chains.
//!
//! Slots are never freed while the owner exists (type-stable memory; see `timer.rs`). When the
//! owner is torn down its pages go, after an epoch grace period, to the registry's [`PagePool`],
//! from which later owners take pages before asking the allocator: like a kernel slab cache, a
//! registry keeps the timer memory it has needed, so an owner that replaces another (a
//! restarted component, a forked worker) reuses warm memory instead of faulting fresh memory
//! in. Pooled pages are freed when the registry is dropped.

use super::timer::{Service, Timer};
use crate::alloc::{try_box, try_boxed_slice};
use crate::error::Error;
use crate::sync::{rank, Apart, AtomicPtr, AtomicU32, Ordering, Poisoned, RankedLock};
use crossbeam_epoch::{Atomic, Guard, Owned};
use std::alloc::Layout;

/// Slots per page.
pub(crate) const PAGE_SLOTS: usize = 64;
/// Slots a shard claims from its owner at a time: its first claim, doubled at each later claim
/// up to [`SLOT_BLOCK_MAX`]. Small first, so an owner that many threads touch once does not
/// strand a page per thread; large later, so a thread creating many timers takes the shared
/// `claimed` line once per 64 creates, not once per 8.
pub(crate) const SLOT_BLOCK: u32 = 8;
/// Largest slot claim (a page).
pub(crate) const SLOT_BLOCK_MAX: u32 = PAGE_SLOTS as u32;
/// "No slot" in a free list.
pub(crate) const NONE: u32 = u32::MAX;
/// What `Error::Poisoned` names for a poisoned page lock.
const PAGES_POISONED: &str = "an owner's slot pages";

fn page_layout<S: Service>() -> Layout {
    Layout::array::<Timer<S>>(PAGE_SLOTS).expect("page layout")
}

/// The page directory: page pointers by page number, null until allocated.
struct Dir<S: Service> {
    pages: Box<[AtomicPtr<Timer<S>>]>,
}

impl<S: Service> Dir<S> {
    fn with_capacity(cap: usize) -> Result<Dir<S>, Error> {
        Ok(Dir {
            pages: try_boxed_slice(cap, || AtomicPtr::new(std::ptr::null_mut()))?,
        })
    }
}

/// The slot pages of one owner.
pub(crate) struct Slots<S: Service> {
    /// Read by every slot access.
    dir: Atomic<Dir<S>>,
    /// Serialises page allocation and directory growth (once per 64 fresh slots).
    grow: RankedLock<{ rank::PAGE_GROW }>,
    /// Written by every shard's block claim: a line of its own, away from `dir`.
    claimed: Apart<AtomicU32>,
}

impl<S: Service> Slots<S> {
    /// A new owner's slots: a four-page directory, or [`Error::OutOfMemory`].
    pub(crate) fn try_new() -> Result<Slots<S>, Error> {
        let dir = try_box(Dir::with_capacity(4)?)?;
        Ok(Slots {
            dir: Atomic::from(Owned::from(dir)),
            grow: RankedLock::new(),
            claimed: Apart::new(AtomicU32::new(0)),
        })
    }

    /// The current page directory.
    #[inline]
    fn dir<'g>(&self, guard: &'g Guard) -> &'g Dir<S> {
        // Acquire: pairs with the Release swap that published the directory.
        let dir = self.dir.load(Ordering::Acquire, guard);
        // SAFETY: the directory is never null; a replaced one is destroyed through the epoch
        // after every thread pinned at its replacement (`guard` is such a pin) has unpinned.
        unsafe { dir.deref() }
    }

    #[inline]
    fn page(&self, k: usize, guard: &Guard) -> *mut Timer<S> {
        self.dir(guard)
            .pages
            .get(k)
            // Acquire: pairs with the Release store that installed the page.
            .map_or(std::ptr::null_mut(), |p| p.load(Ordering::Acquire))
    }

    /// The slot at `index`, whose page must exist (it was claimed).
    #[inline]
    pub(crate) fn get(&self, index: u32, guard: &Guard) -> &Timer<S> {
        let page = self.page(index as usize / PAGE_SLOTS, guard);
        assert!(!page.is_null(), "slot {index} has no page");
        // SAFETY: a page holds `PAGE_SLOTS` initialised timers and the offset is below that;
        // pages leave an owner only through `take_pages`, after it is gone, so the page lives
        // as long as `self`.
        unsafe { &*page.add(index as usize % PAGE_SLOTS) }
    }

    /// Claims `n` (at most `PAGE_SLOTS`) fresh slots; their pages are made by
    /// [`Slots::fresh`] as each slot is first taken. `None` when the 2^32-slot space is
    /// exhausted, and from then on: a refused claim leaves `claimed` where it was, so it never
    /// wraps to hand out slots in use, and `for_each` still covers every slot handed out.
    pub(crate) fn claim(&self, n: u32) -> Option<u32> {
        debug_assert!(n as usize <= PAGE_SLOTS);
        // The highest base granted: a block then ends below `u32::MAX - PAGE_SLOTS`, so no slot
        // index reaches `NONE`. Relaxed: the claimed ranges are disjoint by the atomicity of
        // the read-modify-write alone; the pages are published by their own Release stores.
        self.claimed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |base| {
                (base <= u32::MAX - 2 * PAGE_SLOTS as u32).then(|| base + n)
            })
            .ok()
    }

    /// The claimed slot `index`, taken for the first time: its page is made first if it does
    /// not exist yet (from the pool, or the allocator).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if the page, or a larger directory, cannot be allocated: nothing
    /// changed, and a later call for the same slot tries again. [`Error::Poisoned`] if the
    /// page lock is (a panic under it).
    #[inline]
    pub(crate) fn fresh(
        &self,
        index: u32,
        pool: &PagePool<S>,
        guard: &Guard,
    ) -> Result<&Timer<S>, Error> {
        let k = index as usize / PAGE_SLOTS;
        if self.page(k, guard).is_null() {
            self.add_page(k, pool, guard)
                .map_err(|_| Error::Poisoned(PAGES_POISONED))??;
        }
        Ok(self.get(index, guard))
    }

    /// Installs page `k` (and a larger directory if needed) under the `grow` lock. Runs under
    /// a shard lock: it allocates (a page of 64 timers, a directory twice the old one: bounded
    /// by the owner's peak slot count), fallibly, but runs no deferred destructor (the old
    /// directory's destruction is queued, not flushed, so no unrelated reclamation lands
    /// under these locks). Nothing is published unless everything it needs was allocated.
    #[cold]
    fn add_page(
        &self,
        k: usize,
        pool: &PagePool<S>,
        guard: &Guard,
    ) -> Result<Result<(), Error>, Poisoned> {
        self.grow.with(|| {
            let mut dir = self.dir(guard);
            if dir.pages.len() <= k {
                let bigger = Dir::with_capacity((dir.pages.len() * 2).max(k + 1))?;
                let bigger: Owned<Dir<S>> = Owned::from(try_box(bigger)?);
                for (new, old) in bigger.pages.iter().zip(dir.pages.iter()) {
                    new.store(old.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                // Release: publishes the copied page pointers with the directory.
                let new = self.dir.swap(bigger, Ordering::AcqRel, guard);
                // SAFETY: the old directory is unreachable from `self.dir` now; threads pinned
                // before may still read it (its page pointers stay valid), so it is destroyed
                // only after they unpin.
                unsafe { guard.defer_destroy(new) };
                dir = self.dir(guard);
            }
            if dir.pages[k].load(Ordering::Relaxed).is_null() {
                let page = match pool.take() {
                    Some(page) => page,
                    None => new_page().ok_or(Error::OutOfMemory)?,
                };
                // Release: publishes the (fresh or recycled) page of free slots.
                dir.pages[k].store(page, Ordering::Release);
            }
            Ok(())
        })
    }

    /// Calls `f` on every slot of every allocated page, in index order.
    pub(crate) fn for_each(&self, guard: &Guard, f: impl FnMut(&Timer<S>)) {
        self.for_each_in(guard, 0, usize::MAX, f);
    }

    /// [`Slots::for_each`] over pages `from .. from + pages` only; the page to go on from,
    /// or `None` when the walk passed the last claimed page.
    pub(crate) fn for_each_in(
        &self,
        guard: &Guard,
        from: usize,
        pages: usize,
        mut f: impl FnMut(&Timer<S>),
    ) -> Option<usize> {
        // Relaxed: a bound, not a publication (each page pointer is loaded with Acquire). A
        // claim that happens before this call (teardown takes every shard lock first) is seen
        // by coherence; a concurrent one may or may not be, as the listing's doc allows.
        let claimed = self.claimed.load(Ordering::Relaxed) as usize;
        let last = claimed.div_ceil(PAGE_SLOTS);
        let end = from.saturating_add(pages).min(last);
        for k in from..end {
            let page = self.page(k, guard);
            if page.is_null() {
                continue;
            }
            // SAFETY: as in `get`; the page holds `PAGE_SLOTS` timers.
            let slots = unsafe { std::slice::from_raw_parts(page, PAGE_SLOTS) };
            slots.iter().for_each(&mut f);
        }
        (end < last).then_some(end)
    }

    /// Bytes of slot pages and directory allocated.
    pub(crate) fn bytes(&self) -> usize {
        let guard = crate::sync::pin();
        let dir = self.dir(&guard);
        let pages = dir
            .pages
            .iter()
            .filter(|p| !p.load(Ordering::Relaxed).is_null())
            .count();
        pages * page_layout::<S>().size()
            + dir.pages.len() * std::mem::size_of::<AtomicPtr<Timer<S>>>()
    }

    /// Takes the pages out, for recycling once no walker can reach them; `None` (and the
    /// pages left where they are) if the list cannot be allocated.
    pub(crate) fn take_pages(&self) -> Option<Vec<PagePtr<S>>> {
        let guard = crate::sync::pin();
        let dir = self.dir(&guard);
        let mut pages = Vec::new();
        pages.try_reserve_exact(dir.pages.len()).ok()?;
        pages.extend(dir.pages.iter().filter_map(|p| {
            let page = p.swap(std::ptr::null_mut(), Ordering::AcqRel);
            (!page.is_null()).then_some(PagePtr(page))
        }));
        Some(pages)
    }
}

impl<S: Service> Drop for Slots<S> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread can reach this owner's directory any more
        // (readers of older directories are covered by their own deferred destruction).
        unsafe {
            drop(
                self.dir
                    .load(Ordering::Acquire, crossbeam_epoch::unprotected())
                    .into_owned(),
            )
        };
    }
}

/// A fresh page of `PAGE_SLOTS` free slots: zeroed memory (every slot free, owner word 0);
/// `None` if the allocator has none.
#[cfg(not(loom))]
fn new_page<S: Service>() -> Option<*mut Timer<S>> {
    let layout = page_layout::<S>();
    // SAFETY: the layout is non-zero-sized.
    let page = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Timer<S>>();
    // Zeroed memory is `PAGE_SLOTS` default timers: the registry's own fields are atomics, a
    // byte lock and integers, all valid as zero, and the service's parts are `Zeroable`.
    (!page.is_null()).then_some(page)
}

/// A fresh page of `PAGE_SLOTS` free slots, built with `Default` (loom's atomics are handles
/// into the model, not valid as zero).
#[cfg(loom)]
fn new_page<S: Service>() -> Option<*mut Timer<S>> {
    let layout = page_layout::<S>();
    // SAFETY: the layout is non-zero-sized.
    let page = unsafe { std::alloc::alloc(layout) }.cast::<Timer<S>>();
    if page.is_null() {
        return None;
    }
    for i in 0..PAGE_SLOTS {
        // SAFETY: `i` is inside the allocation, which is aligned for `Timer<S>`; writing
        // initialises the slot without reading or dropping what was there.
        unsafe { page.add(i).write(Timer::default()) };
    }
    Some(page)
}

/// A page of timer slots owned by nobody, every slot free (owner word 0).
pub(crate) struct PagePtr<S: Service>(*mut Timer<S>);

// SAFETY: a pooled page is not used by any thread; the pointer is handed over with the page.
unsafe impl<S: Service> Send for PagePtr<S> {}

/// Pages of torn-down owners, ready for reuse (see the module doc).
pub(crate) struct PagePool<S: Service> {
    pages: crossbeam_queue::SegQueue<PagePtr<S>>,
}

impl<S: Service> PagePool<S> {
    pub(crate) fn new() -> PagePool<S> {
        PagePool {
            pages: crossbeam_queue::SegQueue::new(),
        }
    }

    fn take(&self) -> Option<*mut Timer<S>> {
        self.pages.pop().map(|p| p.0)
    }

    /// Takes back pages from [`Slots::take_pages`].
    ///
    /// # Safety
    /// No thread may use any timer in these pages as its owner's any more (the epoch grace
    /// period after the owner's teardown has passed: a by-ID walk of another owner may still
    /// stand on one, which it may on any freed slot, and checks the slot's identity), every
    /// slot in them is free (owner word 0), and each page comes from `take_pages` once.
    pub(crate) unsafe fn recycle(&self, pages: Vec<PagePtr<S>>) {
        for page in pages {
            self.pages.push(page);
        }
    }

    /// Bytes of pooled pages.
    pub(crate) fn bytes(&self) -> usize {
        self.pages.len() * page_layout::<S>().size()
    }
}

impl<S: Service> Drop for PagePool<S> {
    fn drop(&mut self) {
        while let Some(page) = self.pages.pop() {
            // SAFETY: allocated by `new_page` with `page_layout()`; pooled pages are unused
            // (`recycle`'s contract) and popped once. The slots' parts are not dropped: a
            // slot's parts own nothing once it is free (`Service`).
            unsafe { std::alloc::dealloc(page.0.cast(), page_layout::<S>()) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slot_exhaustion_is_sticky() {
        let slots = Slots::<()>::try_new().unwrap();
        let n = SLOT_BLOCK_MAX;
        // As after the last claim that fits (base u32::MAX - 2 * PAGE_SLOTS, the highest base
        // `claim` grants): every slot below is handed out. Set directly: claiming 2^32 slots
        // for real takes 512 GiB of pages.
        let end = u32::MAX - 2 * PAGE_SLOTS as u32 + n;
        slots.claimed.store(end, Ordering::Relaxed);
        for attempt in 0..4 {
            assert_eq!(
                slots.claim(n),
                None,
                "claim {attempt} after exhaustion handed out slots that are in use"
            );
        }
        // `for_each` scans the pages of the claimed slots: still all of them.
        assert_eq!(slots.claimed.load(Ordering::Relaxed), end);
    }
}
