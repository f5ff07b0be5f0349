//! [`Stats`] as Prometheus's text exposition format, and as JSON (feature `serde`).
//!
//! Metric families (times in seconds, as Prometheus names them):
//!
//! | family | type | labels | what |
//! |---|---|---|---|
//! | `tempora_timers_live` | gauge | `group`, `owner` | an owner's live timers |
//! | `tempora_timers_<counter>_total` | counter | `group`, `owner` | an owner's counts (`created`, `deleted`, `armed`, `disarmed`, `expired`, `delivered`), and `tempora_overruns_total`, `tempora_stale_events_dropped_total`, `tempora_callback_panics_total`, `tempora_creates_refused_total` |
//! | `tempora_lateness_seconds` | summary | `group`, `owner`, `quantile` | an owner's lateness (0.5, 0.99, 0.999; `_sum`, `_count`) |
//! | `tempora_group_…` | as above | `group` | the same, summed over a group's subtree (`group=""` is the whole service) |
//! | `tempora_group_max_timers` | gauge | `group` | a group's limit, where one is set |
//! | `tempora_base_polls_total`, `_fired_total`, `_batches_total` | counter | `base` | per base |
//! | `tempora_base_max_pop_hold_seconds` | gauge | `base` | longest base-lock hold while popping |
//! | `tempora_driver_wakeups_total`, `tempora_spare_takeovers_total` | counter | | the drivers' wake-ups, the spares' take-overs |
//! | `tempora_spare_threads` | gauge | | spare driver threads running |
//! | `tempora_id_table_buckets`, `tempora_id_table_bytes`, `tempora_pooled_slot_bytes` | gauge | | the ID table's size, the slot pages kept for reuse |
//!
//! Owner rows and group rows are separate families, so summing either never counts a timer
//! twice. An owner's `group` label is its group's path (`""` directly under the service).

use super::{Counts, GroupStats, Lateness, Stats};
use std::fmt::Write;

/// A counter family: its name after the `tempora_` / `tempora_group_` prefix, its help, and
/// how to read it from `Counts`.
type CountField = (&'static str, &'static str, fn(&Counts) -> u64);

const COUNTERS: [CountField; 10] = [
    ("timers_created_total", "Timers created.", |c| c.created),
    ("timers_deleted_total", "Timers deleted.", |c| c.deleted),
    ("timers_armed_total", "settime calls that armed.", |c| {
        c.armed
    }),
    (
        "timers_disarmed_total",
        "settime calls that disarmed.",
        |c| c.disarmed,
    ),
    ("timers_expired_total", "Timer expirations.", |c| c.expired),
    (
        "timers_delivered_total",
        "Events delivered to the application.",
        |c| c.delivered,
    ),
    ("overruns_total", "Overruns delivered with events.", |c| {
        c.overruns
    }),
    (
        "stale_events_dropped_total",
        "Stale queued events dropped at receive.",
        |c| c.stale_dropped,
    ),
    ("callback_panics_total", "Callbacks that panicked.", |c| {
        c.callback_panics
    }),
    (
        "creates_refused_total",
        "Creates refused by a group's max_timers.",
        |c| c.refused,
    ),
];

/// Escapes a label value (backslash, double quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Rows of one family: (labels, value).
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }
    fn row(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
    }
}

/// Every (labels, counts, lateness) row of one level: owners, or groups.
fn rows(root: &GroupStats, owners: bool) -> Vec<(String, Counts, Lateness)> {
    let mut out = Vec::new();
    fn walk(g: &GroupStats, owners: bool, out: &mut Vec<(String, Counts, Lateness)>) {
        let group = escape(&g.path);
        if owners {
            for o in &g.owners {
                out.push((
                    format!("group=\"{group}\",owner=\"{}\"", o.owner),
                    o.counts,
                    o.lateness,
                ));
            }
        } else {
            out.push((format!("group=\"{group}\""), g.counts, g.lateness));
        }
        for c in &g.groups {
            walk(c, owners, out);
        }
    }
    walk(root, owners, &mut out);
    out
}

