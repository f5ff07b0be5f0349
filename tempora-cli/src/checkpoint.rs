//! `tempora checkpoint demo` and `tempora checkpoint inspect`.
//!
//! The demo builds an owner with a mix of timers on a manual clock, checkpoints it to a file,
//! and restores it in a second process (this binary, `checkpoint replay`, hidden). Both
//! processes then print the owner's listing and its next firings over the same 200 ms of
//! manual time; the demo shows them side by side and exits 1 if they differ.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempora::checkpoint::{Expiry, Snapshot};
use tempora::clock::{ClockId, ClockSource, ManualClock};
use tempora::TimerId;
use tempora::{Notify, Owner, SetFlags, Timers};

/// `tempora checkpoint ...`
#[derive(Debug, clap::Subcommand)]
pub enum Cmd {
    /// Build an owner with a mix of timers, checkpoint it to a file, restore it in a second
    /// process, and show that both listings and the next firings match.
    Demo {
        /// Keep the snapshot in this file (default: a temporary file, removed afterwards).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print a snapshot file as a table. Exits 1 with a one-line error on a bad file.
    Inspect { file: PathBuf },
    /// The demo's second process: restore FILE at wall time REALTIME and replay.
    #[command(hide = true)]
    Replay {
        file: PathBuf,
        #[arg(long)]
        realtime: u64,
    },
}

const STEP_MS: u64 = 5;
const STEPS: u64 = 40;

type Log = Arc<Mutex<Vec<String>>>;

fn named(log: &Log, name: &'static str) -> Notify {
    let log = log.clone();
    Notify::callback_named(name, move |fired| {
        let (id, overrun) = (fired.id(), fired.overrun());
        log.lock()
            .unwrap()
            .push(format!("callback {name:<9} id {id:>4}  overrun {overrun}"));
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The demo owner: periodic and one-shot timers on every clock and notification, a timer with
/// a restored (sparse) ID, a disarmed one, a SIGEV_NONE one, then 37 ms of running with some
/// events consumed and some left pending.
fn build(clock: &ManualClock, timers: &Timers, log: &Log) -> Owner {
    let o = timers.owner();
    let arm = |id: TimerId, flags, value: Duration, interval: Duration| {
        o.settime(id, flags, value, interval).expect("settime");
    };
    let mono = |n| o.create(ClockId::Monotonic, n).expect("create");
    for (i, period) in [10, 25, 40].into_iter().enumerate() {
        let id = mono(Notify::Queue);
        arm(id, SetFlags::RELATIVE, ms(5 + i as u64), ms(period));
    }
    let wall = o.create(ClockId::Realtime, Notify::Queue).expect("create");
    let at = clock.now(ClockId::Realtime) + 150_000_000;
    arm(
        wall,
        SetFlags::ABSTIME,
        Duration::from_nanos(at),
        Duration::ZERO,
    );
    let audit = o
        .create(ClockId::Realtime, named(log, "audit"))
        .expect("create");
    arm(audit, SetFlags::RELATIVE, ms(70), Duration::ZERO);
    let beat = o
        .create(ClockId::Boottime, named(log, "heartbeat"))
        .expect("create");
    arm(beat, SetFlags::RELATIVE, ms(30), ms(30));
    let none = mono(Notify::None);
    arm(none, SetFlags::RELATIVE, ms(500), Duration::ZERO);
    mono(Notify::Queue); // never armed
    o.set_restore_ids(true);
    let restored = o
        .create_with_id(1000, ClockId::Monotonic, Notify::Queue)
        .expect("create 1000");
    arm(restored, SetFlags::RELATIVE, ms(15), ms(15));
    o.set_restore_ids(false);
    clock.advance(ms(37));
    timers.poll();
    // Consume two events; the rest stay pending through the checkpoint.
    o.try_recv();
    o.try_recv();
    o
}

fn clock_name(c: ClockId) -> &'static str {
    match c {
        ClockId::Monotonic => "monotonic",
        ClockId::Realtime => "realtime",
        ClockId::Boottime => "boottime",
        // A clock this build of the CLI does not know by name.
        _ => "other",
    }
}

/// The owner's listing, one line per timer, by ID.
fn listing(o: &Owner) -> Vec<String> {
    let mut ts = o.timers();
    ts.sort_by_key(|t| t.id);
    ts.iter()
        .map(|t| {
            let (value, interval) = o.gettime(t.id).expect("gettime").as_nanos();
            format!(
                "id {:>4}  {:<9}  {:<8}  {:<14}  left {:>9.3} ms  every {:>3} ms  overrun {}",
                t.id,
                clock_name(t.clock),
                format!("{:?}", t.notify),
                format!("{:?}", t.status),
                value as f64 / 1e6,
                interval / 1_000_000,
                o.getoverrun(t.id).expect("getoverrun"),
            )
        })
        .collect()
}

/// Steps the manual clock and records what fires, with the time since the checkpoint.
fn replay(clock: &ManualClock, timers: &Timers, o: &Owner, log: &Log) -> Vec<String> {
    let mut out = Vec::new();
    for step in 1..=STEPS {
        clock.advance(ms(STEP_MS));
        timers.poll();
        let mut events: Vec<_> = o.try_iter().collect();
        events.sort_by_key(|e| e.id);
        let t = step * STEP_MS;
        for e in events {
            out.push(format!(
                "+{t:>3} ms  queue    {:<9} id {:>4}  overrun {}",
                "", e.id, e.overrun
            ));
        }
        let mut calls = std::mem::take(&mut *log.lock().unwrap());
        calls.sort();
        out.extend(calls.into_iter().map(|c| format!("+{t:>3} ms  {c}")));
    }
    out
}

pub fn run(cmd: Cmd) -> i32 {
    match cmd {
        Cmd::Demo { out } => demo(out),
        Cmd::Inspect { file } => match Snapshot::load_from(&file) {
            Ok(s) => {
                inspect(&s);
                0
            }
            Err(e) => {
                eprintln!(
                    "tempora checkpoint inspect: {}: {}",
                    file.display(),
                    chain(&e)
                );
                1
            }
        },
        Cmd::Replay { file, realtime } => second_process(&file, realtime),
    }
}

fn service(clock: &ManualClock) -> Timers {
    Timers::builder()
        .clock(clock.clone())
        .build()
        .expect("valid configuration")
}

fn demo(out: Option<PathBuf>) -> i32 {
    let (path, keep) = match out {
        Some(p) => (p, true),
        None => (
            std::env::temp_dir().join(format!("tempora-demo-{}.ckpt", std::process::id())),
            false,
        ),
    };
    let clock = ManualClock::new();
    let timers = service(&clock);
    let log: Log = Arc::default();
    let owner = build(&clock, &timers, &log);
    log.lock().unwrap().clear(); // callbacks before the checkpoint are not part of the replay
    let snap = owner.checkpoint();
    if let Err(e) = snap.save_to(&path) {
        eprintln!("tempora checkpoint demo: {}: {}", path.display(), chain(&e));
        return 1;
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "checkpointed {} timers to {} ({bytes} bytes)\n",
        snap.timers.len(),
        path.display()
    );
    inspect(&snap);
    let mine_list = listing(&owner);
    let mine_fires = replay(&clock, &timers, &owner, &log);
    let wall = clock.now(ClockId::Realtime) - STEPS * STEP_MS * 1_000_000;
    let exe = std::env::current_exe().expect("own path");
    let child = Command::new(exe)
        .args(["checkpoint", "replay"])
        .arg(&path)
        .args(["--realtime", &wall.to_string()])
        .output();
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
    let child = match child {
        Ok(c) if c.status.success() => String::from_utf8_lossy(&c.stdout).into_owned(),
        Ok(c) => {
            eprintln!(
                "tempora checkpoint demo: the restoring process failed: {}",
                String::from_utf8_lossy(&c.stderr).trim()
            );
            return 1;
        }
        Err(e) => {
            eprintln!("tempora checkpoint demo: cannot start the restoring process: {e}");
            return 1;
        }
    };
    let mut parts = child.split("--\n");
    let theirs_list: Vec<String> = parts
        .next()
        .unwrap_or("")
        .lines()
        .map(String::from)
        .collect();
    let theirs_fires: Vec<String> = parts
        .next()
        .unwrap_or("")
        .lines()
        .map(String::from)
        .collect();
    let same_list = mine_list == theirs_list;
    let same_fires = mine_fires == theirs_fires;
    println!("\nlisting after the checkpoint (this process | restored in process 2):");
    side_by_side(&mine_list, &theirs_list);
    println!(
        "\nnext firings over {} ms (this process | restored in process 2):",
        STEPS * STEP_MS
    );
    side_by_side(&mine_fires, &theirs_fires);
    println!(
        "\nlistings {}, next firings {} ({} firings)",
        if same_list { "match" } else { "DIFFER" },
        if same_fires { "match" } else { "DIFFER" },
        mine_fires.len()
    );
    if keep {
        println!("snapshot kept in {}", path.display());
    }
    i32::from(!(same_list && same_fires))
}

fn side_by_side(a: &[String], b: &[String]) {
    for i in 0..a.len().max(b.len()) {
        let l = a.get(i).map_or("", String::as_str);
        let r = b.get(i).map_or("", String::as_str);
        let mark = if l == r { " " } else { "≠" };
        println!("  {l:<78} {mark} {r}");
    }
}

/// The demo's second process: restores the snapshot in a fresh service whose wall clock reads
/// `realtime` (the machine's wall clock in a real restore), prints the listing, `--`, and
/// the firings of the same replay.
fn second_process(file: &Path, realtime: u64) -> i32 {
    let snap = match Snapshot::load_from(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: {}", file.display(), chain(&e));
            return 1;
        }
    };
    // Another process: its monotonic and boot clocks are elsewhere; only wall time is shared.
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(86_400));
    clock.set_realtime(realtime);
    let timers = service(&clock);
    let log: Log = Arc::default();
    let owner = timers.owner();
    let restored = owner.restore(&snap, |name| match name {
        "audit" => Some(named(&log, "audit")),
        "heartbeat" => Some(named(&log, "heartbeat")),
        _ => None,
    });
    if let Err(e) = restored {
        eprintln!("restore: {e}");
        return 1;
    }
    for l in listing(&owner) {
        println!("{l}");
    }
    println!("--");
    for l in replay(&clock, &timers, &owner, &log) {
        println!("{l}");
    }
    0
}

fn inspect(s: &Snapshot) {
    println!(
        "tempora snapshot, format {}.x: {} timers, next ID {}, exact-ID mode {}",
        tempora::checkpoint::VERSION.0,
        s.timers.len(),
        s.counter,
        if s.restore_ids { "on" } else { "off" }
    );
    println!(
        "  {:>6}  {:<9}  {:<10}  {:<14}  {:<7}  {:<30}  {:>12}  {:>7}  {:>7}",
        "id", "clock", "notify", "status", "pending", "expiry", "interval ms", "overrun", "latched"
    );
    for t in &s.timers {
        let expiry = match t.expiry {
            Expiry::None => "-".to_string(),
            Expiry::Remaining { clock, ns } => {
                format!("{:.3} ms left ({})", ns as f64 / 1e6, clock_name(clock))
            }
            Expiry::Realtime(ns) => {
                format!("at {}.{:09} (wall)", ns / 1_000_000_000, ns % 1_000_000_000)
            }
            other => format!("{other:?}"),
        };
        println!(
            "  {:>6}  {:<9}  {:<10}  {:<14}  {:<7}  {:<30}  {:>12.3}  {:>7}  {:>7}",
            t.id.get(),
            clock_name(t.clock),
            t.notify,
            format!("{:?}", t.status),
            if t.pending { "yes" } else { "no" },
            expiry,
            t.interval as f64 / 1e6,
            t.overrun,
            t.overrun_last
        );
    }
}

/// An error and its sources, joined by ": " (`tempora::Error`'s `Display` leaves its source's
/// text to `source()`, so an I/O error reads "I/O error: No such file or directory ...").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
