//! Two things the bench harness needs from its build:
//!
//! - The capi suite's C harness (`src/suites/capi/capi.c`), compiled: tight C loops over the C
//!   ABI of `tempora.h` and over the kernel's POSIX timers, linked into the `tempora` binary.
//!   The harness's calls to `tempora_*` resolve to the `tempora_capi` rlib the binary links
//!   (the same functions `libtempora.so` and `libtempora.a` export), so the C side measures the
//!   ABI a C program calls.
//! - The git commit the measured code was built from (`TEMPORA_BENCH_COMMIT`, with `-dirty`
//!   when tracked files differ from it, `unknown` outside a git checkout), which every run
//!   records beside its results. The script reruns when HEAD, the index or the branch moves,
//!   or when the sources of a crate the binary measures change.
use std::path::Path;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/suites/capi/capi.c");
    println!("cargo:rerun-if-changed=../tempora-capi/include/tempora.h");
    cc::Build::new()
        .file("src/suites/capi/capi.c")
        .include("../tempora-capi/include")
        // The harness's loops are what is measured: the same optimisation whatever profile
        // cargo builds (a C program linking libtempora.a is built at -O2 too).
        .opt_level(2)
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .compile("tempora_capi_bench");

    println!("cargo:rustc-env=TEMPORA_BENCH_COMMIT={}", git_commit());
    let sources = [
        "src",
        "../tempora/src",
        "../tempora-capi/src",
        "../tempora-kernel/src",
    ];
    let mut watched: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watched.push(format!("{dir}/HEAD"));
        watched.push(format!("{dir}/index"));
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        watched.push(format!("{common}/packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(format!("{common}/{branch}"));
        }
    }
    // Only paths that exist: cargo reruns a script every build for one that does not.
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// `git ARGS` in this crate's directory: its trimmed output, or `None` if git failed or is
/// missing.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The commit checked out, `-dirty` if tracked files have changes; `unknown` without git.
fn git_commit() -> String {
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        None => "unknown".into(),
    }
}
