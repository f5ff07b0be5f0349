//! Loom models of the statistics' update/flush protocol (`tally.rs`, "Why no update is
//! lost"): an updater's store-then-check racing a flush's detach, clear and read. Under loom
//! the two fences are `SeqCst` fences (`membarrier` is not modelled; `tally.rs` argues why it
//! stands in for the flush's fence). The models fail if the updater's fence or the flush's
//! fence is removed, or if the flush reads the counts before clearing the flags: an update
//! then stays in its slot, unlisted, and a later flush never sees it.

use super::group::GroupNode;
use super::tally::{Hub, Tally};
use super::Counter;
use std::sync::Arc;

fn armed(t: &Tally) -> u64 {
    t.totals().counts[Counter::Armed as usize]
}

/// One thread updates twice while another flushes; a last flush after both finds both
/// updates, in the owner and in its group.
#[test]
fn loom_update_racing_a_flush_is_never_lost() {
    loom::model(|| {
        let hub = Hub::new(true);
        let group = hub.root.child("g");
        let tally = Tally::new(&hub, &group, 1);
        let t = tally.clone();
        let updater = loom::thread::spawn(move || {
            t.add_as(0, Counter::Armed, 1);
            t.add_as(0, Counter::Armed, 1);
        });
        let h = hub.clone();
        let flusher = loom::thread::spawn(move || {
            h.flush();
        });
        updater.join().unwrap();
        flusher.join().unwrap();
        hub.flush();
        assert_eq!(armed(&tally), 2);
        assert_eq!(group_armed(&group), 2);
    });
}

/// Two threads update the same tally from different slots while a third flushes: each
/// slot's list is detached on its own, and nothing is counted twice or lost.
#[test]
fn loom_two_slots_racing_a_flush_count_once() {
    loom::model(|| {
        let hub = Hub::new(true);
        let tally = Tally::new(&hub, &hub.root.clone(), 1);
        let spawn = |slot: usize| {
            let t = tally.clone();
            loom::thread::spawn(move || t.add_as(slot, Counter::Armed, 1))
        };
        let (a, b) = (spawn(0), spawn(1));
        let h = hub.clone();
        let flusher = loom::thread::spawn(move || {
            h.flush();
        });
        a.join().unwrap();
        b.join().unwrap();
        flusher.join().unwrap();
        hub.flush();
        assert_eq!(armed(&tally), 2);
    });
}

fn group_armed(g: &Arc<GroupNode>) -> u64 {
    g.totals().counts[Counter::Armed as usize]
}

/// Two owners' slots of one thread index pushed on the same list at once (each by its own
/// thread), racing a flush's swap: both updates are counted once.
#[test]
fn loom_two_pushes_on_one_list_racing_a_flush() {
    loom::model(|| {
        let hub = Hub::new(true);
        let a = Tally::new(&hub, &hub.root.clone(), 1);
        let b = Tally::new(&hub, &hub.root.clone(), 2);
        let spawn = |t: &Arc<Tally>| {
            let t = t.clone();
            loom::thread::spawn(move || t.add_as(0, Counter::Armed, 1))
        };
        let (ta, tb) = (spawn(&a), spawn(&b));
        let h = hub.clone();
        let flusher = loom::thread::spawn(move || {
            h.flush();
        });
        ta.join().unwrap();
        tb.join().unwrap();
        flusher.join().unwrap();
        hub.flush();
        assert_eq!((armed(&a), armed(&b)), (1, 1));
    });
}
