//! Fallible allocation: boxes and boxed slices that report a failed allocation as
//! [`Error::OutOfMemory`] instead of aborting the process.
//!
//! `Box::new` and `collect` call the global allocator's error handler, which aborts, when the
//! allocator returns null; `Box::try_new` is not stable. These helpers ask the allocator
//! directly (`std::alloc::alloc` with the value's layout, a null check) or go through
//! `Vec::try_reserve_exact`, the stable fallible door. Written here rather than taken from a
//! crate (`fallible_collections` has the same `try_new` for boxes): two functions, no
//! dependency, and every call site is on tempora's create path, where the failure must become
//! an `Error`, not a crate's error type.

use crate::error::Error;
use std::alloc::Layout;

/// `Box::new(value)`, or [`Error::OutOfMemory`] (with `value` dropped) if the allocator
/// returns null.
pub(crate) fn try_box<T>(value: T) -> Result<Box<T>, Error> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Ok(Box::new(value));
    }
    // SAFETY: the layout is not zero-sized (checked above).
    let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return Err(Error::OutOfMemory);
    }
    // SAFETY: `p` is a fresh allocation of `T`'s layout from the global allocator, which is
    // what `Box` frees; writing initialises it without reading what was there, and the box
    // takes sole ownership of it.
    unsafe {
        p.write(value);
        Ok(Box::from_raw(p))
    }
}

/// A boxed slice of `len` values made by `make`, or [`Error::OutOfMemory`] if the allocator
/// returns null (`make` is then never called).
pub(crate) fn try_boxed_slice<T>(len: usize, make: impl FnMut() -> T) -> Result<Box<[T]>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory)?;
    v.extend(std::iter::repeat_with(make).take(len));
    // The capacity is exactly `len` (`try_reserve_exact` on an empty vector): no reallocation.
    Ok(v.into_boxed_slice())
}

/// The largest block glibc's per-thread cache keeps (on 64-bit: 1032 usable bytes).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const CACHED_BLOCK: usize = 1032;

/// The block an `Arc` of a value with `value`'s layout allocates: two counts, then the value.
pub(crate) fn arc_block(value: Layout) -> Option<Layout> {
    let counts = Layout::new::<[std::sync::atomic::AtomicUsize; 2]>();
    let (layout, _) = counts.extend(value).ok()?;
    Some(layout.pad_to_align())
}

/// Checks that an `Arc<T>` can be allocated now: allocates a block of an `Arc<T>`'s size and
/// alignment (two counts and a `T`) and frees it at once; [`Error::OutOfMemory`] if the
/// allocator returns null. Stable Rust has no fallible `Arc::new`; an `Arc::new` of the same
/// `T` made right after this, on the same thread, gets the block just freed from glibc's
/// per-thread cache (tcache: a freed small block is handed to the next request of its size
/// class from the same thread, before any other source), so it does not fail where this
/// succeeded. With another allocator, or glibc's tcache turned off, this is a probe, not a
/// reservation (the `timers` module doc, "Memory", lists it).
///
/// What makes it hold: the block is one glibc's per-thread cache keeps (at most
/// [`CACHED_BLOCK`] bytes), and of a `malloc`'s alignment (at most 16 bytes: a more aligned
/// block goes through glibc's aligned path, which does not take a block from that cache).
/// `timers::object`'s `every_probed_arc_block_is_one_the_cache_keeps` checks the service's.
pub(crate) fn probe_arc<T>() -> Result<(), Error> {
    let layout = arc_block(Layout::new::<T>()).ok_or(Error::OutOfMemory)?;
    // SAFETY: the layout is not zero-sized (it holds two counts).
    // `black_box`: an allocation freed unused may be elided by the optimizer, and the probe
    // would then ask the allocator nothing (an optimized build aborted in `Arc::new` where
    // this had said yes).
    let p = std::hint::black_box(unsafe { std::alloc::alloc(layout) });
    if p.is_null() {
        return Err(Error::OutOfMemory);
    }
    // SAFETY: `p` was allocated just above with `layout` and is not used again.
    unsafe { std::alloc::dealloc(p, layout) };
    Ok(())
}

#[cfg(all(test, not(loom)))]
thread_local! {
    /// Requests of at least this many bytes fail on this thread (`usize::MAX`: none do).
    static REFUSE_FROM: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    /// Requests refused on this thread so far.
    static REFUSALS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Requests the unit tests' allocator has refused on this thread so far: a test that
/// refuses every request around a call sees here whether the call asked for memory at all.
#[cfg(all(test, not(loom)))]
pub(crate) fn refusals() -> usize {
    REFUSALS.with(std::cell::Cell::get)
}

/// Runs `f` with this thread's allocations of `from` bytes or more failing (null), as an
/// exhausted allocator's do: the unit tests' allocator (`testing.rs`) asks [`refused`].
#[cfg(all(test, not(loom)))]
pub(crate) fn refusing_allocations<R>(from: usize, f: impl FnOnce() -> R) -> R {
    REFUSE_FROM.with(|r| r.set(from));
    let r = f();
    REFUSE_FROM.with(|r| r.set(usize::MAX));
    r
}

/// Whether the unit tests' allocator fails `layout` on this thread now.
#[cfg(all(test, not(loom)))]
pub(crate) fn refused(layout: Layout) -> bool {
    // `try_with`: no allocation, no destructor registered (a const thread-local of a `Cell`).
    let refuse = REFUSE_FROM
        .try_with(|r| layout.size() >= r.get())
        .unwrap_or(false);
    if refuse {
        let _ = REFUSALS.try_with(|n| n.set(n.get() + 1));
    }
    refuse
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn boxes_and_slices_hold_their_values() {
        assert_eq!(*try_box(7u64).unwrap(), 7);
        assert_eq!(*try_box(()).unwrap(), ());
        let mut n = 0;
        let s = try_boxed_slice(5, || {
            n += 1;
            n
        })
        .unwrap();
        assert_eq!(&*s, &[1, 2, 3, 4, 5]);
        assert!(try_boxed_slice(0, || 1u8).unwrap().is_empty());
        assert_eq!(probe_arc::<[u64; 3]>(), Ok(()));
    }

    #[test]
    fn refused_allocations_fail() {
        let r = refusing_allocations(64, || (try_box([0u8; 64]).err(), try_box(7u8).is_ok()));
        assert_eq!(r, (Some(Error::OutOfMemory), true));
        assert!(try_box([0u8; 64]).is_ok());
    }

    #[test]
    fn a_slice_too_large_is_out_of_memory() {
        let r = try_boxed_slice(usize::MAX / 8, || 0u64);
        assert_eq!(r.err(), Some(Error::OutOfMemory));
    }
}
