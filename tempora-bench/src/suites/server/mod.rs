//! The server suite: a hyper HTTP/1 server end to end, on hyper-util's `TokioTimer`
//! (`tokio-timer`) and on `tempora::compat::hyper::Timer` (`tempora`), measured in one step
//! run by run in turn (the first of each pair alternates), so the machine's drift between
//! them cancels.
//!
//! Each run (`load.rs`) builds a server in this process (a tokio runtime with one worker,
//! hyper's HTTP/1 with a 60 s header-read timeout on the timer under test, a "hello" for every
//! request) and starts its load generator: hyper's HTTP/1 client on a one-worker runtime in a
//! child process (this binary's hidden `bench load-client`: nothing to install, bounded by its
//! window and stopping by itself), on 127.0.0.1 only. A process of its own gives the client
//! its own fds and keeps its memory and CPU out of the server's figures. The client opens n
//! keep-alive connections, each sends one request and goes idle, then every connection sends
//! requests back to back for the window. Every request re-arms the server's header-read
//! timeout: hyper makes a new sleep for each request head (and drops it once the head is
//! read), so an idle connection holds one.
//!
//! - `requests`: `ns_per_op` is the wall time per request (the inverse of `req_per_s`, the
//!   requests answered in the window per second); `p50_us`, `p99_us`: a request's time from
//!   send to its whole response, as the client saw it; `cpu_ns_per_req`: the server
//!   process's CPU time per request (its runtime and the timer's threads), and
//!   `client_cpu_ns_per_req` the client's.
//! - `idle`: `bytes_per_conn`, the server's heap bytes per idle keep-alive connection
//!   (counted by its allocator), and `rss_per_conn`, its resident bytes, over the connections
//!   made after the server started and before the load.
//!
//! On a 2-core machine the server's worker and the client's each have a core, shared with
//! tempora's driver thread and tokio's time driver (in the server's worker) and with whatever
//! else runs: requests per second and latency measure that contention, not a server alone.
//! CPU per request and memory per connection are the server's own.
//!
//! A size whose fds cannot be had (one per connection in each process; `RLIMIT_NOFILE` is
//! raised to its hard limit, and past it where the process may) gets `ok:false` rows saying
//! so.

mod load;

use std::time::Duration;

use load::Kind;

use crate::{median, Field, Fields, Measured, Plan, Row, Settings, Step, Suite};

/// `tempora bench load-client ADDR N`: a run's client, in the process the suite started
/// (stdin and stdout are its lines to the server); the exit status.
pub(crate) fn load_client(server: std::net::SocketAddr, n: usize) -> i32 {
    let stdin = std::io::stdin().lock();
    match load::client(server, n, stdin, std::io::stdout().lock()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tempora bench load-client: {e}");
            1
        }
    }
}

/// The cases every step records.
const CASES: [&str; 2] = ["requests", "idle"];

/// The median of `f` over `runs`.
fn med(runs: &[load::RunResult], f: impl Fn(&load::RunResult) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    median(&mut v)
}

/// The rows of one implementation: its runs' medians, or the first failure.
fn rows(kind: Kind, n: usize, runs: Result<Vec<load::RunResult>, String>) -> Vec<Row> {
    let name = kind.name();
    let runs = match runs {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return failed(kind, n, "no run".into()),
        Err(e) => return failed(kind, n, e),
    };
    let rps = med(&runs, |r| r.req_per_s);
    let requests = Fields::default()
        .with(Field::ReqPerS, rps)
        .with(Field::P50Us, med(&runs, |r| r.p50_us))
        .with(Field::P99Us, med(&runs, |r| r.p99_us))
        .with(Field::CpuNsPerReq, med(&runs, |r| r.cpu_ns_per_req))
        .with(
            Field::ClientCpuNsPerReq,
            med(&runs, |r| r.client_cpu_ns_per_req),
        )
        .with(Field::Runs, runs.len());
    let idle = Fields::default()
        .with(Field::BytesPerConn, med(&runs, |r| r.bytes_per_conn))
        .with(Field::RssPerConn, med(&runs, |r| r.rss_per_conn))
        .with(Field::Runs, runs.len());
    let per_request = Measured {
        ns_per_op: 1e9 / rps,
        total_ms: 0.0,
        error: None,
        fields: requests,
    };
    vec![
        Row::new("requests", name, n, 1, per_request),
        Row::new("idle", name, n, 1, Measured::fields_only(idle)),
    ]
}

