//! What the suites' measurements share besides their settings: threads that start together
//! ([`on_threads`]) and finishing the work epoch reclamation deferred between runs
//! ([`settle_reclamation`]). `fork` runs a measurement in child processes.

use std::sync::Barrier;

/// Lets work deferred through epoch reclamation by earlier runs finish: tempora's retired tables
/// are freed (so they do not land inside the next memory measurement as a negative) and the
/// pages of deleted owners reach the registry's pool (so every warm run starts from the same
/// state instead of sometimes faulting fresh pages in, which made runs bimodal). The other
/// registries do not use the epoch; for them this is a no-op.
///
/// A large retired table is freed on a thread of its own (`tempora-free`): this also waits
/// (up to 10 s) until no such thread is left, so freeing an earlier run's hundreds of MiB does
/// not take CPU from the next measurement.
pub(crate) fn settle_reclamation() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while freeing_threads() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// This process's threads named `tempora-free` (0 if `/proc` cannot be read).
fn freeing_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == "tempora-free")
        })
        .count()
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
