//! Signal timers under the manual clock, through a port that plays the kernel's signal queue
//! (`testing::TestSignals`): what is queued, when, with which `si_overrun`, and what
//! `getoverrun` says, in the cases programs rely on (`signals/mod.rs` has the rules). The real
//! signals are tested by `tempora/tests/signals.rs` and the C suite.

use super::*;
use crate::timers::object::signal::TimerSignal;
use crate::timers::signals::PROBE_CAP;
use crate::timers::testing::TestSignals;

const SIGRTMIN: i32 = 34;

pub(super) fn with_port() -> (Manual, Arc<TestSignals>) {
    let port = TestSignals::new();
    let p = port.clone();
    let f = Manual::with(move |b| {
        b.tick(Duration::from_micros(1)).signal_port(p);
    });
    (f, port)
}

fn signal_timer(f: &Manual, value: usize) -> TimerId {
    f.owner
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo: SIGRTMIN,
                value,
            },
        )
        .unwrap()
}

/// A timer whose signal goes to thread `tid` (`SIGEV_THREAD_ID`), with `value`.
pub(super) fn thread_signal_timer(f: &Manual, tid: i32, value: usize) -> TimerId {
    f.owner
        .create(
            ClockId::Monotonic,
            Notify::ThreadSignal {
                tid,
                signo: SIGRTMIN,
                value,
            },
        )
        .unwrap()
}

/// `n` signal timers (values 0..n), each armed for 1 ms, then every 1 ms.
pub(super) fn every_ms(f: &Manual, n: usize) -> Vec<TimerId> {
    let ids: Vec<_> = (0..n).map(|i| signal_timer(f, i)).collect();
    for &t in &ids {
        f.arm(t, ms(1), ms(1));
    }
    ids
}

fn sig(t: TimerId, overrun: i32, value: usize) -> TimerSignal {
    TimerSignal {
        tid: 0,
        signo: SIGRTMIN,
        timer: t.get(),
        overrun,
        value,
    }
}

#[test]
fn a_one_shot_queues_its_signal_once_with_the_timers_fields() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0xfeed);
    f.arm(t, ms(10), Duration::ZERO);
    assert_eq!(f.advance(ms(9)), 0);
    assert_eq!(f.advance(ms(1)), 1);
    assert_eq!(port.take_all(), vec![sig(t, 0, 0xfeed)]);
    assert_eq!(f.advance(ms(100)), 0);
    assert_eq!(port.sent(), 1);
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0);
    assert_eq!(f.owner.gettime(t).unwrap(), ItimerSpec::default());
}

#[test]
fn a_periodic_timer_whose_signals_are_taken_at_once_sends_one_per_period() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 1);
    f.arm(t, ms(100), ms(100));
    for _ in 0..5 {
        f.advance(ms(100));
        assert_eq!(port.take_all(), vec![sig(t, 0, 1)]);
        assert_eq!(f.owner.getoverrun(t).unwrap(), 0);
    }
    assert_eq!(port.sent(), 5);
}

/// The kernel selftest's case: 100 ms periods, the signal blocked for about a second. The
/// kernel delivers one signal whose overrun is 9; tempora's signal went out before the
/// periods passed, so `getoverrun` reports the 9 once it is delivered, and the next signal's
/// `si_overrun` carries them (the sums agree).
#[test]
fn a_blocked_signal_reads_the_periods_it_missed_once_delivered() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, ms(100), ms(100));
    f.advance(ms(100));
    assert_eq!(port.queued(), 1);
    for _ in 0..9 {
        f.advance(ms(100));
    }
    assert_eq!(port.sent(), 1, "one signal pending per timer");
    f.advance(ms(50));
    // Unblocked at 1.05 s: the handler runs and asks.
    assert_eq!(port.take(), Some(sig(t, 0, 0)));
    assert_eq!(f.owner.getoverrun(t).unwrap(), 9);
    // The kernel re-arms it for the next period, 1.1 s.
    assert_eq!(f.advance(ms(49)), 0);
    assert_eq!(port.queued(), 0);
    f.advance(ms(1));
    assert_eq!(port.take(), Some(sig(t, 9, 0)), "the carried periods");
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0, "this signal missed none");
}

