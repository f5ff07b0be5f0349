//! The binary format of a [`Snapshot`] (the module doc of [`super`] has the table): encoding,
//! the bounds-checked decoder, and files. The rules on values every snapshot must satisfy,
//! which the encoder and the decoder apply, are `rules.rs`'s.

use super::snapshot::{
    corrupt, Expiry, SignalRecord, SignalState, SignalTarget, Snapshot, TimerRecord, MAGIC,
    MAX_NAME, MAX_PAYLOAD, NOTIFY_NONE, NOTIFY_QUEUE, NOTIFY_SIGNAL, VERSION,
};
use crate::clock::ClockId;
use crate::error::Error;
use crate::timers::object::types::{slack_ns, slack_of_ns};
use crate::timers::Precision;
use crate::timers::{Status, TimerId};
use std::borrow::Cow;
use std::io::{Read, Write};
use std::path::Path;

/// The header's size: magic, version, payload length, checksum.
pub(super) const HEADER: usize = 24;
/// The owner record's fields, after its `len`.
pub(super) const OWNER_FIELDS: usize = 4 + 1 + 4;
/// A timer record's fields, after its `len` and before its name.
pub(super) const TIMER_FIELDS: usize = 4 + 4 + 1 + 1 + 1 + 4 + 8 + 8 + 8 + 4 + 2;
/// A timer record's fields after its name (minor version 1: the precision).
pub(super) const TIMER_TAIL: usize = 8;
/// The owner record's fields after its timer count (minor version 2: the default slack).
pub(super) const OWNER_TAIL: usize = 8;
/// The signal section of a record named `signal`, after its precision (minor version 3):
/// target kind, signo, tid, value, state, lateness.
pub(super) const SIGNAL_SECTION: usize = 1 + 4 + 4 + 8 + 1 + 4;
/// The first minor version whose records named `signal` carry a signal section.
pub(super) const SIGNAL_MINOR: u16 = 3;

/// Bytes the owner record takes in the payload, its `len` field included.
pub(super) const OWNER_RECORD: u64 = (2 + OWNER_FIELDS + OWNER_TAIL) as u64;

/// Bytes `t`'s record takes in the payload, its `len` field included.
pub(super) fn timer_record_len(t: &TimerRecord) -> u64 {
    (2 + TIMER_FIELDS + t.notify.len() + TIMER_TAIL + signal_section_len(t)) as u64
}

/// Bytes of `t`'s signal section: [`SIGNAL_SECTION`] in a record named `signal`, else none.
fn signal_section_len(t: &TimerRecord) -> usize {
    if t.notify == NOTIFY_SIGNAL {
        SIGNAL_SECTION
    } else {
        0
    }
}

/// `expiry_kind`: no expiry stored.
const EXPIRY_NONE: u8 = 0;
/// `expiry_kind`: time remaining on `expiry_clock`.
const EXPIRY_REMAINING: u8 = 1;
/// `expiry_kind`: an absolute `CLOCK_REALTIME` time.
const EXPIRY_REALTIME: u8 = 2;

// The stored enums, each mapped to its on-disk value and back by a `match` of its own (never
// `as` or a helper of the enum's), so that the format stays what the module doc's table says
// whatever happens to the in-memory discriminants; `tests.rs` pins every value.

/// A status's `status` byte.
pub(super) fn status_to_disk(status: Status) -> u8 {
    match status {
        Status::Disarmed => 0,
        Status::Armed => 1,
        Status::RequeuePending => 2,
    }
}

/// The status a `status` byte stands for, if any.
pub(super) fn status_from_disk(byte: u8) -> Option<Status> {
    match byte {
        0 => Some(Status::Disarmed),
        1 => Some(Status::Armed),
        2 => Some(Status::RequeuePending),
        _ => None,
    }
}

/// A clock's `clock` / `expiry_clock` value: its Linux `clockid_t` number.
pub(super) fn clock_to_disk(clock: ClockId) -> i32 {
    match clock {
        ClockId::Realtime => 0,
        ClockId::Monotonic => 1,
        ClockId::Boottime => 7,
    }
}

/// The clock a `clock` / `expiry_clock` value stands for, if tempora supports it.
pub(super) fn clock_from_disk(raw: i32) -> Option<ClockId> {
    match raw {
        0 => Some(ClockId::Realtime),
        1 => Some(ClockId::Monotonic),
        7 => Some(ClockId::Boottime),
        _ => None,
    }
}

