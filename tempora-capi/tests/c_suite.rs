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

/// The system's C compiler (C++ with `cpp`) with the flags the suite builds with.
fn compiler(cpp: bool) -> Command {
    let tool = cc::Build::new()
        .cpp(cpp)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(env!("TEMPORA_CAPI_TARGET"))
        .host(env!("TEMPORA_CAPI_TARGET"))
        .opt_level(1)
        .debug(true)
        // `true`: -Wall -Wextra. Never `false`: that adds -w, which silences every warning
        // whatever flags follow, -Werror included.
        .warnings(true)
        .get_compiler();
    let mut cmd = tool.to_command();
    cmd.arg(if cpp { "-std=c++17" } else { "-std=c11" });
    cmd.args(["-Wall", "-Wextra", "-Werror"]);
    if let Ok(s) = std::env::var("TEMPORA_C_SANITIZE") {
        if !s.is_empty() {
            cmd.arg(format!("-fsanitize={s}"))
                .arg("-fno-omit-frame-pointer");
        }
    }
    cmd
}

/// Compiles `tests/c/<name>.c` (`.cpp`: as C++) with `defines` into `<name><suffix>` and
/// returns its path.
fn build(name: &str, suffix: &str, link: Link, defines: &[&str]) -> PathBuf {
    let prefix = prefix();
    let (stem, cpp) = match name.strip_suffix(".cpp") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let exe = prefix.join("tests").join(format!("{stem}{suffix}"));
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let mut cmd = compiler(cpp);
    cmd.arg("-pthread");
    cmd.arg("-I")
        .arg(prefix.join("include"))
        .arg("-I")
        .arg(here().join("tests/c"))
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(here().join("tests/c").join(if cpp {
            name.to_owned()
        } else {
            format!("{name}.c")
        }))
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

/// Runs `exe` with `args` once; its status and output.
fn output(exe: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe)
        .args(args)
        .output()
        .expect("run the C test")
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
        let out = output(exe, args);
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
fn precision_kinds_deferral_and_spare_drivers() {
    let out = run(&build("precision", "", Link::Shared, &[]), &[]);
    assert!(out.contains("precision ok"), "{out}");
}

#[test]
fn no_thread_to_start_is_eagain_and_prints_nothing() {
    let out = output(&build("nothreads", "", Link::Shared, &[]), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("nothreads ok"),
        "{}",
        text(&out)
    );
    // A caught panic would have written its report here.
    assert!(out.stderr.is_empty(), "{}", text(&out));
}

#[test]
fn a_callbacks_overrun_and_getoverrun_for_one_and_for_folded_expiries() {
    let out = run(&build("overrun", "", Link::Shared, &[]), &[]);
    assert!(out.contains("overrun ok"), "{out}");
}

#[test]
fn pthread_churn_and_callbacks_that_delete_themselves() {
    let out = run(&build("threads", "", Link::Shared, &[]), &[]);
    assert!(out.contains("threads ok"), "{out}");
}

#[test]
fn the_fds_in_an_epoll_loop() {
    let out = run(&build("epoll", "", Link::Shared, &[]), &[]);
    assert!(out.contains("epoll ok"), "{out}");
}

#[test]
fn checkpoint_in_one_process_restore_in_another() {
    let exe = build("checkpoint", "", Link::Shared, &[]);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-suite-checkpoint");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("snapshot-{}", std::process::id()));
    let path = path.to_str().expect("utf-8 path");
    let saved = run(&exe, &["save", path]);
    assert!(saved.contains("saved 5 timers"), "{saved}");
    let restored = run(&exe, &["restore", path]);
    assert!(
        restored.contains("restored 5 timers with their IDs"),
        "{restored}"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_posix_program_prints_the_same_on_libc_and_on_tempora() {
    let libc = run(&build("dropin", "-libc", Link::None, &[]), &[]);
    let tempora = run(
        &build("dropin", "-tempora", Link::Shared, &["USE_TEMPORA"]),
        &[],
    );
    assert!(libc.lines().count() > 20, "{libc}");
    assert_eq!(
        libc, tempora,
        "\n--- libc\n{libc}--- tempora_posix.h\n{tempora}"
    );
}

#[test]
fn tempora_posix_h_refuses_as_linux_would() {
    let out = run(&build("posix", "", Link::Shared, &[]), &[]);
    assert!(out.contains("posix ok"), "{out}");
}

#[test]
fn a_cxx_program_uses_the_header() {
    let out = run(&build("cxx.cpp", "", Link::Shared, &[]), &[]);
    assert!(out.contains("c++ ok"), "{out}");
}

/// Runs `exe` with `args` once and checks that it was killed by `SIGABRT`.
fn aborts(exe: &Path, args: &[&str]) {
    use std::os::unix::process::ExitStatusExt;
    let out = output(exe, args);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{} {args:?} did not abort:\n{}",
        exe.display(),
        text(&out)
    );
}

#[test]
fn a_cxx_exception_out_of_a_callback_or_a_resolver_aborts() {
    // Its own build: the tests run at once, and one cannot run a file another is writing.
    let exe = build("cxx.cpp", "-throw", Link::Shared, &[]);
    aborts(&exe, &["throw"]);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-suite-cxx");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("snapshot-{}", std::process::id()));
    aborts(
        &exe,
        &["throw-resolver", path.to_str().expect("utf-8 path")],
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_strict_iso_c_build_is_told_what_tempora_h_needs() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-suite-strict");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("strict.c");
    std::fs::write(&src, "#include <tempora.h>\nint main(void) { return 0; }\n").unwrap();
    // No -pthread here: it defines _REENTRANT, which makes glibc declare POSIX.1c.
    let out = compiler(false)
        .arg("-fsyntax-only")
        .arg("-I")
        .arg(prefix().join("include"))
        .arg(&src)
        .output()
        .expect("run the C compiler");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("define _POSIX_C_SOURCE 200809L"),
        "{}",
        text(&out)
    );
    // The fix it names works.
    let out = compiler(false)
        .args(["-fsyntax-only", "-D_POSIX_C_SOURCE=200809L", "-I"])
        .arg(prefix().join("include"))
        .arg(&src)
        .output()
        .expect("run the C compiler");
    assert!(out.status.success(), "{}", text(&out));
}
