//! The client side: finding a process's endpoints and asking them (what `tempora ls`,
//! `tempora stats` and `tempora top --pid` use).

use super::endpoint::{address, socket, PREFIX};
use super::proto::{decode_stats, Entry, Header, Request};
use crate::stats::Stats;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
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
                 services have no driver thread (drivers(0): nothing waits on an endpoint) or \
                 run on a manual clock, or inspection is off there (TEMPORA_INSPECT=0, \
                 Builder::inspect(false))"
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

/// The endpoint names (`tempora/<pid>/<n>`) process `pid` listens on, from `/proc/net/unix`,
/// in order of `n`.
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
            let n = p.strip_prefix(&want)?.parse().ok()?;
            Some((n, p[1..].to_owned()))
        })
        .collect();
    found.sort();
    found.dedup();
    Ok(found.into_iter().map(|(_, name)| name).collect())
}

/// An answer being read: its header, then its lines.
pub struct Answer {
    /// Who answers.
    pub header: Header,
    lines: std::io::Lines<BufReader<UnixStream>>,
    records: usize,
}

impl Answer {
    /// The next record line, or `None` at the answer's end (its count checked).
    ///
    /// # Errors
    /// [`InspectError::CutShort`] if the answer ended without its last line;
    /// [`InspectError::Garbled`] if the count disagrees.
    pub fn next_line(&mut self) -> Result<Option<String>, InspectError> {
        let line = self.lines.next().ok_or(InspectError::CutShort)??;
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
}

/// Connects to endpoint `name` and sends `request`; the answer's header read.
///
/// # Errors
/// [`InspectError::Denied`], [`InspectError::Refused`], [`InspectError::CutShort`],
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
    let mut lines = BufReader::with_capacity(256 * 1024, stream).lines();
    let first = match lines.next() {
        Some(l) => l?,
        None => return Err(InspectError::CutShort),
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
        lines,
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
/// service it belongs to, as the answers stream in.
///
/// # Errors
/// As [`ask`], [`endpoints`]; [`InspectError::NoEndpoint`].
pub fn list(
    pid: u32,
    timeout: Duration,
    mut each: impl FnMut(&Header, Entry),
) -> Result<usize, InspectError> {
    let mut n = 0;
    for name in endpoints_or_why(pid)? {
        let mut answer = ask(&name, Request::List, timeout)?;
        while let Some(line) = answer.next_line()? {
            let e = Entry::decode(&line).ok_or(InspectError::Garbled(line))?;
            each(&answer.header, e);
            n += 1;
        }
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
