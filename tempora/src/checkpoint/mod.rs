//! Checkpoint and restore of an owner: the snapshot, its binary format, and its files.
//!
//! [`crate::Owner::checkpoint`] takes a [`Snapshot`] of an owner's logical state;
//! [`crate::Owner::restore`] recreates it in a fresh owner through exact-ID mode, with the same
//! IDs, all or nothing. Derived state (wheel placement, hash chains) is rebuilt, never copied.
//!
//! # What a snapshot holds, and the time rule
//!
//! Per owner: the ID counter (the next ID a normal create would try) and whether exact-ID mode
//! is on. Per timer: ID, clock, notification (by name, below), status, expiry, interval, the
//! internal overrun (periods counted since the pending event was queued, -1 when none) and the
//! latched overrun `getoverrun` returns, and whether its event is pending on the owner's queue;
//! a signal timer's target and the state of its signal (below).
//!
//! Expiries follow the clocks' own rules across a restore, possibly on another machine or after
//! a reboot:
//! * an expiry measured on `CLOCK_MONOTONIC` or `CLOCK_BOOTTIME` (monotonic and boot-time
//!   timers, and relative `CLOCK_REALTIME` timers, which run on the monotonic clock) is stored
//!   as the **time remaining** at checkpoint (negative if it has passed, as for a periodic timer
//!   whose event is pending), and restored relative to the new owner's clock: a timer with
//!   3 s left has 3 s left after the restore, however long the snapshot sat on disk;
//! * an **absolute `CLOCK_REALTIME`** expiry is stored as is (ns since the epoch) and restored
//!   as is: a timer set for 12:00 wall time still fires at 12:00, earlier if the snapshot was
//!   restored late (at once if 12:00 has passed, counting the missed periods as overrun).
//!
//! # Notification names
//!
//! A snapshot names each timer's notification: `none`, `queue` (the owner's event queue),
//! `signal` (a signal timer, whose target its record holds: [`TimerRecord::signal`]), or the
//! name the application gave its callback ([`crate::Notify::callback_named`]; an unnamed
//! callback is `callback`). At restore the application maps the callbacks' names to
//! [`crate::Notify`] values; a name it does not map is an error and nothing is restored. A
//! record named `signal` without a target is a callback of that name (as every record named
//! so was before format 1.3), mapped as any other.
//!
//! # Signal timers
//!
//! A signal timer's record holds its target ([`SignalTarget`]: the `Notify::Signal`,
//! `ThreadSignal` or `SignalWithId` it was created with) and its signal's state
//! ([`SignalState`]): idle, owed (an expiry's signal not sent yet: no room in the signal
//! queue, or a periodic timer's signal ignored), or outstanding (sent, not yet seen
//! delivered), with the periods that signal's own
//! expiry was late by. Its status, expiry, overrun and latched overrun are recorded as any
//! timer's; no event of it is ever pending on the owner's queue.
//!
//! A restore recreates the timer with the same notification, checked as
//! [`Owner::create`](crate::Owner::create) checks it: a thread ID that is not a thread of the
//! restoring process fails the whole restore ([`crate::Error::InvalidSignal`]). Thread IDs
//! are the checkpointed process's, so a restore into another process rewrites them in the
//! snapshot first (its fields are public). Then:
//! * an armed timer is armed at its expiry, as settime arms it;
//! * an **owed** signal stays owed: it is sent at the timer's next expiry (a one-shot's at
//!   once), and its lateness and the periods since go in its `si_overrun`;
//! * an **outstanding** signal is pending, or not, in the *restoring* process, not in the
//!   snapshot: the restore asks, as the service's probe does, whether the timer's signal
//!   number is pending for its target. If it is (a restore in the same process, or in one
//!   whose pending signals were restored as well, as CRIU restores them), the signal stays
//!   outstanding: no second signal is queued while it is pending, and the periods meanwhile
//!   count as its overruns, the kernel's one-pending rule. If it is not (a new process), it
//!   was delivered, and the restore settles it as a probe that finds it gone does:
//!   `getoverrun` reports the periods it missed (its lateness and the periods counted while
//!   it was pending), a periodic timer is armed for its next period,
//!   and the next signal's `si_overrun` carries the counted periods;
//! * a periodic timer waiting to be re-armed whose signal is idle, neither owed nor
//!   outstanding (its target thread had exited), waits for ever, as it did.
//!
//! What a retry's backoff had reached is not kept: a restored owed signal retries from the
//! first step. State 3 (outstanding from an earlier arming) is no longer written, since
//! settime forgets such a signal; a snapshot that has it restores the timer as idle.
//!
//! # Binary format (version 1.3)
//!
//! All integers little-endian.
//!
//! ```text
//! offset  size  field
//!      0     8  magic       "TEMPORA\x1a"
//!      8     2  major       1: a reader refuses a greater major version
//!     10     2  minor       3: a greater minor version may append fields to records
//!     12     8  length      bytes of payload that follow the header, at most MAX_PAYLOAD
//!     20     4  crc32c      CRC-32C (Castagnoli) of the payload
//!     24        payload     one owner record, then `count` timer records
//!
//! owner record:  len u16 | counter u32 | restore_ids u8 | count u32
//!                | default_slack u64 (ns, 0 none; minor 2; absent before, read as none)
//! timer record:  len u16 | id i32 | clock i32 (clockid_t) | status u8 | pending u8
//!                | expiry_kind u8 (0 none, 1 remaining on expiry_clock, 2 realtime absolute)
//!                | expiry_clock i32 | expiry i64 (ns) | interval i64 (ns) | overrun i64
//!                | overrun_last i32 | name_len u16 | name (UTF-8)
//!                | precision u64 (minor 1; absent in 1.0 records, read as Default)
//!                | signal (minor 3, in a record named `signal` only, after its precision,
//!                  both required: 22 bytes below; absent before 1.3, where the name is a
//!                  callback's; a later minor version's fields follow it)
//! signal:        target u8 | signo i32 | tid i32 | value u64 | state u8 | lateness i32
//!
//! clock, expiry_clock  clockid_t: 0 CLOCK_REALTIME, 1 CLOCK_MONOTONIC, 7 CLOCK_BOOTTIME
//!                      (expiry_kind 0 writes expiry_clock and expiry as 0, kind 2 writes
//!                      expiry_clock as 0; a reader ignores the fields its kind does not use)
//! status               0 Disarmed, 1 Armed, 2 RequeuePending
//! restore_ids, pending 0 no, 1 yes
//! precision            bits 63-62: 0 Default, 1 Precise, 2 Slack (bits 61-0: the slack
//!                      in ns), 3 Deferrable
//! target               0 none (a callback named `signal`: the other fields are written as
//!                      0 and not read), 1 the process (Notify::Signal), 2 thread `tid`
//!                      (Notify::ThreadSignal), 3 the process with the timer's ID as value
//!                      (Notify::SignalWithId); tid is written as 0 unless 2, value as 0
//!                      for 3, and a reader ignores the fields its target does not use
//! state                0 idle, 1 owed, 2 outstanding, 3 outstanding from an earlier arming
//! ```
//!
//! Each record starts with its own length (the bytes after the `len` field), so a reader skips
//! fields a newer minor version appended. A timer record's length is a `u16`, so a name holds
//! at most [`MAX_NAME`] bytes; a payload at most [`MAX_PAYLOAD`] bytes. The signal section
//! goes only in records named `signal`, whose name is short: a longer name keeps all its
//! room.
//!
//! A reader checks everything before it allocates or creates anything: magic, version, that
//! the length is within [`MAX_PAYLOAD`] and matches the file (a file is read only up to the
//! length its header declares, so any input, `/dev/zero` included, costs bounded memory), the
//! checksum, every record's length against what is left, counts against the bytes that could
//! hold them, clock ids, status, kind, target and state values, then [`Snapshot::validate`]:
//! what a snapshot
//! must satisfy whoever built it. [`Snapshot::try_encode`] and [`crate::Owner::restore`] apply
//! the same [`Snapshot::validate`], so what one refuses the others refuse too, and no bytes are
//! written that a reader refuses.

mod capture;
mod format;
mod restore;
mod rules;
mod snapshot;
#[cfg(all(test, not(loom)))]
mod tests;

pub use snapshot::{
    Expiry, SignalRecord, SignalState, SignalTarget, Snapshot, TimerRecord, MAGIC, MAX_NAME,
    MAX_PAYLOAD, VERSION,
};
