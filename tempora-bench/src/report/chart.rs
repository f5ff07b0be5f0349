//! The page's charts as SVG, drawn with plotters' SVG backend: the order and colour of each
//! implementation, log axes labelled at their values, line charts ([`Lines`]) and horizontal
//! bar charts.

use std::collections::BTreeMap;

use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::targets::show;

const W: u32 = 600;
const H: u32 = 380;

/// The order implementations are shown in (table columns, plot legends): tempora, the
/// kernel, then the peers by name.
pub(super) fn impl_order(a: &str, b: &str) -> std::cmp::Ordering {
    let rank = |s: &str| match s {
        "tempora" => 0,
        "tempora-coarse" => 1,
        s if s.starts_with("tempora") => 2,
        s if s.starts_with("kernel") => 3,
        _ => 4,
    };
    rank(a).cmp(&rank(b)).then(a.cmp(b))
}

/// A colour per implementation, the same in every plot.
fn colour(imp: &str) -> RGBColor {
    match imp {
        "tempora" => RGBColor(214, 39, 40),
        "tempora-coarse" | "tempora-per-base" | "tempora-c" => RGBColor(255, 127, 14),
        "tempora-posix-c" => RGBColor(188, 128, 60),
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
pub(super) fn pow10_label(e: f64) -> String {
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
pub(super) struct Lines<'a> {
    pub(super) title: String,
    pub(super) x_desc: &'a str,
    pub(super) y_desc: &'a str,
    pub(super) x_log: bool,
    pub(super) y_log: bool,
    /// Names for x positions 0, 1, 2, ... (a categorical x axis).
    pub(super) x_names: Option<&'a [&'a str]>,
    pub(super) series: Vec<(String, Vec<(f64, f64)>)>,
    /// Vertical marks (x, label) and horizontal marks (y, label), in data units.
    pub(super) vmarks: Vec<(f64, String)>,
    pub(super) hmarks: Vec<(f64, String)>,
}

/// `c` drawn as an SVG document.
pub(super) fn lines_svg(c: &Lines) -> String {
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
pub(super) fn bars_svg(
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
