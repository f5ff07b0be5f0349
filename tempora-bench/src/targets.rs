//! tempora's performance targets (BENCHMARKS.md "Targets" says why each is what it is) and
//! the verdict of one run against them. The targets are data: `targets.toml` (its header
//! describes the keys), built into the binary and parsed once into [`TARGETS`].
//!
//! Every target is a ratio within one run: tempora's figure against a reference measured in the
//! same process at the same time (the kernel, the best peer, or the distinct expiry instants),
//! or against a fixed limit. Absolute figures move several times between machines; ratios of
//! one run hold on a noisy machine, but they too can differ between machines (a larger L3
//! changes which structure wins the wheel suite), so the verdict is always printed with the
//! machine it was measured on.
//!
//! The ratio is always `reference / tempora` for a figure where lower is better: 12x means
//! tempora's time (or wake-ups, lateness, bytes) is a twelfth of the reference's. A target is met
//! when the ratio is at least its goal.
//!
//! One kind of target bounds a difference instead: [`Reference::Within`] holds one of
//! tempora's implementations (the C ABI's `tempora-c`) against another of its own (`tempora`)
//! plus a fixed allowance, so "at most 5 ns slower" is the ratio
//! `(tempora + 5 ns) / tempora-c >= 1`, and the verdict prints the difference beside it.

use std::sync::LazyLock;

use serde::Deserialize;

use crate::record::{Field, Record, Suite};
use crate::report::table::{plain, Align};
use crate::runner::machine::Machine;

/// What tempora's figure is held against (`reference` in `targets.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "ReferenceSpec")]
pub enum Reference {
    /// One implementation's row of the same case and size.
    Impl(String),
    /// The best (lowest) of every non-tempora row of the same case and size.
    BestPeer,
    /// Another figure of tempora's own row (the expiry instants for wake-ups).
    OwnField(Field),
    /// A fixed limit, in the figure's unit.
    Limit(f64),
    /// Another implementation's row of the same case and size (one of tempora's own too) plus
    /// an allowance in the figure's unit: with goal 1 the target is met when tempora's figure
    /// exceeds that row's by at most the allowance.
    Within(String, f64),
    /// Another of tempora's own implementations' rows of the same case and size (`tempora`,
    /// precise, against `tempora-slack`'s wake-ups).
    Own(String),
    /// The same implementation's row of the same case at another size: how the figure grows
    /// with n (`deliver` at 1M against 10k; a goal below 1 allows that much growth).
    OwnAt(u64),
}

