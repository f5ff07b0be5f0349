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
    /// Whether the implementation delivers events (`arm_at`, `drain`): the floor does not.
    const DELIVERS: bool = true;
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
    /// Polls, then takes the events as an event loop that drains its queue does: up to
    /// `RUN` at a time with `try_recv_many`.
    fn drain(&self, expected: usize) -> usize {
        const RUN: usize = 256;
        let mut got = 0;
        let mut events = Vec::with_capacity(RUN);
        let start = Instant::now();
        while got < expected && start.elapsed() < Duration::from_secs(10) {
            self.timers.poll();
            loop {
                events.clear();
                let taken = self.owner.try_recv_many(&mut events, RUN);
                if taken == 0 {
                    break;
                }
                got += taken;
                black_box(&events);
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

/// The floor: what no implementation of a relative settime or a gettime can avoid, measured
/// beside them. Each call reads `CLOCK_MONOTONIC` with `clock_gettime` (through the vDSO) and
/// finds its timer's slot by one hash of the ID in an open table of 8-byte slots, a power of
/// two at least twice n (for n = 10k, 256 KiB: cache-resident), where it loads the expiry
/// (gettime) or stores the new one (settime). Nothing else: no lock, no ordering, no wheel, no
/// validation of the ID. It has no events (`DELIVERS` is false).
pub(crate) struct FloorSvc {
    slots: Vec<std::cell::Cell<u64>>,
    shift: u32,
}

impl FloorSvc {
    pub(crate) fn new() -> FloorSvc {
        FloorSvc {
            slots: Vec::new(),
            shift: 64,
        }
    }

    /// The slot of `id`: a Fibonacci hash, its top bits.
    #[inline]
    fn slot(&self, id: u64) -> &std::cell::Cell<u64> {
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift;
        // The table is a power of two of `64 - shift` bits: `h` is always in range, and the
        // bounds check a compiler cannot remove is one compare, left in.
        &self.slots[h as usize]
    }

    /// `CLOCK_MONOTONIC` through the vDSO, with nothing around it.
    #[inline]
    fn now() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

impl Service for FloorSvc {
    const NAME: &'static str = "floor";
    const DELIVERS: bool = false;
    type Id = u64;
    fn create(&mut self, n: usize) -> Result<Vec<u64>, String> {
        let bits = (2 * n.max(1)).next_power_of_two().trailing_zeros();
        self.shift = 64 - bits;
        self.slots = (0..1usize << bits).map(|_| Default::default()).collect();
        Ok((1..=n as u64).collect())
    }
    #[inline]
    fn arm(&self, id: u64, value: u64) {
        let at = Self::now() + value;
        self.slot(black_box(id)).set(black_box(at));
    }
    fn arm_at(&self, id: u64, at: u64) {
        self.slot(id).set(at);
    }
    #[inline]
    fn disarm(&self, id: u64) {
        self.slot(black_box(id)).set(0);
    }
    #[inline]
    fn gettime(&self, id: u64) -> u64 {
        let now = Self::now();
        self.slot(black_box(id)).get().saturating_sub(now)
    }
    fn drain(&self, _expected: usize) -> usize {
        0
    }
    fn delete(&mut self, _ids: &[u64]) {
        self.slots = Vec::new();
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
            Notify::callback(move |_| {
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
