//! Background drivers: threads that sleep until the earliest expiry of the bases they serve,
//! then fire everything due on every base.
//!
//! Driver `k` of `n` serves the bases `b` with `b % n == k`: it sleeps until the earliest
//! expiry among them, and when it wakes it polls **all** bases, so a base whose timers fall due
//! at the same instant as another's needs no wake-up of its own (the kernel's timer-wheel
//! rework took the same approach for idle CPUs: a busy CPU handles the expired timers of idle
//! ones rather than waking each). With one driver (the default) OS wake-ups follow distinct
//! expiry instants, not bases × instants.
//!
//! Arming a timer earlier than a driver's current sleep wakes it; arming a later one does not.
//! How that race is closed is in `base.rs` ("Waking a sleeping driver") and at [`Doorbell`].
//!
//! Driver threads set their timer slack to 1 ns (`PR_SET_TIMERSLACK`), so the OS wakes them
//! when asked rather than up to 50 µs later (the default slack of a normal thread).
//!
//! # Callbacks that block
//!
//! A driver runs the callbacks it fires itself, on its own thread: no hand-off, no extra
//! wake-up, so a callback's lateness is the driver's. It runs them *after* it has published
//! its next deadline, as if already asleep, and while it runs them a **spare** stands by
//! (`Standby`, at most [`Builder::spare_drivers`](super::Builder::spare_drivers) per
//! driver, started on first need): the driver arms a timerfd, and a spare blocked reading
//! it takes the driver's place when it fires. It fires at that deadline, that is when
//! another timer falls due while the callbacks still run; `CALL_GRACE_NS` (0.5 ms) after a
//! call started while other calls of the batch wait behind it; and at the expiry of any arm
//! earlier than the deadline (the arm rings the driver as usual, and the ring also moves
//! the timerfd: `Standby::kick`). The spare then leads (polls, sleeps, runs callbacks with a
//! spare of its own standing by); the driver, when its callback returns, finds it was
//! replaced, runs what is left in the list below, and follows. Callbacks the driver
//! collected and had not started are in a shared list that the new leader runs too. A
//! timer the new leader finds due while its own callback still runs on the old one is not
//! called beside it: the expiry is folded into that call (`serial.rs`).
//!
//! **The rule: a thread that polls is never inside a callback.** A driver's leader runs
//! callbacks only with a spare standing by; spares are started on demand, up to
//! [`Builder::spare_drivers`](super::Builder::spare_drivers) per driver (default 64). When
//! none can stand by (every spare is inside a callback and the cap is reached, or the OS
//! refused a thread), the leader runs none: it leaves them in the shared list and goes on
//! polling and sleeping as if it had no callbacks, so queue, none and signal timers (fired
//! inside the poll) never wait for a callback. Wake-ups of async tasks (a queue event's
//! receiver, a sleep) are not left: the leader runs them itself, as a waker must not block.
//! A thread returning from a callback runs the list before it follows again (it checks the
//! list, and the leader checks for a follower, under the list's lock, so no call is left
//! behind with every thread idle: `standby::Crew`, loom-checked there).
//!
//! The bounds, per driver, while callbacks block:
//!
//! - A queue, none or signal timer, a sleep, and an arm's ring: delayed by no callback, however
//!   many block, beyond the thread wake-up of a hand-over (the tests
//!   `a_blocked_callback_delays_no_other_timer_beyond_the_bound`,
//!   `ten_blocked_callbacks_stop_no_other_timer` and
//!   `past_the_spare_cap_blocked_callbacks_delay_only_callbacks` hold a bound well under the
//!   time their callbacks block). One gap: a spare counts as standing by from its start, so
//!   when the one standing by was started for this very call, the wait includes its
//!   thread's first turn, which a heavily loaded machine has delayed by up to a second.
//! - A callback, any owner's: while fewer than `spare_drivers` callbacks block at once, as
//!   above, plus, for a call queued behind blocking ones in the same batch, a grace and a
//!   hand-over for each call ahead of it (the driver and its spares are `spare_drivers + 1`
//!   threads, one of which polls). With `spare_drivers` blocked, it waits in the list (in
//!   the order its expiry was taken) for the first of them to return: the only wait, and the
//!   only one tempora cannot shorten.
//!   Expiries of its own timer meanwhile fold into that call (`serial.rs`), so one timer
//!   holds at most one thread, and a timer whose callback blocks on every expiry cannot eat
//!   the cap by itself.
//! - `spare_drivers(0)`: no spares and no standby; the driver runs callbacks itself, and one
//!   that blocks stops every timer the driver serves (the choice of a program that wants no
//!   thread but the driver and whose callbacks never block).
//!
//! Why this design. Running every callback off the driver (a pool fed by the driver, as
//! glibc starts a thread per `SIGEV_THREAD` expiry) costs a hand-off and a wake-up of another
//! thread per call, on every expiry; the leader running callbacks itself costs neither, and
//! its lateness stays its own, which is what a driver that polls on time is for. Spares that
//! grow on demand keep that cheap path (a spare is started only when the leader has calls and
//! nobody stands by) and leave the cap as the one configuration. Leaving the calls in the
//! list when no spare can stand by is what makes the rule hold at the cap and when thread
//! creation fails, where a leader running them itself would stop the poll.
//!
//! **Idle spares retire.** A thread following waits on the fd for at most `SPARE_IDLE`
//! (1 s) while another thread follows too; if no hand-over came meanwhile, it retires: it
//! ends, counted neither as following nor as started (`standby::Crew::retire`, decided under
//! the list's lock, and only while another thread still follows, so a leader that counted a
//! follower keeps one: loom-checked there). The last follower waits without a limit. So
//! about `SPARE_IDLE` after a burst of blocked callbacks has returned, each driver is back
//! to itself and one spare standing by (the test `tests/spares.rs` holds the thread count
//! to that), and a later burst starts spares again, up to the cap. Idle, a driver's
//! threads make no wake-ups: a follower with company wakes once, to retire.
//!
//! The default cap (64 per driver): high enough that a program whose few dozen
//! `SIGEV_THREAD` functions block at once (the glibc habit: one thread each) still has every
//! callback on time, low enough that a bug making every callback block cannot exhaust the
//! process's threads through tempora; spares idle for a second retire, down to one per
//! driver (its stack mapped, a few pages touched, no CPU). Costs on the fire path: two `timerfd_settime`
//! calls per wake-up that runs callbacks (and one more per half grace a batch runs with
//! calls queued), none when it runs none (queue timers), and no wake-up of anyone unless a
//! callback outlives the deadline, an earlier arm's expiry, or the grace.
//!
//! The hand-over is decided by one word (`standby::Handover`: a generation and an
//! "in callbacks" bit): the leader sets the bit before its callbacks and clears it after with
//! a compare-exchange; a spare takes over with a compare-exchange that clears it and bumps
//! the generation. Exactly one succeeds, and a leader's clear fails after any takeover, even
//! once the new leader has set the bit again. A ring cannot slip between the deadline the
//! leader armed and its callbacks: the leader sets the bit and then re-reads the doorbell,
//! the ringer increments the doorbell and then reads the bit, a SeqCst fence between each,
//! so one of them sees the other and the timerfd is moved by one of them (loom:
//! `standby.rs`). Where the timerfd fires is kept with it under one lock
//! (`standby::FdPlan`): only the current leader moves it (a leader replaced meanwhile
//! would otherwise disarm the fd its successor armed), and never past a ring's kick (a
//! re-arm discards a firing nobody has read yet). The standby's state lives in
//! `standby.rs`; this module runs the protocol.

