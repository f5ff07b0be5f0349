//! A base: one lock, one wheel per clock, and the delivery lock of its pollers.
//!
//! ```text
//!  Base (cache-line padded)
//!   ├─ lock: ByteLock                covers the three wheels and `sleep`
//!   ├─ wheels[REALTIME, MONOTONIC, BOOTTIME]: NodeWheel   ticks of `tick` ns on that clock,
//!   │                                linking the timer objects themselves
//!   ├─ sleeps: Wheel<Target>         the sleeps' entries, on the monotonic clock
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
//! A timer wheel's entries are the timer objects themselves, linked through their own wheel
//! node (`links`; the intrusive storage, `wheel/intrusive.rs`) and named by address (a
//! [`Target`]). Sleeps wait in a slab wheel of their own (`BaseState::sleeps`), whose entries
//! hold their cells' addresses (`sleep.rs` has their rules, with entry keys). The timer in
//! turn records where it waits (`ItimerState::base` and `wheel()`), written under
//! the timer's lock. Only a holder of both the timer's lock and the base lock links the node
//! or moves it, and only under the base lock does anyone unlink it: a disarm (which also
//! holds the timer's lock), or a poll's `run`, which pops it or, visiting it before its
//! expiry, unlinks and links it again within the critical section. So under the timer's lock
//! alone a node that is not linked stays so and its tick does not change, while a linked one
//! may read as unlinked during a `run`; under the timer's lock *and* the base's delivery lock
//! (nobody else runs that base) `is_linked` is exact (the wheel's node contract). A popped
//! timer is *due* only while the timer, under its lock, still names that base and wheel and
//! its node is not linked: expiry pops under the base lock and checks under each timer's lock
//! afterwards, so a timer that a settime re-linked or a delete disarmed in between is left
//! alone. (A second pop of the same node before this check would need the base's delivery
//! lock, which this poll holds.)
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
//! lock. Nothing is allocated under it but a realtime re-base's list of the wheel's entries
//! (only when the wall clock was set back), which walks every entry of that wheel.
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
use crate::sync::{lock_order, AtomicU64, ByteLock, Ordering, Poisoned, UnsafeCell, WaitQueue};
use crate::sync::{StdMutex as Mutex, StdMutexGuard as MutexGuard};
use crate::wheel::intrusive::{Locate, Node, NodeWheel};
use crate::wheel::Wheel;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::time::Instant;

/// What waits in a base's wheel, by address: an interval timer's object or a sleep's cell,
/// told apart by the address's bit 0 (both are at least 8-byte aligned; bit 1 stays clear for
/// the wheel's head markers).
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
        const { assert!(std::mem::align_of::<SleepCell>() >= 4) };
        Target(s.cast::<u8>().map_addr(|a| a | SLEEP_TAG))
    }

    /// The wheel's name for it (the tagged address, its provenance exposed).
    #[inline]
    pub(crate) fn addr(self) -> usize {
        self.0.as_ptr().expose_provenance()
    }

    /// The target a wheel named `r` ([`Target::addr`]).
    #[inline]
    pub(crate) fn from_addr(r: usize) -> Target {
        let p = std::ptr::with_exposed_provenance_mut::<u8>(r);
        Target(NonNull::new(p).expect("a wheel names no null target"))
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
// `Core::deliver` (timers: pinned epoch, entry popped while current; sleeps: `sleep.rs`), and
// by the wheel that links it (`TargetLocate`).
unsafe impl Send for Target {}

/// How a base's timer wheels find a timer's node (its `links`).
pub(crate) struct TargetLocate;

// SAFETY: a base's timer wheels are given only the addresses of live timer objects
// (`Target::addr` of `Target::timer`), which stay alive while linked: a timer is unlinked at its
// delete, under its lock, before its slot can be reused or its owner's pages freed ("Safety of
// the timer addresses" in `timers/mod.rs`). A node left linked in a poisoned base is never
// reached again: nothing walks that base.
unsafe impl Locate for TargetLocate {
    #[inline]
    unsafe fn node<'a>(r: usize) -> &'a Node {
        let p = std::ptr::with_exposed_provenance::<Timer<Itimer>>(r);
        // SAFETY: the caller's promise: `r` names a live timer object (the timer wheels link
        // nothing else: sleeps wait in `BaseState::sleeps`).
        unsafe { &(*p).written.links }
    }
}

/// A base's timer wheel: timer objects linked through their own nodes.
pub(crate) type BaseWheel = NodeWheel<TargetLocate>;

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
    pub(crate) wheels: [BaseWheel; CLOCKS],
    /// The sleeps (`sleep.rs`), on the monotonic clock: a slab wheel of their cells'
    /// addresses. A burst of sleeps due at one instant is popped from contiguous entries, and
    /// their cells (scattered in their futures) are then touched from the batch with their
    /// misses overlapping; linked through the cells, the pop would follow one dependent miss
    /// per sleep (measured 1.5-3x slower on the async suite's `fire`).
    pub(crate) sleeps: Wheel<Target>,
    /// See "Waking a sleeping driver" in the module doc.
    pub(crate) sleep: [u64; CLOCKS],
    /// What a ring does to `sleep`: clears it (a driver, which re-reads every base once
    /// awake), or lowers it to the entry that rang (the deadline fd, which stays armed at
    /// that entry and must hear of any earlier one: see [`DeadlineFd`]).
    pub(crate) ring_lowers: bool,
}