/// An expiry's `expiry_kind`, `expiry_clock` and `expiry` fields. The fields a kind does not
/// use are written as zero (`CLOCK_REALTIME` is 0 for an absolute realtime expiry).
pub(super) fn expiry_to_disk(expiry: Expiry) -> (u8, i32, i64) {
    match expiry {
        Expiry::None => (EXPIRY_NONE, 0, 0),
        Expiry::Remaining { clock, ns } => (EXPIRY_REMAINING, clock_to_disk(clock), ns),
        Expiry::Realtime(ns) => (EXPIRY_REALTIME, clock_to_disk(ClockId::Realtime), ns),
    }
}

/// The expiry the `expiry_kind`, `expiry_clock` and `expiry` fields stand for; the fields its
/// kind does not use are not read.
///
/// # Errors
/// [`Error::CorruptSnapshot`] for an unknown kind, or a remaining time on an unknown clock.
pub(super) fn expiry_from_disk(kind: u8, clock: i32, ns: i64) -> Result<Expiry, Error> {
    match kind {
        EXPIRY_NONE => Ok(Expiry::None),
        EXPIRY_REMAINING => {
            let clock = clock_from_disk(clock)
                .ok_or_else(|| corrupt(format!("remaining time on clock {clock}")))?;
            Ok(Expiry::Remaining { clock, ns })
        }
        EXPIRY_REALTIME => Ok(Expiry::Realtime(ns)),
        k => Err(corrupt(format!("expiry kind {k}"))),
    }
}

/// A signal target's `target`, `signo`, `tid` and `value` fields; `None` (a record named
/// `signal` that is a callback's) is target 0. The fields a target does not use are zero.
pub(super) fn signal_target_to_disk(target: Option<SignalTarget>) -> (u8, i32, i32, u64) {
    match target {
        None => (0, 0, 0, 0),
        Some(SignalTarget::Process { signo, value }) => (1, signo, 0, value as u64),
        Some(SignalTarget::Thread { tid, signo, value }) => (2, signo, tid, value as u64),
        Some(SignalTarget::ProcessWithId { signo }) => (3, signo, 0, 0),
    }
}

/// The signal target the `target`, `signo`, `tid` and `value` fields stand for; the fields its
/// target does not use are not read. The values' ranges are [`Snapshot::validate`]'s.
///
/// # Errors
/// [`Error::CorruptSnapshot`] for an unknown target, or a value wider than a pointer here.
pub(super) fn signal_target_from_disk(
    target: u8,
    signo: i32,
    tid: i32,
    value: u64,
) -> Result<Option<SignalTarget>, Error> {
    let value = || {
        usize::try_from(value)
            .map_err(|_| corrupt(format!("signal value {value:#x} wider than a pointer here")))
    };
    match target {
        0 => Ok(None),
        1 => Ok(Some(SignalTarget::Process {
            signo,
            value: value()?,
        })),
        2 => Ok(Some(SignalTarget::Thread {
            tid,
            signo,
            value: value()?,
        })),
        3 => Ok(Some(SignalTarget::ProcessWithId { signo })),
        t => Err(corrupt(format!("signal target {t}"))),
    }
}

/// A signal state's `state` byte.
pub(super) fn signal_state_to_disk(state: SignalState) -> u8 {
    match state {
        SignalState::Idle => 0,
        SignalState::Owed => 1,
        SignalState::Outstanding => 2,
        SignalState::OutstandingStale => 3,
    }
}

/// The signal state a `state` byte stands for, if any.
pub(super) fn signal_state_from_disk(byte: u8) -> Option<SignalState> {
    match byte {
        0 => Some(SignalState::Idle),
        1 => Some(SignalState::Owed),
        2 => Some(SignalState::Outstanding),
        3 => Some(SignalState::OutstandingStale),
        _ => None,
    }
}

