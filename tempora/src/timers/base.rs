//! A base: one lock, one wheel per clock, and the delivery lock of its pollers.
//!
//! ```text
//!  Base (cache-line padded)
//!   ├─ lock: ByteLock                covers the three wheels and `sleep`
//!   ├─ wheels[REALTIME, MONOTONIC, BOOTTIME]: Wheel<Target>   ticks of `tick` ns on that clock
//!   ├─ sleep[3] (under the lock)     the tick on each wheel's clock before which the driver
//!   │                                serving this base must be woken (0: it is awake)
//!   └─ delivery: Mutex<()>           held from a poll's pop of a batch to its delivery
//! ```
//!
//! # Waking a sleeping driver
//!
//! A driver that goes to sleep until monotonic time `D` first publishes, under each of its
//! bases' locks, `sleep[w]` = the tick of `D` on wheel `w`'s clock (and re-reads that base's
//! wheels in the same critical section, lowering `D` if something earlier arrived, so every
//! published value is at or after the `D` it finally sleeps until). Whoever changes a wheel
//! compares, under the same lock, the wheel's new next expiry with `sleep[w]`; if it is
//! earlier, it clears `sleep` (one ring per sleep is enough) and rings the driver's doorbell
//! after unlocking. Both sides hold the base lock, so "the driver did not see the new timer
//! and the armer did not see the driver's deadline" is impossible. The ring itself cannot be
//! lost either (see `Doorbell`). Arming later than `D` rings nobody.
//!
//! A wheel entry's payload is the address of what waits on it (a [`Target`]): an interval
//! timer's object, or a sleep's cell (`sleep.rs`, which has its own rules). The timer in
//! turn records where it waits (`ItimerState::{base, wheel, wheel_key}`), written under the timer's
//! lock. An entry is *current* only while the timer, under its lock, still names that base,
//! wheel and key: expiry pops entries under the base lock and checks them under each timer's
//! lock afterwards, so an entry that a settime or delete replaced in between is ignored.
//!
//! # Delivery and the poll barrier
//!
//! A poll pops due entries under the base lock and delivers them (timer locks, event queues)
//! with that lock released. Between the two, the popped timers are still Armed but in no wheel:
//! a second poll that found the base empty could return while they are undelivered, and a
//! settime right after it would read "1 ns, overdue" and re-arm a timer that has in fact
//! fired. So each base also has a **delivery lock**: a poller holds it from the pop of a batch
//! until the batch is delivered (not while callbacks run: those run after it is released). A
//! poll takes it before each pop, so it waits for every delivery from this base that began
//! before it, as the kernel's `timer_settime` waits for a running timer in
//! `timer_wait_running`. Arming and cancelling never take it: only pollers wait for pollers.
//! A timer that a delivery re-arms (a callback timer's next period, a lazily refreshed timer
//! not yet due) goes back into the base it was popped from, so a poll that holds that base's
//! delivery lock next finds it there if it is due by then.
//!
//! Lock order (the crate's is in `sync::lock_order`): **delivery → timer → base**. settime,
//! delete and consume hold the timer's lock
//! and take a base lock to insert or remove; expiry takes the delivery lock, then the base lock
//! alone (to collect), releases the base lock, and only then takes timer locks. Nothing takes a
//! timer lock while holding a base lock, no path holds two base locks, and nothing takes a
//! delivery lock while holding any other tempora lock. Debug builds assert the base and timer
//! rules at every lock (`sync::lock_order`; the test
//! `lock_order_violation_is_caught_in_debug_builds`).
//!
//! # What runs under the base lock
//!
//! Wheel operations only, no callback and no system call: an arm's doorbell ring (a futex
//! wake-up) is issued after the base lock is released, though still under the arming timer's
//! lock. The wheels' slabs grow under the lock when a base holds more armed timers than ever
//! before (amortised growth by half; bounded by the timers armed on the base), and a realtime
//! re-base walks every entry of that wheel under it (only when the wall clock was set back).
//!
//! # Poisoning
//!
//! A panic inside a base's critical section poisons the base (see `sync::ByteLock`): every
//! later lock of it fails at once with [`Poisoned`], which the service reports as
//! `Error::Poisoned` to arming calls and as a failure of the whole service to its receivers.
//! A poisoned delivery lock (a panic while delivering) counts the same.

use super::fd;
use super::object::Itimer;
use super::sleep::SleepCell;
use crate::clock::{ClockId, Resolution, ALL_CLOCKS, CLOCKS};
use crate::registry::Timer;
use crate::sync::{
    lock_order, AtomicU64, ByteLock, Mutex, MutexGuard, Ordering, Poisoned, UnsafeCell, WaitQueue,
};
use crate::wheel::Wheel;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::time::Instant;

