//! Forked children for the kernel peers that need processes of their own (the seed suite's
//! forked case; restoring IDs from a fresh per-process ID counter).
//!
//! The rule a child follows: it was forked from a process that may have threads, so it may only
//! do what is async-signal-safe until it exits: syscalls, clock reads, writes to memory it
//! already owns. It must not allocate (another thread may have held the allocator's lock at
//! the fork) nor print. So everything a child needs (buffers with their capacity) is prepared
//! before the fork, its result is a plain `Copy` value written into a shared mapping, and
//! [`in_children`] checks with the counting allocator that the child made no allocation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::alloc::{allocation_calls, count_calls};

/// Where a child writes its outcome.
struct Slot<R> {
    /// 0 running, 1 returned, 2 panicked.
    state: AtomicU32,
    /// Allocations the child made (must be 0).
    allocations: AtomicU32,
    value: R,
}

/// Forks `count` children that start together (all forked and waiting before any begins).
/// Child `i` runs `child(i, &mut contexts[i])`, where `contexts[i] = prepare(i)` was built in
/// this process before forking, and must not allocate; its return value comes back in slot
/// `i`. An error if a fork failed, a child panicked, allocated, or did not finish.
pub fn in_children<C, R: Copy + Default>(
    count: usize,
    prepare: impl FnMut(usize) -> C,
    child: impl Fn(usize, &mut C) -> R,
) -> Result<Vec<R>, String> {
    let mut contexts: Vec<C> = (0..count).map(prepare).collect();
    let header = 64;
    let size = header + count * std::mem::size_of::<Slot<R>>();
    // SAFETY: an anonymous shared mapping of `size` bytes, checked for failure below; it
    // stays shared with the children across fork.
    let mem = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mem == libc::MAP_FAILED {
        return Err("mmap failed".into());
    }
    let base = mem.cast::<u8>();
    // SAFETY: the mapping is page aligned, zeroed and at least `header` bytes: the two
    // counters at offsets 0 and 4 are valid zero atomics, only ever accessed atomically.
    let (ready, go) = unsafe {
        let p = base.cast::<AtomicU32>();
        (&*p, &*p.add(1))
    };
    let slots = {
        // SAFETY: the slots follow the header inside the mapping, at a 64-byte (so
        // sufficiently) aligned offset.
        let first = unsafe { base.add(header) }.cast::<Slot<R>>();
        for i in 0..count {
            // SAFETY: slot `i` lies inside the mapping; nothing else references it yet.
            unsafe {
                first.add(i).write(Slot {
                    state: AtomicU32::new(0),
                    allocations: AtomicU32::new(0),
                    value: R::default(),
                })
            };
        }
        first
    };
    let mut pids = Vec::with_capacity(count);
    for (i, ctx) in contexts.iter_mut().enumerate() {
        // SAFETY: fork(2). The child below only makes syscalls, reads clocks and touches its
        // prepared context and its slot, then `_exit`s: nothing that needs another thread's
        // locks.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            ready.fetch_add(1, Ordering::AcqRel);
            while go.load(Ordering::Acquire) == 0 {
                // SAFETY: sched_yield(2) has no preconditions.
                unsafe { libc::sched_yield() };
            }
            // SAFETY: slot `i` was initialised above; in this child only this code uses it.
            let slot = unsafe { &mut *slots.add(i) };
            count_calls();
            let before = allocation_calls();
            let result = catch_unwind(AssertUnwindSafe(|| child(i, ctx)));
            let allocated = allocation_calls() - before;
            slot.allocations
                .store(allocated.min(u32::MAX as usize) as u32, Ordering::Relaxed);
            let state = match result {
                Ok(v) => {
                    slot.value = v;
                    1
                }
                Err(_) => 2,
            };
            slot.state.store(state, Ordering::Release);
            // SAFETY: ends the child without running the parent's destructors or atexit hooks.
            unsafe { libc::_exit(0) };
        }
        if pid < 0 {
            break;
        }
        pids.push(pid);
    }
    let start = Instant::now();
    while (ready.load(Ordering::Acquire) as usize) < pids.len()
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    go.store(1, Ordering::Release);
    for &pid in &pids {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is writable.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    let mut out = Vec::with_capacity(pids.len());
    let mut failure = None;
    for i in 0..pids.len() {
        // SAFETY: slot `i` was initialised above and its child has exited.
        let slot = unsafe { &*slots.add(i) };
        match slot.state.load(Ordering::Acquire) {
            1 => {}
            2 => {
                failure.get_or_insert_with(|| format!("child {i} panicked"));
            }
            _ => {
                failure.get_or_insert_with(|| format!("child {i} did not finish"));
            }
        }
        let allocated = slot.allocations.load(Ordering::Relaxed);
        if allocated != 0 {
            failure.get_or_insert_with(|| {
                format!("child {i} allocated {allocated} times after fork (not allowed)")
            });
        }
        out.push(slot.value);
    }
    // SAFETY: unmaps the mapping created above; the children are gone and no reference into
    // it outlives this function (`out` holds copies).
    unsafe { libc::munmap(mem, size) };
    if pids.len() < count {
        return Err(format!(
            "fork failed after {} of {count} processes",
            pids.len()
        ));
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(out),
    }
}

