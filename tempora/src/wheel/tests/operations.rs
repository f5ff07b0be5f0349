//! The wheel's operations one by one: when coarse and precise entries fire on every level,
//! far and huge expiries, clock jumps, polling one at a time and bounded advances,
//! rescheduling, stale keys, rebasing backwards, the builder, and dropping payloads.

use super::*;

/// Fires everything due by `now`, returning (payload, expiry) pairs.
fn drain<T>(w: &mut Wheel<T>, now: u64) -> Vec<(T, u64)> {
    let mut out = Vec::new();
    w.advance(now, usize::MAX, |e| out.push((e.value, e.expiry)));
    out
}

/// The first tick at which `advance` fires the only entry of a wheel.
fn fire_tick(mut w: Wheel<u32>, limit: u64) -> u64 {
    let mut now = w.now();
    loop {
        let next = w.next_expiry().expect("armed entry");
        assert!(next > now || next == w.now(), "next_expiry must lie ahead");
        assert!(next <= limit, "did not fire by {limit}");
        // Nothing fires one tick before the wheel's own next expiry.
        if next > now + 1 {
            assert!(drain(&mut w, next - 1).is_empty());
        }
        now = next;
        if !drain(&mut w, now).is_empty() {
            return now;
        }
    }
}

#[test]
fn coarse_fires_at_the_rounded_up_tick_on_every_level() {
    for n in 0..DEFAULT_LEVELS {
        for delta in [level_start(n), level_start(n) + 1, level_start(n + 1) - 1] {
            for start in [0u64, 1, 12_345, 1 << 33] {
                let mut w = Wheel::builder().start(start).build().unwrap();
                w.insert(start + delta, 7u32);
                let expiry = start + delta;
                let got = fire_tick(w, u64::MAX);
                let want = round_up_bucket(expiry, n) << (3 * n);
                assert_eq!(got, want, "level {n} delta {delta} start {start}");
                assert!(got >= expiry && got - expiry < granularity(n));
                if n > 0 {
                    assert!((got - expiry) * 63 <= delta * 8, "slack above 8/63");
                }
            }
        }
    }
}

#[test]
fn precise_fires_exactly_on_every_level() {
    for n in 0..DEFAULT_LEVELS {
        for delta in [
            level_start(n).max(1),
            level_start(n) + 5,
            level_start(n + 1) - 1,
        ] {
            let start = 1_000_003;
            let mut w = Wheel::builder().start(start).build().unwrap();
            w.insert_with(start + delta, Mode::PRECISE, 1u32);
            assert_eq!(
                fire_tick(w, u64::MAX),
                start + delta,
                "level {n} delta {delta}"
            );
        }
    }
}

#[test]
fn far_out_entries_are_replaced_never_early() {
    let levels = 3; // range 4_031 ticks: everything beyond is far-out
    for expiry in [4_032u64, 4_100, 100_000, 1_234_567] {
        for mode in [Mode::COARSE, Mode::PRECISE] {
            let mut w = Wheel::builder().levels(levels).build().unwrap();
            w.insert_with(expiry, mode, 0u32);
            let got = fire_tick(w, u64::MAX);
            assert!(got >= expiry, "fired early: {got} < {expiry}");
            if mode == Mode::PRECISE {
                assert_eq!(got, expiry);
            } else {
                assert!(got - expiry < granularity(levels - 1));
            }
        }
    }
}

#[test]
fn huge_timeouts_do_not_panic_and_never_fire_early() {
    let mut w = Wheel::new();
    let a = w.insert(u64::MAX, 1u32);
    let b = w.insert_with(MAX_TICK + 1, Mode::PRECISE, 2);
    let c = w.insert(1 << 45, 3);
    assert!(drain(&mut w, 1 << 44).is_empty());
    assert_eq!(drain(&mut w, 1 << 45), vec![(3, 1 << 45)]);
    assert!(
        drain(&mut w, u64::MAX).is_empty(),
        "nothing fires beyond MAX_TICK"
    );
    assert_eq!(w.now(), MAX_TICK);
    assert!(w.contains(a) && w.contains(b) && !w.contains(c));
    assert_eq!(w.remove(a), Some(1));
}

#[test]
fn clock_jumps_of_2_pow_40_in_a_few_steps() {
    let mut w = Wheel::new();
    let step = 1u64 << 38;
    let expiries = [step - 1, step * 2 + 17, (1 << 40) - 3, 1 << 40];
    for (i, &e) in expiries.iter().enumerate() {
        w.insert_with(
            e,
            if i % 2 == 0 {
                Mode::PRECISE
            } else {
                Mode::COARSE
            },
            i,
        );
    }
    let mut fired = Vec::new();
    for k in 1..=4 {
        let now = step * k;
        for (i, expiry) in drain(&mut w, now) {
            assert!(expiry <= now);
            fired.push(i);
        }
        assert_eq!(w.now(), now);
    }
    fired.sort();
    assert_eq!(fired, vec![0, 1, 2, 3]);
    assert!(w.is_empty());
    // An empty wheel skips any gap at once.
    assert!(drain(&mut w, 1 << 61).is_empty());
    assert_eq!(w.now(), 1 << 61);
}

