//! Background drivers: threads that sleep until the earliest expiry of the bases they serve,
//! then fire everything due on every base, and run the callbacks it collected.
//!
//! Driver `k` of `n` serves the bases `b` with `b % n == k`: its alarm (`wake.rs`) fires at the
//! earliest expiry among them, and whoever wakes polls **every base with something due**
//! (`base.rs`, "Polling only what is due"), so a base whose timers fall due at the same
//! instant as another's needs no wake-up of its own, and one with nothing due costs nothing. With one driver (the
//! default) OS wake-ups follow distinct expiry instants, not bases × instants. Driver threads
//! set their timer slack to 1 ns (`PR_SET_TIMERSLACK`), so the OS wakes them when asked rather
//! than up to 50 µs later (a normal thread's default slack).
//!
//! # Who wakes
//!
//! A driver is a crew of threads (`crew.rs`): the driver thread and the spares it started.
//! Every thread of the crew runs the same loop, top to bottom:
//!
//! 1. **Follow**: wait in `epoll_wait` on the driver's alarm. The kernel wakes one waiter per
//!    expiry, the one that waited last; the others sleep on, at no cost.
//! 2. **Lead**: the thread woken polls every base with something due (queue, signal and
//!    none timers fire inside the poll; wake-ups of async tasks run there too), then
//!    refreshes the alarm: it publishes the next deadline in its bases and arms the timerfd
//!    there, one system call.
//! 3. **Run the callbacks** the poll collected, under the crew's rule (below), then follow
//!    again.
//!
//! So a wake-up is one `epoll_wait` and one `timerfd_settime` besides the poll: the thread
//! that sleeps is the thread the kernel wakes, and nothing else is armed or disarmed around
//! the callbacks. An arm earlier than the published deadline moves the timerfd there
//! (`wake.rs`), so the alarm fires when that timer falls due, not at once.
//!
//! # Callbacks that block
//!
//! A callback runs on the thread that collected it, after the alarm is armed for the next
//! deadline, as if that thread were already asleep. **It starts only while another thread of
//! the crew follows** (`crew.rs`): so when the next timer falls due while the callback still
//! runs, the alarm wakes that follower, which leads. Nothing is handed over and nothing is
//! armed for it: the follower was waiting on the same alarm anyway. With nobody following, the
//! thread starts a spare first (up to [`Builder::spare_drivers`](crate::timers::Builder::spare_drivers)
//! per driver, default 64); when none may start and spares exist, every one of them in a
//! callback, it leaves the calls in the crew's list and follows: a thread back from its
//! callback runs the list before it follows again. Queue, none and signal timers fire inside
//! the poll, so they never wait for a callback.
//!
//! Calls collected together wait for each other: before a call with others behind it, the
//! thread moves the alarm to `CALL_GRACE_NS` (0.5 ms) from now (never past the next deadline;
//! moved on at most once per half grace as quick calls go by), so a follower takes the rest
//! over if one call outlives that, and after the batch it refreshes the alarm again.
//!
//! The bounds, per driver, while callbacks block:
//!
//! - A queue, none or signal timer, a sleep, and an arm's ring: delayed by no callback, however
//!   many block, beyond a follower's wake-up (the tests
//!   `a_blocked_callback_delays_no_other_timer_beyond_the_bound`,
//!   `ten_blocked_callbacks_stop_no_other_timer` and
//!   `past_the_spare_cap_blocked_callbacks_delay_only_callbacks`). One gap: a spare counts as
//!   following from its start, so when the follower was started for this very call, the wait
//!   includes its thread's first turn.
//! - A callback: while fewer than `spare_drivers` callbacks block at once, as above, plus, for
//!   a call queued behind blocking ones in the same batch, the grace for each call ahead of
//!   it. With `spare_drivers` blocked, it waits in the list for the first of them to return:
//!   the only wait, and the only one tempora cannot shorten. Expiries of its own timer
//!   meanwhile fold into that call (`serial.rs`), so one timer holds at most one thread.
//! - `spare_drivers(0)`: no spares; the driver runs callbacks itself, and one that blocks
//!   stops every timer the driver serves (the choice of a program that wants no thread but the
//!   driver and whose callbacks never block).
//!
//! Why this design: the thread that was asleep anyway runs the callbacks (no hand-off, no
//! second wake-up, its lateness its own), and protection against a callback that blocks costs
//! nothing per wake-up, because the follower sleeps on the very timer the leader would have
//! slept on. Leaving the calls in the list when no follower can be had is what keeps the rule
//! at the cap and when thread creation fails.
//!
//! **Idle spares retire.** A spare that follows waits at most `SPARE_IDLE` (1 s) while another
//! thread follows too; woken by nothing meanwhile, it retires (`Crew::retire`, decided under the
//! list's lock and only while another thread still follows). The last follower waits without
//! a limit. So about `SPARE_IDLE` after a burst of blocked callbacks has returned, each driver
//! is back to itself and one spare (the test `tests/spares.rs`); idle, a driver's threads make
//! no wake-ups (the one that waited last is the one woken; a follower with company wakes once,
//! to retire).

