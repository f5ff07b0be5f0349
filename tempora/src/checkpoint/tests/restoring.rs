//! A restore is all or nothing: a failed one leaves the owner (and drops the callbacks it
//! was given after its section) as it was, and one racing creates, another restore or the
//! owner's destruction leaves every ID unique and every setting whole.

use super::*;

#[test]
fn a_failed_restore_leaves_the_owner_unchanged() {
    let snap = sample();
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let o = timers.owner();
    // An unknown name: nothing created.
    let e = o.restore(&snap, |_| None).unwrap_err();
    assert!(
        matches!(e, Error::UnknownNotify(ref n) if n == "tick"),
        "{e}"
    );
    assert!(o.timers().is_empty());
    assert!(!o.restore_ids());
    // An ID beyond a smaller owner's ID space fails midway: what was made is undone.
    let small_timers = testing::manual(clock.clone(), |b| {
        b.id_bits(8);
    });
    let small = small_timers.owner();
    let e = small.restore(&snap, |_| Some(Notify::None)).unwrap_err();
    assert!(matches!(e, Error::InvalidId), "{e}");
    assert!(small.timers().is_empty(), "all or nothing");
    assert!(!small.restore_ids());
    assert_eq!(small.default_slack(), None, "the default slack put back");
    assert_eq!(
        small
            .create(ClockId::Monotonic, Notify::None)
            .unwrap()
            .get(),
        0,
        "counter back"
    );
    // A non-empty owner is refused.
    let busy = timers.owner();
    busy.create(ClockId::Monotonic, Notify::None).unwrap();
    let e = busy.restore(&snap, |_| Some(Notify::None)).unwrap_err();
    assert!(matches!(e, Error::IdInUse), "{e}");
}

/// A restore racing another thread's creates in the same owner: no two timers share an ID,
/// a restore that succeeds has every snapshot ID, and one that fails (the owner was not
/// empty) leaves only the other thread's timers. The restore's exact-ID creates skip the
/// uniqueness walk while other creates wait (`registry::Owner::exclusive`). The snapshot's
/// records go from the highest ID down and the other thread starts once the restore has made
/// a timer, so without the wait its counter IDs (0, 1, ...) are ones the restore makes again
/// later.
#[test]
fn a_restore_racing_creates_in_its_owner_leaves_every_id_unique() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let src = timers.owner();
    src.set_restore_ids(true);
    for i in 0..2000 {
        src.create_with_id(i, ClockId::Monotonic, Notify::None)
            .unwrap();
    }
    let mut snap = src.checkpoint();
    snap.timers.reverse();
    let wanted: std::collections::BTreeSet<i32> = (0..2000).collect();
    for _ in 0..20 {
        let target = timers.owner();
        let (restored, theirs) = std::thread::scope(|s| {
            let other = s.spawn(|| {
                while target.timers().is_empty() {
                    std::hint::spin_loop();
                }
                (0..50)
                    .map(|_| target.create(ClockId::Monotonic, Notify::None).unwrap())
                    .map(|t| t.get())
                    .collect::<Vec<_>>()
            });
            let restored = target.restore(&snap, |_| None);
            (restored, other.join().unwrap())
        });
        let ids: Vec<i32> = target.timers().iter().map(|t| t.id.get()).collect();
        let unique: std::collections::BTreeSet<i32> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "two timers share an ID");
        match restored {
            Ok(()) => {
                assert!(wanted.is_subset(&unique));
                assert_eq!(ids.len(), wanted.len() + theirs.len());
            }
            Err(Error::IdInUse) => {
                let theirs: std::collections::BTreeSet<i32> = theirs.into_iter().collect();
                assert_eq!(unique, theirs, "a failed restore keeps nothing of its own");
            }
            Err(e) => panic!("restore: {e}"),
        }
    }
}

