//! hyper's own HTTP/1 server on `compat::hyper::Timer`, on a manual clock: the header-read
//! timeout's deadline is the service's clock plus the timeout (hyper computes it from the
//! timer's `now`), it closes a silent connection at that deadline and not a nanosecond
//! before, and each request re-arms it from the time its head is awaited. Nothing sleeps: the
//! test moves the clock and fires what is due (`Timers::poll`).

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tempora::clock::ManualClock;
use tempora::compat::hyper::Timer;
use tempora::Timers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(10);
const NS: Duration = Duration::from_nanos(1);

/// Lets the runtime's other task (the connection) run until it waits again.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[test]
fn the_header_read_timeout_runs_on_the_services_clock() {
    let clock = ManualClock::new();
    let timers = Timers::builder()
        .clock(clock.clone())
        .drivers(0)
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut client, server) = tokio::io::duplex(4096);
        let service = hyper::service::service_fn(|_: Request<Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hi"))))
        });
        let conn = tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .timer(Timer::with_timers(timers.clone()))
                .header_read_timeout(TIMEOUT)
                .serve_connection(TokioIo::new(server), service),
        );
        settle().await;
        assert!(!conn.is_finished());
        assert_eq!(
            timers.next_deadline(),
            Some(timers.now() + TIMEOUT),
            "the first head's deadline"
        );

        // A request 5 s in: answered, and the next head's timeout runs from then.
        clock.advance(Duration::from_secs(5));
        timers.poll();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n")
            .await
            .unwrap();
        let mut answered = Vec::new();
        while !answered.ends_with(b"hi") {
            let mut buf = [0u8; 512];
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection ended: {answered:?}");
            answered.extend_from_slice(&buf[..n]);
        }
        assert!(answered.starts_with(b"HTTP/1.1 200 OK"));
        settle().await;
        assert!(!conn.is_finished());
        assert_eq!(
            timers.next_deadline(),
            Some(timers.now() + TIMEOUT),
            "the next head's deadline runs from the end of the request"
        );

        // Silence: closed at the deadline, not a nanosecond before.
        clock.advance(TIMEOUT - NS);
        timers.poll();
        settle().await;
        assert!(!conn.is_finished(), "closed early");
        clock.advance(NS);
        timers.poll();
        settle().await;
        assert!(
            conn.is_finished(),
            "the header-read timeout did not close the connection"
        );
        match conn.await.unwrap() {
            Err(e) => assert!(e.is_timeout(), "{e}"),
            Ok(()) => panic!("the connection ended without its timeout"),
        }
    });
}
