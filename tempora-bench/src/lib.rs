//! The benchmark harness behind `tempora bench`: every suite, tempora and its peers side by side
//! in one process. The `tempora` binary calls [`main`] for `bench`, `bench compare` and `bench
//! report`, [`check_json`] for `check-json`, and installs [`alloc::Counting`] as its global
//! allocator.
//!
//! - `runner`: the command line and the run (`runner/mod.rs`, which drives the suites and the
//!   report); below it, what the suites are written against (`plan`: the settings, the plan of
//!   steps), what their measurements share (`measure`: threads that start together, settling
//!   reclamation; `fork`: child processes), the machine record (`machine`), and what a run can
//!   select (`select`: the suites' catalog, `--list`, the check of `--case`/`--impl` names).
//! - `suites`: one module per suite (`suites/<suite>/`), each declaring its steps.
//! - `peers`: the abstractions every implementation measured is written against, and the peers.
//! - `record`: the JSON line schema (`Record`, `Field`, `Suite`), stable across runs.
//! - `targets`: tempora's performance targets and the verdict.
//! - `report`: the text table, the HTML report and its plots, `bench compare`.
//! - `stats`, `workload`: the one median/quantile and the one workload generator every suite
//!   shares.

pub mod alloc;
mod peers;
mod record;
mod report;
mod runner;
mod stats;
mod suites;
mod targets;
mod workload;

pub use runner::{check_json, main, Opts};

pub(crate) use crate::alloc::allocated_bytes;
pub(crate) use record::{Field, Fields, Measured, Row, Suite};
pub(crate) use runner::measure::{on_threads, settle_reclamation};
pub(crate) use runner::plan::{Plan, Settings, Step};
pub(crate) use stats::median;

/// The unit tests' allocator: the one the `tempora` binary installs, so that the tests that
/// count allocations (`runner::fork`) see them.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;
