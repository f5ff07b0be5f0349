//! `tempora bench compare OLD.jsonl NEW.jsonl`: how a change's speed is judged.
//!
//! Rows are matched by (suite, case, dist, n, threads, impl). For each, the two figures (lower
//! is better: `ns_per_op`, or the lateness p99, or the wake-up rate) and `new / old`. Beside
//! every tempora row stands its peers' median ratio in the same (suite, case, dist, n,
//! threads): if every implementation moved 1.4x together, it was the machine, not the change.
//! A group without peers uses the median ratio of every peer row of the comparison. Rows are
//! sorted by how much they changed, tempora's against the drift first.
//!
//! With `--threshold T` the command exits 1 when a tempora row got slower by more than `T`
//! both in itself and against its peers' drift (`new/old > T` and `(new/old) / drift > T`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::record::{is_tempora_impl, read_jsonl, Record};
use crate::report::table::{plain, Align};
use crate::runner::machine::Machine;

/// `tempora bench compare` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The earlier run's JSON lines (`--json` output, `results.jsonl` or `runs/NAME.jsonl`).
    pub old: PathBuf,
    /// The later run's JSON lines.
    pub new: PathBuf,
    /// Exit 1 if a tempora row got slower by more than this factor while its peers did not.
    #[arg(long)]
    pub threshold: Option<f64>,
}

type Key = (String, String, String, u64, u32);

/// The machine recorded beside a run's lines (`results.jsonl` -> `machine.json`,
/// `runs/NAME.jsonl` -> `runs/NAME.machine.json`), if there is one.
pub fn machine_of(path: &Path) -> Option<Machine> {
    let dir = path.parent()?;
    let stem = path.file_stem()?.to_str()?;
    let candidates = [
        dir.join(format!("{stem}.machine.json")),
        dir.join("machine.json"),
    ];
    candidates
        .iter()
        .find_map(|p| serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok())
}

/// One matched row.
#[derive(Debug, Clone)]
pub struct Change {
    pub key: Key,
    pub imp: String,
    pub unit: &'static str,
    pub old: f64,
    pub new: f64,
    pub ratio: f64,
    /// The peers' median ratio (machine drift), for tempora rows.
    pub drift: Option<f64>,
}

impl Change {
    fn is_tempora(&self) -> bool {
        is_tempora_impl(&self.imp)
    }

    /// The ratio against the drift: what the change did, the machine taken out.
    pub fn net(&self) -> f64 {
        self.ratio / self.drift.unwrap_or(1.0)
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| crate::median(&mut v))
}

