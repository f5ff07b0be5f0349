//! `tempora bench`'s command line, run as a user would: `--list`, names that select nothing,
//! `--out` and the default output directory, and the exit status when the report cannot be
//! written. (A failed tempora row or a lost result failing the run is decided by a function
//! that the harness's unit tests check: `runner::failure`, `Reporter::execute`.)
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `tempora bench <args>` in `dir` (the current directory if `None`).
fn bench(args: &[&str], dir: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tempora"));
    cmd.arg("bench").args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.output().expect("run tempora bench")
}

/// A fresh, empty directory of this test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tempora-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One small, fast step: tempora's checkpoint of 1000 timers, once.
const SMALL_RUN: [&str; 10] = [
    "--suite",
    "checkpoint",
    "--case",
    "checkpoint",
    "--quick",
    "--n",
    "1000",
    "--reps",
    "1",
    "--json",
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn list_prints_every_suite_with_its_cases_and_impls_and_runs_nothing() {
    let start = Instant::now();
    let out = bench(&["--list"], None);
    // Generous: planning runs no step and builds no workload (a run takes minutes).
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for suite in [
        "seed",
        "wheel",
        "service",
        "checkpoint",
        "async",
        "capi",
        "stats",
    ] {
        assert!(stdout.lines().any(|l| l == suite), "no {suite}:\n{stdout}");
    }
    assert!(
        stdout.contains("  cases: t1-create, t1-getoverrun,"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  impls: tempora, kernel, global-lock,"),
        "{stdout}"
    );
    // No step ran: no progress line, no table, no report.
    assert_eq!(text(&out.stderr), "");
    // `--suite`, `--case` and `--impl` narrow the list as they narrow a run.
    let out = bench(
        &[
            "--list", "--suite", "seed", "--case", "mem", "--impl", "kernel",
        ],
        None,
    );
    assert_eq!(
        text(&out.stdout),
        "seed\n  cases: mem-dense, mem-sparse\n  impls: kernel\n"
    );
}

#[test]
fn a_case_or_impl_that_matches_nothing_is_an_error_listing_the_valid_names() {
    let out = bench(
        &["--suite", "seed", "--case", "t1,t9-create", "--quick"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "", "nothing ran");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--case `t9-create` starts no case name"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  seed: t1-create, t1-getoverrun, t4-create"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wheel:"),
        "only the selected suites: {stderr}"
    );

    let out = bench(&["--suite", "wheel", "--impl", "binary-heep"], None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--impl `binary-heep`"), "{stderr}");
    assert!(
        stderr.contains("  wheel: tempora, tempora-coarse, binary-heap"),
        "{stderr}"
    );

    // Each name is valid, but together they select no step.
    let out = bench(
        &[
            "--suite",
            "seed,wheel",
            "--case",
            "burst",
            "--impl",
            "kernel",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("select nothing"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn out_puts_the_report_results_machine_and_saved_run_in_the_directory() {
    let dir = temp_dir("out");
    let out_dir = dir.join("report here");
    let mut args = SMALL_RUN.to_vec();
    args.extend(["--out", out_dir.to_str().unwrap(), "--save", "mine"]);
    let out = bench(&args, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in [
        "report.html",
        "results.jsonl",
        "machine.json",
        "runs/mine.jsonl",
    ] {
        let path = out_dir.join(file);
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
            "{} not written",
            path.display()
        );
    }
    let results = std::fs::read_to_string(out_dir.join("results.jsonl")).unwrap();
    assert_eq!(results, text(&out.stdout), "the run's JSON lines");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outside_a_cargo_project_the_report_goes_to_tempora_bench_in_the_current_directory() {
    let dir = temp_dir("cwd");
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .arg("bench")
        .args(SMALL_RUN)
        .current_dir(&dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.join("tempora-bench/report.html").exists());
    // With CARGO_TARGET_DIR set when it runs, into that target directory.
    let target = dir.join("elsewhere");
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .arg("bench")
        .args(SMALL_RUN)
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(target.join("tempora-bench/results.jsonl").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_report_that_cannot_be_written_fails_the_run_before_it_starts() {
    let dir = temp_dir("unwritable");
    let file = dir.join("a file");
    std::fs::write(&file, "not a directory").unwrap();
    let mut args = SMALL_RUN.to_vec();
    args.extend(["--out", file.to_str().unwrap()]);
    let out = bench(&args, Some(&dir));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "", "nothing ran");
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("cannot write the report to"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
