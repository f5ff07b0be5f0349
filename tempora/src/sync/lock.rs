//! The locks: [`ByteLock`], tempora's one-byte lock, and the ranked types every lock of the
//! crate is held through: [`Locked`], [`RankedLock`], [`RankedMutex`], and their guards.

use super::order::RankToken;
use super::primitives::{backoff, fence, AtomicU32, AtomicU8, Ordering, Poisoned, UnsafeCell};

/// The parking mutex under [`RankedMutex`].
#[cfg(loom)]
use loom::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard};

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
pub(super) struct ByteLock(AtomicU8);

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

/// State of type `T` under a one-byte lock of rank `RANK` ([`rank`](super::rank)): the only way to reach
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
    pub(crate) const fn new() -> Self {
        RankedLock(ByteLock::new())
    }
    #[cfg(loom)]
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

/// A lock of rank `RANK` that also counts its releases, so that a reader can read what it
/// guards without taking it: a timer's lock (`registry/timer.rs`), whose state `gettime`
/// reads this way (`Timer::read_unlocked`), so that a `gettime` never holds a lock a signal
/// handler on its thread could need.
///
/// One word: bits 0-1 the state (`0` free, `1` held, `3` poisoned), bits 2-31 the version,
/// bumped by every release. Lock is a load and one compare-exchange of the free word to the
/// held one (Acquire); a contender writes nothing while the lock is held. Unlock is one store
/// (Release) of the next version: only the holder writes a held word. (Not a `fetch_or` of
/// the held bit: a contender's no-op write of a held word would sit between the holder's
/// acquire and release in the word's order, and loom then finds runs in which the contender
/// keeps reading its own write.) Same size as the four bytes a timer's written line gives its
/// lock.
///
/// A reader ([`VersionedLock::read_begin`], [`VersionedLock::read_valid`]) loads the word
/// (Acquire: it sees everything written before the release that made it), reads, and loads it
/// again after an Acquire fence: an unchanged free word means no holder wrote meanwhile. For
/// that, taking the lock ([`VersionedLock::with`]) issues a Release fence after taking the lock, so that a
/// reader that sees any store of the critical section sees the held word (or a later one) at
/// its second load. A holder's stores and a reader's loads of the guarded state may still race
/// in the language's model; the reader uses what it read only once the word shows no writer
/// ran, and reads plain-old-data only (the loom test `loom_versioned_read_sees_one_version`
/// checks the protocol on atomics). The version wraps after 2^30 releases: a reader stalled
/// across exactly that many writes to one timer could accept a torn read.
///
/// Unwinding as [`ByteLock`]: a critical section run through [`VersionedLock::with`] that
/// panics leaves the lock poisoned.
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct VersionedLock<const RANK: u8>(AtomicU32);

const V_HELD: u32 = 1;
const V_POISONED: u32 = 3;
const V_STATE: u32 = 3;
/// One release: the version is the word's bits 2-31.
const V_STEP: u32 = 4;

/// Why a reader could not read a [`VersionedLock`]'s state now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// A holder is changing it.
    Held,
    /// A holder panicked while changing it.
    Poisoned,
}

impl<const RANK: u8> VersionedLock<RANK> {
    #[inline]
    fn acquire(&self) -> Result<(), Poisoned> {
        // Relaxed: the compare-exchange below is the synchronising access.
        let w = self.0.load(Ordering::Relaxed);
        // Acquire: pairs with the Release store in `release` of the previous holder.
        if w & V_STATE != 0
            || self
                .0
                .compare_exchange_weak(w, w | V_HELD, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            self.acquire_contended()?;
        }
        // Release: a reader that sees a store made under the lock sees the held word too
        // (the type's doc).
        fence(Ordering::Release);
        Ok(())
    }

    #[cold]
    fn acquire_contended(&self) -> Result<(), Poisoned> {
        let mut spins = 0;
        loop {
            // Relaxed: only a hint; the `fetch_or` below is the synchronising access.
            let w = self.0.load(Ordering::Relaxed);
            if w & V_STATE == V_POISONED {
                return Err(Poisoned);
            }
            // Acquire: as in `acquire`.
            if w & V_STATE == 0
                && self
                    .0
                    .compare_exchange_weak(w, w | V_HELD, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Ok(());
            }
            backoff(&mut spins);
        }
    }

    #[inline]
    fn release(&self) {
        // Relaxed: the holder's own word (nobody else writes a held word).
        let w = self.0.load(Ordering::Relaxed);
        // Release: pairs with the Acquire of the next holder and of readers.
        self.0
            .store((w & !V_STATE).wrapping_add(V_STEP), Ordering::Release);
    }

    /// Runs `f` with the lock held: released afterwards, poisoned if `f` panics.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> Result<R, Poisoned> {
        let _rank = RankToken::<RANK>::enter();
        self.acquire()?;
        let guard = PoisonVersioned(self);
        let r = f();
        std::mem::forget(guard);
        self.release();
        Ok(r)
    }

    /// Whether a holder panicked inside the lock.
    pub(crate) fn is_poisoned(&self) -> bool {
        // Relaxed: a report.
        self.0.load(Ordering::Relaxed) & V_STATE == V_POISONED
    }

    /// Opens a read without the lock: the word to hand to [`VersionedLock::read_valid`].
    #[inline]
    pub(crate) fn read_begin(&self) -> Result<u32, Unreadable> {
        // Acquire: pairs with the Release store of the last release: its writes are visible.
        let w = self.0.load(Ordering::Acquire);
        match w & V_STATE {
            0 => Ok(w),
            V_POISONED => Err(Unreadable::Poisoned),
            _ => Err(Unreadable::Held),
        }
    }

    /// Whether no holder wrote since [`VersionedLock::read_begin`] returned `begun`.
    #[inline]
    pub(crate) fn read_valid(&self, begun: u32) -> bool {
        // Acquire: orders the reads before the re-check (pairs with the Release fence in
        // `acquire`).
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        self.0.load(Ordering::Relaxed) == begun
    }
}

/// Dropped only while unwinding out of a [`VersionedLock`]'s critical section.
struct PoisonVersioned<'a, const RANK: u8>(&'a VersionedLock<RANK>);

impl<const RANK: u8> Drop for PoisonVersioned<'_, RANK> {
    fn drop(&mut self) {
        // Release: whoever sees the poison also sees what the holder wrote before it.
        self.0 .0.fetch_or(V_POISONED, Ordering::Release);
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

    /// Takes the mutex, poisoned or not, if nobody holds it; `None` if someone does: for
    /// work that any one caller may do while the others go on without it.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn try_lock_or_recover(&self) -> Option<MutexGuard<'_, T, RANK>> {
        let rank = RankToken::<RANK>::enter();
        let guard = match self.inner.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(MutexGuard { guard, _rank: rank })
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
