//! The calls an owner makes: the public face of the service's owners and timers.
//!
//! - `owner.rs`: [`Owner`](crate::timers::Owner) and the POSIX calls on its timers (create,
//!   settime, gettime, getoverrun, delete), precision and slack, listing and destroy.
//! - `receive.rs`: receiving the events of `Queue` timers (`try_recv`, `recv`,
//!   `recv_timeout`, `recv_async`, `events`, the event fd): the reading side of the owner's
//!   event queue (`object/notify.rs`, which every timer object points at and so lies lower).
//! - `handle.rs`: [`TimerHandle`](crate::timers::TimerHandle), a timer deleted on drop, and
//!   the calls of `WeakOwner` and `Fired`: reaching an owner without keeping it alive.
//!
//! What a call does to the shared state is `Core`'s: arming in `shared/arm.rs`, a signal
//! timer's part in `signals/calls.rs`.

pub(crate) mod handle;
pub(crate) mod owner;
pub(crate) mod receive;
