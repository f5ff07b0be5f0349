//! Signals as the process sees them: a signal timer's target ([`SignalCell`]), and the
//! [`SignalPort`] through which the service queues a timer's signal and asks whether it is
//! still pending or would be ignored. The OS port ([`OsSignals`]) makes the system calls; tests
//! give the service a port they drive (`timers::testing::TestSignals`), so that the rules of
//! `signals/mod.rs` run under the manual clock.
//!
//! A timer's signal is queued with `rt_sigqueueinfo(2)` (to the process) or
//! `rt_tgsigqueueinfo(2)` (to one thread), with the `siginfo_t` a kernel timer's signal
//! carries: `si_code = SI_TIMER`, `si_timerid`, `si_overrun`, `si_value`. The kernel lets a
//! process queue any negative `si_code` to itself, and lays an `SI_TIMER` siginfo out as a
//! timer's for handlers, `sigwaitinfo` and `signalfd` alike, so a program reads the same fields
//! it reads from a kernel timer.
//!
//! Whether a signal is pending for the process is read with `sigpending(2)` on tempora's own
//! threads, which block every signal (`sigpending` reports only what the caller blocks, its own
//! set with the process's), a hit confirmed against the process's set alone (`ShdPnd` of
//! `/proc/self/task/<pid>/status`: a signal left on a driver thread by mistake would otherwise
//! hide every delivery); on any other thread (an application's poll) from `ShdPnd` directly. A
//! thread's own set is its status file's `SigPnd`. A status file that cannot be read for want
//! of a file descriptor or memory reads as "pending" (and "blocked"): the one-pending rule
//! holds, at the cost of a later signal. Whether a signal would be ignored is the kernel's own rule: its disposition
//! ignores it (`SIG_IGN`, or `SIG_DFL` for a signal whose default is to ignore) and the thread
//! the kernel would deliver it to does not block it (`SigBlk`).

use super::types::Notify;
use crate::error::Error;
use crate::sync::{AtomicI32, AtomicU32, AtomicU8, Ordering};

/// The highest signal number the kernel accepts (`_NSIG`): `timer_create` refuses
/// `sigev_signo` outside `1..=64` with `EINVAL`.
pub(crate) const SIGNO_MAX: i32 = 64;

/// Where a signal timer's signal goes, and what it carries (the timer's `Attached` part: 28
/// bytes, one 32-byte heap block per signal timer beside its object).
#[derive(Debug)]
pub(crate) struct SignalCell {
    /// `si_value` (ignored when `value_is_id`), as two halves (low, high): 4-byte aligned, the
    /// cell packs into the 32-byte `Attached` block with its lookout slot.
    value: [u32; 2],
    /// The target thread's ID; 0 for the process.
    pub(crate) tid: i32,
    /// The periods the outstanding (or owed) signal's own expiry was late by: reported in its
    /// `si_overrun` and, once it is seen delivered, by `getoverrun` (`signals/mod.rs`).
    /// Written under the timer's lock.
    lateness: AtomicI32,
    /// The periods of earlier signals the outstanding one's `si_overrun` carries (owed again
    /// if the signal is discarded by a `SIG_IGN` before anyone takes it).
    carried: AtomicI32,
    signo: u8,
    /// `si_value` is the timer's ID (a NULL sigevent's meaning).
    pub(crate) value_is_id: bool,
    /// The low five bits: sends refused (no room, or the signal ignored) in a row, the backoff
    /// of the next retry (saturating at 31; the backoff stops doubling long before). The high
    /// three: [`QUEUED_IGNORED`], [`SEEN_PENDING`] and [`IN_RETRY`]. Written under the
    /// timer's lock.
    tries: AtomicU8,
    /// The low 8 bits: unconfirmed probes of the outstanding signal (`Pending::Unconfirmed`),
    /// counted to confirm the first, second, fourth, ... and then every 128th; under the
    /// timer's lock. The high 24: where the timer is in its target's and number's lookout
    /// (`lookout.rs`): `NONE`, its looker, its index in the followers' list, or detached by a
    /// release; under the timer's lock or the lookouts' lock, as `lookout.rs` says. Two holders
    /// of different locks may update it at once: every write is a read-modify-write of its
    /// own part.
    hits_slot: AtomicU32,
}

