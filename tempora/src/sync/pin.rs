//! [`pin`]: every epoch pin of the crate; [`pin_walk`]: the by-ID walk of the registry's
//! tables, which touches no epoch; [`walks_done`]: what a retired table's free waits for.
//!
//! An epoch pin (of tempora's own `crossbeam_epoch` collector, which only [`pin`] pins) keeps
//! the memory a lock-free walker may stand on (a retired hash table, a slot directory) from
//! being freed. It costs a `SeqCst` fence per pin, and it is not reentrant across a signal
//! handler: the first pin of a thread (and the last unpin) publishes the thread's epoch in
//! several steps, and a pin made by a handler that interrupted those steps could believe itself
//! protected when it is not, or run the epoch's collection (which frees memory) in the middle
//! of them.
//!
//! # Walks
//!
//! The by-ID calls (`gettime`, `settime`, `getoverrun`: the registry's `with_timer`, `read`,
//! `read_state`) are the hot path and the calls a signal handler may make, so their walk takes
//! no pin. What such a walk can reach is the current tables and timer slots; slots are never
//! freed while the registry exists (`registry/slots.rs`), and a retired table is freed only
//! after the epoch's grace period (for the pinned users) *and* once [`walks_done`] says no walk
//! may stand on it (`registry/table.rs`, `drop_deferred`). The walk and the free are the
//! store-buffering pattern, fenced asymmetrically (`sync/barrier.rs`):
//!
//! - the walk opens its thread's *mark* (a word of its own, indexed by `thread_index`: a load
//!   and a store), then the light fence (a compiler fence), then loads the current table;
//! - the free runs after the table's retirement (the current pointer no longer leads to it),
//!   then the heavy fence (`membarrier`), then samples every mark, and waits for each walk
//!   that was open to close (its mark shows no open walk, or a later outermost one).
//!
//! With the heavy fence between them, either the free sees a walk's mark open, or the walk's
//! load of the current table came after the retirement and cannot reach the retired table. A
//! walk closes with a release store, so its loads are done before a free that saw it closed.
//! A signal handler's walk inside an open one only deepens the mark (a load and a store, which
//! a handler between them leaves as it found it), and never touches the epoch. A thread
//! without a mark (beyond `THREAD_SLOTS` live threads, or exiting) counts its walk in one of
//! two process-wide counters instead ([`Unmarked`]), with a `SeqCst` fence. A free that finds
//! a count open flips which counter new walks take and waits for the old one to drain, twice:
//! each wait sees only walks begun before its flip (and a few that read the phase just
//! before it), so it ends however many threads keep walking. A forked child closes the walks
//! of the parent's other threads ([`watch_forks`]): they do not exist there.
//!
//! What no walk may do: defer anything through its guard (the epoch's unprotected one, on
//! which a deferred function runs at once), or pin: the calls a handler may make never pin.
//! The protocol's model is `sync/loom_tests.rs`'s `loom_a_walk_never_reaches_a_freed_table`.

use crossbeam_epoch::Guard;

/// tempora's own epoch collector. Not the process-wide default one: another crate's pin of
/// that one (a work-stealing deque's, say) is made without [`pin`]'s marks, and a handler that
/// interrupted its steps would pin "nested" into a half-made pin. Only [`pin`] pins this one.
#[cfg(not(loom))]
fn collector() -> &'static crossbeam_epoch::Collector {
    static COLLECTOR: super::RaceOnce<crossbeam_epoch::Collector> = super::RaceOnce::new();
    COLLECTOR.get_or_init(crossbeam_epoch::Collector::new)
}

#[cfg(not(loom))]
thread_local! {
    /// This thread's participant in [`collector`] (registering allocates: a thread's first
    /// tempora call, made outside a signal handler).
    static HANDLE: crossbeam_epoch::LocalHandle = collector().register();
}

/// A pin of tempora's collector by this thread (during the thread's exit, when its handle is
/// gone, by a handle of its own).
#[cfg(not(loom))]
#[inline]
fn epoch_pin() -> Guard {
    HANDLE
        .try_with(|h| h.pin())
        .unwrap_or_else(|_| collector().register().pin())
}

/// By-ID walks made without a mark of their own ([`pin_walk`]: a thread past the marked
/// indices, or exiting) and not finished.
#[cfg(not(loom))]
static UNMARKED: Unmarked = Unmarked::new();