#[test]
fn stale_keys_are_rejected() {
    let mut w = Wheel::new();
    let a = w.insert(10, 'a');
    assert_eq!(w.remove(a), Some('a'));
    let b = w.insert(20, 'b'); // reuses a's entry
    assert_eq!(w.remove(a), None, "stale key must not remove b");
    assert_eq!(w.reschedule(a, 5), Err(StaleKey));
    assert_eq!(w.get(a), None);
    assert_eq!(w.expiry(b), Some(20));
    assert_eq!(drain(&mut w, 20), vec![('b', 20)]);
    assert_eq!(w.remove(b), None, "fired key is stale");
    assert_eq!(w.remove(Key::from_bits(u64::MAX)), None);
}

#[test]
fn past_expiry_is_ready_at_once() {
    let mut w = Wheel::builder().start(100).build().unwrap();
    w.insert(50, 1u32);
    w.insert(100, 2);
    assert_eq!(w.next_expiry(), Some(100));
    let mut got = drain(&mut w, 100);
    got.sort();
    assert_eq!(got, vec![(1, 50), (2, 100)]);
}

#[test]
fn deferrable_entries_never_move_next_expiry() {
    let mut w = Wheel::new();
    w.insert(1_000, 'n');
    w.insert_with(10, Mode::DEFERRABLE, 'd');
    w.insert_with(5, Mode::DEFERRABLE | Mode::PRECISE, 'p');
    assert_eq!(w.next_expiry(), Some(round_up_bucket(1_000, 2) << 6));
    // They still fire when the wheel passes them.
    let mut got: Vec<char> = drain(&mut w, 10).into_iter().map(|x| x.0).collect();
    got.sort();
    assert_eq!(got, vec!['d', 'p']);
}

#[test]
fn bounded_poll_drains_a_burst_in_steps() {
    let mut w = Wheel::new();
    for i in 0..10_000u32 {
        w.insert(5_000, i);
    }
    let mut total = 0;
    let mut calls = 0;
    loop {
        let step = w.advance(6_000, 1_024, |e| assert!(e.expiry <= 6_000));
        assert!(step.fired <= 1_024);
        total += step.fired;
        calls += 1;
        if step.complete {
            break;
        }
        // Mid-burst the clock stays before the bucket and next_expiry says "due".
        assert!(w.next_expiry().unwrap() <= 6_000);
        assert!(w.now() < 6_000);
    }
    assert_eq!(total, 10_000);
    assert_eq!(calls, 10);
    assert_eq!(w.now(), 6_000);
}

#[test]
fn bounded_advance_counts_replacements() {
    // Precise entries 1_000 ticks out sit at level 2, rounded down to 960. Advancing to 999
    // visits that bucket and re-places all 5_000 (none is due): no call may do more than
    // `max` of that work, so it takes 50 calls that fire nothing.
    let mut w = Wheel::new();
    for i in 0..5_000u32 {
        w.insert_with(1_000, Mode::PRECISE, i);
    }
    let mut calls = 0;
    loop {
        let step = w.advance(999, 100, |_| panic!("nothing is due by 999"));
        calls += 1;
        if step.complete {
            break;
        }
    }
    assert_eq!(calls, 50, "re-placements must count against max");
    assert_eq!(
        w.next_expiry(),
        Some(1_000),
        "all re-placed to their exact tick"
    );
    // Polled late, an entry still visited before its expiry fires at once: one visit each.
    let mut w = Wheel::new();
    for i in 0..5_000u32 {
        w.insert_with(1_000, Mode::PRECISE, i);
    }
    let mut fired = 0;
    while !w.advance(2_000, 100, |_| fired += 1).complete {}
    assert_eq!(fired, 5_000);
}

#[test]
fn poll_one_at_a_time_matches_advance() {
    let fill = |w: &mut Wheel<u64>| {
        let rng = TestRng::new(12345);
        for i in 0..2_000 {
            let x = rng.next_u64();
            let mode = if i % 3 == 0 {
                Mode::PRECISE
            } else {
                Mode::COARSE
            };
            w.insert_with(x % 100_000, mode, i);
        }
    };
    let (mut a, mut b) = (Wheel::new(), Wheel::new());
    fill(&mut a);
    fill(&mut b);
    for now in [0, 1, 63, 5_000, 5_000, 64_000, 99_999, 200_000] {
        let mut by_advance: Vec<u64> = drain(&mut a, now).into_iter().map(|x| x.0).collect();
        let mut by_poll = Vec::new();
        while let Some(e) = b.poll(now) {
            assert!(e.expiry <= now);
            by_poll.push(e.value);
        }
        by_advance.sort();
        by_poll.sort();
        assert_eq!(by_poll, by_advance, "at {now}");
        assert_eq!((a.now(), a.next_expiry()), (b.now(), b.next_expiry()));
    }
    assert!(a.is_empty() && b.is_empty());
}

