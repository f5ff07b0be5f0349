//! The POSIX interval-timer service: [`Timers`], its [`Owner`]s, and their timers.
//!
//! ```text
//!  Timers ── Core { registry, clock source, tick, bases[B], doorbells[D] }
//!     │                                   └─ Base: lock, wheel per clock, next expiry per clock
//!     ├─ drivers[D] (threads: sleep until their bases' earliest expiry, then poll all bases)
//!     └─ owner() ─► Owner ── registry owner (IDs → timer objects)
//!                         └─ sink: event queue + waiting receivers (Queue timers)
//! ```
//!
//! The calls and their POSIX names: [`Owner::create`] (`timer_create`), [`Owner::settime`]
//! (`timer_settime`), [`Owner::gettime`] (`timer_gettime`), [`Owner::getoverrun`]
//! (`timer_getoverrun`), [`Owner::delete`] (`timer_delete`). Their semantics are Linux
//! 6.15+'s, rule by rule (the crate-private `itimer` module applies them; its doc lists them):
//! a zero `it_value` disarms, `TIMER_ABSTIME` in the past fires at once, relative
//! `CLOCK_REALTIME` timers run on the monotonic clock, invalid times are `EINVAL` before the
//! lookup, settime returns the old setting, resets the overrun and voids a pending event, and
//! overruns count missed periods only, latched when an event is consumed.
//!
//! # Notification
//!
//! Chosen per timer at create ([`Notify`]):
//! * `None` (`SIGEV_NONE`): nothing is delivered; gettime shows the state.
//! * `Queue` (`SIGEV_SIGNAL`): the owner's event queue with the kernel's signal semantics (see
//!   `notify.rs`): at most one pending event per timer; a periodic timer is re-armed only when
//!   its event is consumed ([`Owner::try_recv`], [`Owner::recv`], ...), and the periods that
//!   passed meanwhile are its overrun. A periodic timer whose events nobody consumes costs
//!   nothing after its first expiry.
//! * `Callback` (`SIGEV_THREAD`): a closure run by whoever polls, with no tempora lock held, so
//!   it may call settime or delete on its own timer. The event is consumed as it is delivered:
//!   the overrun it gets counts the periods the poll itself was late by.
//!
//! # Firing
//!
//! Either background drivers ([`Builder::drivers`], default one on the OS clocks; the
//! `driver` module) or the application's own loop: [`Timers::next_deadline`] says when there
//! is work, [`Timers::poll`] does it (from an epoll loop, an async task, a dedicated thread);
//! both may run together. A poll visits every base. At each it takes the base lock only to
//! pop what is due, at most [`Builder::batch`] entries at a time, and delivers them with the
//! lock released, so arming and cancelling on that base wait for one batch at most. A poll
//! also waits for the batches other pollers popped before it to be delivered (`base.rs`,
//! "Delivery and the poll barrier"), so when it returns everything due has fired.
//!
//! # Lifetime and failure
//!
//! The service runs while a [`Timers`] handle exists. Dropping the last one stops and joins
//! the drivers; owners may outlive it, to read, delete and checkpoint their timers and to
//! receive events already queued, but nothing fires any more: `create` and `settime` fail
//! with [`Error::ServiceStopped`], and `recv` returns it once the queue is empty instead of
//! waiting forever.
//!
//! A panic inside one of tempora's own critical sections (a bug, or a failed allocation
//! that panics) poisons that lock instead of leaving it held, and a driver thread whose loop
//! panics dies visibly: either fails the service ([`Timers::health`] reports what), its
//! receivers return [`Error::Poisoned`] once their queues are empty, and calls that need the
//! poisoned part fail with it. A panicking *callback* is not such a failure: it is caught,
//! counted and the poll goes on.
//!
//! # Precision
//!
//! A timer keeps its exact expiry in nanoseconds; the wheels count ticks of [`Builder::tick`]
//! (default 1 µs) and place timers precisely (`wheel::Mode::PRECISE`) at
//! `ceil(expiry / tick)`. A poll at time `now` advances the wheels to `floor(now / tick)`, so
//! a timer fires only once `now >= expiry`, never before, and when polled on time it fires
//! less than one tick after its expiry. When the realtime clock was set backwards, the realtime
//! wheels are re-based on it before anything fires, so absolute realtime timers wait for the
//! wall clock to reach them again.
//!
//! # Safety of the timer addresses in wheels and queues
//!
//! Wheel entries and queue entries hold timer addresses, not references:
//! * Queue entries are dereferenced only by the owner's receivers, who hold the owner: its slot
//!   pages live as long as it does.
//! * Wheel entries are removed when the timer is deleted, under its lock (`Core::disarm`),
//!   including when its owner goes away (`Owner::destroy` runs the same hook on every timer).
//!   An entry popped before that removal is only dereferenced by a poll that has been pinned
//!   in the epoch since before the pop, and an owner's slot pages are recycled only after an
//!   epoch grace period that starts after its teardown, so the address stays a timer object.
//!   Under the timer's lock the poll then checks that the timer still waits on that entry.

mod base;
mod driver;
mod notify;

#[cfg(all(test, not(loom)))]
mod tests;

pub use notify::Event;

use crate::checkpoint::{self, Expiry, Snapshot, TimerRecord};
use crate::clock::{ClockId, ClockSource, OsClock, Resolution, TimeSpec};
use crate::error::Error;
use crate::itimer::{self, Arm, Consumed, Setting};
use crate::registry::timer::{Locked, Timer};
use crate::registry::Status;
use crate::registry::{self, NotifyKind, Registry, TimerId, TimerInfo};
use crate::sync::AtomicBool;
use crate::sync::{thread_index, AtomicU64, Ordering, Poisoned};
use crate::wheel::{Key, Mode};
use base::{wheel_of, Base, Slot, CLOCKS, NO_EXPIRY, WHEEL_CLOCKS};
use crossbeam_utils::CachePadded;
use driver::Doorbell;
use notify::{EventRef, Sink};
use std::cell::Cell;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A callback timer's closure: called with the timer's ID and the event's overrun.
pub type Callback = Arc<dyn Fn(TimerId, i32) + Send + Sync>;

/// How a timer reports its expiry, chosen at [`Owner::create`].
#[derive(Clone, Default)]
pub enum Notify {
    /// Nothing is delivered (`SIGEV_NONE`); [`Owner::gettime`] shows the state.
    #[default]
    None,
    /// An [`Event`] on the owner's queue (`SIGEV_SIGNAL`), at most one pending per timer.
    Queue,
    /// A closure run by the poll that fires the timer (`SIGEV_THREAD`).
    Callback(Callback),
    /// A callback with a name, under which a checkpoint records it (see [`crate::checkpoint`]).
    NamedCallback(Arc<str>, Callback),
}

