//! How busy the machine's CPUs were while a repetition's flows ran, from
//! `/proc/stat`: the endpoints are real processes, and when the CPUs are
//! short they slow a QUIC flow (encryption, ACKs and pacing all in user
//! space) far more than the kernel's TCP, which a shared bottleneck then
//! turns into a different share (docs/coexistence.md: in the one-CPU
//! user-mode Linux guest at 20 Mbit/s the CPU was 93-94% busy and QUIC's
//! share of a link shared with Linux TCP fell by 25 points). So each
//! repetition records the share and `cclab run` warns above
//! [`BUSY_WARN`].

/// Busy share from which a run warns that its endpoints may have been
/// short of CPU (the guest runs that agreed with the host were at 73% and
/// 84%, those that did not at 93-94%).
pub const BUSY_WARN: f64 = 0.9;

/// The machine's CPU time so far, in clock ticks, summed over its CPUs:
/// busy (user, nice, system, irq, softirq, steal) and idle (idle, iowait).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuTimes {
    busy: u64,
    idle: u64,
}

impl CpuTimes {
    /// Now, or `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// From the text of `/proc/stat` (its first, `cpu`, line).
    pub(crate) fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().next()?;
        let mut it = line.split_whitespace();
        if it.next()? != "cpu" {
            return None;
        }
        // user nice system idle iowait irq softirq steal (guest and
        // guest_nice are already inside user and nice).
        let v: Vec<u64> = it.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 4 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Some(CpuTimes {
            busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
            idle: at(3) + at(4),
        })
    }

    /// The share of the CPUs' time that was busy from `self` to `later`;
    /// `None` if no time passed.
    pub fn busy_share(&self, later: &CpuTimes) -> Option<f64> {
        let busy = later.busy.checked_sub(self.busy)?;
        let idle = later.idle.checked_sub(self.idle)?;
        let total = busy + idle;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_share_from_two_readings() {
        let a = CpuTimes::parse("cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                busy: 160,
                idle: 1020
            }
        );
        // 90 busy ticks (user 60, system 20, softirq 10) and 10 idle.
        let b = CpuTimes::parse("cpu  160 5 70 1008 22 3 12 0 0 0\n").unwrap();
        assert!((a.busy_share(&b).unwrap() - 0.9).abs() < 1e-12);
        // No time passed, or the counters went backwards: no share.
        assert_eq!(a.busy_share(&a), None);
        assert_eq!(b.busy_share(&a), None);
    }

    #[test]
    fn old_kernels_and_junk() {
        // Four fields (Linux 2.4) are enough.
        let a = CpuTimes::parse("cpu 1 2 3 4").unwrap();
        assert_eq!(a, CpuTimes { busy: 6, idle: 4 });
        assert_eq!(CpuTimes::parse("cpu 1 2 3"), None);
        assert_eq!(CpuTimes::parse("intr 1 2 3 4"), None);
        assert_eq!(CpuTimes::parse("cpu 1 x 3 4"), None);
        assert_eq!(CpuTimes::parse(""), None);
    }

    #[test]
    fn this_machine_has_a_reading() {
        if std::path::Path::new("/proc/stat").exists() {
            assert!(CpuTimes::now().is_some());
        }
    }
}
