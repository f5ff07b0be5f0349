//! The runner: the command line (`Opts`), the settings it gives the suites, the run (the
//! suites' plans executed in order: progress on stderr, JSON lines on stdout), and the end of a
//! run (table, verdict, report files). `plan` is what a suite is written against (settings,
//! steps, the plan); `measure` and `fork` are what its measurements share (threads that start
//! together, child processes); `machine` records the machine a run was measured on.
//!
//! The runner refuses a `--case`/`--impl` name that selects nothing (`select`: the suites'
//! catalog, which `--list` prints), filters the steps by them, runs them in order, shows
//! progress on stderr, and records the [`Row`](crate::record::Row)s each step returns, the one
//! way a result is recorded. At the end it prints the human table (stdout, or stderr with
//! `--json`), the seed suite's tables and the verdict against tempora's targets, and writes the
//! output directory (`--out`, by default `tempora-bench/` in the cargo target directory):
//! `results.jsonl` (the run's JSON lines), `machine.json` and `report.html`.
//!
//! The exit status: 0 when the run is sound; 1 when a tempora row failed (`ok:false`), a step
//! returned no row for a case and implementation it was selected for (a result lost), or the
//! files could not be written, with the reason in one line on stderr; 2 for a command line that
//! selects nothing. A peer's failed row (a kernel limit) is a result, not a failure of the run.

pub(crate) mod fork;
pub(crate) mod machine;
pub(crate) mod measure;
pub(crate) mod plan;
pub(crate) mod select;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::{self, Record, Suite};
use crate::report::{self, compare};
use crate::suites::{capi, checkpoint, seed, service, stats, wheel};
use crate::targets;
use machine::Machine;
use plan::{Mode, Plan, Settings};
use select::Catalog;

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
        /// Where to write the page (default: `tempora-bench/` in the cargo target directory:
        /// `CARGO_TARGET_DIR`, or the `target/` of the workspace around the current directory,
        /// or else `./tempora-bench/`).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The server suite's load generator, which the suite starts as a child process: hyper
    /// client connections to ADDR, driven by lines on stdin (`suites/server/load.rs`).
    #[command(hide = true)]
    LoadClient {
        addr: std::net::SocketAddr,
        n: usize,
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
    /// Tests 1-5), wheel, service (the POSIX calls, event delivery, drivers and real signals,
    /// against the kernel's POSIX timers), checkpoint, async (sleep futures in a tokio runtime, against tokio's
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
    /// Only these implementations (comma-separated JSON `impl` names; `--list` shows them).
    #[arg(long = "impl", value_delimiter = ',')]
    pub(crate) impls: Option<Vec<String>>,
    /// Only cases whose JSON `case` name starts with one of these (comma-separated; `--list`
    /// shows them).
    #[arg(long = "case", value_delimiter = ',')]
    pub(crate) cases: Option<Vec<String>>,
    /// Also keep this run as `runs/NAME.jsonl` in the output directory, for `bench compare`.
    #[arg(long, value_name = "NAME")]
    pub(crate) save: Option<String>,
    /// Where `report.html`, `results.jsonl`, `machine.json` and `runs/` go (default:
    /// `tempora-bench/` in the cargo target directory: `CARGO_TARGET_DIR`, or the `target/`
    /// of the workspace around the current directory, or else `./tempora-bench/`).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Print each selected suite's cases and implementations, and run nothing.
    #[arg(long, conflicts_with_all = ["json", "save", "out"])]
    pub(crate) list: bool,
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

    /// Runs the plan's steps, recording their rows; the results lost: per step, each case
    /// and implementation it was selected for that it returned no row of.
    fn execute(&mut self, plan: Plan<'_>) -> Vec<String> {
        let settings = plan.settings;
        let total = plan.steps.len();
        let cost: f64 = plan.steps.iter().map(|s| s.cost).sum();
        self.progress.set_length(cost as u64);
        self.progress.enable_steady_tick(Duration::from_millis(250));
        let plain = !std::io::stderr().is_terminal();
        let start = Instant::now();
        let mut suite = None;
        let mut lost = Vec::new();
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
            let (s, cost, n) = (step.suite, step.cost, step.n());
            let mut owed = step.owed(settings);
            for row in (step.run)() {
                if settings.wants_case(&row.case) && settings.wants_impl(&row.imp) {
                    owed.retain(|(c, i)| (*c, i.as_str()) != (row.case.as_str(), &row.imp));
                    self.record(row.into_record(s));
                }
            }
            lost.extend(
                owed.into_iter()
                    .map(|(c, i)| format!("{}/{c}/{i} n={n}", s.name())),
            );
            self.progress.inc(cost as u64);
        }
        self.progress.finish_and_clear();
        lost
    }
}

