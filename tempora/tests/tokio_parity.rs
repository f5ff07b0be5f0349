//! `tempora::time` against `tokio::time`'s documented behaviour: the examples of tokio's docs
//! for `interval`, `interval_at`, `MissedTickBehavior`, `Interval::reset*`, `timeout` and
//! `timeout_at`, ported as code (the free functions, `Instant::now`, `.await`) and run on a
//! manual clock, checking the tick sequences and elapsed times those docs state.
//!
//! tokio runs such code on a paused clock (`#[tokio::test(start_paused = true)]`), which jumps
//! to the next timer whenever the runtime has nothing else to do. [`Paused::block_on`] does the
//! same here: a service on a `ManualClock` with no driver, entered (so the free functions and
//! `Instant::now` use it), and a loop that polls the future and, while it is pending, moves
//! the clock to the service's next deadline and fires what is due. Nothing sleeps and every
//! run is the same.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_util::StreamExt;
use tempora::clock::ManualClock;
use tempora::time::{self, Elapsed, Instant, MissedTickBehavior};
use tempora::Timers;

const MS: Duration = Duration::from_millis(1);

/// A service on a manual clock, with no driver: tokio's paused clock, played by hand.
struct Paused {
    clock: ManualClock,
    timers: Timers,
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Paused {
    fn new() -> Paused {
        let clock = ManualClock::new();
        let timers = Timers::builder()
            .clock(clock.clone())
            .drivers(0)
            .build()
            .unwrap();
        Paused { clock, timers }
    }

    /// Runs `fut` to completion with this service entered, as a current-thread tokio runtime
    /// on a paused clock does: while the future is pending, the clock jumps to the next
    /// deadline and a poll of the service fires what is due there.
    ///
    /// # Panics
    /// If the future is pending with no timer armed: it would wait for ever.
    fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let _entered = self.timers.enter();
        let mut fut = pin!(fut);
        let waker = Waker::from(Arc::new(Count::default()));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            let at = self
                .timers
                .next_deadline()
                .expect("pending with no timer armed: it would wait for ever");
            let now = self.timers.now();
            if at > now {
                self.clock.advance(at - now);
            }
            self.timers.poll();
        }
    }
}

/// Milliseconds from `start` to `t`.
fn ms(start: Instant, t: Instant) -> u64 {
    u64::try_from((t - start).as_millis()).unwrap()
}

/// `n` ticks of `interval`, each as (the tick's instant, when it completed), in ms from
/// `start`.
async fn ticks(interval: &mut time::Interval, start: Instant, n: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let tick = interval.tick().await;
        out.push((ms(start, tick), ms(start, Instant::now())));
    }
    out
}

// ---- The current service: what makes the port the same code ----

#[test]
fn entered_the_free_functions_and_instant_now_follow_the_manual_clock() {
    let p = Paused::new();
    let outside = Instant::now();
    {
        let _g = p.timers.enter();
        assert_eq!(Instant::now(), p.timers.now(), "the manual clock: 1 s");
        let start = Instant::now();
        p.clock.advance(7 * MS);
        assert_eq!(start.elapsed(), 7 * MS);
        let s = time::sleep(3 * MS);
        assert_eq!(s.deadline(), start + 10 * MS, "made on the entered service");
        // Nested: the innermost guard's service is current; dropping it restores the outer.
        let other = Paused::new();
        other.clock.advance(Duration::from_secs(100));
        {
            let _inner = other.timers.enter();
            assert_eq!(Instant::now(), other.timers.now());
        }
        assert_eq!(Instant::now(), p.timers.now());
        // Another thread has its own current service: none entered, the OS clock.
        let there = std::thread::spawn(Instant::now).join().unwrap();
        assert!(there >= outside);
    }
    let after = Instant::now();
    assert!(
        after >= outside,
        "the OS clock again once the guard is gone"
    );
}

