//! The runner: the command line (`Opts`), the settings it gives the suites, the run (the
//! suites' plans executed in order: progress on stderr, JSON lines on stdout), and the end of a
//! run (table, verdict, report files). `plan` is what a suite is written against (settings,
//! steps, the plan); `measure` and `fork` are what its measurements share (threads that start
//! together, child processes); `machine` records the machine a run was measured on.
//!
//! The runner filters the steps by `--case`/`--impl`, runs them in order, shows progress on
//! stderr, and records the [`Row`](crate::record::Row)s each step returns, the one way a result
//! is recorded. At the end it prints the human table (stdout, or stderr with `--json`), the seed
//! suite's tables and the verdict against tempora's targets, and writes
//! `target/tempora-bench/`: `results.jsonl` (the run's JSON lines), `machine.json` and
//! `report.html`.

pub(crate) mod fork;
pub(crate) mod machine;
pub(crate) mod measure;
pub(crate) mod plan;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::{self, Record, Suite};
use crate::report::{self, compare};
use crate::suites::{capi, checkpoint, seed, service, stats, wheel};
use crate::targets;
use machine::Machine;
use plan::{Mode, Plan, Settings};

/// `tempora bench`: run the suites, or `compare` two runs.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Opts {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunOpts,
}

/// `tempora bench` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum Command {
    /// Compare two runs' JSON lines (OLD.jsonl NEW.jsonl): per row both figures and their
    /// ratio, with the peers' ratios beside tempora's so that machine drift shows.
    Compare(compare::Args),
    /// Write report.html (and results.jsonl, machine.json) from a run's JSON lines, with the
    /// machine recorded beside them if there is one.
    Report {
        /// A run's JSON lines (`results.jsonl`, `runs/NAME.jsonl`, `--json` output).
        file: PathBuf,
        /// Where to write the page (default: target/tempora-bench/).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `--suite`'s parser: `all` (`None`), or a suite by its name (`Suite`'s `ValueEnum`).
fn suite_parser() -> impl clap::builder::TypedValueParser<Value = Option<Suite>> {
    let names = std::iter::once("all").chain(Suite::ALL.iter().map(|s| s.name()));
    clap::builder::TypedValueParser::map(
        clap::builder::PossibleValuesParser::new(names),
        |name: String| <Suite as clap::ValueEnum>::from_str(&name, false).ok(),
    )
}

/// What a run was asked to do.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunOpts {
    /// Which suites (comma-separated): seed (the registry: the Linux 6.15 registry benchmark's
    /// Tests 1-5), wheel, service (the POSIX calls, event delivery and drivers, against the
    /// kernel's POSIX timers), checkpoint, async (sleep futures in a tokio runtime, against tokio's
    /// and async-io's timers), capi (the C ABI called from C, against the same calls from Rust and
    /// the kernel's POSIX timers from C), stats (statistics' cost on arm+cancel, and a flush's lock
    /// holds against a naive flush), or all.
    #[arg(long, value_parser = suite_parser(), value_delimiter = ',', default_value = "all")]
    pub(crate) suite: Vec<Option<Suite>>,
    /// Small sizes only, the whole run in under a minute (CI's smoke run).
    #[arg(long, conflicts_with = "full")]
    pub(crate) quick: bool,
    /// The complete sweep: up to 10M timers, every repetition, 64-thread cases (long).
    #[arg(long)]
    pub(crate) full: bool,
    /// One JSON object per result on stdout; the table goes to stderr.
    #[arg(long)]
    pub(crate) json: bool,
    /// Live-timer counts to run instead of the suite's defaults (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) n: Option<Vec<u64>>,
    /// Runs per measurement (the median is reported).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) reps: Option<u64>,
    /// Only these implementations (comma-separated JSON `impl` names).
    #[arg(long = "impl", value_delimiter = ',')]
    pub(crate) impls: Option<Vec<String>>,
    /// Only cases whose JSON `case` name starts with one of these (comma-separated).
    #[arg(long = "case", value_delimiter = ',')]
    pub(crate) cases: Option<Vec<String>>,
    /// Also keep this run as `target/tempora-bench/runs/NAME.jsonl`, for `bench compare`.
    #[arg(long, value_name = "NAME")]
    pub(crate) save: Option<String>,
}