/// A wheel payload: the address of what waits on the entry, an interval timer's object or a
/// sleep's cell, told apart by the address's low bit (both are at least 8-byte aligned), so
/// the payload stays one word and the slab entry 32 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target(NonNull<u8>);

/// What a [`Target`] points at.
pub(crate) enum Waiting {
    Timer(NonNull<Timer<Itimer>>),
    Sleep(NonNull<SleepCell>),
}

const SLEEP_TAG: usize = 1;

impl Target {
    pub(crate) fn timer(t: NonNull<Timer<Itimer>>) -> Target {
        Target(t.cast())
    }

    pub(crate) fn sleep(s: NonNull<SleepCell>) -> Target {
        const { assert!(std::mem::align_of::<SleepCell>() > SLEEP_TAG) };
        Target(s.cast::<u8>().map_addr(|a| a | SLEEP_TAG))
    }

    pub(crate) fn get(self) -> Waiting {
        if self.0.addr().get() & SLEEP_TAG == 0 {
            Waiting::Timer(self.0.cast())
        } else {
            // Never zero: the untagged address is the cell's (`unwrap_or` only satisfies the type).
            let untag = |a: NonZeroUsize| NonZeroUsize::new(a.get() & !SLEEP_TAG).unwrap_or(a);
            Waiting::Sleep(self.0.map_addr(untag).cast())
        }
    }
}

// SAFETY: a `Target` is an address; it is dereferenced only by expiry, under the rules in
// `Core::deliver` (timers: pinned epoch, entry popped while current; sleeps: `sleep.rs`).
unsafe impl Send for Target {}

/// "No expiry": a wheel or a driver with nothing armed.
pub(crate) const NO_EXPIRY: u64 = u64::MAX;

pub(crate) struct Base {
    lock: ByteLock,
    state: UnsafeCell<BaseState>,
    /// Held by a poller from the pop of a batch until its delivery (module doc).
    delivery: Mutex<()>,
    /// Written by the holder of `delivery` only (`BaseCounters`).
    pub(crate) counters: BaseCounters,
}

/// A base's statistics ([`crate::stats::BaseStats`]). Each field has one writer at a time,
/// the poller holding the base's delivery lock (whose hand-over orders successive writers),
/// so it adds with a load and a store; readers load.
#[derive(Debug, Default)]
pub(crate) struct BaseCounters {
    polls: AtomicU64,
    fired: AtomicU64,
    batches: AtomicU64,
    max_hold_ns: AtomicU64,
}

impl BaseCounters {
    /// Counts one poll of the base. The caller holds the delivery lock.
    pub(crate) fn poll(&self) {
        bump(&self.polls, 1);
    }

