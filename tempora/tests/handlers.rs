//! Signal handlers that call tempora while the code they interrupted, on the same thread, is
//! inside tempora: `settime`, `gettime` and `getoverrun` (the calls POSIX names
//! async-signal-safe) never hang there. They complete, or fail at once with
//! `Error::WouldDeadlock` where the interrupted call holds what they need (the timers
//! module's "Signal handlers").
//!
//! Its own `main` (no test harness): a sender thread signals the main thread, whose handler
//! calls tempora, while the main thread loops on calls of its own on the same timer, with a
//! driver firing it meanwhile. `TEMPORA_HANDLER_SIGNALS` sets the signals of the first case
//! (default 30 000, a second or two; the second case sends a third; the soak runs 300 000); a
//! watchdog (`alarm`) ends a run that hangs with SIGALRM.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
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
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Sends `n` signals to `target`, each once the previous one was handled.
fn send(target: libc::pthread_t, n: u64) {
    let start = HANDLED.load(Ordering::Acquire);
    for i in 0..n {
        // SAFETY: `target` is the main thread, alive until this thread is joined.
        assert_eq!(unsafe { libc::pthread_kill(target, libc::SIGUSR1) }, 0);
        while HANDLED.load(Ordering::Acquire) < start + i + 1 {
            std::thread::yield_now();
        }
    }
}

/// Runs one case: `n` signals while the main thread runs `main_loop` on the shared timer.
fn case(name: &str, mode: u8, n: u64, mut main_loop: impl FnMut(&Owner, TimerId)) -> (u64, u64) {
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
    while HANDLED.load(Ordering::Acquire) < start + n {
        main_loop(owner, *id);
    }
    sender.join().expect("the sender");
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
    (done, refused)
}

fn main() {
    let n: u64 = std::env::var("TEMPORA_HANDLER_SIGNALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    // A hang is the failure this test looks for: end the run with SIGALRM instead.
    // SAFETY: `alarm` has no preconditions.
    unsafe { libc::alarm(120) };
    let timers = Timers::new();
    let owner = timers.owner();
    let id = owner
        .create(ClockId::Monotonic, Notify::None)
        .expect("create");
    let callback = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(|_, _| std::hint::black_box(())),
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
    let (done, refused) = case("re-arm in a handler, gettime in main", REARM, n, |o, id| {
        let s = o.gettime(id).expect("gettime in main");
        assert_eq!(s.interval, PERIOD.into(), "a re-arm sets the same period");
    });
    assert_eq!(
        (done, refused),
        (n, 0),
        "every re-arm from the handler completes"
    );

    // The reverse: the main thread re-arms (holding the timer's and a base's lock for part of
    // each call) while the handler reads and re-arms. Each handler call completes or is
    // refused at once; none hangs.
    let (done, _refused) = case(
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