#[cfg(not(loom))]
thread_local! {
    /// This thread's share of each of [`UNMARKED`]'s counts (what a forked child keeps of
    /// them, [`watch_forks`]).
    static OWN_UNMARKED: [std::cell::Cell<usize>; 2] =
        const { [std::cell::Cell::new(0), std::cell::Cell::new(0)] };
}

/// Walks open without a mark, counted in two phases: a walk counts itself in the counter of
/// the phase it reads, and a free waits each counter out after flipping the phase away from
/// it, so new walks never keep a wait going (module doc, "Walks").
pub(crate) struct Unmarked {
    count: [super::primitives::AtomicUsize; 2],
    /// The counter new walks take (its low bit).
    phase: super::primitives::AtomicUsize,
    /// Held by the one free that flips and waits ([`Unmarked::wait_out`]): two frees flipping
    /// at once could each keep the other's counter filling. A flag, not a mutex: a forked
    /// child clears it ([`watch_forks`]), where the thread that held it does not exist.
    flipping: super::primitives::AtomicBool,
}

impl Unmarked {
    #[cfg(not(loom))]
    const fn new() -> Self {
        use super::primitives::{AtomicBool, AtomicUsize};
        Unmarked {
            count: [AtomicUsize::new(0), AtomicUsize::new(0)],
            phase: AtomicUsize::new(0),
            flipping: AtomicBool::new(false),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        use super::primitives::{AtomicBool, AtomicUsize};
        Unmarked {
            count: [AtomicUsize::new(0), AtomicUsize::new(0)],
            phase: AtomicUsize::new(0),
            flipping: AtomicBool::new(false),
        }
    }

    /// Opens a walk: counted in the current phase's counter, then a `SeqCst` fence (pairs
    /// with the free's heavy fence: either the free sees the count, or this walk's loads of
    /// the current table see the retirement). Returns the counter to give to
    /// [`Unmarked::exit`].
    #[inline]
    pub(crate) fn enter(&self) -> usize {
        use super::primitives::Ordering::{Relaxed, SeqCst};
        // Relaxed: a phase read just before a flip only puts this walk in the counter being
        // waited out, which waits for it, or in one the free has already seen empty, which is
        // safe by the fence below.
        let p = self.phase.load(Relaxed) & 1;
        self.count[p].fetch_add(1, Relaxed);
        super::primitives::fence(SeqCst);
        p
    }

    /// Closes a walk [`Unmarked::enter`] counted in `p`.
    #[inline]
    pub(crate) fn exit(&self, p: usize) {
        // Release: the walk's loads are done before the count drops.
        self.count[p].fetch_sub(1, super::primitives::Ordering::Release);
    }

    /// Whether a walk is counted open (after the caller's heavy fence).
    pub(crate) fn any_open(&self) -> bool {
        use super::primitives::Ordering::Acquire;
        // Acquire: a walk that ended is over before the caller frees (pairs with `exit`).
        self.count[0].load(Acquire) != 0 || self.count[1].load(Acquire) != 0
    }

    /// Waits until every walk counted open before the call has closed: for each counter in
    /// turn, the phase flipped away from it, then the counter waited down to zero. A walk
    /// stays in the counter it entered, and each counter reaches zero after the call began,
    /// so each walk open then has closed; new walks take the other counter, so each wait ends.
    pub(crate) fn wait_out(&self) {
        use super::primitives::backoff;
        use super::primitives::Ordering::{AcqRel, Acquire, Relaxed, Release};
        let mut spins = 0;
        while self
            .flipping
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
        {
            backoff(&mut spins);
        }
        for _ in 0..2 {
            // AcqRel: one flip after the other, in one order for every free.
            let old = self.phase.fetch_xor(1, AcqRel) & 1;
            let mut spins = 0;
            while self.count[old].load(Acquire) != 0 {
                backoff(&mut spins);
            }
        }
        self.flipping.store(false, Release);
    }

    /// In a forked child, where only the forking thread exists: its own counts, no flip held.
    #[cfg(not(loom))]
    fn keep_only(&self, own: [usize; 2]) {
        use super::primitives::Ordering::Relaxed;
        self.count[0].store(own[0], Relaxed);
        self.count[1].store(own[1], Relaxed);
        self.flipping.store(false, Relaxed);
    }
}

/// Registers (once per process; a child inherits it) the fork handler that closes, in the
/// child, the walks its parent's other threads had open: those threads do not exist there, and
/// a mark left open would make every later free wait for ever. The forking thread's own walks
/// stay open (a signal handler may fork inside one). Called before a service is built, beside
/// `fork::watch`; not through a `Once` (the reason is in `fork.rs`). `false` if the C library
/// refused the registration (no memory).
pub(crate) fn watch_forks() -> bool {
    #[cfg(not(loom))]
    {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        static WATCHED: AtomicBool = AtomicBool::new(false);
        extern "C" fn forked() {
            // Relaxed (all): the child has one thread when this runs, before `fork` returns.
            let own = super::thread::claimed_index();
            for (i, m) in MARKS.iter().enumerate() {
                if Some(i) != own {
                    m.0.store(0, Relaxed);
                }
            }
            UNMARKED.keep_only(OWN_UNMARKED.with(|c| [c[0].get(), c[1].get()]));
        }
        // `forked` only stores to atomics and reads this thread's constant-initialized
        // thread-locals, as a child handler must; storing 0 twice is harmless.
        super::fork::at_fork_child(&WATCHED, forked)
    }
    #[cfg(loom)]
    true
}

/// One thread's walk mark: `(outermost walks begun << DEPTH_BITS) | walks open`. Written only
/// by the thread holding the mark's index (and by a signal handler on that thread, whose
/// walks close what they open before the interrupted code goes on); read by [`walks_done`].
#[derive(Default)]
pub(crate) struct Mark(super::primitives::AtomicU64);

/// Bits of a mark that count its open (nested) walks.
const DEPTH_BITS: u32 = 8;
const DEPTH: u64 = (1 << DEPTH_BITS) - 1;

impl Mark {
    /// Opens a walk: a new outermost walk bumps the begun count, a nested one (a handler's,
    /// inside a walk it interrupted) only the depth. A load and a store, not a
    /// read-modify-write: only this thread writes, and a handler between the two leaves the
    /// mark as it found it.
    #[inline(always)]
    pub(crate) fn open(&self) {
        use super::primitives::Ordering::Relaxed;
        let v = self.0.load(Relaxed);
        let next = if v & DEPTH == 0 {
            v + (1 << DEPTH_BITS) + 1
        } else {
            v + 1
        };
        // Relaxed: ordered before the walk's loads by the caller's fence (module doc).
        self.0.store(next, Relaxed);
    }