    /// Counts a batch of `fired` firings whose pop held the base lock `held_ns` (if timed).
    /// The caller holds the delivery lock.
    pub(crate) fn batch(&self, fired: u64, held_ns: Option<u64>) {
        bump(&self.batches, 1);
        bump(&self.fired, fired);
        if let Some(h) = held_ns {
            // Relaxed: one writer (above).
            if h > self.max_hold_ns.load(Ordering::Relaxed) {
                self.max_hold_ns.store(h, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn read(&self, base: usize) -> crate::stats::BaseStats {
        // Relaxed: a reading of counters.
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        crate::stats::BaseStats {
            base,
            polls: r(&self.polls),
            fired: r(&self.fired),
            batches: r(&self.batches),
            max_pop_hold_ns: r(&self.max_hold_ns),
        }
    }
}

fn bump(a: &AtomicU64, n: u64) {
    // Relaxed: one writer (`BaseCounters`).
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// What the base lock covers.
pub(crate) struct BaseState {
    pub(crate) wheels: [Wheel<Target>; CLOCKS],
    /// See "Waking a sleeping driver" in the module doc.
    pub(crate) sleep: [u64; CLOCKS],
    /// What a ring does to `sleep`: clears it (a driver, which re-reads every base once
    /// awake), or lowers it to the entry that rang (the deadline fd, which stays armed at
    /// that entry and must hear of any earlier one: see [`DeadlineFd`]).
    pub(crate) ring_lowers: bool,
}

// SAFETY: `state` is only accessed with `lock` held (`Base::locked`); the payloads are `Send`.
unsafe impl Sync for Base {}
// SAFETY: as above.
unsafe impl Send for Base {}

impl Base {
    /// A base whose wheels start at the given ticks.
    pub(crate) fn new(start: [u64; CLOCKS]) -> Base {
        let wheel = |t: u64| {
            Wheel::builder()
                .start(t)
                .build()
                .expect("the default wheel levels are valid")
        };
        Base {
            lock: ByteLock::new(),
            state: UnsafeCell::new(BaseState {
                wheels: start.map(wheel),
                sleep: [0; CLOCKS],
                ring_lowers: false,
            }),
            delivery: Mutex::new(()),
            counters: BaseCounters::default(),
        }
    }

    /// Runs `f` on the base's state with the lock held; [`Poisoned`] if an earlier holder
    /// panicked (and a panic in `f` poisons it).
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut BaseState) -> R) -> Result<R, Poisoned> {
        let _order = lock_order::enter(lock_order::BASE);
        // SAFETY: `with` holds the lock for the whole closure, so this is the only reference.
        self.lock
            .with(|| self.state.with_mut(|p| f(unsafe { &mut *p })))
    }

    /// Runs `f` on wheel `i` with the lock held. Also returns whether the change must wake the
    /// driver serving this base: `fires_at` (the tick at which the entry `f` inserted or moved
    /// fires; `NO_EXPIRY` for a removal) is before the driver's published sleep (see the module
    /// doc).
    #[inline]
    pub(crate) fn locked_wheel<R>(
        &self,
        i: usize,
        fires_at: u64,
        f: impl FnOnce(&mut Wheel<Target>) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked(|st| {
            let r = f(&mut st.wheels[i]);
            let ring = fires_at < st.sleep[i];
            if ring && st.ring_lowers {
                st.sleep[i] = fires_at;
            } else if ring {
                st.sleep = [0; CLOCKS];
            }
            (r, ring)
        })
    }

    /// The delivery lock (module doc), or [`Poisoned`] if a delivery panicked.
    pub(crate) fn delivery(&self) -> Result<Delivering<'_>, Poisoned> {
        let order = lock_order::enter(lock_order::DELIVERY);
        let guard = self.delivery.lock().map_err(|_| Poisoned)?;
        Ok(Delivering {
            _guard: guard,
            _order: order,
        })
    }
}

/// The monotonic time (ns) by which a sleeper must wake for a base's wheels, with the clocks
/// at `now`: their earliest firing (`Wheel::next_fire`, not the next re-placement visit), or
/// `max_deferral` ns after their earliest deferrable firing if that is sooner (a deferrable
/// timer never wakes anyone before its bound); `NO_EXPIRY` if none.
pub(crate) fn earliest_fire(
    res: Resolution,
    max_deferral: u64,
    st: &BaseState,
    now: &[u64; CLOCKS],
) -> u64 {
    st.wheels
        .iter()
        .enumerate()
        .flat_map(|(w, wheel)| {
            let fire = wheel.next_fire().map(|t| to_monotonic(res, w, t, now));
            let deferred = wheel
                .next_deferred_fire()
                .map(|t| to_monotonic(res, w, t, now).saturating_add(max_deferral));
            fire.into_iter().chain(deferred)
        })
        .min()
        .unwrap_or(NO_EXPIRY)
}

/// Monotonic time (ns) at which wheel `w`'s tick `tick` starts, with the clocks at `now`.
pub(crate) fn to_monotonic(res: Resolution, w: usize, tick: u64, now: &[u64; CLOCKS]) -> u64 {
    let at = res.tick_start(tick);
    let mono = now[ClockId::Monotonic.index()];
    if ALL_CLOCKS[w] == ClockId::Monotonic {
        at
    } else {
        mono.saturating_add(at.saturating_sub(now[w]))
    }
}

/// The tick on wheel `w`'s clock of monotonic time `mono_ns` (rounded up: a timer before it is
/// before the deadline).
pub(crate) fn from_monotonic(res: Resolution, w: usize, mono_ns: u64, now: &[u64; CLOCKS]) -> u64 {
    if mono_ns == NO_EXPIRY {
        return NO_EXPIRY;
    }
    let mono = now[ClockId::Monotonic.index()];
    let at = if ALL_CLOCKS[w] == ClockId::Monotonic {
        mono_ns
    } else {
        now[w].saturating_add(mono_ns.saturating_sub(mono))
    };
    res.ticks_ceil(at)
}

/// A held delivery lock (`Base::delivery`); released on drop.
pub(crate) struct Delivering<'a> {
    // Dropped first: the lock is released before the lock-order mark is cleared.
    _guard: MutexGuard<'a, ()>,
    _order: lock_order::Entered,
}

/// The deadline fd of an application-driven service (`Timers::deadline_fd`): a timerfd on
/// the monotonic clock, armed at the earliest firing of all bases, so that an event loop
/// waits on it instead of a driver thread.
///
/// It follows the drivers' protocol ("Waking a sleeping driver" in the module doc), with the
/// fd in the driver's place: a refresh (after every `Timers::poll`) publishes its deadline
/// in every base's `sleep`, base by base under each base's lock, and arms the fd, all under
/// the fd's lock; an arm earlier than a base's published `sleep` rings, which lowers that
/// `sleep` to the new entry and, under the fd's lock, moves the fd earlier if the entry is
/// before what the fd is armed at. A ring that waited for a refresh's lock compares with
/// that refresh's deadline, which either saw its entry (it scanned the base after the arm) or
/// is at most the value the arm compared with; so the fd is never armed later than the
/// earliest entry, and an arm later than the published deadline costs no system call.
#[derive(Debug)]
pub(crate) struct DeadlineFd {
    pub(crate) fd: OwnedFd,
    /// The monotonic time (ns) the fd is armed at, `NO_EXPIRY` if disarmed.
    pub(crate) armed: std::sync::Mutex<u64>,
}

impl DeadlineFd {
    /// A disarmed timerfd on the monotonic clock.
    pub(crate) fn new() -> std::io::Result<DeadlineFd> {
        Ok(DeadlineFd {
            fd: fd::timerfd(libc::CLOCK_MONOTONIC, true)?,
            armed: std::sync::Mutex::new(NO_EXPIRY),
        })
    }

