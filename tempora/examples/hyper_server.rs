//! A hyper server whose timeouts are tempora's: hyper's header-read timeout on
//! [`tempora::compat::hyper::Timer`], and a per-request deadline from
//! [`tempora::compat::tower::TimeoutLayer`] around the service.
//!
//! The server listens on 127.0.0.1 on a tokio runtime. `/` answers "hello"; `/slow` answers
//! after 10 s, past the request timeout, so the layer answers for it: the timeout becomes a
//! 503. A client in the same process then checks, with its own clock (`std::time::Instant`
//! and tokio's timer, an independent witness), that:
//!
//! 1. 64 keep-alive connections each get 50 "hello"s (every request re-arms the connection's
//!    header-read timeout);
//! 2. `/slow` gets its 503 no sooner than the request timeout, and well before the 10 s;
//! 3. a connection that sends half a request head, and one that sends nothing, are closed by
//!    the header-read timeout, no sooner than it.
//!
//! It prints what it saw and exits 0 if that is what happened, 1 otherwise (CI runs it:
//! `.ci/examples.sh`).
//!
//! ```text
//! cargo run --release -p tempora --example hyper_server --features hyper,tower
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tempora::compat::hyper::Timer;
use tempora::compat::tower::TimeoutLayer;
use tempora::time::Elapsed;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower_layer::Layer;
use tower_service::Service;

/// How long a connection may take to send a request head (idle keep-alive time included).
const HEADER_TIMEOUT: Duration = Duration::from_millis(300);
/// How long a request may take to be answered.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(200);
/// How long `/slow` would take.
const SLOW: Duration = Duration::from_secs(10);
/// Keep-alive connections of step 1, and requests on each.
const CONNECTIONS: usize = 64;
const REQUESTS: usize = 50;
/// Bound on each step: a guard against a hang.
const LIMIT: Duration = Duration::from_secs(20);

/// The application: "hello", or a slow answer.
#[derive(Clone)]
struct App;

impl Service<Request<Incoming>> for App {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let slow = req.uri().path() == "/slow";
        Box::pin(async move {
            if slow {
                tempora::time::sleep(SLOW).await;
            }
            Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
        })
    }
}

/// Serves each connection with hyper's HTTP/1 on tempora's timer, the application behind the
/// request timeout (a timeout answered with 503).
async fn serve(listener: TcpListener) {
    let app = TimeoutLayer::new(REQUEST_TIMEOUT).layer(App);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let mut app = app.clone();
                async move {
                    match app.call(req).await {
                        Ok(r) => Ok::<_, Infallible>(r),
                        Err(e) if e.is::<Elapsed>() => {
                            let mut r = Response::new(Full::new(Bytes::from_static(b"timeout")));
                            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                            Ok(r)
                        }
                        Err(e) => panic!("the application failed: {e}"),
                    }
                }
            });
            // A connection closed by the header-read timeout ends with an error: expected.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(Timer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One keep-alive connection sending `REQUESTS` requests for `/`; the "hello"s it got.
async fn keep_alive(addr: SocketAddr) -> Result<usize, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut hellos = 0;
    for _ in 0..REQUESTS {
        let req = Request::get("/")
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let res = send.send_request(req).await.map_err(|e| e.to_string())?;
        let body = res.into_body().collect().await.map_err(|e| e.to_string())?;
        hellos += usize::from(body.to_bytes() == "hello");
    }
    Ok(hellos)
}

/// `/slow` on a connection of its own: its status and how long it took.
async fn slow(addr: SocketAddr) -> Result<(StatusCode, Duration), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = Request::get("/slow")
        .header("host", "127.0.0.1")
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let res = send.send_request(req).await.map_err(|e| e.to_string())?;
    Ok((res.status(), start.elapsed()))
}

/// A connection that sends `head` and then nothing: how long until the server closed it,
/// from before the connect (the server's timeout starts once it has accepted the connection,
/// which may be before this task runs again after the connect).
async fn stalled(addr: SocketAddr, head: &'static [u8]) -> Result<Duration, String> {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream.write_all(head).await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf).await {
            // hyper may answer 408 before it closes: read on to the end.
            Ok(0) | Err(_) => return Ok(start.elapsed()),
            Ok(_) => {}
        }
    }
}

async fn check(addr: SocketAddr) -> Vec<String> {
    let mut failures = Vec::new();
    let bound = |what: &str| format!("{what}: not done within {LIMIT:?}");

    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(keep_alive(addr)))
        .collect();
    let mut hellos = 0;
    for t in tasks {
        match tokio::time::timeout(LIMIT, t).await {
            Ok(Ok(Ok(h))) => hellos += h,
            Ok(Ok(Err(e))) => failures.push(format!("a keep-alive connection failed: {e}")),
            Ok(Err(e)) => failures.push(format!("a keep-alive task panicked: {e}")),
            Err(_) => failures.push(bound("a keep-alive connection")),
        }
    }
    let want = CONNECTIONS * REQUESTS;
    println!("1. {hellos} of {want} requests on {CONNECTIONS} keep-alive connections answered");
    if hellos != want {
        failures.push(format!("{hellos} hellos, expected {want}"));
    }

    match tokio::time::timeout(LIMIT, slow(addr)).await {
        Ok(Ok((status, took))) => {
            println!("2. /slow: {status} after {took:?} (request timeout {REQUEST_TIMEOUT:?})");
            if status != StatusCode::SERVICE_UNAVAILABLE {
                failures.push(format!("/slow answered {status}, expected 503"));
            }
            if took < REQUEST_TIMEOUT || took >= SLOW {
                failures.push(format!("/slow timed out after {took:?}"));
            }
        }
        Ok(Err(e)) => failures.push(format!("/slow failed: {e}")),
        Err(_) => failures.push(bound("/slow")),
    }

    for (what, head) in [
        ("half a head", &b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n"[..]),
        ("nothing", &b""[..]),
    ] {
        match tokio::time::timeout(LIMIT, stalled(addr, head)).await {
            Ok(Ok(took)) => {
                println!(
                    "3. a connection that sent {what}: closed after {took:?} \
                     (header-read timeout {HEADER_TIMEOUT:?})"
                );
                // Ten header timeouts: a loaded machine's scheduling, not a missed timeout.
                if took < HEADER_TIMEOUT || took > 10 * HEADER_TIMEOUT {
                    failures.push(format!(
                        "the connection that sent {what} closed after {took:?}"
                    ));
                }
            }
            Ok(Err(e)) => failures.push(format!("the connection that sent {what}: {e}")),
            Err(_) => failures.push(bound(&format!("the connection that sent {what}"))),
        }
    }
    failures
}

fn main() -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let failures = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(serve(listener));
        check(addr).await
    });
    // The server's task and any connection left are cancelled with the runtime.
    rt.shutdown_timeout(Duration::from_secs(1));
    if failures.is_empty() {
        println!("ok: hyper's header-read timeout and the request timeout ran on tempora");
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}
