//! Idle timeouts for thousands of TCP connections on tokio, kept by tempora.
//!
//! A loopback server (127.0.0.1) on a tokio runtime gives each connection an idle timeout:
//! one [`tempora::time::Sleep`] per connection, made once and pushed back with
//! [`Sleep::reset_after`](tempora::time::Sleep::reset_after) on every read, raced against the
//! next read with `tokio::select!`. When the sleep completes, the connection has been silent
//! for `IDLE` and the server closes it. The sleeps live on the wheels of a
//! [`Timers`](tempora::Timers) service whose driver thread fires them and wakes their tasks;
//! tokio's own timer is not involved on the server side.
//!
//! A client in the same process opens 2000 connections. Every other one says hello and goes
//! quiet; the others write a byte every 20 ms for three times the idle timeout, then close
//! their side. The quiet ones must be closed by the server's timeout (the client sees EOF,
//! never sooner than `IDLE` after its hello), and the talking ones must not be closed while
//! they talk. The client keeps its own time (`std::time::Instant`, tokio's timer), as an
//! independent witness. The example prints the counts and exits 0 if that is what happened,
//! 1 otherwise.
//!
//! ```text
//! cargo run --release -p tempora --example tokio_timeouts
//! ```

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::pin::pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tempora::Timers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Connections the client opens (each costs two fds in this process: fewer if the fd limit
/// is lower).
const CONNECTIONS: usize = 2000;
/// Connection `i` is quiet when `i % QUIET_EVERY == 0`.
const QUIET_EVERY: usize = 2;
/// The server closes a connection silent for this long: generous beside the talking clients'
/// 20 ms, so that a loaded machine does not close a talking connection.
const IDLE: Duration = Duration::from_millis(400);
/// How often a talking client writes.
const WRITE_EVERY: Duration = Duration::from_millis(20);
/// How long a talking client talks: three idle timeouts, so a timeout that were not pushed
/// back by the writes would close it.
const TALK_FOR: Duration = Duration::from_millis(1200);
/// How long a quiet client waits for the server to close it before it calls that a failure.
const EOF_WITHIN: Duration = Duration::from_secs(5);
/// Connects in flight at once (well under the listen backlog tokio asks for, 1024).
const WAVE: usize = 128;
/// Bound on the whole client run, a guard against a hang: it takes about 2 s, 5 on a machine
/// whose cores are busy with other work.
const LIMIT: Duration = Duration::from_secs(20);
/// The first byte a client sends says what it is, for the server's counts.
const QUIET: u8 = b'q';
const TALKING: u8 = b't';

type Res<T> = Result<T, String>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokio_timeouts example FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<()> {
    let connections = connections_within_fd_limit()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("building the tokio runtime: {e}"))?;
    // One timer service for every connection's idle timeout: the default configuration, whose
    // driver thread fires the sleeps and wakes their tasks.
    let timers = Timers::new();
    rt.block_on(demo(timers, connections))
}

/// How a server connection ended, as the server saw it, per kind of client.
#[derive(Default)]
struct ServerStats {
    idle_quiet: AtomicUsize,
    idle_talking: AtomicUsize,
    /// Closed by the idle timeout before the client's first byte (its kind unknown).
    idle_silent: AtomicUsize,
    by_client_quiet: AtomicUsize,
    by_client_talking: AtomicUsize,
    errors: AtomicUsize,
    reads: AtomicUsize,
    /// Idle timeouts that completed less than `IDLE` after the connection's last read.
    early: AtomicUsize,
    /// The most an idle timeout's task ran after the deadline, in µs (informational: the
    /// driver's wake-up plus the runtime's scheduling; a busy machine makes it larger).
    late_max_us: AtomicU64,
}

impl ServerStats {
    fn closed(&self) -> usize {
        self.idle_quiet.load(Relaxed)
            + self.idle_talking.load(Relaxed)
            + self.idle_silent.load(Relaxed)
            + self.by_client_quiet.load(Relaxed)
            + self.by_client_talking.load(Relaxed)
            + self.errors.load(Relaxed)
    }
}

