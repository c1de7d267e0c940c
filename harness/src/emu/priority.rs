//! The emulator thread's CPU scheduling. The link is a model of hardware,
//! which never waits for a host's CPU; an ordinary thread can wait a whole
//! scheduler slice (milliseconds) when the endpoints and anything else on
//! the machine are runnable at once, and every packet due meanwhile leaves
//! late. `CCLAB_EMU_PRIORITY=fifo` asks the kernel for a real-time
//! priority (`SCHED_FIFO`) above every ordinary process, so the link keeps
//! its times whatever the host does.
//!
//! It is not the default. Measured at 1 Gbit/s (NewReno, 10 ms, 1 BDP) and
//! at 100 Mbit/s beside two busy processes (BBRv2), it cut the hand-offs'
//! 99th percentile lateness from 1.4 to 4.2 ms to about 0.1 ms, but the
//! endpoints, which then wait for the link's thread instead, lost about 2
//! points of utilization (docs/endpoint-cost.md): on a machine short of
//! CPU one of the two is late either way, and which it should be is the
//! experimenter's choice. Every emu repetition records what its thread got
//! (`emu_scheduling`).
//!
//! The thread sleeps between events (it spins at most 20 µs before one),
//! so it takes no more CPU at this priority than without it; the kernel's
//! real-time throttling (95% of each second by default) bounds it anyway.
//! Where the kernel refuses (no `CAP_SYS_NICE`, a container without
//! real-time budget), the thread runs as before and the run records why.

use std::fmt;

/// How the emulator thread is scheduled (`CCLAB_EMU_PRIORITY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// The kernel's ordinary policy, as any process.
    Normal,
    /// `SCHED_FIFO` at this priority (1 to 99).
    Fifo(u8),
}

/// The priority unless `CCLAB_EMU_PRIORITY` asks for another.
pub const DEFAULT_PRIORITY: Priority = Priority::Normal;

/// What `fifo` alone asks for: low among real-time priorities (kernel
/// threads that must run first use 50 and more), above every ordinary
/// process.
pub const FIFO_PRIORITY: u8 = 10;

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Priority::Normal => write!(f, "normal"),
            Priority::Fifo(p) => write!(f, "fifo:{p}"),
        }
    }
}

impl Priority {
    /// Parses `normal`, `fifo` (the default's priority) or `fifo:N`.
    pub fn parse(s: &str) -> Result<Priority, String> {
        let bad = || {
            format!(
                "CCLAB_EMU_PRIORITY={s}: expected normal (the default), fifo (fifo:{FIFO_PRIORITY}) or fifo:N with N from 1 to 99"
            )
        };
        match s.trim() {
            "normal" => Ok(Priority::Normal),
            "fifo" => Ok(Priority::Fifo(FIFO_PRIORITY)),
            t => {
                let n = t.strip_prefix("fifo:").ok_or_else(bad)?;
                match n.parse::<u8>() {
                    Ok(p) if (1..=99).contains(&p) => Ok(Priority::Fifo(p)),
                    _ => Err(bad()),
                }
            }
        }
    }

    /// What `CCLAB_EMU_PRIORITY` asks for, else [`DEFAULT_PRIORITY`].
    pub fn from_env() -> Result<Priority, String> {
        match std::env::var("CCLAB_EMU_PRIORITY") {
            Err(_) => Ok(DEFAULT_PRIORITY),
            Ok(v) => Priority::parse(&v),
        }
    }

    /// Applies this priority to the calling thread and says what it got:
    /// `fifo:10`, `normal`, or `normal (fifo:10 refused: ...)`.
    pub fn apply(self) -> String {
        let Priority::Fifo(p) = self else {
            return self.to_string();
        };
        let param = libc::sched_param {
            sched_priority: i32::from(p),
        };
        // SAFETY: pid 0 is the calling thread; `param` lives across the call.
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        if r == 0 {
            self.to_string()
        } else {
            format!(
                "normal ({self} refused: {})",
                std::io::Error::last_os_error()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints_and_names_what_is_wrong() {
        for p in [Priority::Normal, Priority::Fifo(1), Priority::Fifo(99)] {
            assert_eq!(Priority::parse(&p.to_string()), Ok(p));
        }
        assert_eq!(Priority::parse("fifo"), Ok(Priority::Fifo(FIFO_PRIORITY)));
        for bad in ["", "rr", "fifo:0", "fifo:100", "fifo:x", "FIFO"] {
            let e = Priority::parse(bad).unwrap_err();
            assert!(
                e.contains("expected normal (the default), fifo"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_thread_gets_what_it_asks_for_or_says_why_not() {
        let got = std::thread::spawn(|| Priority::Fifo(1).apply())
            .join()
            .unwrap();
        // Root (CI, this project's machines) gets it; elsewhere the refusal
        // is named.
        assert!(
            got == "fifo:1" || got.starts_with("normal (fifo:1 refused: "),
            "{got}"
        );
        assert_eq!(Priority::Normal.apply(), "normal");
    }
}
