//! Signal timers (`Notify::Signal`, `ThreadSignal`, `SignalWithId`): the kernel's rules for a
//! timer's one signal, kept from user space, where a queued signal cannot be seen leaving the
//! queue.
//!
//! This room is the signal timers' part of `impl Core`'s work: what an expiry does (this
//! file: sending, probing an outstanding signal, overruns, retries) and what the owner's
//! calls do to a signal (`calls.rs`: settime's hand-over, getoverrun's look, a restored
//! timer's signal). What they stand on lies lower, as every timer object carries it: a
//! timer's target and the port signals are queued through (`object/signal.rs`), and the
//! looks timers of one signal number share, a part of `Core` (`shared/lookout.rs`).
//!
//! # The kernel's rules, and what stands in for the dequeue
//!
//! A kernel timer has one preallocated signal. An expiry queues it unless it is already
//! queued; a periodic timer is then not re-armed until the signal is *dequeued* (delivered to
//! a handler, taken by `sigwaitinfo`, read from a `signalfd`), and the periods that passed
//! meanwhile are computed at the dequeue: they are the signal's `si_overrun` and what
//! `timer_getoverrun` returns from then on. A blocked signal therefore costs nothing while it
//! waits, and an ignored one parks its timer until the signal is handled again.
//!
//! User space sees neither the dequeue nor the queue. tempora *probes* instead: a timer whose
//! signal is outstanding asks the port (`signal.rs`) whether its signal number is still
//! pending for its target, at the periods when the kernel's timer would fire if it had been
//! re-armed, and from `getoverrun`. While it is pending, each period counts as an overrun of
//! the outstanding signal; once it is not, the signal was delivered: `getoverrun` reports the
//! periods it missed (the kernel's value), and the next signal goes out at the next period.
//! The state, under the timer's lock:
//!
//! ```text
//!  queued   a signal is outstanding (sent, not yet seen gone)
//!  owed     an expiry's signal is not sent yet (no room: EAGAIN; or the signal is ignored)
//!  overrun  while queued: the periods counted while it is pending; otherwise the periods
//!           no si_overrun has reported yet, added to the next signal's (so that the
//!           si_overruns of all signals sum to every expiry that queued none)
//!  lateness (the cell) the periods the queued or owed signal's own expiry was late by
//!  expiry   a periodic timer's first period not counted yet
//! ```
//!
//! A periodic timer whose signal stays pending is probed at periods spaced as long as it has
//! been pending (doubling), up to [`PROBE_CAP`], so a blocked 1 µs timer costs at most
//! `1 / PROBE_CAP` probes a second (BENCHMARKS.md measures it), and the timers of one target
//! and signal number share those probes: one looks for all (`lookout.rs`). A signal refused for want of
//! room is retried, doubling from [`RETRY_BASE`] up to [`RETRY_CAP`], until it goes: it is
//! never dropped, and the periods meanwhile are its `si_overrun`.
//!
//! # Which side of an expiry a consumption fell
//!
//! The kernel re-arms a periodic timer at the dequeue: an expiry before the dequeue is an
//! overrun of the pending signal, one after it sends the next signal. tempora sees a
//! consumption only at its next look, and decides by one rule: **an expiry scheduled before
//! the look that finds the signal gone counts as an overrun of that signal; the first one
//! after that look sends the next**. For the rule to place a consumption on the right side of
//! an expiry, the look must come between the two:
//!
//! * A signal taken within its period (the common case: a handler, a `sigwaitinfo` loop) is
//!   looked at *at* the next period, which finds it gone and sends the next signal: no look
//!   of its own, and an expiry at the very moment of a look sends.
//! * A signal that a look has found still pending (blocked, or a receiver a period behind) is
//!   looked at [`LOOK_LEAD`] (or half a period, if shorter) *before* the period it would count,
//!   without a wake-up more: the look replaces the one at the period. Gone there, it was taken
//!   before the period, which sends the next signal; still pending there, the period is its
//!   overrun, even if the signal is taken between that look and the period (the one window
//!   where tempora counts an overrun that the kernel would not).
//! * A look is where it was placed, not when a loaded driver got to it: a look placed before
//!   a period that runs after it still finds the consumption before the period (a signal
//!   taken between the period and the late look is the window the other way).
//! * `getoverrun` is a look of its own, at its call.
//!
//! ```text
//!   pending ──────────────────────────────┐ taken
//!   look (pending)        look (pending)  │       look (gone)
//!   ─────┼───────────────────┼──|─────────┼─────────┼──|────►
//!        5 s                   8 s                     11 s
//!                              └ an overrun: it preceded the consumption; 11 s sends
//! ```
//!
//! What a program can observe differently from the kernel's timers is the table in the
//! `timers` module's doc ("Where tempora differs from the kernel").