async fn demo(timers: Timers, connections: usize) -> Res<()> {
    let started = Instant::now();
    let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding a listener on {addr}: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the listener's address: {e}"))?;
    let stats = Arc::new(ServerStats::default());
    let accept_error = Arc::new(std::sync::Mutex::new(None));
    {
        let (stats, accept_error) = (stats.clone(), accept_error.clone());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(serve(timers.clone(), stream, stats.clone()));
                    }
                    Err(e) => {
                        // EMFILE and the like: the client's connects will time out; say why.
                        if let Ok(mut slot) = accept_error.lock() {
                            *slot = Some(e.to_string());
                        }
                        return;
                    }
                }
            }
        });
    }

    // The client: each connection is a task that connects and then talks or stays quiet.
    // At most `WAVE` connects are in flight at once (a loopback connect takes microseconds;
    // all of them at once would only overflow the listen backlog). A task starts its client
    // as soon as it is connected, so the server's idle timeout, which starts at accept, never
    // waits on other connections' connects.
    let connecting = Arc::new(Semaphore::new(WAVE));
    let mut quiet = Vec::new();
    let mut talking = Vec::new();
    let t0 = tokio::time::Instant::now();
    for i in 0..connections {
        let permit = connecting
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| format!("the connect semaphore: {e}"))?;
        let connect = async move {
            let stream = open(addr, i).await;
            drop(permit);
            stream
        };
        if i % QUIET_EVERY == 0 {
            quiet.push(tokio::spawn(
                async move { quiet_client(connect.await?).await },
            ));
        } else {
            // Talking clients' writes are spread over the 20 ms period, not all on one edge.
            let first = t0 + WRITE_EVERY * (i as u32 % 20) / 20;
            talking.push(tokio::spawn(async move {
                talking_client(connect.await?, first).await
            }));
        }
    }
    // Every connect is over once all the permits are back.
    drop(connecting.acquire_many(WAVE as u32).await);
    let opened = started.elapsed();

    // Wait for every client, within the bound.
    let left = LIMIT.saturating_sub(started.elapsed());
    let results = tokio::time::timeout(left, async {
        let mut q = Vec::new();
        for h in quiet {
            q.push(joined(h).await);
        }
        let mut t = Vec::new();
        for h in talking {
            t.push(joined(h).await);
        }
        (q, t)
    })
    .await;
    let (quiet, talking) = results.map_err(|_| format!("clients not done after {LIMIT:?}"))?;
    // The server's side of the last connections ends just after the client's: let its
    // counts settle.
    let settle = tokio::time::Instant::now() + Duration::from_secs(2);
    while stats.closed() < connections && tokio::time::Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed();

    // The verdict.
    let mut failures = Vec::new();
    let mut eof_after: Vec<Duration> = Vec::new();
    for (i, r) in quiet.iter().enumerate() {
        match r {
            Ok(d) => eof_after.push(*d),
            Err(e) => failures.push(format!("quiet client {i}: {e}")),
        }
    }
    let mut writes = 0;
    for (i, r) in talking.iter().enumerate() {
        match r {
            Ok(n) => writes += n,
            Err(e) => failures.push(format!("talking client {i}: {e}")),
        }
    }
    let n_quiet = quiet.len();
    let n_talking = talking.len();
    let s = &*stats;
    let got = |a: &AtomicUsize| a.load(Relaxed);
    if got(&s.idle_quiet) != n_quiet || got(&s.idle_talking) != 0 {
        failures.push(format!(
            "server: closed {} quiet and {} talking connections by the idle timeout; \
             expected {n_quiet} and 0",
            got(&s.idle_quiet),
            got(&s.idle_talking)
        ));
    }
    if got(&s.idle_silent) != 0 {
        failures.push(format!(
            "server: {} connections closed by the idle timeout before their client's first byte",
            got(&s.idle_silent)
        ));
    }
    if got(&s.by_client_talking) != n_talking || got(&s.by_client_quiet) != 0 {
        failures.push(format!(
            "server: {} talking and {} quiet connections were closed by their client; \
             expected {n_talking} and 0",
            got(&s.by_client_talking),
            got(&s.by_client_quiet)
        ));
    }
    if got(&s.errors) != 0 {
        failures.push(format!("server: {} connections failed", got(&s.errors)));
    }
    if got(&s.early) != 0 {
        failures.push(format!(
            "server: {} idle timeouts completed less than {} ms after the last read",
            got(&s.early),
            IDLE.as_millis()
        ));
    }
    if let Some(e) = accept_error.lock().ok().and_then(|s| s.clone()) {
        failures.push(format!("server: accept failed: {e}"));
    }

    eof_after.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "tokio_timeouts example: {connections} connections on {addr}, idle timeout {} ms \
         (a tempora Sleep per connection, reset_after on each read)",
        IDLE.as_millis()
    );
    println!(
        "  client: opened them in {:.0} ms; {n_quiet} quiet (hello, then silence), \
         {n_talking} talking (a byte every {} ms for {} ms)",
        ms(opened),
        WRITE_EVERY.as_millis(),
        TALK_FOR.as_millis()
    );
    println!(
        "  server: {} reads; closed by the idle timeout: {} quiet, {} talking; \
         closed by the client: {} talking, {} quiet; errors: {}; \
         timeouts before IDLE: {} (the latest ran {:.1} ms after its deadline)",
        got(&s.reads),
        got(&s.idle_quiet),
        got(&s.idle_talking),
        got(&s.by_client_talking),
        got(&s.by_client_quiet),
        got(&s.errors),
        got(&s.early),
        s.late_max_us.load(Relaxed) as f64 / 1e3
    );
    if let (Some(first), Some(last)) = (eof_after.first(), eof_after.last()) {
        println!(
            "  quiet clients: {}/{n_quiet} saw EOF, {:.1} / {:.1} / {:.1} ms \
             (min / median / max) after their hello",
            eof_after.len(),
            ms(*first),
            ms(eof_after[eof_after.len() / 2]),
            ms(*last)
        );
    }
    println!(
        "  talking clients: {}/{n_talking} talked to the end ({writes} writes), \
         none closed by the server",
        talking.iter().filter(|r| r.is_ok()).count()
    );
    println!("  took {:.2} s", took.as_secs_f64());
    if failures.is_empty() {
        println!("OK");
        Ok(())
    } else {
        let shown = failures.len().min(10);
        Err(format!(
            "{} failures; the first {shown}:\n  {}",
            failures.len(),
            failures[..shown].join("\n  ")
        ))
    }
}

