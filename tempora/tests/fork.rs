//! `fork(2)` of a process whose service is busy: each child starts as the kernel's does (no
//! timers of the parent's, IDs from 0), the parent's service fails every call there with
//! `Error::Forked` at once (no inherited lock is touched: no child hangs), its drops neither
//! join nor panic, a service built in the child works, and so does the global one.
//!
//! Its own `main` (no test harness). `TEMPORA_FORKS` sets the number of children (default
//! 200, a few seconds); the soak runs it at 1000 and more. Each child has a watchdog
//! (`alarm`), and the parent kills a child still running after `STUCK`, reporting it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::timers::{Notify, SetFlags, Timers};
use tempora::Error;

/// How long a child may take before the parent calls it stuck.
const STUCK: Duration = Duration::from_secs(10);

/// The child's checks: `Err(what failed)`.
fn child(
    timers: &Timers,
    owner: &tempora::Owner,
    parent_id: tempora::TimerId,
    global_owner: &tempora::Owner,
) -> Result<(), String> {
    let first = tempora::TimerId::new(0).expect("0 is an ID");
    let forked = |what: &str, r: Result<(), Error>| match r {
        Err(Error::Forked) => Ok(()),
        other => Err(format!("{what}: {other:?}, not Forked")),
    };
    // The parent's service: every call fails at once.
    forked("gettime", owner.gettime(parent_id).map(drop))?;
    forked(
        "settime",
        owner
            .settime(
                parent_id,
                SetFlags::RELATIVE,
                Duration::from_millis(1),
                Duration::ZERO,
            )
            .map(drop),
    )?;
    forked("getoverrun", owner.getoverrun(parent_id).map(drop))?;
    forked(
        "create",
        owner.create(ClockId::Monotonic, Notify::Queue).map(drop),
    )?;
    forked("recv", owner.recv().map(drop))?;
    forked(
        "recv_timeout",
        owner.recv_timeout(Duration::from_secs(5)).map(drop),
    )?;
    forked("delete", owner.delete(parent_id))?;
    forked("health", timers.health())?;
    forked("checkpoint", owner.try_checkpoint().map(drop))?;
    if owner.try_recv().is_some() || timers.poll() != 0 || !owner.timers().is_empty() {
        return Err("the parent's service delivered in the child".into());
    }
    let late = timers.owner(); // an owner of the parent's service, made in the child
    forked(
        "create on a child's owner of the parent's service",
        late.create(ClockId::Monotonic, Notify::Queue).map(drop),
    )?;
    forked(
        "the parent's global owner",
        global_owner.gettime(first).map(drop),
    )?;

    // A service of the child's own: its timer fires, its IDs start at 0.
    let mine = Timers::new();
    let o = mine.owner();
    let id = o
        .create(ClockId::Monotonic, Notify::Queue)
        .map_err(|e| format!("child create: {e}"))?;
    if id != first {
        return Err(format!("the child's first ID is {id}, not 0"));
    }
    o.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_millis(1),
        Duration::ZERO,
    )
    .map_err(|e| format!("child settime: {e}"))?;
    match o.recv_timeout(Duration::from_secs(5)) {
        Ok(Some(e)) if e.id == id => {}
        other => return Err(format!("the child's own timer: {other:?}")),
    }
    // The global service, rebuilt in the child: none of the parent's timers. Until then the
    // child has none built (the parent's is not the child's).
    if tempora::time::built_global().is_some() {
        return Err("built_global is the parent's in the child".into());
    }
    let g = tempora::time::try_global().map_err(|e| format!("global: {e}"))?;
    if !tempora::time::built_global().is_some_and(|b| std::ptr::eq(b, g)) {
        return Err("built_global is not the child's global once built".into());
    }
    let go = g.owner();
    let gid = go
        .create(ClockId::Monotonic, Notify::Queue)
        .map_err(|e| format!("global create: {e}"))?;
    go.settime(
        gid,
        SetFlags::RELATIVE,
        Duration::from_millis(1),
        Duration::ZERO,
    )
    .map_err(|e| format!("global settime: {e}"))?;
    match go.recv_timeout(Duration::from_secs(5)) {
        Ok(Some(e)) if e.id == gid => {}
        other => return Err(format!("the child's global timer: {other:?}")),
    }
    if g.timer_count() != 1 {
        return Err(format!(
            "the child's global service holds {} timers",
            g.timer_count()
        ));
    }
    Ok(())
}

