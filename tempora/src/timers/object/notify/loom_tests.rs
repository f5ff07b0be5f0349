//! Loom models of `notify.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use loom::sync::Arc;

/// A receiver that finds the queue empty and goes to sleep races a sender's push: it
/// must wake with the event (loom reports a deadlock if the wake-up can be lost).
#[test]
fn loom_receiver_never_misses_a_push() {
    loom::model(|| {
        let sink = Arc::new(Sink::default());
        let sender = {
            let sink = sink.clone();
            loom::thread::spawn(move || {
                sink.push(7u32, |_| {}).unwrap();
            })
        };
        let got = loop {
            if let Some(e) = sink.pop().unwrap() {
                break e;
            }
            sink.wait(None);
        };
        assert_eq!(got, 7);
        sender.join().unwrap();
    });
}

/// A task that finds the queue empty and registers its waker races a sender's push: it
/// must be woken with the event (loom reports a deadlock if the wake-up can be lost).
/// Registering without checking the queue's emptiness under its lock makes it fail.
#[test]
fn loom_task_never_misses_a_push() {
    loom::model(|| {
        let sink = Arc::new(Sink::default());
        let sender = {
            let sink = sink.clone();
            loom::thread::spawn(move || {
                let mut wake = Vec::new();
                sink.push(7u32, |w| wake.push(w)).unwrap();
                wake.into_iter().for_each(std::task::Waker::wake);
            })
        };
        let mut token = 0;
        let got = loom::future::block_on(std::future::poll_fn(|cx| {
            let mut fresh = None;
            loop {
                if let Some(e) = sink.pop().unwrap() {
                    return std::task::Poll::Ready(e);
                }
                let mut replaced = None;
                let waker = cx.waker();
                match sink.register(&mut token, waker, &mut fresh, &mut replaced) {
                    Ok(Registered::Waiting) => return std::task::Poll::Pending,
                    Ok(Registered::NotEmpty) => {}
                    Ok(Registered::NeedWaker) => fresh = Some(waker.clone()),
                    Err(Poisoned) => unreachable!("nothing panics here"),
                }
            }
        }));
        assert_eq!(got, 7);
        sender.join().unwrap();
    });
}