#[test]
#[should_panic(expected = "dropped out of order")]
fn guards_dropped_out_of_order_panic_as_tokios_do() {
    let a = Paused::new();
    let b = Paused::new();
    let ga = a.timers.enter();
    let _gb = b.timers.enter();
    drop(ga);
}

// ---- `interval` and `interval_at` (tokio's examples) ----

/// `interval(10ms)`: "ticks immediately", then "ticks after 10ms" twice: 20 ms elapsed.
#[test]
fn interval_ticks_at_once_then_every_period() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(10 * MS);
        assert_eq!(interval.period(), 10 * MS);
        assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Burst);
        assert_eq!(
            ticks(&mut interval, start, 3).await,
            [(0, 0), (10, 10), (20, 20)]
        );
        assert_eq!(start.elapsed(), 20 * MS, "approximately 20ms have elapsed");
    });
}

/// `interval(2s)` with a task of 1 s after each tick: the task runs every two seconds, not
/// every three (the interval counts the time the task took).
#[test]
fn interval_counts_the_time_between_ticks() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(Duration::from_secs(2));
        let mut ran = Vec::new();
        for _ in 0..5 {
            interval.tick().await;
            ran.push(ms(start, Instant::now()));
            time::sleep(Duration::from_secs(1)).await; // task_that_takes_a_second
        }
        assert_eq!(ran, [0, 2000, 4000, 6000, 8000]);
    });
}

/// `interval_at(now + 50ms, 10ms)`: "ticks after 50ms", then after 10 ms twice: 70 ms.
#[test]
fn interval_at_ticks_first_at_start() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval_at(start + 50 * MS, 10 * MS);
        assert_eq!(
            ticks(&mut interval, start, 3).await,
            [(50, 50), (60, 60), (70, 70)]
        );
        assert_eq!(start.elapsed(), 70 * MS, "approximately 70ms have elapsed");
    });
}

// ---- `MissedTickBehavior` (tokio's examples, and its table after a long delay) ----

/// Burst's example: period 50 ms, a 200 ms task after the first tick. The ticks of 50, 100,
/// 150 and 200 "resolve immediately"; 250 "will resolve after 50ms".
#[test]
fn burst_catches_up_at_once_on_the_same_grid() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(50 * MS);
        assert_eq!(interval.tick().await, start, "first tick at once");
        time::sleep(200 * MS).await; // task_that_takes_200_millis
        assert_eq!(
            ticks(&mut interval, start, 5).await,
            [(50, 200), (100, 200), (150, 200), (200, 200), (250, 250)]
        );
    });
}

/// Delay's example: period 50 ms, the first tick not taken until a task of more than 50 ms
/// (60) is done. That tick "will resolve immediately"; the next "will not resolve until 50ms
/// after the call to tick up above", and the ticks go on a period apart from there.
#[test]
fn delay_ticks_a_period_after_the_late_tick() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(50 * MS);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        time::sleep(60 * MS).await; // task_that_takes_more_than_50_millis
        assert_eq!(
            ticks(&mut interval, start, 3).await,
            [(0, 60), (110, 110), (160, 160)]
        );
    });
}

/// Skip's example: period 50 ms, the first tick not taken until a 75 ms task is done. That
/// tick resolves at once; the next "will resolve after 25ms, 100ms after the start", the
/// closest multiple of the period after the call.
#[test]
fn skip_ticks_at_the_next_point_of_the_grid() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(50 * MS);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        time::sleep(75 * MS).await; // task_that_takes_75_millis
        assert_eq!(
            ticks(&mut interval, start, 3).await,
            [(0, 75), (100, 100), (150, 150)]
        );
    });
}

