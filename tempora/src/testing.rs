//! Test support for every layer's unit tests, each piece written once (the service's
//! fixtures, which only tests at or above `timers` may use, are `timers/testing.rs`):
//!
//! - [`TestRng`], the one seeded pseudo-random generator (tests stay deterministic; proptest
//!   strategies stay proptest).
//! - [`quiet_panics`], the one swap of the process-wide panic hook, serialised by one lock.
//! - `Poison`, the test binary's allocator, which overwrites what it frees.
//! - `WakeCount`, a waker that counts its wakes (the compat layers' tests).
//!
//! Integration tests (`tempora/tests/`) cannot see this module; theirs is
//! `tempora/tests/common/mod.rs`.

// Under loom the only unit tests built beside the models are the wheel's, which use the RNG
// alone: the rest is unused there, not dead.
#![cfg_attr(loom, allow(dead_code))]

use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(any(feature = "hyper", feature = "tower"))]
use std::sync::Arc;
use std::sync::Mutex;

// ---- the seeded RNG --------------------------------------------------------------------------

/// The tests' pseudo-random numbers: SplitMix64 (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", 2014). The state is a counter advanced by a fixed odd
/// gamma, and each output is the counter mixed by two multiply-xorshift rounds, so a seed
/// fixes the whole stream: runs are deterministic. The counter is atomic, so one generator
/// can be shared by `&` (a clock source, threads); threads that share one draw from a single
/// stream, in whatever order they come.
///
/// Not for cryptography, nor for tests that want shrinking: those are proptest's.
pub(crate) struct TestRng(AtomicU64);

impl TestRng {
    /// SplitMix64's gamma: 2^64 divided by the golden ratio, made odd.
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The stream of `seed` (any value, 0 included).
    pub(crate) fn new(seed: u64) -> TestRng {
        TestRng(AtomicU64::new(seed))
    }

    /// The next 64 pseudo-random bits.
    pub(crate) fn next_u64(&self) -> u64 {
        // Relaxed: the counter orders nothing but itself.
        let mut z = self
            .0
            .fetch_add(Self::GAMMA, Ordering::Relaxed)
            .wrapping_add(Self::GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`; the modulo bias is below 2^-32 for `n < 2^32`).
    pub(crate) fn below(&self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
// ---- the allocator -----------------------------------------------------------------------

/// The test binary's allocator: it frees memory only after overwriting it with 0xA5, so a use
/// after free (of a retired hash table, a torn-down owner's pages, a timer's memory behind a
/// wheel entry) reads poison: pointers that crash or compare unequal, instead of stale data
/// that happens to look right. It also refuses a thread's requests while that thread asks it
/// to (`alloc::refusing_allocations`). Not under loom, whose models count on their own
/// allocations.
#[cfg(not(loom))]
struct Poison;

#[cfg(not(loom))]
use crate::alloc::refused;

// SAFETY: forwards to the system allocator or fails with null, as an allocator may; `dealloc`
// writes only the block being freed, which the caller owns until the call returns.
#[cfg(not(loom))]
unsafe impl std::alloc::GlobalAlloc for Poison {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if refused(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if refused(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` is a live block of `layout.size()` bytes owned by the caller.
        unsafe {
            std::ptr::write_bytes(ptr, 0xA5, layout.size());
            std::alloc::System.dealloc(ptr, layout)
        }
    }
}

#[cfg(not(loom))]
#[global_allocator]
static ALLOC: Poison = Poison;
// ---- panics ----------------------------------------------------------------------------------

/// Runs `f` with panic messages silenced (the panics it provokes are expected). The hook is
/// process-wide, so every swap in the test binary goes through here and is serialised by one
/// lock: two overlapping swaps would otherwise restore each other's silent hook and lose the
/// default one for the rest of the run.
pub(crate) fn quiet_panics<R>(f: impl FnOnce() -> R) -> R {
    static HOOK: Mutex<()> = Mutex::new(());
    // A test that failed while holding it poisons it; the hook is still restored below.
    let _serial = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}
// ---- wakers ----------------------------------------------------------------------------------

/// A waker that counts the times it is woken (the compat layers' tests' witness).
#[cfg(any(feature = "hyper", feature = "tower"))]
#[derive(Default)]
pub(crate) struct WakeCount(pub(crate) std::sync::atomic::AtomicUsize);

#[cfg(any(feature = "hyper", feature = "tower"))]
impl std::task::Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
