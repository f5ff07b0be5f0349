//! The hash table lookups walk: incremental growth, the hash (runs adjacent, strides
//! scattered), the bucket's layout and near entries, the builder's checks, and stress tests of
//! lookups racing deletes and table growth.

use super::*;

#[test]
fn table_grows_incrementally_and_lookups_stay_exact() {
    let r = small_registry(2);
    let o = r.owner(Hooks::default());
    let mut live = BTreeSet::new();
    let mut dead = BTreeSet::new();
    for i in 0..20_000 {
        let t = mono(&o).unwrap();
        live.insert(t);
        if i % 3 == 0 {
            let victim = *live.iter().nth(live.len() / 2).unwrap();
            o.delete(victim).unwrap();
            live.remove(&victim);
            dead.insert(victim);
        }
        if i % 997 == 0 {
            for t in &live {
                assert_eq!(o.getoverrun(*t), Ok(0), "live {t} lost at step {i}");
            }
            for t in &dead {
                assert_eq!(o.getoverrun(*t), Err(Error::UnknownTimer));
            }
        }
    }
    assert!(r.buckets() >= 4096, "grew to {} buckets", r.buckets());
    assert_eq!(r.len(), live.len());
    for t in &live {
        assert_eq!(o.getoverrun(*t), Ok(0));
    }
}

/// The growth check runs at every 16th create of a thread, and at each of a thread's first 16:
/// threads that each create fewer than 16 timers must still grow the table.
#[test]
fn the_table_grows_when_each_thread_creates_only_a_few_timers() {
    let r = small_registry(1);
    let o = r.owner(Hooks::default());
    let threads = 40;
    // All alive at once, so that each has a thread index (a count stripe) of its own.
    let start = std::sync::Barrier::new(threads);
    let ids: Vec<Vec<TimerId>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let ids: Vec<TimerId> = (0..15).map(|_| mono(&o).unwrap()).collect();
                    start.wait();
                    ids
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(r.len(), threads * 15);
    // Each create helps a resize in progress along (8 old buckets), so the table is at least
    // one doubling short of 600 buckets here (and stays at 16 if no thread ever checked).
    assert!(
        r.buckets() >= 256,
        "600 timers, max load 1: {} buckets",
        r.buckets()
    );
    for t in ids.iter().flatten() {
        assert_eq!(o.getoverrun(*t), Ok(0));
    }
}

#[test]
fn run_linear_hash_keeps_runs_adjacent_and_scatters_strides() {
    let salt = [0x1234_5678, 0x9abc_def1];
    let mask = (1u64 << 10) - 1;
    for run in 0..100i32 {
        let base = hash(salt, 7, run << RUN_BITS) & mask;
        for k in 1..(1 << RUN_BITS) {
            assert_eq!(
                hash(salt, 7, (run << RUN_BITS) + k) & mask,
                (base + k as u64) & mask
            );
        }
    }
    // The salt suite's sparse restore case (BENCHMARKS.md): 2048 IDs 512 apart.
    let mut per_bucket = vec![0u32; 1024];
    for k in 0..2048 {
        per_bucket[(hash(salt, 7, k * 512) & mask) as usize] += 1;
    }
    let max = *per_bucket.iter().max().unwrap();
    assert!(max <= 10, "stride-512 IDs crowd one bucket: {max}");
    // Owners with the same IDs land in different buckets.
    assert_ne!(hash(salt, 7, 0) & mask, hash(salt, 8, 0) & mask);
}

#[test]
fn bucket_is_half_a_cache_line_and_nulls_markers_are_distinct() {
    // Two buckets per line, never one across two.
    assert_eq!(std::mem::size_of::<Bucket>(), 32);
    assert_eq!(std::mem::align_of::<Bucket>(), 32);
    assert_ne!(nulls(10, 5), nulls(11, 5));
    assert_ne!(nulls(10, 5), nulls(10, 6));
    assert_ne!(nulls(40, (1 << 40) - 1), table::MOVED);
}

#[test]
fn a_near_entry_keeps_tag_and_pointer_in_one_word_and_skips_what_does_not_fit() {
    let b = Bucket::default();
    let h = 0xABCD_0000_0000_0007u64;
    b.near_push(table::tag(h), 0x7f12_3456_7840);
    let w = b.near[0].load(Ordering::Relaxed);
    assert_eq!(table::near_match(w, table::tag(h)), 0x7f12_3456_7840);
    // Another tag does not match: the lookup goes to the chain.
    assert_eq!(table::near_match(w, table::tag(h ^ (1 << 63))), 0);
    // An address above 48 bits is not recorded (the chain still finds the timer).
    b.near_push(table::tag(h), 1 << 50);
    assert_eq!(b.near[0].load(Ordering::Relaxed), w);
    assert_eq!(b.near[1].load(Ordering::Relaxed), 0);
    b.near_remove(0x7f12_3456_7840);
    assert_eq!(b.near[0].load(Ordering::Relaxed), 0);
}

