//! Signal timers through checkpoint and restore, under the manual clock with a port playing
//! the kernel's signal queue (`testing::TestSignals`): each kind keeps its target and fires
//! the same signals afterwards, an owed signal is sent after the restore, an outstanding one
//! is settled as delivered in a new process and stays outstanding where it is still pending,
//! and a thread target that is not this process's fails the restore whole.

use super::*;
use crate::timers::object::signal::{gettid, TimerSignal};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The record of timer `id` in `snap`.
fn record(snap: &Snapshot, id: TimerId) -> &TimerRecord {
    snap.timers.iter().find(|t| t.id == id).expect("recorded")
}

/// Its signal part.
fn signal(snap: &Snapshot, id: TimerId) -> SignalRecord {
    record(snap, id).signal.expect("a signal timer")
}

/// A fresh service on a clock an hour ahead on the monotonic clocks, at `like`'s wall time
/// (another process's), with its own signal port.
fn elsewhere(like: &ManualClock) -> (ManualClock, Timers, Arc<TestSignals>) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3600));
    clock.set_realtime(like.now(ClockId::Realtime));
    let (timers, port) = with_signals(&clock);
    (clock, timers, port)
}

#[test]
fn the_signal_sample_holds_every_kind_and_state() {
    let snap = signal_sample();
    let by_id = |n| signal(&snap, TimerId::new(n).unwrap());
    let tid = gettid();
    let want = [
        (
            2,
            SignalTarget::Process {
                signo: SIGRTMIN,
                value: 0xfeed,
            },
            SignalState::Outstanding,
        ),
        (
            3,
            SignalTarget::Process {
                signo: SIGRTMIN + 1,
                value: 1,
            },
            SignalState::Outstanding,
        ),
        (
            5,
            SignalTarget::Process {
                signo: SIGRTMIN + 2,
                value: 2,
            },
            SignalState::Idle,
        ),
        (
            7,
            SignalTarget::Thread {
                tid,
                signo: SIGRTMIN + 3,
                value: 3,
            },
            SignalState::Idle,
        ),
        (
            9,
            SignalTarget::ProcessWithId { signo: 14 },
            SignalState::Owed,
        ),
    ];
    for (id, target, state) in want {
        let s = by_id(id);
        assert_eq!((s.target, s.state), (target, state), "timer {id}");
        assert_eq!(record(&snap, TimerId::new(id).unwrap()).notify, "signal");
    }
    let pending = record(&snap, TimerId::new(2).unwrap());
    assert_eq!(pending.status, Status::RequeuePending);
    assert!(!pending.pending, "no event on the owner's queue");
    assert_eq!(
        pending.overrun, 7,
        "the periods counted while it is pending"
    );
    let owed = record(&snap, TimerId::new(9).unwrap());
    assert_eq!(owed.status, Status::RequeuePending);
    assert!(by_id(9).lateness > 0, "{:?}", by_id(9));
    let named = record(&snap, TimerId::new(11).unwrap());
    assert_eq!((&*named.notify, named.signal), ("signal", None));
    assert_eq!(Snapshot::decode(&snap.encode()).unwrap(), snap);
}

/// One timer of each kind, checkpointed, through bytes, restored in another process (its own
/// clock and signal port): the same records, then the same signals (target, number, ID,
/// `si_overrun`, value) and `getoverrun`s at every step, the signals taken as they come.
#[test]
fn each_kind_of_signal_timer_round_trips_and_sends_the_same_signals() {
    let ca = ManualClock::new();
    let (ta, pa) = with_signals(&ca);
    let a = ta.owner();
    let tid = gettid();
    let process = a
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value: 0xfeed,
            },
        )
        .unwrap();
    let thread = a
        .create(
            ClockId::Boottime,
            Notify::ThreadSignal {
                tid,
                signo: SIGRTMIN + 1,
                value: 5,
            },
        )
        .unwrap();
    let with_id = a
        .create(ClockId::Realtime, Notify::SignalWithId { signo: 14 })
        .unwrap();
    let disarmed = a
        .create(ClockId::Monotonic, Notify::SignalWithId { signo: 10 })
        .unwrap();
    a.settime(process, SetFlags::RELATIVE, ms(10), ms(10))
        .unwrap();
    a.settime(thread, SetFlags::RELATIVE, ms(25), Duration::ZERO)
        .unwrap();
    let at = ca.now(ClockId::Realtime) + 15 * MS;
    a.settime(with_id, SetFlags::ABSTIME, Duration::from_nanos(at), ms(15))
        .unwrap();
    ca.advance(ms(5));
    ta.poll();

    let snap = a.checkpoint();
    let decoded = Snapshot::decode(&snap.encode()).unwrap();
    assert_eq!(decoded, snap);
    assert_eq!(
        signal(&snap, thread).target,
        SignalTarget::Thread {
            tid,
            signo: SIGRTMIN + 1,
            value: 5
        }
    );
    assert_eq!(
        signal(&snap, with_id).target,
        SignalTarget::ProcessWithId { signo: 14 }
    );
    assert_eq!(
        signal(&snap, disarmed),
        SignalRecord::new(SignalTarget::ProcessWithId { signo: 10 })
    );

    let (cb, tb, pb) = elsewhere(&ca);
    let b = tb.owner();
    b.restore(&decoded, |name| panic!("asked to map {name:?}"))
        .unwrap();
    assert_eq!(b.checkpoint(), snap, "the same records, times included");
    let ids = [process, thread, with_id, disarmed];
    let mut sent = 0;
    for _ in 0..80 {
        for c in [&ca, &cb] {
            c.advance(ms(1));
        }
        ta.poll();
        tb.poll();
        let (sa, sb) = (pa.take_all(), pb.take_all());
        assert_eq!(sa, sb);
        sent += sa.len();
        for id in ids {
            assert_eq!(a.getoverrun(id).unwrap(), b.getoverrun(id).unwrap());
            assert_eq!(a.gettime(id).unwrap(), b.gettime(id).unwrap());
        }
    }
    // 8 of the periodic process signal, the thread's one, 5 of the realtime one (15..75 ms).
    assert_eq!(sent, 8 + 1 + 5);
}

