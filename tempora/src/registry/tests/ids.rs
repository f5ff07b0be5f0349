//! ID allocation: IDs count up from zero per owner, are not reused until the counter wraps,
//! skip IDs in use, run out per owner (`EAGAIN`), and exact-ID mode's errors and counter.

use super::*;

#[test]
fn ids_start_at_zero_and_count_up_on_one_thread() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let got: Vec<i32> = (0..40).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    assert_eq!(r.len(), 40);
}

#[test]
fn ids_are_not_reused_until_the_counter_wraps() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let a = mono(&o).unwrap();
    o.delete(a).unwrap();
    assert_eq!(
        mono(&o).unwrap().get(),
        1,
        "a freed ID is not handed out again at once"
    );
}

#[test]
fn counter_wraps_from_i32_max_to_zero_and_skips_ids_in_use() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    assert_eq!(mono(&o).unwrap().get(), 0);
    o.set_restore_ids(true);
    o.create_with_id(i32::MAX - 1, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), i32::MAX);
    // 0 is in use: skipped, as on Linux 6.18 (restore INT_MAX, next normal ID is 1).
    assert_eq!(mono(&o).unwrap().get(), 1);
    assert_eq!(mono(&o).unwrap().get(), 2);
}

#[test]
fn small_id_space_wraps_skips_and_exhausts_with_eagain() {
    let r = Registry::builder().id_bits(3).build().unwrap();
    let o = r.owner(Hooks::default());
    let ids: Vec<i32> = (0..8).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
    let err = mono(&o).unwrap_err();
    assert_eq!(err, Error::NoFreeId);
    assert_eq!(err.errno(), libc::EAGAIN);
    assert!(err.is_transient());
    // Free 5 and 2: the wrapped counter skips the IDs in use and finds them in counter order.
    o.delete(id(5)).unwrap();
    o.delete(id(2)).unwrap();
    let a = mono(&o).unwrap().get();
    let b = mono(&o).unwrap().get();
    assert_eq!(BTreeSet::from([a, b]), BTreeSet::from([2, 5]));
    assert_eq!(mono(&o).unwrap_err(), Error::NoFreeId);
    assert_eq!(o.timers().len(), 8);
}

#[test]
fn exhaustion_is_per_owner() {
    let r = Registry::builder().id_bits(2).build().unwrap();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    for _ in 0..4 {
        mono(&a).unwrap();
    }
    assert_eq!(mono(&a).unwrap_err(), Error::NoFreeId);
    assert_eq!(mono(&b).unwrap().get(), 0);
}

#[test]
fn exact_id_mode_errors_and_counter() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    assert!(!o.restore_ids());
    assert_eq!(
        o.create_with_id(7, ClockId::Monotonic, NotifyKind::None),
        Err(Error::NotRestoring)
    );
    o.set_restore_ids(true);
    assert!(o.restore_ids());
    let t = o
        .create_with_id(123_456, ClockId::Realtime, NotifyKind::Queue)
        .unwrap();
    assert_eq!(t.get(), 123_456);
    let busy = o
        .create_with_id(123_456, ClockId::Monotonic, NotifyKind::None)
        .unwrap_err();
    assert_eq!((busy.clone(), busy.errno()), (Error::IdInUse, libc::EBUSY));
    let neg = o
        .create_with_id(-1, ClockId::Monotonic, NotifyKind::None)
        .unwrap_err();
    assert_eq!((neg.clone(), neg.errno()), (Error::InvalidId, libc::EINVAL));
    assert_eq!(o.timers().len(), 1, "failed creates leave nothing behind");
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), 123_457);
    // The last restored ID decides, not the highest (as Linux: 200 then 100 -> 101).
    o.set_restore_ids(true);
    o.create_with_id(200, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(100, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    assert_eq!(mono(&o).unwrap().get(), 101);
}

#[test]
fn exact_id_beyond_the_limit_is_einval() {
    let r = Registry::builder().id_bits(4).build().unwrap();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    assert_eq!(
        o.create_with_id(16, ClockId::Monotonic, NotifyKind::None),
        Err(Error::InvalidId)
    );
    assert_eq!(
        o.create_with_id(15, ClockId::Monotonic, NotifyKind::None)
            .map(TimerId::get),
        Ok(15)
    );
}

#[test]
fn restored_id_voids_blocks_claimed_by_other_threads() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    // Another thread claims an ID block first.
    std::thread::scope(|s| {
        s.spawn(|| mono(&o).unwrap());
    });
    o.set_restore_ids(true);
    o.create_with_id(5000, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(mono(&o).unwrap().get(), 5001));
    });
}

#[test]
fn counter_skips_ids_restored_ahead_of_it() {
    // Restored IDs ahead of the counter must be skipped when the counter reaches them, even
    // though the counter has not wrapped (the chain check is not skipped after an exact-ID
    // create).
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    o.create_with_id(10, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(12, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.create_with_id(5, ClockId::Monotonic, NotifyKind::None)
        .unwrap();
    o.set_restore_ids(false);
    let got: Vec<i32> = (0..6).map(|_| mono(&o).unwrap().get()).collect();
    assert_eq!(got, vec![6, 7, 8, 9, 11, 13]);
}

#[test]
fn ids_stay_unique_when_a_wrapped_counter_meets_ids_in_use() {
    // A counter that wraps hands out every ID again; only the free ones may be taken.
    let r = Registry::builder().id_bits(6).build().unwrap();
    let o = r.owner(Hooks::default());
    let mut live = BTreeSet::new();
    for round in 0..20 {
        while let Ok(t) = mono(&o) {
            assert!(
                live.insert(t.get()),
                "ID {t} handed out twice (round {round})"
            );
        }
        assert_eq!(live.len(), 64);
        // Free every third ID.
        let victims: Vec<i32> = live
            .iter()
            .copied()
            .filter(|i| (i + round) % 3 == 0)
            .collect();
        for v in victims {
            o.delete(id(v)).unwrap();
            live.remove(&v);
        }
    }
}

#[test]
fn ids_are_isolated_between_owners() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    let ta = mono(&a).unwrap();
    let tb = mono(&b).unwrap();
    assert_eq!(ta, tb, "both owners start at ID 0");
    let only_b = mono(&b).unwrap();
    assert_eq!(a.getoverrun(only_b), Err(Error::UnknownTimer));
    assert_eq!(a.delete(only_b), Err(Error::UnknownTimer));
    assert_eq!(Error::UnknownTimer.errno(), libc::EINVAL);
    a.delete(ta).unwrap();
    assert_eq!(b.getoverrun(tb), Ok(0), "deleting a's 0 left b's 0 alone");
    assert_eq!(a.getoverrun(ta), Err(Error::UnknownTimer));
    assert_eq!(a.delete(ta), Err(Error::UnknownTimer), "double delete");
}
