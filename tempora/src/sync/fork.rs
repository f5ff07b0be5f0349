//! The process's fork generation: a number a `pthread_atfork` child handler bumps, so that a
//! service can tell at its first instruction that it was built in a parent process and is
//! now called in a forked child (`timers/mod.rs`, "Fork").
//!
//! The handler is registered before the first service is built ([`watch`]), and not through a
//! `Once`: a fork while another thread runs a `Once` leaves it running in the child for ever
//! (the same reason as `timers/object/signal.rs`'s pid cache). Two threads may both register; the
//! generation then moves by two per fork, and only its changing matters.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// Bumped in every child `fork(3)` makes once [`watch`] has registered the handler.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// Whether the handler is registered (in this process or the parent it was forked from: the
/// handlers of `pthread_atfork` are inherited).
static WATCHED: AtomicBool = AtomicBool::new(false);

extern "C" fn forked() {
    // Relaxed (all): the child has one thread when this runs, before `fork` returns in it.
    GENERATION.fetch_add(1, Relaxed);
}

/// Registers the fork handler, if no thread did yet; called before a service records the
/// generation it is built in. `false` if the C library refused the registration (no
/// memory): forks are then not seen.
pub(crate) fn watch() -> bool {
    at_fork_child(&WATCHED, forked)
}

/// Registers `child` as a `pthread_atfork` child handler unless `registered` says it is
/// (in this process or the parent it was forked from: the handlers are inherited), and then
/// says so. Not through a `Once` (the module doc): two threads may both register, so `child`
/// must be harmless twice. It runs in the child on its one thread before `fork` returns there,
/// so it may touch only atomics and constant-initialized thread-locals (no allocation, no
/// lock). `false` if the C library refused the registration (no memory).
pub(crate) fn at_fork_child(registered: &AtomicBool, child: extern "C" fn()) -> bool {
    if registered.load(Relaxed) {
        return true;
    }
    // SAFETY: registers a child handler; what it may do is the caller's contract (above).
    if unsafe { libc::pthread_atfork(None, None, Some(child)) } != 0 {
        return false;
    }
    registered.store(true, Relaxed);
    true
}

/// The fork generation of the calling process: the number of forks (since [`watch`]) that
/// separate it from the process that began the program.
#[inline]
pub(crate) fn generation() -> u32 {
    GENERATION.load(Relaxed)
}

/// A value computed once per process and then read, that a fork can never leave half made:
/// the first callers compute it (more than one may, each with the same result up to what the
/// value measures), and one compare-exchange publishes the first, so nobody waits for anybody.
/// A `OnceLock` being initialized by another thread when the process forks stays
/// "initializing" for ever in the child, whose first reader then waits for ever. For the
/// process-wide values that a call on any service may need first (the clock's coarse lag, the
/// `Instant` anchor, the `membarrier` registration).
pub(crate) struct RaceOnce<T: 'static>(std::sync::atomic::AtomicPtr<T>);

impl<T: Send + Sync + 'static> RaceOnce<T> {
    pub(crate) const fn new() -> Self {
        RaceOnce(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The value, computed by `init` if no caller has published one yet.
    #[inline]
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &'static T {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        // Acquire: pairs with the publishing compare-exchange below.
        let p = self.0.load(Acquire);
        if !p.is_null() {
            // SAFETY: a published value is a leaked box, never freed.
            return unsafe { &*p };
        }
        let mine = Box::into_raw(Box::new(init()));
        match self
            .0
            .compare_exchange(std::ptr::null_mut(), mine, AcqRel, Acquire)
        {
            // SAFETY: `mine` is now published, and never freed.
            Ok(_) => unsafe { &*mine },
            Err(first) => {
                // SAFETY: `mine` was never shared.
                drop(unsafe { Box::from_raw(mine) });
                // SAFETY: `first` is published, never freed.
                unsafe { &*first }
            }
        }
    }
}

/// The wait status of child `pid`, which must finish at once: `None` if it has not within
/// 10 s (it is then killed), for the tests that fork while another thread is mid-way.
#[cfg(all(test, not(loom)))]
pub(crate) fn child_status(pid: libc::pid_t) -> Option<libc::c_int> {
    let mut status = 0;
    for _ in 0..1000 {
        // SAFETY: waits for our own child without blocking.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kills our own stuck child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A child forked while another thread of the parent is inside the first `get_or_init`
    /// gets a value (its own), where a `OnceLock` would leave it waiting for ever for a thread
    /// that does not exist in the child.
    #[test]
    fn a_fork_in_the_middle_of_the_first_init_leaves_the_child_free() {
        static VALUE: RaceOnce<u64> = RaceOnce::new();
        let (inside, release) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let initializer = {
            let (inside, release) = (inside.clone(), release.clone());
            std::thread::spawn(move || {
                *VALUE.get_or_init(|| {
                    inside.wait();
                    release.wait();
                    1
                })
            })
        };
        inside.wait();
        // SAFETY: the child only reads the value and exits with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let v = *VALUE.get_or_init(|| 2);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(if v == 2 { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork failed");
        release.wait();
        assert_eq!(
            initializer.join().unwrap(),
            1,
            "the parent's first init wins"
        );
        let status =
            child_status(pid).expect("the child waited for an init that was running in the parent");
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(*VALUE.get_or_init(|| 3), 1);
    }
}
