//! One result row of `tempora bench`, the JSON object `--json` prints per line and
//! `results.jsonl` holds: the fields every row has, and the per-case extras as a small map whose
//! keys are the [`Field`] names (so a row carries only what its case measured, and a file read
//! back keeps every key it had, known or not).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The suites, as `--suite` takes them and a row's `suite` names them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Suite {
    /// The ID registry: the Linux 6.15 registry benchmark's Tests 1-5.
    Seed,
    /// The timer wheel against other timer queues.
    Wheel,
    /// The POSIX calls, event delivery and drivers, against the kernel's POSIX timers.
    Service,
    /// Snapshot and restore of an owner, against the kernel's ways of restoring IDs.
    Checkpoint,
    /// Async sleeps inside a tokio runtime, against tokio's and async-io's timers.
    Async,
    /// The C ABI (`tempora.h`) called from C, against the same calls from Rust and the
    /// kernel's POSIX timers called from C.
    Capi,
    /// Statistics: their cost on arm+cancel, and a flush's lock holds against the naive flush.
    Stats,
    /// A hyper server end to end on tempora's hyper timer, against hyper-util's tokio timer.
    Server,
}

impl Suite {
    /// Every suite, in the order a run takes them.
    pub const ALL: [Suite; 8] = [
        Suite::Seed,
        Suite::Wheel,
        Suite::Service,
        Suite::Checkpoint,
        Suite::Async,
        Suite::Capi,
        Suite::Stats,
        Suite::Server,
    ];

    /// The JSON name (and `--suite` value).
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The optional fields a row may carry; a field's JSON key is its name in snake case
/// (`BytesPerTimer` is `bytes_per_timer`), the same in a row and in `targets.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Field {
    /// wheel: the deadline distribution (`uniform` or `server`).
    Dist,
    /// How many timed runs the row's median is taken over.
    Runs,
    /// Heap bytes per timer, counted by the process's allocator.
    BytesPerTimer,
    /// Timers that fired.
    Fired,
    /// Fires before their deadline (must be 0).
    Early,
    /// Timers that never fired.
    Lost,
    /// Timers that fired twice.
    Duplicate,
    /// wheel: the worst lateness of a fire, in ticks (ms).
    MaxLateMs,
    /// wheel: the mean lateness of a fire, in ticks (ms).
    MeanLateMs,
    /// wheel: polls needed to drive the queue empty.
    Wakeups,
    /// The slowest single call, in µs.
    WorstCallUs,
    /// wheel burst: whether the implementation can bound one poll.
    Bounded,
    /// Operations per timed run (wheel next-expiry: churn ops; async: sleeps created or reset;
    /// capi: calls, n per pass).
    Ops,
    /// wheel next-expiry: ns per churn op plus next_expiry.
    PairNs,
    /// wheel rearm: rounds of rescheduling every timer.
    Rounds,
    /// seed t1-create: ns per create in the first, cold run.
    ColdNsPerOp,
    /// Per-thread time over the same work on one thread alone.
    VsOneThread,
    /// service wakeups: OS wake-ups of the timer threads per second.
    WakeupsPerS,
    /// service wakeups: distinct expiry instants per second (the floor).
    InstantsPerS,
    /// service lateness: delivery − expiry, median, ns.
    P50Ns,
    /// service lateness: 99th percentile, ns.
    P99Ns,
    /// service lateness: 99.9th percentile, ns.
    P999Ns,
    /// async fire: a task's wake-up after the deadline, median, µs; server requests: a
    /// request's latency, send to whole response, median, µs.
    P50Us,
    /// async fire, server requests: 99th percentile, µs.
    P99Us,
    /// stats flush: the longest list-lock hold of any flush, ns.
    MaxHoldNs,
    /// stats flush: the 99th percentile of the list-lock holds, ns.
    P99HoldNs,
    /// stats flush: flushes in the measurement.
    Flushes,
    /// service server-timeouts: CPU time of the timer threads per second of the run, ms.
    CpuMsPerS,
    /// service idle: CPU time of the timer threads over the run, ms.
    CpuMs,
    /// service slow-callback: the latest fire, ns.
    MaxNs,
    /// service server-timeouts: timers whose expiry fell within the run.
    Due,
    /// deliver-signal burst: expiry to queued signal per signal, ns (the driver's CPU, or the
    /// kernel's interrupt time).
    ExpireNs,
    /// deliver-signal burst: the interrupt time in `expire_ns`, ns per signal.
    IrqNs,
    /// deliver-signal burst: taking a queued signal with `sigtimedwait`, ns per signal.
    DequeueNs,
    /// deliver-signal periodic: the sum of the signals' `si_overrun` (periods without a
    /// signal of their own).
    Overruns,
    /// service server-timeouts: the timer threads' CPU time per wake-up, ns (`cpu_ms_per_s`
    /// over `wakeups_per_s`: a figure that rows of different sizes share).
    CpuNsPerWakeup,
    /// server requests: requests answered per second.
    ReqPerS,
    /// server requests: the process's CPU time per request, ns.
    CpuNsPerReq,
    /// server idle: heap bytes per idle keep-alive connection.
    BytesPerConn,
    /// server idle: resident bytes per idle keep-alive connection.
    RssPerConn,
    /// server requests: the load generator's CPU time per request, ns.
    ClientCpuNsPerReq,
    /// seed t4/t5: rounds measured again because the scheduler took a thread off its CPU
    /// during them, or the threads' phases did not run side by side.
    Disturbed,
    /// capi sigwait-latency: wake-ups of the process's tempora driver threads per expiry taken
    /// (about 0 when the waiting thread fires its timer itself, about 1 when a driver does).
    DriverWakeupsPerExpiry,
}

