//! The checkpoint suite: snapshot and restore of an owner, and what restoring timer IDs costs
//! on the kernel without tempora's exact-ID restore.
//!
//! - `checkpoint` (tempora, n = 100k and 1M; `--quick`: 100k): `Owner::checkpoint` plus
//!   encoding to bytes, of an owner whose timers are armed periodic `Queue` timers on the
//!   monotonic clock with sparse IDs (every 4th). `ns_per_op` per timer; `bytes_per_timer` is
//!   the snapshot's size over n.
//! - `restore` (tempora, same n): decoding the bytes (checksum included) plus
//!   `Owner::restore` into a fresh owner (exact-ID creates, state, wheel placement).
//! - `restore` at n = 2000 sparse IDs (every 16th: IDs up to 32k), three ways: `tempora`,
//!   `kernel-exact-id` (Linux 6.15+ `PR_TIMER_CREATE_RESTORE_IDS` + `timer_create` with each
//!   ID) and `kernel-dance` (no restore mode: create timers until the counter reaches each
//!   wanted ID and delete the ones in between, as restore tools had to before 6.15). `ns_per_op`
//!   per restored timer.

use std::time::{Duration, Instant};

use tempora::checkpoint::Snapshot;
use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

use crate::runner::fork::in_children;
use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

const DANCE_IDS: usize = 2000;
const DANCE_STRIDE: i32 = 16;

fn owner_with(timers: &Timers, n: usize, stride: i32) -> tempora::Owner {
    let o = timers.owner();
    o.set_restore_ids(true);
    for i in 0..n {
        let id = o
            .create_with_id(i as i32 * stride, ClockId::Monotonic, Notify::Queue)
            .expect("create");
        let period = Duration::from_millis(100 + (i % 900) as u64);
        o.settime(id, SetFlags::RELATIVE, period, period)
            .expect("settime");
    }
    o.set_restore_ids(false);
    o
}

fn service() -> Timers {
    Timers::builder().drivers(0).build().expect("valid")
}

/// Checkpoint + encode, and decode + restore, of n timers: medians of up to `reps` runs, and
/// the snapshot's bytes per timer.
fn tempora_rows(n: usize, stride: i32, reps: usize, settings: &Settings) -> (f64, f64, f64) {
    let timers = service();
    let o = owner_with(&timers, n, stride);
    let (mut ck, mut rs) = (Vec::new(), Vec::new());
    let mut size = 0;
    for _ in settings.runs(reps.max(1), 1) {
        let t = Instant::now();
        let bytes = o.checkpoint().encode();
        ck.push(t.elapsed().as_nanos() as f64 / n as f64);
        size = bytes.len();
        let target = timers.owner();
        let t = Instant::now();
        let snap = Snapshot::decode(&bytes).expect("decode");
        target.restore(&snap, |_| None).expect("restore");
        rs.push(t.elapsed().as_nanos() as f64 / n as f64);
        drop(target);
    }
    (median(&mut ck), median(&mut rs), size as f64 / n as f64)
}

/// How the kernel's restore of `DANCE_IDS` IDs went, written by a forked child.
#[derive(Clone, Copy, Default)]
struct KernelRestore {
    ns_per_id: f64,
    /// 0: ok; 1: prctl failed; 2: timer_create failed; 3: the counter passed the wanted ID.
    failure: u8,
    errno: i32,
    wanted: i32,
    got: i32,
}

/// The buffers a restoring child uses, allocated before the fork.
struct RestoreBuffers {
    wanted: Vec<i32>,
    kept: Vec<i32>,
}

/// The kernel restoring `DANCE_IDS` sparse IDs, with the prctl or by the dance, in a fresh
/// process (its per-process ID counter starts at 0, as the dance assumes); ns per ID.
fn kernel_restore(exact: bool) -> Result<f64, String> {
    let prepare = |_| RestoreBuffers {
        wanted: (0..DANCE_IDS as i32).map(|i| i * DANCE_STRIDE).collect(),
        kept: Vec::with_capacity(DANCE_IDS),
    };
    let r = in_children(1, prepare, |_, b| kernel_restore_child(exact, b))?[0];
    match r.failure {
        0 => Ok(r.ns_per_id),
        1 => Err(format!("prctl: errno {}", r.errno)),
        2 => Err(format!("timer_create({}): errno {}", r.wanted, r.errno)),
        _ => Err(format!(
            "the counter passed ID {} (got {})",
            r.wanted, r.got
        )),
    }
}

