//! [`pin`]: every epoch pin of the crate, and [`pin_walk`], the pin of a hash-table walk that
//! a signal handler may make while the thread it interrupted is in the middle of pinning.
//!
//! An epoch pin (of tempora's own `crossbeam_epoch` collector, which only [`pin`] pins) keeps
//! the memory a lock-free walker may stand on (a retired hash table, a slot directory) from
//! being freed. Pinning is not reentrant across a
//! signal handler: the first pin of a thread (and the last unpin) publishes the thread's epoch
//! in several steps, and a pin made by a handler that interrupted those steps could believe
//! itself protected when it is not, or run the epoch's collection (which frees memory) in the
//! middle of them. Nested pins only count, and a handler's nested pin and unpin leave the count
//! as they found it.
//!
//! So [`pin`] keeps the thread's pin depth itself and marks the outermost pin's and unpin's
//! steps as a *transition*, ordered by compiler fences (a handler runs on the same thread).
//! [`pin_walk`], the pin of the by-ID calls a handler may make (`gettime`, `settime`,
//! `getoverrun`: the registry's `with_timer`, `read`, `read_state`), pins as [`pin`] does,
//! except in a transition: there it does not touch the epoch at all, and walks *unpinned*,
//! counted in a process-wide count instead. What such a walk can reach is the current tables
//! (it loads the table pointer after the count, a `SeqCst` fence between) and timer slots,
//! which are never freed while the registry exists (`registry/slots.rs`); a retired table is
//! freed only after the epoch's grace period *and* once no unpinned walk is under way
//! ([`unpinned_walks`]; `registry/table.rs`, `drop_deferred`), the free's `SeqCst` fence
//! between its retirement and the count's load. So an unpinned walk never reaches freed
//! memory, and a handler's call needs neither the epoch nor the allocator.

use crossbeam_epoch::Guard;

/// tempora's own epoch collector. Not the process-wide default one: another crate's pin of
/// that one (a work-stealing deque's, say) is made without [`pin`]'s marks, and a handler that
/// interrupted its steps would pin "nested" into a half-made pin. Only [`pin`] pins this one.
#[cfg(not(loom))]
fn collector() -> &'static crossbeam_epoch::Collector {
    static COLLECTOR: super::RaceOnce<crossbeam_epoch::Collector> = super::RaceOnce::new();
    COLLECTOR.get_or_init(crossbeam_epoch::Collector::new)
}

#[cfg(not(loom))]
thread_local! {
    /// This thread's participant in [`collector`] (registering allocates: a thread's first
    /// tempora call, made outside a signal handler).
    static HANDLE: crossbeam_epoch::LocalHandle = collector().register();
}

/// A pin of tempora's collector by this thread (during the thread's exit, when its handle is
/// gone, by a handle of its own).
#[cfg(not(loom))]
#[inline]
fn epoch_pin() -> Guard {
    HANDLE
        .try_with(|h| h.pin())
        .unwrap_or_else(|_| collector().register().pin())
}

#[cfg(not(loom))]
thread_local! {
    /// Pins of this thread made through [`pin`] and not yet dropped.
    static DEPTH: std::sync::atomic::AtomicU32 = const { std::sync::atomic::AtomicU32::new(0) };
    /// Whether this thread is inside its outermost pin's or unpin's steps.
    static TRANSITION: std::sync::atomic::AtomicBool =
        const { std::sync::atomic::AtomicBool::new(false) };
}

/// Whether the calling thread is inside the steps of its outermost epoch pin or unpin (false
/// under loom).
#[inline]
pub(crate) fn in_transition() -> bool {
    #[cfg(not(loom))]
    return TRANSITION.with(|t| t.load(std::sync::atomic::Ordering::Relaxed));
    #[cfg(loom)]
    false
}

/// Hash-table walks made without a pin ([`pin_walk`]) and not finished.
#[cfg(not(loom))]
static UNPINNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An epoch pin ([`pin`]), or an unpinned walk ([`pin_walk`]); ends when dropped.
pub(crate) struct Pinned {
    guard: std::mem::ManuallyDrop<Guard>,
    /// An unpinned walk: `guard` is a copy of the epoch's unprotected guard (nothing to drop),
    /// and the walk is counted in `UNPINNED`.
    unpinned: bool,
}

impl std::ops::Deref for Pinned {
    type Target = Guard;
    #[inline]
    fn deref(&self) -> &Guard {
        &self.guard
    }
}

/// The pin of a by-ID call's walk (see the module doc): a pin, or, in the middle of this
/// thread's pin steps (a signal handler's call), an unpinned walk. The walk must not defer
/// anything through the guard (on an unpinned walk a deferred function would run at once).
#[inline]
pub(crate) fn pin_walk() -> Pinned {
    #[cfg(not(loom))]
    if in_transition() {
        use std::sync::atomic::{fence, Ordering};
        UNPINNED.fetch_add(1, Ordering::Relaxed);
        // SeqCst: pairs with the fence in `unpinned_walks`: either the free sees this walk, or
        // this walk's loads of the current table see the retirement that preceded the free.
        fence(Ordering::SeqCst);
        return Pinned {
            // SAFETY: the unprotected guard is used only for loads along the current tables and
            // slots, which the count above keeps (module doc); nothing is deferred through it.
            guard: std::mem::ManuallyDrop::new(unsafe {
                std::ptr::read(crossbeam_epoch::unprotected())
            }),
            unpinned: true,
        };
    }
    pin()
}

