//! The `tempora` command: `tempora bench` runs the benchmark suites side by side with peers.

mod alloc;
mod bench;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

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
    /// Run the benchmark suites, tempora and its peers side by side in one process.
    Bench {
        /// Which suite: all, seed (registry: the seed's Tests 1-5), wheel.
        #[arg(long, default_value = "all", value_parser = clap::builder::PossibleValuesParser::new(bench::SUITES))]
        suite: String,
        /// Small sizes only (n = 100k), the whole run in about a minute.
        #[arg(long)]
        quick: bool,
        /// One JSON object per result on stdout; the table goes to stderr.
        #[arg(long)]
        json: bool,
        /// Live-timer counts to run instead of the suite's defaults (comma-separated).
        #[arg(long, value_delimiter = ',')]
        n: Option<Vec<usize>>,
        /// Runs per measurement (the median is reported).
        #[arg(long)]
        reps: Option<usize>,
        /// Only these implementations (comma-separated JSON `impl` names).
        #[arg(long = "impl", value_delimiter = ',')]
        impls: Option<Vec<String>>,
        /// Only cases whose JSON `case` name starts with one of these (comma-separated).
        #[arg(long = "case", value_delimiter = ',')]
        cases: Option<Vec<String>>,
    },
    /// Check a `bench --json` output file: every line a result with the required fields, no
    /// tempora result failed. Exits 1 with the first problem.
    #[command(hide = true)]
    CheckJson { file: std::path::PathBuf },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench {
            suite,
            quick,
            json,
            n,
            reps,
            impls,
            cases,
        } => {
            if n.as_ref().is_some_and(|n| n.contains(&0)) || reps == Some(0) {
                eprintln!("tempora bench: --n and --reps take positive numbers");
                std::process::exit(2);
            }
            bench::run(&bench::Opts {
                suite,
                quick,
                json,
                n,
                reps,
                impls,
                cases,
            });
        }
        Command::CheckJson { file } => match bench::check_json(&file) {
            Ok(count) => println!("{count} result lines ok"),
            Err(err) => {
                eprintln!("tempora check-json: {}: {err}", file.display());
                std::process::exit(1);
            }
        },
    }
}
