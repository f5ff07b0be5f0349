//! Loom model checks of the hash chain protocol: a lock-free walk racing a bucket split, and
//! racing the unlink and reuse of the timer it stands on. Both fail (a present timer reported
//! absent, or a data race) if a Release/Acquire pair in `table.rs` or `table/growth.rs` (the
//! split) is weakened: the walk must either see the moved timer, or see the cut link and then
//! the `future` table, or land on a foreign nulls marker and restart.
//!
//! And of the slot protocol: a lock-free read (`Timer::read_current`, as getoverrun uses
//! it) racing the delete and re-create of the timer in the same slot, with another
//! ID or (exact-ID mode) the same one. It must return values of one incarnation of the timer
//! it validated, or nothing; the models fail if the Release fence or the Release generation
//! store in `reset_for_create` or the Release fence in `mark_deleted` is removed, or if
//! `read_current` reads the generation after the owner word.
//!
//! And of the exclusive section's entry (a restore's) racing an owner's first create: the
//! section may skip the uniqueness walk only if no create went ahead unseen.
//!
//! What the slot models cover: the real `Timer::lock_if`, `Timer::mark_deleted`,
//! `Timer::reset_for_create` and `Timer::read_current`, with the owner-word and ID stores of
//! `free_slot_locked` and `create_locked` copied from `owner.rs`, on a model service whose
//! parts are two create-time fields and two published ones (`Model`). Not modelled: the hash
//! table (unhash and link; the walk is the subject of the models above), the shard free list
//! (its lock orders creators, not readers) and the epoch. The registry's own `create` and
//! `delete` do not run under loom: crossbeam-epoch is not loom-instrumented.

use super::table::{self, hash, Table};
use super::timer::{visible, Locked, Service, Timer, PENDING};
use crate::sync::{AtomicI32, AtomicU8, Ordering};
use loom::sync::Arc;

const SALT: [u64; 2] = [3, 5];
const OWNER: u64 = 9;

/// A service whose parts a racing reader can mix up: two fields set at create, a count and an
/// "armed" flag published, the flag cleared by the delete hook (as a disarm is).
struct Model;

#[derive(Debug, Default)]
struct Fixed {
    clock: AtomicU8,
    notify: AtomicU8,
}

#[derive(Debug, Default)]
struct Published {
    count: AtomicI32,
    armed: AtomicU8,
}

// SAFETY: atomics; zero is their default outside loom (the contract), and these models build
// timers with `Default`.
unsafe impl super::timer::Zeroable for Fixed {}
// SAFETY: as above.
unsafe impl super::timer::Zeroable for Published {}

impl Service for Model {
    type Fixed = Fixed;
    type Published = Published;
    type Links = ();
    type State = ();
    type Init = (u8, u8);
    type OwnerPart = ();
    type Released = ();
    fn init(fixed: &Fixed, published: &Published, _: &mut (), (clock, notify): (u8, u8)) {
        fixed.clock.store(clock, Ordering::Relaxed);
        fixed.notify.store(notify, Ordering::Relaxed);
        published.count.store(0, Ordering::Relaxed);
        published.armed.store(0, Ordering::Relaxed);
    }
    fn on_delete(_: &(), l: &mut Locked<'_, Model>) {
        l.published().armed.store(0, Ordering::Relaxed);
    }
    fn on_destroy(_: &()) {}
}

fn timer(id: i32) -> Box<Timer<()>> {
    let t = Box::new(Timer::<()>::default());
    t.hot.owner.store(visible(OWNER), Ordering::Relaxed);
    t.hot.id.store(id, Ordering::Relaxed);
    t
}

fn insert(t: &Table, timer: &Timer<()>) {
    let id = timer.hot.id.load(Ordering::Relaxed);
    let h = hash(SALT, OWNER, id);
    let idx = t.index(h);
    let locked = t.buckets[idx].lock().expect("not moved");
    t.link_and_unlock(idx, locked, timer, h);
}

/// Empties the `near` shortcuts of `id`'s bucket, so that a lookup of a timer there walks the
/// chain (the path these models are about) instead of finding it from the bucket.
fn forget_near(t: &Table, id: i32) {
    let idx = t.index(hash(SALT, OWNER, id));
    let locked = t.buckets[idx].lock().expect("not moved");
    t.buckets[idx].near_clear();
    let head = locked.head();
    locked.unlock(head);
}

