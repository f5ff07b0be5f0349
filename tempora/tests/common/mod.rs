//! Support shared by the integration tests (each `tests/*.rs` is a crate of its own and
//! cannot see the library's `testing` module): `mod common;` at the top of a test file.

// Each test binary uses a part of this module; the rest is unused there, not dead.
#![allow(dead_code)]

/// The integration tests' pseudo-random numbers: SplitMix64 (Steele, Lea and Flood, "Fast
/// splittable pseudorandom number generators", 2014), the generator the library's unit tests
/// use too. The state is a counter advanced by a fixed odd gamma and each output is the
/// counter mixed by two multiply-xorshift rounds, so a seed fixes the whole stream: runs are
/// deterministic in what they draw.
pub struct Rng(u64);

impl Rng {
    /// SplitMix64's gamma: 2^64 divided by the golden ratio, made odd.
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The stream of `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`; the modulo bias is below 2^-32 for `n < 2^32`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// How far apart two `gettime` readings `(value, interval)` in ns are, for the kernel
/// differential tests: |a - b|, or for two periodic readings with the same interval the
/// distance modulo it (one side may have forwarded to the next period a moment before the
/// other).
pub fn distance(a: (u64, u64), b: (u64, u64)) -> u64 {
    let d = a.0.abs_diff(b.0);
    if a.1 == b.1 && a.1 != 0 {
        d.min(a.1 - d % a.1)
    } else {
        d
    }
}
