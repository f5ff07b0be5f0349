//! The service suite's `inspect-list` case: `tempora ls PID` of a process holding n timers
//! (1M; `--quick` 100k), end to end, and what listing them costs the process's timers.
//!
//! The process is the bench itself: a service on the OS clocks with its default driver and
//! spares, n timers of one owner (a third each `none`, `queue` and named-callback timers, on
//! the three clocks in turn, two thirds armed an hour ahead, half of those periodic), and
//! 1000 one-shot callback probes spread over a window of 1 s (`--quick` 0.5 s), each
//! recording its lateness (delivery − expiry, on the driver's thread).
//!
//! - `tempora-unlooked`: the probes with nobody looking: `p50_ns`, `p99_ns`, `max_ns`.
//! - `tempora`: the same, while `tempora ls PID --json` runs back to back in child processes
//!   (this binary, its output to `/dev/null`) from before the window opens until it closes:
//!   `ns_per_op` is one listing's wall time (spawn to exit, the process's start included)
//!   over n, so `total_ms` is the listing's time; `runs` the listings (median of them);
//!   the probes' lateness during the listings beside.
//!
//! A listing walks the timers without blocking them (`tempora::inspect`): its thread is the
//! service's clock watch, which competes for a CPU with the driver, and the CLI process with
//! both; on a 2-CPU machine that is what the lateness shows.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

use crate::peers::service::{arm_lateness_probe, monotonic_now, wait_for_samples};
use crate::stats::quantile;
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

/// Probes per window.
const PROBES: usize = 1000;

/// The n timers, armed as the module doc says.
fn populate(timers: &Timers, n: usize) -> Result<tempora::Owner, String> {
    let owner = timers.owner();
    let clocks = [ClockId::Realtime, ClockId::Monotonic, ClockId::Boottime];
    for i in 0..n {
        let notify = match i % 3 {
            0 => Notify::None,
            1 => Notify::Queue,
            _ => Notify::callback_named("inspect-tick", |_| {}),
        };
        let id = owner
            .create(clocks[i % 3], notify)
            .map_err(|e| e.to_string())?;
        if i % 3 != 2 {
            let interval = if i % 2 == 0 {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            };
            owner
                .settime(
                    id,
                    SetFlags::RELATIVE,
                    Duration::from_secs(3600) + Duration::from_micros(i as u64),
                    interval,
                )
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(owner)
}

/// The probes' lateness over one window starting `lead` from now, with `during` running
/// until the window's end (passed that end, in monotonic ns).
fn window(
    timers: &Timers,
    lead: Duration,
    length: Duration,
    during: impl FnOnce(u64),
) -> Result<Fields, String> {
    let owner = timers.owner();
    let late = Arc::new(Mutex::new(Vec::with_capacity(PROBES)));
    let t0 = monotonic_now() + lead.as_nanos() as u64;
    let len = length.as_nanos() as u64;
    for k in 0..PROBES as u64 {
        arm_lateness_probe(&owner, t0 + k * len / PROBES as u64, &late)?;
    }
    during(t0 + len);
    wait_for_samples(&late, PROBES, Duration::from_millis(10));
    let mut late = std::mem::take(&mut *late.lock().unwrap());
    if late.len() < PROBES {
        return Err(format!("{} of {PROBES} probes fired", late.len()));
    }
    late.sort_by(f64::total_cmp);
    let at = |q: f64| quantile(&late, q).expect("probes fired");
    Ok(Fields::default()
        .with(Field::P50Ns, at(0.5))
        .with(Field::P99Ns, at(0.99))
        .with(Field::MaxNs, late[late.len() - 1])
        .with(Field::Early, late.iter().filter(|&&l| l < 0.0).count())
        .with(Field::Fired, late.len()))
}

/// One `tempora ls PID --json` of this process, to `/dev/null`: its wall time.
fn listing() -> Result<Duration, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let start = Instant::now();
    let status = Command::new(exe)
        .args(["ls", &std::process::id().to_string(), "--json"])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("running tempora ls: {e}"))?;
    let took = start.elapsed();
    if !status.success() {
        return Err(format!("tempora ls ended with {status}"));
    }
    Ok(took)
}

/// Both rows: the window unlooked, then the window with listings back to back.
fn inspect_list(n: usize, length: Duration) -> Vec<Row> {
    let rows = |looked: Result<Measured, String>, unlooked: Result<Measured, String>| {
        vec![
            Row::new(
                "inspect-list",
                "tempora",
                n,
                1,
                Measured::from_result(looked),
            ),
            Row::new(
                "inspect-list",
                "tempora-unlooked",
                n,
                1,
                Measured::from_result(unlooked),
            ),
        ]
    };
    let timers = match Timers::builder().build() {
        Ok(t) => t,
        Err(e) => return rows(Err(e.to_string()), Err(e.to_string())),
    };
    let _owner = match populate(&timers, n) {
        Ok(o) => o,
        Err(e) => return rows(Err(e.clone()), Err(e)),
    };
    // Let the driver settle after the arms.
    std::thread::sleep(Duration::from_millis(100));
    let unlooked = window(&timers, Duration::from_millis(50), length, |end| {
        std::thread::sleep(Duration::from_nanos(end.saturating_sub(monotonic_now())));
    })
    .map(Measured::fields_only);
    let mut times = Vec::new();
    let mut failed = None;
    let looked = window(&timers, Duration::from_millis(50), length, |end| {
        while monotonic_now() < end {
            match listing() {
                Ok(t) => times.push(t.as_nanos() as f64),
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            }
        }
    });
    let looked = match (failed, looked) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(fields)) => {
            let runs = times.len();
            let per_timer = median(&mut times) / n as f64;
            Ok(Measured::per_op(
                per_timer,
                n,
                fields.with(Field::Runs, runs),
            ))
        }
    };
    rows(looked, unlooked)
}

/// The case's step.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let n = settings.pick(100_000, 1_000_000, 1_000_000);
    let length = settings.pick(
        Duration::from_millis(500),
        Duration::from_secs(1),
        Duration::from_secs(1),
    );
    plan.add(Step::new(
        Suite::Service,
        &["inspect-list"],
        "tempora",
        n,
        1,
        n as f64 / 1e3 * 3.0 + 3000.0,
        move || inspect_list(n, length),
    ));
}
