//! The service's value types: what callers pass to and get back from its calls.

use crate::clock::{duration_nanos, ClockId, TimeSpec};
use crate::registry::TimerId;
use std::fmt;
use std::sync::Arc;

/// A callback timer's closure ([`Notify::callback`]): handed each expiry as a [`Fired`], the
/// timer's ID, the event's overrun, and its owner's calls on the timer.
///
/// A closure that acts on its own timer should do so through the [`Fired`] it is handed: one
/// that captured an [`Owner`](crate::timers::Owner) keeps that owner alive for as long as the timer
/// exists (the timer holds the closure, the closure the owner, the owner its timers), so that
/// dropping every other handle ends nothing (the timer goes on firing, its memory and its
/// service's stay allocated) until someone calls
/// [`Owner::destroy`](crate::timers::Owner::destroy) or deletes the timer.
pub type Callback = Arc<dyn Fn(&Fired<'_>) + Send + Sync>;

/// One expiry of a [callback timer](Notify::callback), handed to its closure: the timer, the
/// overrun, and its owner, reached without the closure keeping it alive. Its calls (`settime`,
/// `gettime`, `getoverrun`, `delete`, `owner`) are the owner's on this timer; they fail with
/// [`Error::OwnerDeleted`](crate::Error::OwnerDeleted) once the owner's last handle was dropped (a
/// call taken before that may still run, as after [`Owner::delete`](crate::timers::Owner::delete)).
///
/// The owner is reached through a [`WeakOwner`]: each call takes a strong handle for its
/// length, so an owner whose user handles are all dropped ends at once, its timers with it,
/// even while its callbacks re-arm themselves.
///
/// ```
/// use std::time::Duration;
/// use tempora::clock::{ClockId, ManualClock};
/// use tempora::{Notify, SetFlags, Timers};
///
/// let clock = ManualClock::new();
/// let timers = Timers::builder().clock(clock.clone()).drivers(0).build().unwrap();
/// let owner = timers.owner();
/// // A timer that re-arms itself 10 ms after each call: it captures no `Owner`.
/// let id = owner
///     .create(
///         ClockId::Monotonic,
///         Notify::callback(|fired| {
///             fired
///                 .settime(SetFlags::RELATIVE, Duration::from_millis(10), Duration::ZERO)
///                 .ok(); // fails only once the owner is gone
///         }),
///     )
///     .unwrap();
/// owner.settime(id, SetFlags::RELATIVE, Duration::from_millis(10), Duration::ZERO).unwrap();
/// clock.advance(Duration::from_millis(10));
/// assert_eq!(timers.poll(), 1);
/// assert!(owner.gettime(id).unwrap().value.to_nanos().unwrap() > 0, "re-armed");
/// drop(owner); // the owner ends here, with its timer and closure
/// ```
#[derive(Debug)]
pub struct Fired<'a> {
    id: TimerId,
    overrun: i32,
    pub(crate) owner: &'a WeakOwner,
}

impl<'a> Fired<'a> {
    pub(crate) fn new(id: TimerId, overrun: i32, owner: &'a WeakOwner) -> Fired<'a> {
        Fired { id, overrun, owner }
    }

    /// The timer's ID.
    pub fn id(&self) -> TimerId {
        self.id
    }

    /// The event's overrun: the periods the expiry was late by (or folded into this call; see
    /// [`Notify::Callback`]).
    pub fn overrun(&self) -> i32 {
        self.overrun
    }
}

/// A handle to an [`Owner`](crate::timers::Owner) that does not keep it alive
/// ([`Owner::downgrade`](crate::timers::Owner::downgrade)), as `std::sync::Weak` is to `Arc`:
/// [`upgrade`](WeakOwner::upgrade) gives the owner while a strong handle of it is alive.
/// What a closure captures to reach an owner other than its own timer's (which [`Fired`]
/// gives).
#[derive(Clone)]
pub struct WeakOwner {
    pub(crate) reg: crate::registry::WeakOwner,
}

impl fmt::Debug for WeakOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WeakOwner(..)")
    }
}