/// The same without a `getoverrun` in the handler: the next probe (the next period) finds the
/// signal gone and sends the next one.
#[test]
fn a_blocked_signal_is_found_delivered_at_the_next_period() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, ms(100), ms(100));
    for _ in 0..10 {
        f.advance(ms(100));
    }
    f.advance(ms(50));
    assert_eq!(port.take(), Some(sig(t, 0, 0)));
    // Seen pending, it is looked at a little before each period (1.099 s), not at it.
    f.advance(ms(49));
    assert_eq!(port.queued(), 0);
    f.advance(ms(1));
    assert_eq!(port.queued(), 1);
    assert_eq!(
        f.owner.getoverrun(t).unwrap(),
        9,
        "the first signal's, until the second is delivered"
    );
    assert_eq!(port.take(), Some(sig(t, 9, 0)));
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0, "the second's");
    f.advance(ms(100));
    assert_eq!(port.take(), Some(sig(t, 0, 0)));
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0);
}

/// The kernel selftest's `check_sig_ign`: 100 ms periods, the signal ignored for 3 s, then
/// handled: one signal, whose overrun counts every period since the first expiry (29).
#[test]
fn an_ignored_signal_parks_its_timer_until_handled_again() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_ignored(true);
    f.arm(t, ms(100), ms(100));
    for _ in 0..30 {
        f.advance(ms(100));
    }
    assert_eq!(port.sent(), 0, "nothing is queued while ignored");
    port.set_ignored(false);
    // The kernel queues it at the sigaction call; tempora at its next retry, within the cap.
    f.advance(Duration::from_nanos(PROBE_CAP));
    let got = port.take_all();
    assert_eq!(got, vec![sig(t, 29, 0)]);
    assert_eq!(f.owner.getoverrun(t).unwrap(), 29);
}

#[test]
fn an_ignored_one_shot_signal_is_dropped() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_ignored(true);
    f.arm(t, ms(10), Duration::ZERO);
    f.advance(ms(10));
    port.set_ignored(false);
    f.advance(Duration::from_secs(1));
    assert_eq!(port.sent(), 0);
    assert_eq!(f.owner.gettime(t).unwrap(), ItimerSpec::default());
}

/// `RLIMIT_SIGPENDING` reached (`EAGAIN`): the signal is not lost; it is queued once room
/// returns, and the periods meanwhile are its overrun.
#[test]
fn a_signal_refused_for_want_of_room_is_queued_when_room_returns() {
    let (f, port) = with_port();
    let one = signal_timer(&f, 1);
    let every = signal_timer(&f, 2);
    port.set_room(Some(0));
    f.arm(one, ms(10), Duration::ZERO);
    f.arm(every, ms(10), ms(10));
    for _ in 0..10 {
        f.advance(ms(10));
    }
    assert_eq!(port.sent(), 0);
    port.set_room(None);
    f.advance(Duration::from_millis(200));
    let mut got = port.take_all();
    got.sort_by_key(|s| s.value);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], sig(one, 0, 1), "a one-shot's overrun is 0");
    assert!(got[1].overrun >= 9, "{got:?}");
}

/// A 1 µs period whose signal stays pending for 10 s: probes double up to the cap, so the
/// work is bounded by `10 s / PROBE_CAP` plus the ramp, not by the periods.
#[test]
fn a_blocked_fast_timer_costs_bounded_probes() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, Duration::from_micros(1), Duration::from_micros(1));
    let mut fired = 0;
    // 10 s in 1 ms steps, polling each step as a driver would.
    for _ in 0..10_000 {
        fired += f.advance(ms(1));
    }
    let bound = 10 * NANOS_PER_SEC / PROBE_CAP + 20;
    assert!(
        (port.queries() as u64) <= bound,
        "{} probes, bound {bound}",
        port.queries()
    );
    assert!(fired as u64 <= bound);
    assert_eq!(port.sent(), 1);
    port.take();
    assert_eq!(
        f.owner.getoverrun(t).unwrap(),
        i32::try_from(10 * NANOS_PER_SEC / US - 1).unwrap()
    );
}

