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
                            1 => Notify::callback(|_| {}),
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

/// One scenario's events, taken by `take`: periodic timers with overruns, a one-shot, an
/// event made stale by a re-set and one by a delete, over 200 timers expiring in turn. The
/// events and the owner's statistics after.
fn received_by(take: impl Fn(&Owner) -> Vec<Event>) -> (Vec<Event>, u64, u64, u64) {
    let f = Manual::new();
    let ids: Vec<_> = (0..200).map(|_| f.queue(ClockId::Monotonic)).collect();
    for (i, &id) in ids.iter().enumerate() {
        let interval = if i % 3 == 0 { ms(1) } else { Duration::ZERO };
        f.arm(id, Duration::from_micros(10 + i as u64), interval);
    }
    assert_eq!(f.advance(ms(3)), 200);
    f.arm(ids[5], ms(10), Duration::ZERO);
    f.owner.delete(ids[7]).unwrap();
    let events = take(&f.owner);
    let s = f.owner.stats();
    (
        events,
        s.counts.delivered,
        s.counts.overruns,
        s.counts.stale_dropped,
    )
}

/// `try_recv_many` returns what `try_recv` in a loop returns, in the same order, with the same
/// overruns and statistics, whatever its `max`, and never more than `max` events per call.
#[test]
fn try_recv_many_receives_what_try_recv_does_in_order() {
    let one_by_one = received_by(|o| std::iter::from_fn(|| o.try_recv()).collect());
    assert_eq!(one_by_one.0.len(), 198, "two of the 200 are stale");
    assert!(one_by_one.0.iter().any(|e| e.overrun == 2));
    assert_eq!(one_by_one.3, 2);
    for max in [1, 7, 32, 33, 1000] {
        let many = received_by(|o| {
            let mut events = Vec::new();
            loop {
                let before = events.len();
                let got = o.try_recv_many(&mut events, max);
                assert_eq!(events.len() - before, got);
                assert!(got <= max);
                if got == 0 {
                    break events;
                }
            }
        });
        assert_eq!(many, one_by_one, "max {max}");
    }
}

/// Each owner's events, received after one poll of 500 timers of `owners` owners whose
/// expiries interleave (runs of one to three timers per owner, owners in turn), on a service
/// with batches of `batch`.
fn per_owner_order(owners: usize, batch: usize) -> Vec<Vec<TimerId>> {
    let f = Manual::with(|b| {
        b.batch(batch);
    });
    let all: Vec<Owner> = (0..owners).map(|_| f.timers.owner()).collect();
    let mut created = vec![0; owners];
    for i in 0..500 {
        let o = (i / (1 + i % 3)) % owners;
        let id = all[o].create(ClockId::Monotonic, Notify::Queue).unwrap();
        let at = Duration::from_micros(1 + 2 * i as u64);
        all[o]
            .settime(id, SetFlags::RELATIVE, at, Duration::ZERO)
            .unwrap();
        created[o] += 1;
    }
    assert_eq!(f.advance(ms(2)), 500);
    all.iter()
        .zip(created)
        .map(|(owner, n)| {
            assert_eq!(owner.queued(), n, "every event queued by the poll");
            std::iter::from_fn(|| owner.try_recv())
                .map(|e| e.id)
                .collect()
        })
        .collect()
}

/// A batch queues each owner's events in the order they were popped, whether it holds them
/// for a queue (an owner's second event in a run on) or pushes them at once (an owner's first,
/// and every owner's past the held queues when many owners' timers interleave in a batch):
/// the same order as batches of one timer give.
#[test]
fn a_batch_queues_each_owners_events_in_pop_order() {
    for owners in [1, 2, 5, 9] {
        assert_eq!(
            per_owner_order(owners, 64),
            per_owner_order(owners, 1),
            "{owners} owners"
        );
    }
}

/// A deleted timer's entry still on the queue keeps the room its timer reserved until it is
/// consumed, so live timers created meanwhile reserve room of their own: with every
/// allocation refused, each live one-shot timer's event is queued (none is lost to a stale
/// entry), and the room comes back to one entry per live timer once the stale entries are
/// dropped and to none once the live timers are deleted (`notify.rs`, "Memory").
#[test]
fn stale_entries_never_take_a_live_one_shots_room() {
    let f = Manual::new();
    let fire = |ids: &[TimerId]| {
        for &id in ids {
            f.arm(id, Duration::from_micros(1), Duration::ZERO);
        }
        f.advance(ms(1))
    };
    let gone: Vec<_> = (0..40).map(|_| f.queue(ClockId::Monotonic)).collect();
    assert_eq!(fire(&gone), 40);
    let capacity = f.owner.sink().capacity();
    for &id in &gone {
        f.owner.delete(id).unwrap();
    }
    assert_eq!(
        f.owner.sink().reserved(),
        40,
        "the stale entries keep their room"
    );
    // As many live timers as the queue had room for beside the 40 stale entries, and 8 more:
    // their creates make room for them.
    let room = capacity - 40;
    let live: Vec<_> = (0..room + 8).map(|_| f.queue(ClockId::Monotonic)).collect();
    assert!(f.owner.sink().capacity() >= 40 + live.len());
    let fired = crate::alloc::refusing_allocations(0, || fire(&live));
    assert_eq!(fired, live.len());
    assert_eq!(
        f.owner.queued(),
        40 + live.len(),
        "every one-shot event queued"
    );
    let mut got: Vec<_> = f.drain().into_iter().map(|e| e.id).collect();
    got.sort();
    assert_eq!(got, live, "every one-shot event delivered once");
    assert_eq!(
        f.owner.sink().reserved(),
        live.len(),
        "stale entries' room given back"
    );
    // Deleted with their entries consumed: their room is given back at once.
    for &id in &live {
        f.owner.delete(id).unwrap();
    }
    assert_eq!(f.owner.sink().reserved(), 0);
}

