//! The implementations measured side by side, one trait per kind of work: a timer queue
//! ([`timer_queue::TimerQueue`], the wheel suite), a by-ID registry ([`registry::Registry`],
//! the seed suite), POSIX-style timers by ID ([`service::Service`], the service suite) and
//! async sleeps ([`async_sleeps::AsyncSleeps`], the async suite).

pub(crate) mod async_sleeps;
pub(crate) mod registry;
pub(crate) mod service;
pub(crate) mod signal;
pub(crate) mod timer_queue;