/// settime and delete void an outstanding signal, which user space cannot take back (the
/// divergence table): the re-armed timer's expiry sends its own, and a deleted timer sends
/// nothing more.
#[test]
fn settime_and_delete_with_a_pending_signal() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, ms(10), Duration::ZERO);
    f.advance(ms(10));
    assert_eq!(port.queued(), 1);
    f.arm(t, ms(10), Duration::ZERO);
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0);
    f.advance(ms(10));
    assert_eq!(
        port.sent(),
        2,
        "the old signal cannot be taken back; the new arming sends its own"
    );
    port.take_all();
    f.arm(t, ms(10), ms(10));
    f.advance(ms(10));
    assert_eq!(port.sent(), 3);
    f.owner.delete(t).unwrap();
    f.advance(ms(100));
    assert_eq!(port.sent(), 3, "nothing after delete");
}

#[test]
fn the_id_as_value_and_invalid_sigevents() {
    let (f, port) = with_port();
    let t = f
        .owner
        .create(ClockId::Monotonic, Notify::SignalWithId { signo: 14 })
        .unwrap();
    f.arm(t, ms(1), Duration::ZERO);
    f.advance(ms(1));
    let got = port.take().unwrap();
    assert_eq!((got.signo, got.value), (14, t.get() as usize));
    for signo in [0, -1, 65, 1000] {
        let e = f
            .owner
            .create(ClockId::Monotonic, Notify::Signal { signo, value: 0 })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidSignal(_)), "{signo}: {e}");
        assert_eq!(e.errno(), libc::EINVAL);
    }
    for signo in [1, 9, 19, 64] {
        f.owner
            .create(ClockId::Monotonic, Notify::Signal { signo, value: 0 })
            .unwrap();
    }
    let e = f
        .owner
        .create(
            ClockId::Monotonic,
            Notify::ThreadSignal {
                tid: 1,
                signo: 10,
                value: 0,
            },
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidSignal(_)), "{e}");
    // Thread 0 and negative IDs are no thread (the kernel's EINVAL), and `check_signal`, which
    // the C ABI calls before its own later checks, answers as the create does.
    let me = crate::timers::object::signal::gettid();
    for (tid, signo, ok) in [
        (0, 10, false),
        (-1, 10, false),
        (1, 10, false),
        (me, 65, false),
        (me, 10, true),
    ] {
        let n = Notify::ThreadSignal {
            tid,
            signo,
            value: 0,
        };
        assert_eq!(n.check_signal().is_ok(), ok, "{tid} {signo}");
        assert_eq!(
            f.owner.create(ClockId::Monotonic, n).is_ok(),
            ok,
            "{tid} {signo}"
        );
    }
    assert!(Notify::Queue.check_signal().is_ok());
}

#[test]
fn a_thread_signal_goes_to_its_thread_and_stops_when_the_thread_is_gone() {
    let (f, port) = with_port();
    let tid = crate::timers::object::signal::gettid();
    let t = thread_signal_timer(&f, tid, 5);
    f.arm(t, ms(10), ms(10));
    f.advance(ms(10));
    let got = port.take().unwrap();
    assert_eq!((got.tid, got.value), (tid, 5));
    port.thread_exits(tid);
    for _ in 0..10 {
        f.advance(ms(10));
    }
    assert_eq!(port.sent(), 1);
    assert_eq!(f.timers.next_deadline(), None, "nothing left to do");
}

/// An ignored 1 µs timer costs retries that double up to the probes' cap, not one per period.
#[test]
fn an_ignored_fast_timer_costs_bounded_retries() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_ignored(true);
    f.arm(t, Duration::from_micros(1), Duration::from_micros(1));
    let mut fired = 0;
    for _ in 0..10_000 {
        fired += f.advance(ms(1));
    }
    let bound = 10 * NANOS_PER_SEC / PROBE_CAP + 20;
    assert!(fired as u64 <= bound, "{fired} retries, bound {bound}");
    assert_eq!(port.sent(), 0);
}

