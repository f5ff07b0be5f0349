//! The run's files under `target/tempora-bench/`: `results.jsonl` (the JSON lines), `machine.json`
//! and `report.html`, one self-contained page (no script, no network, no external font): the
//! machine, the verdict, the seed suite's tables and a plot per case (`plots` picks each suite's
//! plots, `chart` draws them with plotters' SVG backend), inlined. Also the seed suite's tables
//! as text, and `--save`. `table` is the text table, `compare` is `bench compare`.

mod chart;
pub(crate) mod compare;
mod plots;
pub(crate) mod table;

use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::record::{Record, Suite};
use crate::runner::machine::Machine;
use crate::targets::{show, Status, Verdict};
use chart::impl_order;
use plots::{plots, Plot};

/// One of the seed suite's tables (the Linux 6.15 registry benchmark's): a test, its rows (create,
/// getoverrun, loop) and one column per implementation, in ms as that benchmark prints them
/// (`None`: not run; NaN: failed).
pub struct SeedTable {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<Option<f64>>)>,
}

/// Tests 1-5 from this run's seed suite rows: total ms per test (Tests 1-3), average ms
/// per thread (Tests 4-5), as the benchmark's own tables print them.
pub fn seed_tables(records: &[Record]) -> Vec<SeedTable> {
    let seed: Vec<&Record> = records.iter().filter(|r| r.suite == Suite::Seed).collect();
    let mut columns: Vec<String> = seed.iter().map(|r| r.imp.clone()).collect();
    columns.sort_by(|a, b| impl_order(a, b));
    columns.dedup();
    let cell = |case: &str, n: u64, threads: u32, imp: &str| {
        seed.iter()
            .find(|r| r.case == case && r.n == n && r.threads == threads && r.imp == imp)
            .map(|r| if r.ok { r.total_ms } else { f64::NAN })
    };
    let mut tables = Vec::new();
    let mut t1_sizes: Vec<u64> = seed
        .iter()
        .filter(|r| r.case == "t1-create")
        .map(|r| r.n)
        .collect();
    t1_sizes.sort();
    t1_sizes.dedup();
    for n in t1_sizes {
        let test = match n {
            20_000 => "Test 1".to_string(),
            50_000 => "Test 2".to_string(),
            100_000 => "Test 3".to_string(),
            _ => "Tests 1-3 at another size".to_string(),
        };
        tables.push(SeedTable {
            title: format!(
                "{test}: one owner creates {n} timers, then getoverrun on each (total ms)"
            ),
            columns: columns.clone(),
            rows: ["create", "getoverrun"]
                .iter()
                .map(|what| {
                    let case = format!("t1-{what}");
                    let cells = columns.iter().map(|c| cell(&case, n, 1, c)).collect();
                    (what.to_string(), cells)
                })
                .collect(),
        });
    }
    let mut threads: Vec<u32> = seed
        .iter()
        .filter(|r| r.case.starts_with("t4") || r.case.starts_with("t5") || r.case == "loop")
        .map(|r| r.threads)
        .collect();
    threads.sort();
    threads.dedup();
    for t in threads {
        for (test, prefix, what) in [
            ("Test 4", "t4", "threads in one shared owner"),
            ("Test 5", "t5", "owners (the kernel: processes)"),
        ] {
            let mut rows: Vec<(String, Vec<Option<f64>>)> = ["create", "getoverrun"]
                .iter()
                .map(|op| {
                    let case = format!("{prefix}-{op}");
                    let cells = columns.iter().map(|c| cell(&case, 20_000, t, c)).collect();
                    (op.to_string(), cells)
                })
                .collect();
            if prefix == "t4" {
                let cells = columns
                    .iter()
                    .map(|c| cell("loop", 100_000, t, c))
                    .collect();
                rows.push(("loop".into(), cells));
            }
            if rows.iter().all(|(_, c)| c.iter().all(Option::is_none)) {
                continue;
            }
            let loop_note = if prefix == "t4" {
                "; loop: each creates and deletes a timer 100000 times"
            } else {
                ""
            };
            tables.push(SeedTable {
                title: format!(
                    "{test}: {t} {what} each create 20000 timers, then getoverrun on each{loop_note} \
                     (average ms per thread)"
                ),
                columns: columns.clone(),
                rows,
            });
        }
    }
    tables
}

