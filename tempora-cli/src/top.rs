//! `tempora top`: a live terminal view of a service's statistics, of a running process
//! (`--pid PID`, read through its inspection endpoint, `tempora::inspect`) or of a demo
//! workload this command starts itself (`--demo`).
//!
//! The view is a tree of groups and owners with, per row: live timers, arms/s, fires/s,
//! overruns/s, refused creates/s and lateness p99. Rates are the difference between two
//! readings of [`Timers::stats`] divided by the time between them; each reading flushes the
//! per-thread counters (the workload's threads never wait for it). Siblings are sorted by the
//! chosen column (keys `1`..`7`, or `s` for the next column; `r` reverses); `q`, Esc or
//! Ctrl-C quits and restores the terminal.
//!
//! The demo (`Demo::start`): groups `web/api` (connections whose idle timeouts are re-armed
//! on every request, a few going idle and firing), `web/static` (periodic 10 ms timers, read
//! as they come), `batch/jobs` (one-shot jobs created, armed, awaited and deleted, capped at
//! 150 live timers so some creates are refused), `cron` (periodic callbacks) and `slow` (an
//! owner whose periodic 1 ms timers are read once every two seconds, so each event it reads
//! carries a large overrun and its overruns/s climb).

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tempora::clock::ClockId;
use tempora::stats::{Counts, GroupStats, Stats};
use tempora::{Notify, SetFlags, Timers};

/// `tempora top` options.
#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Start the demo workload and show it.
    #[arg(long, conflicts_with = "pid")]
    pub demo: bool,
    /// Show the running process PID (its busiest tempora service); ends when it exits.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Milliseconds between refreshes.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
}

/// The columns, in order; the first is the name.
const COLUMNS: [&str; 7] = [
    "group / owner",
    "live",
    "arms/s",
    "fires/s",
    "overruns/s",
    "refused/s",
    "late p99",
];

/// One row of the view: a group or an owner, its depth in the tree, and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewRow {
    pub depth: usize,
    pub name: String,
    pub group: bool,
    pub live: u64,
    pub arms: f64,
    pub fires: f64,
    pub overruns: f64,
    pub refused: f64,
    pub late_p99_ns: u64,
}

impl ViewRow {
    /// The row's value in sort column `c` (1 ..= 6).
    fn key(&self, c: usize) -> f64 {
        match c {
            1 => self.live as f64,
            2 => self.arms,
            3 => self.fires,
            4 => self.overruns,
            5 => self.refused,
            _ => self.late_p99_ns as f64,
        }
    }
}

/// Rates between two readings, keyed by group path or owner ID.
#[derive(Default)]
pub struct Model {
    last: Option<(Instant, HashMap<String, Counts>)>,
    /// Sort column (0: by name, 1..=6: by that figure) and direction.
    pub sort: usize,
    pub ascending: bool,
}

/// A counter of [`Counts`].
type Field = fn(&Counts) -> u64;
/// The rate of a counter of a row (by key) between the two readings.
type Rate<'a> = &'a dyn Fn(&str, Field) -> f64;

fn key_of_group(g: &GroupStats) -> String {
    format!("g:{}", g.path)
}

impl Model {
    /// The rows for reading `stats` taken at `at`; rates against the previous reading.
    pub fn rows(&mut self, stats: &Stats, at: Instant) -> Vec<ViewRow> {
        let mut now = HashMap::new();
        collect(&stats.root, &mut now);
        let (prev, dt) = match &self.last {
            Some((t, p)) => (Some(p), at.duration_since(*t).as_secs_f64().max(1e-3)),
            None => (None, 1.0),
        };
        let rate = |key: &str, f: Field| -> f64 {
            let cur = now.get(key).map_or(0, f);
            let old = prev.and_then(|p| p.get(key)).map_or(cur, f);
            cur.saturating_sub(old) as f64 / dt
        };
        let mut out = Vec::new();
        self.walk(&stats.root, 0, &rate, &mut out);
        self.last = Some((at, now));
        out
    }

