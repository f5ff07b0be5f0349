//! Owners, timer handles and sleeps: separate queues and ID spaces, receiving across
//! threads, what dropping or destroying each takes with it, and churn across threads.

use super::*;

#[test]
fn owners_have_separate_queues_and_id_spaces() {
    let f = Manual::new();
    let b = f.timers.owner();
    let ta = f.queue(ClockId::Monotonic);
    let tb = b.create(ClockId::Monotonic, Notify::Queue).unwrap();
    assert_eq!(ta, tb, "both start at ID 0");
    f.arm(ta, ms(1), Duration::ZERO);
    b.settime(tb, SetFlags::RELATIVE, ms(2), Duration::ZERO)
        .unwrap();
    assert_eq!(f.advance(ms(2)), 2);
    assert_eq!(f.drain(), vec![Event::new(ta, 0)]);
    assert_eq!(b.try_recv(), Some(Event::new(tb, 0)));
}

#[test]
fn recv_waits_for_an_event_fired_by_another_thread() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    f.arm(t, ms(1), Duration::ZERO);
    assert_eq!(f.owner.recv_timeout(Duration::ZERO), Ok(None));
    let owner = f.owner.clone();
    let waiter = std::thread::spawn(move || owner.recv());
    f.clock.advance(ms(1));
    let poller = f.timers.clone();
    std::thread::spawn(move || poller.poll()).join().unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(Event::new(t, 0)));
}

#[test]
fn destroy_wakes_a_blocked_receiver_and_fails_later_calls() {
    let f = Manual::new();
    let t = f.queue(ClockId::Monotonic);
    let owner = f.owner.clone();
    let waiter = std::thread::spawn(move || owner.recv());
    f.owner.destroy();
    assert_eq!(waiter.join().unwrap(), Err(Error::OwnerDeleted));
    assert_eq!(f.owner.gettime(t), Err(Error::OwnerDeleted));
    assert_eq!(
        f.owner.create(ClockId::Monotonic, Notify::Queue),
        Err(Error::OwnerDeleted)
    );
}

#[test]
fn dropping_an_owner_takes_its_timers_out_of_the_wheels() {
    let f = Manual::new();
    let other = f.timers.owner();
    for _ in 0..500 {
        let id = other.create(ClockId::Monotonic, Notify::Queue).unwrap();
        other
            .settime(id, SetFlags::RELATIVE, ms(10), ms(10))
            .unwrap();
    }
    assert!(f.timers.next_deadline().is_some());
    drop(other);
    assert_eq!(f.timers.next_deadline(), None);
    assert_eq!(f.advance(ms(100)), 0);
    assert_eq!(f.timers.timer_count(), 0);
}

#[test]
fn a_timer_handle_deletes_its_timer_when_dropped_and_its_event_goes_with_it() {
    let f = Manual::new();
    let h = f.owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    let id = h.id();
    h.settime(SetFlags::RELATIVE, Duration::from_millis(5), Duration::ZERO)
        .unwrap();
    assert_eq!(h.gettime().unwrap().as_nanos().0, 5 * MS);
    f.clock.advance(Duration::from_millis(5));
    f.timers.poll();
    assert_eq!(f.owner.queued(), 1, "the event is queued");
    drop(h);
    assert_eq!(
        f.owner.gettime(id),
        Err(Error::UnknownTimer),
        "deleted on drop"
    );
    assert_eq!(f.owner.try_recv(), None, "its pending event dropped unseen");
    assert!(f.owner.timers().is_empty());
}

#[test]
fn a_timer_handle_can_be_given_up_or_deleted_with_its_error() {
    let f = Manual::new();
    let kept = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    let id = kept.into_id();
    assert_eq!(f.owner.getoverrun(id), Ok(0), "into_id keeps the timer");
    let h = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    assert_eq!(h.owner().timers().len(), 2);
    let h2 = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    let id2 = h2.id();
    assert_eq!(h.delete(), Ok(()));
    f.owner.delete(id2).unwrap();
    assert_eq!(
        h2.delete(),
        Err(Error::UnknownTimer),
        "deleted by ID meanwhile"
    );
    let h3 = f.owner.timer(ClockId::Monotonic, Notify::None).unwrap();
    f.owner.destroy();
    assert_eq!(h3.delete(), Err(Error::OwnerDeleted));
    drop(f.owner.timer(ClockId::Monotonic, Notify::None)); // fails: owner destroyed
}