impl Notify {
    /// Checks a signal notification (`Signal`, `ThreadSignal`, `SignalWithId`) as the
    /// kernel's `timer_create` checks a sigevent: a thread outside the process, then a signal
    /// number outside `1..=64`, are [`Error::InvalidSignal`] (`EINVAL`). Every other kind is
    /// `Ok`. The create makes this check itself; a caller that must refuse a bad signal before
    /// its own later checks (the C ABI's `timer_create`, in Linux's order) calls it first.
    pub fn check_signal(&self) -> Result<(), Error> {
        signal_target(self).map(drop)
    }
}

/// A signal notification's `(tid, signo, value, value_is_id)` (`tid` 0: the process),
/// checked as [`Notify::check_signal`] says; `None` for another kind.
fn signal_target(notify: &Notify) -> Result<Option<(i32, i32, usize, bool)>, Error> {
    let (tid, signo, value, value_is_id) = match *notify {
        Notify::Signal { signo, value } => (0, signo, value, false),
        Notify::ThreadSignal { tid, signo, value } => {
            // The thread first, as the kernel checks it (0 and below are no thread).
            if !is_our_thread(tid) {
                return Err(Error::InvalidSignal(
                    "the thread is not one of this process",
                ));
            }
            (tid, signo, value, false)
        }
        Notify::SignalWithId { signo } => (0, signo, 0, true),
        _ => return Ok(None),
    };
    if !(1..=SIGNO_MAX).contains(&signo) {
        return Err(Error::InvalidSignal("the signal number is outside 1..=64"));
    }
    Ok(Some((tid, signo, value, value_is_id)))
}

impl SignalCell {
    /// The cell of a `Notify::Signal`, `ThreadSignal` or `SignalWithId`, checked as
    /// [`Notify::check_signal`] says.
    pub(crate) fn new(notify: &Notify) -> Result<SignalCell, Error> {
        let (tid, signo, value, value_is_id) =
            signal_target(notify)?.expect("only signal notifications have a signal cell");
        let value = value as u64;
        Ok(SignalCell {
            value: [value as u32, (value >> 32) as u32],
            tid,
            lateness: AtomicI32::new(0),
            carried: AtomicI32::new(0),
            signo: signo as u8,
            value_is_id,
            tries: AtomicU8::new(0),
            hits_slot: AtomicU32::new(SLOT_NONE << 8),
        })
    }

    /// `si_value` (ignored when `value_is_id`).
    pub(crate) fn value(&self) -> usize {
        (u64::from(self.value[0]) | u64::from(self.value[1]) << 32) as usize
    }

    /// `lateness` (under the timer's lock).
    pub(crate) fn lateness(&self) -> i32 {
        // Relaxed (this and the other accessors): written and read under the timer's lock.
        self.lateness.load(Ordering::Relaxed)
    }

    pub(crate) fn set_lateness(&self, v: i32) {
        self.lateness.store(v, Ordering::Relaxed);
    }

    /// `carried` (under the timer's lock).
    pub(crate) fn carried(&self) -> i32 {
        self.carried.load(Ordering::Relaxed)
    }

    pub(crate) fn set_carried(&self, v: i32) {
        self.carried.store(v, Ordering::Relaxed);
    }

    /// The signal number.
    pub(crate) fn signo(&self) -> i32 {
        i32::from(self.signo)
    }

    pub(crate) fn tries(&self) -> u32 {
        u32::from(self.tries.load(Ordering::Relaxed) & TRIES)
    }

    /// One more refused send (saturating: the backoff is capped long before).
    pub(crate) fn tried(&self) {
        let t = self.tries.load(Ordering::Relaxed);
        if t & TRIES != TRIES {
            self.tries.store(t + 1, Ordering::Relaxed);
        }
    }

    /// A signal was queued: no refused sends, no look at it yet; `ignored`: its disposition
    /// ignored it as it was queued ([`QUEUED_IGNORED`]).
    pub(crate) fn queued(&self, ignored: bool) {
        let bits = if ignored { QUEUED_IGNORED } else { 0 };
        self.tries.store(bits, Ordering::Relaxed);
        self.set_hits(0);
    }

    /// The unconfirmed probes' count.
    fn hits(&self) -> u8 {
        self.hits_slot.load(Ordering::Relaxed) as u8
    }

