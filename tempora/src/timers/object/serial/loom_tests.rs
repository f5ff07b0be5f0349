//! Loom models of `serial.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use loom::cell::UnsafeCell;

/// The periods the calls saw, counted without synchronisation: loom reports two calls
/// that touch it without one happening before the other.
struct Seen(UnsafeCell<usize>);
// SAFETY: only the callback touches it, and the model checks that calls never overlap
// (loom fails on an unsynchronised access).
unsafe impl Sync for Seen {}
// SAFETY: as above.
unsafe impl Send for Seen {}

/// A call runs while another thread takes the same timer's next expiry twice (the second
/// time possibly after the call returned). Calls never overlap and each happens before
/// the next (the unsynchronised counter), and every expiry is run or folded into a run:
/// the periods the runs see (1 + overrun each) add up to the three expiries taken.
/// `take`'s CAS Relaxed, or `finish` clearing the state without looking for folds, fails.
#[test]
fn loom_a_call_and_a_fold_race() {
    loom::model(|| {
        let seen = Arc::new(Seen(UnsafeCell::new(0)));
        let s = seen.clone();
        let f: Callback = Arc::new(move |fired: &Fired<'_>| {
            // SAFETY: see `Seen`.
            s.0.with_mut(|p| unsafe { *p += fired.overrun() as usize + 1 });
        });
        let owner = WeakOwner {
            reg: crate::registry::WeakOwner::dangling(),
        };
        let serial = Serial::new(CallFn(f, owner));
        let first = serial.take(0).expect("idle: a call");
        let s2 = serial.clone();
        let poller = loom::thread::spawn(move || {
            for _ in 0..2 {
                if let Some(call) = s2.take(0) {
                    call.run(TimerId(0), 0, &mut |_, _| {});
                }
            }
        });
        first.run(TimerId(0), 0, &mut |_, _| {});
        poller.join().unwrap();
        // SAFETY: both threads are done.
        let periods = seen.0.with(|p| unsafe { *p });
        assert_eq!(periods, 3, "an expiry was lost");
        assert_eq!(serial.state.load(Ordering::Relaxed), 0);
    });
}
