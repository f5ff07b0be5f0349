//! `tempora ls PID` and `tempora stats PID`: a running process's timers and statistics, read
//! through the endpoint each of its services opens (`tempora::inspect`).

use std::io::Write;
use std::time::Duration;
use tempora::inspect::{self, Entry, Header, InspectError};
use tempora::stats::Stats;
use tempora::NotifyKind;

/// How long a client waits for an answer's next bytes.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `tempora ls` options.
#[derive(clap::Args, Debug)]
pub struct LsOpts {
    /// The process.
    pub pid: u32,
    /// One JSON object per timer, one per line (for tools).
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the process's answer (a service without driver threads answers
    /// only when the program polls it).
    #[arg(long, default_value_t = TIMEOUT.as_secs_f64())]
    pub timeout: f64,
}

impl LsOpts {
    fn timeout(&self) -> Duration {
        secs(self.timeout)
    }
}

impl StatsOpts {
    fn timeout(&self) -> Duration {
        secs(self.timeout)
    }
}

/// A `--timeout`'s duration (at least 1 ms: a zero read timeout would mean none).
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s)
        .unwrap_or(TIMEOUT)
        .max(Duration::from_millis(1))
}

/// `tempora stats` options.
#[derive(clap::Args, Debug)]
pub struct StatsOpts {
    /// The process.
    pub pid: u32,
    /// Prometheus's text format (the default).
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
    /// The tree as JSON: `{"pid":..,"services":[{"image":..,"drivers":..,"stats":{..}}]}`.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the process's answer (a service without driver threads answers
    /// only when the program polls it).
    #[arg(long, default_value_t = TIMEOUT.as_secs_f64())]
    pub timeout: f64,
}

/// The high half of the drop-in's `timer_t` ("tpos"), which `libtempora-posix.so` hands a
/// program for tempora's timer `id` (`tempora_posix::timer_of`). Kept here, in
/// [`program_id`] alone, because the CLI cannot link that crate (its rlib would define
/// `timer_create` & co. for this process): a change of the tag scheme changes this function.
const DROPIN_TAG: u64 = 0x7470_6f73;

/// The value the program holds for timer `id` of the service `h`, when it is not the ID
/// itself: the drop-in's `timer_t` for a service served from `libtempora-posix`.
pub fn program_id(h: &Header, id: i32) -> Option<u64> {
    let file = h.image.rsplit('/').next().unwrap_or_default();
    (file.starts_with("libtempora-posix") || file.starts_with("libtempora_posix"))
        .then(|| (DROPIN_TAG << 32) | u64::from(id as u32))
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    push_json_str(&mut out, s);
    String::from_utf8(out).expect("escaped UTF-8 is UTF-8")
}

/// Appends `s` as a JSON string literal.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.extend_from_slice(s.as_bytes());
    } else {
        for c in s.chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                c if (c as u32) < 0x20 => {
                    out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
                }
                c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
    }
    out.push(b'"');
}