    fn set_hits(&self, hits: u8) {
        // Relaxed: the count is under the timer's lock; the RMW keeps the slot a lookout's
        // holder may write meanwhile.
        let _ = self
            .hits_slot
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v & !0xff | u32::from(hits))
            });
    }

    /// Forgets the refused sends and the outstanding signal's bits (settime, a restore).
    pub(crate) fn reset_tries(&self) {
        self.queued(false);
    }

    /// Where the timer is in its lookout (`lookout.rs`).
    pub(crate) fn slot(&self) -> u32 {
        // Relaxed (both): under the timer's lock or the lookouts' lock (`lookout.rs`).
        self.hits_slot.load(Ordering::Relaxed) >> 8
    }

    /// Whether its lookout slot is in the service's retry lookout.
    pub(crate) fn in_retry(&self) -> bool {
        self.tries.load(Ordering::Relaxed) & IN_RETRY != 0
    }

    /// Its lookout slot is in the service's retry lookout now (under the timer's lock).
    pub(crate) fn set_in_retry(&self) {
        let t = self.tries.load(Ordering::Relaxed);
        self.tries.store(t | IN_RETRY, Ordering::Relaxed);
    }

    /// Sets the lookout slot (24 bits: `lookout.rs` keeps its lists shorter). `SLOT_NONE` is
    /// set only under the timer's lock, and leaves the retry lookout too.
    pub(crate) fn set_slot(&self, slot: u32) {
        debug_assert!(slot <= SLOT_NONE);
        if slot == SLOT_NONE {
            let t = self.tries.load(Ordering::Relaxed);
            self.tries.store(t & !IN_RETRY, Ordering::Relaxed);
        }
        let _ = self
            .hits_slot
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v & 0xff | slot << 8)
            });
    }

    /// Whether the outstanding signal was queued while its disposition ignored it.
    pub(crate) fn queued_ignored(&self) -> bool {
        self.tries.load(Ordering::Relaxed) & QUEUED_IGNORED != 0
    }

    /// Whether a look found the outstanding signal pending after its first period.
    pub(crate) fn seen_pending(&self) -> bool {
        self.tries.load(Ordering::Relaxed) & SEEN_PENDING != 0
    }

    /// A look found the outstanding signal pending after its first period.
    pub(crate) fn saw_pending(&self) {
        let t = self.tries.load(Ordering::Relaxed);
        self.tries.store(t | SEEN_PENDING, Ordering::Relaxed);
    }

    /// One more unconfirmed probe: whether this one should be confirmed (the 1st, 2nd, 4th,
    /// ..., 128th, then every 128th: a blocked signal costs a `/proc` read a second or so, a
    /// signal left on a driver thread is seen through within a few probes).
    pub(crate) fn hit_needs_confirming(&self) -> bool {
        let n = self.hits().wrapping_add(1);
        let n = if n == 0 { 128 } else { n };
        self.set_hits(n);
        n.is_power_of_two()
    }
}

/// [`SignalCell`]'s `tries` bit: the outstanding signal was queued while its disposition
/// ignored it (queued only because its target blocked it). Found gone with the disposition
/// still ignoring, it was taken at the unblock and discarded there, as the kernel dequeues it
/// (and settles its overrun) before its default action or `SIG_IGN` discards it; without the
/// bit, gone under an ignoring disposition means a `sigaction` discarded it unseen.
const QUEUED_IGNORED: u8 = 0x80;
/// [`SignalCell`]'s `tries` bit: a look found the outstanding signal still pending after its
/// first period, so the next looks come a little before the periods they would count
/// (`signals/mod.rs`, "Which side of an expiry a consumption fell").
const SEEN_PENDING: u8 = 0x40;
/// [`SignalCell`]'s `tries` bit: its lookout slot is in the service's retry lookout
/// (`lookout.rs`, `Key::RETRY`), not its target's and number's.
const IN_RETRY: u8 = 0x20;
/// The refused sends' count in `tries`.
const TRIES: u8 = 0x1f;

/// `SignalCell::slot` (24 bits): in no lookout (`lookout.rs`).
pub(crate) const SLOT_NONE: u32 = (1 << 24) - 1;
/// `SignalCell::slot`: taken out of its lookout's list by a release, not yet looked at.
pub(crate) const SLOT_DETACHED: u32 = SLOT_NONE - 1;
/// `SignalCell::slot`: its lookout's looker (unless another took its role when it went quiet).
pub(crate) const SLOT_LOOKER: u32 = SLOT_NONE - 2;

/// A timer's signal, as queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerSignal {
    /// The target thread; 0 for the process.
    pub(crate) tid: i32,
    pub(crate) signo: i32,
    /// `si_timerid`.
    pub(crate) timer: i32,
    /// `si_overrun`.
    pub(crate) overrun: i32,
    /// `si_value`.
    pub(crate) value: usize,
}

