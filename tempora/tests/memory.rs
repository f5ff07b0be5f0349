//! Memory exhaustion: under `RLIMIT_AS`, creating timers until the allocator has nothing left
//! fails the create with `Error::OutOfMemory` (`EAGAIN`, as the kernel's `timer_create`), never
//! aborts the process, and leaves the service whole: the count and statistics as before the
//! failed create, a restore that cannot get memory makes nothing, timers made earlier still
//! fire, deletes work, and creates succeed again once timers are deleted.
//!
//! First, in this process, each allocation of a create is made to fail on demand (a global
//! allocator that refuses this thread's requests while told to, `Refuse`): every kind of
//! create fails with `OutOfMemory` and changes nothing, and a hash table that cannot grow
//! keeps working at a higher load.
//!
//! Then, its own `main` (no test harness): the limit holds for a whole process, so the checks run in
//! a child process (this binary again, with `TEMPORA_MEMORY_CHILD` set), and the parent
//! reports how the child ended (a signal, SIGABRT for an allocation failure that aborted, is
//! a failure). `TEMPORA_MEMORY_RUNS` sets how many children run one after the other (default
//! 1; the soak runs dozens). The limit is the child's address-space size when it sets it
//! (`VmSize`, thread stacks and allocator arenas included) plus `HEADROOM`, so it does not
//! depend on the machine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::timers::{Notify, SetFlags, Timers};
use tempora::{Error, TimerId};

/// Address space the child may add once the limit is set.
const HEADROOM: u64 = 24 << 20;
/// Creates after which a child that has not run out of memory fails (far more than
/// `HEADROOM` holds).
const MAX_CREATES: i32 = 4_000_000;
/// Owners after which a child that has not run out of memory fails (each takes a few KiB:
/// far more than `HEADROOM` holds).
const MAX_OWNERS: usize = 200_000;
/// How long a child may run before the parent kills it.
const STUCK: Duration = Duration::from_secs(120);

/// The system allocator, refusing the requests of a thread that asked it to (`refuse`).
struct Refuse;