/// How a timer reports its expiry, chosen at [`Owner::create`](crate::timers::Owner::create).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Notify {
    /// Nothing is delivered (`SIGEV_NONE`); [`Owner::gettime`](crate::timers::Owner::gettime) shows
    /// the state.
    #[default]
    None,
    /// An [`Event`](crate::timers::Event) on the owner's queue: `SIGEV_SIGNAL`'s rules without a
    /// signal, at most one pending per timer.
    Queue,
    /// A closure run by the poll that fires the timer (`SIGEV_THREAD`), handed a [`Fired`]:
    /// the timer's ID, the overrun and its owner's calls on it, so that it needs to capture no
    /// [`Owner`](crate::timers::Owner) ([`Notify::callback`], [`Notify::callback_named`]).
    Callback {
        /// The name a checkpoint records it under, for a restore to map back to a closure
        /// (see [`crate::checkpoint`]); `None` for an unnamed one.
        name: Option<Arc<str>>,
        /// The closure.
        f: Callback,
    },
    /// A real signal to the process (`SIGEV_SIGNAL`), queued with `si_code = SI_TIMER`, the
    /// timer's ID in `si_timerid`, `value` in `si_value` and the overrun in `si_overrun`; at
    /// most one pending per timer, as the kernel's (`timers/object/signal.rs` says how, and where
    /// user space makes it differ).
    Signal {
        /// The signal number, `1..=SIGRTMAX`.
        signo: i32,
        /// `sigev_value`: `sival_ptr`'s bits (`sival_int` is the low 32 bits).
        value: usize,
    },
    /// A real signal to one thread of the process (`SIGEV_THREAD_ID`), as `Signal`.
    ThreadSignal {
        /// The thread's ID (`gettid()`); it must be a thread of this process.
        tid: i32,
        /// The signal number, `1..=SIGRTMAX`.
        signo: i32,
        /// `sigev_value`.
        value: usize,
    },
    /// `Signal` whose value is the timer's own ID: what `timer_create` does with a NULL
    /// sigevent (with `SIGALRM`).
    SignalWithId {
        /// The signal number, `1..=SIGRTMAX`.
        signo: i32,
    },
}

impl Notify {
    /// A callback timer: `f` is handed a [`Fired`] at each expiry (its timer's ID, the
    /// overrun, and its owner's calls on the timer: settime, gettime, delete, ...), without
    /// capturing the owner (see [`Callback`]).
    pub fn callback(f: impl Fn(&Fired<'_>) + Send + Sync + 'static) -> Notify {
        Notify::Callback {
            name: None,
            f: Arc::new(f),
        }
    }

    /// [`Notify::callback`] with a name a checkpoint records it under, for a restore to map
    /// back to a closure. A create refuses the names a snapshot reserves for the other kinds
    /// (`none`, `queue`: a restore would turn the timer into one of those) and names longer
    /// than [`crate::checkpoint::MAX_NAME`] bytes (no snapshot can hold them).
    pub fn callback_named(name: &str, f: impl Fn(&Fired<'_>) + Send + Sync + 'static) -> Notify {
        Notify::Callback {
            name: Some(name.into()),
            f: Arc::new(f),
        }
    }

    /// The name a checkpoint records a callback under, if it has one.
    pub(crate) fn callback_name(&self) -> Option<&Arc<str>> {
        match self {
            Notify::Callback {
                name: Some(name), ..
            } => Some(name),
            _ => None,
        }
    }

    pub(crate) fn kind(&self) -> NotifyKind {
        match self {
            Notify::None => NotifyKind::None,
            Notify::Queue => NotifyKind::Queue,
            Notify::Callback { .. } => NotifyKind::Callback,
            Notify::Signal { .. } | Notify::ThreadSignal { .. } | Notify::SignalWithId { .. } => {
                NotifyKind::Signal
            }
        }
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notify::None => f.write_str("None"),
            Notify::Queue => f.write_str("Queue"),
            Notify::Callback { name: None, .. } => f.write_str("Callback(..)"),
            Notify::Callback {
                name: Some(name), ..
            } => write!(f, "Callback({name:?}, ..)"),
            Notify::Signal { signo, value } => f
                .debug_struct("Signal")
                .field("signo", signo)
                .field("value", value)
                .finish(),
            Notify::ThreadSignal { tid, signo, value } => f
                .debug_struct("ThreadSignal")
                .field("tid", tid)
                .field("signo", signo)
                .field("value", value)
                .finish(),
            Notify::SignalWithId { signo } => f
                .debug_struct("SignalWithId")
                .field("signo", signo)
                .finish(),
        }
    }
}

/// Flags of [`Owner::settime`](crate::timers::Owner::settime): the `flags` argument of
/// `timer_settime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetFlags(u32);

impl SetFlags {
    /// `it_value` is relative to now.
    pub const RELATIVE: SetFlags = SetFlags(0);
    /// `TIMER_ABSTIME`: `it_value` is an absolute time on the timer's clock.
    #[doc(alias = "TIMER_ABSTIME")]
    pub const ABSTIME: SetFlags = SetFlags(1);

