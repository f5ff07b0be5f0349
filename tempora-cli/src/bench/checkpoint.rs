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

use super::service::record_in;
use super::{median, Extras, Opts, Reporter};

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

/// Checkpoint + encode, and decode + restore, of n timers: medians of `reps` runs.
fn tempora_rows(n: usize, stride: i32, reps: usize) -> (f64, f64, f64) {
    let timers = service();
    let o = owner_with(&timers, n, stride);
    let (mut ck, mut rs) = (Vec::new(), Vec::new());
    let mut size = 0;
    for _ in 0..reps {
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

/// The kernel restoring `DANCE_IDS` sparse IDs, with the prctl or by the dance; ns per ID.
fn kernel_restore(exact: bool) -> Result<f64, String> {
    let wanted: Vec<i32> = (0..DANCE_IDS as i32).map(|i| i * DANCE_STRIDE).collect();
    let mut kept = Vec::with_capacity(wanted.len());
    let t = Instant::now();
    let r = if exact {
        tempora_kernel::restore_ids(1).map_err(|e| format!("prctl: errno {e}"))?;
        let r = wanted.iter().try_for_each(|&id| {
            tempora_kernel::timer_create_none(id)
                .map(|got| kept.push(got))
                .map_err(|e| format!("timer_create({id}): errno {e}"))
        });
        let _ = tempora_kernel::restore_ids(0);
        r
    } else {
        // The counter hands out IDs in order: create up to each wanted ID, delete the rest.
        let mut r = Ok(());
        for &id in &wanted {
            loop {
                match tempora_kernel::timer_create_none(0) {
                    Ok(got) if got == id => {
                        kept.push(got);
                        break;
                    }
                    Ok(got) if got < id => {
                        let _ = tempora_kernel::timer_delete(got);
                    }
                    Ok(got) => {
                        r = Err(format!("the counter passed ID {id} (got {got})"));
                        let _ = tempora_kernel::timer_delete(got);
                        break;
                    }
                    Err(e) => {
                        r = Err(format!("timer_create: errno {e}"));
                        break;
                    }
                }
            }
            if r.is_err() {
                break;
            }
        }
        r
    };
    let ns = t.elapsed().as_nanos() as f64 / DANCE_IDS as f64;
    for id in kept {
        let _ = tempora_kernel::timer_delete(id);
    }
    r.map(|()| ns)
}

/// Runs `f` in a forked child (a fresh process: the kernel's per-process ID counter starts at
/// 0, as the dance assumes) and returns what it wrote back.
fn in_child(f: impl FnOnce() -> Result<f64, String>) -> Result<f64, String> {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err("pipe failed".into());
    }
    // SAFETY: the child only runs `f` (raw syscalls and allocation in a single-threaded
    // benchmark step) and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let msg = match f() {
            Ok(ns) => format!("ok {ns}"),
            Err(e) => format!("err {e}"),
        };
        // SAFETY: writes the message to the pipe and exits without running destructors.
        unsafe {
            libc::write(fds[1], msg.as_ptr().cast(), msg.len());
            libc::_exit(0);
        }
    }
    // SAFETY: closes the parent's copy of the write end.
    unsafe { libc::close(fds[1]) };
    let mut buf = vec![0u8; 4096];
    // SAFETY: reads into `buf`, which lives for the call.
    let n = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: closes the read end and reaps the child.
    unsafe {
        libc::close(fds[0]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let msg = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
    match msg.split_once(' ') {
        Some(("ok", ns)) => ns.parse().map_err(|_| msg.clone()),
        Some(("err", e)) => Err(e.to_string()),
        _ => Err(format!("the child reported nothing ({msg:?})")),
    }
}

pub fn run(opts: &Opts, rep: &mut Reporter) {
    let sizes: Vec<usize> = opts.n.clone().unwrap_or(if opts.quick {
        vec![100_000]
    } else {
        vec![100_000, 1_000_000]
    });
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    rep.add_steps((sizes.len() * 2 + 3) as u64);
    if rep.wants_impl("tempora") && (rep.wants_case("checkpoint") || rep.wants_case("restore")) {
        for &n in &sizes {
            rep.set_message(format!("checkpoint n={n}"));
            let (ck, rs, bytes) = tempora_rows(n, 4, reps);
            let extras = Extras {
                bytes_per_timer: Some(bytes),
                ..Extras::default()
            };
            record_in(
                rep,
                "checkpoint",
                "checkpoint",
                "tempora",
                n,
                1,
                Ok((ck, extras)),
            );
            record_in(
                rep,
                "checkpoint",
                "restore",
                "tempora",
                n,
                1,
                Ok((rs, Extras::default())),
            );
        }
    }
    if rep.wants_case("restore") {
        rep.set_message("restore: the kernel's dance".into());
        if rep.wants_impl("tempora") {
            let (_, rs, _) = tempora_rows(DANCE_IDS, DANCE_STRIDE, reps);
            record_in(
                rep,
                "checkpoint",
                "restore",
                "tempora",
                DANCE_IDS,
                1,
                Ok((rs, Extras::default())),
            );
        }
        for (imp, exact) in [("kernel-exact-id", true), ("kernel-dance", false)] {
            if rep.wants_impl(imp) {
                let r = in_child(|| kernel_restore(exact)).map(|ns| (ns, Extras::default()));
                record_in(rep, "checkpoint", "restore", imp, DANCE_IDS, 1, r);
            }
        }
    }
}
