//! Which plots the page shows for each suite's rows, and the lines and bars each one draws
//! (`chart` draws them).

use std::collections::BTreeMap;

use crate::record::{Field, Record, Suite};
use crate::report::chart::{bars_svg, impl_order, lines_svg, pow10_label, Lines};
use crate::runner::machine::Machine;

/// One plot of the page.
pub(super) struct Plot {
    pub(super) id: String,
    pub(super) caption: String,
    /// How many lines or bars it draws.
    pub(super) series: usize,
    pub(super) svg: String,
}

/// Every plot of one suite's rows.
pub(super) fn plots(records: &[Record], suite: Suite, machine: &Machine) -> Vec<Plot> {
    let rows: Vec<&Record> = records
        .iter()
        .filter(|r| r.suite == suite && r.ok)
        .collect();
    // (case, dist) -> impl -> rows
    let mut groups: BTreeMap<(String, String), BTreeMap<String, Vec<&Record>>> = BTreeMap::new();
    for r in &rows {
        groups
            .entry((r.case.clone(), r.dist().to_string()))
            .or_default()
            .entry(r.imp.clone())
            .or_default()
            .push(r);
    }
    let kernel_in_suite = records
        .iter()
        .any(|r| r.suite == suite && r.imp == "kernel");
    let mut out = Vec::new();
    for ((case, dist), by_impl) in &groups {
        let mut impls: Vec<&String> = by_impl.keys().collect();
        impls.sort_by(|a, b| impl_order(a, b));
        let dist_label = if dist == "-" {
            String::new()
        } else {
            format!(" ({dist})")
        };
        let id = format!(
            "{}-{case}{}",
            suite.name(),
            if dist == "-" {
                String::new()
            } else {
                format!("-{dist}")
            }
        );
        let cap = machine
            .rlimit_sigpending
            .filter(|_| kernel_in_suite)
            .map(|l| {
                (
                    l as f64,
                    format!("kernel cap {}", pow10_label((l as f64).log10())),
                )
            });
        // ns/op against n, or bars when the case has one size.
        let ns = |r: &Record| (r.ns_per_op > 0.0).then_some(r.ns_per_op);
        let sizes: std::collections::BTreeSet<u64> = by_impl
            .values()
            .flatten()
            .filter(|r| ns(r).is_some())
            .map(|r| r.n)
            .collect();
        if sizes.len() >= 2 {
            let series = series_against_n(&impls, by_impl, ns);
            out.push(Plot {
                id: id.clone(),
                caption: format!(
                    "{case}{dist_label}: ns per operation against live timers n, log-log, one \
                     line per implementation{}",
                    if cap.is_some() {
                        "; dashed: the kernel's per-user timer cap (RLIMIT_SIGPENDING); the \
                         kernel's rows past it failed and have no point."
                    } else {
                        "."
                    }
                ),
                series: series.len(),
                svg: lines_svg(&Lines {
                    title: format!("{case}{dist_label}: ns/op vs n"),
                    x_desc: "n (live timers)",
                    y_desc: "ns per op",
                    x_log: true,
                    y_log: true,
                    x_names: None,
                    series,
                    vmarks: cap.clone().into_iter().collect(),
                    hmarks: Vec::new(),
                }),
            });
        } else if sizes.len() == 1 {
            let bars: Vec<(String, f64)> = impls
                .iter()
                .flat_map(|imp| by_impl[*imp].iter().filter(|r| ns(r).is_some()))
                .map(|r| {
                    let t = if r.threads > 1 {
                        format!(" T={}", r.threads)
                    } else {
                        String::new()
                    };
                    (format!("{}{t}", r.imp), r.ns_per_op)
                })
                .collect();
            let n = sizes.iter().next().copied().unwrap_or(0);
            out.push(Plot {
                id: id.clone(),
                caption: format!(
                    "{case}{dist_label} at n={n}: ns per operation per implementation."
                ),
                series: bars.len(),
                svg: bars_svg(
                    &format!("{case}{dist_label}: ns/op, n={n}"),
                    "ns per op",
                    &bars,
                    None,
                ),
            });
        }
        // Lateness percentiles (the callbacks' and the signals').
        if case == "lateness" || case == "deliver-signal" || case == "sigwait-latency" {
            let names = ["p50", "p99", "p99.9"];
            let series: Vec<(String, Vec<(f64, f64)>)> = impls
                .iter()
                .flat_map(|imp| by_impl[*imp].iter())
                .filter_map(|r| {
                    let f = &r.fields;
                    let p = [
                        f.num(Field::P50Ns)?,
                        f.num(Field::P99Ns)?,
                        f.num(Field::P999Ns)?,
                    ];
                    let pts = p
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i as f64, v.max(1.0)))
                        .collect();
                    Some((format!("{} n={}", r.imp, r.n), pts))
                })
                .collect();
            if !series.is_empty() {
                out.push(Plot {
                    id: format!("{id}-percentiles"),
                    caption: if case == "lateness" {
                        "Lateness (delivery time − exact expiry) percentiles, one line per \
                         implementation and load n; log scale."
                    } else if case == "sigwait-latency" {
                        "A latency tool's loop (a 1 kHz SIGEV_THREAD_ID timer, sigwait): time \
                         from the expiry a signal stands for to sigwait's return, percentiles; \
                         log scale."
                    } else {
                        "A periodic timer's signal: time from the first expiry a signal stands \
                         for to sigtimedwait's return, percentiles; log scale."
                    }
                    .into(),
                    series: series.len(),
                    svg: lines_svg(&Lines {
                        title: format!("{case} lateness percentiles"),
                        x_desc: "percentile",
                        y_desc: "ns late",
                        x_log: false,
                        y_log: true,
                        x_names: Some(&names),
                        series,
                        vmarks: Vec::new(),
                        hmarks: Vec::new(),
                    }),
                });
            }
        }
        // Wake-ups against expiry instants.
        if case == "wakeups" {
            let mut bars = Vec::new();
            for imp in &impls {
                for r in &by_impl[*imp] {
                    if let (Some(w), Some(i)) = (
                        r.fields.num(Field::WakeupsPerS),
                        r.fields.num(Field::InstantsPerS),
                    ) {
                        bars.push((format!("{} wake-ups", r.imp), w));
                        bars.push((format!("{} instants", r.imp), i));
                    }
                }
            }
            if !bars.is_empty() {
                out.push(Plot {
                    id: format!("{id}-rates"),
                    caption: "OS wake-ups of the timer threads per second, beside the distinct \
                              expiry instants per second of the same timers (the floor)."
                        .into(),
                    series: bars.len(),
                    svg: bars_svg("wake-ups/s vs expiry instants/s", "per second", &bars, None),
                });
            }
        }
        // Bytes per timer.
        let with_bytes: Vec<&&Record> = by_impl
            .values()
            .flatten()
            .filter(|r| r.fields.num(Field::BytesPerTimer).is_some())
            .collect();
        if !with_bytes.is_empty() {
            let limit = (suite == Suite::Service && case == "settime-arm")
                .then_some((150.0, "target 150 B".to_string()));
            let bsizes: std::collections::BTreeSet<u64> = with_bytes.iter().map(|r| r.n).collect();
            if bsizes.len() >= 2 {
                let series =
                    series_against_n(&impls, by_impl, |r| r.fields.num(Field::BytesPerTimer));
                out.push(Plot {
                    id: format!("{id}-bytes"),
                    caption: if suite == Suite::Checkpoint {
                        format!("{case}: snapshot bytes per timer against n.")
                    } else {
                        format!(
                            "{case}{dist_label}: heap bytes per timer against n, counted by the \
                             process's allocator{}",
                            if kernel_in_suite {
                                " (the kernel's memory is not visible to it)."
                            } else {
                                "."
                            }
                        )
                    },
                    series: series.len(),
                    svg: lines_svg(&Lines {
                        title: format!("{case}{dist_label}: bytes per timer"),
                        x_desc: "n (live timers)",
                        y_desc: "bytes per timer",
                        x_log: true,
                        y_log: false,
                        x_names: None,
                        series,
                        vmarks: Vec::new(),
                        hmarks: limit.into_iter().collect(),
                    }),
                });
            } else {
                let bars: Vec<(String, f64)> = with_bytes
                    .iter()
                    .filter_map(|r| Some((r.imp.clone(), r.fields.num(Field::BytesPerTimer)?)))
                    .collect();
                out.push(Plot {
                    id: format!("{id}-bytes"),
                    caption: format!("{case}{dist_label}: heap bytes per timer."),
                    series: bars.len(),
                    svg: bars_svg(
                        &format!("{case}{dist_label}: bytes per timer"),
                        "bytes per timer",
                        &bars,
                        limit.as_ref().map(|(v, l)| (*v, l.as_str())),
                    ),
                });
            }
        }
    }
    out
}

/// One line per implementation (in `impls`' order) of `value` against n, over the rows that
/// have it; implementations with no such row are left out.
fn series_against_n(
    impls: &[&String],
    by_impl: &BTreeMap<String, Vec<&Record>>,
    value: impl Fn(&Record) -> Option<f64>,
) -> Vec<(String, Vec<(f64, f64)>)> {
    impls
        .iter()
        .map(|imp| {
            let pts: Vec<(f64, f64)> = by_impl[*imp]
                .iter()
                .filter_map(|r| Some((r.n as f64, value(r)?)))
                .collect();
            (imp.to_string(), pts)
        })
        .filter(|(_, pts)| !pts.is_empty())
        .collect()
}
