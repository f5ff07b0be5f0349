//! What a suite is written against: the [`Settings`] it reads (mode, sizes, repetitions,
//! `--case`/`--impl`, the time budget of a repeated measurement) and the [`Plan`] of [`Step`]s
//! it declares. One step is one implementation at one size (and thread count) of one case or of
//! a few cases that share their setup, with a rough cost for the progress bar's ETA. The plan
//! keeps the steps `--case` and `--impl` select; the runner (`runner/mod.rs`) builds the
//! settings from the command line, runs the steps in order and records the [`Row`]s each
//! returns.
//!
//! Modes: `--quick` (the CI smoke run, under a minute), the default (every suite up to 1M
//! timers in a few minutes: a measurement is repeated up to its repetition count but no longer
//! than a time budget once it has one run), `--full` (up to 10M timers, every repetition).

use std::time::{Duration, Instant};

use crate::record::{Row, Suite};

/// How much a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Quick,
    Default,
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Default => "default",
            Mode::Full => "full",
        }
    }
}

/// The settings every suite reads: mode, sizes, repetitions, selection. The runner fills them
/// in from the command line (`--quick`/`--full`, `--n`, `--reps`, `--impl`, `--case`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub mode: Mode,
    pub(super) n: Option<Vec<usize>>,
    pub(super) reps: Option<usize>,
    pub(super) impls: Option<Vec<String>>,
    pub(super) cases: Option<Vec<String>>,
}

impl Settings {
    /// `--n`, or the sizes of the current mode.
    pub fn sizes(&self, quick: &[usize], default: &[usize], full: &[usize]) -> Vec<usize> {
        self.n.clone().unwrap_or_else(|| {
            match self.mode {
                Mode::Quick => quick,
                Mode::Default => default,
                Mode::Full => full,
            }
            .to_vec()
        })
    }

    /// `--reps`, or `quick` in quick mode and `normal` otherwise.
    pub fn reps(&self, quick: usize, normal: usize) -> usize {
        self.reps.unwrap_or(match self.mode {
            Mode::Quick => quick,
            _ => normal,
        })
    }

    /// `quick`, `default` or `full`, by mode.
    pub fn pick<T>(&self, quick: T, default: T, full: T) -> T {
        match self.mode {
            Mode::Quick => quick,
            Mode::Default => default,
            Mode::Full => full,
        }
    }

    /// How long one measurement keeps repeating once it has a run: the default and quick
    /// modes bound it so that slow peers at 1M timers run once; `--full` and `--reps` run
    /// every repetition.
    pub fn budget(&self) -> Duration {
        if self.reps.is_some() {
            return Duration::MAX;
        }
        self.pick(
            Duration::from_millis(500),
            Duration::from_millis(1200),
            Duration::MAX,
        )
    }

    /// These settings without `--case` and `--impl`: what selects every step.
    pub(super) fn unfiltered(&self) -> Settings {
        Settings {
            impls: None,
            cases: None,
            ..self.clone()
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

    /// Runs `f` up to `reps` times, at least once, and no more once `budget()` has passed;
    /// the results in run order.
    pub fn repeat<T>(&self, reps: usize, mut f: impl FnMut() -> T) -> Vec<T> {
        self.runs(reps.max(1), 1).map(|_| f()).collect()
    }

    /// The run numbers `0 .. reps`: the first `min` always, later ones only while `budget()`
    /// (counted from this call) has not passed. What every repeated measurement loops over.
    pub fn runs(&self, reps: usize, min: usize) -> impl Iterator<Item = usize> {
        let (start, budget) = (Instant::now(), self.budget());
        (0..reps).take_while(move |&run| run < min || start.elapsed() <= budget)
    }
}

/// One unit of work of a suite: an implementation at one size, recording rows of `cases`.
pub(crate) struct Step<'a> {
    pub(super) suite: Suite,
    pub(super) cases: Vec<&'static str>,
    imp: String,
    /// Implementations this step records besides `imp`, measured interleaved with it.
    also: Vec<&'static str>,
    n: usize,
    threads: usize,
    pub(super) cost: f64,
    /// Shown after the size in the progress line (the wheel's distribution).
    detail: &'static str,
    pub(super) run: Box<dyn FnOnce() -> Vec<Row> + 'a>,
}

impl<'a> Step<'a> {
    /// A step of `suite` for `imp` that records rows of `cases` at `n` timers and `threads`;
    /// `cost` is a rough relative cost (about milliseconds on a 2-core machine) for the ETA.
    pub fn new(
        suite: Suite,
        cases: &[&'static str],
        imp: &str,
        n: usize,
        threads: usize,
        cost: f64,
        run: impl FnOnce() -> Vec<Row> + 'a,
    ) -> Step<'a> {
        Step {
            suite,
            cases: cases.to_vec(),
            imp: imp.to_string(),
            also: Vec::new(),
            n,
            threads,
            cost: cost.max(1.0),
            detail: "",
            run: Box::new(run),
        }
    }

    /// This step with `detail` shown in its progress line.
    pub fn detail(mut self, detail: &'static str) -> Step<'a> {
        self.detail = detail;
        self
    }

    /// This step with `imp` recorded too: the step measures both implementations run by run
    /// in turn, so that the difference between them is not the machine's drift between two
    /// steps. The step runs if `--impl` selects either; it measures only what is selected.
    pub fn also(mut self, imp: &'static str) -> Step<'a> {
        self.also.push(imp);
        self
    }

    /// The implementations this step records: `imp`, then the `also` ones.
    pub(super) fn imps(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.imp.as_str()).chain(self.also.iter().copied())
    }

    /// The (case, implementation) rows this step owes under `settings`: every case and
    /// implementation of the step that `--case` and `--impl` select. A pair without a row
    /// after the step ran is a lost result.
    pub(super) fn owed(&self, settings: &Settings) -> Vec<(&'static str, String)> {
        let imps: Vec<&str> = self.imps().filter(|i| settings.wants_impl(i)).collect();
        let cases = self.cases.iter().filter(|c| settings.wants_case(c));
        cases
            .flat_map(|&c| imps.iter().map(move |&i| (c, i.to_string())))
            .collect()
    }

    /// The step's size (timers; the progress line's `n=`).
    pub(super) fn n(&self) -> usize {
        self.n
    }

    /// The progress line's text: suite, cases, implementations, size, threads, detail.
    pub(super) fn describe(&self) -> String {
        let cases = match self.cases.as_slice() {
            [one] => one.to_string(),
            [first, .., last] => format!("{first}..{last}"),
            [] => String::new(),
        };
        let threads = if self.threads > 1 {
            format!(" T={}", self.threads)
        } else {
            String::new()
        };
        let imps = self.imps().collect::<Vec<_>>().join("+");
        format!(
            "{} {} {imps} n={}{threads} {}",
            self.suite.name(),
            cases,
            self.n,
            self.detail
        )
    }
}

/// The steps of a run, in order.
pub(crate) struct Plan<'a> {
    pub(crate) settings: &'a Settings,
    pub(super) steps: Vec<Step<'a>>,
}

impl<'a> Plan<'a> {
    /// An empty plan under `settings`.
    pub(super) fn new(settings: &'a Settings) -> Plan<'a> {
        Plan {
            settings,
            steps: Vec::new(),
        }
    }

    /// Adds `step` if `--case` and `--impl` select it.
    pub fn add(&mut self, step: Step<'a>) {
        let s = self.settings;
        let imp = step.imps().any(|i| s.wants_impl(i));
        if imp && step.cases.iter().any(|c| s.wants_case(c)) {
            self.steps.push(step);
        }
    }
}