    fn walk(&self, g: &GroupStats, depth: usize, rate: Rate<'_>, out: &mut Vec<ViewRow>) {
        let k = key_of_group(g);
        out.push(ViewRow {
            depth,
            name: if g.path.is_empty() {
                "(all)".into()
            } else {
                format!("{}/", g.name)
            },
            group: true,
            live: g.counts.live,
            arms: rate(&k, |c| c.armed),
            fires: rate(&k, |c| c.expired),
            overruns: rate(&k, |c| c.overruns),
            refused: rate(&k, |c| c.refused),
            late_p99_ns: g.lateness.p99_ns,
        });
        // Children: subgroups (each followed by its subtree) and owners, sorted together by
        // the chosen column.
        let mut kids: Vec<(ViewRow, Option<&GroupStats>)> = Vec::new();
        for c in &g.groups {
            let mut sub = Vec::new();
            self.walk(c, depth + 1, rate, &mut sub);
            kids.push((sub[0].clone(), Some(c)));
        }
        for o in &g.owners {
            let k = format!("o:{}", o.owner);
            kids.push((
                ViewRow {
                    depth: depth + 1,
                    name: format!("owner {}", o.owner),
                    group: false,
                    live: o.counts.live,
                    arms: rate(&k, |c| c.armed),
                    fires: rate(&k, |c| c.expired),
                    overruns: rate(&k, |c| c.overruns),
                    refused: rate(&k, |c| c.refused),
                    late_p99_ns: o.lateness.p99_ns,
                },
                None,
            ));
        }
        kids.sort_by(|(a, _), (b, _)| {
            let o = if self.sort == 0 {
                a.name.cmp(&b.name)
            } else {
                a.key(self.sort).total_cmp(&b.key(self.sort)).reverse()
            };
            if self.ascending {
                o.reverse()
            } else {
                o
            }
        });
        for (row, group) in kids {
            match group {
                Some(c) => self.walk(c, depth + 1, rate, out),
                None => out.push(row),
            }
        }
    }
}

fn collect(g: &GroupStats, into: &mut HashMap<String, Counts>) {
    into.insert(key_of_group(g), g.counts);
    for o in &g.owners {
        into.insert(format!("o:{}", o.owner), o.counts);
    }
    for c in &g.groups {
        collect(c, into);
    }
}

/// Nanoseconds as a short human figure.
fn human_ns(ns: u64) -> String {
    match ns {
        0 => "-".into(),
        n if n < 1_000 => format!("{n} ns"),
        n if n < 1_000_000 => format!("{:.1} µs", n as f64 / 1e3),
        n if n < 1_000_000_000 => format!("{:.1} ms", n as f64 / 1e6),
        n => format!("{:.2} s", n as f64 / 1e9),
    }
}

fn human_rate(r: f64) -> String {
    if r < 0.05 {
        "0".into()
    } else if r < 10_000.0 {
        format!("{r:.0}")
    } else {
        format!("{:.1}k", r / 1e3)
    }
}