/// The server's side of one connection: reads until the client closes or the connection is
/// idle for `IDLE`.
async fn serve(timers: Timers, mut stream: TcpStream, stats: Arc<ServerStats>) {
    let mut buf = [0u8; 1024];
    let mut kind = None;
    // When the current idle period began (before the sleep's deadline was computed from
    // tempora's clock, which is the same monotonic clock): for the never-early check.
    let mut since = Instant::now();
    // One sleep for the connection's whole life: a read pushes its deadline back
    // (`reset_after`), which only stores the new deadline (no wheel work when it moves
    // later), instead of making a new timeout per read.
    let mut idle = pin!(timers.sleep(IDLE));
    let how = loop {
        tokio::select! {
            // Data first: when a read is ready and the sleep has completed too, the data
            // wins and pushes the deadline back, as if it had come just in time.
            biased;
            r = stream.read(&mut buf) => match r {
                Ok(0) => break Ok(false),
                Ok(_) => {
                    kind.get_or_insert(buf[0]);
                    stats.reads.fetch_add(1, Relaxed);
                    since = Instant::now();
                    idle.as_mut().reset_after(IDLE);
                }
                Err(e) => break Err(e),
            },
            () = idle.as_mut() => {
                match since.elapsed().checked_sub(IDLE) {
                    None => {
                        stats.early.fetch_add(1, Relaxed);
                    }
                    Some(late) => {
                        let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                        stats.late_max_us.fetch_max(us, Relaxed);
                    }
                }
                break Ok(true);
            }
        }
    };
    // Dropping the stream closes the connection: the client reads EOF.
    drop(stream);
    let counter = match (how, kind) {
        (Ok(true), Some(QUIET)) => &stats.idle_quiet,
        (Ok(true), Some(_)) => &stats.idle_talking,
        (Ok(true), None) => &stats.idle_silent,
        (Ok(false), Some(QUIET)) => &stats.by_client_quiet,
        (Ok(false), _) => &stats.by_client_talking,
        (Err(_), _) => &stats.errors,
    };
    counter.fetch_add(1, Relaxed);
}

