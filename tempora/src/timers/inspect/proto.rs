//! The inspection channel's wire format, both sides: the request a client sends, and the
//! answer. The request and the answer's first line are text; a listing is a stream of binary
//! records (formatted as text by the client alone: neither side prints or parses a number per
//! field, which is what a listing of a million timers spends its time on otherwise); the
//! statistics are text lines, one record a line, fields split by tabs (no field can hold a
//! tab: group names refuse control characters, other names are escaped).
//!
//! ```text
//!  request   one line, at most MAX_REQUEST bytes with its '\n': "ls" | "stats" | "hello"
//!  answer    "tempora-inspect 2\t<pid>\t<drivers>\t<image>\n"   (HEADER, always first)
//!            then, for "ls", records (integers little-endian):
//!              'O' owner:u64 len:u16 group[len]          the owner of the timers after it
//!              'T' id:i32 clock:u8 notify:u8 status:u8 flags:u8 signo:i32 tid:i32
//!                  next_ns:i64 interval_ns:u64 overrun:i64 precision:u64 len:u16 name[len]
//!                                                         one per timer (flags: 1 = next_ns
//!                                                         is set; precision packed as a
//!                                                         timer holds it)
//!              'E' count:u64                             last: an answer without it was cut
//!                                                         short
//!                  for "stats": "s\t<enabled>\n", then the tree in pre-order:
//!                               "g\t<depth>\t<max|->\t<11 counts>\t<6 lateness>\t<name>\t<path>\n"
//!                               "o\t<depth>\t<owner>\t<11 counts>\t<6 lateness>\n"
//!                               "b\t<base>\t<polls>\t<fired>\t<batches>\t<max hold ns>\n"
//!                               and last "end\t<records>\n"
//!  refusals  "denied\n" (another user), "error\t<why>\n" (a request it does not know)
//! ```

use crate::clock::ClockId;
use crate::stats::{BaseStats, Counts, GroupStats, Lateness, OwnerStats, Stats};
use crate::timers::object::types::{NotifyKind, Precision, Status};
use std::fmt::Write as _;

/// The longest request line, `'\n'` included: anything longer is refused unread.
pub const MAX_REQUEST: usize = 64;

/// The first word of every answer's first line.
pub(crate) const MAGIC: &str = "tempora-inspect 2";

/// What a client may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The header alone (which service, which image).
    Hello,
    /// Every timer of every owner.
    List,
    /// The statistics tree.
    Stats,
}

impl Request {
    /// The request's line.
    pub fn line(self) -> &'static str {
        match self {
            Request::Hello => "hello\n",
            Request::List => "ls\n",
            Request::Stats => "stats\n",
        }
    }

    /// Parses a request from the bytes read so far: `Ok(None)` while no `'\n'` came and
    /// fewer than [`MAX_REQUEST`] bytes did; `Err` for anything else that is not a request.
    pub fn parse(bytes: &[u8]) -> Result<Option<Request>, &'static str> {
        let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
            return if bytes.len() >= MAX_REQUEST {
                Err("request too long")
            } else {
                Ok(None)
            };
        };
        if end >= MAX_REQUEST {
            return Err("request too long");
        }
        match &bytes[..end] {
            b"hello" => Ok(Some(Request::Hello)),
            b"ls" => Ok(Some(Request::List)),
            b"stats" => Ok(Some(Request::Stats)),
            _ => Err("unknown request"),
        }
    }
}

/// What the endpoint says of itself: the answer's first line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// The process.
    pub pid: u32,
    /// The service's driver threads.
    pub drivers: usize,
    /// The file the serving copy of tempora was loaded from (the program, or a shared
    /// library such as `libtempora-posix.so`), as the dynamic loader names it; empty if
    /// unknown.
    pub image: String,
}

impl Header {
    pub(crate) fn encode(&self) -> String {
        format!(
            "{MAGIC}\t{}\t{}\t{}\n",
            self.pid,
            self.drivers,
            clean(&self.image)
        )
    }

    pub(crate) fn decode(line: &str) -> Option<Header> {
        let mut f = line.split('\t');
        if f.next()? != MAGIC {
            return None;
        }
        Some(Header {
            pid: f.next()?.parse().ok()?,
            drivers: f.next()?.parse().ok()?,
            image: f.next()?.to_owned(),
        })
    }
}

