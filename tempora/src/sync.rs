//! Synchronisation primitives, swapped for loom's model-checked ones under `cfg(loom)`.
//!
//! Everything in tempora that is shared between threads takes its atomics from here, so the
//! loom tests (`--cfg loom`, `.ci/loom.sh`) check the same code that ships.
//!
//! Every lock of the crate is held through this module's ranked types ([`Locked`],
//! [`RankedLock`], [`RankedMutex`], and [`RankToken`] for a lock whose mechanism lives
//! elsewhere), whose type names the lock's rank in the crate's one lock order ([`rank`]);
//! debug builds check the order at every lock.
//!
//! [`ByteLock`], the one-byte lock under [`Locked`] and [`RankedLock`], is tempora's own,
//! written here rather than taken from a crate because it must fit in one byte of a timer's
//! written cache line, and because its unlock is a plain release store (one atomic
//! read-modify-write per lock/unlock pair instead of two; BENCHMARKS.md, "Design
//! measurements", measures the alternative).

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

/// The parking mutex under [`RankedMutex`].
#[cfg(loom)]
use loom::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard};

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
/// holder could starve it; with many more threads than CPUs the yield is what lets a preempted
/// holder run.
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
/// It is the mechanism under [`Locked`] and [`RankedLock`], which are how the rest of the crate
/// holds one (with a rank, checked in debug builds); nothing outside this module names it.
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
struct ByteLock(AtomicU8);

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
struct PoisonOnUnwind<'a>(&'a ByteLock);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.poison();
    }
}

/// The CPUs this process may run on (1 if unknown): what per-CPU structures are sized by.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The lock order of the whole crate: every lock's rank, in one place.
///
/// A thread may take a lock only while every lock it holds has a lower rank; locks of one
/// rank are never held together, except the hash buckets of a table split (the old bucket,
/// then the two future buckets: [`RankToken::nested`]). Every lock of the crate is one of
/// [`Locked`], [`RankedLock`] or [`RankedMutex`], or (for a lock whose mechanism lives
/// elsewhere: a hash bucket's head bit, an owner's restore section) holds a [`RankToken`]
/// while it is held; each names its rank in its type, so the rank of every lock is stated
/// where the lock is declared, and debug builds check the rule at every lock (the tests
/// `lock_order_violation_is_caught_in_debug_builds` and `queue_and_bucket_locks_are_ranked`).
/// Release builds (and loom models, whose threads share one OS thread) compile the check away.
///
/// [`TABLE`] lists every lock with its rank, where it lives and what its holders take; the
/// unit test `lock_table_matches_architecture_md` checks that ARCHITECTURE.md shows exactly
/// that table.
pub(crate) mod rank {
    /// An owner's exclusive restore section (`registry/owner.rs`).
    pub(crate) const SECTION: u8 = 0;
    /// The global service's build lock (`time.rs`).
    pub(crate) const BUILDING: u8 = 0;
    /// An owner's ID shard (`registry/owner.rs`).
    pub(crate) const SHARD: u8 = 1;
    /// A base's delivery lock (`timers/base.rs`).
    pub(crate) const DELIVERY: u8 = 1;
    /// A timer (`registry/timer.rs`); a sleep's cell (`timers/sleep.rs`).
    pub(crate) const TIMER: u8 = 2;
    /// The service's deadline-fd lock (`timers/wake.rs`).
    pub(crate) const DEADLINE_FD: u8 = 3;
    /// The service's list of owners' event queues (`timers/health.rs`).
    pub(crate) const OWNERS: u8 = 3;
    /// A base (`timers/base.rs`).
    pub(crate) const BASE: u8 = 4;
    /// A hash bucket (`registry/table.rs`; a split: the old bucket, then two future buckets).
    pub(crate) const BUCKET: u8 = 4;
    /// An owner's readiness-fd lock (`timers/notify.rs`).
    pub(crate) const READY_FD: u8 = 4;
    /// An owner's event queue (`timers/notify.rs`; taken under READY_FD and TIMER).
    pub(crate) const QUEUE: u8 = 5;
    /// The statistics' one-flush-at-a-time lock (`stats/tally.rs`).
    pub(crate) const FLUSHING: u8 = 6;
    /// A statistics list's naive-flush lock (`stats/tally.rs`, `bench-internals` only).
    #[cfg(feature = "bench-internals")]
    pub(crate) const STATS_LIST: u8 = 7;
    /// An owner's flushed statistics totals (`stats/tally.rs`); a group's (`stats/group.rs`).
    pub(crate) const TOTALS: u8 = 8;
    /// The statistics' list of member owners (`stats/tally.rs`).
    pub(crate) const MEMBERS: u8 = 9;
    /// A statistics group's list of children (`stats/group.rs`).
    pub(crate) const CHILDREN: u8 = 9;
    /// The service's list of spare driver threads (`timers/core.rs`).
    pub(crate) const SPARES: u8 = 9;
    /// A standby's callbacks not yet run (`timers/standby.rs`).
    pub(crate) const PENDING: u8 = 9;
    /// A standby's timerfd plan (`timers/standby.rs`; it arms the fd under it).
    pub(crate) const PLAN: u8 = 9;
    /// An owner's slot-page directory grow lock (`registry/slots.rs`).
    pub(crate) const PAGE_GROW: u8 = 9;