/// A timer deleted with its event queued, or re-set and then deleted, gives its room back
/// once, when the entry is consumed; a slot reused by a new `Queue` timer meanwhile has room
/// of its own.
#[test]
fn a_deleted_timers_entry_gives_its_room_back_once() {
    let f = Manual::new();
    let a = f.queue(ClockId::Monotonic);
    let b = f.queue(ClockId::Monotonic);
    f.arm(a, Duration::from_micros(1), Duration::ZERO);
    f.arm(b, Duration::from_micros(1), Duration::from_micros(1));
    assert_eq!(f.advance(ms(1)), 2);
    // `b` re-set while queued (its entry is stale, but it is still `b`'s), then deleted.
    f.arm(b, ms(10), Duration::ZERO);
    f.owner.delete(a).unwrap();
    f.owner.delete(b).unwrap();
    assert_eq!(f.owner.sink().reserved(), 2);
    let c = f.queue(ClockId::Monotonic);
    assert_eq!(f.owner.sink().reserved(), 3);
    assert!(f.drain().is_empty(), "stale entries delivered");
    assert_eq!(f.owner.sink().reserved(), 1, "only `c`'s room is left");
    f.owner.delete(c).unwrap();
    assert_eq!(f.owner.sink().reserved(), 0);
}

/// A slot reused while a stale entry naming it is still queued (entries name slots alone):
/// the new timer's event is delivered once, with its ID, though the stale entry comes first;
/// the stale entry's room comes back, and later expiries are delivered once each.
#[test]
fn a_reused_slots_stale_entry_delivers_the_new_timer_once() {
    let f = Manual::new();
    let a = f.queue(ClockId::Monotonic);
    f.arm(a, Duration::from_micros(1), Duration::ZERO);
    assert_eq!(f.advance(ms(1)), 1);
    f.owner.delete(a).unwrap();
    // The deleted timer's slot heads its shard's free list: the next create takes it.
    let b = f.queue(ClockId::Monotonic);
    f.arm(b, Duration::from_micros(1), Duration::ZERO);
    assert_eq!(f.advance(ms(1)), 1);
    assert_eq!(f.owner.queued(), 2, "the stale entry and the new one");
    let got: Vec<_> = f.drain().into_iter().map(|e| e.id).collect();
    assert_eq!(got, vec![b], "the new timer's event, once");
    assert_eq!(f.owner.sink().reserved(), 1, "only `b`'s room is left");
    for _ in 0..2 {
        f.arm(b, Duration::from_micros(1), Duration::ZERO);
        assert_eq!(f.advance(ms(1)), 1);
        let got: Vec<_> = f.drain().into_iter().map(|e| e.id).collect();
        assert_eq!(got, vec![b]);
    }
    // A slot reused by a timer that does not queue events: the stale entry is dropped.
    f.owner.delete(b).unwrap();
    let c = f.queue(ClockId::Monotonic);
    f.arm(c, Duration::from_micros(1), Duration::ZERO);
    assert_eq!(f.advance(ms(1)), 1);
    f.owner.delete(c).unwrap();
    let d = f.owner.create(ClockId::Monotonic, Notify::None).unwrap();
    assert!(f.drain().is_empty(), "a stale entry delivered");
    assert_eq!(f.owner.sink().reserved(), 0);
    f.owner.delete(d).unwrap();
}

/// A task whose waker owns an [`Events`] stream: what an executor's task that waits on the
/// stream holds.
struct StreamTask {
    events: Mutex<Option<Events>>,
    woken: AtomicUsize,
}

impl std::task::Wake for StreamTask {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
    }
}

