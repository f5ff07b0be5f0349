//! One run of the server suite: a hyper HTTP/1 server on one timer in this process, n
//! keep-alive connections from a hyper client in a child process (this binary's hidden `bench
//! load-client`), the server's memory while they are idle, then requests on all of them for a
//! timed window. Server and client each run a tokio runtime with one worker thread, so each has
//! a core of the machine's two when nothing else runs (`suites/server/mod.rs` says what that
//! means for the figures).
//!
//! The two talk over the child's stdin and stdout, one line each way per step: the client
//! says `ready` once every connection has sent its first request, the server answers `go`
//! with the warm-up and the window, the client says `measure` and `stop` at the window's ends
//! (the server reads its CPU time at each) and `done` with the requests, their latencies and
//! its own CPU time. The client stops by itself after the window, and after `PATIENCE` at
//! any step.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
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
    /// every request answered in the window (one sent in the warm-up included).
    pub p50_us: f64,
    pub p99_us: f64,
    /// The server process's CPU time (its runtime, the timer's threads) in the window, per
    /// request.
    pub cpu_ns_per_req: f64,
    /// The client process's, per request.
    pub client_cpu_ns_per_req: f64,
    /// The server's heap bytes per idle keep-alive connection (its sleep included).
    pub bytes_per_conn: f64,
    /// The server's resident bytes per idle keep-alive connection (kernel socket memory not
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
        "{need} fds needed (one per connection, and {FD_SPARE} more), RLIMIT_NOFILE's hard \
         limit is {} and this process may not raise it",
        lim.rlim_max
    ))
}

/// The fds `n` connections need in each process.
pub(super) fn fds_for(n: usize) -> u64 {
    n as u64 + FD_SPARE
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

    fn error(&self) -> String {
        self.error.lock().unwrap().clone().unwrap_or_default()
    }
}

/// A client connection from a source address of its own range (127.1.x.y), lingering 0 on
/// close (a reset, so that no port waits in TIME_WAIT for the next run). The port is chosen at
/// connect (`IP_BIND_ADDRESS_NO_PORT`): a bind to port 0 searches the address's ports for a
/// free one, which took most of the client's CPU while 10k connections were made.
async fn connect(server: SocketAddr) -> std::io::Result<TcpStream> {
    let k = 1 + CONNECTIONS.fetch_add(1, Ordering::Relaxed) / PER_SOURCE;
    let source = Ipv4Addr::new(127, 1, (k >> 8) as u8, k as u8);
    let socket = TcpSocket::new_v4()?;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt(2) on the socket's own fd, with a pointer to a live c_int and its
    // size.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
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
/// sends requests one after another until the run stops. The latencies of its requests
/// answered in the window (sent in it or in the warm-up before), µs.
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
        if client.phase.load(Ordering::Relaxed) == STOP {
            break;
        }
        let t = Instant::now();
        if let Err(e) = request(&mut send).await {
            client.fail(e);
            break;
        }
        // Counted if it was answered inside the window.
        if client.phase.load(Ordering::Relaxed) == MEASURE {
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

/// Writes one protocol line and flushes it.
fn say(out: &mut impl Write, line: &str) -> Result<(), String> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("server suite: writing {line:?}: {e}"))
}

/// Reads one protocol line; an error at the end of input.
fn hear(input: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) => Err("server suite: the other side ended".into()),
        Ok(_) => Ok(line.trim_end().to_string()),
        Err(e) => Err(format!("server suite: reading: {e}")),
    }
}