/// A reference as `targets.toml` writes it: `"best-peer"`, or a table with one of the keys.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReferenceSpec {
    Named(NamedReference),
    Table(ReferenceTable),
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum NamedReference {
    BestPeer,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ReferenceTable {
    #[serde(rename = "impl")]
    imp: Option<String>,
    own_field: Option<Field>,
    limit: Option<f64>,
    own: Option<String>,
    own_n: Option<u64>,
    within: Option<String>,
    allowance: Option<f64>,
}

impl TryFrom<ReferenceSpec> for Reference {
    type Error = String;

    fn try_from(spec: ReferenceSpec) -> Result<Reference, String> {
        let t = match spec {
            ReferenceSpec::Named(NamedReference::BestPeer) => return Ok(Reference::BestPeer),
            ReferenceSpec::Table(t) => t,
        };
        match t {
            ReferenceTable {
                imp: Some(name),
                own_field: None,
                limit: None,
                own: None,
                own_n: None,
                within: None,
                allowance: None,
            } => Ok(Reference::Impl(name)),
            ReferenceTable {
                imp: None,
                own_field: Some(f),
                limit: None,
                own: None,
                own_n: None,
                within: None,
                allowance: None,
            } => Ok(Reference::OwnField(f)),
            ReferenceTable {
                imp: None,
                own_field: None,
                limit: Some(l),
                own: None,
                own_n: None,
                within: None,
                allowance: None,
            } => Ok(Reference::Limit(l)),
            ReferenceTable {
                imp: None,
                own_field: None,
                limit: None,
                own: Some(name),
                own_n: None,
                within: None,
                allowance: None,
            } => Ok(Reference::Own(name)),
            ReferenceTable {
                imp: None,
                own_field: None,
                limit: None,
                own: None,
                own_n: Some(n),
                within: None,
                allowance: None,
            } => Ok(Reference::OwnAt(n)),
            ReferenceTable {
                imp: None,
                own_field: None,
                limit: None,
                own: None,
                own_n: None,
                within: Some(name),
                allowance: Some(a),
            } => Ok(Reference::Within(name, a)),
            _ => Err(
                "a reference is \"best-peer\" or a table of exactly one of impl, \
                      own-field, limit, own, own-n, or within with its allowance"
                    .into(),
            ),
        }
    }
}

/// One headline target: a `[[target]]` of `targets.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub what: String,
    /// The implementation whose row is tempora's figure: `tempora`, or another of tempora's
    /// own (`tempora-c`).
    #[serde(rename = "impl", default = "tempora")]
    pub imp: String,
    pub suite: Suite,
    pub case: String,
    /// The rows' size; `None`: the largest n at which `imp` has a row.
    #[serde(rename = "n")]
    pub size: Option<u64>,
    #[serde(default = "one")]
    pub threads: u32,
    pub dist: Option<String>,
    /// Which of a row's figures the target compares (lower is better for each); `None`:
    /// `ns_per_op`.
    pub figure: Option<Field>,
    /// The reference's row may hold fewer timers than tempora's (the kernel's, capped under
    /// `RLIMIT_SIGPENDING`): the one at the largest n up to tempora's. Only for a figure per
    /// event, which does not grow with n (`cpu_ns_per_wakeup`).
    #[serde(default, rename = "any-n")]
    pub any_n: bool,
    #[serde(default = "ns")]
    pub unit: String,
    pub reference: Reference,
    /// The least `reference / tempora` that meets the target.
    pub goal: f64,
}

fn tempora() -> String {
    "tempora".into()
}

fn one() -> u32 {
    1
}

fn ns() -> String {
    "ns".into()
}

/// The targets file's top level: its `[[target]]`s.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetsFile {
    target: Vec<Target>,
}

/// The headline targets, in the order the verdict prints them: `targets.toml`, built into the
/// binary and parsed at first use (a unit test parses it, so a malformed file fails the tests,
/// not a run).
pub static TARGETS: LazyLock<Vec<Target>> = LazyLock::new(|| {
    let file: TargetsFile =
        toml::from_str(include_str!("../targets.toml")).expect("targets.toml is valid");
    file.target
});

/// Met, not met, or not measured in this run (and why).
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Met,
    NotMet,
    NotMeasured(String),
}

/// One target's outcome in one run.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub target: &'static Target,
    /// `n=20000`, `n=1000000 server`, ...
    pub at: String,
    pub figure: Option<f64>,
    /// The reference's name and figure.
    pub reference: Option<(String, f64)>,
    pub ratio: Option<f64>,
    pub status: Status,
    /// What the verdict prints after the status: for a [`Reference::Within`] target, the
    /// difference itself (`tempora-c − tempora = 2.1 ns`).
    pub note: Option<String>,
}

fn value(r: &Record, figure: Option<Field>) -> Option<f64> {
    if !r.ok {
        return None;
    }
    match figure {
        None => Some(r.ns_per_op).filter(|v| *v > 0.0),
        Some(f) => r.fields.num(f),
    }
}

/// Evaluates every target on `records`.
pub fn verdict(records: &[Record]) -> Vec<Verdict> {
    TARGETS.iter().map(|t| evaluate(t, records)).collect()
}