/// Appends an integer.
fn push_num(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `s` padded with spaces to `width` characters, on the right (`left`) or the left.
fn push_pad(out: &mut Vec<u8>, s: &[u8], width: usize, left: bool) {
    let chars = if s.is_ascii() {
        s.len()
    } else {
        String::from_utf8_lossy(s).chars().count()
    };
    let pad = width.saturating_sub(chars);
    if !left {
        out.resize(out.len() + pad, b' ');
    }
    out.extend_from_slice(s);
    if left {
        out.resize(out.len() + pad, b' ');
    }
}

/// Appends an integer padded to `width`.
fn push_num_pad(out: &mut Vec<u8>, n: impl itoa::Integer, width: usize, left: bool) {
    push_pad(out, itoa::Buffer::new().format(n).as_bytes(), width, left);
}

/// Appends the notification column: `signal N [tid T]`, `callback NAME`, or the kind.
fn push_notification(out: &mut Vec<u8>, e: &Entry) {
    let start = out.len();
    match e.notify {
        NotifyKind::Signal => {
            out.extend_from_slice(b"signal ");
            push_num(out, e.signo);
            if e.tid != 0 {
                out.extend_from_slice(b" tid ");
                push_num(out, e.tid);
            }
        }
        NotifyKind::Callback if !e.callback.is_empty() => {
            out.extend_from_slice(b"callback ");
            out.extend_from_slice(e.callback.as_bytes());
        }
        n => out.extend_from_slice(inspect::notify_name(n).as_bytes()),
    }
    let text = out.split_off(start);
    push_pad(out, &text, 22, true);
}

/// The ID column as the program knows it: the drop-in's `timer_t` in hex, or the ID.
fn push_id(out: &mut Vec<u8>, h: &Header, id: i32, width: usize) {
    match program_id(h, id) {
        Some(t) => push_pad(out, format_timer_t(t).as_bytes(), width, false),
        None => push_num_pad(out, id, width, false),
    }
}

/// `{t:#018x}`, without `core::fmt`.
fn format_timer_t(t: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = [b'0'; 18];
    s[1] = b'x';
    for (i, d) in s[2..].iter_mut().enumerate() {
        *d = HEX[((t >> ((15 - i) * 4)) & 0xf) as usize];
    }
    String::from_utf8(s.to_vec()).expect("hex digits")
}

/// Appends one human line of the listing.
fn ls_line(out: &mut Vec<u8>, h: &Header, e: &Entry) {
    push_num_pad(out, e.owner, 6, true);
    out.push(b' ');
    let group = if e.group.is_empty() { "-" } else { &e.group };
    push_pad(out, group.as_bytes(), 16, true);
    out.push(b' ');
    push_id(out, h, e.id, 18);
    out.push(b' ');
    push_pad(out, inspect::clock_name(e.clock).as_bytes(), 9, true);
    out.push(b' ');
    push_notification(out, e);
    out.push(b' ');
    push_pad(out, inspect::status_name(e.status).as_bytes(), 8, true);
    out.push(b' ');
    match e.next_ns {
        Some(n) => push_num_pad(out, n, 16, false),
        None => push_pad(out, b"-", 16, false),
    }
    out.push(b' ');
    push_num_pad(out, e.interval_ns, 14, false);
    out.push(b' ');
    push_num_pad(out, e.overrun, 7, false);
    out.push(b' ');
    out.extend_from_slice(e.precision.as_bytes());
    out.push(b'\n');
}

/// Appends one JSON line of the listing; `prefix` is the service's part
/// (`{"pid":..,"image":..,`), the same for every line.
fn ls_json(out: &mut Vec<u8>, prefix: &[u8], h: &Header, e: &Entry) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(b"\"owner\":");
    push_num(out, e.owner);
    out.extend_from_slice(b",\"group\":");
    push_json_str(out, &e.group);
    out.extend_from_slice(b",\"id\":");
    push_num(out, e.id);
    if let Some(t) = program_id(h, e.id) {
        out.extend_from_slice(b",\"timer_t\":\"");
        out.extend_from_slice(format_timer_t(t).as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b",\"clock\":\"");
    out.extend_from_slice(inspect::clock_name(e.clock).as_bytes());
    out.extend_from_slice(b"\",\"notify\":\"");
    out.extend_from_slice(inspect::notify_name(e.notify).as_bytes());
    out.extend_from_slice(b"\",\"signo\":");
    push_num(out, e.signo);
    out.extend_from_slice(b",\"tid\":");
    push_num(out, e.tid);
    out.extend_from_slice(b",\"callback\":");
    push_json_str(out, &e.callback);
    out.extend_from_slice(b",\"state\":\"");
    out.extend_from_slice(inspect::status_name(e.status).as_bytes());
    out.extend_from_slice(b"\",\"next_ns\":");
    match e.next_ns {
        Some(n) => push_num(out, n),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"interval_ns\":");
    push_num(out, e.interval_ns);
    out.extend_from_slice(b",\"overrun\":");
    push_num(out, e.overrun);
    out.extend_from_slice(b",\"precision\":");
    push_json_str(out, &e.precision);
    out.extend_from_slice(b"}\n");
}

/// The header of a service's table.
fn table_header(h: &Header) -> String {
    format!(
        "# pid {} service {} ({} driver{})\n{:<6} {:<16} {:>18} {:<9} {:<22} {:<8} \
         {:>16} {:>14} {:>7} PRECISION\n",
        h.pid,
        if h.image.is_empty() { "?" } else { &h.image },
        h.drivers,
        if h.drivers == 1 { "" } else { "s" },
        "OWNER",
        "GROUP",
        "ID",
        "CLOCK",
        "NOTIFY",
        "STATE",
        "NEXT_NS",
        "INTERVAL_NS",
        "OVERRUN"
    )
}

fn fail(cmd: &str, e: &InspectError) -> i32 {
    eprintln!("tempora {cmd}: {e}");
    match e {
        InspectError::Denied(_) => 77, // EX_NOPERM
        InspectError::NoProcess(_) | InspectError::NoEndpoint(_) => 2,
        InspectError::NotPolled(_) => 75, // EX_TEMPFAIL: it may answer once it polls
        _ => 1,
    }
}

/// Runs `tempora ls`; the exit code.
pub fn ls(opts: &LsOpts) -> i32 {
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    // Lines gathered here and written 256 KiB at a time.
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 18 | 1 << 12);
    let mut last: Option<Header> = None;
    let mut prefix = Vec::new();
    let mut broken = false;
    let r = inspect::list(opts.pid, opts.timeout(), |h, e| {
        if broken {
            return;
        }
        if last.as_ref() != Some(h) {
            if opts.json {
                prefix.clear();
                prefix.extend_from_slice(b"{\"pid\":");
                push_num(&mut prefix, h.pid);
                prefix.extend_from_slice(b",\"image\":");
                push_json_str(&mut prefix, &h.image);
                prefix.push(b',');
            } else {
                buf.extend_from_slice(table_header(h).as_bytes());
            }
            last = Some(h.clone());
        }
        if opts.json {
            ls_json(&mut buf, &prefix, h, e);
        } else {
            ls_line(&mut buf, h, e);
        }
        if buf.len() >= 1 << 18 {
            broken = stdout.write_all(&buf).is_err();
            buf.clear();
        }
    });
    if !broken {
        let _ = stdout.write_all(&buf);
    }
    let _ = stdout.flush();
    match r {
        Ok(_) => 0,
        Err(e) => fail("ls", &e),
    }
}