use crate::clock::{ClockId, LazyNow};
use crate::registry::TIMER_POISONED;
use crate::timers::object::itimer::{add_periods, forward, set_look, set_overrun_last, Arm};
use crate::timers::object::signal::{Pending, Sent, SignalCell, TimerSignal};
use crate::timers::object::types::Status;
use crate::timers::object::{signal_of, sink_of, LockedTimer};
use crate::timers::shared::lookout::{self, Key, Member, Role, BACKSTOP, BACKSTOP_GRAIN, DETACHED};
use crate::timers::shared::Core;
use std::cell::{Cell, RefCell};

mod calls;

/// The longest a periodic timer waits between two probes of a signal that stays pending
/// (or the period, if longer).
pub(crate) const PROBE_CAP: u64 = 10_000_000;
/// The first retry of a signal refused for want of room, ignored, or waiting for its standard
/// signal's number to be free; each retry waits twice as long, up to a cap.
pub(crate) const RETRY_BASE: u64 = 100_000;
/// The longest wait between two retries of a refused signal.
pub(crate) const RETRY_CAP: u64 = 100_000_000;
/// How long before a period a signal seen pending is looked at (at most half the period):
/// more than a driver's usual wake-up latency, so that the look comes before the period
/// (module doc, "Which side of an expiry a consumption fell").
pub(crate) const LOOK_LEAD: u64 = 1_000_000;

/// A restored signal timer's signal, as its snapshot recorded it (`checkpoint`, "Signal
/// timers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restored {
    /// None waits.
    Idle,
    /// An expiry's signal is not sent yet.
    Owed,
    /// A signal was sent and not seen delivered; `stale`: by an earlier arming.
    Outstanding { stale: bool },
}

/// Whether a signal timer shares its looks through a lookout (`lookout.rs`): a periodic one
/// whose looks come at the capped spacing, `PROBE_CAP` or shorter.
fn shares_looks(l: &LockedTimer<'_>) -> bool {
    l.state.interval != 0 && l.state.interval <= PROBE_CAP
}

const _: () = assert!(lookout::STALE == 3 * PROBE_CAP);

