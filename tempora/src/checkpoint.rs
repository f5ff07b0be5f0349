//! Checkpoint and restore of an owner: the snapshot, its binary format, and its files.
//!
//! [`crate::Owner::checkpoint`] takes a [`Snapshot`] of an owner's logical state;
//! [`crate::Owner::restore`] recreates it in a fresh owner through exact-ID mode, with the same
//! IDs, all or nothing. Derived state (wheel placement, hash chains) is rebuilt, never copied.
//!
//! # What a snapshot holds, and the time rule
//!
//! Per owner: the ID counter (the next ID a normal create would try) and whether exact-ID mode
//! is on. Per timer: ID, clock, notification (by name, below), status, expiry, interval, the
//! internal overrun (periods counted since the pending event was queued, -1 when none) and the
//! latched overrun `getoverrun` returns, and whether its event is pending on the owner's queue.
//!
//! Expiries follow the clocks' own rules across a restore, possibly on another machine or after
//! a reboot:
//! * an expiry measured on `CLOCK_MONOTONIC` or `CLOCK_BOOTTIME` (monotonic and boot-time
//!   timers, and relative `CLOCK_REALTIME` timers, which run on the monotonic clock) is stored
//!   as the **time remaining** at checkpoint (negative if it has passed, as for a periodic timer
//!   whose event is pending), and restored relative to the new owner's clock: a timer with
//!   3 s left has 3 s left after the restore, however long the snapshot sat on disk;
//! * an **absolute `CLOCK_REALTIME`** expiry is stored as is (ns since the epoch) and restored
//!   as is: a timer set for 12:00 wall time still fires at 12:00, earlier if the snapshot was
//!   restored late (at once if 12:00 has passed, counting the missed periods as overrun).
//!
//! # Notification names
//!
//! A snapshot names each timer's notification: `none`, `queue` (the owner's event queue), or
//! the name the application gave its callback ([`crate::Notify::callback_named`]; an unnamed
//! callback is `callback`). At restore the application maps names other than `none` and
//! `queue` to [`crate::Notify`] values; a name it does not map is an error and nothing is
//! restored.
//!
//! # Binary format (version 1.0)
//!
//! All integers little-endian.
//!
//! ```text
//! offset  size  field
//!      0     8  magic       "TEMPORA\x1a"
//!      8     2  major       1: a reader refuses a greater major version
//!     10     2  minor       0: a greater minor version may append fields to records
//!     12     8  length      bytes of payload that follow the header, at most MAX_PAYLOAD
//!     20     4  crc32c      CRC-32C (Castagnoli) of the payload
//!     24        payload     one owner record, then `count` timer records
//!
//! owner record:  len u16 | counter u32 | restore_ids u8 | count u32
//! timer record:  len u16 | id i32 | clock i32 (clockid_t) | status u8 | pending u8
//!                | expiry_kind u8 (0 none, 1 remaining on expiry_clock, 2 realtime absolute)
//!                | expiry_clock i32 | expiry i64 (ns) | interval i64 (ns) | overrun i64
//!                | overrun_last i32 | name_len u16 | name (UTF-8)
//! ```
//!
//! Each record starts with its own length (the bytes after the `len` field), so a reader skips
//! fields a newer minor version appended. A timer record's length is a `u16`, so a name holds
//! at most [`MAX_NAME`] bytes; a payload at most [`MAX_PAYLOAD`] bytes.
//!
//! A reader checks everything before it allocates or creates anything: magic, version, that
//! the length is within [`MAX_PAYLOAD`] and matches the file (a file is read only up to the
//! length its header declares, so any input, `/dev/zero` included, costs bounded memory), the
//! checksum, every record's length against what is left, counts against the bytes that could
//! hold them, clock ids, status and kind values, then [`Snapshot::validate`]: what a snapshot
//! must satisfy whoever built it. [`Snapshot::try_encode`] and [`crate::Owner::restore`] apply
//! the same [`Snapshot::validate`], so what one refuses the others refuse too, and no bytes are
//! written that a reader refuses.