/// Matches the rows of two runs.
pub fn changes(old: &[Record], new: &[Record]) -> Vec<Change> {
    let key = |r: &Record| -> Key {
        (
            r.suite.name().to_string(),
            r.case.clone(),
            r.dist().to_string(),
            r.n,
            r.threads,
        )
    };
    let mut before: BTreeMap<(Key, String), (f64, &'static str)> = BTreeMap::new();
    for r in old {
        if let Some(f) = r.figure() {
            before.insert((key(r), r.imp.clone()), f);
        }
    }
    let mut out: Vec<Change> = new
        .iter()
        .filter_map(|r| {
            let (new_v, unit) = r.figure()?;
            let &(old_v, old_unit) = before.get(&(key(r), r.imp.clone()))?;
            (unit == old_unit && old_v > 0.0).then(|| Change {
                key: key(r),
                imp: r.imp.clone(),
                unit,
                old: old_v,
                new: new_v,
                ratio: new_v / old_v,
                drift: None,
            })
        })
        .collect();
    let all_peers = median(
        out.iter()
            .filter(|c| !c.is_tempora())
            .map(|c| c.ratio)
            .collect(),
    );
    let peers_of: BTreeMap<Key, f64> = {
        let mut groups: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
        for c in out.iter().filter(|c| !c.is_tempora()) {
            groups.entry(c.key.clone()).or_default().push(c.ratio);
        }
        groups
            .into_iter()
            .filter_map(|(k, v)| Some((k, median(v)?)))
            .collect()
    };
    for c in out.iter_mut().filter(|c| c.is_tempora()) {
        c.drift = peers_of.get(&c.key).copied().or(all_peers);
    }
    out.sort_by(|a, b| {
        b.is_tempora()
            .cmp(&a.is_tempora())
            .then(b.net().ln().abs().total_cmp(&a.net().ln().abs()))
    });
    out
}

/// The tempora rows that regressed past `threshold`, themselves and against the drift.
pub fn regressions(changes: &[Change], threshold: f64) -> Vec<&Change> {
    changes
        .iter()
        .filter(|c| c.is_tempora() && c.ratio > threshold && c.net() > threshold)
        .collect()
}

/// The comparison as text.
pub fn render(changes: &[Change], old: Option<&Machine>, new: Option<&Machine>) -> String {
    let mut out = String::new();
    for (name, m) in [("old", old), ("new", new)] {
        match m {
            Some(m) => {
                out += &format!(
                    "{name} {}\n",
                    m.describe().replace('\n', &format!("\n{name} "))
                )
            }
            None => out += &format!("{name}: no machine.json beside it\n"),
        }
    }
    if let (Some(a), Some(b)) = (old, new) {
        if (&a.cpu, &a.l3, a.cores) != (&b.cpu, &b.l3, b.cores) {
            out += "warning: the runs are from different machines; compare the peers' ratios, \
                    not the figures\n";
        }
    }
    let rows = changes.iter().map(|c| {
        let (suite, case, dist, n, threads) = &c.key;
        let what = if dist == "-" {
            format!("{suite} / {case}")
        } else {
            format!("{suite} / {case} ({dist})")
        };
        let drift = c.drift.map_or("-".into(), |d| format!("{d:.2}x"));
        let net = if c.is_tempora() {
            format!("{:.2}x", c.net())
        } else {
            String::new()
        };
        vec![
            what,
            n.to_string(),
            threads.to_string(),
            c.imp.clone(),
            format!("{:.1}", c.old),
            format!("{:.1}", c.new),
            c.unit.to_string(),
            format!("{:.2}x", c.ratio),
            drift,
            net,
        ]
    });
    let header = [
        "suite / case (dist)",
        "n",
        "T",
        "impl",
        "old",
        "new",
        "unit",
        "new/old",
        "peers",
        "net",
    ];
    let (l, r) = (Align::Left, Align::Right);
    out += "\n";
    out += &plain("", &header, &[l, r, r, l, r, r, l, r, r, r], rows);
    out +=
        "\nnew/old > 1 is slower (every figure is lower-is-better: ns/op, p99 ns, wake-ups/s).\n\
            peers: the median new/old of the other implementations in the same row group (or of \
            all peer rows), i.e. the machine's drift; net = new/old over peers.\n";
    out
}

/// Runs the command; the exit code.
pub fn run(args: &Args) -> i32 {
    let (old, new) = match (read_jsonl(&args.old), read_jsonl(&args.new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("tempora bench compare: {e}");
            return 2;
        }
    };
    let changes = changes(&old, &new);
    if changes.is_empty() {
        eprintln!("tempora bench compare: the two runs have no row in common");
        return 2;
    }
    print!(
        "{}",
        render(
            &changes,
            machine_of(&args.old).as_ref(),
            machine_of(&args.new).as_ref()
        )
    );
    if let Some(t) = args.threshold {
        let bad = regressions(&changes, t);
        if !bad.is_empty() {
            println!(
                "\n{} tempora row(s) slower by more than {t}x while their peers were not:",
                bad.len()
            );
            for c in bad {
                let (suite, case, dist, n, threads) = &c.key;
                println!(
                    "  {suite} / {case} {dist} n={n} T={threads} {}: {:.2}x (peers {:.2}x)",
                    c.imp,
                    c.ratio,
                    c.drift.unwrap_or(1.0)
                );
            }
            return 1;
        }
        println!("\nno tempora row slower by more than {t}x against its peers");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Fields, Measured, Row, Suite};

    fn rec(imp: &str, ns: f64) -> Record {
        Row::new(
            "rearm",
            imp,
            1000,
            1,
            Measured::per_op(ns, 1000, Fields::default()),
        )
        .into_record(Suite::Wheel)
    }

    #[test]
    fn a_slowdown_shared_by_the_peers_is_drift_not_a_regression() {
        let old = [
            rec("tempora", 10.0),
            rec("binary-heap", 20.0),
            rec("btreemap", 40.0),
        ];
        let machine = [
            rec("tempora", 14.0),
            rec("binary-heap", 28.0),
            rec("btreemap", 56.0),
        ];
        let c = changes(&old, &machine);
        assert_eq!(c[0].imp, "tempora");
        assert!((c[0].drift.unwrap() - 1.4).abs() < 1e-9);
        assert!(regressions(&c, 1.1).is_empty());
        let change = [
            rec("tempora", 14.0),
            rec("binary-heap", 20.0),
            rec("btreemap", 40.0),
        ];
        let c = changes(&old, &change);
        assert_eq!(regressions(&c, 1.1).len(), 1);
    }
}