impl Notify {
    /// `Notify::Callback` with `f`.
    pub fn callback(f: impl Fn(TimerId, i32) + Send + Sync + 'static) -> Notify {
        Notify::Callback(Arc::new(f))
    }

    /// `Notify::NamedCallback`: a callback a checkpoint records as `name`, for a restore to
    /// map back to a closure. A create refuses the names a snapshot reserves for the other
    /// kinds (`none`, `queue`: a restore would turn the timer into one of those) and names
    /// longer than [`crate::checkpoint::MAX_NAME`] bytes (no snapshot can hold them).
    pub fn callback_named(name: &str, f: impl Fn(TimerId, i32) + Send + Sync + 'static) -> Notify {
        Notify::NamedCallback(name.into(), Arc::new(f))
    }

    fn kind(&self) -> NotifyKind {
        match self {
            Notify::None => NotifyKind::None,
            Notify::Queue => NotifyKind::Queue,
            Notify::Callback(_) | Notify::NamedCallback(..) => NotifyKind::Callback,
        }
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Notify::None => "None",
            Notify::Queue => "Queue",
            Notify::Callback(_) => "Callback(..)",
            Notify::NamedCallback(..) => "NamedCallback(..)",
        })
    }
}

/// Flags of [`Owner::settime`]: the `flags` argument of `timer_settime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetFlags(u32);

impl SetFlags {
    /// `it_value` is relative to now.
    pub const RELATIVE: SetFlags = SetFlags(0);
    /// `TIMER_ABSTIME`: `it_value` is an absolute time on the timer's clock.
    #[doc(alias = "TIMER_ABSTIME")]
    pub const ABSTIME: SetFlags = SetFlags(1);

    /// The flags from `timer_settime`'s raw value. Like Linux, bits other than
    /// `TIMER_ABSTIME` (1) are ignored, not refused.
    pub fn from_raw(raw: i32) -> SetFlags {
        SetFlags(raw as u32 & 1)
    }

    /// Whether `TIMER_ABSTIME` is set.
    pub fn is_abstime(self) -> bool {
        self.0 & 1 != 0
    }
}

/// A timer setting (`struct itimerspec`): remaining time until the next expiry, and period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItimerSpec {
    /// Time until the next expiry (`it_value`); zero when disarmed.
    pub value: TimeSpec,
    /// The period (`it_interval`); zero for a one-shot timer.
    pub interval: TimeSpec,
}

impl ItimerSpec {
    /// Both fields in nanoseconds: `(value, interval)`.
    pub fn as_nanos(&self) -> (u64, u64) {
        // A spec tempora produced is always valid.
        (
            self.value.to_nanos().unwrap_or(0),
            self.interval.to_nanos().unwrap_or(0),
        )
    }
}

impl From<Setting> for ItimerSpec {
    fn from(s: Setting) -> ItimerSpec {
        ItimerSpec {
            value: TimeSpec::from_nanos(s.value),
            interval: TimeSpec::from_nanos(s.interval),
        }
    }
}

/// Configures [`Timers`].
#[derive(Clone)]
pub struct Builder {
    bases: Option<usize>,
    drivers: Option<usize>,
    os_clock: bool,
    tick: Duration,
    batch: usize,
    clock: Arc<dyn ClockSource>,
    registry: registry::Builder,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("bases", &self.bases)
            .field("drivers", &self.drivers)
            .field("tick", &self.tick)
            .field("batch", &self.batch)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            bases: None,
            drivers: None,
            os_clock: true,
            tick: Duration::from_micros(1),
            batch: 64,
            clock: Arc::new(OsClock),
            registry: registry::Builder::default(),
        }
    }
}

impl Builder {
    /// Number of bases (default: the number of CPUs). A timer is armed on the base of the
    /// thread that arms it.
    pub fn bases(&mut self, n: usize) -> &mut Self {
        self.bases = Some(n);
        self
    }

    /// Background driver threads (default: 1 on the OS clocks, 0 on any other clock source,
    /// whose time a thread cannot sleep on). 0 leaves firing to [`Timers::poll`]. Driver `k`
    /// sleeps until the earliest expiry of bases `k, k + n, ...` and then fires what is due on
    /// every base; see the `driver` module doc.
    pub fn drivers(&mut self, n: usize) -> &mut Self {
        self.drivers = Some(n);
        self
    }

    /// The wheels' tick (default 1 µs): a timer polled on time fires less than one tick after
    /// its expiry, never before.
    pub fn tick(&mut self, tick: Duration) -> &mut Self {
        self.tick = tick;
        self
    }

    /// Most entries a poll pops from a base under its lock at once (default 64).
    pub fn batch(&mut self, n: usize) -> &mut Self {
        self.batch = n;
        self
    }

    /// The clocks to run on: [`OsClock`] (default) or a [`crate::clock::ManualClock`] for
    /// deterministic tests.
    pub fn clock<C: ClockSource>(&mut self, clock: C) -> &mut Self {
        self.os_clock = clock.is_os_time();
        self.clock = Arc::new(clock);
        self
    }

    /// The registry's configuration (ID bits, table size, ...).
    pub fn registry(&mut self, registry: registry::Builder) -> &mut Self {
        self.registry = registry;
        self
    }

    /// Builds the service.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero bases, more than 65 536 bases, a zero tick, a zero
    /// batch, or an invalid registry configuration.
    pub fn build(&self) -> Result<Timers, Error> {
        let bases = self.bases.unwrap_or_else(crate::sync::cpus);
        if bases == 0 || bases > 1 << 16 {
            return Err(Error::InvalidConfig("bases must be in 1..=65536"));
        }
        let drivers = self.drivers.unwrap_or(usize::from(self.os_clock));
        if drivers > bases {
            return Err(Error::InvalidConfig("more drivers than bases"));
        }
        if self.batch == 0 {
            return Err(Error::InvalidConfig("the batch must be at least 1"));
        }
        let tick = u64::try_from(self.tick.as_nanos())
            .map_err(|_| Error::InvalidConfig("the tick is too long"))?;
        let res = Resolution::new(tick)?;
        let registry = self.registry.build()?;
        let start = WHEEL_CLOCKS.map(|c| res.ticks_floor(self.clock.now(c)));
        let core = Arc::new(Core {
            registry,
            clock: self.clock.clone(),
            res,
            batch: self.batch,
            bases: (0..bases)
                .map(|_| CachePadded::new(Base::new(start)))
                .collect(),
            callback_panics: AtomicU64::new(0),
            bells: (0..drivers).map(|_| CachePadded::default()).collect(),
            shutdown: AtomicBool::new(false),
            failure: OnceLock::new(),
            halted: AtomicBool::new(false),
            owners: std::sync::Mutex::new(Vec::new()),
            #[cfg(test)]
            crash_driver: AtomicBool::new(false),
            driver_wakeups: AtomicU64::new(0),
            rings: AtomicU64::new(0),
        });
        let drivers = Drivers::start(&core, drivers, self.os_clock)?;
        Ok(Timers {
            core,
            _drivers: Arc::new(drivers),
        })
    }
}