    /// The naive-flush lock's rank, for [`TABLE`], which lists it whether or not the feature
    /// is on (so that ARCHITECTURE.md has one table).
    const STATS_LIST_RANK: u8 = 7;
    #[cfg(feature = "bench-internals")]
    const _: () = assert!(STATS_LIST == STATS_LIST_RANK);

    /// One lock of the crate: its rank, what it is, where it lives, and what its holders take
    /// while they hold it.
    #[allow(dead_code, reason = "read by the lock-table test")]
    pub(crate) struct Lock {
        pub(crate) rank: u8,
        pub(crate) lock: &'static str,
        pub(crate) at: &'static str,
        pub(crate) held_while_taking: &'static str,
    }

    /// Every lock of the crate, by rank: ARCHITECTURE.md's lock table is this one, rendered
    /// (the unit test `lock_table_matches_architecture_md`).
    #[allow(dead_code, reason = "read by the lock-table test")]
    pub(crate) const TABLE: &[Lock] = &[
        Lock {
            rank: SECTION,
            lock: "an owner's exclusive restore section",
            at: "`registry/owner.rs`",
            held_while_taking: "an ID shard, a hash bucket, a timer (the section's creates)",
        },
        Lock {
            rank: BUILDING,
            lock: "the global service's build lock",
            at: "`time.rs`",
            held_while_taking: "the owners and spares lists (a failed build stops its drivers)",
        },
        Lock {
            rank: SHARD,
            lock: "an owner's ID shard",
            at: "`registry/owner.rs`",
            held_while_taking: "a hash bucket (a create), the slot pages' grow lock",
        },
        Lock {
            rank: DELIVERY,
            lock: "a base's delivery lock",
            at: "`timers/base.rs`",
            held_while_taking: "a timer or a sleep's cell (a poll delivering what it popped)",
        },
        Lock {
            rank: TIMER,
            lock: "a timer; a sleep's cell",
            at: "`registry/timer.rs`, `timers/sleep.rs`",
            held_while_taking: "a base (arm, disarm, the delete hook), an event queue (an \
                                expiry queued), the deadline-fd lock or a standby's fd plan \
                                (a ring), a readiness-fd lock (after a push), a naive-flush \
                                lock (an expiry counted)",
        },
        Lock {
            rank: DEADLINE_FD,
            lock: "the service's deadline-fd lock",
            at: "`timers/wake.rs`",
            held_while_taking: "each base in turn (a refresh after a poll)",
        },
        Lock {
            rank: OWNERS,
            lock: "the service's list of owners' event queues",
            at: "`timers/health.rs`",
            held_while_taking: "nothing (a halt closes the queues once it has let go of it)",
        },
        Lock {
            rank: BASE,
            lock: "a base",
            at: "`timers/base.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: BUCKET,
            lock: "a hash bucket",
            at: "`registry/table.rs`",
            held_while_taking: "the two future buckets, nested (a table split)",
        },
        Lock {
            rank: READY_FD,
            lock: "an owner's readiness-fd lock",
            at: "`timers/notify.rs`",
            held_while_taking: "its owner's event queue",
        },
        Lock {
            rank: QUEUE,
            lock: "an owner's event queue",
            at: "`timers/notify.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: FLUSHING,
            lock: "the statistics' flush lock",
            at: "`stats/tally.rs`",
            held_while_taking: "the naive-flush locks, the totals",
        },
        Lock {
            rank: STATS_LIST_RANK,
            lock: "a statistics list's naive-flush lock (`bench-internals` only)",
            at: "`stats/tally.rs`",
            held_while_taking: "the totals (the naive flush aggregates under it)",
        },
        Lock {
            rank: TOTALS,
            lock: "an owner's or a group's flushed statistics totals",
            at: "`stats/tally.rs`, `stats/group.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: MEMBERS,
            lock: "the statistics' list of member owners",
            at: "`stats/tally.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: CHILDREN,
            lock: "a statistics group's children",
            at: "`stats/group.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: SPARES,
            lock: "the service's list of spare driver threads",
            at: "`timers/core.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: PENDING,
            lock: "a standby's callbacks not yet run",
            at: "`timers/standby.rs`",
            held_while_taking: "nothing",
        },
        Lock {
            rank: PLAN,
            lock: "a standby's timerfd plan",
            at: "`timers/standby.rs`",
            held_while_taking: "nothing (it arms the timerfd)",
        },
        Lock {
            rank: PAGE_GROW,
            lock: "an owner's slot-page directory grow lock",
            at: "`registry/slots.rs`",
            held_while_taking: "nothing",
        },
    ];
}

