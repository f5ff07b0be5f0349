//! Loom models of `sleep.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use crate::clock::ManualClock;
use std::mem::ManuallyDrop;
use std::task::Waker;

/// A sleep whose end (`end`) runs its drop in place and keeps its memory, so that a
/// delivery touching the cell afterwards is a causality violation (the cell's end is a
/// write under loom: `timers/object/sleep_cell.rs`), not a use after free in the model.
type Held = Pin<Box<ManuallyDrop<Sleep>>>;

fn pinned(h: &mut Held) -> Pin<&mut Sleep> {
    // SAFETY: the sleep is never moved out of its box (`end` drops it in place).
    unsafe { h.as_mut().map_unchecked_mut(|m| &mut **m) }
}

fn ready(h: &mut Held) -> bool {
    pinned(h)
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

fn end(h: &mut Held) {
    // SAFETY: dropped once, in place, and not used again.
    unsafe { ManuallyDrop::drop(h.as_mut().get_unchecked_mut()) }
}

/// A manual clock and one base polled by the model's threads (no driver).
fn service() -> (ManualClock, Timers) {
    let clock = ManualClock::new();
    let timers = Timers::builder()
        .clock(clock.clone())
        .bases(1)
        .drivers(0)
        .build()
        .unwrap();
    (clock, timers)
}

/// A registered sleep, due, that its holder polls while another thread's poll fires it
/// (the poller, to join).
fn racing() -> (ManualClock, Timers, Held, loom::thread::JoinHandle<()>) {
    let (clock, timers) = service();
    let mut s = Box::pin(ManuallyDrop::new(timers.sleep(Duration::from_millis(1))));
    assert!(!ready(&mut s));
    clock.advance(Duration::from_millis(1));
    let t = timers.clone();
    let poller = loom::thread::spawn(move || {
        t.poll();
    });
    let _ = ready(&mut s);
    (clock, timers, s, poller)
}

/// A due sleep's poll, a reset to later or none, and its drop race the poll that fires
/// it: whether the holder's poll sees it complete or not (a completed sleep's drop takes
/// no lock), its drop ends the cell only after the delivery let go of it, and no entry
/// is left.
#[test]
fn loom_a_sleep_dropped_as_it_fires() {
    for reset in [false, true] {
        loom::model(move || {
            let (_clock, timers, mut s, poller) = racing();
            if reset {
                let later = timers.now() + Duration::from_millis(1);
                pinned(&mut s).reset(later);
            }
            end(&mut s);
            poller.join().unwrap();
            assert_eq!(
                timers.next_deadline(),
                None,
                "the dropped sleep left an entry"
            );
        });
    }
}

/// A due sleep reset (to now, or later) while the poll that fires it runs: the sleep then
/// completes at its new deadline, not before and never not at all, and its drop ends the
/// cell only after every delivery let go of it.
#[test]
fn loom_a_sleep_reset_as_it_fires_completes_at_its_new_deadline() {
    for later in [false, true] {
        loom::model(move || {
            let (clock, timers, mut s, poller) = racing();
            let deadline = timers.now() + Duration::from_millis(u64::from(later));
            pinned(&mut s).reset(deadline);
            let _ = ready(&mut s);
            poller.join().unwrap();
            if later {
                timers.poll();
                assert!(!ready(&mut s), "completed before its new deadline");
                clock.advance(Duration::from_millis(1));
            }
            timers.poll();
            assert!(ready(&mut s), "a due sleep did not complete: lost");
            end(&mut s);
            assert_eq!(
                timers.next_deadline(),
                None,
                "the dropped sleep left an entry"
            );
        });
    }
}
