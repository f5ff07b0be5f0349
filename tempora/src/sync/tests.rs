//! The lock order's tests: the table matches ARCHITECTURE.md, raw locks stay in `sync/`,
//! guards release and poison.

use super::*;

/// What no file outside `sync/` may name: the raw locks, which carry no rank.
const RAW_LOCKS: &[&str] = &[
    "std::sync::Mutex",
    "loom::sync::Mutex",
    "parking_lot::Mutex",
    "ByteLock",
    "StdMutex",
];

/// The raw locks `text` names, including `Mutex` inside a `std::sync::{..}` or
/// `loom::sync::{..}` import.
fn raw_locks_named(text: &str) -> Vec<String> {
    let mut found: Vec<String> = RAW_LOCKS
        .iter()
        .filter(|name| text.contains(*name))
        .map(|name| name.to_string())
        .collect();
    for prefix in ["std::sync::{", "loom::sync::{"] {
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + prefix.len()..];
            let list = &rest[..rest.find('}').unwrap_or(rest.len())];
            if list
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == "Mutex")
            {
                found.push(format!("{prefix}Mutex..}}"));
            }
        }
    }
    found
}

/// The part of a source file that is not test scaffolding: everything before its first
/// `#[cfg(...test...)]` attribute on a `mod` (the in-file test modules come last).
fn non_test_part(text: &str) -> &str {
    let lines: Vec<&str> = text.lines().collect();
    let mut offset = 0;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(") && t.contains("test") {
            let next = lines.get(i + 1).map_or("", |l| l.trim_start());
            if next.starts_with("mod ") {
                return &text[..offset];
            }
        }
        offset += line.len() + 1;
    }
    text
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every lock of the crate is held through this module's ranked types: no source file
/// but those of `sync/` names a raw lock. Exempt: test scaffolding, which may need a plain mutex
/// to collect what callbacks saw (files named `tests.rs`, `*_tests.rs` or `testing.rs`, the
/// in-file test modules at the end of a file, and the files of a `tests/` folder).
#[test]
fn only_sync_names_raw_locks() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let name = path.file_name().unwrap().to_string_lossy();
        let test_file = name == "tests.rs"
            || name.ends_with("_tests.rs")
            || rel.contains("/tests/")
            || name == "testing.rs";
        if rel.starts_with("sync/") || test_file {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let named = raw_locks_named(non_test_part(&text));
        if !named.is_empty() {
            offenders.push(format!("{rel}: {named:?}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "raw locks outside sync/ (hold them through sync::Locked, RankedLock or \
         RankedMutex): {offenders:#?}"
    );
}

/// `rank::TABLE` rendered as ARCHITECTURE.md's lock table.
fn rendered_table() -> String {
    let mut out = String::from("| rank | lock | where | held while taking |\n|---|---|---|---|\n");
    for l in rank::TABLE {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            l.rank, l.lock, l.at, l.held_while_taking
        ));
    }
    out
}

/// ARCHITECTURE.md's lock table is `rank::TABLE`, exactly (regenerate it from the
/// failure message).
#[test]
fn lock_table_matches_architecture_md() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let begin = "<!-- lock-table:begin -->\n";
    let end = "<!-- lock-table:end -->";
    let from = doc
        .find(begin)
        .expect("ARCHITECTURE.md has the begin marker")
        + begin.len();
    let to = from + doc[from..].find(end).expect("and the end marker after it");
    let want = rendered_table();
    assert!(
        doc[from..to] == want,
        "ARCHITECTURE.md's lock table differs from sync::rank::TABLE; it should read:\n\n\
         {begin}{want}{end}\n"
    );
}

/// The table lists the locks in rank order, and the ranks fit the check's mask.
#[test]
fn lock_table_is_in_rank_order() {
    assert!(rank::TABLE.windows(2).all(|w| w[0].rank <= w[1].rank));
    assert!(rank::TABLE.iter().all(|l| l.rank < 32));
}
/// A guard releases its lock when dropped, and poisons it when dropped by a panic.
#[test]
fn guards_release_and_poison() {
    let cell = Locked::<u32, { rank::TIMER }>::new(1);
    *cell.lock().unwrap() += 1;
    assert_eq!(cell.with(|v| *v), Ok(2));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut g = cell.lock().unwrap();
        *g += 1;
        panic!("inside");
    }));
    assert!(r.is_err());
    assert!(cell.is_poisoned());
    assert!(cell.lock().is_err());
    let m = RankedMutex::<u32, { rank::TOTALS }>::new(3);
    *m.lock_or_recover() += 1;
    assert_eq!(*m.lock().unwrap(), 4);
    assert_eq!(m.into_inner(), 4);
}

/// Threads alive at the same time hold different indices (`thread_index`), however many came
/// and went before them: sixteen threads past one barrier, each reading its own.
#[test]
fn live_threads_hold_different_indices() {
    for _ in 0..50 {
        let all_alive = std::sync::Barrier::new(16);
        let seen = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    all_alive.wait();
                    let i = super::thread_index();
                    seen.lock().unwrap().push(i);
                    // Held until every thread has read its own.
                    all_alive.wait();
                });
            }
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "indices shared by live threads: {seen:?}");
    }
}
