//! POSIX-style timers by ID, the kind of work of the service suite: [`Service`] is what each
//! implementation provides (tempora's `Owner` on an app-driven service, the kernel's POSIX
//! timers with signal delivery), with the one-shot arming helpers the service suite's driver
//! and firing cases share.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::{Notify, Owner, SetFlags, TimerId, Timers};

/// One implementation of POSIX-style timers by ID, as the service suite drives it: create n
/// timers, arm (relative or absolute, on `CLOCK_MONOTONIC`), disarm, read, take the expiry
/// events, delete.
pub(crate) trait Service {
    const NAME: &'static str;
    type Id: Copy;
    fn create(&mut self, n: usize) -> Result<Vec<Self::Id>, String>;
    fn arm(&self, id: Self::Id, value: u64);
    fn arm_at(&self, id: Self::Id, monotonic_ns: u64);
    fn disarm(&self, id: Self::Id);
    fn gettime(&self, id: Self::Id) -> u64;
    /// Delivers every pending event; how many.
    fn drain(&self, expected: usize) -> usize;
    fn delete(&mut self, ids: &[Self::Id]);
}

/// tempora: an owner of an app-driven service (no driver thread), whose events the caller
/// takes by polling, as an event loop does.
pub(crate) struct TemporaSvc {
    pub(crate) timers: Timers,
    pub(crate) owner: Owner,
}

impl Service for TemporaSvc {
    const NAME: &'static str = "tempora";
    type Id = TimerId;
    fn create(&mut self, n: usize) -> Result<Vec<TimerId>, String> {
        (0..n)
            .map(|_| {
                self.owner
                    .create(ClockId::Monotonic, Notify::Queue)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
    #[inline]
    fn arm(&self, id: TimerId, value: u64) {
        let r = self.owner.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_nanos(value),
            Duration::ZERO,
        );
        black_box(r.expect("live timer"));
    }
    fn arm_at(&self, id: TimerId, at: u64) {
        arm_once_at(&self.owner, id, at).expect("live timer");
    }
    #[inline]
    fn disarm(&self, id: TimerId) {
        let r = self
            .owner
            .settime(id, SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO);
        black_box(r.expect("live timer"));
    }
    #[inline]
    fn gettime(&self, id: TimerId) -> u64 {
        self.owner.gettime(id).expect("live timer").as_nanos().0
    }
    fn drain(&self, expected: usize) -> usize {
        let mut got = 0;
        let start = Instant::now();
        while got < expected && start.elapsed() < Duration::from_secs(10) {
            self.timers.poll();
            while self.owner.try_recv().is_some() {
                got += 1;
            }
        }
        got
    }
    fn delete(&mut self, ids: &[TimerId]) {
        for &id in ids {
            let _ = self.owner.delete(id);
        }
    }
}

/// The kernel's POSIX timers, each signalling `signo` to thread `tid` (which blocks it), whose
/// events are taken with `sigtimedwait`.
pub(crate) struct KernelSvc {
    pub(crate) signo: i32,
    pub(crate) tid: i32,
}

impl Service for KernelSvc {
    const NAME: &'static str = "kernel";
    type Id = i32;
    fn create(&mut self, n: usize) -> Result<Vec<i32>, String> {
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            match tempora_kernel::timer_create_signal(
                libc::CLOCK_MONOTONIC,
                self.signo,
                i as i32,
                self.tid,
            ) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.delete(&ids);
                    let limit = tempora_kernel::rlimit_sigpending()
                        .map_or_else(|| "unknown".into(), |l| l.to_string());
                    return Err(format!(
                        "timer_create: errno {e} after {i} timers (RLIMIT_SIGPENDING {limit})"
                    ));
                }
            }
        }
        Ok(ids)
    }
    #[inline]
    fn arm(&self, id: i32, value: u64) {
        black_box(tempora_kernel::timer_settime(id, 0, value, 0).expect("live timer"));
    }
    fn arm_at(&self, id: i32, at: u64) {
        tempora_kernel::timer_settime(id, libc::TIMER_ABSTIME, at, 0).expect("live timer");
    }
    #[inline]
    fn disarm(&self, id: i32) {
        black_box(tempora_kernel::timer_settime(id, 0, 0, 0).expect("live timer"));
    }
    #[inline]
    fn gettime(&self, id: i32) -> u64 {
        tempora_kernel::timer_gettime(id).expect("live timer").0
    }
    fn drain(&self, expected: usize) -> usize {
        let mut got = 0;
        let start = Instant::now();
        while got < expected && start.elapsed() < Duration::from_secs(10) {
            while let Ok(Some(_)) = tempora_kernel::take_signal(self.signo) {
                got += 1;
            }
        }
        got
    }
    fn delete(&mut self, ids: &[i32]) {
        for &id in ids {
            let _ = tempora_kernel::timer_delete(id);
        }
        while let Ok(Some(_)) = tempora_kernel::take_signal(self.signo) {}
    }
}

/// `CLOCK_MONOTONIC` now, in ns (the clock the service cases arm on).
pub(crate) fn monotonic_now() -> u64 {
    use tempora::clock::{ClockSource, OsClock};
    OsClock.now(ClockId::Monotonic)
}

/// Arms `id` of `owner` to fire once at `at` ns on `CLOCK_MONOTONIC` (the service cases' and
/// the firing cases' one-shot).
pub(crate) fn arm_once_at(owner: &Owner, id: TimerId, at: u64) -> Result<(), String> {
    owner
        .settime(
            id,
            SetFlags::ABSTIME,
            Duration::from_nanos(at),
            Duration::ZERO,
        )
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Creates a one-shot callback timer in `owner`, armed at monotonic time `at` (ns), whose call
/// records how late it ran (ns past `at`) in `late`: the lateness probe of the driver and
/// firing cases.
pub(crate) fn arm_lateness_probe(
    owner: &Owner,
    at: u64,
    late: &std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
) -> Result<(), String> {
    let late = late.clone();
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |_, _| {
                let now = monotonic_now();
                late.lock().unwrap().push(now as f64 - at as f64);
            }),
        )
        .map_err(|e| e.to_string())?;
    arm_once_at(owner, id, at)
}

/// Waits, checking every `every`, until `late` holds `n` samples or 5 s have passed.
pub(crate) fn wait_for_samples(late: &std::sync::Mutex<Vec<f64>>, n: usize, every: Duration) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while late.lock().unwrap().len() < n && Instant::now() < deadline {
        std::thread::sleep(every);
    }
}