/// A sleep keeps its service running after the last `Timers` handle is dropped (it would
/// otherwise never complete); once it goes too, the service stops.
#[test]
fn a_sleep_keeps_its_service_running() {
    let f = Manual::new();
    let sleep = f.timers.sleep(ms(1));
    let owner = f.owner.clone();
    drop(f);
    assert!(owner.create(ClockId::Monotonic, Notify::Queue).is_ok());
    drop(sleep);
    assert_eq!(
        owner.create(ClockId::Monotonic, Notify::Queue).map(|_| ()),
        Err(Error::ServiceStopped)
    );
}

/// Threads churn create / settime / gettime / delete / receive on their own owners and on a
/// shared one, owners are dropped and replaced, while another thread advances the manual clock
/// and polls. Runs under the tests' poisoning allocator (freed memory is overwritten), so a
/// wheel or queue entry that outlived its timer's memory would crash or misdeliver here.
/// Checks: no crash, every event well-formed, and after all owners are gone no timer and no
/// wheel entry is left (deleted and torn-down timers leave their wheels at once).
#[test]
fn churn_across_threads_leaves_nothing_behind() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |b| {
        b.bases(3).batch(8);
    });
    let shared = timers.owner();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Polls so far: the workers wait for the poller now and then, so that on a loaded machine
    // their churn still meets deliveries (without it, the workers could all finish before the
    // poller first ran, and the test check nothing).
    let done = Arc::new(AtomicU64::new(0));
    let poller = {
        let (timers, clock, stop, done) =
            (timers.clone(), clock.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || {
            let mut polls = 0u64;
            while !stop.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(1 + polls % 700));
                timers.poll();
                polls += 1;
                done.store(polls, Ordering::Relaxed);
            }
            polls
        })
    };
    let workers: Vec<_> = (0..3u64)
        .map(|w| {
            let (timers, shared, done) = (timers.clone(), shared.clone(), done.clone());
            std::thread::spawn(move || {
                let rng = TestRng::new(w);
                let next = || rng.next_u64();
                let mut received = 0u64;
                for round in 0..40 {
                    let own = timers.owner();
                    let mut ids: Vec<(Owner, TimerId)> = Vec::new();
                    for i in 0..300 {
                        if i % 50 == 0 {
                            let seen = done.load(Ordering::Relaxed);
                            while done.load(Ordering::Relaxed) == seen {
                                std::thread::yield_now();
                            }
                        }
                        let o = if i % 4 == 0 { &shared } else { &own };
                        let notify = match next() % 5 {
                            0 => Notify::None,
                            1 => Notify::callback(|_, _| {}),
                            _ => Notify::Queue,
                        };
                        let id = o.create(ClockId::Monotonic, notify).unwrap();
                        ids.push((o.clone(), id));
                        let (o, id) = &ids[next() as usize % ids.len()];
                        let value = Duration::from_micros(1 + next() % 2000);
                        let interval = Duration::from_micros(next() % 3 * 500);
                        match next() % 6 {
                            0 => {
                                let _ = o.delete(*id);
                            }
                            1 => {
                                let _ = o.gettime(*id);
                            }
                            _ => {
                                let _ = o.settime(*id, SetFlags::RELATIVE, value, interval);
                            }
                        }
                        for o in [&own, &shared] {
                            while let Some(e) = o.try_recv() {
                                assert!(e.overrun >= 0);
                                received += 1;
                            }
                        }
                    }
                    if round % 3 == 0 {
                        own.destroy();
                    }
                    // `own` (and its timers, armed or with events pending) goes here.
                }
                received
            })
        })
        .collect();
    let received: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let polls = poller.join().unwrap();
    assert!(
        polls > 0 && received > 0,
        "polls {polls}, events {received}"
    );
    drop(shared);
    assert_eq!(timers.timer_count(), 0, "every owner's timers deleted");
    assert_eq!(
        timers.next_deadline(),
        None,
        "no wheel entry outlived its timer"
    );
}