/// What queueing a signal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// It is pending (or was delivered at once).
    Queued,
    /// No room (`EAGAIN`: the user's `RLIMIT_SIGPENDING` is reached): try again later.
    Full,
    /// The target thread is gone (`ESRCH`): nothing will ever be delivered to it.
    Gone,
}

/// Whether a signal is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pending {
    No,
    Yes,
    /// `sigpending` on a tempora thread reports it, which may be a signal left on that thread
    /// (never delivered: the thread blocks everything) rather than the process's: `confirm`
    /// says which, at the price of reading a `/proc` file (`signals/mod.rs` asks it now and
    /// then).
    Unconfirmed,
}

/// Queues timers' signals and reads the process's signal state: the OS, or a test's.
pub(crate) trait SignalPort: Send + Sync {
    /// Queues `sig`.
    fn send(&self, sig: &TimerSignal) -> Sent;
    /// Whether signal `signo` is pending for thread `tid` (0: for the process).
    fn pending(&self, tid: i32, signo: i32) -> Pending;
    /// Whether `signo` is pending for the process, in its own set alone (the slow, certain
    /// answer to [`Pending::Unconfirmed`]).
    fn confirm(&self, signo: i32) -> bool;
    /// Whether the kernel would discard `signo` sent to `tid` (0: the process) now: its
    /// disposition ignores it and the target does not block it.
    fn ignored(&self, tid: i32, signo: i32) -> bool;
    /// Whether `signo`'s disposition ignores it (`SIG_IGN`, or `SIG_DFL` for a signal whose
    /// default is to ignore): setting it so discarded every queued instance, blocked or not.
    fn disposition_ignores(&self, signo: i32) -> bool;
}

/// The OS: the system calls of the module doc.
#[derive(Debug, Default)]
pub(crate) struct OsSignals;

/// `siginfo_t` with the fields of a timer's signal at the kernel's offsets: three `int`s, then
/// the union (aligned as a pointer), padded to the 128 bytes the kernel copies.
#[repr(C)]
union RawSigInfo {
    head: Head,
    bytes: [u64; 16],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Head {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    timer: TimerFields,
}

/// The union's `_timer` member: `si_tid` (the timer's ID), `si_overrun`, `si_sigval`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TimerFields {
    tid: libc::c_int,
    overrun: libc::c_int,
    value: usize,
}

const _: () = assert!(std::mem::size_of::<RawSigInfo>() == 128);

