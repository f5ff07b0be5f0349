//! Exact-ID (restore) mode and ID allocation, side by side with the running kernel: the same
//! sequence of creates (normal and exact-ID, including the error cases) is applied to the
//! kernel's POSIX timers (raw syscalls, `prctl(PR_TIMER_CREATE_RESTORE_IDS)`) and to a tempora
//! owner, and every result must match. Skipped, with a message, on kernels without the prctl
//! (before 6.15). This file holds one test so the process owns no other kernel timers.

use tempora::clock::ClockId;
use tempora::registry::{NotifyKind, Registry};

const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;

fn prctl_restore(arg: libc::c_ulong) -> libc::c_int {
    // SAFETY: prctl(2) with integer arguments only.
    unsafe {
        libc::prctl(
            PR_TIMER_CREATE_RESTORE_IDS,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    }
}

/// timer_create(CLOCK_MONOTONIC, SIGEV_NONE) through the raw syscall; in restore mode the ID
/// pointer carries the requested ID in.
fn kernel_create(requested: i32) -> Result<i32, i32> {
    // SAFETY: a zeroed sigevent is valid once sigev_notify is set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_NONE;
    let mut id: libc::c_int = requested;
    // SAFETY: the kernel reads `sev` and reads/writes `id`, both live for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            libc::CLOCK_MONOTONIC,
            &mut sev as *mut libc::sigevent,
            &mut id as *mut libc::c_int,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    } else {
        Ok(id)
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Exact(i32),
    Restore(bool),
    QueryRestore,
}

#[test]
fn restore_mode_and_id_counter_match_the_kernel() {
    if prctl_restore(2) < 0 {
        eprintln!("skipped: this kernel has no PR_TIMER_CREATE_RESTORE_IDS (Linux < 6.15)");
        return;
    }
    prctl_restore(0);
    let ops = [
        Op::Create,
        Op::QueryRestore,
        Op::Restore(true),
        Op::QueryRestore,
        Op::Exact(200),
        Op::Exact(100),
        Op::Exact(100),
        Op::Exact(-5),
        Op::Restore(false),
        Op::QueryRestore,
        Op::Create,
        Op::Create,
        Op::Restore(true),
        Op::Exact(i32::MAX),
        Op::Restore(false),
        Op::Create,
        Op::Create,
        Op::Create,
    ];
    let registry = Registry::new();
    let owner = registry.owner();
    let mut kernel_ids = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let (k, t): (Result<i32, i32>, Result<i32, i32>) = match *op {
            Op::Create => (
                kernel_create(0),
                owner
                    .create(ClockId::Monotonic, NotifyKind::None)
                    .map(|id| id.get())
                    .map_err(|e| e.errno()),
            ),
            Op::Exact(id) => (
                kernel_create(id),
                owner
                    .create_with_id(id, ClockId::Monotonic, NotifyKind::None)
                    .map(|id| id.get())
                    .map_err(|e| e.errno()),
            ),
            Op::Restore(on) => {
                owner.set_restore_ids(on);
                (Ok(prctl_restore(u64::from(on) as libc::c_ulong)), Ok(0))
            }
            Op::QueryRestore => (Ok(prctl_restore(2)), Ok(i32::from(owner.restore_ids()))),
        };
        if let Ok(id) = k {
            if matches!(op, Op::Create | Op::Exact(_)) {
                kernel_ids.push(id);
            }
        }
        assert_eq!(t, k, "step {step} {op:?}: tempora {t:?}, kernel {k:?}");
    }
    for id in kernel_ids {
        // SAFETY: timer_delete(2) on a timer this test created.
        unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) };
    }
}
