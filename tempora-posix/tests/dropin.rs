//! The drop-in, as a program built against the C library alone meets it: the C suite's POSIX
//! programs (`tempora-capi/tests/c`: `dropin.c`, `fork.c` and the `sig_*.c` ones, built
//! without `tempora_posix.h`), `tests/c/mixed.c` and `tests/c/waits.c` run on the C library, with
//! `LD_PRELOAD=libtempora-posix.so`, linked with `-ltempora-posix`, and linked with
//! `libtempora-posix.a`, and print the same lines each way (but where the kernel and tempora
//! differ on purpose, as the capi suite says). That the drop-in took effect is shown by
//! `mixed.c`, which reads the tag of each `timer_t`, and by `sig_million`, which the kernel
//! refuses and tempora serves.
//!
//! `TEMPORA_C_REPEAT=N` runs each program N times (the soak of the threaded ones).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tempora_ctest::{self as ctest, text};

/// The C suite's programs.
fn capi_c() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tempora-capi/tests/c")
}

/// A prefix with `lib/libtempora-posix.so` and `lib/libtempora-posix.a`, as an installer
/// lays them out, from what cargo built for this test run.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        // This test runs from <target>/<profile>/deps; the libraries were built beside it or
        // one level up.
        let exe = std::env::current_exe().expect("the test's path");
        let deps = exe.parent().expect("<target>/<profile>/deps");
        let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dropin-prefix");
        let lib = prefix.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        for (built, name) in [
            ("libtempora_posix.so", "libtempora-posix.so"),
            ("libtempora_posix.a", "libtempora-posix.a"),
        ] {
            let from = [deps.join(built), deps.parent().unwrap().join(built)]
                .into_iter()
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{built} is not built beside {}", deps.display()));
            // Copied and renamed into place: a program never runs a half-written library.
            let tmp = lib.join(format!("{name}.tmp"));
            std::fs::copy(&from, &tmp).unwrap();
            std::fs::rename(&tmp, lib.join(name)).unwrap();
        }
        prefix
    })
}

/// How a program meets the drop-in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// Not at all: the C library's timers.
    Libc,
    /// Built as for `Libc`, run with `LD_PRELOAD`.
    Preload,
    /// `-ltempora-posix`.
    Shared,
    /// `libtempora-posix.a` and what a Rust static library needs from the C library.
    Static,
}

const WAYS: [Way; 4] = [Way::Libc, Way::Preload, Way::Shared, Way::Static];

/// The system's C compiler with the flags the tests build with.
fn compiler() -> Command {
    let mut cmd = ctest::compiler(env!("TEMPORA_POSIX_TARGET"), false);
    cmd.arg("-pthread");
    cmd
}

/// Compiles `dir/<name>.c` for `way` (the same binary for `Libc` and `Preload`).
fn build(dir: &Path, name: &str, way: Way) -> PathBuf {
    let suffix = match way {
        Way::Libc | Way::Preload => "libc",
        Way::Shared => "so",
        Way::Static => "a",
    };
    let exe = prefix().join("tests").join(format!("{name}-{suffix}"));
    static BUILT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    // Built once per test run (several tests run one binary at once).
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.contains(&exe) {
        return exe;
    }
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let mut cmd = compiler();
    cmd.arg(dir.join(format!("{name}.c"))).arg("-o").arg(&exe);
    let lib = prefix().join("lib");
    match way {
        Way::Libc | Way::Preload => {}
        Way::Shared => ctest::link_shared(&mut cmd, &lib, "tempora-posix"),
        Way::Static => ctest::link_static(&mut cmd, &lib.join("libtempora-posix.a")),
    }
    ctest::compile(cmd, name);
    built.push(exe.clone());
    exe
}

/// Runs `exe` for `way` (`TEMPORA_C_REPEAT` times) and returns the last run's stdout; a
/// failing run fails the test with its output.
fn run(exe: &Path, way: Way) -> String {
    ctest::run(&format!("{} ({way:?})", exe.display()), || {
        let mut cmd = Command::new(exe);
        if way == Way::Preload {
            cmd.env("LD_PRELOAD", prefix().join("lib/libtempora-posix.so"));
        }
        cmd
    })
}

