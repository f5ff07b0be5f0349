//! `tempora checkpoint demo` and `inspect`, run as a user would.
use std::process::Command;

fn tempora(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(args)
        .output()
        .expect("run tempora")
}

#[test]
fn demo_restores_in_a_second_process_and_inspect_reads_the_file() {
    let dir = std::env::temp_dir().join(format!("tempora-cli-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("demo.ckpt");
    let out = tempora(&["checkpoint", "demo", "--out", file.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("listings match, next firings match"),
        "{stdout}"
    );
    assert!(!stdout.contains('≠'), "{stdout}");

    let out = tempora(&["checkpoint", "inspect", file.to_str().unwrap()]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("9 timers") && table.contains("heartbeat") && table.contains("1000"));

    // Bad files: exit 1, one line on stderr, no panic.
    let good = std::fs::read(&file).unwrap();
    let bad = dir.join("bad.ckpt");
    for (what, bytes) in [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("flipped", {
            let mut b = good.clone();
            b[30] ^= 4;
            b
        }),
        (
            "not a snapshot",
            b"hello world, this is not a snapshot at all".to_vec(),
        ),
    ] {
        std::fs::write(&bad, bytes).unwrap();
        let out = tempora(&["checkpoint", "inspect", bad.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(
            err.contains("corrupt snapshot") && !err.contains("panicked"),
            "{what}: {err}"
        );
    }
    let out = tempora(&[
        "checkpoint",
        "inspect",
        dir.join("missing").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/dev/zero` never ends: inspect must stop after the header, not read until memory runs out
/// (the address space is limited to 1 GB so that a reader without a bound fails here rather
/// than exhausting the machine).
#[test]
fn inspect_dev_zero_fails_fast_with_one_line() {
    let t = std::time::Instant::now();
    let out = Command::new("sh")
        .args([
            "-c",
            "ulimit -v 1000000 && exec \"$0\" checkpoint inspect /dev/zero",
            env!("CARGO_BIN_EXE_tempora"),
        ])
        .output()
        .expect("run tempora under sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("corrupt snapshot") && err.contains("magic"),
        "{err}"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}