/// A periodic timer restored in another process goes on sending a signal every period, the
/// value its (same) ID, none missed.
#[test]
fn a_restored_periodic_signal_timer_keeps_firing_signals() {
    let ca = ManualClock::new();
    let (ta, pa) = with_signals(&ca);
    let a = ta.owner();
    let id = a
        .create(ClockId::Monotonic, Notify::SignalWithId { signo: 14 })
        .unwrap();
    a.settime(id, SetFlags::RELATIVE, ms(10), ms(10)).unwrap();
    for _ in 0..3 {
        ca.advance(ms(10));
        ta.poll();
        assert_eq!(pa.take_all().len(), 1);
    }
    let snap = Snapshot::decode(&a.checkpoint().encode()).unwrap();
    let (cb, tb, pb) = elsewhere(&ca);
    let b = tb.owner();
    b.restore(&snap, |_| None).unwrap();
    for _ in 0..10 {
        cb.advance(ms(10));
        tb.poll();
        let got = pb.take_all();
        assert_eq!(
            got,
            vec![TimerSignal {
                tid: 0,
                signo: 14,
                timer: id.get(),
                overrun: 0,
                value: id.get() as usize,
            }]
        );
        assert_eq!(b.getoverrun(id).unwrap(), 0);
    }
}

/// A signal still outstanding at checkpoint, restored in a new process (whose queue does not
/// hold it): the restore settles it as delivered, as the original reads once its signal is
/// taken, and the next period's signal carries the periods counted meanwhile, in both.
#[test]
fn an_outstanding_signal_is_settled_as_delivered_by_a_restore_elsewhere() {
    let ca = ManualClock::new();
    let (ta, pa) = with_signals(&ca);
    let a = ta.owner();
    let id = a
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value: 7,
            },
        )
        .unwrap();
    a.settime(id, SetFlags::RELATIVE, ms(100), ms(100)).unwrap();
    for _ in 0..5 {
        ca.advance(ms(100));
        ta.poll();
    }
    assert_eq!(pa.sent(), 1, "blocked: one signal pending");
    let snap = a.checkpoint();
    assert_eq!(signal(&snap, id).state, SignalState::Outstanding);
    assert_eq!(record(&snap, id).overrun, 4);

    let (cb, tb, pb) = elsewhere(&ca);
    let b = tb.owner();
    b.restore(&snap, |_| None).unwrap();
    let after = b.checkpoint();
    assert_eq!(signal(&after, id).state, SignalState::Idle, "settled");
    assert_eq!(
        record(&after, id).status,
        Status::Armed,
        "for its next period"
    );
    assert_eq!(
        pa.take().map(|s| s.overrun),
        Some(0),
        "a's is delivered now"
    );
    assert_eq!(a.getoverrun(id).unwrap(), 4);
    assert_eq!(b.getoverrun(id).unwrap(), 4);
    for (c, t) in [(&ca, &ta), (&cb, &tb)] {
        c.advance(ms(100));
        t.poll();
    }
    let want = TimerSignal {
        tid: 0,
        signo: SIGRTMIN,
        timer: id.get(),
        overrun: 4,
        value: 7,
    };
    assert_eq!(pa.take_all(), vec![want]);
    assert_eq!(pb.take_all(), vec![want]);
    assert_eq!(b.getoverrun(id).unwrap(), 0);
}

