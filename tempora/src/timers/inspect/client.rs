//! The client side: finding a process's endpoints and asking them (what `tempora ls`,
//! `tempora stats` and `tempora top --pid` use).

use super::endpoint::{address, socket, POLLED, PREFIX};
use super::proto::{decode_stats, Entry, Header, Record, Request};
use crate::stats::Stats;
use std::fmt;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Why a process could not be inspected.
#[derive(Debug)]
#[non_exhaustive]
pub enum InspectError {
    /// No process with that ID.
    NoProcess(u32),
    /// The process runs, but no service of it has an endpoint: the message says what that
    /// can mean.
    NoEndpoint(u32),
    /// The process belongs to another user (and the caller is not root).
    Denied(u32),
    /// The endpoint refused the request (the text says why).
    Refused(String),
    /// The answer broke off (the process exited, or stopped the service, meanwhile).
    CutShort,
    /// The answer was not in the format (another version of tempora?).
    Garbled(String),
    /// A service without driver threads (`drivers(0)`), which answers when the program
    /// polls it (`Timers::poll`), did not answer in time: the program did not poll meanwhile.
    NotPolled(u32),
    /// A system call failed.
    Io(std::io::Error),
}

impl fmt::Display for InspectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InspectError::NoProcess(pid) => write!(f, "no process {pid}"),
            InspectError::NoEndpoint(pid) => write!(
                f,
                "process {pid} has no tempora endpoint: it does not use tempora, or its \
                 services run on a manual clock, or inspection is off there \
                 (TEMPORA_INSPECT=0, Builder::inspect(false))"
            ),
            InspectError::Denied(pid) => write!(
                f,
                "permission denied: process {pid} runs as another user (only that user or \
                 root may inspect it)"
            ),
            InspectError::Refused(why) => write!(f, "the endpoint refused the request: {why}"),
            InspectError::CutShort => {
                f.write_str("the answer broke off (the process exited or stopped its service)")
            }
            InspectError::Garbled(line) => write!(f, "an answer not understood: {line:?}"),
            InspectError::NotPolled(pid) => write!(
                f,
                "process {pid} did not answer: its service has no driver thread (drivers(0)) \
                 and answers only when the program calls Timers::poll, which it did not do in \
                 time (its timers may all be far away, or it is stopped)"
            ),
            InspectError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for InspectError {}

impl From<std::io::Error> for InspectError {
    fn from(e: std::io::Error) -> Self {
        InspectError::Io(e)
    }
}

/// The endpoint names (`tempora/<pid>/<n>`, `tempora/<pid>/<n>p` for a service without
/// drivers, which answers at its polls) process `pid` listens on, from `/proc/net/unix`, in
/// order of `n`.
///
/// # Errors
/// [`InspectError::NoProcess`] if there is no such process; [`InspectError::Io`] if
/// `/proc/net/unix` cannot be read.
pub fn endpoints(pid: u32) -> Result<Vec<String>, InspectError> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(InspectError::NoProcess(pid));
    }
    let table = std::fs::read_to_string("/proc/net/unix")?;
    let want = format!("@{PREFIX}{pid}/");
    let mut found: Vec<(u32, String)> = table
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter_map(|p| {
            let rest = p.strip_prefix(&want)?;
            let n = rest.strip_suffix(POLLED).unwrap_or(rest).parse().ok()?;
            Some((n, p[1..].to_owned()))
        })
        .collect();
    found.sort();
    found.dedup();
    Ok(found.into_iter().map(|(_, name)| name).collect())
}

/// The bytes of an answer, read in large pieces.
struct Reader {
    stream: UnixStream,
    buf: Vec<u8>,
    /// `buf[at..end]` is read and not yet taken.
    at: usize,
    end: usize,
}

