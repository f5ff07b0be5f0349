//! The timer object and what it is made of: the room every other room of `timers/` stands
//! on. A reader of a timer's rules, values or queue opens this folder alone; it holds no
//! `impl Core` (the shared state is `shared/`, above it).
//!
//! - `types.rs`: the value types callers pass and get back (`Notify`, `ItimerSpec`, `Fired`).
//! - `fd.rs`: the eventfd and timerfd calls the queue, the alarms and the clock watch use.
//! - `itimer.rs`: a timer's state and the POSIX rules over it (settime, gettime, expire,
//!   consume).
//! - `serial.rs`: a callback's calls, one at a time.
//! - `signal.rs`: a signal timer's target, and the port signals are queued through.
//! - `notify.rs`: an owner's event queue and the threads and tasks waiting on it (the
//!   receiving calls that read it are the owner's, `calls/receive.rs`).
//! - `sleep_cell.rs`: a sleep's cell, the ID-less timer a base's sleeps' wheel points at.
//! - this file: the service's parts of a timer object, laid out below.
//!
//! What the service keeps in each timer object and in each owner: the [`Itimer`] service the
//! registry serves.
//!
//! ```text
//!  timer object (registry/timer.rs)          the service's parts
//!   line 1 ... fixed      ItimerFixed         sink (the owner's event queue), attached
//!                                             (a callback or a signal's target),
//!                                             precision (`Owner::set_precision`)
//!   line 2  lock, published ItimerPublished   overrun_last (getoverrun reads it lock-free)
//!           links         Node                the wheel links: next, prev, tick and mode
//!                                             (`wheel/intrusive.rs`; a base's wheel links
//!                                             the object itself)
//!           state         ItimerState         the itimer rules' state (`itimer.rs`), where
//!                                             the timer waits (base, wheel), its queue flags,
//!                                             clock and notification kind
//!  owner (registry/owner.rs)
//!           service       OwnerPart           the service's core, the owner's event queue
//! ```
//!
//! The `registry::Service` implementation that ties these parts to the registry is in
//! `shared/contract.rs`, above the core whose wheels its delete hook takes a timer out of: the hook
//! hands back the timer's callback, which the registry drops once it holds no lock, and
//! destroying an owner closes its event queue.

use self::notify::Sink;
use self::serial::Serial;
use self::signal::SignalCell;
use self::types::{NotifyKind, Placement};
use crate::clock::ClockId;
use crate::registry::{Locked, Zeroable};
use crate::stats::tally::Tally;
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use crate::wheel::intrusive::Node;
use std::sync::Arc;

pub(crate) mod fd;
pub(crate) mod itimer;
pub(crate) mod notify;
pub(crate) mod serial;
pub(crate) mod signal;
pub(crate) mod sleep_cell;
pub(crate) mod types;

/// The POSIX interval-timer service, as the registry sees it.
pub(crate) struct Itimer;

/// A timer of this service, locked.
pub(crate) type LockedTimer<'a> = Locked<'a, Itimer>;

/// A queued event: the slot of the timer it was queued for, in its owner's pages (4 bytes,
/// the queue's room per `Queue` timer). It names no incarnation: a timer deleted with its
/// event queued counts the entry, stale now, in its slot's carried word (`contract.rs`,
/// `on_delete`), and a consume that meets an entry of a slot drops it as one of those unless
/// the slot's timer has its event queued (`notify.rs`, "Entries").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventRef {
    pub(crate) slot: u32,
}

/// An owner's event queue: entries name their timers.
/// An owner's event queue, and its statistics: what every timer of the owner points at (its
/// `sink`). It derefs to the queue.
pub(crate) struct EventQueue {
    pub(crate) queue: Sink<EventRef>,
    pub(crate) tally: Arc<Tally>,
    /// The slack (ns, 0: none) of the owner's timers whose precision is `Default`
    /// (`Owner::set_default_slack`), read at each of their armings.
    pub(crate) default_slack: AtomicU64,
    /// The owner this queue is the sink of, weakly (set once, as the owner is made): how an
    /// inspection (`inspect/`) reaches the owners of a service from its list of queues.
    pub(crate) owner: std::sync::OnceLock<crate::registry::WeakOwner>,
}

impl EventQueue {
    pub(crate) fn new(tally: Arc<Tally>) -> EventQueue {
        EventQueue {
            queue: Sink::default(),
            tally,
            default_slack: AtomicU64::new(0),
            owner: std::sync::OnceLock::new(),
        }
    }
}

impl std::ops::Deref for EventQueue {
    type Target = Sink<EventRef>;
    fn deref(&self) -> &Sink<EventRef> {
        &self.queue
    }
}

