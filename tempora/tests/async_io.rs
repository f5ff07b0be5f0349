//! Event loops and async: the owner's readiness fd, async receive and its stream, and
//! `tempora::time` (sleep, timeout, interval). Semantics on the manual clock with no driver and
//! no sleeping; the runtime tests (tokio, smol) run a real driver and assert only what cannot
//! depend on timing (what arrives, never early, nothing lost).

use std::future::Future;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_util::StreamExt;
use proptest::prelude::*;
use tempora::clock::{ClockId, ManualClock};
use tempora::time::Elapsed;
use tempora::{Error, Notify, Owner, SetFlags, TimerId, Timers};

const MS: Duration = Duration::from_millis(1);

/// A service on a manual clock, fired only by `poll`.
fn manual() -> (ManualClock, Timers) {
    let clock = ManualClock::new();
    let timers = Timers::builder()
        .clock(clock.clone())
        .drivers(0)
        .build()
        .unwrap();
    (clock, timers)
}

/// A `Queue` timer of `owner`, armed to expire in 1 ms, then every `interval`.
fn queue_timer(owner: &Owner, interval: Duration) -> TimerId {
    let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
    owner.settime(id, SetFlags::RELATIVE, MS, interval).unwrap();
    id
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

fn woken(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>, w: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(w))
}

/// poll(2) with a zero timeout: is the fd readable now?
fn readable(fd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents & libc::POLLIN != 0
}

#[test]
fn the_event_fd_is_readable_exactly_while_events_are_queued() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    let fd = owner.event_fd().unwrap();
    assert!(!readable(fd), "nothing queued yet");
    let ids: Vec<_> = (0..100)
        .map(|_| owner.create(ClockId::Monotonic, Notify::Queue).unwrap())
        .collect();
    for &id in &ids {
        owner
            .settime(id, SetFlags::RELATIVE, 10 * MS, Duration::ZERO)
            .unwrap();
    }
    clock.advance(10 * MS - Duration::from_nanos(1));
    timers.poll();
    assert!(!readable(fd), "nothing due yet");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(timers.poll(), 100);
    assert!(readable(fd), "100 events queued");
    assert_eq!(
        owner.event_fd().unwrap().as_raw_fd(),
        fd.as_raw_fd(),
        "one fd"
    );
    // Half drained: still readable.
    for _ in 0..50 {
        owner.try_recv().unwrap();
    }
    assert!(readable(fd));
    assert_eq!(owner.try_iter().count(), 50);
    assert!(!readable(fd), "drained with the queue");
    // A stale entry (its timer re-set) makes it readable until a receive drops it.
    owner
        .settime(ids[0], SetFlags::RELATIVE, MS, Duration::ZERO)
        .unwrap();
    clock.advance(MS);
    timers.poll();
    assert!(readable(fd));
    owner
        .settime(ids[0], SetFlags::RELATIVE, MS, Duration::ZERO)
        .unwrap();
    assert_eq!(owner.try_recv(), None, "the stale event is dropped");
    assert!(!readable(fd));
}

#[test]
fn the_event_fd_is_written_once_per_transition_not_per_event() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    let fd = owner.event_fd().unwrap();
    for _ in 0..1000 {
        queue_timer(&owner, Duration::ZERO);
    }
    clock.advance(MS);
    assert_eq!(timers.poll(), 1000);
    // The eventfd's counter is the number of writes since the last drain.
    let mut n = 0u64;
    // SAFETY: reads 8 bytes into `n` from a valid, non-blocking eventfd.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    assert_eq!(r, 8);
    assert_eq!(n, 1, "1000 events, one empty-to-non-empty transition");
}

#[test]
fn an_event_fd_made_late_sees_what_is_queued_and_destroy_makes_it_readable() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    queue_timer(&owner, Duration::ZERO);
    clock.advance(MS);
    timers.poll();
    let fd = owner.event_fd().unwrap();
    assert!(readable(fd), "made after the event was queued");
    owner.try_recv().unwrap();
    assert!(!readable(fd));
    assert_eq!(owner.closed(), None);
    owner.destroy();
    assert!(readable(fd), "readable for good once no event can come");
    assert_eq!(owner.closed(), Some(Error::OwnerDeleted), "and says why");
    assert_eq!(owner.recv_timeout(Duration::ZERO), Err(Error::OwnerDeleted));
    assert!(readable(fd));
}

