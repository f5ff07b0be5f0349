//! The server side: a service's endpoint (a listening Unix socket in the abstract namespace),
//! served by the realtime-clock watch thread (`driver::Serve`), and the answers it writes.
//!
//! Every wait here is a `poll(2)` of at most [`SLICE_MS`] on the client's socket, after which
//! the watch handles any clock step (`step`): a client that stalls holds nothing but this
//! thread, and that only until its deadline ([`REQUEST_WAIT`] to send its request, [`STALL`]
//! without reading any of the answer). Nothing here takes a lock that a timer call takes but
//! each listed timer's, for the copy of its fields (`Owner::for_each_locked_pages`); the
//! writes happen between pieces of the walk, with no lock and no epoch pin held.

use super::proto::MAX_REQUEST;
use super::proto::{encode_stats, put_end, put_owner, put_timer, Header, Request, TimerRecord};
use crate::sync::Ordering;
use crate::timers::firing::driver::Serve;
use crate::timers::object::types::{NotifyKind, Status};
use crate::timers::object::{callback_of, signal_of, EventQueue, Itimer, LockedTimer};
use crate::timers::service::stats_of;
use crate::timers::shared::Core;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest single wait of the watch thread on a client.
const SLICE_MS: libc::c_int = 10;
/// How long a client has to send its request, from its connection.
pub(crate) const REQUEST_WAIT: Duration = Duration::from_millis(200);
/// How long a client may read nothing of its answer before it is dropped.
pub(crate) const STALL: Duration = Duration::from_secs(1);
/// Clients served per wake-up of the watch (the others at its next turn round its poll).
pub(crate) const CLIENTS_PER_TURN: usize = 16;
/// Bytes of answer gathered before they are written.
pub(crate) const CHUNK: usize = 64 * 1024;
/// Slot pages (64 timers each) walked under one epoch pin.
const PAGES_PER_PIECE: usize = 16;
/// Services per process with an endpoint (more get none).
const MAX_ENDPOINTS: usize = 64;

/// The name prefix of every endpoint: `tempora/<pid>/<n>` in the abstract namespace.
pub(crate) const PREFIX: &str = "tempora/";
/// The suffix of a polled endpoint's name (a service without drivers answers at its polls).
pub(crate) const POLLED: &str = "p";

/// The listening sockets of this copy of tempora, for the fork handler to close in a child.
static SOCKETS: [AtomicI32; MAX_ENDPOINTS] = [const { AtomicI32::new(-1) }; MAX_ENDPOINTS];
/// Whether `forked` is registered (inherited by children, as `pthread_atfork`'s handlers are).
static WATCHED: AtomicBool = AtomicBool::new(false);

/// `pthread_atfork`'s child handler: the parent's endpoints are not the child's. Closing
/// them here (`close` is async-signal-safe) unbinds their names once the parent is gone too,
/// and keeps a child from holding a name whose owner exited.
extern "C" fn forked() {
    for s in &SOCKETS {
        // Relaxed: the child has one thread when this runs.
        let fd = s.swap(-1, std::sync::atomic::Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: `fd` is a listening socket this copy opened; the leaked `Endpoint` that
            // held it in the parent is never dropped in the child (`timers` module doc, "Fork").
            unsafe { libc::close(fd) };
        }
    }
}

/// A service's endpoint.
pub(crate) struct Endpoint {
    sock: OwnedFd,
    slot: usize,
    header: Header,
}

/// Whether `TEMPORA_INSPECT` turns inspection off (`0`, `off`, `false`, `no`).
pub(crate) fn off_by_env() -> bool {
    std::env::var("TEMPORA_INSPECT").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        )
    })
}

/// The file this copy of tempora was loaded from, as the dynamic loader names it.
fn image() -> String {
    // SAFETY: an all-zero `Dl_info` is a valid value (null pointers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = image as fn() -> String as *const libc::c_void;
    // SAFETY: dladdr(3) with an address in this image and a `Dl_info` that lives for the call.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return String::new();
    }
    // SAFETY: `dli_fname` is a NUL-terminated string the loader keeps for the image's life.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let name = name.to_string_lossy().into_owned();
    // The main program's name may be relative: its path is in /proc.
    if !name.contains('/') || name.is_empty() {
        if let Ok(p) = std::fs::read_link("/proc/self/exe") {
            return p.to_string_lossy().into_owned();
        }
    }
    name
}

