//! Minimal SVG line plots: ns/op against n (both log scale), one line per implementation, one
//! plot per (suite, case, dist) that was measured at two or more sizes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::Record;

const W: f64 = 640.0;
const H: f64 = 400.0;
const PAD: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// One plot's lines: implementation -> (n, ns/op) points.
type Lines<'a> = BTreeMap<&'a str, Vec<(f64, f64)>>;

/// Writes the plots; returns how many.
pub fn write_plots(records: &[Record], dir: &Path) -> std::io::Result<usize> {
    let mut plots: BTreeMap<String, Lines> = BTreeMap::new();
    for r in records.iter().filter(|r| r.ok && r.ns_per_op > 0.0) {
        let name = format!("{}-{}-{}", r.suite, r.case, r.dist.unwrap_or("all"));
        plots
            .entry(name)
            .or_default()
            .entry(r.imp.as_str())
            .or_default()
            .push((r.n as f64, r.ns_per_op));
    }
    plots.retain(|_, lines| lines.values().any(|pts| pts.len() >= 2));
    if plots.is_empty() {
        return Ok(0);
    }
    std::fs::create_dir_all(dir)?;
    for (name, lines) in &plots {
        std::fs::write(dir.join(format!("{name}.svg")), plot(name, lines))?;
    }
    Ok(plots.len())
}

fn plot(title: &str, lines: &Lines) -> String {
    let pts = lines.values().flatten();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x.log10());
        x1 = x1.max(x.log10());
        y0 = y0.min(y.log10());
        y1 = y1.max(y.log10());
    }
    let (y0, y1) = (y0.floor(), y1.ceil().max(y0.floor() + 1.0));
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let sx = |x: f64| PAD + (x.log10() - x0) / (x1 - x0) * (W - 2.0 * PAD);
    let sy = |y: f64| H - PAD - (y.log10() - y0) / (y1 - y0) * (H - 2.0 * PAD);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{PAD}" y="24" font-size="15">{title}: ns/op vs n (log-log)</text>"#
    );
    let mut decade = y0;
    while decade <= y1 {
        let y = H - PAD - (decade - y0) / (y1 - y0) * (H - 2.0 * PAD);
        let _ = write!(
            s,
            r##"<line x1="{PAD}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="8" y="{}">{} ns</text>"##,
            W - PAD,
            y + 4.0,
            10f64.powf(decade)
        );
        decade += 1.0;
    }
    for (i, (imp, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/><text x="{}" y="{}" fill="{color}">{imp}</text>"#,
            path.join(" "),
            W - PAD + 4.0 - 120.0,
            PAD + 16.0 * i as f64
        );
        for &(x, y) in &pts {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                sx(x),
                sy(y)
            );
        }
    }
    for &(x, _) in lines.values().next().into_iter().flatten() {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{x}</text>"#,
            sx(x),
            H - PAD + 18.0
        );
    }
    s.push_str("</svg>\n");
    s
}