fn lookup(t: &Table, id: i32) -> bool {
    table::find::<()>(|| t, hash(SALT, OWNER, id), visible(OWNER), id).is_some()
}

/// Two IDs whose timers share a bucket of a 2-bucket table.
fn same_bucket_ids() -> (i32, i32) {
    let b = |id| hash(SALT, OWNER, id) & 1;
    let first = 0;
    let second = (1..).find(|&i| b(i) == b(first)).unwrap();
    (first, second)
}

#[test]
fn loom_walk_racing_split_finds_present_timer() {
    loom::model(|| {
        let (a, b) = same_bucket_ids();
        let old = Arc::new(Table::new(1, SALT));
        let ta = timer(a);
        let tb = timer(b);
        insert(&old, &ta);
        insert(&old, &tb);
        forget_near(&old, a);
        let future = Box::into_raw(Box::new(Table::new(2, SALT)));
        old.future.store(future, Ordering::Release);
        let walker = {
            let old = old.clone();
            loom::thread::spawn(move || {
                assert!(lookup(&old, a), "timer {a} present throughout, not found");
            })
        };
        // SAFETY: `future` stays allocated until the end of the model run.
        let f = unsafe { &*future };
        let idx = old.index(hash(SALT, OWNER, a));
        old.split_bucket::<()>(idx, f, 2);
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
        let t = Arc::new(Table::new(1, SALT));
        let target = timer(a);
        let reused = timer(b);
        insert(&t, &target);
        // `reused` is ahead of `target` in the chain: the walker passes it.
        insert(&t, &reused);
        forget_near(&t, a);
        let reused_ptr = &*reused as *const Timer<()> as usize;
        let walker = {
            let t = t.clone();
            loom::thread::spawn(move || {
                assert!(lookup(&t, a), "timer {a} present throughout, not found");
            })
        };
        // Delete `reused` and re-create it with another ID, which may land in the other bucket.
        // SAFETY: the box outlives the model run.
        let r = unsafe { &*(reused_ptr as *const Timer<()>) };
        r.hot.owner.store(visible(OWNER) | 1, Ordering::Relaxed);
        let h = hash(SALT, OWNER, b);
        let idx = t.index(h);
        let locked = t.buckets[idx].lock().unwrap();
        assert!(t.unlink_and_unlock(idx, locked, r));
        let other = (b + 1..)
            .find(|&i| hash(SALT, OWNER, i) & 1 != h & 1)
            .unwrap();
        r.hot.id.store(other, Ordering::Relaxed);
        r.hot.owner.store(visible(OWNER), Ordering::Relaxed);
        insert(&t, r);
        walker.join().unwrap();
        drop((target, reused));
    });
}

/// The count of the first incarnation in the slot models (a re-create resets it to 0).
const OLD_COUNT: i32 = 7;
/// The create-time fields of the first and of the second incarnation.
const FIRST: (u8, u8) = (0, 1);
const SECOND: (u8, u8) = (1, 2);

/// A slot holding this owner's visible timer `id` (incarnation `FIRST`), armed, with count
/// `OLD_COUNT`: made as `create_locked` makes it, then set under its lock as the POSIX
/// service's settime and an event's consumption set its parts.
fn live_slot(id: i32) -> Timer<Model> {
    let t = Timer::default();
    create(&t, id, FIRST);
    t.lock_if(visible(OWNER), Some(id), |l| {
        l.published().count.store(OLD_COUNT, Ordering::Relaxed);
        l.published().armed.store(1, Ordering::Relaxed);
    })
    .expect("not poisoned")
    .expect("just made visible");
    t
}

/// `create_locked` on a free slot, without the hash table: the real `reset_for_create`, then
/// its ID and visible owner-word stores.
fn create(t: &Timer<Model>, id: i32, init: (u8, u8)) {
    // SAFETY: the slot is free (owner word 0) and only this thread creates in it.
    unsafe { t.reset_for_create(visible(OWNER) | PENDING) };
    t.hot.id.store(id, Ordering::Relaxed);
    // SAFETY: pending since just above; only this thread creates in it.
    unsafe { t.init_pending(init) };
    // Release: as in `create_locked`.
    t.hot.owner.store(visible(OWNER), Ordering::Release);
}