fn write_level(f: &mut Family<'_>, prefix: &str, what: &str, rows: &[(String, Counts, Lateness)]) {
    let live = format!("{prefix}timers_live");
    f.header(&live, "gauge", &format!("Live timers of {what}."));
    for (l, c, _) in rows {
        f.row(&live, l, c.live);
    }
    for (name, help, get) in COUNTERS {
        let name = format!("{prefix}{name}");
        f.header(&name, "counter", &format!("{help} ({what})"));
        for (l, c, _) in rows {
            f.row(&name, l, get(c));
        }
    }
    let late = format!("{prefix}lateness_seconds");
    f.header(
        &late,
        "summary",
        &format!("Expiry to firing of {what}'s timers."),
    );
    for (l, _, lat) in rows {
        for (q, v) in [
            ("0.5", lat.p50_ns),
            ("0.99", lat.p99_ns),
            ("0.999", lat.p999_ns),
        ] {
            f.row(&late, &format!("{l},quantile=\"{q}\""), secs(v));
        }
        f.row(&format!("{late}_sum"), l, secs(lat.sum_ns));
        f.row(&format!("{late}_count"), l, lat.count);
    }
    let max = format!("{prefix}lateness_max_seconds");
    f.header(
        &max,
        "gauge",
        &format!("Longest expiry to firing of {what}'s timers."),
    );
    for (l, _, lat) in rows {
        f.row(&max, l, secs(lat.max_ns));
    }
}

impl Stats {
    /// The statistics in Prometheus's text exposition format (families in the table of
    /// `stats/export.rs`: per owner, per group, per base).
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let mut f = Family { out: &mut out };
        write_level(&mut f, "tempora_", "an owner", &rows(&self.root, true));
        write_level(
            &mut f,
            "tempora_group_",
            "a group",
            &rows(&self.root, false),
        );
        let max = "tempora_group_max_timers";
        f.header(max, "gauge", "A group's limit on live timers.");
        fn limits(g: &GroupStats, f: &mut Family<'_>, name: &str) {
            if let Some(m) = g.max_timers {
                f.row(name, &format!("group=\"{}\"", escape(&g.path)), m);
            }
            for c in &g.groups {
                limits(c, f, name);
            }
        }
        limits(&self.root, &mut f, max);
        type BaseField = (&'static str, &'static str, fn(&super::BaseStats) -> u64);
        let base: [BaseField; 3] = [
            ("tempora_base_polls_total", "Polls of the base.", |b| {
                b.polls
            }),
            ("tempora_base_fired_total", "Entries the base fired.", |b| {
                b.fired
            }),
            ("tempora_base_batches_total", "Batches popped.", |b| {
                b.batches
            }),
        ];
        for (name, help, get) in base {
            f.header(name, "counter", help);
            for b in &self.bases {
                f.row(name, &format!("base=\"{}\"", b.base), get(b));
            }
        }
        let hold = "tempora_base_max_pop_hold_seconds";
        f.header(
            hold,
            "gauge",
            "Longest base-lock hold while popping a batch.",
        );
        for b in &self.bases {
            f.row(
                hold,
                &format!("base=\"{}\"", b.base),
                secs(b.max_pop_hold_ns),
            );
        }
        let (d, r) = (&self.drivers, &self.registry);
        let service: [(&str, &str, &str, u64); 6] = [
            (
                "tempora_driver_wakeups_total",
                "counter",
                "Times a driver thread woke from sleep.",
                d.wakeups,
            ),
            (
                "tempora_spare_takeovers_total",
                "counter",
                "Times a spare driver took the place of one running callbacks.",
                d.spare_takeovers,
            ),
            (
                "tempora_spare_threads",
                "gauge",
                "Spare driver threads started.",
                d.spare_threads as u64,
            ),
            (
                "tempora_id_table_buckets",
                "gauge",
                "Buckets of the timer-ID hash table.",
                r.id_table_buckets as u64,
            ),
            (
                "tempora_id_table_bytes",
                "gauge",
                "Bytes of the timer-ID hash table.",
                r.id_table_bytes as u64,
            ),
            (
                "tempora_pooled_slot_bytes",
                "gauge",
                "Bytes of slot pages kept for reuse.",
                r.pooled_bytes as u64,
            ),
        ];
        for (name, kind, help, value) in service {
            f.header(name, kind, help);
            f.row(name, "", value);
        }
        out
    }

    /// The same tree as JSON (field names as in the Rust types; times in ns). Needs the
    /// crate's `serde` feature.
    #[cfg(feature = "serde")]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("stats are plain numbers and strings")
    }
}
