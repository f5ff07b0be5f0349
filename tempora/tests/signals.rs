//! Real signals from signal timers (`Notify::Signal`, `ThreadSignal`, `SignalWithId`), read
//! as a program reads them: `sigtimedwait` and a `signalfd` on the process's queue, and
//! `sigwaitinfo` in a second thread for a thread-directed one. And every thread tempora
//! starts blocks every signal.
//!
//! Its own `main` (no test harness): the signals are blocked in `main` before any thread
//! starts, so every thread inherits the mask and a process-directed signal waits for the
//! test to take it instead of killing the process. The rules themselves (overruns, blocked
//! and ignored signals, no room) are tested under the manual clock
//! (`timers/tests/signals.rs`); this file checks what only the kernel can show.

use std::mem::MaybeUninit;
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::timers::{Notify, SetFlags, Timers};

fn sigrtmin() -> i32 {
    libc::SIGRTMIN()
}

fn block(signals: &[i32]) {
    // SAFETY: a sigset on this stack, initialised by `sigemptyset`, passed to
    // `pthread_sigmask`.
    unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut()),
            0
        );
    }
}

/// Waits up to `timeout` for one of `signals`: its siginfo.
fn wait(signals: &[i32], timeout: Duration) -> Option<libc::siginfo_t> {
    // SAFETY: as in `block`; `sigtimedwait` writes `info` when it returns a signal.
    unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
        let r = libc::sigtimedwait(set.as_ptr(), info.as_mut_ptr(), &ts);
        (r > 0).then(|| info.assume_init())
    }
}

/// `si_timerid`, `si_overrun` and `sival_ptr` of a timer's siginfo: its `_timer` member, at
/// offset 16 on 64-bit Linux (three ints, then the union aligned as a pointer).
fn timer_fields(info: &libc::siginfo_t) -> (i32, i32, usize) {
    let base = (info as *const libc::siginfo_t).cast::<u8>();
    // SAFETY: `siginfo_t` is 128 bytes; the reads are within it, at the `_timer` member's
    // fields (two ints at 16 and 20, the sigval at 24), each aligned for its type.
    unsafe {
        (
            *base.add(16).cast::<i32>(),
            *base.add(20).cast::<i32>(),
            *base.add(24).cast::<usize>(),
        )
    }
}

fn process_signal_carries_the_timers_fields(timers: &Timers) {
    let owner = timers.owner();
    let signo = sigrtmin();
    let t = owner
        .create(
            ClockId::Monotonic,
            Notify::Signal {
                signo,
                value: 0xabcd,
            },
        )
        .unwrap();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_millis(5),
            Duration::ZERO,
        )
        .unwrap();
    let info = wait(&[signo], Duration::from_secs(5)).expect("the timer's signal");
    assert_eq!(info.si_signo, signo);
    assert_eq!(info.si_code, libc::SI_TIMER);
    assert_eq!(timer_fields(&info), (t.get(), 0, 0xabcd));
    assert!(wait(&[signo], Duration::from_millis(50)).is_none(), "once");
    println!("ok: a process-directed signal carries SI_TIMER, the ID, the overrun and the value");
}

fn periodic_signals_keep_coming_and_overruns_sum(timers: &Timers) {
    let owner = timers.owner();
    let signo = sigrtmin() + 1;
    let t = owner
        .create(ClockId::Monotonic, Notify::SignalWithId { signo })
        .unwrap();
    let start = Instant::now();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_millis(2),
            Duration::from_millis(2),
        )
        .unwrap();
    let mut expiries = 0i64;
    for _ in 0..20 {
        let info = wait(&[signo], Duration::from_secs(5)).expect("a period's signal");
        let (id, overrun, value) = timer_fields(&info);
        assert_eq!((id, value), (t.get(), t.get() as usize));
        expiries += 1 + i64::from(overrun);
    }
    let elapsed = start.elapsed();
    // Every period up to the last signal is counted once: by a signal or an overrun.
    let periods = (elapsed.as_nanos() / 2_000_000) as i64;
    assert!(
        expiries <= periods,
        "{expiries} expiries in {periods} periods"
    );
    owner.delete(t).unwrap();
    println!("ok: a periodic timer's signals and overruns account for its periods");
}