/// One timer, as `tempora ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The owner's number (as in the statistics).
    pub owner: u64,
    /// The owner's group path; empty for an owner directly under the service.
    pub group: String,
    /// The ID the program received for it (tempora's; the drop-in's `timer_t` carries it in
    /// its low half).
    pub id: i32,
    /// The clock it was created on.
    pub clock: ClockId,
    /// How it notifies.
    pub notify: NotifyKind,
    /// A signal timer's signal number (0 for the other kinds).
    pub signo: i32,
    /// A signal timer's target thread (0: the process).
    pub tid: i32,
    /// Armed, disarmed, or waiting for its event to be consumed.
    pub status: Status,
    /// Nanoseconds until its next expiry on its clock (negative: overdue), if armed.
    pub next_ns: Option<i64>,
    /// Its interval in ns (0: one-shot).
    pub interval_ns: u64,
    /// Expiries missed at its last delivery (the overrun `getoverrun` reports).
    pub overrun: i64,
    /// Its precision: `default`, `precise`, `deferrable` or `slack=<ns>`.
    pub precision: String,
    /// A named callback's name; empty otherwise.
    pub callback: String,
}

/// The name of a clock as a listing shows it.
pub fn clock_name(c: ClockId) -> &'static str {
    match c {
        ClockId::Realtime => "realtime",
        ClockId::Monotonic => "monotonic",
        ClockId::Boottime => "boottime",
    }
}

/// The name of a notification kind as a listing shows it.
pub fn notify_name(n: NotifyKind) -> &'static str {
    match n {
        NotifyKind::None => "none",
        NotifyKind::Queue => "queue",
        NotifyKind::Callback => "callback",
        NotifyKind::Signal => "signal",
    }
}

/// The name of a status as a listing shows it.
pub fn status_name(s: Status) -> &'static str {
    match s {
        Status::Disarmed => "disarmed",
        Status::Armed => "armed",
        Status::RequeuePending => "pending",
    }
}

/// `s` with tabs, newlines and backslashes escaped (`\t`, `\n`, `\\`), and other control
/// characters as `\u{..}`: one field of one line.
fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A listing's record tags (the bytes that start each record of an `ls` answer).
const OWNER: u8 = b'O';
const TIMER: u8 = b'T';
const END: u8 = b'E';

/// A timer record's bytes before its callback name.
const TIMER_FIXED: usize = 1 + 4 + 4 + 4 + 4 + 8 + 8 + 8 + 8 + 2;

/// Flag bits of a timer record.
const HAS_NEXT: u8 = 1;

/// What the endpoint copied of a timer, as it goes on the wire (`put_timer`).
pub(crate) struct TimerRecord<'a> {
    pub(crate) id: i32,
    pub(crate) clock: ClockId,
    pub(crate) notify: NotifyKind,
    pub(crate) status: Status,
    pub(crate) signo: i32,
    pub(crate) tid: i32,
    pub(crate) next_ns: Option<i64>,
    pub(crate) interval_ns: u64,
    pub(crate) overrun: i64,
    /// `Precision::pack`'s bits.
    pub(crate) precision: u64,
    pub(crate) callback: &'a str,
}

/// Appends an owner record: the timer records after it, up to the next, are its.
pub(crate) fn put_owner(out: &mut Vec<u8>, owner: u64, group: &str) {
    let group = &group.as_bytes()[..group.len().min(usize::from(u16::MAX))];
    out.push(OWNER);
    out.extend_from_slice(&owner.to_le_bytes());
    out.extend_from_slice(&(group.len() as u16).to_le_bytes());
    out.extend_from_slice(group);
}

/// Appends a timer record.
pub(crate) fn put_timer(out: &mut Vec<u8>, t: &TimerRecord<'_>) {
    // A name longer than a record holds is cut at a character boundary.
    let mut len = t.callback.len().min(usize::from(u16::MAX));
    while !t.callback.is_char_boundary(len) {
        len -= 1;
    }
    let mut rec = [0u8; TIMER_FIXED];
    rec[0] = TIMER;
    rec[1..5].copy_from_slice(&t.id.to_le_bytes());
    rec[5] = t.clock.index() as u8;
    rec[6] = t.notify as u8;
    rec[7] = t.status as u8;
    rec[8] = if t.next_ns.is_some() { HAS_NEXT } else { 0 };
    rec[9..13].copy_from_slice(&t.signo.to_le_bytes());
    rec[13..17].copy_from_slice(&t.tid.to_le_bytes());
    rec[17..25].copy_from_slice(&t.next_ns.unwrap_or(0).to_le_bytes());
    rec[25..33].copy_from_slice(&t.interval_ns.to_le_bytes());
    rec[33..41].copy_from_slice(&t.overrun.to_le_bytes());
    rec[41..49].copy_from_slice(&t.precision.to_le_bytes());
    rec[49..51].copy_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&rec);
    out.extend_from_slice(&t.callback.as_bytes()[..len]);
}

