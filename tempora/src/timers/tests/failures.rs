//! Never hang: a panic under a lock poisons it and the calls that meet it fail clearly; a
//! driver that dies is reported; an owner outliving its service fails clearly; a failure
//! wakes waiting tasks with no lock held. Each check would spin or sleep forever without its
//! fix, so each runs under `without_hanging`.

use super::*;

/// Runs `f` on a thread of its own and returns its result, failing the test if it has not
/// returned within a minute: each check below would spin or sleep forever if its rule broke,
/// and a test that hangs reports nothing.
fn without_hanging<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the call hung instead of returning")
}

/// Panics inside `f` (which runs a critical section of the service) with the message hidden.
fn panic_inside(f: impl FnOnce(Box<dyn FnOnce()>)) {
    quiet_panics(|| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(Box::new(|| {
                panic!("tempora test: a panic inside a critical section")
            }))
        }));
        assert!(r.is_err());
    });
}

#[cfg(debug_assertions)]
#[test]
fn lock_order_violation_is_caught_in_debug_builds() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    // A timer lock taken under a base lock: the reverse of timer → base (`delete` takes it;
    // `gettime` takes none, and `settime` refuses to start while the thread holds a lock).
    let r = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.timers.core.bases[0].locked(|_| {
                let _ = f.owner.delete(t);
            })
        }))
    });
    let msg = r.expect_err("the violation panics");
    let msg = (msg.downcast_ref::<String>().cloned())
        .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.starts_with("lock order: a rank-2 lock"), "{msg}");
    // A base lock under a base lock (two of one rank) is caught too.
    let r = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.timers.core.bases[1 % f.timers.bases()].locked(|_| {
                let _ = f.timers.next_deadline();
            })
        }))
    });
    assert!(r.is_err(), "two base locks at once panic");
    // The panic poisoned the base rather than leaving it held: the fixture still drops.
    assert_eq!(f.timers.core.bases[0].locked(|_| ()), Err(Poisoned));
}

#[test]
fn an_owner_outliving_its_timers_fails_clearly_and_never_hangs() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let owner = timers.owner();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let fired = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(t, SetFlags::RELATIVE, ms(100), ms(0))
        .unwrap();
    owner
        .settime(fired, SetFlags::RELATIVE, ms(1), ms(0))
        .unwrap();
    clock.advance(ms(1));
    timers.poll();
    // A receiver already waiting when the service goes is woken.
    let waiter = {
        let owner = owner.clone();
        std::thread::spawn(move || {
            let first = owner.recv();
            (first, owner.recv())
        })
    };
    drop(timers);
    let (first, then) = without_hanging(move || waiter.join().unwrap());
    assert_eq!(
        first.map(|e| e.id),
        Ok(fired),
        "a pending event is still delivered"
    );
    assert_eq!(then, Err(Error::ServiceStopped));
    assert_eq!(owner.recv(), Err(Error::ServiceStopped));
    assert_eq!(
        owner.settime(t, SetFlags::RELATIVE, ms(100), ms(0)),
        Err(Error::ServiceStopped),
        "arming would never fire"
    );
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue),
        Err(Error::ServiceStopped)
    );
    assert_eq!(Error::ServiceStopped.errno(), libc::ESHUTDOWN);
    // What needs no firing still works: read, checkpoint, delete.
    assert!(owner.gettime(t).is_ok());
    assert_eq!(owner.checkpoint().timers.len(), 2);
    assert_eq!(owner.delete(t), Ok(()));
}

