//! Restore: an owner recreated from a snapshot ([`Owner::restore`]), all or nothing, with the
//! same IDs through exact-ID mode.

use super::snapshot::{Expiry, SignalState, Snapshot, TimerRecord, NOTIFY_NONE, NOTIFY_QUEUE};
use crate::clock::ClockId;
use crate::clock::CLOCKS;
use crate::error::Error;
use crate::sync::Ordering;
use crate::timers::firing::poll::enqueue;
use crate::timers::object::signal::SignalCell;
use crate::timers::object::LockedTimer;
use crate::timers::shared::Core;
use crate::timers::signals::Restored;
use crate::timers::{Notify, NotifyKind, Owner};
use std::task::Waker;

impl Owner {
    /// Recreates `snapshot` in this owner, which must have no timers: the same IDs (through
    /// exact-ID mode), clocks, settings, overruns and pending events, the ID counter and the
    /// exact-ID mode, the owner's default slack; wheel placement is rebuilt. Signal timers
    /// come back with their targets and signal state, by the rule of [`crate::checkpoint`]
    /// ("Signal timers"). `notify` maps the callbacks' names: every notification name but
    /// `none` and `queue`, on records without a signal target (see [`crate::checkpoint`]).
    ///
    /// All or nothing: everything is checked first (names, and signal targets as
    /// [`Owner::create`] checks them), and if a create still fails the timers made so far are
    /// deleted and the counter, mode and default slack put back.
    ///
    /// While the timers are made, creates in this owner by other threads wait until they
    /// are all made (so none can take an ID the snapshot holds in between). Lookups,
    /// settimes and deletes do not wait.
    ///
    /// # Errors
    /// [`Error::UnknownNotify`] for a name `notify` does not map; [`Error::InvalidSignal`] for
    /// a signal timer whose target thread is not one of this process's threads (a thread ID of
    /// the checkpointed process: rewrite it in the snapshot first);
    /// [`Error::CorruptSnapshot`] for a snapshot [`Snapshot::validate`] refuses (duplicate IDs,
    /// a negative interval, ...); [`Error::IdInUse`] if the owner has
    /// timers; [`Error::OutOfMemory`] if the snapshot's timers cannot all be allocated;
    /// otherwise the error of the create that failed (nothing is kept).
    pub fn restore(
        &self,
        snapshot: &Snapshot,
        notify: impl Fn(&str) -> Option<Notify>,
    ) -> Result<(), Error> {
        self.core().health.check_fork()?;
        // A first look, so that a non-empty owner is reported before a bad snapshot; the
        // section below decides.
        if !self.timers().is_empty() {
            return Err(Error::IdInUse);
        }
        snapshot.validate()?;
        // Each record's notification, checked before anything is made. Only mapped names and
        // signal targets are kept (in record order); `none` and `queue` need nothing.
        let notification = |rec: &TimerRecord| match (&*rec.notify, rec.signal) {
            (NOTIFY_NONE | NOTIFY_QUEUE, _) => Ok(None),
            (_, Some(signal)) => {
                let n = Notify::from(signal.target);
                // The create's own check (a thread of this process), before anything is made.
                SignalCell::new(&n)?;
                Ok(Some(n))
            }
            (name, None) => notify(name)
                .map(Some)
                .ok_or_else(|| Error::UnknownNotify(name.into())),
        };
        // Sized once, fallibly, for every record: a snapshot too large for the memory left
        // fails with `Error::OutOfMemory` before anything is made.
        let oom = |_| Error::OutOfMemory;
        let mut mapped = Vec::new();
        mapped
            .try_reserve_exact(snapshot.timers.len())
            .map_err(oom)?;
        // A second handle on every mapped callback, dropped once the section is over: a
        // callback the section lets go of (a create that fails, the rollback's deletes) is
        // then never the last handle, so no user `Drop` runs inside the section (one that
        // creates in this owner would wait for the section forever).
        let mut keep = Vec::new();
        keep.try_reserve_exact(snapshot.timers.len()).map_err(oom)?;
        for rec in &snapshot.timers {
            if let Some(n) = notification(rec)? {
                if n.kind() == NotifyKind::Callback {
                    keep.push(n.clone());
                }
                mapped.push(n);
            }
        }
        let mut mapped = mapped.into_iter();
        let core = self.core();
        let now = core.now_all();
        // Tasks waiting on this owner's queue, woken once no lock is held.
        let mut wake = Vec::new();
        // Everything from the check that the owner is empty to the last setting runs in one
        // exclusive section: other creates in the owner wait, and two restores of one owner
        // run one after the other (the second finds the owner not empty). An owner that held
        // no timer as the section began holds none but the snapshot's (whose IDs `validate`
        // found distinct), so the exact-ID creates skip the chain walk for their ID
        // (`registry::Owner::exclusive`); their buckets are then all they read of the table,
        // and the IDs are known ahead, so the bucket of the create `AHEAD` records on is
        // loaded while this one runs.
        const AHEAD: usize = 16;
        let records = &snapshot.timers;
        let restored = self.reg.exclusive(|ex| {
            // Not alone: a slot still in use (a delete in flight, a destroyed owner's timers,
            // a create that panicked). The restore goes on only if no timer is visible, and
            // then its creates walk their chains as any exact-ID create does.
            if !ex.alone() {
                if self.reg.is_destroyed() {
                    return Err(Error::OwnerDeleted);
                }
                if !self.timers().is_empty() {
                    return Err(Error::IdInUse);
                }
            }
            let (counter, mode, slack) =
                (self.reg.counter(), self.restore_ids(), self.default_slack());
            self.set_restore_ids(true);
            // Before the timers: those of `Default` precision are armed with it.
            self.set_default_slack(snapshot.default_slack);
            for (i, rec) in records.iter().enumerate() {
                if let Some(next) = records.get(i + AHEAD) {
                    ex.prefetch(next.id.get());
                }
                let n = match &*rec.notify {
                    NOTIFY_NONE => Notify::None,
                    NOTIFY_QUEUE => Notify::Queue,
                    _ => mapped.next().expect("one per mapped name"),
                };
                let mut set =
                    |mut l: LockedTimer<'_>| restore_state(core, &mut l, rec, &now, &mut wake);
                let id = rec.id.get();
                if let Err(e) =
                    self.create_via(rec.clock, n, |init| ex.create(id, init, Some(&mut set)))
                {
                    // Record `i` too: a create can fail after its timer was hashed (a lock
                    // poisoned under `set`). The owner had no visible timer and no other
                    // create ran since, so every visible timer with these IDs is the restore's.
                    // Their callbacks are not the last handles (`keep`).
                    for rec in &records[..=i] {
                        let _ = self.reg.delete(rec.id);
                    }
                    self.reg.set_counter(counter);
                    self.set_restore_ids(mode);
                    self.set_default_slack(slack);
                    return Err(e);
                }
            }
            self.reg.set_counter(snapshot.counter);
            self.set_restore_ids(snapshot.restore_ids);
            Ok(())
        });
        drop((keep, mapped));
        core.health.flush_halt();
        wake.into_iter().for_each(Waker::wake);
        restored
    }
}

