//! A small number for the calling thread, for per-thread shards.

#[cfg(not(loom))]
use super::primitives::Ordering;

/// A small number for the calling thread: the lowest one no other live thread holds. Shards
/// (per-owner ID blocks and free lists, the registry's count stripes) are picked by
/// `thread_index() & mask`, so up to `mask + 1` threads that run at the same time always get
/// different shards, however many threads came and went before them. (The CPU number would
/// avoid even that bound, but a thread that migrates would then switch ID blocks, and IDs on
/// one thread would stop coming out in order.)
///
/// The index is claimed at the thread's first call, lock-free, from a bitmap of
/// [`THREAD_SLOTS`] indices, and given back when the thread exits. Beyond that many live
/// threads, indices come from a counter and are not reused (still unique, so a count stripe
/// keeps its single writer).
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn thread_index() -> usize {
    // A constant-initialized thread-local without a destructor: one load. `Held::drop` sets it
    // to "exited" before giving the index back.
    let fast = FAST.with(std::cell::Cell::get);
    if fast != UNSET {
        return fast;
    }
    claim_index()
}

#[cfg(not(loom))]
thread_local! {
    /// This thread's index once claimed (`usize::MAX` once given back), else `UNSET`.
    static FAST: std::cell::Cell<usize> = const { std::cell::Cell::new(UNSET) };
}

/// The calling thread's index if it holds one (`None` before its first [`thread_index`] and
/// once it gave the index back): one thread-local load, no claim, no allocation.
#[cfg(not(loom))]
pub(crate) fn claimed_index() -> Option<usize> {
    let fast = FAST.with(std::cell::Cell::get);
    (fast < THREAD_SLOTS).then_some(fast)
}

/// [`FAST`] before the thread's first call.
#[cfg(not(loom))]
const UNSET: usize = usize::MAX - 1;

/// [`thread_index`]'s first call on a thread (and any call during its exit).
#[cfg(not(loom))]
#[cold]
fn claim_index() -> usize {
    static USED: [std::sync::atomic::AtomicU64; THREAD_SLOTS / 64] =
        [const { std::sync::atomic::AtomicU64::new(0) }; THREAD_SLOTS / 64];
    static BEYOND: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(THREAD_SLOTS);

    fn claim() -> usize {
        for (w, word) in USED.iter().enumerate() {
            // Relaxed: a hint; the compare-exchange decides.
            let mut bits = word.load(Ordering::Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros();
                // AcqRel: Acquire pairs with the Release in `Held::drop` of the index's previous
                // holder, so its last writes to a single-writer stripe happen before ours.
                match word.compare_exchange_weak(
                    bits,
                    bits | 1 << bit,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return w * 64 + bit as usize,
                    Err(now) => bits = now,
                }
            }
        }
        // Relaxed: uniqueness comes from the atomic add.
        BEYOND.fetch_add(1, Ordering::Relaxed)
    }

    struct Held(usize);
    impl Drop for Held {
        fn drop(&mut self) {
            // First: a call after this point (another destructor's, or a signal handler's)
            // must not use the index another thread may claim next.
            FAST.with(|f| f.set(usize::MAX));
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            if self.0 < THREAD_SLOTS {
                // Release: pairs with the Acquire of the next claimer of this index (above).
                USED[self.0 / 64].fetch_and(!(1 << (self.0 % 64)), Ordering::Release);
            }
        }
    }
    thread_local! {
        static INDEX: Held = Held(claim());
    }
    // During thread teardown the index may already be gone: any shard is correct, and the
    // count stripe of an unowned index is written with an atomic add (see `Count::add_as`).
    let index = INDEX.try_with(|h| h.0).unwrap_or(usize::MAX);
    FAST.with(|f| f.set(index));
    index
}

/// Indices `thread_index` hands out and takes back.
#[cfg(not(loom))]
pub(crate) const THREAD_SLOTS: usize = 1024;

/// Under loom all model threads share shard 0 (the shard choice is a performance matter only).
#[cfg(loom)]
pub(crate) fn thread_index() -> usize {
    0
}

thread_local! {
    static BLOCKS_ALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is one [`spawn_blocking_signals`] started: it blocks every
/// signal, so `sigpending` there reports every pending signal of the process (and the
/// thread's own, which nobody sends it but by mistake).
pub(crate) fn blocks_all_signals() -> bool {
    BLOCKS_ALL.with(std::cell::Cell::get)
}

/// Starts a thread of tempora's (a driver, a spare, the clock watch, a deferred free) with
/// every signal blocked, as glibc starts its `SIGEV_THREAD` helper: a process-directed signal
/// then never lands on a tempora thread (where no handler of the application's expects it,
/// and where a `sigwait` in the application's `main` would miss it), and a signal the
/// application blocks everywhere stays blocked everywhere.
///
/// The mask is set in the calling thread around the spawn, so the new thread starts with it
/// (a thread inherits its creator's mask) and no signal can reach it before its first
/// instruction; the caller's mask is put back before returning.
///
/// # Errors
/// What [`std::thread::Builder::spawn`] returns.
pub(crate) fn spawn_blocking_signals<F: FnOnce() + Send + 'static>(
    name: String,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigfillset` initializes `all`; `pthread_sigmask` reads `all` and writes `old`,
    // both valid sigsets on this stack. It fails only for an invalid `how`.
    let blocked = unsafe {
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr()) == 0
    };
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        BLOCKS_ALL.with(|b| b.set(true));
        f();
    });
    if blocked {
        // SAFETY: `old` was written by the call above, which succeeded.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    }
    spawned
}
