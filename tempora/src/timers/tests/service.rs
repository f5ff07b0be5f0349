//! Building a service and what polls it: the builder's checks, background drivers (OS
//! clocks, real threads) and the deadline fd. No timing is asserted.

use super::*;

#[test]
fn builder_rejects_bad_configurations() {
    assert!(matches!(
        Timers::builder().bases(0).build(),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Timers::builder().tick(Duration::ZERO).build(),
        Err(Error::InvalidConfig(_))
    ));
    // Above the bound (1 s): a 1 h tick left a 10 ms timer unfired for the hour.
    for tick in [
        Builder::MAX_TICK + Duration::from_nanos(1),
        Duration::from_secs(3600),
        Duration::MAX,
    ] {
        assert!(
            matches!(
                Timers::builder()
                    .clock(ManualClock::new())
                    .tick(tick)
                    .build(),
                Err(Error::InvalidConfig(_))
            ),
            "{tick:?}"
        );
    }
    let longest = Timers::builder()
        .clock(ManualClock::new())
        .tick(Builder::MAX_TICK)
        .build()
        .unwrap();
    assert_eq!(longest.tick_nanos(), 1_000_000_000);
    assert!(matches!(
        Timers::builder().batch(0).build(),
        Err(Error::InvalidConfig(_))
    ));
    let t = Timers::builder().bases(3).build().unwrap();
    assert_eq!(t.bases(), 3);
    assert_eq!(t.tick_nanos(), 1_000);
}

/// A clock source that wraps the OS clocks (here: the test clock over them) still gets its
/// driver; the manual clock gets none.
#[test]
fn default_drivers_follow_the_clock_source_not_its_type() {
    let wrapped = Timers::builder().clock(TestClock::os()).build().unwrap();
    assert_eq!(wrapped.drivers(), 1);
    let manual = Timers::builder().clock(ManualClock::new()).build().unwrap();
    assert_eq!(manual.drivers(), 0);
}

/// Waits (yielding, never sleeping) until a driver has published a finite sleep deadline on
/// the monotonic wheels: it has seen an armed timer and is about to sleep until it.
fn until_driver_sleeps(timers: &Timers) {
    let mono = ClockId::Monotonic.index();
    while !timers.core.bases.iter().any(|b| {
        let t = b.locked(|st| st.sleep[mono]).unwrap();
        t != 0 && t != crate::timers::shared::wake::NO_EXPIRY
    }) {
        std::thread::yield_now();
    }
}

#[test]
fn a_driver_fires_timers_with_nobody_polling() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1);
    });
    assert_eq!(timers.drivers(), 1);
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(1), ms(1)).unwrap();
    let got = take_driven(&owner, 3);
    assert!(got.iter().all(|e| e.id == t), "{got:?}");
    assert!(timers.stats().drivers.wakeups > 0);
}

/// `n` events of `owner`, taken without waiting in `recv`, which would fire them itself
/// (`Owner::recv`, "Who fires while a receiver waits"): the driver alone fires them. Fails
/// if they do not come within 30 s.
fn take_driven(owner: &crate::timers::Owner, n: usize) -> Vec<crate::timers::Event> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        match owner.try_recv() {
            Some(e) => got.push(e),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    assert_eq!(
        got.len(),
        n,
        "the driver fired {} of {n} expiries in 30 s",
        got.len()
    );
    got
}

/// A wake-up polls the bases with something due, not every base (`base.rs`, "Polling only
/// what is due"): with eight bases and one periodic timer, the other seven are read once, by
/// the first poll, and never again however often the driver wakes.
#[test]
fn a_wake_up_polls_only_the_bases_with_something_due() {
    let timers = testing::driven(|b| {
        b.bases(8).drivers(1);
    });
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(1), ms(1)).unwrap();
    take_driven(&owner, 20);
    let bases = timers.stats().bases;
    let busy: Vec<_> = bases.iter().filter(|b| b.fired > 0).collect();
    assert_eq!(busy.len(), 1, "one base holds the timer: {bases:?}");
    assert!(busy[0].polls >= 20, "{bases:?}");
    for b in bases.iter().filter(|b| b.fired == 0) {
        assert!(b.polls <= 1, "an idle base was polled again: {bases:?}");
    }
}