    /// Closes the walk [`Mark::open`] opened.
    #[inline(always)]
    pub(crate) fn close(&self) {
        use super::primitives::Ordering::{Relaxed, Release};
        let v = self.0.load(Relaxed);
        // Release: the walk's loads are done before a free that sees the walk closed.
        self.0.store(v - 1, Release);
    }

    /// The mark as [`walks_done`] samples it: `None` when no walk is open.
    pub(crate) fn sample(&self) -> Option<u64> {
        // Acquire: pairs with `close`'s Release.
        let v = self.0.load(super::primitives::Ordering::Acquire);
        (v & DEPTH != 0).then_some(v)
    }

    /// Whether the outermost walk open when `sampled` was read has closed: the mark has no
    /// open walk, or has begun another outermost one since.
    pub(crate) fn moved_on(&self, sampled: u64) -> bool {
        self.sample()
            .is_none_or(|v| v >> DEPTH_BITS != sampled >> DEPTH_BITS)
    }
}

/// Every thread index's mark, each on its own line (a thread writes its mark twice per walk).
#[cfg(not(loom))]
static MARKS: [crossbeam_utils::CachePadded<Mark>; super::thread::THREAD_SLOTS] =
    [const { crossbeam_utils::CachePadded::new(Mark(std::sync::atomic::AtomicU64::new(0))) };
        super::thread::THREAD_SLOTS];

/// What a walk holds open: its thread's mark, or a count of [`Unmarked`].
#[cfg(not(loom))]
#[derive(Clone, Copy)]
enum Held {
    Mark(&'static Mark),
    Count(usize),
}

/// A by-ID walk (see the module doc); ends when dropped.
pub(crate) struct Walk {
    guard: std::mem::ManuallyDrop<Guard>,
    #[cfg(not(loom))]
    held: Held,
    #[cfg(loom)]
    pinned: Pinned,
}

impl std::ops::Deref for Walk {
    type Target = Guard;
    #[inline]
    fn deref(&self) -> &Guard {
        &self.guard
    }
}

/// Starts a by-ID walk of the registry's tables (the module doc, "Walks"): the calling
/// thread's mark opened, then the light fence. The walk must not defer anything through the
/// guard (it is the epoch's unprotected one: a deferred function would run at once) and
/// reaches only the current tables and timer slots.
#[inline(always)]
pub(crate) fn pin_walk() -> Walk {
    #[cfg(not(loom))]
    {
        let index = super::thread::thread_index();
        let held = match MARKS.get(index) {
            Some(m) => {
                m.open();
                super::barrier::light();
                Held::Mark(m)
            }
            None => {
                let p = UNMARKED.enter();
                // `try_with`: an exiting thread's locals may be gone; its walk is counted
                // all the same, and a fork from a thread's exit is not a case to keep for.
                let _ = OWN_UNMARKED.try_with(|c| c[p].set(c[p].get() + 1));
                Held::Count(p)
            }
        };
        Walk {
            // SAFETY: the unprotected guard is used only for loads along the current tables
            // and slots, which the mark keeps (module doc); nothing is deferred through it.
            guard: std::mem::ManuallyDrop::new(unsafe {
                std::ptr::read(crossbeam_epoch::unprotected())
            }),
            held,
        }
    }
    #[cfg(loom)]
    {
        let pinned = pin();
        Walk {
            // SAFETY: as above; under loom the walk is also pinned (`pinned`).
            guard: std::mem::ManuallyDrop::new(unsafe {
                std::ptr::read(crossbeam_epoch::unprotected())
            }),
            pinned,
        }
    }
}

impl Drop for Walk {
    #[inline]
    fn drop(&mut self) {
        #[cfg(not(loom))]
        match self.held {
            Held::Mark(m) => m.close(),
            Held::Count(p) => {
                UNMARKED.exit(p);
                let _ = OWN_UNMARKED.try_with(|c| c[p].set(c[p].get().saturating_sub(1)));
            }
        }
    }
}

/// Whether no walk may stand on a table retired before the call: the heavy fence, then every
/// mark and the count checked. `Err` when a walk is open, with the wait for it to run on a
/// thread that may block ([`WalksOpen::wait`]); not here, as the thread that frees may itself
/// be inside a walk.
pub(crate) fn walks_done() -> Result<(), WalksOpen> {
    super::barrier::heavy();
    #[cfg(not(loom))]
    {
        // Acquire (in `sample` too): a walk that ended is over before the caller frees (pairs
        // with the walk's Release close or decrement).
        let open = MARKS.iter().any(|m| m.sample().is_some()) || UNMARKED.any_open();
        if open {
            return Err(WalksOpen(()));
        }
    }
    Ok(())
}

/// Walks [`walks_done`] found open.
pub(crate) struct WalksOpen(());

impl WalksOpen {
    /// Waits until every walk open now has closed. (It samples the marks again: a walk
    /// that began after [`walks_done`]'s fence cannot reach the retired table, and waiting for
    /// it too only waits longer.)
    pub(crate) fn wait(self) {
        #[cfg(not(loom))]
        {
            for m in MARKS.iter() {
                if let Some(v) = m.sample() {
                    while !m.moved_on(v) {
                        std::thread::yield_now();
                    }
                }
            }
            UNMARKED.wait_out();
        }
    }
}

/// An epoch pin ([`pin`]); ends when dropped.
pub(crate) struct Pinned {
    guard: std::mem::ManuallyDrop<Guard>,
}

impl std::ops::Deref for Pinned {
    type Target = Guard;
    #[inline]
    fn deref(&self) -> &Guard {
        &self.guard
    }
}

impl Pinned {
    /// Unpins and pins again (`Guard::repin`): lets the epoch advance past a long pinned
    /// stretch.
    pub(crate) fn repin(&mut self) {
        self.guard.repin();
    }
}

/// Pins the current thread's epoch (see the module doc).
#[inline]
pub(crate) fn pin() -> Pinned {
    #[cfg(not(loom))]
    let guard = epoch_pin();
    #[cfg(loom)]
    let guard = crossbeam_epoch::pin();
    Pinned {
        guard: std::mem::ManuallyDrop::new(guard),
    }
}

impl Drop for Pinned {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped once, here; the field is not used afterwards.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.guard) };
    }
}