    /// The fd's lock (no panic happens under it: a system call, stores, base sections that
    /// poison their own lock).
    pub(crate) fn lock(&self) -> DeadlineGuard<'_> {
        let order = lock_order::enter(lock_order::DEADLINE_FD);
        let guard = self
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        DeadlineGuard {
            armed: guard,
            _order: order,
        }
    }

    /// Arms the fd at monotonic time `at` (`NO_EXPIRY`: disarms it), with its lock held.
    /// Re-arming also resets its readability: it is readable only once `at` has passed.
    pub(crate) fn set(&self, armed: &mut u64, at: u64) {
        // 0 disarms a timerfd: a deadline at time 0 (in the past) fires at 1 ns instead.
        let ns = if at == NO_EXPIRY { 0 } else { at.max(1) };
        fd::arm(&self.fd, libc::TFD_TIMER_ABSTIME, ns);
        *armed = at;
    }

    /// A ring: moves the fd to `at` if that is earlier than where it is armed.
    pub(crate) fn lower(&self, at: u64) {
        let mut g = self.lock();
        if at < *g.armed {
            self.set(&mut g.armed, at);
        }
    }
}

/// A held deadline-fd lock ([`DeadlineFd::lock`]): the time the fd is armed at.
pub(crate) struct DeadlineGuard<'a> {
    // Dropped first: the lock is released before the lock-order mark is cleared.
    pub(crate) armed: std::sync::MutexGuard<'a, u64>,
    _order: lock_order::Entered,
}

/// A futex-style word a driver sleeps on.
///
/// ```text
///   driver                                   armer
///   t = seq            (T)                   (under the base lock: sees sleep[w] > tick)
///   publish sleep[w] under base locks        seq += 1                    (R)
///   park(validate: seq == t)  (V)            unpark_all
/// ```
///
/// The driver takes its token (T) before it publishes its deadline, and the armer increments
/// the word (R) only after it saw the published deadline under the base lock, so R happens
/// after T and the token never includes it. `park` runs V under the wait queue's lock, and
/// `unpark_all` takes that lock after R: either V runs first and the driver is queued when the
/// wake-up comes, or V runs after and reads the new value (the lock orders R before it), and
/// the driver does not sleep. A ring is therefore never lost. The loom test
/// `loom_driver_sleep_races_an_earlier_arm` checks the protocol; taking the token after the
/// publish (so that a ring between the two is absorbed into it) makes it deadlock.
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    seq: AtomicU64,
    queue: WaitQueue,
}

impl Doorbell {
    /// The token to sleep on: taken before the deadline is published (T).
    pub(crate) fn token(&self) -> u64 {
        // Acquire: pairs with the Release in `ring`; a ring seen here is acted upon by the
        // poll that follows.
        self.seq.load(Ordering::Acquire)
    }

    /// Wakes the driver (R).
    pub(crate) fn ring(&self) {
        // Release: the wheel change that made the ring necessary is visible to the driver
        // (it also re-reads the wheels under the base lock). A driver running callbacks
        // re-reads `seq` after flagging it, and the ringer then checks the flag, each with a
        // SeqCst fence between (`driver::Handover`): one of the two sees the other.
        self.seq.fetch_add(1, Ordering::Release);
        self.queue.wake_all();
    }

    /// The ring count, read after a SeqCst fence (`driver::Handover::enter`).
    pub(crate) fn seq_after_fence(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Sleeps until rung (since `token` was taken) or until `deadline` (V).
    pub(crate) fn sleep(&self, token: u64, deadline: Option<Instant>) {
        // Relaxed: runs under the wait queue's lock, which `ring`'s wake-up also takes.
        self.queue
            .wait(|| self.seq.load(Ordering::Relaxed) == token, deadline);
    }
}