/// `name`'s output each way, `Libc` first.
fn outputs(dir: &Path, name: &str) -> Vec<(Way, String)> {
    WAYS.iter()
        .map(|&way| (way, run(&build(dir, name, way), way)))
        .collect()
}

/// `name` (a C suite program) prints on the drop-in, each way, what `expect` makes of its
/// output on the C library.
fn prints(name: &str, expect: impl Fn(&str) -> String) {
    let outs = outputs(&capi_c(), name);
    let libc = &outs[0].1;
    assert!(libc.lines().count() > 0, "{name} printed nothing on libc");
    let want = expect(libc);
    for (way, out) in &outs[1..] {
        assert_eq!(
            out, &want,
            "\n--- {name} on libc\n{libc}--- {name} on the drop-in ({way:?})\n{out}"
        );
    }
}

fn same(libc: &str) -> String {
    libc.to_owned()
}

#[test]
fn dropin_c_prints_the_same() {
    prints("dropin", same);
}

#[test]
fn fork_c_prints_the_same() {
    prints("fork", same);
}

#[test]
fn sig_handler_prints_the_same() {
    prints("sig_handler", same);
}

#[test]
fn sig_waitinfo_prints_the_same() {
    prints("sig_waitinfo", same);
}

#[test]
fn sig_signalfd_prints_the_same() {
    prints("sig_signalfd", same);
}

#[test]
fn sig_blocked_prints_the_same() {
    prints("sig_blocked", same);
}

#[test]
fn sig_consumed_prints_the_same() {
    prints("sig_consumed", same);
}

#[test]
fn sig_ignored_prints_the_same() {
    prints("sig_ignored", same);
}

#[test]
fn sig_cpu_clocks_prints_the_same() {
    prints("sig_cpu_clocks", same);
}

#[test]
fn sig_null_sigevent_prints_the_same() {
    prints("sig_null_sigevent", same);
}

#[test]
fn sig_thread_id_prints_the_same() {
    prints("sig_thread_id", same);
}

#[test]
fn sig_sigwait_main_prints_the_same() {
    prints("sig_sigwait_main", same);
}

/// The one difference of the programs `tempora_posix.h`'s table lists: a signal pending when
/// its timer is re-armed, disarmed or deleted is discarded by the kernel, delivered by
/// tempora.
#[test]
fn sig_delete_settime_differs_only_in_the_stale_signal() {
    let rtmin = libc::SIGRTMIN();
    prints("sig_delete_settime", |libc| {
        libc.replace(
            "sigtimedwait 0: -1 EAGAIN",
            &format!("sigtimedwait 0: {rtmin}"),
        )
        .replace("unblocked: 0 handler calls", "unblocked: 1 handler calls")
    });
}

/// The kernel refuses signal timers past `RLIMIT_SIGPENDING`; through the drop-in the same
/// binary holds a million and delivers their signals: the drop-in took effect.
#[test]
fn sig_million_is_refused_on_libc_and_held_on_the_dropin() {
    prints("sig_million", |libc| {
        assert_eq!(libc, "kernel refuses past RLIMIT_SIGPENDING: EAGAIN\n");
        [
            "created 1000000",
            "armed 1000000 for an hour",
            "armed 1000 of them for 10 ms",
            "received 1000 signals, each from one of the 1000, none twice",
            "sigtimedwait 20 ms: -1 EAGAIN",
            "deleted 1000000",
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect()
    });
}

/// CPU-time clocks and `CLOCK_TAI` stay the kernel's, `CLOCK_MONOTONIC` is tempora's, in one
/// program; both kinds work, and the last line (each `timer_t`'s tag) shows whose each is.
#[test]
fn kernel_only_clocks_stay_the_kernels_beside_tempora_timers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let whose = "whose: CPU-time kernel, CLOCK_MONOTONIC kernel, thread CPU-time kernel, CLOCK_TAI kernel\n";
    prints_from(&dir, "mixed", |libc| {
        assert!(libc.ends_with(whose), "{libc}");
        assert!(
            libc.contains("CPU-time timer deleted: gettime -1 EINVAL\n"),
            "{libc}"
        );
        libc.replace(
            whose,
            "whose: CPU-time kernel, CLOCK_MONOTONIC tempora, thread CPU-time kernel, CLOCK_TAI kernel\n",
        )
    });
}

