//! `tempora top --demo` driven in a real terminal: tmux runs it in a detached session, the
//! test reads the screen (`capture-pane`), presses keys (`send-keys`) and checks that the
//! demo's groups show, that the rates change from one refresh to the next, that a key sorts,
//! and that `q` quits with status 0 and leaves the alternate screen.
//!
//! tmux comes from the distribution (`.ci/toolchain.sh` installs it). Without it the test says
//! so and passes, unless `TEMPORA_REQUIRE_TMUX=1` (CI sets it).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> Output {
    Command::new("tmux").args(args).output().expect("tmux runs")
}

fn screen(session: &str) -> String {
    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
}

/// Waits (up to 30 s) until the screen satisfies `ok`; the screen.
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

/// The `(all)` row of a screen.
fn all_row(s: &str) -> String {
    s.lines()
        .find(|l| l.contains("(all)"))
        .unwrap_or_default()
        .to_owned()
}

struct Session(&'static str);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", self.0]);
    }
}

#[test]
fn top_demo_shows_groups_and_changing_rates_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        let msg = "tmux not found (install Debian's `tmux`: .ci/toolchain.sh); `tempora top` \
                   was not driven in a terminal";
        if std::env::var("TEMPORA_REQUIRE_TMUX").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let name = "tempora-top-test";
    let _ = tmux(&["kill-session", "-t", name]);
    let bin = env!("CARGO_BIN_EXE_tempora");
    let cmd = format!("{bin} top --demo --interval-ms 300; echo TOP-EXITED $?; sleep 60");
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]);
    assert!(started.status.success(), "{started:?}");
    let _session = Session(name);

    let first = wait_for(name, "the demo's groups", |s| {
        [
            "web/", "api/", "static/", "batch/", "jobs/", "cron/", "slow/",
        ]
        .iter()
        .all(|g| s.contains(g))
            && s.contains("owner ")
    });
    // Rates change between refreshes (the clock in the title too, so compare the rates).
    let before = all_row(&first);
    wait_for(name, "the rates to change", |s| {
        let now = all_row(s);
        !now.is_empty() && now != before
    });
    // The refused creates of batch/jobs (capped at 150) show.
    wait_for(name, "refused creates in batch/jobs", |s| {
        // After the name: live, arms/s, fires/s, overruns/s, refused/s.
        s.lines().find(|l| l.contains("jobs/")).is_some_and(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            let at = cells.iter().position(|c| *c == "jobs/").unwrap_or(0);
            cells.get(at + 5).is_some_and(|v| *v != "0")
        })
    });
    // `4` sorts by fires/s (the fourth column), descending.
    tmux(&["send-keys", "-t", name, "4"]);
    wait_for(name, "the fires/s sort mark", |s| s.contains("fires/s ▼"));
    tmux(&["send-keys", "-t", name, "q"]);
    let last = wait_for(name, "top to exit", |s| s.contains("TOP-EXITED"));
    assert!(last.contains("TOP-EXITED 0"), "{last}");
    assert!(
        !last.contains("groups and owners"),
        "the alternate screen was left:\n{last}"
    );
}