/// The abstract address `tempora/<pid>/<n>`, and its length.
pub(crate) fn address(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: an all-zero `sockaddr_un` is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // Byte 0 stays 0: the abstract namespace. Names are short (`PREFIX`, two numbers).
    for (d, s) in addr.sun_path[1..].iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len().min(107);
    (addr, len as libc::socklen_t)
}

/// A Unix stream socket, close-on-exec and non-blocking.
pub(crate) fn socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Endpoint {
    /// The endpoint of a service with `drivers` driver threads: the first free name
    /// `tempora/<pid>/<n>` (another service, or another copy of tempora in the process, may
    /// hold the lower ones), `tempora/<pid>/<n>p` for a service without drivers, which
    /// answers at its polls (`polled.rs`). `None` if no socket can be made or named: the
    /// service runs without one.
    pub(crate) fn open(drivers: usize) -> Option<Endpoint> {
        if !WATCHED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: registers a child handler that only closes fds.
            unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        }
        let slot = SOCKETS.iter().position(|s| {
            s.compare_exchange(
                -1,
                -2,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
        })?;
        let release = || SOCKETS[slot].store(-1, std::sync::atomic::Ordering::Relaxed);
        let Ok(sock) = socket() else {
            release();
            return None;
        };
        let pid = std::process::id();
        for n in 0..MAX_ENDPOINTS {
            let polled = if drivers == 0 { POLLED } else { "" };
            let (addr, len) = address(&format!("{PREFIX}{pid}/{n}{polled}"));
            // SAFETY: bind(2) with an address that lives for the call and its length.
            let bound = unsafe {
                libc::bind(
                    sock.as_raw_fd(),
                    (&raw const addr).cast::<libc::sockaddr>(),
                    len,
                )
            } == 0;
            if !bound {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EADDRINUSE) {
                    continue;
                }
                break;
            }
            // SAFETY: listen(2) on the bound socket.
            if unsafe { libc::listen(sock.as_raw_fd(), 16) } != 0 {
                break;
            }
            SOCKETS[slot].store(sock.as_raw_fd(), std::sync::atomic::Ordering::Relaxed);
            return Some(Endpoint {
                sock,
                slot,
                header: Header {
                    pid,
                    drivers,
                    image: image(),
                },
            });
        }
        release();
        None
    }

    /// The listening socket.
    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Answers one client: checks who it is, reads its request, writes the answer.
    fn answer(&self, core: &Core, conn: &OwnedFd, step: &dyn Fn() -> bool) {
        let mut out = Out {
            conn,
            buf: Vec::with_capacity(2 * CHUNK),
            step,
        };
        if !same_user(conn) {
            out.buf.extend_from_slice(b"denied\n");
            let _ = out.flush();
            return;
        }
        let request = match read_request(conn, step) {
            Ok(r) => r,
            Err(why) => {
                refusal(why, &mut out.buf);
                let _ = out.flush();
                return;
            }
        };
        let mut listing = self.begin(core, request, &mut out.buf);
        while let Some(l) = &mut listing {
            match l.piece(core, &mut out.buf) {
                Piece::More if out.buf.len() < CHUNK => {}
                Piece::More => {
                    if !out.flush() {
                        return;
                    }
                }
                Piece::Done => listing = None,
                Piece::Stopped => return,
            }
        }
        let _ = out.flush();
    }

    /// Starts the answer to `request` in `out`: whole, or its header and the listing that
    /// writes the rest.
    pub(crate) fn begin(
        &self,
        core: &Core,
        request: Request,
        out: &mut Vec<u8>,
    ) -> Option<Listing> {
        out.extend_from_slice(self.header.encode().as_bytes());
        match request {
            Request::Hello => out.extend_from_slice(b"end\t0\n"),
            Request::Stats => {
                let mut text = String::new();
                let n = encode_stats(&stats_of(core), &mut text);
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(format!("end\t{n}\n").as_bytes());
            }
            Request::List => return Some(Listing::new(core)),
        }
        None
    }
}