#[test]
fn the_event_fd_closes_with_the_owners_last_handle() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    queue_timer(&owner, Duration::ZERO);
    clock.advance(MS);
    timers.poll();
    let raw = owner.event_fd().unwrap().as_raw_fd();
    // An epoll set watches the fd's open file: once the file is closed it leaves the set,
    // however the fd number is reused meanwhile.
    // SAFETY: plain syscalls on fds this test owns; `ev` lives across the calls.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 7,
        };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, raw, &mut ev), 0);
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 4, 0), 1, "readable");
        let clone = owner.clone();
        drop(owner);
        assert_eq!(
            libc::epoll_wait(ep, out.as_mut_ptr(), 4, 0),
            1,
            "a handle remains"
        );
        drop(clone);
        assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 4, 0), 0, "closed");
        libc::close(ep);
    }
}

#[test]
fn a_dropped_pending_receive_loses_no_event() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    let id = queue_timer(&owner, Duration::ZERO);
    let (count, waker) = counter();
    {
        let mut recv = owner.recv_async();
        assert!(poll_once(Pin::new(&mut recv), &waker).is_pending());
        clock.advance(MS);
        timers.poll();
        assert_eq!(woken(&count), 1, "the push woke the task");
        // Dropped before it is polled again: it took nothing.
    }
    let e = owner.try_recv().expect("the event is still queued");
    assert_eq!(e.id, id);

    // Dropped while registered: the next push wakes nobody.
    owner
        .settime(id, SetFlags::RELATIVE, MS, Duration::ZERO)
        .unwrap();
    let (count, waker) = counter();
    {
        let mut recv = owner.recv_async();
        assert!(poll_once(Pin::new(&mut recv), &waker).is_pending());
    }
    clock.advance(MS);
    timers.poll();
    assert_eq!(woken(&count), 0, "deregistered on drop");
    assert_eq!(owner.try_recv().map(|e| e.id), Some(id));
}

#[test]
fn async_receive_completes_with_the_event_and_reports_destroy() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    let id = queue_timer(&owner, MS);
    let (count, waker) = counter();
    let mut recv = owner.recv_async();
    // Polled twice with the same waker: registered once, woken once.
    assert!(poll_once(Pin::new(&mut recv), &waker).is_pending());
    assert!(poll_once(Pin::new(&mut recv), &waker).is_pending());
    clock.advance(3 * MS);
    timers.poll();
    assert_eq!(woken(&count), 1);
    match poll_once(Pin::new(&mut recv), &waker) {
        Poll::Ready(Ok(e)) => assert_eq!((e.id, e.overrun), (id, 2)),
        other => panic!("expected the event, got {other:?}"),
    }
    drop(recv);
    let mut recv = owner.recv_async();
    let (count, waker) = counter();
    owner
        .settime(id, SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO)
        .unwrap();
    assert!(poll_once(Pin::new(&mut recv), &waker).is_pending());
    owner.destroy();
    assert_eq!(woken(&count), 1, "destroy wakes waiting tasks");
    assert_eq!(
        poll_once(Pin::new(&mut recv), &waker),
        Poll::Ready(Err(Error::OwnerDeleted))
    );
}

#[test]
fn the_event_stream_ends_when_the_owner_is_destroyed() {
    let (clock, timers) = manual();
    let owner = timers.owner();
    let id = queue_timer(&owner, Duration::ZERO);
    let mut events = owner.events();
    let (_, waker) = counter();
    assert!(poll_once(Pin::new(&mut events.next()), &waker).is_pending());
    clock.advance(MS);
    timers.poll();
    match poll_once(Pin::new(&mut events.next()), &waker) {
        Poll::Ready(Some(e)) => assert_eq!(e.id, id),
        other => panic!("expected the event, got {other:?}"),
    }
    owner.destroy();
    assert_eq!(
        poll_once(Pin::new(&mut events.next()), &waker),
        Poll::Ready(None)
    );
}

#[test]
fn a_sleep_completes_at_its_deadline_not_before() {
    let (clock, timers) = manual();
    let (count, waker) = counter();
    let mut sleep = pin!(timers.sleep(10 * MS));
    let deadline = sleep.deadline();
    assert_eq!(deadline, timers.now() + 10 * MS);
    assert!(
        timers.next_deadline().is_none(),
        "registered on first poll, not before"
    );
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    assert_eq!(timers.next_deadline(), Some(deadline));
    clock.advance(10 * MS - Duration::from_nanos(1));
    timers.poll();
    assert_eq!(woken(&count), 0);
    assert!(!sleep.is_elapsed());
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    clock.advance(Duration::from_nanos(1));
    assert_eq!(timers.poll(), 1);
    assert_eq!(woken(&count), 1);
    assert!(sleep.is_elapsed());
    assert!(poll_once(sleep.as_mut(), &waker).is_ready());
    assert!(poll_once(sleep.as_mut(), &waker).is_ready(), "stays ready");
}