use crate::clock::ClockId;
use crate::error::Error;
use crate::registry::{Status, TimerId};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;

/// The magic at the start of every snapshot.
pub const MAGIC: [u8; 8] = *b"TEMPORA\x1a";
/// The format version this build writes.
pub const VERSION: (u16, u16) = (1, 0);

/// The largest payload (the bytes after the 24-byte header) a snapshot may declare: 4 GiB,
/// about 80 million timers with short names, more than an owner holds in memory (each timer
/// costs more than 64 bytes of its own). A reader refuses a greater length before reading
/// further, and [`Snapshot::try_encode`] refuses a snapshot that would exceed it.
pub const MAX_PAYLOAD: u64 = 1 << 32;
/// The longest notification name, in bytes, that fits in a timer record (whose length is a
/// `u16` that also counts the record's other fields).
pub const MAX_NAME: usize = u16::MAX as usize - TIMER_FIELDS;
/// The notification name of a `SIGEV_NONE` timer (`Notify::None`); no callback may take it.
pub(crate) const NOTIFY_NONE: &str = "none";
/// The notification name of a queue timer (`Notify::Queue`); no callback may take it.
pub(crate) const NOTIFY_QUEUE: &str = "queue";

/// Why a callback cannot be recorded under `name`, if it cannot: a reserved name (a restore
/// would make the timer that kind) or one longer than a record holds. Checked at create, so
/// that every timer an owner holds can be checkpointed and restored as it is.
pub(crate) fn callback_name_error(name: &str) -> Option<&'static str> {
    if name == NOTIFY_NONE || name == NOTIFY_QUEUE {
        Some("a callback named `none` or `queue` would restore as that kind")
    } else if name.len() > MAX_NAME {
        Some("a callback name longer than a snapshot can hold")
    } else {
        None
    }
}

const HEADER: usize = 24;
const OWNER_FIELDS: usize = 4 + 1 + 4;
const TIMER_FIELDS: usize = 4 + 4 + 1 + 1 + 1 + 4 + 8 + 8 + 8 + 4 + 2;

/// Where a timer's expiry is, by the rule in the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No expiry stored (never armed).
    None,
    /// `ns` remaining (negative: passed) at checkpoint on `clock` (monotonic or boot time).
    Remaining {
        /// The clock the expiry is measured on.
        clock: ClockId,
        /// Nanoseconds left; negative if the expiry had passed.
        ns: i64,
    },
    /// An absolute `CLOCK_REALTIME` expiry, ns since the epoch.
    Realtime(i64),
}

/// One timer of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerRecord {
    /// Its ID, restored exactly.
    pub id: TimerId,
    /// The clock it was created on.
    pub clock: ClockId,
    /// Its notification's name: `none`, `queue`, or a callback's name.
    pub notify: String,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
    /// Whether its event is pending on the owner's queue.
    pub pending: bool,
    /// Its expiry (see the module doc for the rule).
    pub expiry: Expiry,
    /// Its period in ns (0: one-shot).
    pub interval: i64,
    /// Periods counted since its pending event was queued (-1: none).
    pub overrun: i64,
    /// What `getoverrun` returns.
    pub overrun_last: i32,
}

/// The logical state of an owner (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The next ID the owner's counter would try.
    pub counter: u32,
    /// Whether exact-ID (restore) mode was on.
    pub restore_ids: bool,
    /// Its timers, by ID.
    pub timers: Vec<TimerRecord>,
}

fn corrupt(what: impl Into<String>) -> Error {
    Error::CorruptSnapshot(what.into())
}

