//! Statistics: per-owner counters and lateness, summed over groups of owners, read without
//! stalling the threads that arm and fire timers.
//!
//! Owners are the analogue of processes and groups of cgroups: [`Timers::group`] makes a
//! group, [`Group::subgroup`] nests one, [`Group::owner`] makes an owner inside it, and
//! [`Group::set_max_timers`] caps the timers living in a group's subtree (a create beyond it
//! fails with [`Error::LimitReached`], `EAGAIN`).
//!
//! Reading ([`Timers::stats`], [`Owner::stats`], [`Group::stats`]) flushes first: every
//! update made before the read began is in what it returns. The flush follows one rule:
//! an updater never waits behind a flush. Updates are counted per thread, a thread's first update
//! of an owner since the last flush puts the owner's slot on that thread's updated list, and a
//! flush detaches each list and aggregates with no lock held. The lists are lockless (a push
//! is a compare-exchange, a detach one swap), so a reader never makes an updater wait
//! (`tally.rs` argues why no update is lost). A build with `Builder::stats(false)` counts nothing.
//!
//! What is counted, per owner (a group's figures are the sums over its subtree, owners that
//! were deleted included):
//!
//! | field | counts |
//! |---|---|
//! | `live` | timers that exist: `created − deleted` |
//! | `created`, `deleted` | creates (restores included) and deletes (an owner's teardown included) |
//! | `armed`, `disarmed` | `settime` calls with a non-zero value, and with a zero one |
//! | `expired` | expirations: a timer coming due and firing (a periodic one once per delivery of its event, however many periods it missed); a `Notify::None` timer never fires (as Linux, tempora does not place one in a wheel: `gettime` reads its expiry) |
//! | `delivered` | events handed to the application: received from the queue, or passed to a callback |
//! | `overruns` | the sum of the overruns delivered with those events |
//! | `stale_dropped` | queued events found stale (settime or delete made them void) and dropped at receive |
//! | `callback_panics` | callbacks that panicked (the panic is caught; the timer stays) |
//! | `refused` | creates refused by a group's `max_timers` |
//!
//! `lateness`: for each expiration, the time from the timer's expiry to its firing, in a
//! log-linear histogram (within 12.5%, never below the truth; `hist.rs`), as p50, p99, p99.9
//! and the exact maximum.
//!
//! # The snapshot types
//!
//! [`Stats`], [`GroupStats`], [`OwnerStats`], [`BaseStats`], [`DriverStats`], [`RegistryStats`],
//! [`Counts`] and [`Lateness`] are
//! plain data: read their fields. They are `#[non_exhaustive]`, so that a field can be added
//! without breaking a user: outside this crate one is built from `Default`, then field by field
//! (to test an exporter of your own, say):
//!
//! ```
//! use tempora::stats::{Counts, OwnerStats};
//!
//! let mut owner = OwnerStats::default();
//! owner.owner = 7;
//! owner.counts = Counts::default();
//! owner.counts.created = 3;
//! assert_eq!(owner.counts.created, 3);
//! ```
//!
//! With the crate's `serde` feature (off by default) they implement `serde::Serialize`, and
//! `Stats::to_json` writes the tree as JSON; [`Stats::to_prometheus`] needs no feature.
//!
//! [`Timers::stats`]: crate::Timers::stats
//! [`Timers::group`]: crate::Timers::group
//! [`Owner::stats`]: crate::Owner::stats
//! [`Group::stats`]: crate::timers::Group::stats
//! [`Group::subgroup`]: crate::timers::Group::subgroup
//! [`Group::owner`]: crate::timers::Group::owner
//! [`Group::set_max_timers`]: crate::timers::Group::set_max_timers
//! [`Error::LimitReached`]: crate::Error::LimitReached

mod export;
pub(crate) mod group;
pub(crate) mod hist;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod tally;
pub(crate) mod totals;

use group::GroupNode;
use hist::Buckets;
use std::collections::HashMap;
use std::sync::Arc;
use tally::Tally;
pub(crate) use totals::Counter;
use totals::Totals;

