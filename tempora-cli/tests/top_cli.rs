//! `tempora top` without `--pid` or `--demo`: it says what it shows and what it needs, and
//! exits 2 without touching the terminal. (`top_tmux.rs` drives `top --demo` itself.)
use std::process::Command;

#[test]
fn top_without_demo_says_what_it_needs_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .arg("top")
        .output()
        .expect("run tempora top");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no screen drawn");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("tempora top: needs --pid PID or --demo."),
        "{stderr}"
    );
    assert!(stderr.contains("fires/s"), "what it shows: {stderr}");
    assert!(
        stderr.contains("tempora top --demo"),
        "how to run it: {stderr}"
    );
}