#[test]
fn reset_moves_a_sleep_later_and_earlier_and_rearms_a_completed_one() {
    let (clock, timers) = manual();
    let (count, waker) = counter();
    let mut sleep = pin!(timers.sleep(10 * MS));
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    // Later: the entry fires at the old deadline, finds the new one ahead and waits again.
    sleep.as_mut().reset_after(30 * MS);
    clock.advance(10 * MS);
    timers.poll();
    assert_eq!(woken(&count), 0, "not at the old deadline");
    clock.advance(19 * MS);
    timers.poll();
    assert_eq!(woken(&count), 0);
    // Earlier than it is (1 ms ahead): moved.
    sleep.as_mut().reset_after(MS / 2);
    clock.advance(MS / 2 - Duration::from_micros(1));
    timers.poll();
    assert_eq!(woken(&count), 0, "not before");
    clock.advance(Duration::from_micros(1));
    timers.poll();
    assert_eq!(woken(&count), 1);
    assert!(poll_once(sleep.as_mut(), &waker).is_ready());
    // Completed, then reset: waits again once polled.
    sleep.as_mut().reset_after(MS);
    assert!(!sleep.is_elapsed());
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    clock.advance(MS);
    timers.poll();
    assert_eq!(woken(&count), 2);
    assert!(poll_once(sleep.as_mut(), &waker).is_ready());
}

#[test]
fn dropping_a_sleep_takes_it_out_of_the_wheel() {
    let (clock, timers) = manual();
    let (count, waker) = counter();
    let mut sleep = Box::pin(timers.sleep(10 * MS));
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    assert!(timers.next_deadline().is_some());
    drop(sleep);
    assert_eq!(timers.next_deadline(), None);
    clock.advance(10 * MS);
    assert_eq!(timers.poll(), 0);
    assert_eq!(woken(&count), 0);
}

/// A sleep that completed and was reset has an entry again: its drop takes it out, and it
/// wakes nobody later.
#[test]
fn dropping_a_completed_then_reset_sleep_takes_it_out_of_the_wheel() {
    let (clock, timers) = manual();
    let (count, waker) = counter();
    let mut sleep = Box::pin(timers.sleep(MS));
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    clock.advance(MS);
    timers.poll();
    assert!(poll_once(sleep.as_mut(), &waker).is_ready());
    sleep.as_mut().reset_after(MS);
    assert!(poll_once(sleep.as_mut(), &waker).is_pending());
    assert!(timers.next_deadline().is_some());
    drop(sleep);
    assert_eq!(timers.next_deadline(), None);
    clock.advance(MS);
    assert_eq!(timers.poll(), 0);
    assert_eq!(woken(&count), 1, "only the first completion woke the task");
}

#[test]
fn a_new_waker_replaces_the_old_one() {
    let (clock, timers) = manual();
    let (first, w1) = counter();
    let (second, w2) = counter();
    let mut sleep = pin!(timers.sleep(MS));
    assert!(poll_once(sleep.as_mut(), &w1).is_pending());
    assert!(poll_once(sleep.as_mut(), &w2).is_pending());
    clock.advance(MS);
    timers.poll();
    assert_eq!((woken(&first), woken(&second)), (0, 1));
}

#[test]
fn timeout_returns_the_value_or_elapsed() {
    let (clock, timers) = manual();
    let (_, waker) = counter();
    let mut ok = pin!(timers.timeout(MS, async { 7 }));
    assert_eq!(poll_once(ok.as_mut(), &waker), Poll::Ready(Ok(7)));
    let mut never = pin!(timers.timeout(MS, std::future::pending::<()>()));
    assert!(poll_once(never.as_mut(), &waker).is_pending());
    clock.advance(MS - Duration::from_nanos(1));
    timers.poll();
    assert!(poll_once(never.as_mut(), &waker).is_pending());
    clock.advance(Duration::from_nanos(1));
    timers.poll();
    assert_eq!(poll_once(never.as_mut(), &waker), Poll::Ready(Err(Elapsed)));
}

