//! tempora brings the Linux kernel's scalable timer machinery to user space.
//!
//! This crate is built in layers (see the repository's `DESIGN.md` in `shared/`):
//!
//! - [`wheel`]: a non-cascading hierarchical timer wheel, the pure data structure under every
//!   base. No threads, no locks, no clock: O(1) insert, cancel and next-expiry, precise and
//!   coarse placement, deferrable entries, generation-checked keys.
//! - [`registry`]: owners (ID namespaces), timer IDs, and one hash table for all owners' timers
//!   with per-bucket locks, lock-free lookups, incremental growth and exact-ID (restore) mode.
//! - [`clock`]: clock identities, the OS and manual clock sources, timespec validation and the
//!   nanosecond/tick conversion that never rounds early; [`Error`]: the crate's one error
//!   type, with errno values.
//!
//! The POSIX-style service, drivers, statistics and checkpointing build on them.

pub mod clock;
mod error;
pub(crate) mod itimer;
pub mod registry;
pub(crate) mod sync;
pub mod wheel;

pub use error::Error;