/// Runs the frees deferred through tempora's collector that are due, as far as other threads'
/// pins let the epoch advance: each round pins, flushes this thread's deferred work to the
/// collector and collects what every pinned thread has passed (three rounds take a free
/// deferred just before past the two epochs of its grace period; the rest are for work
/// queued behind it). What a dropped service or owner left for the epoch to free is then
/// freed, or queued for a freeing thread (`registry/table.rs`, `drop_large`), unless another
/// thread stays pinned meanwhile. Runs deferred destructors: call it with no tempora lock
/// held.
pub(crate) fn collect_deferred() {
    for _ in 0..8 {
        pin().flush();
    }
}

/// Runs `f` while this thread has a walk open (for the tests of what waits for one).
#[cfg(all(test, not(loom)))]
pub(crate) fn with_walk_for_tests<R>(f: impl FnOnce() -> R) -> R {
    let walk = pin_walk();
    let r = f();
    drop(walk);
    r
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A handler's walk inside a walk it interrupted (played by opening one in another) only
    /// deepens the mark; the outermost walk stays open, and counted as the same walk, until
    /// it closes.
    #[test]
    fn a_nested_walk_keeps_the_outer_one_open() {
        let m = Mark::default();
        assert_eq!(m.sample(), None);
        m.open();
        let outer = m.sample().expect("open");
        m.open();
        m.close();
        assert!(!m.moved_on(outer), "the outer walk is still open");
        m.close();
        assert!(m.moved_on(outer));
        m.open();
        assert!(
            m.moved_on(outer),
            "a new outermost walk is not the sampled one"
        );
        m.close();
    }

    /// A child forked while another thread of the parent has a walk open finds that walk
    /// closed (the thread does not exist there, and a free would wait for it for ever); the
    /// forking thread's own open walk stays open until it closes it.
    #[test]
    fn a_fork_closes_the_other_threads_walks_in_the_child() {
        assert!(watch_forks());
        let (inside, release) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let walker = {
            let (inside, release) = (inside.clone(), release.clone());
            std::thread::spawn(move || {
                let walk = pin_walk();
                inside.wait();
                release.wait();
                drop(walk);
            })
        };
        inside.wait();
        let own = pin_walk();
        // SAFETY: the child only touches the marks and exits with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let own_open = walks_done().is_err();
            drop(own);
            let none_open = walks_done().is_ok();
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(i32::from(!own_open) | i32::from(!none_open) << 1) };
        }
        assert!(pid > 0, "fork failed");
        drop(own);
        release.wait();
        walker.join().unwrap();
        let status = super::super::fork::child_status(pid).expect("the child finished");
        assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "1: the forking thread's own walk was closed; 2: the other thread's walk stayed open"
        );
    }

    /// A walk's mark is seen by `walks_done`; without one open on this thread it may still find
    /// other tests' walks, so only the open case is checked.
    #[test]
    fn an_open_walk_is_found() {
        let walk = pin_walk();
        assert!(
            matches!(walk.held, Held::Mark(_)),
            "a test thread has a marked index"
        );
        let open = walks_done().expect_err("this thread's walk is open");
        drop(walk);
        open.wait();
    }

    /// A free's wait for unmarked walks ends while walks keep overlapping without a pause (a
    /// thread past the marked indices walking back to back, played by one thread that opens
    /// each walk before closing the one before): the count is never zero, and a wait for
    /// zero would never end.
    #[test]
    fn a_wait_for_unmarked_walks_ends_while_walks_keep_overlapping() {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let u = std::sync::Arc::new(Unmarked::new());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let walker = {
            let (u, stop) = (u.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut open = u.enter();
                while !stop.load(Relaxed) {
                    let next = u.enter();
                    u.exit(open);
                    open = next;
                }
                u.exit(open);
            })
        };
        while !u.any_open() {
            std::thread::yield_now();
        }
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let waiter = {
            let (u, done) = (u.clone(), done.clone());
            std::thread::spawn(move || {
                u.wait_out();
                done.store(true, Relaxed);
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done.load(Relaxed) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let ended_while_walking = done.load(Relaxed);
        // Stopping the walks lets a wait for a zero count end too, so the test ends either way.
        stop.store(true, Relaxed);
        walker.join().unwrap();
        waiter.join().unwrap();
        assert!(
            ended_while_walking,
            "the wait did not end within 10 s while walks went on"
        );
        assert!(!u.any_open());
    }

    /// The wait does not end before a walk that was open when it began has closed.
    #[test]
    fn a_wait_for_unmarked_walks_outlasts_an_open_one() {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let u = std::sync::Arc::new(Unmarked::new());
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let p = u.enter();
        let waiter = {
            let (u, closed) = (u.clone(), closed.clone());
            std::thread::spawn(move || {
                u.wait_out();
                closed.load(Relaxed)
            })
        };
        for _ in 0..1000 {
            std::thread::yield_now();
        }
        closed.store(true, Relaxed);
        u.exit(p);
        assert!(
            waiter.join().unwrap(),
            "the wait ended while the walk was open"
        );
    }
}