/// The child's side of [`kernel_restore`]: syscalls into prepared buffers, no allocation.
fn kernel_restore_child(exact: bool, b: &mut RestoreBuffers) -> KernelRestore {
    let mut out = KernelRestore::default();
    let t = Instant::now();
    if exact {
        if let Err(e) = tempora_kernel::restore_ids(1) {
            out.failure = 1;
            out.errno = e;
            return out;
        }
        for &id in &b.wanted {
            match tempora_kernel::timer_create_none(id) {
                Ok(got) => b.kept.push(got),
                Err(e) => {
                    (out.failure, out.errno, out.wanted) = (2, e, id);
                    break;
                }
            }
        }
        let _ = tempora_kernel::restore_ids(0);
    } else {
        // The counter hands out IDs in order: create up to each wanted ID, delete the rest.
        'ids: for &id in &b.wanted {
            loop {
                match tempora_kernel::timer_create_none(0) {
                    Ok(got) if got == id => {
                        b.kept.push(got);
                        break;
                    }
                    Ok(got) if got < id => {
                        let _ = tempora_kernel::timer_delete(got);
                    }
                    Ok(got) => {
                        (out.failure, out.wanted, out.got) = (3, id, got);
                        let _ = tempora_kernel::timer_delete(got);
                        break 'ids;
                    }
                    Err(e) => {
                        (out.failure, out.errno, out.wanted) = (2, e, id);
                        break 'ids;
                    }
                }
            }
        }
    }
    out.ns_per_id = t.elapsed().as_nanos() as f64 / DANCE_IDS as f64;
    for &id in &b.kept {
        let _ = tempora_kernel::timer_delete(id);
    }
    out
}

/// The suite's steps.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings = plan.settings;
    let sizes = settings.sizes(&[100_000], &[100_000, 1_000_000], &[100_000, 1_000_000]);
    let reps = settings.reps(3, 5);
    for n in sizes {
        let cost = n as f64 / 1e3 * 3.0 * reps as f64;
        plan.add(Step::new(
            Suite::Checkpoint,
            &["checkpoint", "restore"],
            "tempora",
            n,
            1,
            cost,
            move || {
                let (ck, rs, bytes) = tempora_rows(n, 4, reps, settings);
                vec![
                    Row::new(
                        "checkpoint",
                        "tempora",
                        n,
                        1,
                        Measured::per_op(
                            ck,
                            n,
                            Fields::default().with(Field::BytesPerTimer, bytes),
                        ),
                    ),
                    Row::new(
                        "restore",
                        "tempora",
                        n,
                        1,
                        Measured::per_op(rs, n, Fields::default()),
                    ),
                ]
            },
        ));
    }
    plan.add(Step::new(
        Suite::Checkpoint,
        &["restore"],
        "tempora",
        DANCE_IDS,
        1,
        50.0,
        move || {
            let (_, rs, _) = tempora_rows(DANCE_IDS, DANCE_STRIDE, reps, settings);
            vec![Row::new(
                "restore",
                "tempora",
                DANCE_IDS,
                1,
                Measured::per_op(rs, DANCE_IDS, Fields::default()),
            )]
        },
    ));
    for (imp, exact) in [("kernel-exact-id", true), ("kernel-dance", false)] {
        plan.add(Step::new(
            Suite::Checkpoint,
            &["restore"],
            imp,
            DANCE_IDS,
            1,
            100.0,
            move || {
                let m = kernel_restore(exact)
                    .map(|ns| Measured::per_op(ns, DANCE_IDS, Fields::default()));
                vec![Row::new(
                    "restore",
                    imp,
                    DANCE_IDS,
                    1,
                    Measured::from_result(m),
                )]
            },
        ));
    }
}