/// The timer service: bases, clock, registry. Cloning shares it. See the [module doc](self).
#[derive(Clone)]
pub struct Timers {
    core: Arc<Core>,
    /// Stops and joins the drivers when the last `Timers` handle goes (owners keep only the
    /// core, so their events stay readable).
    _drivers: Arc<Drivers>,
}

/// The driver threads of a `Timers`, stopped and joined on drop.
struct Drivers {
    core: Arc<Core>,
    threads: Vec<JoinHandle<()>>,
    #[cfg(not(loom))]
    watch: Option<Arc<driver::ClockWatch>>,
}

impl Drivers {
    fn start(core: &Arc<Core>, n: usize, os_clock: bool) -> Result<Drivers, Error> {
        let mut d = Drivers {
            core: core.clone(),
            threads: Vec::new(),
            #[cfg(not(loom))]
            watch: None,
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(Error::from)
        };
        for k in 0..n {
            let c = core.clone();
            // On error, `d`'s drop stops the threads started so far.
            d.threads.push(spawn(
                format!("tempora-driver-{k}"),
                Box::new(move || {
                    // A driver never dies silently: a panic that escapes its loop (callbacks'
                    // are caught inside it) fails the service, which wakes every receiver.
                    let body = std::panic::AssertUnwindSafe(|| driver::run(&c, k, n));
                    if std::panic::catch_unwind(body).is_err() {
                        c.fail(DRIVER_DIED);
                    }
                }),
            )?);
        }
        #[cfg(not(loom))]
        if n > 0 && os_clock {
            if let Some(w) = driver::ClockWatch::new() {
                let w = Arc::new(w);
                let (c, w2) = (core.clone(), w.clone());
                d.watch = Some(w);
                d.threads.push(spawn(
                    "tempora-clockwatch".into(),
                    Box::new(move || w2.run(&c)),
                )?);
            }
        }
        #[cfg(loom)]
        let _ = os_clock;
        Ok(d)
    }
}

impl Drop for Drivers {
    fn drop(&mut self) {
        self.core.shutdown.store(true, Ordering::Release);
        self.core.halt();
        self.core.ring_all();
        #[cfg(not(loom))]
        if let Some(w) = &self.watch {
            w.stop();
        }
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            // A callback on a driver that drops the last `Timers` cannot join its own thread;
            // that driver sees `shutdown` and ends by itself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

impl fmt::Debug for Timers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timers")
            .field("bases", &self.core.bases.len())
            .field("tick_ns", &self.core.res.nanos())
            .field("timers", &self.core.registry.len())
            .finish()
    }
}

impl Default for Timers {
    fn default() -> Self {
        Timers::new()
    }
}

/// `Error::Poisoned` texts of the service's locks.
const BASE_POISONED: &str = "a timer base";
const QUEUE_POISONED: &str = "an owner's event queue";
const DRIVER_DIED: &str = "a driver thread";

struct Core {
    registry: Registry,
    clock: Arc<dyn ClockSource>,
    res: Resolution,
    batch: usize,
    bases: Box<[CachePadded<Base>]>,
    callback_panics: AtomicU64,
    /// One per driver; driver `k` serves the bases `b % drivers == k`.
    bells: Box<[CachePadded<Doorbell>]>,
    /// The last `Timers` handle was dropped: drivers end, owners are told (`Core::halt`).
    shutdown: AtomicBool,
    /// The first `Error::Poisoned` text the service met (a poisoned lock, a dead driver);
    /// set once, never cleared (`Core::fail`).
    failure: OnceLock<&'static str>,
    /// `shutdown || failure.is_some()`, in one byte for the arming calls' check.
    halted: AtomicBool,
    /// The event queue of every owner made by this service, for `halt` to wake their
    /// receivers. A `Weak<Sink>`, not the owner: upgrading it can never make this thread run
    /// an owner's teardown (which takes timer locks) from wherever the service failed. Dead
    /// entries are pruned as the list grows.
    owners: std::sync::Mutex<Vec<Weak<Sink>>>,
    driver_wakeups: AtomicU64,
    /// Test hook: the next driver loop iteration panics (a driver dying outside a callback).
    #[cfg(test)]
    crash_driver: AtomicBool,
    /// Doorbell rings (arms earlier than a driver's sleep, clock steps, shutdown).
    rings: AtomicU64,
}

/// Clock readings taken at most once per clock per operation.
struct LazyNow<'a> {
    src: &'a dyn ClockSource,
    cache: [Cell<u64>; CLOCKS],
}

