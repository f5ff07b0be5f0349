//! One event loop, no timer thread: tempora's timers and loopback TCP sockets waited on
//! together in one `mio::Poll` (epoll on Linux).
//!
//! The service is built with `drivers(0)`, so nothing fires unless the application polls it.
//! The loop's single `epoll_wait` covers:
//!
//! * the service's **deadline fd** ([`Timers::deadline_fd`]): a timerfd, readable once a timer
//!   is due. The loop then calls [`Timers::poll`], which fires what is due (queues the events)
//!   and re-arms the timerfd at the next deadline;
//! * the owner's **event fd** ([`Owner::event_fd`]): readable while the owner's queue holds
//!   events. The loop drains the queue with [`Owner::try_iter`];
//! * a TCP listener on 127.0.0.1, the connections it accepts (the server), and two client
//!   connections to it (the clients), all in the same loop and thread.
//!
//! The timers: a 20 ms periodic tick that paces the chatty client's writes, four one-shots, one
//! one-shot that is cancelled before it is due, and a per-connection idle timeout that the
//! server re-arms whenever data arrives. One client ("chatty") writes on every tick for about
//! twice the idle timeout and then stops; the other ("quiet") says hello and goes quiet. The
//! server closes each connection when its idle timeout fires, and the clients see EOF.
//!
//! The example checks that no event came before its timer's expiry (on the service's monotonic
//! clock), that every expected event came and the cancelled one did not, and that the chatty
//! connection was not closed while it was talking. It then prints a summary and exits 0, or
//! says what went wrong and exits 1.
//!
//! ```text
//! cargo run --release -p tempora --example epoll
//! ```

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use tempora::clock::{ClockId, TimeSpec};
use tempora::{Event, Notify, Owner, SetFlags, TimerHandle, TimerId, Timers};

/// The period of the tick timer, which paces the clients' writes.
const TICK: Duration = Duration::from_millis(20);
/// A server connection with no data for this long is closed. Generous beside the 20 ms tick:
/// only a loop stalled for this long could close the chatty connection while it talks.
const IDLE: Duration = Duration::from_millis(400);
/// The chatty client's writes after its hello (one per tick): twice `IDLE` of talk.
const CHATTY_WRITES: u32 = 40;
/// One-shot timers, after the start.
const ONE_SHOTS: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(130),
    Duration::from_millis(260),
    Duration::from_millis(420),
];
/// A one-shot that is disarmed (when one-shot 1 fires, at 130 ms) before it is due.
const CANCELLED: Duration = Duration::from_millis(200);
/// The one-shot whose event cancels `CANCELLED`.
const CANCELLER: usize = 1;
/// Wall-clock bound on the whole run (it takes about 1.3 s): past it, the example fails
/// instead of hanging if tempora never delivered something.
const LIMIT: Duration = Duration::from_secs(10);

// The poll's tokens.
const DEADLINE: Token = Token(0);
const EVENTS: Token = Token(1);
const LISTENER: Token = Token(2);
const CHATTY: Token = Token(3);
const QUIET: Token = Token(4);
/// Server-side connections get tokens from here on.
const FIRST_CONN: usize = 100;

