//! The debug-build record of the ranks the calling thread holds, and [`RankToken`], the proof
//! every ranked guard carries that its lock was taken in order (`rank.rs` has the order).

#[cfg(all(debug_assertions, not(loom)))]
thread_local! {
    /// Bit `r` set: this thread holds a lock of rank `r`.
    static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A lock of `rank` is being taken: panics (in debug builds) if the thread holds one of the
/// same or a higher rank; marks the rank held.
#[inline(always)]
pub(crate) fn enter(rank: u8) {
    #[cfg(all(debug_assertions, not(loom)))]
    HELD.with(|h| {
        let held = h.get();
        assert!(
            held >> rank == 0,
            "lock order: a rank-{rank} lock taken while holding a lock of rank >= {rank} \
             (held ranks {held:#b}; see sync::rank)"
        );
        h.set(held | 1 << rank);
    });
    #[cfg(not(all(debug_assertions, not(loom))))]
    let _ = rank;
}

/// A second lock of `rank` is being taken by a holder of one: panics (in debug builds)
/// unless the thread holds `rank` and nothing above it. Marks nothing.
#[inline(always)]
pub(crate) fn enter_nested(rank: u8) {
    #[cfg(all(debug_assertions, not(loom)))]
    HELD.with(|h| {
        let held = h.get();
        assert!(
            held >> rank == 1,
            "lock order: a nested rank-{rank} lock taken while not holding exactly rank \
             {rank} at the top (held ranks {held:#b}; see sync::rank)"
        );
    });
    #[cfg(not(all(debug_assertions, not(loom))))]
    let _ = rank;
}

/// The lock of `rank` that [`enter`] marked was released.
#[inline(always)]
#[cfg_attr(
    not(all(debug_assertions, not(loom))),
    allow(dead_code, reason = "only debug builds mark ranks")
)]
pub(crate) fn leave(rank: u8) {
    #[cfg(all(debug_assertions, not(loom)))]
    HELD.with(|h| h.set(h.get() & !(1 << rank)));
    #[cfg(not(all(debug_assertions, not(loom))))]
    let _ = rank;
}

/// Proof that the calling thread holds a lock of rank `RANK`, checked against the lock order
/// when it was made ([`rank`](super::rank)); dropping it (unwinding included) clears the mark. Every guard
/// of this module holds one. It is free in release builds: a zero-sized value whose making
/// and dropping compile to nothing.
///
/// Made by hand only for the locks whose mechanism lives elsewhere: a hash bucket's head bit
/// (`registry/table.rs`) and an owner's restore section (`registry/owner.rs`).
#[must_use]
pub(crate) struct RankToken<const RANK: u8> {
    /// Whether this token marked the rank (a nested one did not).
    #[cfg(all(debug_assertions, not(loom)))]
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
            #[cfg(all(debug_assertions, not(loom)))]
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
            #[cfg(all(debug_assertions, not(loom)))]
            marked: false,
            _thread: std::marker::PhantomData,
        }
    }
}

impl<const RANK: u8> Drop for RankToken<RANK> {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(all(debug_assertions, not(loom)))]
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
