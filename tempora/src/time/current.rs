//! The service the free functions use: [`global`], built on first use.

use crate::sync::{rank, RankedMutex};
use crate::Timers;
use std::sync::OnceLock;

/// The process-wide service of the free functions: OS clocks, the default configuration
/// (one driver), built on first use and never stopped.
///
/// # Panics
/// If it cannot be built: its driver thread cannot start ([`try_global`] reports that).
pub fn global() -> &'static Timers {
    try_global().expect("tempora: the global service cannot start")
}

/// [`global`], or the error building it met (the OS refused its driver thread: `EAGAIN` and
/// the like); the next call tries again. One service is built however many threads ask at
/// once, and the C ABI's default owner is an owner of this same service.
pub fn try_global() -> Result<&'static Timers, crate::Error> {
    static GLOBAL: OnceLock<Timers> = OnceLock::new();
    // Held while the service is built, so that one is built; a failed attempt leaves
    // `GLOBAL` empty for the next call.
    #[cfg(not(loom))]
    static BUILDING: RankedMutex<(), { rank::BUILDING }> = RankedMutex::new(());
    // Loom's mutex has no `const` constructor (and no loom model builds the global service).
    #[cfg(loom)]
    static BUILDING: std::sync::LazyLock<RankedMutex<(), { rank::BUILDING }>> =
        std::sync::LazyLock::new(|| RankedMutex::new(()));
    if let Some(t) = GLOBAL.get() {
        return Ok(t);
    }
    // Nothing is changed under it but `GLOBAL`, which a panic leaves empty or set.
    let _building = BUILDING.lock_or_recover();
    if let Some(t) = GLOBAL.get() {
        return Ok(t);
    }
    let timers = Timers::builder().build()?;
    Ok(GLOBAL.get_or_init(|| timers))
}
