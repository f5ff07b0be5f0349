//! The machine a run measured on, recorded with its results: absolute figures move several
//! times between machines (and a large L3 can change which structure wins), so a figure is only
//! read beside the machine it came from, and ratios are compared within one run.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What `tempora bench` records about the machine and the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cores: usize,
    /// The last-level (L3) cache, as the kernel reports it (`32768K`), or `unknown`.
    pub l3: String,
    pub kernel: String,
    /// The per-user limit that caps the kernel's POSIX timers, or `None` if unknown.
    pub rlimit_sigpending: Option<u64>,
    /// tempora's git commit (with `-dirty` for uncommitted changes), or `unknown`.
    pub commit: String,
    /// `quick`, `default` or `full`.
    pub mode: String,
    /// UTC start of the run, `YYYY-MM-DD hh:mm:ss`.
    pub started: String,
    /// 1-minute load average at the start and at the end of the run: other work on the machine.
    pub load_start: f64,
    #[serde(default)]
    pub load_end: f64,
    /// The run's wall time.
    #[serde(default)]
    pub seconds: f64,
}

impl Machine {
    /// Reads the machine now.
    pub fn read(mode: &str) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let l3 = (0..8)
            .find_map(|i| {
                let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
                let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
                (level.trim() == "3")
                    .then(|| std::fs::read_to_string(format!("{dir}/size")).ok())
                    .flatten()
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            l3,
            kernel,
            rlimit_sigpending: tempora_kernel::rlimit_sigpending(),
            commit: git_commit(Path::new(env!("CARGO_MANIFEST_DIR"))),
            mode: mode.to_string(),
            started: utc_now(),
            load_start: load_average(),
            load_end: 0.0,
            seconds: 0.0,
        }
    }

    /// Records the end of the run.
    pub fn finish(&mut self, seconds: f64) {
        self.load_end = load_average();
        self.seconds = seconds;
    }

    /// Two lines for a person: the machine, then the run.
    pub fn describe(&self) -> String {
        let limit = self
            .rlimit_sigpending
            .map_or_else(|| "unknown".into(), |l| l.to_string());
        format!(
            "machine: {}, {} CPUs, L3 {}, Linux {}, RLIMIT_SIGPENDING {limit}\n\
             run: tempora {}, {} mode, started {} UTC, {:.0} s, load average {:.2} -> {:.2}",
            self.cpu,
            self.cores,
            self.l3,
            self.kernel,
            self.commit,
            self.mode,
            self.started,
            self.seconds,
            self.load_start,
            self.load_end,
        )
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The commit checked out at `dir`, `-dirty` if the tree has changes; `unknown` without git.
fn git_commit(dir: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".into(),
    }
}

/// Now, UTC, as `YYYY-MM-DD hh:mm:ss`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }
}