    /// The flags from `timer_settime`'s raw value. Like Linux, bits other than
    /// `TIMER_ABSTIME` (1) are ignored, not refused.
    pub fn from_raw(raw: i32) -> SetFlags {
        SetFlags(raw as u32 & 1)
    }

    /// Whether `TIMER_ABSTIME` is set.
    pub fn is_abstime(self) -> bool {
        self.0 & 1 != 0
    }
}

/// A timer setting (`struct itimerspec`): remaining time until the next expiry, and period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItimerSpec {
    /// Time until the next expiry (`it_value`); zero when disarmed.
    pub value: TimeSpec,
    /// The period (`it_interval`); zero for a one-shot timer.
    pub interval: TimeSpec,
}

impl ItimerSpec {
    /// Both fields in nanoseconds: `(value, interval)`.
    pub fn as_nanos(&self) -> (u64, u64) {
        // A spec tempora produced is always valid.
        (
            self.value.to_nanos().unwrap_or(0),
            self.interval.to_nanos().unwrap_or(0),
        )
    }
}

/// How a timer notifies, without its closure: what a listing
/// ([`Owner::timers`](crate::timers::Owner::timers)) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
#[non_exhaustive]
pub enum NotifyKind {
    /// Nothing is delivered (`SIGEV_NONE`); gettime shows the state.
    #[default]
    None = 0,
    /// An event on the owner's queue, with POSIX overrun semantics (`SIGEV_SIGNAL`'s, without a
    /// signal).
    Queue = 1,
    /// A callback run by the poll that fires the timer (`SIGEV_THREAD`).
    Callback = 2,
    /// A real signal to the process or to one of its threads (`SIGEV_SIGNAL`,
    /// `SIGEV_THREAD_ID`).
    Signal = 3,
}

/// A timer's status, as the kernel's `it_status`.
///
/// All three are observable: in a listing ([`TimerInfo::status`], and an inspection
/// endpoint's `pending`), and in a snapshot (`checkpoint::TimerRecord`, stored as 0, 1, 2),
/// where `RequeuePending` is what tells a periodic timer waiting for its event or signal to
/// be consumed from an armed one (`checkpoint/rules.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
#[non_exhaustive]
pub enum Status {
    /// Not armed (zero `it_value`), or a one-shot that has fired.
    #[default]
    Disarmed = 0,
    /// Armed: queued in a base's wheel.
    Armed = 1,
    /// A periodic timer whose event is pending; re-armed when the event is consumed.
    RequeuePending = 2,
}

/// One line of an owner's timer listing ([`Owner::timers`](crate::timers::Owner::timers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerInfo {
    /// The timer's ID.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// How it notifies.
    pub notify: NotifyKind,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
}

/// The longest callback name, in bytes, a create accepts: what a checkpoint's timer record
/// holds (its length is a `u16` that also counts the record's 53 bytes of other fields;
/// `crate::checkpoint` asserts the two agree). Public as `checkpoint::MAX_NAME`.
pub(crate) const MAX_NAME: usize = u16::MAX as usize - 53;
/// The notification name a checkpoint gives a `SIGEV_NONE` timer (`Notify::None`); no
/// callback may take it.
pub(crate) const NOTIFY_NONE: &str = "none";
/// The notification name a checkpoint gives a queue timer (`Notify::Queue`); no callback may
/// take it.
pub(crate) const NOTIFY_QUEUE: &str = "queue";

/// The notification name a checkpoint gives a signal timer (`Notify::Signal`, `ThreadSignal`,
/// `SignalWithId`), whose target its record carries beside it.
pub(crate) const NOTIFY_SIGNAL: &str = "signal";

/// Why a callback cannot be recorded under `name`, if it cannot: a reserved name (a restore
/// would make the timer that kind) or one longer than a snapshot's record holds. Checked at
/// create, so that every timer an owner holds can be checkpointed and restored as it is.
pub(crate) fn callback_name_error(name: &str) -> Option<&'static str> {
    if name == NOTIFY_NONE || name == NOTIFY_QUEUE {
        Some("a callback named `none` or `queue` would restore as that kind")
    } else if name.len() > MAX_NAME {
        Some("a callback name longer than a snapshot can hold")
    } else {
        None
    }
}