/// A deferrable timer fires when a driver is awake anyway, whichever base holds it: a base
/// whose only timer is deferrable is never passed over as having nothing due until its
/// bound. Here a periodic 1 ms timer on one base keeps the driver waking, and a deferrable
/// one on the other base, due in 5 ms with a bound of 60 s, comes within seconds.
#[test]
fn a_deferrable_timer_on_another_base_fires_when_the_driver_wakes_anyway() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1).max_deferral(Duration::from_secs(60));
    });
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(1), ms(1)).unwrap();
    let mine = crate::sync::thread_index() % 2;
    let d = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .set_precision(d, crate::Precision::Deferrable)
        .unwrap();
    // Armed from a thread of the other base: of 16 threads that each take their index while
    // all are alive (an index is taken back when its thread ends, so threads one after
    // another could all get the same), one whose index has the other parity arms it.
    let armed = std::sync::atomic::AtomicBool::new(false);
    let all_alive = std::sync::Barrier::new(16);
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                let other = crate::sync::thread_index() % 2 != mine;
                all_alive.wait();
                if other && !armed.swap(true, Ordering::SeqCst) {
                    owner
                        .settime(d, SetFlags::RELATIVE, ms(5), Duration::ZERO)
                        .unwrap();
                }
            });
        }
    });
    assert!(
        armed.load(Ordering::SeqCst),
        "no thread of the other base among 16"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match owner.try_recv() {
            Some(e) if e.id == d => return,
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    panic!("the deferrable timer did not fire in 20 s while the driver woke every 1 ms");
}

/// A thread blocked in `recv` on a service with one driver fires its own periodic timer: it
/// sleeps until the alarm's time itself and polls, so the driver's threads are not woken for
/// it. A callback due meanwhile still runs on a driver's thread, never on the receiver's,
/// and a second receiver (which cannot hold the alarm) still gets its events.
/// A thread that leads through `Timers::wait_leading` and then never polls (its `wait`
/// ignores the deadline it is given, as a thread held in a signal handler would): the
/// driver's backstop fires the other timers (`wake.rs`, "The backstop"), and another
/// receiver may lead once the hold lapsed. Without the backstop the event below never comes
/// while the first thread holds the alarm.
#[test]
fn a_leader_that_never_polls_delays_other_timers_by_the_backstop_alone() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1);
    });
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(5), ms(5)).unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let t2 = timers.clone();
    let stuck = std::thread::spawn(move || {
        t2.wait_leading(None, |_| {
            held_tx.send(()).unwrap();
            // Held until the test is done: never back to poll.
            go_rx.recv().unwrap();
            true
        })
    });
    held_rx.recv().unwrap();
    for _ in 0..5 {
        let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(e.map(|e| e.id), Some(t), "no event while a leader is stuck");
    }
    go_tx.send(()).unwrap();
    assert_eq!(stuck.join().unwrap(), Some(true));
}

/// `Timers::wait_leading` leads only a service with one driver: with none or two it returns
/// `None` without calling `wait`.
#[test]
fn wait_leading_needs_one_driver() {
    for drivers in [0, 2] {
        let timers = testing::driven(|b| {
            b.bases(2).drivers(drivers);
        });
        let r = timers.wait_leading(None, |_| panic!("waited without leading"));
        assert_eq!(r, None, "{drivers} drivers");
    }
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1);
    });
    let until = std::time::Instant::now() + Duration::from_millis(20);
    let mut turns = 0;
    let r = timers.wait_leading(Some(until), |t| {
        turns += 1;
        assert!(t.is_some_and(|t| t <= until));
        std::thread::sleep(
            t.unwrap()
                .saturating_duration_since(std::time::Instant::now()),
        );
        false
    });
    assert_eq!(r, Some(false), "until passed");
    assert!(turns >= 1);
}

