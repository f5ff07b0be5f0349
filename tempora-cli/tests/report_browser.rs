//! The HTML report as a person sees it: `tempora bench report` renders a small fixed run
//! (`fixtures/small-run.jsonl`), and a real headless Chromium loads the page, which must load
//! without console errors or network requests, with the verdict and the seed suite's tables, and
//! with a non-empty drawing in every plot. The screenshot lands in
//! `report-browser/report-test.png` under the target directory's `tmp` for a person to look at.
//!
//! Chromium comes from the distribution (`.ci/browser.sh` installs Debian's `chromium`). Without
//! it the test says so and passes, unless `TEMPORA_REQUIRE_BROWSER=1` (CI sets it), where a
//! missing browser fails the test.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let paths = std::env::var_os("PATH")?;
    let dirs: Vec<PathBuf> = std::env::split_paths(&paths).collect();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture run rendered once, into a fresh directory, for every test of this file (tests
/// run in parallel: each rendering its own would delete the page another is reading); the
/// page's path.
fn render() -> PathBuf {
    static PAGE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PAGE.get_or_init(render_once).clone()
}

fn render_once() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["bench", "report"])
        .arg(fixture("small-run.jsonl"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.join("report.html");
    assert!(page.is_file());
    page
}

#[test]
fn the_page_is_self_contained_and_names_the_machine() {
    let page = std::fs::read_to_string(render()).unwrap();
    for needle in ["AMD EPYC", "32768K", "RLIMIT_SIGPENDING", "96365", "quick"] {
        assert!(page.contains(needle), "the page lacks {needle}");
    }
    for outside in ["http://", "https://", "<script", "@import", "url("] {
        assert!(
            !page
                .replace("http://www.w3.org/2000/svg", "")
                .contains(outside),
            "the page refers outside itself ({outside})"
        );
    }
    // The run's lines are in the page, escaped.
    assert!(page.contains("&quot;suite&quot;:&quot;seed&quot;"));
}

/// What the page reports about itself once loaded.
const INSPECT: &str = r#"(() => {
  const figs = [...document.querySelectorAll('figure.plot')];
  const plots = figs.map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const size = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
    const w = svg ? svg.getAttribute('width') : '0';
    // Data marks: the points of line plots, the bars of bar plots (not the background).
    const points = svg ? [...svg.querySelectorAll('circle')].filter(size).length : 0;
    const bars = svg ? [...svg.querySelectorAll('rect')]
      .filter(r => r.getAttribute('width') !== w && size(r)).length : 0;
    return {id: f.dataset.case, series: +f.dataset.series, width: box.width, height: box.height,
            points, bars};
  });
  return JSON.stringify({
    title: document.title,
    plots,
    verdictRows: document.querySelectorAll('tr.met, tr.notmet, tr.na').length,
    seedTables: document.querySelectorAll('#seed ~ h3').length,
    resources: performance.getEntriesByType('resource').map(e => e.name),
    jsonl: (document.getElementById('results-jsonl') || {textContent: ''}).textContent
      .trim().split('\n').filter(l => l).length,
  });
})()"#;

#[test]
fn chromium_renders_every_plot_without_console_errors() {
    let Some(browser_path) = chromium() else {
        let msg = "chromium not found (install Debian's `chromium`: .ci/browser.sh); \
                   the report was not rendered in a browser";
        if std::env::var("TEMPORA_REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return;
    };
    let page = render();
    let profile = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let args: Vec<&OsStr> = [
        "--disable-quic",
        "--disable-component-update",
        "--no-default-browser-check",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let browser = Browser::new(
        LaunchOptions::default_builder()
            .path(Some(browser_path))
            .headless(true)
            .sandbox(false)
            .window_size(Some((1320, 1000)))
            .user_data_dir(Some(profile))
            .args(args)
            .idle_browser_timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
    )
    .expect("start chromium");
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = errors.clone();
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let msg = match event {
            Event::RuntimeExceptionThrown(e) => Some(format!("exception: {:?}", e.params)),
            Event::RuntimeConsoleAPICalled(e)
                if format!("{:?}", e.params.Type)
                    .to_lowercase()
                    .contains("error") =>
            {
                Some(format!("console: {:?}", e.params.args))
            }
            Event::LogEntryAdded(e)
                if format!("{:?}", e.params.entry.level)
                    .to_lowercase()
                    .contains("error") =>
            {
                Some(format!("log: {}", e.params.entry.text))
            }
            _ => None,
        };
        if let Some(m) = msg {
            seen.lock().unwrap().push(m);
        }
    }))
    .unwrap();
    tab.enable_runtime().unwrap();
    tab.enable_log().unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    let report = tab.evaluate(INSPECT, false).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(report.value.unwrap().as_str().unwrap()).unwrap();
    // A screenshot of the whole page, for a person to look at.
    let height = tab
        .evaluate("document.documentElement.scrollHeight", false)
        .unwrap()
        .value
        .and_then(|v| v.as_f64())
        .unwrap_or(1000.0);
    // The window made as tall as the page, so that the screenshot holds all of it.
    tab.set_bounds(headless_chrome::types::Bounds::Normal {
        left: Some(0),
        top: Some(0),
        width: Some(1320.0),
        height: Some(height + 100.0),
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let shot = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser/report-test.png");
    std::fs::create_dir_all(png.parent().unwrap()).unwrap();
    std::fs::write(&png, &shot).unwrap();
    eprintln!("screenshot: {}", png.display());
    assert!(
        shot.len() > 10_000,
        "a blank screenshot ({} bytes)",
        shot.len()
    );

    let errors = errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    assert_eq!(report["title"], "tempora bench report");
    assert_eq!(
        report["resources"].as_array().unwrap().len(),
        0,
        "the page loaded something: {}",
        report["resources"]
    );
    let lines = std::fs::read_to_string(fixture("small-run.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(report["jsonl"], lines, "the run's lines are in the page");
    assert!(report["verdictRows"].as_u64().unwrap() >= 20, "{report}");
    assert!(report["seedTables"].as_u64().unwrap() >= 4, "{report}");
    let plots = report["plots"].as_array().unwrap();
    assert!(plots.len() >= 12, "only {} plots: {report}", plots.len());
    for p in plots {
        let marks = p["points"].as_u64().unwrap() + p["bars"].as_u64().unwrap();
        assert!(
            p["width"].as_f64().unwrap() > 100.0 && p["height"].as_f64().unwrap() > 100.0,
            "plot not laid out: {p}"
        );
        assert!(
            p["series"].as_u64().unwrap() > 0 && marks >= p["series"].as_u64().unwrap(),
            "plot without its drawing: {p}"
        );
    }
}
