//! What the workspace's tests of C programs share, written once: tempora-capi's C suite
//! (`tests/c_suite.rs`) and tempora-posix's drop-in tests (`tests/dropin.rs`). The system's C
//! compiler with the flags they build with, how a program links a Rust library, running a
//! program `TEMPORA_C_REPEAT` times, and a finished command's text for a failure message.
//! Where their programs' prefix comes from and how they link tempora stays theirs.

use std::path::Path;
use std::process::{Command, Output};

/// A finished command's status and output, for a failure message.
pub fn text(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The system's C compiler (C++ with `cpp`) for `target`, as the `cc` crate finds it (`CC` and
/// `CFLAGS` honoured), at `-std=c11` (`-std=c++17`) with `-Wall -Wextra -Werror`, and with
/// `-fsanitize=S` when `TEMPORA_C_SANITIZE=S` is set (`.ci/capi-asan.sh`).
pub fn compiler(target: &str, cpp: bool) -> Command {
    let tool = cc::Build::new()
        .cpp(cpp)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(target)
        .host(target)
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

/// Links `-l<name>` from `dir`, found at run time through an rpath.
pub fn link_shared(cmd: &mut Command, dir: &Path, name: &str) {
    cmd.arg("-L").arg(dir).arg(format!("-l{name}"));
    cmd.arg(format!("-Wl,-rpath,{}", dir.display()));
}

/// Links the Rust static library `archive` and what it needs from the C library.
pub fn link_static(cmd: &mut Command, archive: &Path) {
    cmd.arg(archive);
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

/// Runs the compiler command `cmd` (source and `-o` named), failing the test with its output
/// if it fails; `what` names the build in that message.
pub fn compile(mut cmd: Command, what: &str) {
    let out = cmd.output().expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {what} failed:\n{}",
        text(&out)
    );
}

/// How many times [`run`] runs a program: `TEMPORA_C_REPEAT` (the soak of the threaded ones),
/// else once.
pub fn repeat() -> usize {
    std::env::var("TEMPORA_C_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Runs the program `program` makes, [`repeat`] times, and returns the last run's stdout; a
/// failing run fails the test with its output (`what` names the program there).
pub fn run(what: &str, mut program: impl FnMut() -> Command) -> String {
    let repeat = repeat();
    let mut stdout = String::new();
    for i in 0..repeat {
        let out = program().output().expect("run the C test");
        assert!(
            out.status.success(),
            "{what} failed (run {} of {repeat}):\n{}",
            i + 1,
            text(&out)
        );
        stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    }
    stdout
}
