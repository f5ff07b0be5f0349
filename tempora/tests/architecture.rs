//! ARCHITECTURE.md held against the code: the import graph of the library's files runs only
//! down the layers and has no circle (test code included), and the file lists the map draws
//! name exactly the files that exist. `.ci/lint.sh` runs this file on its own, so an upward
//! import or a circle fails the lint step.
//!
//! Imports are read with `syn` from every `.rs` file under `src/`: each path that starts at
//! `crate`, `super` or `self` (or at a child module's name) in a `use` item, an expression, a
//! type or a pattern is resolved to the file of the deepest module it names. An item
//! re-exported by a parent (`pub use` in a `mod.rs` or `lib.rs`) therefore counts as an arrow
//! to that parent, which is what makes a child that imports through its parent a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::ext::IdentExt;
use syn::visit::Visit;

/// A module path (`["timers", "base"]`) and the file that holds it.
struct Files {
    /// The crate's `src/`.
    src: PathBuf,
    by_module: BTreeMap<Vec<String>, PathBuf>,
    /// Per module file, the names its `use` items bring into scope and what they name: a
    /// path through a module that only re-exports a name leads on to where it is defined.
    uses: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn any_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            any_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

impl Files {
    fn read(src: &Path) -> Files {
        let mut all = Vec::new();
        rust_files(src, &mut all);
        let by_module = all
            .into_iter()
            .map(|p| {
                let rel = p.strip_prefix(src).unwrap().to_path_buf();
                (module_of(&rel), rel)
            })
            .collect();
        let mut files = Files {
            src: src.to_path_buf(),
            by_module,
            uses: BTreeMap::new(),
        };
        let modules: Vec<_> = files.by_module.keys().cloned().collect();
        for module in modules {
            let mut refs = Refs::new(&files, module.clone());
            refs.visit_file(&files.parse(&module));
            let named = refs.named;
            files.uses.insert(module, named);
        }
        files
    }

    fn parse(&self, module: &[String]) -> syn::File {
        let rel = &self.by_module[module];
        let text = std::fs::read_to_string(self.src.join(rel)).unwrap();
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
    }

    /// Follows re-exports: a path `m::name::..` where module `m` names `name` by a `use`
    /// goes on from what that `use` names.
    fn follow(&self, mut abs: Vec<String>) -> Vec<String> {
        for _ in 0..16 {
            let Some(n) = (0..abs.len())
                .rev()
                .find(|&n| self.by_module.contains_key(&abs[..n]))
            else {
                break;
            };
            let Some(target) = abs
                .get(n)
                .and_then(|name| self.uses.get(&abs[..n])?.get(name))
            else {
                break;
            };
            let mut next = target.clone();
            next.extend(abs[n + 1..].iter().cloned());
            abs = next;
        }
        abs
    }

    /// The file of the deepest module `abs` names.
    fn file_of(&self, abs: &[String]) -> Option<&PathBuf> {
        (0..=abs.len())
            .rev()
            .find_map(|n| self.by_module.get(&abs[..n]))
    }

    fn is_module(&self, abs: &[String]) -> bool {
        self.by_module.contains_key(abs)
    }
}

/// Collects the module paths a file refers to.
struct Refs<'a> {
    files: &'a Files,
    /// The module the visitor is in (the file's, plus inline `mod` blocks).
    here: Vec<String>,
    /// `here.len()` at the file's own level (deeper: inside an inline `mod`).
    depth: usize,
    out: BTreeSet<Vec<String>>,
    /// The names the file's top-level `use` items bring into scope (`Files::uses`).
    named: BTreeMap<String, Vec<String>>,
}

