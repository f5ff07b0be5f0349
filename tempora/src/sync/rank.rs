//! The lock order of the whole crate: every lock's rank, in one place.
//!
//! A thread may take a lock only while every lock it holds has a lower rank; locks of one
//! rank are never held together, except the hash buckets of a table split (the old bucket,
//! then the two future buckets: [`RankToken::nested`](super::RankToken::nested)). Every lock of the crate is one of
//! [`Locked`](super::Locked), [`RankedLock`](super::RankedLock), [`VersionedLock`](super::VersionedLock) or [`RankedMutex`](super::RankedMutex), or (for a lock whose mechanism lives
//! elsewhere: a hash bucket's head bit, an owner's restore section) holds a [`RankToken`](super::RankToken)
//! while it is held; each names its rank in its type, so the rank of every lock is stated
//! where the lock is declared, and debug builds check the rule at every lock (the tests
//! `lock_order_violation_is_caught_in_debug_builds` and `queue_and_bucket_locks_are_ranked`).
//! Release builds (and loom models, whose threads share one OS thread) compile the check away.
//!
//! [`TABLE`] lists every lock with its rank, where it lives and what its holders take; the
//! unit test `lock_table_matches_architecture_md` checks that ARCHITECTURE.md shows exactly
//! that table.

/// An owner's exclusive restore section (`registry/owner/exclusive.rs`).
pub(crate) const SECTION: u8 = 0;
/// The global service's build lock (`time/current.rs`).
pub(crate) const BUILDING: u8 = 0;
/// The clients of a service's endpoint served at its polls (`timers/inspect/polled.rs`;
/// only ever tried, never waited for).
pub(crate) const INSPECT: u8 = 0;
/// An owner's ID shard (`registry/owner.rs`).
pub(crate) const SHARD: u8 = 1;
/// A base's delivery lock (`timers/shared/base.rs`).
pub(crate) const DELIVERY: u8 = 1;
/// A timer (`registry/timer.rs`); a sleep's cell (`timers/object/sleep_cell.rs`).
pub(crate) const TIMER: u8 = 2;
/// An alarm's lock: a driver's, or the deadline fd's (`timers/shared/wake.rs`).
pub(crate) const ALARM: u8 = 3;
/// The service's list of owners' event queues (`timers/shared/health.rs`).
pub(crate) const OWNERS: u8 = 3;
/// A base (`timers/shared/base.rs`).
pub(crate) const BASE: u8 = 4;
/// A hash bucket (`registry/table.rs`; a split: the old bucket, then two future buckets).
pub(crate) const BUCKET: u8 = 4;
/// An owner's readiness-fd lock (`timers/object/notify.rs`).
pub(crate) const READY_FD: u8 = 4;
/// An owner's event queue (`timers/object/notify.rs`; taken under READY_FD and TIMER).
pub(crate) const QUEUE: u8 = 5;
/// The statistics' one-flush-at-a-time lock (`stats/tally.rs`).
pub(crate) const FLUSHING: u8 = 6;
/// An owner's flushed statistics totals (`stats/tally.rs`); a group's (`stats/group.rs`).
pub(crate) const TOTALS: u8 = 8;
/// The statistics' list of member owners (`stats/tally.rs`).
pub(crate) const MEMBERS: u8 = 9;
/// A statistics group's list of children (`stats/group.rs`).
pub(crate) const CHILDREN: u8 = 9;
/// The service's list of spare driver threads (`timers/shared/mod.rs`).
pub(crate) const SPARES: u8 = 9;
/// A driver crew's callbacks not yet run (`timers/shared/crew.rs`).
pub(crate) const PENDING: u8 = 9;
/// An owner's slot-page directory grow lock (`registry/slots.rs`).
pub(crate) const PAGE_GROW: u8 = 9;
/// The service's signal lookouts (`timers/shared/lookout.rs`; taken under TIMER).
pub(crate) const LOOKOUT: u8 = 9;

/// One lock of the crate: its rank, what it is, where it lives, and what its holders take
/// while they hold it.
#[allow(dead_code, reason = "read by the lock-table test")]
pub(crate) struct Lock {
    pub(crate) rank: u8,
    pub(crate) lock: &'static str,
    pub(crate) at: &'static str,
    pub(crate) held_while_taking: &'static str,
}