impl Reader {
    /// Reads more (moving what is left to the front first); `false` at the answer's end.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.at > 0 {
            self.buf.copy_within(self.at..self.end, 0);
            self.end -= self.at;
            self.at = 0;
        }
        if self.end == self.buf.len() {
            let more = self.buf.len();
            self.buf.resize(2 * more, 0);
        }
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next text line, without its `'\n'`; `None` at the answer's end.
    fn line(&mut self) -> Result<Option<String>, InspectError> {
        loop {
            if let Some(n) = self.buf[self.at..self.end].iter().position(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(&self.buf[self.at..self.at + n]).into_owned();
                self.at += n + 1;
                return Ok(Some(line));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }
}

/// An answer being read: its header, then its records.
pub struct Answer {
    /// Who answers.
    pub header: Header,
    reader: Reader,
    records: usize,
}

impl Answer {
    /// The next line of a text answer (`stats`, `hello`), or `None` at the answer's end (its
    /// count checked).
    ///
    /// # Errors
    /// [`InspectError::CutShort`] if the answer ended without its last line;
    /// [`InspectError::Garbled`] if the count disagrees.
    pub fn next_line(&mut self) -> Result<Option<String>, InspectError> {
        let line = self.reader.line()?.ok_or(InspectError::CutShort)?;
        if let Some(n) = line.strip_prefix("end\t") {
            return if n.parse() == Ok(self.records) {
                Ok(None)
            } else {
                Err(InspectError::Garbled(line))
            };
        }
        self.records += 1;
        Ok(Some(line))
    }

    /// Reads a listing (`ls`) to its end, passing each timer to `each` in one [`Entry`]
    /// rewritten for every timer; the count.
    ///
    /// # Errors
    /// [`InspectError::CutShort`] if the answer ended without its end record;
    /// [`InspectError::Garbled`] if a record or the count is wrong.
    pub fn each_entry(&mut self, mut each: impl FnMut(&Entry)) -> Result<usize, InspectError> {
        let mut e = Entry::default();
        let r = &mut self.reader;
        loop {
            match Record::read(&r.buf[r.at..r.end], &mut e).map_err(InspectError::Garbled)? {
                Some((rec, len)) => {
                    r.at += len;
                    match rec {
                        Record::Owner => {}
                        Record::Timer => {
                            self.records += 1;
                            each(&e);
                        }
                        Record::End(n) if n == self.records as u64 => return Ok(self.records),
                        Record::End(n) => {
                            return Err(InspectError::Garbled(format!(
                                "{} timers and an end record of {n}",
                                self.records
                            )))
                        }
                    }
                }
                None => {
                    if !r.fill()? {
                        return Err(InspectError::CutShort);
                    }
                }
            }
        }
    }
}

/// Connects to endpoint `name` and sends `request`; the answer's header read.
///
/// # Errors
/// [`InspectError::Denied`], [`InspectError::Refused`], [`InspectError::CutShort`],
/// [`InspectError::NotPolled`] (a polled endpoint's program did not poll within `timeout`),
/// [`InspectError::Io`] (the endpoint is gone: `ECONNREFUSED`).
pub fn ask(name: &str, request: Request, timeout: Duration) -> Result<Answer, InspectError> {
    let pid = name
        .strip_prefix(PREFIX)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let sock = connect(name)?;
    let mut stream = UnixStream::from(sock);
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    // A refusal may close the connection before the request is written: the answer says
    // why, so a failed write is not the error to report.
    let _ = stream.write_all(request.line().as_bytes());
    let mut reader = Reader {
        stream,
        buf: vec![0; 1 << 20],
        at: 0,
        end: 0,
    };
    let first = match reader.line() {
        Ok(Some(l)) => l,
        Ok(None) => return Err(InspectError::CutShort),
        Err(InspectError::Io(e))
            if name.ends_with(POLLED)
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
        {
            return Err(InspectError::NotPolled(pid))
        }
        Err(e) => return Err(e),
    };
    if first == "denied" {
        return Err(InspectError::Denied(pid));
    }
    if let Some(why) = first.strip_prefix("error\t") {
        return Err(InspectError::Refused(why.to_owned()));
    }
    let header = Header::decode(&first).ok_or(InspectError::Garbled(first))?;
    Ok(Answer {
        header,
        reader,
        records: 0,
    })
}

/// A connected socket to endpoint `name` (blocking connect on a non-blocking socket: it
/// completes at once or is refused, as Unix sockets do).
fn connect(name: &str) -> Result<OwnedFd, InspectError> {
    let sock = socket()?;
    let (addr, len) = address(name);
    // SAFETY: connect(2) with an address that lives for the call and its length.
    let r = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len,
        )
    };
    if r != 0 {
        return Err(InspectError::Io(std::io::Error::last_os_error()));
    }
    Ok(sock)
}

/// Every endpoint of `pid`, or [`InspectError::NoEndpoint`].
fn endpoints_or_why(pid: u32) -> Result<Vec<String>, InspectError> {
    let names = endpoints(pid)?;
    if names.is_empty() {
        return Err(InspectError::NoEndpoint(pid));
    }
    Ok(names)
}

/// Every timer of every service of process `pid`, passed to `each` with the header of the
/// service it belongs to, as the answers stream in (one [`Entry`] rewritten for each: a
/// listing of a million timers allocates nothing per timer).
///
/// # Errors
/// As [`ask`], [`endpoints`]; [`InspectError::NoEndpoint`].
pub fn list(
    pid: u32,
    timeout: Duration,
    mut each: impl FnMut(&Header, &Entry),
) -> Result<usize, InspectError> {
    let mut n = 0;
    for name in endpoints_or_why(pid)? {
        let mut answer = ask(&name, Request::List, timeout)?;
        let header = answer.header.clone();
        n += answer.each_entry(|e| each(&header, e))?;
    }
    Ok(n)
}

/// The statistics of every service of process `pid`.
///
/// # Errors
/// As [`list`].
pub fn stats(pid: u32, timeout: Duration) -> Result<Vec<(Header, Stats)>, InspectError> {
    let mut out = Vec::new();
    for name in endpoints_or_why(pid)? {
        let mut answer = ask(&name, Request::Stats, timeout)?;
        let mut lines = Vec::new();
        while let Some(line) = answer.next_line()? {
            lines.push(line);
        }
        let stats = decode_stats(lines.iter().map(String::as_str))
            .ok_or_else(|| InspectError::Garbled(lines.join("\n")))?;
        out.push((answer.header, stats));
    }
    Ok(out)
}