fn evaluate(t: &'static Target, records: &[Record]) -> Verdict {
    let same_case = |r: &&Record| {
        r.suite == t.suite
            && r.case == t.case
            && r.threads == t.threads
            && t.dist.as_ref().is_none_or(|d| r.dist() == d)
    };
    let ours = |r: &&Record| same_case(r) && r.imp == t.imp;
    let n = match t.size {
        Some(n) => Some(n),
        None => records.iter().filter(ours).map(|r| r.n).max(),
    };
    let dist = t.dist.as_ref().map_or(String::new(), |d| format!(" {d}"));
    let threads = if t.threads > 1 {
        format!(" T={}", t.threads)
    } else {
        String::new()
    };
    let at = n.map_or_else(|| "-".into(), |n| format!("n={n}{threads}{dist}"));
    let mut v = Verdict {
        target: t,
        at,
        figure: None,
        reference: None,
        ratio: None,
        status: Status::NotMeasured("not in this run".into()),
        note: None,
    };
    let Some(n) = n else { return v };
    let Some(mine) = records.iter().filter(ours).find(|r| r.n == n) else {
        return v;
    };
    let Some(figure) = value(mine, t.figure) else {
        v.status = Status::NotMeasured(mine.error.clone().unwrap_or("no figure".into()));
        return v;
    };
    v.figure = Some(figure);
    // The kernel's rows of the wake-up and restore cases may hold fewer timers than tempora's.
    let peers_at = |r: &&Record| same_case(r) && r.n == n && !r.is_tempora();
    let reference = match &t.reference {
        Reference::Impl(name) if t.any_n => {
            let row = records
                .iter()
                .filter(|r| same_case(r) && r.n <= n && r.imp == *name)
                .max_by_key(|r| r.n);
            match row {
                Some(r) => match value(r, t.figure) {
                    Some(x) if r.n == n => Ok((name.to_string(), x)),
                    Some(x) => Ok((format!("{name} (n={})", r.n), x)),
                    None => Err(format!(
                        "{name}: {}",
                        r.error.as_deref().unwrap_or("no figure")
                    )),
                },
                None => Err(format!("no {name} row at n <= {n}")),
            }
        }
        Reference::Impl(name) => match records.iter().filter(peers_at).find(|r| r.imp == *name) {
            Some(r) => match value(r, t.figure) {
                Some(x) => Ok((name.to_string(), x)),
                None => Err(format!(
                    "{name}: {}",
                    r.error.as_deref().unwrap_or("no figure")
                )),
            },
            None => Err(format!("no {name} row")),
        },
        Reference::BestPeer => records
            .iter()
            .filter(peers_at)
            .filter_map(|r| Some((r.imp.clone(), value(r, t.figure)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| "no peer row".to_string()),
        Reference::OwnField(f) => mine
            .fields
            .num(*f)
            .map(|x| (f.key().replace('_', " "), x))
            .ok_or_else(|| format!("no {}", f.key())),
        Reference::Limit(l) => Ok(("limit".to_string(), *l)),
        Reference::Own(name) => {
            let other = |r: &&Record| same_case(r) && r.n == n && r.imp == *name;
            records
                .iter()
                .filter(other)
                .find_map(|r| value(r, t.figure))
                .map(|x| (name.to_string(), x))
                .ok_or_else(|| format!("no {name} row"))
        }
        Reference::OwnAt(at) => {
            let other = |r: &&Record| same_case(r) && r.n == *at && r.imp == t.imp;
            records
                .iter()
                .filter(other)
                .find_map(|r| value(r, t.figure))
                .map(|x| (format!("{} n={at}", t.imp), x))
                .ok_or_else(|| format!("no {} row at n={at}", t.imp))
        }
        Reference::Within(name, allowance) => {
            let other = |r: &&Record| same_case(r) && r.n == n && r.imp == *name;
            match records
                .iter()
                .filter(other)
                .find_map(|r| value(r, t.figure))
            {
                Some(x) => {
                    v.note = Some(format!(
                        "{} − {name} = {}",
                        t.imp,
                        show(figure - x, &t.unit)
                    ));
                    Ok((format!("{name}+{allowance}{}", t.unit), x + allowance))
                }
                None => Err(format!("no {name} row")),
            }
        }
    };
    match reference {
        Ok((name, x)) => {
            let ratio = x / figure;
            v.reference = Some((name, x));
            v.ratio = Some(ratio);
            v.status = if ratio >= t.goal {
                Status::Met
            } else {
                Status::NotMet
            };
        }
        Err(why) => v.status = Status::NotMeasured(why),
    }
    v
}

/// A figure with its unit, short (large nanoseconds as µs or ms).
pub fn show(x: f64, unit: &str) -> String {
    if unit == "ns" && x >= 1e6 {
        return format!("{} ms", show(x / 1e6, ""));
    }
    if unit == "ns" && x >= 1e4 {
        return format!("{} µs", show(x / 1e3, ""));
    }
    let num = if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    match unit {
        "x" => format!("{num}x"),
        "/s" => format!("{num}/s"),
        "" => num,
        u => format!("{num} {u}"),
    }
}

/// A ratio as the verdict prints it: `12.00x`, or `∞` against a figure of 0 (no wake-up, no
/// early fire).
pub fn show_ratio(r: f64) -> String {
    if r.is_infinite() {
        "∞".into()
    } else {
        format!("{r:.2}x")
    }
}

/// The verdict block as the terminal shows it.
pub fn verdict_text(verdict: &[Verdict], machine: &Machine) -> String {
    let mut out = String::from("verdict: tempora against its targets, figures of this run only\n");
    let (mut met, mut measured) = (0, 0);
    let rows = verdict.iter().map(|v| {
        let t = &v.target;
        let figure = v.figure.map_or("-".into(), |x| show(x, &t.unit));
        let reference = v.reference.as_ref().map_or("-".into(), |(name, x)| {
            format!("{name} {}", show(*x, &t.unit))
        });
        let ratio = v.ratio.map_or("-".into(), show_ratio);
        let status = match &v.status {
            Status::Met => {
                met += 1;
                measured += 1;
                "met".to_string()
            }
            Status::NotMet => {
                measured += 1;
                "NOT MET".to_string()
            }
            Status::NotMeasured(why) => format!("not measured: {why}"),
        };
        let status = match &v.note {
            Some(note) => format!("{status} ({note})"),
            None => status,
        };
        let goal = format!(">={}x", t.goal);
        vec![
            t.what.clone(),
            v.at.clone(),
            figure,
            reference,
            ratio,
            goal,
            status,
        ]
    });
    let header = [
        "target",
        "at",
        "tempora",
        "reference",
        "ratio",
        "goal",
        "verdict",
    ];
    let (l, r) = (Align::Left, Align::Right);
    out += &plain(
        "  ",
        &header,
        &[l, l, r, r, r, r, l],
        rows.collect::<Vec<_>>(),
    );
    out += &format!(
        "  {met} of {measured} measured targets met ({} not measured in this run).\n",
        verdict.len() - measured
    );
    out += &format!(
        "  ratio = reference / tempora (lower is better for every figure). Ratios hold within \
         one run;\n  between machines they differ (L3 size changes the wheel's ranking): this run's \
         machine:\n  {}\n",
        machine.describe().replace('\n', "\n  ")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Fields, Measured, Row};
    use Suite::{Capi, Seed, Service};

    fn rec(case: &str, imp: &str, n: usize, ns: f64) -> Record {
        Row::new(case, imp, n, 1, Measured::per_op(ns, n, Fields::default())).into_record(Seed)
    }

    #[test]
    fn a_target_is_met_when_the_reference_is_enough_times_slower() {
        let records = vec![
            rec("t1-create", "tempora", 20_000, 30.0),
            rec("t1-create", "kernel", 20_000, 600.0),
            rec("t1-create", "tempora", 50_000, 30.0),
            rec("t1-create", "kernel", 50_000, 200.0),
        ];
        let v = verdict(&records);
        assert_eq!(v[0].status, Status::Met);
        assert_eq!(v[0].ratio, Some(20.0));
        assert_eq!(v[1].status, Status::NotMet);
        assert!(matches!(v[2].status, Status::NotMeasured(_)));
    }

    /// `deliver`'s flatness: its 1M figure against its own 10k one, at most 1.2x (goal 1/1.2).
    #[test]
    fn an_own_n_target_holds_a_figure_against_its_own_row_at_another_size() {
        let deliver = |n: usize, ns: f64| {
            Row::new(
                "deliver",
                "tempora",
                n,
                1,
                Measured::per_op(ns, n, Fields::default()),
            )
            .into_record(Service)
        };
        let flat = TARGETS
            .iter()
            .find(|t| t.case == "deliver" && t.reference == Reference::OwnAt(10_000))
            .unwrap();
        assert_eq!(flat.size, Some(1_000_000));
        // 1.1x the 10k figure: met; the reference is the 10k row.
        let v = evaluate(flat, &[deliver(10_000, 30.0), deliver(1_000_000, 33.0)]);
        assert_eq!(v.status, Status::Met);
        assert_eq!(v.reference, Some(("tempora n=10000".to_string(), 30.0)));
        // 1.3x: not met.
        let v = evaluate(flat, &[deliver(10_000, 30.0), deliver(1_000_000, 39.0)]);
        assert_eq!(v.status, Status::NotMet);
        // Without the 10k row there is nothing to hold it against; a peer's 10k row is not it.
        let kernel = Row::new(
            "deliver",
            "kernel",
            10_000,
            1,
            Measured::per_op(300.0, 10_000, Fields::default()),
        )
        .into_record(Service);
        let v = evaluate(flat, &[kernel, deliver(1_000_000, 33.0)]);
        assert!(matches!(v.status, Status::NotMeasured(_)));
        // The key parses as that reference and no other key may come with it.
        let parsed: Reference = toml::from_str::<toml::Table>("r = { own-n = 5 }").unwrap()["r"]
            .clone()
            .try_into()
            .unwrap();
        assert_eq!(parsed, Reference::OwnAt(5));
        let both = toml::from_str::<toml::Table>("r = { own-n = 5, limit = 1.0 }").unwrap()["r"]
            .clone()
            .try_into::<Reference>();
        assert!(both.is_err());
    }

    #[test]
    fn a_within_target_bounds_the_difference_to_another_of_temporas_rows() {
        let capi = |imp: &str, ns: f64| {
            Row::new(
                "settime",
                imp,
                1000,
                1,
                Measured::per_op(ns, 1000, Fields::default()),
            )
            .into_record(Capi)
        };
        let settime = TARGETS
            .iter()
            .find(|t| t.suite == Capi && t.case == "settime" && t.size == Some(1000))
            .unwrap();
        // 3 ns over: met; the figure is tempora-c's, the reference tempora's plus 5 ns.
        let v = evaluate(settime, &[capi("tempora", 50.0), capi("tempora-c", 53.0)]);
        assert_eq!(v.status, Status::Met);
        assert_eq!(v.figure, Some(53.0));
        assert_eq!(v.reference, Some(("tempora+5ns".to_string(), 55.0)));
        assert_eq!(v.note.as_deref(), Some("tempora-c − tempora = 3.00 ns"));
        // 7 ns over: not met.
        let v = evaluate(settime, &[capi("tempora", 50.0), capi("tempora-c", 57.0)]);
        assert_eq!(v.status, Status::NotMet);
        // Faster through C than from Rust (noise): met, not a negative ratio.
        let v = evaluate(settime, &[capi("tempora", 50.0), capi("tempora-c", 49.0)]);
        assert_eq!(v.status, Status::Met);
        assert!(v.ratio.unwrap() > 1.0);
        // Without the Rust row there is nothing to hold it against.
        let v = evaluate(settime, &[capi("tempora-c", 53.0)]);
        assert!(matches!(v.status, Status::NotMeasured(_)));
        // A create+delete pair is two calls: 10 ns allowed.
        let pair = TARGETS
            .iter()
            .find(|t| t.suite == Capi && t.case == "create-delete")
            .unwrap();
        assert_eq!(pair.reference, Reference::Within("tempora".into(), 10.0));
    }

    #[test]
    fn the_drop_ins_sigwait_p50_is_held_within_1_2x_of_the_kernels() {
        let row = |imp: &str, p50: f64| {
            let fields = Fields::default().with(Field::P50Ns, p50);
            Row::new(
                "sigwait-latency",
                imp,
                1000,
                1,
                Measured::fields_only(fields),
            )
            .into_record(Capi)
        };
        let target = TARGETS
            .iter()
            .find(|t| t.case == "sigwait-latency")
            .unwrap();
        // 1.15x the kernel's median: met; 1.25x: not met.
        let v = evaluate(
            target,
            &[row("kernel-c", 20_000.0), row("tempora-posix-c", 23_000.0)],
        );
        assert_eq!(v.status, Status::Met);
        assert_eq!(v.figure, Some(23_000.0));
        assert_eq!(v.reference, Some(("kernel-c".to_string(), 20_000.0)));
        let v = evaluate(
            target,
            &[row("kernel-c", 20_000.0), row("tempora-posix-c", 25_000.0)],
        );
        assert_eq!(v.status, Status::NotMet);
        // No kernel row: not measured.
        let v = evaluate(target, &[row("tempora-posix-c", 23_000.0)]);
        assert!(matches!(v.status, Status::NotMeasured(_)));
    }

    #[test]
    fn firing_targets_read_temporas_own_rows_and_a_zero_meets_a_zero_limit() {
        let row = |imp: &str, wakeups: f64, early: u64| {
            let fields = Fields::default()
                .with(Field::WakeupsPerS, wakeups)
                .with(Field::Early, early);
            Row::new(
                "server-timeouts",
                imp,
                100_000,
                1,
                Measured::per_op(300.0, 1, fields),
            )
            .into_record(Service)
        };
        let records = vec![
            row("tempora", 200.0, 0),
            row("tempora-slack", 0.5, 0),
            row("tempora-deferrable", 25.0, 1),
        ];
        let v = verdict(&records);
        let find = |what: &str| v.iter().find(|v| v.target.what == what).unwrap();
        let slack = find("slack wake-ups vs precise");
        assert_eq!(slack.status, Status::Met);
        assert_eq!(slack.ratio, Some(400.0));
        assert_eq!(
            find("deferrable wake-ups vs precise").status,
            Status::NotMet
        );
        let early = find("slack: no early fire");
        assert_eq!(early.status, Status::Met);
        assert_eq!(show_ratio(early.ratio.unwrap()), "∞");
        assert_eq!(find("deferrable: no early fire").status, Status::NotMet);
    }

    #[test]
    fn a_per_wakeup_target_holds_tempora_against_the_kernels_smaller_row() {
        let row = |imp: &str, n: usize, per_wakeup: Option<f64>, ok: bool| {
            let fields = Fields::default()
                .with(Field::WakeupsPerS, 190.0)
                .with_opt(Field::CpuNsPerWakeup, per_wakeup);
            let m = if ok {
                Measured::per_op(800.0, 1, fields)
            } else {
                Measured::from_result(Err("timer_create: errno 11".into()))
            };
            Row::new("server-timeouts", imp, n, 1, m).into_record(Service)
        };
        let target = TARGETS
            .iter()
            .find(|t| t.what == "driver CPU per wake-up vs kernel")
            .unwrap();
        assert!(target.any_n);
        // The kernel's row holds 90k connections, tempora's 100k: still compared.
        let records = vec![
            row("tempora", 100_000, Some(25_000.0), true),
            row("kernel", 90_000, Some(20_000.0), true),
        ];
        let v = evaluate(target, &records);
        assert_eq!(v.at, "n=100000");
        assert_eq!(v.figure, Some(25_000.0));
        assert_eq!(
            v.reference,
            Some(("kernel (n=90000)".to_string(), 20_000.0))
        );
        assert_eq!(v.ratio, Some(0.8));
        assert_eq!(v.status, Status::NotMet);
        // At the same n (a `--quick` run: 10k each) the name carries no size.
        let records = vec![
            row("tempora", 10_000, Some(18_000.0), true),
            row("kernel", 10_000, Some(20_000.0), true),
        ];
        let v = evaluate(target, &records);
        assert_eq!(v.reference, Some(("kernel".to_string(), 20_000.0)));
        assert_eq!(v.status, Status::Met);
        // The largest kernel row up to tempora's n, never a larger one.
        let records = vec![
            row("tempora", 100_000, Some(25_000.0), true),
            row("kernel", 10_000, Some(30_000.0), true),
            row("kernel", 90_000, Some(20_000.0), true),
            row("kernel", 200_000, Some(1.0), true),
        ];
        let v = evaluate(target, &records);
        assert_eq!(v.reference.unwrap().1, 20_000.0);
        // A failed kernel row says why; no kernel row at all says so.
        let v = evaluate(
            target,
            &[
                row("tempora", 100_000, Some(25_000.0), true),
                row("kernel", 90_000, None, false),
            ],
        );
        assert_eq!(
            v.status,
            Status::NotMeasured("kernel: timer_create: errno 11".into())
        );
        let v = evaluate(target, &[row("tempora", 100_000, Some(25_000.0), true)]);
        assert!(matches!(v.status, Status::NotMeasured(_)));
        // Without `any-n` the sizes must match (the other server-timeouts targets).
        let mut strict = target.clone();
        strict.any_n = false;
        let strict: &'static Target = Box::leak(Box::new(strict));
        let v = evaluate(
            strict,
            &[
                row("tempora", 100_000, Some(25_000.0), true),
                row("kernel", 90_000, Some(20_000.0), true),
            ],
        );
        assert_eq!(v.status, Status::NotMeasured("no kernel row".into()));
    }

    #[test]
    fn best_peer_is_the_fastest_other_implementation() {
        let mut records = vec![
            rec("t4-create", "tempora", 20_000, 50.0),
            rec("t4-create", "dashmap", 20_000, 40.0),
            rec("t4-create", "global-lock", 20_000, 90.0),
        ];
        for r in &mut records {
            r.threads = 2;
        }
        let v = evaluate(&TARGETS[4], &records);
        assert_eq!(v.reference, Some(("dashmap".to_string(), 40.0)));
        assert_eq!(v.status, Status::NotMet);
    }

    #[test]
    fn every_target_has_a_goal_a_known_unit_and_a_known_distribution() {
        assert_eq!(TARGETS.len(), 62);
        for t in TARGETS.iter() {
            assert!(t.goal > 0.0, "{}", t.what);
            assert!(
                ["ns", "B", "/s", "x", ""].contains(&t.unit.as_str()),
                "{}",
                t.what
            );
            if let Some(d) = &t.dist {
                assert!(["uniform", "server"].contains(&d.as_str()), "{}", t.what);
            }
        }
    }

    #[test]
    fn a_reference_is_one_kind_with_what_that_kind_needs() {
        let parse = |r: &str| {
            let text = format!(
                "[[target]]\nwhat = \"w\"\nsuite = \"seed\"\ncase = \"c\"\ngoal = 1.0\nreference = {r}"
            );
            toml::from_str::<TargetsFile>(&text).map(|mut f| f.target.remove(0).reference)
        };
        assert_eq!(parse("\"best-peer\"").unwrap(), Reference::BestPeer);
        assert_eq!(
            parse("{ within = \"tempora\", allowance = 3.0 }").unwrap(),
            Reference::Within("tempora".into(), 3.0)
        );
        assert_eq!(
            parse("{ own-field = \"instants_per_s\" }").unwrap(),
            Reference::OwnField(Field::InstantsPerS)
        );
        assert!(parse("{ within = \"tempora\" }").is_err());
        assert!(parse("{ impl = \"kernel\", limit = 1.0 }").is_err());
        assert!(parse("\"best\"").is_err());
        assert!(parse("{ own-field = \"no_such_field\" }").is_err());
    }
}