/// A one-use barrier for the children of one [`in_children`] call, in a shared mapping made
/// before the fork: each child's [`ChildrenBarrier::wait`] returns once all `count` arrived, so
/// a second phase of their work starts together as the first did. A child that never arrives
/// (it panicked) holds the others at most 30 s. Waiting only reads and writes the mapping,
/// yields and reads the clock: what a forked child may do.
pub struct ChildrenBarrier {
    arrived: *mut AtomicU32,
    count: u32,
}

impl ChildrenBarrier {
    /// A barrier for `count` children; `None` if the mapping cannot be made.
    pub fn new(count: usize) -> Option<ChildrenBarrier> {
        // SAFETY: an anonymous shared mapping of one page, checked for failure below; the
        // children inherit it shared.
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        (mem != libc::MAP_FAILED).then(|| ChildrenBarrier {
            arrived: mem.cast(),
            count: u32::try_from(count).unwrap_or(u32::MAX),
        })
    }

    /// Arrives, then waits until every child has (or 30 s have passed).
    pub fn wait(&self) {
        // SAFETY: the mapping is page aligned and zeroed, so its first 4 bytes are a valid
        // zero atomic, only ever accessed atomically; it lives until `self` is dropped.
        let arrived = unsafe { &*self.arrived };
        arrived.fetch_add(1, Ordering::AcqRel);
        let start = Instant::now();
        while arrived.load(Ordering::Acquire) < self.count
            && start.elapsed() < Duration::from_secs(30)
        {
            // SAFETY: sched_yield(2) has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}

impl Drop for ChildrenBarrier {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`; no reference into it outlives `self`.
        unsafe { libc::munmap(self.arrived.cast(), 4096) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_return_their_values_through_the_shared_mapping() {
        let got = in_children(
            3,
            |i| Vec::<u64>::with_capacity(10 + i),
            |i, buf| {
                buf.push(i as u64 * 7);
                (buf.capacity(), buf[0])
            },
        )
        .unwrap();
        assert_eq!(got, vec![(10, 0), (11, 7), (12, 14)]);
    }

    #[test]
    fn a_child_that_allocates_is_reported() {
        let err =
            in_children(1, |_| (), |_, _| std::hint::black_box(vec![1u8; 100]).len()).unwrap_err();
        assert!(err.contains("allocated"), "{err}");
    }

    /// Each child reads, after the barrier, how many arrived: all of them, though child 0
    /// arrives 50 ms after the others.
    #[test]
    fn the_children_barrier_holds_each_child_until_all_arrived() {
        let barrier = ChildrenBarrier::new(3).unwrap();
        let got = in_children(
            3,
            |_| (),
            |i, _| {
                if i == 0 {
                    std::thread::sleep(Duration::from_millis(50));
                }
                barrier.wait();
                // SAFETY: as in `wait`: the mapping holds a valid atomic while `barrier` lives.
                unsafe { &*barrier.arrived }.load(Ordering::Acquire)
            },
        )
        .unwrap();
        assert_eq!(got, vec![3; 3]);
    }
}
