//! The registry's timer count, striped by thread so that creates and deletes on different
//! threads never write one cache line.

use crate::sync::{thread_index, AtomicIsize, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

/// A counter summed over per-thread stripes (exact when no update is in flight).
pub(crate) struct Count {
    stripes: Box<[CachePadded<Stripe>]>,
    overflow: CachePadded<Stripe>,
}

/// One thread's part of the count.
#[derive(Default)]
struct Stripe {
    /// Its creates minus its deletes.
    count: AtomicIsize,
    /// Its creates: only ever grows (wrapping), a per-thread clock for the growth check.
    creates: AtomicUsize,
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
    /// read-modify-write. Threads beyond the stripe count share one overflow stripe and add
    /// atomically.
    #[inline]
    pub(crate) fn add_as(&self, i: usize, delta: isize) {
        match self.stripes.get(i) {
            // Relaxed: single writer (above); readers only need an eventually exact sum.
            Some(s) => s
                .count
                .store(s.count.load(Ordering::Relaxed) + delta, Ordering::Relaxed),
            // Relaxed: the count is a growth hint; nothing is ordered by it.
            None => _ = self.overflow.count.fetch_add(delta, Ordering::Relaxed),
        }
    }

    /// Counts a create by thread `i` (its `thread_index()`), and returns how many creates its
    /// stripe has counted so far (wrapping): the clock the registry's growth check keys on.
    /// Unlike the count, it never goes back, so a thread that creates and deletes around a
    /// steady number of timers still reaches each multiple once.
    #[inline]
    pub(crate) fn created(&self, i: usize) -> usize {
        self.add_as(i, 1);
        match self.stripes.get(i) {
            Some(s) => {
                // Relaxed: single writer, as for `count`; nothing else reads it.
                let c = s.creates.load(Ordering::Relaxed).wrapping_add(1);
                s.creates.store(c, Ordering::Relaxed);
                c
            }
            // Relaxed: a clock for a heuristic only.
            None => self
                .overflow
                .creates
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1),
        }
    }

    /// The sum of the stripes.
    pub(crate) fn sum(&self) -> isize {
        self.stripes
            .iter()
            .map(|c| c.count.load(Ordering::Relaxed))
            .sum::<isize>()
            + self.overflow.count.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Count;

    /// The growth check's clock moves on with every create, also when deletes keep the count
    /// itself steady: a thread creating and deleting around a multiple of the check interval
    /// must not meet that multiple at every create (each meeting sums every stripe).
    #[test]
    fn created_keeps_rising_while_the_count_stays_steady() {
        let c = Count::new(4);
        for k in 1..=32 {
            assert_eq!(c.created(1), k);
            c.add_as(1, -1);
            assert_eq!(c.sum(), 0);
        }
        // A thread beyond the stripes counts in the shared overflow stripe.
        assert_eq!(c.created(9), 1);
        assert_eq!(c.created(10), 2);
        assert_eq!(c.sum(), 2);
    }
}