// SAFETY: `state` is only accessed with `lock` held (`Base::locked`); the wheels hold
// addresses of `Sync` objects (timer objects, whose nodes are atomics; sleep cells).
unsafe impl Sync for Base {}
// SAFETY: as above.
unsafe impl Send for Base {}

impl Base {
    /// A base whose wheels start at the given ticks.
    pub(crate) fn new(start: [u64; CLOCKS]) -> Base {
        Base {
            lock: ByteLock::new(),
            state: UnsafeCell::new(BaseState {
                wheels: start.map(BaseWheel::new),
                sleeps: Wheel::builder()
                    .start(start[ClockId::Monotonic.index()])
                    .build()
                    .expect("the default wheel levels are valid"),
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
        f: impl FnOnce(&mut BaseWheel) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked_ringing(i, fires_at, |st| f(&mut st.wheels[i]))
    }

    /// [`Base::locked_wheel`] for the sleeps' wheel (the monotonic clock's).
    #[inline]
    pub(crate) fn locked_sleeps<R>(
        &self,
        fires_at: u64,
        f: impl FnOnce(&mut Wheel<Target>) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked_ringing(ClockId::Monotonic.index(), fires_at, |st| f(&mut st.sleeps))
    }

    #[inline]
    fn locked_ringing<R>(
        &self,
        i: usize,
        fires_at: u64,
        f: impl FnOnce(&mut BaseState) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked(|st| {
            let r = f(st);
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
        .chain(st.sleeps.next_fire().map(|t| res.tick_start(t)))
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

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use crate::clock::CLOCKS;
    use crate::wheel::Mode;
    use loom::sync::Arc;

    const MONO: usize = 1;

    /// A poll pops a timer while its owner deletes it and arms it again (a timer deleted and
    /// re-created in its slot, or re-armed): the owner unlinks only a linked node, under both
    /// locks; the poll delivers only if, under the timer's lock, the timer still names the
    /// wheel and its node is not linked again. The poll never delivers the second arming (not
    /// due at the poll's time), delivers the first at most once, and the wheel ends holding
    /// exactly what the state says. Without the `is_linked` check the poll delivers the
    /// second arming.
    #[test]
    fn loom_a_poll_pops_a_timer_its_owner_deletes_and_arms_again() {
        loom::model(|| {
            let base = Arc::new(Base::new([0; CLOCKS]));
            let timer = Arc::new(Timer::<Itimer>::default());
            // Visible (owner key 1), so that `lock_visible` enters it.
            timer.hot.owner.store(2, Ordering::Relaxed);
            let r = Target::timer(NonNull::from(&*timer)).addr();
            // Armed: linked at tick 1, the state naming the wheel; `expiry` is the arming.
            let lock =
                |t: &Timer<Itimer>,
                 f: &mut dyn FnMut(&mut crate::timers::object::LockedTimer<'_>)| {
                    t.lock_visible(|mut l| f(&mut l)).unwrap().unwrap();
                };
            lock(&timer, &mut |l| {
                base.locked(|st| {
                    // SAFETY: a live timer in no wheel, alive for the whole model.
                    unsafe { st.wheels[MONO].set(r, 1, Mode::PRECISE) }
                })
                .unwrap();
                l.state.expiry = 1;
                l.state.set_wheel(MONO as u8 + 1);
            });
            let (base2, timer2) = (base.clone(), timer.clone());
            let owner = loom::thread::spawn(move || {
                let (base, timer) = (&*base2, &*timer2);
                // Delete: under the timer's lock, unlink if still linked.
                lock(timer, &mut |l| {
                    if l.state.wheel() != 0 {
                        // SAFETY: the state names this wheel: the node is here or in none.
                        base.locked(|st| unsafe { st.wheels[MONO].take(r) })
                            .unwrap();
                        l.state.set_wheel(0);
                    }
                });
                // Arm again (the next incarnation), at tick 2.
                lock(timer, &mut |l| {
                    // SAFETY: the node is in no wheel or this one; the timer is live.
                    base.locked(|st| unsafe { st.wheels[MONO].set(r, 2, Mode::PRECISE) })
                        .unwrap();
                    l.state.expiry = 2;
                    l.state.set_wheel(MONO as u8 + 1);
                });
            });
            // The poll at tick 1.
            let delivering = base.delivery().unwrap();
            let mut popped = Vec::new();
            base.locked(|st| st.wheels[MONO].run(1, usize::MAX, |p| popped.push(p)))
                .unwrap();
            let mut delivered = Vec::new();
            for p in popped {
                assert_eq!(p, r);
                lock(&timer, &mut |l| {
                    if crate::timers::core::popped_here(l, 0, MONO) {
                        delivered.push(l.state.expiry);
                        l.state.set_wheel(0);
                    }
                });
            }
            drop(delivering);
            owner.join().unwrap();
            assert!(
                delivered.len() <= 1 && !delivered.contains(&2),
                "{delivered:?}"
            );
            let mut waits = false;
            lock(&timer, &mut |l| waits = l.state.wheel() != 0);
            let len = base.locked(|st| st.wheels[MONO].len()).unwrap();
            assert_eq!(
                len,
                usize::from(waits),
                "the wheel holds what the state says"
            );
            assert_eq!(timer.written.links.is_linked(), waits);
        });
    }
}
