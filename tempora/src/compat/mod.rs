//! tempora's sleeps under other crates' timer traits, each behind a feature of its name, so a
//! server stack that takes a timer runs its timeouts on tempora's wheels:
//!
//! - [`hyper`] (feature `hyper`): [`hyper::Timer`], hyper 1's `rt::Timer`, which its HTTP/1
//!   header-read timeout and HTTP/2 keep-alive run on.
//! - [`tower`] (feature `tower`): [`tower::TimeoutLayer`], a per-request deadline for any
//!   tower service, in the shape of tower's own `TimeoutLayer`.
//!
//! Both make [`Sleep`](crate::time::Sleep)s: on the service they were given, or on the
//! calling thread's current one ([`crate::time`], "The free functions, and the current
//! service") when they make each sleep. They need no runtime: any executor polls them.

#[cfg(feature = "hyper")]
pub mod hyper;
#[cfg(feature = "tower")]
pub mod tower;