/// Puts a restored timer's state back (under its lock, just created).
fn restore_state(
    core: &Core,
    l: &mut LockedTimer<'_>,
    rec: &TimerRecord,
    now: &[u64; CLOCKS],
    wake: &mut Vec<Waker>,
) {
    let (clock, expiry) = match rec.expiry {
        Expiry::None => (rec.clock, 0),
        Expiry::Remaining { clock, ns } => {
            let at = i128::from(now[clock.index()]) + i128::from(ns);
            (clock, at.clamp(0, i128::from(u64::MAX)) as u64)
        }
        Expiry::Realtime(ns) => (ClockId::Realtime, ns as u64),
    };
    // Relaxed: under the new timer's lock, before anyone else can see it.
    l.fixed()
        .precision
        .store(rec.precision.pack(), Ordering::Relaxed);
    let (state, published) = l.state_and_published();
    let interval = rec.interval as u64;
    let (status, overrun, latched) = (rec.status, rec.overrun, rec.overrun_last);
    let mut arm = state.restore(published, clock, expiry, interval, status, overrun, latched);
    // A one-shot expiry may have come from a coarse reading (up to the lag late), which the
    // snapshot does not record: keep the lag out of the slack, as its arming did. It costs
    // at most a finer granule, never an early or late fire.
    l.state.set_coarse(interval == 0);
    if let Some(signal) = rec.signal {
        let waiting = match signal.state {
            SignalState::Idle => Restored::Idle,
            SignalState::Owed => Restored::Owed,
            SignalState::Outstanding => Restored::Outstanding { stale: false },
            SignalState::OutstandingStale => Restored::Outstanding { stale: true },
        };
        arm = core.signal_restore(l, waiting, signal.lateness);
    }
    if rec.pending && l.state.notify() == NotifyKind::Queue {
        let seq = l.state.signal_seq;
        enqueue(core, l, seq, |w| wake.push(w));
    }
    let _ = core.apply(l, arm);
}
