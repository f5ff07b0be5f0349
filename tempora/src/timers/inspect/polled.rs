//! The endpoint of a service without drivers (`drivers(0)`): no thread waits on its socket,
//! so the program's own polls serve it ([`Timers::poll`](crate::timers::Timers::poll)), and
//! never block doing it.
//!
//! - **Looking costs a comparison**: a poll compares the monotonic reading it already took
//!   with the time of the next look (`core::PollLook`); only when that has come does it try
//!   a non-blocking `accept4`, at most every [`LOOK_EVERY`] while nobody is connected. So a
//!   client is answered at the program's first poll at least that long after the last look
//!   (at its next poll, for a program that polls less often).
//! - **Nothing waits**: a connected client advances as far as it can without blocking at each
//!   poll — its request read, the answer sent — and is left for a later poll where its peer
//!   would have to be waited for (`RETRY` later) or after [`BUDGET`] of listing: a poll
//!   spends at most that on a listing, whose pieces are those of the drivers' endpoint
//!   (`endpoint::Listing`). The limits are the drivers' endpoint's: a request within 200 ms
//!   of the connection, an answer that makes no progress for 1 s dropped.
//! - **A loop that sleeps on the deadline fd** polls again: while a client is connected, the
//!   look lowers the fd ([`Timers::deadline_fd`](crate::timers::Timers::deadline_fd)) to the
//!   time of its next look, so a listing goes on without a timer being due.
//! - **A program that does not poll** does not answer: the endpoint's name ends in `p`
//!   (`tempora/<pid>/<n>p`), and a client that waited in vain says why
//!   ([`InspectError::NotPolled`](super::InspectError::NotPolled)).

use super::endpoint::{
    refusal, same_user, Endpoint, Listing, Piece, CHUNK, CLIENTS_PER_TURN, REQUEST_WAIT, STALL,
};
use super::proto::{Request, MAX_REQUEST};
use crate::sync::{rank, RankedMutex};
use crate::timers::shared::{AtPoll, Core};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The longest time between two looks at the socket while nobody is connected (ns).
const LOOK_EVERY: u64 = 5_000_000;
/// When a client waits on its peer (its request not sent, its answer not read), the next
/// look is this much later (ns).
const RETRY: u64 = 1_000_000;
/// The most a poll spends on listings.
const BUDGET: Duration = Duration::from_millis(2);
/// Clients connected at once (more wait in the listen backlog).
const MAX_CLIENTS: usize = 16;

/// A service's endpoint served at its polls.
pub(crate) struct Polled {
    endpoint: Endpoint,
    /// The clients being answered; taken by one poll at a time (a poll that finds it taken
    /// does not look: it is only ever tried, never waited for).
    clients: RankedMutex<Vec<Client>, { rank::INSPECT }>,
}

impl Polled {
    /// The endpoint of a service without drivers, `None` as [`Endpoint::open`] says.
    pub(crate) fn open() -> Option<Polled> {
        Some(Polled {
            endpoint: Endpoint::open(0)?,
            clients: RankedMutex::new(Vec::new()),
        })
    }
}