#[test]
fn an_interval_ticks_every_period_and_bursts_missed_ones_by_default() {
    let (clock, timers) = manual();
    let (_, waker) = counter();
    let start = timers.now();
    let mut iv = timers.interval(10 * MS);
    let tick = |iv: &mut tempora::time::Interval| {
        timers.poll();
        let mut t = pin!(iv.tick());
        poll_once(t.as_mut(), &waker)
    };
    assert_eq!(
        tick(&mut iv),
        Poll::Ready(start),
        "the first tick is at once"
    );
    assert!(tick(&mut iv).is_pending());
    clock.advance(10 * MS);
    assert_eq!(tick(&mut iv), Poll::Ready(start + 10 * MS));
    clock.advance(35 * MS); // now start + 45 ms: 20, 30, 40 missed, and returned at once
    assert_eq!(tick(&mut iv), Poll::Ready(start + 20 * MS));
    assert_eq!(tick(&mut iv), Poll::Ready(start + 30 * MS));
    assert_eq!(tick(&mut iv), Poll::Ready(start + 40 * MS));
    assert!(tick(&mut iv).is_pending(), "the next tick is at 50 ms");
    clock.advance(5 * MS);
    assert_eq!(tick(&mut iv), Poll::Ready(start + 50 * MS));
}

proptest! {
    /// Sleeps under random resets, drops and clock moves never complete before their deadline,
    /// and complete at the first poll at or after it (a tick is 1 µs, so moves are whole µs).
    #[test]
    fn sleeps_are_never_early_and_never_missed(
        ops in prop::collection::vec((0u8..4, 0usize..8, 0u64..50_000), 1..200),
    ) {
        let (clock, timers) = manual();
        let (_, waker) = counter();
        let mut sleeps: Vec<Option<Pin<Box<tempora::time::Sleep>>>> = (0..8).map(|_| None).collect();
        for (op, i, us) in ops {
            match op {
                0 => {
                    let mut s = Box::pin(timers.sleep(Duration::from_micros(us)));
                    let _ = poll_once(s.as_mut(), &waker);
                    sleeps[i] = Some(s);
                }
                1 => if let Some(s) = sleeps[i].as_mut() {
                    s.as_mut().reset_after(Duration::from_micros(us));
                    let _ = poll_once(s.as_mut(), &waker);
                },
                2 => sleeps[i] = None,
                _ => clock.advance(Duration::from_micros(us)),
            }
            timers.poll();
            let now = timers.now();
            for s in sleeps.iter_mut().flatten() {
                let ready = poll_once(s.as_mut(), &waker).is_ready();
                prop_assert_eq!(ready, now >= s.deadline(), "deadline {:?} now {:?}", s.deadline(), now);
            }
        }
    }
}

#[test]
fn on_tokio_a_driver_wakes_receivers_and_sleeps() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timers = Timers::new();
    rt.block_on(async {
        let owner = timers.owner();
        let id = queue_timer(&owner, MS);
        let mut events = owner.events();
        for _ in 0..3 {
            assert_eq!(events.next().await.map(|e| e.id), Some(id));
        }
        let e = owner.recv_async().await.unwrap();
        assert_eq!(e.id, id);
        // Sleeps on many tasks: none early.
        let tasks: Vec<_> = (0..200u64)
            .map(|i| {
                let t = timers.clone();
                tokio::spawn(async move {
                    let s = t.sleep(Duration::from_micros(100 * (i % 20)));
                    let deadline = s.deadline();
                    s.await;
                    t.now() >= deadline
                })
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap(), "a sleep completed before its deadline");
        }
        let r = timers.timeout(MS, std::future::pending::<()>()).await;
        assert_eq!(r, Err(Elapsed));
        owner.destroy();
        assert_eq!(events.next().await, None);
    });
}

#[test]
fn on_smol_a_driver_wakes_receivers_and_sleeps() {
    let timers = Timers::new();
    smol::block_on(async {
        let owner = timers.owner();
        let id = queue_timer(&owner, Duration::ZERO);
        assert_eq!(owner.recv_async().await.map(|e| e.id), Ok(id));
        let ex = smol::LocalExecutor::new();
        let tasks: Vec<_> = (0..100u64)
            .map(|i| {
                let t = timers.clone();
                ex.spawn(async move {
                    let s = t.sleep(Duration::from_micros(50 * i));
                    let deadline = s.deadline();
                    s.await;
                    t.now() >= deadline
                })
            })
            .collect();
        for t in tasks {
            assert!(ex.run(t).await, "a sleep completed before its deadline");
        }
        let mut events = owner.events();
        let stopper = timers.clone();
        let destroyer = owner.clone();
        std::thread::spawn(move || {
            drop(stopper);
            destroyer.destroy();
        });
        assert_eq!(events.next().await, None);
    });
}
