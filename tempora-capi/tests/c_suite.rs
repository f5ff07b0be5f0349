//! The C test suite: each `tests/c/*.c` program is compiled with the system's C compiler (the
//! one the `cc` crate finds, `CC` and `CFLAGS` honoured) at `-Wall -Wextra -Werror -std=c11`
//! against the library as a C program gets it (`stage.sh --no-build`: `tempora.h`,
//! `libtempora.so`, `libtempora.a`), then run; a program checks what it tests and exits 1 with
//! the failing line on stderr.
//!
//! `TEMPORA_C_SANITIZE=address` builds the programs with AddressSanitizer (`.ci/capi-asan.sh`);
//! `TEMPORA_C_REPEAT=N` runs each program N times (the soak of the threaded ones).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// This crate's directory.
fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The staged prefix (include/, lib/) of the library cargo built for this test run.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        // This test runs from <target>/<profile>/deps; the libraries were built beside it.
        let exe = std::env::current_exe().expect("the test's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("<target>/<profile>");
        let profile = profile_dir
            .file_name()
            .expect("profile")
            .to_str()
            .expect("utf-8");
        let target = profile_dir.parent().expect("<target>");
        let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-suite-prefix");
        let out = Command::new("bash")
            .arg(here().join("stage.sh"))
            .args(["--no-build", "--profile", profile])
            .arg(&prefix)
            .env("CARGO_TARGET_DIR", target)
            .output()
            .expect("run stage.sh");
        assert!(out.status.success(), "stage.sh failed:\n{}", text(&out));
        prefix
    })
}

fn text(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// How a program links tempora.
#[derive(Clone, Copy, PartialEq)]
enum Link {
    /// `-ltempora` (libtempora.so, found through an rpath).
    Shared,
    /// `libtempora.a` and what a Rust static library needs from libc.
    Static,
    /// Not at all: a program on libc's POSIX timers only.
    None,
}

/// The system's C compiler with the flags the suite builds with.
fn compiler() -> Command {
    let tool = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(env!("TEMPORA_CAPI_TARGET"))
        .host(env!("TEMPORA_CAPI_TARGET"))
        .opt_level(1)
        .debug(true)
        .warnings(false)
        .get_compiler();
    let mut cmd = tool.to_command();
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread"]);
    if let Ok(s) = std::env::var("TEMPORA_C_SANITIZE") {
        if !s.is_empty() {
            cmd.arg(format!("-fsanitize={s}"))
                .arg("-fno-omit-frame-pointer");
        }
    }
    cmd
}

/// Compiles `tests/c/<name>.c` (with `defines`) into `<name><suffix>` and returns its path.
fn build(name: &str, suffix: &str, link: Link, defines: &[&str]) -> PathBuf {
    let prefix = prefix();
    let exe = prefix.join("tests").join(format!("{name}{suffix}"));
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let mut cmd = compiler();
    cmd.arg("-I")
        .arg(prefix.join("include"))
        .arg("-I")
        .arg(here().join("tests/c"))
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(here().join("tests/c").join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe);
    let lib = prefix.join("lib");
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(&lib).arg("-ltempora");
            cmd.arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Link::Static => {
            cmd.arg(lib.join("libtempora.a"));
            cmd.args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
        }
        Link::None => {}
    }
    let out = cmd.output().expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {name}.c failed:\n{}",
        text(&out)
    );
    exe
}

/// Runs `exe` with `args` (`TEMPORA_C_REPEAT` times) and returns the last run's stdout; a
/// failing run fails the test with its output.
fn run(exe: &Path, args: &[&str]) -> String {
    let repeat: usize = std::env::var("TEMPORA_C_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut stdout = String::new();
    for i in 0..repeat.max(1) {
        let out = Command::new(exe)
            .args(args)
            .output()
            .expect("run the C test");
        assert!(
            out.status.success(),
            "{} {args:?} failed (run {} of {repeat}):\n{}",
            exe.display(),
            i + 1,
            text(&out)
        );
        stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    }
    stdout
}

#[test]
fn lifecycle_on_every_clock_shared_and_static() {
    for (suffix, link) in [("-so", Link::Shared), ("-a", Link::Static)] {
        let out = run(&build("lifecycle", suffix, link, &[]), &[]);
        for clock in ["CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_BOOTTIME"] {
            assert!(out.contains(&format!("{clock}: lifecycle ok")), "{out}");
        }
    }
}

#[test]
fn every_errno_path() {
    let out = run(&build("errors", "", Link::Shared, &[]), &[]);
    assert!(out.contains("errors ok"), "{out}");
}

#[test]
fn pthread_churn_and_callbacks_that_delete_themselves() {
    let out = run(&build("threads", "", Link::Shared, &[]), &[]);
    assert!(out.contains("threads ok"), "{out}");
}