impl Snapshot {
    /// Checks what every snapshot must satisfy, however it was built (its fields are public):
    /// the rules [`Snapshot::decode`] applies to a file, [`Snapshot::try_encode`] before
    /// writing one, and [`crate::Owner::restore`] before creating anything. Per timer: an
    /// interval and an absolute realtime expiry not negative, a remaining time on the clock its
    /// timer runs on (monotonic or boot time; monotonic for a realtime timer armed relative),
    /// an absolute expiry only on a realtime timer, overruns in range, an armed or waiting timer
    /// with an expiry, a timer waiting to be re-armed periodic and with its event pending, a
    /// pending event only on a fired one-shot or a waiting periodic timer and never on a `none`
    /// timer, a name of at most [`MAX_NAME`] bytes. Per snapshot: unique IDs, at most
    /// `u32::MAX` timers and [`MAX_PAYLOAD`] bytes encoded. Remaining times may be anything:
    /// negative is passed, and a restore saturates at the clock's ends.
    ///
    /// # Errors
    /// [`Error::CorruptSnapshot`], saying which timer breaks which rule.
    pub fn validate(&self) -> Result<(), Error> {
        if u32::try_from(self.timers.len()).is_err() {
            return Err(corrupt(format!(
                "{} timers, more than a snapshot counts",
                self.timers.len()
            )));
        }
        let mut payload = (2 + OWNER_FIELDS) as u64;
        for (i, t) in self.timers.iter().enumerate() {
            check_timer(t).map_err(|w| corrupt(format!("timer {i} (ID {}): {w}", t.id)))?;
            payload += (2 + TIMER_FIELDS + t.notify.len()) as u64;
        }
        if payload > MAX_PAYLOAD {
            return Err(corrupt(format!(
                "{payload} bytes encoded, more than the format's {MAX_PAYLOAD}"
            )));
        }
        if let Some(id) = first_duplicate(&self.timers) {
            return Err(corrupt(format!("duplicate ID {id}")));
        }
        Ok(())
    }

    /// The snapshot in the binary format, after [`Snapshot::validate`].
    ///
    /// # Errors
    /// [`Error::CorruptSnapshot`] for a snapshot [`Snapshot::validate`] refuses (such as a
    /// notification name longer than [`MAX_NAME`]): no bytes a reader would refuse.
    pub fn try_encode(&self) -> Result<Vec<u8>, Error> {
        self.validate()?;
        Ok(self.encode_unchecked())
    }

    /// [`Snapshot::try_encode`] for a snapshot known to be valid, as [`crate::Owner::checkpoint`]
    /// returns unless a callback's name is longer than [`MAX_NAME`].
    ///
    /// # Panics
    /// If [`Snapshot::validate`] refuses the snapshot.
    pub fn encode(&self) -> Vec<u8> {
        self.try_encode()
            .unwrap_or_else(|e| panic!("Snapshot::encode: {e}"))
    }