/// Each queued signal counts as a delivery in the owner's statistics, its overrun with it.
#[test]
fn a_queued_signal_is_a_delivery_in_the_statistics() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, ms(10), ms(10));
    f.advance(ms(10));
    port.take();
    for _ in 0..3 {
        f.advance(ms(10));
    }
    port.take();
    f.advance(ms(10));
    // Queued at 10 ms, 20 ms (taken at 10 and 40), and at 50 ms with the two periods that
    // passed while the second was pending.
    let s = f.owner.stats().counts;
    assert_eq!(s.delivered, 3, "{s:?}");
    assert_eq!(s.overruns, 2, "{s:?}");
}

/// The C suite's `sig_ignored`, blocked part: the signal pending (blocked) when `SIG_IGN`
/// discards it, the handler back later, then unblocked: one signal, and `getoverrun` counts
/// every period since the first expiry, as the kernel (which parks the timer on its ignored
/// list) reports. Without telling the discard from a delivery, the periods before it were
/// reported as the discarded signal's and lost.
#[test]
fn a_signal_discarded_by_sig_ign_is_owed_again_with_its_periods() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_blocked(true);
    f.arm(t, ms(100), ms(100));
    f.advance(ms(100));
    f.advance(ms(100));
    assert_eq!(port.queued(), 1);
    f.advance(ms(50));
    port.set_ignored(true); // 0.25 s: discards the pending signal
    assert_eq!(port.queued(), 0);
    f.advance(ms(50)); // 0.3 s
    f.advance(ms(250)); // 0.55 s: the handler is back
    port.set_ignored(false);
    for _ in 0..3 {
        f.advance(ms(100));
    }
    assert_eq!(port.queued(), 1, "one signal for the whole time");
    // 0.85 s: unblocked.
    let got = port.take().unwrap();
    assert_eq!(f.owner.getoverrun(t).unwrap(), 7);
    // The si_overruns (this one's and the next's) still add up to every period.
    port.set_blocked(false);
    f.advance(ms(50));
    let next = port.take().unwrap();
    assert_eq!(got.overrun + next.overrun, 7, "{got:?} {next:?}");
}

/// A one-shot's signal discarded by `SIG_IGN` is gone, as the kernel drops it.
#[test]
fn a_one_shot_signal_discarded_by_sig_ign_is_dropped() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_blocked(true);
    f.arm(t, ms(10), Duration::ZERO);
    f.advance(ms(10));
    port.set_ignored(true);
    port.set_ignored(false);
    assert_eq!(f.owner.getoverrun(t).unwrap(), 0);
    f.advance(Duration::from_secs(1));
    assert_eq!(port.sent(), 1);
    assert_eq!(port.queued(), 0);
}

/// A periodic timer polled a little after each expiry (as a driver is) whose signals are
/// taken at once sends one per period, each with overrun 0. (The probe after a send was
/// placed a period after the send, rounded up to the grid: the period after next.)
#[test]
fn a_periodic_timer_polled_late_still_sends_every_period() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    f.arm(t, ms(1), ms(1));
    f.advance(ms(1) + Duration::from_micros(30));
    assert_eq!(port.take_all(), vec![sig(t, 0, 0)]);
    for _ in 0..20 {
        f.advance(ms(1));
        assert_eq!(port.take_all(), vec![sig(t, 0, 0)], "one per period");
    }
}

/// One-shot timers sharing a signal number, re-armed while another's signal is pending,
/// each send their own signal: none is lost (a pending number is no proof that a timer's
/// own signal is the one pending).
#[test]
fn re_armed_one_shots_sharing_a_number_lose_no_signal() {
    let (f, port) = with_port();
    let timers: Vec<_> = (0..10).map(|i| signal_timer(&f, i)).collect();
    for round in 0..3 {
        for &t in &timers {
            f.arm(t, ms(1), Duration::ZERO);
        }
        f.advance(ms(1));
        // Taken one by one while the others are pending.
        let mut got = Vec::new();
        while let Some(s) = port.take() {
            got.push(s.value);
            f.advance(Duration::from_micros(1));
        }
        got.sort_unstable();
        assert_eq!(got, (0..10).collect::<Vec<_>>(), "round {round}");
    }
}