/// The output directory when `--out` is not given: `tempora-bench/` in the cargo target
/// directory, found when the command runs (never where it was built): `CARGO_TARGET_DIR` if
/// set, else `target/` beside the `Cargo.toml` of the nearest workspace around the current
/// directory (or, outside any workspace, of the nearest package), else `./tempora-bench/`.
pub(crate) fn default_out_dir() -> PathBuf {
    let env = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty());
    let cwd = std::env::current_dir().unwrap_or_default();
    let target = env
        .map(PathBuf::from)
        .or_else(|| cargo_root(&cwd).map(|root| root.join("target")));
    target.unwrap_or_default().join("tempora-bench")
}

/// The directory of the nearest `Cargo.toml` above `dir` (itself included) that declares a
/// `[workspace]`, or else of the nearest `Cargo.toml`; `None` outside any cargo project.
fn cargo_root(dir: &Path) -> Option<PathBuf> {
    let mut package = None;
    for d in dir.ancestors() {
        let Ok(text) = std::fs::read_to_string(d.join("Cargo.toml")) else {
            continue;
        };
        let manifest = text.parse::<toml::Table>().unwrap_or_default();
        if manifest.contains_key("workspace") {
            return Some(d.to_path_buf());
        }
        package.get_or_insert_with(|| d.to_path_buf());
    }
    package
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

/// Runs the selected suites, then reports: table, seed suite tables, verdict, files; the
/// exit status (module doc). With `--list`, prints the suites' catalog instead.
pub(crate) fn run(opts: &RunOpts) -> i32 {
    // First, while this is the process's only thread: every thread started later inherits
    // the mask, so the `deliver-signal` cases' process-directed signals wait to be taken
    // instead of ending the process (`peers/signal.rs`).
    if let Err(e) = crate::peers::signal::block_in_this_thread() {
        eprintln!("tempora bench: cannot block the deliver-signal cases' signals: errno {e}");
    }
    let settings = opts.settings();
    let suites: Vec<Suite> = if opts.suite.contains(&None) {
        Suite::ALL.to_vec()
    } else {
        Suite::ALL
            .into_iter()
            .filter(|s| opts.suite.contains(&Some(*s)))
            .collect()
    };
    if let Err(e) = catalog(&suites, &settings).check(&settings) {
        eprintln!("tempora bench: {e}");
        return 2;
    }
    let wheel_inputs = wheel::Inputs::default();
    let mut plan = Plan::new(&settings);
    plan_suites(&mut plan, &suites, &wheel_inputs);
    if opts.list {
        print!("{}", Catalog::of(&plan).text());
        return 0;
    }
    if plan.steps.is_empty() {
        eprintln!(
            "tempora bench: --case and --impl together select nothing in the selected suites \
             (`tempora bench --list` shows each suite's cases and implementations)"
        );
        return 2;
    }
    let dir = opts.out.clone().unwrap_or_else(default_out_dir);
    // Before the run, so that a directory that cannot be made costs no run.
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!(
            "tempora bench: cannot write the report to {}: {e}",
            dir.display()
        );
        return 1;
    }
    let mut machine = Machine::read(settings.mode.name());
    let start = Instant::now();
    let mut rep = Reporter::new(opts.json);
    spin_up();
    let lost = rep.execute(plan);
    machine.finish(start.elapsed().as_secs_f64());
    let unwritten = finish(&rep.records, &machine, opts, &dir);
    match failure(&rep.records, &lost, &unwritten) {
        Some(why) => {
            eprintln!("tempora bench: failed: {why}");
            1
        }
        None => 0,
    }
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
                service::signals::plan(plan);
                service::inspect::plan(plan);
            }
            Suite::Checkpoint => checkpoint::plan(plan),
            Suite::Async => crate::suites::r#async::plan(plan),
            Suite::Capi => capi::plan(plan),
            Suite::Stats => stats::plan(plan),
            Suite::Server => crate::suites::server::plan(plan),
        }
    }
}

