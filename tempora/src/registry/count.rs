//! The registry's timer count, striped by thread so that creates and deletes on different
//! threads never write one cache line.

use crate::sync::{thread_index, AtomicIsize, Ordering};
use crossbeam_utils::CachePadded;

/// A counter summed over per-thread stripes (exact when no update is in flight).
pub(crate) struct Count {
    stripes: Box<[CachePadded<AtomicIsize>]>,
    overflow: CachePadded<AtomicIsize>,
}

impl Count {
    /// A counter with `stripes` stripes: threads whose index is below it write one alone.
    pub(crate) fn new(stripes: usize) -> Count {
        Count {
            stripes: (0..stripes).map(|_| Default::default()).collect(),
            overflow: Default::default(),
        }
    }

    /// Adds `delta` to the calling thread's stripe.
    #[inline]
    pub(crate) fn add(&self, delta: isize) {
        self.add_as(thread_index(), delta);
    }

    /// `add` for a caller that already has its `thread_index()`, `i`.
    ///
    /// `thread_index()` is unique among live threads, so a thread whose index is below the
    /// stripe count is the only writer of its stripe (an index is handed to a new thread only
    /// after its previous holder exited, and the Release/Acquire pair on the index bitmap
    /// orders the two writers): it updates with a plain load and store instead of a
    /// read-modify-write. Threads beyond the stripe count share one overflow counter and add
    /// atomically.
    ///
    /// Returns the stripe's new value (the overflow counter's, for a thread beyond the
    /// stripes): a per-thread tick the registry's growth check keys on.
    #[inline]
    pub(crate) fn add_as(&self, i: usize, delta: isize) -> isize {
        match self.stripes.get(i) {
            Some(stripe) => {
                // Relaxed: single writer (above); readers only need an eventually exact sum.
                let v = stripe.load(Ordering::Relaxed) + delta;
                stripe.store(v, Ordering::Relaxed);
                v
            }
            // Relaxed: the count is a growth hint; nothing is ordered by it.
            None => self.overflow.fetch_add(delta, Ordering::Relaxed) + delta,
        }
    }

    /// The sum of the stripes.
    pub(crate) fn sum(&self) -> isize {
        self.stripes
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<isize>()
            + self.overflow.load(Ordering::Relaxed)
    }
}
