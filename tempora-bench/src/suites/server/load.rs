//! One run of the server suite: a hyper HTTP/1 server on one timer, n keep-alive connections
//! from an in-process hyper client, the memory of the connections while idle, then requests
//! on all of them for a timed window. Both ends are in this process, each on a tokio runtime of
//! its own with one worker thread, so each has a core of the machine's two when nothing else
//! runs (`suites/server/mod.rs` says what that means for the figures).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpSocket, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{watch, Semaphore};

use crate::allocated_bytes;

/// The timer under the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// hyper-util's `TokioTimer`: tokio's timer, hyper's usual one.
    Tokio,
    /// `tempora::compat::hyper::Timer`, on a service of its own built for the run.
    Tempora,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Tokio => "tokio-timer",
            Kind::Tempora => "tempora",
        }
    }
}

/// The server's header-read timeout: long enough that none fires during a run (every request
/// re-arms it, and an idle connection holds one).
const HEADER_TIMEOUT: Duration = Duration::from_secs(60);
/// Connects in flight at once (under the listen backlog below).
const CONNECT_WAVE: usize = 256;
/// The listening socket's backlog.
const BACKLOG: u32 = 4096;
/// Connections per client source address: under the 28 232 ports of Linux's default
/// ephemeral range, so that no address runs out (the server has one address and port).
const PER_SOURCE: usize = 20_000;
/// Bound on connecting and on the connections' end: a guard against a hang.
const PATIENCE: Duration = Duration::from_secs(60);
/// Fds the process keeps besides the connections' (the harness, the runtimes, the listener).
const FD_SPARE: u64 = 512;

/// The phases the client's connections go through; `PHASE` holds the current one.
const IDLE: u8 = 0;
const WARM: u8 = 1;
const MEASURE: u8 = 2;
const STOP: u8 = 3;

/// Every client connection ever made by this process: its source address's index.
static CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// What one run measured.
#[derive(Debug, Clone)]
pub(super) struct RunResult {
    /// Requests answered in the window, per second (all connections).
    pub req_per_s: f64,
    /// A request's time from send to its whole response, µs: median and 99th percentile of
    /// every request answered in the window.
    pub p50_us: f64,
    pub p99_us: f64,
    /// The process's CPU time (server, client, timer threads) in the window, per request.
    pub cpu_ns_per_req: f64,
    /// Heap bytes per idle keep-alive connection (both ends, the server's sleep included).
    pub bytes_per_conn: f64,
    /// Resident bytes per idle keep-alive connection (both ends, kernel socket memory not
    /// included).
    pub rss_per_conn: f64,
}

/// The process's fds: the soft `RLIMIT_NOFILE` raised to the hard limit, and the hard one to
/// `need` if this process may (`CAP_SYS_RESOURCE`); an error if `need` fds cannot be had.
pub(super) fn ensure_fds(need: u64) -> Result<(), String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    let want = libc::rlimit {
        rlim_cur: need,
        rlim_max: lim.rlim_max.max(need),
    };
    // SAFETY: `want` is a valid rlimit for the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
        return Ok(());
    }
    let soft = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: as above. Raising the soft limit to the hard one needs no privilege.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &soft) };
    Err(format!(
        "{need} fds needed (two per connection, both ends in this process), RLIMIT_NOFILE's \
         hard limit is {} and this process may not raise it",
        lim.rlim_max
    ))
}

/// The fds `n` connections need.
pub(super) fn fds_for(n: usize) -> u64 {
    2 * n as u64 + FD_SPARE
}

/// A tokio runtime with one worker thread named `name`, time and I/O enabled.
fn runtime(name: &str) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// The process's resident memory, bytes (`/proc/self/statm`).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

/// The process's CPU time (every thread), ns.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The answer to every request.
async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Accepts connections on `listener` for ever, serving each with hyper's HTTP/1 on `timer`
/// with the header-read timeout.
async fn serve<T>(listener: tokio::net::TcpListener, timer: T)
where
    T: hyper::rt::Timer + Clone + Send + Sync + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let timer = timer.clone();
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(timer)
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(hello))
                .await;
        });
    }
}

/// What the client's connections share.
struct Client {
    server: SocketAddr,
    /// Connections ready (connected, one request answered), and failed.
    ready: AtomicUsize,
    failed: AtomicUsize,
    /// The first failure's reason.
    error: std::sync::Mutex<Option<String>>,
    phase: AtomicU8,
    connects: Semaphore,
}