/// A client that says hello and waits for the server to close the connection. Returns how
/// long after the hello the EOF came.
async fn quiet_client(mut stream: TcpStream) -> Res<Duration> {
    // Taken before the write: the server cannot read the hello, and so cannot start its
    // last idle period, before this instant. An EOF sooner than IDLE after it is early.
    let before = Instant::now();
    stream
        .write_all(&[QUIET])
        .await
        .map_err(|e| format!("hello: {e}"))?;
    let mut buf = [0u8; 16];
    match tokio::time::timeout(EOF_WITHIN, stream.read(&mut buf)).await {
        Err(_) => Err(format!("the server did not close it within {EOF_WITHIN:?}")),
        Ok(Ok(0)) => {
            let after = before.elapsed();
            if after < IDLE {
                return Err(format!(
                    "closed {:.1} ms after its hello, before the {} ms idle timeout",
                    after.as_secs_f64() * 1e3,
                    IDLE.as_millis()
                ));
            }
            Ok(after)
        }
        Ok(Ok(n)) => Err(format!("{n} unexpected bytes from the server")),
        Ok(Err(e)) => Err(format!("read: {e}")),
    }
}

/// A client that writes a byte every `WRITE_EVERY` for `TALK_FOR`, watching for the server
/// closing the connection meanwhile, then closes its side. Returns its number of writes.
async fn talking_client(mut stream: TcpStream, first: tokio::time::Instant) -> Res<usize> {
    let until = Instant::now() + TALK_FOR;
    let mut every = tokio::time::interval_at(first, WRITE_EVERY);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut rd, mut wr) = stream.split();
    let mut buf = [0u8; 16];
    let mut writes = 0;
    while Instant::now() < until {
        tokio::select! {
            _ = every.tick() => {
                wr.write_all(&[TALKING]).await.map_err(|e| {
                    format!("write {writes}: {e} (the server closed it while it talked)")
                })?;
                writes += 1;
            }
            // The server never writes: a read that completes is its close.
            r = rd.read(&mut buf) => {
                return Err(match r {
                    Ok(0) => format!(
                        "the server closed it while it talked (after {writes} writes)"
                    ),
                    Ok(n) => format!("{n} unexpected bytes from the server"),
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => format!(
                        "reset while it talked (after {writes} writes)"
                    ),
                    Err(e) => format!("read: {e}"),
                });
            }
        }
    }
    // Done: close our side; the server sees EOF before its timeout.
    wr.shutdown().await.map_err(|e| format!("shutdown: {e}"))?;
    Ok(writes)
}

/// Opens client connection `i`.
async fn open(addr: SocketAddr, i: usize) -> Res<TcpStream> {
    let connect = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr));
    let stream = match connect.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connection {i}: connecting to {addr}: {e}")),
        Err(_) => return Err(format!("connection {i}: not connected within 5 s")),
    };
    stream
        .set_nodelay(true)
        .map_err(|e| format!("connection {i}: TCP_NODELAY: {e}"))?;
    Ok(stream)
}

/// A client task's result; a panicked task is a failure like any other.
async fn joined<T>(h: JoinHandle<Res<T>>) -> Res<T> {
    h.await.map_err(|e| format!("task failed: {e}"))?
}

/// `CONNECTIONS`, or fewer if the process cannot have two fds per connection (plus a margin)
/// even after raising its soft `RLIMIT_NOFILE` to the hard limit.
fn connections_within_fd_limit() -> Res<usize> {
    const MARGIN: usize = 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        ));
    }
    let need = (2 * CONNECTIONS + MARGIN) as libc::rlim_t;
    if lim.rlim_cur < need && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: need.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given, which lives for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        }
    }
    let fit = usize::try_from(lim.rlim_cur)
        .unwrap_or(usize::MAX)
        .saturating_sub(MARGIN)
        / 2;
    let n = CONNECTIONS.min(fit);
    if n < 100 {
        return Err(format!(
            "the fd limit ({}) allows only {n} connections; raise it (ulimit -n)",
            lim.rlim_cur
        ));
    }
    if n < CONNECTIONS {
        println!(
            "note: the fd limit ({}) allows {n} connections, not {CONNECTIONS}",
            lim.rlim_cur
        );
    }
    Ok(n)
}
