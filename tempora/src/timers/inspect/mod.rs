//! Inspection from outside the process: `tempora ls PID`, `tempora stats PID` and
//! `tempora top --pid PID` read a running program's timers and statistics with nothing added
//! to the program, as `/proc/PID/timers` shows a process's kernel timers.
//!
//! # The channel
//!
//! ```text
//!  tempora ls PID ──connect──► @tempora/<pid>/<n>   (Unix stream socket, abstract namespace)
//!      │                          │ listened on by the service's realtime-clock watch thread:
//!      │                          │ poll(timerfd, socket); no thread of its own
//!      │◄── "tempora-inspect 2 …" │ SO_PEERCRED: same user or root, on every connection
//!      │◄── one record per timer ─┤ Owner::for_each_locked_pages: 1024 timers a piece,
//!      │◄── end record ───────────┘ written between pieces, no lock or pin held
//! ```
//!
//! - **Where**: each service with driver threads on the OS clocks opens one endpoint at
//!   build, named `tempora/<pid>/<n>` in the abstract namespace (nothing on disk; the name is
//!   gone when the socket closes, so with the process), `n` the first free number: several
//!   services in one process (a Rust program's own `Timers`, the C library's default
//!   service, the drop-in's own copy of tempora in `libtempora-posix.so`) each take their own,
//!   and every answer's header names the file the serving copy was loaded from. A client
//!   finds a process's endpoints in `/proc/net/unix`.
//! - **Who serves**: the thread that already blocks on the realtime clock's timerfd
//!   (`driver::ClockWatch`) blocks in `poll(2)` on that fd and the listening socket instead.
//!   No thread is added and no timer call does anything more: settime, gettime and a fire
//!   never look at the endpoint. A service without drivers (`drivers(0)`) has no such
//!   thread: its own polls serve its endpoint, `tempora/<pid>/<n>p`, without ever blocking
//!   (`polled.rs`); all a poll pays when nobody looks is one comparison with the clock
//!   reading it takes anyway. A service on a manual clock has no endpoint; the client says
//!   what that may mean.
//! - **Who may**: the peer's credentials (`SO_PEERCRED`) are checked on every connection:
//!   the process's effective user or root, anyone else gets `denied` and nothing more.
//! - **What a client cannot do**: a request is one line of at most [`MAX_REQUEST`] bytes,
//!   read without blocking within 200 ms; anything else (too long, unknown, truncated, never
//!   sent) is answered `error` and closed. An answer the client stops reading is dropped
//!   after 1 s without progress. Every wait is a 10 ms `poll` after which the watch handles
//!   any clock step, so a client delays a realtime re-evaluation by at most that, and
//!   delays no timer at all. Writes use `MSG_NOSIGNAL`: a client that goes away raises no
//!   `SIGPIPE` in the program.
//! - **Listing**: every owner the service made (its list of queues, each knowing its owner
//!   weakly), walked by slot page without blocking creators or deleters; each timer's lock
//!   is held only to copy its fields (no allocation), and the records are written after each
//!   piece of 1024 timers with no lock and no epoch pin held. A timer that exists for the
//!   whole listing appears exactly once. The records are binary, fixed fields and the
//!   callback's name (`proto.rs`): only the client formats them as text, into one buffer
//!   with no allocation per timer, which is what lets a million timers list in a fraction
//!   of a second (BENCHMARKS.md, "The outside view").
//! - **Fork, exec**: the socket is `SOCK_CLOEXEC` (an `exec`ed program does not inherit it)
//!   and a fork's child closes the parent's endpoints (`pthread_atfork`); a service the child
//!   builds gets its own, under the child's PID.
//! - **Off**: `TEMPORA_INSPECT=0` in the environment, or
//!   [`Builder::inspect`](crate::timers::Builder::inspect)`(false)`.
//!
//! The wire format (the request, the answer's lines) is in `proto.rs`'s module doc.

mod client;
pub(crate) mod endpoint;
pub(crate) mod polled;
mod proto;

pub use client::{ask, endpoints, list, stats, Answer, InspectError};
pub use proto::{clock_name, notify_name, status_name, Entry, Header, Request, MAX_REQUEST};