thread_local! {
    /// The followers released by a look on this thread, for the caller to look at once it
    /// has let go of the looker's lock (`Core::release_followers`).
    static RELEASED: RefCell<Vec<Member>> = const { RefCell::new(Vec::new()) };

    /// The lookouts whose looker left under a lock on this thread (its target thread gone),
    /// for the caller to hand over once it has let go (`Core::hand_over`).
    static HANDOVERS: RefCell<Vec<Key>> = const { RefCell::new(Vec::new()) };

    /// The dispositions read during the delivery of the current poll batch on this thread
    /// (`None` outside one): signal numbers whose disposition was read (bit `signo - 1`), and
    /// of those the ones that ignore. A burst of timers on one number reads it once per
    /// batch instead of once per signal (a `sigaction` call, a sixth of a signal's cost).
    static DISPOSITIONS: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// A poll starts delivering a batch on this thread: dispositions read from now on are
/// remembered until [`batch_ends`]. A `sigaction` racing the batch is seen by the next one,
/// as one racing a single send is seen by the next send.
pub(crate) fn batch_begins() {
    DISPOSITIONS.with(|d| d.set(Some((0, 0))));
}

/// The batch is delivered: forget the dispositions read.
pub(crate) fn batch_ends() {
    DISPOSITIONS.with(|d| d.set(None));
}

impl Core {
    /// Whether `cell`'s signal number is pending for its target (`Pending::Unconfirmed`
    /// confirmed now and then: `SignalCell::hit_needs_confirming`).
    fn still_pending(&self, cell: &SignalCell) -> bool {
        match self.signals.pending(cell.tid, cell.signo()) {
            Pending::No => false,
            Pending::Yes => true,
            Pending::Unconfirmed => {
                !cell.hit_needs_confirming() || self.signals.confirm(cell.signo())
            }
        }
    }

    /// The port's `disposition_ignores`, remembered for the rest of a poll batch.
    fn disposition_ignores(&self, signo: i32) -> bool {
        let bit = 1u64 << (signo - 1);
        let remembered = DISPOSITIONS.with(Cell::get);
        if let Some((read, ignores)) = remembered {
            if read & bit != 0 {
                return ignores & bit != 0;
            }
        }
        let ignores = self.signals.disposition_ignores(signo);
        if let Some((read, set)) = remembered {
            let set = if ignores { set | bit } else { set };
            DISPOSITIONS.with(|d| d.set(Some((read | bit, set))));
        }
        ignores
    }
}

/// The first real-time signal number of the kernel (glibc keeps 32 and 33 for itself): the
/// signals below it are standard ones, of which one instance at most is pending.
const SIGRTMIN_KERNEL: i32 = 32;

/// `a + n`, saturating at `i32::MAX` (negative `a`, settime's mark, counts as 0).
fn add(a: i32, n: u64) -> i32 {
    add_periods(a.max(0), n)
}

impl Core {
    /// A signal timer popped from base `b`'s wheel for `clock`, under its lock: an expiry
    /// (status Armed), a probe of an outstanding signal (RequeuePending), or a retry of an
    /// owed one. Whether it counted as a firing (a period passed).
    pub(crate) fn signal_pop(
        &self,
        l: &mut LockedTimer<'_>,
        b: usize,
        clock: ClockId,
        now: &LazyNow<'_>,
    ) -> bool {
        let t = now.get(clock);
        // The first period not counted yet, and when this look was placed to happen (a late
        // driver aside): the node keeps the tick it was placed at until it is placed again.
        let first = l.state.expiry;
        let scheduled = match l.links().tick() {
            u64::MAX => t,
            tick => tick.saturating_mul(self.res.nanos()).min(t),
        };
        let fresh = match l.state.status() {
            Status::Armed => {
                if l.state.expire().is_none() {
                    return false;
                }
                if l.state.interval == 0 {
                    1
                } else {
                    self.count_periods(l, t)
                }
            }
            Status::RequeuePending => self.count_periods(l, t),
            Status::Disarmed => 0,
        };
        let Some(cell) = signal_of(l) else {
            return false;
        };
        let counted = fresh > 0;
        let mut fresh = fresh;
        if l.state.owed() && cell.in_retry() && cell.slot() < lookout::LOOKER {
            // A follower of the retry lookout at its backstop, while its looker retries.
            let mono = now.get(ClockId::Monotonic);
            let m = Member::new(l.timer, cell);
            if self.lookouts.answers(Key::RETRY, m, cell, 0, mono) {
                cell.set_lateness(add(cell.lateness(), fresh));
                self.follower_park(l, b, clock, t);
                return counted;
            }
        }
        // Whether this pop saw the number not pending (a standard signal is sent only then).
        let mut clear = false;
        if l.state.queued() {
            let member = shares_looks(l).then(|| Member::new(l.timer, cell));
            let mono = now.get(ClockId::Monotonic);
            if let Some(m) = member {
                // Another timer of its target and number looks for it (`lookout.rs`): a
                // follower's backstop while its looker looks within `STALE`, or a first look
                // after a send that the looker has found pending since.
                let since = if cell.slot() < lookout::LOOKER {
                    0
                } else {
                    let sent = first.saturating_sub(l.state.interval);
                    mono.saturating_sub(t.saturating_sub(sent))
                };
                if self.lookouts.answers(Key::of(cell), m, cell, since, mono) {
                    l.state.overrun = add(l.state.overrun, fresh);
                    cell.saw_pending();
                    self.follower_park(l, b, clock, t);
                    return counted;
                }
            }
            if self.still_pending(cell) {
                l.state.overrun = add(l.state.overrun, fresh);
                cell.saw_pending();
                let role =
                    member.and_then(|m| self.lookouts.found_pending(Key::of(cell), m, cell, mono));
                if role == Some(Role::Follow) {
                    self.follower_park(l, b, clock, t);
                } else {
                    self.signal_park(l, cell, b, clock, t, PROBE_CAP);
                }
                return counted;
            }
            if let Some(m) = member {
                RELEASED.with(|r| {
                    self.lookouts
                        .found_gone(Key::slot_of(cell), m, cell, &mut r.borrow_mut())
                });
            }
            fresh = self.found_gone(l, cell, first, scheduled, fresh);
            clear = true;
        }
        self.signal_next(l, cell, b, clock, t, fresh, clear);
        counted
    }

    /// The outstanding signal was found gone by a look placed at `scheduled`, which counted
    /// `fresh` periods from `first` on: those scheduled before the look are that signal's
    /// overruns if a look had seen it pending (module doc, "Which side of an expiry a
    /// consumption fell": one at the look's moment, or after it when the look ran late, is
    /// not); it is settled (or, discarded, owed again). The periods left to send.
    fn found_gone(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        first: u64,
        scheduled: u64,
        fresh: u64,
    ) -> u64 {
        let mut fresh = fresh;
        if cell.seen_pending() && fresh > 0 && scheduled > first {
            let interval = l.state.interval.max(1);
            let before = ((scheduled - 1 - first) / interval + 1).min(fresh);
            l.state.overrun = add(l.state.overrun, before);
            fresh -= before;
        }
        self.settle_or_flush(l, cell);
        fresh
    }

    /// After a pop or a release, with no signal outstanding: sends what is owed and the
    /// `fresh` periods' signal, or re-arms a periodic timer at its next period.
    #[allow(clippy::too_many_arguments, reason = "the pop's context, passed on")]
    fn signal_next(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
        fresh: u64,
        clear: bool,
    ) {
        if !l.state.owed() {
            if fresh == 0 {
                // A probe that found the signal gone and no period due: wait for the next.
                if l.state.interval != 0 && l.state.status() == Status::RequeuePending {
                    l.state.set_status(Status::Armed);
                    let expiry = l.state.expiry;
                    let _ = self.apply_on(l, Arm::At { clock, expiry }, b);
                }
                return;
            }
            l.state.set_owed(true);
            cell.set_lateness(add(0, fresh - 1));
        } else {
            cell.set_lateness(add(cell.lateness(), fresh));
        }
        self.signal_send(l, cell, b, clock, t, clear);
    }

    /// Parks an owed signal refused for want of room: one timer retries for all that find no
    /// room (the retry lookout, `lookout.rs`), on its backoff; the others follow.
    fn retry_park(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
    ) {
        let mono = self.clock.now(ClockId::Monotonic);
        let m = Member::new(l.timer, cell);
        if self.lookouts.found_pending(Key::RETRY, m, cell, mono) == Some(Role::Follow) {
            self.follower_park(l, b, clock, t);
        } else {
            self.signal_park(l, cell, b, clock, t, RETRY_CAP);
        }
    }

    /// Parks a follower at its backstop (`lookout.rs`), on its period grid's status, with
    /// `BACKSTOP_GRAIN` of slack: placed coarse, never moved again before it falls due, at an
    /// instant it shares with the other followers' backstops, one wake-up for many.
    fn follower_park(&self, l: &mut LockedTimer<'_>, b: usize, clock: ClockId, t: u64) {
        if l.state.interval != 0 {
            l.state.set_status(Status::RequeuePending);
        }
        let at = t.saturating_add(BACKSTOP);
        // A poisoned base fails the service.
        let _ = self.apply_on_slack(l, Arm::At { clock, expiry: at }, b, BACKSTOP_GRAIN);
    }

    /// Looks at the followers that a look on this thread released (their looker found their
    /// number gone: `lookout.rs`), each under its own lock, re-arming them on base `b`. The
    /// caller has been pinned in the epoch since before the release.
    pub(crate) fn release_followers(&self, b: usize, now: &LazyNow<'_>) {
        let list = RELEASED.with(|r| std::mem::take(&mut *r.borrow_mut()));
        if list.is_empty() && HANDOVERS.with(|h| h.borrow().is_empty()) {
            RELEASED.with(|r| *r.borrow_mut() = list);
            return;
        }
        // Once a released retry follower is refused again, the others follow again untried.
        let mut full = false;
        for m in &list {
            // SAFETY: a timer object is type-stable while the caller is pinned, and it was
            // pinned before the release took the follower out of its list (module doc of
            // `lookout.rs`); the timer's identity is checked under its lock below.
            let timer = unsafe { m.timer.as_ref() };
            let r = timer.lock_visible(|mut l| {
                let Some(cell) = signal_of(&l) else {
                    return;
                };
                if cell.slot() != DETACHED {
                    // Deleted and made again, or it looked on its own since.
                    return;
                }
                cell.set_slot(lookout::NONE);
                let clock = l.state.expiry_clock();
                let t = now.get(clock);
                if l.state.owed() {
                    // The retry lookout's: room came back.
                    let fresh = if l.state.status() == Status::RequeuePending {
                        self.count_periods(&mut l, t)
                    } else {
                        0
                    };
                    cell.set_lateness(add(cell.lateness(), fresh));
                    if full {
                        self.retry_park(&mut l, cell, b, clock, t);
                        return;
                    }
                    self.signal_send(&mut l, cell, b, clock, t, false);
                    full = cell.in_retry();
                    return;
                }
                if !l.state.queued() || l.state.status() != Status::RequeuePending {
                    return;
                }
                let first = l.state.expiry;
                let fresh = self.count_periods(&mut l, t);
                let fresh = self.found_gone(&mut l, cell, first, t, fresh);
                self.signal_next(&mut l, cell, b, clock, t, fresh, true);
            });
            if r.is_err() {
                self.health.fail(TIMER_POISONED);
            }
        }
        let mut list = list;
        list.clear();
        RELEASED.with(|r| *r.borrow_mut() = list);
        let keys = HANDOVERS.with(|h| std::mem::take(&mut *h.borrow_mut()));
        for key in keys {
            self.hand_over(key);
        }
    }

    /// Forwards a periodic timer's expiry past `t`: the periods that passed (not counted
    /// before).
    fn count_periods(&self, l: &mut LockedTimer<'_>, t: u64) -> u64 {
        let (expiry, n) = forward(l.state.expiry, l.state.interval, t);
        l.state.expiry = expiry;
        n
    }

    /// Sends the owed signal, unless it would be ignored, or is a standard signal whose
    /// number is pending (`clear`: the caller just saw it not pending); parks the timer as
    /// the outcome says.
    fn signal_send(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
        clear: bool,
    ) {
        let periodic = l.state.interval != 0;
        if cell.signo() < SIGRTMIN_KERNEL && !clear && self.still_pending(cell) {
            // A standard signal queued while one of its number is pending merges with it:
            // this one would be lost. Retried, as a refused one is, once the number is free.
            cell.tried();
            self.signal_park(l, cell, b, clock, t, PROBE_CAP);
            return;
        }
        let ignores = self.disposition_ignores(cell.signo());
        if ignores && self.signals.ignored(cell.tid, cell.signo()) {
            if periodic {
                // Parked until the signal is handled again, retried as a refused one is
                // (doubling, up to the probes' cap: a program waits for its handler's return
                // to take effect); the periods meanwhile are the owed signal's lateness (the
                // kernel's ignored-timer list).
                cell.tried();
                self.signal_park(l, cell, b, clock, t, PROBE_CAP);
            } else {
                // The kernel drops an ignored one-shot signal.
                l.state.set_owed(false);
            }
            return;
        }
        let id = l.id().get();
        let sig = TimerSignal {
            tid: cell.tid,
            signo: cell.signo(),
            timer: id,
            overrun: add(cell.lateness(), l.state.overrun.max(0) as u64),
            value: if cell.value_is_id {
                id as u32 as usize
            } else {
                cell.value()
            },
        };
        // `getoverrun` must look from before the signal can be taken (a handler may run on
        // this very thread as the send returns): LOOK goes up first, down again if it fails.
        set_look(l.published(), true);
        let sent = self.signals.send(&sig);
        if sent != Sent::Queued {
            set_look(l.published(), false);
        }
        match sent {
            Sent::Queued => {
                if cell.slot() != lookout::NONE {
                    // Room came back: a retry lookout's looker releases its followers.
                    let m = Member::new(l.timer, cell);
                    RELEASED.with(|r| {
                        self.lookouts
                            .found_gone(Key::slot_of(cell), m, cell, &mut r.borrow_mut())
                    });
                }
                sink_of(l).tally.delivered(sig.overrun);
                l.state.set_queued(true);
                l.state.set_owed(false);
                l.state.sigqueue_seq = l.state.signal_seq;
                cell.set_carried(l.state.overrun.max(0));
                l.state.overrun = 0;
                cell.queued(ignores);
                if periodic {
                    self.signal_park(l, cell, b, clock, t, PROBE_CAP);
                }
            }
            Sent::Full => {
                cell.tried();
                self.retry_park(l, cell, b, clock, t);
            }
            Sent::Gone => {
                // The target thread exited: nothing can be delivered again. The kernel's
                // timer stays requeue-pending for ever; so does this one (in no wheel).
                l.state.set_owed(false);
                if cell.slot() != lookout::NONE {
                    let key = Key::slot_of(cell);
                    if self.lookouts.leave(key, Member::new(l.timer, cell), cell) {
                        HANDOVERS.with(|h| {
                            let mut h = h.borrow_mut();
                            if h.try_reserve(1).is_ok() {
                                h.push(key);
                            }
                        });
                    }
                }
            }
        }
    }

    /// Places a timer whose signal is outstanding (a probe) or owed (a retry, backing off up
    /// to `cap`) in base `b`'s wheel, on its period grid if it is periodic, without moving
    /// its expiry.
    fn signal_park(
        &self,
        l: &mut LockedTimer<'_>,
        cell: &SignalCell,
        b: usize,
        clock: ClockId,
        t: u64,
        cap: u64,
    ) {
        let interval = l.state.interval;
        if interval == 0 && !l.state.owed() {
            // A one-shot whose signal is out has nothing left to do.
            return;
        }
        let at = if l.state.owed() {
            // A retry needs no period: whenever it goes, the periods since are counted.
            let shift = cell.tries().min(20);
            t.saturating_add((RETRY_BASE << shift).min(cap))
        } else {
            // A probe waits as long again as the signal has been pending (the periods
            // counted), from the next period on up to the cap, on the period grid (where the
            // kernel's timer, re-armed at the dequeue, would fire next).
            let cap = (PROBE_CAP / interval).max(1);
            let periods = (l.state.overrun.max(0) as u64).clamp(1, cap);
            let grid = l
                .state
                .expiry
                .saturating_add((periods - 1).saturating_mul(interval));
            if cell.seen_pending() {
                // A signal seen pending is looked at a little before the period it would
                // count, so that a consumption before that period is seen before it (module
                // doc, "Which side of an expiry a consumption fell"); a lead already passed
                // (this look was late) moves the look to the period after.
                let lead = (interval / 2).min(LOOK_LEAD);
                let grid = if grid - lead <= t {
                    grid.saturating_add(interval)
                } else {
                    grid
                };
                grid - lead
            } else {
                grid
            }
        };
        if interval != 0 {
            l.state.set_status(Status::RequeuePending);
        }
        // A poisoned base fails the service.
        let _ = self.apply_on(l, Arm::At { clock, expiry: at }, b);
    }
}

impl Core {
    /// The outstanding signal is no longer pending: delivered, or discarded unseen by a
    /// `sigaction` that made it ignored (which discards every queued instance, blocked or
    /// not). A discarded signal of a periodic timer is owed again with everything it carried
    /// and missed, as the kernel parks its timer on the ignored list to queue it when the
    /// signal is handled again; a one-shot's is dropped, as the kernel drops it.
    fn settle_or_flush(&self, l: &mut LockedTimer<'_>, cell: &SignalCell) {
        // Queued while its disposition ignored it (its target blocked it): gone, it was taken
        // at the unblock, which the kernel counts as a delivery before discarding it.
        if cell.queued_ignored() || !self.disposition_ignores(cell.signo()) {
            settle(l, cell);
            return;
        }
        l.state.set_queued(false);
        set_look(l.published(), false);
        if l.state.sigqueue_seq == l.state.signal_seq && l.state.interval != 0 {
            l.state.set_owed(true);
            cell.set_lateness(add(cell.lateness(), l.state.overrun.max(0) as u64));
            l.state.overrun = cell.carried();
        } else {
            cell.set_lateness(0);
        }
    }
}

/// The outstanding signal was delivered: `getoverrun` reports the periods it missed (its own
/// lateness and those counted while it was pending), unless a settime or delete since made it
/// stale. The counted periods stay in `overrun`, for the next signal's `si_overrun`.
fn settle(l: &mut LockedTimer<'_>, cell: &SignalCell) {
    l.state.set_queued(false);
    // One store: a lock-free reader sees the old word (and looks) or the new one.
    if l.state.sigqueue_seq == l.state.signal_seq {
        let (state, published) = l.state_and_published();
        set_overrun_last(published, add(cell.lateness(), state.overrun.max(0) as u64));
    } else {
        set_look(l.published(), false);
    }
    cell.set_lateness(0);
}