#[test]
fn a_receiver_waiting_fires_its_own_timer() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1);
    });
    let (owner, other) = (timers.owner(), timers.owner());
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let u = other.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let ran_on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let r2 = ran_on.clone();
    let c = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_| {
                let name = std::thread::current().name().map(str::to_owned);
                r2.lock().unwrap().push(name);
            }),
        )
        .unwrap();
    owner.settime(t, SetFlags::RELATIVE, ms(2), ms(2)).unwrap();
    other.settime(u, SetFlags::RELATIVE, ms(3), ms(3)).unwrap();
    owner.settime(c, SetFlags::RELATIVE, ms(5), ms(5)).unwrap();
    let second = std::thread::spawn(move || {
        (0..10)
            .map(|_| other.recv_timeout(Duration::from_secs(30)).unwrap())
            .filter(|e| e.map(|e| e.id) == Some(u))
            .count()
    });
    for _ in 0..20 {
        let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(e.map(|e| e.id), Some(t));
    }
    assert_eq!(second.join().unwrap(), 10);
    owner.delete(c).unwrap();
    assert!(
        timers.core.drivers.receiver_polls.load(Ordering::Relaxed) > 0,
        "the receiver never fired in the driver's place"
    );
    let names = ran_on.lock().unwrap().clone();
    assert!(!names.is_empty(), "the callback never ran");
    assert!(
        names
            .iter()
            .all(|n| n.as_deref().is_some_and(|n| n.starts_with("tempora-"))),
        "a callback ran on a receiver's thread: {names:?}"
    );
}

#[test]
fn an_earlier_arm_rings_the_sleeping_driver_a_later_one_does_not() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(1);
    });
    let owner = timers.owner();
    let far = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let near = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(
            far,
            SetFlags::RELATIVE,
            Duration::from_secs(3600),
            Duration::ZERO,
        )
        .unwrap();
    // Once the driver publishes a finite deadline it sleeps until the 1 h timer; arming
    // later does not wake it.
    until_driver_sleeps(&timers);
    let rings = timers.core.wake.rings.load(Ordering::Relaxed);
    owner
        .settime(
            near,
            SetFlags::RELATIVE,
            Duration::from_secs(7200),
            Duration::ZERO,
        )
        .unwrap();
    assert_eq!(
        timers.core.wake.rings.load(Ordering::Relaxed),
        rings,
        "later: no ring"
    );
    // Arming earlier than its sleep wakes it, and the timer fires (without the ring the
    // driver would sleep for an hour and this would time out).
    owner
        .settime(near, SetFlags::RELATIVE, ms(2), Duration::ZERO)
        .unwrap();
    assert_eq!(
        timers.core.wake.rings.load(Ordering::Relaxed),
        rings + 1,
        "earlier: one ring"
    );
    let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(e.map(|e| e.id), Some(near));
}

#[test]
fn dropping_timers_joins_its_drivers_and_pending_events_stay_readable() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(2);
    });
    let owner = timers.owner();
    // The core is held by this handle and its driver set, the owner, each driver and the
    // clock watcher.
    assert_eq!(Arc::strong_count(&owner.reg.service().core), 6);
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let rearmed = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_nanos(1),
            Duration::ZERO,
        )
        .unwrap();
    // Wait until it fired: its event is then pending on the owner's queue.
    while owner.queued() == 0 {
        std::thread::yield_now();
    }
    owner
        .settime(rearmed, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    drop(timers);
    assert_eq!(
        Arc::strong_count(&owner.reg.service().core),
        1,
        "every driver thread (and the watcher) ended before drop returned"
    );
    assert_eq!(owner.try_recv().map(|e| e.id), Some(t), "still readable");
    assert!(owner.gettime(rearmed).is_ok(), "the owner still works");
}

#[test]
fn a_panicking_callback_does_not_stop_its_driver() {
    let timers = testing::driven(|b| {
        b.bases(1).drivers(1);
    });
    let owner = timers.owner();
    let boom = owner
        .create(ClockId::Monotonic, Notify::callback(|_| panic!("boom")))
        .unwrap();
    let after = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    quiet_panics(|| {
        owner
            .settime(boom, SetFlags::RELATIVE, ms(1), Duration::ZERO)
            .unwrap();
        while timers.callback_panics() == 0 {
            std::thread::yield_now();
        }
    });
    // The same driver goes on firing timers armed after the panic.
    owner
        .settime(after, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    let e = owner.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(e.map(|e| e.id), Some(after));
    assert_eq!(timers.callback_panics(), 1);
}

#[test]
fn clock_was_set_rings_every_driver() {
    let timers = testing::driven(|b| {
        b.bases(2).drivers(2);
    });
    let rings = timers.core.wake.rings.load(Ordering::Relaxed);
    timers.clock_was_set();
    assert_eq!(timers.core.wake.rings.load(Ordering::Relaxed), rings + 2);
    assert!(matches!(
        Timers::builder().bases(1).drivers(2).build(),
        Err(Error::InvalidConfig(_))
    ));
}

/// poll(2) on one fd: readable within `timeout_ms` (0: now)?
fn fd_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd that lives for the call.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents & libc::POLLIN != 0
}

