//! What an owner holds: reads and listings (also during concurrent creates and deletes),
//! its teardown and the service hooks, the reuse of its pages, and its exclusive sections.

use super::*;

#[test]
fn getoverrun_reads_the_latched_count() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let t = mono(&o).unwrap();
    o.with_timer(t, |l| l.published().store(42, Ordering::Relaxed))
        .unwrap();
    assert_eq!(o.getoverrun(t), Ok(42));
}

#[test]
fn listing_reports_every_timer_with_clock_notify_and_status() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let a = o.create_as(ClockId::Realtime, NotifyKind::Queue).unwrap();
    let b = o
        .create_as(ClockId::Boottime, NotifyKind::Callback)
        .unwrap();
    let c = mono(&o).unwrap();
    o.with_timer(b, |l| l.state.status = Status::Armed).unwrap();
    o.delete(c).unwrap();
    let mut list = o.timers();
    list.sort_by_key(|i| i.id);
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[0].id, list[0].clock, list[0].notify, list[0].status),
        (a, ClockId::Realtime, NotifyKind::Queue, Status::Disarmed)
    );
    assert_eq!(
        (list[1].id, list[1].clock, list[1].notify, list[1].status),
        (b, ClockId::Boottime, NotifyKind::Callback, Status::Armed)
    );
}

#[test]
fn listing_during_concurrent_create_and_delete() {
    let r = Registry::builder().initial_buckets(16).build().unwrap();
    let o = r.owner(Hooks::default());
    let stable: BTreeSet<i32> = (0..2000).map(|_| mono(&o).unwrap().get()).collect();
    let stop = StdAtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        mine.push(mono(&o).unwrap());
                    }
                    for t in mine.drain(..) {
                        o.delete(t).unwrap();
                    }
                }
            });
        }
        for _ in 0..200 {
            let list = o.timers();
            let ids: Vec<i32> = list.iter().map(|i| i.id.get()).collect();
            let set: HashSet<i32> = ids.iter().copied().collect();
            assert_eq!(set.len(), ids.len(), "a timer listed twice");
            for s in &stable {
                assert!(set.contains(s), "stable timer {s} missing from a listing");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(o.timers().len(), stable.len());
}

#[test]
fn destroying_an_owner_deletes_its_timers_only() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    let b = r.owner(Hooks::default());
    for _ in 0..100 {
        mono(&a).unwrap();
        mono(&b).unwrap();
    }
    assert_eq!(r.len(), 200);
    let a2 = a.clone();
    a.destroy();
    assert!(a2.is_destroyed());
    assert_eq!(r.len(), 100);
    assert_eq!(mono(&a2), Err(Error::OwnerDeleted));
    assert_eq!(a2.getoverrun(id(0)), Err(Error::OwnerDeleted));
    assert_eq!(b.getoverrun(id(0)), Ok(0));
    drop(b);
    assert_eq!(
        r.len(),
        0,
        "dropping the last handle deletes the owner's timers"
    );
}

#[test]
fn a_deleted_owners_pages_are_reused_by_the_next_owner() {
    let r = Registry::new();
    let a = r.owner(Hooks::default());
    for _ in 0..1000 {
        mono(&a).unwrap();
    }
    let bytes = a.slot_bytes();
    drop(a);
    // The pages reach the pool after an epoch grace period; other tests' threads may hold
    // pins meanwhile (an exclusive section holds one for its length), so keep giving the epoch
    // chances to advance, for up to 10 s.
    let pages = 1000usize.div_ceil(64) * 64 * std::mem::size_of::<Timer>();
    assert!(
        bytes > pages && bytes < pages + 1024,
        "16 pages and a directory: {bytes}"
    );
    let start = std::time::Instant::now();
    while r.pooled_bytes() != pages && start.elapsed() < std::time::Duration::from_secs(10) {
        crate::sync::pin().flush();
        std::thread::yield_now();
    }
    assert_eq!(r.pooled_bytes(), pages, "torn-down owner's pages pooled");
    let b = r.owner(Hooks::default());
    for _ in 0..1000 {
        mono(&b).unwrap();
    }
    assert_eq!(r.pooled_bytes(), 0, "the next owner took them");
    assert_eq!(b.slot_bytes(), bytes);
    assert_eq!(b.timers().len(), 1000);
}

