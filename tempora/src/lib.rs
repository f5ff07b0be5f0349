//! tempora brings the Linux kernel's scalable timer machinery to user space.
//!
//! This crate is built in layers, each knowing only the ones below it (ARCHITECTURE.md in the
//! repository draws them, with the lock order and the invariants):
//!
//! - [`wheel`]: a non-cascading hierarchical timer wheel, the pure data structure under every
//!   base. No threads, no locks, no clock: O(1) insert, cancel and next-expiry, precise and
//!   coarse placement, deferrable entries, generation-checked keys.
//! - the registry (crate-internal): owners (ID namespaces), timer IDs, and one hash table for
//!   all owners' timers with per-bucket locks, lock-free lookups, incremental growth and
//!   exact-ID (restore) mode. It is generic over the service it serves, which keeps its own
//!   parts in each timer object.
//! - [`clock`]: clock identities, the OS and manual clock sources, timespec validation and the
//!   nanosecond/tick conversion that never rounds early; [`Error`]: the crate's one error
//!   type, with errno values.
//! - [`Timers`]: the POSIX-style service users hold: owners, `create` / `settime` /
//!   `gettime` / `getoverrun` / `delete` with Linux's semantics, bases (a lock and a wheel per
//!   clock), event queues with the kernel's overrun rules, callbacks, and `poll` /
//!   `next_deadline` for an application's own loop (see [`timers`]).
//! - [`checkpoint`]: snapshots of an owner ([`Owner::checkpoint`]), their checksummed binary
//!   format and atomic files, and all-or-nothing restore with the same IDs
//!   ([`Owner::restore`]).
//!
//! ```
//! use std::time::Duration;
//! use tempora::clock::{ClockId, ManualClock};
//! use tempora::{Notify, SetFlags, Timers};
//!
//! let clock = ManualClock::new();
//! let timers = Timers::builder().clock(clock.clone()).build().unwrap();
//! let owner = timers.owner();
//! let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
//! owner
//!     .settime(id, SetFlags::RELATIVE, Duration::from_millis(10), Duration::from_millis(10))
//!     .unwrap();
//! clock.advance(Duration::from_millis(35));
//! timers.poll();
//! let event = owner.try_recv().unwrap();
//! assert_eq!((event.id, event.overrun), (id, 2)); // due at 10 ms; 20 and 30 ms missed
//! assert_eq!(owner.getoverrun(id), Ok(2));
//! ```
//!
//! # Features
//!
//! - `serde` (off by default): `serde::Serialize` on the [`stats`] snapshot types
//!   ([`Stats`] and the types in it) and `Stats::to_json`. Nothing else needs serde, so
//!   without it neither serde nor serde_json is compiled.
//! - `hyper` (off by default): `compat::hyper::Timer`, hyper 1's timer trait
//!   (`hyper::rt::Timer`) on tempora's sleeps, for hyper's header-read timeout and keep-alive.
//! - `tower` (off by default): `compat::tower::TimeoutLayer`, a per-request deadline for a
//!   tower service (axum's, tonic's) on tempora's sleeps, in the shape of tower's own.

// Linux only: timerfd, eventfd, CLOCK_BOOTTIME, the coarse clocks and `membarrier` are
// Linux's, and the semantics copied are Linux's.
#[cfg(not(target_os = "linux"))]
compile_error!("tempora supports Linux only (it uses timerfd, eventfd and Linux's clocks)");

pub mod checkpoint;
pub mod clock;
#[cfg(any(feature = "hyper", feature = "tower"))]
pub mod compat;

mod alloc;
mod error;
mod instant;
pub(crate) mod registry;
pub mod stats;
pub(crate) mod sync;
pub mod time;
pub mod timers;
pub mod wheel;

#[cfg(test)]
mod testing;

#[doc(hidden)]
pub mod bench_door;

pub use error::{Error, IoError};
pub use stats::Stats;
#[cfg(not(loom))]
pub use timers::inspect;
pub use timers::{
    Builder, Event, Fired, Group, ItimerSpec, Notify, NotifyKind, Owner, Precision, SetFlags,
    Status, TimerHandle, TimerId, TimerInfo, Timers, WeakOwner, WeakTimer,
};
