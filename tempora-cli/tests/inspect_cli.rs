//! `tempora ls PID`, `tempora stats PID` and `tempora top --pid PID` against other processes:
//! an unmodified C program (`tests/c/many_timers.c`, built against the C library alone) run
//! under the preloaded `libtempora-posix.so` with 50,000 timers of mixed kinds is listed
//! exactly, with its `timer_t` values, clocks, signals and states; another user is refused;
//! `top --pid` shows the process's counts in a terminal (tmux) and says when it ends.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

const N: usize = 50_000;

fn text(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `libtempora-posix.so` as cargo built it beside the `tempora` binary (the CLI's
/// dependency tempora-bench builds the drop-in's cdylib).
fn dropin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_tempora"));
    let dir = bin.parent().unwrap();
    [
        dir.join("deps/libtempora_posix.so"),
        dir.join("libtempora_posix.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libtempora_posix.so built beside the tempora binary")
}

/// How the program reaches tempora.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// Built against the C library alone, run with `LD_PRELOAD=libtempora-posix.so`.
    Preload,
    /// Built with `-DUSE_TEMPORA_H` against `tempora.h` and `libtempora.a`.
    Header,
}

/// `libtempora_capi.a` as cargo built it for this run (the newest in `deps/`: the
/// profile's own `libtempora_capi.a` is refreshed only by a build of that package).
fn capi_archive() -> PathBuf {
    let deps = Path::new(env!("CARGO_BIN_EXE_tempora"))
        .parent()
        .unwrap()
        .join("deps");
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("libtempora_capi-") && name.ends_with(".a")
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("libtempora_capi-*.a built for the CLI's dependencies")
}

/// `tests/c/many_timers.c`, compiled with the system's C compiler: against the C library
/// alone, or against `tempora.h`.
fn program(way: Way) -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/many_timers.c");
    let mut cc = Command::new("cc");
    cc.args(["-O1", "-Wall", "-Werror"]).arg(&src);
    let exe = match way {
        Way::Preload => tmp.join("many_timers"),
        Way::Header => {
            let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tempora-capi/include");
            cc.arg("-DUSE_TEMPORA_H")
                .arg("-I")
                .arg(include)
                .arg(capi_archive())
                .args(["-lgcc_s", "-lutil", "-lpthread", "-lm", "-ldl", "-lc"]);
            tmp.join("many_timers_h")
        }
    };
    let out = cc.arg("-lrt").arg("-o").arg(&exe).output().expect("run cc");
    assert!(
        out.status.success(),
        "compiling many_timers.c:\n{}",
        text(&out)
    );
    exe
}

/// What the program says it made: `timer_t` → (clock, kind, signo, armed).
type Made = BTreeMap<String, (String, String, i64, bool)>;

/// The program, running under the drop-in, its timers made; killed on drop.
struct Target {
    child: Child,
    _stdin: ChildStdin,
    made: Made,
}

impl Target {
    fn start(n: usize) -> Target {
        Target::start_as(n, Way::Preload)
    }