/// The demo workload: a service, its groups, and the threads that drive them.
pub struct Demo {
    pub timers: Timers,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Demo {
    /// Starts the demo (module doc).
    pub fn start() -> Result<Demo, tempora::Error> {
        let timers = Timers::builder().drivers(1).build()?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let web = timers.group("web")?;
        let api = web.subgroup("api")?;
        let stat = web.subgroup("static")?;
        let jobs = timers.group("batch")?.subgroup("jobs")?;
        jobs.set_max_timers(Some(150));
        let cron = timers.group("cron")?;
        let slow = timers.group("slow")?;
        let ms = Duration::from_millis;
        let spawn = |threads: &mut Vec<JoinHandle<()>>, f: Box<dyn FnOnce() + Send>| {
            threads.push(std::thread::spawn(f));
        };
        // web/api: two owners of 1000 connections each; a request re-arms a connection's 5 s
        // idle timeout; one connection in a hundred goes quiet and its timeout fires.
        for k in 0..2u64 {
            let (o, stop) = (api.owner(), stop.clone());
            spawn(
                &mut threads,
                Box::new(move || {
                    let ids: Vec<_> = (0..1000)
                        .filter_map(|_| o.create(ClockId::Monotonic, Notify::Queue).ok())
                        .collect();
                    let mut x = 0x9e37_79b9_u64 + k;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..200 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let id = ids[(x % ids.len() as u64) as usize];
                            let idle = if x % 100 == 0 { ms(50) } else { ms(5000) };
                            let _ = o.settime(id, SetFlags::RELATIVE, idle, Duration::ZERO);
                        }
                        while o.try_recv().is_some() {}
                        std::thread::sleep(ms(2 + k));
                    }
                }),
            );
        }
        // web/static: 200 periodic 10 ms timers, read as they come.
        {
            let (o, stop) = (stat.owner(), stop.clone());
            spawn(
                &mut threads,
                Box::new(move || {
                    for i in 0..200u64 {
                        if let Ok(id) = o.create(ClockId::Monotonic, Notify::Queue) {
                            let first = ms(10) + Duration::from_micros(i * 50);
                            let _ = o.settime(id, SetFlags::RELATIVE, first, ms(10));
                        }
                    }
                    while !stop.load(Ordering::Relaxed) {
                        let _ = o.recv_timeout(ms(100));
                    }
                }),
            );
        }
        // batch/jobs: jobs of 5..50 ms, created 60 at a time, awaited and deleted; the cap
        // of 150 refuses some creates.
        for _ in 0..2 {
            let (o, stop) = (jobs.owner(), stop.clone());
            spawn(
                &mut threads,
                Box::new(move || {
                    let mut live = Vec::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..60 {
                            n += 1;
                            if let Ok(id) = o.create(ClockId::Monotonic, Notify::Queue) {
                                let d = ms(5 + n % 45);
                                let _ = o.settime(id, SetFlags::RELATIVE, d, Duration::ZERO);
                                live.push(id);
                            }
                        }
                        std::thread::sleep(ms(20));
                        while let Some(ev) = o.try_recv() {
                            let _ = o.delete(ev.id);
                            live.retain(|&i| i != ev.id);
                        }
                        if live.len() > 300 {
                            for id in live.drain(..150) {
                                let _ = o.delete(id);
                            }
                        }
                    }
                }),
            );
        }
        // cron: 20 periodic callbacks, every 100 ms.
        {
            let o = cron.owner();
            for i in 0..20u64 {
                if let Ok(id) = o.create(ClockId::Monotonic, Notify::callback(|_| {})) {
                    let _ = o.settime(id, SetFlags::RELATIVE, ms(100 + i), ms(100));
                }
            }
            let stop = stop.clone();
            spawn(
                &mut threads,
                Box::new(move || {
                    // Keeps the owner (and its callbacks) alive until the demo stops.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(ms(100));
                    }
                    drop(o);
                }),
            );
        }
        // slow: 50 periodic 1 ms timers, read once every two seconds.
        {
            let (o, stop) = (slow.owner(), stop.clone());
            spawn(
                &mut threads,
                Box::new(move || {
                    for _ in 0..50 {
                        if let Ok(id) = o.create(ClockId::Monotonic, Notify::Queue) {
                            let _ = o.settime(id, SetFlags::RELATIVE, ms(1), ms(1));
                        }
                    }
                    let mut last = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(ms(50));
                        if last.elapsed() >= Duration::from_secs(2) {
                            while o.try_recv().is_some() {}
                            last = Instant::now();
                        }
                    }
                }),
            );
        }
        Ok(Demo {
            timers,
            stop,
            threads,
        })
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What `tempora top` says without `--demo` or `--pid`, then exits 2.
const NEEDS_SOURCE: &str = "\
tempora top: needs --pid PID or --demo.
  It shows a tempora service's statistics live: groups and owners with their live timers,
  arms/s, fires/s, overruns/s, refused creates/s and lateness p99.
    tempora top --pid PID   a running process that uses tempora (its inspection endpoint)
    tempora top --demo      a demo workload this command starts itself
";

/// Where the view's readings come from.
enum Source {
    Demo(Demo),
    Process(u32),
}

impl Source {
    /// A reading and the title's words for it; `Err` (why) once the process is gone.
    fn read(&self) -> Result<(Stats, String), String> {
        match self {
            Source::Demo(d) => Ok((d.timers.stats(), "demo workload".to_owned())),
            Source::Process(pid) => match crate::inspect::top_source(*pid) {
                Ok((s, 1)) => Ok((s, format!("process {pid}"))),
                Ok((s, n)) => Ok((s, format!("process {pid} (busiest of {n} services)"))),
                Err(e) => Err(e.to_string()),
            },
        }
    }
}

/// Runs `tempora top`; the exit code.
pub fn main(opts: &Opts) -> i32 {
    let source = match (opts.demo, opts.pid) {
        (true, _) => match Demo::start() {
            Ok(d) => Source::Demo(d),
            Err(e) => {
                eprintln!("tempora top: cannot start the demo: {e}");
                return 1;
            }
        },
        (false, Some(pid)) => {
            // Refused before the screen is taken: no endpoint, another user's process.
            if let Err(e) = crate::inspect::top_source(pid) {
                eprintln!("tempora top: {e}");
                return 1;
            }
            Source::Process(pid)
        }
        (false, None) => {
            eprint!("{NEEDS_SOURCE}");
            return 2;
        }
    };
    // `init` enters raw mode and the alternate screen, and installs a panic hook that
    // restores the terminal before the panic message prints.
    let mut terminal = ratatui::init();
    let r = run(
        &mut terminal,
        &source,
        Duration::from_millis(opts.interval_ms.max(50)),
    );
    ratatui::restore();
    drop(source);
    match r {
        Ok(None) => 0,
        Ok(Some(ended)) => {
            println!("tempora top: {ended}");
            0
        }
        Err(e) => {
            eprintln!("tempora top: {e}");
            1
        }
    }
}

