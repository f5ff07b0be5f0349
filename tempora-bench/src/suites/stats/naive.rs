//! The `flush` case's baseline: statistics kept as the library keeps them (`stats/tally.rs`:
//! per owner a slot per updating thread with its counters and a listed flag, per thread a list
//! of the slots it updated since the last flush, the asymmetric fences) but flushed naively:
//! a push takes its list's lock, and the flush holds that lock across the detach, the walk
//! and the aggregation into the owner's totals and every group above it, so an updater that
//! pushes meanwhile waits for the whole walk.
//!
//! The lock is the library's kind of short lock (one compare-exchange; a contended locker
//! spins, then yields), the counters are the library's ten, and a push and a settle touch the
//! reference counts the library's do (the service's, upgraded from a weak handle, and the
//! owner's, which a listed slot holds), so that the walk and the push do the library's work.

use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The library's counters per slot (`stats::totals::COUNTERS`).
const COUNTERS: usize = 10;

/// What an arm+cancel pair counts: `Armed` and `Disarmed` (their indices among the counters).
pub const ARMED: usize = 2;
pub const DISARMED: usize = 3;

/// The library's updated lists: one per thread slot, and the shared overflow slot's
/// (`stats::tally::SLOTS` + 1); a flush visits each.
const LISTS: usize = 65;

/// No slot: the end of a list's chain.
const END: u64 = u64::MAX;

/// A value on cache lines of its own (as the library pads its slots and lists).
#[derive(Default)]
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One thread's slot of one owner.
#[derive(Default)]
struct Slot {
    counts: [AtomicU64; COUNTERS],
    on_list: AtomicBool,
    /// The next slot on the list (under its lock).
    next: AtomicU64,
    /// The counts the last flush read (the flusher's alone).
    last: [AtomicU64; COUNTERS],
}

/// A list of updated slots: its lock, and the chain's first slot (under the lock).
struct List {
    lock: AtomicBool,
    head: AtomicU64,
}

impl List {
    fn lock(&self) {
        let mut spins = 0u32;
        // Acquire: pairs with `unlock`'s Release.
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if spins < 32 {
                for _ in 0..(1u32 << spins.min(5)) {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::yield_now();
            }
            spins += 1;
        }
    }

    fn unlock(&self) {
        // Release: what was written under the lock is seen by the next holder.
        self.lock.store(false, Ordering::Release);
    }
}

/// The statistics of `owners` owners updated by `threads` threads, each owner in a group
/// whose path to the root `groups_of` gives.
pub struct NaiveStats {
    threads: usize,
    /// One flush at a time (as the library's).
    flushing: Mutex<()>,
    slots: Vec<CachePadded<Slot>>,
    lists: Vec<CachePadded<List>>,
    owner_totals: Vec<Mutex<[u64; COUNTERS]>>,
    /// Per owner, the references its listed slots hold (the library's strong count of a tally).
    owner_refs: Vec<AtomicU64>,
    /// The service's strong count, which a push upgrades to and drops (the library's hub).
    hub_refs: AtomicU64,
    group_totals: Vec<Mutex<[u64; COUNTERS]>>,
    /// Per owner, the groups its counts are added to (its group, then each one above it).
    groups_of: Vec<Vec<usize>>,
    /// `membarrier` is registered: updaters fence with a compiler fence, the flush with the
    /// system call (as the library); else `SeqCst` fences on both sides.
    asymmetric: bool,
}

impl NaiveStats {
    /// `groups` groups; `groups_of[o]`: owner `o`'s group and those above it.
    pub fn new(threads: usize, groups: usize, groups_of: Vec<Vec<usize>>) -> NaiveStats {
        let owners = groups_of.len();
        NaiveStats {
            threads,
            flushing: Mutex::new(()),
            slots: (0..owners * threads)
                .map(|_| CachePadded::default())
                .collect(),
            lists: (0..LISTS.max(threads))
                .map(|_| {
                    CachePadded(List {
                        lock: AtomicBool::new(false),
                        head: AtomicU64::new(END),
                    })
                })
                .collect(),
            owner_totals: (0..owners).map(|_| Mutex::new([0; COUNTERS])).collect(),
            owner_refs: (0..owners).map(|_| AtomicU64::new(1)).collect(),
            hub_refs: AtomicU64::new(1),
            group_totals: (0..groups).map(|_| Mutex::new([0; COUNTERS])).collect(),
            groups_of,
            asymmetric: register_membarrier(),
        }
    }