    fn start_as(n: usize, way: Way) -> Target {
        let mut cmd = Command::new(program(way));
        if way == Way::Preload {
            cmd.env("LD_PRELOAD", dropin());
        }
        let mut child = cmd
            .arg(n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the program");
        let stdin = child.stdin.take().unwrap();
        let mut made = Made::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if line == "ready" {
                break;
            }
            let f: Vec<&str> = line.split(' ').collect();
            made.insert(
                f[0].to_owned(),
                (
                    f[1].to_owned(),
                    f[2].to_owned(),
                    f[3].parse().unwrap(),
                    f[4] == "1",
                ),
            );
        }
        assert_eq!(made.len(), n, "the program made its timers");
        Target {
            child,
            _stdin: stdin,
            made,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tempora(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(args)
        .output()
        .expect("run tempora")
}

#[test]
fn ls_lists_exactly_the_dropins_timers_with_their_clocks_signals_and_states() {
    let target = Target::start(N);
    let pid = target.pid().to_string();
    let started = Instant::now();
    let out = tempora(&["ls", &pid, "--json"]);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    let mut listed = Made::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            v["image"].as_str().unwrap().contains("libtempora_posix"),
            "served by the drop-in's copy: {v}"
        );
        let kind = v["notify"].as_str().unwrap().to_owned();
        let armed = match v["state"].as_str().unwrap() {
            "armed" => true,
            "disarmed" => false,
            s => panic!("state {s}"),
        };
        let key = v["timer_t"]
            .as_str()
            .expect("the drop-in's timer_t")
            .to_owned();
        let signo = v["signo"].as_i64().unwrap();
        let clock = v["clock"].as_str().unwrap().to_owned();
        assert!(
            listed.insert(key, (clock, kind, signo, armed)).is_none(),
            "a timer listed twice"
        );
    }
    assert_eq!(listed.len(), N);
    assert_eq!(listed, target.made);
    eprintln!("tempora ls of {N} timers: {took:?}");

    // The human table says the same in columns, one line per timer under a header.
    let out = tempora(&["ls", &pid]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    let first = target.made.keys().next().unwrap();
    assert!(table.contains(first.as_str()), "{first} in the table");
    assert_eq!(
        table.lines().filter(|l| l.contains("0x74706f73")).count(),
        N,
        "one line per timer"
    );

    // The statistics, both forms.
    let out = tempora(&["stats", &pid]);
    assert!(out.status.success(), "{}", text(&out));
    let prom = String::from_utf8(out.stdout).unwrap();
    assert!(
        prom.lines()
            .any(|l| l.starts_with("tempora_timers_live{") && l.ends_with(&format!(" {N}"))),
        "{prom}"
    );
    let out = tempora(&["stats", &pid, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["services"][0]["stats"]["root"]["counts"]["live"],
        N as u64
    );
}

#[test]
fn ls_lists_a_tempora_h_programs_timers_by_their_ids() {
    let target = Target::start_as(N, Way::Header);
    let out = tempora(&["ls", &target.pid().to_string(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let mut listed = Made::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v.get("timer_t").is_none(), "no drop-in here: {v}");
        let armed = v["state"].as_str().unwrap() == "armed";
        let entry = (
            v["clock"].as_str().unwrap().to_owned(),
            v["notify"].as_str().unwrap().to_owned(),
            v["signo"].as_i64().unwrap(),
            armed,
        );
        assert!(listed.insert(v["id"].to_string(), entry).is_none());
    }
    assert_eq!(listed, target.made);
}

#[test]
fn another_user_is_refused_and_the_target_is_unaffected() {
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: switching to another uid needs root; the refusal was not tested");
        return;
    }
    let target = Target::start(100);
    let pid = target.pid().to_string();
    use std::os::unix::process::CommandExt;
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["ls", &pid])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run tempora as nobody");
    assert_eq!(out.status.code(), Some(77), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("permission denied"), "{err}");
    assert!(out.stdout.is_empty());
    // The owner still reads it all.
    let out = tempora(&["ls", &pid, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 100);
}

#[test]
fn a_process_without_tempora_is_explained() {
    let out = tempora(&["ls", &std::process::id().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no tempora endpoint"),
        "{}",
        text(&out)
    );
    let out = tempora(&["ls", "999999999"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

fn tmux(args: &[&str]) -> Output {
    Command::new("tmux").args(args).output().expect("tmux runs")
}

fn screen(session: &str) -> String {
    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
}

fn wait_for(session: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let s = screen(session);
        if ok(&s) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}; the screen:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Session(&'static str);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", self.0]);
    }
}

#[test]
fn top_pid_shows_the_processs_counts_and_says_when_it_ends() {
    if Command::new("tmux").arg("-V").output().is_err() {
        let msg = "tmux not found (install Debian's `tmux`: .ci/toolchain.sh); `tempora top \
                   --pid` was not driven in a terminal";
        if std::env::var("TEMPORA_REQUIRE_TMUX").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let mut target = Target::start(3000);
    let pid = target.pid();
    let name = "tempora-top-pid-test";
    let _ = tmux(&["kill-session", "-t", name]);
    let bin = env!("CARGO_BIN_EXE_tempora");
    let cmd = format!("{bin} top --pid {pid} --interval-ms 300; echo TOP-EXITED $?; sleep 60");
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "120",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(started.status.success(), "{started:?}");
    let _session = Session(name);
    let s = wait_for(name, "the process's view", |s| {
        s.contains(&format!("process {pid}")) && s.contains("(all)")
    });
    let all = s.lines().find(|l| l.contains("(all)")).unwrap();
    assert!(all.contains("3000"), "3000 live timers: {all}");
    // The process ends: the view says so and exits 0.
    target.child.kill().unwrap();
    target.child.wait().unwrap();
    let s = wait_for(name, "top's exit", |s| s.contains("TOP-EXITED"));
    assert!(s.contains("TOP-EXITED 0"), "{s}");
    assert!(s.contains(&format!("process {pid} ended")), "{s}");
}

/// Not a test of its own: with `TEMPORA_TEST_POLLED` set (`poll` or `idle`), this binary run
/// again is the target of the tests below: a service without driver threads with 1000
/// armed timers in group `polled`, which it polls every millisecond (`poll`) or never
/// (`idle`) until its stdin closes.
#[test]
fn polled_target() {
    let Ok(mode) = std::env::var("TEMPORA_TEST_POLLED") else {
        return;
    };
    use std::sync::atomic::{AtomicBool, Ordering};
    use tempora::{clock::ClockId, Notify, SetFlags, Timers};
    let t = Timers::builder().drivers(0).build().unwrap();
    let o = t.group("polled").unwrap().owner();
    for _ in 0..1000 {
        let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
        o.settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_secs(3600),
            Duration::ZERO,
        )
        .unwrap();
    }
    static DONE: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        DONE.store(true, Ordering::Release);
    });
    println!("ready");
    while !DONE.load(Ordering::Acquire) {
        if mode == "poll" {
            t.poll();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// This test binary run as [`polled_target`] in `mode`, once it is ready; killed on drop.
struct PolledTarget(Child);

impl PolledTarget {
    fn start(mode: &str) -> PolledTarget {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "polled_target",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TEMPORA_TEST_POLLED", mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run the target");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.is_ok_and(|l| l.ends_with("ready"))),
            "the target started"
        );
        PolledTarget(child)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for PolledTarget {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_service_without_drivers_answers_at_its_polls() {
    let target = PolledTarget::start("poll");
    let out = tempora(&["ls", &target.pid(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(lines.lines().count(), 1000);
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (v["group"].as_str(), v["state"].as_str()),
            (Some("polled"), Some("armed"))
        );
    }
    let out = tempora(&["ls", &target.pid()]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("# pid ") && table.contains("(0 drivers)"),
        "{table}"
    );
    let out = tempora(&["stats", &target.pid(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["services"][0]["drivers"], 0);
    assert_eq!(v["services"][0]["stats"]["root"]["counts"]["live"], 1000);
}

#[test]
fn a_service_without_drivers_that_does_not_poll_is_explained() {
    let target = PolledTarget::start("idle");
    for cmd in ["ls", "stats"] {
        let out = tempora(&[cmd, &target.pid(), "--timeout", "0.5"]);
        assert_eq!(out.status.code(), Some(75), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no driver thread (drivers(0))") && err.contains("Timers::poll"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}
