//! Synchronisation primitives, swapped for loom's model-checked ones under `cfg(loom)`.
//!
//! Everything in tempora that is shared between threads takes its atomics from here, so the
//! loom tests (`--cfg loom`, `.ci/loom.sh`) check the same code that ships.
//!
//! [`ByteLock`] is tempora's own lock, written here rather than taken from a crate because it
//! must fit in one byte of a timer's written cache line and in the low bit of a hash bucket's
//! head word, and because its unlock is a plain release store (one atomic read-modify-write per
//! lock/unlock pair instead of two; BENCHMARKS.md, "Design measurements", has the cost of the
//! alternative).

/// Fences, loom's under `cfg(loom)` (loom does not observe a `std` fence): the slot protocol's
/// (`registry/timer.rs`) are checked by the models in `registry/loom_tests.rs`.
#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
    AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
    AtomicUsize,
};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A parking mutex, for the one lock that is held across a batch of work (a base's delivery
/// lock): it poisons on unwind.
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// `UnsafeCell` with loom's closure-based access API, so the same call sites build under both.
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }
    #[inline(always)]
    #[allow(dead_code)] // the shared read path of loom and std cells; used by loom tests
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// One step of a contended wait: spin briefly, then give the CPU away. Every lock built on it
/// is held for a bounded, short time (no callback, no blocking call, and allocation only where
/// the holder says what bounds it), so a waiter that yields is rescheduled long before the
/// holder could starve it; with many more threads than CPUs (64 threads on 2 CPUs in the
/// registry benchmark) the yield is what lets a preempted holder run.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *spins < 32 {
            for _ in 0..(1u32 << (*spins).min(5)) {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        *spins = spins.saturating_add(1);
    }
}

/// Asks the CPU to start loading the cache line at `addr` into its caches, and returns at
/// once. Used where a loop learns an address well before it touches it (a poll pops timers
/// under the base lock and delivers them after), so the misses overlap instead of each
/// stalling the thread in turn. A hint only: any address, mapped or not, is allowed.
#[inline(always)]
pub(crate) fn prefetch(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch never faults and never changes memory; it may name any address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::without_provenance::<i8>(addr));
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = addr;
}

/// A lock whose holder panicked inside its critical section: the state it guards may be half
/// changed, so nobody takes it again. Callers turn it into [`crate::Error::Poisoned`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Poisoned;

/// A one-byte lock: `0` free, `1` held, `2` poisoned. Lock is one compare-exchange (Acquire),
/// unlock one store (Release); a contended locker spins, then yields ([`backoff`]). It does
/// not park, so it is only for short critical sections (see [`backoff`]).
///
/// **Unwinding.** A critical section run through [`ByteLock::with`] that panics leaves the
/// lock *poisoned*, never held: every later [`ByteLock::lock`] (including the ones spinning on
/// it at that moment) returns [`Poisoned`] at once instead of waiting forever. The happy path
/// pays nothing for it (the guard is forgotten, not dropped). Code that pairs `lock` and
/// `unlock` by hand must have no panic between them.
///
/// Ordering: the Release store in [`ByteLock::unlock`] pairs with the Acquire
/// compare-exchange of the next [`ByteLock::lock`], so everything written under the lock is
/// visible to the next holder. The loom test `loom_byte_lock_excludes` checks it.
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct ByteLock(AtomicU8);

const FREE: u8 = 0;
const HELD: u8 = 1;
const POISONED: u8 = 2;

impl ByteLock {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        ByteLock(AtomicU8::new(FREE))
    }
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        ByteLock(AtomicU8::new(FREE))
    }

    /// Takes the lock, or fails if it is poisoned.
    #[inline]
    pub(crate) fn lock(&self) -> Result<(), Poisoned> {
        // Acquire: pairs with the Release store in `unlock` of the previous holder.
        match self
            .0
            .compare_exchange_weak(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(_) => self.lock_contended(),
        }
    }

    #[cold]
    fn lock_contended(&self) -> Result<(), Poisoned> {
        let mut spins = 0;
        loop {
            // Relaxed: only a hint; the compare-exchange below is the synchronising access.
            match self.0.load(Ordering::Relaxed) {
                POISONED => return Err(Poisoned),
                FREE if self
                    .0
                    .compare_exchange_weak(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok() =>
                {
                    return Ok(());
                }
                _ => {}
            }
            backoff(&mut spins);
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: pairs with the Acquire in `lock`; publishes the critical section.
        self.0.store(FREE, Ordering::Release);
    }

    /// Marks the lock, which the caller holds, poisoned for good.
    #[cold]
    pub(crate) fn poison(&self) {
        // Release: whoever sees the poison also sees what the holder wrote before it.
        self.0.store(POISONED, Ordering::Release);
    }

    /// Whether a holder panicked inside the lock.
    pub(crate) fn is_poisoned(&self) -> bool {
        // Relaxed: a report; `lock` is what acts on it.
        self.0.load(Ordering::Relaxed) == POISONED
    }

    /// Runs `f` with the lock held: released afterwards, poisoned if `f` panics.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> Result<R, Poisoned> {
        self.lock()?;
        let guard = PoisonOnUnwind(self);
        let r = f();
        std::mem::forget(guard);
        self.unlock();
        Ok(r)
    }
}