/// Every case and implementation of `suites` under `settings`' mode and sizes, whatever
/// `--case` and `--impl` say: their plan, built and not run.
fn catalog(suites: &[Suite], settings: &Settings) -> Catalog {
    let settings = settings.unfiltered();
    let wheel_inputs = wheel::Inputs::default();
    let mut plan = Plan::new(&settings);
    plan_suites(&mut plan, suites, &wheel_inputs);
    Catalog::of(&plan)
}

/// Why a run fails, in one line, if it does: a tempora row with `ok:false`, a result lost (a
/// step's case and implementation without a row, as `Reporter::execute` lists them), or a file
/// not written. Peers' failed rows are results (a kernel limit is what it measures), not
/// failures.
fn failure(records: &[Record], lost: &[String], unwritten: &[String]) -> Option<String> {
    let mut why = Vec::new();
    let failed: Vec<&Record> = records.iter().filter(|r| !r.ok && r.is_tempora()).collect();
    if let Some(r) = failed.first() {
        why.push(format!(
            "{} tempora result(s) failed, first {}/{}/{} n={}: {}",
            failed.len(),
            r.suite.name(),
            r.case,
            r.imp,
            r.n,
            r.error.as_deref().unwrap_or("no error given")
        ));
    }
    if let Some(first) = lost.first() {
        why.push(format!(
            "{} result(s) lost (a step returned no row), first {first}",
            lost.len()
        ));
    }
    why.extend(unwritten.iter().cloned());
    (!why.is_empty()).then(|| why.join("; "))
}