thread_local! {
    /// Requests of at least this many bytes fail on this thread (`usize::MAX`: none do).
    static REFUSE_FROM: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn refused(layout: Layout) -> bool {
    // `try_with`: a thread-local read that allocates nothing and registers no destructor.
    REFUSE_FROM
        .try_with(|r| layout.size() >= r.get())
        .unwrap_or(false)
}

// SAFETY: every request goes to `System` unchanged, or fails (null), as an allocator may.
unsafe impl GlobalAlloc for Refuse {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if refused(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if refused(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && refused(Layout::from_size_align(new_size, 1).unwrap()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refuse = Refuse;

/// Runs `f` with this thread's requests of `from` bytes or more refused.
fn refusing<R>(from: usize, f: impl FnOnce() -> R) -> R {
    REFUSE_FROM.with(|r| r.set(from));
    let r = f();
    REFUSE_FROM.with(|r| r.set(usize::MAX));
    r
}

/// Each of a create's allocations refused in turn, in this process.
fn refused_creates() {
    let timers = Timers::new();
    let callback: tempora::timers::Callback = Arc::new(|_: &tempora::Fired<'_>| {});
    let kinds = || {
        [
            Notify::Queue,
            Notify::Callback {
                name: None,
                f: callback.clone(),
            },
            Notify::None,
        ]
    };
    // This thread's first create (its thread-locals) and the owner, made before.
    let warm = timers.owner();
    for n in kinds() {
        let t = warm.create(ClockId::Monotonic, n).unwrap();
        warm.delete(t).unwrap();
    }
    // A new owner: its first create here allocates this thread's shard, and a callback its
    // box; a queue timer its room on the queue.
    for n in kinds() {
        let owner = timers.owner();
        let before = timers.timer_count();
        let created = owner.stats().counts.created;
        let r = refusing(0, || owner.create(ClockId::Monotonic, n.clone()));
        assert_eq!(r, Err(Error::OutOfMemory), "{n:?}");
        assert_eq!(r.unwrap_err().errno(), libc::EAGAIN);
        assert_eq!(timers.timer_count(), before, "{n:?}: the count moved");
        assert_eq!(owner.stats().counts.created, created, "{n:?}: counted");
        assert!(owner.timers().is_empty(), "{n:?}: a timer is left");
        // The same create once memory is back: the first ID, as if nothing had failed.
        let t = owner.create(ClockId::Monotonic, n.clone()).unwrap();
        assert_eq!(t, id(0), "{n:?}");
        assert_eq!(owner.stats().counts.created, created + 1);
    }
    // Slot pages: with every request refused, creates go on while the shard's page has free
    // slots, then fail; IDs stay consecutive, and a create succeeds once memory is back.
    let owner = timers.owner();
    owner.create(ClockId::Monotonic, Notify::None).unwrap();
    let (made, failure) = refusing(0, || {
        let mut made = 1;
        loop {
            match owner.create(ClockId::Monotonic, Notify::None) {
                Ok(t) => {
                    assert_eq!(t, id(made));
                    made += 1;
                }
                Err(e) => break (made, e),
            }
            assert!(made < 100_000, "no create failed");
        }
    });
    assert_eq!(failure, Error::OutOfMemory);
    assert_eq!(owner.timers().len(), made as usize);
    assert_eq!(owner.create(ClockId::Monotonic, Notify::None), Ok(id(made)));

    // A table that cannot grow: refused from 32 KiB, creates go on far past the load at which
    // it would double (16 buckets, 2 per bucket), and every timer is found and deleted.
    let timers = Timers::builder().initial_buckets(16).build().unwrap();
    let owner = timers.owner();
    owner.create(ClockId::Monotonic, Notify::None).unwrap();
    const MANY: i32 = 20_000;
    let first = refusing(32 << 10, || {
        for n in 1..MANY {
            assert_eq!(owner.create(ClockId::Monotonic, Notify::None), Ok(id(n)));
        }
        for n in 0..MANY {
            owner.gettime(id(n)).unwrap();
        }
        for n in (0..MANY).step_by(2) {
            owner.delete(id(n)).unwrap();
        }
        owner.gettime(id(0))
    });
    assert_eq!(first, Err(Error::UnknownTimer));
    assert_eq!(timers.timer_count(), MANY as usize / 2);
    // Memory back: the table grows, and every timer is still found.
    for _ in 0..MANY {
        owner.create(ClockId::Monotonic, Notify::None).unwrap();
    }
    for n in (1..MANY).step_by(2) {
        owner.gettime(id(n)).unwrap();
    }
    eprintln!("refused creates: ok ({made} creates on one page's free slots)");
}

/// The process's address-space size (`VmSize`), in bytes.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a VmSize line");
    kib * 1024
}

fn set_limit(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain system call on a valid struct.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

fn id(n: i32) -> TimerId {
    TimerId::new(n).expect("a valid ID")
}

/// The child's checks: `Err(what failed)`.
fn child() -> Result<(), String> {
    let timers = Timers::new();
    let owner = timers.owner();
    // Made before the limit: an owner to restore into, and a snapshot to restore.
    let spare = timers.owner();
    let snapshot = {
        let src = timers.owner();
        for _ in 0..2000 {
            src.create(ClockId::Monotonic, Notify::Queue)
                .map_err(|e| format!("snapshot create: {e}"))?;
        }
        let snapshot = src.checkpoint();
        src.destroy();
        snapshot
    };
    // Timers made before the limit, armed far off (the driver thread starts now).
    let hits = Arc::new(AtomicU64::new(0));
    let callback: tempora::timers::Callback = {
        let hits = hits.clone();
        Arc::new(move |_: &tempora::Fired<'_>| {
            hits.fetch_add(1, Ordering::Relaxed);
        })
    };
    let early = owner
        .create(ClockId::Monotonic, Notify::Queue)
        .map_err(|e| format!("create: {e}"))?;
    let early_cb = owner
        .create(
            ClockId::Monotonic,
            Notify::Callback {
                name: None,
                f: callback.clone(),
            },
        )
        .map_err(|e| format!("create: {e}"))?;
    // The callback's first expiry runs before the limit too: a driver's first callback
    // starts the spare that stands by while it runs (a thread tempora starts allocates,
    // infallibly, once).
    let fire = |t| {
        owner
            .settime(
                t,
                SetFlags::RELATIVE,
                Duration::from_millis(1),
                Duration::ZERO,
            )
            .map_err(|e| format!("settime: {e}"))
    };
    let fired = |n| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while hits.load(Ordering::Relaxed) < n {
            if Instant::now() > deadline {
                return Err(format!("the callback timer did not fire ({n})"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    };
    fire(early_cb)?;
    fired(1)?;
    // This thread's first blocking receive runs before the limit too: it polls in the
    // driver's place while it waits, and a thread's first poll makes its buffers, infallibly,
    // once (the `timers` module doc, "Memory").
    fire(early)?;
    match owner.recv_timeout(Duration::from_secs(10)) {
        Ok(Some(e)) if e.id == early => {}
        other => return Err(format!("the first receive: {other:?}")),
    }
    for t in [early, early_cb] {
        owner
            .settime(
                t,
                SetFlags::RELATIVE,
                Duration::from_secs(3600),
                Duration::ZERO,
            )
            .map_err(|e| format!("settime: {e}"))?;
    }
    // This thread's first blocking wait, made before the limit: a thread's first park
    // registers its parking data with glibc's thread-exit list, one small allocation that
    // glibc cannot fail (the `timers` module doc, "Memory").
    if owner.recv_timeout(Duration::from_millis(1)) != Ok(None) {
        return Err("an event before any timer fired".into());
    }
    let first = early_cb.get() + 1;
    let before = timers.timer_count();

    // The list of the timers made after exhaustion, and of the owners made at the end, sized
    // now.
    let mut again = Vec::with_capacity(3000);
    let mut owners = Vec::with_capacity(MAX_OWNERS);
    set_limit(vm_size() + HEADROOM);

    // Every kind of create (its own allocations differ: a callback's box, a queue's room).
    let notify = |n: i32| match n % 3 {
        0 => Notify::Queue,
        1 => Notify::Callback {
            name: None,
            f: callback.clone(),
        },
        _ => Notify::None,
    };
    let mut made = 0;
    let failure = loop {
        if made == MAX_CREATES {
            return Err(format!(
                "{made} creates and no failure: the limit did not hold"
            ));
        }
        match owner.create(ClockId::Monotonic, notify(made)) {
            Ok(t) if t.get() == first + made => made += 1,
            Ok(t) => return Err(format!("create {made} made ID {t}")),
            Err(e) => break e,
        }
    };
    if failure != Error::OutOfMemory || failure.errno() != libc::EAGAIN {
        return Err(format!(
            "after {made} creates: {failure:?}, not OutOfMemory"
        ));
    }
    eprintln!("out of memory after {made} creates");
    let count = before + made as usize;
    if timers.timer_count() != count {
        return Err(format!(
            "{} timers after the failed create, not {count}",
            timers.timer_count()
        ));
    }
    // More creates: each fails the same way or succeeds (memory a failed one left free).
    for n in 0..200 {
        match owner.create(ClockId::Monotonic, notify(n)) {
            Ok(t) => owner.delete(t).map_err(|e| format!("delete: {e}"))?,
            Err(Error::OutOfMemory) => {}
            Err(e) => return Err(format!("create after exhaustion: {e:?}")),
        }
    }
    if timers.timer_count() != count {
        return Err("creates after exhaustion changed the count".into());
    }
    // A restore that cannot get memory makes nothing.
    match spare.restore(&snapshot, |_| None) {
        Err(Error::OutOfMemory) => {}
        other => return Err(format!("restore under the limit: {other:?}")),
    }
    if !spare.timers().is_empty() || timers.timer_count() != count {
        return Err("a failed restore left timers".into());
    }
    // The timers made before still fire.
    owner
        .settime(
            early,
            SetFlags::RELATIVE,
            Duration::from_millis(1),
            Duration::ZERO,
        )
        .map_err(|e| format!("settime: {e}"))?;
    match owner.recv_timeout(Duration::from_secs(10)) {
        Ok(Some(e)) if e.id == early => {}
        other => return Err(format!("the earlier queue timer: {other:?}")),
    }
    fire(early_cb)?;
    fired(2)?;
    // Deletes work, and free room for creates of every kind: half as many as were deleted
    // (the memory a delete frees is the allocator's to hand out, and this process's other
    // threads allocate too).
    let freed = made.min(6000);
    for n in 0..freed {
        owner
            .delete(id(first + n))
            .map_err(|e| format!("delete {}: {e}", first + n))?;
    }
    let remade = freed / 2;
    for n in 0..remade {
        match owner.create(ClockId::Monotonic, notify(n)) {
            Ok(t) => again.push(t),
            Err(e) => return Err(format!("create {n} after {freed} deletes: {e:?}")),
        }
    }
    if timers.timer_count() != count - (freed - remade) as usize {
        return Err(format!(
            "{} timers after deleting {freed} and making {remade}, not {}",
            timers.timer_count(),
            count - (freed - remade) as usize
        ));
    }
    // And a timer made after exhaustion fires.
    let late = again[0];
    owner
        .settime(
            late,
            SetFlags::RELATIVE,
            Duration::from_millis(1),
            Duration::ZERO,
        )
        .map_err(|e| format!("settime: {e}"))?;
    match owner.recv_timeout(Duration::from_secs(10)) {
        Ok(Some(e)) if e.id == late => {}
        other => return Err(format!("the new queue timer: {other:?}")),
    }
    let stats = owner.stats();
    let created = 2 + made as u64 + u64::from(remade as u32);
    if stats.counts.created < created {
        return Err(format!(
            "{} creates counted, not {created}",
            stats.counts.created
        ));
    }

    // A service whose first ID table (2^30 buckets of 32 bytes) does not fit: an error, not
    // an abort or a panic.
    match Timers::builder()
        .drivers(0)
        .initial_buckets(1 << 30)
        .build()
    {
        Err(Error::OutOfMemory) => {}
        Err(e) => return Err(format!("a service with a 32 GiB first table: {e}")),
        Ok(_) => return Err("a service with a 32 GiB first table was built".into()),
    }

    // Owners until none can be made, with a fresh headroom: the one refused fails with
    // `OutOfMemory`, never aborts (each of an owner's blocks is allocated fallibly, or after a
    // probe that glibc's per-thread cache makes good: `alloc::probe_arc`).
    set_limit(vm_size() + HEADROOM);
    let made_owners = loop {
        if owners.len() == MAX_OWNERS {
            return Err(format!(
                "{MAX_OWNERS} owners made and no failure: the limit did not hold"
            ));
        }
        match timers.try_owner() {
            Ok(o) => owners.push(o),
            Err(Error::OutOfMemory) => break owners.len(),
            Err(e) => return Err(format!("owner {}: {e}", owners.len())),
        }
    };
    // Let go of with the limit lifted: an owner's end frees through the epoch collector,
    // whose bookkeeping allocates infallibly (the `timers` module doc, "Memory").
    set_limit(libc::RLIM_INFINITY);
    drop(owners);
    timers
        .try_owner()
        .map_err(|e| format!("an owner after {made_owners} and exhaustion: {e}"))?;
    eprintln!("{made_owners} owners before the allocator refused one");
    Ok(())
}

fn main() {
    if std::env::var_os("TEMPORA_MEMORY_CHILD").is_some() {
        let code = match child() {
            Ok(()) => 0,
            Err(why) => {
                eprintln!("child: {why}");
                1
            }
        };
        std::process::exit(code);
    }
    refused_creates();
    let runs: usize = std::env::var("TEMPORA_MEMORY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let exe = std::env::current_exe().expect("this test's path");
    let started = Instant::now();
    for run in 0..runs {
        let mut c = Command::new(&exe)
            .env("TEMPORA_MEMORY_CHILD", "1")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the child");
        let began = Instant::now();
        let status = loop {
            if let Some(status) = c.try_wait().expect("wait for the child") {
                break status;
            }
            if began.elapsed() > STUCK {
                let _ = c.kill();
                let _ = c.wait();
                panic!("run {run}: the child was still running after {STUCK:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        use std::io::Read;
        c.stderr
            .take()
            .expect("piped")
            .read_to_string(&mut err)
            .expect("the child's stderr");
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(0), _) => {}
            (_, Some(sig)) => panic!(
                "run {run}: the child was killed by signal {sig}{} after {:?}\n{err}",
                if sig == libc::SIGABRT {
                    " (SIGABRT: an allocation failure aborted the process)"
                } else {
                    ""
                },
                began.elapsed()
            ),
            (code, _) => panic!("run {run}: the child failed ({code:?})\n{err}"),
        }
        if run == 0 || run + 1 == runs {
            eprint!("run {run}: {err}");
        }
    }
    eprintln!("memory: {runs} run(s) in {:?}", started.elapsed());
}
