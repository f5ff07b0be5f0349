//! `tempora bench`: every suite, its peers side by side in one process, reported as a human
//! table (stdout, or stderr with `--json`), JSON lines (`--json`, one object per result, nothing
//! else on stdout) and SVG plots under `target/tempora-bench/`.

mod checkpoint;
mod drivers;
mod queues;
mod registries;
mod seed;
mod service;
mod svg;
mod wheel;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Barrier;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

pub use crate::alloc::allocated_bytes;

/// What `tempora bench` was asked to do: the subcommand's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct Opts {
    /// Which suite: all, seed (registry: the seed's Tests 1-5), wheel, service (the POSIX calls,
    /// event delivery and drivers, against the kernel's POSIX timers), checkpoint.
    #[arg(long, default_value = "all", value_parser = clap::builder::PossibleValuesParser::new(SUITES))]
    pub suite: String,
    /// Small sizes only, the whole run in under a minute.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per result on stdout; the table goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// Live-timer counts to run instead of the suite's defaults (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub n: Option<Vec<usize>>,
    /// Runs per measurement (the median is reported).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Only these implementations (comma-separated JSON `impl` names).
    #[arg(long = "impl", value_delimiter = ',')]
    pub impls: Option<Vec<String>>,
    /// Only cases whose JSON `case` name starts with one of these (comma-separated).
    #[arg(long = "case", value_delimiter = ',')]
    pub cases: Option<Vec<String>>,
}

/// Optional per-case fields of a result line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Extras {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_timer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fired: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_late_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_late_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_call_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounded: Option<bool>,
    /// next-expiry: churn ops measured (fewer than 1M when a peer hit the time budget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<u64>,
    /// next-expiry: ns per (churn op + next_expiry); ns_per_op is the marginal next_expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_ns: Option<f64>,
    /// seed t1-create: ns per create in the first run, on a fresh registry (table growth and
    /// first-touch page faults included); `ns_per_op` is the median of the later runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_ns_per_op: Option<f64>,
    /// seed t4/t5/loop: per-thread time divided by the same work on one thread alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_one_thread: Option<f64>,
    /// service wakeups: OS wake-ups of the timer threads per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups_per_s: Option<f64>,
    /// service wakeups: distinct expiry instants per second (the floor for wake-ups).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instants_per_s: Option<f64>,
    /// service lateness: expiry to delivery, percentiles in ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p999_ns: Option<f64>,
}

/// One JSON result line (CONVENTIONS.md "Benchmark output").
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub suite: &'static str,
    pub case: String,
    #[serde(rename = "impl")]
    pub imp: String,
    pub n: u64,
    pub threads: u32,
    pub ns_per_op: f64,
    pub total_ms: f64,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dist: Option<&'static str>,
    #[serde(flatten)]
    pub extras: Extras,
}

/// Collects records, streams JSON, keeps progress, and prints the table and plots at the end.
pub struct Reporter {
    json: bool,
    impls: Option<Vec<String>>,
    cases: Option<Vec<String>>,
    records: Vec<Record>,
    progress: ProgressBar,
}

impl Reporter {
    fn new(opts: &Opts) -> Reporter {
        let progress = ProgressBar::new(0);
        progress.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Reporter {
            json: opts.json,
            impls: opts.impls.clone(),
            cases: opts.cases.clone(),
            records: Vec::new(),
            progress,
        }
    }

    /// Whether `--case` selects this case (always true without `--case`).
    pub fn wants_case(&self, case: &str) -> bool {
        self.cases
            .as_ref()
            .is_none_or(|list| list.iter().any(|c| case.starts_with(c.as_str())))
    }

    /// Whether `--impl` selects this implementation (always true without `--impl`).
    pub fn wants_impl(&self, name: &str) -> bool {
        self.impls
            .as_ref()
            .is_none_or(|list| list.iter().any(|i| i == name))
    }

    pub fn add_steps(&self, steps: u64) {
        self.progress.inc_length(steps);
    }

    pub fn tick(&self) {
        self.progress.inc(1);
    }

    pub fn set_message(&self, msg: String) {
        self.progress.set_message(msg);
    }

