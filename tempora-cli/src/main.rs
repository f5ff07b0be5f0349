//! The `tempora` command: `tempora bench` runs the benchmark suites side by side with peers;
//! `tempora checkpoint` shows and inspects owner snapshots; `tempora ls PID` and
//! `tempora stats PID` read a running process's timers and statistics; `tempora top` shows a
//! live view of a service's statistics (`--pid PID`, or `--demo`).

mod checkpoint;
mod inspect;
mod top;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: tempora_bench::alloc::Counting = tempora_bench::alloc::Counting;

#[derive(Parser)]
#[command(
    name = "tempora",
    version,
    about = "tempora: scalable POSIX-style timers in user space"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark suites, tempora and its peers side by side in one process, or compare
    /// two runs (`bench compare OLD.jsonl NEW.jsonl`).
    ///
    /// A run exits 1, with the reason in one line on stderr, when a tempora result failed, a
    /// result was lost or the report could not be written; 2 when `--case` or `--impl` selects
    /// nothing. A peer's failed result (a kernel limit) does not fail the run.
    Bench(tempora_bench::Opts),
    /// Checkpoint and restore: `demo` (across two processes) and `inspect FILE`.
    #[command(subcommand)]
    Checkpoint(checkpoint::Cmd),
    /// A live view of statistics: groups and owners with live timers, arms/s, fires/s,
    /// overruns/s and lateness (`top --pid PID` watches a running process, `top --demo` a
    /// demo workload).
    Top(top::Opts),
    /// A running process's tempora timers, one line each (as `/proc/PID/timers` shows kernel
    /// timers): owner, group, ID (the drop-in's `timer_t`), clock, notification, state, next
    /// expiry, interval, overrun, precision. Only the process's user or root may.
    Ls(inspect::LsOpts),
    /// A running process's tempora statistics: Prometheus text (default) or `--json`.
    Stats(inspect::StatsOpts),
    /// Check a `bench --json` output file: every line a result with the required fields, no
    /// tempora result failed. Exits 1 with the first problem.
    #[command(hide = true)]
    CheckJson { file: std::path::PathBuf },
}

fn main() {
    // Output piped into `head` & co.: end quietly when the reader goes, as other Unix tools
    // do, rather than panicking in `println!` on EPIPE.
    // SAFETY: signal(2) with a constant disposition, before any thread is started.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(opts) => std::process::exit(tempora_bench::main(&opts)),
        Command::Checkpoint(cmd) => std::process::exit(checkpoint::run(cmd)),
        Command::Top(opts) => std::process::exit(top::main(&opts)),
        Command::Ls(opts) => std::process::exit(inspect::ls(&opts)),
        Command::Stats(opts) => std::process::exit(inspect::stats(&opts)),
        Command::CheckJson { file } => match tempora_bench::check_json(&file) {
            Ok(count) => println!("{count} result lines ok"),
            Err(err) => {
                eprintln!("tempora check-json: {}: {err}", file.display());
                std::process::exit(1);
            }
        },
    }
}
