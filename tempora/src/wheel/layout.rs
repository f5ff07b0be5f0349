//! The wheel's geometry: levels, granularities, and the placement rule. Pure functions of the
//! constants below; the table in the module doc of [`crate::wheel`] is derived from them in a
//! test.
//!
//! A bucket of level `n` covers `8^n` ticks. Its *absolute number* is its tick `>> 3 * n`; the
//! level reuses its 64 buckets in turn, the bucket with absolute number `a` sitting at *index*
//! `a % 64`. With `pos = clk >> 3 * n` (the level's clock), the pending buckets of the level are
//! the absolute numbers `pos + 1 ..= pos + 64`.

/// log2 of the buckets per level. Changing it changes [`LVL_SIZE`], the `u64` bitmaps (which
/// assume 64 buckets) and [`MAX_LEVELS`].
const LVL_BITS: u32 = 6;
/// Buckets per level: one `u64` bitmap word each.
pub(crate) const LVL_SIZE: usize = 1 << LVL_BITS;
/// log2 of the factor between two levels' granularities (8x).
pub(super) const LVL_CLK_SHIFT: u32 = 3;
/// Most levels a wheel may have: `LVL_BITS + LVL_CLK_SHIFT * (MAX_LEVELS - 1) = 63` bits of
/// range, the most a `u64` tick can use. Must shrink if `LVL_BITS` or `LVL_CLK_SHIFT` grow.
pub(crate) const MAX_LEVELS: usize = 20;
/// Default levels: 9 levels hold deltas up to 1_056_964_607 ticks, just under 2^30 (12.2 days
/// at 1 ms), as the kernel's wheel does at HZ=1000; later timers are parked and re-placed.
pub(crate) const DEFAULT_LEVELS: usize = 9;
/// The wheel clock never passes this tick (2^62), which keeps the tick of a level's furthest
/// bucket, `((clk >> 3 * level) + 64) << 3 * level`, inside a `u64` for every level up to
/// [`MAX_LEVELS`]. Entries beyond it never fire.
pub(crate) const MAX_TICK: u64 = 1 << 62;

/// Ticks per bucket at `level`: `8^level`.
#[inline]
pub(super) const fn granularity(level: usize) -> u64 {
    1 << (LVL_CLK_SHIFT * level as u32)
}

#[inline]
const fn shift(level: usize) -> u32 {
    LVL_CLK_SHIFT * level as u32
}

/// Smallest delta (`expiry - now`, ticks) placed at `level`: 0 for level 0, else
/// `63 * 8^(level-1)` (the kernel's `LVL_START`). It is 63, not 64, granules of the level below,
/// so that after rounding up a level-`n - 1` entry never lands on the bucket the level's clock
/// points at; it also makes the coarse slack at most `8/63` of the delta.
#[inline]
pub(super) const fn level_start(level: usize) -> u64 {
    if level == 0 {
        0
    } else {
        (LVL_SIZE as u64 - 1) << shift(level - 1)
    }
}

/// The level whose range holds `delta`, when the wheel has enough levels: the smallest `n`
/// with `delta < level_start(n + 1)`. A result `>= levels` means far-out.
#[inline]
pub(super) const fn level_for_delta(delta: u64) -> usize {
    if delta < level_start(1) {
        return 0;
    }
    // Smallest n with delta < 64 * 8^n, then one more if delta falls in [63, 64) * 8^n.
    let bits = 64 - delta.leading_zeros();
    let n = (bits - LVL_BITS).div_ceil(LVL_CLK_SHIFT) as usize;
    if n >= MAX_LEVELS {
        return n; // far-out for every wheel; level_start(n + 1) would not fit a u64
    }
    n + (delta >= level_start(n + 1)) as usize
}

/// The never-early rule: the absolute number (tick `>> 3 * level`) of the bucket for a coarse
/// entry, i.e. `expiry` rounded **up** to the level's granularity. The bucket's tick
/// `abs_bucket << 3 * level` is the first multiple of `8^level` at or after `expiry`, so an entry
/// fired when the wheel reaches it never fires before its expiry and is late by less than one
/// granule. (Written without `expiry + granule - 1`, which could overflow.)
#[inline]
pub(super) const fn round_up_bucket(expiry: u64, level: usize) -> u64 {
    let s = shift(level);
    (expiry >> s) + ((expiry & (granularity(level) - 1)) != 0) as u64
}

/// Level and absolute bucket number for an entry expiring at `expiry > clk`.
///
/// Coarse entries take [`round_up_bucket`]; precise ones the number rounded down (visited at
/// or before the expiry, then re-placed finer). Far-out entries are capped at the last level's
/// furthest bucket, `pos + 64` with `pos = clk >> shift`, which is the one bucket the 64
/// pending buckets `pos + 1 ..= pos + 64` of the level allow beyond `pos + 63`.
#[inline]
pub(super) fn place(clk: u64, expiry: u64, precise: bool, levels: usize) -> (usize, u64) {
    debug_assert!(expiry > clk);
    let level = level_for_delta(expiry - clk).min(levels - 1);
    let s = shift(level);
    let abs_bucket = if precise {
        expiry >> s
    } else {
        round_up_bucket(expiry, level)
    };
    let abs_bucket = abs_bucket.min((clk >> s) + LVL_SIZE as u64);
    debug_assert!(
        abs_bucket > clk >> s,
        "a bucket must lie ahead of the level's clock"
    );
    (level, abs_bucket)
}

/// Visit tick of the bucket at `bucket_index` (0..64) of `level`, given the wheel clock: the
/// one absolute number among the pending `pos + 1 ..= pos + 64` with that index.
#[inline]
pub(super) fn visit_of(clk: u64, level: usize, bucket_index: u64) -> u64 {
    let s = shift(level);
    let next = (clk >> s) + 1;
    let abs_bucket = next + (bucket_index.wrapping_sub(next) & (LVL_SIZE as u64 - 1));
    abs_bucket << s
}
