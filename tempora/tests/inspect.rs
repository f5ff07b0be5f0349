//! Inspection from outside, through the endpoint a service opens (`tempora::inspect`): the
//! listing shows exactly the timers the program holds, with their clocks, notifications and
//! states; the statistics tree arrives whole; a request that is malformed, truncated,
//! oversized or never sent is refused without harm; a client that stalls holds up no timer;
//! `Builder::inspect(false)` and a service without drivers open no endpoint.
//!
//! These tests connect to their own process (the endpoint cannot tell), so the listing
//! holds the timers of every service the test binary runs at the moment: each test looks
//! only at its own group's timers.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;
use tempora::clock::ClockId;
use tempora::inspect::{self, Entry, InspectError, Request};
use tempora::{Notify, NotifyKind, SetFlags, Status, Timers};

const WAIT: Duration = Duration::from_secs(10);

/// The tests count and pick endpoints of this process: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn me() -> u32 {
    std::process::id()
}

/// The listing's entries of group `group`, by ID.
fn listed(group: &str) -> BTreeMap<i32, Entry> {
    let mut out = BTreeMap::new();
    inspect::list(me(), WAIT, |_, e| {
        if e.group == group {
            assert!(out.insert(e.id, e.clone()).is_none(), "an ID listed twice");
        }
    })
    .expect("the listing");
    out
}

/// An endpoint of this process (with the tests serial, the one service alive).
fn any_endpoint() -> String {
    inspect::endpoints(me())
        .expect("/proc/net/unix")
        .into_iter()
        .next()
        .expect("an endpoint")
}

#[test]
fn the_listing_shows_every_timer_with_its_clock_notification_and_state() {
    let _serial = serial();
    let t = Timers::new();
    let g = t.group("ls-mixed").unwrap();
    let o = g.owner();
    let mut want = BTreeMap::new();
    for i in 0..3000 {
        let clock = [ClockId::Realtime, ClockId::Monotonic, ClockId::Boottime][i % 3];
        let (notify, kind) = match i % 4 {
            0 => (Notify::None, NotifyKind::None),
            1 => (Notify::Queue, NotifyKind::Queue),
            2 => (Notify::callback_named("tick", |_| {}), NotifyKind::Callback),
            _ => (
                // A signal that never fires here (the timer stays disarmed or far away).
                Notify::Signal {
                    signo: libc::SIGRTMIN() + 1,
                    value: i,
                },
                NotifyKind::Signal,
            ),
        };
        let id = o.create(clock, notify).unwrap();
        let armed = i % 5 != 0;
        if armed {
            o.settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_secs(3600),
                Duration::from_millis(i as u64 % 7),
            )
            .unwrap();
        }
        want.insert(id.get(), (clock, kind, armed, i as u64 % 7));
    }
    // A deleted timer is not listed.
    let gone = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    o.delete(gone).unwrap();

    let got = listed("ls-mixed");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (id, (clock, kind, armed, interval_ms)) in &want {
        let e = &got[id];
        assert_eq!(e.clock, *clock, "timer {id}");
        assert_eq!(e.notify, *kind, "timer {id}");
        let status = if *armed {
            Status::Armed
        } else {
            Status::Disarmed
        };
        assert_eq!(e.status, status, "timer {id}");
        if *armed {
            let next = e.next_ns.expect("an armed timer's next expiry");
            assert!(next > 3500 * 1_000_000_000 && next <= 3600 * 1_000_000_000);
            assert_eq!(e.interval_ns, interval_ms * 1_000_000, "timer {id}");
        } else {
            assert_eq!(e.next_ns, None);
        }
        match kind {
            NotifyKind::Signal => assert_eq!(e.signo, libc::SIGRTMIN() + 1),
            NotifyKind::Callback => assert_eq!(e.callback, "tick"),
            _ => assert_eq!(e.signo, 0),
        }
    }
    drop(o);
    assert!(
        listed("ls-mixed").is_empty(),
        "a dropped owner's timers are gone"
    );
}