#[test]
fn reschedule_keeps_key_and_moves_entry() {
    let mut w = Wheel::new();
    let k = w.insert(100, 1u32);
    w.reschedule(k, 5_000).unwrap();
    assert!(drain(&mut w, 4_999).is_empty());
    assert_eq!(w.expiry(k), Some(5_000));
    w.reschedule(k, 5_001).unwrap(); // same coarse bucket: only the expiry changes
    let got = drain(&mut w, 6_000);
    assert_eq!(got, vec![(1, 5_001)]);
}

/// A precise entry moved earlier within its own bucket fires at its new expiry: `next_fire`
/// follows it, so a thread sleeping until `next_fire` is not woken at the old expiry.
#[test]
fn precise_entry_shortened_within_its_bucket_fires_at_the_new_expiry() {
    let mut w = Wheel::new();
    let k = w.insert_with(300_000, Mode::PRECISE, 1u32);
    w.reschedule(k, 295_000).unwrap();
    assert_eq!(w.next_fire(), Some(295_000));
    let mut fired_at = None;
    while let Some(t) = w.next_fire() {
        if let Some(e) = w.poll(t) {
            fired_at = Some((t, e.expiry));
            break;
        }
    }
    assert_eq!(fired_at, Some((295_000, 295_000)));
}

/// A precise entry moved later stays in the bucket it was placed in (the move touches no
/// list): the wheel visits that bucket at its old time, re-places the entry without firing
/// it, and fires it at exactly its new expiry. `next_fire` may name the old expiry (an early
/// wake-up), never a tick after the new one.
#[test]
fn precise_entry_moved_later_stays_placed_and_fires_at_its_new_expiry() {
    let mut w = Wheel::new();
    // Level 2 (granularity 64): visited at 960, 40 ticks before its expiry.
    let k = w.insert_with(1_000, Mode::PRECISE, 1u32);
    assert_eq!(w.next_expiry(), Some(960));
    w.reschedule(k, 5_000).unwrap();
    assert_eq!(w.expiry(k), Some(5_000));
    assert_eq!(w.next_expiry(), Some(960), "still in its old bucket");
    assert!(w.next_fire().is_some_and(|t| t <= 5_000));
    // The visit at 960 re-places it (level 3 from 959: visited at 4_608).
    assert_eq!(w.poll(1_000), None);
    assert_eq!(w.next_expiry(), Some(4_608));
    let mut fired_at = None;
    while let Some(t) = w.next_fire() {
        assert!(t <= 5_000, "next_fire {t} after the expiry");
        if let Some(e) = w.poll(t) {
            fired_at = Some((t, e.expiry));
            break;
        }
    }
    assert_eq!(fired_at, Some((5_000, 5_000)));
    // A coarse entry moved later is re-placed at once.
    let c = w.insert(6_000, 2u32);
    let first = w.next_expiry();
    w.reschedule(c, 60_000).unwrap();
    assert!(w.next_expiry() > first);
}

#[test]
fn rebase_backwards_keeps_keys_and_holds_entries_until_their_expiry() {
    let mut w: Wheel<u32> = Wheel::builder().start(1_000).build().unwrap();
    let a = w.insert_with(900, Mode::PRECISE, 1); // due before the wheel clock: ready
    let b = w.insert_with(5_000, Mode::PRECISE, 2);
    w.rebase(100);
    assert_eq!(w.now(), 100);
    assert_eq!(w.len(), 2);
    assert!(w.contains(a) && w.contains(b), "keys survive a rebase");
    assert_eq!(w.poll(899), None, "nothing is due before 900 any more");
    assert_eq!(w.poll(900).map(|e| e.value), Some(1));
    assert_eq!(w.next_expiry().map(|t| t <= 5_000), Some(true));
    assert_eq!(w.poll(4_999), None);
    assert_eq!(w.remove(b), Some(2));
    assert!(w.is_empty());
}

#[test]
fn payloads_are_dropped_with_the_wheel() {
    use std::rc::Rc;
    let token = Rc::new(());
    {
        let mut w = Wheel::new();
        for i in 0..100 {
            w.insert(i * 1000, Rc::clone(&token));
        }
        drain(&mut w, 10_000);
    }
    assert_eq!(Rc::strong_count(&token), 1);
}

#[test]
fn builder_rejects_bad_configs() {
    assert!(Wheel::builder().levels(0).build::<()>().is_err());
    assert!(Wheel::builder()
        .levels(MAX_LEVELS + 1)
        .build::<()>()
        .is_err());
    assert!(Wheel::builder().start(MAX_TICK + 1).build::<()>().is_err());
    assert!(Wheel::builder().levels(MAX_LEVELS).build::<()>().is_ok());
}