#[test]
fn builder_rejects_bad_settings() {
    assert!(Registry::builder().id_bits(0).build().is_err());
    assert!(Registry::builder().id_bits(32).build().is_err());
    assert!(Registry::builder().initial_buckets(1000).build().is_err());
    assert!(Registry::builder().max_load(0).build().is_err());
    assert!(Registry::builder().shards(3).build().is_err());
    let e = Registry::builder().shards(3).build().unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
}

/// Deletes race lookups, re-creates of the same IDs, table growth, and the teardown of other
/// owners (whose pages are freed, and poisoned by the allocator above). Each timer carries its
/// own ID in `interval`; a lookup that ever returned another timer's state, or read freed
/// memory, would see a wrong payload or crash.
#[test]
fn stress_delete_racing_lookup_never_returns_another_timer() {
    const IDS: i32 = 512;
    let r = small_registry(1);
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    for i in 0..IDS {
        o.create_with_id(i, ClockId::Monotonic, NotifyKind::None)
            .unwrap();
        o.with_timer(id(i), |l| l.state.interval = i as u64 + 1)
            .unwrap();
    }
    let stop = StdAtomicBool::new(false);
    let rounds = if cfg!(debug_assertions) { 300 } else { 3000 };
    let barrier = Barrier::new(4);
    std::thread::scope(|s| {
        // Deleter/re-creator: the same IDs, in fresh (or reused) slots.
        s.spawn(|| {
            barrier.wait();
            for round in 0..rounds {
                for i in (round % 7..IDS).step_by(7) {
                    o.delete(id(i)).unwrap();
                    o.create_with_id(i, ClockId::Monotonic, NotifyKind::None)
                        .unwrap();
                    o.with_timer(id(i), |l| l.state.interval = i as u64 + 1)
                        .unwrap();
                }
            }
            stop.store(true, Ordering::Release);
        });
        // Churn in other owners: grows the table and frees pages of dropped owners.
        s.spawn(|| {
            barrier.wait();
            while !stop.load(Ordering::Acquire) {
                let other = r.owner(Hooks::default());
                for _ in 0..200 {
                    mono(&other).unwrap();
                }
                drop(other);
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                barrier.wait();
                let mut found = 0u64;
                while !stop.load(Ordering::Acquire) {
                    for i in 0..IDS {
                        match o.with_timer(id(i), |l| l.state.interval) {
                            Ok(v) => {
                                assert!(v == 0 || v == i as u64 + 1, "ID {i} returned payload {v}");
                                found += 1;
                            }
                            Err(e) => assert_eq!(e, Error::UnknownTimer),
                        }
                    }
                }
                assert!(found > 0);
            });
        }
    });
    assert_eq!(o.timers().len(), IDS as usize);
}

/// Lookups racing the table's growth: every doubling retires a table that readers may still be
/// walking. Freed tables are poisoned by the allocator above, so a table freed before its
/// readers left would send a walker through 0xA5 pointers.
#[test]
fn stress_lookups_racing_table_growth_read_no_freed_table() {
    let iterations = if cfg!(debug_assertions) { 30 } else { 200 };
    for _ in 0..iterations {
        let r = small_registry(1);
        let watched = r.owner(Hooks::default());
        let ids: Vec<TimerId> = (0..64).map(|_| mono(&watched).unwrap()).collect();
        for t in &ids {
            watched
                .with_timer(*t, |l| l.state.interval = t.get() as u64 + 1)
                .unwrap();
        }
        let done = StdAtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let grower = r.owner(Hooks::default());
                for _ in 0..20_000 {
                    mono(&grower).unwrap();
                }
                done.store(true, Ordering::Release);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    while !done.load(Ordering::Acquire) {
                        for t in &ids {
                            let v = watched.with_timer(*t, |l| l.state.interval).unwrap();
                            assert_eq!(v, t.get() as u64 + 1);
                            assert_eq!(watched.getoverrun(*t), Ok(0));
                        }
                    }
                });
            }
        });
        assert!(r.buckets() >= 16 << 10, "grew to {}", r.buckets());
    }
}