#[test]
fn the_statistics_tree_arrives_whole() {
    let _serial = serial();
    let t = Timers::new();
    let g = t.group("stats-tree").unwrap();
    let sub = g.subgroup("inner").unwrap();
    sub.set_max_timers(Some(77));
    let o = sub.owner();
    for _ in 0..5 {
        let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
        o.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_secs(60),
            Duration::ZERO,
        )
        .unwrap();
    }
    let all = inspect::stats(me(), WAIT).expect("the statistics");
    let found: Vec<_> = all
        .iter()
        .filter_map(|(_, s)| s.root.find("stats-tree/inner"))
        .collect();
    assert_eq!(found.len(), 1, "one service has the group");
    let inner = found[0];
    assert_eq!(inner.max_timers, Some(77));
    assert_eq!(inner.counts.live, 5);
    assert_eq!(inner.counts.armed, 5);
    assert_eq!(inner.owners.len(), 1);
    // And it is what the program itself reads.
    assert_eq!(
        t.stats().root.find("stats-tree/inner").unwrap().counts,
        inner.counts
    );
}

/// Sends `bytes` (then maybe closes the write side) and returns what came back.
fn exchange(name: &str, bytes: &[u8], shut: bool) -> String {
    let mut s = connect(name);
    s.set_read_timeout(Some(WAIT)).unwrap();
    let _ = s.write_all(bytes);
    if shut {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn connect(name: &str) -> UnixStream {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
    UnixStream::connect_addr(&addr).unwrap()
}

/// A service keeps firing on time-ish and answering: a timer 5 ms out is delivered, and a
/// well-formed request is answered.
fn still_serves(t: &Timers, name: &str) {
    let o = t.owner();
    let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    o.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_millis(5),
        Duration::ZERO,
    )
    .unwrap();
    let ev = o.recv_timeout(WAIT).unwrap().expect("the timer fired");
    assert_eq!(ev.id, id);
    let hello = exchange(name, Request::Hello.line().as_bytes(), false);
    assert!(hello.starts_with("tempora-inspect 2\t"), "{hello:?}");
    assert!(hello.ends_with("end\t0\n"), "{hello:?}");
}

#[test]
fn malformed_truncated_and_oversized_requests_are_refused_without_harm() {
    let _serial = serial();
    let t = Timers::new();
    let name = any_endpoint();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let fixed: [&[u8]; 8] = [
        b"",
        b"l",
        b"ls",
        b"LS\n",
        b"ls \n",
        b"\n",
        &[0xff; 300],
        b"stats\0\n",
    ];
    let mut cases: Vec<Vec<u8>> = fixed.iter().map(|c| c.to_vec()).collect();
    for _ in 0..200 {
        let len = (rnd() % 200) as usize;
        let mut c: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        // Some near-misses of real requests.
        if rnd() % 3 == 0 {
            let real = [&b"ls\n"[..], b"stats\n", b"hello\n"][(rnd() % 3) as usize];
            c = real.to_vec();
            let at = (rnd() as usize) % c.len();
            c[at] = rnd() as u8;
        }
        cases.push(c);
    }
    for case in &cases {
        let answer = exchange(&name, case, true);
        match Request::parse(case) {
            Ok(Some(_)) => assert!(answer.starts_with("tempora-inspect 2\t"), "{case:?}"),
            _ => assert!(
                answer.starts_with("error\t") && answer.lines().count() == 1,
                "{case:?} got {answer:?}"
            ),
        }
    }
    still_serves(&t, &name);
}

#[test]
fn a_client_that_stalls_holds_up_no_timer_and_is_dropped() {
    let _serial = serial();
    let t = Timers::new();
    let name = any_endpoint();
    let o = t.owner();
    // Never sends a request.
    let mut silent = connect(&name);
    // Sends a request and never reads the answer (a long listing).
    let g = t.group("stall").unwrap();
    let many = g.owner();
    for _ in 0..50_000 {
        many.create(ClockId::Monotonic, Notify::None).unwrap();
    }
    let mut deaf = connect(&name);
    deaf.write_all(b"ls\n").unwrap();
    // Timers fire meanwhile, through the driver, which the endpoint never blocks.
    for _ in 0..20 {
        let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
        o.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_millis(2),
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(o.recv_timeout(WAIT).unwrap().expect("fired").id, id);
    }
    // Both are dropped by the endpoint: the silent one gets an error line and EOF, the deaf
    // one EOF before its answer's end.
    silent.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = String::new();
    silent.read_to_string(&mut got).unwrap();
    assert!(got.starts_with("error\t"), "{got:?}");
    deaf.set_read_timeout(Some(WAIT)).unwrap();
    std::thread::sleep(Duration::from_secs(2)); // past the endpoint's stall limit
    let mut all = Vec::new();
    let _ = deaf.read_to_end(&mut all);
    let text = String::from_utf8_lossy(&all);
    assert!(
        !text.contains("\nend\t"),
        "the stalled answer was abandoned"
    );
    still_serves(&t, &name);
}

#[test]
fn a_service_without_an_endpoint_opens_none() {
    let _serial = serial();
    let before = inspect::endpoints(me()).unwrap();
    let off = Timers::builder().inspect(false).build().unwrap();
    let manual = Timers::builder()
        .clock(tempora::clock::ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(inspect::endpoints(me()).unwrap(), before);
    let on = Timers::new();
    assert_eq!(inspect::endpoints(me()).unwrap().len(), before.len() + 1);
    drop(on);
    // Gone with its service.
    assert_eq!(inspect::endpoints(me()).unwrap(), before);
    // A service without drivers has one, served at its polls: its name says so.
    let polled = Timers::builder().drivers(0).build().unwrap();
    let now = inspect::endpoints(me()).unwrap();
    assert_eq!(now.len(), before.len() + 1);
    assert!(now.iter().any(|n| n.ends_with('p')), "{now:?}");
    drop(polled);
    assert_eq!(inspect::endpoints(me()).unwrap(), before);
    drop((off, manual));
    match inspect::list(u32::MAX, WAIT, |_, _| {}) {
        Err(InspectError::NoProcess(_)) => {}
        other => panic!("{other:?}"),
    }
}

/// Polls `t` every 100 µs until `done` is true, as an event loop does; the longest poll.
fn poll_until(t: &Timers, done: &std::sync::atomic::AtomicBool) -> Duration {
    let mut longest = Duration::ZERO;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let start = std::time::Instant::now();
        t.poll();
        longest = longest.max(start.elapsed());
        std::thread::sleep(Duration::from_micros(100));
    }
    longest
}

#[test]
fn a_service_without_drivers_answers_at_its_polls() {
    let _serial = serial();
    let t = Timers::builder().drivers(0).build().unwrap();
    let o = t.group("polled").unwrap().owner();
    let mut want = Vec::new();
    for i in 0..20_000 {
        let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
        if i % 2 == 0 {
            o.settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_secs(3600),
                Duration::ZERO,
            )
            .unwrap();
        }
        want.push(id.get());
    }
    // A timer that fires while the listing goes on: the polls that serve it fire it too.
    let tick = t.owner();
    let id = tick.create(ClockId::Monotonic, Notify::Queue).unwrap();
    tick.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_millis(1),
        Duration::from_millis(1),
    )
    .unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (got, stats) = std::thread::scope(|s| {
        let client = s.spawn(|| {
            let got = listed("polled");
            let stats = inspect::stats(me(), WAIT).expect("the statistics");
            done.store(true, std::sync::atomic::Ordering::Release);
            (got, stats)
        });
        poll_until(&t, &done);
        client.join().unwrap()
    });
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), want);
    for (id, e) in &got {
        let armed = (id - want[0]) % 2 == 0;
        assert_eq!(e.status == Status::Armed, armed, "timer {id}");
    }
    let (h, s) = &stats[0];
    assert_eq!((h.drivers, stats.len()), (0, 1));
    assert_eq!(s.root.find("polled").unwrap().counts.live, 20_000);
    assert!(tick.try_recv().is_some(), "the polls fired the timer");
}

