//! The calls an owner makes: the public face of the service's owners and timers.
//!
//! - `owner.rs`: [`Owner`](crate::timers::Owner): the POSIX calls on its timers (create,
//!   settime, gettime, getoverrun, delete), precision and slack, listing and destroy, and
//!   receiving the events of `Queue` timers.
//! - `handle.rs`: [`TimerHandle`](crate::timers::TimerHandle), a timer deleted on drop, and
//!   the calls of `WeakOwner` and `Fired`: reaching an owner without keeping it alive.
//!
//! What a call does to the shared state is `Core`'s: arming in `shared/arm.rs`, a signal
//! timer's part in `signals/calls.rs`.

pub(crate) mod handle;
pub(crate) mod owner;