/// Restored where its signal is still pending (the same process: the checkpointed timer was
/// deleted, its signal not yet taken): it stays outstanding, so no second signal is queued
/// while that one waits, and the periods meanwhile are its overruns.
#[test]
fn an_outstanding_signal_still_pending_stays_outstanding() {
    let clock = ManualClock::new();
    let (timers, port) = with_signals(&clock);
    let a = timers.owner();
    let id = a
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value: 0,
            },
        )
        .unwrap();
    a.settime(id, SetFlags::RELATIVE, ms(100), ms(100)).unwrap();
    clock.advance(ms(100));
    timers.poll();
    clock.advance(ms(150));
    timers.poll();
    let snap = a.checkpoint();
    assert_eq!(record(&snap, id).overrun, 1, "the 200 ms period");
    a.delete(id).unwrap();

    let b = timers.owner();
    b.restore(&snap, |_| None).unwrap();
    assert_eq!(b.checkpoint(), snap, "still outstanding");
    clock.advance(ms(300));
    timers.poll();
    assert_eq!(port.sent(), 1, "none queued while it is pending");
    assert_eq!(port.take().map(|s| s.timer), Some(id.get()));
    assert_eq!(b.getoverrun(id).unwrap(), 4, "200, 300, 400 and 500 ms");
    clock.advance(ms(50));
    timers.poll();
    assert_eq!(port.take().map(|s| s.overrun), Some(4));
    assert_eq!(port.sent(), 2);
}

/// Signals owed at checkpoint (no room in the queue; ignored) are sent after a restore where
/// they go: a one-shot's at once, a periodic timer's at its next period with its lateness and
/// that period in its `si_overrun`.
#[test]
fn owed_signals_are_sent_after_a_restore() {
    let ca = ManualClock::new();
    let (ta, pa) = with_signals(&ca);
    let a = ta.owner();
    let create = |value| {
        a.create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value,
            },
        )
        .unwrap()
    };
    let (one, every) = (create(1), create(2));
    pa.set_room(Some(0));
    a.settime(one, SetFlags::RELATIVE, ms(10), Duration::ZERO)
        .unwrap();
    a.settime(every, SetFlags::RELATIVE, ms(10), ms(10))
        .unwrap();
    for _ in 0..3 {
        ca.advance(ms(10));
        ta.poll();
    }
    assert_eq!(pa.sent(), 0);
    let snap = Snapshot::decode(&a.checkpoint().encode()).unwrap();
    assert_eq!(signal(&snap, one).state, SignalState::Owed);
    assert_eq!(record(&snap, one).expiry, Expiry::None, "a fired one-shot");
    let owed = signal(&snap, every);
    assert_eq!(owed.state, SignalState::Owed);

    let (cb, tb, pb) = elsewhere(&ca);
    let b = tb.owner();
    b.restore(&snap, |_| None).unwrap();
    tb.poll();
    let sig = |value, overrun| TimerSignal {
        tid: 0,
        signo: SIGRTMIN,
        timer: if value == 1 { one.get() } else { every.get() },
        overrun,
        value,
    };
    assert_eq!(pb.take_all(), vec![sig(1, 0)], "the one-shot's, at once");
    let Expiry::Remaining { ns, .. } = record(&snap, every).expiry else {
        panic!("a periodic timer's expiry")
    };
    cb.advance(Duration::from_nanos(ns as u64));
    tb.poll();
    assert_eq!(pb.take_all(), vec![sig(2, owed.lateness + 1)]);
    cb.advance(ms(10));
    tb.poll();
    assert_eq!(pb.take_all(), vec![sig(2, 0)], "then one a period");

    // Ignored at checkpoint: the periodic timer waits with its signal owed; handled where it
    // is restored, the signal goes at the next period.
    let (cc, tc, pc) = with_id_ignored();
    let snap = tc.0.checkpoint();
    assert_eq!(signal(&snap, tc.1).state, SignalState::Owed);
    let (cd, td, pd) = elsewhere(&cc);
    let d = td.owner();
    d.restore(&snap, |_| None).unwrap();
    assert_eq!(pc.sent(), 0);
    cd.advance(ms(10));
    td.poll();
    let got = pd.take_all();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].value, tc.1.get() as usize);
    assert!(got[0].overrun >= 4, "{got:?}");
}