#[test]
fn a_service_without_drivers_that_does_not_poll_is_explained() {
    let _serial = serial();
    let t = Timers::builder().drivers(0).build().unwrap();
    match inspect::list(me(), Duration::from_millis(300), |_, _| {}) {
        Err(e @ InspectError::NotPolled(_)) => {
            let why = e.to_string();
            assert!(
                why.contains("drivers(0)") && why.contains("Timers::poll"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The connection waits in the backlog: the next poll answers it (and the client that
    // gave up is refused or dropped without harm).
    t.poll();
    drop(t);
}

#[test]
fn stalled_clients_never_hold_up_a_poll() {
    let _serial = serial();
    let t = Timers::builder().drivers(0).build().unwrap();
    let name = any_endpoint();
    let many = t.group("stall-polled").unwrap().owner();
    for _ in 0..50_000 {
        many.create(ClockId::Monotonic, Notify::None).unwrap();
    }
    // Never sends a request; sends one and never reads the answer (a long listing).
    let mut silent = connect(&name);
    let mut deaf = connect(&name);
    deaf.write_all(b"ls\n").unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (longest, silent_got, deaf_got) = std::thread::scope(|s| {
        let client = s.spawn(|| {
            silent.set_read_timeout(Some(WAIT)).unwrap();
            let mut got = String::new();
            silent.read_to_string(&mut got).unwrap();
            // Past the endpoint's stall limit, then everything the deaf one was sent.
            std::thread::sleep(Duration::from_secs(2));
            deaf.set_read_timeout(Some(WAIT)).unwrap();
            let mut all = Vec::new();
            let _ = deaf.read_to_end(&mut all);
            done.store(true, std::sync::atomic::Ordering::Release);
            (got, all)
        });
        let longest = poll_until(&t, &done);
        let (got, all) = client.join().unwrap();
        (longest, got, all)
    });
    assert!(silent_got.starts_with("error\t"), "{silent_got:?}");
    // A whole answer is over 51 bytes a timer.
    assert!(
        deaf_got.len() < 50_000 * 51,
        "the stalled answer was abandoned ({} bytes)",
        deaf_got.len()
    );
    // Waiting for either client (200 ms for a request, 1 s for the answer to be read) would
    // show here; a poll's own work is its budget of a few ms.
    assert!(
        longest < Duration::from_millis(100),
        "a poll took {longest:?}"
    );
    // And the endpoint still answers, at the polls.
    let done = std::sync::atomic::AtomicBool::new(false);
    let hello = std::thread::scope(|s| {
        let client = s.spawn(|| {
            let hello = exchange(&name, Request::Hello.line().as_bytes(), false);
            done.store(true, std::sync::atomic::Ordering::Release);
            hello
        });
        poll_until(&t, &done);
        client.join().unwrap()
    });
    assert!(hello.starts_with("tempora-inspect 2\t"), "{hello:?}");
    assert!(hello.ends_with("end\t0\n"), "{hello:?}");
}

#[test]
fn an_execed_program_inherits_no_endpoint() {
    let _serial = serial();
    let t = Timers::new();
    assert!(!inspect::endpoints(me()).unwrap().is_empty());
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ls -l /proc/$$/fd")
        .output()
        .unwrap();
    let fds = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(!fds.contains("socket:"), "a socket crossed exec: {fds}");
    drop(t);
}

#[test]
fn a_forked_child_gets_its_own_endpoint_and_not_the_parents() {
    let _serial = serial();
    let t = Timers::new();
    let parents = inspect::endpoints(me()).unwrap();
    assert_eq!(parents.len(), 1);
    let mut ready = [0; 2];
    // SAFETY: pipe(2) into a two-int array.
    assert_eq!(unsafe { libc::pipe(ready.as_mut_ptr()) }, 0);
    // SAFETY: the child only builds a service (as `tests/fork.rs` children do), makes a
    // timer, writes a byte and waits to be killed; it never returns into the harness.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        let ok = (|| {
            let mine = Timers::new();
            let o = mine.group("child").ok()?.owner();
            o.create(ClockId::Boottime, Notify::Queue).ok()?;
            Some((mine, o))
        })();
        let byte = [u8::from(ok.is_some())];
        // SAFETY: writes one byte from a live buffer to the pipe.
        unsafe { libc::write(ready[1], byte.as_ptr().cast(), 1) };
        loop {
            // SAFETY: pause(2) until killed.
            unsafe { libc::pause() };
        }
    }
    let mut byte = [0u8];
    // SAFETY: reads one byte into a live buffer from the pipe.
    let read = unsafe { libc::read(ready[0], byte.as_mut_ptr().cast(), 1) };
    assert_eq!(read, 1);
    let result = std::panic::catch_unwind(|| {
        assert_eq!(byte[0], 1, "the child built its service");
        let kid = child as u32;
        let names = inspect::endpoints(kid).unwrap();
        assert_eq!(names.len(), 1, "the child's own: {names:?}");
        // The parent's listening socket was closed in the child (the fork handler): the
        // child holds one socket, its own endpoint's (counted before any client connects:
        // an answered connection may close a moment after its answer).
        let sockets = std::fs::read_dir(format!("/proc/{kid}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.to_string_lossy().starts_with("socket:"))
            .count();
        assert_eq!(sockets, 1, "the child's sockets");
        let mut seen = Vec::new();
        inspect::list(kid, WAIT, |h, e| {
            assert_eq!(h.pid, kid);
            seen.push((e.group.clone(), e.clock));
        })
        .unwrap();
        assert_eq!(seen, [("child".to_owned(), ClockId::Boottime)]);
        // The parent's endpoint is still the parent's, and answers for it.
        assert_eq!(inspect::endpoints(me()).unwrap(), parents);
    });
    // SAFETY: kill(2) and waitpid(2) of our own child.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        libc::close(ready[0]);
        libc::close(ready[1]);
    }
    drop(t);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