impl Field {
    /// The JSON key.
    pub fn key(self) -> &'static str {
        self.into()
    }
}

/// A row's optional fields: JSON key -> value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fields(BTreeMap<String, Value>);

impl Fields {
    /// These fields plus `field` = `value`.
    pub fn with(mut self, field: Field, value: impl Into<Value>) -> Fields {
        self.set(field, value);
        self
    }

    /// Sets `field` to `value`.
    pub fn set(&mut self, field: Field, value: impl Into<Value>) {
        self.0.insert(field.key().to_string(), value.into());
    }

    /// These fields plus `field` = `value` when `value` is `Some`.
    pub fn with_opt(self, field: Field, value: Option<impl Into<Value>>) -> Fields {
        match value {
            Some(v) => self.with(field, v),
            None => self,
        }
    }

    /// `field` as a number.
    pub fn num(&self, field: Field) -> Option<f64> {
        self.0.get(field.key()).and_then(Value::as_f64)
    }

    /// `field` as a string.
    pub fn text(&self, field: Field) -> Option<&str> {
        self.0.get(field.key()).and_then(Value::as_str)
    }
}

/// The records of a JSON-lines file (`bench --json`, `results.jsonl`, a saved run); blank
/// lines are skipped. The error names the file and line.
pub fn read_jsonl(path: &std::path::Path) -> Result<Vec<Record>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Whether `imp` names one of tempora's own implementations (`tempora`, `tempora-coarse`, ...).
pub fn is_tempora_impl(imp: &str) -> bool {
    imp.starts_with("tempora")
}

/// One JSON result line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub suite: Suite,
    pub case: String,
    #[serde(rename = "impl")]
    pub imp: String,
    pub n: u64,
    pub threads: u32,
    pub ns_per_op: f64,
    pub total_ms: f64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten)]
    pub fields: Fields,
}

impl Record {
    /// The wheel's deadline distribution, `-` for other suites.
    pub fn dist(&self) -> &str {
        self.fields.text(Field::Dist).unwrap_or("-")
    }

    /// Whether this row is one of tempora's own (`tempora`, `tempora-coarse`, ...).
    pub fn is_tempora(&self) -> bool {
        is_tempora_impl(&self.imp)
    }

    /// The row's main figure, lower is better: `ns_per_op`, or for cases that time no call
    /// the lateness p99 or the wake-up rate.
    pub fn figure(&self) -> Option<(f64, &'static str)> {
        if !self.ok {
            return None;
        }
        if self.ns_per_op > 0.0 {
            return Some((self.ns_per_op, "ns/op"));
        }
        if let Some(p) = self.fields.num(Field::P99Ns) {
            return Some((p, "p99 ns"));
        }
        self.fields
            .num(Field::WakeupsPerS)
            .map(|w| (w, "wake-ups/s"))
    }
}

/// What one measurement produced: the row's figures, or why it could not run.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub ns_per_op: f64,
    pub total_ms: f64,
    pub error: Option<String>,
    pub fields: Fields,
}