/// The refusal of a request: `error\t<why>\n`.
pub(crate) fn refusal(why: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"error\t");
    out.extend_from_slice(why.as_bytes());
    out.push(b'\n');
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        SOCKETS[self.slot].store(-1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Serve for Endpoint {
    fn fd(&self) -> RawFd {
        Endpoint::fd(self)
    }

    fn serve(&self, core: &Core, step: &dyn Fn() -> bool) {
        for _ in 0..CLIENTS_PER_TURN {
            // SAFETY: accept4(2) on our listening socket; the peer's address is not asked for.
            let fd = unsafe {
                libc::accept4(
                    self.sock.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                return; // EAGAIN: nobody else waits (or an error the next turn meets again)
            }
            // SAFETY: a new fd nobody else owns.
            let conn = unsafe { OwnedFd::from_raw_fd(fd) };
            self.answer(core, &conn, step);
            if !step() {
                return;
            }
        }
    }
}

/// Whether the peer runs as this process's effective user, or as root.
pub(crate) fn same_user(conn: &OwnedFd) -> bool {
    // SAFETY: an all-zero `ucred` is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a `ucred` that lives for the call, with its length.
    let ok = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    } == 0;
    // SAFETY: geteuid(2) cannot fail.
    ok && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// Reads the request line, within `REQUEST_WAIT`.
fn read_request(conn: &OwnedFd, step: &dyn Fn() -> bool) -> Result<Request, &'static str> {
    let start = Instant::now();
    let mut buf = [0u8; MAX_REQUEST];
    let mut have = 0;
    loop {
        // SAFETY: reads into the free part of `buf`, which lives for the call.
        let r = unsafe {
            libc::read(
                conn.as_raw_fd(),
                buf[have..].as_mut_ptr().cast(),
                MAX_REQUEST - have,
            )
        };
        if r == 0 {
            return Err("the request was cut short");
        }
        if r > 0 {
            have += r as usize;
            if let Some(req) = Request::parse(&buf[..have])? {
                return Ok(req);
            }
            continue;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {}
            _ => return Err("the request could not be read"),
        }
        if start.elapsed() >= REQUEST_WAIT || !step() {
            return Err("no request in time");
        }
        crate::timers::firing::driver::ready(conn.as_raw_fd(), SLICE_MS);
    }
}

/// An answer being written: gathered in `buf`, written with non-blocking sends.
struct Out<'a> {
    conn: &'a OwnedFd,
    buf: Vec<u8>,
    step: &'a dyn Fn() -> bool,
}

impl Out<'_> {
    /// Writes all of `buf`: `false` (the answer abandoned) if the client read nothing for
    /// `STALL`, went away, or the service stops.
    fn flush(&mut self) -> bool {
        let bytes = &self.buf[..];
        let mut done = 0;
        let mut progress = Instant::now();
        while done < bytes.len() {
            // SAFETY: sends from `bytes`, which lives for the call. MSG_NOSIGNAL: a client
            // gone is an error here, never a SIGPIPE to the program.
            let r = unsafe {
                libc::send(
                    self.conn.as_raw_fd(),
                    bytes[done..].as_ptr().cast(),
                    bytes.len() - done,
                    libc::MSG_NOSIGNAL,
                )
            };
            if r > 0 {
                done += r as usize;
                progress = Instant::now();
                continue;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => {}
                _ => return false,
            }
            if progress.elapsed() >= STALL || !(self.step)() {
                return false;
            }
            let mut p = libc::pollfd {
                fd: self.conn.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: poll(2) on one pollfd that lives for the call.
            unsafe { libc::poll(&mut p, 1, SLICE_MS) };
        }
        self.buf.clear();
        true
    }
}

/// What a listing's step did.
pub(crate) enum Piece {
    /// Wrote a piece's records; more follow.
    More,
    /// Wrote the last records and the end record.
    Done,
    /// The service stops: the answer ends here, without its end record.
    Stopped,
}

/// A listing being written: the queues of the owners alive at its start (each knowing its
/// owner weakly), walked in pieces of at most [`PAGES_PER_PIECE`] slot pages of one owner.
/// Each timer's lock is held only to copy its fields, into `raws` (reserved for a whole
/// piece: nothing is allocated under a lock), and the piece's records are encoded after it,
/// with no lock and no epoch pin held; the caller writes them out between pieces.
pub(crate) struct Listing {
    queues: std::vec::IntoIter<Arc<EventQueue>>,
    /// The owner being walked, and the page to go on from.
    current: Option<(Arc<EventQueue>, usize)>,
    raws: Vec<Raw>,
    count: u64,
}

