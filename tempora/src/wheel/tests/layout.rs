//! The wheel's geometry, derived from the constants: the module doc's level table, the entry
//! sizes, the level of each delta, and rounding up to a bucket (never early).

use super::*;

/// The doc table rows, derived from the constants.
fn level_rows(levels: usize) -> Vec<String> {
    (0..levels)
        .map(|n| {
            let fmt = |v: u64| {
                let s = v.to_string();
                let mut out = String::new();
                for (i, c) in s.chars().enumerate() {
                    if i > 0 && (s.len() - i) % 3 == 0 {
                        out.push('_');
                    }
                    out.push(c);
                }
                out
            };
            format!(
                "{n}  {}  {} ..  {}",
                fmt(granularity(n)),
                fmt(level_start(n)),
                fmt(level_start(n + 1) - 1)
            )
        })
        .collect()
}

#[test]
fn level_table_matches_doc() {
    let doc = include_str!("../mod.rs");
    // Collapse runs of spaces so the check ignores column alignment.
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let doc = squeeze(doc);
    for row in level_rows(DEFAULT_LEVELS) {
        assert!(
            doc.contains(&squeeze(&row)),
            "module doc lacks the row `{row}`"
        );
    }
    // The slack bound: one granule of level n over the smallest delta of level n.
    for n in 1..MAX_LEVELS {
        assert!(granularity(n) * 63 <= level_start(n) * 8);
    }
}

/// The entry sizes `Entry` and `Wheel::entry_size` document: 23 bytes plus the payload, padded.
/// The intrusive storage's node is 24 bytes.
#[test]
fn entry_size_matches_doc() {
    assert_eq!(Wheel::<()>::entry_size(), 24);
    assert_eq!(Wheel::<u8>::entry_size(), 24);
    assert_eq!(Wheel::<[u8; 2]>::entry_size(), 32);
    assert_eq!(std::mem::size_of::<Node>(), 24);
    assert_eq!(Wheel::<u32>::entry_size(), 32);
    assert_eq!(Wheel::<u64>::entry_size(), 32);
    assert_eq!(Wheel::<u128>::entry_size(), 48);
}

#[test]
fn level_for_delta_at_every_boundary() {
    assert_eq!(level_for_delta(0), 0);
    assert_eq!(level_for_delta(62), 0);
    for n in 1..MAX_LEVELS {
        assert_eq!(
            level_for_delta(level_start(n) - 1),
            n - 1,
            "below level {n}"
        );
        assert_eq!(level_for_delta(level_start(n)), n, "start of level {n}");
        assert_eq!(level_for_delta(level_start(n) + 1), n);
    }
    assert!(level_for_delta(u64::MAX) >= MAX_LEVELS);
    // Brute force over small deltas against the definition.
    for delta in 0..200_000u64 {
        let want = (0..).find(|&n| delta < level_start(n + 1)).unwrap();
        assert_eq!(level_for_delta(delta), want, "delta {delta}");
    }
}

#[test]
fn round_up_never_early() {
    for level in 0..MAX_LEVELS {
        let g = granularity(level);
        for expiry in [1, g - 1, g, g + 1, 5 * g, 5 * g + 1, u64::MAX] {
            let abs_bucket = round_up_bucket(expiry, level) as u128;
            let tick = abs_bucket << (LVL_CLK_SHIFT * level as u32);
            assert!(tick >= expiry as u128);
            assert!(tick < expiry as u128 + g as u128);
        }
    }
}
