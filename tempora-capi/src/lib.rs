//! tempora's C ABI: the calls of `include/tempora.h`, shaped and failing like the POSIX timer
//! calls they mirror, so that porting a C program is a rename (`include/tempora_posix.h` does
//! the rename for a program written against `timer_create` & co.).
//!
//! The conventions below are `src/conventions.md`, which `tests/header.rs` also writes into
//! the header's opening comment: one text for both.
//!
#![doc = include_str!("conventions.md")]
//!
//! The header is generated from this crate by cbindgen (`tests/header.rs` checks it is
//! current; `TEMPORA_BLESS=1 cargo test -p tempora-capi --test header` rewrites it), so the doc
//! comments of the items its modules declare are the header's comments.
//!
//! cbindgen reads the modules in the order of their `mod` lines here and emits the constants,
//! and the functions, in the order it reads them: the modules are declared in the header's
//! order, each on a line of its own (rustfmt sorts `mod` lines only within a group), and a new
//! call goes where it belongs in the header.

#![allow(non_camel_case_types)]

// The handles, structs, function-pointer types and constants of the header.
mod types;

// The library's version, a service and its owners: tempora_version .. tempora_default_owner.
mod service;

// The POSIX timer calls, each timer's precision, the owner's default slack and exact-ID mode.
mod timers;

// Taking events, the readiness fds, and firing timers from the application's own loop.
mod events;

// An owner's timers written to a file and recreated from it.
mod checkpoint;

// The arguments' checks and conversions between their C and Rust forms (no call of its own).
mod convert;

// The C library's own timer calls, for the clocks tempora does not time (no call of its own).
mod kernel;

// The POSIX calls with the C library's types, for tempora_posix.h and the drop-in (their
// C declarations are tempora_posix.h's, not tempora.h's).
pub mod posix;

// The C library's signal waits, led by a thread that waits for a timer's signal, for the
// drop-in (which exports them; no call of tempora.h's).
pub mod waits;

// Failure, errno and the message; `entry`, the boundary each call runs inside; and
// tempora_last_error, the header's last function.
mod failure;

pub use checkpoint::*;
pub use events::*;
pub use failure::tempora_last_error;
pub use service::*;
pub use timers::*;
pub use types::*;
