//! The service's shared state, [`Core`]: what every owner, driver and sleep of one service
//! holds (through an `Arc`).
//!
//! This room is `Core` and its parts, each in its own file: the bases (`base.rs`) and the
//! registry they serve; wake-ups (`wake.rs`: the drivers' alarms, the deadline fd); the
//! drivers' crews (`crew.rs`: each driver's threads, the callbacks not run yet); health
//! (`health.rs`: stop, failure, the owners' queues to close); the looks signal timers share
//! (`lookout.rs`). Nothing in those files imports `Core`, so the parts stay below the code
//! that drives them.
//!
//! Its part of `impl Core`'s work: reading the clocks (this file), arming (`arm.rs`: where an
//! entry goes, placing and removing timers and sleeps), and the registry's contract
//! (`contract.rs`: the delete hook that disarms a deleted timer). The rest of `impl Core` is
//! the rooms above: signal timers' expiries and calls (`signals/`), polling and delivery
//! (`firing/poll.rs`).

use self::base::Base;
use self::crew::Crew;
use self::health::Health;
use self::lookout::Lookouts;
use self::wake::{Refresh, Wakeups};
use crate::clock::{ClockSource, Resolution, ALL_CLOCKS, CLOCKS};
use crate::registry::Registry;
use crate::stats::tally::Hub;
use crate::timers::object::serial::Call;
use crate::timers::object::signal::SignalPort;
use crate::timers::object::Itimer;

pub(crate) mod arm;
pub(crate) mod base;
pub(crate) mod contract;
pub(crate) mod crew;
pub(crate) mod health;
pub(crate) mod lookout;
pub(crate) mod wake;
#[cfg(test)]
use crate::sync::AtomicBool;
use crate::sync::{rank, AtomicU64, RankedMutex};
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use strength_reduce::StrengthReducedUsize;

pub(crate) struct Core {
    pub(crate) registry: Registry<Itimer>,
    pub(crate) clock: Arc<dyn ClockSource>,
    /// `clock` is [`crate::clock::OsClock`] itself: the calls read `clock_gettime` directly
    /// ([`Core::lazy_now`]), without a virtual call per reading.
    pub(crate) os_clock: bool,
    pub(crate) res: Resolution,
    /// `Builder::batch`: the most entries a poll pops from a base before delivering them.
    pub(crate) batch: usize,
    pub(crate) bases: Box<[CachePadded<Base>]>,
    /// `bases.len()` as a multiply-and-shift divisor: the calling thread's base is picked on
    /// every arm.
    pub(crate) base_count: StrengthReducedUsize,
    /// `Builder::max_deferral`, in ns: how long after its expiry a deferrable timer may wait.
    pub(crate) max_deferral: u64,
    /// How far each of the clock source's coarse clocks may lag (`ClockSource::coarse_lag`,
    /// by clock index). A slack timer arms from them when its slack is at least twice the
    /// monotonic one's, and a placement of an expiry from a coarse reading keeps its clock's
    /// lag out of the slack.
    pub(crate) coarse_lags: [u64; CLOCKS],
    /// The drivers' alarms, or the deadline fd (`wake.rs`).
    pub(crate) wake: Wakeups,
    /// Stop, failure, and the owners' queues a halt closes (`health.rs`).
    pub(crate) health: Health,
    /// The drivers and their spares (`driver.rs`).
    pub(crate) drivers: DriverCounts,
    pub(crate) callback_panics: AtomicU64,
    /// Statistics: updated lists, flush, the group tree (`stats/`).
    pub(crate) stats: Arc<Hub>,
    /// Where signal timers' signals go (`signal.rs`): the OS, or a test's port.
    pub(crate) signals: Arc<dyn SignalPort>,
    /// The looks signal timers share (`lookout.rs`).
    pub(crate) lookouts: Lookouts,
    /// Test hook: the next driver loop iteration panics (a driver dying outside a callback).
    #[cfg(test)]
    pub(crate) crash_driver: AtomicBool,
    /// What a service without drivers looks at after its polls: its inspection endpoint
    /// (`inspect/polled.rs`), if it has one.
    pub(crate) look: Option<PollLook>,
}

/// Something a service's polls serve beside its timers, when its time has come: all a poll
/// pays for it otherwise is one comparison with the clock reading it took anyway.
pub(crate) struct PollLook {
    /// The monotonic time (ns) from which on a poll calls `with`.
    pub(crate) next: AtomicU64,
    pub(crate) with: Box<dyn AtPoll>,
}

/// What [`PollLook`] calls.
pub(crate) trait AtPoll: Send + Sync {
    /// Does its work, without blocking, at monotonic time `now`; the time of the next call,
    /// or `None` to leave it as it is (another poll is at work).
    fn at_poll(&self, core: &Core, now: u64) -> Option<u64>;
}

/// What the drivers count, and the spares they started.
pub(crate) struct DriverCounts {
    /// One per driver: its threads and the callbacks not run yet (`crew.rs`).
    pub(crate) crews: Box<[Crew<Call>]>,
    pub(crate) wakeups: AtomicU64,
    /// `Builder::spare_drivers`: spares each driver may start.
    #[cfg_attr(loom, allow(dead_code))] // spares are not modelled
    pub(crate) spare_limit: usize,
    /// The spares' threads, joined when the service stops.
    pub(crate) spares: RankedMutex<Vec<std::thread::JoinHandle<()>>, { rank::SPARES }>,
    /// Times a receiver waiting in `Owner::recv` fired what was due in the driver's place
    /// (`driver.rs`, `wait_leading`).
    pub(crate) receiver_polls: AtomicU64,
    /// Times a thread of a crew woke while another ran a callback.
    pub(crate) takeovers: AtomicU64,
}

impl Core {
    /// A lazy reading of the service's clocks, for one call.
    #[inline]
    pub(crate) fn lazy_now(&self) -> crate::clock::LazyNow<'_> {
        crate::clock::LazyNow::of(&*self.clock, self.os_clock)
    }

    /// Every clock, read once.
    pub(crate) fn now_all(&self) -> [u64; CLOCKS] {
        let src = &*self.clock;
        ALL_CLOCKS.map(|c| src.now(c))
    }

    /// Re-arms the deadline fd, if there is one, at the earliest firing of all bases
    /// (`Wakeups::refresh_deadline`).
    pub(crate) fn refresh_deadline(&self) {
        if let Some(d) = self.wake.deadline.get() {
            let now = self.now_all();
            d.refresh(
                self.bases.iter(),
                self.res,
                self.max_deferral,
                &now,
                Refresh {
                    rearm_past: true,
                    ..Refresh::default()
                },
            );
        }
    }
}