/// Appends the end record: `count` timer records were sent.
pub(crate) fn put_end(out: &mut Vec<u8>, count: u64) {
    out.push(END);
    out.extend_from_slice(&count.to_le_bytes());
}

/// A listing's next record, as [`Record::read`] decodes it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// An owner record (the entry's `owner` and `group` are set).
    Owner,
    /// A timer record (the entry's other fields are set).
    Timer,
    /// The end record, with its count.
    End(u64),
}

fn le<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b[at..at + N].try_into().expect("in bounds")
}

impl Record {
    /// Decodes the record at the start of `bytes` into `e` (its strings' buffers reused):
    /// the record and its length, `Ok(None)` if `bytes` holds only part of it, `Err` if it
    /// is not a record.
    pub(crate) fn read(bytes: &[u8], e: &mut Entry) -> Result<Option<(Record, usize)>, String> {
        let Some(&tag) = bytes.first() else {
            return Ok(None);
        };
        match tag {
            OWNER => {
                if bytes.len() < 11 {
                    return Ok(None);
                }
                let len = usize::from(u16::from_le_bytes(le(bytes, 9)));
                if bytes.len() < 11 + len {
                    return Ok(None);
                }
                let group = std::str::from_utf8(&bytes[11..11 + len])
                    .map_err(|_| "a group name not in UTF-8".to_owned())?;
                e.owner = u64::from_le_bytes(le(bytes, 1));
                e.group.clear();
                e.group.push_str(group);
                Ok(Some((Record::Owner, 11 + len)))
            }
            TIMER => {
                if bytes.len() < TIMER_FIXED {
                    return Ok(None);
                }
                let len = usize::from(u16::from_le_bytes(le(bytes, 49)));
                if bytes.len() < TIMER_FIXED + len {
                    return Ok(None);
                }
                let bad = |what: &str| format!("a timer record with {what}");
                e.id = i32::from_le_bytes(le(bytes, 1));
                e.clock = *crate::clock::ALL_CLOCKS
                    .get(usize::from(bytes[5]))
                    .ok_or_else(|| bad("an unknown clock"))?;
                e.notify = match bytes[6] {
                    0 => NotifyKind::None,
                    1 => NotifyKind::Queue,
                    2 => NotifyKind::Callback,
                    3 => NotifyKind::Signal,
                    _ => return Err(bad("an unknown notification")),
                };
                e.status = match bytes[7] {
                    0 => Status::Disarmed,
                    1 => Status::Armed,
                    2 => Status::RequeuePending,
                    _ => return Err(bad("an unknown state")),
                };
                e.signo = i32::from_le_bytes(le(bytes, 9));
                e.tid = i32::from_le_bytes(le(bytes, 13));
                e.next_ns = (bytes[8] & HAS_NEXT != 0).then(|| i64::from_le_bytes(le(bytes, 17)));
                e.interval_ns = u64::from_le_bytes(le(bytes, 25));
                e.overrun = i64::from_le_bytes(le(bytes, 33));
                e.precision.clear();
                push_precision(
                    &mut e.precision,
                    Precision::unpack(u64::from_le_bytes(le(bytes, 41))),
                );
                let name = std::str::from_utf8(&bytes[TIMER_FIXED..TIMER_FIXED + len])
                    .map_err(|_| bad("a callback name not in UTF-8"))?;
                e.callback.clear();
                e.callback.push_str(name);
                Ok(Some((Record::Timer, TIMER_FIXED + len)))
            }
            END => {
                if bytes.len() < 9 {
                    return Ok(None);
                }
                Ok(Some((Record::End(u64::from_le_bytes(le(bytes, 1))), 9)))
            }
            t => Err(format!("an unknown record tag {t:#04x}")),
        }
    }
}

/// Appends a precision as a listing shows it: `default`, `precise`, `deferrable` or
/// `slack=<ns>`.
fn push_precision(out: &mut String, p: Precision) {
    match p {
        Precision::Precise => out.push_str("precise"),
        Precision::Deferrable => out.push_str("deferrable"),
        Precision::Slack(d) => {
            let _ = write!(out, "slack={}", d.as_nanos());
        }
        _ => out.push_str("default"),
    }
}