use super::core::Core;
use super::doorbell::{Doorbell, NO_EXPIRY};
#[cfg(not(loom))]
use super::fd;
use super::health::DRIVER_DIED;
use super::serial::Call;
#[cfg(not(loom))]
use super::standby::{Next, Standby, Steps as _};
use super::wake::{earliest_fire, from_monotonic};
#[cfg(not(loom))]
use crate::clock::ClockSource;
use crate::clock::{ClockId, CLOCKS};
use crate::error::Error;
use crate::sync::Ordering;
use std::cell::{Cell, RefCell};
#[cfg(not(loom))]
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One sleep of a driver: takes the doorbell's token (T), runs `prepare` (poll, then publish
/// the deadline under the base locks), runs `between` with the token and the deadline (the
/// callbacks the poll collected: "Callbacks that block"), and sleeps on the token until rung
/// or until the deadline `prepare` returned (`Some(None)`: until rung). `None` from `prepare`:
/// something is due already, no sleep; `false` from `between`: a spare took over, no sleep.
/// Returns whether it slept. The token is taken before anything is published: that is the
/// order `Doorbell`'s argument needs; a ring during `between` makes the sleep return at once.
pub(crate) fn sleep_once(
    bell: &Doorbell,
    prepare: impl FnOnce() -> Option<Option<Instant>>,
    between: impl FnOnce(u64, Option<Option<Instant>>) -> bool,
) -> Slept {
    let token = bell.token();
    let deadline = prepare();
    if !between(token, deadline) {
        return Slept::Handed;
    }
    match deadline {
        Some(deadline) => {
            bell.sleep(token, deadline);
            Slept::Yes
        }
        None => Slept::No,
    }
}

