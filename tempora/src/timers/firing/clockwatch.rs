//! The realtime-clock watch: a thread that waits for the wall clock to be set
//! (`TFD_TIMER_CANCEL_ON_SET`) and fires every alarm, so that absolute `CLOCK_REALTIME` timers
//! are re-evaluated at once. It serves the service's inspection endpoint too
//! (`inspect/endpoint.rs`), waiting on its socket beside the timerfd, so the endpoint needs no
//! thread of its own. Started with the drivers (`driver.rs`, `Drivers::start`).

use crate::sync::Ordering;
use crate::timers::object::fd;
use crate::timers::shared::Core;
use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd};

/// What the realtime-clock watch serves beside its timerfd: a service's inspection endpoint
/// (`inspect/endpoint.rs`), whose listening socket the watch thread waits on too, so that it
/// needs no thread of its own and costs no timer call anything.
pub(crate) trait Serve: Send + Sync {
    /// The fd that is readable when a client waits.
    fn fd(&self) -> std::os::fd::RawFd;
    /// Serves the clients waiting now, without blocking for long: between its waits it calls
    /// `step`, which handles a clock step and says whether to go on (`false`: the service
    /// stops; end at once).
    fn serve(&self, core: &Core, step: &dyn Fn() -> bool);
}

/// Whether `fd` is readable within `ms` milliseconds.
pub(crate) fn ready(fd: std::os::fd::RawFd, ms: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd that lives for the call.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// Watches for the realtime clock being set (`timerfd` with `TFD_TIMER_CANCEL_ON_SET`) and
/// rings every driver, so absolute `CLOCK_REALTIME` timers are re-evaluated at once: those now
/// due fire, and a clock set back re-bases the realtime wheels (`Core::poll`).
pub(crate) struct ClockWatch {
    fd: OwnedFd,
}

impl ClockWatch {
    /// A timerfd that reports realtime clock steps, or `None` if the OS has none.
    pub(crate) fn new() -> Option<ClockWatch> {
        let fd = fd::timerfd(libc::CLOCK_REALTIME, false).ok()?;
        let w = ClockWatch { fd };
        w.watch().then_some(w)
    }

    /// Arms the timerfd at the far future, cancelled on a clock step: a read then returns
    /// only because the clock was set (or `stop` re-armed it to fire).
    fn watch(&self) -> bool {
        const FAR_NS: u64 = i32::MAX as u64 * 8 * 1_000_000_000;
        fd::arm(
            &self.fd,
            libc::TFD_TIMER_ABSTIME | libc::TFD_TIMER_CANCEL_ON_SET,
            FAR_NS,
        )
    }

    /// Blocks until the realtime clock is set (`true`) or the watch is stopped (`false`).
    fn wait(&self) -> bool {
        let mut buf = [0u8; 8];
        loop {
            // SAFETY: reads at most 8 bytes into `buf`, which lives for the call.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r >= 0 {
                return false; // it fired: `stop`
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECANCELED) => return self.watch(),
                _ => return false,
            }
        }
    }

    /// Makes the blocked `wait` return `false` (fires the timerfd 1 ns from now).
    pub(crate) fn stop(&self) {
        fd::arm(&self.fd, 0, 1);
    }

    /// The watcher thread's body; it serves `serve`'s clients too, if it has one.
    pub(crate) fn run(&self, core: &Core, serve: Option<&dyn Serve>) {
        let stopped = Cell::new(false);
        let waited = || match serve {
            None => self.wait(),
            Some(s) => self.wait_serving(core, s, &stopped),
        };
        while waited() && !core.health.shutdown.load(Ordering::Acquire) {
            core.wake.ring_all();
        }
    }

    /// `wait`, blocked in `poll(2)` on the timerfd and `s`'s fd at once: `s` serves its
    /// clients when its fd is readable, and handles a clock step between its own waits
    /// (`step`), so a client never delays the watch by more than such a wait.
    fn wait_serving(&self, core: &Core, s: &dyn Serve, stopped: &Cell<bool>) -> bool {
        let step = || {
            if !stopped.get() && ready(self.fd.as_raw_fd(), 0) {
                if self.wait() {
                    core.wake.ring_all();
                } else {
                    stopped.set(true);
                }
            }
            !stopped.get() && !core.health.shutdown.load(Ordering::Acquire)
        };
        loop {
            if stopped.get() {
                return false;
            }
            let mut fds = [self.fd.as_raw_fd(), s.fd()].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            // SAFETY: poll(2) on two pollfds that live for the call.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return self.wait();
            }
            if fds[0].revents != 0 {
                return self.wait();
            }
            if fds[1].revents != 0 && step() {
                s.serve(core, &step);
            }
        }
    }
}