/// Runs `tempora stats`; the exit code.
pub fn stats(opts: &StatsOpts) -> i32 {
    let services = match inspect::stats(opts.pid, opts.timeout()) {
        Ok(s) => s,
        Err(e) => return fail("stats", &e),
    };
    if opts.json {
        let parts: Vec<String> = services
            .iter()
            .map(|(h, s)| {
                format!(
                    "{{\"image\":{},\"drivers\":{},\"stats\":{}}}",
                    json_str(&h.image),
                    h.drivers,
                    s.to_json()
                )
            })
            .collect();
        println!(
            "{{\"pid\":{},\"services\":[{}]}}",
            opts.pid,
            parts.join(",")
        );
    } else {
        for (i, (h, s)) in services.iter().enumerate() {
            if services.len() > 1 {
                println!("# service {i}: {} ({} drivers)", h.image, h.drivers);
            }
            print!("{}", s.to_prometheus());
        }
    }
    0
}

/// The statistics `top --pid` shows: those of the process's busiest service (most timers
/// created), and how many services it has.
pub fn top_source(pid: u32) -> Result<(Stats, usize), InspectError> {
    let services = inspect::stats(pid, TIMEOUT)?;
    let n = services.len();
    let best = services
        .into_iter()
        .max_by_key(|(_, s)| s.root.counts.created)
        .map(|(_, s)| s)
        .ok_or(InspectError::NoEndpoint(pid))?;
    Ok((best, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempora::clock::ClockId;
    use tempora::Status;

    /// The columns as `format!` lays them out: what the hand-made line must equal.
    fn reference_line(h: &Header, e: &Entry) -> String {
        let id = match program_id(h, e.id) {
            Some(t) => format!("{t:#018x}"),
            None => e.id.to_string(),
        };
        let notification = match e.notify {
            NotifyKind::Signal if e.tid != 0 => format!("signal {} tid {}", e.signo, e.tid),
            NotifyKind::Signal => format!("signal {}", e.signo),
            NotifyKind::Callback if !e.callback.is_empty() => format!("callback {}", e.callback),
            n => inspect::notify_name(n).to_owned(),
        };
        format!(
            "{:<6} {:<16} {:>18} {:<9} {:<22} {:<8} {:>16} {:>14} {:>7} {}\n",
            e.owner,
            if e.group.is_empty() { "-" } else { &e.group },
            id,
            inspect::clock_name(e.clock),
            notification,
            inspect::status_name(e.status),
            e.next_ns.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            e.interval_ns,
            e.overrun,
            e.precision
        )
    }

    fn entries() -> Vec<Entry> {
        let mut a = Entry::default();
        a.owner = 12;
        a.group = "web/ünïcode".into();
        a.id = 7;
        a.clock = ClockId::Boottime;
        a.notify = NotifyKind::Callback;
        a.callback = "tick \"q\"\\".into();
        a.status = Status::Armed;
        a.next_ns = Some(-42);
        a.interval_ns = 1_000_000;
        a.overrun = 3;
        a.precision = "slack=500".into();
        let mut b = a.clone();
        b.group.clear();
        b.id = i32::MAX;
        b.notify = NotifyKind::Signal;
        b.signo = 34;
        b.tid = 4321;
        b.callback.clear();
        b.next_ns = None;
        b.overrun = -1;
        b.status = Status::RequeuePending;
        b.precision = "default".into();
        let mut c = b.clone();
        c.tid = 0;
        c.group = "a-group-name-longer-than-its-column".into();
        let mut d = c.clone();
        d.notify = NotifyKind::None;
        d.next_ns = Some(i64::MAX);
        vec![a, b, c, d]
    }

    #[test]
    fn the_fast_columns_are_formats_columns() {
        for image in ["/bin/prog", "/lib/libtempora_posix.so"] {
            let mut h = Header::default();
            h.image = image.into();
            for e in entries() {
                let mut out = Vec::new();
                ls_line(&mut out, &h, &e);
                assert_eq!(String::from_utf8(out).unwrap(), reference_line(&h, &e));
            }
        }
    }

    #[test]
    fn a_json_line_is_json_with_every_field() {
        let mut h = Header::default();
        h.image = "/lib/libtempora_posix.so \"x\"".into();
        let mut prefix = Vec::new();
        prefix.extend_from_slice(b"{\"pid\":99,\"image\":");
        push_json_str(&mut prefix, &h.image);
        prefix.push(b',');
        for e in entries() {
            let mut out = Vec::new();
            ls_json(&mut out, &prefix, &h, &e);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["image"], h.image.as_str());
            assert_eq!(v["group"], e.group.as_str());
            assert_eq!(v["callback"], e.callback.as_str());
            assert_eq!(v["id"], e.id);
            assert_eq!(
                v["timer_t"],
                format!("{:#018x}", 0x7470_6f73_u64 << 32 | e.id as u64)
            );
            assert_eq!(v["next_ns"], serde_json::json!(e.next_ns));
            assert_eq!(v["overrun"], e.overrun);
            assert_eq!(v["signo"], e.signo);
            assert_eq!(v["tid"], e.tid);
            assert_eq!(v["precision"], e.precision.as_str());
            assert_eq!(v["state"], inspect::status_name(e.status));
        }
    }
}
