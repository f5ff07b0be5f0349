//! The atomics and cell every shared structure of tempora takes (loom's under `cfg(loom)`),
//! the contended-wait step, the prefetch hint, and the poisoned-lock marker.

/// Fences, loom's under `cfg(loom)` (loom does not observe a `std` fence): the slot protocol's
/// (`registry/timer.rs`) are checked by the models in `registry/loom_tests.rs`.
#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
    AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
    AtomicUsize,
};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `UnsafeCell` with loom's closure-based access API, so the same call sites build under both.
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }
    #[inline(always)]
    #[allow(dead_code)] // the shared read path of loom and std cells; used by loom tests
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// One step of a contended wait: spin briefly, then give the CPU away. Every lock built on it
/// is held for a bounded, short time (no callback, no blocking call, and allocation only where
/// the holder says what bounds it), so a waiter that yields is rescheduled long before the
/// holder could starve it; with many more threads than CPUs the yield is what lets a preempted
/// holder run.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *spins < 32 {
            for _ in 0..(1u32 << (*spins).min(5)) {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        *spins = spins.saturating_add(1);
    }
}

/// Asks the CPU to start loading the cache line at `addr` into its caches, and returns at
/// once. Used where a loop learns an address well before it touches it (a poll pops timers
/// under the base lock and delivers them after), so the misses overlap instead of each
/// stalling the thread in turn. A hint only: any address, mapped or not, is allowed.
#[inline(always)]
pub(crate) fn prefetch(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch never faults and never changes memory; it may name any address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::without_provenance::<i8>(addr));
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = addr;
}

/// A lock whose holder panicked inside its critical section: the state it guards may be half
/// changed, so nobody takes it again. Callers turn it into [`crate::Error::Poisoned`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Poisoned;

/// The CPUs this process may run on (1 if unknown): what per-CPU structures are sized by.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A `T` with 128 bytes on each side: nothing beside it shares its cache line, or the pair of
/// lines an adjacent-line prefetcher fetches together, with it. Unlike a 128-byte aligned
/// `CachePadded`, it does not raise the alignment of what holds it, so an owner's block keeps
/// the alignment of a plain `malloc` (16 bytes), and `alloc::probe_arc`'s freed block is the
/// one glibc's per-thread cache hands to the `Arc::new` after it (a 128-byte aligned block
/// goes through glibc's aligned path, which that cache does not serve: an owner's creation
/// could then still abort on exhaustion after its probe said yes).
#[repr(C)]
pub(crate) struct Apart<T> {
    _before: [u8; 128],
    value: T,
    _after: [u8; 128],
}

impl<T> Apart<T> {
    pub(crate) const fn new(value: T) -> Apart<T> {
        Apart {
            _before: [0; 128],
            value,
            _after: [0; 128],
        }
    }
}

impl<T> std::ops::Deref for Apart<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}