/// Dropped only while unwinding out of a critical section (the happy path forgets it).
pub(crate) struct PoisonOnUnwind<'a>(pub(crate) &'a ByteLock);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.poison();
    }
}

/// The CPUs this process may run on (1 if unknown): what per-CPU structures are sized by.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The lock order of the whole crate, in one place, and its debug-build check.
///
/// Every lock has a rank; a thread may take a lock only while every lock it holds has a lower
/// rank. Locks of one rank are never held together.
///
/// | rank | locks | taken while holding |
/// |---|---|---|
/// | 1 | an owner's ID shard (`registry`); a base's delivery lock (`timers/base.rs`) | nothing |
/// | 2 | a timer (`registry/timer.rs`); a sleep's cell (`timers/sleep.rs`) | a delivery lock (a poll delivering), or nothing |
/// | 3 | the service's deadline-fd lock (`timers/base.rs`) | a timer or cell (a ring), or nothing |
/// | 4 | a hash bucket, a base, an owner's event queue, its readiness-fd lock (`timers/notify.rs`), a statistics list's naive-flush lock (`stats/tally.rs`, benchmark only) | a shard (bucket), a timer or cell (base, queue, fd), the deadline-fd lock (base), or nothing |
///
/// Bucket locks are the one exception to "never two of one rank": a table split holds the old
/// bucket and then the two future buckets (old table before future table). The page-directory
/// lock (`registry/slots.rs`) is taken only under a shard lock and takes nothing.
///
/// The readiness-fd lock takes its queue's lock (both rank 4: the queue takes nothing).
///
/// Debug builds assert the rule for shards, delivery locks, timers, cells, fd locks and bases
/// at every lock
/// (the test `lock_order_violation_is_caught_in_debug_builds`); bucket and queue locks are not
/// tracked. Release builds (and loom models, whose threads share one OS thread) compile the
/// check away.
pub(crate) mod lock_order {
    /// Rank 1: an owner's ID shard.
    pub(crate) const SHARD: u8 = 1;
    /// Rank 1: a base's delivery lock.
    pub(crate) const DELIVERY: u8 = 1;
    /// Rank 2: a timer.
    pub(crate) const TIMER: u8 = 2;
    /// Rank 3: the service's deadline-fd lock (a ring under a timer lock takes it; a refresh
    /// holds it while it takes each base).
    pub(crate) const DEADLINE_FD: u8 = 3;
    /// Rank 4: a base.
    pub(crate) const BASE: u8 = 4;
    /// Rank 4: an owner's readiness-fd lock (it takes its event queue's lock, which has no
    /// rank: that lock takes nothing).
    pub(crate) const READY_FD: u8 = 4;
    /// Rank 4: a statistics updated list's naive-flush lock (`stats/tally.rs`; taken only in
    /// the benchmark's naive mode): by a push under a timer lock (an expiry counted), and by a
    /// flush holding no tempora lock; it takes nothing.
    pub(crate) const STATS_LIST: u8 = 4;

    #[cfg(all(debug_assertions, not(loom)))]
    thread_local! {
        /// Bit `r` set: this thread holds a lock of rank `r`.
        static HELD: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
    }

    /// Proof that a lock of some rank was entered; leaving (on drop, unwinding included)
    /// clears the mark.
    #[must_use]
    pub(crate) struct Entered {
        #[cfg(all(debug_assertions, not(loom)))]
        rank: u8,
    }

    /// A lock of `rank` is being taken: panics (in debug builds) if the thread holds one of the
    /// same or a higher rank.
    #[inline]
    pub(crate) fn enter(rank: u8) -> Entered {
        #[cfg(all(debug_assertions, not(loom)))]
        {
            HELD.with(|h| {
                let held = h.get();
                assert!(
                    held >> rank == 0,
                    "lock order: a rank-{rank} lock taken while holding a lock of rank >= {rank} \
                     (held ranks {held:#b}; see sync::lock_order)"
                );
                h.set(held | 1 << rank);
            });
            Entered { rank }
        }
        #[cfg(not(all(debug_assertions, not(loom))))]
        {
            let _ = rank;
            Entered {}
        }
    }

    impl Drop for Entered {
        #[inline]
        fn drop(&mut self) {
            #[cfg(all(debug_assertions, not(loom)))]
            HELD.with(|h| h.set(h.get() & !(1 << self.rank)));
        }
    }
}