/// A record's signal section. `None` (a callback named `signal`) writes target 0 and zeros.
fn signal_to_disk(signal: Option<SignalRecord>, out: &mut Vec<u8>) {
    let (target, signo, tid, value) = signal_target_to_disk(signal.map(|s| s.target));
    let (state, lateness) = signal.map_or((0, 0), |s| (signal_state_to_disk(s.state), s.lateness));
    out.push(target);
    out.extend_from_slice(&signo.to_le_bytes());
    out.extend_from_slice(&tid.to_le_bytes());
    out.extend_from_slice(&value.to_le_bytes());
    out.push(state);
    out.extend_from_slice(&lateness.to_le_bytes());
}

/// The signal record a signal section stands for: `None` for target 0, whose other fields are
/// not read.
///
/// # Errors
/// [`Error::CorruptSnapshot`] for an unknown target or state.
fn signal_from_disk(f: &[u8; SIGNAL_SECTION]) -> Result<Option<SignalRecord>, Error> {
    let i32_at = |at: usize| i32::from_le_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
    let mut value = [0; 8];
    value.copy_from_slice(&f[9..17]);
    let Some(target) =
        signal_target_from_disk(f[0], i32_at(1), i32_at(5), u64::from_le_bytes(value))?
    else {
        return Ok(None);
    };
    let state =
        signal_state_from_disk(f[17]).ok_or_else(|| corrupt(format!("signal state {}", f[17])))?;
    Ok(Some(SignalRecord {
        target,
        state,
        lateness: i32_at(18),
    }))
}

