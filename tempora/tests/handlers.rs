//! Signal handlers that call tempora while the code they interrupted, on the same thread, is
//! inside tempora: `settime`, `gettime` and `getoverrun` (the calls POSIX names
//! async-signal-safe) never hang there. They complete, or fail at once with
//! `Error::WouldDeadlock` where the interrupted call holds what they need (the timers
//! module's "Signal handlers").
//!
//! Its own `main` (no test harness): a sender thread signals the main thread, whose handler
//! calls tempora, while the main thread loops on calls of its own on the same timer, with a
//! driver firing it meanwhile. `TEMPORA_HANDLER_SIGNALS` sets the signals of the first case
//! (default 30 000, a second or two; the second case sends a third; the soak runs 300 000).
//! The sender sleeps until each signal was handled (the handler wakes it through an eventfd)
//! rather than spinning beside the main thread for its CPU. A case ends after its signals or
//! after `CASE_BUDGET`, whichever comes first (on a starved machine each signal waits for the
//! main thread's turn on a CPU), having handled at least `MIN_SIGNALS`. A hang is the failure
//! looked for: a watchdog (`alarm`, re-armed at every signal handled) ends with SIGALRM a run
//! in which no signal was handled for `STALL` seconds.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::timers::{Notify, SetFlags, Timers};
use tempora::{Error, Owner, TimerId};

/// The timer the handler and the main thread share.
static TARGET: OnceLock<(Owner, TimerId)> = OnceLock::new();
/// What the handler does: `REARM` or `READ`.
static MODE: AtomicU8 = AtomicU8::new(REARM);
const REARM: u8 = 0;
const READ: u8 = 1;
/// Signals handled so far.
static HANDLED: AtomicU64 = AtomicU64::new(0);
/// Handler calls that completed, and that failed with `WouldDeadlock`.
static COMPLETED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Handler calls that failed with anything else (must stay 0), and the last such errno.
static WRONG: AtomicU64 = AtomicU64::new(0);
static WRONG_ERRNO: AtomicU64 = AtomicU64::new(0);

const PERIOD: Duration = Duration::from_micros(200);
/// How long a case sends signals at most.
const CASE_BUDGET: Duration = Duration::from_secs(30);
/// How many signals a case must have handled, budget or not.
const MIN_SIGNALS: u64 = 1000;
/// Seconds without a handled signal that count as a hang.
const STALL: u32 = 60;
/// The eventfd the handler writes once per signal handled, read by the sender.
static HANDLED_FD: AtomicI32 = AtomicI32::new(-1);

fn tally<T>(r: Result<T, Error>) {
    match r {
        Ok(_) => COMPLETED.fetch_add(1, Ordering::Relaxed),
        Err(Error::WouldDeadlock) => REFUSED.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            WRONG_ERRNO.store(e.errno() as u64, Ordering::Relaxed);
            WRONG.fetch_add(1, Ordering::Relaxed)
        }
    };
}

