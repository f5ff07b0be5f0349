//! tempora's C ABI: the calls of `include/tempora.h`, shaped and failing like the POSIX timer
//! calls they mirror, so that porting a C program is a rename (`include/tempora_posix.h` does
//! the rename for a program written against `timer_create` & co.).
//!
//! # Conventions every function keeps
//! - **Errors**: a call returns 0 (or the value it documents) on success and -1 with `errno`
//!   set on failure, to what Linux sets for the POSIX call it mirrors ([`tempora::Error::errno`]
//!   for tempora's own errors). A call that returns a pointer returns NULL with `errno` set.
//!   `tempora_last_error()` gives the failure's message, per thread.
//! - **NULL pointers**: a NULL handle (`tempora_t *`, `tempora_owner_t *`) is `EINVAL`; a NULL
//!   pointer Linux would fault on (an out-parameter it must write, a path) is `EFAULT`; a NULL
//!   `new` in `tempora_timer_settime` is `EINVAL`, as in Linux.
//! - **Out-parameters** are written only on success (an exact-ID create reads `*timerid` first,
//!   as Linux's restore mode does).
//! - **No panic crosses the boundary**: every entry runs inside `catch_unwind`; a panic inside
//!   tempora (a bug) fails the call with `ENOTRECOVERABLE`, never aborts the host program.
//! - **Memory**: a create, an arming or a restore that cannot get memory fails with `EAGAIN`
//!   (as the kernel's `timer_create` when it cannot allocate a timer) and changes nothing;
//!   `tempora_last_error` then says "out of memory". An allocation failure is not a panic:
//!   the paths that still end the process when the allocator has nothing left are bounded
//!   and listed in the Rust crate's `timers` module doc ("Memory"): making a service or an
//!   owner, a thread's first blocking wait and first failed call (a thread-local each,
//!   once per thread), a thread tempora starts. A `TEMPORA_SIGEV_THREAD` sigevent's function
//!   is boxed before the create, infallibly, as is its callback name.
//! - **Threads**: a `tempora_t` and a `tempora_owner_t` may be used from any number of threads
//!   at once, as the Rust `Timers` and `Owner` are; only the `_free` calls need every other
//!   call on that handle to have returned.
//! - **Callbacks** (`TEMPORA_SIGEV_THREAD`) run on the thread that fires the timer (a driver
//!   thread, or the caller of `tempora_poll`) with no tempora lock held: they may call any
//!   function here, delete their own timer included, but should be short, as a signal handler
//!   or a `SIGEV_THREAD` function should. They, and `tempora_owner_restore`'s resolver, must
//!   return normally: their types are `C-unwind`, so a C++ exception that escapes one unwinds
//!   to the `catch_unwind` around it, which aborts the process (Rust catches no foreign
//!   exception); `longjmp`, `pthread_exit` or a cancellation out of one is undefined behaviour.
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

// A service and its owners: tempora_config_init .. tempora_default_owner.
mod service;

// The POSIX timer calls, each timer's precision, the owner's default slack and exact-ID mode.
mod timers;

// Taking events, the readiness fds, and firing timers from the application's own loop.
mod events;

// An owner's timers written to a file and recreated from it.
mod checkpoint;

// The arguments' checks and conversions between their C and Rust forms (no call of its own).
mod convert;

// Failure, errno and the message; `entry`, the boundary each call runs inside; and
// tempora_last_error, the header's last function.
mod failure;

pub use checkpoint::*;
pub use events::*;
pub use failure::tempora_last_error;
pub use service::*;
pub use timers::*;
pub use types::*;
