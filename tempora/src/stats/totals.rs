//! What is counted (`Counter`) and what flushes add up (`Totals`), for an owner and a group.

use super::hist::Buckets;

/// What a tally counts; the index of each in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    Created,
    Deleted,
    Armed,
    Disarmed,
    Expired,
    Delivered,
    Overruns,
    StaleDropped,
    CallbackPanics,
    Refused,
}

impl Counter {
    pub(crate) const ALL: [Counter; 10] = [
        Counter::Created,
        Counter::Deleted,
        Counter::Armed,
        Counter::Disarmed,
        Counter::Expired,
        Counter::Delivered,
        Counter::Overruns,
        Counter::StaleDropped,
        Counter::CallbackPanics,
        Counter::Refused,
    ];
}

/// Counters per slot.
pub(crate) const COUNTERS: usize = Counter::ALL.len();

/// Totals of an owner or a group: what flushes have added.
#[derive(Clone, Debug, Default)]
pub(crate) struct Totals {
    pub(crate) counts: [u64; COUNTERS],
    pub(crate) late: Buckets,
}

impl Totals {
    pub(crate) fn add(&mut self, delta: &[u64; COUNTERS], late: Option<&Buckets>) {
        for (t, d) in self.counts.iter_mut().zip(delta) {
            *t = t.wrapping_add(*d);
        }
        if let Some(b) = late {
            self.late.merge(b);
        }
    }
}