/// Two restores of one owner at once: the one that reaches its section second fails with
/// `IdInUse` and changes nothing, so the owner ends with the first one's timers, counter and
/// exact-ID mode. Restore `a` maps a callback name, and its mapping waits until restore `b`
/// has ended, so both pass the first look at the owner while it is empty. Unless the check
/// for an empty owner and the settings are in the restore's exclusive section, both
/// snapshots (distinct IDs) are restored into the one owner.
#[test]
fn two_restores_of_one_owner_at_once_leave_the_first_ones_timers_and_settings() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log = Log::default();
    let snapshot = |ids: std::ops::Range<i32>, restore_ids: bool| {
        let src = timers.owner();
        src.set_restore_ids(true);
        for i in ids {
            src.create_with_id(i, ClockId::Monotonic, tick(&log))
                .unwrap();
        }
        src.set_restore_ids(restore_ids);
        src.checkpoint()
    };
    let a = snapshot(0..300, true);
    let b = snapshot(5000..5100, false);
    let target = timers.owner();
    let (start, b_done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let first = std::sync::Once::new();
    let (ra, rb) = std::thread::scope(|s| {
        let other = s.spawn(|| {
            start.wait();
            let r = target.restore(&b, |_| Some(tick(&log)));
            b_done.wait();
            r
        });
        let ra = target.restore(&a, |_| {
            // At `a`'s first mapped name, after its first look at the (empty) owner: `b`
            // runs whole.
            first.call_once(|| {
                start.wait();
                b_done.wait();
            });
            Some(tick(&log))
        });
        (ra, other.join().unwrap())
    });
    assert_eq!((ra, rb), (Err(Error::IdInUse), Ok(())));
    let after = target.checkpoint();
    let ids = |s: &Snapshot| s.timers.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&b));
    assert_eq!(after.counter, b.counter);
    assert_eq!(after.restore_ids, b.restore_ids);
}

/// A restore into a destroyed owner fails with `OwnerDeleted`, whether or not the owner had
/// timers (its torn-down timers' slots stay in use, so its restore section is not "alone";
/// that must not turn into `IdInUse`).
#[test]
fn a_restore_into_a_destroyed_owner_reports_it_deleted() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let snap = sample();
    for had_timers in [false, true] {
        let o = timers.owner();
        if had_timers {
            o.create(ClockId::Monotonic, Notify::None).unwrap();
        }
        o.destroy();
        assert_eq!(
            o.restore(&snap, |_| Some(Notify::None)),
            Err(Error::OwnerDeleted),
            "had timers: {had_timers}"
        );
    }
}

/// A restore that fails part-way (a group limit) lets go of the callbacks it was handed only
/// after its exclusive section: a callback whose drop creates in the owner must not wait for
/// the section forever (a create inside the section from its own thread would).
#[test]
fn a_failed_restores_callbacks_are_dropped_after_its_section() {
    use std::sync::atomic::{AtomicUsize, Ordering as O};
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log = Log::default();
    let src = timers.owner();
    src.set_restore_ids(true);
    for i in 0..5 {
        src.create_with_id(i, ClockId::Monotonic, tick(&log))
            .unwrap();
    }
    let snap = src.checkpoint();
    let group = timers.group("g").unwrap();
    group.set_max_timers(Some(3));
    let target = group.owner();
    /// Creates a timer in its owner when dropped.
    struct CreatesOnDrop(Owner, Arc<AtomicUsize>);
    impl Drop for CreatesOnDrop {
        fn drop(&mut self) {
            if self.0.create(ClockId::Monotonic, Notify::None).is_ok() {
                self.1.fetch_add(1, O::SeqCst);
            }
        }
    }
    let made = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let (t, m) = (target.clone(), made.clone());
    // A thread of its own, so that a hang shows as a timeout here.
    std::thread::spawn(move || {
        let r = t.restore(&snap, |_| {
            let on_drop = CreatesOnDrop(t.clone(), m.clone());
            Some(Notify::callback_named("tick", move |_| {
                let _ = &on_drop;
            }))
        });
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the restore hangs");
    assert_eq!(r, Err(Error::LimitReached("g".into())));
    // The five callbacks were dropped after the section: three creates fit the limit.
    assert_eq!(made.load(O::SeqCst), 3);
    assert_eq!(target.timers().len(), 3);
}
