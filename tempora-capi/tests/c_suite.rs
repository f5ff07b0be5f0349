//! The C test suite: each `tests/c/*.c` program is compiled with the system's C compiler (the
//! one the `cc` crate finds, `CC` and `CFLAGS` honoured) at `-Wall -Wextra -Werror -std=c11`
//! against the library as a C program gets it (`install.sh --no-build` into a prefix:
//! `tempora.h`, `libtempora.so.0`, `libtempora.a`), then run; a program checks what it tests and exits 1 with
//! the failing line on stderr.
//!
//! `TEMPORA_C_SANITIZE=address` builds the programs with AddressSanitizer (`.ci/capi-asan.sh`);
//! `TEMPORA_C_REPEAT=N` runs each program N times (the soak of the threaded ones).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tempora_ctest::{self as ctest, text};

/// This crate's directory.
fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The prefix (include/, lib/) the library cargo built for this test run is installed in.
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
            .arg(here().join("install.sh"))
            .args([
                "--no-build",
                "--profile",
                profile,
                "--libdir",
                "lib",
                "--prefix",
            ])
            .arg(&prefix)
            .env("CARGO_TARGET_DIR", target)
            .env_remove("DESTDIR")
            .output()
            .expect("run install.sh");
        assert!(out.status.success(), "install.sh failed:\n{}", text(&out));
        prefix
    })
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
    ctest::compiler(env!("TEMPORA_CAPI_TARGET"), cpp)
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
        Link::Shared => ctest::link_shared(&mut cmd, &lib, "tempora"),
        Link::Static => ctest::link_static(&mut cmd, &lib.join("libtempora.a")),
        Link::None => {}
    }
    ctest::compile(cmd, name);
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
    ctest::run(&format!("{} {args:?}", exe.display()), || {
        let mut cmd = Command::new(exe);
        cmd.args(args);
        cmd
    })
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