impl Snapshot {
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
    pub(super) fn encode_unchecked(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(
            OWNER_RECORD as usize + self.timers.len() * (2 + TIMER_FIELDS + TIMER_TAIL + 8),
        );
        p.extend_from_slice(&((OWNER_FIELDS + OWNER_TAIL) as u16).to_le_bytes());
        p.extend_from_slice(&self.counter.to_le_bytes());
        p.push(u8::from(self.restore_ids));
        p.extend_from_slice(&(self.timers.len() as u32).to_le_bytes());
        p.extend_from_slice(&slack_ns(self.default_slack).to_le_bytes());
        for t in &self.timers {
            let name = t.notify.as_bytes();
            let len = TIMER_FIELDS + name.len() + TIMER_TAIL + signal_section_len(t);
            p.extend_from_slice(&(len as u16).to_le_bytes());
            p.extend_from_slice(&t.id.get().to_le_bytes());
            p.extend_from_slice(&clock_to_disk(t.clock).to_le_bytes());
            p.push(status_to_disk(t.status));
            p.push(u8::from(t.pending));
            let (kind, clock, ns) = expiry_to_disk(t.expiry);
            p.push(kind);
            p.extend_from_slice(&clock.to_le_bytes());
            p.extend_from_slice(&ns.to_le_bytes());
            p.extend_from_slice(&t.interval.to_le_bytes());
            p.extend_from_slice(&t.overrun.to_le_bytes());
            p.extend_from_slice(&t.overrun_last.to_le_bytes());
            p.extend_from_slice(&(name.len() as u16).to_le_bytes());
            p.extend_from_slice(name);
            p.extend_from_slice(&t.precision.pack().to_le_bytes());
            if t.notify == NOTIFY_SIGNAL {
                signal_to_disk(t.signal, &mut p);
            }
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
    /// [`Error::CorruptSnapshot`] or [`Error::UnsupportedSnapshot`]; [`Error::OutOfMemory`]
    /// if the records cannot be allocated.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, Error> {
        if bytes.len() < HEADER {
            return Err(corrupt(format!(
                "{} bytes, shorter than the {HEADER}-byte header",
                bytes.len()
            )));
        }
        let (minor, len, crc) = header(&bytes[..HEADER])?;
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
        // Minor version 2; an owner record of 1.0 or 1.1 has none: precise.
        let default_slack = owner.tail_u64()?.and_then(slack_of_ns);
        // Every timer record takes at least this many bytes: a count the payload cannot hold is
        // refused before anything is allocated for it.
        if count > r.left() / (2 + TIMER_FIELDS) {
            return Err(corrupt(format!(
                "{count} timers cannot fit in the {} bytes left",
                r.left()
            )));
        }
        let mut timers: Vec<TimerRecord> = Vec::new();
        timers
            .try_reserve_exact(count)
            .map_err(|_| Error::OutOfMemory)?;
        for i in 0..count {
            let at = r.offset();
            let mut t = r.record(TIMER_FIELDS, "timer record")?;
            let rec = t.timer(minor).map_err(|e| match e {
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
            default_slack,
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
        // Unique per save, not only per process: two threads saving to one path must not
        // share (and truncate, or rename away) one temporary file. Created exclusively, so a
        // leftover of a crashed process with a reused PID is never written through.
        static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let bytes = self.try_encode()?;
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
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

/// The header's minor version, payload length (checked against [`MAX_PAYLOAD`]) and checksum,
/// after its magic and major version. `h` is the header's [`HEADER`] bytes.
fn header(h: &[u8]) -> Result<(u16, u64, u32), Error> {
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
    Ok((minor, len, h.u32()?))
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
    let (_, len, _) = header(&bytes)?;
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

/// A bounds-checked little-endian reader; `base` is its offset in the file, for messages.
pub(super) struct Reader<'a> {
    pub(super) data: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8], base: usize) -> Reader<'a> {
        Reader { data, pos: 0, base }
    }

    pub(super) fn left(&self) -> usize {
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
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// A record's optional trailing u64 (a field appended in a later minor version): `None`
    /// if the record ends before it.
    fn tail_u64(&mut self) -> Result<Option<u64>, Error> {
        if self.left() >= 8 {
            self.u64().map(Some)
        } else {
            Ok(None)
        }
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
    pub(super) fn record(&mut self, min: usize, what: &str) -> Result<Reader<'a>, Error> {
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

    /// A timer record of a snapshot of minor version `minor`.
    fn timer(&mut self, minor: u16) -> Result<TimerRecord, Error> {
        // The fixed fields in one bounds check (a record is at least `TIMER_FIELDS` long),
        // then read at constant offsets.
        let f = self.array::<TIMER_FIELDS>()?;
        let i32_at = |at: usize| i32::from_le_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
        let i64_at = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&f[at..at + 8]);
            i64::from_le_bytes(b)
        };
        let raw_id = i32_at(0);
        let id = TimerId::new(raw_id).ok_or_else(|| corrupt(format!("negative ID {raw_id}")))?;
        let raw_clock = i32_at(4);
        let clock = clock_from_disk(raw_clock)
            .ok_or_else(|| corrupt(format!("clock id {raw_clock} is not supported")))?;
        let code = f[8];
        let status = status_from_disk(code).ok_or_else(|| corrupt(format!("status {code}")))?;
        let pending = match f[9] {
            0 => false,
            1 => true,
            v => return Err(corrupt(format!("pending is {v}, not 0 or 1"))),
        };
        let expiry = expiry_from_disk(f[10], i32_at(11), i64_at(15))?;
        // The rules on values are `rules.rs`'s, applied to the whole snapshot by `decode`.
        let (interval, overrun, overrun_last) = (i64_at(23), i64_at(31), i32_at(39));
        let name_len = usize::from(u16::from_le_bytes([f[43], f[44]]));
        let name = match std::str::from_utf8(self.take(name_len)?) {
            Ok(NOTIFY_NONE) => Cow::Borrowed(NOTIFY_NONE),
            Ok(NOTIFY_QUEUE) => Cow::Borrowed(NOTIFY_QUEUE),
            Ok(NOTIFY_SIGNAL) => Cow::Borrowed(NOTIFY_SIGNAL),
            Ok(name) => {
                let mut owned = String::new();
                owned
                    .try_reserve_exact(name.len())
                    .map_err(|_| Error::OutOfMemory)?;
                owned.push_str(name);
                Cow::Owned(owned)
            }
            Err(_) => return Err(corrupt("notification name is not UTF-8")),
        };
        // Minor version 3: a record named `signal` has its precision and then its signal
        // section, both required. Before, the name is a callback's, with nothing after it.
        let (precision, signal) = if minor >= SIGNAL_MINOR && name == NOTIFY_SIGNAL {
            let precision = Precision::unpack(self.u64()?);
            (precision, signal_from_disk(&self.array()?)?)
        } else {
            // Minor version 1; a record of version 1.0 has none: the owner's default.
            let precision = self
                .tail_u64()?
                .map_or(Precision::Default, Precision::unpack);
            (precision, None)
        };
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
            precision,
            signal,
        })
    }
}

const _: () = assert!(
    MAX_NAME == u16::MAX as usize - TIMER_FIELDS - TIMER_TAIL,
    "the service's longest callback name is exactly what a timer record holds"
);