/// A table cell: `-` not run, `failed` (the row's error is in the data), or ms.
fn ms(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.is_nan() => "failed".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 1.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// The seed suite's tables as text (empty without seed rows).
pub fn seed_tables_text(records: &[Record]) -> String {
    let mut out = String::new();
    for t in seed_tables(records) {
        out += &format!("seed {}\n", t.title);
        let header: Vec<&str> = std::iter::once("")
            .chain(t.columns.iter().map(String::as_str))
            .collect();
        let mut aligns = vec![table::Align::Right; header.len()];
        aligns[0] = table::Align::Left;
        let rows = t.rows.iter().map(|(name, cells)| {
            let name = name.to_string();
            std::iter::once(name)
                .chain(cells.iter().map(|v| ms(*v)))
                .collect()
        });
        out += &table::plain("  ", &header, &aligns, rows);
        out += "\n";
    }
    out
}

/// Writes `results.jsonl`, `machine.json` and `report.html` into `dir`; the page's path.
pub fn write(
    dir: &Path,
    records: &[Record],
    machine: &Machine,
    verdict: &[Verdict],
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("results.jsonl"), jsonl(records))?;
    std::fs::write(dir.join("machine.json"), machine_json(machine))?;
    let page = dir.join("report.html");
    std::fs::write(&page, html(records, machine, verdict))?;
    Ok(page)
}

/// `bench --save NAME`: the run's lines as `runs/NAME.jsonl` (and its machine beside them).
pub fn save(
    dir: &Path,
    name: &str,
    records: &[Record],
    machine: &Machine,
) -> std::io::Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a run's name is a plain file name",
        ));
    }
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs)?;
    let path = runs.join(format!("{name}.jsonl"));
    std::fs::write(&path, jsonl(records))?;
    std::fs::write(
        runs.join(format!("{name}.machine.json")),
        machine_json(machine),
    )?;
    Ok(path)
}

fn jsonl(records: &[Record]) -> String {
    records
        .iter()
        .map(|r| serde_json::to_string(r).expect("serialisable record") + "\n")
        .collect()
}

