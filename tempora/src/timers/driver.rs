//! Background drivers: threads that sleep until the earliest expiry of the bases they serve,
//! then fire everything due on every base.
//!
//! Driver `k` of `n` serves the bases `b` with `b % n == k`: it sleeps until the earliest
//! expiry among them, and when it wakes it polls **all** bases, so a base whose timers fall due
//! at the same instant as another's needs no wake-up of its own (the kernel's timer-wheel
//! rework took the same approach for idle CPUs: a busy CPU handles the expired timers of idle
//! ones rather than waking each). With one driver (the default) OS wake-ups follow distinct expiry instants, not
//! bases × instants.
//!
//! Arming a timer earlier than a driver's current sleep wakes it; arming a later one does not.
//! How that race is closed is in `base.rs` ("Waking a sleeping driver") and at [`Doorbell`].
//!
//! Driver threads set their timer slack to 1 ns (`PR_SET_TIMERSLACK`), so the OS wakes them
//! when asked rather than up to 50 µs later (the default slack of a normal thread).

use super::base::{earliest_fire, from_monotonic, Doorbell, NO_EXPIRY};
use super::core::Core;
#[cfg(not(loom))]
use super::fd;
use crate::clock::{ClockId, CLOCKS};
use crate::sync::Ordering;
#[cfg(not(loom))]
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// One sleep of a driver: takes the doorbell's token (T), runs `prepare` (poll, then publish
/// the deadline under the base locks), and sleeps on the token until rung or until the
/// deadline `prepare` returns (`Some(None)`: until rung). `None` from `prepare`: something is
/// due already, no sleep. Returns whether it slept. The token is taken before anything is
/// published: that is the order `Doorbell`'s argument needs.
pub(crate) fn sleep_once(
    bell: &Doorbell,
    prepare: impl FnOnce() -> Option<Option<Instant>>,
) -> bool {
    let token = bell.token();
    match prepare() {
        Some(deadline) => {
            bell.sleep(token, deadline);
            true
        }
        None => false,
    }
}

/// The body of driver `k` of `n`.
pub(crate) fn run(core: &Core, k: usize, n: usize) {
    set_timer_slack();
    let bell = &core.bells[k];
    let mine: Vec<usize> = (k..core.bases.len()).step_by(n).collect();
    while !core.shutdown.load(Ordering::Acquire) {
        #[cfg(test)]
        if core.crash_driver.swap(false, Ordering::Relaxed) {
            panic!("tempora test: a driver dies");
        }
        let slept = sleep_once(bell, || {
            core.poll_now();
            // Where to sleep until: the earliest firing (`Wheel::next_fire`, not the next
            // re-placement visit) of the bases served, published under each base's lock (see
            // `base.rs`); the deadline only falls as bases are visited, so every published
            // value is at or after the final one.
            let now = core.now_all();
            let mut deadline = NO_EXPIRY;
            for &b in &mine {
                // A poisoned base (the poll just reported it) fires nothing again.
                let _ = core.bases[b].locked(|st| {
                    deadline = deadline.min(earliest_fire(core.res, core.max_deferral, st, &now));
                    for w in 0..CLOCKS {
                        st.sleep[w] = from_monotonic(core.res, w, deadline, &now);
                    }
                });
            }
            let mono = now[ClockId::Monotonic.index()];
            if deadline <= mono || core.shutdown.load(Ordering::Acquire) {
                return None;
            }
            Some(
                (deadline != NO_EXPIRY)
                    .then(|| Instant::now() + Duration::from_nanos(deadline - mono)),
            )
        });
        if slept {
            core.driver_wakeups.fetch_add(1, Ordering::Relaxed);
        }
        // Awake: arms need not ring until the next sleep is published.
        for &b in &mine {
            let _ = core.bases[b].locked(|st| st.sleep = [0; CLOCKS]);
        }
    }
}

/// Asks the OS to wake this thread at the time it asked for (1 ns of slack, not 50 µs).
fn set_timer_slack() {
    #[cfg(not(loom))]
    // SAFETY: prctl(2) with integer arguments only; it affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Watches for the realtime clock being set (`timerfd` with `TFD_TIMER_CANCEL_ON_SET`) and
/// rings every driver, so absolute `CLOCK_REALTIME` timers are re-evaluated at once: those now
/// due fire, and a clock set back re-bases the realtime wheels (`Core::poll`).
#[cfg(not(loom))]
pub(crate) struct ClockWatch {
    fd: OwnedFd,
}

#[cfg(not(loom))]
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

    /// The watcher thread's body.
    pub(crate) fn run(&self, core: &Core) {
        while self.wait() && !core.shutdown.load(Ordering::Acquire) {
            core.ring_all();
        }
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::super::base::{Base, Target, NO_EXPIRY};
    use super::*;
    use crate::wheel::Mode;
    use loom::sync::Arc;
    use std::ptr::NonNull;

    /// A driver going to sleep races a thread arming a timer earlier than anything the driver
    /// saw. Whatever the interleaving, the driver either sees the timer in its scan or is rung
    /// awake: loom reports a deadlock (the driver asleep forever, the armer done) otherwise.
    /// Taking the token after publishing the deadline instead of before, or comparing with
    /// `sleep` outside the base lock, makes this model fail.
    #[test]
    fn loom_driver_sleep_races_an_earlier_arm() {
        loom::model(|| {
            let base = Arc::new(Base::new([0; CLOCKS]));
            let bell = Arc::new(Doorbell::default());
            let (b2, bell2) = (base.clone(), bell.clone());
            let armer = loom::thread::spawn(move || {
                let timer = Target::timer(NonNull::dangling());
                let (_, ring) = b2
                    .locked_wheel(1, 10, |w| w.insert_with(10, Mode::PRECISE, timer))
                    .unwrap();
                if ring {
                    bell2.ring();
                }
            });
            // One driver iteration with nothing armed when it starts.
            sleep_once(&bell, || {
                let mut deadline = NO_EXPIRY;
                base.locked(|st| {
                    if let Some(t) = st.wheels[1].next_fire() {
                        deadline = deadline.min(t);
                    }
                    st.sleep = [deadline; CLOCKS];
                })
                .unwrap();
                (deadline == NO_EXPIRY).then_some(None)
            });
            armer.join().unwrap();
        });
    }
}