impl StreamTask {
    fn poll(self: &Arc<Self>) -> std::task::Poll<Option<Event>> {
        use futures_core::Stream;
        let waker = std::task::Waker::from(self.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let mut events = self.events.lock().unwrap();
        std::pin::Pin::new(events.as_mut().unwrap()).poll_next(&mut cx)
    }
}

/// Sets its flag when dropped: what a closure holds to show it was dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The weak handles close no circle: a callback that re-arms another timer of its own owner
/// through that timer's `WeakTimer`, both timers given up to the owner, and a task waiting on
/// the owner's `WeakOwner::events` stream (its waker, registered on the owner's queue, owns
/// the stream) keep nothing alive once the owner's last strong handle is dropped: the
/// callback is dropped, the task's waker is woken and let go, and the stream ends. (With a
/// `TimerHandle` captured, or `Owner::events`, the owner would hold itself and these checks
/// fail. The leak checker, `.ci/rust-asan.sh`, runs this test too, but does not report such
/// a circle by itself: a deliberate one built beside a service passed it.)
#[test]
fn weak_timer_and_weak_events_keep_no_owner_alive() {
    let f = Manual::new();
    let owner = f.timers.owner();
    let weak = owner.downgrade();
    let a = owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    let weak_a = a.downgrade();
    assert_eq!(weak_a.id(), a.id());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let b = owner
        .timer(
            ClockId::Monotonic,
            Notify::callback(move |_| {
                let _ = &flag;
                weak_a
                    .settime(SetFlags::RELATIVE, ms(1), Duration::ZERO)
                    .unwrap();
            }),
        )
        .unwrap();
    b.settime(SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    let (a, b) = (a.into_id(), b.into_id());
    assert_eq!(f.advance(ms(1)), 1, "b's callback");
    assert_eq!(f.advance(ms(1)), 1, "a, armed by b's callback");
    let task = Arc::new(StreamTask {
        events: Mutex::new(Some(weak.events())),
        woken: AtomicUsize::new(0),
    });
    assert_eq!(task.poll(), std::task::Poll::Ready(Some(Event::new(a, 0))));
    assert_eq!(task.poll(), std::task::Poll::Pending);
    assert_eq!(Arc::strong_count(&task), 2, "its waker is registered");
    assert!(owner.timers().iter().any(|t| t.id == b));
    drop(owner);
    assert!(
        weak.upgrade().is_none(),
        "the owner outlived its last handle"
    );
    assert!(dropped.load(Ordering::SeqCst), "b's callback was kept");
    assert_eq!(task.woken.load(Ordering::SeqCst), 1);
    assert_eq!(Arc::strong_count(&task), 1, "the task's waker was kept");
    assert_eq!(task.poll(), std::task::Poll::Ready(None));
    drop(task.events.lock().unwrap().take());
}

/// A `WeakTimer`'s calls act on the timer while the owner lives and fail with `OwnerDeleted`
/// once it ended; deleting through it leaves the `TimerHandle` nothing to delete.
#[test]
fn a_weak_timer_acts_while_its_owner_lives() {
    let f = Manual::new();
    let owner = f.timers.owner();
    let t = owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    let weak = t.downgrade();
    weak.settime(SetFlags::RELATIVE, ms(5), Duration::ZERO)
        .unwrap();
    assert_eq!(t.gettime().unwrap(), weak.gettime().unwrap());
    assert_eq!(weak.getoverrun(), Ok(0));
    assert!(weak.owner().is_some());
    weak.delete().unwrap();
    assert_eq!(t.delete(), Err(Error::UnknownTimer));
    let t = owner.timer(ClockId::Monotonic, Notify::Queue).unwrap();
    let weak = t.downgrade();
    drop(owner);
    // The handle keeps the owner: the weak one still reaches the timer.
    assert_eq!(weak.getoverrun(), Ok(0));
    drop(t);
    assert_eq!(weak.gettime(), Err(Error::OwnerDeleted));
    assert_eq!(weak.delete(), Err(Error::OwnerDeleted));
}

/// `try_owner` reports an owner it cannot allocate as `OutOfMemory` instead of aborting,
/// whichever of its allocations fails (requests from each size up refused in turn, so that
/// each allocation is in turn the first to fail), leaves the service as it was, and makes
/// a working owner once memory is back.
#[test]
fn try_owner_fails_with_out_of_memory_and_leaves_nothing() {
    let f = Manual::new();
    let group = f.timers.group("g").unwrap();
    // This thread's first owner made, and dropped: the lists have room.
    drop(f.timers.try_owner().unwrap());
    let owners = f.timers.stats().root.owners.len();
    assert_eq!(
        crate::alloc::refusing_allocations(0, || f.timers.try_owner().err()),
        Some(Error::OutOfMemory)
    );
    assert_eq!(
        crate::alloc::refusing_allocations(0, || group.try_owner().err()),
        Some(Error::OutOfMemory)
    );
    let mut failed = 0;
    for from in (1..=4096).rev() {
        match crate::alloc::refusing_allocations(from, || f.timers.try_owner()) {
            Ok(owner) => drop(owner),
            Err(e) => {
                assert_eq!(e, Error::OutOfMemory);
                failed += 1;
            }
        }
    }
    assert!(failed > 0);
    assert_eq!(
        f.timers.stats().root.owners.len(),
        owners,
        "a failed owner is listed"
    );
    let owner = f.timers.try_owner().unwrap();
    let t = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner
        .settime(t, SetFlags::RELATIVE, ms(1), Duration::ZERO)
        .unwrap();
    assert_eq!(f.advance(ms(1)), 1);
    assert_eq!(owner.try_recv(), Some(Event::new(t, 0)));
}
