//! The record of the ranks the calling thread holds, and [`RankToken`], the proof every
//! ranked guard carries that its lock was taken in order (`rank.rs` has the order).
//!
//! The record is kept in every build (not under loom, whose model threads share one OS
//! thread): debug builds check the order against it at every lock, and every build answers
//! [`holds_a_lock`] from it, which is how a call made from a signal handler learns that the
//! code it interrupted on the same thread holds one of tempora's locks (the timers module's
//! "Signal handlers"). A rank is marked before its lock is taken and cleared after it is
//! released, with compiler fences between (a handler runs on the same thread, so ordering the
//! compiler's output is all it needs): whenever the thread holds a lock, its rank is marked.

#[cfg(not(loom))]
thread_local! {
    /// Bit `r` set: this thread holds (or is taking, or has just released) a lock of rank
    /// `r`. An atomic, read and written with plain loads and stores, because a signal handler
    /// on this thread reads it.
    static HELD: std::sync::atomic::AtomicU32 = const { std::sync::atomic::AtomicU32::new(0) };
}

/// Whether the calling thread holds one of tempora's locks (or is taking or has just released
/// one): what a call that a signal handler may make checks before it could wait for one (the
/// timers module's "Signal handlers"). False under loom.
#[inline]
pub(crate) fn holds_a_lock() -> bool {
    #[cfg(not(loom))]
    return HELD.with(|h| h.load(std::sync::atomic::Ordering::Relaxed)) != 0;
    #[cfg(loom)]
    false
}

/// A lock of `rank` is being taken: panics (in debug builds) if the thread holds one of the
/// same or a higher rank; marks the rank held, before the lock is taken.
#[inline(always)]
pub(crate) fn enter(rank: u8) {
    #[cfg(not(loom))]
    HELD.with(|h| {
        use std::sync::atomic::{compiler_fence, Ordering};
        let held = h.load(Ordering::Relaxed);
        #[cfg(debug_assertions)]
        assert!(
            held >> rank == 0,
            "lock order: a rank-{rank} lock taken while holding a lock of rank >= {rank} \
             (held ranks {held:#b}; see sync::rank)"
        );
        h.store(held | 1 << rank, Ordering::Relaxed);
        // The mark is in place before the lock is taken, for a handler on this thread.
        compiler_fence(Ordering::SeqCst);
    });
    #[cfg(loom)]
    let _ = rank;
}

/// A second lock of `rank` is being taken by a holder of one: panics (in debug builds)
/// unless the thread holds `rank` and nothing above it. Marks nothing.
#[inline(always)]
pub(crate) fn enter_nested(rank: u8) {
    #[cfg(all(debug_assertions, not(loom)))]
    HELD.with(|h| {
        let held = h.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            held >> rank == 1,
            "lock order: a nested rank-{rank} lock taken while not holding exactly rank \
             {rank} at the top (held ranks {held:#b}; see sync::rank)"
        );
    });
    #[cfg(not(all(debug_assertions, not(loom))))]
    let _ = rank;
}

/// The lock of `rank` that [`enter`] marked was released: clears the mark, after the release.
#[inline(always)]
pub(crate) fn leave(rank: u8) {
    #[cfg(not(loom))]
    HELD.with(|h| {
        use std::sync::atomic::{compiler_fence, Ordering};
        // The lock is released before the mark goes, for a handler on this thread.
        compiler_fence(Ordering::SeqCst);
        h.store(h.load(Ordering::Relaxed) & !(1 << rank), Ordering::Relaxed);
    });
    #[cfg(loom)]
    let _ = rank;
}

/// Proof that the calling thread holds a lock of rank `RANK`, checked against the lock order
/// when it was made ([`rank`](super::rank)); dropping it (unwinding included) clears the mark. Every guard
/// of this module holds one. In release builds its making and dropping are the mark's two
/// thread-local stores.
///
/// Made by hand only for the locks whose mechanism lives elsewhere: a hash bucket's head bit
/// (`registry/table.rs`) and an owner's restore section (`registry/owner.rs`).
#[must_use]
pub(crate) struct RankToken<const RANK: u8> {
    /// Whether this token marked the rank (a nested one did not).
    marked: bool,
    /// The mark is the thread's: the token stays on it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl<const RANK: u8> RankToken<RANK> {
    /// A lock of rank `RANK` is being taken: panics (debug builds) if the thread holds a lock
    /// of the same or a higher rank.
    #[inline(always)]
    pub(crate) fn enter() -> Self {
        const { assert!(RANK < 32, "ranks are bits of a u32") };
        enter(RANK);
        RankToken {
            marked: true,
            _thread: std::marker::PhantomData,
        }
    }

    /// A second lock of rank `RANK` is being taken by the holder of `outer`, the one case
    /// where the rule allows two of a rank: a table split's future buckets, under the old
    /// bucket. Panics (debug builds) if the thread holds anything above `RANK`.
    #[inline(always)]
    pub(crate) fn nested(outer: &RankToken<RANK>) -> Self {
        let _ = outer;
        enter_nested(RANK);
        RankToken {
            marked: false,
            _thread: std::marker::PhantomData,
        }
    }
}

impl<const RANK: u8> Drop for RankToken<RANK> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.marked {
            leave(RANK);
        }
    }
}

/// The message of a panic `catch_unwind` caught (`r` must be the error): for the tests that
/// check what a lock-order violation says.
#[cfg(all(test, not(loom)))]
pub(crate) fn panic_message(r: Result<(), Box<dyn std::any::Any + Send>>) -> String {
    let e = r.expect_err("the call panics");
    (e.downcast_ref::<String>().cloned())
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
