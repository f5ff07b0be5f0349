//! The thread's current service: the one the free functions use and `Instant::now` reads,
//! [`Timers::enter`]'s or else [`global`], built on first use.

use crate::clock::{ClockId, ClockSource, OsClock};
use crate::instant::Instant;
use crate::sync::{rank, RankedMutex};
use crate::Timers;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

thread_local! {
    /// The services entered on this thread ([`Timers::enter`]), the innermost last.
    static ENTERED: RefCell<Vec<Timers>> = const { RefCell::new(Vec::new()) };
}

impl Timers {
    /// Makes this service the calling thread's current one until the guard is dropped (as
    /// tokio's `Runtime::enter`): the free functions of [`crate::time`] (`sleep`, `timeout`,
    /// `interval`, ...) make their futures on it, and [`Instant::now`] reads its monotonic
    /// clock. A test on a [`ManualClock`](crate::clock::ManualClock) service enters it, and
    /// code written against the free functions (code ported from `tokio::time`) then runs on
    /// the manual clock, as tokio's runs on its paused clock.
    ///
    /// Entering nests: the innermost live guard's service is current. It is the calling
    /// thread's only: a task's futures keep the service they were made on wherever they are
    /// polled, and another thread (an executor's other workers) has its own current service.
    ///
    /// # Panics
    /// The guard's drop panics if guards of this thread are dropped out of order (the inner
    /// one first is the order), as tokio's do.
    pub fn enter(&self) -> EnterGuard {
        let depth = ENTERED.with_borrow_mut(|e| {
            e.push(self.clone());
            e.len()
        });
        EnterGuard {
            depth,
            _not_send: PhantomData,
        }
    }
}

/// The guard of [`Timers::enter`]: its service is the thread's current one until it is
/// dropped. Not `Send`: it is dropped on the thread that entered.
#[derive(Debug)]
#[must_use = "the service is current only while the guard lives"]
pub struct EnterGuard {
    /// The number of services entered on this thread with this guard's, which is the last.
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        // Gone already: the thread is ending, and its list with it.
        let Ok(left) = ENTERED.try_with(|e| {
            let mut e = e.borrow_mut();
            (e.len() == self.depth).then(|| e.pop())
        }) else {
            return;
        };
        match left {
            // Dropped outside the borrow: the last handle of a service stops its drivers.
            Some(timers) => drop(timers),
            None if std::thread::panicking() => {}
            None => panic!("tempora::time: `EnterGuard`s dropped out of order (inner first)"),
        }
    }
}

/// Runs `f` on the thread's current service: the innermost entered, else [`global`].
pub(super) fn with_current<R>(f: impl FnOnce(&Timers) -> R) -> R {
    let mut f = Some(f);
    let entered = ENTERED.try_with(|e| {
        let e = e.borrow();
        let t = e.last()?;
        Some((f.take().expect("called once"))(t))
    });
    match entered {
        Ok(Some(r)) => r,
        _ => (f.take().expect("not called"))(global()),
    }
}

impl Instant {
    /// The thread's current service's monotonic clock, now (`tokio::time::Instant::now`): the
    /// service of the innermost live [`Timers::enter`] guard of this thread, else the OS's
    /// `CLOCK_MONOTONIC`, the [`global`] service's clock (read without building it).
    pub fn now() -> Instant {
        ENTERED
            .try_with(|e| e.borrow().last().map(Timers::now))
            .ok()
            .flatten()
            .unwrap_or_else(|| Instant::from_nanos(OsClock.now(ClockId::Monotonic)))
    }

    /// The time since this instant on the thread's current service's clock ([`Instant::now`]),
    /// zero if it is in the future.
    pub fn elapsed(&self) -> Duration {
        Instant::now() - *self
    }
}

/// The process-wide service: OS clocks, the default configuration (one driver), built on first
/// use and never stopped. The free functions use it on a thread that entered no other
/// ([`Timers::enter`]).
///
/// # Panics
/// If it cannot be built: its driver thread cannot start ([`try_global`] reports that).
pub fn global() -> &'static Timers {
    try_global().expect("tempora: the global service cannot start")
}

/// [`global`], or the error building it met (the OS refused its driver thread: `EAGAIN` and
/// the like); the next call tries again. One service is built however many threads ask at
/// once, and the C ABI's default owner is an owner of this same service.
///
/// In a child made by `fork(2)` the parent's global service does not work (`timers` module
/// doc, "Fork"): the child's first call builds a new one, with none of the parent's timers,
/// and the parent's is leaked.
pub fn try_global() -> Result<&'static Timers, crate::Error> {
    let slot = Global::current();
    if let Some(t) = slot.timers.get() {
        return Ok(t);
    }
    // Nothing is changed under it but `timers`, which a panic leaves empty or set.
    let _building = slot.building.lock_or_recover();
    if let Some(t) = slot.timers.get() {
        return Ok(t);
    }
    let timers = Timers::builder().build()?;
    Ok(slot.timers.get_or_init(|| timers))
}

/// [`global`] if this process has built it, without building anything: no allocation, no
/// lock, so a signal handler may call it. `None` before the first [`try_global`] of this
/// process, and in a forked child before the child's own.
#[inline]
pub fn built_global() -> Option<&'static Timers> {
    Global::built()?.timers.get()
}

/// The process's [`Global`] (of the latest fork generation to ask), NULL until one asks.
static SLOT: AtomicPtr<Global> = AtomicPtr::new(std::ptr::null_mut());

/// The global service of one fork generation (`sync::fork`): a child replaces its parent's,
/// whose build lock and `OnceLock` a thread of the parent may have held at the fork, with a
/// fresh one. Each is leaked: the parent's, in the child, must not be dropped (its threads
/// and locks are not the child's).
struct Global {
    generation: u32,
    timers: OnceLock<Timers>,
    /// Held while the service is built, so that one is built; a failed attempt leaves
    /// `timers` empty for the next call.
    building: RankedMutex<(), { rank::BUILDING }>,
}

impl Global {
    /// The calling process's, if it made one: `current` without making it.
    #[inline]
    fn built() -> Option<&'static Global> {
        // Acquire: as in `current`.
        // SAFETY: a published slot is leaked, never freed.
        let g = unsafe { SLOT.load(Ordering::Acquire).as_ref() }?;
        (g.generation == crate::sync::fork::generation()).then_some(g)
    }

    /// The calling process's, made on first use.
    fn current() -> &'static Global {
        crate::sync::fork::watch();
        let generation = crate::sync::fork::generation();
        // Acquire: pairs with the Release of the compare-exchange that published it.
        let mut seen = SLOT.load(Ordering::Acquire);
        loop {
            // SAFETY: a published slot is leaked, never freed.
            if let Some(g) = unsafe { seen.as_ref() } {
                if g.generation == generation {
                    return g;
                }
            }
            let fresh = Box::into_raw(Box::new(Global {
                generation,
                timers: OnceLock::new(),
                building: RankedMutex::new(()),
            }));
            match SLOT.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
                // The old one (a parent's) is leaked.
                // SAFETY: just published, and never freed.
                Ok(_) => return unsafe { &*fresh },
                Err(now) => {
                    // SAFETY: `fresh` was never shared.
                    drop(unsafe { Box::from_raw(fresh) });
                    seen = now;
                }
            }
        }
    }
}
