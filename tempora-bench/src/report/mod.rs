//! The run's files under `target/tempora-bench/`: `results.jsonl` (the JSON lines), `machine.json`
//! and `report.html`, one self-contained page (no script, no network, no external font): the
//! machine, the verdict, the seed suite's tables and a plot per case, drawn with plotters' SVG
//! backend and inlined. Also the seed suite's tables as text, and `--save`.

pub(crate) mod compare;
pub(crate) mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};
use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::record::{Field, Record, Suite};
use crate::runner::machine::Machine;
use crate::targets::{show, Status, Verdict};

/// One of the seed suite's tables (the Linux 6.15 registry benchmark's): a test, its rows (create,
/// getoverrun, loop) and one column per implementation, in ms as that benchmark prints them
/// (`None`: not run; NaN: failed).
pub struct SeedTable {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<Option<f64>>)>,
}

/// Column order: tempora, the kernel, then the peers by name.
fn impl_order(a: &str, b: &str) -> std::cmp::Ordering {
    let rank = |s: &str| match s {
        "tempora" => 0,
        "tempora-coarse" => 1,
        s if s.starts_with("tempora") => 2,
        s if s.starts_with("kernel") => 3,
        _ => 4,
    };
    rank(a).cmp(&rank(b)).then(a.cmp(b))
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

/// One plot of the page.
struct Plot {
    id: String,
    caption: String,
    /// How many lines or bars it draws.
    series: usize,
    svg: String,
}

const W: u32 = 600;
const H: u32 = 380;

/// A colour per implementation, the same in every plot.
fn colour(imp: &str) -> RGBColor {
    match imp {
        "tempora" => RGBColor(214, 39, 40),
        "tempora-coarse" | "tempora-per-base" | "tempora-c" => RGBColor(255, 127, 14),
        "kernel" | "kernel-c" => RGBColor(70, 70, 70),
        "kernel-exact-id" => RGBColor(110, 110, 110),
        "kernel-dance" => RGBColor(160, 160, 160),
        "binary-heap" | "global-lock" => RGBColor(31, 119, 180),
        "btreemap" | "sparse-array" => RGBColor(44, 160, 44),
        "nexus-timer" | "dashmap" => RGBColor(148, 103, 189),
        "bitwheel" => RGBColor(140, 86, 75),
        "tokio-delayqueue" | "tokio-time" => RGBColor(23, 190, 207),
        "async-io" => RGBColor(227, 119, 194),
        _ => RGBColor(188, 189, 34),
    }
}

/// `10^e` as a short label: 1k, 10M, 0.1, ...
fn pow10_label(e: f64) -> String {
    let v = 10f64.powf(e);
    let (d, s) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let x = v / d;
    if x >= 10.0 || (x - x.round()).abs() < 0.05 {
        format!("{:.0}{s}", x)
    } else {
        format!("{x:.1}{s}")
    }
}

/// A log-scale axis over `lo..hi` (both above 0), labelled at the powers of ten within it,
/// or at 1, 2 and 5 times them, or at every digit's multiple: the first that gives three
/// labels.
fn log_axis(lo: f64, hi: f64) -> WithKeyPoints<LogCoord<f64>> {
    let ticks = |steps: &[f64]| -> Vec<f64> {
        let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (e0..=e1)
            .flat_map(|e| steps.iter().map(move |s| s * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let digits = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let points = [&[1.0][..], &[1.0, 2.0, 5.0], &digits]
        .into_iter()
        .map(ticks)
        .find(|t| t.len() >= 3)
        .unwrap_or_else(|| ticks(&digits));
    (lo..hi).log_scale().with_key_points(points)
}

/// A line chart. Axes marked `log` are drawn in log10 coordinates with labels at their values.
struct Lines<'a> {
    title: String,
    x_desc: &'a str,
    y_desc: &'a str,
    x_log: bool,
    y_log: bool,
    /// Names for x positions 0, 1, 2, ... (a categorical x axis).
    x_names: Option<&'a [&'a str]>,
    series: Vec<(String, Vec<(f64, f64)>)>,
    /// Vertical marks (x, label) and horizontal marks (y, label), in data units.
    vmarks: Vec<(f64, String)>,
    hmarks: Vec<(f64, String)>,
}

fn lines_svg(c: &Lines) -> String {
    // The bounds are padded in the drawn coordinates (log10 on a log axis), then handed to
    // plotters in data units: a log axis is plotters' `log_scale`.
    let tx = |x: f64| if c.x_log { x.log10() } else { x };
    let ty = |y: f64| if c.y_log { y.log10() } else { y };
    let ix = |x: f64| if c.x_log { 10f64.powf(x) } else { x };
    let iy = |y: f64| if c.y_log { 10f64.powf(y) } else { y };
    let pts = c.series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
        y0 = y0.min(ty(y));
        y1 = y1.max(ty(y));
    }
    for (y, _) in &c.hmarks {
        y0 = y0.min(ty(*y));
        y1 = y1.max(ty(*y));
    }
    if x1 <= x0 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    if y1 <= y0 {
        (y0, y1) = (y0 - 0.5, y1 + 0.5);
    }
    // Room above the data for the legend, a line per series.
    let (xpad, ypad) = ((x1 - x0) * 0.05, (y1 - y0) * 0.08);
    let legend = (y1 - y0) * (0.12 + 0.075 * c.series.len() as f64);
    let (x0, x1, y0, y1) = (x0 - xpad, x1 + xpad, y0 - ypad, y1 + ypad + legend);
    let y0 = if c.y_log { y0 } else { y0.min(0.0) };
    let (x0, x1, y0, y1) = (ix(x0), ix(x1), iy(y0), iy(y1));
    let xfmt = |v: &f64| match c.x_names {
        Some(names) => {
            let i = v.round();
            if (v - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].to_string()
            } else {
                String::new()
            }
        }
        None if c.x_log => pow10_label(v.log10()),
        None => format!("{v}"),
    };
    let yfmt = |v: &f64| {
        if c.y_log {
            pow10_label(v.log10())
        } else {
            format!("{v:.0}")
        }
    };
    let x_labels = c.x_names.map_or(8, |n| n.len() * 2 + 1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        // The same drawing on each kind of coordinates (the axes' types differ).
        macro_rules! draw {
            ($x_range:expr, $y_range:expr) => {{
                let mut chart = ChartBuilder::on(&root)
                    .caption(&c.title, ("sans-serif", 16))
                    .margin(8)
                    .x_label_area_size(36)
                    .y_label_area_size(56)
                    .build_cartesian_2d($x_range, $y_range)
                    .expect("chart");
                let _ = chart
                    .configure_mesh()
                    .x_desc(c.x_desc)
                    .y_desc(c.y_desc)
                    .x_labels(x_labels)
                    .y_labels(8)
                    .x_label_formatter(&xfmt)
                    .y_label_formatter(&yfmt)
                    .light_line_style(WHITE.mix(0.0))
                    .draw();
                for (x, label) in &c.vmarks {
                    let x = *x;
                    if x < x0 || x > x1 {
                        continue;
                    }
                    let style = ShapeStyle::from(&RGBColor(120, 120, 120)).stroke_width(1);
                    let line = vec![(x, y0), (x, y1)];
                    let _ = chart.draw_series(DashedLineSeries::new(line, 6, 4, style));
                    let _ = chart.draw_series(std::iter::once(Text::new(
                        label.clone(),
                        (x, iy((ty(y0) + ty(y1)) * 0.5)),
                        ("sans-serif", 11)
                            .into_font()
                            .color(&RGBColor(90, 90, 90))
                            .pos(Pos::new(HPos::Right, VPos::Bottom)),
                    )));
                }
                for (y, label) in &c.hmarks {
                    let y = *y;
                    let style = ShapeStyle::from(&RGBColor(120, 120, 120)).stroke_width(1);
                    let line = vec![(x0, y), (x1, y)];
                    let _ = chart.draw_series(DashedLineSeries::new(line, 6, 4, style));
                    let _ = chart.draw_series(std::iter::once(Text::new(
                        label.clone(),
                        (ix(tx(x0) + (tx(x1) - tx(x0)) * 0.02), y),
                        ("sans-serif", 11).into_font().color(&RGBColor(90, 90, 90)),
                    )));
                }
                // Several series of one implementation (lateness at each n) get lighter shades.
                let mut shade: BTreeMap<&str, u32> = BTreeMap::new();
                for (name, points) in &c.series {
                    let imp = name.split(' ').next().unwrap_or(name);
                    let k = shade.entry(imp).or_insert(0);
                    let base = colour(imp);
                    let lighten =
                        |v: u8| (f64::from(v) + (255.0 - f64::from(v)) * 0.3 * f64::from(*k)) as u8;
                    let colour = RGBColor(lighten(base.0), lighten(base.1), lighten(base.2));
                    *k = (*k + 1).min(2);
                    let mut p: Vec<(f64, f64)> = points.clone();
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let style = ShapeStyle::from(&colour).stroke_width(2);
                    if let Ok(series) = chart.draw_series(LineSeries::new(p.clone(), style)) {
                        series.label(name.clone()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], style)
                        });
                    }
                    let _ =
                        chart.draw_series(p.iter().map(|&pt| Circle::new(pt, 3, colour.filled())));
                }
                let _ = chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(RGBColor(200, 200, 200))
                    .position(SeriesLabelPosition::UpperRight)
                    .label_font(("sans-serif", 11))
                    .draw();
            }};
        }
        match (c.x_log, c.y_log) {
            (true, true) => draw!(log_axis(x0, x1), log_axis(y0, y1)),
            (true, false) => draw!(log_axis(x0, x1), y0..y1),
            (false, true) => draw!(x0..x1, log_axis(y0, y1)),
            (false, false) => draw!(x0..x1, y0..y1),
        }
        let _ = root.present();
    }
    svg
}

