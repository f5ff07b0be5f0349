//! Loom model checks of the hash chain protocol: a lock-free walk racing a bucket split, and
//! racing the unlink and reuse of the timer it stands on. Both fail (a present timer reported
//! absent, or a data race) if a Release/Acquire pair in `table.rs` is weakened: the walk must
//! either see the moved timer, or see the cut link and then the `future` table, or land on a
//! foreign nulls marker and restart.

use super::table::{self, hash, Table};
use super::timer::{visible, Timer};
use crate::sync::Ordering;
use loom::sync::Arc;

const SEED: [u64; 2] = [3, 5];
const OWNER: u64 = 9;

fn timer(id: i32) -> Box<Timer> {
    let t = Box::new(Timer::default());
    t.hot.owner.store(visible(OWNER), Ordering::Relaxed);
    t.hot.id.store(id, Ordering::Relaxed);
    t
}

fn insert(t: &Table, timer: &Timer) {
    let id = timer.hot.id.load(Ordering::Relaxed);
    let h = hash(SEED, OWNER, id);
    let idx = t.index(h);
    let head = t.buckets[idx].lock().expect("not moved");
    t.link_and_unlock(idx, head, timer, h);
}

fn lookup(t: &Table, id: i32) -> bool {
    table::find(|| t, hash(SEED, OWNER, id), visible(OWNER), id).is_some()
}

/// Two IDs whose timers share a bucket of a 2-bucket table.
fn same_bucket_ids() -> (i32, i32) {
    let b = |id| hash(SEED, OWNER, id) & 1;
    let first = 0;
    let second = (1..).find(|&i| b(i) == b(first)).unwrap();
    (first, second)
}

#[test]
fn loom_walk_racing_split_finds_present_timer() {
    loom::model(|| {
        let (a, b) = same_bucket_ids();
        let old = Arc::new(Table::new(1, SEED));
        let ta = timer(a);
        let tb = timer(b);
        insert(&old, &ta);
        insert(&old, &tb);
        let future = Box::into_raw(Box::new(Table::new(2, SEED)));
        old.future.store(future, Ordering::Release);
        let walker = {
            let old = old.clone();
            loom::thread::spawn(move || {
                assert!(lookup(&old, a), "timer {a} present throughout, not found");
            })
        };
        // SAFETY: `future` stays allocated until the end of the model run.
        let f = unsafe { &*future };
        let idx = old.index(hash(SEED, OWNER, a));
        old.split_bucket(idx, f);
        walker.join().unwrap();
        assert!(lookup(&old, b));
        // SAFETY: from `Box::into_raw` above; the walker is joined.
        drop(unsafe { Box::from_raw(future) });
        drop((ta, tb));
    });
}

#[test]
fn loom_walk_racing_unlink_and_reuse_finds_present_timer() {
    loom::model(|| {
        let (a, b) = same_bucket_ids();
        let t = Arc::new(Table::new(1, SEED));
        let target = timer(a);
        let reused = timer(b);
        insert(&t, &target);
        // `reused` is ahead of `target` in the chain: the walker passes it.
        insert(&t, &reused);
        let reused_ptr = &*reused as *const Timer as usize;
        let walker = {
            let t = t.clone();
            loom::thread::spawn(move || {
                assert!(lookup(&t, a), "timer {a} present throughout, not found");
            })
        };
        // Delete `reused` and re-create it with another ID, which may land in the other bucket.
        // SAFETY: the box outlives the model run.
        let r = unsafe { &*(reused_ptr as *const Timer) };
        r.hot.owner.store(visible(OWNER) | 1, Ordering::Relaxed);
        let h = hash(SEED, OWNER, b);
        let idx = t.index(h);
        let head = t.buckets[idx].lock().unwrap();
        assert!(t.unlink_and_unlock(idx, head, r));
        let other = (b + 1..)
            .find(|&i| hash(SEED, OWNER, i) & 1 != h & 1)
            .unwrap();
        r.hot.id.store(other, Ordering::Relaxed);
        r.hot.owner.store(visible(OWNER), Ordering::Relaxed);
        insert(&t, r);
        walker.join().unwrap();
        drop((target, reused));
    });
}
