//! The lateness histogram: log-linear buckets of nanoseconds, HdrHistogram's layout with three
//! sub-bucket bits.
//!
//! ```text
//!  value (ns)        bucket                      width
//!  0 ..= 15          the value itself            1
//!  2^e .. 2^(e+1)    (e - 2) * 8 + (v >> (e-3))&7   2^(e-3)   for e = 4 ..= 35
//!  >= 2^36 (68.7 s)  the last bucket (272)
//! ```
//!
//! Every bucket above 15 ns spans an eighth of its power of two, so a quantile read from the
//! buckets is within 12.5% of the true value (reported as the bucket's highest value, never
//! below the truth). The exact maximum is kept beside the buckets.
//!
//! A writer's cells (`Cells`) are per thread slot and only grow; a flush adds what they gained
//! since its last reading to a total's `Buckets` (plain integers under the total's lock).

use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Sub-bucket bits: 8 buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Values below this have a bucket each.
const LINEAR: u64 = 2 * SUB as u64;
/// The highest power of two with buckets of its own (2^35 ns ≈ 34 s .. 68.7 s).
const TOP_EXP: u32 = 35;
/// Buckets in a histogram: the linear ones, 8 per power of two up to `TOP_EXP`, and one for
/// everything above.
pub(crate) const BUCKETS: usize = (TOP_EXP as usize - 2) * SUB + SUB + 1;

/// The bucket of `v` ns.
#[inline]
pub(crate) fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e > TOP_EXP {
        return BUCKETS - 1;
    }
    (e as usize - 2) * SUB + ((v >> (e - SUB_BITS)) as usize & (SUB - 1))
}

/// The highest value bucket `i` holds (`u64::MAX` for the last, which holds everything above).
pub(crate) fn bucket_high(i: usize) -> u64 {
    if i < LINEAR as usize {
        return i as u64;
    }
    if i == BUCKETS - 1 {
        return u64::MAX;
    }
    let e = (i / SUB + 2) as u32;
    let sub = (i % SUB) as u64;
    let low = (SUB as u64 + sub) << (e - SUB_BITS);
    low + (1 << (e - SUB_BITS)) - 1
}

/// One writer slot's cells, allocated on the slot's first lateness sample. Like the slot's
/// counters (`tally.rs`), they only grow: a single writer adds with a load and a store, the
/// overflow slot's writers atomically, and a flush takes the difference from what it read
/// last (`last`, the flush's alone).
pub(crate) struct Cells {
    counts: [AtomicU32; BUCKETS],
    sum: AtomicU64,
    max: AtomicU64,
    /// The counts and sum the last flush read (under the hub's `flushing`).
    last: UnsafeCell<([u32; BUCKETS], u64)>,
}

impl Cells {
    /// Empty cells, or `None` if the allocator has no memory for them.
    pub(crate) fn try_new() -> Option<Box<Cells>> {
        crate::alloc::try_box(Cells::zero()).ok()
    }