type Res<T> = Result<T, String>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("epoll example FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a timer is for: its events are dispatched on this.
#[derive(Debug, Clone, Copy)]
enum Role {
    Tick,
    OneShot(usize),
    Cancelled,
    /// The idle timeout of the server connection with this token.
    Idle(Token),
}

/// The server's side of an accepted connection.
struct Conn {
    stream: TcpStream,
    /// Its idle timeout (deleted when the handle drops with the connection).
    idle: TimerHandle,
    /// When `idle` is due: ns on the service's monotonic clock.
    idle_deadline: u64,
}

/// One of the two clients.
struct Client {
    name: &'static str,
    stream: TcpStream,
    /// Messages written, the hello included.
    writes: u32,
    /// When it last wrote (service monotonic ns).
    last_write: u64,
    /// When it saw EOF (service monotonic ns).
    eof: Option<u64>,
}

/// Counters for the summary.
#[derive(Default)]
struct Stats {
    deadline_wakeups: u64,
    /// `Timers::poll` calls that fired nothing: the deadline fd may fire at a deadline that a
    /// re-arm moved later (an idle timeout pushed back by data) or that was cancelled.
    empty_polls: u64,
    fired: usize,
    event_fd_wakeups: u64,
    events: u64,
    tick_events: u64,
    /// Tick expirations: each event counts itself plus its overrun (periods missed while
    /// the event was pending).
    tick_expirations: u64,
    /// The latest any event came after its expiry, in ns, and whose it was (informational:
    /// a loaded machine makes it larger; only "never early" is checked).
    max_late: (u64, String),
    accepted: u32,
    bytes_read: usize,
    idle_rearms: u64,
    idle_closes: u32,
}

struct Demo {
    timers: Timers,
    owner: Owner,
    poll: Poll,
    listener: TcpListener,
    /// Timer ID -> what the timer is for.
    roles: HashMap<TimerId, Role>,
    /// The tick timer (held: dropping a handle deletes its timer).
    _tick: TimerHandle,
    /// The tick timer's first expiry (ns); expiry `k` (from 0) is at `tick_first + k * TICK`.
    tick_first: u64,
    /// The one-shots' expiries and whether each has fired.
    one_shots: Vec<(TimerHandle, u64, bool)>,
    cancelled: TimerHandle,
    conns: HashMap<Token, Conn>,
    next_conn: usize,
    clients: [Client; 2],
    stats: Stats,
}

fn run() -> Res<()> {
    let wall = Instant::now();
    // No driver thread: this loop is the only thing that fires timers.
    let timers = Timers::builder()
        .drivers(0)
        .build()
        .map_err(|e| format!("building the timer service: {e}"))?;
    let owner = timers.owner();
    let poll = Poll::new().map_err(|e| format!("creating the epoll instance: {e}"))?;

    // tempora's two fds, beside the sockets. mio registrations are edge-triggered: both fds
    // allow it. The deadline fd gets a new edge each time it expires after `poll` re-armed it,
    // and the event fd each time the queue goes from empty to non-empty, provided the loop
    // drains the queue to the end on every wake-up (it does: `try_iter` until `None`).
    let deadline_fd = timers
        .deadline_fd()
        .map_err(|e| format!("the service's deadline fd: {e}"))?
        .as_raw_fd();
    let event_fd = owner
        .event_fd()
        .map_err(|e| format!("the owner's event fd: {e}"))?
        .as_raw_fd();
    let registry = poll.registry();
    registry
        .register(&mut SourceFd(&deadline_fd), DEADLINE, Interest::READABLE)
        .map_err(|e| format!("registering the deadline fd: {e}"))?;
    registry
        .register(&mut SourceFd(&event_fd), EVENTS, Interest::READABLE)
        .map_err(|e| format!("registering the event fd: {e}"))?;

    let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut listener =
        TcpListener::bind(addr).map_err(|e| format!("binding a listener on {addr}: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the listener's address: {e}"))?;
    registry
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(|e| format!("registering the listener: {e}"))?;

    // The timers, all delivering to the owner's queue. Deadlines are absolute
    // (`SetFlags::ABSTIME`) so that each event can be checked against the exact expiry
    // tempora was given.
    let start = timers.now().as_nanos();
    let mut roles = HashMap::new();
    let queue_timer = |role: Role, roles: &mut HashMap<TimerId, Role>| -> Res<TimerHandle> {
        let t = owner
            .timer(ClockId::Monotonic, Notify::Queue)
            .map_err(|e| format!("creating a timer: {e}"))?;
        roles.insert(t.id(), role);
        Ok(t)
    };
    let at = |d: Duration| start + nanos(d);
    let arm = |t: &TimerHandle, deadline: u64, period: Duration| -> Res<()> {
        t.settime(SetFlags::ABSTIME, TimeSpec::from_nanos(deadline), period)
            .map(drop)
            .map_err(|e| format!("arming timer {:?}: {e}", t.id()))
    };
    let tick = queue_timer(Role::Tick, &mut roles)?;
    let tick_first = at(TICK);
    arm(&tick, tick_first, TICK)?;
    let mut one_shots = Vec::new();
    for (i, &d) in ONE_SHOTS.iter().enumerate() {
        let t = queue_timer(Role::OneShot(i), &mut roles)?;
        arm(&t, at(d), Duration::ZERO)?;
        one_shots.push((t, at(d), false));
    }
    let cancelled = queue_timer(Role::Cancelled, &mut roles)?;
    arm(&cancelled, at(CANCELLED), Duration::ZERO)?;

    // The clients connect before the loop runs: the kernel completes a loopback connection
    // into the listener's backlog, and the loop accepts it on its first wake-up.
    let client = |name, token| -> Res<Client> {
        let s = std::net::TcpStream::connect(addr)
            .map_err(|e| format!("{name} client: connecting to {addr}: {e}"))?;
        s.set_nonblocking(true)
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| format!("{name} client: socket options: {e}"))?;
        let mut stream = TcpStream::from_std(s);
        registry
            .register(&mut stream, token, Interest::READABLE)
            .map_err(|e| format!("{name} client: registering: {e}"))?;
        Ok(Client {
            name,
            stream,
            writes: 0,
            last_write: 0,
            eof: None,
        })
    };
    let clients = [client("chatty", CHATTY)?, client("quiet", QUIET)?];

    let mut demo = Demo {
        timers,
        owner,
        poll,
        listener,
        roles,
        _tick: tick,
        tick_first,
        one_shots,
        cancelled,
        conns: HashMap::new(),
        next_conn: FIRST_CONN,
        clients,
        stats: Stats::default(),
    };
    // Both clients say hello; the quiet one says nothing more.
    for c in &mut demo.clients {
        write_message(c, &demo.timers)?;
    }
    demo.run_loop(wall)?;
    demo.verify()?;
    demo.summary(wall.elapsed());
    Ok(())
}