/// An owner's counts, or their sums over a group's subtree (the table in [`crate::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counts {
    /// Timers that exist: `created − deleted`.
    pub live: u64,
    /// Creates, restores included.
    pub created: u64,
    /// Deletes, an owner's teardown included.
    pub deleted: u64,
    /// `settime` calls with a non-zero value.
    pub armed: u64,
    /// `settime` calls with a zero value.
    pub disarmed: u64,
    /// Expirations (a timer coming due and firing).
    pub expired: u64,
    /// Events handed to the application (received, or passed to a callback).
    pub delivered: u64,
    /// The sum of the overruns delivered with those events.
    pub overruns: u64,
    /// Stale queued events dropped at receive.
    pub stale_dropped: u64,
    /// Callbacks that panicked.
    pub callback_panics: u64,
    /// Creates refused by a group's `max_timers`.
    pub refused: u64,
}

impl Counts {
    fn of(t: &Totals) -> Counts {
        let c = |k: Counter| t.counts[k as usize];
        Counts {
            live: c(Counter::Created).saturating_sub(c(Counter::Deleted)),
            created: c(Counter::Created),
            deleted: c(Counter::Deleted),
            armed: c(Counter::Armed),
            disarmed: c(Counter::Disarmed),
            expired: c(Counter::Expired),
            delivered: c(Counter::Delivered),
            overruns: c(Counter::Overruns),
            stale_dropped: c(Counter::StaleDropped),
            callback_panics: c(Counter::CallbackPanics),
            refused: c(Counter::Refused),
        }
    }
}

/// Lateness of expirations: expiry to firing, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Lateness {
    /// Expirations measured.
    pub count: u64,
    /// Their sum.
    pub sum_ns: u64,
    /// The median (a bucket's top: within 12.5% above the truth).
    pub p50_ns: u64,
    /// The 99th percentile (as `p50_ns`).
    pub p99_ns: u64,
    /// The 99.9th percentile (as `p50_ns`).
    pub p999_ns: u64,
    /// The exact maximum.
    pub max_ns: u64,
}

impl Lateness {
    fn of(b: &Buckets) -> Lateness {
        Lateness {
            count: b.total(),
            sum_ns: b.sum(),
            p50_ns: b.quantile(0.5),
            p99_ns: b.quantile(0.99),
            p999_ns: b.quantile(0.999),
            max_ns: b.max(),
        }
    }
}

/// One owner's statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct OwnerStats {
    /// The owner's ID ([`Owner::id`](crate::Owner::id)).
    pub owner: u64,
    /// Its counts.
    pub counts: Counts,
    /// Its lateness.
    pub lateness: Lateness,
}

impl OwnerStats {
    pub(crate) fn of(t: &Tally) -> OwnerStats {
        let totals = t.totals();
        OwnerStats {
            owner: t.key(),
            counts: Counts::of(&totals),
            lateness: Lateness::of(&totals.late),
        }
    }
}

/// A group's statistics: sums over its subtree, and its members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GroupStats {
    /// The group's name ("" for the root: the whole service).
    pub name: String,
    /// The names from below the root, joined by `/` ("" for the root).
    pub path: String,
    /// Its limit ([`Group::set_max_timers`](crate::timers::Group::set_max_timers)).
    pub max_timers: Option<u64>,
    /// Sums over the subtree, deleted owners included.
    pub counts: Counts,
    /// Its lateness.
    pub lateness: Lateness,
    /// Subgroups, in creation order.
    pub groups: Vec<GroupStats>,
    /// Live owners directly in this group, by ID.
    pub owners: Vec<OwnerStats>,
}

/// The live owners of each group, keyed by the group's address.
type Members = HashMap<*const GroupNode, Vec<Arc<Tally>>>;

impl GroupStats {
    /// Group `g`'s statistics and subtree, with the members `hub` lists.
    pub(crate) fn of(hub: &tally::Hub, g: &GroupNode) -> GroupStats {
        let mut members = Members::new();
        for t in hub.members() {
            members.entry(Arc::as_ptr(&t.group)).or_default().push(t);
        }
        GroupStats::build(g, &members)
    }

