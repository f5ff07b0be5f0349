//! The one quantile every suite and report figure uses: the `q`-quantile of `n` sorted samples
//! is the sample at index `floor(n * q)` (clamped to the last), so the median of an even count
//! is the upper of the two middle samples. `ns_per_op` is the median of a measurement's runs;
//! lateness and lock-hold percentiles are quantiles of their samples.

/// The index of the `q`-quantile (`0 <= q <= 1`) in `len` sorted samples; `len` is not 0.
pub(crate) fn rank(len: usize, q: f64) -> usize {
    debug_assert!(len > 0 && (0.0..=1.0).contains(&q));
    ((len as f64 * q) as usize).min(len - 1)
}

/// The `q`-quantile of `sorted` (ascending); `None` if it is empty.
pub(crate) fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    (!sorted.is_empty()).then(|| sorted[rank(sorted.len(), q)])
}

/// The median of `v` (sorted in place): what `ns_per_op` reports.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[rank(v.len(), 0.5)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_upper_middle_sample() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&mut [2.0, 1.0, 3.0]), 2.0);
        assert_eq!(median(&mut [7.0]), 7.0);
    }

    #[test]
    fn quantiles_pick_floor_n_q_and_clamp_to_the_last() {
        let v: Vec<u64> = (0..200).collect();
        assert_eq!(quantile(&v, 0.5), Some(100));
        assert_eq!(quantile(&v, 0.99), Some(198));
        assert_eq!(quantile(&v, 0.999), Some(199));
        assert_eq!(quantile(&v, 1.0), Some(199));
        assert_eq!(quantile::<u64>(&[], 0.99), None);
    }
}