/// The debug-build record of the ranks the calling thread holds.
mod order {
    #[cfg(all(debug_assertions, not(loom)))]
    thread_local! {
        /// Bit `r` set: this thread holds a lock of rank `r`.
        static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// A lock of `rank` is being taken: panics (in debug builds) if the thread holds one of the
    /// same or a higher rank; marks the rank held.
    #[inline(always)]
    pub(super) fn enter(rank: u8) {
        #[cfg(all(debug_assertions, not(loom)))]
        HELD.with(|h| {
            let held = h.get();
            assert!(
                held >> rank == 0,
                "lock order: a rank-{rank} lock taken while holding a lock of rank >= {rank} \
                 (held ranks {held:#b}; see sync::rank)"
            );
            h.set(held | 1 << rank);
        });
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = rank;
    }

    /// A second lock of `rank` is being taken by a holder of one: panics (in debug builds)
    /// unless the thread holds `rank` and nothing above it. Marks nothing.
    #[inline(always)]
    pub(super) fn enter_nested(rank: u8) {
        #[cfg(all(debug_assertions, not(loom)))]
        HELD.with(|h| {
            let held = h.get();
            assert!(
                held >> rank == 1,
                "lock order: a nested rank-{rank} lock taken while not holding exactly rank \
                 {rank} at the top (held ranks {held:#b}; see sync::rank)"
            );
        });
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = rank;
    }

    /// The lock of `rank` that [`enter`] marked was released.
    #[inline(always)]
    #[cfg_attr(
        not(all(debug_assertions, not(loom))),
        allow(dead_code, reason = "only debug builds mark ranks")
    )]
    pub(super) fn leave(rank: u8) {
        #[cfg(all(debug_assertions, not(loom)))]
        HELD.with(|h| h.set(h.get() & !(1 << rank)));
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = rank;
    }
}