/// An owner (and its ID) with a 10 ms periodic `SignalWithId` timer whose signal was ignored
/// for 50 ms, with its clock and port.
fn with_id_ignored() -> (ManualClock, (Owner, TimerId, Timers), Arc<TestSignals>) {
    let clock = ManualClock::new();
    let (timers, port) = with_signals(&clock);
    let o = timers.owner();
    let id = o
        .create(ClockId::Monotonic, Notify::SignalWithId { signo: 14 })
        .unwrap();
    port.set_ignored(true);
    o.settime(id, SetFlags::RELATIVE, ms(10), ms(10)).unwrap();
    for _ in 0..5 {
        clock.advance(ms(10));
        timers.poll();
    }
    (clock, (o, id, timers), port)
}

/// A thread target that is not a thread of the restoring process (a thread ID of the
/// checkpointed process) fails the restore as create fails, before anything is made; the
/// same snapshot with the ID rewritten to one of this process's threads restores.
#[test]
fn a_thread_target_not_of_this_process_fails_the_restore_whole() {
    let clock = ManualClock::new();
    let (timers, _port) = with_signals(&clock);
    let mut snap = signal_sample();
    let thread = snap
        .timers
        .iter()
        .position(
            |t| matches!(t.signal, Some(s) if matches!(s.target, SignalTarget::Thread { .. })),
        )
        .expect("a thread's timer");
    let retarget = |snap: &mut Snapshot, to: i32| {
        let s = snap.timers[thread].signal.as_mut().unwrap();
        if let SignalTarget::Thread { tid, .. } = &mut s.target {
            *tid = to;
        }
    };
    // No thread ID reaches i32::MAX (`pid_max` is at most 2^22).
    retarget(&mut snap, i32::MAX);
    let o = timers.owner();
    let named = |name: &str| (name == "signal").then(|| Notify::callback(|_| {}));
    let e = o.restore(&snap, named).unwrap_err();
    assert!(matches!(e, Error::InvalidSignal(_)), "{e}");
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(o.timers().is_empty(), "nothing made");
    assert!(!o.restore_ids());
    assert_eq!(o.create(ClockId::Monotonic, Notify::None).unwrap().get(), 0);
    o.delete(TimerId::new(0).unwrap()).unwrap();

    retarget(&mut snap, gettid());
    o.restore(&snap, named).unwrap();
    assert_eq!(o.timers().len(), snap.timers.len());
}

/// A callback named `signal` is a callback still: recorded without a target and mapped back
/// by name.
#[test]
fn a_callback_named_signal_is_restored_as_a_callback() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log: Log = Arc::default();
    let named = |log: &Log| {
        let log = log.clone();
        Notify::callback_named("signal", move |f| {
            log.lock().unwrap().push((f.id(), f.overrun()))
        })
    };
    let a = timers.owner();
    let id = a.create(ClockId::Monotonic, named(&log)).unwrap();
    a.settime(id, SetFlags::RELATIVE, ms(5), Duration::ZERO)
        .unwrap();
    let snap = Snapshot::decode(&a.checkpoint().encode()).unwrap();
    assert_eq!(
        (&*snap.timers[0].notify, snap.timers[0].signal),
        ("signal", None)
    );
    a.delete(id).unwrap();
    let b = timers.owner();
    assert_eq!(
        b.restore(&snap, |_| None),
        Err(Error::UnknownNotify("signal".into()))
    );
    b.restore(&snap, |name| (name == "signal").then(|| named(&log)))
        .unwrap();
    clock.advance(ms(5));
    timers.poll();
    assert_eq!(*log.lock().unwrap(), vec![(id, 0)]);
}

/// A record in state 3 (outstanding from an earlier arming: no build writes it any more) of a
/// periodic timer parked for that signal restores a timer that fires at its next period. (It
/// came back idle and in no wheel: never again.)
#[test]
fn a_stale_outstanding_record_restores_a_timer_that_fires() {
    let ca = ManualClock::new();
    let (ta, pa) = with_signals(&ca);
    let a = ta.owner();
    let id = a
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value: 3,
            },
        )
        .unwrap();
    a.settime(id, SetFlags::RELATIVE, ms(10), ms(10)).unwrap();
    for _ in 0..3 {
        ca.advance(ms(10));
        ta.poll();
    }
    assert_eq!(pa.queued(), 1, "parked: its signal pending");
    let mut snap = Snapshot::decode(&a.checkpoint().encode()).unwrap();
    let rec = snap.timers.iter_mut().find(|r| r.id == id).unwrap();
    let mut sig = rec.signal.expect("a signal record");
    assert_eq!(sig.state, SignalState::Outstanding);
    sig.state = SignalState::OutstandingStale;
    sig.lateness = 0;
    rec.signal = Some(sig);
    let (cb, tb, pb) = elsewhere(&ca);
    let b = tb.owner();
    b.restore(&snap, |_| None).unwrap();
    for _ in 0..10 {
        cb.advance(ms(10));
        tb.poll();
    }
    assert!(pb.sent() >= 1, "the restored timer fires");
}