/// A timer poisoned by a panic under its lock cannot be read: `try_checkpoint` says so (and
/// `checkpoint` panics, as documented) instead of making a snapshot without it.
#[test]
fn a_poisoned_timer_fails_try_checkpoint() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(5), Duration::ZERO);
    assert_eq!(f.owner.try_checkpoint().map(|s| s.timers.len()), Ok(1));
    panic_inside(|boom| {
        let _ = f.owner.reg.with_timer(t, |_| boom());
    });
    assert_eq!(
        f.owner.try_checkpoint().map(|_| ()),
        Err(Error::Poisoned("a timer"))
    );
    quiet_panics(|| {
        let owner = &f.owner;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| owner.checkpoint()));
        assert!(r.is_err(), "checkpoint panics, as documented");
    });
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_inside_a_base_poisons_it_and_calls_fail_instead_of_hanging() {
    let f = Manual::with(|b| {
        b.bases(1);
    });
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(5), ms(5));
    panic_inside(|boom| {
        let _ = f.timers.core.bases[0].locked(|_| boom());
    });
    assert_eq!(
        f.timers.core.bases[0].locked(|_| ()),
        Err(Poisoned),
        "poisoned, not held"
    );
    let (timers, owner) = (f.timers.clone(), f.owner.clone());
    let (armed, deadline, polled, health, recv) = without_hanging(move || {
        let armed = owner.settime(t, SetFlags::RELATIVE, ms(1), Duration::ZERO);
        let deadline = timers.next_deadline();
        let polled = timers.poll();
        (armed, deadline, polled, timers.health(), owner.recv())
    });
    let poisoned = Err(Error::Poisoned("a timer base"));
    assert_eq!(armed.map(|_| ()), poisoned);
    assert_eq!((deadline, polled), (None, 0));
    assert_eq!(health, poisoned, "the service reports it");
    assert_eq!(
        recv.map(|_| ()),
        poisoned,
        "a receiver is told, not left waiting"
    );
    assert_eq!(
        Error::Poisoned("a timer base").errno(),
        libc::ENOTRECOVERABLE
    );
    // Deleting and dropping still complete.
    assert_eq!(f.owner.delete(t), Ok(()));
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_inside_an_event_queue_fails_its_receivers_instead_of_hanging() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    let later = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), ms(1));
    f.arm(later, ms(3), Duration::ZERO);
    f.advance(ms(1));
    panic_inside(|boom| {
        let _ = f.owner.sink().locked(|_| boom());
    });
    let owner = f.owner.clone();
    let (received, recv) = without_hanging(move || (owner.try_recv(), owner.recv()));
    assert_eq!(received, None);
    assert_eq!(recv, Err(Error::Poisoned("an owner's event queue")));
    // The next delivery (`later`) meets the poisoned queue: the service reports it.
    assert_eq!(f.timers.health(), Ok(()));
    f.advance(ms(2));
    assert_eq!(
        f.timers.health(),
        Err(Error::Poisoned("an owner's event queue"))
    );
    without_hanging(move || drop(f));
}

#[test]
fn a_panic_under_a_timer_lock_fails_that_timer_and_the_owner_still_drops() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    let other = f.queue(ClockId::Monotonic);
    panic_inside(|boom| {
        let _ = f.owner.reg.with_timer(t, |_| boom());
    });
    let owner = f.owner.clone();
    let (get, set, del, fine) = without_hanging(move || {
        (
            owner.gettime(t),
            owner.settime(t, SetFlags::RELATIVE, ms(1), Duration::ZERO),
            owner.delete(t),
            owner.gettime(other),
        )
    });
    let poisoned = Err(Error::Poisoned("a timer"));
    assert_eq!(get.map(|_| ()), poisoned);
    assert_eq!(set.map(|_| ()), poisoned);
    assert_eq!(del, poisoned);
    assert!(fine.is_ok(), "other timers are unaffected");
    // The owner's teardown skips the poisoned timer (and keeps its memory) without waiting.
    without_hanging(move || drop(f));
}

#[test]
fn a_driver_that_dies_is_reported_and_its_receivers_are_told() {
    let timers = testing::driven(|b| {
        b.bases(1).drivers(1);
    });
    let owner = timers.owner();
    let waiter = {
        let owner = owner.clone();
        std::thread::spawn(move || owner.recv())
    };
    quiet_panics(|| {
        timers.core.crash_driver.store(true, Ordering::Relaxed);
        timers.clock_was_set(); // wakes the driver, which then panics
        while timers.health().is_ok() {
            std::thread::yield_now();
        }
    });
    let died = Err(Error::Poisoned("a driver thread"));
    assert_eq!(timers.health(), died);
    assert_eq!(
        without_hanging(move || waiter.join().unwrap()).map(|_| ()),
        died
    );
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue).map(|_| ()),
        died
    );
}

struct WakeProbe {
    timers: Timers,
    woken: AtomicUsize,
    violated: AtomicUsize,
}