impl AtPoll for Polled {
    fn at_poll(&self, core: &Core, now: u64) -> Option<u64> {
        // Poisoned or not: nothing panics under it but an allocation, which leaves the
        // list whole.
        let mut clients = self.clients.try_lock_or_recover()?;
        for _ in 0..CLIENTS_PER_TURN {
            if clients.len() >= MAX_CLIENTS {
                break;
            }
            // SAFETY: accept4(2) on our listening socket (non-blocking); the peer's address
            // is not asked for.
            let fd = unsafe {
                libc::accept4(
                    self.endpoint.fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                break; // EAGAIN: nobody else waits (or an error the next look meets again)
            }
            // SAFETY: a new fd nobody else owns.
            let conn = unsafe { OwnedFd::from_raw_fd(fd) };
            clients.push(Client::new(conn, now));
        }
        if clients.is_empty() {
            return Some(now.saturating_add(LOOK_EVERY));
        }
        let until = Instant::now() + BUDGET;
        let mut busy = false;
        clients.retain_mut(|c| match c.advance(&self.endpoint, core, now, until) {
            Next::Busy => {
                busy = true;
                true
            }
            Next::Waiting => true,
            Next::Done => false,
        });
        if clients.is_empty() {
            return Some(now.saturating_add(LOOK_EVERY));
        }
        let next = if busy { now } else { now.saturating_add(RETRY) };
        // A loop asleep on the deadline fd polls again then.
        if let Some(d) = core.wake.deadline.get() {
            d.lower(next, now);
        }
        Some(next)
    }
}

/// What a client needs next.
enum Next {
    /// More to write now: the poll's budget ran out.
    Busy,
    /// Its peer: to send its request, or to read the answer.
    Waiting,
    /// Nothing: answered, refused or dropped.
    Done,
}

/// A connection being answered.
struct Client {
    conn: OwnedFd,
    /// When it was accepted (ns, monotonic).
    since: u64,
    /// When its answer last went out (ns), or `since`.
    progress: u64,
    request: [u8; MAX_REQUEST],
    have: usize,
    /// Whether the request was read (or refused): `out` is the answer.
    answering: bool,
    out: Vec<u8>,
    sent: usize,
    listing: Option<Listing>,
}

impl Client {
    fn new(conn: OwnedFd, now: u64) -> Client {
        let mut c = Client {
            conn,
            since: now,
            progress: now,
            request: [0; MAX_REQUEST],
            have: 0,
            answering: false,
            out: Vec::new(),
            sent: 0,
            listing: None,
        };
        if !same_user(&c.conn) {
            c.out.extend_from_slice(b"denied\n");
            c.answering = true;
        }
        c
    }

    /// Goes as far as it can without blocking.
    fn advance(&mut self, endpoint: &Endpoint, core: &Core, now: u64, until: Instant) -> Next {
        if !self.answering {
            match self.read() {
                Ok(Some(request)) => {
                    self.listing = endpoint.begin(core, request, &mut self.out);
                    self.progress = now;
                }
                Ok(None) if now.saturating_sub(self.since) < REQUEST_WAIT.as_nanos() as u64 => {
                    return Next::Waiting
                }
                Ok(None) => refusal("no request in time", &mut self.out),
                Err(Some(why)) => refusal(why, &mut self.out),
                Err(None) => return Next::Done,
            }
            self.answering = true;
        }
        loop {
            while self.sent < self.out.len() {
                // SAFETY: sends from `out`, which lives for the call. MSG_NOSIGNAL: a client
                // gone is an error here, never a SIGPIPE to the program.
                let r = unsafe {
                    libc::send(
                        self.conn.as_raw_fd(),
                        self.out[self.sent..].as_ptr().cast(),
                        self.out.len() - self.sent,
                        libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                    )
                };
                if r > 0 {
                    self.sent += r as usize;
                    self.progress = now;
                    continue;
                }
                return match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN)
                        if now.saturating_sub(self.progress) < STALL.as_nanos() as u64 =>
                    {
                        Next::Waiting
                    }
                    _ => Next::Done,
                };
            }
            self.out.clear();
            self.sent = 0;
            let Some(listing) = &mut self.listing else {
                return Next::Done;
            };
            if Instant::now() >= until {
                return Next::Busy;
            }
            while self.out.len() < CHUNK {
                match listing.piece(core, &mut self.out) {
                    Piece::More => {}
                    Piece::Done => {
                        self.listing = None;
                        break;
                    }
                    Piece::Stopped => return Next::Done,
                }
            }
        }
    }

    /// Reads what came of the request: `Ok(None)` while it is incomplete, `Err(Some(why))`
    /// for one to refuse, `Err(None)` if the connection failed.
    fn read(&mut self) -> Result<Option<Request>, Option<&'static str>> {
        loop {
            // SAFETY: reads into the free part of `request`, which lives for the call.
            let r = unsafe {
                libc::read(
                    self.conn.as_raw_fd(),
                    self.request[self.have..].as_mut_ptr().cast(),
                    MAX_REQUEST - self.have,
                )
            };
            if r == 0 {
                return Err(Some("the request was cut short"));
            }
            if r > 0 {
                self.have += r as usize;
                match Request::parse(&self.request[..self.have]) {
                    Ok(None) => continue,
                    Ok(Some(req)) => return Ok(Some(req)),
                    Err(why) => return Err(Some(why)),
                }
            }
            return match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => Ok(None),
                _ => Err(None),
            };
        }
    }
}