#[test]
fn a_deadline_fd_needs_os_clocks_and_no_drivers() {
    let fx = Manual::with(|b| {
        b.drivers(0);
    });
    assert!(matches!(
        fx.timers.deadline_fd(),
        Err(Error::InvalidConfig(_))
    ));
    let driven = testing::driven(|b| {
        b.drivers(1);
    });
    assert!(matches!(driven.deadline_fd(), Err(Error::InvalidConfig(_))));
}

/// The deadline fd on the OS clocks: armed at the earliest timer, moved by an earlier arm (a
/// ring) and not by a later one, readable at the deadline and not before, re-armed by poll.
/// No timing assertion: "not before" is checked against the clock, and the far deadlines are
/// hours away.
#[test]
fn the_deadline_fd_follows_the_earliest_timer() {
    let timers = testing::deadline_fd(|b| {
        b.bases(2);
    });
    let owner = timers.owner();
    let fd = timers.deadline_fd().unwrap();
    assert!(!fd_readable(fd, 0), "nothing armed");
    let far = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(far, SetFlags::RELATIVE, Duration::from_secs(3600), ms(0))
        .unwrap();
    let rings = timers.core.wake.rings.load(Ordering::Relaxed);
    assert!(rings >= 1, "the first timer moved the fd from disarmed");
    let later = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(later, SetFlags::RELATIVE, Duration::from_secs(7200), ms(0))
        .unwrap();
    assert_eq!(
        timers.core.wake.rings.load(Ordering::Relaxed),
        rings,
        "a later arm costs no system call"
    );
    assert!(!fd_readable(fd, 0));
    // An earlier one moves it (a realtime timer: converted to the monotonic clock).
    let soon = owner.create(ClockId::Realtime, Notify::Queue).unwrap();
    let before = timers.now();
    owner
        .settime(soon, SetFlags::RELATIVE, ms(20), ms(0))
        .unwrap();
    assert_eq!(timers.core.wake.rings.load(Ordering::Relaxed), rings + 1);
    assert!(fd_readable(fd, 60_000), "readable at the deadline");
    assert!(timers.now() >= before + ms(20), "never before it");
    assert_eq!(timers.poll(), 1);
    assert_eq!(owner.try_recv().map(|e| e.id), Some(soon));
    assert!(
        !fd_readable(fd, 0),
        "poll re-armed it at the next deadline, an hour away"
    );
    // A sleep moves it too.
    let sleep = timers.sleep(ms(5));
    let deadline = sleep.deadline();
    let mut sleep = std::pin::pin!(sleep);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    assert!(fd_readable(fd, 60_000));
    assert!(timers.now() >= deadline);
    timers.poll();
    assert!(sleep.as_mut().poll(&mut cx).is_ready());
    // Everything cancelled: the fd may fire early (a poll then does nothing), never late;
    // after that poll it is disarmed.
    owner.delete(far).unwrap();
    owner.delete(later).unwrap();
    timers.poll();
    assert_eq!(timers.next_deadline(), None);
    assert!(!fd_readable(fd, 0));
}

/// `clock_was_set` makes the deadline fd readable at once: the loop polls and re-evaluates
/// absolute realtime timers.
#[test]
fn clock_was_set_makes_the_deadline_fd_readable() {
    let timers = testing::deadline_fd(|_| ());
    let fd = timers.deadline_fd().unwrap();
    assert!(!fd_readable(fd, 0));
    timers.clock_was_set();
    assert!(fd_readable(fd, 60_000));
    timers.poll();
    assert!(!fd_readable(fd, 0));
}
