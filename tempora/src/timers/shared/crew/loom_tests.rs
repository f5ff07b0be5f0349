//! Loom models of `crew.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use loom::sync::Arc;

/// Runs the list as a thread of the crew does until it follows; the calls it ran.
fn work(crew: &Crew<u32>, spares: usize) -> usize {
    let mut ran = 0;
    loop {
        match crew.next(spares) {
            Next::Run(_, _) => {
                ran += 1;
                crew.ran();
            }
            Next::Spare => panic!("asked for a spare it may not start"),
            Next::Follow => return ran,
        }
    }
}

/// A thread back from its callback (the crew's one spare, the cap reached) runs the list
/// while the leader, with nobody following, puts a call in it: the call is run by one of
/// them, or left only while the other follows. Counting the returning thread as following
/// after the list's lock instead of under it fails this model.
#[test]
fn loom_a_call_is_never_left_with_every_thread_following() {
    loom::model(|| {
        let crew = Arc::new(Crew::<u32>::default());
        crew.started.store(1, Ordering::Relaxed);
        crew.in_calls.store(1, Ordering::Relaxed);
        let crew2 = crew.clone();
        let returning = loom::thread::spawn(move || {
            crew2.ran();
            work(&crew2, 0)
        });
        crew.pending().push_back(7);
        let led = work(&crew, 0);
        let returned = returning.join().unwrap();
        let left = crew.pending().len();
        assert_eq!(crew.following.load(Ordering::Relaxed), 2);
        assert_eq!(led + returned + left, 1);
        assert_eq!(left, 0, "a call left with every thread following");
    });
}

/// Two followers grow idle and both ask to retire while the leader, with a call in the
/// list, decides what to do: one follower at most retires, so the leader always finds one
/// to stand by. Checking the count outside the list's lock, or letting the last follower
/// retire, fails this model.
#[test]
fn loom_a_retiring_follower_never_leaves_a_call_unguarded() {
    loom::model(|| {
        let crew = Arc::new(Crew::<u32>::default());
        crew.started.store(2, Ordering::Relaxed);
        crew.following.store(2, Ordering::Relaxed);
        let retiring: Vec<_> = (0..2)
            .map(|_| {
                let crew = crew.clone();
                loom::thread::spawn(move || crew.retire())
            })
            .collect();
        crew.pending().push_back(7);
        let next = crew.next(0);
        assert!(
            matches!(next, Next::Run(7, false)),
            "the leader told {next:?}"
        );
        let retired = retiring
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum::<usize>();
        assert_eq!(retired, 1, "{retired} of two followers retired");
        assert_eq!(crew.following.load(Ordering::Relaxed), 1);
        assert_eq!(crew.started.load(Ordering::Relaxed), 1);
    });
}
