//! The machine a run measured on, recorded with its results: absolute figures move several
//! times between machines (and a large L3 can change which structure wins), so a figure is only
//! read beside the machine it came from, and ratios are compared within one run.

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
    /// The git commit the binary was built from (with `-dirty` for uncommitted changes to
    /// tracked files), or `unknown`.
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
            commit: env!("TEMPORA_BENCH_COMMIT").to_string(),
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

/// Now, UTC, as `YYYY-MM-DD hh:mm:ss`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs as i64)
}

/// `secs` after the Unix epoch, UTC, as `YYYY-MM-DD hh:mm:ss`.
fn utc(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_become_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(19_723 * 86_400), "2024-01-01 00:00:00");
        assert_eq!(utc(19_782 * 86_400 + 3_723), "2024-02-29 01:02:03");
    }
}
