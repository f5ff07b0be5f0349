//! The inspection channel's wire format, both sides: the request a client sends, and the
//! lines the endpoint answers with. Text, one record a line, fields split by tabs (no field
//! can hold a tab: group names refuse control characters, callback names are escaped).
//!
//! ```text
//!  request   one line, at most MAX_REQUEST bytes with its '\n': "ls" | "stats" | "hello"
//!  answer    "tempora-inspect 1\t<pid>\t<drivers>\t<image>\n"   (HEADER, always first)
//!            then, for "ls":    "t\t<owner>\t<group>\t<id>\t<clock>\t<notify>\t<signo>\t
//!                                <tid>\t<status>\t<next_ns>\t<interval_ns>\t<overrun>\t
//!                                <precision>\t<callback name>\n"   one per timer
//!                  for "stats": "s\t<enabled>\n", then the tree in pre-order:
//!                               "g\t<depth>\t<max|->\t<11 counts>\t<6 lateness>\t<name>\t<path>\n"
//!                               "o\t<depth>\t<owner>\t<11 counts>\t<6 lateness>\n"
//!                               "b\t<base>\t<polls>\t<fired>\t<batches>\t<max hold ns>\n"
//!            and last "end\t<records>\n": an answer without it was cut short.
//!  refusals  "denied\n" (another user), "error\t<why>\n" (a request it does not know)
//! ```

use super::super::types::{NotifyKind, Status};
use crate::clock::ClockId;
use crate::stats::{BaseStats, Counts, GroupStats, Lateness, OwnerStats, Stats};
use std::fmt::Write as _;

/// The longest request line, `'\n'` included: anything longer is refused unread.
pub const MAX_REQUEST: usize = 64;

/// The first word of every answer's first line.
pub(crate) const MAGIC: &str = "tempora-inspect 1";

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
#[derive(Debug, Clone, PartialEq, Eq)]
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

fn clock_of(s: &str) -> Option<ClockId> {
    Some(match s {
        "realtime" => ClockId::Realtime,
        "monotonic" => ClockId::Monotonic,
        "boottime" => ClockId::Boottime,
        _ => return None,
    })
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

fn notify_of(s: &str) -> Option<NotifyKind> {
    Some(match s {
        "none" => NotifyKind::None,
        "queue" => NotifyKind::Queue,
        "callback" => NotifyKind::Callback,
        "signal" => NotifyKind::Signal,
        _ => return None,
    })
}

/// The name of a status as a listing shows it.
pub fn status_name(s: Status) -> &'static str {
    match s {
        Status::Disarmed => "disarmed",
        Status::Armed => "armed",
        Status::RequeuePending => "pending",
    }
}

fn status_of(s: &str) -> Option<Status> {
    Some(match s {
        "disarmed" => Status::Disarmed,
        "armed" => Status::Armed,
        "pending" => Status::RequeuePending,
        _ => return None,
    })
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

impl Entry {
    /// Appends the entry's line to `out`.
    pub(crate) fn encode(&self, out: &mut String) {
        let _ = write!(
            out,
            "t\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t",
            self.owner,
            self.group,
            self.id,
            clock_name(self.clock),
            notify_name(self.notify),
            self.signo,
            self.tid,
            status_name(self.status),
        );
        match self.next_ns {
            Some(ns) => {
                let _ = write!(out, "{ns}");
            }
            None => out.push('-'),
        }
        let _ = writeln!(
            out,
            "\t{}\t{}\t{}\t{}",
            self.interval_ns,
            self.overrun,
            self.precision,
            clean(&self.callback)
        );
    }

    /// Parses an entry's line (without its `'\n'`).
    pub(crate) fn decode(line: &str) -> Option<Entry> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 14 || f[0] != "t" {
            return None;
        }
        Some(Entry {
            owner: f[1].parse().ok()?,
            group: f[2].to_owned(),
            id: f[3].parse().ok()?,
            clock: clock_of(f[4])?,
            notify: notify_of(f[5])?,
            signo: f[6].parse().ok()?,
            tid: f[7].parse().ok()?,
            status: status_of(f[8])?,
            next_ns: match f[9] {
                "-" => None,
                n => Some(n.parse().ok()?),
            },
            interval_ns: f[10].parse().ok()?,
            overrun: f[11].parse().ok()?,
            precision: f[12].to_owned(),
            callback: f[13].to_owned(),
        })
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
    fn an_entry_round_trips_through_its_line() {
        let e = Entry {
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
        };
        let mut line = String::new();
        e.encode(&mut line);
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "{line}"
        );
        let back = Entry::decode(line.trim_end_matches('\n')).unwrap();
        assert_eq!(back.callback, "tick\\tname");
        assert_eq!(
            Entry {
                callback: e.callback.replace('\t', "\\t"),
                ..e
            },
            back
        );
    }
}