impl Default for Entry {
    fn default() -> Entry {
        Entry {
            owner: 0,
            group: String::new(),
            id: 0,
            clock: ClockId::Monotonic,
            notify: NotifyKind::None,
            signo: 0,
            tid: 0,
            status: Status::Disarmed,
            next_ns: None,
            interval_ns: 0,
            overrun: 0,
            precision: String::new(),
            callback: String::new(),
        }
    }
}

fn counts_fields(c: &Counts) -> [u64; 11] {
    [
        c.live,
        c.created,
        c.deleted,
        c.armed,
        c.disarmed,
        c.expired,
        c.delivered,
        c.overruns,
        c.stale_dropped,
        c.callback_panics,
        c.refused,
    ]
}

fn counts_of(f: &[u64]) -> Counts {
    Counts {
        live: f[0],
        created: f[1],
        deleted: f[2],
        armed: f[3],
        disarmed: f[4],
        expired: f[5],
        delivered: f[6],
        overruns: f[7],
        stale_dropped: f[8],
        callback_panics: f[9],
        refused: f[10],
    }
}

fn lateness_fields(l: &Lateness) -> [u64; 6] {
    [l.count, l.sum_ns, l.p50_ns, l.p99_ns, l.p999_ns, l.max_ns]
}

fn lateness_of(f: &[u64]) -> Lateness {
    Lateness {
        count: f[0],
        sum_ns: f[1],
        p50_ns: f[2],
        p99_ns: f[3],
        p999_ns: f[4],
        max_ns: f[5],
    }
}

fn push_numbers(out: &mut String, nums: &[u64]) {
    for n in nums {
        let _ = write!(out, "\t{n}");
    }
}

/// The statistics' lines (after the header, before `end`) and their count.
pub(crate) fn encode_stats(stats: &Stats, out: &mut String) -> usize {
    fn group(g: &GroupStats, depth: usize, out: &mut String, n: &mut usize) {
        let _ = write!(out, "g\t{depth}\t");
        match g.max_timers {
            Some(m) => {
                let _ = write!(out, "{m}");
            }
            None => out.push('-'),
        }
        push_numbers(out, &counts_fields(&g.counts));
        push_numbers(out, &lateness_fields(&g.lateness));
        let _ = writeln!(out, "\t{}\t{}", clean(&g.name), clean(&g.path));
        *n += 1;
        for o in &g.owners {
            let _ = write!(out, "o\t{}\t{}", depth + 1, o.owner);
            push_numbers(out, &counts_fields(&o.counts));
            push_numbers(out, &lateness_fields(&o.lateness));
            out.push('\n');
            *n += 1;
        }
        for c in &g.groups {
            group(c, depth + 1, out, n);
        }
    }
    let _ = writeln!(out, "s\t{}", u8::from(stats.enabled));
    let mut n = 1;
    group(&stats.root, 0, out, &mut n);
    for b in &stats.bases {
        let _ = writeln!(
            out,
            "b\t{}\t{}\t{}\t{}\t{}",
            b.base, b.polls, b.fired, b.batches, b.max_pop_hold_ns
        );
        n += 1;
    }
    n
}

