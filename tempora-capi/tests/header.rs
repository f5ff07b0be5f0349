//! `include/tempora.h` is what cbindgen makes of the crate's source today (`src/lib.rs` and the
//! modules it declares, read in the order of its `mod` lines): a changed signature, doc comment
//! or order fails here until the header is regenerated (`TEMPORA_BLESS=1 cargo test -p
//! tempora-capi --test header`) and committed with it. The header's opening comment holds
//! `src/conventions.md` in place of `@CONVENTIONS@` in cbindgen.toml's `header`.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let conventions =
        std::fs::read_to_string(dir.join("src/conventions.md")).expect("src/conventions.md");
    let header = config.header.take().expect("cbindgen.toml has a header");
    assert!(
        header.contains("@CONVENTIONS@"),
        "cbindgen.toml's header has @CONVENTIONS@"
    );
    config.header = Some(header.replace("@CONVENTIONS@", &comment(&conventions)));
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("include/tempora.h");
    if std::env::var_os("TEMPORA_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/tempora.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/tempora.h is not what cbindgen makes of src/: run \
         `TEMPORA_BLESS=1 cargo test -p tempora-capi --test header` and commit the header"
    );
}

/// `text` (markdown) as the lines of a C block comment: ` * ` before each, `# ` titles bare.
fn comment(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|l| {
            let l = l.strip_prefix("# ").unwrap_or(l);
            if l.is_empty() {
                " *".to_owned()
            } else {
                format!(" * {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