/// When a timer may fire after its expiry
/// ([`Owner::set_precision`](crate::timers::Owner::set_precision)): the kernel's choices between
/// exact hrtimers, timer slack and deferrable timers. No timer ever fires before its expiry,
/// whatever its precision.
///
/// | precision | fires in | wakes a driver by itself |
/// |---|---|---|
/// | `Precise` | `[expiry, expiry + tick)` | yes |
/// | `Slack(d)` | `[expiry, expiry + max(d, tick))` | yes, at instants shared with other slack timers |
/// | `Deferrable` | `[expiry, expiry + max_deferral]` | no: it fires when a driver is awake anyway, at the latest [`max_deferral`](crate::timers::Builder::max_deferral) after its expiry |
///
/// (Plus the time a driver takes to wake up and reach the timer, which no mode bounds.)
///
/// A slack timer's expiry is rounded up to a multiple of the largest wheel granularity
/// (`8^k` ticks) that fits in its slack, so slack timers due close together fire together,
/// on one wake-up, and a timer whose wheel level is at most that granularity is placed once
/// and never moved; a precise one is moved one level finer as its bucket comes due.
///
/// A one-shot arming of a slack timer whose slack is at least twice the coarse clock's lag
/// ([`ClockSource::coarse_lag`](crate::clock::ClockSource::coarse_lag): six resolutions of
/// `CLOCK_MONOTONIC_COARSE` for the OS clocks, 24 ms at HZ=250, so a slack of 48 ms or
/// more) reads the coarse clock
/// ([`ClockSource::now_coarse`](crate::clock::ClockSource::now_coarse)) plus that lag
/// instead of the exact clock: an upper bound of the time, so the expiry is never early, at
/// most the lag late, and the other half of the slack still groups. The timer's
/// [`gettime`](crate::timers::Owner::gettime) then reads up to the lag more than the value set, and
/// the old setting `settime` returns up to the lag less (a due one as 1 ns). A periodic
/// arming reads the exact clock, as its expiry is the base of every later period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Precision {
    /// The owner's default ([`Owner::set_default_slack`](crate::timers::Owner::set_default_slack)),
    /// read at each arming: precise unless the owner has a default slack.
    #[default]
    Default,
    /// Fires within one tick of its expiry.
    Precise,
    /// May fire up to this long after its expiry (Linux's `PR_SET_TIMERSLACK`, per timer).
    Slack(std::time::Duration),
    /// Never causes a wake-up by itself (the kernel's `TIMER_DEFERRABLE`).
    Deferrable,
}

/// The top two bits of a packed precision: its kind; the other 62 bits: the slack in ns.
const PRECISION_SHIFT: u32 = 62;
const SLACK_MASK: u64 = (1 << PRECISION_SHIFT) - 1;

/// An owner's default slack as it is stored (`Owner::set_default_slack`, and the snapshot's
/// owner record): ns, 0 for none (a slack of zero is precise too), saturating at `u64::MAX`.
pub(crate) fn slack_ns(slack: Option<std::time::Duration>) -> u64 {
    slack.map_or(0, duration_nanos)
}

/// The default slack a stored value ([`slack_ns`]) stands for.
pub(crate) fn slack_of_ns(ns: u64) -> Option<std::time::Duration> {
    (ns != 0).then(|| std::time::Duration::from_nanos(ns))
}

impl Precision {
    /// One word (a timer's `ItimerFixed::precision`): 0 is `Default`, so a zeroed slot reads it.
    pub(crate) fn pack(self) -> u64 {
        match self {
            Precision::Default => 0,
            Precision::Precise => 1 << PRECISION_SHIFT,
            Precision::Slack(d) => {
                let ns = duration_nanos(d).min(SLACK_MASK);
                2 << PRECISION_SHIFT | ns
            }
            Precision::Deferrable => 3 << PRECISION_SHIFT,
        }
    }

    /// The inverse of [`Precision::pack`].
    pub(crate) fn unpack(bits: u64) -> Precision {
        match bits >> PRECISION_SHIFT {
            0 => Precision::Default,
            1 => Precision::Precise,
            2 => Precision::Slack(std::time::Duration::from_nanos(bits & SLACK_MASK)),
            _ => Precision::Deferrable,
        }
    }
}

/// A precision with the owner's default applied: how one arming is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    Precise,
    /// Slack in ns (non-zero).
    Slack(u64),
    Deferrable,
}

impl Placement {
    /// `precision` (packed) for an owner whose default slack is `default_slack` ns (0: none).
    #[inline]
    pub(crate) fn of(precision: u64, default_slack: u64) -> Placement {
        let slack = |ns| {
            if ns == 0 {
                Placement::Precise
            } else {
                Placement::Slack(ns)
            }
        };
        match precision >> PRECISION_SHIFT {
            0 => slack(default_slack),
            1 => Placement::Precise,
            2 => slack(precision & SLACK_MASK),
            _ => Placement::Deferrable,
        }
    }
}