/// Prints the table, the seed tables and the verdict; writes the files into `dir`. What could
/// not be written, one reason each.
fn finish(records: &[Record], machine: &Machine, opts: &RunOpts, dir: &Path) -> Vec<String> {
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
    let mut unwritten = Vec::new();
    match report::write(dir, records, machine, &verdict) {
        Ok(page) => eprintln!("\nreport: {}", page.display()),
        Err(err) => {
            eprintln!("\nreport not written to {}: {err}", dir.display());
            unwritten.push(format!("report not written to {}: {err}", dir.display()));
        }
    }
    if let Some(name) = &opts.save {
        match report::save(dir, name, records, machine) {
            Ok(path) => eprintln!("saved: {}", path.display()),
            Err(err) => {
                eprintln!("run not saved as {name}: {err}");
                unwritten.push(format!("run not saved as {name}: {err}"));
            }
        }
    }
    unwritten
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
            let dir = out.clone().unwrap_or_else(default_out_dir);
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
        Some(Command::LoadClient { addr, n }) => crate::suites::server::load_client(*addr, *n),
        None => run(&opts.run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Fields, Measured, Row};
    use crate::runner::plan::Step;
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
            out: None,
            list: false,
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

    fn row(case: &str, imp: &str) -> Row {
        Row::new(case, imp, 1, 1, Measured::per_op(1.0, 1, Fields::default()))
    }

    fn settings(cases: Option<&[&str]>) -> Settings {
        Settings {
            mode: Mode::Quick,
            n: None,
            reps: None,
            impls: None,
            cases: cases.map(|c| c.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn the_catalog_of_every_suite_is_planned_without_measuring_anything() {
        let start = Instant::now();
        let text = catalog(&Suite::ALL, &settings(None)).text();
        // Planning builds no workload: cheap enough for `--list` and for checking names.
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        let suites: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
        let names: Vec<&str> = Suite::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(suites, names);
        assert!(
            text.starts_with("seed\n  cases: t1-create, t1-getoverrun,"),
            "{text}"
        );
        let capi = "\ncapi\n  cases: settime, gettime, create-delete, deliver-signal, \
                    sigwait-latency\n  \
                    impls: tempora-c, tempora, tempora-posix-c, kernel-c\n";
        assert!(
            text.contains(capi),
            "an `also` implementation listed too: {text}"
        );
    }

    #[test]
    fn a_step_that_returns_no_row_for_a_selected_case_and_impl_loses_a_result() {
        let all = settings(None);
        let mut plan = Plan::new(&all);
        let step = Step::new(Suite::Seed, &["a", "b"], "tempora", 7, 1, 1.0, || {
            vec![row("a", "tempora"), row("b", "tempora"), row("a", "peer")]
        });
        plan.add(step.also("peer"));
        let mut rep = Reporter::new(false);
        assert_eq!(rep.execute(plan), ["seed/b/peer n=7"]);
        assert_eq!(rep.records.len(), 3);
        // Rows a step owes are the selected ones only.
        let only_a = settings(Some(&["a"]));
        let mut plan = Plan::new(&only_a);
        plan.add(Step::new(
            Suite::Seed,
            &["a", "b"],
            "tempora",
            7,
            1,
            1.0,
            || vec![row("a", "tempora")],
        ));
        assert!(Reporter::new(false).execute(plan).is_empty());
    }

    #[test]
    fn a_run_fails_on_a_failed_tempora_row_a_lost_result_or_an_unwritten_file_only() {
        let rec = |imp: &str, ok: bool| {
            let measured = if ok {
                Measured::per_op(1.0, 10, Fields::default())
            } else {
                Measured::failed("EAGAIN at 1000 timers")
            };
            Row::new("t1-create", imp, 10, 1, measured).into_record(Suite::Seed)
        };
        let sound = [rec("tempora", true), rec("kernel", false)];
        assert_eq!(
            failure(&sound, &[], &[]),
            None,
            "a peer's failed row is a result"
        );
        let failed = [rec("tempora-coarse", false), rec("tempora", false)];
        let why = failure(&failed, &[], &[]).unwrap();
        assert_eq!(
            why,
            "2 tempora result(s) failed, first seed/t1-create/tempora-coarse n=10: \
             EAGAIN at 1000 timers"
        );
        let lost = ["seed/loop/dashmap n=2000".to_string()];
        let why = failure(&sound, &lost, &[]).unwrap();
        assert!(
            why.contains("1 result(s) lost") && why.contains("loop/dashmap"),
            "{why}"
        );
        let unwritten = ["report not written to /x: denied".to_string()];
        let why = failure(&failed, &lost, &unwritten).unwrap();
        assert_eq!(
            why.matches("; ").count(),
            2,
            "all three reasons, one line: {why}"
        );
        assert!(!why.contains('\n'));
    }

    #[test]
    fn the_default_output_is_in_the_target_directory_of_the_workspace_around() {
        let dir = std::env::temp_dir().join(format!("tempora-out-{}", std::process::id()));
        let member = dir.join("ws/member/src");
        std::fs::create_dir_all(&member).unwrap();
        std::fs::write(
            dir.join("ws/Cargo.toml"),
            "[workspace]\nmembers = [\"member\"]\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("ws/member/Cargo.toml"),
            "[package]\nname = \"m\"\n",
        )
        .unwrap();
        assert_eq!(cargo_root(&member), Some(dir.join("ws")));
        std::fs::create_dir_all(dir.join("alone/src")).unwrap();
        std::fs::write(dir.join("alone/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        assert_eq!(cargo_root(&dir.join("alone/src")), Some(dir.join("alone")));
        // This crate's own tests run inside the repository's workspace.
        let here = std::env::current_dir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(cargo_root(&here).as_deref(), Some(root));
        std::fs::remove_dir_all(&dir).unwrap();
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
