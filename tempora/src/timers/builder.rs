//! Building a [`Timers`] service ([`Builder`]) and starting and stopping its driver threads.

use crate::clock::{duration_nanos, ClockSource, OsClock, Resolution, ALL_CLOCKS};
use crate::error::Error;
use crate::registry;
use crate::stats::tally::Hub;
#[cfg(test)]
use crate::sync::AtomicBool;
use crate::sync::{AtomicU64, RankedMutex};
use crate::timers::firing::driver::Drivers;
use crate::timers::object::signal::{OsSignals, SignalPort};
use crate::timers::object::Itimer;
use crate::timers::service::Timers;
use crate::timers::shared::base::Base;
use crate::timers::shared::crew::Crew;
use crate::timers::shared::health::Health;
use crate::timers::shared::lookout::Lookouts;
use crate::timers::shared::wake::{Alarm, Wakeups};
use crate::timers::shared::{Core, DriverCounts};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use strength_reduce::StrengthReducedUsize;

/// `Builder::max_deferral`'s default.
const DEFAULT_MAX_DEFERRAL: Duration = Duration::from_secs(1);
/// `Builder::spare_drivers`' default: why 64 is in the `driver` module doc, "Callbacks that
/// block". `tempora-capi`'s `tempora_config` documents it (-1 is this default).
const DEFAULT_SPARE_DRIVERS: usize = 64;

/// Configures [`Timers`].
#[derive(Clone)]
pub struct Builder {
    bases: Option<usize>,
    drivers: Option<usize>,
    tick: Duration,
    batch: usize,
    clock: Arc<dyn ClockSource>,
    /// `clock` is [`OsClock`] itself (`Core::os_clock`).
    os_clock: bool,
    registry: registry::Builder,
    stats: bool,
    max_deferral: Duration,
    spare_drivers: usize,
    signals: Arc<dyn SignalPort>,
    inspect: bool,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("bases", &self.bases)
            .field("drivers", &self.drivers)
            .field("tick", &self.tick)
            .field("batch", &self.batch)
            .field("registry", &self.registry)
            .field("stats", &self.stats)
            .field("max_deferral", &self.max_deferral)
            .field("spare_drivers", &self.spare_drivers)
            .field("inspect", &self.inspect)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            bases: None,
            drivers: None,
            tick: Duration::from_micros(1),
            batch: 64,
            max_deferral: DEFAULT_MAX_DEFERRAL,
            spare_drivers: DEFAULT_SPARE_DRIVERS,
            clock: Arc::new(OsClock),
            os_clock: true,
            registry: registry::Builder::default(),
            stats: true,
            signals: Arc::new(OsSignals),
            inspect: true,
        }
    }
}

impl Builder {
    /// The longest tick [`Builder::tick`] takes (1 s): a timer may fire up to a tick after its
    /// expiry, so a longer tick is a misconfiguration (a 1 h tick left a 10 ms timer unfired
    /// for the hour).
    pub const MAX_TICK: Duration = Duration::from_secs(1);

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
    /// its expiry, never before. 1 ns ..= [`Builder::MAX_TICK`] (1 s): the tick bounds every timer's
    /// lateness, so [`Builder::build`] refuses a longer one.
    pub fn tick(&mut self, tick: Duration) -> &mut Self {
        self.tick = tick;
        self
    }

    /// How long after its expiry a
    /// [`Precision::Deferrable`](crate::timers::object::types::Precision::Deferrable) timer may
    /// wait for a driver that is awake anyway (default 1 s). A driver with only deferrable timers
    /// due sleeps until the earliest of them plus this, so it wakes for them at most once per
    /// `max_deferral`; [`Duration::MAX`] lets them wait for as long as no other timer wakes a
    /// driver (the kernel's rule).
    pub fn max_deferral(&mut self, d: Duration) -> &mut Self {
        self.max_deferral = d;
        self
    }