/// Set at create, read by whoever holds the timer's lock.
#[derive(Debug, Default)]
pub(crate) struct ItimerFixed {
    /// The owner's event queue (every timer of an owner points at the same one).
    pub(crate) sink: AtomicPtr<EventQueue>,
    /// What a `Callback` or `Signal` timer carries (a leaked `Box`), null for the other
    /// kinds. Cleared, and the box taken back, only by the delete hook under the timer's lock.
    pub(crate) attached: AtomicPtr<Attached>,
    /// The timer's [`Precision`](self::types::Precision), packed: zeroed at create (the
    /// owner's default) and written by `Owner::set_precision` under the timer's lock, which
    /// every reader holds. The one field of line 1 written after create, and rarely.
    pub(crate) precision: AtomicU64,
}

/// What a timer carries beyond its state, by kind.
pub(crate) enum Attached {
    Callback(CallbackCell),
    Signal(SignalCell),
}

/// A callback timer's closure (with its calls' state: one at a time, `serial.rs`) and the
/// name a checkpoint records.
pub(crate) struct CallbackCell {
    pub(crate) serial: Arc<Serial>,
    pub(crate) name: Option<Arc<str>>,
}

/// What a create is given.
pub(crate) struct ItimerInit {
    pub(crate) clock: ClockId,
    pub(crate) notify: NotifyKind,
    pub(crate) attached: Option<Box<Attached>>,
    /// The owner's event queue.
    pub(crate) sink: *const EventQueue,
}

/// The owner's event queue of a locked timer.
pub(crate) fn sink_of<'l>(l: &'l LockedTimer<'_>) -> &'l EventQueue {
    // Relaxed: written at create, before the timer became visible.
    let sink = l.fixed().sink.load(Ordering::Relaxed);
    // SAFETY: `sink` points at the owner's `EventQueue`, which the owner keeps (`OwnerPart`) until
    // its teardown has marked every timer deleted under its lock; this timer is visible and
    // its lock is held.
    unsafe { &*sink }
}

// SAFETY: two atomic pointers and an atomic integer; zero is null and `Precision::Default`, the defaults (see `Zeroable` for loom).
unsafe impl Zeroable for ItimerFixed {}

// SAFETY: three atomics, whose all-zero value (unlinked, tick 0, mode 0) is `Node::default()`.
unsafe impl Zeroable for Node {}

/// What a locked timer carries, if anything, for as long as the lock is held (not borrowing
/// `l`, so that the timer's state can be written beside it). It must not be held across the
/// delete hook, the one place that frees it.
fn attached_of<'a>(l: &LockedTimer<'a>) -> Option<&'a Attached> {
    // Relaxed: written at create; cleared only under the timer's lock.
    let a = l.timer.hot.fixed.attached.load(Ordering::Relaxed);
    // SAFETY: null or the timer's live `Box<Attached>`, freed only by the delete hook under
    // the timer's lock, which `l` holds for `'a` (the locked section: `Locked` cannot leave
    // it), and which callers do not run while holding this reference.
    unsafe { a.as_ref() }
}

/// The callback cell of a locked callback timer, if any.
pub(crate) fn callback_of<'a>(l: &LockedTimer<'a>) -> Option<&'a CallbackCell> {
    match attached_of(l)? {
        Attached::Callback(c) => Some(c),
        Attached::Signal(_) => None,
    }
}

/// The signal cell of a locked signal timer, if any (see [`attached_of`] for how long).
pub(crate) fn signal_of<'a>(l: &LockedTimer<'a>) -> Option<&'a SignalCell> {
    match attached_of(l)? {
        Attached::Signal(s) => Some(s),
        Attached::Callback(_) => None,
    }
}

/// Whether a timer popped from base `b`'s wheel `w` is still due there (under its lock, with
/// that base's delivery lock held): it still names that base and wheel, and was not linked
/// again since (`base.rs`). The order matters: `is_linked` is exact only for a node of base
/// `b`, whose delivery lock the caller holds.
#[inline]
pub(crate) fn popped_here(l: &LockedTimer<'_>, b: usize, w: usize) -> bool {
    usize::from(l.state.wheel()) == w + 1
        && usize::from(l.state.base) == b
        && !l.links().is_linked()
}