impl Demo {
    /// The event loop: one `epoll_wait`, whatever is ready handled in turn, until every
    /// expected event came.
    fn run_loop(&mut self, wall: Instant) -> Res<()> {
        let mut events = Events::with_capacity(64);
        while !self.done() {
            // The poll's timeout is only the example's safety bound: timers wake the loop
            // through the deadline fd, not through this timeout.
            let left = LIMIT.checked_sub(wall.elapsed()).ok_or_else(|| {
                format!("not done after {LIMIT:?}: {}", self.missing().join("; "))
            })?;
            match self.poll.poll(&mut events, Some(left)) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("epoll_wait: {e}")),
            }
            for ev in events.iter() {
                match ev.token() {
                    DEADLINE => self.on_deadline(),
                    EVENTS => self.on_events()?,
                    LISTENER => self.on_accept()?,
                    CHATTY => self.on_client(0)?,
                    QUIET => self.on_client(1)?,
                    token => self.on_conn(token)?,
                }
            }
        }
        Ok(())
    }

    /// The deadline fd is readable: a timer is due. With no driver thread, nothing fires it
    /// unless the loop polls the service: `poll` fires every timer due by now (their events
    /// go to the owner's queue, which makes the event fd readable) and re-arms the deadline
    /// fd at the next deadline, which also makes it not readable again. So the loop never
    /// reads the timerfd itself.
    fn on_deadline(&mut self) {
        self.stats.deadline_wakeups += 1;
        let fired = self.timers.poll();
        self.stats.fired += fired;
        if fired == 0 {
            self.stats.empty_polls += 1;
        }
    }

    /// The event fd is readable: the owner's queue holds events. `try_iter` takes them until
    /// the queue is empty, and tempora makes the fd not readable when it empties: that is
    /// what "drained" means, never a `read(2)` of the eventfd (tempora owns its counter).
    /// Stopping early would leave events queued and, with an edge-triggered registration,
    /// no new wake-up for them until some other event arrived.
    fn on_events(&mut self) -> Res<()> {
        self.stats.event_fd_wakeups += 1;
        // `try_iter` borrows the owner; the handlers need `&mut self`, so take the batch.
        let batch: Vec<Event> = self.owner.try_iter().collect();
        let empty = batch.is_empty();
        for e in batch {
            self.stats.events += 1;
            self.on_timer_event(e)?;
        }
        // A wake-up with no event: a stale entry (a timer re-armed since it fired), or the
        // queue closed for good (the owner destroyed, the service failed), which keeps the fd
        // readable; `closed` says which.
        if empty {
            if let Some(e) = self.owner.closed() {
                return Err(format!("no event can come any more: {e}"));
            }
        }
        Ok(())
    }

    fn on_timer_event(&mut self, e: Event) -> Res<()> {
        let now = self.timers.now().as_nanos();
        let role = *self
            .roles
            .get(&e.id)
            .ok_or_else(|| format!("an event of unknown timer {:?}", e.id))?;
        match role {
            Role::Tick => {
                self.stats.tick_events += 1;
                self.stats.tick_expirations += 1 + overrun(e)?;
                // The latest expiry this event accounts for.
                let expiry = self.tick_first + (self.stats.tick_expirations - 1) * nanos(TICK);
                self.not_early("the tick", now, expiry)?;
                // The tick paces the chatty client: one message per tick until it has said
                // enough. (It keeps ticking until the example ends.)
                let chatty = &mut self.clients[0];
                if chatty.eof.is_none() && chatty.writes < 1 + CHATTY_WRITES {
                    write_message(chatty, &self.timers)?;
                }
            }
            Role::OneShot(i) => {
                let (_, expiry, fired) = &mut self.one_shots[i];
                if std::mem::replace(fired, true) {
                    return Err(format!("one-shot {i} fired twice"));
                }
                let expiry = *expiry;
                self.not_early(&format!("one-shot {i}"), now, expiry)?;
                if i == CANCELLER {
                    // A zero value disarms (timer_settime's rule); its deadline has not come.
                    self.cancelled
                        .settime(SetFlags::RELATIVE, Duration::ZERO, Duration::ZERO)
                        .map_err(|e| format!("cancelling a timer: {e}"))?;
                }
            }
            Role::Cancelled => {
                return Err(format!(
                    "the timer cancelled {} ms after the start fired anyway",
                    nanos(ONE_SHOTS[CANCELLER]) / 1_000_000
                ));
            }
            Role::Idle(token) => {
                // The connection had no data for IDLE: close it (dropping the stream closes
                // the socket, dropping the handle deletes the timer). A read that re-armed
                // the timer after this event was queued would have voided the event
                // (settime drops a pending event), so an idle event is never stale here.
                let conn = self
                    .conns
                    .remove(&token)
                    .ok_or_else(|| format!("an idle timeout for unknown connection {token:?}"))?;
                self.not_early("an idle timeout", now, conn.idle_deadline)?;
                self.roles.remove(&e.id);
                let Conn {
                    mut stream, idle, ..
                } = conn;
                self.poll
                    .registry()
                    .deregister(&mut stream)
                    .map_err(|e| format!("deregistering a connection: {e}"))?;
                drop(stream);
                idle.delete()
                    .map_err(|e| format!("deleting an idle timer: {e}"))?;
                self.stats.idle_closes += 1;
            }
        }
        Ok(())
    }

    /// Fails if an event came before its timer's expiry: tempora's one promise about time.
    fn not_early(&mut self, what: &str, now: u64, expiry: u64) -> Res<()> {
        if now < expiry {
            return Err(format!(
                "{what} fired {} ns before its expiry",
                expiry - now
            ));
        }
        if now - expiry >= self.stats.max_late.0 {
            self.stats.max_late = (now - expiry, what.to_string());
        }
        Ok(())
    }

    /// The listener is readable: accept every pending connection and start its idle timeout.
    fn on_accept(&mut self) -> Res<()> {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(format!("accept: {e}")),
            };
            let token = Token(self.next_conn);
            self.next_conn += 1;
            self.poll
                .registry()
                .register(&mut stream, token, Interest::READABLE)
                .map_err(|e| format!("registering a connection: {e}"))?;
            let idle = self
                .owner
                .timer(ClockId::Monotonic, Notify::Queue)
                .map_err(|e| format!("creating an idle timer: {e}"))?;
            self.roles.insert(idle.id(), Role::Idle(token));
            let mut conn = Conn {
                stream,
                idle,
                idle_deadline: 0,
            };
            rearm_idle(&mut conn, &self.timers)?;
            self.conns.insert(token, conn);
            self.stats.accepted += 1;
        }
    }

    /// A server connection is readable: read all of it and push its idle timeout back.
    fn on_conn(&mut self, token: Token) -> Res<()> {
        // Gone already: closed by its idle timeout earlier in this batch of readiness.
        let Some(conn) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        let mut buf = [0u8; 4096];
        let mut got = 0;
        loop {
            match conn.stream.read(&mut buf) {
                // The clients never close their side: the server closes, they see EOF.
                Ok(0) => return Err("a client closed its connection first".into()),
                Ok(n) => got += n,
                // Edge-triggered: read until the socket is empty.
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("server read: {e}")),
            }
        }
        if got > 0 {
            self.stats.bytes_read += got;
            self.stats.idle_rearms += 1;
            rearm_idle(conn, &self.timers)?;
        }
        Ok(())
    }

    /// A client connection is readable: the server never writes, so it is EOF (its idle
    /// timeout closed it).
    fn on_client(&mut self, i: usize) -> Res<()> {
        let now = self.timers.now().as_nanos();
        let c = &mut self.clients[i];
        let mut buf = [0u8; 64];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    if c.eof.is_none() {
                        c.eof = Some(now);
                    }
                    return Ok(());
                }
                Ok(_) => return Err(format!("{} client: unexpected data", c.name)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{} client: read: {e}", c.name)),
            }
        }
    }

    fn done(&self) -> bool {
        self.missing().is_empty()
    }

    /// What has not happened yet.
    fn missing(&self) -> Vec<String> {
        let mut m = Vec::new();
        for (i, (_, _, fired)) in self.one_shots.iter().enumerate() {
            if !fired {
                m.push(format!("one-shot {i} did not fire"));
            }
        }
        for c in &self.clients {
            if c.eof.is_none() {
                m.push(format!("the {} client saw no EOF", c.name));
            }
        }
        m
    }

    /// The checks that need the whole run.
    fn verify(&self) -> Res<()> {
        let s = &self.stats;
        if s.accepted != 2 || s.idle_closes != 2 || !self.conns.is_empty() {
            return Err(format!(
                "{} connections accepted, {} closed by their idle timeout, {} still open: \
                 expected 2, 2, 0",
                s.accepted,
                s.idle_closes,
                self.conns.len()
            ));
        }
        for c in &self.clients {
            let eof = c.eof.unwrap_or(0);
            // The server read the client's last write after it was made and re-armed then,
            // so an EOF sooner than IDLE after the last write is a timeout that came early.
            if eof < c.last_write + nanos(IDLE) {
                return Err(format!(
                    "the {} client saw EOF {} ms after its last write, before the {} ms \
                     idle timeout",
                    c.name,
                    (eof.saturating_sub(c.last_write)) / 1_000_000,
                    IDLE.as_millis()
                ));
            }
        }
        // The chatty client was closed only once it had stopped talking.
        let chatty = &self.clients[0];
        if chatty.writes < 1 + CHATTY_WRITES {
            return Err(format!(
                "the chatty client was closed after {} of its {} writes: its idle timeout \
                 fired while it was talking",
                chatty.writes,
                1 + CHATTY_WRITES
            ));
        }
        if self.clients[1].writes != 1 {
            return Err("the quiet client talked".into());
        }
        // The cancelled timer: its event would have failed the run; it is disarmed.
        let left = self
            .cancelled
            .gettime()
            .map_err(|e| format!("gettime: {e}"))?;
        if left.as_nanos() != (0, 0) {
            return Err(format!("the cancelled timer is still armed: {left:?}"));
        }
        Ok(())
    }

    fn summary(&self, took: Duration) {
        let s = &self.stats;
        let ms = |ns: u64| ns as f64 / 1e6;
        println!(
            "epoll example: one mio/epoll loop, no driver thread, {:.2} s",
            took.as_secs_f64()
        );
        println!(
            "  deadline fd: {} wake-ups -> Timers::poll fired {} expiries \
             (polls that fired nothing, at a deadline moved later or cancelled: {})",
            s.deadline_wakeups, s.fired, s.empty_polls
        );
        println!(
            "  event fd:    {} wake-ups -> {} events drained with try_iter",
            s.event_fd_wakeups, s.events
        );
        println!(
            "  tick ({} ms): {} events, {} expirations; one-shots: {}/{} fired; \
             the cancelled one: never fired",
            TICK.as_millis(),
            s.tick_events,
            s.tick_expirations,
            self.one_shots.iter().filter(|o| o.2).count(),
            self.one_shots.len()
        );
        println!(
            "  no event before its expiry; the latest came {:.3} ms after it ({})",
            ms(s.max_late.0),
            s.max_late.1
        );
        println!(
            "  server: {} connections, {} bytes read, idle timeout ({} ms) re-armed {} times, \
             {} connections closed by it",
            s.accepted,
            s.bytes_read,
            IDLE.as_millis(),
            s.idle_rearms,
            s.idle_closes
        );
        for c in &self.clients {
            println!(
                "  {} client: messages written: {}; EOF {:.1} ms after the last one",
                c.name,
                c.writes,
                ms(c.eof.unwrap_or(0).saturating_sub(c.last_write))
            );
        }
        println!("OK");
    }
}