impl RunOpts {
    /// The settings the suites read: the mode, `--n`, `--reps`, `--impl`, `--case`.
    fn settings(&self) -> Settings {
        let mode = match (self.quick, self.full) {
            (true, _) => Mode::Quick,
            (_, true) => Mode::Full,
            _ => Mode::Default,
        };
        Settings {
            mode,
            n: self
                .n
                .as_ref()
                .map(|v| v.iter().map(|&n| n as usize).collect()),
            reps: self.reps.map(|r| r as usize),
            impls: self.impls.clone(),
            cases: self.cases.clone(),
        }
    }
}

/// Collects records, streams JSON lines, keeps the progress bar.
pub(crate) struct Reporter {
    json: bool,
    records: Vec<Record>,
    progress: ProgressBar,
}

impl Reporter {
    fn new(json: bool) -> Reporter {
        // Drawn only when stderr is a terminal (indicatif checks); nothing otherwise.
        let progress = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        progress.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:20}] {prefix} ETA {eta:>3} {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Reporter {
            json,
            records: Vec::new(),
            progress,
        }
    }

    fn record(&mut self, record: Record) {
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

    /// Runs the plan's steps, recording their rows.
    fn execute(&mut self, plan: Plan<'_>) {
        let settings = plan.settings;
        let total = plan.steps.len();
        let cost: f64 = plan.steps.iter().map(|s| s.cost).sum();
        self.progress.set_length(cost as u64);
        self.progress.enable_steady_tick(Duration::from_millis(250));
        let plain = !std::io::stderr().is_terminal();
        let start = Instant::now();
        let mut suite = None;
        for (i, step) in plan.steps.into_iter().enumerate() {
            if plain && suite != Some(step.suite) {
                eprintln!(
                    "[{:>4.0}s] {}: step {} of {total}",
                    start.elapsed().as_secs_f64(),
                    step.suite.name(),
                    i + 1
                );
                suite = Some(step.suite);
            }
            self.progress.set_prefix(format!("{}/{total}", i + 1));
            self.progress.set_message(step.describe());
            let (s, cost) = (step.suite, step.cost);
            for row in (step.run)() {
                if settings.wants_case(&row.case) && settings.wants_impl(&row.imp) {
                    self.record(row.into_record(s));
                }
            }
            self.progress.inc(cost as u64);
        }
        self.progress.finish_and_clear();
    }
}

/// `target/tempora-bench/` of the workspace (or of `CARGO_TARGET_DIR`).
pub(crate) fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            root.canonicalize().unwrap_or(root).join("target")
        });
    target.join("tempora-bench")
}

/// Keeps the CPU busy for a moment so the first measurement does not pay for a core that was
/// idle (frequency ramp-up, cold caches and TLB).
fn spin_up() {
    let start = Instant::now();
    let mut x = 1u64;
    let mut buf = vec![0u64; 1 << 20];
    while start.elapsed() < Duration::from_millis(300) {
        for v in buf.iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            *v ^= x;
        }
    }
    std::hint::black_box(&buf);
}

/// Validates `bench --json` output: each line is a result record (`read_jsonl`: every
/// required field, of its type), `ok:false` lines carry an `error`, and no `tempora` line
/// failed. Returns the line count.
pub fn check_json(path: &std::path::Path) -> Result<usize, String> {
    let records = record::read_jsonl(path)?;
    for (i, r) in records.iter().enumerate() {
        let at = |msg: &str| {
            format!(
                "record {}: {msg}: {} / {} / {}",
                i + 1,
                r.suite.name(),
                r.case,
                r.imp
            )
        };
        if !r.ok && r.error.is_none() {
            return Err(at("ok:false without an `error`"));
        }
        if !r.ok && r.is_tempora() {
            return Err(at("a tempora result failed"));
        }
    }
    if records.is_empty() {
        return Err("no result lines".into());
    }
    Ok(records.len())
}

