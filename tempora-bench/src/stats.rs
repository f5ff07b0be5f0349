//! The statistics every suite reports with: the median of repeated runs.

/// The median of `v` (sorted in place): what `ns_per_op` reports.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