impl SignalPort for OsSignals {
    fn send(&self, sig: &TimerSignal) -> Sent {
        let mut info = RawSigInfo { bytes: [0; 16] };
        info.head = Head {
            signo: sig.signo,
            errno: 0,
            code: libc::SI_TIMER,
            timer: TimerFields {
                tid: sig.timer,
                overrun: sig.overrun,
                value: sig.value,
            },
        };
        let pid = pid();
        let r = if sig.tid == 0 {
            // SAFETY: a 128-byte siginfo on this stack, read by the kernel only.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigqueueinfo,
                    pid,
                    sig.signo,
                    std::ptr::addr_of!(info),
                )
            }
        } else {
            // SAFETY: as above.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_tgsigqueueinfo,
                    pid,
                    sig.tid,
                    sig.signo,
                    std::ptr::addr_of!(info),
                )
            }
        };
        if r == 0 {
            return Sent::Queued;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => Sent::Full,
            // ESRCH: the thread exited. Any other error (none is expected for a valid signal
            // to ourselves) means the same to the timer: nothing can be delivered.
            _ => Sent::Gone,
        }
    }

    fn pending(&self, tid: i32, signo: i32) -> Pending {
        let yes = |b: bool| if b { Pending::Yes } else { Pending::No };
        if tid != 0 {
            // The calling thread is the target (an application's thread that leads while it
            // waits for its own timer's signal: `Timers::wait_leading`; a tempora thread is
            // never one, and skips the `gettid`) and blocks the signal: a miss of
            // `own_pending` is certain, at two cheap system calls instead of a `/proc` read.
            // A hit may be the process's: the status file says.
            if !crate::sync::blocks_all_signals()
                && tid == gettid()
                && own_pending(signo) == Some(false)
            {
                return Pending::No;
            }
            // A thread's own set: its status file (`sigpending` would report the caller's,
            // and only what the caller blocks).
            return match status_mask(tid, b"SigPnd:") {
                Status::Mask(m) => yes(m & bit(signo) != 0),
                Status::Gone => Pending::No,
                Status::Unreadable => Pending::Yes,
            };
        }
        // Blocked by the calling thread and not pending for it or the process, it is not
        // pending for the process: certain. A hit may be the thread's own: a tempora thread
        // (it blocks everything) has it confirmed now and then, an application's thread (its
        // own poll, or a receiver leading while it waits) by the process's set at once.
        match own_pending(signo) {
            Some(false) => Pending::No,
            Some(true) if crate::sync::blocks_all_signals() => Pending::Unconfirmed,
            _ => yes(self.confirm(signo)),
        }
    }

    fn confirm(&self, signo: i32) -> bool {
        // The process's set is `ShdPnd` in any of its threads' status.
        match status_mask(pid(), b"ShdPnd:") {
            Status::Mask(m) => m & bit(signo) != 0,
            Status::Gone | Status::Unreadable => true,
        }
    }

    fn ignored(&self, tid: i32, signo: i32) -> bool {
        if !self.disposition_ignores(signo) {
            return false;
        }
        // Blocked signals are never ignored (the handler may change before they are
        // unblocked). A process-directed signal is checked against the thread-group leader,
        // as the kernel does. Unreadable: taken as blocked (the signal is sent; the kernel
        // decides).
        let target = if tid == 0 { pid() } else { tid };
        match status_mask(target, b"SigBlk:") {
            Status::Mask(m) => m & bit(signo) == 0,
            Status::Gone | Status::Unreadable => false,
        }
    }

    fn disposition_ignores(&self, signo: i32) -> bool {
        let mut old = std::mem::MaybeUninit::<libc::sigaction>::uninit();
        // SAFETY: a query (no new action); the kernel writes `old`.
        if unsafe { libc::sigaction(signo, std::ptr::null(), old.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: written by the successful call above.
        let handler = unsafe { old.assume_init() }.sa_sigaction;
        handler == libc::SIG_IGN
            || handler == libc::SIG_DFL
                && matches!(
                    signo,
                    libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT
                )
    }
}

/// Whether `signo` is pending for the calling thread or the process, if the thread blocks it
/// (`sigpending` reports its own set with the process's, for what it blocks); `None` if it
/// does not block it, or a call failed. A tempora thread blocks every signal: its mask is not
/// asked.
fn own_pending(signo: i32) -> Option<bool> {
    let mut blocked = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut pending = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: a query of the thread's mask (no new one) and `sigpending` write the sets;
    // `sigismember` reads each only after its call succeeded.
    unsafe {
        if !crate::sync::blocks_all_signals()
            && (libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), blocked.as_mut_ptr()) != 0
                || libc::sigismember(blocked.as_ptr(), signo) != 1)
        {
            return None;
        }
        if libc::sigpending(pending.as_mut_ptr()) != 0 {
            return None;
        }
        Some(libc::sigismember(pending.as_ptr(), signo) == 1)
    }
}

/// The bit of `signo` in a signal mask as `/proc` prints it.
fn bit(signo: i32) -> u64 {
    1u64 << (signo - 1)
}

/// The process's ID, read once (a system call, which would otherwise be made per signal sent)
/// and read again in a child made by `fork(3)`, which has another (a fork handler forgets
/// it; a child made by a raw `clone` keeps the parent's, which tempora does not support).
fn pid() -> i32 {
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
    static PID: AtomicI32 = AtomicI32::new(0);
    /// Whether the fork handler is registered. Not a `Once`: a fork while another thread runs
    /// a `Once` leaves it running in the child for ever. Two threads may both register: two
    /// handlers that store 0 do no harm.
    static FORGOTTEN_AT_FORK: AtomicBool = AtomicBool::new(false);
    extern "C" fn forget() {
        PID.store(0, Relaxed);
    }
    // Relaxed (all): the value is the process's, the same whoever stored it; a forked child
    // runs `forget` on its one thread before fork returns.
    let pid = PID.load(Relaxed);
    if pid != 0 {
        return pid;
    }
    // `forget` only stores to an atomic, as a child handler must.
    if !crate::sync::fork::at_fork_child(&FORGOTTEN_AT_FORK, forget) {
        // Without the handler a cached value could outlive a fork: read it every time.
        return std::process::id() as i32;
    }
    let pid = std::process::id() as i32;
    PID.store(pid, Relaxed);
    pid
}