/// Proof that the calling thread holds a lock of rank `RANK`, checked against the lock order
/// when it was made ([`rank`]); dropping it (unwinding included) clears the mark. Every guard
/// of this module holds one. It is free in release builds: a zero-sized value whose making
/// and dropping compile to nothing.
///
/// Made by hand only for the locks whose mechanism lives elsewhere: a hash bucket's head bit
/// (`registry/table.rs`) and an owner's restore section (`registry/owner.rs`).
#[must_use]
pub(crate) struct RankToken<const RANK: u8> {
    /// Whether this token marked the rank (a nested one did not).
    #[cfg(all(debug_assertions, not(loom)))]
    marked: bool,
    /// The mark is the thread's: the token stays on it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl<const RANK: u8> RankToken<RANK> {
    /// A lock of rank `RANK` is being taken: panics (debug builds) if the thread holds a lock
    /// of the same or a higher rank.
    #[inline(always)]
    pub(crate) fn enter() -> Self {
        const { assert!(RANK < 32, "ranks are bits of a u32") };
        order::enter(RANK);
        RankToken {
            #[cfg(all(debug_assertions, not(loom)))]
            marked: true,
            _thread: std::marker::PhantomData,
        }
    }

    /// A second lock of rank `RANK` is being taken by the holder of `outer`, the one case
    /// where the rule allows two of a rank: a table split's future buckets, under the old
    /// bucket. Panics (debug builds) if the thread holds anything above `RANK`.
    #[inline(always)]
    pub(crate) fn nested(outer: &RankToken<RANK>) -> Self {
        let _ = outer;
        order::enter_nested(RANK);
        RankToken {
            #[cfg(all(debug_assertions, not(loom)))]
            marked: false,
            _thread: std::marker::PhantomData,
        }
    }
}

impl<const RANK: u8> Drop for RankToken<RANK> {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(all(debug_assertions, not(loom)))]
        if self.marked {
            order::leave(RANK);
        }
    }
}

/// State of type `T` under a one-byte lock of rank `RANK` ([`rank`]): the only way to reach
/// the state is with the lock held, through [`Locked::with`] or [`Locked::lock`]. A panic
/// inside the critical section poisons the lock (as [`ByteLock::with`]): every later lock
/// fails with [`Poisoned`].
///
/// [`Locked::with`] is the hot form: in release builds it is exactly the lock's
/// compare-exchange, `f` on the state, and the unlocking store.
pub(crate) struct Locked<T, const RANK: u8> {
    lock: ByteLock,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only with the lock held (`with`, `lock`), by one thread at a
// time, so sharing a `Locked` shares a `T` only as a `Mutex<T>` does: `T: Send` suffices.
unsafe impl<T: Send, const RANK: u8> Sync for Locked<T, RANK> {}

impl<T, const RANK: u8> std::fmt::Debug for Locked<T, RANK> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked")
            .field("rank", &RANK)
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl<T: Default, const RANK: u8> Default for Locked<T, RANK> {
    fn default() -> Self {
        Locked::new(T::default())
    }
}

impl<T, const RANK: u8> Locked<T, RANK> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Locked {
            lock: ByteLock::new(),
            value: UnsafeCell::new(value),
        }
    }
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Locked {
            lock: ByteLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the state with the lock held: released afterwards, poisoned if `f` panics;
    /// [`Poisoned`] once an earlier holder panicked.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Poisoned> {
        let _rank = RankToken::<RANK>::enter();
        // SAFETY: `ByteLock::with` holds the lock for the whole closure, and the state is
        // reached only under it: this is the only reference.
        self.lock
            .with(|| self.value.with_mut(|p| f(unsafe { &mut *p })))
    }

    /// Takes the lock: the guard gives the state, and releases the lock when dropped (poisons
    /// it if dropped by a panic that began while it was held).
    #[inline]
    #[allow(
        dead_code,
        reason = "the guard form, for holders that cannot use a closure"
    )]
    pub(crate) fn lock(&self) -> Result<Guard<'_, T, RANK>, Poisoned> {
        let rank = RankToken::<RANK>::enter();
        self.lock.lock()?;
        Ok(Guard {
            locked: self,
            panicking: std::thread::panicking(),
            _rank: rank,
        })
    }

    /// Whether a holder panicked inside the lock.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.lock.is_poisoned()
    }
}

