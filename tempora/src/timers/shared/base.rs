//! A base: one lock, one wheel per clock, and the delivery lock of its pollers.
//!
//! ```text
//!  Base (cache-line padded)
//!   ├─ state: Locked<BaseState, BASE>    the base lock and what it covers:
//!   │   ├─ wheels[REALTIME, MONOTONIC, BOOTTIME]: NodeWheel   ticks of `tick` ns on that
//!   │   │                                clock, linking the timer objects themselves
//!   │   ├─ sleeps: Wheel<NonNull<SleepCell>>   the sleeps' entries, on the monotonic clock
//!   │   └─ sleep[3]                      the tick on each wheel's clock before which an arm
//!   │                                    must wake the base's sleeper (0: it is awake)
//!   ├─ due: AtomicU64                    nothing of the base fires before it (0: poll it)
//!   └─ delivery: RankedMutex<(), DELIVERY>   held from a poll's pop of a batch to its
//!                                        delivery
//! ```
//!
//! # Waking a sleeping driver
//!
//! A sleeper's refresh reads each base under its lock: the base's earliest firing `E` (a
//! monotonic time), published as `sleep[w]` = the tick of `E` on wheel `w`'s clock, and then
//! arms its alarm at the minimum `D` over its bases, so every published value is at or after
//! the `D` it arms. Whoever changes a wheel compares, under the same lock, the wheel's new
//! next expiry with `sleep[w]`; if it is earlier, it lowers `sleep[w]` to that entry (a later
//! arm between the two rings no more) and rings after unlocking: it moves the alarm to the
//! entry if that is earlier than `D` (`wake.rs`). Both sides hold the base lock, so "the
//! sleeper did not see the new timer and the armer did not see its deadline" is impossible,
//! and the alarm's own lock orders the ring with the arm (`Alarm` in `wake.rs`). Arming at or
//! after the base's own `E` rings nobody.
//!
//! # Polling only what is due
//!
//! The same refresh stores `E` in the base's `due` word, and a ring stores 0 there before
//! it moves the alarm. A poll on the OS clocks skips a base whose `due` is after its
//! monotonic reading, without taking its locks, and a refresh reuses that `due` instead of
//! reading the base again: nothing of it can fire before `due`, since an entry placed earlier
//! rang. So a wake-up costs the bases with something due, not every base. The word is read
//! relaxed: a poller that missed a ring's 0 either refreshed before that ring's move of the
//! alarm (which then compares with the refresh's arm under the alarm's lock and moves it to
//! the entry), or woke for that move and took the alarm's lock after it (`Alarm::woke`).
//!
//! Only a base whose entries all fire by the monotonic clock alone is ever passed over. A
//! base holding a realtime or boot-time entry, or a deferrable one, publishes 0, and placing
//! one stores 0: a realtime entry's monotonic time moves with a clock step (a refresh that
//! read the clocks before the step would publish a stale one), a boot-time one's with a
//! suspend, and a deferrable entry fires whenever a driver is awake anyway, so such a base is
//! read at every wake-up, as every base was before. Off the OS clocks no base publishes
//! `due`.
//!
//! A timer wheel's entries are the timer objects themselves, linked through their own wheel node
//! (`links`; the intrusive storage, `wheel/intrusive.rs`) and named by address ([`timer_addr`]).
//! Sleeps wait in a slab wheel of their own (`BaseState::sleeps`), whose entries hold their cells'
//! addresses (`object/sleep_cell.rs` has their rules, with entry keys). The timer in turn records
//! where it waits (`ItimerState::base` and `wheel()`), written under the timer's lock. Only a
//! holder of both the timer's lock and the base lock links the node or moves it, and only under the
//! base lock does anyone unlink it: a disarm (which also holds the timer's lock), or a poll's
//! `run`, which pops it or, visiting it before its expiry, unlinks and links it again within the
//! critical section. So under the timer's lock alone a node that is not linked stays so and its
//! tick does not change, while a linked one may read as unlinked during a `run`; under the timer's
//! lock *and* the base's delivery lock (nobody else runs that base) `is_linked` is exact (the
//! wheel's node contract). A popped timer is *due* only while the timer, under its lock, still
//! names that base and wheel and its node is not linked: expiry pops under the base lock and checks
//! under each timer's lock afterwards, so a timer that a settime re-linked or a delete disarmed in
//! between is left alone. (A second pop of the same node before this check would need the base's
//! delivery lock, which this poll holds.)
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
//! Lock order (the crate's is in `sync::rank`): **delivery → timer → base**. settime,
//! delete and consume hold the timer's lock and take a base lock to insert or remove; expiry takes the delivery lock, then the base lock
//! alone (to collect), releases the base lock, and only then takes timer locks. Nothing takes a
//! timer lock while holding a base lock, no path holds two base locks, and nothing takes a
//! delivery lock while holding any other tempora lock. Debug builds check the order at every
//! lock of the crate (`sync::rank`; the test
//! `lock_order_violation_is_caught_in_debug_builds`).
//!
//! # What runs under the base lock
//!
//! Wheel operations only, no callback and no system call: an arm's ring (a move of the
//! alarm's timerfd) is issued after the base lock is released, though still under the arming timer's
//! lock. Nothing is allocated under it but a realtime re-base's list of the wheel's entries
//! (only when the wall clock was set back), which walks every entry of that wheel.
//!
//! # Poisoning
//!
//! A panic inside a base's critical section poisons the base (see `sync::Locked`): every
//! later lock of it fails at once with [`Poisoned`], which the service reports as
//! `Error::Poisoned` to arming calls and as a failure of the whole service to its receivers.
//! A poisoned delivery lock (a panic while delivering) counts the same.