impl Client {
    fn fail(&self, e: String) {
        self.error.lock().unwrap().get_or_insert(e);
        self.failed.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client connection from a source address of its own range (127.1.x.y), lingering 0 on
/// close (a reset, so that no port waits in TIME_WAIT for the next run).
async fn connect(server: SocketAddr) -> std::io::Result<TcpStream> {
    let k = 1 + CONNECTIONS.fetch_add(1, Ordering::Relaxed) / PER_SOURCE;
    let source = Ipv4Addr::new(127, 1, (k >> 8) as u8, k as u8);
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    socket.set_zero_linger()?;
    let stream = socket.connect(server).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

/// One request for `/` and its whole response.
async fn request(send: &mut Sender) -> Result<(), String> {
    let req = Request::get("/")
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let res = send.send_request(req).await.map_err(|e| e.to_string())?;
    let body = res.into_body().collect().await.map_err(|e| e.to_string())?;
    if body.to_bytes() != "hello" {
        return Err("a response other than hello".into());
    }
    Ok(())
}

/// One keep-alive connection: connects, sends one request, waits for the load to start, then
/// sends requests one after another until the run stops. Its latencies in the window, µs.
async fn connection(client: Arc<Client>, mut go: watch::Receiver<u8>) -> Vec<u32> {
    let setup = async {
        let permit = client.connects.acquire().await.map_err(|e| e.to_string())?;
        let stream = connect(client.server)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        drop(permit);
        request(&mut send).await?;
        Ok::<_, String>(send)
    };
    let mut send = match setup.await {
        Ok(s) => s,
        Err(e) => {
            client.fail(e);
            return Vec::new();
        }
    };
    client.ready.fetch_add(1, Ordering::SeqCst);
    if go.wait_for(|p| *p != IDLE).await.is_err() {
        return Vec::new();
    }
    let mut late = Vec::new();
    loop {
        let phase = client.phase.load(Ordering::Relaxed);
        if phase == STOP {
            break;
        }
        let t = Instant::now();
        if let Err(e) = request(&mut send).await {
            client.fail(e);
            break;
        }
        // Counted if it was sent and answered inside the window.
        if phase == MEASURE && client.phase.load(Ordering::Relaxed) == MEASURE {
            late.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
        }
    }
    late
}

/// Waits (polling, on this thread) until `done()` or `limit` passed; whether `done()`.
fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// One run of `kind` at n connections: `warmup`, then the measured `window`.
pub(super) fn run(
    kind: Kind,
    n: usize,
    warmup: Duration,
    window: Duration,
) -> Result<RunResult, String> {
    ensure_fds(fds_for(n))?;
    let server_rt = runtime("bench-server")?;
    let client_rt = runtime("bench-client")?;
    let timers = match kind {
        Kind::Tokio => None,
        Kind::Tempora => Some(
            tempora::Timers::builder()
                .build()
                .map_err(|e| format!("tempora service: {e}"))?,
        ),
    };
    let listener = server_rt.block_on(async {
        let socket = TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        socket.listen(BACKLOG)
    });
    let listener = listener.map_err(|e| format!("listen on 127.0.0.1: {e}"))?;
    let server = listener
        .local_addr()
        .map_err(|e| format!("listener address: {e}"))?;
    let accept = match &timers {
        None => server_rt.spawn(serve(listener, TokioTimer::new())),
        Some(t) => server_rt.spawn(serve(
            listener,
            tempora::compat::hyper::Timer::with_timers(t.clone()),
        )),
    };
    let client = Arc::new(Client {
        server,
        ready: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        error: std::sync::Mutex::new(None),
        phase: AtomicU8::new(IDLE),
        connects: Semaphore::new(CONNECT_WAVE),
    });
    let (go_tx, go_rx) = watch::channel(IDLE);
    let mut tasks = Vec::with_capacity(n);

    // The connections, idle: memory before and after, each having sent one request (the
    // server then holds its next header-read sleep).
    std::thread::sleep(Duration::from_millis(20));
    let (heap0, rss0) = (allocated_bytes(), resident_bytes());
    for _ in 0..n {
        tasks.push(client_rt.spawn(connection(client.clone(), go_rx.clone())));
    }
    let settled = wait_until(PATIENCE, || {
        client.ready.load(Ordering::SeqCst) + client.failed.load(Ordering::SeqCst) == n
    });
    // Let the server's tasks reach their next read (and arm its sleep).
    std::thread::sleep(Duration::from_millis(50));
    let (heap1, rss1) = (allocated_bytes(), resident_bytes());
    let outcome = if !settled {
        Err(format!(
            "{} of {n} connections ready after {PATIENCE:?}",
            client.ready.load(Ordering::SeqCst)
        ))
    } else if client.failed.load(Ordering::SeqCst) > 0 {
        Err(format!(
            "{} of {n} connections failed: {}",
            client.failed.load(Ordering::SeqCst),
            client.error.lock().unwrap().clone().unwrap_or_default()
        ))
    } else {
        // The load: every connection sends requests back to back.
        client.phase.store(WARM, Ordering::SeqCst);
        let _ = go_tx.send(WARM);
        std::thread::sleep(warmup);
        let (t0, cpu0) = (Instant::now(), process_cpu_ns());
        client.phase.store(MEASURE, Ordering::SeqCst);
        std::thread::sleep(window);
        client.phase.store(STOP, Ordering::SeqCst);
        let (t1, cpu1) = (Instant::now(), process_cpu_ns());
        Ok((t1 - t0, cpu1.saturating_sub(cpu0)))
    };
    client.phase.store(STOP, Ordering::SeqCst);
    let _ = go_tx.send(STOP);
    let joined = client_rt.block_on(async {
        tokio::time::timeout(PATIENCE, async {
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap_or_default());
            }
            all
        })
        .await
    });
    accept.abort();
    // The client's connections and then the server's: reset by the client's linger-0 close.
    client_rt.shutdown_timeout(Duration::from_secs(5));
    server_rt.shutdown_timeout(Duration::from_secs(5));
    drop(timers);
    let (elapsed, cpu) = outcome?;
    let mut late = joined.map_err(|_| format!("connections not done within {PATIENCE:?}"))?;
    if let Some(e) = client.error.lock().unwrap().clone() {
        return Err(format!("a connection failed under load: {e}"));
    }
    if late.is_empty() {
        return Err(format!("no request answered in {window:?}"));
    }
    late.sort_unstable();
    let count = late.len() as f64;
    let q = |q: f64| crate::stats::quantile(&late, q).unwrap_or(0) as f64;
    Ok(RunResult {
        req_per_s: count / elapsed.as_secs_f64(),
        p50_us: q(0.5),
        p99_us: q(0.99),
        cpu_ns_per_req: cpu as f64 / count,
        bytes_per_conn: heap1.saturating_sub(heap0) as f64 / n as f64,
        rss_per_conn: rss1.saturating_sub(rss0) as f64 / n as f64,
    })
}