/// Two timers on one standard signal (SIGUSR1): the kernel would merge a second instance
/// queued while the first is pending, so the second timer's signal waits until the number is
/// free, then goes: both are delivered, as the kernel delivers both timers' signals.
#[test]
fn a_standard_signal_waits_while_its_number_is_pending() {
    let (f, port) = with_port();
    let mk = |value| {
        f.owner
            .create(
                ClockId::Monotonic,
                Notify::Signal {
                    signo: libc::SIGUSR1,
                    value,
                },
            )
            .unwrap()
    };
    let (a, b) = (mk(1), mk(2));
    f.arm(a, ms(10), Duration::ZERO);
    f.arm(b, ms(20), Duration::ZERO);
    f.advance(ms(10));
    f.advance(ms(10));
    assert_eq!(port.sent(), 1, "b waits: a's SIGUSR1 is pending");
    assert_eq!(port.take().map(|s| s.value), Some(1));
    f.advance(Duration::from_nanos(PROBE_CAP));
    assert_eq!(port.take().map(|s| s.value), Some(2));
    let _ = (a, b);
}

/// `gettime` only reads a signal timer: periods it skips over while a signal waits to be sent
/// (ignored here) stay that signal's, counted by the timer's own retries. (It added them to
/// the count the next signal carries, settime's -1 losing one: `si_overrun` 105 and
/// `getoverrun` 34 with a `gettime` every millisecond, 106 and 106 without.)
#[test]
fn gettime_changes_no_count_of_a_signal_timer() {
    let run = |with_gettime: bool| {
        let (f, port) = with_port();
        let t = signal_timer(&f, 0);
        port.set_ignored(true);
        f.arm(t, ms(1), ms(1));
        for _ in 0..100 {
            f.advance(ms(1));
            if with_gettime {
                f.owner.gettime(t).unwrap();
            }
        }
        port.set_ignored(false);
        f.advance(Duration::from_nanos(PROBE_CAP));
        let got = port.take().unwrap();
        (got.overrun, f.owner.getoverrun(t).unwrap())
    };
    let without = run(false);
    assert_eq!(run(true), without);
    assert_eq!(without.0, without.1, "{without:?}");
}

/// `set_precision` on a timer retrying a signal it owes does not push the retry back to the
/// timer's next period.
#[test]
fn set_precision_keeps_an_owed_signals_retry() {
    let (f, port) = with_port();
    let t = signal_timer(&f, 0);
    port.set_room(Some(0));
    f.arm(t, Duration::from_secs(1), Duration::from_secs(1));
    f.advance(Duration::from_secs(1));
    assert_eq!(port.sent(), 0);
    port.set_room(None);
    f.owner.set_precision(t, Precision::Precise).unwrap();
    f.advance(ms(5));
    assert_eq!(
        port.sent(),
        1,
        "the retry went at once, not at the next period"
    );
}

/// A periodic signal blocked from the start while its disposition ignores it (`SIG_IGN`, or
/// `SIG_DFL` of a signal whose default is to ignore, as `SIGCONT`'s): the kernel queues it
/// (a blocked signal is never ignored), and the unblock dequeues it before discarding it, which
/// settles its overrun as a delivery does. `getoverrun` right after the unblock reads the 9
/// periods it missed, as with a handler; then each expiry finds the signal ignored and
/// unblocked, and parks. A signal queued while handled and discarded by a `SIG_IGN` is the
/// other case: no delivery, `getoverrun` stays 0 (`a_signal_discarded_by_sig_ign_...`).
#[test]
fn a_blocked_signal_its_disposition_ignores_is_taken_at_the_unblock_with_its_overruns() {
    for ask_at_once in [true, false] {
        let (f, port) = with_port();
        port.set_blocked(true);
        port.set_ignored(true);
        let t = signal_timer(&f, 0);
        f.arm(t, ms(100), ms(100));
        for _ in 0..10 {
            f.advance(ms(100));
        }
        assert_eq!(port.queued(), 1, "blocked: queued although ignored");
        f.advance(ms(50));
        // The unblock at 1.05 s takes it and discards it.
        port.set_blocked(false);
        assert_eq!(port.take(), Some(sig(t, 0, 0)));
        if ask_at_once {
            assert_eq!(f.owner.getoverrun(t).unwrap(), 9, "asked at the unblock");
        }
        for _ in 0..5 {
            f.advance(ms(10));
        }
        for _ in 0..5 {
            f.advance(ms(100));
        }
        assert_eq!(port.queued(), 0, "ignored and not blocked: nothing queued");
        assert_eq!(
            f.owner.getoverrun(t).unwrap(),
            9,
            "ask_at_once {ask_at_once}"
        );
    }
}