/// What one `sleep_once` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slept {
    Yes,
    No,
    /// A spare took the driver's place while it ran callbacks: it follows now.
    Handed,
}

/// The body of driver `k` of `n`, and of its spares: lead until a spare takes over, then
/// follow until taking over again, until the service stops.
pub(crate) fn run(core: &Arc<Core>, k: usize, n: usize) {
    set_timer_slack();
    // Room for a batch of calls in the standby's queue, made as the thread starts, so that
    // running callbacks later does not allocate (the `timers` module doc, "Memory").
    #[cfg(not(loom))]
    if let Some(s) = core.wake.standby.get(k) {
        s.pending().reserve(core.batch);
    }
    while lead(core, k, n) {
        if !follow(core, k) {
            return;
        }
    }
}

/// Drives bases `k, k + n, ...`: poll, publish the next deadline, run the callbacks, sleep.
/// `true` if a spare took over (the caller follows), `false` once the service stops.
fn lead(core: &Arc<Core>, k: usize, n: usize) -> bool {
    let bell = &core.wake.bells[k];
    let mine: Vec<usize> = (k..core.bases.len()).step_by(n).collect();
    let calls = RefCell::new(Vec::new());
    // The doorbell's token of the current sleep: a ring since then woke it early.
    let slept_on = Cell::new(0);
    while !core.health.shutdown.load(Ordering::Acquire) {
        #[cfg(test)]
        if core.crash_driver.swap(false, Ordering::Relaxed) {
            panic!("tempora test: a driver dies");
        }
        let deadline = Cell::new(NO_EXPIRY);
        let slept = sleep_once(
            bell,
            || {
                core.poll_collect(&mut calls.borrow_mut());
                let mut deadline_ns = NO_EXPIRY;
                // Where to sleep until: the earliest firing (`Wheel::next_fire`, not the next
                // re-placement visit) of the bases served, published under each base's lock
                // (see `base.rs`); the deadline only falls as bases are visited, so every
                // published value is at or after the final one.
                let now = core.now_all();
                for &b in &mine {
                    // A poisoned base (the poll just reported it) fires nothing again.
                    let _ = core.bases[b].locked(|st| {
                        let fire = earliest_fire(core.res, core.max_deferral, st, &now);
                        deadline_ns = deadline_ns.min(fire);
                        for w in 0..CLOCKS {
                            st.sleep[w] = from_monotonic(core.res, w, deadline_ns, &now);
                        }
                    });
                }
                deadline.set(deadline_ns);
                let mono = now[ClockId::Monotonic.index()];
                if deadline_ns <= mono || core.health.shutdown.load(Ordering::Acquire) {
                    return None;
                }
                Some(
                    (deadline_ns != NO_EXPIRY)
                        .then(|| Instant::now() + Duration::from_nanos(deadline_ns - mono)),
                )
            },
            |token, _| {
                slept_on.set(token);
                run_calls(core, k, &mut calls.borrow_mut(), token, deadline.get())
            },
        );
        match slept {
            Slept::Handed => return true,
            Slept::Yes => {
                core.drivers.wakeups.fetch_add(1, Ordering::Relaxed);
            }
            Slept::No => {}
        }
        // Awake: arms need not ring until the next sleep is published. A sleep that ran to
        // its deadline, or was not slept, leaves the published deadlines past, where only an
        // arm due already reaches them (and that one should ring: the next sleep returns at
        // once); a ring leaves them ahead on the bases that did not ring, so only then are
        // they cleared, under each base's lock. (A wake-up with neither leaves them ahead
        // too: at most one needless ring per base, as a ring clears its base's.)
        if bell.token() != slept_on.get() {
            for &b in &mine {
                let _ = core.bases[b].locked(|st| st.sleep = [0; CLOCKS]);
            }
        }
    }
    false
}