/// The calling thread's ID.
pub(crate) fn gettid() -> i32 {
    // SAFETY: `gettid` has no preconditions.
    unsafe { libc::gettid() }
}

/// Whether `tid` is a thread of this process (its directory under `/proc/self/task`).
fn is_our_thread(tid: i32) -> bool {
    if tid <= 0 {
        return false;
    }
    let mut path = PathBuf::new();
    path.push_str(b"/proc/self/task/");
    path.push_int(tid);
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a NUL-terminated path on this stack; `stat` writes `st`.
    unsafe { libc::stat(path.as_ptr(), st.as_mut_ptr()) == 0 }
}

/// What a thread's status file says of one mask.
enum Status {
    Mask(u64),
    /// The thread exited (`ENOENT` or `ESRCH` opening its file).
    Gone,
    /// Any other failure (no file descriptor left, no memory): the caller assumes the
    /// answer that keeps the one-pending rule (pending, blocked).
    Unreadable,
}

/// The mask on the line starting with `key` of thread `tid`'s `/proc/self/task/<tid>/status`.
/// Read with plain system calls into a stack buffer: no allocation.
fn status_mask(tid: i32, key: &[u8]) -> Status {
    let mut path = PathBuf::new();
    path.push_str(b"/proc/self/task/");
    path.push_int(tid);
    path.push_str(b"/status");
    // SAFETY: a NUL-terminated path on this stack.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => Status::Gone,
            _ => Status::Unreadable,
        };
    }
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reads into the unfilled rest of `buf`.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    // SAFETY: `fd` is ours, closed once.
    unsafe { libc::close(fd) };
    parse_mask(&buf[..len], key).map_or(Status::Unreadable, Status::Mask)
}

/// The hexadecimal mask after `key` in a status file's text.
fn parse_mask(text: &[u8], key: &[u8]) -> Option<u64> {
    let start = text.windows(key.len()).position(|w| w == key)? + key.len();
    let hex = text[start..]
        .iter()
        .skip_while(|c| c.is_ascii_whitespace())
        .take_while(|c| c.is_ascii_hexdigit());
    let mut v = 0u64;
    for &c in hex {
        v = v << 4 | u64::from((c as char).to_digit(16)?);
    }
    Some(v)
}

/// A NUL-terminated path built on the stack.
struct PathBuf {
    buf: [u8; 64],
    len: usize,
}

impl PathBuf {
    fn new() -> PathBuf {
        PathBuf {
            buf: [0; 64],
            len: 0,
        }
    }

    fn push_str(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - 1 - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_int(&mut self, v: i32) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        let mut v = v.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push_str(&digits[i..]);
    }

    fn as_ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    /// The cached pid is the child's own after a fork (a signal to the parent's pid would
    /// reach the wrong process).
    #[test]
    fn the_cached_pid_is_forgotten_in_a_forked_child() {
        assert_eq!(pid(), std::process::id() as i32);
        // SAFETY: the child only reads atomics, makes the getpid and _exit system calls.
        unsafe {
            let child = libc::fork();
            assert!(child >= 0);
            if child == 0 {
                let ok = pid() == libc::getpid();
                libc::_exit(i32::from(!ok));
            }
            // A child stuck in the fork (a lock of the parent's) is killed, not waited for.
            let status = crate::sync::fork::child_status(child).expect("the child finished");
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "{status}"
            );
        }
    }

    #[test]
    fn the_calling_thread_is_ours_and_pid_1_is_not() {
        assert!(is_our_thread(gettid()));
        assert!(!is_our_thread(0));
        assert!(!is_our_thread(-5));
        // PID 1's thread is not under our /proc/self/task.
        assert!(!is_our_thread(1) || std::process::id() == 1);
    }

    #[test]
    fn the_status_file_gives_the_blocked_mask() {
        let Status::Mask(blk) = status_mask(gettid(), b"SigBlk:") else {
            panic!("our own status");
        };
        // The test harness's threads block nothing but what the runtime blocks; whatever it
        // is, it is what `pthread_sigmask` reports.
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: a query of the calling thread's mask into `set`.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), set.as_mut_ptr()) };
        for signo in 1..=SIGNO_MAX {
            // SAFETY: `set` was written above.
            let member = unsafe { libc::sigismember(set.as_ptr(), signo) } == 1;
            if (32..=33).contains(&signo) {
                continue; // glibc's internal signals: hidden from its view of the mask
            }
            assert_eq!(blk & bit(signo) != 0, member, "signal {signo}");
        }
    }
}