fn thread_signal_reaches_its_thread() {
    let timers = Timers::new();
    let owner = timers.owner();
    let signo = sigrtmin() + 2;
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // SAFETY: `gettid` has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let info = wait(&[signo], Duration::from_secs(5)).expect("the thread's signal");
        // SAFETY: as above.
        (unsafe { libc::gettid() }, timer_fields(&info))
    });
    let tid = rx.recv().unwrap();
    let t = owner
        .create(
            ClockId::Monotonic,
            Notify::ThreadSignal {
                tid,
                signo,
                value: 7,
            },
        )
        .unwrap();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_millis(5),
            Duration::ZERO,
        )
        .unwrap();
    let (got_tid, fields) = waiter.join().unwrap();
    assert_eq!((got_tid, fields), (tid, (t.get(), 0, 7)));
    println!("ok: a thread-directed signal reaches its thread");
}

fn signalfd_reads_the_fields(timers: &Timers) {
    let owner = timers.owner();
    let signo = sigrtmin() + 3;
    // SAFETY: as in `block`; `signalfd` makes a new fd.
    let fd = unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), signo);
        libc::signalfd(-1, set.as_ptr(), libc::SFD_CLOEXEC)
    };
    assert!(fd >= 0);
    let t = owner
        .create(ClockId::Monotonic, Notify::Signal { signo, value: 99 })
        .unwrap();
    owner
        .settime(
            t,
            SetFlags::RELATIVE,
            Duration::from_millis(5),
            Duration::ZERO,
        )
        .unwrap();
    let mut si = MaybeUninit::<libc::signalfd_siginfo>::zeroed();
    // SAFETY: reads one record into `si`.
    let n = unsafe { libc::read(fd, si.as_mut_ptr().cast(), std::mem::size_of_val(&si)) };
    assert_eq!(n as usize, std::mem::size_of::<libc::signalfd_siginfo>());
    // SAFETY: filled by the read.
    let si = unsafe { si.assume_init() };
    assert_eq!(si.ssi_signo as i32, signo);
    assert_eq!(si.ssi_code, libc::SI_TIMER);
    assert_eq!(si.ssi_tid as i32, t.get());
    assert_eq!(si.ssi_overrun, 0);
    assert_eq!(si.ssi_int, 99);
    // SAFETY: ours.
    unsafe { libc::close(fd) };
    println!("ok: a signalfd reads SI_TIMER, the ID, the overrun and the value");
}

/// Every thread tempora starts blocks every signal it can (`SigBlk`).
fn tempora_threads_block_every_signal(_timers: &Timers) {
    let mut seen = 0;
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = entry.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let name = name.trim();
        if !name.starts_with("tempora") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let blk = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
            .unwrap();
        // SIGKILL and SIGSTOP cannot be blocked; glibc keeps its own 32 and 33.
        let unblockable = 1 << (libc::SIGKILL - 1) | 1 << (libc::SIGSTOP - 1) | 0x1_8000_0000;
        assert_eq!(blk | unblockable, u64::MAX, "{name}: SigBlk {blk:x}");
        seen += 1;
    }
    assert!(seen >= 1, "no tempora thread found");
    println!("ok: {seen} tempora threads block every signal");
}