    fn zero() -> Cells {
        Cells {
            counts: std::array::from_fn(|_| AtomicU32::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
            last: UnsafeCell::new(([0; BUCKETS], 0)),
        }
    }

    /// Counts one sample of `v` ns; `single`: the caller is the cells' only writer.
    #[inline]
    pub(crate) fn record(&self, v: u64, single: bool) {
        // Relaxed (all): read by a flush after its fence (`tally.rs`).
        let c = &self.counts[bucket(v)];
        if single {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
            let sum = self.sum.load(Ordering::Relaxed).wrapping_add(v);
            self.sum.store(sum, Ordering::Relaxed);
            if v > self.max.load(Ordering::Relaxed) {
                self.max.store(v, Ordering::Relaxed);
            }
        } else {
            c.fetch_add(1, Ordering::Relaxed);
            self.sum.fetch_add(v, Ordering::Relaxed);
            self.max.fetch_max(v, Ordering::Relaxed);
        }
    }

    /// Adds what was recorded since the last call to `into`.
    ///
    /// # Safety
    /// The caller holds the hub's `flushing` lock (it alone touches `last`).
    pub(crate) unsafe fn drain_into(&self, into: &mut Buckets) {
        self.last.with_mut(|last| {
            // SAFETY: the caller's contract.
            let (counts, sum) = unsafe { &mut *last };
            for (i, c) in self.counts.iter().enumerate() {
                // Relaxed: ordered by the flush's fence.
                let now = c.load(Ordering::Relaxed);
                if now != counts[i] {
                    into.add(i, u64::from(now.wrapping_sub(counts[i])));
                    counts[i] = now;
                }
            }
            // Relaxed: as the counts.
            let now = self.sum.load(Ordering::Relaxed);
            into.sum = into.sum.wrapping_add(now.wrapping_sub(*sum));
            *sum = now;
        });
        // Relaxed: as the counts.
        into.max = into.max.max(self.max.load(Ordering::Relaxed));
    }
}

/// A flushed histogram: counts per bucket and the maximum. The buckets are allocated with the
/// first sample (an owner whose timers never fire pays nothing for them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Buckets {
    counts: Option<Box<[u64; BUCKETS]>>,
    total: u64,
    sum: u64,
    max: u64,
}

impl Buckets {
    fn add(&mut self, i: usize, n: u64) {
        self.counts.get_or_insert_with(|| Box::new([0; BUCKETS]))[i] += n;
        self.total += n;
    }

    /// Adds every count of `other`.
    pub(crate) fn merge(&mut self, other: &Buckets) {
        if let Some(counts) = &other.counts {
            for (i, &n) in counts.iter().enumerate() {
                if n != 0 {
                    self.add(i, n);
                }
            }
        }
        self.sum = self.sum.wrapping_add(other.sum);
        self.max = self.max.max(other.max);
    }

    /// The sum of the samples, in ns.
    pub(crate) fn sum(&self) -> u64 {
        self.sum
    }

    /// The samples counted.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The exact maximum.
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0 ..= 1): the highest value of the bucket holding the
    /// `ceil(q * total)`-th sample, capped at the maximum; 0 with no samples.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().flat_map(|c| c.iter()).enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_high(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_cover_the_range_in_order() {
        let mut prev = None;
        for i in 0..BUCKETS {
            let high = bucket_high(i);
            assert_eq!(bucket(high.min(1 << 40)), i, "bucket {i}");
            if let Some(p) = prev {
                assert!(high > p);
                assert_eq!(bucket(p + 1), i, "the value after bucket {}'s top", i - 1);
            }
            prev = Some(high);
        }
    }

    proptest! {
        #[test]
        fn a_value_is_within_an_eighth_of_its_bucket_top(v in 0u64..(1 << 36)) {
            let high = bucket_high(bucket(v));
            prop_assert!(high >= v);
            prop_assert!(high - v <= v / 8, "{v} -> {high}");
        }
    }

    #[test]
    fn quantiles_never_understate() {
        let cells = Cells::try_new().expect("memory for the cells");
        for v in 1..=1000u64 {
            cells.record(v * 1000, v % 2 == 0);
        }
        let mut b = Buckets::default();
        // SAFETY: no other flush.
        unsafe { cells.drain_into(&mut b) };
        assert_eq!(b.total(), 1000);
        assert_eq!(b.max(), 1_000_000);
        for (q, truth) in [
            (0.5, 500_000u64),
            (0.99, 990_000),
            (0.999, 999_000),
            (1.0, 1_000_000),
        ] {
            let got = b.quantile(q);
            assert!(
                got >= truth && got - truth <= truth / 8,
                "q {q}: {got} vs {truth}"
            );
        }
        let mut again = Buckets::default();
        // SAFETY: no other flush.
        unsafe { cells.drain_into(&mut again) };
        assert_eq!(again.total(), 0, "a drain takes only what is new");
        cells.record(7, true);
        // SAFETY: as above.
        unsafe { cells.drain_into(&mut again) };
        assert_eq!((again.total(), again.sum()), (1, 7));
    }
}