/// The signal programs (`tests/c/sig_*.c`, each built against libc and with
/// `tempora_posix.h`) and the lines each prints against libc, the kernel's POSIX timers, in
/// order. `sig_million`'s libc line is the kernel's refusal; tempora's are
/// `SIG_MILLION_ON_TEMPORA`.
const SIGNAL_PROGRAMS: &[(&str, &[&str])] = &[
    (
        "sig_handler",
        &[
            "create SIGEV_SIGNAL SIGRTMIN sival_int 42: 0",
            "one-shot: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun 0",
            "one-shot: 1 handler call, getoverrun in the handler 0",
            "periodic 1: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun >= 0",
            "periodic 1: getoverrun in the handler >= si_overrun: yes",
            "periodic 2: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun >= 0",
            "periodic 2: getoverrun in the handler >= si_overrun: yes",
            "periodic 3: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun >= 0",
            "periodic 3: getoverrun in the handler >= si_overrun: yes",
            "delete: 0",
        ],
    ),
    (
        "sig_waitinfo",
        &[
            "create SIGEV_SIGNAL SIGRTMIN sival_int 7: 0",
            "sigtimedwait 20 ms, timer not armed: -1 EAGAIN",
            "sigwaitinfo one-shot: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun 0",
            "sigwaitinfo one-shot: getoverrun 0",
            "sigtimedwait periodic 1: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun >= 0",
            "sigtimedwait periodic 1: getoverrun >= si_overrun: yes",
            "sigtimedwait periodic 2: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun >= 0",
            "sigtimedwait periodic 2: getoverrun >= si_overrun: yes",
            "sigtimedwait periodic 3: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun >= 0",
            "sigtimedwait periodic 3: getoverrun >= si_overrun: yes",
            "delete: 0",
        ],
    ),
    (
        "sig_signalfd",
        &[
            "create SIGEV_SIGNAL SIGRTMIN sival_int 99: 0",
            "read the signalfd, timer not armed: -1 EAGAIN",
            "one-shot: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun 0",
            "periodic 1: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun >= 0",
            "periodic 1: getoverrun >= ssi_overrun: yes",
            "periodic 2: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun >= 0",
            "periodic 2: getoverrun >= ssi_overrun: yes",
            "periodic 3: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun >= 0",
            "periodic 3: getoverrun >= ssi_overrun: yes",
            "delete: 0",
        ],
    ),
    (
        "sig_blocked",
        &[
            "create SIGEV_SIGNAL SIGRTMIN: 0",
            "while blocked: SIGRTMIN pending, 0 handler calls",
            "after unblocking: 1 handler call",
            "handler: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 5, si_overrun >= 0",
            "getoverrun in the handler: 9",
            "getoverrun after: 9",
        ],
    ),
    (
        "sig_consumed",
        &[
            "create SIGEV_SIGNAL: 0",
            "handler: getoverrun 9, 1 handler call",
            "SIGCONT SIG_DFL: getoverrun 9",
            "SIG_IGN before: getoverrun 9",
            "SIG_IGN while blocked: getoverrun 0",
            "later: handler calls went on: yes, SIGCONT SIG_DFL 9, SIG_IGN before 9, SIG_IGN while blocked 0",
            "at the expiry: 1 handler call, getoverrun 2",
            "before the next period: 1 handler call",
        ],
    ),
    (
        "sig_ignored",
        &[
            "create SIGEV_SIGNAL SIGRTMIN: 0",
            "blocked: before SIG_IGN: SIGRTMIN pending",
            "blocked: while ignored: SIGRTMIN not pending",
            "blocked: handler back: SIGRTMIN pending, 0 handler calls",
            "blocked: after unblocking: 1 handler call, getoverrun 7",
            "blocked: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 3, si_overrun >= 0",
            "unblocked: handler back: 1 handler call, getoverrun 4",
            "unblocked: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 3, si_overrun >= 0",
        ],
    ),
    (
        "sig_delete_settime",
        &[
            "create SIGEV_SIGNAL SIGRTMIN: 0",
            "re-armed: sigpending before: SIGRTMIN pending",
            "re-armed: sigpending after: SIGRTMIN pending",
            "re-armed: sigtimedwait 0: -1 EAGAIN",
            "re-armed: sigpending after sigtimedwait: SIGRTMIN not pending",
            "re-armed: unblocked: 0 handler calls",
            "disarmed: sigpending before: SIGRTMIN pending",
            "disarmed: sigpending after: SIGRTMIN pending",
            "disarmed: sigtimedwait 0: -1 EAGAIN",
            "disarmed: sigpending after sigtimedwait: SIGRTMIN not pending",
            "disarmed: unblocked: 0 handler calls",
            "deleted: sigpending before: SIGRTMIN pending",
            "deleted: sigpending after: SIGRTMIN pending",
            "deleted: sigtimedwait 0: -1 EAGAIN",
            "deleted: sigpending after sigtimedwait: SIGRTMIN not pending",
            "deleted: unblocked: 0 handler calls",
        ],
    ),
    (
        "sig_null_sigevent",
        &[
            "create CLOCK_MONOTONIC NULL sigevent: 0",
            "si_signo SIGALRM, si_code SI_TIMER, si_timerid matches, si_overrun 0",
            "sival_int == timer id: yes",
            "delete: 0",
        ],
    ),
    (
        "sig_thread_id",
        &[
            "create SIGEV_THREAD_ID to the second thread sival_int 21: 0",
            "to the second thread: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 21, si_overrun >= 0",
            "to the second thread: 3 signals, taken by the second thread",
            "create SIGEV_THREAD_ID to main sival_int 22: 0",
            "to main: the second thread's sigtimedwait 300 ms: -1 EAGAIN",
            "to main: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 22, si_overrun 0",
            "to main: taken by main",
            "create SIGEV_THREAD_ID to the parent process: -1 EINVAL",
            "create SIGEV_THREAD_ID to tid 0: -1 EINVAL",
            "create SIGEV_THREAD_ID to tid -1: -1 EINVAL",
            "create SIGEV_THREAD_ID to main: 0",
            "create SIGEV_THREAD_ID to main, signal 0: -1 EINVAL",
            "create SIGEV_THREAD_ID to main, signal 65: -1 EINVAL",
            "create SIGEV_THREAD_ID|SIGEV_THREAD to main: -1 EINVAL",
            "create SIGEV_SIGNAL signal 0: -1 EINVAL",
            "create SIGEV_SIGNAL signal -1: -1 EINVAL",
            "create SIGEV_SIGNAL signal 65: -1 EINVAL",
            "create SIGEV_SIGNAL signal 1: 0",
            "create SIGEV_SIGNAL SIGRTMAX: 0",
            "create SIGEV_SIGNAL SIGKILL: 0",
            "create SIGEV_SIGNAL SIGSTOP: 0",
        ],
    ),
    (
        "sig_sigwait_main",
        &[
            "create SIGEV_THREAD every 3 ms: 0",
            "create SIGEV_SIGNAL SIGRTMIN every 5 ms: 0",
            "create SIGEV_SIGNAL SIGALRM every 7 ms: 0",
            "sigwait in main: 20 signals",
            "both SIGRTMIN and SIGALRM among them: yes",
            "SIGEV_THREAD function: at least 3 calls",
            "deleted: 0 0 0",
        ],
    ),
    (
        "sig_cpu_clocks",
        &[
            "create CLOCK_PROCESS_CPUTIME_ID SIGEV_NONE: 0",
            "gettime: 0, armed: yes",
            "delete: 0",
            "create CLOCK_THREAD_CPUTIME_ID SIGEV_NONE: 0",
            "create clock_getcpuclockid(getpid()) SIGEV_NONE: 0",
            "create pthread_getcpuclockid(pthread_self()) SIGEV_NONE: 0",
            "create CLOCK_MONOTONIC SIGEV_NONE: 0",
            "create CLOCK_PROCESS_CPUTIME_ID SIGUSR1: 0",
            "si_signo SIGUSR1, si_code SI_TIMER, si_timerid matches, sival_int 7",
            "monotonic timer still armed: yes",
            "delete: 0 0",
            "create CLOCK_PROCESS_CPUTIME_ID sigev_notify 99: -1 EINVAL",
            "create CLOCK_PROCESS_CPUTIME_ID signal 65: -1 EINVAL",
        ],
    ),
    (
        "sig_million",
        &["kernel refuses past RLIMIT_SIGPENDING: EAGAIN"],
    ),
];