/// Runs the callbacks a driver's poll collected, with a spare standing by (when the service
/// has spares) to take over at `deadline` or at an earlier arm's ring. `false` if one did.
fn run_calls(core: &Arc<Core>, k: usize, calls: &mut Vec<Call>, token: u64, deadline: u64) -> bool {
    #[cfg(not(loom))]
    if let Some(s) = core.wake.standby.get(k) {
        return lead_calls(s, core, k, calls, token, deadline);
    }
    let _ = (k, token, deadline);
    calls.drain(..).for_each(|c| core.run_call(c));
    true
}

/// Waits as driver `k`'s spare until it takes over: `true`, or `false` once the service
/// stops.
fn follow(core: &Arc<Core>, k: usize) -> bool {
    #[cfg(not(loom))]
    if let Some(s) = core.wake.standby.get(k) {
        return follow_standby(s, core);
    }
    let _ = (core, k);
    false
}

/// Asks the OS to wake this thread at the time it asked for (1 ns of slack, not 50 µs).
fn set_timer_slack() {
    #[cfg(not(loom))]
    // SAFETY: prctl(2) with integer arguments only; it affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(not(loom))]
/// How long a call may hold up the calls queued behind it before a spare takes them over
/// ("Callbacks that block"): long enough that a batch of quick callbacks runs on one thread
/// with few re-arms of the standby fd (at most one per half of it), short against the
/// lateness a blocking callback would cause.
const CALL_GRACE_NS: u64 = 500_000;

#[cfg(not(loom))]
/// The leader runs `calls` (and any left by a leader before it) with a follower standing
/// by, armed to take over at `deadline` (monotonic ns; `NO_EXPIRY`: only if rung), or
/// `CALL_GRACE_NS` after a call starts while others wait behind it. `false` if one took
/// over (the caller follows from now on).
///
/// With no follower to stand by (every spare runs a callback and no more may start, or the
/// OS refused a thread), the leader runs no callback: it leaves them in the shared list for
/// the threads in callbacks to run as they return, and goes on polling (`true`). Only with
/// no other thread at all (no spare could ever start) does it run them itself, unguarded.
/// A thread that was replaced runs the list too, and joins the followers once it finds the
/// list empty: that check and the leader's "is anyone following?" are made under the list's
/// lock, so a call is never left in the list with every thread waiting on the fd.
fn lead_calls(
    s: &Standby,
    core: &Arc<Core>,
    k: usize,
    calls: &mut Vec<Call>,
    token: u64,
    deadline: u64,
) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    if calls.is_empty() && s.pending().is_empty() {
        return true;
    }
    s.pending().extend(calls.drain(..));
    // Guarded once a follower stands by: decided again before each call while unguarded, as
    // a leader replaced earlier may start following meanwhile.
    let mut held = None;
    loop {
        if held.is_none() && (s.crew.following.load(Relaxed) > 0 || start_spare(s, core, k)) {
            held = Some(s.begin(&core.wake.bells[k], token));
        }
        let (call, more) = match s.crew.next(held, &s.state, |c| matches!(c, Call::Wake(_))) {
            Next::Run(call, more) => (call, more),
            // A thread back from its callbacks follows now: stand it by.
            Next::StandBy => continue,
            Next::Leave => {
                s.deferred.fetch_add(1, Relaxed);
                return true;
            }
            Next::Done(kept) => {
                if kept && held.is_some() {
                    s.end();
                }
                return kept;
            }
        };
        if let Some(held) = held {
            let now = crate::clock::OsClock.now(ClockId::Monotonic);
            let want = if more {
                deadline.min(now.saturating_add(CALL_GRACE_NS))
            } else {
                deadline
            };
            s.cover(held, want, now.saturating_add(CALL_GRACE_NS / 2));
        }
        core.run_call(call);
    }
}