/// Rebuilds the statistics from their lines (header and `end` taken off).
pub(crate) fn decode_stats<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Stats> {
    let mut stats = Stats::default();
    // The groups being filled, from the root down to the current one.
    let mut path: Vec<GroupStats> = Vec::new();
    // Ends the groups deeper than `depth` (at least 1: the root stays), each into its parent.
    let close_to = |path: &mut Vec<GroupStats>, depth: usize| {
        while path.len() > depth.max(1) {
            let g = path.pop().expect("deeper than the root");
            path.last_mut().expect("the root").groups.push(g);
        }
    };
    let num = |s: &str| s.parse::<u64>().ok();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        match *f.first()? {
            "s" => stats.enabled = *f.get(1)? == "1",
            "g" if f.len() == 22 => {
                let depth: usize = f[1].parse().ok()?;
                if depth > path.len() || (depth == 0) != path.is_empty() {
                    return None;
                }
                if depth > 0 && f[20].is_empty() {
                    return None;
                }
                close_to(&mut path, depth);
                let nums: Vec<u64> = f[3..20].iter().map(|s| num(s)).collect::<Option<_>>()?;
                path.push(GroupStats {
                    name: f[20].to_owned(),
                    path: f[21].to_owned(),
                    max_timers: match f[2] {
                        "-" => None,
                        m => Some(num(m)?),
                    },
                    counts: counts_of(&nums[..11]),
                    lateness: lateness_of(&nums[11..]),
                    groups: Vec::new(),
                    owners: Vec::new(),
                });
            }
            "o" if f.len() == 20 => {
                let depth: usize = f[1].parse().ok()?;
                if depth == 0 || depth > path.len() {
                    return None;
                }
                close_to(&mut path, depth);
                let nums: Vec<u64> = f[3..20].iter().map(|s| num(s)).collect::<Option<_>>()?;
                path.last_mut()?.owners.push(OwnerStats {
                    owner: num(f[2])?,
                    counts: counts_of(&nums[..11]),
                    lateness: lateness_of(&nums[11..]),
                });
            }
            "b" if f.len() == 6 => stats.bases.push(BaseStats {
                base: f[1].parse().ok()?,
                polls: num(f[2])?,
                fired: num(f[3])?,
                batches: num(f[4])?,
                max_pop_hold_ns: num(f[5])?,
            }),
            _ => return None,
        }
    }
    close_to(&mut path, 1);
    if path.len() != 1 {
        return None;
    }
    stats.root = path.pop()?;
    Some(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_anything_else_is_refused() {
        assert_eq!(Request::parse(b"ls\n"), Ok(Some(Request::List)));
        assert_eq!(Request::parse(b"stats\n"), Ok(Some(Request::Stats)));
        assert_eq!(Request::parse(b"hello\n"), Ok(Some(Request::Hello)));
        assert_eq!(Request::parse(b"ls"), Ok(None));
        assert_eq!(Request::parse(b""), Ok(None));
        assert!(Request::parse(b"ls \n").is_err());
        assert!(Request::parse(b"LS\n").is_err());
        assert!(Request::parse(&[b'x'; MAX_REQUEST]).is_err());
        let mut long = vec![b'l'; MAX_REQUEST];
        long.push(b'\n');
        assert!(Request::parse(&long).is_err());
    }

    #[test]
    fn records_round_trip_and_arrive_in_any_pieces() {
        let mut bytes = Vec::new();
        put_owner(&mut bytes, 3, "web/api");
        let t = TimerRecord {
            id: 42,
            clock: ClockId::Boottime,
            notify: NotifyKind::Callback,
            status: Status::Armed,
            signo: 0,
            tid: 0,
            next_ns: Some(-5),
            interval_ns: 1000,
            overrun: 2,
            precision: Precision::Slack(std::time::Duration::from_nanos(500)).pack(),
            callback: "tick\tname",
        };
        put_timer(&mut bytes, &t);
        put_timer(
            &mut bytes,
            &TimerRecord {
                next_ns: None,
                notify: NotifyKind::Signal,
                signo: 40,
                tid: 7,
                status: Status::RequeuePending,
                precision: Precision::Deferrable.pack(),
                callback: "",
                ..t
            },
        );
        put_end(&mut bytes, 2);
        // Every prefix short of a record is "not yet", never an error or a record.
        let mut e = Entry::default();
        let mut at = 0;
        let mut got = Vec::new();
        while at < bytes.len() {
            let (rec, len) = (at + 1..=bytes.len())
                .find_map(|end| Record::read(&bytes[at..end], &mut e).unwrap())
                .expect("a whole record");
            got.push((rec, e.clone()));
            at += len;
        }
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].0, Record::Owner);
        assert_eq!((got[0].1.owner, got[0].1.group.as_str()), (3, "web/api"));
        let first = &got[1].1;
        assert_eq!(got[1].0, Record::Timer);
        assert_eq!(
            first,
            &Entry {
                owner: 3,
                group: "web/api".into(),
                id: 42,
                clock: ClockId::Boottime,
                notify: NotifyKind::Callback,
                signo: 0,
                tid: 0,
                status: Status::Armed,
                next_ns: Some(-5),
                interval_ns: 1000,
                overrun: 2,
                precision: "slack=500".into(),
                callback: "tick\tname".into(),
            }
        );
        let second = &got[2].1;
        assert_eq!(
            (second.next_ns, second.notify, second.signo, second.tid),
            (None, NotifyKind::Signal, 40, 7)
        );
        assert_eq!(
            (second.status, second.precision.as_str()),
            (Status::RequeuePending, "deferrable")
        );
        assert!(second.callback.is_empty());
        assert_eq!(got[3].0, Record::End(2));
        // A byte that starts no record is an error.
        assert!(Record::read(b"x", &mut e).is_err());
        let mut bad = bytes.clone();
        bad[11 + 7 + 5] = 9; // the first timer's clock
        assert!(Record::read(&bad[11 + 7..], &mut e).is_err());
    }
}