/// A million signal timers under `RLIMIT_SIGPENDING` = 1024, where the kernel refuses its
/// 1025th: armed an hour out, a thousand of them due in 10 ms, each of whose signals arrives.
fn a_million_signal_timers_under_a_low_sigpending_limit(timers: &Timers) {
    let signo = sigrtmin() + 4;
    let limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: libc::RLIM_INFINITY,
    };
    let mut old = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: reads then lowers the soft limit of this process.
    unsafe {
        assert_eq!(
            libc::getrlimit(libc::RLIMIT_SIGPENDING, old.as_mut_ptr()),
            0
        );
        let hard = old.assume_init().rlim_max;
        let limit = libc::rlimit {
            rlim_max: hard,
            ..limit
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_SIGPENDING, &limit), 0);
    }
    let owner = timers.owner();
    let start = Instant::now();
    let ids: Vec<_> = (0..1_000_000)
        .map(|i| {
            owner
                .create(ClockId::Monotonic, Notify::Signal { signo, value: i })
                .unwrap()
        })
        .collect();
    for (i, &t) in ids.iter().enumerate() {
        let value = if i % 1000 == 0 {
            Duration::from_millis(10)
        } else {
            Duration::from_secs(3600)
        };
        owner
            .settime(t, SetFlags::RELATIVE, value, Duration::ZERO)
            .unwrap();
    }
    let mut got = std::collections::HashSet::new();
    while got.len() < 1000 {
        let info = wait(&[signo], Duration::from_secs(10)).expect("a due timer's signal");
        let (id, _, value) = timer_fields(&info);
        assert_eq!(value % 1000, 0, "only the due ones");
        assert_eq!(ids[value].get(), id);
        assert!(got.insert(id), "once each");
    }
    assert!(wait(&[signo], Duration::from_millis(20)).is_none());
    owner.destroy();
    // SAFETY: puts back the limit read above.
    unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, old.as_ptr()) };
    println!(
        "ok: 1000000 signal timers under RLIMIT_SIGPENDING=1024, 1000 fired, in {:?}",
        start.elapsed()
    );
}

/// The user's signals queued now (the first number of `SigQ` in `/proc/self/status`).
fn signals_queued() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("SigQ:"))
        .expect("SigQ");
    line[5..].trim().split('/').next().unwrap().parse().unwrap()
}

/// Another part of the process holds the whole of `RLIMIT_SIGPENDING` (here: signals it
/// queued to itself and has not taken): tempora's signals find no room (`EAGAIN`), wait, and
/// are each delivered once room returns, with the periods they waited as their overrun.
/// Nothing is lost, nothing hangs.
fn signals_wait_while_another_part_holds_the_whole_limit(timers: &Timers) {
    let (filler, signo) = (sigrtmin() + 6, sigrtmin() + 7);
    block(&[filler, signo]);
    let mut old = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: reads the limit, then lowers the soft limit of this process to 32 above what
    // the user holds now (other processes of the same user keep their room).
    unsafe {
        assert_eq!(
            libc::getrlimit(libc::RLIMIT_SIGPENDING, old.as_mut_ptr()),
            0
        );
        let limit = libc::rlimit {
            rlim_cur: signals_queued() + 32,
            rlim_max: old.assume_init().rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_SIGPENDING, &limit), 0);
    }
    // Fill the room.
    let mut held = 0;
    loop {
        // SAFETY: sigqueue(3) to this process, on a signal every thread blocks.
        let r = unsafe {
            libc::sigqueue(
                libc::getpid(),
                filler,
                libc::sigval {
                    sival_ptr: std::ptr::null_mut(),
                },
            )
        };
        if r != 0 {
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EAGAIN)
            );
            break;
        }
        held += 1;
        assert!(held < 10_000, "the limit did not hold");
    }
    let owner = timers.owner();
    let n = 8;
    let ids: Vec<_> = (0..n)
        .map(|i| {
            let id = owner
                .create(ClockId::Monotonic, Notify::Signal { signo, value: i })
                .unwrap();
            let (ms, every) = if i == 0 {
                (Duration::from_millis(1), Duration::from_millis(1)) // periodic
            } else {
                (Duration::from_millis(1), Duration::ZERO)
            };
            owner.settime(id, SetFlags::RELATIVE, ms, every).unwrap();
            id
        })
        .collect();
    // Due, refused, waiting: none can be queued while the room is held (unless another
    // process of this user frees some of the user's room meanwhile: then what came early is
    // counted, and the waiting is not asserted).
    std::thread::sleep(Duration::from_millis(50));
    let mut early = std::collections::HashSet::new();
    while let Some(info) = wait(&[signo], Duration::ZERO) {
        early.insert(timer_fields(&info).2);
    }
    // Room returns: take the filler's signals.
    for _ in 0..held {
        wait(&[filler], Duration::from_secs(1)).expect("a filler signal");
    }
    let mut got = early.clone();
    let mut periodic_overrun = 0;
    while got.len() < n {
        // Retries back off to at most 100 ms: 10 s is a loaded machine's margin.
        let info = wait(&[signo], Duration::from_secs(10)).expect("a waiting timer's signal");
        let (id, overrun, value) = timer_fields(&info);
        assert_eq!(ids[value].get(), id);
        if value == 0 {
            periodic_overrun = periodic_overrun.max(overrun);
        }
        got.insert(value);
    }
    if early.is_empty() {
        assert!(
            periodic_overrun >= 40,
            "the periodic timer's first signal counts the periods it waited: {periodic_overrun}"
        );
    } else {
        println!(
            "note: {} signals came early: another process freed room",
            early.len()
        );
    }
    owner.destroy();
    while wait(&[signo], Duration::from_millis(20)).is_some() {}
    // SAFETY: puts back the limit read above.
    unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, old.as_ptr()) };
    println!("ok: {n} timers' signals waited while {held} other signals held the limit, then came");
}