fn main() {
    let forks: usize = std::env::var("TEMPORA_FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // A busy parent: callbacks and queue timers firing every 100 µs to 1 ms on one driver
    // (and its spares), a receiver thread consuming, and the global service's timers too.
    let timers = Timers::new();
    let owner = timers.owner();
    let calls = Arc::new(AtomicU64::new(0));
    let mut parent_id = None;
    for i in 0..256u64 {
        let c = calls.clone();
        let notify = if i % 2 == 0 {
            Notify::Queue
        } else {
            Notify::callback(move |_| {
                c.fetch_add(1, Ordering::Relaxed);
            })
        };
        let id = owner.create(ClockId::Monotonic, notify).unwrap();
        let period = Duration::from_micros(100 + (i % 10) * 100);
        owner
            .settime(id, SetFlags::RELATIVE, period, period)
            .unwrap();
        parent_id = Some(id);
    }
    let parent_id = parent_id.expect("timers made");
    let receiver = {
        let owner = owner.clone();
        std::thread::spawn(move || while owner.recv().is_ok() {})
    };
    assert!(tempora::time::built_global().is_none(), "nothing built yet");
    let global_owner = tempora::time::global().owner();
    assert!(tempora::time::built_global().is_some_and(|b| std::ptr::eq(b, tempora::time::global())));
    let gid = global_owner
        .create(ClockId::Monotonic, Notify::Queue)
        .unwrap();
    let every = Duration::from_micros(200);
    global_owner
        .settime(gid, SetFlags::RELATIVE, every, every)
        .unwrap();
    let churn = {
        // Creates and deletes in the parent while it forks: shard, bucket and timer locks held.
        let owner = owner.clone();
        std::thread::spawn(move || loop {
            match owner.create(ClockId::Monotonic, Notify::Queue) {
                Ok(id) => {
                    let _ = owner.settime(
                        id,
                        SetFlags::RELATIVE,
                        Duration::from_micros(50),
                        Duration::ZERO,
                    );
                    let _ = owner.delete(id);
                }
                Err(_) => return,
            }
        })
    };

    let start = Instant::now();
    let (mut ok, mut failed, mut stuck) = (0, 0, 0);
    let mut slowest = Duration::ZERO;
    for n in 0..forks {
        // SAFETY: the child runs the checks and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: a watchdog: SIGALRM's default action ends a child that hangs.
            unsafe { libc::alarm(STUCK.as_secs() as u32 + 5) };
            let code = match child(&timers, &owner, parent_id, &global_owner) {
                Ok(()) => 0,
                Err(why) => {
                    eprintln!("fork {n}: child: {why}");
                    1
                }
            };
            // The parent's handles dropped in the child: they leak, neither join nor panic.
            drop(timers);
            drop(owner);
            drop(global_owner);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let began = Instant::now();
        let status = loop {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break Some(status);
            }
            if began.elapsed() > STUCK {
                // SAFETY: our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                break None;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        slowest = slowest.max(began.elapsed());
        match status {
            Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0 => ok += 1,
            Some(s) => {
                eprintln!("fork {n}: child ended with status {s:#x}");
                failed += 1;
            }
            None => {
                eprintln!("fork {n}: child stuck for {STUCK:?}: killed");
                stuck += 1;
            }
        }
    }
    let took = start.elapsed();
    assert!(timers.health().is_ok(), "the parent's service still works");
    assert!(calls.load(Ordering::Relaxed) > 0, "the parent was busy");
    owner.destroy();
    receiver.join().unwrap();
    churn.join().unwrap();
    println!(
        "fork: {forks} children of a busy parent in {took:.2?} (slowest {slowest:.2?}): \
         {ok} ok, {failed} failed, {stuck} stuck"
    );
    assert_eq!((failed, stuck), (0, 0), "every child passes");
}