impl<'a> Refs<'a> {
    fn new(files: &'a Files, here: Vec<String>) -> Refs<'a> {
        Refs {
            files,
            depth: here.len(),
            here,
            out: BTreeSet::new(),
            named: BTreeMap::new(),
        }
    }

    /// Resolves a path's leading segments to an absolute module path, if it starts in the
    /// crate.
    fn resolve(&self, segs: &[String]) -> Option<Vec<String>> {
        let mut it = segs.iter().peekable();
        let mut base = match it.peek().map(|s| s.as_str()) {
            Some("crate") => {
                it.next();
                Vec::new()
            }
            Some("self") => {
                it.next();
                self.here.clone()
            }
            Some("super") => {
                let mut b = self.here.clone();
                while it.peek().map(|s| s.as_str()) == Some("super") {
                    it.next();
                    b.pop()?;
                }
                b
            }
            Some(first) if self.named.contains_key(first) => {
                // A name a `use` of this file brought in (`use super::report;` then
                // `report::table::text`).
                let named = self.named[first].clone();
                it.next();
                named
            }
            Some(first) => {
                // A child module named without `self::` (2018 paths in a `mod.rs`).
                let mut child = self.here.clone();
                child.push(first.to_string());
                if !self.files.is_module(&child) {
                    return None;
                }
                self.here.clone()
            }
            None => return None,
        };
        base.extend(it.cloned());
        Some(base)
    }

    /// Records what a top-level `use` brings into scope under `name`.
    fn name(&mut self, name: Option<String>, segs: &[String]) {
        if let (Some(name), Some(abs), true) =
            (name, self.resolve(segs), self.here.len() == self.depth)
        {
            self.named.insert(name, abs);
        }
    }

    fn add(&mut self, segs: Vec<String>) {
        if let Some(abs) = self.resolve(&segs) {
            self.out.insert(abs);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.unraw().to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut segs = prefix.clone();
                let name = if n.ident == "self" {
                    prefix.last().cloned()
                } else {
                    segs.push(n.ident.unraw().to_string());
                    Some(n.ident.unraw().to_string())
                };
                self.name(name, &segs);
                self.add(segs);
            }
            syn::UseTree::Rename(r) => {
                let mut segs = prefix.clone();
                segs.push(r.ident.unraw().to_string());
                self.name(Some(r.rename.unraw().to_string()), &segs);
                self.add(segs);
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.here.push(m.ident.unraw().to_string());
            syn::visit::visit_item_mod(self, m);
            self.here.pop();
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            self.add(
                p.segments
                    .iter()
                    .map(|s| s.ident.unraw().to_string())
                    .collect(),
            );
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro calls (`assert!(matches!(x, super::Y))`) are tokens: read the
        // ones that parse as expressions.
        if let Ok(e) = m.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            e.iter().for_each(|e| self.visit_expr(e));
        }
    }
}

/// The import graph of the library: file → files it refers to (itself excluded), paths
/// relative to its `src/`.
fn graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    graph_of(&src_dir())
}

/// The import graph of the crate whose sources are under `src`.
fn graph_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = Files::read(src);
    let mut g = BTreeMap::new();
    for (module, rel) in &files.by_module {
        let mut refs = Refs::new(&files, module.clone());
        // The file's own `use` names, known before its first line is read (a path may name
        // one before the `use` that brings it in).
        refs.named = files.uses[module].clone();
        refs.visit_file(&files.parse(module));
        let to: BTreeSet<PathBuf> = refs
            .out
            .iter()
            .filter_map(|abs| files.file_of(&files.follow(abs.clone())))
            .filter(|f| *f != rel)
            .cloned()
            .collect();
        g.insert(rel.clone(), to);
    }
    g
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        g: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut c = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on.remove(w);
                    c.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if c.len() > 1 {
                    c.sort();
                    self.out.push(c);
                }
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// Circles the library still has, each a known debt listed so that no new one joins it
/// (the list can only shrink).
const KNOWN: &[&[&str]] = &[];

