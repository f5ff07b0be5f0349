//! Signal timers that share a look (`lookout.rs`): timers of one target and signal number
//! blocked together look once for all, a looker hands its followers over, and signals refused
//! for want of room share one retrier. Through the same port as `signals.rs`, whose helpers
//! these use.

use super::signals::{every_ms, thread_signal_timer, with_port};
use super::*;

/// Timers whose signals share a target and a number share one look (`lookout.rs`): 1000
/// blocked 1 ms timers look at most a few times per 10 ms between them, where each would look
/// every 10 ms on its own (100 000 looks a second).
#[test]
fn blocked_timers_sharing_a_number_share_one_look() {
    let (f, port) = with_port();
    every_ms(&f, 1000);
    for _ in 0..100 {
        f.advance(ms(1));
    }
    assert_eq!(port.sent(), 1000, "one signal each, blocked");
    assert_eq!(
        f.timers.core.lookouts.followers(),
        999,
        "one looks for the others"
    );
    let before = port.queries();
    for _ in 0..1000 {
        f.advance(ms(1));
    }
    let looks = port.queries() - before;
    assert!(looks <= 150, "{looks} looks in a second");
    assert_eq!(port.sent(), 1000);
}

/// The looker that finds the number gone releases its followers: each looks at once, counts
/// the periods before that look as overruns of the signal taken (`signals/mod.rs`'s rule),
/// and sends at its next period.
#[test]
fn a_looker_finding_the_number_gone_releases_every_follower() {
    let (f, port) = with_port();
    let ids = every_ms(&f, 100);
    for _ in 0..200 {
        f.advance(ms(1));
    }
    assert_eq!(f.timers.core.lookouts.followers(), 99);
    assert_eq!(port.take_all().len(), 100, "all taken at 200 ms");
    let queries = port.queries();
    // The looker looks within 10 ms and releases them all; each sends its next signal with
    // no look of its own.
    for _ in 0..11 {
        f.advance(ms(1));
        if port.sent() == 200 {
            break;
        }
    }
    assert_eq!(port.sent(), 200, "each sent its next signal");
    assert!(port.queries() - queries <= 2, "one look for all");
    for &t in &ids {
        let o = f.owner.getoverrun(t).unwrap();
        assert!((190..=212).contains(&o), "timer {t:?}: getoverrun {o}");
    }
}

/// `getoverrun` on the looker is a look too: finding the number gone, it releases the
/// followers at once.
#[test]
fn getoverrun_on_the_looker_releases_its_followers() {
    let (f, port) = with_port();
    let ids = every_ms(&f, 10);
    for _ in 0..50 {
        f.advance(ms(1));
    }
    assert_eq!(f.timers.core.lookouts.followers(), 9);
    port.take_all();
    // The looker is the one that looked first: the first armed.
    f.owner.getoverrun(ids[0]).unwrap();
    assert_eq!(f.timers.core.lookouts.followers(), 0, "released");
    f.advance(ms(1));
    assert_eq!(port.take_all().len(), 10, "each sent at its next period");
}

/// A looker that leaves hands its role over at once (`lookout.rs`): deleted, its last follower
/// looks and becomes the looker; re-armed by `settime`, the same. The followers go on
/// costing one look, and a signal taken afterwards is still found. Deleted followers leave
/// the list.
#[test]
fn a_looker_that_leaves_hands_its_followers_over() {
    let (f, port) = with_port();
    let ids = every_ms(&f, 10);
    for _ in 0..50 {
        f.advance(ms(1));
    }
    assert_eq!(f.timers.core.lookouts.followers(), 9);
    let w = &f.timers.core.lookouts;
    // The first armed looks for the others, who follow in their order.
    f.owner.delete(ids[0]).unwrap();
    assert_eq!(
        (w.lookers(), w.followers()),
        (1, 8),
        "the last follower looks now"
    );
    // Re-armed, the new looker leaves too, and hands over again; a follower just leaves.
    f.owner
        .settime(ids[9], SetFlags::RELATIVE, ms(1000), Duration::ZERO)
        .unwrap();
    assert_eq!((w.lookers(), w.followers()), (1, 7));
    f.owner
        .settime(ids[1], SetFlags::RELATIVE, ms(1000), Duration::ZERO)
        .unwrap();
    assert_eq!((w.lookers(), w.followers()), (1, 6));
    let queries = port.queries();
    for _ in 0..100 {
        f.advance(ms(1));
    }
    assert!(port.queries() - queries <= 15, "still one look for all");
    port.take_all();
    for _ in 0..11 {
        f.advance(ms(1));
    }
    let sent: std::collections::HashSet<_> = port.take_all().iter().map(|s| s.timer).collect();
    for &t in &ids[2..9] {
        assert!(sent.contains(&t.get()), "{t:?} found its signal taken");
    }
    for &t in &ids[1..] {
        f.owner.delete(t).unwrap();
    }
    assert_eq!(f.timers.core.lookouts.followers(), 0);
}

/// Thread-directed timers to one thread share a look as process-directed ones do.
#[test]
fn thread_signals_to_one_thread_share_one_look() {
    let (f, _port) = with_port();
    // SAFETY: gettid(2) has no preconditions.
    let tid = unsafe { libc::gettid() };
    for i in 0..100 {
        let t = thread_signal_timer(&f, tid, i);
        f.arm(t, ms(1), ms(1));
    }
    for _ in 0..100 {
        f.advance(ms(1));
    }
    assert_eq!(f.timers.core.lookouts.followers(), 99);
}

/// Signals refused for want of room share one retrier (`lookout.rs`, the retry lookout):
/// 1000 owed periodic signals make a handful of sends a second between them, not one per
/// timer per backoff; when room comes back, its send goes, it releases the others, and each
/// sends in turn until one is refused again, after which the rest follow untried.
#[test]
fn signals_refused_for_want_of_room_share_one_retrier() {
    let (f, port) = with_port();
    port.set_room(Some(0));
    every_ms(&f, 1000);
    for _ in 0..200 {
        f.advance(ms(1));
    }
    assert_eq!(
        f.timers.core.lookouts.followers(),
        999,
        "one retries for the others"
    );
    let attempts = port.attempts();
    for _ in 0..1000 {
        f.advance(ms(1));
    }
    let tries = port.attempts() - attempts;
    assert!(tries <= 20, "{tries} sends refused in a second");
    // Room for 10: the retrier's goes, and 9 of the released others; the 11th is refused
    // and the rest follow it again, untried. (It then retries on its own backoff, from the
    // start: a dozen more in the rest of these 110 ms.)
    port.set_room(Some(10));
    let before = port.attempts();
    for _ in 0..110 {
        f.advance(ms(1));
    }
    assert_eq!(port.sent(), 10);
    assert!(
        port.attempts() - before <= 11 + 12,
        "{} sends tried, not one per owed timer",
        port.attempts() - before
    );
    assert_eq!(
        f.timers.core.lookouts.followers(),
        989 + 9,
        "989 follow the retrier; the 10 that went are pending, and 9 of them follow the 10th"
    );
    // All the room back: every owed signal goes.
    port.set_room(None);
    for _ in 0..120 {
        f.advance(ms(1));
    }
    assert_eq!(port.sent(), 1000, "every owed signal went");
}
