//! A global allocator that counts live heap bytes, so the benchmarks report bytes per timer
//! for tempora and every peer the same way, whatever their internals. One relaxed atomic add
//! per allocation; the count is only read between benchmark phases. A forked child also counts
//! its allocation calls (`count_calls`), which everyone else pays one relaxed load for.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);
/// Whether `CALLS` counts: set only in a forked child, which has one thread.
static COUNTING_CALLS: AtomicBool = AtomicBool::new(false);

/// Heap bytes currently allocated by this process through the global allocator.
pub fn allocated_bytes() -> usize {
    // Relaxed: a statistic read on the thread that did the allocations it cares about.
    LIVE.load(Ordering::Relaxed)
}

/// From now on, counts this process's allocations (and reallocations): what a forked child
/// calls before the code it checks allocates nothing.
pub fn count_calls() {
    // Relaxed: read by this thread's own allocations.
    COUNTING_CALLS.store(true, Ordering::Relaxed);
}

/// Allocations (and reallocations) counted since `count_calls`.
pub fn allocation_calls() -> usize {
    // Relaxed: read on the thread whose allocations it counts.
    CALLS.load(Ordering::Relaxed)
}

/// `System`, counting.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are this allocator's; the counter never affects what is returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract (non-zero size), which is
        // `System::alloc`'s.
        let p = unsafe { System.alloc(layout) };
        count_call();
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        count_call();
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by this allocator, i.e. by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds `realloc`'s
        // contract for `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        count_call();
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

/// One allocation call, if this process counts them (`count_calls`).
#[inline]
fn count_call() {
    // Relaxed: a statistic of this (single-threaded, forked) process's own calls.
    if COUNTING_CALLS.load(Ordering::Relaxed) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
}