    /// The most spare threads per driver (default 64; 0: none), started on demand: a driver's
    /// thread runs a callback only while another of its threads waits on the driver's alarm,
    /// which wakes that one at the next expiry (or an arm earlier than it) if the callback
    /// still runs, and a thread inside a callback polls nothing meanwhile. So a
    /// callback that blocks delays no queue, none or signal timer, whatever the number
    /// blocked; with `n` of one driver's callbacks blocked at once (its `n + 1` threads, one
    /// polling), other callbacks wait for the first of them to return (never the timers of
    /// other kinds). Spares wait on the driver's alarm; one idle for 1 s while another waits too
    /// retires, so that each driver keeps one spare standing by once a burst is over. 0: the
    /// driver runs callbacks itself with nobody standing by, and one
    /// that blocks stops every timer it serves. See the `driver` module doc, "Callbacks that
    /// block".
    pub fn spare_drivers(&mut self, n: usize) -> &mut Self {
        self.spare_drivers = n;
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
        self.os_clock = std::any::TypeId::of::<C>() == std::any::TypeId::of::<OsClock>();
        self.clock = Arc::new(clock);
        self
    }

    /// Where signal timers' signals go: a test's port instead of the OS (`testing.rs`).
    #[cfg(test)]
    pub(crate) fn signal_port(&mut self, port: Arc<dyn SignalPort>) -> &mut Self {
        self.signals = port;
        self
    }

    /// Timer IDs are `0 .. 2^bits` (1 ..= 31; default 31, Linux's whole `timer_t` range). A
    /// small limit makes ID exhaustion testable.
    pub fn id_bits(&mut self, bits: u32) -> &mut Self {
        self.registry.id_bits = bits;
        self
    }

    /// Initial bucket count of the timer-ID hash table, a power of two in 16 ..= 2^40
    /// (default `roundup_pow_of_two(512 * CPUs)`, as Linux sizes its table).
    pub fn initial_buckets(&mut self, buckets: usize) -> &mut Self {
        self.registry.initial_buckets = Some(buckets);
        self
    }

    /// The ID table doubles when it holds more than `load` timers per bucket (1 ..= 64;
    /// default 2).
    pub fn max_load(&mut self, load: usize) -> &mut Self {
        self.registry.max_load = load;
        self
    }

    /// ID shards per owner, a power of two at most 2^15 (default 64). Threads share an
    /// owner's shard only when more than this many create in the owner at once; a shard (128
    /// bytes) is allocated when a thread first creates in the owner.
    pub fn shards(&mut self, shards: usize) -> &mut Self {
        self.registry.shards = Some(shards);
        self
    }

    /// Whether the service keeps statistics ([`crate::stats`]; default on). Off, every
    /// counter update is one predictable branch and [`Timers::stats`](crate::timers::Timers::stats)
    /// reads zeros; group limits work either way.
    pub fn stats(&mut self, on: bool) -> &mut Self {
        self.stats = on;
        self
    }

    /// Whether the service answers `tempora ls`, `tempora stats` and `tempora top --pid`
    /// from outside the process (default on; the environment's `TEMPORA_INSPECT=0` turns it
    /// off too). What it exposes, to whom, and what it costs: the
    /// [`inspect`](crate::timers::inspect) module. Only a service with driver threads on the OS
    /// clocks has an endpoint.
    pub fn inspect(&mut self, on: bool) -> &mut Self {
        self.inspect = on;
        self
    }