#[test]
fn the_service_hooks_run_once_per_deleted_timer_and_once_per_destroyed_owner() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let ids: Vec<TimerId> = (0..5).map(|_| mono(&o).unwrap()).collect();
    o.delete(ids[0]).unwrap();
    assert_eq!(o.delete(ids[0]), Err(Error::UnknownTimer));
    let hooks = |o: &Owner| {
        let h = o.service();
        let n = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::Relaxed);
        (n(&h.deletes), n(&h.destroys))
    };
    assert_eq!(hooks(&o), (1, 0), "one delete, one hook run");
    o.destroy();
    assert_eq!(
        hooks(&o),
        (5, 1),
        "the other four timers, then the owner once"
    );
    o.destroy();
    assert_eq!(hooks(&o), (5, 1), "destroy is idempotent");
    assert_eq!(r.len(), 0);
}

#[test]
fn handles_are_send_and_sync() {
    fn shareable<T: Send + Sync + Clone>() {}
    shareable::<Registry>();
    shareable::<Owner>();
}

const NONE_INIT: (ClockId, NotifyKind) = (ClockId::Monotonic, NotifyKind::None);

#[test]
fn an_exclusive_section_knows_whether_the_owner_holds_a_timer() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let other = r.owner(Hooks::default());
    o.set_restore_ids(true);
    assert!(o.exclusive(|ex| ex.alone()), "a new owner");
    mono(&other).unwrap();
    assert!(
        o.exclusive(|ex| ex.alone()),
        "another owner's timers do not count"
    );
    let t = mono(&o).unwrap();
    assert!(!o.exclusive(|ex| ex.alone()), "a timer of its own");
    // Not alone: the section's exact-ID creates still look for their ID, and set the counter.
    assert_eq!(
        o.exclusive(|ex| ex.create(t.get(), NONE_INIT, None)),
        Err(Error::IdInUse)
    );
    o.exclusive(|ex| ex.create(500, NONE_INIT, None)).unwrap();
    o.delete(t).unwrap();
    o.delete(id(500)).unwrap();
    assert!(o.exclusive(|ex| ex.alone()), "its timers deleted");
    // Alone: the creates go in unchecked (their IDs distinct), each found by lookups after.
    let made: Vec<TimerId> = o
        .exclusive(|ex| {
            (0..40)
                .map(|i| ex.create(i * 3, NONE_INIT, None))
                .collect::<Result<_, _>>()
        })
        .unwrap();
    let listed: BTreeSet<i32> = o.timers().iter().map(|t| t.id.get()).collect();
    assert_eq!(listed, (0..40).map(|i| i * 3).collect());
    for t in made {
        assert_eq!(o.getoverrun(t), Ok(0));
    }
    // The errors of an exact-ID create come first.
    assert_eq!(
        o.exclusive(|ex| ex.create(-1, NONE_INIT, None)),
        Err(Error::InvalidId)
    );
    o.set_restore_ids(false);
    assert_eq!(
        o.exclusive(|ex| ex.create(1, NONE_INIT, None)),
        Err(Error::NotRestoring)
    );
}

/// Creates of other threads wait for an exclusive section to end; without the wait, the
/// other thread's create ends while the section is still open.
#[test]
fn creates_of_other_threads_wait_for_an_exclusive_section() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    o.set_restore_ids(true);
    let open = StdAtomicBool::new(false);
    let started = StdAtomicBool::new(false);
    std::thread::scope(|s| {
        let other = o.exclusive(|ex| {
            open.store(true, Ordering::SeqCst);
            let other = s.spawn(|| {
                started.store(true, Ordering::SeqCst);
                let t = mono(&o).unwrap();
                (t, open.load(Ordering::SeqCst))
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The section goes on for a while after the other create began.
            for i in 0..200 {
                ex.create(1000 + i, NONE_INIT, None).unwrap();
                std::thread::yield_now();
            }
            open.store(false, Ordering::SeqCst);
            other
        });
        let (t, during) = other.join().unwrap();
        assert!(
            !during,
            "a create ended inside another thread's exclusive section"
        );
        assert!(
            !(1000..1200).contains(&t.get()),
            "the other create took a section ID"
        );
    });
    assert_eq!(o.timers().len(), 201);
}

/// An exclusive section ends (its flag cleared) when its closure panics: later creates do
/// not wait forever.
#[test]
fn an_exclusive_section_that_panics_lets_creates_go_on() {
    let r = Registry::new();
    let o = r.owner(Hooks::default());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        o.exclusive(|_| panic!("inside the section"));
    }));
    assert!(caught.is_err());
    let done = std::thread::scope(|s| s.spawn(|| mono(&o)).join().unwrap());
    assert!(done.is_ok());
}