use crate::clock::ClockId;
use crate::error::Error;
use crate::sync::Ordering;
use crate::timers::object::serial::Call;
use crate::timers::shared::crew::Next;
use crate::timers::shared::health::DRIVER_DIED;
use crate::timers::shared::wake::{Refresh, NO_EXPIRY};
use crate::timers::shared::Core;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[cfg(not(loom))]
pub(crate) use super::clockwatch::{ready, ClockWatch, Serve};

/// How long a call may hold up the calls collected with it before a follower takes them
/// over: long enough that a batch of quick callbacks runs on one thread with one move of the
/// alarm, short against the lateness a blocking callback would cause.
const CALL_GRACE_NS: u64 = 500_000;

/// How long a follower waits with nothing to do before it retires, if another thread follows
/// still ("Idle spares retire").
const SPARE_IDLE: Duration = Duration::from_secs(1);

/// The body of every thread of driver `k`'s crew: lead once (the driver's own thread, which
/// starts with nothing published), then follow and lead in turn until the service stops or
/// the thread, a spare, retires.
fn run(core: &Arc<Core>, k: usize, first_lead: bool) {
    set_timer_slack();
    let crew = &core.drivers.crews[k];
    let alarm = &core.wake.alarms[k];
    // Room for a batch of calls in the crew's list, made as the thread starts if it can be,
    // so that running callbacks later does not allocate (the `timers` module doc, "Memory");
    // the poll's buffer grows only fallibly (`Core::poll_collect`).
    core.warm_poller();
    let mut calls = Vec::new();
    let _ = calls.try_reserve(core.batch);
    let _ = crew.pending().try_reserve(core.batch);
    if first_lead {
        lead(core, k, &mut calls);
    }
    loop {
        let spare = !first_lead;
        let idle = (spare && crew.following.load(Ordering::Relaxed) > 1).then_some(SPARE_IDLE);
        let woke = alarm.wait(idle);
        if core.health.shutdown.load(Ordering::Acquire) {
            alarm.pass_on();
            return;
        }
        if !woke {
            // Spares retire; the driver's own thread stays.
            if spare && crew.retire() {
                return;
            }
            continue;
        }
        crew.woke();
        alarm.woke();
        core.drivers.wakeups.fetch_add(1, Ordering::Relaxed);
        if crew.in_calls.load(Ordering::Relaxed) > 0 {
            core.drivers.takeovers.fetch_add(1, Ordering::Relaxed);
        }
        #[cfg(test)]
        if core.crash_driver.swap(false, Ordering::Relaxed) {
            panic!("tempora test: a driver dies");
        }
        lead(core, k, &mut calls);
    }
}

/// Polls until nothing is due, with the alarm armed at the next deadline, then runs the
/// callbacks collected (`work`); returns following.
fn lead(core: &Arc<Core>, k: usize, calls: &mut Vec<Call>) {
    loop {
        // One reading for the poll and the refresh: a deadline that passed since makes the
        // alarm fire at once, and this thread polls again.
        let now = core.now_all();
        core.poll_collect(now, calls);
        let deadline = refresh(core, k, &now);
        if deadline > now[ClockId::Monotonic.index()]
            || core.health.shutdown.load(Ordering::Acquire)
        {
            break;
        }
    }
    work(core, k, calls);
}

/// Publishes driver `k`'s next deadline and arms its alarm there (`wake.rs`).
fn refresh(core: &Core, k: usize, now: &[u64; crate::clock::CLOCKS]) -> u64 {
    let n = core.wake.alarms.len();
    core.wake.alarms[k].refresh(
        core.bases.iter().skip(k).step_by(n),
        core.res,
        core.max_deferral,
        now,
        Refresh::default(),
    )
}