/// Runs the selected suites, then reports: table, seed suite tables, verdict, files.
pub(crate) fn run(opts: &RunOpts) {
    let settings = opts.settings();
    let suites: Vec<Suite> = if opts.suite.contains(&None) {
        Suite::ALL.to_vec()
    } else {
        Suite::ALL
            .into_iter()
            .filter(|s| opts.suite.contains(&Some(*s)))
            .collect()
    };
    let mut machine = Machine::read(settings.mode.name());
    let start = Instant::now();
    let mut rep = Reporter::new(opts.json);
    spin_up();
    let wheel_inputs = wheel::Inputs::default();
    let mut plan = Plan::new(&settings);
    plan_suites(&mut plan, &suites, &wheel_inputs);
    rep.execute(plan);
    machine.finish(start.elapsed().as_secs_f64());
    finish(&rep.records, &machine, opts);
}

/// Adds the steps of `suites`, in order, to `plan`.
fn plan_suites<'a>(plan: &mut Plan<'a>, suites: &[Suite], wheel_inputs: &'a wheel::Inputs) {
    for suite in suites {
        match suite {
            Suite::Seed => seed::plan(plan),
            Suite::Wheel => wheel::plan(plan, wheel_inputs),
            Suite::Service => {
                service::plan(plan);
                service::drivers::plan(plan);
                service::firing::plan(plan);
            }
            Suite::Checkpoint => checkpoint::plan(plan),
            Suite::Async => crate::suites::r#async::plan(plan),
            Suite::Capi => capi::plan(plan),
            Suite::Stats => stats::plan(plan),
        }
    }
}

/// Prints the table, the seed tables and the verdict; writes the files.
fn finish(records: &[Record], machine: &Machine, opts: &RunOpts) {
    let mut text = report::table::text(records);
    let seed = report::seed_tables_text(records);
    if !seed.is_empty() {
        text += "\n";
        text += &seed;
    }
    let verdict = targets::verdict(records);
    text += "\n";
    text += &targets::verdict_text(&verdict, machine);
    if opts.json {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let dir = out_dir();
    match report::write(&dir, records, machine, &verdict) {
        Ok(page) => eprintln!("\nreport: {}", page.display()),
        Err(err) => eprintln!("\nreport not written to {}: {err}", dir.display()),
    }
    if let Some(name) = &opts.save {
        match report::save(&dir, name, records, machine) {
            Ok(path) => eprintln!("saved: {}", path.display()),
            Err(err) => eprintln!("run not saved as {name}: {err}"),
        }
    }
}

/// `tempora bench ...`: a run or a subcommand; the process's exit code.
pub fn main(opts: &Opts) -> i32 {
    match &opts.command {
        Some(Command::Compare(args)) => compare::run(args),
        Some(Command::Report { file, out }) => {
            let records = match record::read_jsonl(file) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("tempora bench report: {e}");
                    return 2;
                }
            };
            let machine = compare::machine_of(file).unwrap_or_default();
            let verdict = targets::verdict(&records);
            let dir = out.clone().unwrap_or_else(out_dir);
            match report::write(&dir, &records, &machine, &verdict) {
                Ok(page) => {
                    println!("{}", page.display());
                    0
                }
                Err(e) => {
                    eprintln!("tempora bench report: {}: {e}", dir.display());
                    1
                }
            }
        }
        None => {
            run(&opts.run);
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::TARGETS;

    /// Every (suite, case) a `--full` run of every suite measures (its steps' cases, planned but
    /// not run).
    fn every_case() -> Vec<(Suite, &'static str)> {
        let opts = RunOpts {
            suite: vec![None],
            quick: false,
            full: true,
            json: false,
            n: None,
            reps: None,
            impls: None,
            cases: None,
            save: None,
        };
        let settings = opts.settings();
        let wheel_inputs = wheel::Inputs::default();
        let mut plan = Plan::new(&settings);
        plan_suites(&mut plan, &Suite::ALL, &wheel_inputs);
        let cases = plan
            .steps
            .iter()
            .flat_map(|s| s.cases.iter().map(|&c| (s.suite, c)));
        cases.collect()
    }

    #[test]
    fn every_target_names_a_case_its_suite_measures() {
        let cases = every_case();
        for t in TARGETS.iter() {
            assert!(
                cases.contains(&(t.suite, t.case.as_str())),
                "{}: no case {} in suite {}",
                t.what,
                t.case,
                t.suite.name()
            );
        }
    }
}