    fn build(g: &GroupNode, members: &Members) -> GroupStats {
        let totals = g.totals();
        let mut owners: Vec<OwnerStats> = members
            .get(&(g as *const GroupNode))
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|t| OwnerStats::of(t))
            .collect();
        owners.sort_by_key(|o| o.owner);
        GroupStats {
            name: g.name.clone(),
            path: g.path.clone(),
            max_timers: g.max_timers(),
            counts: Counts::of(&totals),
            lateness: Lateness::of(&totals.late),
            groups: g
                .children()
                .iter()
                .map(|c| GroupStats::build(c, members))
                .collect(),
            owners,
        }
    }

    /// The group at `path` (names joined by `/`) below this one; `""` is this one.
    pub fn find(&self, path: &str) -> Option<&GroupStats> {
        let mut g = self;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            g = g.groups.iter().find(|c| c.name == name)?;
        }
        Some(g)
    }

    /// Every owner in the subtree, with the path of its group.
    pub fn all_owners(&self) -> Vec<(&str, &OwnerStats)> {
        let mut out: Vec<(&str, &OwnerStats)> = self
            .owners
            .iter()
            .map(|o| (self.path.as_str(), o))
            .collect();
        for g in &self.groups {
            out.extend(g.all_owners());
        }
        out
    }
}

/// One base's statistics: its polls, in the driver threads or the application's `poll`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BaseStats {
    /// The base's index.
    pub base: usize,
    /// Polls of the base (each a round of pops and deliveries). A poll on the OS clocks
    /// passes over a base with nothing due, uncounted.
    pub polls: u64,
    /// Entries popped and fired (a timer or sleep came due).
    pub fired: u64,
    /// Batches popped (a poll pops up to the batch size per lock hold).
    pub batches: u64,
    /// The longest the base's lock was held while popping a batch, in ns.
    pub max_pop_hold_ns: u64,
}

/// The service's driver threads, since build (read whether or not the service counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DriverStats {
    /// Times a driver thread woke from sleep (each an OS wake-up).
    pub wakeups: u64,
    /// Times a spare driver took the place of a driver that was running callbacks past its
    /// next deadline (or past an earlier arm) ([`Builder::spare_drivers`](crate::Builder::spare_drivers)).
    pub spare_takeovers: u64,
    /// Spare driver threads running now: started while callbacks ran, and not yet retired (a
    /// spare idle for a second retires while another thread of its driver waits).
    pub spare_threads: usize,
}

/// What the service's timer-ID registry holds beside the timers' own slot pages (read
/// whether or not the service counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RegistryStats {
    /// Buckets in the timer-ID hash table shared by all owners (it doubles as it fills).
    pub id_table_buckets: usize,
    /// Bytes of that table (during a resize, the old and the new table).
    pub id_table_bytes: usize,
    /// Bytes of slot pages kept for reuse after their owners were destroyed.
    pub pooled_bytes: usize,
}

/// A service's statistics: the group tree from the root, the bases, the drivers and the
/// registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Stats {
    /// Whether the service counts (`Builder::stats`); the tree's and the bases' figures are
    /// all zero if not.
    pub enabled: bool,
    /// The root group: the whole service (its counts are over every owner).
    pub root: GroupStats,
    /// Each base, by index.
    pub bases: Vec<BaseStats>,
    /// The driver threads.
    pub drivers: DriverStats,
    /// The timer-ID registry's table and page pool.
    pub registry: RegistryStats,
}

impl Stats {
    pub(crate) fn of(
        hub: &Arc<tally::Hub>,
        bases: Vec<BaseStats>,
        drivers: DriverStats,
        registry: RegistryStats,
    ) -> Stats {
        Stats {
            enabled: hub.enabled,
            root: GroupStats::of(hub, &hub.root),
            bases,
            drivers,
            registry,
        }
    }
}