/// `sigwait`, `sigwaitinfo` and `sigtimedwait` (`tests/c/waits.c`) return on the drop-in what
/// the C library's return (signals and their fields, `EAGAIN` no sooner than asked,
/// `EINVAL`, `EINTR`, a cancelled waiter), and an expiry a thread waits for wakes that thread
/// alone: the driver thread wakes for at most a third of them (on the drop-in before its own
/// waits, for every one). A waiter held in a 200 ms handler, or cancelled, stops no other
/// timer (the alarm's backstop, `wake.rs`).
#[test]
fn the_signal_waits_return_what_the_c_librarys_return_and_wake_the_waiter_alone() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    prints_from(&dir, "waits", str::to_owned);
}

/// A `-static` program: no C library's `timer_create` to find, so the kernel's timers are
/// made with the system calls, and a `SIGEV_THREAD` timer on a kernel-only clock is refused
/// (`EINVAL`); the rest of `mixed.c` runs as it does linked dynamically.
#[test]
fn a_fully_static_program_makes_the_kernels_timers_with_system_calls() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let libc = run(&build(&dir, "mixed", Way::Libc), Way::Libc);
    let exe = prefix().join("tests/mixed-static");
    let out = compiler()
        .args(["-static", "-DFULLY_STATIC"])
        .arg(dir.join("mixed.c"))
        .arg("-o")
        .arg(&exe)
        .arg(prefix().join("lib/libtempora-posix.a"))
        .args(["-lpthread", "-ldl", "-lm", "-lrt"])
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling mixed.c -static failed:\n{}",
        text(&out)
    );
    let want = libc
        .replace("thread CPU-time timer: its function ran\n", "")
        .replace(
            "created: CPU-time, CLOCK_MONOTONIC, thread CPU-time, CLOCK_TAI\n",
            "thread CPU-time SIGEV_THREAD timer, fully static: -1 EINVAL\n\
             created: CPU-time, CLOCK_MONOTONIC, thread CPU-time, CLOCK_TAI\n",
        )
        .replace(
            "CLOCK_MONOTONIC kernel, thread CPU-time kernel",
            "CLOCK_MONOTONIC tempora, thread CPU-time kernel",
        );
    assert_eq!(run(&exe, Way::Static), want, "\n--- on libc\n{libc}");
}

fn prints_from(dir: &Path, name: &str, expect: impl Fn(&str) -> String) {
    let outs = outputs(dir, name);
    let libc = &outs[0].1;
    let want = expect(libc);
    for (way, out) in &outs[1..] {
        assert_eq!(
            out, &want,
            "\n--- {name} on libc\n{libc}--- {name} on the drop-in ({way:?})\n{out}"
        );
    }
}

/// The shared library's dynamic symbols are the five timer calls and the three signal waits
/// (tempora's C ABI stays inside), and its soname is the name `-ltempora-posix` finds.
#[test]
fn the_shared_library_exports_the_eight_calls_alone() {
    let so = prefix().join("lib/libtempora-posix.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only", "--format=just-symbols"])
        .arg(&so)
        .output()
        .expect("run nm");
    assert!(out.status.success(), "{}", text(&out));
    let mut syms: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    syms.sort();
    assert_eq!(
        syms,
        [
            "sigtimedwait",
            "sigwait",
            "sigwaitinfo",
            "timer_create",
            "timer_delete",
            "timer_getoverrun",
            "timer_gettime",
            "timer_settime"
        ]
    );
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&so)
        .output()
        .expect("run readelf");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Library soname: [libtempora-posix.so]"),
        "{}",
        text(&out)
    );
}
