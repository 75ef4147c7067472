//! A server's resident memory and CPU time, read from /proc (Linux only).

use std::process::Command;
use std::sync::OnceLock;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// `VmRSS` of /proc/<pid>/status.
    pub rss_kib: u64,
    /// utime + stime of /proc/<pid>/stat, in microseconds.
    pub cpu_us: u64,
}

pub fn sample(pid: u32) -> std::io::Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let invalid = |what: &str| std::io::Error::other(format!("/proc/{pid}: cannot read {what}"));
    let rss_kib = parse_vm_rss_kib(&status).ok_or_else(|| invalid("VmRSS"))?;
    let ticks = parse_cpu_ticks(&stat).ok_or_else(|| invalid("utime/stime"))?;
    Ok(Sample {
        rss_kib,
        cpu_us: ticks.saturating_mul(1_000_000) / clock_ticks_per_second(),
    })
}

/// `VmRSS:     1234 kB` → 1234.
fn parse_vm_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime (fields 14 and 15 of proc(5)), counted after the `)` that
/// ends the command name, which may itself hold spaces and parentheses.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // The first field after the name is field 3 (state).
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `sysconf(_SC_CLK_TCK)` without `unsafe`: asked of `getconf CLK_TCK` once.
/// Assumes 100 (the value on every mainstream Linux build) when `getconf` is
/// missing or answers nonsense.
pub fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .filter(|&ticks| ticks > 0)
            .unwrap_or(100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rss_and_cpu_ticks() {
        let status = "Name:\tagentwire\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kib(status), Some(1234));
        let stat =
            "4242 (odd) name) S 1 4242 4242 0 -1 4194560 300 0 0 0 17 5 0 0 20 0 3 0 100 1000 200";
        assert_eq!(parse_cpu_ticks(stat), Some(22));
    }

    #[test]
    fn samples_this_process() {
        let sample = sample(std::process::id()).unwrap();
        assert!(sample.rss_kib > 0);
        assert!(clock_ticks_per_second() > 0);
    }
}
