//! What the suites' measurements share besides their settings: threads that start together
//! ([`on_threads`]) and finishing the work epoch reclamation deferred between runs
//! ([`settle_reclamation`]). `fork` runs a measurement in child processes.

use std::sync::Barrier;

/// Lets work deferred through epoch reclamation by earlier runs finish: tempora's retired tables
/// are freed (so they do not land inside the next memory measurement as a negative) and the
/// pages of deleted owners reach the registry's pool (so every warm run starts from the same
/// state instead of sometimes faulting fresh pages in, which made runs bimodal). The other
/// registries do not use the epoch; for them this is a no-op.
pub(crate) fn settle_reclamation() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
}

/// Runs `work(i)` for `i` in `0..threads`, each on a thread of its own, all starting together
/// (after a barrier); their results in order.
pub(crate) fn on_threads<T: Send>(threads: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    work(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