/// The screen until a key quits (`Ok(None)`) or the process watched is gone (`Ok(Some(why))`).
fn run(
    terminal: &mut ratatui::DefaultTerminal,
    source: &Source,
    interval: Duration,
) -> std::io::Result<Option<String>> {
    let mut model = Model::default();
    let started = Instant::now();
    let gone = |why: String| match source {
        Source::Process(pid) => format!("process {pid} ended ({why})"),
        Source::Demo(_) => why,
    };
    let (stats, mut title) = match source.read() {
        Ok(r) => r,
        Err(why) => return Ok(Some(gone(why))),
    };
    let mut rows = model.rows(&stats, Instant::now());
    let mut next = Instant::now() + interval;
    loop {
        let sort = model.sort;
        let ascending = model.ascending;
        terminal.draw(|f| {
            let [head, body] =
                Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(f.area());
            let up = started.elapsed().as_secs();
            f.render_widget(
                Paragraph::new(vec![
                    Line::from(format!(
                        "tempora top — {title}, up {up} s, refresh {} ms",
                        interval.as_millis()
                    )),
                    Line::from("keys: 1-7 sort by column, s next column, r reverse, q quit"),
                ]),
                head,
            );
            let header = Row::new(COLUMNS.iter().enumerate().map(|(i, c)| {
                if i == sort {
                    format!("{c} {}", if ascending { "▲" } else { "▼" })
                } else {
                    (*c).to_owned()
                }
            }))
            .style(Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED));
            let lines = rows.iter().map(|r| {
                let style = if r.group {
                    Style::default().add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                };
                Row::new(vec![
                    format!("{}{}", "  ".repeat(r.depth), r.name),
                    r.live.to_string(),
                    human_rate(r.arms),
                    human_rate(r.fires),
                    human_rate(r.overruns),
                    human_rate(r.refused),
                    human_ns(r.late_p99_ns),
                ])
                .style(style)
            });
            let widths = [
                Constraint::Min(24),
                Constraint::Length(8),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(12),
                Constraint::Length(11),
                Constraint::Length(10),
            ];
            f.render_widget(
                Table::new(lines, widths)
                    .header(header)
                    .block(Block::bordered().title(" groups and owners ")),
                body,
            );
        })?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            if let Event::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(None),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(None)
                    }
                    KeyCode::Char(c @ '1'..='7') => model.sort = c as usize - '1' as usize,
                    KeyCode::Char('s') => model.sort = (model.sort + 1) % COLUMNS.len(),
                    KeyCode::Char('r') => model.ascending = !model.ascending,
                    _ => {}
                }
                continue;
            }
        }
        if Instant::now() >= next {
            let stats;
            (stats, title) = match source.read() {
                Ok(r) => r,
                Err(why) => return Ok(Some(gone(why))),
            };
            rows = model.rows(&stats, Instant::now());
            next += interval;
            if next < Instant::now() {
                next = Instant::now() + interval;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempora::clock::ManualClock;

    #[test]
    fn rates_are_differences_per_second_and_siblings_sort_by_the_column() {
        let timers = Timers::builder().clock(ManualClock::new()).build().unwrap();
        let a = timers.group("a").unwrap().owner();
        let b = timers.group("b").unwrap().owner();
        let ia = a.create(ClockId::Monotonic, Notify::Queue).unwrap();
        let ib = b.create(ClockId::Monotonic, Notify::Queue).unwrap();
        let mut m = Model {
            sort: 2,
            ..Model::default()
        };
        let t0 = Instant::now();
        m.rows(&timers.stats(), t0);
        for _ in 0..10 {
            a.settime(
                ia,
                SetFlags::RELATIVE,
                Duration::from_secs(1),
                Duration::ZERO,
            )
            .unwrap();
        }
        for _ in 0..30 {
            b.settime(
                ib,
                SetFlags::RELATIVE,
                Duration::from_secs(1),
                Duration::ZERO,
            )
            .unwrap();
        }
        let rows = m.rows(&timers.stats(), t0 + Duration::from_secs(2));
        let names: Vec<_> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names[0], "(all)");
        assert_eq!(
            names[1], "b/",
            "b arms faster, so it sorts first: {names:?}"
        );
        let arms = |n: &str| rows.iter().find(|r| r.name == n).unwrap().arms;
        assert_eq!(arms("(all)"), 20.0);
        assert_eq!(arms("a/"), 5.0);
        assert_eq!(arms(&format!("owner {}", b.id())), 15.0);
        m.ascending = true;
        let rows = m.rows(&timers.stats(), t0 + Duration::from_secs(3));
        assert_eq!(rows[1].name, "a/", "reversed");
        assert_eq!(rows[1].arms, 0.0, "no arms in the last second");
    }
}
