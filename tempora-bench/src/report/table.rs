//! The terminal's tables: [`plain`], the one way a table is laid out (comfy-table, borderless),
//! and [`text`], the human table printed at the end of a run: one block per (suite, case,
//! distribution, size, threads), each implementation's ns/op and its ratio to tempora's, with
//! the case's own figures beside.

use std::collections::BTreeMap;

use comfy_table::{presets, CellAlignment, Table};

use crate::record::{Field, Record, Suite};

/// Which side of its column a cell sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A borderless text table: the header line, then one line per row, each column as wide as
/// its widest cell and aligned as `aligns` says (by position; missing ones are left); every
/// line starts with `indent` and has no trailing blanks.
pub(crate) fn plain<R>(indent: &str, header: &[&str], aligns: &[Align], rows: R) -> String
where
    R: IntoIterator<Item = Vec<String>>,
{
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_header(header.iter().copied())
        .add_rows(rows);
    for (i, column) in table.column_iter_mut().enumerate() {
        // One blank between columns, none before the first.
        column.set_padding((0, 1));
        column.set_cell_alignment(match aligns.get(i) {
            Some(Align::Right) => CellAlignment::Right,
            _ => CellAlignment::Left,
        });
    }
    table
        .lines()
        .map(|line| format!("{indent}{}\n", line.trim_end()))
        .collect()
}

/// The human table: one block per (suite, case, dist, n, threads), ratios to `tempora`.
pub(crate) fn text(records: &[Record]) -> String {
    let mut groups: BTreeMap<(Suite, &str, &str, u64, u32), Vec<&Record>> = BTreeMap::new();
    for r in records {
        let key = (r.suite, r.case.as_str(), r.dist(), r.n, r.threads);
        groups.entry(key).or_default().push(r);
    }
    let mut out = String::new();
    for ((suite, case, dist, n, threads), rows) in groups {
        let base = rows
            .iter()
            .find(|r| r.imp == "tempora" && r.ok)
            .map(|r| r.ns_per_op);
        out += &format!(
            "\n{} / {case}  dist={dist}  n={n}  threads={threads}\n",
            suite.name()
        );
        let lines = rows.iter().map(|r| {
            let ratio = base
                .filter(|b| *b > 0.0 && r.ns_per_op > 0.0)
                .map(|b| format!("{:.2}", r.ns_per_op / b))
                .unwrap_or_else(|| "-".into());
            let f = &r.fields;
            let num = |field: Field, fmt: &dyn Fn(f64) -> String| {
                f.num(field).map_or_else(|| "-".into(), fmt)
            };
            vec![
                r.imp.clone(),
                format!("{:.1}", r.ns_per_op),
                ratio,
                num(Field::BytesPerTimer, &|b| format!("{b:.1}")),
                num(Field::Early, &|v| format!("{v}")),
                num(Field::Lost, &|v| format!("{v}")),
                num(Field::MaxLateMs, &|v| format!("{v}ms")),
                num(Field::WorstCallUs, &|v| format!("{v:.0}")),
                note(r),
            ]
        });
        let header = [
            "impl",
            "ns/op",
            "x tempora",
            "B/timer",
            "early",
            "lost",
            "max late",
            "worst us",
            "note",
        ];
        let mut aligns = [Align::Right; 9];
        (aligns[0], aligns[8]) = (Align::Left, Align::Left);
        out += &plain("  ", &header, &aligns, lines);
    }
    out
}

/// The table's last column: the error, or the case's own figure.
fn note(r: &Record) -> String {
    let f = &r.fields;
    if let Some(e) = &r.error {
        return e.clone();
    }
    if let (Some(rps), Some(p50), Some(p99), Some(cpu)) = (
        f.num(Field::ReqPerS),
        f.num(Field::P50Us),
        f.num(Field::P99Us),
        f.num(Field::CpuNsPerReq),
    ) {
        let client = f
            .num(Field::ClientCpuNsPerReq)
            .map_or(String::new(), |c| format!(" (client {:.1})", c / 1e3));
        return format!(
            "{rps:.0} req/s, latency p50 {p50:.0} µs, p99 {p99:.0} µs, \
             server CPU {:.1} µs/req{client}",
            cpu / 1e3
        );
    }
    if let (Some(b), Some(rss)) = (f.num(Field::BytesPerConn), f.num(Field::RssPerConn)) {
        return format!("per idle connection: heap {b:.0} B, resident {rss:.0} B");
    }
    if let (Some(w), Some(i)) = (f.num(Field::WakeupsPerS), f.num(Field::InstantsPerS)) {
        return format!("{w:.1} wake-ups/s, {i:.1} expiry instants/s");
    }
    if let (Some(e), Some(irq), Some(d)) = (
        f.num(Field::ExpireNs),
        f.num(Field::IrqNs),
        f.num(Field::DequeueNs),
    ) {
        return format!(
            "per signal: expiry to queued {e:.0} ns (interrupts {irq:.0}), dequeue {d:.0} ns"
        );
    }
    if let (Some(p50), Some(p99), Some(p999)) = (
        f.num(Field::P50Ns),
        f.num(Field::P99Ns),
        f.num(Field::P999Ns),
    ) {
        let max = f
            .num(Field::MaxNs)
            .map_or(String::new(), |m| format!(", max {:.0} µs", m / 1e3));
        let overruns = f
            .num(Field::Overruns)
            .map_or(String::new(), |o| format!(", {o} overruns"));
        let driver = f
            .num(Field::DriverWakeupsPerExpiry)
            .map_or(String::new(), |d| {
                format!(", {d:.2} driver wake-ups per expiry")
            });
        return format!(
            "late p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs{max}{overruns}{driver}",
            p50 / 1e3,
            p99 / 1e3,
            p999 / 1e3
        );
    }
    if let (Some(p50), Some(p99)) = (f.num(Field::P50Us), f.num(Field::P99Us)) {
        return format!("woke after the deadline: p50 {p50:.0} µs, p99 {p99:.0} µs");
    }
    if let Some(w) = f.num(Field::Wakeups) {
        return format!("{w} wake-ups");
    }
    if let Some(p) = f.num(Field::PairNs) {
        return format!("{p:.1} ns per op+next_expiry");
    }
    if let Some(v) = f.num(Field::VsOneThread) {
        return format!("{v:.2}x one thread alone");
    }
    if let Some(c) = f.num(Field::ColdNsPerOp) {
        return format!("cold {c:.1} ns/op");
    }
    String::new()
}