impl<'a> LazyNow<'a> {
    fn new(src: &'a dyn ClockSource) -> LazyNow<'a> {
        LazyNow {
            src,
            cache: [const { Cell::new(u64::MAX) }; CLOCKS],
        }
    }

    fn from(src: &'a dyn ClockSource, now: [u64; CLOCKS]) -> LazyNow<'a> {
        LazyNow {
            src,
            cache: now.map(Cell::new),
        }
    }

    #[inline]
    fn get(&self, clock: ClockId) -> u64 {
        let c = &self.cache[wheel_of(clock)];
        if c.get() == u64::MAX {
            c.set(self.src.now(clock));
        }
        c.get()
    }
}

/// A callback to run once the poll holds no lock.
type Call = (Callback, TimerId, i32);

/// What a callback timer's `ext[1]` points at: its closure and the name a checkpoint records.
struct CallbackCell {
    f: Callback,
    name: Option<Arc<str>>,
}

impl Timers {
    /// A service on the OS clocks with the default configuration.
    pub fn new() -> Timers {
        Builder::default()
            .build()
            .expect("the default configuration is valid")
    }

    /// A [`Builder`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A new owner: a namespace of timer IDs with its own event queue.
    pub fn owner(&self) -> Owner {
        let inner = Arc::new(OwnerShared {
            reg: self.core.registry.owner(),
            core: self.core.clone(),
            sink: Arc::new(Sink::default()),
        });
        let mut owners = self.core.owners();
        if owners.len() == owners.capacity() {
            owners.retain(|o| o.strong_count() > 0);
        }
        owners.push(Arc::downgrade(&inner.sink));
        drop(owners);
        if self.core.failure.get().is_some() {
            inner.sink.close(notify::CLOSED_SERVICE);
        }
        Owner { inner }
    }

    /// The current time on `clock`, from the service's clock source, in ns.
    pub fn now(&self, clock: ClockId) -> u64 {
        self.core.clock.now(clock)
    }

    /// The wheels' tick in nanoseconds.
    pub fn tick_nanos(&self) -> u64 {
        self.core.res.nanos()
    }

    /// Number of bases.
    pub fn bases(&self) -> usize {
        self.core.bases.len()
    }

    /// The registry under the service (for its statistics: timer count, table size).
    pub fn registry(&self) -> &Registry {
        &self.core.registry
    }

    /// Times a driver thread woke from sleep (each an OS wake-up), since build.
    pub fn driver_wakeups(&self) -> u64 {
        self.core.driver_wakeups.load(Ordering::Relaxed)
    }

    /// Number of background driver threads.
    pub fn drivers(&self) -> usize {
        self.core.bells.len()
    }

    /// Callbacks that panicked (each panic is caught; the poll goes on).
    pub fn callback_panics(&self) -> u64 {
        self.core.callback_panics.load(Ordering::Relaxed)
    }

    /// `Ok` while the service works; [`Error::Poisoned`] (naming what) once a panic inside one
    /// of its critical sections, or a driver thread that died, left part of it unusable. From
    /// then on arming calls fail with that error and receivers return it once their queues are
    /// empty; polls go on serving what is intact.
    pub fn health(&self) -> Result<(), Error> {
        match self.core.failure.get() {
            Some(&what) => Err(Error::Poisoned(what)),
            None => Ok(()),
        }
    }

    /// Fires every timer due by now (each clock read once, at the start): queues events, runs
    /// callbacks. Returns the number of expiries this call handled (events queued or refreshed,
    /// callbacks run).
    ///
    /// It is a barrier, also while drivers or other threads poll: when it returns, every timer
    /// due by its clock reading has expired, whoever popped it. Its event is queued (a
    /// `try_recv` after it finds it), and a settime or gettime after it sees the fired state.
    /// Callbacks that another poller fired may still be running on that poller's thread.
    ///
    /// Callbacks run on the calling thread with no tempora lock held. A panicking callback is
    /// caught and counted ([`Timers::callback_panics`]). A base poisoned by a panic inside
    /// tempora is skipped and reported by [`Timers::health`].
    pub fn poll(&self) -> usize {
        self.core.poll_now()
    }

    /// Tells the service that the realtime clock was set: drivers wake and re-evaluate
    /// absolute `CLOCK_REALTIME` timers at once (with drivers on the OS clocks this is
    /// detected by itself, through `timerfd`'s `TFD_TIMER_CANCEL_ON_SET`).
    pub fn clock_was_set(&self) {
        self.core.ring_all();
    }

    /// The monotonic time (ns, on the service's clock source) at which [`Timers::poll`] next
    /// fires a timer, or `None` if no timer is armed: each wheel's `next_fire`, so a loop that
    /// sleeps until it wakes once per expiry instant (it may be early after timers were
    /// cancelled, never late). Deadlines of realtime and boot-time timers are converted with
    /// the clocks' current offsets. May be in the past: poll at once. Takes each base's lock
    /// briefly.
    pub fn next_deadline(&self) -> Option<u64> {
        let core = &*self.core;
        let now = core.now_all();
        let best = core
            .bases
            .iter()
            // A poisoned base fires nothing again: it has no deadline.
            .filter_map(|base| base.locked(|st| driver::earliest_fire(core, st, &now)).ok())
            .min()
            .unwrap_or(NO_EXPIRY);
        (best != NO_EXPIRY).then_some(best)
    }

    /// Time from now until [`Timers::next_deadline`] (zero if it has passed), for a loop's
    /// `epoll_wait`/`poll` timeout; `None` if no timer is armed.
    pub fn next_timeout(&self) -> Option<Duration> {
        let at = self.next_deadline()?;
        let now = self.core.clock.now(ClockId::Monotonic);
        Some(Duration::from_nanos(at.saturating_sub(now)))
    }
}

impl Core {
    /// Marks the service failed for good (the first `what` is kept), wakes every receiver
    /// (they return the error once their queue is empty) and returns the error to report.
    #[cold]
    fn fail(&self, what: &'static str) -> Error {
        if self.failure.set(what).is_ok() {
            self.halt();
        }
        Error::Poisoned(self.failure.get().copied().unwrap_or(what))
    }

    /// The service stopped or failed: arming calls fail from now on, and every owner's queue
    /// is closed to waiting (`CLOSED_SERVICE`), since nothing will queue an event again.
    #[cold]
    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        for sink in self.owners().iter().filter_map(Weak::upgrade) {
            sink.close(notify::CLOSED_SERVICE);
        }
    }

    /// The owners' queues. A panic never happens under this mutex (a push, a prune), but it
    /// could only have left the list intact, so a poisoned one is used as it is.
    fn owners(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Sink>>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why arming must fail now: the service failed or stopped.
    #[inline]
    fn check(&self) -> Result<(), Error> {
        // Relaxed: one byte on the arming path; what it reports needs no ordering with the
        // caller's own accesses (an arm racing the stop is answered by `recv` instead).
        if self.halted.load(Ordering::Relaxed) {
            return Err(self.halted_why());
        }
        Ok(())
    }

    /// The error for a halted service: its failure, or its stop.
    #[cold]
    fn halted_why(&self) -> Error {
        match self.failure.get() {
            Some(&what) => Error::Poisoned(what),
            None => Error::ServiceStopped,
        }
    }

    /// Every clock, read once.
    fn now_all(&self) -> [u64; CLOCKS] {
        let src = &*self.clock;
        WHEEL_CLOCKS.map(|c| src.now(c))
    }

    fn poll_now(&self) -> usize {
        self.poll(self.now_all())
    }

    /// Rings every driver (a clock step, shutdown).
    fn ring_all(&self) {
        (0..self.bells.len()).for_each(|k| self.ring(k));
    }

    /// Rings the driver serving base `b`.
    #[cold]
    fn ring(&self, b: usize) {
        if !self.bells.is_empty() {
            self.rings.fetch_add(1, Ordering::Relaxed);
            self.bells[b % self.bells.len()].ring();
        }
    }

    /// The base of the calling thread.
    #[inline]
    fn my_base(&self) -> usize {
        thread_index() % self.bases.len()
    }

    /// Applies `itimer`'s decision to the timer's wheel entry (lock order: timer → base),
    /// arming it on the calling thread's base.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the base is (the service has then failed: `Core::fail`).
    #[inline]
    fn apply(&self, l: &mut Locked<'_>, arm: Arm) -> Result<(), Error> {
        self.apply_on(l, arm, self.my_base())
    }

    /// `apply`, arming on base `b` (a delivery re-arms on the base it popped the timer from:
    /// see "Delivery and the poll barrier" in `base.rs`).
    #[inline]
    fn apply_on(&self, l: &mut Locked<'_>, arm: Arm, b: usize) -> Result<(), Error> {
        let Arm::At { clock, expiry } = arm else {
            self.disarm(l);
            return Ok(());
        };
        let w = wheel_of(clock);
        let tick = self.res.ticks_ceil(expiry);
        if usize::from(l.state.wheel) == w + 1 && tick >= l.state.wheel_tick {
            // A re-arm to a later time (the timeout refresh): the entry stays where it is and
            // fires early, and the poll that finds the timer not yet due places it again
            // (`deliver`). One base-lock round trip per refresh saved, for at most one extra
            // visit per timeout period.
            return Ok(());
        }
        let slot = Slot(NonNull::from(l.timer));
        // Already in this base's wheel for the clock: move the entry (no slab traffic), or
        // insert it again if a poll has popped it meanwhile. Anywhere else: take it out there.
        let here = usize::from(l.state.wheel) == w + 1 && usize::from(l.state.base) == b;
        if !here {
            self.disarm(l);
        }
        let old = Key::from_bits(l.state.wheel_key);
        let placed = self.bases[b].locked_wheel(w, tick, |wheel| {
            if here && wheel.reschedule(old, tick).is_ok() {
                old
            } else {
                wheel.insert_with(tick, Mode::PRECISE, slot)
            }
        });
        let Ok((key, ring)) = placed else {
            // In no wheel: `wheel` stays 0 (a `here` entry is in a base nobody pops again).
            l.state.wheel = 0;
            return Err(self.fail(BASE_POISONED));
        };
        if ring {
            self.ring(b);
        }
        l.state.base = b as u16;
        l.state.wheel = w as u8 + 1;
        l.state.wheel_key = key.to_bits();
        l.state.wheel_tick = tick;
        Ok(())
    }

    /// Takes the timer out of the wheel it waits in, if any.
    #[inline]
    fn disarm(&self, l: &mut Locked<'_>) {
        if l.state.wheel == 0 {
            return;
        }
        let w = usize::from(l.state.wheel - 1);
        let key = Key::from_bits(l.state.wheel_key);
        // A stale key (a poll popped the entry and has not delivered it yet) is fine: that
        // poll will find `wheel == 0` and drop the entry. A poisoned base keeps the entry, but
        // nothing pops a poisoned base again, so its address is never followed.
        let base = &self.bases[usize::from(l.state.base)];
        if base
            .locked_wheel(w, NO_EXPIRY, |wheel| wheel.remove(key))
            .is_err()
        {
            self.fail(BASE_POISONED);
        }
        l.state.wheel = 0;
    }

    /// The delete hook: run under the timer's lock as it stops being visible. Returns the
    /// callback box so the caller drops it (and the user's closure) with no lock held.
    fn on_delete(&self, l: &mut Locked<'_>) -> Option<Box<CallbackCell>> {
        self.disarm(l);
        // Relaxed: under the timer's lock, which every reader of `ext[1]` holds.
        let cb = l.timer.hot.ext[1].swap(0, Ordering::Relaxed) as *mut CallbackCell;
        // SAFETY: `ext[1]` is 0 or a `Box<CallbackCell>` leaked at create
        // (`Owner::create_inner`), taken out exactly once, here, under the lock.
        (!cb.is_null()).then(|| unsafe { Box::from_raw(cb) })
    }

    fn poll(&self, now: [u64; CLOCKS]) -> usize {
        let ticks = now.map(|n| self.res.ticks_floor(n));
        let lazy = LazyNow::from(&*self.clock, now);
        let mut batch = Vec::with_capacity(self.batch);
        let mut calls = Vec::new();
        let mut fired = 0;
        let n = self.bases.len();
        let first = self.my_base();
        for i in 0..n {
            let b = (first + i) % n;
            let base = &self.bases[b];
            loop {
                // Held from the pop until the batch is delivered: the poll barrier (`base.rs`).
                let Ok(delivering) = base.delivery() else {
                    self.fail(BASE_POISONED);
                    break;
                };
                // Pinned from before the pop until the entries are delivered (module doc).
                let guard = crossbeam_epoch::pin();
                let popped = base.locked(|st| {
                    let mut complete = true;
                    for (w, wheel) in st.wheels.iter_mut().enumerate() {
                        if ticks[w] < wheel.now() {
                            // Only the realtime clock can step back: re-base its wheel so that
                            // nothing fires before the wall clock reaches it again.
                            wheel.rebase(ticks[w]);
                        }
                        let room = self.batch - batch.len();
                        if room == 0 {
                            complete = false;
                            break;
                        }
                        let adv = wheel.advance(ticks[w], room, |e| {
                            batch.push((w, e.key, e.value));
                        });
                        complete &= adv.complete;
                    }
                    complete
                });
                let Ok(complete) = popped else {
                    self.fail(BASE_POISONED);
                    break;
                };
                for &(w, key, slot) in &batch {
                    fired += self.deliver(b, w, key, slot, &lazy, &mut calls);
                }
                batch.clear();
                drop(guard);
                drop(delivering);
                self.run_calls(&mut calls);
                if complete {
                    break;
                }
            }
        }
        fired
    }

    /// Handles one entry popped from base `b`'s wheel `w`: 1 if it fired the timer.
    fn deliver(
        &self,
        b: usize,
        w: usize,
        key: Key,
        slot: Slot,
        now: &LazyNow<'_>,
        calls: &mut Vec<Call>,
    ) -> usize {
        // SAFETY: the entry was in the wheel when popped, after the caller pinned the epoch, so
        // the slot page is not recycled before the caller unpins (module doc); it holds a
        // `Timer` (slots are type-stable), whose identity is checked under its lock below.
        let timer: &Timer = unsafe { slot.0.as_ref() };
        let delivered = timer.lock_visible(|mut l| {
            let current = usize::from(l.state.wheel) == w + 1
                && usize::from(l.state.base) == b
                && l.state.wheel_key == key.to_bits();
            if !current {
                return false;
            }
            l.state.wheel = 0;
            let clock = WHEEL_CLOCKS[w];
            if now.get(clock) < l.state.expiry {
                // Never early. The entry was left in place by a re-arm to a later time (see
                // `apply`), or a clock source broke its contract: the timer waits for its time
                // again. It goes to tick `ceil(expiry / tick)`, which is after `floor(now /
                // tick)`, so this poll does not meet it again.
                let expiry = l.state.expiry;
                let _ = self.apply_on(&mut l, Arm::At { clock, expiry }, b);
                return false;
            }
            let Some(event) = l.expire() else {
                return false;
            };
            match l.timer.notify() {
                NotifyKind::Queue => enqueue(self, &mut l, event.seq()),
                NotifyKind::Callback => {
                    let now_fn = |c: ClockId| now.get(c);
                    if let Consumed::Deliver { overrun, rearm } = l.consume(event, &now_fn) {
                        // Its next period, on the base it came from (the poll barrier).
                        let _ = self.apply_on(&mut l, rearm, b);
                        // Relaxed: written at create; cleared only under this lock.
                        // SAFETY: under the timer's lock (`callback_of`'s contract).
                        if let Some(cell) = unsafe { callback_of(&l) } {
                            calls.push((cell.f.clone(), l.timer.id(), overrun));
                        }
                    }
                }
                NotifyKind::None => {}
            }
            true
        });
        match delivered {
            Ok(fired) => usize::from(fired == Some(true)),
            Err(Poisoned) => {
                self.fail(registry::TIMER_POISONED);
                0
            }
        }
    }

    fn run_calls(&self, calls: &mut Vec<Call>) {
        for (cb, id, overrun) in calls.drain(..) {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(id, overrun)));
            if r.is_err() {
                self.callback_panics.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Puts a locked `Queue` timer's one event on its owner's queue for the arming `seq`, or,
/// if the event is already queued, makes that entry this arming's (the kernel's "already
/// pending: nothing" for its preallocated sigqueue). A poisoned queue fails the service.
fn enqueue(core: &Core, l: &mut Locked<'_>, seq: u32) {
    l.state.sigqueue_seq = seq;
    if l.state.queued {
        return;
    }
    l.state.queued = true;
    // Relaxed: written at create, before the timer became visible.
    let sink = l.timer.hot.ext[0].load(Ordering::Relaxed) as *const Sink;
    // SAFETY: `ext[0]` of a Queue timer points at its owner's `Sink`, which lives until the
    // owner's teardown has marked every timer deleted under its lock; this timer is visible
    // and its lock is held.
    let pushed = unsafe { &*sink }.push(EventRef {
        timer: NonNull::from(l.timer),
        id: l.timer.id(),
        // Relaxed: written at create only.
        generation: l.timer.hot.generation.load(Ordering::Relaxed),
    });
    if pushed.is_err() {
        core.fail(QUEUE_POISONED);
    }
}

/// The callback cell of a locked callback timer, if any.
///
/// # Safety
/// `l` holds the timer's lock (which a `Locked` proves) and the returned reference is dropped
/// before the lock is: `ext[1]` is freed only under that lock (`Core::on_delete`).
unsafe fn callback_of<'l>(l: &'l Locked<'_>) -> Option<&'l CallbackCell> {
    // Relaxed: written at create; cleared only under this lock.
    let cb = l.timer.hot.ext[1].load(Ordering::Relaxed) as *const CallbackCell;
    // SAFETY: 0 or the timer's live `Box<CallbackCell>` (the function's contract).
    unsafe { cb.as_ref() }
}

/// An ID namespace of [`Timers`], with its event queue. Cloning shares it; it is deleted, with
/// all its timers, by [`Owner::destroy`] or when its last handle is dropped.
#[derive(Clone)]
pub struct Owner {
    inner: Arc<OwnerShared>,
}

struct OwnerShared {
    reg: registry::Owner,
    core: Arc<Core>,
    /// Shared with `Core::owners` (weakly); timers' `ext[0]` points at it.
    sink: Arc<Sink>,
}

impl Drop for OwnerShared {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl OwnerShared {
    fn teardown(&self) {
        let core = &*self.core;
        let mut callbacks = Vec::new();
        self.reg
            .destroy_with(|l| callbacks.extend(core.on_delete(l)));
        self.sink.close(notify::CLOSED_OWNER);
        drop(callbacks);
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owner")
            .field("registry_owner", &self.inner.reg)
            .field("queued", &self.inner.sink.len())
            .finish()
    }
}

impl Owner {
    /// Creates a disarmed timer on `clock` with the next free ID.
    ///
    /// # Errors
    /// [`Error::NoFreeId`] (`EAGAIN`) when every ID is in use; [`Error::OwnerDeleted`].
    #[doc(alias = "timer_create")]
    pub fn create(&self, clock: ClockId, notify: Notify) -> Result<TimerId, Error> {
        self.create_inner(None, clock, notify)
    }

    /// Creates a timer with exactly the ID `id` (restore mode, [`Owner::set_restore_ids`]).
    ///
    /// # Errors
    /// As [`crate::registry::Owner::create_with_id`].
    #[doc(alias = "timer_create")]
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn create_with_id(
        &self,
        id: i32,
        clock: ClockId,
        notify: Notify,
    ) -> Result<TimerId, Error> {
        self.create_inner(Some(id), clock, notify)
    }

    fn create_inner(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: Notify,
    ) -> Result<TimerId, Error> {
        self.create_inner_then(requested, clock, notify, None)
    }

    /// `create_inner`, then `then` on the new timer under its lock (no second lookup).
    fn create_inner_then(
        &self,
        requested: Option<i32>,
        clock: ClockId,
        notify: Notify,
        then: Option<&mut dyn FnMut(Locked<'_>)>,
    ) -> Result<TimerId, Error> {
        self.inner.core.check()?;
        if let Notify::NamedCallback(name, _) = &notify {
            if let Some(why) = checkpoint::callback_name_error(name) {
                return Err(Error::InvalidConfig(why));
            }
        }
        let kind = notify.kind();
        let cell = |f, name| Box::into_raw(Box::new(CallbackCell { f, name })) as usize;
        let cb = match notify {
            Notify::Callback(f) => cell(f, None),
            Notify::NamedCallback(name, f) => cell(f, Some(name)),
            _ => 0,
        };
        let sink = Arc::as_ptr(&self.inner.sink) as usize;
        let reg = &self.inner.reg;
        let r = match then {
            Some(then) => reg.create_ext_then(requested, clock, kind, [sink, cb], then),
            None => reg.create_ext(requested, clock, kind, [sink, cb]),
        };
        if r.is_err() && cb != 0 {
            // SAFETY: leaked just above and never published: the create failed, so no timer
            // holds it.
            drop(unsafe { Box::from_raw(cb as *mut CallbackCell) });
        }
        r
    }

    /// Arms or disarms timer `id` and returns its previous setting (computed as
    /// [`Owner::gettime`] would have just before). A zero `value` disarms (and zeroes the
    /// interval); otherwise the timer expires after `value` (or at `value` on its clock with
    /// [`SetFlags::ABSTIME`], at once if that has passed), then every `interval` if it is
    /// non-zero. Resets the overrun and voids an event still pending from the last arming.
    ///
    /// # Errors
    /// [`Error::InvalidTime`] (`EINVAL`) for negative seconds or nanoseconds outside
    /// `0..1e9`, checked before the lookup; [`Error::UnknownTimer`] (`EINVAL`);
    /// [`Error::OwnerDeleted`].
    #[doc(alias = "timer_settime")]
    pub fn settime(
        &self,
        id: TimerId,
        flags: SetFlags,
        value: impl Into<TimeSpec>,
        interval: impl Into<TimeSpec>,
    ) -> Result<ItimerSpec, Error> {
        let value = value.into().to_nanos()?;
        let interval = interval.into().to_nanos()?;
        let core = &*self.inner.core;
        core.check()?;
        let now = LazyNow::new(&*core.clock);
        let now_fn = |c: ClockId| now.get(c);
        let old = self.inner.reg.with_timer(id, |mut l| {
            let (old, arm) = l.settime(&now_fn, flags.is_abstime(), value, interval);
            core.apply(&mut l, arm).map(|()| old)
        })??;
        Ok(old.into())
    }

    /// Timer `id`'s remaining time and interval. Zero for a disarmed or fired one-shot timer;
    /// 1 ns for an armed timer that is due but not yet fired; a periodic timer whose event is
    /// pending reads the time to its next period, in `(0, interval]`.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`].
    #[doc(alias = "timer_gettime")]
    pub fn gettime(&self, id: TimerId) -> Result<ItimerSpec, Error> {
        let core = &*self.inner.core;
        let now = LazyNow::new(&*core.clock);
        let now_fn = |c: ClockId| now.get(c);
        let s = self.inner.reg.with_timer(id, |mut l| l.gettime(&now_fn))?;
        Ok(s.into())
    }

    /// The overrun latched when timer `id`'s last event was consumed: the periods it missed
    /// before that, capped at `i32::MAX`; 0 after create or settime and for one-shot timers.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`].
    #[doc(alias = "timer_getoverrun")]
    pub fn getoverrun(&self, id: TimerId) -> Result<i32, Error> {
        self.inner.reg.getoverrun(id)
    }

    /// Deletes timer `id`: it is disarmed, an event of it still queued is dropped unseen, its
    /// callback is released, and its ID becomes free.
    ///
    /// # Errors
    /// [`Error::UnknownTimer`] (`EINVAL`); [`Error::OwnerDeleted`].
    #[doc(alias = "timer_delete")]
    pub fn delete(&self, id: TimerId) -> Result<(), Error> {
        let core = &*self.inner.core;
        let mut cb = None;
        let r = self.inner.reg.delete_with(id, |l| cb = core.on_delete(l));
        drop(cb);
        r
    }

    /// The next event on the owner's queue, if one is pending. Consuming an event of a
    /// periodic timer re-arms it (on the calling thread's base) and latches its overrun.
    /// Events made stale by settime or delete are dropped here, never returned.
    pub fn try_recv(&self) -> Option<Event> {
        let core = &*self.inner.core;
        let now = LazyNow::new(&*core.clock);
        let now_fn = |c: ClockId| now.get(c);
        while let Ok(Some(ev)) = self.inner.sink.pop() {
            // SAFETY: queued events name slots of this owner's pages, which live as long as
            // the owner, and `self` holds it. `with_slot` checks the identity under the lock.
            let timer = unsafe { ev.timer.as_ref() };
            let got = self
                .inner
                .reg
                .with_slot(timer, ev.id, ev.generation, |mut l| {
                    if !l.state.queued {
                        return None;
                    }
                    l.state.queued = false;
                    let event = itimer::Event::with_seq(l.state.sigqueue_seq);
                    match l.consume(event, &now_fn) {
                        Consumed::Stale => None,
                        Consumed::Deliver { overrun, rearm } => {
                            // A failed re-arm (a poisoned base) is the service's failure,
                            // which receivers see; this event is still delivered.
                            let _ = core.apply(&mut l, rearm);
                            Some(overrun)
                        }
                    }
                });
            if let Ok(Some(Some(overrun))) = got {
                return Some(Event::new(ev.id, overrun));
            }
        }
        None
    }

    /// Waits for the next event. Something else must poll meanwhile (a background driver, or
    /// another thread calling [`Timers::poll`]).
    ///
    /// # Errors
    /// Once the queue is empty: [`Error::OwnerDeleted`] if the owner is destroyed,
    /// [`Error::ServiceStopped`] if its [`Timers`] service was dropped, [`Error::Poisoned`] if
    /// the service failed (see [`Timers::health`]). Never waits for an event that cannot come.
    pub fn recv(&self) -> Result<Event, Error> {
        loop {
            if let Some(e) = self.recv_until(None)? {
                return Ok(e);
            }
        }
    }

    /// Waits up to `timeout` (real time, whatever the clock source) for the next event;
    /// `Ok(None)` on timeout.
    ///
    /// # Errors
    /// As [`Owner::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Event>, Error> {
        // A timeout too long to represent waits without a deadline.
        self.recv_until(Instant::now().checked_add(timeout))
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<Option<Event>, Error> {
        loop {
            if let Some(e) = self.try_recv() {
                return Ok(Some(e));
            }
            let closed = self.inner.sink.closed();
            if closed & notify::CLOSED_OWNER != 0 {
                return Err(Error::OwnerDeleted);
            }
            if closed != 0 {
                return Err(self.inner.core.halted_why());
            }
            if self.inner.sink.is_poisoned() {
                return Err(Error::Poisoned(QUEUE_POISONED));
            }
            if !self.inner.sink.wait(deadline) {
                return Ok(self.try_recv());
            }
        }
    }

    /// The events pending now, without waiting.
    pub fn try_iter(&self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(|| self.try_recv())
    }

    /// Events as they come, waiting for each; ends when the owner is destroyed.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }

    /// Entries on the queue, including stale ones that a receive will drop.
    pub fn queued(&self) -> usize {
        self.inner.sink.len()
    }

    /// Turns exact-ID (restore) mode on or off.
    #[doc(alias = "PR_TIMER_CREATE_RESTORE_IDS")]
    pub fn set_restore_ids(&self, on: bool) {
        self.inner.reg.set_restore_ids(on);
    }

    /// Whether exact-ID (restore) mode is on.
    pub fn restore_ids(&self) -> bool {
        self.inner.reg.restore_ids()
    }

    /// The owner's timers (see [`crate::registry::Owner::timers`]).
    pub fn timers(&self) -> Vec<TimerInfo> {
        self.inner.reg.timers()
    }

    /// Deletes the owner and all its timers; receivers waiting on it return
    /// [`Error::OwnerDeleted`]. Idempotent.
    pub fn destroy(&self) {
        self.inner.teardown();
    }

    /// Whether the owner has been destroyed.
    pub fn is_destroyed(&self) -> bool {
        self.inner.reg.is_destroyed()
    }

    /// A snapshot of the owner's logical state (see [`crate::checkpoint`] for what it holds and
    /// the time rule). Taken timer by timer, each under its own lock, without stopping anyone:
    /// checkpoint a quiescent owner to get one instant's state. It works after the owner's
    /// service was dropped too (stop the service, then checkpoint its owners).
    ///
    /// # Panics
    /// If a timer's lock was poisoned by a panic inside tempora ([`Error::Poisoned`]): its
    /// state cannot be read, and a snapshot without it would restore something else.
    pub fn checkpoint(&self) -> Snapshot {
        let core = &*self.inner.core;
        let now = core.now_all();
        let mut timers = Vec::new();
        let walked = self.inner.reg.for_each_locked(|l| {
            let st = &*l.state;
            let t = l.timer;
            let kind = t.notify();
            // SAFETY: `l` holds the lock for the whole closure.
            let name = match (kind, unsafe { callback_of(&l) }) {
                (NotifyKind::None, _) => checkpoint::NOTIFY_NONE,
                (NotifyKind::Queue, _) => checkpoint::NOTIFY_QUEUE,
                (NotifyKind::Callback, Some(CallbackCell { name: Some(n), .. })) => n,
                (NotifyKind::Callback, _) => "callback",
            };
            let status = t.status();
            let expiry_clock = l.expiry_clock();
            // A disarmed timer's stored expiry only matters to a SIGEV_NONE timer, whose status
            // is Disarmed while it counts down too; disarming one clears its expiry.
            let expiry = if status == Status::Disarmed && kind != NotifyKind::None
                || (st.expiry == 0 && st.interval == 0 && status == Status::Disarmed)
            {
                Expiry::None
            } else if expiry_clock == ClockId::Realtime {
                Expiry::Realtime(st.expiry.min(i64::MAX as u64) as i64)
            } else {
                let left = i128::from(st.expiry) - i128::from(now[wheel_of(expiry_clock)]);
                Expiry::Remaining {
                    clock: expiry_clock,
                    ns: left.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
                }
            };
            timers.push(TimerRecord {
                id: t.id(),
                clock: t.clock(),
                notify: name.to_string(),
                status,
                pending: kind == NotifyKind::Queue && st.queued && st.sigqueue_seq == st.signal_seq,
                expiry,
                interval: st.interval.min(i64::MAX as u64) as i64,
                overrun: st.overrun.max(-1),
                overrun_last: t.written.overrun_last.load(Ordering::Relaxed),
            });
        });
        if let Err(e) = walked {
            panic!("tempora: cannot checkpoint the owner: {e}");
        }
        timers.sort_by_key(|t| t.id);
        Snapshot {
            counter: self.inner.reg.counter(),
            restore_ids: self.restore_ids(),
            timers,
        }
    }

    /// Recreates `snapshot` in this owner, which must have no timers: the same IDs (through
    /// exact-ID mode), clocks, settings, overruns and pending events, the ID counter and the
    /// exact-ID mode; wheel placement is rebuilt. `notify` maps the snapshot's notification
    /// names other than `none` and `queue` (see [`crate::checkpoint`]).
    ///
    /// All or nothing: everything is checked first, and if a create still fails the timers
    /// made so far are deleted and the counter and mode put back.
    ///
    /// # Errors
    /// [`Error::UnknownNotify`] for a name `notify` does not map;
    /// [`Error::CorruptSnapshot`] for a snapshot [`Snapshot::validate`] refuses (duplicate IDs,
    /// a negative interval, ...); [`Error::IdInUse`] if the owner has
    /// timers; otherwise the error of the create that failed (nothing is kept).
    pub fn restore(
        &self,
        snapshot: &Snapshot,
        notify: impl Fn(&str) -> Option<Notify>,
    ) -> Result<(), Error> {
        if !self.timers().is_empty() {
            return Err(Error::IdInUse);
        }
        snapshot.validate()?;
        let mut plan = Vec::with_capacity(snapshot.timers.len());
        for rec in &snapshot.timers {
            let n = match rec.notify.as_str() {
                checkpoint::NOTIFY_NONE => Notify::None,
                checkpoint::NOTIFY_QUEUE => Notify::Queue,
                name => notify(name).ok_or_else(|| Error::UnknownNotify(name.into()))?,
            };
            plan.push((rec, n));
        }
        let (counter, mode) = (self.inner.reg.counter(), self.restore_ids());
        self.set_restore_ids(true);
        let core = &*self.inner.core;
        let now = core.now_all();
        let mut made = Vec::with_capacity(plan.len());
        for (rec, n) in plan {
            let mut set = |mut l: Locked<'_>| restore_state(core, &mut l, rec, &now);
            let created = self.create_inner_then(Some(rec.id.get()), rec.clock, n, Some(&mut set));
            match created {
                Ok(_) => made.push(rec.id),
                Err(e) => {
                    for &id in &made {
                        let _ = self.delete(id);
                    }
                    self.inner.reg.set_counter(counter);
                    self.set_restore_ids(mode);
                    return Err(e);
                }
            }
        }
        self.inner.reg.set_counter(snapshot.counter);
        self.set_restore_ids(snapshot.restore_ids);
        Ok(())
    }
}

/// Puts a restored timer's state back (under its lock, just created).
fn restore_state(core: &Core, l: &mut Locked<'_>, rec: &TimerRecord, now: &[u64; CLOCKS]) {
    let (clock, expiry) = match rec.expiry {
        Expiry::None => (rec.clock, 0),
        Expiry::Remaining { clock, ns } => {
            let at = i128::from(now[wheel_of(clock)]) + i128::from(ns);
            (clock, at.clamp(0, i128::from(u64::MAX)) as u64)
        }
        Expiry::Realtime(ns) => (ClockId::Realtime, ns as u64),
    };
    l.state.expiry_clock = clock as u8;
    l.state.expiry = expiry;
    l.state.interval = rec.interval as u64;
    l.state.overrun = rec.overrun;
    l.set_overrun_last(rec.overrun_last);
    l.set_status(rec.status);
    if rec.pending && l.timer.notify() == NotifyKind::Queue {
        let seq = l.state.signal_seq;
        enqueue(core, l, seq);
    }
    if rec.status == Status::Armed && l.timer.notify() != NotifyKind::None {
        let _ = core.apply(l, Arm::At { clock, expiry });
    }
}