/// The state of a held [`Locked`]; the lock is released when the guard is dropped.
#[must_use]
pub(crate) struct Guard<'a, T, const RANK: u8> {
    locked: &'a Locked<T, RANK>,
    /// Whether the thread was already unwinding when it took the lock.
    panicking: bool,
    // Dropped after `Drop::drop` released the lock: the mark outlives the lock.
    _rank: RankToken<RANK>,
}

impl<T, const RANK: u8> Guard<'_, T, RANK> {
    /// Takes `next`, of a higher rank (checked at compile time), while this one is held.
    #[inline]
    #[allow(dead_code, reason = "the compile-time-checked form of a nested lock")]
    pub(crate) fn then<'b, U, const S: u8>(
        &self,
        next: &'b Locked<U, S>,
    ) -> Result<Guard<'b, U, S>, Poisoned> {
        const {
            assert!(
                S > RANK,
                "a lock taken under another must have a higher rank"
            )
        };
        next.lock()
    }
}

impl<T, const RANK: u8> std::ops::Deref for Guard<'_, T, RANK> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the state exists.
        self.locked.value.with_mut(|p| unsafe { &*p })
    }
}

impl<T, const RANK: u8> std::ops::DerefMut for Guard<'_, T, RANK> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        self.locked.value.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T, const RANK: u8> Drop for Guard<'_, T, RANK> {
    #[inline]
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.locked.lock.poison();
        } else {
            self.locked.lock.unlock();
        }
    }
}

/// A bare one-byte lock of rank `RANK`, for state laid out beside it that cannot sit in one
/// cell with it: a timer's lock, at a fixed offset of the timer's written cache line
/// (`registry/timer.rs`). Same size and layout as [`ByteLock`]; the rank check as in
/// [`Locked`].
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct RankedLock<const RANK: u8>(ByteLock);

impl<const RANK: u8> RankedLock<RANK> {
    #[cfg(not(loom))]
    #[allow(dead_code, reason = "the locks that use it are built by `Default`")]
    pub(crate) const fn new() -> Self {
        RankedLock(ByteLock::new())
    }
    #[cfg(loom)]
    #[allow(dead_code, reason = "the locks that use it are built by `Default`")]
    pub(crate) fn new() -> Self {
        RankedLock(ByteLock::new())
    }

    /// Runs `f` with the lock held: released afterwards, poisoned if `f` panics.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> Result<R, Poisoned> {
        let _rank = RankToken::<RANK>::enter();
        self.0.with(f)
    }

    /// Takes the lock until the guard is dropped (poisoned if dropped by a panic that began
    /// while it was held).
    #[inline]
    #[allow(
        dead_code,
        reason = "the guard form, for holders that cannot use a closure"
    )]
    pub(crate) fn lock(&self) -> Result<LockGuard<'_, RANK>, Poisoned> {
        let rank = RankToken::<RANK>::enter();
        self.0.lock()?;
        Ok(LockGuard {
            lock: self,
            panicking: std::thread::panicking(),
            _rank: rank,
        })
    }

    /// Marks the lock, which the caller holds, poisoned for good.
    #[allow(
        dead_code,
        reason = "for holders that detect a broken invariant themselves"
    )]
    pub(crate) fn poison(&self) {
        self.0.poison();
    }

    /// Whether a holder panicked inside the lock.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.0.is_poisoned()
    }
}

/// A held [`RankedLock`]; released when dropped.
#[must_use]
pub(crate) struct LockGuard<'a, const RANK: u8> {
    lock: &'a RankedLock<RANK>,
    panicking: bool,
    _rank: RankToken<RANK>,
}

impl<const RANK: u8> Drop for LockGuard<'_, RANK> {
    #[inline]
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.lock.0.poison();
        } else {
            self.lock.0.unlock();
        }
    }
}