impl Measured {
    /// `ns_per_op` for each of `n` operations (`total_ms` is `ns_per_op * n`).
    pub fn per_op(ns_per_op: f64, n: usize, fields: Fields) -> Measured {
        Measured {
            ns_per_op,
            total_ms: ns_per_op * n as f64 / 1e6,
            error: None,
            fields,
        }
    }

    /// A case that measures no call time (wake-ups, lateness): only its fields.
    pub fn fields_only(fields: Fields) -> Measured {
        Measured {
            fields,
            ..Measured::default()
        }
    }

    /// A case that could not run.
    pub fn failed(error: impl Into<String>) -> Measured {
        Measured {
            error: Some(error.into()),
            ..Measured::default()
        }
    }

    /// `Ok` as measured, `Err` as failed.
    pub fn from_result(r: Result<Measured, String>) -> Measured {
        r.unwrap_or_else(Measured::failed)
    }
}

/// A row as a suite hands it to the reporter: who, at what size, and what was measured.
#[derive(Debug, Clone)]
pub struct Row {
    pub case: String,
    pub imp: String,
    pub n: usize,
    pub threads: usize,
    pub measured: Measured,
}

impl Row {
    pub fn new(case: &str, imp: &str, n: usize, threads: usize, measured: Measured) -> Row {
        Row {
            case: case.to_string(),
            imp: imp.to_string(),
            n,
            threads,
            measured,
        }
    }

    /// The JSON line of this row in `suite`. A failed row has `ok:false`, its error, and a
    /// zero `ns_per_op` unless the suite measured one anyway (a wheel run that fired early).
    pub fn into_record(self, suite: Suite) -> Record {
        let m = self.measured;
        Record {
            suite,
            case: self.case,
            imp: self.imp,
            n: self.n as u64,
            threads: self.threads as u32,
            ns_per_op: m.ns_per_op,
            total_ms: m.total_ms,
            ok: m.error.is_none(),
            error: m.error,
            fields: m.fields,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_json_with_its_fields() {
        let r = Row::new(
            "insert-cancel",
            "tempora",
            10,
            1,
            Measured::per_op(
                2.0,
                10,
                Fields::default()
                    .with(Field::Dist, "server")
                    .with(Field::Early, 0),
            ),
        )
        .into_record(Suite::Wheel);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"suite":"wheel","case":"insert-cancel","impl":"tempora""#));
        assert!(line.contains(r#""dist":"server""#), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back.dist(), "server");
        assert_eq!(back.fields, r.fields);
        assert_eq!(back.figure(), Some((2.0, "ns/op")));
    }

    /// The JSON keys of saved runs: a renamed field would stop old runs comparing.
    #[test]
    fn field_keys_and_suite_names_are_the_saved_runs_keys() {
        use strum::IntoEnumIterator;
        let keys: Vec<&str> = Field::iter().map(Field::key).collect();
        let saved = [
            "dist",
            "runs",
            "bytes_per_timer",
            "fired",
            "early",
            "lost",
            "duplicate",
            "max_late_ms",
            "mean_late_ms",
            "wakeups",
            "worst_call_us",
            "bounded",
            "ops",
            "pair_ns",
            "rounds",
            "cold_ns_per_op",
            "vs_one_thread",
            "wakeups_per_s",
            "instants_per_s",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "p50_us",
            "p99_us",
            "max_hold_ns",
            "p99_hold_ns",
            "flushes",
            "cpu_ms_per_s",
            "cpu_ms",
            "max_ns",
            "due",
            "expire_ns",
            "irq_ns",
            "dequeue_ns",
            "overruns",
            "cpu_ns_per_wakeup",
            "req_per_s",
            "cpu_ns_per_req",
            "bytes_per_conn",
            "rss_per_conn",
            "client_cpu_ns_per_req",
            "disturbed",
            "driver_wakeups_per_expiry",
        ];
        assert_eq!(keys, saved);
        let names: Vec<&str> = Suite::ALL.iter().map(|s| s.name()).collect();
        let saved = [
            "seed",
            "wheel",
            "service",
            "checkpoint",
            "async",
            "capi",
            "stats",
            "server",
        ];
        assert_eq!(names, saved);
        for f in Field::iter() {
            let back: Field = serde_json::from_value(f.key().into()).unwrap();
            assert_eq!(back, f);
        }
    }
}