/// A signal left pending on a driver thread for good (a `SIGEV_THREAD` callback that raises
/// it: the driver blocks every signal) must not hide the process-wide signal of a timer on the
/// same number: that timer keeps sending, one signal per period. (The probe read the driver's
/// own set with the process's: one more signal, then none.)
fn a_signal_stuck_on_a_driver_thread_hides_no_delivery(timers: &Timers) {
    let owner = timers.owner();
    for signo in [sigrtmin() + 5, libc::SIGUSR2] {
        let raiser = owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |_| {
                    // SAFETY: raises a signal on the calling (driver) thread, which blocks it.
                    unsafe { libc::raise(signo) };
                }),
            )
            .unwrap();
        owner
            .settime(
                raiser,
                SetFlags::RELATIVE,
                Duration::from_millis(1),
                Duration::ZERO,
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let t = owner
            .create(ClockId::Monotonic, Notify::Signal { signo, value: 1 })
            .unwrap();
        owner
            .settime(
                t,
                SetFlags::RELATIVE,
                Duration::from_millis(5),
                Duration::from_millis(5),
            )
            .unwrap();
        for i in 0..10 {
            assert!(
                wait(&[signo], Duration::from_secs(2)).is_some(),
                "signal {signo}: only {i} signals"
            );
        }
        owner.delete(t).unwrap();
        owner.delete(raiser).unwrap();
        while wait(&[signo], Duration::from_millis(20)).is_some() {}
    }
    println!("ok: a signal stuck on a driver thread hides no delivery");
}

fn main() {
    let r = sigrtmin();
    block(&[
        r,
        r + 1,
        r + 2,
        r + 3,
        r + 4,
        r + 5,
        r + 6,
        r + 7,
        libc::SIGALRM,
        libc::SIGUSR2,
    ]);
    let timers = Timers::new();
    process_signal_carries_the_timers_fields(&timers);
    periodic_signals_keep_coming_and_overruns_sum(&timers);
    thread_signal_reaches_its_thread();
    signalfd_reads_the_fields(&timers);
    tempora_threads_block_every_signal(&timers);
    a_signal_stuck_on_a_driver_thread_hides_no_delivery(&timers);
    a_million_signal_timers_under_a_low_sigpending_limit(&timers);
    signals_wait_while_another_part_holds_the_whole_limit(&timers);
}
