//! The man pages (`man/*.3`, installed by `install.sh`) are made from `include/tempora.h`: one
//! page per family of calls, each call's prototype and comment, the structs and function
//! types the family takes, and `tempora(3)` with the conventions of `src/conventions.md`. A
//! page that differs from what the header makes fails here until it is regenerated
//! (`TEMPORA_BLESS=1 cargo test -p tempora-capi --test man`) and committed; a call the header
//! gains fails until it is given a family in `FAMILIES`. Each page's `.\" names:` line lists
//! the calls whose names `install.sh` links to it (`man 3 tempora_timer_delete`).

use std::collections::BTreeMap;
use std::path::Path;

/// A page: its name, one line of what it is about, the header's calls and types on it.
struct Family {
    page: &'static str,
    about: &'static str,
    calls: &'static [&'static str],
    types: &'static [&'static str],
}

const FAMILIES: [Family; 7] = [
    Family {
        page: "tempora",
        about: "POSIX-style interval timers held by the million, in user space",
        calls: &["tempora_version", "tempora_last_error"],
        types: &[],
    },
    Family {
        page: "tempora_new",
        about: "start and stop a timer service, make and free its owners",
        calls: &[
            "tempora_config_init",
            "tempora_new",
            "tempora_free",
            "tempora_owner_new",
            "tempora_owner_free",
            "tempora_default_owner",
        ],
        types: &["tempora_config"],
    },
    Family {
        page: "tempora_timer_create",
        about: "create and delete a timer",
        calls: &["tempora_timer_create", "tempora_timer_delete"],
        types: &[
            "tempora_sigevent",
            "tempora_notify_fn",
            "tempora_callback_fn",
        ],
    },
    Family {
        page: "tempora_timer_settime",
        about: "arm, read and count the overruns of a timer",
        calls: &[
            "tempora_timer_settime",
            "tempora_timer_gettime",
            "tempora_timer_getoverrun",
        ],
        types: &[],
    },
    Family {
        page: "tempora_timer_set_precision",
        about: "when a timer may fire after its expiry",
        calls: &[
            "tempora_timer_set_precision",
            "tempora_timer_get_precision",
            "tempora_owner_set_default_slack",
        ],
        types: &[],
    },
    Family {
        page: "tempora_event_wait",
        about: "take timer events, and fire timers from the application's own loop",
        calls: &[
            "tempora_event_wait",
            "tempora_event_try",
            "tempora_owner_event_fd",
            "tempora_poll",
            "tempora_deadline_fd",
            "tempora_next_deadline",
            "tempora_next_timeout",
        ],
        types: &["tempora_event"],
    },
    Family {
        page: "tempora_owner_checkpoint",
        about: "write an owner's timers to a file and recreate them, exact-ID mode",
        calls: &[
            "tempora_owner_checkpoint",
            "tempora_owner_restore",
            "tempora_owner_restore_ids",
        ],
        types: &["tempora_resolver_fn"],
    },
];

/// A declaration of the header with the comment above it.
struct Item {
    doc: Vec<String>,
    code: String,
}

/// The header's commented declarations by name: functions, structs and typedefs.
fn items(header: &str) -> BTreeMap<String, Item> {
    let mut out = BTreeMap::new();
    let mut lines = header.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "/*" {
            continue;
        }
        let mut doc = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "*/" {
                break;
            }
            doc.push(l.trim().to_owned());
        }
        let mut code = String::new();
        let mut depth = 0i32;
        while let Some(l) = lines.next_if(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            // A struct's fields carry comments of their own: kept, for the field list.
            depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
            code.push_str(l);
            code.push('\n');
            if depth == 0 && l.trim_end().ends_with(';') {
                break;
            }
        }
        if let Some(name) = name_of(&code) {
            out.insert(name, Item { doc, code });
        }
    }
    out
}