use crate::clock::{ClockId, CLOCKS};
use crate::registry::Timer;
use crate::sync::{rank, AtomicU64, Locked, MutexGuard, Ordering, Poisoned, RankedMutex};
use crate::timers::object::sleep_cell::SleepCell;
use crate::timers::object::Itimer;
use crate::wheel::intrusive::{Locate, Node, NodeWheel};
use crate::wheel::Wheel;
use std::ptr::NonNull;

/// A timer object's name in a base's timer wheel: its address, provenance exposed.
#[inline]
pub(crate) fn timer_addr(t: &Timer<Itimer>) -> usize {
    (t as *const Timer<Itimer>).expose_provenance()
}

/// The timer object a timer wheel names `r` ([`timer_addr`]).
#[inline]
pub(crate) fn timer_at(r: usize) -> NonNull<Timer<Itimer>> {
    let p = std::ptr::with_exposed_provenance_mut::<Timer<Itimer>>(r);
    NonNull::new(p).expect("a wheel names no null timer")
}

/// How a base's timer wheels find a timer's node (its `links`).
pub(crate) struct TimerLocate;

// SAFETY: a base's timer wheels are given only the addresses of live timer objects
// ([`timer_addr`]), which stay alive while linked: a timer is unlinked at its
// delete, under its lock, before its slot can be reused or its owner's pages freed ("Safety of
// the timer addresses" in `timers/mod.rs`). A node left linked in a poisoned base is never
// reached again: nothing walks that base.
unsafe impl Locate for TimerLocate {
    #[inline]
    unsafe fn node<'a>(r: usize) -> &'a Node {
        let p = std::ptr::with_exposed_provenance::<Timer<Itimer>>(r);
        // SAFETY: the caller's promise: `r` names a live timer object (the timer wheels link
        // nothing else: sleeps wait in `BaseState::sleeps`).
        unsafe { &(*p).written.links }
    }
}

/// A base's timer wheel: timer objects linked through their own nodes.
pub(crate) type BaseWheel = NodeWheel<TimerLocate>;

pub(crate) struct Base {
    state: Locked<BaseState, { rank::BASE }>,
    /// Held by a poller from the pop of a batch until its delivery (module doc).
    delivery: RankedMutex<(), { rank::DELIVERY }>,
    /// "Nothing before": no entry of this base fires before this monotonic time (ns), as of
    /// the last refresh that read the base (0: poll it; "Polling only what is due").
    due: AtomicU64,
    /// The service's clocks are the OS's, which step only with notice (`ring_all`): `due`
    /// may be published. Another source may move one clock against another unannounced, so
    /// its bases keep `due` at 0 and are read at every poll.
    skippable: bool,
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
    /// The sleeps (`object/sleep_cell.rs`), on the monotonic clock: a slab wheel of their cells'
    /// addresses. A burst of sleeps due at one instant is popped from contiguous entries, and
    /// their cells (scattered in their futures) are then touched from the batch with their
    /// misses overlapping; linked through the cells, the pop would follow one dependent miss
    /// per sleep.
    pub(crate) sleeps: Wheel<NonNull<SleepCell>>,
    /// See "Waking a sleeping driver" in the module doc.
    pub(crate) sleep: [u64; CLOCKS],
}

// SAFETY: `Locked` shares its state only with the holder of its lock, and asks `T: Send`. The
// wheels hold plain addresses (timer objects, sleep cells) that nothing dereferences when a base is
// dropped, and that are followed only under the rules that keep them valid: a popped timer under a
// pinned epoch and its own lock (`timers/mod.rs`, "Safety of the timer addresses"), a sleep's cell
// under the base's delivery lock (`object/sleep_cell.rs`, "Why the memory stays valid").
unsafe impl Send for BaseState {}