    /// Adds one to counter `c` of `owner` for updater `thread` (the slot's only writer), and
    /// lists the slot if this is its first update since it was flushed.
    #[inline]
    pub fn count(&self, thread: usize, owner: usize, c: usize) {
        let i = owner * self.threads + thread;
        let slot = &self.slots[i];
        // Relaxed: this thread is the slot's only writer; the flush reads after its fence.
        let n = slot.counts[c].load(Ordering::Relaxed);
        slot.counts[c].store(n + 1, Ordering::Relaxed);
        if self.asymmetric {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        // Relaxed: ordered by the fences, as the library's.
        if !slot.on_list.load(Ordering::Relaxed) {
            // The library's push: the service upgraded from its weak handle (a compare-exchange
            // on its count), the owner's count taken for the listing, the service dropped.
            let _ = self
                .hub_refs
                .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| Some(n + 1));
            // Relaxed: the flag says who lists the slot; the lock publishes.
            if slot.on_list.swap(true, Ordering::Relaxed) {
                self.hub_refs.fetch_sub(1, Ordering::Release);
                return;
            }
            self.owner_refs[owner].fetch_add(1, Ordering::Relaxed);
            let list = &self.lists[thread];
            list.lock();
            // Relaxed: under the list's lock.
            slot.next
                .store(list.head.load(Ordering::Relaxed), Ordering::Relaxed);
            list.head.store(i as u64, Ordering::Relaxed);
            list.unlock();
            self.hub_refs.fetch_sub(1, Ordering::Release);
        }
    }

    /// Flushes every list, each under its lock: how long each list that had slots was held,
    /// in ns.
    pub fn flush(&self, holds: &mut Vec<u64>) {
        let _one = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
        for list in &self.lists {
            list.lock();
            let start = Instant::now();
            // Relaxed: under the list's lock.
            let head = list.head.swap(END, Ordering::Relaxed);
            if head != END {
                self.settle(head);
                holds.push(start.elapsed().as_nanos() as u64);
            }
            list.unlock();
        }
    }

    /// Clears the flags of the chain from `head`, fences, then adds each slot's new counts to
    /// its owner's totals and its groups'.
    fn settle(&self, head: u64) {
        let mut at = head;
        while at != END {
            let slot = &self.slots[at as usize];
            // Relaxed: ordered by the fence below.
            slot.on_list.store(false, Ordering::Relaxed);
            at = slot.next.load(Ordering::Relaxed);
        }
        if self.asymmetric {
            membarrier();
        } else {
            fence(Ordering::SeqCst);
        }
        let mut at = head;
        while at != END {
            let slot = &self.slots[at as usize];
            let mut delta = [0u64; COUNTERS];
            for (c, d) in delta.iter_mut().enumerate() {
                // Relaxed: ordered by the fence above; `last` is the flusher's alone.
                let now = slot.counts[c].load(Ordering::Relaxed);
                *d = now.wrapping_sub(slot.last[c].load(Ordering::Relaxed));
                slot.last[c].store(now, Ordering::Relaxed);
            }
            let owner = at as usize / self.threads;
            add(&self.owner_totals[owner], &delta);
            for &g in &self.groups_of[owner] {
                add(&self.group_totals[g], &delta);
            }
            // The listing's reference to the owner, given back.
            self.owner_refs[owner].fetch_sub(1, Ordering::Release);
            at = slot.next.load(Ordering::Relaxed);
        }
    }
}

fn add(totals: &Mutex<[u64; COUNTERS]>, delta: &[u64; COUNTERS]) {
    if delta.iter().all(|&d| d == 0) {
        return;
    }
    let mut t = totals.lock().unwrap_or_else(|p| p.into_inner());
    for (t, d) in t.iter_mut().zip(delta) {
        *t = t.wrapping_add(*d);
    }
}

/// Registers this process for expedited private `membarrier`s (the library does too: either
/// registration serves both); false if the kernel refuses.
fn register_membarrier() -> bool {
    // SAFETY: `membarrier` with a command and flags 0 reads and writes no memory of ours.
    let query = unsafe { libc::syscall(libc::SYS_membarrier, libc::MEMBARRIER_CMD_QUERY, 0) };
    let need =
        libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED | libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    query >= 0
        && (query as libc::c_int & need) == need
        // SAFETY: as above.
        && unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
            )
        } == 0
}

/// A full barrier on every CPU running a thread of this process.
fn membarrier() {
    // SAFETY: as in `register_membarrier`.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED,
            0,
        )
    };
}