/// Runs `calls` and whatever the crew's list holds, under the crew's rule ("Callbacks that
/// block"), until the thread follows.
fn work(core: &Arc<Core>, k: usize, calls: &mut Vec<Call>) {
    let crew = &core.drivers.crews[k];
    if !calls.is_empty() {
        crew.pending().extend(calls.drain(..));
    }
    let mut spares = core.drivers.spare_limit;
    // Where this thread last moved the alarm for a call's grace (`NO_EXPIRY`: it did not).
    let mut graced = NO_EXPIRY;
    loop {
        match crew.next(spares) {
            Next::Run(call, more) => {
                if more {
                    // Moved on as the calls go by, at most once per half grace: a batch of
                    // quick calls wakes nobody.
                    let now = core.clock.now(ClockId::Monotonic);
                    if graced == NO_EXPIRY || now.saturating_add(CALL_GRACE_NS / 2) >= graced {
                        let at = now.saturating_add(CALL_GRACE_NS);
                        graced = core.wake.alarms[k].grace(at, graced, now);
                    }
                }
                core.run_call(call);
                crew.ran();
            }
            Next::Spare => {
                if !start_spare(core, k) {
                    spares = 0;
                }
            }
            Next::Follow => break,
        }
    }
    if graced != NO_EXPIRY {
        refresh(core, k, &core.now_all());
    }
}

/// A receiver's wait (`wait`: sleep until the instant given, `false` on timeout), with the
/// receiver leading the service's one driver meanwhile ("Who fires while a receiver waits" in
/// `owner.rs`): it holds the driver's alarm, sleeps until the alarm's time itself, and when
/// that comes first polls and refreshes as the driver would have, handing the callbacks it
/// collected to the driver's crew. Returns what `wait` returned for the receiver's own reason
/// (woken, or `until` passed), or `None` if the service has more drivers than one, or another
/// receiver holds the alarm: the caller then waits as usual.
pub(crate) fn wait_leading(
    core: &Core,
    until: Option<Instant>,
    mut wait: impl FnMut(Option<Instant>) -> bool,
) -> Option<bool> {
    // A thread inside tempora (a signal handler's wait) must not poll: the poll takes locks
    // its own thread may hold.
    if core.wake.alarms.len() != 1 || !core.os_clock || crate::sync::holds_a_lock() || !may_poll() {
        return None;
    }
    let alarm = &core.wake.alarms[0];
    let (mut covered, ticket) = alarm.hold()?;
    // Woken at the alarm's time as the driver would be: the thread's timer slack (50 µs by
    // default) would make every expiry that late, so it is 1 ns for the wait and restored
    // after it.
    // SAFETY: prctl(2) with integer arguments only; it affects the calling thread.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if slack > 1 {
        set_timer_slack();
    }
    let woke = loop {
        let mono = core.clock.now(ClockId::Monotonic);
        let at = (covered != NO_EXPIRY)
            .then(|| Instant::now() + Duration::from_nanos(covered.saturating_sub(mono)));
        let t = match (until, at) {
            (Some(u), Some(a)) => Some(u.min(a)),
            (u, a) => u.or(a),
        };
        if wait(t) {
            break true;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break false;
        }
        // The alarm's time came: fire what is due, as the driver would have.
        core.drivers.receiver_polls.fetch_add(1, Ordering::Relaxed);
        covered = fire_held(core, alarm, ticket);
    };
    alarm.release(ticket, core.clock.now(ClockId::Monotonic));
    if slack > 1 {
        // SAFETY: as above; `slack` is what the thread had.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong, 0, 0, 0) };
    }
    Some(woke)
}