impl std::task::Wake for WakeProbe {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        // A waker may call back into tempora: in debug builds the lock-order check panics if
        // it runs under a tempora lock (release builds would deadlock on the delivery lock).
        let t = self.timers.clone();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.poll())).is_err() {
            self.violated.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A task (woken through `waker`) waits on `other`'s queue; then a poll delivers into
/// `f.owner`'s poisoned queue, which fails the service and closes every queue. The task's
/// receive, to poll again.
fn fail_while_a_task_waits<'a>(
    f: &Manual,
    other: &'a Owner,
    waker: &std::task::Waker,
) -> std::pin::Pin<Box<crate::timers::Recv<'a>>> {
    let mut cx = std::task::Context::from_waker(waker);
    let mut recv = Box::pin(other.recv_async());
    assert!(recv.as_mut().poll(&mut cx).is_pending());
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    panic_inside(|boom| {
        let _ = f.owner.sink().locked(|_| boom());
    });
    quiet_panics(|| {
        f.clock.advance(ms(1));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.timers.poll()));
    });
    recv
}

/// A failure met under locks (a poisoned event queue, during a delivery) closes the owners'
/// queues and wakes their tasks only once the poll holds no lock.
#[test]
fn a_failure_wakes_waiting_tasks_with_no_lock_held() {
    let f = Manual::new();
    let probe = Arc::new(WakeProbe {
        timers: f.timers.clone(),
        woken: AtomicUsize::new(0),
        violated: AtomicUsize::new(0),
    });
    let other = f.timers.owner();
    let waker = std::task::Waker::from(probe.clone());
    let mut recv = fail_while_a_task_waits(&f, &other, &waker);
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(f.timers.health().is_err());
    assert_eq!(probe.woken.load(Ordering::SeqCst), 1);
    assert_eq!(
        probe.violated.load(Ordering::SeqCst),
        0,
        "woken under a lock"
    );
    assert!(matches!(
        recv.as_mut().poll(&mut cx),
        std::task::Poll::Ready(Err(Error::Poisoned(_)))
    ));
}

/// A sleep's waker panics when woken, with a payload whose own `Drop` panics: the poll that
/// fired the sleep must return (the panic is counted), not unwind out of `poll` while
/// dropping the payload: on this path too the payload is dropped under a catch, or the
/// second panic escapes the poll.
#[test]
fn a_waker_panic_payload_that_panics_on_drop_stays_inside_the_poll() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a payload's drop panics");
        }
    }
    struct Explodes;
    impl std::task::Wake for Explodes {
        fn wake(self: Arc<Self>) {
            std::panic::panic_any(Bomb);
        }
    }
    let f = Manual::new();
    let mut sleep = Box::pin(f.timers.sleep(ms(1)));
    let waker = std::task::Waker::from(Arc::new(Explodes));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    let polled = quiet_panics(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.advance(ms(1))))
    });
    assert_eq!(
        polled.ok(),
        Some(1),
        "the poll returned, having fired the sleep"
    );
    assert!(sleep.as_mut().poll(&mut cx).is_ready());
}

/// Makes an owner of its service when woken.
struct OwnerMaker {
    timers: Timers,
    made: AtomicUsize,
}

impl std::task::Wake for OwnerMaker {
    fn wake(self: Arc<Self>) {
        drop(self.timers.owner());
        self.made.fetch_add(1, Ordering::SeqCst);
    }
}

/// A task woken by the service's failure may make an owner of the same service: the halt
/// closes the owners' queues (which wakes their tasks) after letting go of the list of
/// owners, which a new owner joins. Closing them under that list's lock deadlocks such a
/// waker (release builds), or breaks the lock order (debug builds: the waker never runs to
/// its end).
#[test]
fn a_task_woken_by_a_failure_may_make_an_owner() {
    let made = without_hanging(|| {
        let f = Manual::new();
        let maker = Arc::new(OwnerMaker {
            timers: f.timers.clone(),
            made: AtomicUsize::new(0),
        });
        let other = f.timers.owner();
        let waker = std::task::Waker::from(maker.clone());
        drop(fail_while_a_task_waits(&f, &other, &waker));
        maker.made.load(Ordering::SeqCst)
    });
    assert_eq!(made, 1, "the woken task did not make its owner");
}