fn failed(kind: Kind, n: usize, e: String) -> Vec<Row> {
    CASES
        .iter()
        .map(|c| Row::new(c, kind.name(), n, 1, Measured::failed(e.clone())))
        .collect()
}

/// One step at n: `reps` runs of each selected implementation, in turn.
fn step(n: usize, reps: usize, settings: &Settings) -> Vec<Row> {
    let kinds: Vec<Kind> = [Kind::Tempora, Kind::Tokio]
        .into_iter()
        .filter(|k| settings.wants_impl(k.name()))
        .collect();
    if let Err(e) = load::ensure_fds(load::fds_for(n)) {
        return kinds
            .iter()
            .flat_map(|&k| failed(k, n, e.clone()))
            .collect();
    }
    let warmup = settings.pick(
        Duration::from_millis(100),
        Duration::from_millis(200),
        Duration::from_millis(500),
    );
    let window = settings.pick(
        Duration::from_millis(300),
        Duration::from_millis(1000),
        Duration::from_secs(3),
    );
    let mut results: Vec<Result<Vec<load::RunResult>, String>> =
        kinds.iter().map(|_| Ok(Vec::new())).collect();
    for run in 0..reps {
        // tokio first in even runs, tempora first in odd ones.
        let mut order: Vec<usize> = (0..kinds.len()).collect();
        if run % 2 == 0 {
            order.reverse();
        }
        for i in order {
            if let Ok(v) = &mut results[i] {
                match load::run(kinds[i], n, warmup, window, load::ClientAt::Process) {
                    Ok(r) => v.push(r),
                    Err(e) => results[i] = Err(e),
                }
            }
        }
    }
    kinds
        .into_iter()
        .zip(results)
        .flat_map(|(k, r)| rows(k, n, r))
        .collect()
}

/// The suite's steps: one per size, both implementations in it.
pub fn plan<'a>(plan: &mut Plan<'a>) {
    let settings: &Settings = plan.settings;
    let sizes = settings.sizes(&[1_000], &[1_000, 10_000], &[1_000, 10_000, 50_000]);
    let reps = settings.reps(1, 3);
    let window_ms = settings.pick(300.0, 1000.0, 3000.0);
    for n in sizes {
        // A run: connecting (about 100 µs per connection), warm-up and window, the end.
        let cost = 2.0 * reps as f64 * (window_ms + 500.0 + n as f64 * 0.1);
        plan.add(
            Step::new(Suite::Server, &CASES, "tempora", n, 1, cost, move || {
                step(n, reps, settings)
            })
            .also("tokio-timer"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A size that cannot run leaves a failed row for each case and implementation, never a
    /// gap.
    #[test]
    fn a_failed_size_has_a_row_for_every_case() {
        let r = rows(Kind::Tokio, 50_000, Err("no fds".into()));
        let cases: Vec<&str> = r.iter().map(|r| r.case.as_str()).collect();
        assert_eq!(cases, CASES);
        assert!(r.iter().all(|r| r.imp == "tokio-timer"));
        assert!(r
            .iter()
            .all(|r| r.measured.error.as_deref() == Some("no fds")));
    }

    /// A small run on each timer answers requests on every connection and measures each
    /// figure (no speed is asserted: only that the load ran and its rows were filled).
    #[test]
    fn a_small_run_answers_requests_on_both_timers() {
        for kind in [Kind::Tempora, Kind::Tokio] {
            let r = load::run(
                kind,
                8,
                Duration::from_millis(20),
                Duration::from_millis(100),
                load::ClientAt::Thread,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert!(r.req_per_s > 0.0 && r.p99_us >= r.p50_us, "{r:?}");
            assert!(r.bytes_per_conn > 0.0 && r.cpu_ns_per_req > 0.0, "{r:?}");
            let rows = rows(kind, 8, Ok(vec![r]));
            assert!(rows.iter().all(|r| r.measured.error.is_none()));
            assert!(rows[0].measured.ns_per_op > 0.0);
        }
    }
}
