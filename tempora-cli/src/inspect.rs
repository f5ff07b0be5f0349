//! `tempora ls PID` and `tempora stats PID`: a running process's timers and statistics, read
//! through the endpoint each of its services opens (`tempora::inspect`).

use std::io::Write;
use std::time::Duration;
use tempora::inspect::{self, Entry, Header, InspectError};
use tempora::stats::Stats;

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
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn notification(e: &Entry) -> String {
    match inspect::notify_name(e.notify) {
        "signal" if e.tid != 0 => format!("signal {} tid {}", e.signo, e.tid),
        "signal" => format!("signal {}", e.signo),
        "callback" if !e.callback.is_empty() => format!("callback {}", e.callback),
        n => n.to_owned(),
    }
}

fn ns_or_dash(ns: Option<i64>) -> String {
    ns.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// One human line of the listing.
fn ls_line(h: &Header, e: &Entry) -> String {
    let id = match program_id(h, e.id) {
        Some(t) => format!("{t:#018x}"),
        None => e.id.to_string(),
    };
    format!(
        "{:<6} {:<16} {:>18} {:<9} {:<22} {:<8} {:>16} {:>14} {:>7} {}",
        e.owner,
        if e.group.is_empty() { "-" } else { &e.group },
        id,
        clock(e),
        notification(e),
        inspect::status_name(e.status),
        ns_or_dash(e.next_ns),
        e.interval_ns,
        e.overrun,
        e.precision
    )
}

fn clock(e: &Entry) -> &'static str {
    inspect::clock_name(e.clock)
}

/// One JSON line of the listing.
fn ls_json(h: &Header, e: &Entry) -> String {
    let mut s = format!(
        "{{\"pid\":{},\"image\":{},\"owner\":{},\"group\":{},\"id\":{}",
        h.pid,
        json_str(&h.image),
        e.owner,
        json_str(&e.group),
        e.id
    );
    if let Some(t) = program_id(h, e.id) {
        s.push_str(&format!(",\"timer_t\":\"{t:#018x}\""));
    }
    s.push_str(&format!(
        ",\"clock\":\"{}\",\"notify\":\"{}\",\"signo\":{},\"tid\":{},\"callback\":{},\
         \"state\":\"{}\",\"next_ns\":{},\"interval_ns\":{},\"overrun\":{},\"precision\":{}}}",
        clock(e),
        inspect::notify_name(e.notify),
        e.signo,
        e.tid,
        json_str(&e.callback),
        inspect::status_name(e.status),
        e.next_ns
            .map_or_else(|| "null".to_owned(), |n| n.to_string()),
        e.interval_ns,
        e.overrun,
        json_str(&e.precision)
    ));
    s
}

fn fail(cmd: &str, e: &InspectError) -> i32 {
    eprintln!("tempora {cmd}: {e}");
    match e {
        InspectError::Denied(_) => 77, // EX_NOPERM
        InspectError::NoProcess(_) | InspectError::NoEndpoint(_) => 2,
        _ => 1,
    }
}

/// Runs `tempora ls`; the exit code.
pub fn ls(opts: &LsOpts) -> i32 {
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out.lock());
    let mut last: Option<Header> = None;
    let mut broken = false;
    let r = inspect::list(opts.pid, TIMEOUT, |h, e| {
        if broken {
            return;
        }
        let line = if opts.json {
            ls_json(h, &e)
        } else {
            if last.as_ref() != Some(h) {
                let _ = writeln!(
                    out,
                    "# pid {} service {} ({} driver{})\n{:<6} {:<16} {:>18} {:<9} {:<22} {:<8} \
                     {:>16} {:>14} {:>7} PRECISION",
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
                );
                last = Some(h.clone());
            }
            ls_line(h, &e)
        };
        broken = writeln!(out, "{line}").is_err();
    });
    let _ = out.flush();
    match r {
        Ok(_) => 0,
        Err(e) => fail("ls", &e),
    }
}

/// Runs `tempora stats`; the exit code.
pub fn stats(opts: &StatsOpts) -> i32 {
    let services = match inspect::stats(opts.pid, TIMEOUT) {
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