/// Every lock of the crate, by rank: ARCHITECTURE.md's lock table is this one, rendered
/// (the unit test `lock_table_matches_architecture_md`).
#[allow(dead_code, reason = "read by the lock-table test")]
pub(crate) const TABLE: &[Lock] = &[
    Lock {
        rank: SECTION,
        lock: "an owner's exclusive restore section",
        at: "`registry/owner/exclusive.rs`",
        held_while_taking: "an ID shard, a hash bucket, a timer (the section's creates)",
    },
    Lock {
        rank: BUILDING,
        lock: "the global service's build lock",
        at: "`time/current.rs`",
        held_while_taking: "the owners and spares lists and an alarm's lock (a failed build \
                            stops its drivers)",
    },
    Lock {
        rank: INSPECT,
        lock: "the clients of an endpoint served at a service's polls",
        at: "`timers/inspect/polled.rs`",
        held_while_taking: "timers (a listing's piece), the owners' list, the statistics' \
                            locks (a `stats` answer), an alarm's lock (the deadline fd's, \
                            lowered to the next look)",
    },
    Lock {
        rank: SHARD,
        lock: "an owner's ID shard",
        at: "`registry/owner.rs`",
        held_while_taking: "a hash bucket (a create), the slot pages' grow lock",
    },
    Lock {
        rank: DELIVERY,
        lock: "a base's delivery lock",
        at: "`timers/shared/base.rs`",
        held_while_taking: "its base (a poll popping a batch), a timer or a sleep's cell (the \
                            poll delivering what it popped)",
    },
    Lock {
        rank: TIMER,
        lock: "a timer; a sleep's cell",
        at: "`registry/timer.rs`, `timers/object/sleep_cell.rs`",
        held_while_taking: "a base (arm, disarm, the delete hook), an event queue (an \
                            expiry queued), an alarm's lock (a ring), a readiness-fd lock \
                            (after a push)",
    },
    Lock {
        rank: ALARM,
        lock: "an alarm's lock (a driver's, or the deadline fd's)",
        at: "`timers/shared/wake.rs`",
        held_while_taking: "each base in turn (a refresh after a poll)",
    },
    Lock {
        rank: OWNERS,
        lock: "the service's list of owners' event queues",
        at: "`timers/shared/health.rs`",
        held_while_taking: "nothing (a halt closes the queues once it has let go of it)",
    },
    Lock {
        rank: BASE,
        lock: "a base",
        at: "`timers/shared/base.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: BUCKET,
        lock: "a hash bucket",
        at: "`registry/table.rs`",
        held_while_taking: "the two future buckets, nested (a table split)",
    },
    Lock {
        rank: READY_FD,
        lock: "an owner's readiness-fd lock",
        at: "`timers/object/notify.rs`",
        held_while_taking: "its owner's event queue",
    },
    Lock {
        rank: QUEUE,
        lock: "an owner's event queue",
        at: "`timers/object/notify.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: FLUSHING,
        lock: "the statistics' flush lock",
        at: "`stats/tally.rs`",
        held_while_taking: "the totals",
    },
    Lock {
        rank: TOTALS,
        lock: "an owner's or a group's flushed statistics totals",
        at: "`stats/tally.rs`, `stats/group.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: MEMBERS,
        lock: "the statistics' list of member owners",
        at: "`stats/tally.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: CHILDREN,
        lock: "a statistics group's children",
        at: "`stats/group.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: SPARES,
        lock: "the service's list of spare driver threads",
        at: "`timers/shared/mod.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: PENDING,
        lock: "a driver crew's callbacks not yet run",
        at: "`timers/shared/crew.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: PAGE_GROW,
        lock: "an owner's slot-page directory grow lock",
        at: "`registry/slots.rs`",
        held_while_taking: "nothing",
    },
    Lock {
        rank: LOOKOUT,
        lock: "the service's signal lookouts",
        at: "`timers/shared/lookout.rs`",
        held_while_taking: "nothing (a release takes the followers out, then lets go)",
    },
];