/// The name a declaration declares: a function's, a typedef's last word or `(*name)`.
fn name_of(code: &str) -> Option<String> {
    let code = code.trim();
    let ident = |s: &str| {
        let s: String = s
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        s.chars().rev().collect::<String>()
    };
    if let Some(rest) = code.strip_prefix("typedef") {
        if let Some(at) = rest.find("(*") {
            let name = &rest[at + 2..];
            return Some(name[..name.find(')')?].to_owned());
        }
        return Some(ident(rest.trim_end_matches(';')));
    }
    if code.starts_with("#define") {
        return None;
    }
    Some(ident(&code[..code.find('(')?]))
}

/// Text of the header's comments, or of conventions.md, as roff: `code` bold, a `# Title`
/// line italic, blank lines paragraph breaks.
fn roff(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        let l = l.trim();
        if l.is_empty() {
            out.push_str(".PP\n");
            continue;
        }
        if let Some(title) = l.strip_prefix("# ") {
            out.push_str(&format!(".PP\n\\fI{title}:\\fR\n"));
            continue;
        }
        let mut text = String::new();
        for (i, part) in l.replace('\\', "\\e").split('`').enumerate() {
            if i % 2 == 1 {
                text.push_str(&format!("\\fB{part}\\fR"));
            } else {
                text.push_str(part);
            }
        }
        if text.starts_with('.') || text.starts_with('\'') {
            text.insert_str(0, "\\&");
        }
        if let Some(item) = text.strip_prefix("- ") {
            out.push_str(&format!(".IP \\(bu 2\n{item}\n"));
        } else {
            out.push_str(&text);
            out.push('\n');
        }
    }
    out
}

/// A struct's declaration without its fields' comments, for the synopsis; and the fields
/// with their comments, for the description.
fn split_struct(code: &str) -> (String, Vec<(String, Vec<String>)>) {
    let mut bare = String::new();
    let mut fields = Vec::new();
    let mut doc = Vec::new();
    let mut in_doc = false;
    for l in code.lines() {
        let t = l.trim();
        if t == "/*" {
            in_doc = true;
            doc.clear();
        } else if t == "*/" {
            in_doc = false;
        } else if in_doc {
            doc.push(t.to_owned());
        } else {
            bare.push_str(l);
            bare.push('\n');
            if !doc.is_empty() {
                fields.push((t.to_owned(), std::mem::take(&mut doc)));
            }
        }
    }
    (bare, fields)
}

/// Lines of C as a roff no-fill block.
fn nofill(code: &str) -> String {
    let code = code.trim_end().replace('\\', "\\e");
    let code: Vec<String> = code
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_owned()
            }
        })
        .collect();
    format!(".nf\n{}\n.fi\n", code.join("\n"))
}

