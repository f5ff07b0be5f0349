//! The process's fork generation: a number a `pthread_atfork` child handler bumps, so that a
//! service can tell at its first instruction that it was built in a parent process and is
//! now called in a forked child (`timers/mod.rs`, "Fork").
//!
//! The handler is registered before the first service is built ([`watch`]), and not through a
//! `Once`: a fork while another thread runs a `Once` leaves it running in the child for ever
//! (the same reason as `timers/signal.rs`'s pid cache). Two threads may both register; the
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
    if WATCHED.load(Relaxed) {
        return true;
    }
    // SAFETY: registers a child handler that only adds to an atomic.
    if unsafe { libc::pthread_atfork(None, None, Some(forked)) } != 0 {
        return false;
    }
    WATCHED.store(true, Relaxed);
    true
}

/// The fork generation of the calling process: the number of forks (since [`watch`]) that
/// separate it from the process that began the program.
#[inline]
pub(crate) fn generation() -> u32 {
    GENERATION.load(Relaxed)
}