/// Which side of an expiry a consumption fell (`signals/mod.rs`): a timer at 2 s, then every
/// 3 s, its signal blocked from the start. The look at 5 s finds the signal pending, so the
/// next look comes `LOOK_LEAD` before 8 s. Taken after that look (a program that unblocks as
/// the expiry at 8 s passes), the expiry at 8 s preceded the consumption: an overrun of that
/// signal, no signal of its own (one handler call, overrun 2, as on Linux). Taken before that
/// look, the consumption preceded 8 s: the look finds it gone and 8 s sends the next signal.
#[test]
fn an_expiry_before_the_consumption_is_an_overrun_and_one_after_it_sends() {
    use crate::timers::signals::LOOK_LEAD;
    let lead = Duration::from_nanos(LOOK_LEAD);
    let start = |f: &Manual, port: &TestSignals| {
        let t = signal_timer(f, 0);
        f.arm(t, ms(2000), ms(3000));
        f.advance(ms(2000));
        assert_eq!(port.queued(), 1);
        f.advance(ms(3000));
        assert_eq!(port.sent(), 1, "pending at 5 s: an overrun");
        t
    };
    // Taken just after the look before 8 s.
    let (f, port) = with_port();
    let t = start(&f, &port);
    f.advance(ms(3000) - lead);
    assert_eq!(port.sent(), 1);
    // The program takes it as 8 s passes, before the driver's poll at 8 s.
    f.clock.advance(lead);
    assert_eq!(port.take(), Some(sig(t, 0, 0)), "taken at 8 s");
    f.timers.poll();
    f.advance(ms(3000) - lead - Duration::from_micros(1));
    assert_eq!(
        port.sent(),
        1,
        "8 s sent nothing: an overrun of the signal taken"
    );
    assert_eq!(f.owner.getoverrun(t).unwrap(), 2, "5 s and 8 s");
    f.advance(lead + Duration::from_micros(1));
    assert_eq!(port.take(), Some(sig(t, 2, 0)), "11 s, carrying the two");

    // Taken just before the look before 8 s.
    let (f, port) = with_port();
    let t = start(&f, &port);
    f.advance(ms(3000) - lead - Duration::from_micros(1));
    assert_eq!(port.take(), Some(sig(t, 0, 0)), "taken just before 8 s");
    f.advance(Duration::from_micros(1));
    assert_eq!(port.sent(), 1, "the look found it gone, before 8 s");
    assert_eq!(f.owner.getoverrun(t).unwrap(), 1, "5 s");
    f.advance(lead);
    assert_eq!(port.take(), Some(sig(t, 1, 0)), "8 s sends the next");

    // Taken before the look, which runs late (a loaded driver), after 8 s: it was placed
    // before 8 s, so 8 s came after the consumption, as when it runs on time: 8 s sends.
    let (f, port) = with_port();
    let t = start(&f, &port);
    f.clock.advance(ms(3000) - lead - ms(1));
    assert_eq!(port.take(), Some(sig(t, 0, 0)), "taken before the look");
    f.advance(lead + ms(1) + ms(2));
    assert_eq!(
        port.take(),
        Some(sig(t, 1, 0)),
        "8 s sends, from a look 2 ms late"
    );
}