/// What `sig_million` prints on tempora, which holds a million signal timers under an
/// `RLIMIT_SIGPENDING` of 1024 and delivers 1000 of them.
const SIG_MILLION_ON_TEMPORA: &[&str] = &[
    "created 1000000",
    "armed 1000000 for an hour",
    "armed 1000 of them for 10 ms",
    "received 1000 signals, each from one of the 1000, none twice",
    "sigtimedwait 20 ms: -1 EAGAIN",
    "deleted 1000000",
];

/// Whether `out`'s lines hold `lines` in that order (other lines may come between).
fn has_lines(out: &str, lines: &[&str]) -> bool {
    let mut got = out.lines();
    lines.iter().all(|want| got.any(|l| l == *want))
}

#[test]
fn signal_programs_run_on_libc() {
    for (name, lines) in SIGNAL_PROGRAMS {
        // Its own build name: the comparisons below build `-libc` and may run at once.
        let out = run(&build(name, "-onlibc", Link::None, &[]), &[]);
        assert!(
            has_lines(&out, lines),
            "{name} on libc printed:\n{out}--- expected these lines in this order:\n{}",
            lines.join("\n")
        );
    }
}

/// Builds `tests/c/<name>.c` against libc and with `tempora_posix.h`, runs both and returns
/// their outputs.
fn on_libc_and_on_tempora(name: &str) -> (String, String) {
    let libc = run(&build(name, "-libc", Link::None, &[]), &[]);
    let tempora = run(
        &build(name, "-tempora", Link::Shared, &["USE_TEMPORA"]),
        &[],
    );
    (libc, tempora)
}

/// `name` prints the same lines on libc and on tempora, and on libc the ones expected.
fn prints_the_same(name: &str) {
    let (libc, tempora) = on_libc_and_on_tempora(name);
    let lines = SIGNAL_PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a signal program")
        .1;
    assert!(has_lines(&libc, lines), "{name} on libc printed:\n{libc}");
    assert_eq!(
        libc, tempora,
        "\n--- {name} on libc\n{libc}--- on tempora_posix.h\n{tempora}"
    );
}

#[test]
fn signal_handler_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_handler");
}

#[test]
fn signal_waitinfo_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_waitinfo");
}

#[test]
fn signal_signalfd_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_signalfd");
}

#[test]
fn signal_blocked_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_blocked");
}

/// A signal taken without a handler running (its default action, or `SIG_IGN` while blocked)
/// settles its overrun as a delivery does, and an expiry as the signal is taken is its
/// overrun (the `timers::sigdeliver` rules).
#[test]
fn signal_consumed_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_consumed");
}

#[test]
fn signal_ignored_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_ignored");
}

/// The one documented difference of the programs (the `timers` module's table: user space
/// cannot retract a queued signal): a signal pending when its timer is re-armed, disarmed or
/// deleted is discarded by the kernel when taken, and delivered by tempora. Every other line
/// is the same.
#[test]
fn signal_delete_settime_differs_only_in_the_stale_signal() {
    let (libc, tempora) = on_libc_and_on_tempora("sig_delete_settime");
    let lines = SIGNAL_PROGRAMS
        .iter()
        .find(|(n, _)| *n == "sig_delete_settime")
        .expect("a signal program")
        .1;
    assert!(has_lines(&libc, lines), "on libc:\n{libc}");
    let rtmin = libc::SIGRTMIN();
    let expected = libc
        .replace(
            "sigtimedwait 0: -1 EAGAIN",
            &format!("sigtimedwait 0: {rtmin}"),
        )
        .replace("unblocked: 0 handler calls", "unblocked: 1 handler calls");
    assert_eq!(
        tempora, expected,
        "\n--- libc\n{libc}--- tempora_posix.h\n{tempora}"
    );
}