/// A horizontal bar chart of (label, value), log scale when the values span over 20x.
fn bars_svg(
    title: &str,
    value_desc: &str,
    bars: &[(String, f64)],
    mark: Option<(f64, &str)>,
) -> String {
    let max = bars.iter().map(|b| b.1).fold(f64::MIN, f64::max);
    let min = bars
        .iter()
        .map(|b| b.1)
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let max = mark.map_or(max, |(m, _)| max.max(m));
    let log = min > 0.0 && max / min > 20.0;
    // Bounds and offsets are worked out in the drawn coordinates (log10 on a log axis), then
    // handed to plotters in data units: a log axis is plotters' `log_scale`.
    let t = |v: f64| if log { v.max(min / 2.0).log10() } else { v };
    let it = |v: f64| if log { 10f64.powf(v) } else { v };
    let (v0, v1) = if log {
        ((min / 2.0).log10().floor(), max.log10() + 0.15)
    } else {
        (0.0, max * 1.1)
    };
    let rows = bars.len() as f64;
    let height = (80 + 28 * bars.len()).max(160) as u32;
    let xfmt = |v: &f64| {
        if log {
            pow10_label(v.log10())
        } else if v1 >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let names: Vec<&str> = bars.iter().map(|b| b.0.as_str()).collect();
    let yfmt = |v: &f64| {
        let i = (v - 0.5).round();
        if (v - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
            names[names.len() - 1 - i as usize].to_string()
        } else {
            String::new()
        }
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        // The same drawing on either kind of value axis (their types differ).
        macro_rules! draw {
            ($value_range:expr) => {{
                let mut chart = ChartBuilder::on(&root)
                    .caption(title, ("sans-serif", 16))
                    .margin(8)
                    .x_label_area_size(34)
                    .y_label_area_size(150)
                    .build_cartesian_2d($value_range, 0.0..rows)
                    .expect("chart");
                let _ = chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .x_desc(value_desc)
                    .x_labels(8)
                    .y_labels(bars.len() * 2 + 1)
                    .x_label_formatter(&xfmt)
                    .y_label_formatter(&yfmt)
                    .light_line_style(WHITE.mix(0.0))
                    .draw();
                let _ = chart.draw_series(bars.iter().enumerate().map(|(i, (name, v))| {
                    let y = rows - 1.0 - i as f64;
                    let colour = colour(name.split(' ').next().unwrap_or(name));
                    let end = it(t(*v));
                    Rectangle::new([(it(v0), y + 0.15), (end, y + 0.85)], colour.filled())
                }));
                let _ = chart.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                    let y = rows - 1.0 - i as f64;
                    Text::new(
                        show(*v, ""),
                        (it(t(*v) + (v1 - v0) * 0.01), y + 0.65),
                        ("sans-serif", 11),
                    )
                }));
                if let Some((m, label)) = mark {
                    let style = ShapeStyle::from(&RGBColor(120, 120, 120)).stroke_width(1);
                    let m = it(t(m));
                    let line = vec![(m, 0.0), (m, rows)];
                    let _ = chart.draw_series(DashedLineSeries::new(line, 6, 4, style));
                    let _ = chart.draw_series(std::iter::once(Text::new(
                        label.to_string(),
                        (m, rows),
                        ("sans-serif", 11),
                    )));
                }
            }};
        }
        if log {
            draw!(log_axis(it(v0), it(v1)))
        } else {
            draw!(v0..v1)
        }
        let _ = root.present();
    }
    svg
}

/// Every plot of one suite's rows.
fn plots(records: &[Record], suite: Suite, machine: &Machine) -> Vec<Plot> {
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
        // Lateness percentiles.
        if case == "lateness" {
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
                    caption: "Lateness (delivery time − exact expiry) percentiles, one line per \
                              implementation and load n; log scale."
                        .into(),
                    series: series.len(),
                    svg: lines_svg(&Lines {
                        title: "lateness percentiles".into(),
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
                .then_some((160.0, "target 160 B".to_string()));
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