fn page(f: &Family, items: &BTreeMap<String, Item>, conventions: &str, version: &str) -> String {
    let item = |name: &str| {
        items
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not declared in include/tempora.h"))
    };
    let mut names: Vec<&str> = f.calls.to_vec();
    if f.page == "tempora" {
        names.insert(0, "tempora");
    }
    let mut s = format!(
        ".\\\" Made from include/tempora.h by tempora-capi/tests/man.rs: do not edit by hand.\n\
         .\\\" names: {}\n\
         .TH {} 3 \"\" \"tempora {version}\" \"tempora C ABI\"\n\
         .SH NAME\n{} \\- {}\n.SH SYNOPSIS\n.nf\n.B #include <tempora.h>\n.fi\n.PP\n\
         Link with \\fB$(pkg-config \\-\\-cflags \\-\\-libs tempora)\\fR (\\fB\\-ltempora\\fR).\n",
        f.calls.join(" "),
        f.page.to_uppercase(),
        names.join(", "),
        f.about
    );
    for t in f.types {
        s.push_str(".PP\n");
        s.push_str(&nofill(&split_struct(&item(t).code).0));
    }
    for c in f.calls {
        s.push_str(".PP\n");
        s.push_str(&nofill(&item(c).code));
    }
    s.push_str(".SH DESCRIPTION\n");
    if f.page == "tempora" {
        s.push_str(
            "tempora serves POSIX's interval timers (\\fBtimer_create\\fR(2) and its calls) \
             from user space: a timer service (\\fBtempora_new\\fR(3)) holds timers of owners, \
             each an ID namespace with its event queue, as a process is to the kernel's \
             timers. \\fB<tempora_posix.h>\\fR maps the POSIX names onto the process-wide \
             owner.\n",
        );
    }
    for t in f.types {
        let it = item(t);
        s.push_str(&format!(".SS {t}\n"));
        s.push_str(&roff(&it.doc));
        for (field, doc) in split_struct(&it.code).1 {
            s.push_str(&format!(".TP\n.B {}\n", field.replace('\\', "\\e")));
            s.push_str(&roff(&doc));
        }
    }
    for c in f.calls {
        s.push_str(&format!(".SS {c}()\n"));
        s.push_str(&roff(&item(c).doc));
    }
    let conv: Vec<String> = conventions.lines().map(str::to_owned).collect();
    if f.page == "tempora" {
        s.push_str(".SH CONVENTIONS\n");
        s.push_str(&roff(&conv[1..]));
    } else if f.page == "tempora_timer_settime" {
        // The one sentence on signal safety, from where the header has it.
        let signals: Vec<String> = conv
            .iter()
            .skip_while(|l| !l.starts_with("- Signals:"))
            .take_while(|l| l.starts_with("- Signals:") || l.starts_with("  "))
            .map(|l| l.trim_start_matches("- Signals: ").to_owned())
            .collect();
        assert!(
            !signals.is_empty(),
            "conventions.md has a `- Signals:` item"
        );
        s.push_str(".SH ASYNC-SIGNAL SAFETY\n");
        s.push_str(&roff(&signals));
    }
    s.push_str(".SH SEE ALSO\n");
    let others: Vec<String> = FAMILIES
        .iter()
        .filter(|o| o.page != f.page)
        .map(|o| format!(".BR {} (3)", o.page))
        .collect();
    s.push_str(&others.join(",\n"));
    s.push_str(",\n.BR timer_create (2)\n");
    s
}

#[test]
fn man_pages_are_current_and_cover_every_call() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/tempora.h")).expect("tempora.h");
    let conventions =
        std::fs::read_to_string(dir.join("src/conventions.md")).expect("conventions.md");
    let items = items(&header);

    let calls: Vec<&String> = items
        .iter()
        .filter(|(_, i)| !i.code.starts_with("typedef"))
        .map(|(name, _)| name)
        .collect();
    let placed: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.calls.iter().copied())
        .collect();
    for c in &calls {
        assert_eq!(
            placed.iter().filter(|p| **p == c.as_str()).count(),
            1,
            "{c} is on no man page, or on two: give it one family in tests/man.rs"
        );
    }
    assert_eq!(
        calls.len(),
        placed.len(),
        "a family names a call the header lacks"
    );

    let bless = std::env::var_os("TEMPORA_BLESS").is_some();
    let version = env!("CARGO_PKG_VERSION");
    let mut stale = Vec::new();
    for f in &FAMILIES {
        let made = page(f, &items, &conventions, version);
        let path = dir.join("man").join(format!("{}.3", f.page));
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &made).unwrap();
        } else if std::fs::read_to_string(&path).unwrap_or_default() != made {
            stale.push(path.display().to_string());
        }
    }
    let expected: Vec<String> = FAMILIES.iter().map(|f| format!("{}.3", f.page)).collect();
    let mut present: Vec<String> = std::fs::read_dir(dir.join("man"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    present.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(
        present, expected_sorted,
        "man/ holds exactly the families' pages"
    );
    assert!(
        stale.is_empty(),
        "{stale:?} differ from what include/tempora.h makes: run \
         `TEMPORA_BLESS=1 cargo test -p tempora-capi --test man` and commit the pages"
    );
}