#[cfg(not(loom))]
/// How long a follower waits with no hand-over before it retires, if another thread follows
/// still ("Idle spares retire").
const SPARE_IDLE: Duration = Duration::from_secs(1);

#[cfg(not(loom))]
/// Waits until the fd fires while the leader runs callbacks, then takes over: `true`;
/// `false` once the service stops, or once this thread retires (idle for `SPARE_IDLE` with
/// another thread following: `Crew::retire`). The only follower waits without a limit.
fn follow_standby(s: &Standby, core: &Arc<Core>) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    loop {
        let idle = (s.crew.following.load(Relaxed) > 1).then_some(SPARE_IDLE);
        match fd::wait_for(&s.fd, idle) {
            fd::Waited::Fired => {}
            fd::Waited::Idle => {
                if s.crew.retire() {
                    return false;
                }
                continue;
            }
            fd::Waited::Failed => return false,
        }
        if core.health.shutdown.load(Ordering::Acquire) {
            return false;
        }
        if s.state.take_over() {
            s.crew.following.fetch_sub(1, Relaxed);
            core.drivers.takeovers.fetch_add(1, Relaxed);
            return true;
        }
        // The leader finished first (a stale expiry): wait again.
    }
}

#[cfg(not(loom))]
/// Starts a spare for driver `k`, following, if fewer than the limit were started.
fn start_spare(s: &Standby, core: &Arc<Core>, k: usize) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    if s.crew.started.fetch_add(1, Relaxed) >= core.drivers.spare_limit {
        s.crew.started.fetch_sub(1, Relaxed);
        return false;
    }
    // Spawned and recorded under the lock, and never once the service is stopping: `Drop`
    // sets `shutdown` and then takes this list under the same lock to join it.
    let mut spares = core.drivers.spares.lock_or_recover();
    if core.health.shutdown.load(Ordering::Acquire) {
        s.crew.started.fetch_sub(1, Relaxed);
        return false;
    }
    // Retired spares' handles (their threads ended): dropped, so that the list holds at
    // most the spares alive and those ending, however often spares come and go.
    spares.retain(|t| !t.is_finished());
    s.crew.following.fetch_add(1, Relaxed);
    let c = core.clone();
    let n = core.wake.bells.len();
    let spawned = crate::sync::spawn_blocking_signals(format!("tempora-spare-{k}"), move || {
        set_timer_slack();
        let body = || {
            if follow(&c, k) {
                run(&c, k, n);
            }
        };
        if super::serial::catch(body).is_none() {
            c.health.fail(super::health::DRIVER_DIED);
            c.health.flush_halt();
        }
    });
    match spawned {
        Ok(t) => {
            spares.push(t);
            true
        }
        Err(_) => {
            s.crew.following.fetch_sub(1, Relaxed);
            s.crew.started.fetch_sub(1, Relaxed);
            false
        }
    }
}

/// What the realtime-clock watch serves beside its timerfd: a service's inspection endpoint
/// (`inspect/endpoint.rs`), whose listening socket the watch thread waits on too, so that it
/// needs no thread of its own and costs no timer call anything.
#[cfg(not(loom))]
pub(crate) trait Serve: Send + Sync {
    /// The fd that is readable when a client waits.
    fn fd(&self) -> std::os::fd::RawFd;
    /// Serves the clients waiting now, without blocking for long: between its waits it calls
    /// `step`, which handles a clock step and says whether to go on (`false`: the service
    /// stops; end at once).
    fn serve(&self, core: &Core, step: &dyn Fn() -> bool);
}

