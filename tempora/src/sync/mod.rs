//! Synchronisation primitives, swapped for loom's model-checked ones under `cfg(loom)`.
//!
//! Everything in tempora that is shared between threads takes its atomics from here, so the
//! loom tests (`--cfg loom`, `.ci/loom.sh`) check the same code that ships.
//!
//! Every lock of the crate is held through this module's ranked types ([`Locked`],
//! [`RankedLock`], [`RankedMutex`], and [`RankToken`] for a lock whose mechanism lives
//! elsewhere), whose type names the lock's rank in the crate's one lock order ([`rank`]);
//! debug builds check the order at every lock.
//!
//! `ByteLock` (`lock.rs`), the one-byte lock under [`Locked`] and [`RankedLock`], is tempora's own,
//! written here rather than taken from a crate because it must fit in one byte of a timer's
//! written cache line, and because its unlock is a plain release store (one atomic
//! read-modify-write per lock/unlock pair instead of two; BENCHMARKS.md, "Design
//! measurements", measures the alternative).

pub(crate) mod fork;
pub(crate) use fork::RaceOnce;
pub(crate) mod barrier;
mod lock;
mod order;
mod pin;
mod primitives;
pub(crate) mod rank;
mod thread;
mod wait;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use lock::{Locked, MutexGuard, RankedLock, RankedMutex, Unreadable, VersionedLock};
#[cfg(all(test, not(loom)))]
pub(crate) use order::panic_message;
pub(crate) use order::{holds_a_lock, RankToken};
pub(crate) use pin::collect_deferred;
#[cfg(all(test, not(loom)))]
pub(crate) use pin::with_walk_for_tests;
pub(crate) use pin::{pin, pin_walk, walks_done, watch_forks, Pinned};
pub(crate) use primitives::*;
pub(crate) use thread::*;
pub(crate) use wait::WaitQueue;

// The loom models of the byte lock itself (`loom_tests.rs`) take it through `use super::*`.
#[cfg(all(test, loom))]
use lock::ByteLock;