fn machine_json(machine: &Machine) -> String {
    serde_json::to_string_pretty(machine).expect("serialisable machine") + "\n"
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}\
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td.l,th.l{text-align:left}.met{background:#dff3df}.notmet{background:#f8d8d8}\
.na{color:#777}.note{background:#fff8dc;border-left:4px solid #e0c060;padding:.5em 1em}\
.plots{display:flex;flex-wrap:wrap;gap:12px}figure.plot{margin:0;border:1px solid #ddd;padding:4px}\
figcaption{font-size:90%;color:#555;max-width:600px}pre{font-size:80%;overflow-x:auto;background:#f7f7f7;padding:.5em}";

/// The page.
pub fn html(records: &[Record], machine: &Machine, verdict: &[Verdict]) -> String {
    let limit = machine
        .rlimit_sigpending
        .map_or("unknown".into(), |l| l.to_string());
    let machine_rows = [
        ("CPU", machine.cpu.clone()),
        ("cores", machine.cores.to_string()),
        ("L3", machine.l3.clone()),
        ("kernel", machine.kernel.clone()),
        ("RLIMIT_SIGPENDING", limit),
        ("tempora commit", machine.commit.clone()),
        ("mode", machine.mode.clone()),
        ("run", format!("{:.0} s", machine.seconds)),
        (
            "load average",
            format!(
                "{:.2} at start, {:.2} at end",
                machine.load_start, machine.load_end
            ),
        ),
    ];
    let tables = seed_tables(records);
    let suites: Vec<(Suite, Vec<Plot>)> = Suite::ALL
        .into_iter()
        .map(|suite| (suite, plots(records, suite, machine)))
        .filter(|(_, plots)| !plots.is_empty())
        .collect();
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "tempora bench report" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "tempora bench" }
                p {
                    (records.len()) " results, " (machine.mode) " mode, tempora "
                    (machine.commit) ", " (machine.started) " UTC."
                }
                h2 id="machine" { "Machine" }
                table {
                    @for (k, v) in &machine_rows {
                        tr { th.l { (k) } td.l { (v) } }
                    }
                }
                p.note {
                    "Figures from different machines are not comparable, and even the ratios \
                     differ between machines: a larger last-level cache (L3) keeps more of a \
                     structure's working set close, which can change which timer queue wins at \
                     1M timers. Compare ratios of runs on the same machine ("
                    code { "tempora bench compare" }
                    "), and read every figure here beside the machine above."
                }
                h2 id="verdict" { "Verdict" }
                p {
                    "tempora against its targets (BENCHMARKS.md), figures of this run only. \
                     ratio = reference / tempora, lower being better for every figure."
                }
                table {
                    tr {
                        th.l { "target" } th.l { "at" } th { "tempora" } th { "reference" }
                        th { "ratio" } th { "goal" } th.l { "verdict" }
                    }
                    @for v in verdict {
                        (verdict_row(v))
                    }
                }
                @if !tables.is_empty() {
                    h2 id="seed" { "The seed suite's tables" }
                    p {
                        "Tests 1-5 of the Linux 6.15 registry benchmark, laid out as its own \
                         tables (ms), every registry in one process."
                    }
                    @for t in &tables {
                        h3 { (t.title) }
                        table {
                            tr {
                                th {}
                                @for c in &t.columns { th { (c) } }
                            }
                            @for (name, cells) in &t.rows {
                                tr {
                                    th.l { (name) }
                                    @for v in cells { td { (ms(*v)) } }
                                }
                            }
                        }
                    }
                }
                h2 id="plots" { "Plots" }
                @for (suite, plots) in &suites {
                    h3 { (suite.name()) }
                    div.plots {
                        @for p in plots {
                            figure.plot data-case=(p.id) data-series=(p.series) {
                                (PreEscaped(&p.svg))
                                figcaption { (p.caption) }
                            }
                        }
                    }
                }
                h2 id="data" { "Data" }
                p {
                    "The run's " (records.len()) " JSON lines (also "
                    code { "results.jsonl" }
                    " beside this page)."
                }
                details {
                    summary { "JSON lines" }
                    pre id="results-jsonl" { (jsonl(records)) }
                }
            }
        }
    };
    page.into_string() + "\n"
}

/// One verdict's row of the page's verdict table.
fn verdict_row(v: &Verdict) -> Markup {
    let t = &v.target;
    let (class, status) = match &v.status {
        Status::Met => ("met", "met".to_string()),
        Status::NotMet => ("notmet", "not met".to_string()),
        Status::NotMeasured(why) => ("na", format!("not measured: {why}")),
    };
    let status = match &v.note {
        Some(note) => format!("{status} ({note})"),
        None => status,
    };
    let figure = v.figure.map_or("-".into(), |x| show(x, &t.unit));
    let reference = v
        .reference
        .as_ref()
        .map_or("-".into(), |(n, x)| format!("{n} {}", show(*x, &t.unit)));
    html! {
        tr class=(class) {
            td.l { (t.what) }
            td.l { (v.at) }
            td { (figure) }
            td { (reference) }
            td { (v.ratio.map_or("-".into(), crate::targets::show_ratio)) }
            td { "≥" (t.goal) "x" }
            td.l { (status) }
        }
    }
}