    /// The bytes, with no check: every length fits its field only for a valid snapshot (tests
    /// use it to build bytes that `decode` must refuse).
    fn encode_unchecked(&self) -> Vec<u8> {
        let mut p =
            Vec::with_capacity(2 + OWNER_FIELDS + self.timers.len() * (2 + TIMER_FIELDS + 8));
        p.extend_from_slice(&(OWNER_FIELDS as u16).to_le_bytes());
        p.extend_from_slice(&self.counter.to_le_bytes());
        p.push(u8::from(self.restore_ids));
        p.extend_from_slice(&(self.timers.len() as u32).to_le_bytes());
        for t in &self.timers {
            let name = t.notify.as_bytes();
            p.extend_from_slice(&((TIMER_FIELDS + name.len()) as u16).to_le_bytes());
            p.extend_from_slice(&t.id.get().to_le_bytes());
            p.extend_from_slice(&t.clock.as_raw().to_le_bytes());
            p.push(t.status as u8);
            p.push(u8::from(t.pending));
            let (kind, clock, ns) = match t.expiry {
                Expiry::None => (0u8, 0, 0),
                Expiry::Remaining { clock, ns } => (1, clock.as_raw(), ns),
                Expiry::Realtime(ns) => (2, ClockId::Realtime.as_raw(), ns),
            };
            p.push(kind);
            p.extend_from_slice(&clock.to_le_bytes());
            p.extend_from_slice(&ns.to_le_bytes());
            p.extend_from_slice(&t.interval.to_le_bytes());
            p.extend_from_slice(&t.overrun.to_le_bytes());
            p.extend_from_slice(&t.overrun_last.to_le_bytes());
            p.extend_from_slice(&(name.len() as u16).to_le_bytes());
            p.extend_from_slice(name);
        }
        let mut out = Vec::with_capacity(HEADER + p.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.0.to_le_bytes());
        out.extend_from_slice(&VERSION.1.to_le_bytes());
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&p).to_le_bytes());
        out.extend_from_slice(&p);
        out
    }

    /// Reads a snapshot, checking everything (see the module doc, and [`Snapshot::validate`])
    /// before allocating for it.
    ///
    /// # Errors
    /// [`Error::CorruptSnapshot`] or [`Error::UnsupportedSnapshot`].
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, Error> {
        if bytes.len() < HEADER {
            return Err(corrupt(format!(
                "{} bytes, shorter than the {HEADER}-byte header",
                bytes.len()
            )));
        }
        let (len, crc) = header(&bytes[..HEADER])?;
        let payload = &bytes[HEADER..];
        if len != payload.len() as u64 {
            return Err(corrupt(format!(
                "header says {len} payload bytes, the data has {}",
                payload.len()
            )));
        }
        if crc32c::crc32c(payload) != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let mut r = Reader::new(payload, HEADER);
        let mut owner = r.record(OWNER_FIELDS, "owner record")?;
        let counter = owner.u32()?;
        let restore_ids = owner.flag("restore_ids")?;
        let count = owner.u32()? as usize;
        // Every timer record takes at least this many bytes: a count the payload cannot hold is
        // refused before anything is allocated for it.
        if count > r.left() / (2 + TIMER_FIELDS) {
            return Err(corrupt(format!(
                "{count} timers cannot fit in the {} bytes left",
                r.left()
            )));
        }
        let mut timers: Vec<TimerRecord> = Vec::with_capacity(count);
        for i in 0..count {
            let at = r.offset();
            let mut t = r.record(TIMER_FIELDS, "timer record")?;
            let rec = t.timer().map_err(|e| match e {
                Error::CorruptSnapshot(w) => corrupt(format!("timer {i} at byte {at}: {w}")),
                e => e,
            })?;
            timers.push(rec);
        }
        if r.left() != 0 {
            return Err(corrupt(format!("{} bytes after the last record", r.left())));
        }
        let snapshot = Snapshot {
            counter,
            restore_ids,
            timers,
        };
        snapshot.validate()?;
        Ok(snapshot)
    }

    /// Reads a snapshot from `reader`, in bounded memory whatever it yields: the header
    /// first, then exactly the payload length it declares (at most [`MAX_PAYLOAD`], refused
    /// before reading on), then one byte more to refuse trailing data. Memory grows with the
    /// bytes that arrive, never ahead of them.
    ///
    /// # Errors
    /// [`Error::Io`], or what [`Snapshot::decode`] returns.
    pub fn read_from(reader: impl Read) -> Result<Snapshot, Error> {
        read_bounded(reader, None)
    }

    /// Writes the snapshot to `path` atomically: a temporary file in the same directory,
    /// written and `fsync`ed, renamed over `path`, then the directory `fsync`ed, so after a
    /// crash `path` holds either the old file or the whole new one.
    ///
    /// # Errors
    /// What [`Snapshot::try_encode`] returns (nothing is written), or [`Error::Io`].
    pub fn save_to(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let bytes = self.try_encode()?;
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            std::fs::File::open(&dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(written?)
    }

    /// Reads and verifies a snapshot file (nothing is restored here), as
    /// [`Snapshot::read_from`] does; a regular file whose size is not the header's length
    /// plus the header is refused before its payload is read.
    ///
    /// # Errors
    /// [`Error::Io`], or what [`Snapshot::decode`] returns.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Snapshot, Error> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        read_bounded(file, meta.is_file().then_some(meta.len()))
    }
}