/// Whether `fd` is readable within `ms` milliseconds.
#[cfg(not(loom))]
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

/// The driver threads of a `Timers`, stopped and joined on drop.
pub(crate) struct Drivers {
    pub(crate) core: Arc<Core>,
    threads: Vec<JoinHandle<()>>,
    #[cfg(not(loom))]
    watch: Option<Arc<ClockWatch>>,
}

impl Drivers {
    /// Starts `n` drivers and, with any, the realtime-clock watch, which serves `serve` too
    /// (dropped unserved without a watch).
    pub(crate) fn start(
        core: &Arc<Core>,
        n: usize,
        #[cfg(not(loom))] serve: Option<Box<dyn Serve>>,
    ) -> Result<Drivers, Error> {
        let mut d = Drivers {
            core: core.clone(),
            threads: Vec::new(),
            #[cfg(not(loom))]
            watch: None,
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            crate::sync::spawn_blocking_signals(name, f).map_err(Error::from)
        };
        for k in 0..n {
            let c = core.clone();
            // On error, `d`'s drop stops the threads started so far.
            d.threads.push(spawn(
                format!("tempora-driver-{k}"),
                Box::new(move || {
                    // A driver never dies silently: a panic that escapes its loop (callbacks'
                    // are caught inside it) fails the service, which wakes every receiver.
                    if super::serial::catch(|| run(&c, k, n)).is_none() {
                        c.health.fail(DRIVER_DIED);
                        c.health.flush_halt();
                    }
                }),
            )?);
        }
        #[cfg(not(loom))]
        if n > 0 && core.clock.is_os_time() {
            if let Some(w) = ClockWatch::new() {
                let w = Arc::new(w);
                let (c, w2) = (core.clone(), w.clone());
                d.watch = Some(w);
                d.threads.push(spawn(
                    "tempora-clockwatch".into(),
                    Box::new(move || w2.run(&c, serve.as_deref())),
                )?);
            }
        }
        Ok(d)
    }
}

impl Drop for Drivers {
    fn drop(&mut self) {
        if self.core.health.forked() {
            // A forked child: the threads are the parent's (not here to stop or join), and
            // the spares' list and the core's locks may be held for ever. All leaked, the
            // core with one count more, so that it is never dropped in the child either
            // (`timers` module doc, "Fork").
            std::mem::forget(std::mem::take(&mut self.threads));
            std::mem::forget(self.core.clone());
            return;
        }
        self.core.health.shutdown.store(true, Ordering::Release);
        self.core.health.halt();
        self.core.wake.ring_all();
        #[cfg(not(loom))]
        if let Some(w) = &self.watch {
            w.stop();
        }
        #[cfg(not(loom))]
        self.core.wake.standby.iter().for_each(|s| s.stop());
        let me = std::thread::current().id();
        let spares = std::mem::take(&mut *self.core.drivers.spares.lock_or_recover());
        for t in self.threads.drain(..).chain(spares) {
            // A callback on a driver that drops the last `Timers` cannot join its own thread;
            // that driver sees `shutdown` and ends by itself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::super::base::Base;
    use super::super::sleep::SleepCell;
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
                // A sleep's entry (never followed: nothing pops it).
                let sleep = NonNull::<SleepCell>::dangling();
                let (_, ring) = b2
                    .locked_sleeps(10, |w| w.insert_with(10, Mode::PRECISE, sleep))
                    .unwrap();
                if ring {
                    bell2.ring();
                }
            });
            // One driver iteration with nothing armed when it starts.
            sleep_once(
                &bell,
                || {
                    let mut deadline = NO_EXPIRY;
                    base.locked(|st| {
                        if let Some(t) = st.sleeps.next_fire() {
                            deadline = deadline.min(t);
                        }
                        st.sleep = [deadline; CLOCKS];
                    })
                    .unwrap();
                    (deadline == NO_EXPIRY).then_some(None)
                },
                |_, _| true,
            );
            armer.join().unwrap();
        });
    }
}