/// A futex-style wait queue for one object: threads sleep on it only if a check run under
/// the queue's internal lock (`validate`) still says so, and [`WaitQueue::wake_all`] takes
/// that lock, so a wake-up issued after the condition changed cannot fall between a waiter's
/// check and its sleep. Outside loom it is `parking_lot_core`'s park/unpark keyed by the
/// queue's address (no memory of its own beyond the one byte that gives it an address);
/// under loom, a mutex and condition variable with the same contract.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    #[cfg(not(loom))]
    _addr: u8,
    #[cfg(loom)]
    wait: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl WaitQueue {
    /// Sleeps if `validate` (run under the queue's lock) returns true, until woken or until
    /// `deadline` (ignored under loom, which has no time). Returns false if it timed out.
    pub(crate) fn wait(
        &self,
        validate: impl FnOnce() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        #[cfg(not(loom))]
        {
            // SAFETY: the key is this queue's address, used only for this queue; `validate`
            // and the callbacks neither panic nor call into parking_lot_core.
            let r = unsafe {
                parking_lot_core::park(
                    self as *const WaitQueue as usize,
                    validate,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    deadline,
                )
            };
            r != parking_lot_core::ParkResult::TimedOut
        }
        #[cfg(loom)]
        {
            let _ = deadline;
            let guard = self.wait.0.lock().unwrap();
            if validate() {
                drop(self.wait.1.wait(guard).unwrap());
            }
            true
        }
    }

    /// Wakes every sleeper.
    pub(crate) fn wake_all(&self) {
        #[cfg(not(loom))]
        // SAFETY: the key is this queue's address (see `wait`).
        unsafe {
            parking_lot_core::unpark_all(
                self as *const WaitQueue as usize,
                parking_lot_core::DEFAULT_UNPARK_TOKEN,
            );
        }
        #[cfg(loom)]
        {
            drop(self.wait.0.lock().unwrap());
            self.wait.1.notify_all();
        }
    }
}

/// A small number for the calling thread: the lowest one no other live thread holds. Shards
/// (per-owner ID blocks and free lists, the registry's count stripes) are picked by
/// `thread_index() & mask`, so up to `mask + 1` threads that run at the same time always get
/// different shards, however many threads came and went before them. (The CPU number would
/// avoid even that bound, but a thread that migrates would then switch ID blocks, and IDs on
/// one thread would stop coming out in order.)
///
/// The index is claimed at the thread's first call, lock-free, from a bitmap of
/// [`THREAD_SLOTS`] indices, and given back when the thread exits. Beyond that many live
/// threads, indices come from a counter and are not reused (still unique, so a count stripe
/// keeps its single writer).
#[cfg(not(loom))]
pub(crate) fn thread_index() -> usize {
    static USED: [std::sync::atomic::AtomicU64; THREAD_SLOTS / 64] =
        [const { std::sync::atomic::AtomicU64::new(0) }; THREAD_SLOTS / 64];
    static BEYOND: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(THREAD_SLOTS);

    fn claim() -> usize {
        for (w, word) in USED.iter().enumerate() {
            // Relaxed: a hint; the compare-exchange decides.
            let mut bits = word.load(Ordering::Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros();
                // AcqRel: Acquire pairs with the Release in `Held::drop` of the index's previous
                // holder, so its last writes to a single-writer stripe happen before ours.
                match word.compare_exchange_weak(
                    bits,
                    bits | 1 << bit,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return w * 64 + bit as usize,
                    Err(now) => bits = now,
                }
            }
        }
        // Relaxed: uniqueness comes from the atomic add.
        BEYOND.fetch_add(1, Ordering::Relaxed)
    }

    struct Held(usize);
    impl Drop for Held {
        fn drop(&mut self) {
            if self.0 < THREAD_SLOTS {
                // Release: pairs with the Acquire of the next claimer of this index (above).
                USED[self.0 / 64].fetch_and(!(1 << (self.0 % 64)), Ordering::Release);
            }
        }
    }
    thread_local! {
        static INDEX: Held = Held(claim());
    }
    // During thread teardown the index may already be gone: any shard is correct, and the
    // count stripe of an unowned index is written with an atomic add (see `Count::add_as`).
    INDEX.try_with(|h| h.0).unwrap_or(usize::MAX)
}

/// Indices `thread_index` hands out and takes back.
#[cfg(not(loom))]
pub(crate) const THREAD_SLOTS: usize = 1024;

/// Under loom all model threads share shard 0 (the shard choice is a performance matter only).
#[cfg(loom)]
pub(crate) fn thread_index() -> usize {
    0
}

#[cfg(all(test, loom))]
mod tests {
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
}
