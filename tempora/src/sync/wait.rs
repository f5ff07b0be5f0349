//! A futex-style wait queue keyed by address.

/// A futex-style wait queue for one object: threads sleep on it only if a check
/// (`validate`) still says so, and a wake-up issued after the condition changed cannot fall
/// between a waiter's check and its sleep. Outside loom it is a Linux futex on its own word;
/// under loom, a mutex and condition variable with the same contract.
///
/// The futex protocol: a waiter counts itself in `waiters`, reads `seq` (T), runs `validate`,
/// and sleeps only while `seq` still equals T (the kernel checks it atomically with the
/// enqueue). [`WaitQueue::wake_all`] increments `seq` (R), after the condition change that
/// made it necessary, and calls the kernel only if a waiter is counted. Either R comes after T
/// in `seq`'s order, and the kernel sees the new value and does not let the waiter sleep (or
/// the wake finds it queued), or the waiter read R's value at T, and then `validate` sees the
/// condition R followed. The count and `seq` are `SeqCst` on both sides, so a waker that
/// reads no waiter wrote R before the waiter read `seq`.
///
/// Why not a user-space parking lot (`parking_lot_core`, a process-wide table of queues under
/// per-bucket locks): a `fork` while another thread of the parent holds one of those locks, or
/// is growing the table, leaves the child's table locked or half made, and a thread of the
/// child that waits on it waits for ever (a forked child's driver did, 1 or 2 in 100 children
/// of a busy parent). A futex is the kernel's: the child has nothing of the parent's waits.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    #[cfg(not(loom))]
    seq: std::sync::atomic::AtomicU32,
    #[cfg(not(loom))]
    waiters: std::sync::atomic::AtomicU32,
    #[cfg(loom)]
    wait: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl WaitQueue {
    /// Sleeps if `validate` returns true, until woken or until `deadline` (ignored under loom,
    /// which has no time). Returns false if it timed out; it may return early (a signal, a
    /// wake-up meant for an earlier condition): callers check their condition and loop.
    pub(crate) fn wait(
        &self,
        validate: impl FnOnce() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        #[cfg(not(loom))]
        {
            use std::sync::atomic::Ordering::SeqCst;
            self.waiters.fetch_add(1, SeqCst);
            // SeqCst: see the type's doc (T).
            let token = self.seq.load(SeqCst);
            let mut timed_out = false;
            if validate() {
                let timeout = deadline.map(|d| {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    libc::timespec {
                        tv_sec: left.as_secs().min(i64::MAX as u64) as libc::time_t,
                        tv_nsec: left.subsec_nanos() as libc::c_long,
                    }
                });
                if timeout.is_some_and(|t| t.tv_sec == 0 && t.tv_nsec == 0) {
                    timed_out = true;
                } else {
                    let ts = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const _);
                    // SAFETY: FUTEX_WAIT on this queue's own word, with a relative timeout
                    // (on CLOCK_MONOTONIC, `Instant`'s clock) that lives across the call or
                    // none; it reads the word and nothing else of ours.
                    let r = unsafe {
                        libc::syscall(
                            libc::SYS_futex,
                            self.seq.as_ptr(),
                            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                            token,
                            ts,
                        )
                    };
                    timed_out = r != 0
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT);
                }
            }
            self.waiters.fetch_sub(1, SeqCst);
            !timed_out
        }
        #[cfg(loom)]
        {
            let _ = deadline;
            let guard = self.wait.0.lock().unwrap();
            if validate() {
                drop(self.wait.1.wait(guard).unwrap());
            }
            true
        }
    }

    /// Wakes every sleeper (R).
    pub(crate) fn wake_all(&self) {
        #[cfg(not(loom))]
        {
            use std::sync::atomic::Ordering::SeqCst;
            // SeqCst: see the type's doc.
            self.seq.fetch_add(1, SeqCst);
            if self.waiters.load(SeqCst) != 0 {
                // SAFETY: FUTEX_WAKE on this queue's own word; it reads nothing of ours.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        self.seq.as_ptr(),
                        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                        i32::MAX,
                    );
                }
            }
        }
        #[cfg(loom)]
        {
            drop(self.wait.0.lock().unwrap());
            self.wait.1.notify_all();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A child forked while another thread of the parent is inside a wait's check gets on
    /// with its own waits and wake-ups: nothing of the parent's waits is left locked in it.
    /// (With a user-space parking lot the check runs under a process-wide bucket lock, which
    /// the child inherits held: its first wake-up on that queue waited for ever.)
    #[test]
    fn a_fork_in_the_middle_of_a_wait_leaves_the_child_free() {
        static QUEUE: WaitQueue = WaitQueue {
            seq: std::sync::atomic::AtomicU32::new(0),
            waiters: std::sync::atomic::AtomicU32::new(0),
        };
        let queue = &QUEUE;
        let (inside, release) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let waiter = {
            let (inside, release) = (inside.clone(), release.clone());
            std::thread::spawn(move || {
                queue.wait(
                    || {
                        inside.wait();
                        release.wait();
                        false
                    },
                    None,
                )
            })
        };
        inside.wait();
        // SAFETY: the child only wakes and waits on the queue, then exits with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            queue.wake_all();
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1);
            let in_time = queue.wait(|| true, Some(deadline));
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(if in_time { 1 } else { 0 }) };
        }
        assert!(pid > 0, "fork failed");
        release.wait();
        assert!(
            waiter.join().unwrap(),
            "the parent's check said not to sleep"
        );
        let status = super::super::fork::child_status(pid)
            .expect("the child's wake-up waited for the parent's wait");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's wait timed out as asked"
        );
    }
}
