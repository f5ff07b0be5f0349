//! Loom models of the one-byte lock (mutual exclusion, poisoning that frees waiters) and of
//! the by-ID walk against a retired table's free (`pin.rs`, "Walks").

use super::*;
use loom::sync::Arc;

/// Two threads increment a counter kept in an `UnsafeCell` under the lock; loom explores
/// the interleavings and reports a data race if the lock's Acquire/Release were weakened.
#[test]
fn loom_byte_lock_excludes() {
    loom::model(|| {
        let shared = Arc::new((ByteLock::new(), UnsafeCell::new(0u32)));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let shared = shared.clone();
                loom::thread::spawn(move || {
                    shared.0.lock().unwrap();
                    // SAFETY: the lock is held, so no other thread touches the cell.
                    shared.1.with_mut(|p| unsafe { *p += 1 });
                    shared.0.unlock();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        shared.0.lock().unwrap();
        // SAFETY: the lock is held and both writers have been joined.
        let v = shared.1.with(|p| unsafe { *p });
        shared.0.unlock();
        assert_eq!(v, 2);
    });
}

/// Two threads increment a counter under a [`Locked`] (the closure form and the guard form)
/// and a [`RankedMutex`]; loom reports a data race if either let two holders in at once.
#[test]
fn loom_ranked_locks_exclude() {
    loom::model(|| {
        let shared = Arc::new((
            Locked::<u32, { rank::TIMER }>::new(0),
            RankedMutex::<u32, { rank::TOTALS }>::new(0),
        ));
        let other = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                shared.0.with(|v| *v += 1).unwrap();
                *shared.1.lock().unwrap() += 1;
            })
        };
        *shared.0.lock().unwrap() += 1;
        *shared.1.lock_or_recover() += 1;
        other.join().unwrap();
        assert_eq!(shared.0.with(|v| *v), Ok(2));
        assert_eq!(*shared.1.lock().unwrap(), 2);
    });
}

/// A holder whose critical section panics poisons the lock while another thread waits
/// for it: the waiter returns (`Err` once poisoned; `Ok` only if it got the lock first),
/// never spins forever, and never enters after the poison. Without the poisoned state in
/// `lock_contended`, loom reports the waiter's endless spin.
#[test]
fn loom_byte_lock_poison_releases_waiters() {
    loom::model(|| {
        let shared = Arc::new((ByteLock::new(), UnsafeCell::new(0u32)));
        let holder = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                shared.0.lock().unwrap();
                // SAFETY: the lock is held.
                shared.1.with_mut(|p| unsafe { *p = 1 });
                shared.0.poison(); // what `PoisonOnUnwind` does on a panic
            })
        };
        match shared.0.lock() {
            Ok(()) => {
                // SAFETY: the lock is held.
                let v = shared.1.with(|p| unsafe { *p });
                assert_eq!(v, 0, "entered after the holder poisoned the lock");
                shared.0.unlock();
            }
            Err(Poisoned) => {}
        }
        holder.join().unwrap();
        assert_eq!(shared.0.lock(), Err(Poisoned));
    });
}

/// A reader of a [`VersionedLock`]'s state without the lock (as a timer's `gettime`) accepts
/// a read only if no holder wrote between its two loads of the word: a writer sets two fields
/// to the same value under the lock, and an accepted read never sees them differ. Without the
/// Release fence after taking the lock (or the Acquire fence before the second load), loom
/// finds an interleaving where a read that saw one new field and one old one is accepted.
#[test]
fn loom_versioned_read_sees_one_version() {
    use crate::sync::{AtomicU32, Ordering};
    loom::model(|| {
        let shared = Arc::new((
            VersionedLock::<{ rank::TIMER }>::default(),
            AtomicU32::new(0),
            AtomicU32::new(0),
        ));
        let writer = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                for v in 1..=2 {
                    shared
                        .0
                        .with(|| {
                            shared.1.store(v, Ordering::Relaxed);
                            shared.2.store(v, Ordering::Relaxed);
                        })
                        .unwrap();
                }
            })
        };
        if let Ok(begun) = shared.0.read_begin() {
            let a = shared.1.load(Ordering::Relaxed);
            let b = shared.2.load(Ordering::Relaxed);
            if shared.0.read_valid(begun) {
                assert_eq!(a, b, "an accepted read saw two versions");
            }
        }
        writer.join().unwrap();
        let begun = shared.0.read_begin().expect("no holder is left");
        assert_eq!(begun >> 2, 2, "two releases, two versions");
    });
}

