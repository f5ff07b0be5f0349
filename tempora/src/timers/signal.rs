//! Signals as the process sees them: a signal timer's target ([`SignalCell`]), and the
//! [`SignalPort`] through which the service queues a timer's signal and asks whether it is
//! still pending or would be ignored. The OS port ([`OsSignals`]) makes the system calls; tests
//! give the service a port they drive (`testing::TestSignals`), so that the rules of
//! `sigdeliver.rs` run under the manual clock.
//!
//! A timer's signal is queued with `rt_sigqueueinfo(2)` (to the process) or
//! `rt_tgsigqueueinfo(2)` (to one thread), with the `siginfo_t` a kernel timer's signal
//! carries: `si_code = SI_TIMER`, `si_timerid`, `si_overrun`, `si_value`. The kernel lets a
//! process queue any negative `si_code` to itself, and lays an `SI_TIMER` siginfo out as a
//! timer's for handlers, `sigwaitinfo` and `signalfd` alike, so a program reads the same fields
//! it reads from a kernel timer.
//!
//! Whether a signal is pending is read with `sigpending(2)` (the calling thread's set and the
//! process's) or, for another thread's set, from its `/proc/self/task/<tid>/status`
//! (`SigPnd`). Whether a signal would be ignored is the kernel's own rule: its disposition
//! ignores it (`SIG_IGN`, or `SIG_DFL` for a signal whose default is to ignore) and the thread
//! the kernel would deliver it to does not block it (`SigBlk`).

use super::types::Notify;
use crate::error::Error;
use crate::sync::{AtomicI32, Ordering};

/// The highest signal number the kernel accepts (`_NSIG`): `timer_create` refuses
/// `sigev_signo` outside `1..=64` with `EINVAL`.
pub(crate) const SIGNO_MAX: i32 = 64;

/// Where a signal timer's signal goes, and what it carries (the timer's `Attached` part).
#[derive(Debug)]
pub(crate) struct SignalCell {
    pub(crate) signo: i32,
    /// The target thread's ID; 0 for the process.
    pub(crate) tid: i32,
    /// `si_value` (ignored when `value_is_id`).
    pub(crate) value: usize,
    /// `si_value` is the timer's ID (a NULL sigevent's meaning).
    pub(crate) value_is_id: bool,
    /// The periods the outstanding (or owed) signal's own expiry was late by: reported in its
    /// `si_overrun` and, once it is seen delivered, by `getoverrun` (`sigdeliver.rs`).
    /// Written under the timer's lock.
    pub(crate) lateness: AtomicI32,
    /// Sends refused for want of room (`EAGAIN`) in a row: the backoff of the next retry.
    pub(crate) tries: AtomicI32,
}

impl SignalCell {
    /// The cell of a `Notify::Signal`, `ThreadSignal` or `SignalWithId`, checked as the
    /// kernel's `timer_create` checks a sigevent: a thread outside the process, then a signal
    /// number outside `1..=64`, are [`Error::InvalidSignal`] (`EINVAL`).
    pub(crate) fn new(notify: &Notify) -> Result<SignalCell, Error> {
        let (tid, signo, value, value_is_id) = match *notify {
            Notify::Signal { signo, value } => (0, signo, value, false),
            Notify::ThreadSignal { tid, signo, value } => (tid, signo, value, false),
            Notify::SignalWithId { signo } => (0, signo, 0, true),
            _ => unreachable!("only signal notifications have a signal cell"),
        };
        if tid != 0 && !is_our_thread(tid) {
            return Err(Error::InvalidSignal(
                "the thread is not one of this process",
            ));
        }
        if !(1..=SIGNO_MAX).contains(&signo) {
            return Err(Error::InvalidSignal("the signal number is outside 1..=64"));
        }
        Ok(SignalCell {
            signo,
            tid,
            value,
            value_is_id,
            lateness: AtomicI32::new(0),
            tries: AtomicI32::new(0),
        })
    }

    /// `lateness` (under the timer's lock).
    pub(crate) fn lateness(&self) -> i32 {
        // Relaxed (this and the other accessors): written and read under the timer's lock.
        self.lateness.load(Ordering::Relaxed)
    }

    pub(crate) fn set_lateness(&self, v: i32) {
        self.lateness.store(v, Ordering::Relaxed);
    }

    pub(crate) fn tries(&self) -> i32 {
        self.tries.load(Ordering::Relaxed)
    }

    pub(crate) fn set_tries(&self, v: i32) {
        self.tries.store(v, Ordering::Relaxed);
    }
}

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

/// Queues timers' signals and reads the process's signal state: the OS, or a test's.
pub(crate) trait SignalPort: Send + Sync {
    /// Queues `sig`.
    fn send(&self, sig: &TimerSignal) -> Sent;
    /// Whether signal `signo` is pending for thread `tid` (0: for the process, as the calling
    /// thread sees it).
    fn pending(&self, tid: i32, signo: i32) -> bool;
    /// Whether the kernel would discard `signo` sent to `tid` (0: the process) now.
    fn ignored(&self, tid: i32, signo: i32) -> bool;
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
        // SAFETY: `getpid` has no preconditions.
        let pid = unsafe { libc::getpid() };
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

    fn pending(&self, tid: i32, signo: i32) -> bool {
        if tid == 0 || tid == gettid() {
            let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            // SAFETY: `sigpending` writes the set; `sigismember` reads it after that.
            unsafe {
                if libc::sigpending(set.as_mut_ptr()) != 0 {
                    return true;
                }
                return libc::sigismember(set.as_ptr(), signo) == 1;
            }
        }
        // Another thread's set: its status file. Unreadable (the thread is gone): not pending.
        status_mask(tid, b"SigPnd:").is_some_and(|m| m & bit(signo) != 0)
    }

    fn ignored(&self, tid: i32, signo: i32) -> bool {
        let mut old = std::mem::MaybeUninit::<libc::sigaction>::uninit();
        // SAFETY: a query (no new action); the kernel writes `old`.
        if unsafe { libc::sigaction(signo, std::ptr::null(), old.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: written by the successful call above.
        let handler = unsafe { old.assume_init() }.sa_sigaction;
        let ignores = handler == libc::SIG_IGN
            || handler == libc::SIG_DFL
                && matches!(
                    signo,
                    libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT
                );
        if !ignores {
            return false;
        }
        // Blocked signals are never ignored (the handler may change before they are
        // unblocked). A process-directed signal is checked against the thread-group leader,
        // as the kernel does.
        let target = if tid == 0 {
            // SAFETY: `getpid` has no preconditions.
            unsafe { libc::getpid() }
        } else {
            tid
        };
        status_mask(target, b"SigBlk:").is_none_or(|m| m & bit(signo) == 0)
    }
}

/// The bit of `signo` in a signal mask as `/proc` prints it.
fn bit(signo: i32) -> u64 {
    1u64 << (signo - 1)
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

/// The mask on the line starting with `key` of thread `tid`'s `/proc/self/task/<tid>/status`.
/// Read with plain system calls into a stack buffer: no allocation.
fn status_mask(tid: i32, key: &[u8]) -> Option<u64> {
    let mut path = PathBuf::new();
    path.push_str(b"/proc/self/task/");
    path.push_int(tid);
    path.push_str(b"/status");
    // SAFETY: a NUL-terminated path on this stack.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
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
    let text = &buf[..len];
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
        let blk = status_mask(gettid(), b"SigBlk:").expect("our own status");
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