#[test]
fn no_import_circle_among_the_librarys_files() {
    let g = graph();
    let found: Vec<Vec<PathBuf>> = circles(&g)
        .into_iter()
        .filter(|c| {
            !KNOWN
                .iter()
                .any(|k| k.iter().map(PathBuf::from).collect::<Vec<_>>() == *c)
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles:\n{}",
        describe(&g, &found)
    );
}

/// The library's layers, bottom-up, as ARCHITECTURE.md draws them: each names the top-level
/// modules (a folder, or a file under `src/`) it holds. A file imports only files of its own
/// layer or of layers below it, test code included.
const LAYERS: &[&[&str]] = &[
    &["error.rs", "alloc.rs", "sync", "wheel", "testing.rs"],
    &["clock.rs", "instant.rs", "registry"],
    &["stats"],
    &["timers"],
    &["checkpoint"],
    &["time"],
    &["compat"],
    &["lib.rs", "bench_door.rs"],
];

/// The layer of a file of the library (a path relative to `src/`).
fn layer_of(file: &Path) -> Option<usize> {
    let top = file.components().next()?.as_os_str().to_string_lossy();
    let top = top.trim_end_matches(".rs");
    LAYERS
        .iter()
        .position(|l| l.iter().any(|m| m.trim_end_matches(".rs") == top))
}

/// The arrows of `g` that run from a lower layer to a higher one, one a line.
fn upward(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let mut up = Vec::new();
    for (from, tos) in g {
        let below = layer_of(from).unwrap_or_else(|| panic!("{} is in no layer", from.display()));
        for to in tos {
            let above = layer_of(to).unwrap_or_else(|| panic!("{} is in no layer", to.display()));
            if above > below {
                up.push(format!("{} -> {}", from.display(), to.display()));
            }
        }
    }
    up
}

#[test]
fn no_file_imports_a_layer_above_its_own() {
    let up = upward(&graph());
    assert!(
        up.is_empty(),
        "imports that run up the layers (ARCHITECTURE.md, \"Layers\"):\n{}",
        up.join("\n")
    );
}

/// The rooms of `timers/`, bottom-up, as its module doc and ARCHITECTURE.md list them: a file
/// of a room imports only files of its own room or of rooms below it, test code included,
/// so no two rooms import each other.
const TIMERS_ROOMS: &[&[&str]] = &[
    &["object"],
    &["shared"],
    &["signals"],
    &["firing"],
    &["calls"],
    &[
        "service.rs",
        "inspect",
        "builder.rs",
        "mod.rs",
        "testing.rs",
        "tests",
    ],
];

/// The room of a file under `timers/` (a path relative to `src/`).
fn room_of(file: &Path) -> Option<usize> {
    let mut parts = file.components().map(|c| c.as_os_str().to_string_lossy());
    if parts.next()? != "timers" {
        return None;
    }
    let top = parts.next()?;
    let room = TIMERS_ROOMS.iter().position(|r| r.contains(&&*top));
    assert!(
        room.is_some(),
        "{} is in no room of timers/",
        file.display()
    );
    room
}

#[test]
fn no_room_of_timers_imports_a_room_above_its_own() {
    let mut up = Vec::new();
    for (from, tos) in graph() {
        let Some(below) = room_of(&from) else {
            continue;
        };
        for to in tos {
            if room_of(&to).is_some_and(|above| above > below) {
                up.push(format!("{} -> {}", from.display(), to.display()));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports that run up the rooms of timers/ (its module doc):\n{}",
        up.join("\n")
    );
}

/// The direction check sees an upward import in test code: a test module of a lower layer
/// that names a type of a higher one fails it.
#[test]
fn an_upward_import_in_test_code_fails_the_direction_check() {
    let dir = std::env::temp_dir().join(format!("tempora-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("stats")).unwrap();
    std::fs::create_dir_all(dir.join("timers")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod stats;\nmod timers;\n").unwrap();
    std::fs::write(dir.join("timers/mod.rs"), "pub struct Timers;\n").unwrap();
    std::fs::write(
        dir.join("stats/mod.rs"),
        "#[cfg(test)]\nmod tests {\n    fn f(_: crate::timers::Timers) {}\n}\n",
    )
    .unwrap();
    let up = upward(&graph_of(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(up, ["stats/mod.rs -> timers/mod.rs"]);
}

/// The workspace's other crates (the C ABI, the CLI, the benchmark harness, the kernel peer)
/// have no import circle either.
#[test]
fn no_import_circle_in_the_other_crates() {
    let mut text = Vec::new();
    for e in std::fs::read_dir(repo()).unwrap() {
        let src = e.unwrap().path().join("src");
        let root = src.join("lib.rs").exists() || src.join("main.rs").exists();
        if root && src != src_dir() {
            let g = graph_of(&src);
            let found = circles(&g);
            if !found.is_empty() {
                text.push(format!("{}:\n{}", src.display(), describe(&g, &found)));
            }
        }
    }
    assert!(text.is_empty(), "import circles:\n{}", text.join("\n"));
}

/// The arrows of each circle, one circle a line.
fn describe(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>, found: &[Vec<PathBuf>]) -> String {
    found
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    g[a].iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{} -> {}", a.display(), b.display()))
                })
                .collect();
            edges.join(", ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The checker sees what it must: a child importing through its parent's re-export is an
/// arrow to the parent, and a path inside a test module counts.
#[test]
fn the_import_reader_sees_arrows_through_parents_and_tests() {
    let g = graph();
    let arrows = |from: &str| g[Path::new(from)].clone();
    assert!(arrows("timers/mod.rs").contains(Path::new("timers/calls/owner.rs")));
    assert!(arrows("timers/firing/poll.rs").contains(Path::new("timers/shared/mod.rs")));
    assert!(arrows("timers/shared/base.rs").contains(Path::new("timers/object/mod.rs")));
    // A raw identifier (`suites::r#async`) and a path that starts at a name a `use` brought in
    // (`use super::report;` then `report::table::text`) are arrows too.
    let bench = graph_of(&repo().join("tempora-bench/src"));
    let runner = &bench[Path::new("runner/mod.rs")];
    assert!(
        runner.contains(Path::new("suites/async/mod.rs")),
        "{runner:?}"
    );
    assert!(runner.contains(Path::new("report/table.rs")), "{runner:?}");
}

/// The repository's root (the workspace).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The part of ARCHITECTURE.md between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn section(name: &str) -> String {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let i = text
        .find(&begin)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {begin}"));
    let j = text[i..]
        .find(&end)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {end}"));
    text[i + begin.len()..i + j].to_string()
}

/// Every source file of the workspace's crates (`*/src/**`), relative to the repository.
fn workspace_sources() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(repo()).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.join("lib.rs").exists() || src.join("main.rs").exists() {
            let mut files = Vec::new();
            any_files(&src, &mut files);
            files.retain(|p| {
                p.extension()
                    .is_some_and(|x| x == "rs" || x == "c" || x == "h")
            });
            for f in files {
                let rel = f.strip_prefix(repo()).unwrap();
                out.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// ARCHITECTURE.md's table of files names every source file of the workspace, each by name,
/// and nothing that does not exist.
#[test]
fn the_maps_file_table_names_every_source_file() {
    let rows: Vec<String> = section("files")
        .lines()
        .filter_map(|l| {
            let cell = l.strip_prefix("| `")?;
            Some(cell[..cell.find('`')?].to_string())
        })
        .collect();
    assert!(!rows.is_empty(), "the files table has no rows");
    let files = workspace_sources();
    // A folder row covers a folder of data, never a source file: every file is named.
    let covered = |f: &String| rows.iter().any(|r| r == f);
    let missing: Vec<&String> = files.iter().filter(|f| !covered(f)).collect();
    let stale: Vec<&String> = rows
        .iter()
        .filter(|r| {
            !files
                .iter()
                .any(|f| *f == **r || (r.ends_with('/') && f.starts_with(r.as_str())))
        })
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's files table: missing {missing:?}, naming what does not exist {stale:?}"
    );
}

/// Every test or loom model ARCHITECTURE.md names (a backticked `snake_case` name with at
/// least three words, in its invariants and its table of checks) is a function of the
/// workspace.
#[test]
fn every_test_the_map_names_exists() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let mut sources = String::new();
    for f in workspace_sources() {
        sources.push_str(&std::fs::read_to_string(repo().join(&f)).unwrap_or_default());
    }
    for dir in [
        "tempora/tests",
        "tempora-cli/tests",
        "tempora-capi/tests",
        "tempora-bench/tests",
    ] {
        let mut files = Vec::new();
        if repo().join(dir).is_dir() {
            rust_files(&repo().join(dir), &mut files);
        }
        for f in files {
            sources.push_str(&std::fs::read_to_string(f).unwrap());
        }
    }
    let names: BTreeSet<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.split('_').count() >= 3
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(names.len() > 10, "found only {names:?}");
    let gone: Vec<&&str> = names
        .iter()
        .filter(|n| !sources.contains(&format!("fn {n}(")))
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names tests that do not exist: {gone:?}"
    );
}

/// The files table lists each folder's files bottom-up: a file imports only files of its
/// folder listed above it.
#[test]
fn the_maps_file_table_is_bottom_up() {
    let rows: Vec<PathBuf> = section("files")
        .lines()
        .filter_map(|l| {
            let cell = l.strip_prefix("| `tempora/src/")?;
            Some(PathBuf::from(&cell[..cell.find('`')?]))
        })
        .collect();
    let g = graph();
    let mut wrong = Vec::new();
    for (k, row) in rows.iter().enumerate() {
        for to in g.get(row).into_iter().flatten() {
            let below = rows.iter().position(|r| r == to);
            let same_folder = to.parent() == row.parent();
            let known = KNOWN.iter().any(|c| {
                let has = |p: &PathBuf| c.iter().any(|f| Path::new(f) == p);
                has(row) && has(to)
            });
            if same_folder && !known && below.is_some_and(|b| b > k) {
                wrong.push(format!(
                    "{} imports {}, listed below it",
                    row.display(),
                    to.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every file of the repository outside `target*` and hidden folders.
fn repo_files() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(repo()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() && !name.starts_with('.') && !name.starts_with("target") {
            any_files(&p, &mut all);
        }
    }
    all
}

/// Every file or folder ARCHITECTURE.md cites in backticks (`timers/shared/base.rs`,
/// `checkpoint/tests/`) exists: some file of the repository's path ends with it.
#[test]
fn every_file_the_map_cites_exists() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let all = repo_files();
    let all: Vec<String> = all
        .iter()
        .map(|p| {
            p.strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let cited: BTreeSet<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            (s.ends_with(".rs") || (s.ends_with('/') && s.len() > 1))
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        })
        .collect();
    assert!(cited.len() > 20, "found only {cited:?}");
    let gone: Vec<&&str> = cited
        .iter()
        .filter(|c| {
            !all.iter()
                .any(|f| f.ends_with(**c) || f.contains(&format!("/{c}")) || f.starts_with(**c))
        })
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md cites files that do not exist: {gone:?}"
    );
}

/// Every anchor the map gives inside a file exists there: a file followed by an item
/// (`registry/owner.rs` `create_locked`: a `fn`, type or constant of that name) or by a
/// section title (`timers/mod.rs` "Precision": a heading or phrase of its docs).
#[test]
fn every_anchor_the_map_gives_exists() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let all = repo_files();
    let parts: Vec<&str> = text.split('`').collect();
    let mut checked = 0;
    let mut gone = Vec::new();
    for k in (1..parts.len()).step_by(2) {
        let file = parts[k];
        if !file.ends_with(".rs") {
            continue;
        }
        let after = parts.get(k + 1).copied().unwrap_or("");
        let anchor = if after == " " {
            parts
                .get(k + 2)
                .map(|item| item.rsplit("::").next().unwrap().to_string())
        } else {
            after
                .strip_prefix(" \"")
                .and_then(|t| t.split('"').next())
                .map(|t| format!("\"{t}"))
        };
        let Some(anchor) = anchor else { continue };
        let sources: Vec<String> = all
            .iter()
            .filter(|p| p.to_string_lossy().ends_with(&format!("/{file}")))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        let found = sources.iter().any(|src| match anchor.strip_prefix('"') {
            Some(title) => {
                let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
                words(src).contains(&words(title))
            }
            None => [
                "fn ", "struct ", "enum ", "const ", "type ", "trait ", "static ",
            ]
            .iter()
            .any(|kw| src.contains(&format!("{kw}{anchor}"))),
        });
        checked += 1;
        if !found {
            gone.push(format!("`{file}` {anchor}"));
        }
    }
    assert!(checked > 10, "found only {checked} anchors");
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's anchors that are not there: {gone:?}"
    );
}
