//! The READMEs' code is code CI compiles and runs: each `examples/readme_*.rs` must appear
//! verbatim, as a ```rust block, in the crate's README (the first screen), so the two cannot
//! drift; and the repository's README must open with that first screen, word for word.

use std::path::{Path, PathBuf};

/// The examples the README shows, each a complete program of at most 25 lines.
const EXAMPLES: [&str; 2] = ["readme_blocking.rs", "readme_tokio.rs"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn readme_shows_each_example_verbatim() {
    let readme = read(&crate_dir().join("README.md"));
    for name in EXAMPLES {
        let code = read(&crate_dir().join("examples").join(name));
        assert!(
            code.lines().count() <= 25 && code.contains("fn main"),
            "examples/{name}: the README's programs are complete and at most 25 lines"
        );
        let block = format!("```rust\n{code}```\n");
        assert!(
            readme.contains(&block),
            "tempora/README.md does not show examples/{name} verbatim: copy the file's text \
             into its ```rust block"
        );
    }
}

#[test]
fn repository_readme_opens_with_the_crate_readme() {
    // The published package has no repository around it: nothing to compare there.
    let root = crate_dir().join("../README.md");
    if !crate_dir().join("../Cargo.toml").exists() || !root.exists() {
        return;
    }
    let first_screen = read(&crate_dir().join("README.md"));
    assert!(
        read(&root).starts_with(&first_screen),
        "README.md must begin with tempora/README.md's text, unchanged (the crate's README is \
         the first screen; the repository's adds its own sections after it)"
    );
}