impl Listing {
    pub(crate) fn new(core: &Core) -> Listing {
        Listing {
            queues: core.health.queues().into_iter(),
            current: None,
            raws: Vec::with_capacity(PAGES_PER_PIECE * 64),
            count: 0,
        }
    }

    /// Appends the next piece's records to `out`.
    pub(crate) fn piece(&mut self, core: &Core, out: &mut Vec<u8>) -> Piece {
        loop {
            let (queue, from) = match self.current.take() {
                Some(c) => c,
                None => match self.queues.next() {
                    Some(q) => (q, 0),
                    None => {
                        // Relaxed: a hint; a stop during the last piece only ends the answer
                        // early.
                        if core.health.shutdown.load(Ordering::Relaxed) {
                            return Piece::Stopped;
                        }
                        put_end(out, self.count);
                        return Piece::Done;
                    }
                },
            };
            let Some(owner) = queue.owner.get().and_then(|w| w.upgrade::<Itimer>()) else {
                continue;
            };
            if from == 0 {
                put_owner(out, queue.tally.key(), &queue.tally.group.path);
            }
            let now = core.now_all();
            let raws = &mut self.raws;
            let (next, _) = owner.for_each_locked_pages(from, PAGES_PER_PIECE, |l| {
                if raws.len() < raws.capacity() {
                    raws.push(Raw::of(&l, &now));
                }
            });
            // The owner's handle is dropped here, with no lock held: if the program dropped
            // its own meanwhile, its teardown runs on this thread, as any last handle's drop
            // does.
            drop(owner);
            self.count += self.raws.len() as u64;
            for raw in self.raws.drain(..) {
                put_timer(out, &raw.record());
            }
            if let Some(page) = next {
                self.current = Some((queue, page));
            }
            return Piece::More;
        }
    }
}

/// What a listing copies of a timer under its lock.
struct Raw {
    id: i32,
    clock: crate::clock::ClockId,
    notify: NotifyKind,
    signo: i32,
    tid: i32,
    status: Status,
    next_ns: Option<i64>,
    interval_ns: u64,
    overrun: i64,
    /// `Precision::pack`'s bits.
    precision: u64,
    callback: Option<Arc<str>>,
}

impl Raw {
    fn of(l: &LockedTimer<'_>, now: &[u64; crate::clock::CLOCKS]) -> Raw {
        let st = &*l.state;
        let (signo, tid) = signal_of(l).map_or((0, 0), |c| (c.signo(), c.tid));
        let mut status = st.status();
        let mut next_ns = st.has_expiry().then(|| {
            let left = i128::from(st.expiry) - i128::from(now[st.expiry_clock().index()]);
            left.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
        });
        // A `SIGEV_NONE` timer is never queued (its status stays disarmed) while it counts
        // down: shown as `gettime` reads it, armed until a one-shot's expiry passes, a
        // periodic one at its next period.
        if st.notify() == NotifyKind::None && status == Status::Disarmed {
            next_ns = match (next_ns, st.interval) {
                (Some(left), _) if left > 0 => Some(left),
                (Some(left), iv) if iv > 0 => {
                    let iv = i128::from(iv);
                    Some((iv - (-i128::from(left)) % iv) as i64)
                }
                _ => None,
            };
            if next_ns.is_some() {
                status = Status::Armed;
            }
        }
        Raw {
            id: l.id().get(),
            clock: st.clock(),
            notify: st.notify(),
            signo,
            tid,
            status,
            next_ns,
            interval_ns: st.interval,
            overrun: i64::from(st.overrun.max(-1)),
            // Relaxed: under the timer's lock, which its writer holds.
            precision: l.fixed().precision.load(Ordering::Relaxed),
            callback: callback_of(l).and_then(|c| c.name.clone()),
        }
    }

    fn record(&self) -> TimerRecord<'_> {
        TimerRecord {
            id: self.id,
            clock: self.clock,
            notify: self.notify,
            status: self.status,
            signo: self.signo,
            tid: self.tid,
            next_ns: self.next_ns,
            interval_ns: self.interval_ns,
            overrun: self.overrun,
            precision: self.precision,
            callback: self.callback.as_deref().unwrap_or(""),
        }
    }
}