/// A walk (mark opened, light fence, current table loaded, table read, mark closed) against
/// the free of the table it may have loaded (the current pointer moved on, heavy fence, every
/// open walk waited out, table written as a free would): loom reports a data race if the
/// free could overlap a read of the retired table. Both fences are `SeqCst` under loom (the
/// symmetric form of `barrier.rs`); a handler's nested walk is inside the outer one's.
#[test]
fn loom_a_walk_never_reaches_a_freed_table() {
    loom::model(|| {
        let shared = Arc::new((
            pin::Mark::default(),
            AtomicUsize::new(0),
            [UnsafeCell::new(0u32), UnsafeCell::new(0u32)],
        ));
        let walker = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let (mark, current, tables) = &*shared;
                mark.open();
                barrier::light();
                let t = current.load(Ordering::Acquire);
                mark.open();
                mark.close();
                // SAFETY: loom checks that no free of table `t` overlaps this read.
                let _ = tables[t].with(|p| unsafe { *p });
                mark.close();
            })
        };
        let (mark, current, tables) = &*shared;
        current.store(1, Ordering::Release);
        barrier::heavy();
        if let Some(v) = mark.sample() {
            while !mark.moved_on(v) {
                loom::thread::yield_now();
            }
        }
        // SAFETY: the free under test: loom reports it if a walk may still read table 0.
        tables[0].with_mut(|p| unsafe { *p = 1 });
        walker.join().unwrap();
    });
}

/// The count of walks made without a mark (`pin.rs`'s `Unmarked`), as `walks_done` and
/// `WalksOpen::wait` use it: a walker counts itself in the phase it reads, loads the current
/// table, reads it; a second walk opens before the first closes and reads the table it
/// loads. The free retires table 0, fences, and
/// waits the counts out (flipping the phase) if any is open, then writes the table as a free
/// would: loom reports a data race if a counted walk could still read it.
#[test]
fn loom_an_unmarked_walk_never_reaches_a_freed_table() {
    loom::model(|| {
        let shared = Arc::new((
            pin::Unmarked::new(),
            AtomicUsize::new(0),
            [UnsafeCell::new(0u32), UnsafeCell::new(0u32)],
        ));
        let walker = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let (count, current, tables) = &*shared;
                let first = count.enter();
                let t = current.load(Ordering::Acquire);
                let second = count.enter();
                // SAFETY: loom checks that no free of table `t` overlaps this read.
                let _ = tables[t].with(|p| unsafe { *p });
                count.exit(first);
                let t = current.load(Ordering::Acquire);
                // SAFETY: as above, for the second walk's table.
                let _ = tables[t].with(|p| unsafe { *p });
                count.exit(second);
            })
        };
        let (count, current, tables) = &*shared;
        current.store(1, Ordering::Release);
        barrier::heavy();
        if count.any_open() {
            count.wait_out();
        }
        // SAFETY: the free under test: loom reports it if a walk may still read table 0.
        tables[0].with_mut(|p| unsafe { *p = 1 });
        walker.join().unwrap();
    });
}

/// Why a free flips twice (`pin.rs`'s `Unmarked::wait_out`): a walk reads phase 0, free A
/// flips and finds counter 0 empty, and only then does the walk count itself in counter 0
/// and load the table A made current. Free B must wait that walk out though B's first flip
/// leaves counter 0 to new walks: its second flip waits for counter 0 too. With one flip
/// per free, loom reports B's free overlapping the walk's read. (A helper thread's walk makes
/// A find a count open, so that A flips.)
#[test]
fn loom_a_stale_phase_walk_is_waited_by_the_next_free() {
    loom::model(|| {
        let shared = Arc::new((
            pin::Unmarked::new(),
            AtomicUsize::new(0),
            [
                UnsafeCell::new(0u32),
                UnsafeCell::new(0u32),
                UnsafeCell::new(0u32),
            ],
        ));
        let helper = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let p = shared.0.enter();
                shared.0.exit(p);
            })
        };
        let walker = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let (count, current, tables) = &*shared;
                let p = count.enter();
                let t = current.load(Ordering::Acquire);
                // SAFETY: loom checks that no free of table `t` overlaps this read.
                let _ = tables[t].with(|p| unsafe { *p });
                count.exit(p);
            })
        };
        let (count, current, tables) = &*shared;
        // Free A retires table 0, free B table 1.
        for t in 0..2 {
            current.store(t + 1, Ordering::Release);
            barrier::heavy();
            if count.any_open() {
                count.wait_out();
            }
            // SAFETY: the free under test: loom reports it if a walk may still read table t.
            tables[t].with_mut(|p| unsafe { *p = 1 });
        }
        helper.join().unwrap();
        walker.join().unwrap();
    });
}