    pub fn record(&mut self, record: Record) {
        if self.json {
            let line = serde_json::to_string(&record).expect("serialisable record");
            self.progress.suspend(|| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            });
        }
        self.records.push(record);
    }

    /// The human table: one block per (suite, case, dist, n), ratios to `tempora`.
    fn table(&self) -> String {
        let mut groups: BTreeMap<(&str, &str, &str, u64, u32), Vec<&Record>> = BTreeMap::new();
        for r in &self.records {
            let key = (
                r.suite,
                r.case.as_str(),
                r.dist.unwrap_or("-"),
                r.n,
                r.threads,
            );
            groups.entry(key).or_default().push(r);
        }
        let mut out = String::new();
        for ((suite, case, dist, n, threads), rows) in groups {
            let base = rows
                .iter()
                .find(|r| r.imp == "tempora")
                .map(|r| r.ns_per_op);
            out += &format!("\n{suite} / {case}  dist={dist}  n={n}  threads={threads}\n");
            out += &format!(
                "  {:<18} {:>10} {:>9} {:>9} {:>6} {:>6} {:>9} {:>10}  {}\n",
                "impl",
                "ns/op",
                "x tempora",
                "B/timer",
                "early",
                "lost",
                "max late",
                "worst us",
                "note"
            );
            for r in rows {
                let ratio = base
                    .filter(|b| *b > 0.0)
                    .map(|b| format!("{:.2}", r.ns_per_op / b))
                    .unwrap_or_else(|| "-".into());
                let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                let e = &r.extras;
                out += &format!(
                    "  {:<18} {:>10.1} {:>9} {:>9} {:>6} {:>6} {:>9} {:>10}  {}\n",
                    r.imp,
                    r.ns_per_op,
                    ratio,
                    opt(e.bytes_per_timer.map(|b| format!("{b:.1}"))),
                    opt(e.early.map(|v| v.to_string())),
                    opt(e.lost.map(|v| v.to_string())),
                    opt(e.max_late_ms.map(|v| format!("{v}ms"))),
                    opt(e.worst_call_us.map(|v| format!("{v:.0}"))),
                    match (&r.error, e.wakeups, e.pair_ns, e.vs_one_thread) {
                        (Some(err), ..) => err.clone(),
                        (None, Some(w), ..) => format!("{w} wake-ups"),
                        (None, None, Some(p), _) => format!("{p:.1} ns per op+next_expiry"),
                        (None, None, None, Some(v)) => format!("{v:.2}x one thread alone"),
                        _ if e.cold_ns_per_op.is_some() => {
                            format!("cold {:.1} ns/op", e.cold_ns_per_op.unwrap_or(0.0))
                        }
                        _ => String::new(),
                    }
                );
            }
        }
        out
    }

    fn finish(self) {
        self.progress.finish_and_clear();
        let table = self.table();
        if self.json {
            eprint!("{table}");
        } else {
            print!("{table}");
        }
        let dir = plot_dir();
        match svg::write_plots(&self.records, &dir) {
            Ok(0) => {}
            Ok(count) => eprintln!("\n{count} plots in {}", dir.display()),
            Err(err) => eprintln!("\nplots not written to {}: {err}", dir.display()),
        }
    }
}

/// `target/tempora-bench/` of the workspace (or of `CARGO_TARGET_DIR`).
fn plot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        });
    target.join("tempora-bench")
}

/// Keeps the CPU busy for a moment so the first measurement does not pay for a core that was
/// idle (frequency ramp-up, cold caches and TLB).
fn spin_up() {
    let start = std::time::Instant::now();
    let mut x = 1u64;
    let mut buf = vec![0u64; 1 << 20];
    while start.elapsed() < std::time::Duration::from_millis(300) {
        for v in buf.iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            *v ^= x;
        }
    }
    std::hint::black_box(&buf);
}

/// Validates `bench --json` output: each line is an object with the CONVENTIONS.md fields,
/// `ok:false` lines carry an `error`, and no `tempora` line failed. Returns the line count.
pub fn check_json(path: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let at = |msg: &str| format!("line {}: {msg}: {line}", i + 1);
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| at(&e.to_string()))?;
        for field in [
            "suite",
            "case",
            "impl",
            "n",
            "threads",
            "ns_per_op",
            "total_ms",
            "ok",
        ] {
            if v.get(field).is_none() {
                return Err(at(&format!("missing field `{field}`")));
            }
        }
        let ok = v["ok"]
            .as_bool()
            .ok_or_else(|| at("`ok` is not a boolean"))?;
        if !ok && v.get("error").is_none() {
            return Err(at("ok:false without an `error`"));
        }
        if !ok && v["impl"].as_str().is_some_and(|i| i.starts_with("tempora")) {
            return Err(at("a tempora result failed"));
        }
        count += 1;
    }
    if count == 0 {
        return Err("no result lines".into());
    }
    Ok(count)
}

/// Lets work deferred through epoch reclamation by earlier runs finish: tempora's retired tables
/// are freed (so they do not land inside the next memory measurement as a negative) and the
/// pages of deleted owners reach the registry's pool (so every warm run starts from the same
/// state instead of sometimes faulting fresh pages in, which made runs bimodal). The other
/// registries do not use the epoch; for them this is a no-op.
pub(crate) fn settle_reclamation() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
}

/// Runs `work(i)` for `i` in `0..threads`, each on a thread of its own, all starting together
/// (after a barrier); their results in order.
pub(crate) fn on_threads<T: Send>(threads: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    work(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The median of `v` (sorted in place): what `ns_per_op` reports.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The suites `--suite` accepts.
pub const SUITES: [&str; 5] = ["all", "seed", "wheel", "service", "checkpoint"];

/// Runs the selected suites.
pub fn run(opts: &Opts) {
    let mut rep = Reporter::new(opts);
    spin_up();
    if opts.suite == "all" || opts.suite == "seed" {
        seed::run(opts, &mut rep);
    }
    if opts.suite == "all" || opts.suite == "wheel" {
        wheel::run(opts, &mut rep);
    }
    if opts.suite == "all" || opts.suite == "service" {
        service::run(opts, &mut rep);
        drivers::run(opts, &mut rep);
    }
    if opts.suite == "all" || opts.suite == "checkpoint" {
        checkpoint::run(opts, &mut rep);
    }
    rep.finish();
}
