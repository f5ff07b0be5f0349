//! tempora brings the Linux kernel's scalable timer machinery to user space.
//!
//! This crate is built in layers (see the repository's `DESIGN.md` in `shared/`):
//!
//! - [`wheel`]: a non-cascading hierarchical timer wheel, the pure data structure under every
//!   base. No threads, no locks, no clock: O(1) insert, cancel and next-expiry, precise and
//!   coarse placement, deferrable entries, generation-checked keys.
//!
//! The registry of timer IDs, the POSIX-style service, drivers, statistics and checkpointing
//! build on it.

pub mod wheel;
