//! Asymmetric fences: a hot side that pays a compiler fence and a rare side that pays a
//! `membarrier` system call.
//!
//! Two protocols of the crate are the store-buffering pattern (each side stores, then loads
//! what the other stored; one of the two loads must see the other's store): the statistics'
//! update against their flush (`stats/tally.rs`) and a by-ID walk against a table's free
//! (`sync/pin.rs`). Each needs a full fence on both sides, and one side runs on every call.
//! After `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` is registered, [`light`] (the hot
//! side) is a compiler fence and [`heavy`] (the rare side) the `membarrier` call, which runs a
//! full barrier on every CPU that runs a thread of this process (a descheduled thread passed
//! one when it was switched out): so each hot side's store-then-load has a full barrier either
//! between them or after both, as the `SeqCst` fence pair would give. Where `membarrier` is
//! refused (a seccomp filter, a kernel before 4.14), both are `SeqCst` fences. A forked child
//! inherits the registration with the address space (only `execve` resets it).
//!
//! Under loom both are `SeqCst` fences: the models check the protocols with the symmetric form.

use super::primitives::{fence, Ordering};

/// [`asymmetric`]'s answer once known: 0 not yet asked, 1 registered, 2 refused. An atomic
/// byte rather than a once-cell: the hot side reads it on every call (one load), and a fork
/// in the middle of the first call leaves the child at "not yet asked", which asks again.
#[cfg(all(not(loom), target_os = "linux"))]
static MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether this process is registered for expedited private `membarrier`s (registering at
/// the first call).
#[cfg(all(not(loom), target_os = "linux"))]
#[inline(always)]
pub(crate) fn asymmetric() -> bool {
    // Relaxed: the registration is the kernel's; a thread that reads 1 runs after it.
    match MODE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => register(),
    }
}

/// `asymmetric`'s first call: queries and registers (registering twice is harmless).
#[cfg(all(not(loom), target_os = "linux"))]
#[cold]
fn register() -> bool {
    // SAFETY: `membarrier` with a command and flags 0 reads and writes no memory of ours.
    let query = unsafe { libc::syscall(libc::SYS_membarrier, libc::MEMBARRIER_CMD_QUERY, 0) };
    let need =
        libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED | libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    let ok = query >= 0
        && (query as libc::c_int & need) == need
        // SAFETY: as above.
        && unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
            )
        } == 0;
    MODE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
    ok
}

/// Never under loom or off Linux.
#[cfg(any(loom, not(target_os = "linux")))]
pub(crate) fn asymmetric() -> bool {
    false
}

/// The hot side's fence, for a caller that read [`asymmetric`] once and kept the answer.
#[inline(always)]
pub(crate) fn light_as(asymmetric: bool) {
    if asymmetric {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The hot side's fence.
#[inline(always)]
pub(crate) fn light() {
    light_as(asymmetric());
}

/// The rare side's fence: a `membarrier` where the hot side's is a compiler fence, else a
/// `SeqCst` fence. Costs a system call and an interrupt of every CPU running a thread of
/// this process.
pub(crate) fn heavy() {
    #[cfg(all(not(loom), target_os = "linux"))]
    if asymmetric() {
        fence(Ordering::SeqCst);
        // SAFETY: as in `asymmetric`; this process registered for the command.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                0,
            )
        };
        // Registered, so it cannot fail but for a kernel bug; a failure here would break both
        // protocols silently, so it is a panic rather than a silent miss.
        assert_eq!(r, 0, "membarrier failed after registration");
        fence(Ordering::SeqCst);
        return;
    }
    fence(Ordering::SeqCst);
}
