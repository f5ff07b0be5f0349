//! The implementations measured side by side, one trait per kind of work: a timer queue
//! ([`timer_queue::TimerQueue`], the wheel suite) and a by-ID registry
//! ([`registry::Registry`], the seed suite).

pub(crate) mod registry;
pub(crate) mod timer_queue;