impl Base {
    /// A base whose wheels start at the given ticks; `skippable`: on the OS clocks (`due`).
    pub(crate) fn new(start: [u64; CLOCKS], skippable: bool) -> Base {
        Base {
            state: Locked::new(BaseState {
                wheels: start.map(BaseWheel::new),
                sleeps: Wheel::builder()
                    .start(start[ClockId::Monotonic.index()])
                    .build()
                    .expect("the default wheel levels are valid"),
                sleep: [0; CLOCKS],
            }),
            delivery: RankedMutex::new(()),
            due: AtomicU64::new(0),
            skippable,
            counters: BaseCounters::default(),
        }
    }

    /// Runs `f` on the base's state with the lock held; [`Poisoned`] if an earlier holder
    /// panicked (and a panic in `f` poisons it).
    #[inline]
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut BaseState) -> R) -> Result<R, Poisoned> {
        self.state.with(f)
    }

    /// [`Base::locked`] for the holder of this base's delivery lock (a poll popping a batch):
    /// the order delivery → base is checked when this compiles (`MutexGuard::then_with`).
    #[inline]
    pub(crate) fn locked_delivering<R>(
        &self,
        delivering: &Delivering<'_>,
        f: impl FnOnce(&mut BaseState) -> R,
    ) -> Result<R, Poisoned> {
        delivering.then_with(&self.state, f)
    }

    /// Runs `f` on wheel `i` with the lock held. Also returns whether the change must wake the
    /// driver serving this base: `fires_at` (the tick at which the entry `f` inserted or moved
    /// fires; `NO_EXPIRY` for a removal) is before the driver's published sleep (see the module
    /// doc).
    /// `by_time`: the entry fires by its tick on the monotonic clock alone (not a realtime or
    /// boot-time one, not deferrable), so it leaves the base's `due` as it is unless it rings
    /// ("Polling only what is due").
    #[inline]
    pub(crate) fn locked_wheel<R>(
        &self,
        i: usize,
        fires_at: u64,
        by_time: bool,
        f: impl FnOnce(&mut BaseWheel) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked_ringing(i, fires_at, by_time, |st| f(&mut st.wheels[i]))
    }

    /// [`Base::locked_wheel`] for the sleeps' wheel (the monotonic clock's).
    #[inline]
    pub(crate) fn locked_sleeps<R>(
        &self,
        fires_at: u64,
        f: impl FnOnce(&mut Wheel<NonNull<SleepCell>>) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked_ringing(ClockId::Monotonic.index(), fires_at, true, |st| {
            f(&mut st.sleeps)
        })
    }

    #[inline]
    fn locked_ringing<R>(
        &self,
        i: usize,
        fires_at: u64,
        by_time: bool,
        f: impl FnOnce(&mut BaseState) -> R,
    ) -> Result<(R, bool), Poisoned> {
        self.locked(|st| {
            let r = f(st);
            let ring = fires_at < st.sleep[i];
            if ring {
                st.sleep[i] = fires_at;
            }
            if ring || !by_time {
                // Relaxed: ordered before the ring's move of the alarm, which takes the
                // alarm's lock ("Polling only what is due").
                self.due.store(0, Ordering::Relaxed);
            }
            (r, ring)
        })
    }

    /// The time before which nothing of this base fires ([`Base::publish`]; 0 after a ring,
    /// and always off the OS clocks). Relaxed: see "Polling only what is due".
    #[inline]
    pub(crate) fn due(&self) -> u64 {
        self.due.load(Ordering::Relaxed)
    }

    /// A refresh read the base, under its lock: nothing of it fires before monotonic time
    /// `earliest`, and an arm earlier than `sleep[w]` (on each wheel's clock) rings. `due`
    /// becomes `earliest` only on the OS clocks and if every entry fires by the monotonic
    /// clock alone (`by_time`), else 0 ("Polling only what is due").
    pub(crate) fn publish(
        &self,
        st: &mut BaseState,
        earliest: u64,
        by_time: bool,
        sleep: [u64; CLOCKS],
    ) {
        st.sleep = sleep;
        let due = if self.skippable && by_time {
            earliest
        } else {
            0
        };
        self.due.store(due, Ordering::Relaxed);
    }

    /// The delivery lock (module doc), or [`Poisoned`] if a delivery panicked.
    pub(crate) fn delivery(&self) -> Result<Delivering<'_>, Poisoned> {
        self.delivery.lock()
    }
}

/// A held delivery lock (`Base::delivery`); released on drop.
pub(crate) type Delivering<'a> = MutexGuard<'a, (), { rank::DELIVERY }>;

#[cfg(all(test, loom))]
mod loom_tests;