extern "C" fn on_signal(_: libc::c_int) {
    // SAFETY: reading and restoring the thread's errno, which a handler must leave as it was.
    let errno = unsafe { *libc::__errno_location() };
    if let Some((owner, id)) = TARGET.get() {
        match MODE.load(Ordering::Relaxed) {
            REARM => tally(owner.settime(*id, SetFlags::RELATIVE, PERIOD, PERIOD)),
            _ => {
                tally(owner.gettime(*id));
                tally(owner.getoverrun(*id));
                tally(owner.settime(*id, SetFlags::RELATIVE, PERIOD, PERIOD));
            }
        }
    }
    HANDLED.fetch_add(1, Ordering::Release);
    let one = 1u64;
    // SAFETY: write(2) is async-signal-safe; `one` is 8 readable bytes, an eventfd's unit.
    unsafe {
        libc::write(
            HANDLED_FD.load(Ordering::Relaxed),
            (&one as *const u64).cast(),
            8,
        )
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Sends up to `n` signals to `target`, each once the previous one was handled, for at most
/// `CASE_BUDGET`; how many it sent (all handled).
fn send(target: libc::pthread_t, n: u64) -> u64 {
    let fd = HANDLED_FD.load(Ordering::Relaxed);
    let began = Instant::now();
    let mut sent = 0;
    while sent < n && (sent < MIN_SIGNALS || began.elapsed() < CASE_BUDGET) {
        // SAFETY: `target` is the main thread, alive until this thread is joined.
        assert_eq!(unsafe { libc::pthread_kill(target, libc::SIGUSR1) }, 0);
        sent += 1;
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count`; blocks until the handler has written.
        let r = unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
        assert_eq!(r, 8, "read the eventfd");
        assert_eq!(count, 1, "one signal handled per signal sent");
        // The signal was handled: a hang is a stall from here on.
        // SAFETY: `alarm` has no preconditions.
        unsafe { libc::alarm(STALL) };
    }
    sent
}

/// Runs one case: up to `n` signals while the main thread runs `main_loop` on the shared
/// timer; (signals handled, handler calls completed, refused).
fn case(
    name: &str,
    mode: u8,
    n: u64,
    mut main_loop: impl FnMut(&Owner, TimerId),
) -> (u64, u64, u64) {
    MODE.store(mode, Ordering::Relaxed);
    for c in [&COMPLETED, &REFUSED] {
        c.store(0, Ordering::Relaxed);
    }
    let (owner, id) = TARGET.get().expect("set in main");
    // SAFETY: `pthread_self` has no preconditions.
    let me = unsafe { libc::pthread_self() } as usize;
    let start = HANDLED.load(Ordering::Acquire);
    let sender = std::thread::spawn(move || send(me as libc::pthread_t, n));
    let began = Instant::now();
    while !sender.is_finished() {
        main_loop(owner, *id);
    }
    let n = sender.join().expect("the sender");
    assert_eq!(
        HANDLED.load(Ordering::Acquire),
        start + n,
        "{name}: signals handled"
    );
    let (done, refused) = (
        COMPLETED.load(Ordering::Relaxed),
        REFUSED.load(Ordering::Relaxed),
    );
    println!(
        "{name}: {n} signals in {:.2?}: {done} handler calls completed, {refused} refused",
        began.elapsed()
    );
    assert_eq!(
        WRONG.load(Ordering::Relaxed),
        0,
        "{name}: a handler call failed with errno {}",
        WRONG_ERRNO.load(Ordering::Relaxed)
    );
    (n, done, refused)
}

fn main() {
    let n: u64 = std::env::var("TEMPORA_HANDLER_SIGNALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    // A hang is the failure this test looks for: end the run with SIGALRM instead (the sender
    // re-arms the watchdog at every signal handled).
    // SAFETY: `alarm` has no preconditions.
    unsafe { libc::alarm(STALL) };
    // SAFETY: eventfd(2) with valid flags; checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd");
    HANDLED_FD.store(fd, Ordering::Relaxed);
    let timers = Timers::new();
    let owner = timers.owner();
    let id = owner
        .create(ClockId::Monotonic, Notify::None)
        .expect("create");
    let callback = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(|_| std::hint::black_box(())),
        )
        .expect("create");
    owner
        .settime(callback, SetFlags::RELATIVE, PERIOD, PERIOD)
        .expect("a periodic callback keeps the driver locking timers meanwhile");
    assert!(TARGET.set((owner.clone(), id)).is_ok(), "set once");
    // SAFETY: a zeroed `sigaction` with a handler and SA_RESTART is valid; the handler is an
    // `extern "C" fn(c_int)`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    owner
        .settime(id, SetFlags::RELATIVE, PERIOD, PERIOD)
        .expect("settime");

    // The program: the handler re-arms the timer while the main thread reads it.
    // `gettime` holds no lock, so every re-arm completes.
    let (handled, done, refused) =
        case("re-arm in a handler, gettime in main", REARM, n, |o, id| {
            let s = o.gettime(id).expect("gettime in main");
            assert_eq!(s.interval, PERIOD.into(), "a re-arm sets the same period");
        });
    assert_eq!(
        (done, refused),
        (handled, 0),
        "every re-arm from the handler completes"
    );

    // The reverse: the main thread re-arms (holding the timer's and a base's lock for part of
    // each call) while the handler reads and re-arms. Each handler call completes or is
    // refused at once; none hangs.
    let (_, done, _refused) = case(
        "gettime, getoverrun and settime in a handler, settime in main",
        READ,
        n / 3,
        |o, id| {
            o.settime(id, SetFlags::RELATIVE, PERIOD, PERIOD)
                .expect("settime in main");
        },
    );
    assert!(done > 0, "handler calls complete while main re-arms");
    drop(timers);
    println!("handlers: ok");
}