/// Whether an unpinned walk may be under way: a retired table is freed only once this is
/// false (it is read after the table's retirement and the epoch's grace period).
#[inline]
pub(crate) fn unpinned_walks() -> bool {
    #[cfg(not(loom))]
    {
        use std::sync::atomic::{fence, Ordering};
        // SeqCst: see `pin_walk`. Acquire: a walk that ended is over before the caller frees
        // (pairs with the walk's Release decrement).
        fence(Ordering::SeqCst);
        UNPINNED.load(Ordering::Acquire) != 0
    }
    #[cfg(loom)]
    false
}

impl Pinned {
    /// Unpins and pins again (`Guard::repin`): lets the epoch advance past a long pinned
    /// stretch. A transition when this is the thread's only pin.
    pub(crate) fn repin(&mut self) {
        #[cfg(not(loom))]
        if DEPTH.with(|d| d.load(std::sync::atomic::Ordering::Relaxed)) == 1 {
            return transition(|| self.guard.repin());
        }
        self.guard.repin();
    }
}

/// Runs `steps` marked as a transition.
#[cfg(not(loom))]
#[inline]
fn transition<R>(steps: impl FnOnce() -> R) -> R {
    use std::sync::atomic::{compiler_fence, Ordering};
    TRANSITION.with(|t| t.store(true, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    let r = steps();
    compiler_fence(Ordering::SeqCst);
    TRANSITION.with(|t| t.store(false, Ordering::Relaxed));
    r
}

/// Pins the current thread's epoch (see the module doc).
#[inline]
pub(crate) fn pin() -> Pinned {
    #[cfg(not(loom))]
    {
        use std::sync::atomic::Ordering;
        let depth = DEPTH.with(|d| d.load(Ordering::Relaxed));
        let guard = if depth == 0 {
            transition(|| {
                let g = epoch_pin();
                DEPTH.with(|d| d.store(1, Ordering::Relaxed));
                g
            })
        } else {
            // Nested: the epoch's own count only; the depth follows, so a handler between
            // the two sees a pinned thread either way.
            let g = epoch_pin();
            DEPTH.with(|d| d.store(depth + 1, Ordering::Relaxed));
            g
        };
        Pinned {
            guard: std::mem::ManuallyDrop::new(guard),
            unpinned: false,
        }
    }
    #[cfg(loom)]
    Pinned {
        guard: std::mem::ManuallyDrop::new(crossbeam_epoch::pin()),
        unpinned: false,
    }
}

impl Drop for Pinned {
    #[inline]
    fn drop(&mut self) {
        #[cfg(not(loom))]
        if self.unpinned {
            // Release: the walk's loads are done before the count drops.
            UNPINNED.fetch_sub(1, std::sync::atomic::Ordering::Release);
            return;
        }
        // SAFETY: dropped once, here; the field is not used afterwards.
        let mut unpin = || unsafe { std::mem::ManuallyDrop::drop(&mut self.guard) };
        #[cfg(not(loom))]
        {
            use std::sync::atomic::Ordering;
            let depth = DEPTH.with(|d| d.load(Ordering::Relaxed));
            if depth <= 1 {
                transition(|| {
                    DEPTH.with(|d| d.store(0, Ordering::Relaxed));
                    unpin();
                });
            } else {
                unpin();
                DEPTH.with(|d| d.store(depth - 1, Ordering::Relaxed));
            }
        }
        #[cfg(loom)]
        unpin();
    }
}

/// Runs `f` while this thread makes an unpinned walk (for the tests of what waits for one).
#[cfg(all(test, not(loom)))]
pub(crate) fn with_unpinned_walk_for_tests<R>(f: impl FnOnce() -> R) -> R {
    let walk = transition(pin_walk);
    assert!(walk.unpinned);
    let r = f();
    drop(walk);
    r
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A handler's walk in the middle of its thread's pin steps (played by marking the steps
    /// by hand) is unpinned and counted; a nested pin outside the steps is a real one.
    #[test]
    fn a_walk_inside_the_pin_steps_is_unpinned_and_counted() {
        let outer = pin();
        let nested = pin_walk();
        assert!(!nested.unpinned, "between the steps a pin is a nested one");
        drop(nested);
        drop(outer);
        transition(|| {
            let walk = pin_walk();
            assert!(
                walk.unpinned,
                "inside the steps the walk does not touch the epoch"
            );
            assert!(unpinned_walks());
            drop(walk);
        });
        assert!(!in_transition());
        // Other tests' walks may run at the same time: only this thread's are known to be
        // over, so the count is not checked here (the table's tests check the free).
    }
}