    /// Builds the service.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero bases, more than 65 536 bases, a zero tick or one
    /// above [`Builder::MAX_TICK`], a zero batch, or an ID table setting out of its range (`id_bits`, `initial_buckets`,
    /// `max_load`, `shards`); [`Error::Io`] if the OS refuses a driver thread, or a
    /// driver's timerfd or `epoll` instance; [`Error::OutOfMemory`] if the ID table's first
    /// buckets (32 bytes each, [`Builder::initial_buckets`] of them) cannot be allocated.
    pub fn build(&self) -> Result<Timers, Error> {
        let bases = self.bases.unwrap_or_else(crate::sync::cpus);
        if bases == 0 || bases > 1 << 16 {
            return Err(Error::InvalidConfig("bases must be in 1..=65536"));
        }
        let drivers = self.drivers.unwrap_or(usize::from(self.clock.is_os_time()));
        if drivers > bases {
            return Err(Error::InvalidConfig("more drivers than bases"));
        }
        if self.batch == 0 {
            return Err(Error::InvalidConfig("the batch must be at least 1"));
        }
        if self.tick > Builder::MAX_TICK {
            return Err(Error::InvalidConfig("the tick must be at most 1 s"));
        }
        let tick = u64::try_from(self.tick.as_nanos())
            .map_err(|_| Error::InvalidConfig("the tick must be at most 1 s"))?;
        let res = Resolution::new(tick)?;
        let registry = self.registry.build::<Itimer>()?;
        let start = ALL_CLOCKS.map(|c| res.ticks_floor(self.clock.now(c)));
        // Whether the service opens an inspection endpoint (`inspect/`): on the OS clocks,
        // unless turned off.
        #[cfg(not(loom))]
        let inspect = self.inspect
            && self.clock.is_os_time()
            && !crate::timers::inspect::endpoint::off_by_env();
        let core = Arc::new(Core {
            registry,
            clock: self.clock.clone(),
            os_clock: self.os_clock,
            res,
            batch: self.batch,
            bases: (0..bases)
                .map(|_| CachePadded::new(Base::new(start, self.os_clock)))
                .collect(),
            callback_panics: AtomicU64::new(0),
            base_count: StrengthReducedUsize::new(bases),
            wake: Wakeups::new(
                (0..drivers)
                    .map(|_| Alarm::new(true, self.clock.is_os_time()).map(CachePadded::new))
                    .collect::<Result<_, _>>()?,
            ),
            health: Health::new(),
            drivers: DriverCounts {
                crews: (0..drivers).map(|_| Crew::default()).collect(),
                receiver_polls: AtomicU64::new(0),
                wakeups: AtomicU64::new(0),
                spare_limit: self.spare_drivers,
                spares: RankedMutex::new(Vec::new()),
                takeovers: AtomicU64::new(0),
            },
            stats: Hub::new(self.stats),
            signals: self.signals.clone(),
            lookouts: Lookouts::default(),
            max_deferral: duration_nanos(self.max_deferral),
            coarse_lags: crate::clock::ALL_CLOCKS.map(|c| self.clock.coarse_lag(c)),
            #[cfg(test)]
            crash_driver: AtomicBool::new(false),
            // A service without drivers serves its endpoint at its polls.
            #[cfg(not(loom))]
            look: (drivers == 0 && inspect)
                .then(crate::timers::inspect::polled::Polled::open)
                .flatten()
                .map(|p| crate::timers::shared::PollLook {
                    next: crate::sync::AtomicU64::new(0),
                    with: Box::new(p),
                }),
            #[cfg(loom)]
            look: None,
        });
        #[cfg(not(loom))]
        let drivers = {
            let serve = (inspect && drivers > 0)
                .then(|| crate::timers::inspect::endpoint::Endpoint::open(drivers))
                .flatten()
                .map(|e| Box::new(e) as Box<dyn crate::timers::firing::driver::Serve>);
            Drivers::start(&core, serve)?
        };
        #[cfg(loom)]
        let drivers = Drivers::start(&core)?;
        Ok(Timers {
            core,
            drivers: Arc::new(drivers),
        })
    }
}

impl Default for Timers {
    /// [`Timers::new`], which panics if the service cannot start.
    fn default() -> Self {
        Timers::new()
    }
}

impl Timers {
    /// A service on the OS clocks with the default configuration.
    ///
    /// # Panics
    /// If the service cannot start: the default configuration always validates, but building
    /// asks the OS for a driver thread (and a thread to watch the wall clock) and for each
    /// driver's timerfd and `epoll` instance, which it may refuse (a thread or fd limit reached). The panic
    /// message says so, with the error and its OS text ("tempora: Timers::new could not start
    /// the service: I/O error: ..."). [`Timers::builder`]`().build()` is the fallible form.
    pub fn new() -> Timers {
        Builder::default()
            .build()
            .unwrap_or_else(|err| panic!("{}", start_failure(&err)))
    }

    /// A [`Builder`].
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// `Timers::new`'s panic message for `err`: what failed, the error, and its source's text
/// (an OS error's is not in the error's own `Display`).
fn start_failure(err: &Error) -> String {
    match std::error::Error::source(err) {
        Some(source) => {
            format!("tempora: Timers::new could not start the service: {err}: {source}")
        }
        None => format!("tempora: Timers::new could not start the service: {err}"),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn new_panics_saying_what_failed_with_the_os_text() {
        let os = std::io::Error::from_raw_os_error(libc::EAGAIN);
        let text = os.to_string();
        let msg = start_failure(&Error::from(os));
        assert!(
            msg.starts_with("tempora: Timers::new could not start the service: I/O error: "),
            "{msg}"
        );
        assert!(msg.ends_with(&text), "{msg}");
        let msg = start_failure(&Error::InvalidConfig("the batch must be at least 1"));
        assert!(
            msg.ends_with("the batch must be at least 1 (EINVAL)"),
            "{msg}"
        );
    }
}
