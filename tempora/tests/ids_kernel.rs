//! Exact-ID (restore) mode and ID allocation, side by side with the running kernel: the same
//! sequence of creates (normal and exact-ID, including the error cases) is applied to the
//! kernel's POSIX timers (raw syscalls, `prctl(PR_TIMER_CREATE_RESTORE_IDS)`) and to a tempora
//! owner, and every result must match. Skipped, with a message, on kernels without the prctl
//! (before 6.15). This file holds one test so the process owns no other kernel timers.

use tempora::clock::ClockId;
use tempora::{Notify, Timers};

use tempora_kernel::{restore_ids as prctl_restore, timer_create_none as kernel_create};

#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Exact(i32),
    Restore(bool),
    QueryRestore,
}

#[test]
fn restore_mode_and_id_counter_match_the_kernel() {
    if prctl_restore(2).is_err() {
        eprintln!("skipped: this kernel has no PR_TIMER_CREATE_RESTORE_IDS (Linux < 6.15)");
        return;
    }
    prctl_restore(0).unwrap();
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
    let timers = Timers::builder().drivers(0).build().unwrap();
    let owner = timers.owner();
    let mut kernel_ids = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let (k, t): (Result<i32, i32>, Result<i32, i32>) = match *op {
            Op::Create => (
                kernel_create(0),
                owner
                    .create(ClockId::Monotonic, Notify::None)
                    .map(|id| id.get())
                    .map_err(|e| e.errno()),
            ),
            Op::Exact(id) => (
                kernel_create(id),
                owner
                    .create_with_id(id, ClockId::Monotonic, Notify::None)
                    .map(|id| id.get())
                    .map_err(|e| e.errno()),
            ),
            Op::Restore(on) => {
                owner.set_restore_ids(on);
                (prctl_restore(u64::from(on)), Ok(0))
            }
            Op::QueryRestore => (prctl_restore(2), Ok(i32::from(owner.restore_ids()))),
        };
        if let Ok(id) = k {
            if matches!(op, Op::Create | Op::Exact(_)) {
                kernel_ids.push(id);
            }
        }
        assert_eq!(t, k, "step {step} {op:?}: tempora {t:?}, kernel {k:?}");
    }
    for id in kernel_ids {
        tempora_kernel::timer_delete(id).unwrap();
    }
}