/// `delete` of timer `old` and a create that reuses its slot for timer `new` (incarnation
/// `SECOND`), racing a reader of timer `old` that runs `read` through `read_current`; returns
/// what the reader got.
fn race_delete_recreate<R: Send + 'static>(
    old: i32,
    new: i32,
    read: impl Fn(&Fixed, &Published) -> R + Send + Sync + 'static,
) -> Option<R> {
    let t = Arc::new(live_slot(old));
    let reader = {
        let t = t.clone();
        loom::thread::spawn(move || t.read_current(visible(OWNER), old, read))
    };
    // `delete`: the timer-lock section, then (after the unhash) `free_slot_locked`.
    t.lock_if(visible(OWNER), Some(old), |l| Timer::mark_deleted(l, &()))
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
        let got = race_delete_recreate(0, 1, |_, p| p.count.load(Ordering::Relaxed));
        assert!(
            matches!(got, None | Some(OLD_COUNT)),
            "getoverrun of timer 0 validated a read of {got:?}, not its count {OLD_COUNT}"
        );
    });
}

#[test]
fn loom_reader_racing_recreate_with_the_same_id_reads_one_incarnation() {
    loom::model(|| {
        // An exact-ID create (restore mode) re-creates the same ID in the slot, with other
        // create-time fields: only the generation tells the incarnations apart, and a reader
        // must not report a field of one with a field of the other.
        let got = race_delete_recreate(0, 0, |f, _| {
            (
                f.clock.load(Ordering::Relaxed),
                f.notify.load(Ordering::Relaxed),
            )
        });
        assert!(
            matches!(got, None | Some(FIRST) | Some(SECOND)),
            "the reader validated {got:?}, a mix of {FIRST:?} and {SECOND:?}"
        );
    });
}

#[test]
fn loom_reader_racing_delete_reads_a_state_the_timer_had() {
    loom::model(|| {
        // The timer is armed all its life; the disarm that its delete hook writes after
        // marking it pending must not be reported as its state.
        let got = race_delete_recreate(0, 1, |_, p| p.armed.load(Ordering::Relaxed));
        assert!(
            matches!(got, None | Some(1)),
            "the reader validated a read of timer 0 as armed = {got:?}; it was armed while it lived"
        );
    });
}

/// The exclusive section's entry (`Owner::exclusive`) racing an owner's first create, whose
/// thread installs its shard: if the section counts no slot in use ("alone"), the create must
/// have seen the flag and not made its timer. The shard install, the flag, the fences and the
/// count are the real `Shard`'s and the accesses of `owner.rs`, copied (`OwnerInner` itself
/// does not run under loom: crossbeam-epoch is not loom-instrumented). The same shape is
/// teardown's `dead` flag against a first create. Fails without either SeqCst fence (the
/// store-buffering outcome: the section misses the new shard and the creator misses the
/// flag). Loom checks the fences only: it models SeqCst fences, not SeqCst loads and stores.
#[test]
fn loom_exclusive_section_racing_a_first_create_is_not_alone_if_the_create_went_ahead() {
    use super::owner::Shard;
    use crate::sync::{fence, AtomicBool, AtomicPtr};
    loom::model(|| {
        let exclusive = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(AtomicPtr::<Shard>::new(std::ptr::null_mut()));
        let creator = {
            let (exclusive, slot) = (exclusive.clone(), slot.clone());
            loom::thread::spawn(move || {
                // (C): `new_shard`.
                let fresh = Box::into_raw(Box::new(Shard::new()));
                let installed = slot.compare_exchange(
                    std::ptr::null_mut(),
                    fresh,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                fence(Ordering::SeqCst);
                assert!(installed.is_ok());
                // SAFETY: installed above; freed at the end of the model run.
                let shard = unsafe { &*fresh };
                // (D'): `try_create`.
                shard
                    .locked(|st| {
                        if exclusive.load(Ordering::SeqCst) {
                            return false;
                        }
                        st.live += 1;
                        true
                    })
                    .unwrap()
            })
        };
        // (A') and (B'): `Owner::exclusive`.
        assert!(exclusive
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok());
        fence(Ordering::SeqCst);
        let p = slot.load(Ordering::SeqCst);
        let live = if p.is_null() {
            0
        } else {
            // SAFETY: installed by the creator; freed at the end of the model run.
            unsafe { &*p }.locked(|st| st.live).unwrap()
        };
        let made = creator.join().unwrap();
        assert!(
            !(made && live == 0),
            "the section counted no slot in use while a create went ahead"
        );
        // SAFETY: from `Box::into_raw` in the creator, which is joined.
        drop(unsafe { Box::from_raw(slot.load(Ordering::SeqCst)) });
    });
}