/// A `std` mutex (loom's under `cfg(loom)`) of rank `RANK`, checked at every lock like the
/// others: for the locks held across a batch of work or a system call, where a waiter should
/// park rather than spin.
pub(crate) struct RankedMutex<T, const RANK: u8> {
    inner: StdMutex<T>,
}

impl<T: std::fmt::Debug, const RANK: u8> std::fmt::Debug for RankedMutex<T, RANK> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankedMutex")
            .field("rank", &RANK)
            .finish_non_exhaustive()
    }
}

impl<T: Default, const RANK: u8> Default for RankedMutex<T, RANK> {
    fn default() -> Self {
        RankedMutex::new(T::default())
    }
}

impl<T, const RANK: u8> RankedMutex<T, RANK> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        RankedMutex {
            inner: StdMutex::new(value),
        }
    }
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        RankedMutex {
            inner: StdMutex::new(value),
        }
    }

    /// Takes the mutex; [`Poisoned`] if a holder panicked.
    #[inline]
    #[allow(
        dead_code,
        reason = "for the mutexes whose holders can panic mid-change"
    )]
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, T, RANK>, Poisoned> {
        let rank = RankToken::<RANK>::enter();
        let guard = self.inner.lock().map_err(|_| Poisoned)?;
        Ok(MutexGuard { guard, _rank: rank })
    }

    /// Takes the mutex, poisoned or not: for the mutexes under which nothing can panic but
    /// what would leave the state consistent (a push, a prune, an addition).
    #[inline]
    pub(crate) fn lock_or_recover(&self) -> MutexGuard<'_, T, RANK> {
        let rank = RankToken::<RANK>::enter();
        let guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        MutexGuard { guard, _rank: rank }
    }

    /// The state, poisoned or not.
    #[allow(dead_code, reason = "for owners that take the state back")]
    pub(crate) fn into_inner(self) -> T {
        self.inner
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A held [`RankedMutex`]; released when dropped.
#[must_use]
pub(crate) struct MutexGuard<'a, T, const RANK: u8> {
    // Dropped first: the mutex is released before the rank mark is cleared.
    guard: StdMutexGuard<'a, T>,
    _rank: RankToken<RANK>,
}

impl<T, const RANK: u8> MutexGuard<'_, T, RANK> {
    /// Runs `f` on the state of `next`, of a higher rank (checked at compile time), while
    /// this one is held.
    #[inline]
    pub(crate) fn then_with<U, R, const S: u8>(
        &self,
        next: &Locked<U, S>,
        f: impl FnOnce(&mut U) -> R,
    ) -> Result<R, Poisoned> {
        const {
            assert!(
                S > RANK,
                "a lock taken under another must have a higher rank"
            )
        };
        next.with(f)
    }
}

impl<T, const RANK: u8> std::ops::Deref for MutexGuard<'_, T, RANK> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T, const RANK: u8> std::ops::DerefMut for MutexGuard<'_, T, RANK> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
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
}

