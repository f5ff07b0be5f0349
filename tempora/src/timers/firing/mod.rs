//! Firing: what runs when timers fall due.
//!
//! - `poll.rs`: polling and delivery, the firing part of `impl Core`'s work: popping what is
//!   due from each base, delivering it under each timer's lock (an event queued, a callback or
//!   a waker collected), and running callbacks and wakers with no tempora lock held. A signal
//!   timer's expiry is `signals/`'s part, called from here.
//! - `driver.rs`: the driver threads, each of a crew (`shared/crew.rs`) waiting on its alarm
//!   (`shared/wake.rs`), the one woken polling every base with something due and running the callbacks; spares;
//!   a receiver that leads while it waits (`wait_leading`).
//! - `clockwatch.rs`: the realtime-clock watch thread, which serves the inspection endpoint
//!   too.
//!
//! The calls that arm timers are `calls/`'s; arming itself is `shared/arm.rs`.

// The names the files below reach through their parent (`super::serial`, ...).
use crate::timers::object::serial;
use crate::timers::shared::wake;
use crate::timers::signals as sigdeliver;

#[cfg(not(loom))]
pub(crate) mod clockwatch;
pub(crate) mod driver;
pub(crate) mod poll;
