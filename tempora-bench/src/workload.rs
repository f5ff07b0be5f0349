//! The workload pieces several suites share, so that every implementation (and every suite)
//! sees the same sequence: the arming `spread` and the one random generator.

use rand::rngs::SmallRng;
use rand::SeedableRng;

/// The `i`th timer's relative arming on pass `pass`, ns: 1 s plus a spread below 1 s (steps of
/// 1 µs, stride 7919 per timer and 104 729 per pass, both prime, so neighbours land far
/// apart and each pass moves every timer). `suites/capi/capi.c`'s `capi_spread_nsec` computes
/// pass 0's `tv_nsec` in C.
pub(crate) fn spread(i: usize, pass: usize) -> u64 {
    1_000_000_000 + spread_nsec(i, pass) as u64
}

/// `spread(i, pass)`'s sub-second part, ns: the `tv_nsec` of an arming whose `tv_sec` is 1.
pub(crate) fn spread_nsec(i: usize, pass: usize) -> i64 {
    ((i.wrapping_mul(7919)
        .wrapping_add(pass.wrapping_mul(104_729)))
        % 1_000_000) as i64
        * 1_000
}

/// The random generator every suite draws its workloads from: seeded, so that a suite's
/// implementations (and two runs) see the same sequence.
pub(crate) fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}
