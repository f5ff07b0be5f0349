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
    // tempora's own collector: the process-wide default one, which tempora does not use, would
    // leave an earlier run's service to be freed inside the next measurement.
    tempora::bench_door::collect_deferred();
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

#[cfg(test)]
mod tests {
    use super::*;
    use tempora::clock::ClockId;
    use tempora::{Notify, Timers};

    /// A dropped owner's slot pages reach its service's pool through tempora's epoch
    /// collector; settling runs that collector's due work, so the pages are pooled after it
    /// (before, it flushed the process-wide default collector, which tempora does not use, and
    /// an earlier run's memory was freed inside the next measurement).
    #[test]
    fn settling_runs_the_frees_tempora_deferred() {
        let timers = Timers::builder().drivers(0).build().unwrap();
        let owner = timers.owner();
        owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
        drop(owner);
        // Another test's thread may hold a pin for a moment: a few tries, none needed alone.
        for _ in 0..50 {
            settle_reclamation();
            if timers.stats().registry.pooled_bytes > 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("the dropped owner's pages never reached the pool");
    }
}