/// The client side of a run (`bench load-client`, or a thread in the tests): n connections
/// to `server`, the load when told, its figures reported on `output`.
pub fn client(
    server: SocketAddr,
    n: usize,
    mut input: impl BufRead,
    mut output: impl Write,
) -> Result<(), String> {
    ensure_fds(fds_for(n))?;
    let rt = runtime("bench-client")?;
    let client = Arc::new(Client {
        server,
        ready: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        error: std::sync::Mutex::new(None),
        phase: AtomicU8::new(IDLE),
        connects: Semaphore::new(CONNECT_WAVE),
    });
    let (go_tx, go_rx) = watch::channel(IDLE);
    let tasks: Vec<_> = (0..n)
        .map(|_| rt.spawn(connection(client.clone(), go_rx.clone())))
        .collect();
    let settled = wait_until(PATIENCE, || {
        client.ready.load(Ordering::SeqCst) + client.failed.load(Ordering::SeqCst) == n
    });
    let ready = client.ready.load(Ordering::SeqCst);
    let outcome = if !settled {
        Err(format!(
            "{ready} of {n} connections ready after {PATIENCE:?}"
        ))
    } else if ready < n {
        Err(format!(
            "{} of {n} connections failed: {}",
            n - ready,
            client.error()
        ))
    } else {
        Ok(())
    };
    say(
        &mut output,
        &match &outcome {
            Ok(()) => "ready".to_string(),
            Err(e) => format!("failed {e}"),
        },
    )?;
    let mut run = || -> Result<(Duration, u64), String> {
        outcome.clone()?;
        let go = hear(&mut input)?;
        let mut words = go.split(' ').skip(1).map(|w| w.parse::<u64>());
        let (Some(Ok(warmup)), Some(Ok(window))) = (words.next(), words.next()) else {
            return Err(format!(
                "server suite: expected `go WARMUP_US WINDOW_US`: {go:?}"
            ));
        };
        client.phase.store(WARM, Ordering::SeqCst);
        let _ = go_tx.send(WARM);
        std::thread::sleep(Duration::from_micros(warmup));
        say(&mut output, "measure")?;
        let (t0, cpu0) = (Instant::now(), process_cpu_ns());
        client.phase.store(MEASURE, Ordering::SeqCst);
        std::thread::sleep(Duration::from_micros(window));
        client.phase.store(STOP, Ordering::SeqCst);
        let (t1, cpu1) = (Instant::now(), process_cpu_ns());
        say(&mut output, "stop")?;
        Ok((t1 - t0, cpu1.saturating_sub(cpu0)))
    };
    let measured = run();
    client.phase.store(STOP, Ordering::SeqCst);
    let _ = go_tx.send(STOP);
    let joined = rt.block_on(async {
        tokio::time::timeout(PATIENCE, async {
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap_or_default());
            }
            all
        })
        .await
    });
    // The connections end with the runtime: reset by their linger-0 close.
    rt.shutdown_timeout(Duration::from_secs(5));
    let (elapsed, cpu) = measured?;
    let mut late = joined.map_err(|_| format!("connections not done within {PATIENCE:?}"))?;
    if client.failed.load(Ordering::SeqCst) > 0 {
        return say(
            &mut output,
            &format!("failed a connection failed under load: {}", client.error()),
        );
    }
    late.sort_unstable();
    let q = |q: f64| crate::stats::quantile(&late, q).unwrap_or(0);
    say(
        &mut output,
        &format!(
            "done {} {} {cpu} {} {}",
            late.len(),
            elapsed.as_nanos(),
            q(0.5),
            q(0.99)
        ),
    )
}

/// Where a run's client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClientAt {
    /// A child process: this binary, `bench load-client ADDR N` (the suite).
    Process,
    /// A thread of this process (the tests, whose binary has no `bench` command).
    #[cfg_attr(not(test), allow(dead_code))]
    Thread,
}

/// The client of a run, started: its lines in, ours out, and how to wait for its end.
struct Started {
    input: Box<dyn BufRead>,
    output: Box<dyn Write>,
    end: Box<dyn FnOnce() -> Result<(), String>>,
}