/// Timers on the CPU-time clocks are the C library's through `tempora_posix.h`, as through the
/// drop-in (`tempora-posix/tests/dropin.rs`), beside tempora's own.
#[test]
fn signal_cpu_clocks_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_cpu_clocks");
}

#[test]
fn signal_null_sigevent_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_null_sigevent");
}

#[test]
fn signal_thread_id_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_thread_id");
}

#[test]
fn signal_sigwait_main_prints_the_same_on_libc_and_on_tempora() {
    prints_the_same("sig_sigwait_main");
}

/// The one that differs on purpose: the kernel refuses signal timers past
/// `RLIMIT_SIGPENDING`, tempora holds a million and delivers their signals.
#[test]
fn signal_million_is_refused_on_libc_and_held_on_tempora() {
    let (libc, tempora) = on_libc_and_on_tempora("sig_million");
    assert_eq!(
        libc, "kernel refuses past RLIMIT_SIGPENDING: EAGAIN\n",
        "on libc"
    );
    let want: String = SIG_MILLION_ON_TEMPORA
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(tempora, want, "on tempora_posix.h");
}

/// `tempora_event_wait` interrupted by a signal handler fails with `EINTR`, as `sigtimedwait`,
/// with or without `SA_RESTART` and a timeout; a loop whose handler sets a quit flag leaves a
/// wait with no timeout. (Before, that wait never returned: the program's alarm ended it.)
#[test]
fn a_signal_handler_interrupts_an_event_wait() {
    let out = run(&build("interrupt", "", Link::Shared, &[]), &[]);
    assert!(out.contains("interrupt ok"), "{out}");
}

/// `handler_rearm.c`: timer calls from a signal handler that interrupted the same thread
/// inside a timer call. A handler re-arming a timer while the main loop reads it completes
/// every time, on libc and through `tempora_posix.h` (before tempora's handler rules, the
/// first signal that landed inside `timer_gettime` spun for ever); a handler's calls while the
/// main loop re-arms complete or fail at once with `EDEADLK`, never hang.
/// Its argument sizes it (20 000 signals here, a second or two; the soak runs 300 000).
#[test]
fn timer_calls_from_a_signal_handler_complete_on_libc_and_on_tempora() {
    let n = ["20000"];
    let libc = run(&build("handler_rearm", "-libc", Link::None, &[]), &n);
    let tempora = run(
        &build("handler_rearm", "-tempora", Link::Shared, &["USE_TEMPORA"]),
        &n,
    );
    let want = "re-arms from the handler while main reads: all completed\n\
                handler calls while main re-arms: none hung, completed some: yes, other errors: 0\n";
    assert_eq!(libc, want, "on libc");
    assert_eq!(tempora, want, "on tempora_posix.h");
}

/// `fork.c`: children of a program whose timers are busy see none of the parent's timers
/// (EINVAL) and their own timers fire, on libc and through `tempora_posix.h` alike; no
/// child is stuck. `FORKS` in the environment sizes it (100 here, a few seconds).
///
/// Not under AddressSanitizer: its `pthread_create` interceptor is not fork-safe when the
/// parent starts or ends threads at the fork (a child's first thread then never starts: 9 of
/// 200 children with a plain C parent churning threads and no tempora, 0 of 200 without
/// ASan), and tempora's parent starts spare drivers while its callbacks are busy.
#[test]
fn fork_children_start_as_the_kernels_on_libc_and_on_tempora() {
    if std::env::var("TEMPORA_C_SANITIZE").is_ok() {
        eprintln!("fork.c is not run under a sanitizer (see this test's doc)");
        return;
    }
    let (libc, tempora) = on_libc_and_on_tempora("fork");
    let want = "child: timer_gettime of the parent's timer: EINVAL\n\
                child: timer_delete of the parent's timer: EINVAL\n\
                child: its own timer fired: yes\n\
                children: all passed, failed 0, stuck 0\n\
                parent: its timers fired meanwhile: yes; its timer still armed: yes\n";
    assert_eq!(libc, want, "on libc");
    assert_eq!(tempora, want, "on tempora_posix.h");
}

