//! The table's own tests: a split's result, and the ranks of the bucket locks.

use super::growth::SPLIT_CHAIN;
use super::*;
use crate::registry::timer::visible;

const SALT: [u64; 2] = [11, 13];
const OWNER: u64 = 5;

fn timer(id: i32) -> Box<Timer<()>> {
    let t = Box::new(Timer::<()>::default());
    t.hot.owner.store(visible(OWNER), Ordering::Relaxed);
    t.hot.id.store(id, Ordering::Relaxed);
    t
}

/// After a split every moved timer is a near entry of its new bucket (so a lookup finds it
/// from the bucket), and the old bucket reads MOVED.
#[test]
fn split_moves_chains_and_refills_near_entries() {
    let old = Table::new(4, SALT);
    let future = Table::new(5, SALT);
    // Three IDs in old bucket 0.
    let ids: Vec<i32> = (0..)
        .filter(|&id| old.index(hash(SALT, OWNER, id)) == 0)
        .take(3)
        .collect();
    let timers: Vec<Box<Timer<()>>> = ids.iter().map(|&id| timer(id)).collect();
    for (t, &id) in timers.iter().zip(&ids) {
        let h = hash(SALT, OWNER, id);
        let locked = old.buckets[0].lock().unwrap();
        old.link_and_unlock(0, locked, t, h);
    }
    old.split_bucket::<()>(0, &future, SPLIT_CHAIN);
    assert_eq!(old.buckets[0].head.load(Ordering::Relaxed), MOVED);
    for (t, &id) in timers.iter().zip(&ids) {
        let h = hash(SALT, OWNER, id);
        let b = &future.buckets[future.index(h)];
        let ptr = &**t as *const Timer<()> as usize;
        let near = (0..NEAR).any(|i| near_match(b.near[i].load(Ordering::Relaxed), tag(h)) == ptr);
        assert!(near, "timer {id} is not a near entry of its new bucket");
        assert!(
            matches!(future.walk(h, visible(OWNER), id), Walk::Found(f) if std::ptr::eq(f, &**t))
        );
        assert!(matches!(old.walk::<()>(h, visible(OWNER), id), Walk::Moved));
    }
}

/// A split that cannot allocate the list of its chain walks the chain instead: every timer
/// lands in its new bucket, findable, and the old bucket reads MOVED, as with the list.
#[test]
fn a_split_that_cannot_allocate_walks_its_chain() {
    let old = Table::new(4, SALT);
    let future = Table::new(5, SALT);
    // A chain longer than the reserve, so the walk is the only way.
    let ids: Vec<i32> = (0..)
        .filter(|&id| old.index(hash(SALT, OWNER, id)) == 0)
        .take(2 * SPLIT_CHAIN + 3)
        .collect();
    let timers: Vec<Box<Timer<()>>> = ids.iter().map(|&id| timer(id)).collect();
    for (t, &id) in timers.iter().zip(&ids) {
        let h = hash(SALT, OWNER, id);
        let locked = old.buckets[0].lock().unwrap();
        old.link_and_unlock(0, locked, t, h);
    }
    crate::alloc::refusing_allocations(0, || {
        old.split_bucket::<()>(0, &future, SPLIT_CHAIN);
    });
    assert_eq!(old.buckets[0].head.load(Ordering::Relaxed), MOVED);
    let mut moved = [0; 2];
    for (t, &id) in timers.iter().zip(&ids) {
        let h = hash(SALT, OWNER, id);
        moved[usize::from(future.index(h) != 0)] += 1;
        assert!(
            matches!(future.walk(h, visible(OWNER), id), Walk::Found(f) if std::ptr::eq(f, &**t)),
            "timer {id} is not in its new bucket"
        );
    }
    // Each future bucket's chain holds exactly its timers, in creation order reversed (as
    // if they had been created into it), and ends at its own marker.
    for (j, count) in [(0, moved[0]), (16, moved[1])] {
        let mut p = future.buckets[j].head.load(Ordering::Relaxed) & !LOCKED;
        let mut seen = Vec::new();
        while p != 0 && p & NULLS == 0 {
            // SAFETY: the timers are alive (`timers`), and nothing else touches the tables.
            let t = unsafe { &*(p as *const Timer<()>) };
            seen.push(t.hot.id.load(Ordering::Relaxed));
            p = t.hot.hash_next.load(Ordering::Relaxed);
        }
        assert_eq!(seen.len(), count, "bucket {j}: {seen:?}");
        assert!(
            p == 0 || p == nulls(future.bits, j),
            "bucket {j} ends at {p:#x}"
        );
        let mut sorted = seen.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(seen, sorted, "bucket {j}: not newest first");
    }
}

/// The hash buckets' locks are ranked: a shard lock taken under a bucket lock panics in
/// debug builds (the queue's: `timers::notify`'s `a_timer_lock_under_a_queue_lock_panics`).
#[cfg(debug_assertions)]
#[test]
fn bucket_locks_are_ranked() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let bucket = Bucket::default();
    let shard = crate::sync::Locked::<(), { crate::sync::rank::SHARD }>::new(());
    let r = catch_unwind(AssertUnwindSafe(|| {
        let locked = bucket.lock().expect("not moved");
        let _ = shard.with(|_| ());
        locked.unlock(0);
    }));
    let msg = crate::sync::panic_message(r);
    assert!(msg.starts_with("lock order: a rank-1 lock"), "{msg}");
    // The unwinding cleared the bucket's mark: a shard may be taken again. (The bucket
    // itself stays locked: its lock has no poisoned state.)
    assert_eq!(shard.with(|_| 7), Ok(7));
    let held = bucket.head.load(Ordering::Relaxed);
    assert_eq!(held & LOCKED, LOCKED);
    // A nested bucket lock is allowed under a bucket lock only: not above another rank.
    let (bucket, other) = (Bucket::default(), Bucket::default());
    let locked = bucket.lock().expect("not moved");
    let inner = other.lock_nested(&locked).expect("not moved");
    inner.unlock(0);
    locked.unlock(0);
    let queue = crate::sync::Locked::<(), { crate::sync::rank::QUEUE }>::new(());
    let locked = bucket.lock().expect("not moved");
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = queue.with(|_| {
            let _ = other.lock_nested(&locked);
        });
    }));
    let msg = crate::sync::panic_message(r);
    assert!(msg.starts_with("lock order: a nested rank-4 lock"), "{msg}");
    locked.unlock(0);
}

/// A retired table is not freed while a by-ID walk (which takes no pin, `sync/pin.rs`) may
/// stand on it: `drop_deferred` hands it to a thread that waits for the walk to end.
#[test]
fn a_deferred_free_waits_for_open_walks() {
    struct Flag(std::sync::mpsc::Sender<()>);
    impl Drop for Flag {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    crate::sync::with_walk_for_tests(|| {
        drop_deferred(Flag(tx), 0);
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(50))
                .is_err(),
            "freed while a walk was open"
        );
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("freed once the walk ended");
}