/// The message of a panic `catch_unwind` caught (`r` must be the error): for the tests that
/// check what a lock-order violation says.
#[cfg(test)]
pub(crate) fn panic_message(r: Result<(), Box<dyn std::any::Any + Send>>) -> String {
    let e = r.expect_err("the call panics");
    (e.downcast_ref::<String>().cloned())
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[cfg(all(test, not(loom)))]
mod order_tests {
    use super::*;

    /// What no file but this one may name: the raw locks, which carry no rank.
    const RAW_LOCKS: &[&str] = &[
        "std::sync::Mutex",
        "loom::sync::Mutex",
        "parking_lot::Mutex",
        "ByteLock",
        "StdMutex",
    ];

    /// The raw locks `text` names, including `Mutex` inside a `std::sync::{..}` or
    /// `loom::sync::{..}` import.
    fn raw_locks_named(text: &str) -> Vec<String> {
        let mut found: Vec<String> = RAW_LOCKS
            .iter()
            .filter(|name| text.contains(*name))
            .map(|name| name.to_string())
            .collect();
        for prefix in ["std::sync::{", "loom::sync::{"] {
            for (at, _) in text.match_indices(prefix) {
                let rest = &text[at + prefix.len()..];
                let list = &rest[..rest.find('}').unwrap_or(rest.len())];
                if list
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| word == "Mutex")
                {
                    found.push(format!("{prefix}Mutex..}}"));
                }
            }
        }
        found
    }

    /// The part of a source file that is not test scaffolding: everything before its first
    /// `#[cfg(...test...)]` attribute on a `mod` (the in-file test modules come last).
    fn non_test_part(text: &str) -> &str {
        let lines: Vec<&str> = text.lines().collect();
        let mut offset = 0;
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if t.starts_with("#[cfg(") && t.contains("test") {
                let next = lines.get(i + 1).map_or("", |l| l.trim_start());
                if next.starts_with("mod ") {
                    return &text[..offset];
                }
            }
            offset += line.len() + 1;
        }
        text
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every lock of the crate is held through this module's ranked types: no source file
    /// but `sync.rs` names a raw lock. Exempt: test scaffolding, which may need a plain mutex
    /// to collect what callbacks saw (files named `tests.rs` or `*_tests.rs`, and the in-file
    /// test modules at the end of a file, and the files of a `tests/` folder).
    #[test]
    fn only_sync_names_raw_locks() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut offenders = Vec::new();
        for path in files {
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let name = path.file_name().unwrap().to_string_lossy();
            let test_file = name == "tests.rs"
                || name.ends_with("_tests.rs")
                || rel.contains("/tests/")
                || rel == "testing.rs";
            if rel == "sync.rs" || test_file {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let named = raw_locks_named(non_test_part(&text));
            if !named.is_empty() {
                offenders.push(format!("{rel}: {named:?}"));
            }
        }
        assert!(
            offenders.is_empty(),
            "raw locks outside sync.rs (hold them through sync::Locked, RankedLock or \
             RankedMutex): {offenders:#?}"
        );
    }

    /// `rank::TABLE` rendered as ARCHITECTURE.md's lock table.
    fn rendered_table() -> String {
        let mut out =
            String::from("| rank | lock | where | held while taking |\n|---|---|---|---|\n");
        for l in rank::TABLE {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                l.rank, l.lock, l.at, l.held_while_taking
            ));
        }
        out
    }

    /// ARCHITECTURE.md's lock table is `rank::TABLE`, exactly (regenerate it from the
    /// failure message).
    #[test]
    fn lock_table_matches_architecture_md() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let begin = "<!-- lock-table:begin -->\n";
        let end = "<!-- lock-table:end -->";
        let from = doc
            .find(begin)
            .expect("ARCHITECTURE.md has the begin marker")
            + begin.len();
        let to = from + doc[from..].find(end).expect("and the end marker after it");
        let want = rendered_table();
        assert!(
            doc[from..to] == want,
            "ARCHITECTURE.md's lock table differs from sync::rank::TABLE; it should read:\n\n\
             {begin}{want}{end}\n"
        );
    }

    /// The table lists the locks in rank order, and the ranks fit the check's mask.
    #[test]
    fn lock_table_is_in_rank_order() {
        assert!(rank::TABLE.windows(2).all(|w| w[0].rank <= w[1].rank));
        assert!(rank::TABLE.iter().all(|l| l.rank < 32));
    }
    /// A guard releases its lock when dropped, and poisons it when dropped by a panic.
    #[test]
    fn guards_release_and_poison() {
        let cell = Locked::<u32, { rank::TIMER }>::new(1);
        *cell.lock().unwrap() += 1;
        assert_eq!(cell.with(|v| *v), Ok(2));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut g = cell.lock().unwrap();
            *g += 1;
            panic!("inside");
        }));
        assert!(r.is_err());
        assert!(cell.is_poisoned());
        assert!(cell.lock().is_err());
        let m = RankedMutex::<u32, { rank::TOTALS }>::new(3);
        *m.lock_or_recover() += 1;
        assert_eq!(*m.lock().unwrap(), 4);
        assert_eq!(m.into_inner(), 4);
    }
}