/// `abi.c`, built against `tempora.h` and against a copy whose `struct tempora_config` has a
/// field appended and whose minor version is one more, as a later version's header would:
/// both run against the same library, each read and written only as far as its struct goes.
#[test]
fn a_config_struct_from_a_newer_header_is_read_only_as_far_as_its_size() {
    let today = run(&build("abi", "", Link::Shared, &[]), &[]);
    let size = std::mem::size_of::<usize>() + 32;
    assert!(
        today.contains(&format!(
            "abi ok: header 100, library 100, sizeof(struct tempora_config) {size}"
        )),
        "{today}"
    );

    let header = std::fs::read_to_string(prefix().join("include/tempora.h")).unwrap();
    let end = "    uint64_t max_deferral_ns;\n} tempora_config;";
    let minor = "#define TEMPORA_VERSION_MINOR 1\n";
    assert!(
        header.contains(end) && header.contains(minor),
        "the header's struct changed"
    );
    let later = header
        .replace(
            end,
            "    uint64_t max_deferral_ns;\n    uint64_t later;\n} tempora_config;",
        )
        .replace(minor, "#define TEMPORA_VERSION_MINOR 2\n");
    let dir = prefix().join("later-header");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tempora.h"), later).unwrap();
    let exe = prefix().join("tests/abi-later");
    let lib = prefix().join("lib");
    let out = compiler(false)
        .arg("-I")
        .arg(&dir)
        .arg("-I")
        .arg(here().join("tests/c"))
        .arg("-DTEMPORA_LATER_FIELD")
        .arg(here().join("tests/c/abi.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-ltempora")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling abi.c with a later header:\n{}",
        text(&out)
    );
    let newer = run(&exe, &[]);
    assert!(
        newer.contains(&format!(
            "abi ok: header 200, library 100, sizeof(struct tempora_config) {}",
            size + 8
        )),
        "{newer}"
    );
}

/// `default_owner_free.c`: `tempora_owner_free` on the default owner that `tempora_posix.h`
/// uses fails with `EINVAL` and a message, and the POSIX calls go on working after it.
#[test]
fn freeing_the_default_owner_is_refused() {
    let out = run(&build("default_owner_free", "", Link::Shared, &[]), &[]);
    assert!(out.contains("default owner free ok"), "{out}");
}

/// `tempora_posix.h`'s `timer_t` is the C library's pointer: the everyday idioms (`NULL`,
/// `!= NULL`, `%p`, `(int)(intptr_t)t` against `si_timerid`) compile warning-free at
/// `-std=c17 -Wall -Werror` with GCC 14's errors for pointer/integer mixes, from C and C++.
#[test]
fn tempora_posix_h_timer_t_takes_the_pointer_idioms() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-suite-idioms");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("idioms.c");
    std::fs::write(
        &src,
        "#ifndef _GNU_SOURCE\n\
         #define _GNU_SOURCE\n\
         #endif\n\
         #include <stdint.h>\n\
         #include <stdio.h>\n\
         #include <tempora_posix.h>\n\
         int main(void)\n\
         {\n\
         \x20   timer_t t = NULL;\n\
         \x20   if (timer_create(CLOCK_MONOTONIC, NULL, &t) != 0 || t == NULL)\n\
         \x20       return 1;\n\
         \x20   if (t != NULL)\n\
         \x20       printf(\"%p %d\\n\", (void *)t, (int)(intptr_t)t);\n\
         \x20   return timer_delete(t);\n\
         }\n",
    )
    .unwrap();
    // C++ refuses those mixes by itself.
    for (cpp, flags) in [
        (
            false,
            &[
                "-std=c17",
                "-Werror=int-conversion",
                "-Werror=incompatible-pointer-types",
            ][..],
        ),
        (true, &["-x", "c++", "-std=c++17"][..]),
    ] {
        let out = compiler(cpp)
            .arg("-fsyntax-only")
            .args(flags)
            .arg("-I")
            .arg(prefix().join("include"))
            .arg(&src)
            .output()
            .expect("run the C compiler");
        assert!(out.status.success(), "{flags:?}: {}", text(&out));
    }
}

/// `memory.c`: `timer_create` under `RLIMIT_AS` fails with `EAGAIN` (tempora_last_error says
/// why) instead of aborting the program, and the service goes on working.
///
/// Not under AddressSanitizer: its allocator takes its heap from address space it reserved at
/// start, so `RLIMIT_AS` does not bound it (every create succeeded), and it aborts on a failed
/// allocation unless told otherwise.
#[test]
fn timer_create_under_rlimit_as_is_eagain_not_an_abort() {
    if std::env::var("TEMPORA_C_SANITIZE").is_ok() {
        eprintln!("memory.c is not run under a sanitizer (see this test's doc)");
        return;
    }
    let out = output(&build("memory", "", Link::Shared, &[]), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("memory ok"),
        "{}",
        text(&out)
    );
}