/// Each behavior after a delay of several periods (10 ms period, the task back 45 ms after
/// the first tick): the sequences tokio's doc draws for each.
#[test]
fn each_behavior_after_a_delay_of_several_periods() {
    let cases = [
        (
            MissedTickBehavior::Burst,
            [(10, 45), (20, 45), (30, 45), (40, 45), (50, 50), (60, 60)],
        ),
        (
            MissedTickBehavior::Delay,
            [(10, 45), (55, 55), (65, 65), (75, 75), (85, 85), (95, 95)],
        ),
        (
            MissedTickBehavior::Skip,
            [(10, 45), (50, 50), (60, 60), (70, 70), (80, 80), (90, 90)],
        ),
    ];
    for (behavior, expected) in cases {
        let p = Paused::new();
        p.block_on(async {
            let start = Instant::now();
            let mut interval = time::interval(10 * MS);
            interval.set_missed_tick_behavior(behavior);
            interval.tick().await;
            time::sleep(45 * MS).await;
            assert_eq!(
                ticks(&mut interval, start, 6).await,
                expected,
                "{behavior:?}"
            );
        });
    }
}

/// "These strategies will only apply when the delay is greater than 5 milliseconds": a tick
/// taken 5 ms late is on time for every behavior (the next is a period after it); 6 ms late,
/// it is missed.
#[test]
fn a_tick_late_by_5ms_or_less_is_on_time() {
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let p = Paused::new();
        p.block_on(async {
            let start = Instant::now();
            let mut interval = time::interval(10 * MS);
            interval.set_missed_tick_behavior(behavior);
            interval.tick().await;
            time::sleep(15 * MS).await; // the tick of 10, 5 ms late
            assert_eq!(
                ticks(&mut interval, start, 2).await,
                [(10, 15), (20, 20)],
                "{behavior:?}"
            );
            time::sleep(6 * MS).await; // the tick of 30 at 26: not yet due
            interval.reset_at(start + 20 * MS); // the tick of 20, 6 ms late
            let next = match behavior {
                MissedTickBehavior::Burst => (30, 30),
                MissedTickBehavior::Delay => (36, 36),
                _ => (30, 30), // Skip: the grid from 20, after 26
            };
            assert_eq!(
                ticks(&mut interval, start, 2).await,
                [(20, 26), next],
                "{behavior:?}"
            );
        });
    }
}

// ---- `Interval::reset*` (tokio's examples: period 100 ms, reset 50 ms after a tick) ----

/// `reset`: the next tick a period after the reset: "approximately 250ms have elapsed".
#[test]
fn reset_moves_the_next_tick_a_period_from_now() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(100 * MS);
        interval.tick().await;
        time::sleep(50 * MS).await;
        interval.reset();
        assert_eq!(
            ticks(&mut interval, start, 2).await,
            [(150, 150), (250, 250)]
        );
        assert_eq!(start.elapsed(), 250 * MS);
    });
}

/// `reset_immediately`: the next tick at once: "approximately 150ms have elapsed".
#[test]
fn reset_immediately_ticks_at_once() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(100 * MS);
        interval.tick().await;
        time::sleep(50 * MS).await;
        interval.reset_immediately();
        assert_eq!(ticks(&mut interval, start, 2).await, [(50, 50), (150, 150)]);
        assert_eq!(start.elapsed(), 150 * MS);
    });
}

/// `reset_after(20ms)`: "approximately 170ms have elapsed".
#[test]
fn reset_after_ticks_that_long_from_now() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(100 * MS);
        interval.tick().await;
        time::sleep(50 * MS).await;
        interval.reset_after(20 * MS);
        assert_eq!(ticks(&mut interval, start, 2).await, [(70, 70), (170, 170)]);
        assert_eq!(start.elapsed(), 170 * MS);
    });
}

/// `reset_at(Instant::now() + 30ms)`: "approximately 180ms have elapsed".
#[test]
fn reset_at_ticks_at_the_deadline() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let mut interval = time::interval(100 * MS);
        interval.tick().await;
        time::sleep(50 * MS).await;
        interval.reset_at(Instant::now() + 30 * MS);
        assert_eq!(ticks(&mut interval, start, 2).await, [(80, 80), (180, 180)]);
        assert_eq!(start.elapsed(), 180 * MS);
    });
}

// ---- What tokio documents of `tick` beyond the examples ----