thread_local! {
    /// This thread has polled, so its poll buffers and their thread-exit hooks exist.
    static POLLER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread may poll in a driver's place: its first poll makes the poll's buffers
/// and registers their thread-exit hooks with the C library, allocations that abort the
/// process if refused (the `timers` module doc, "Memory"). So a thread that never polled
/// first proves that the memory is there (`PROBE` bytes, freed at once) and waits as usual
/// if it is not.
fn may_poll() -> bool {
    const PROBE: usize = 256 << 10;
    POLLER.with(|p| {
        if !p.get() {
            let mut probe: Vec<u8> = Vec::new();
            if probe.try_reserve_exact(PROBE).is_err() {
                return false;
            }
            p.set(true);
        }
        true
    })
}

/// A holding receiver's poll: fires what is due, hands the callbacks collected to the
/// driver's crew (running one itself only if the list cannot grow), and refreshes the alarm
/// as its holder. The deadline it now covers.
fn fire_held(core: &Core, alarm: &super::wake::Alarm, ticket: u64) -> u64 {
    let mut handed = false;
    core.poll_then(core.now_all(), &mut |calls| {
        for call in calls.drain(..) {
            match call {
                Call::Callback(..) => {
                    let mut list = core.drivers.crews[0].pending();
                    if list.try_reserve(1).is_ok() {
                        list.push_back(call);
                        handed = true;
                        continue;
                    }
                    drop(list);
                    core.run_call(call);
                }
                Call::Wake(_) => core.run_call(call),
            }
        }
        true
    });
    let now = core.now_all();
    let deadline = alarm.refresh(
        core.bases.iter(),
        core.res,
        core.max_deferral,
        &now,
        Refresh {
            holder: Some(ticket),
            ..Refresh::default()
        },
    );
    if handed {
        // After the refresh, which would disarm it: the driver wakes for them.
        alarm.fire();
    }
    deadline
}

/// Asks the OS to wake this thread at the time it asked for (1 ns of slack, not 50 µs).
fn set_timer_slack() {
    // SAFETY: prctl(2) with integer arguments only; it affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Starts a spare for driver `k`, following, if fewer than the limit were started.
fn start_spare(core: &Arc<Core>, k: usize) -> bool {
    let crew = &core.drivers.crews[k];
    if !crew.starting(core.drivers.spare_limit) {
        return false;
    }
    // Spawned and recorded under the lock, and never once the service is stopping: `Drop`
    // sets `shutdown` and then takes this list under the same lock to join it.
    let mut spares = core.drivers.spares.lock_or_recover();
    if core.health.shutdown.load(Ordering::Acquire) {
        drop(spares);
        crew.not_started();
        return false;
    }
    // Retired spares' handles (their threads ended): dropped, so that the list holds at most
    // the spares alive and those ending, however often spares come and go.
    spares.retain(|t| !t.is_finished());
    match spawn(format!("tempora-spare-{k}"), core, move |c| {
        run(c, k, false)
    }) {
        Ok(t) => {
            spares.push(t);
            true
        }
        Err(_) => {
            drop(spares);
            crew.not_started();
            false
        }
    }
}

/// Spawns a thread of a service with every signal blocked, running `f` on its core; a panic
/// that escapes its loop (callbacks' are caught inside it) fails the service, which wakes
/// every receiver.
fn spawn(
    name: String,
    core: &Arc<Core>,
    f: impl FnOnce(&Arc<Core>) + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let c = core.clone();
    crate::sync::spawn_blocking_signals(name, move || {
        if super::serial::catch(|| f(&c)).is_none() {
            c.health.fail(DRIVER_DIED);
            c.health.flush_halt();
        }
    })
}

/// The driver threads of a `Timers`, stopped and joined on drop.
pub(crate) struct Drivers {
    pub(crate) core: Arc<Core>,
    threads: Vec<JoinHandle<()>>,
    #[cfg(not(loom))]
    watch: Option<Arc<ClockWatch>>,
}

impl Drivers {
    /// Starts a thread per driver and, with any, the realtime-clock watch, which serves
    /// `serve` too (dropped unserved without a watch).
    pub(crate) fn start(
        core: &Arc<Core>,
        #[cfg(not(loom))] serve: Option<Box<dyn Serve>>,
    ) -> Result<Drivers, Error> {
        let mut d = Drivers {
            core: core.clone(),
            threads: Vec::new(),
            #[cfg(not(loom))]
            watch: None,
        };
        let n = core.wake.alarms.len();
        for k in 0..n {
            // On error, `d`'s drop stops the threads started so far.
            d.threads
                .push(spawn(format!("tempora-driver-{k}"), core, move |c| {
                    run(c, k, true)
                })?);
        }
        #[cfg(not(loom))]
        if n > 0 && core.clock.is_os_time() {
            if let Some(w) = ClockWatch::new() {
                let w = Arc::new(w);
                let w2 = w.clone();
                d.watch = Some(w);
                d.threads
                    .push(spawn("tempora-clockwatch".into(), core, move |c| {
                        w2.run(c, serve.as_deref())
                    })?);
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
        self.core.wake.alarms.iter().for_each(|a| a.stop());
        #[cfg(not(loom))]
        if let Some(w) = &self.watch {
            w.stop();
        }
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