fn start_client(at: ClientAt, server: SocketAddr, n: usize) -> Result<Started, String> {
    match at {
        ClientAt::Process => {
            let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
            let mut child = Command::new(exe)
                .args(["bench", "load-client", &server.to_string(), &n.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting the load client: {e}"))?;
            let input = BufReader::new(child.stdout.take().expect("piped"));
            let output = child.stdin.take().expect("piped");
            Ok(Started {
                input: Box::new(input),
                output: Box::new(output),
                end: Box::new(move || match child.wait() {
                    Ok(s) if s.success() => Ok(()),
                    Ok(s) => Err(format!("the load client ended with {s}")),
                    Err(e) => Err(format!("waiting for the load client: {e}")),
                }),
            })
        }
        ClientAt::Thread => {
            let (ours, theirs) =
                std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
            let theirs_in = theirs.try_clone().map_err(|e| e.to_string())?;
            let ours_in = ours.try_clone().map_err(|e| e.to_string())?;
            let thread = std::thread::spawn(move || {
                let r = client(server, n, BufReader::new(theirs_in), &theirs);
                if let Err(e) = &r {
                    let _ = say(&mut &theirs, &format!("failed {e}"));
                }
                r
            });
            Ok(Started {
                input: Box::new(BufReader::new(ours_in)),
                output: Box::new(ours),
                end: Box::new(move || {
                    thread
                        .join()
                        .map_err(|_| "the client panicked".to_string())?
                }),
            })
        }
    }
}

/// One run of `kind` at n connections: `warmup`, then the measured `window`.
pub(super) fn run(
    kind: Kind,
    n: usize,
    warmup: Duration,
    window: Duration,
    at: ClientAt,
) -> Result<RunResult, String> {
    ensure_fds(fds_for(n))?;
    let server_rt = runtime("bench-server")?;
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
    std::thread::sleep(Duration::from_millis(20));
    let (heap0, rss0) = (allocated_bytes(), resident_bytes());
    let result = start_client(at, server, n).and_then(|mut c| {
        let talk = (|| {
            // The connections, idle: each has sent one request, and the server holds its next
            // header-read sleep once its task reached the next read.
            let ready = hear(&mut c.input)?;
            if ready != "ready" {
                return Err(ready.trim_start_matches("failed ").to_string());
            }
            std::thread::sleep(Duration::from_millis(50));
            let (heap1, rss1) = (allocated_bytes(), resident_bytes());
            say(
                &mut c.output,
                &format!("go {} {}", warmup.as_micros(), window.as_micros()),
            )?;
            let measure = hear(&mut c.input)?;
            let cpu0 = process_cpu_ns();
            let stop = hear(&mut c.input)?;
            let cpu1 = process_cpu_ns();
            if (measure.as_str(), stop.as_str()) != ("measure", "stop") {
                return Err(format!(
                    "server suite: expected measure, stop: {measure:?} {stop:?}"
                ));
            }
            let done = hear(&mut c.input)?;
            let Some(figures) = done.strip_prefix("done ") else {
                return Err(done.trim_start_matches("failed ").to_string());
            };
            let f: Vec<f64> = figures.split(' ').filter_map(|w| w.parse().ok()).collect();
            let [count, elapsed_ns, client_cpu, p50, p99] = f[..] else {
                return Err(format!("server suite: a malformed report: {done:?}"));
            };
            if count == 0.0 {
                return Err(format!("no request answered in {window:?}"));
            }
            Ok(RunResult {
                req_per_s: count / (elapsed_ns / 1e9),
                p50_us: p50,
                p99_us: p99,
                cpu_ns_per_req: cpu1.saturating_sub(cpu0) as f64 / count,
                client_cpu_ns_per_req: client_cpu / count,
                bytes_per_conn: heap1.saturating_sub(heap0) as f64 / n as f64,
                rss_per_conn: rss1.saturating_sub(rss0) as f64 / n as f64,
            })
        })();
        // Its end closes our ends of the pipes first, so a client still waiting for `go`
        // stops.
        let Started { input, output, end } = c;
        drop((input, output));
        let ended = end();
        let r = talk?;
        ended.map(|()| r)
    });
    accept.abort();
    server_rt.shutdown_timeout(Duration::from_secs(5));
    drop(timers);
    result
}