/// "If tick is used as a branch in select! and another branch completes first, then no tick
/// has been consumed": a pending tick dropped, the next call returns that same tick.
#[test]
fn a_dropped_pending_tick_consumes_no_tick() {
    let p = Paused::new();
    let _g = p.timers.enter();
    let start = Instant::now();
    let mut interval = time::interval(10 * MS);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert_eq!(interval.poll_tick(&mut cx), Poll::Ready(start));
    {
        let mut tick = pin!(interval.tick());
        assert!(tick.as_mut().poll(&mut cx).is_pending());
    } // the losing branch
    p.clock.advance(10 * MS);
    p.timers.poll();
    let mut tick = pin!(interval.tick());
    assert_eq!(tick.as_mut().poll(&mut cx), Poll::Ready(start + 10 * MS));
}

/// As tokio-stream's `IntervalStream`: the same ticks, as a stream's items.
#[test]
fn the_interval_is_a_stream_of_its_ticks() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let interval = time::interval_at(start + 5 * MS, 10 * MS);
        let got: Vec<u64> = interval.take(3).map(|t| ms(start, t)).collect().await;
        assert_eq!(got, [5, 15, 25]);
    });
}

#[test]
#[should_panic(expected = "period must be non-zero")]
fn a_zero_period_panics() {
    let p = Paused::new();
    let _ = p.timers.interval(Duration::ZERO);
}

// ---- `timeout` and `timeout_at` (tokio's examples) ----

/// `timeout(10ms, rx)` with no value sent: "did not receive value within 10 ms", at 10 ms.
#[test]
fn timeout_elapses_at_its_duration() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let rx = std::future::pending::<()>();
        assert_eq!(time::timeout(10 * MS, rx).await, Err(Elapsed));
        assert_eq!(start.elapsed(), 10 * MS);
    });
}

/// A value in time is the future's output, when it comes; one ready at once is `Ok` "no
/// matter the provided duration", zero included.
#[test]
fn timeout_completes_with_the_value_in_time() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let reply = async {
            time::sleep(4 * MS).await;
            7
        };
        assert_eq!(time::timeout(10 * MS, reply).await, Ok(7));
        assert_eq!(start.elapsed(), 4 * MS, "at the value, not at the deadline");
        assert_eq!(time::timeout(Duration::ZERO, async { 8 }).await, Ok(8));
        let late = async {
            time::sleep(10 * MS).await;
            9
        };
        assert_eq!(
            time::timeout(10 * MS, late).await,
            Ok(9),
            "polled first: a future ready at the deadline wins it"
        );
    });
}

/// `timeout_at(Instant::now() + 10ms, rx)`: elapsed at that instant.
#[test]
fn timeout_at_elapses_at_its_deadline() {
    let p = Paused::new();
    p.block_on(async {
        let start = Instant::now();
        let deadline = Instant::now() + 10 * MS;
        let rx = std::future::pending::<()>();
        assert_eq!(time::timeout_at(deadline, rx).await, Err(Elapsed));
        assert_eq!(Instant::now(), deadline);
        assert_eq!(start.elapsed(), 10 * MS);
        let past = time::timeout_at(start, std::future::pending::<()>()).await;
        assert_eq!(past, Err(Elapsed), "a passed deadline elapses at once");
        assert_eq!(Instant::now(), deadline);
    });
}

/// "The original future may be obtained by calling `Timeout::into_inner`"; `get_ref` and
/// `get_mut` reach it in place.
#[test]
fn a_timeouts_future_can_be_taken_back() {
    let p = Paused::new();
    p.block_on(async {
        let mut t = time::timeout(10 * MS, async { 3 });
        let _: &mut _ = t.get_mut();
        let _: &_ = t.get_ref();
        let fut = t.into_inner();
        assert_eq!(fut.await, 3);
        // `IntoFuture`, as tokio takes.
        assert_eq!(time::timeout(MS, std::future::ready(4)).await, Ok(4));
    });
}
