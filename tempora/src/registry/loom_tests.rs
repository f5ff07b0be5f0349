//! Loom model checks of the hash chain protocol: a lock-free walk racing a bucket split, and
//! racing the unlink and reuse of the timer it stands on. Both fail (a present timer reported
//! absent, or a data race) if a Release/Acquire pair in `table.rs` is weakened: the walk must
//! either see the moved timer, or see the cut link and then the `future` table, or land on a
//! foreign nulls marker and restart.
//!
//! And of the slot protocol: a lock-free read (`Timer::read_current`, as getoverrun and the
//! listing use it) racing the delete and re-create of the timer in the same slot, with another
//! ID or (exact-ID mode) the same one. It must return values of one incarnation of the timer
//! it validated, or nothing; the models fail if the Release fence or the Release generation
//! store in `reset_for_create` or the Release fence in `mark_deleted` is removed, or if
//! `read_current` reads the generation after the owner word.
//!
//! What the slot models cover: the real `Timer::lock_if`, `OwnerInner::mark_deleted`,
//! `Timer::reset_for_create` and `Timer::read_current`, with the owner-word and ID stores of
//! `free_slot_locked` and `create_locked` copied from `mod.rs`. Not modelled: the hash table
//! (unhash and link; the walk is the subject of the models above), the shard free list (its
//! lock orders creators, not readers) and the epoch. The registry's own `create` and `delete`
//! cannot run under loom: slot pages come from zeroed memory (`Slots::add_page`), which is a
//! valid `Timer` only with std atomics (a loom atomic is a handle into the model's state), and
//! crossbeam-epoch is not loom-instrumented.

use super::table::{self, hash, Table};
use super::timer::{visible, Status, Timer, PENDING};
use super::{NotifyKind, OwnerInner};
use crate::clock::ClockId;
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

/// The overrun count of the first incarnation in the slot models (a re-create resets it to 0).
const OLD_OVERRUN: i32 = 7;
/// Clock and notification kind of the first and of the second incarnation.
const FIRST: (ClockId, NotifyKind) = (ClockId::Realtime, NotifyKind::Queue);
const SECOND: (ClockId, NotifyKind) = (ClockId::Monotonic, NotifyKind::Callback);

/// A slot holding this owner's visible timer `id` (incarnation `FIRST`), armed, with overrun
/// count `OLD_OVERRUN`: made as `create_locked` makes it, then set under its lock as settime
/// and an event's consumption set them.
fn live_slot(id: i32) -> Timer {
    let t = Timer::default();
    create(&t, id, FIRST);
    t.lock_if(visible(OWNER), Some(id), |mut l| {
        l.set_overrun_last(OLD_OVERRUN);
        l.set_status(Status::Armed);
    })
    .expect("not poisoned")
    .expect("just made visible");
    t
}

/// `create_locked` on a free slot, without the hash table: the real `reset_for_create`, then
/// its ID and visible owner-word stores.
fn create(t: &Timer, id: i32, (clock, notify): (ClockId, NotifyKind)) {
    // SAFETY: the slot is free (owner word 0) and only this thread creates in it.
    unsafe { t.reset_for_create(visible(OWNER) | PENDING, clock, notify, 0, [0; 2]) };
    t.hot.id.store(id, Ordering::Relaxed);
    // Release: as in `create_locked`.
    t.hot.owner.store(visible(OWNER), Ordering::Release);
}

/// `delete` of timer `old` and a create that reuses its slot for timer `new` (incarnation
/// `SECOND`), racing a reader of timer `old` that runs `read` through `read_current`; returns
/// what the reader got.
fn race_delete_recreate<R: Send + 'static>(
    old: i32,
    new: i32,
    read: impl Fn(&Timer) -> R + Send + Sync + 'static,
) -> Option<R> {
    let t = Arc::new(live_slot(old));
    let reader = {
        let t = t.clone();
        loom::thread::spawn(move || t.read_current(visible(OWNER), old, read))
    };
    // `delete`: the timer-lock section, then (after the unhash) `free_slot_locked`.
    t.lock_if(visible(OWNER), Some(old), OwnerInner::mark_deleted)
        .expect("not poisoned")
        .expect("visible until this delete");
    // Release: as in `free_slot_locked`.
    t.hot.owner.store(0, Ordering::Release);
    create(&t, new, SECOND);
    reader.join().unwrap()
}

#[test]
fn loom_getoverrun_racing_delete_and_recreate_reads_the_deleted_timer_or_nothing() {
    loom::model(|| {
        // A normal create takes the next ID from the counter: another ID in the same slot.
        let got = race_delete_recreate(0, 1, |t| t.written.overrun_last.load(Ordering::Relaxed));
        assert!(
            matches!(got, None | Some(OLD_OVERRUN)),
            "getoverrun of timer 0 validated a read of {got:?}, not its count {OLD_OVERRUN}"
        );
    });
}

#[test]
fn loom_listing_racing_recreate_with_the_same_id_reads_one_incarnation() {
    loom::model(|| {
        // An exact-ID create (restore mode) re-creates the same ID in the slot, with another
        // clock and notification kind: only the generation tells the incarnations apart, and a
        // listing must not report the clock of one with the notification kind of the other.
        let got = race_delete_recreate(0, 0, |t| (t.clock(), t.notify()));
        assert!(
            matches!(got, None | Some(FIRST) | Some(SECOND)),
            "the listing validated {got:?}, a mix of {FIRST:?} and {SECOND:?}"
        );
    });
}

#[test]
fn loom_listing_racing_delete_reads_a_status_the_timer_had() {
    loom::model(|| {
        // The timer is armed all its life; the disarm that its delete writes after marking it
        // pending must not be reported as its status.
        let got = race_delete_recreate(0, 1, |t| t.status());
        assert!(
            matches!(got, None | Some(Status::Armed)),
            "the listing validated a read of timer 0 as {got:?}; it was armed while it lived"
        );
    });
}