/// A locked timer's precision with its owner's default applied.
#[inline]
pub(crate) fn placement_of(l: &LockedTimer<'_>) -> Placement {
    // Relaxed (both): written under the timer's lock, which `l` holds (`set_precision`), or
    // at create; the owner's default is a setting read at each arming, with no other data.
    let p = l.fixed().precision.load(Ordering::Relaxed);
    let default = if p == 0 {
        sink_of(l).default_slack.load(Ordering::Relaxed)
    } else {
        0
    };
    Placement::of(p, default)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::itimer::{ItimerPublished, ItimerState};
    use super::*;
    use crate::registry::Timer;
    use crate::wheel::intrusive::Node;
    use std::mem::{offset_of, size_of};

    /// The parts fill the object's two cache lines exactly (`registry/timer.rs` has the
    /// layout; `itimer.rs` the state's fields).
    #[test]
    fn the_service_parts_fit_the_two_lines() {
        assert_eq!(size_of::<Timer<Itimer>>(), 128);
        assert_eq!(size_of::<ItimerFixed>(), 24);
        assert_eq!(size_of::<ItimerPublished>(), 4);
        assert_eq!(size_of::<ItimerState>(), 32);
        assert_eq!(size_of::<Node>(), 24);
        assert_eq!(offset_of!(Timer<Itimer>, written.links), 72);
        assert_eq!(offset_of!(Timer<Itimer>, written.state), 96);
        assert_eq!(offset_of!(ItimerState, signal_seq), 4);
        assert_eq!(offset_of!(ItimerState, expiry), 8);
        assert_eq!(offset_of!(ItimerState, interval), 16);
        assert_eq!(offset_of!(ItimerState, overrun), 24);
        assert_eq!(offset_of!(ItimerState, sigqueue_seq), 28);
    }

    /// Each `Arc` made after `alloc::probe_arc` said its block can be had is of a block
    /// glibc's per-thread cache keeps and hands back (`alloc.rs`): an owner's, its queue's
    /// and its statistics', a callback's calls'. An owner's block was 128-byte aligned (its
    /// counters' padding), which went through glibc's aligned path: its creation could abort
    /// under exhaustion after the probe said yes.
    #[test]
    fn every_probed_arc_block_is_one_the_cache_keeps() {
        use crate::alloc::{arc_block, CACHED_BLOCK};
        use std::alloc::Layout;
        let blocks = [
            ("owner", crate::registry::Owner::<Itimer>::block_layout()),
            ("queue", Layout::new::<EventQueue>()),
            ("statistics", Layout::new::<Tally>()),
            ("calls", Layout::new::<Serial>()),
        ];
        for (what, value) in blocks {
            let block = arc_block(value).unwrap();
            assert!(
                block.align() <= 16 && block.size() <= CACHED_BLOCK,
                "the {what}'s block: {block:?}"
            );
        }
    }

    /// A queue entry, the room every `Queue` timer keeps on its owner's queue, is 4 bytes.
    #[test]
    fn a_queue_entry_is_4_bytes() {
        assert_eq!(size_of::<EventRef>(), 4);
    }

    /// A signal timer's heap block beside its object stays one 32-byte allocation.
    #[test]
    fn a_signal_timers_attached_block_is_32_bytes() {
        assert_eq!(
            (size_of::<SignalCell>(), align_of::<SignalCell>()),
            (28, 4),
            "the cell"
        );
        assert_eq!(size_of::<Attached>(), 32);
    }

    /// ARCHITECTURE.md's drawing of the timer object names each field at its offset.
    #[test]
    fn the_maps_timer_object_is_the_layout() {
        let map = include_str!("../../../ARCHITECTURE.md");
        let i = map
            .find("<!-- object:begin -->")
            .expect("the drawing's begin marker");
        let j = map
            .find("<!-- object:end -->")
            .expect("the drawing's end marker");
        let drawn: Vec<(usize, &str)> = map[i..j]
            .lines()
            .flat_map(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                let pairs: Vec<(usize, &str)> = words
                    .windows(2)
                    .filter_map(|w| Some((w[0].parse().ok()?, w[1])))
                    .collect();
                pairs
            })
            .collect();
        type T = Timer<Itimer>;
        let layout = [
            (offset_of!(T, hot.hash_next), "hash_next"),
            (offset_of!(T, hot.owner), "owner"),
            (offset_of!(T, hot.id), "id"),
            (offset_of!(T, hot.home), "home"),
            (offset_of!(T, hot.index), "index"),
            (offset_of!(T, hot.free_next), "free_next"),
            (offset_of!(T, hot.generation), "generation"),
            (offset_of!(T, hot.carried), "carried"),
            (offset_of!(T, hot.fixed), "fixed"),
            (offset_of!(T, written.lock), "lock"),
            (offset_of!(T, written.published), "published"),
            (offset_of!(T, written.links), "links"),
            (offset_of!(T, written.state), "state"),
        ];
        let names: Vec<&str> = layout.iter().map(|&(_, n)| n).collect();
        let mut drawn: Vec<(usize, &str)> = drawn
            .into_iter()
            .filter(|(_, n)| names.contains(n))
            .collect();
        drawn.sort();
        let mut layout = layout.to_vec();
        layout.sort();
        assert_eq!(drawn, layout, "ARCHITECTURE.md's timer object drawing");
    }
}