/// The header's payload length (checked against [`MAX_PAYLOAD`]) and checksum, after its magic
/// and major version. `h` is the header's [`HEADER`] bytes.
fn header(h: &[u8]) -> Result<(u64, u32), Error> {
    if h[..8] != MAGIC {
        return Err(corrupt("wrong magic: not a tempora snapshot"));
    }
    let mut h = Reader::new(&h[8..HEADER], 8);
    let (major, minor) = (h.u16()?, h.u16()?);
    if major != VERSION.0 {
        return Err(Error::UnsupportedSnapshot {
            found: (major, minor),
            supported: VERSION.0,
        });
    }
    let len = h.u64()?;
    if len > MAX_PAYLOAD {
        return Err(corrupt(format!(
            "header says {len} payload bytes, more than the format's {MAX_PAYLOAD}"
        )));
    }
    Ok((len, h.u32()?))
}

/// [`Snapshot::read_from`]; `size` is the input's size if it is known (a regular file's).
fn read_bounded(mut reader: impl Read, size: Option<u64>) -> Result<Snapshot, Error> {
    let mut bytes = Vec::with_capacity(HEADER);
    reader
        .by_ref()
        .take(HEADER as u64)
        .read_to_end(&mut bytes)?;
    if bytes.len() < HEADER {
        return Snapshot::decode(&bytes);
    }
    let (len, _) = header(&bytes)?;
    if let Some(size) = size {
        if size != HEADER as u64 + len {
            return Err(corrupt(format!(
                "header says {len} payload bytes, the file has {}",
                size.saturating_sub(HEADER as u64)
            )));
        }
        // The file holds them: read into one allocation.
        let len = usize::try_from(len)
            .map_err(|_| corrupt(format!("{len} payload bytes do not fit in memory here")))?;
        bytes.reserve_exact(len + 1);
    }
    // `len + 1`: one byte past the declared length tells trailing data from the end.
    reader.take(len + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > HEADER as u64 + len {
        return Err(corrupt(format!(
            "more data after the {len} payload bytes the header declares"
        )));
    }
    Snapshot::decode(&bytes)
}

/// The rules of [`Snapshot::validate`] for one timer; the text says which one it breaks.
fn check_timer(t: &TimerRecord) -> Result<(), String> {
    if t.interval < 0 {
        return Err(format!("negative interval {}", t.interval));
    }
    match t.expiry {
        Expiry::None => {}
        Expiry::Remaining { clock, .. } => {
            let runs_on =
                clock == t.clock || (t.clock == ClockId::Realtime && clock == ClockId::Monotonic);
            if clock == ClockId::Realtime || !runs_on {
                return Err(format!(
                    "remaining time on the {clock:?} clock for a {:?} timer",
                    t.clock
                ));
            }
        }
        Expiry::Realtime(ns) => {
            if ns < 0 || t.clock != ClockId::Realtime {
                return Err("absolute realtime expiry out of range or on another clock".into());
            }
        }
    }
    if t.overrun < -1 {
        return Err(format!("overrun {}", t.overrun));
    }
    if t.overrun_last < 0 {
        return Err(format!("latched overrun {}", t.overrun_last));
    }
    if t.status != Status::Disarmed && t.expiry == Expiry::None {
        return Err("an armed or pending timer without an expiry".into());
    }
    let waiting = t.status == Status::RequeuePending;
    if waiting && t.interval == 0 {
        return Err("a one-shot timer waiting to be re-armed".into());
    }
    if waiting && !t.pending {
        return Err("a periodic timer waiting to be re-armed without its pending event".into());
    }
    if t.pending && !waiting && !(t.status == Status::Disarmed && t.interval == 0) {
        return Err(format!(
            "a pending event on a {:?} timer with interval {}",
            t.status, t.interval
        ));
    }
    if t.pending && t.notify == NOTIFY_NONE {
        return Err("a pending event on a `none` timer".into());
    }
    if t.notify.len() > MAX_NAME {
        return Err(format!(
            "notification name is {} bytes, at most {MAX_NAME} fit in a record",
            t.notify.len()
        ));
    }
    Ok(())
}

/// The first ID that occurs twice in `timers`, if any. Snapshots list IDs in ascending order
/// (`Owner::checkpoint` sorts them), which one pass confirms; only other orders pay for a set.
fn first_duplicate(timers: &[TimerRecord]) -> Option<TimerId> {
    if timers.windows(2).all(|w| w[0].id < w[1].id) {
        return None;
    }
    let mut seen = HashSet::with_capacity(timers.len());
    timers.iter().map(|t| t.id).find(|&id| !seen.insert(id))
}

/// A bounds-checked little-endian reader; `base` is its offset in the file, for messages.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], base: usize) -> Reader<'a> {
        Reader { data, pos: 0, base }
    }

    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn offset(&self) -> usize {
        self.base + self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.left() < n {
            return Err(corrupt(format!(
                "truncated at byte {}: {n} more bytes needed, {} left",
                self.offset(),
                self.left()
            )));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, Error> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }
    fn flag(&mut self, what: &str) -> Result<bool, Error> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(corrupt(format!("{what} is {v}, not 0 or 1"))),
        }
    }

    /// A length-prefixed record of at least `min` bytes, as a reader of its own (trailing
    /// bytes a newer minor version appended are skipped with it).
    fn record(&mut self, min: usize, what: &str) -> Result<Reader<'a>, Error> {
        let at = self.offset();
        let len = self.u16()? as usize;
        if len < min {
            return Err(corrupt(format!(
                "{what} at byte {at} is {len} bytes, at least {min} expected"
            )));
        }
        let base = self.offset();
        Ok(Reader::new(self.take(len)?, base))
    }

    fn clock(&mut self) -> Result<ClockId, Error> {
        let raw = self.i32()?;
        ClockId::from_raw(raw).ok_or_else(|| corrupt(format!("clock id {raw} is not supported")))
    }

    fn timer(&mut self) -> Result<TimerRecord, Error> {
        let raw_id = self.i32()?;
        let id = TimerId::new(raw_id).ok_or_else(|| corrupt(format!("negative ID {raw_id}")))?;
        let clock = self.clock()?;
        let code = self.u8()?;
        let status = Status::from_raw(code).ok_or_else(|| corrupt(format!("status {code}")))?;
        let pending = self.flag("pending")?;
        let kind = self.u8()?;
        let expiry_clock = self.i32()?;
        let ns = self.i64()?;
        let expiry = match kind {
            0 => Expiry::None,
            1 => {
                let clock = ClockId::from_raw(expiry_clock)
                    .ok_or_else(|| corrupt(format!("remaining time on clock {expiry_clock}")))?;
                Expiry::Remaining { clock, ns }
            }
            2 => Expiry::Realtime(ns),
            k => return Err(corrupt(format!("expiry kind {k}"))),
        };
        // The rules on values are `check_timer`'s, applied to the whole snapshot by `decode`.
        let interval = self.i64()?;
        let overrun = self.i64()?;
        let overrun_last = self.i32()?;
        let name_len = self.u16()? as usize;
        let name = std::str::from_utf8(self.take(name_len)?)
            .map_err(|_| corrupt("notification name is not UTF-8"))?
            .to_string();
        Ok(TimerRecord {
            id,
            clock,
            notify: name,
            status,
            pending,
            expiry,
            interval,
            overrun,
            overrun_last,
        })
    }
}

#[cfg(all(test, not(loom)))]
#[path = "checkpoint_tests.rs"]
mod tests;