/// One message from a client. Small writes on loopback never fill the socket buffer, so a
/// `WouldBlock` here is a failure, not back-pressure to handle.
fn write_message(c: &mut Client, timers: &Timers) -> Res<()> {
    let msg = b"ping\n";
    let n = c
        .stream
        .write(msg)
        .map_err(|e| format!("{} client: write: {e}", c.name))?;
    if n != msg.len() {
        return Err(format!("{} client: short write ({n} bytes)", c.name));
    }
    c.writes += 1;
    c.last_write = timers.now().as_nanos();
    Ok(())
}

/// Moves a connection's idle timeout to `IDLE` from now. Re-arming a timer whose event is
/// queued but not yet received voids that event: data that arrives just as the timeout fires
/// wins, and the connection stays open.
fn rearm_idle(conn: &mut Conn, timers: &Timers) -> Res<()> {
    let deadline = timers.now().as_nanos() + nanos(IDLE);
    conn.idle
        .settime(
            SetFlags::ABSTIME,
            TimeSpec::from_nanos(deadline),
            Duration::ZERO,
        )
        .map_err(|e| format!("re-arming an idle timeout: {e}"))?;
    conn.idle_deadline = deadline;
    Ok(())
}

fn overrun(e: Event) -> Res<u64> {
    u64::try_from(e.overrun).map_err(|_| format!("a negative overrun: {e:?}"))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
